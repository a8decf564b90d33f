//! A fake GitHub REST API, served in-process on loopback, with realistic recorded-shape JSON
//! (nested users and labels, nulls, the `pull_request` key on issue items), Link pagination,
//! ETags and 304s, X-RateLimit-* headers, and injectable faults (403 without headers, 429
//! with Retry-After, remaining 0 with a reset time, 502).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The fake caps page sizes at this (GitHub may return fewer than per_page), so a few dozen
/// issues make several pages.
pub const PAGE_SIZE: usize = 10;

/// A fault served instead of the next answer.
#[derive(Debug, Clone)]
pub enum Fault {
    /// 403 with no rate-limit headers (a secondary limit as GitHub sometimes sends it).
    Forbidden,
    /// 429 with `Retry-After: secs`.
    TooMany { retry_after: u64 },
    /// 403 with `X-RateLimit-Remaining: 0` and a reset `secs` from now.
    Exhausted { reset_in: i64 },
    /// 502 Bad Gateway.
    BadGateway,
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Logged {
    pub path: String,
    pub conditional: bool,
    pub status: u16,
    /// The request's `Authorization` header, as sent.
    pub authorization: Option<String>,
}

/// One fake repository's content.
#[derive(Debug, Clone, Default)]
pub struct FakeRepo {
    pub repo: Value,
    pub issues: Vec<Value>,
    pub comments: BTreeMap<i64, Vec<Value>>,
    pub pulls: BTreeMap<i64, Value>,
    pub reviews: BTreeMap<i64, Vec<Value>>,
    pub review_comments: BTreeMap<i64, Vec<Value>>,
    pub releases: Vec<Value>,
}

/// The fake's state, shared with the test.
#[derive(Debug, Default)]
pub struct FakeState {
    pub repos: BTreeMap<String, FakeRepo>,
    pub faults: VecDeque<Fault>,
    pub log: Vec<Logged>,
    pub base: String,
    /// repository_dispatch requests received: (repo, body, authorization header present).
    pub dispatches: Vec<(String, Value, bool)>,
}

/// A running fake GitHub API.
#[derive(Debug, Clone)]
pub struct FakeGitHub {
    pub state: Arc<Mutex<FakeState>>,
    pub base: String,
}

fn etag_of(body: &str) -> String {
    format!("\"{}\"", &hex::encode(Sha256::digest(body.as_bytes()))[..20])
}

fn respond(
    st: &Arc<Mutex<FakeState>>,
    headers: &HeaderMap,
    path: &str,
    status_ok: Result<(Value, Option<String>), StatusCode>,
) -> Response {
    let mut s = st.lock().expect("fake state");
    let conditional = headers.contains_key("if-none-match");
    let authorization =
        headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    let reset = (Utc::now() + Duration::hours(1)).timestamp().to_string();
    if let Some(fault) = s.faults.pop_front() {
        let mut h = HeaderMap::new();
        let status = match fault {
            Fault::Forbidden => StatusCode::FORBIDDEN,
            Fault::TooMany { retry_after } => {
                h.insert(
                    "retry-after",
                    HeaderValue::from_str(&retry_after.to_string()).expect("digits"),
                );
                StatusCode::TOO_MANY_REQUESTS
            }
            Fault::Exhausted { reset_in } => {
                h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
                h.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
                let at = (Utc::now() + Duration::seconds(reset_in)).timestamp().to_string();
                h.insert("x-ratelimit-reset", HeaderValue::from_str(&at).expect("digits"));
                StatusCode::FORBIDDEN
            }
            Fault::BadGateway => StatusCode::BAD_GATEWAY,
        };
        s.log.push(Logged {
            path: path.to_string(),
            conditional,
            status: status.as_u16(),
            authorization: authorization.clone(),
        });
        let body = json!({"message": "You have exceeded a secondary rate limit", "documentation_url": "https://docs.github.com/rest"});
        return (status, h, body.to_string()).into_response();
    }
    let (value, next) = match status_ok {
        Ok(v) => v,
        Err(code) => {
            s.log.push(Logged {
                path: path.to_string(),
                conditional,
                status: code.as_u16(),
                authorization: authorization.clone(),
            });
            return (code, json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}).to_string()).into_response();
        }
    };
    let body = value.to_string();
    let etag = etag_of(&body);
    let mut h = HeaderMap::new();
    h.insert("x-ratelimit-limit", HeaderValue::from_static("5000"));
    h.insert("x-ratelimit-remaining", HeaderValue::from_static("4990"));
    h.insert("x-ratelimit-reset", HeaderValue::from_str(&reset).expect("digits"));
    h.insert("etag", HeaderValue::from_str(&etag).expect("ascii"));
    h.insert("content-type", HeaderValue::from_static("application/json; charset=utf-8"));
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        s.log.push(Logged {
            path: path.to_string(),
            conditional,
            status: 304,
            authorization: authorization.clone(),
        });
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    if let Some(next) = next {
        let link = format!("<{}{next}>; rel=\"next\"", s.base);
        h.insert("link", HeaderValue::from_str(&link).expect("ascii"));
    }
    s.log.push(Logged {
        path: path.to_string(),
        conditional,
        status: 200,
        authorization: authorization.clone(),
    });
    (StatusCode::OK, h, body).into_response()
}

fn page<T: Clone>(
    items: &[T],
    q: &BTreeMap<String, String>,
    path: &str,
) -> (Vec<T>, Option<String>) {
    let per =
        q.get("per_page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(30).clamp(1, PAGE_SIZE);
    let page = q.get("page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(1).max(1);
    let chunk: Vec<T> = items.iter().skip((page - 1) * per).take(per).cloned().collect();
    let next = (page * per < items.len()).then(|| {
        let mut q2 = q.clone();
        q2.insert("page".into(), (page + 1).to_string());
        let qs: Vec<String> = q2.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{path}?{}", qs.join("&"))
    });
    (chunk, next)
}

type Q = Query<BTreeMap<String, String>>;
type S = State<Arc<Mutex<FakeState>>>;

fn with_repo<T>(
    st: &Arc<Mutex<FakeState>>,
    owner: &str,
    name: &str,
    f: impl FnOnce(&FakeRepo) -> Option<T>,
) -> Option<T> {
    let s = st.lock().expect("fake state");
    s.repos.get(&format!("{owner}/{name}")).and_then(f)
}

async fn repo(State(st): S, Path((o, n)): Path<(String, String)>, h: HeaderMap) -> Response {
    let r = with_repo(&st, &o, &n, |r| Some(r.repo.clone()))
        .map(|v| (v, None))
        .ok_or(StatusCode::NOT_FOUND);
    respond(&st, &h, &format!("/repos/{o}/{n}"), r)
}

async fn issues(
    State(st): S,
    Path((o, n)): Path<(String, String)>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let path = format!("/repos/{o}/{n}/issues");
    let since: Option<DateTime<Utc>> = q
        .get("since")
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    let r = with_repo(&st, &o, &n, |r| {
        let mut items: Vec<Value> = r
            .issues
            .iter()
            .filter(|i| {
                since.is_none_or(|s| {
                    DateTime::parse_from_rfc3339(i["updated_at"].as_str().unwrap_or(""))
                        .is_ok_and(|t| t >= s)
                })
            })
            .cloned()
            .collect();
        items.sort_by(|a, b| a["updated_at"].as_str().cmp(&b["updated_at"].as_str()));
        if q.get("direction").map(String::as_str) != Some("asc") {
            items.reverse();
        }
        let (chunk, next) = page(&items, &q, &path);
        Some((Value::Array(chunk), next))
    })
    .ok_or(StatusCode::NOT_FOUND);
    respond(&st, &h, &path, r)
}

async fn issue(
    State(st): S,
    Path((o, n, num)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    let r =
        with_repo(&st, &o, &n, |r| r.issues.iter().find(|i| i["number"] == json!(num)).cloned())
            .map(|v| (v, None))
            .ok_or(StatusCode::NOT_FOUND);
    respond(&st, &h, &format!("/repos/{o}/{n}/issues/{num}"), r)
}

async fn list_of(
    st: Arc<Mutex<FakeState>>,
    h: HeaderMap,
    q: BTreeMap<String, String>,
    path: String,
    o: String,
    n: String,
    pick: impl FnOnce(&FakeRepo) -> Option<Vec<Value>>,
) -> Response {
    let r = with_repo(&st, &o, &n, |r| {
        let items = pick(r).unwrap_or_default();
        let (chunk, next) = page(&items, &q, &path);
        Some((Value::Array(chunk), next))
    })
    .ok_or(StatusCode::NOT_FOUND);
    respond(&st, &h, &path, r)
}

async fn issue_comments(
    State(st): S,
    Path((o, n, num)): Path<(String, String, i64)>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let path = format!("/repos/{o}/{n}/issues/{num}/comments");
    list_of(st, h, q, path, o, n, |r| r.comments.get(&num).cloned()).await
}

async fn pull(
    State(st): S,
    Path((o, n, num)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    let r = with_repo(&st, &o, &n, |r| r.pulls.get(&num).cloned())
        .map(|v| (v, None))
        .ok_or(StatusCode::NOT_FOUND);
    respond(&st, &h, &format!("/repos/{o}/{n}/pulls/{num}"), r)
}

async fn reviews(
    State(st): S,
    Path((o, n, num)): Path<(String, String, i64)>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let path = format!("/repos/{o}/{n}/pulls/{num}/reviews");
    list_of(st, h, q, path, o, n, |r| r.reviews.get(&num).cloned()).await
}

async fn review_comments(
    State(st): S,
    Path((o, n, num)): Path<(String, String, i64)>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let path = format!("/repos/{o}/{n}/pulls/{num}/comments");
    list_of(st, h, q, path, o, n, |r| r.review_comments.get(&num).cloned()).await
}

async fn releases(
    State(st): S,
    Path((o, n)): Path<(String, String)>,
    Query(q): Q,
    h: HeaderMap,
) -> Response {
    let path = format!("/repos/{o}/{n}/releases");
    list_of(st, h, q, path, o, n, |r| Some(r.releases.clone())).await
}

async fn dispatches(
    State(st): S,
    Path((o, n)): Path<(String, String)>,
    h: HeaderMap,
    body: String,
) -> Response {
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let authed = h
        .get("authorization")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.starts_with("Bearer "));
    st.lock().expect("fake state").dispatches.push((format!("{o}/{n}"), v, authed));
    StatusCode::NO_CONTENT.into_response()
}

impl FakeGitHub {
    /// Starts the fake on a free loopback port, on its own thread and runtime.
    pub fn start(repos: BTreeMap<String, FakeRepo>) -> FakeGitHub {
        Self::start_at(repos, "")
    }

    /// Starts the fake serving the API under `prefix` only (`/api/v3`, as GitHub Enterprise
    /// Server does); `base` includes the prefix.
    pub fn start_at(repos: BTreeMap<String, FakeRepo>, prefix: &str) -> FakeGitHub {
        let prefix = prefix.to_string();
        let prefix_for_base = prefix.clone();
        let state = Arc::new(Mutex::new(FakeState { repos, ..FakeState::default() }));
        let (tx, rx) = std::sync::mpsc::channel();
        let st = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let app = Router::new()
                    .route("/repos/{o}/{n}", get(repo))
                    .route("/repos/{o}/{n}/issues", get(issues))
                    .route("/repos/{o}/{n}/issues/{num}", get(issue))
                    .route("/repos/{o}/{n}/issues/{num}/comments", get(issue_comments))
                    .route("/repos/{o}/{n}/pulls/{num}", get(pull))
                    .route("/repos/{o}/{n}/pulls/{num}/reviews", get(reviews))
                    .route("/repos/{o}/{n}/pulls/{num}/comments", get(review_comments))
                    .route("/repos/{o}/{n}/releases", get(releases))
                    .route("/repos/{o}/{n}/dispatches", axum::routing::post(dispatches))
                    .with_state(st);
                let app = if prefix.is_empty() { app } else { Router::new().nest(&prefix, app) };
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
                tx.send(listener.local_addr().expect("addr")).expect("send addr");
                axum::serve(listener, app).await.expect("serve");
            });
        });
        let addr = rx.recv().expect("fake started");
        let base = format!("http://{addr}{}", prefix_for_base);
        state.lock().expect("fake state").base = base.clone();
        FakeGitHub { state, base }
    }

    /// Replaces the repositories the fake serves.
    pub fn set_repos(&self, repos: BTreeMap<String, FakeRepo>) {
        self.state.lock().expect("fake state").repos = repos;
    }

    /// Changes one repository in place (edit an issue, add a comment).
    pub fn edit(&self, repo: &str, f: impl FnOnce(&mut FakeRepo)) {
        let mut s = self.state.lock().expect("fake state");
        f(s.repos.get_mut(repo).expect("a fake repository"));
    }

    /// Queues faults served before the next answers.
    pub fn inject(&self, faults: impl IntoIterator<Item = Fault>) {
        self.state.lock().expect("fake state").faults.extend(faults);
    }

    /// Takes the request log.
    pub fn take_log(&self) -> Vec<Logged> {
        std::mem::take(&mut self.state.lock().expect("fake state").log)
    }
}
