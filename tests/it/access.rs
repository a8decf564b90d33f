//! Who may read what: two callers of disjoint scope over a two-repository snapshot see only
//! their repository in every tool — asked by id, URL, path, entity, cursor or pinned snapshot —
//! in process, over REST and over the Python MCP SDK; tokens-file tokens are revoked without a
//! restart; OAuth access tokens are checked against an issuer the test runs itself.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use hubdex_formats::{RowType, Scope};
use hubdex_server::{AppState, Caller, CallerKind, TokensFile};
use serde_json::{Map, Value, json};

use crate::fixture::{runtime, state};
use crate::github::{Env, env};
use crate::http::request;
use crate::mcp_clients::spawn_http;

const W: &str = "acme/widgets";
const G: &str = "acme/gadgets";

fn caller(name: &str, repos: &[&str], types: &[RowType]) -> Caller {
    let repos: Vec<String> = repos.iter().map(|r| r.to_string()).collect();
    Caller {
        name: name.into(),
        kind: CallerKind::ScopedToken,
        scope: Some(Scope::new(&repos, types).unwrap()),
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

async fn call(st: &Arc<AppState>, c: &Caller, tool: &str, args: Value) -> Result<Value, String> {
    hubdex_server::call_tool_as(st, c, tool, &obj(args)).await.map_err(|e| e.to_string())
}

/// The two-repository snapshot, with a widgets commit that mentions a gadgets issue (an edge
/// across the two scopes).
fn two_repos() -> Env {
    let e = env();
    let w = e.dir.path().join("git/widgets");
    std::fs::write(w.join("firmware.txt"), "see gadgets\n").unwrap();
    for args in [
        &["add", "."][..],
        &["commit", "-q", "-m", "Follow the gadgets firmware\n\nSee acme/gadgets#2."][..],
    ] {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&w)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    e.build().unwrap();
    e
}

/// Every repository an answer's items name (a visible row's own text may mention another
/// repository: that is its content, not a leak).
fn repos_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if (k == "repo") && x.is_string() {
                    out.push(x.as_str().unwrap().to_string());
                }
                repos_in(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| repos_in(x, out)),
        _ => {}
    }
}

fn assert_only(v: &Value, own: &str, what: &str) {
    let mut seen = Vec::new();
    repos_in(v, &mut seen);
    seen.dedup();
    let text: String = v.to_string().chars().take(600).collect();
    assert!(seen.iter().all(|r| r == own), "{what}: names {seen:?}, not only {own}: {text}");
}

#[test]
fn scoped_callers_see_only_their_repository_in_every_tool() {
    let e = two_repos();
    let first = runtime().block_on(async {
        let st = state(&e.store()).await;
        st.current.load().id().to_string()
    });
    // A second snapshot, so the first can be asked for by id (pinned).
    e.build().unwrap();
    runtime().block_on(async {
        let st = state(&e.store()).await;
        let all = Caller::local();
        let a = caller("team-w", &[W], &[]);
        let b = caller("team-g", &["acme/gad*"], &[]);
        // What exists, from the unscoped view.
        let everything = call(&st, &all, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
        let ids_of = |repo: &str| -> Vec<String> {
            everything["results"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["repo"] == json!(repo))
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        };
        let (w_ids, g_ids) = (ids_of(W), ids_of(G));
        assert!(!w_ids.is_empty() && !g_ids.is_empty());

        for (c, own, other, other_ids) in [(&a, W, G, &g_ids), (&b, G, W, &w_ids)] {
            let who = &c.name;
            // index_stats: only the own repository, its rows, no build totals.
            let s = call(&st, c, "index_stats", json!({})).await.unwrap();
            assert_only(&s, own, &format!("{who} index_stats"));
            assert_eq!(s["repos"].as_array().unwrap().len(), 1);
            assert_eq!(s["rows"], s["repos"][0]["rows"], "{who}: rows count the own repository");
            assert_eq!(s["build"], Value::Null, "{who}: build totals count hidden rows");
            // search and scan, also when asking for the other repository by name: the answer is
            // the one a repository the snapshot does not hold gets.
            for q in ["gadgets firmware", "widgets retry", "README"] {
                let r = call(&st, c, "search", json!({"query": q, "top_k": 50})).await.unwrap();
                assert_only(&r, own, &format!("{who} search {q}"));
            }
            let hidden = call(&st, c, "search", json!({"query": "firmware", "repo": other})).await.unwrap();
            let absent = call(&st, c, "search", json!({"query": "firmware", "repo": "acme/nothing"})).await.unwrap();
            assert_eq!(hidden["results"], json!([]));
            assert_eq!(hidden["filters_unmatched"], absent["filters_unmatched"], "{who}");
            assert_eq!(hidden["filters_unmatched"], json!(["repo"]), "{who}");
            let sc = call(&st, c, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
            assert_only(&sc, own, &format!("{who} scan"));
            assert!(sc["count"].as_u64().unwrap() > 0);
            // fetch by the other repository's ids: not found, exactly like an unknown id.
            let mut asked: Vec<String> = other_ids.iter().take(40).cloned().collect();
            asked.push("cmt_doesnotexist".into());
            let f = call(&st, c, "fetch", json!({"ids": asked})).await.unwrap();
            assert_eq!(f["results"], json!([]), "{who}: {f}");
            assert_eq!(f["not_found"], json!(asked), "{who}");
            // read_span of the other repository: the words of a repository that is not there.
            let span = |repo: &str| {
                let c = c.clone();
                let st = st.clone();
                let repo = repo.to_string();
                async move { call(&st, &c, "read_span", json!({"repo": repo, "path": "README.md"})).await }
            };
            let hidden = span(other).await.unwrap_err();
            let absent = span("acme/nothing").await.unwrap_err();
            assert_eq!(hidden.replace(other, "R"), absent.replace("acme/nothing", "R"), "{who}");
            // related by entity, URL and row id of the other repository: unknown, same words.
            let unknown = call(&st, c, "related", json!({"id": "issue/2", "repo": other})).await.unwrap_err();
            let nothing = call(&st, c, "related", json!({"id": "issue/2", "repo": "acme/nothing"})).await.unwrap_err();
            assert_eq!(unknown.replace(other, "R"), nothing.replace("acme/nothing", "R"), "{who}");
            let url = format!("https://github.com/{other}/issues/2");
            assert!(call(&st, c, "related", json!({"id": url})).await.is_err(), "{who}");
            let by_id = call(&st, c, "related", json!({"id": other_ids[0]})).await.unwrap_err();
            assert!(by_id.contains("no row has id"), "{who}: {by_id}");
            // An entity id without repo: only one repository is visible, so it is the own one.
            let r = call(&st, c, "related", json!({"id": "issue/1"})).await;
            if let Ok(r) = r {
                assert_only(&r, own, &format!("{who} related issue/1"));
            }
            // A pinned (older) snapshot is scoped the same way.
            let old = call(&st, c, "scan", json!({"since": "2000-01-01", "limit": 200, "snapshot": first})).await.unwrap();
            assert_eq!(old["snapshot"], json!(first));
            assert_only(&old, own, &format!("{who} pinned scan"));
        }

        // The cross-scope edge: widgets' commit mentions gadgets#2; neither side sees the other.
        let commit = call(&st, &all, "search", json!({"query": "Follow the gadgets firmware", "type": "commit", "repo": W, "top_k": 1})).await.unwrap();
        let commit_id = commit["results"][0]["id"].as_str().unwrap().to_string();
        let full = call(&st, &all, "related", json!({"id": commit_id, "kinds": "mentions"})).await.unwrap();
        assert!(full.to_string().contains(G), "the unscoped view has the edge: {full}");
        let seen_by_w = call(&st, &a, "related", json!({"id": commit_id, "kinds": "mentions"})).await.unwrap();
        assert_only(&seen_by_w, W, "widgets' related");
        assert_eq!(seen_by_w["count"], json!(0), "{seen_by_w}");
        let f = call(&st, &a, "fetch", json!({"ids": [commit_id]})).await.unwrap();
        assert_eq!(f["results"][0]["edges"].get("mentions"), None, "hidden edges are not counted: {f}");
        let seen_by_g = call(&st, &b, "related", json!({"id": "issue/2", "direction": "in", "kinds": "mentions"})).await.unwrap();
        assert_only(&seen_by_g, G, "gadgets' related");

        // A cursor made under one scope is refused under another, and works under its own.
        let page = call(&st, &a, "scan", json!({"since": "2000-01-01", "limit": 1})).await.unwrap();
        let cursor = page["cursor"].as_str().unwrap().to_string();
        let next = call(&st, &a, "scan", json!({"since": "2000-01-01", "limit": 1, "cursor": cursor})).await.unwrap();
        assert_only(&next, W, "the next page");
        for other in [&b, &all] {
            let err = call(&st, other, "scan", json!({"since": "2000-01-01", "limit": 1, "cursor": cursor})).await.unwrap_err();
            assert!(err.starts_with("argument `cursor`: was made by another caller"), "{err}");
        }

        // A types scope: issues only.
        let issues = caller("issues-only", &["acme/*"], &[RowType::Issue]);
        let r = call(&st, &issues, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
        assert!(r["count"].as_u64().unwrap() > 0);
        assert!(r["results"].as_array().unwrap().iter().all(|x| x["type"] == json!("issue")), "{r}");
        let s = call(&st, &issues, "index_stats", json!({})).await.unwrap();
        for repo in s["repos"].as_array().unwrap() {
            let types: Vec<&String> = repo["rows_per_type"].as_object().unwrap().keys().collect();
            assert!(types.iter().all(|t| *t == "issue"), "{s}");
        }
        let f = call(&st, &issues, "fetch", json!({"ids": [commit_id]})).await.unwrap();
        assert_eq!(f["not_found"], json!([commit_id]));
    });
}

/// Adds a token to a tokens file with the CLI; returns the token it printed.
fn add_token(file: &Path, name: &str, repos: &[&str]) -> String {
    let out = Command::new(hubdex_tests::bin("hubdex"))
        .args(["token", "add", name, "--tokens-file"])
        .arg(file)
        .arg("--repos")
        .args(repos)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn rest(port: u16, token: &str, tool: &str, body: Value) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str())];
    let (status, text) = if tool == "stats" {
        request(port, "GET", "/v1/stats", "", &headers)
    } else {
        request(port, "POST", &format!("/v1/{tool}"), &body.to_string(), &headers)
    };
    (status, serde_json::from_str(&text).unwrap_or(json!({"raw": text})))
}

/// Every tool over the Python MCP SDK with a bearer token; one report per call.
fn python_calls(port: u16, token: &str, calls: &Value) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/mcp_calls.py");
    let out = Command::new(hubdex_tests::python())
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token)
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "python client: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

#[test]
fn two_tokens_over_rest_and_the_python_sdk_see_disjoint_repositories_and_a_revoke_needs_no_restart()
{
    let e = two_repos();
    // An older snapshot, pinned: a token reading it by id still sees only its repository.
    let first =
        runtime().block_on(async { state(&e.store()).await.current.load().id().to_string() });
    e.build().unwrap();
    let pin = Command::new(hubdex_tests::bin("hubdex"))
        .args(["--store", e.store().to_str().unwrap(), "pin", &first])
        .output()
        .unwrap();
    assert!(pin.status.success(), "{}", String::from_utf8_lossy(&pin.stderr));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let tw = add_token(&file, "team-w", &[W]);
    let tg = add_token(&file, "team-g", &["acme/gad*"]);
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, "admin-secret-token\n").unwrap();
    let log = dir.path().join("server.log");
    let (_server, port) = spawn_http(
        &["--store", e.store().to_str().unwrap()],
        &["--tokens-file", file.to_str().unwrap(), "--token-file", admin_file.to_str().unwrap()],
        &[("HUBDEX_LOG_FORMAT", "json")],
        Some(std::fs::File::create(&log).unwrap()),
    );
    // No token, a wrong one: 401 on every tool.
    for tool in ["search", "scan", "fetch", "read_span", "related", "stats"] {
        assert_eq!(rest(port, "", tool, json!({})).0, 401, "{tool}");
        assert_eq!(rest(port, "hdx_wrong", tool, json!({})).0, 401, "{tool}");
    }
    // What each token can get by itself: its row ids and a scan cursor, to try with the other.
    let mut ids = std::collections::HashMap::new();
    let mut cursors = std::collections::HashMap::new();
    for (token, own) in [(&tw, W), (&tg, G)] {
        let (status, r) = rest(port, token, "scan", json!({"since": "2000-01-01", "limit": 5}));
        assert_eq!(status, 200, "{r}");
        assert_only(&r, own, "REST scan page");
        let own_ids: Vec<String> = r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect();
        ids.insert(own, own_ids);
        cursors.insert(own, r["cursor"].as_str().unwrap().to_string());
    }
    let probes = |own: &str, other: &str| {
        json!([
            ["index_stats", {}],
            ["search", {"query": "gadgets firmware widgets", "top_k": 50}],
            ["search", {"query": "firmware", "repo": other}],
            ["scan", {"since": "2000-01-01", "limit": 200}],
            ["read_span", {"repo": other, "path": "README.md"}],
            ["related", {"id": format!("https://github.com/{other}/issues/2")}],
            ["related", {"id": "issue/2", "repo": own}],
            ["fetch", {"ids": ids[other]}],
            ["scan", {"since": "2000-01-01", "limit": 5, "cursor": cursors[other]}],
            ["scan", {"since": "2000-01-01", "limit": 200, "snapshot": first}],
            ["related", {"id": ids[other][0]}],
        ])
    };
    for (token, own, other) in [(&tw, W, G), (&tg, G, W)] {
        // REST.
        let (status, s) = rest(port, token, "stats", json!({}));
        assert_eq!(status, 200, "{s}");
        assert_only(&s, own, "REST stats");
        let (status, r) =
            rest(port, token, "search", json!({"query": "gadgets firmware widgets", "top_k": 50}));
        assert_eq!(status, 200);
        assert_only(&r, own, "REST search");
        let (status, r) = rest(port, token, "scan", json!({"since": "2000-01-01", "limit": 200}));
        assert_eq!(status, 200);
        assert_only(&r, own, "REST scan");
        let (status, r) =
            rest(port, token, "read_span", json!({"repo": other, "path": "README.md"}));
        assert_eq!(status, 400, "{r}");
        let (status, r) = rest(port, token, "fetch", json!({"ids": ids[other]}));
        assert_eq!((status, &r["results"], &r["not_found"]), (200, &json!([]), &json!(ids[other])));
        let (status, r) =
            rest(port, token, "scan", json!({"since": "2000-01-01", "cursor": cursors[other]}));
        assert_eq!(status, 400, "another token's cursor: {r}");
        // MCP, Python SDK.
        let reports = python_calls(port, token, &probes(own, other));
        for (i, rep) in reports.iter().enumerate() {
            if rep["is_error"] == json!(false) {
                assert_only(&rep["structured"], own, &format!("MCP call {i}"));
            }
        }
        assert_eq!(reports[0]["structured"]["repos"].as_array().unwrap().len(), 1);
        assert_eq!(reports[2]["structured"]["filters_unmatched"], json!(["repo"]));
        assert_eq!(reports[4]["is_error"], json!(true));
        assert_eq!(reports[5]["is_error"], json!(true));
        assert_eq!(reports[7]["structured"]["not_found"], json!(ids[other]), "fetch by id");
        assert_eq!(reports[7]["structured"]["count"], json!(0));
        assert_eq!(reports[8]["is_error"], json!(true), "another token's cursor");
        assert_eq!(reports[9]["structured"]["snapshot"], json!(first), "the pinned snapshot");
        assert!(reports[9]["structured"]["count"].as_u64().unwrap() > 0);
        assert_eq!(reports[10]["is_error"], json!(true), "related by another's row id");
    }
    // /metrics needs a token that reads everything; it counts calls by token name.
    assert_eq!(
        request(port, "GET", "/metrics", "", &[("Authorization", &format!("Bearer {tw}"))]).0,
        403
    );
    let (status, metrics) =
        request(port, "GET", "/metrics", "", &[("Authorization", "Bearer admin-secret-token")]);
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"caller="team-w""#) && metrics.contains(r#"caller="team-g""#),
        "{metrics}"
    );
    assert!(!metrics.contains(&tw), "never the token");
    // Revoke team-w: its next request is refused; team-g still works. No restart.
    let out = Command::new(hubdex_tests::bin("hubdex"))
        .args(["token", "revoke", "team-w", "--tokens-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rest(port, &tw, "stats", json!({})).0, 401);
    assert_eq!(rest(port, &tg, "stats", json!({})).0, 200);
    // The audit log: one JSON line per call naming the token, never the token or the query.
    let log = std::fs::read_to_string(&log).unwrap();
    let audit: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == json!("hubdex::audit") && v["fields"]["tool"].is_string())
        .collect();
    assert!(
        audit
            .iter()
            .any(|v| v["fields"]["caller"] == json!("team-g")
                && v["fields"]["tool"] == json!("search")),
        "{log}"
    );
    assert!(audit.iter().all(|v| v["fields"]["results"].is_u64()), "{log}");
    assert!(!log.contains(&tw) && !log.contains(&tg), "tokens never reach the log");
    assert!(!log.contains("gadgets firmware widgets"), "no query text without --audit-queries");
}

#[test]
fn the_token_commands_manage_a_tokens_file_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    let token = add_token(&file, "ci", &["acme/*"]);
    assert!(token.starts_with("hdx_") && token.len() > 40, "{token}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&token));
    let loaded = TokensFile::load(&file).unwrap();
    assert_eq!(loaded.token[0].repos, ["acme/*"]);
    let run = |args: &[&str]| {
        let out = Command::new(hubdex_tests::bin("hubdex"))
            .args(args)
            .arg("--tokens-file")
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, out, _) = run(&["token", "list"]);
    assert!(ok && out.starts_with("ci\trepos acme/*\tall types\texpires never"), "{out}");
    for (args, expect) in [
        (&["token", "add", "ci", "--repos", "x/*"][..], "a token named \"ci\" exists"),
        (&["token", "add", "bad name", "--repos", "x/*"][..], "token name \"bad name\""),
        (&["token", "add", "t2", "--repos", "x/["][..], "is not a valid glob"),
        (
            &["token", "add", "t3", "--repos", "x/*", "--types", "issues"][..],
            "unknown row type \"issues\"",
        ),
        (
            &["token", "add", "t4", "--repos", "x/*", "--expires", "someday"][..],
            "expiry \"someday\"",
        ),
        (&["token", "revoke", "nobody"][..], "has no token named \"nobody\""),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(expect) && err.lines().count() == 1, "{args:?}: {err}");
    }
}

/// An OAuth issuer on loopback: its metadata and a JWKS the test can rotate.
struct Issuer {
    url: String,
    jwks: Arc<std::sync::Mutex<Value>>,
    _thread: std::thread::JoinHandle<()>,
}

fn issuer() -> Issuer {
    // Bound here, on a port the OS picks: no other test can take it before the issuer serves.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let jwks = Arc::new(std::sync::Mutex::new(json!({"keys": []})));
    let (meta_url, keys) = (url.clone(), jwks.clone());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let meta = json!({"issuer": meta_url, "jwks_uri": format!("{meta_url}/jwks")});
            let app = axum::Router::new()
                .route(
                    "/.well-known/oauth-authorization-server",
                    axum::routing::get(move || async move { axum::Json(meta) }),
                )
                .route(
                    "/jwks",
                    axum::routing::get(
                        move || async move { axum::Json(keys.lock().unwrap().clone()) },
                    ),
                );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    Issuer { url, jwks, _thread: thread }
}

/// An ES256 key made here from random bytes: (signing key, its public JWK with `kid`).
fn es256_key(kid: &str) -> (jsonwebtoken::EncodingKey, Value) {
    use p256::pkcs8::EncodePrivateKey as _;
    use sha2::Digest as _;
    let seed = sha2::Sha256::digest(format!("{kid} {:?}", std::time::SystemTime::now()).as_bytes());
    let key = p256::ecdsa::SigningKey::from_slice(&seed).unwrap();
    let der = key.to_pkcs8_der().unwrap();
    let enc = jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes());
    let mut jwk =
        jsonwebtoken::jwk::Jwk::from_encoding_key(&enc, jsonwebtoken::Algorithm::ES256).unwrap();
    jwk.common.key_id = Some(kid.into());
    (enc, serde_json::to_value(jwk).unwrap())
}

/// An RFC 9068 access token (`typ: at+jwt`) signed with `key`.
fn jwt(key: &jsonwebtoken::EncodingKey, kid: &str, claims: &Value) -> String {
    jwt_typed(key, kid, claims, Some("at+jwt"))
}

fn jwt_typed(
    key: &jsonwebtoken::EncodingKey,
    kid: &str,
    claims: &Value,
    typ: Option<&str>,
) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    header.typ = typ.map(str::to_string);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

#[test]
fn oauth_access_tokens_are_verified_against_the_issuers_keys() {
    use base64::Engine as _;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let iss = issuer();
    let (k1, jwk1) = es256_key("k1");
    let (k2, jwk2) = es256_key("k2");
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1.clone()]});
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hubdex.toml");
    std::fs::write(
        &config,
        "[[oauth.grant]]\nclaim = \"groups\"\nequals = \"widgets-team\"\nrepos = [\"local/*\"]\n",
    )
    .unwrap();
    let (_server, port) = spawn_http(
        &["--store", crate::fixture::fixture().store.to_str().unwrap()],
        &[
            "--oauth-issuer",
            &iss.url,
            "--oauth-audience",
            "hubdex-test",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        None,
    );
    let now = chrono::Utc::now().timestamp();
    let good = json!({"iss": iss.url, "aud": "hubdex-test", "sub": "ada", "groups": ["widgets-team"], "exp": now + 600, "iat": now});
    let with = |patch: Value| {
        let mut c = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let stats = |token: &str| {
        let auth = format!("Bearer {token}");
        request(port, "GET", "/v1/stats", "", &[("Authorization", auth.as_str())]).0
    };
    // The 401 names the protected resource metadata, which lists RFC 9728's fields only.
    let (status, head, _) = crate::http::request_with_head(port, "POST", "/mcp", "{}", &[]);
    assert_eq!(status, 401);
    let expected = format!(
        "resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp\""
    );
    assert!(
        head.to_ascii_lowercase().contains("www-authenticate: bearer") && head.contains(&expected),
        "{head}"
    );
    let (status, body) = request(port, "GET", "/.well-known/oauth-protected-resource/mcp", "", &[]);
    assert_eq!(status, 200);
    let meta: Value = serde_json::from_str(&body).unwrap();
    const RFC9728: [&str; 15] = [
        "resource",
        "authorization_servers",
        "jwks_uri",
        "scopes_supported",
        "bearer_methods_supported",
        "resource_signing_alg_values_supported",
        "resource_name",
        "resource_documentation",
        "resource_policy_uri",
        "resource_tos_uri",
        "tls_client_certificate_bound_access_tokens",
        "authorization_details_types_supported",
        "dpop_signing_alg_values_supported",
        "dpop_bound_access_tokens_required",
        "signed_metadata",
    ];
    for k in meta.as_object().unwrap().keys() {
        assert!(RFC9728.contains(&k.as_str()), "{k} is not an RFC 9728 field");
    }
    // RFC 9728 §2: the algorithms the resource signs its responses with; hubdex signs none.
    assert!(meta.get("resource_signing_alg_values_supported").is_none(), "{meta}");
    assert_eq!(meta["resource"], json!(format!("http://127.0.0.1:{port}/mcp")));
    assert_eq!(meta["authorization_servers"], json!([iss.url]));
    assert!(
        meta["bearer_methods_supported"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| ["header", "body", "query"].contains(&m.as_str().unwrap()))
    );
    let (_, root) = request(port, "GET", "/.well-known/oauth-protected-resource", "", &[]);
    assert_eq!(
        serde_json::from_str::<Value>(&root).unwrap()["resource"],
        json!(format!("http://127.0.0.1:{port}"))
    );

    // Each token, and the answer it must get.
    let none = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&good));
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("k1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &good,
        &jsonwebtoken::EncodingKey::from_secret(jwk1.to_string().as_bytes()).unwrap(),
    )
    .unwrap();
    // Signed with k2 but naming k1.
    let forged = jwt(&k2, "k1", &good);
    for (what, token, expect) in [
        ("valid", jwt(&k1, "k1", &good), 200),
        ("expired", jwt(&k1, "k1", &with(json!({"exp": now - 3600}))), 401),
        ("not yet valid", jwt(&k1, "k1", &with(json!({"nbf": now + 3600}))), 401),
        ("wrong audience", jwt(&k1, "k1", &with(json!({"aud": "someone-else"}))), 401),
        ("wrong issuer", jwt(&k1, "k1", &with(json!({"iss": "https://evil.example"}))), 401),
        ("bad signature", forged, 401),
        ("alg none", none, 401),
        ("HMAC with the public key", hmac, 401),
        ("no matching grant", jwt(&k1, "k1", &with(json!({"groups": ["other"]}))), 403),
        ("unknown kid", jwt(&k2, "k2", &good), 401),
        // RFC 9068 §4: an ID token (typ JWT) or one without typ is not an access token.
        ("typ JWT", jwt_typed(&k1, "k1", &good, Some("JWT")), 401),
        ("no typ", jwt_typed(&k1, "k1", &good, None), 401),
        ("typ in another case", jwt_typed(&k1, "k1", &good, Some("AT+JWT")), 200),
    ] {
        assert_eq!(stats(&token), expect, "{what}");
    }
    // Key rotation: the issuer publishes k2; a token signed with it works once the JWKS is
    // fetched again (an unknown kid fetches it, at most once a second).
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1, jwk2]});
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(stats(&jwt(&k2, "k2", &good)), 200, "after rotation");
    // A valid token answers tools with its scope.
    let auth = format!("Bearer {}", jwt(&k1, "k1", &good));
    let (status, body) = request(
        port,
        "POST",
        "/v1/search",
        r#"{"query": "widgets"}"#,
        &[("Authorization", auth.as_str())],
    );
    assert_eq!(status, 200, "{body}");
}
