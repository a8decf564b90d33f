//! A well-behaved GitHub REST client over octocrab: Link pagination, conditional requests
//! with ETags (a 304 costs no quota), the primary and secondary rate limits, retries with
//! backoff for 5xx and connection errors, one request at a time. Time is injected (`Clock`)
//! so tests can run every wait instantly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderValue, StatusCode};
use octocrab::Octocrab;
use tokio::sync::Mutex;

/// Tries of one request before giving up on 5xx, connection errors or secondary limits.
pub const MAX_TRIES: u32 = 6;

/// The least a secondary rate limit without headers makes us wait (GitHub: "at least one
/// minute"), doubled on each further try.
pub const SECONDARY_MIN_WAIT: Duration = Duration::from_secs(60);

/// The time source: real, or a test's.
#[async_trait]
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
    /// Waits `d`.
    async fn sleep(&self, d: Duration);
}

/// Wall-clock time and real sleeps.
#[derive(Debug, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// Errors talking to GitHub.
#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    /// A rate limit did not lift within the tries allowed.
    #[error(
        "GitHub {limit} rate limit still in force after {tries} tries on {path}: nothing was published; \
         retry after {retry_at}"
    )]
    RateLimited {
        /// Which limit: primary or secondary.
        limit: &'static str,
        /// The API path asked for.
        path: String,
        /// Tries made.
        tries: u32,
        /// When GitHub says the limit lifts.
        retry_at: DateTime<Utc>,
    },
    /// GitHub kept failing (5xx or connection errors).
    #[error("GitHub kept failing on {path} after {tries} tries: {detail}")]
    Unavailable {
        /// The API path asked for.
        path: String,
        /// Tries made.
        tries: u32,
        /// The last failure.
        detail: String,
    },
    /// A resource does not exist (or the token may not see it).
    #[error(
        "GitHub says {path} does not exist (404); check the repository name and the token's access"
    )]
    NotFound {
        /// The API path asked for.
        path: String,
    },
    /// Any other refusal.
    #[error("GitHub answered {status} on {path}: {body}")]
    Status {
        /// The API path asked for.
        path: String,
        /// The HTTP status.
        status: u16,
        /// GitHub's answer.
        body: String,
    },
    /// The body was not the JSON expected.
    #[error("GitHub's answer to {path} is not the JSON expected: {detail}")]
    Decode {
        /// The API path asked for.
        path: String,
        /// What did not decode.
        detail: String,
    },
    /// The client could not be set up.
    #[error("GitHub client: {0}")]
    Setup(String),
}

/// What one GET gave.
#[derive(Debug, Clone)]
pub enum Fetched {
    /// 304: unchanged since the ETag we sent.
    NotModified,
    /// 200: the body, its ETag, and the next page's path when there is one.
    Page {
        /// The JSON body.
        body: Vec<u8>,
        /// The ETag to send next time.
        etag: Option<String>,
        /// The next page's path (from the `Link` header).
        next: Option<String>,
    },
}

/// Request counts, for reports and tests.
#[derive(Debug, Default)]
pub struct RequestStats {
    /// GET requests sent.
    pub requests: AtomicU64,
    /// Requests sent with an ETag (`If-None-Match`).
    pub conditional: AtomicU64,
    /// Requests answered 304 Not Modified.
    pub not_modified: AtomicU64,
    /// Requests retried (rate limits, 5xx, connection errors).
    pub retries: AtomicU64,
    /// The quota GitHub last reported as remaining (u64::MAX when unknown).
    pub remaining: AtomicU64,
}

impl RequestStats {
    /// (requests, conditional, not modified, retries).
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.conditional.load(Ordering::Relaxed),
            self.not_modified.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
        )
    }
}

/// The GitHub client. Requests are sent one at a time (GitHub asks integrators not to send
/// concurrent requests per token).
pub struct GitHubClient {
    octo: Octocrab,
    clock: Arc<dyn Clock>,
    serial: Mutex<Option<DateTime<Utc>>>,
    /// Request counts for this client.
    pub stats: Arc<RequestStats>,
}

impl std::fmt::Debug for GitHubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("GitHubClient").finish_non_exhaustive()
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The `rel="next"` target of a Link header, as a path with its query (the base URL is the
/// client's, which keeps the token on GitHub's host).
pub fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.split(';').any(|p| p.trim().replace(' ', "") == "rel=\"next\"") {
            return None;
        }
        let target = target.trim().trim_start_matches('<').trim_end_matches('>');
        let parsed = url::Url::parse(target).ok()?;
        Some(match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_string(),
        })
    })
}

impl GitHubClient {
    /// A client for `api_base` (`https://api.github.com`, or a GitHub Enterprise `/api/v3` URL),
    /// with an optional token.
    pub fn new(
        api_base: &str,
        token: Option<String>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GitHubError> {
        let mut b = Octocrab::builder()
            .base_uri(api_base)
            .map_err(|e| GitHubError::Setup(format!("API base URL {api_base:?}: {e}")))?
            .add_header(http::header::ACCEPT, "application/vnd.github+json".to_string())
            .add_header(
                http::HeaderName::from_static("x-github-api-version"),
                "2022-11-28".to_string(),
            );
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            b = b.personal_token(t);
        }
        let octo = b.build().map_err(|e| GitHubError::Setup(e.to_string()))?;
        let stats = Arc::new(RequestStats {
            remaining: AtomicU64::new(u64::MAX),
            ..RequestStats::default()
        });
        Ok(GitHubClient { octo, clock, serial: Mutex::new(None), stats })
    }

    /// GETs `path` (a path with query, relative to the API base), conditionally when `etag`
    /// is given, honouring rate limits and retrying transient failures.
    pub async fn get(&self, path: &str, etag: Option<&str>) -> Result<Fetched, GitHubError> {
        // One request at a time; the guard also remembers a primary-limit reset to wait for.
        let mut wait_until = self.serial.lock().await;
        let mut tries = 0u32;
        let mut backoff = Duration::from_secs(1);
        loop {
            if let Some(reset) = wait_until.take() {
                let now = self.clock.now();
                if reset > now {
                    self.clock.sleep((reset - now).to_std().unwrap_or_default()).await;
                }
            }
            tries += 1;
            let mut headers = HeaderMap::new();
            if let Some(e) = etag {
                if let Ok(v) = HeaderValue::from_str(e) {
                    headers.insert(http::header::IF_NONE_MATCH, v);
                }
                self.stats.conditional.fetch_add(1, Ordering::Relaxed);
            }
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            let response = match self.octo._get_with_headers(path, Some(headers)).await {
                Ok(r) => r,
                Err(e) => {
                    if tries >= MAX_TRIES {
                        return Err(GitHubError::Unavailable {
                            path: path.into(),
                            tries,
                            detail: e.to_string(),
                        });
                    }
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    self.clock.sleep(backoff).await;
                    backoff *= 2;
                    continue;
                }
            };
            let status = response.status();
            let h = response.headers().clone();
            let remaining: Option<u64> =
                header(&h, "x-ratelimit-remaining").and_then(|v| v.parse().ok());
            let reset: Option<DateTime<Utc>> = header(&h, "x-ratelimit-reset")
                .and_then(|v| v.parse::<i64>().ok())
                .and_then(|s| DateTime::from_timestamp(s, 0));
            let retry_after: Option<u64> = header(&h, "retry-after").and_then(|v| v.parse().ok());
            if let Some(r) = remaining {
                self.stats.remaining.store(r, Ordering::Relaxed);
            }
            let body = self.octo.body_to_string(response).await.unwrap_or_default();
            match status {
                StatusCode::OK => {
                    if remaining == Some(0) {
                        // The quota is spent: the next request waits for the reset.
                        *wait_until = reset.map(|r| r + chrono::Duration::seconds(1));
                    }
                    return Ok(Fetched::Page {
                        body: body.into_bytes(),
                        etag: header(&h, "etag").map(str::to_string),
                        next: header(&h, "link").and_then(next_link),
                    });
                }
                StatusCode::NOT_MODIFIED => {
                    self.stats.not_modified.fetch_add(1, Ordering::Relaxed);
                    return Ok(Fetched::NotModified);
                }
                StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS => {
                    let (limit, wait) = if let Some(secs) = retry_after {
                        ("secondary", Duration::from_secs(secs))
                    } else if remaining == Some(0) {
                        let now = self.clock.now();
                        let until = reset.unwrap_or(now + chrono::Duration::seconds(60))
                            + chrono::Duration::seconds(1);
                        ("primary", (until - now).to_std().unwrap_or(Duration::from_secs(1)))
                    } else if status == StatusCode::FORBIDDEN
                        && !body.to_ascii_lowercase().contains("rate limit")
                        && remaining.is_some()
                    {
                        // A plain permission refusal, not a limit.
                        return Err(GitHubError::Status {
                            path: path.into(),
                            status: status.as_u16(),
                            body: truncate(&body),
                        });
                    } else {
                        // A secondary limit without headers: at least a minute, doubling.
                        ("secondary", SECONDARY_MIN_WAIT * 2u32.pow(tries.saturating_sub(1).min(5)))
                    };
                    if tries >= MAX_TRIES {
                        let retry_at =
                            self.clock.now() + chrono::Duration::from_std(wait).unwrap_or_default();
                        return Err(GitHubError::RateLimited {
                            limit,
                            path: path.into(),
                            tries,
                            retry_at,
                        });
                    }
                    tracing::warn!(
                        path,
                        limit,
                        wait_s = wait.as_secs(),
                        "GitHub rate limit: waiting"
                    );
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    self.clock.sleep(wait).await;
                }
                StatusCode::NOT_FOUND | StatusCode::GONE => {
                    return Err(GitHubError::NotFound { path: path.into() });
                }
                s if s.is_server_error() => {
                    if tries >= MAX_TRIES {
                        return Err(GitHubError::Unavailable {
                            path: path.into(),
                            tries,
                            detail: format!("{s}: {}", truncate(&body)),
                        });
                    }
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    self.clock.sleep(backoff).await;
                    backoff *= 2;
                }
                s => {
                    return Err(GitHubError::Status {
                        path: path.into(),
                        status: s.as_u16(),
                        body: truncate(&body),
                    });
                }
            }
        }
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers_give_the_next_page_as_a_path() {
        let link = r#"<https://api.github.com/repositories/1/issues?page=2&per_page=100>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last""#;
        assert_eq!(next_link(link).as_deref(), Some("/repositories/1/issues?page=2&per_page=100"));
        assert_eq!(next_link(r#"<https://api.github.com/x?page=1>; rel="prev""#), None);
        assert_eq!(
            next_link(r#"<http://127.0.0.1:9/api/v3/repos/o/r/issues?page=3>; rel="next""#)
                .as_deref(),
            Some("/api/v3/repos/o/r/issues?page=3")
        );
    }
}
