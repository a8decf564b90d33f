//! The HTTP face: MCP streamable HTTP at `/mcp`, the REST mirror under `/v1`, `/healthz` and
//! `/metrics`, behind Host/Origin checks, bearer authentication (one all-repositories token,
//! scoped tokens from a tokens file, OAuth access tokens), a body cap and timeouts. The
//! authenticated [`Caller`] rides on each request into the tools, which see only its scope.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Map, Value, json};
use subtle::ConstantTimeEq as _;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::access::{AuthError, Caller, CallerKind, TokenStore};
use crate::args::ToolError;
use crate::mcp::HubdexMcp;
use crate::oauth::{OAuth, resource_metadata};
use crate::state::AppState;
use crate::tools::call_tool_via;
use crate::webhook::{WebhookConfig, github_webhook};

/// Where GitHub delivers webhooks (authenticated by signature, not by the bearer token).
pub(crate) const WEBHOOK_PATH: &str = "/webhooks/github";

/// Where the protected resource metadata (RFC 9728) of the whole server is; with `/mcp`
/// appended, that of the MCP endpoint.
pub(crate) const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Largest request body accepted (413 beyond).
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A request (headers, body and answer) must finish within this, or it gets 408.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A request's headers must be in within this of the connection's start (on a kept-alive
/// connection, of the next request's first byte), or the connection is closed: a client
/// trickling a header line at a time holds no connection for long. A kept-alive connection
/// that sends nothing is closed by `KEEP_ALIVE_IDLE`.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A kept-alive connection that has sent and received nothing for this long is closed. Longer
/// than [`REQUEST_TIMEOUT`], so a request still being answered is never cut.
pub(crate) const KEEP_ALIVE_IDLE: Duration = Duration::from_secs(60);

/// HTTP connections served at once unless `--max-connections` says otherwise; one more is
/// answered 503 and closed.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 256;

const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// How the HTTP server is set up.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// `Host` values accepted besides loopback names (a public deployment names its hosts).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides loopback ones, as `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
    /// When set, every route but `/healthz`, the webhook and the resource metadata needs
    /// `Authorization: Bearer <token>`; this token reads every repository.
    pub token: Option<String>,
    /// Scoped tokens (`--tokens-file`), re-read when the file changes.
    pub tokens: Option<Arc<TokenStore>>,
    /// OAuth access tokens of one issuer.
    pub oauth: Option<Arc<OAuth>>,
    /// The server's public base URL (`https://hubdex.example.com`), for the resource metadata;
    /// default `http://<Host>`.
    pub public_url: Option<String>,
    /// When set, `POST /webhooks/github` verifies deliveries with this secret and queues them.
    pub webhook: Option<WebhookConfig>,
    /// Connections served at once (0: [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: Option<String>,
    tokens: Option<Arc<TokenStore>>,
    oauth: Option<Arc<OAuth>>,
    public_url: Option<String>,
    state: Arc<AppState>,
}

/// The host name of a `Host` value (RFC 9110 §7.2: `uri-host [ ":" port ]`), or `None` when it
/// is not one: a bracketed IPv6 address followed by anything but a port (`[::1]evil`), a port
/// that is not digits, or characters no host name holds.
fn host_name(host: &str) -> Option<&str> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (addr, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
            return None;
        }
        (addr, port)
    } else {
        let (name, port) = match host.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host, None),
        };
        let name_ok = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if !name_ok {
            return None;
        }
        (name, port)
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok.then_some(name)
}

/// Whether `name` (a host name, without port or brackets) is a loopback one, in any case.
fn is_loopback(name: &str) -> bool {
    LOOPBACK_HOSTS.iter().any(|h| h.eq_ignore_ascii_case(name))
}

impl Guard {
    fn host_ok(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else { return false };
        is_loopback(name)
            || self
                .hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_ok(&self, origin: &str) -> bool {
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        let lower = origin.to_ascii_lowercase();
        let Some(rest) = lower.strip_prefix("http://").or_else(|| lower.strip_prefix("https://"))
        else {
            return false;
        };
        host_name(rest).is_some_and(is_loopback)
    }

    /// Who sends `headers`: the holder of the single token, of a tokens-file token, of an
    /// OAuth access token, or anyone when no authentication is configured.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        if self.token.is_none() && self.tokens.is_none() && self.oauth.is_none() {
            return Ok(Caller {
                name: "anonymous".into(),
                kind: CallerKind::Anonymous,
                scope: None,
            });
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .ok_or(AuthError::Missing)?;
        if let Some(token) = &self.token
            && bool::from(given.as_bytes().ct_eq(token.as_bytes()))
        {
            return Ok(Caller { name: "token".into(), kind: CallerKind::Token, scope: None });
        }
        // A JWT is three base64url parts; a hubdex token has no dot.
        if let Some(oauth) = &self.oauth
            && given.split('.').count() == 3
        {
            return oauth.authenticate(given).await;
        }
        if let Some(tokens) = &self.tokens
            && let Some(caller) = tokens.authenticate(given)?
        {
            return Ok(caller);
        }
        Err(AuthError::Invalid)
    }

    /// The server's base URL as clients reach it.
    fn base_url(&self, headers: &HeaderMap) -> String {
        match &self.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => {
                let host =
                    headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
                format!("http://{host}")
            }
        }
    }

    /// The 401 answer: `WWW-Authenticate: Bearer`, with the resource metadata's address when
    /// OAuth is on (MCP authorization) and `error="invalid_token"` when a token was sent.
    fn unauthorized(&self, headers: &HeaderMap, path: &str, err: &AuthError) -> Response {
        let status = match err {
            AuthError::NoGrant => StatusCode::FORBIDDEN,
            AuthError::TokensUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::UNAUTHORIZED,
        };
        let mut r = error_response(status, &err.to_string());
        let mut params = Vec::new();
        if self.oauth.is_some() {
            let suffix = if path == "/mcp" || path.starts_with("/mcp/") { "/mcp" } else { "" };
            params.push(format!(
                "resource_metadata=\"{}{RESOURCE_METADATA_PATH}{suffix}\"",
                self.base_url(headers)
            ));
        }
        match err {
            AuthError::Missing => {}
            AuthError::NoGrant => params.push("error=\"insufficient_scope\"".into()),
            _ => params.push("error=\"invalid_token\"".into()),
        }
        if let Ok(v) = HeaderValue::from_str(&challenge(&params)) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

/// The token of an `Authorization` value whose scheme is `Bearer`, in any case (RFC 9110
/// §11.1: schemes are case-insensitive), separated from it by spaces.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A `WWW-Authenticate` challenge (RFC 9110 §11.6.1): the scheme, one space, then its
/// parameters separated by commas. A comma straight after the scheme would end the challenge
/// and cut the parameters off it.
fn challenge(params: &[String]) -> String {
    if params.is_empty() { "Bearer".into() } else { format!("Bearer {}", params.join(", ")) }
}

/// The name of a header that a request may carry once and carries more often (RFC 9112 §3.2:
/// a request with more than one Host is a 400; Authorization holds one credential).
fn repeated_header(headers: &HeaderMap) -> Option<&'static str> {
    [(header::HOST, "Host"), (header::AUTHORIZATION, "Authorization")]
        .into_iter()
        .find(|(h, _)| headers.get_all(h).iter().count() > 1)
        .map(|(_, name)| name)
}

fn refusal_reason(e: &AuthError) -> &'static str {
    match e {
        AuthError::Missing => "missing",
        AuthError::Invalid => "invalid",
        AuthError::Expired(_) => "expired",
        AuthError::TokensUnavailable => "tokens_file_unreadable",
        AuthError::Jwt(_) => "jwt",
        AuthError::NoGrant => "no_grant",
    }
}

/// A header value as an error message shows it: at most 200 characters.
fn shown(value: &str) -> String {
    value.chars().take(200).collect()
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": {"message": message}}))).into_response()
}

/// Host and Origin validation (DNS rebinding), bearer auth, and response counting.
async fn guard(State(g): State<Arc<Guard>>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    let path = req.uri().path().to_string();
    let open =
        path == "/healthz" || path == WEBHOOK_PATH || path.starts_with(RESOURCE_METADATA_PATH);
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    // An Origin that is not text is refused like any other origin not allowed.
    let origin = headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("(not text)"));
    let response = if let Some(name) = repeated_header(headers) {
        error_response(StatusCode::BAD_REQUEST, &format!("more than one {name} header"))
    } else if !g.host_ok(host) {
        error_response(
            StatusCode::FORBIDDEN,
            &format!("Host {:?} is not allowed (see --allowed-host)", shown(host)),
        )
    } else if let Some(origin) = origin.filter(|o| !g.origin_ok(o)) {
        error_response(
            StatusCode::FORBIDDEN,
            &format!("Origin {:?} is not allowed (see --allowed-origin)", shown(origin)),
        )
    } else if open {
        next.run(req).await
    } else {
        match g.authenticate(headers).await {
            Err(e) => {
                g.state.metrics.auth_refused(refusal_reason(&e));
                tracing::info!(target: "hubdex::audit", path = %path, refused = refusal_reason(&e), "request refused");
                g.unauthorized(req.headers(), &path, &e)
            }
            Ok(caller) if path == "/metrics" && !caller.is_unscoped() => error_response(
                StatusCode::FORBIDDEN,
                "/metrics counts every caller's calls: it needs a token that reads every repository",
            ),
            Ok(caller) => {
                req.extensions_mut().insert(caller);
                next.run(req).await
            }
        }
    };
    g.state.metrics.http(response.status().as_u16());
    response
}

/// JSON-RPC batches (arrays) are not part of MCP 2025-06-18 and later: refuse them with a
/// JSON-RPC error rather than letting them reach the handler.
async fn refuse_batches(req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("request body over {MAX_BODY_BYTES} bytes"),
            );
        }
    };
    if let Some((code, message)) = jsonrpc_problem(&bytes) {
        let body =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// What makes a POSTed body no JSON-RPC 2.0 message, as (JSON-RPC error code, message): a
/// batch, bytes that are not UTF-8 JSON (parse error), or a message without `"jsonrpc":
/// "2.0"` (invalid request). Each gets 400, not the 415 a media type error would.
fn jsonrpc_problem(body: &[u8]) -> Option<(i64, &'static str)> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Some((-32600, "JSON-RPC batches are not supported: send one request per POST"));
    }
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return Some((-32700, "the body is not valid JSON (UTF-8)"));
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return Some((-32600, "the body is not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\")"));
    }
    None
}

async fn healthz(State(state): State<Arc<AppState>>) -> Json<Value> {
    let snap = state.current.load();
    Json(json!({"status": "ok", "snapshot": snap.id(), "created_at": snap.manifest.created_at}))
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        state.metrics.encode(),
    )
        .into_response()
}

async fn rest(state: &Arc<AppState>, caller: &Caller, tool: &str, body: Option<Bytes>) -> Response {
    let args: Map<String, Value> = match body {
        None => Map::new(),
        Some(b) if b.iter().all(u8::is_ascii_whitespace) => Map::new(),
        Some(b) => match serde_json::from_slice::<Value>(&b) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object of the tool's arguments",
                );
            }
            Err(e) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    &format!("the body is not valid JSON: {e}"),
                );
            }
        },
    };
    match call_tool_via(state, caller, "rest", tool, &args).await {
        Ok(a) => Json(a.value).into_response(),
        Err(ToolError::Argument { argument, message }) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"argument": argument, "message": format!("argument `{argument}`: {message}")}})),
        )
            .into_response(),
        Err(e @ ToolError::UnknownTool(_)) => error_response(StatusCode::NOT_FOUND, &e.to_string()),
        Err(e @ ToolError::Unavailable(_)) => error_response(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

/// The router serving every HTTP route.
pub fn router(state: Arc<AppState>, opts: &HttpOptions) -> Router {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|s| s.to_string()).collect();
    hosts.extend(opts.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(hosts);
    let mcp_state = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(HubdexMcp::for_http(mcp_state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard_state = Arc::new(Guard {
        hosts: opts.allowed_hosts.clone(),
        origins: opts.allowed_origins.clone(),
        token: opts.token.clone(),
        tokens: opts.tokens.clone(),
        oauth: opts.oauth.clone(),
        public_url: opts.public_url.clone(),
        state: state.clone(),
    });
    let rest_route = |tool: &'static str| {
        post(
            move |State(s): State<Arc<AppState>>, Extension(c): Extension<Caller>, body: Bytes| async move {
                rest(&s, &c, tool, Some(body)).await
            },
        )
    };
    let metadata_router = match &opts.oauth {
        Some(oauth) => {
            let at_root = metadata_route(guard_state.clone(), oauth.clone(), "");
            let at_mcp = metadata_route(guard_state.clone(), oauth.clone(), "/mcp");
            Router::new()
                .route(RESOURCE_METADATA_PATH, get(at_root))
                .route(&format!("{RESOURCE_METADATA_PATH}/mcp"), get(at_mcp))
        }
        None => Router::new(),
    };
    let mcp_router =
        Router::new().nest_service("/mcp", mcp).layer(middleware::from_fn(refuse_batches));
    let webhook_router = match &opts.webhook {
        Some(w) => Router::new()
            .route(WEBHOOK_PATH, post(github_webhook))
            .with_state((state.clone(), Arc::new(w.clone()))),
        None => Router::new(),
    };
    Router::new()
        .merge(mcp_router)
        .merge(webhook_router)
        .merge(metadata_router)
        .route("/v1/search", rest_route("search"))
        .route("/v1/scan", rest_route("scan"))
        .route("/v1/fetch", rest_route("fetch"))
        .route("/v1/read_span", rest_route("read_span"))
        .route("/v1/grep", rest_route("grep"))
        .route("/v1/symbols", rest_route("symbols"))
        .route("/v1/related", rest_route("related"))
        .route(
            "/v1/stats",
            get(|State(s): State<Arc<AppState>>, Extension(c): Extension<Caller>| async move {
                rest(&s, &c, "index_stats", None).await
            }),
        )
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(state)
        .layer(middleware::from_fn_with_state(guard_state, guard))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
}

/// The handler of one protected resource metadata document: the resource is the server's base
/// URL plus `suffix` (RFC 9728 §3.3: it must equal the URL the document is named after).
fn metadata_route(
    guard: Arc<Guard>,
    oauth: Arc<OAuth>,
    suffix: &'static str,
) -> impl Fn(HeaderMap) -> std::future::Ready<Json<Value>> + Clone {
    move |headers: HeaderMap| {
        let resource = format!("{}{suffix}", guard.base_url(&headers));
        std::future::ready(Json(resource_metadata(&resource, oauth.issuer())))
    }
}

/// Serves until the process is stopped: each connection as HTTP/1.1 with keep-alive, its
/// headers read within [`HEADER_READ_TIMEOUT`], at most `max_connections` at once.
pub async fn serve_http(
    state: Arc<AppState>,
    addr: SocketAddr,
    opts: &HttpOptions,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding {addr}: {e}"))?;
    let local = listener.local_addr()?;
    eprintln!("hubdex: serving snapshot {} on http://{local}/mcp", state.current.load().id());
    let max = match opts.max_connections {
        0 => DEFAULT_MAX_CONNECTIONS as usize,
        n => n,
    };
    serve_connections(listener, router(state, opts), max, KEEP_ALIVE_IDLE).await;
    Ok(())
}

/// Accepts connections for ever, serving up to `max` at once, each closed once it has been
/// `idle` with nothing sent or received. A failed accept (out of file descriptors, say) is
/// logged and retried after a pause instead of ending the server.
async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    max: usize,
    idle: Duration,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let permits = Arc::new(tokio::sync::Semaphore::new(max));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tokio::spawn(refuse_connection(stream, max));
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let (stream, last_active) = Activity::watch(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            loop {
                tokio::select! {
                    ended = conn.as_mut() => {
                        if let Err(e) = ended {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    () = tokio::time::sleep(idle / 4) => {
                        if last_active.idle_for() >= idle {
                            break;
                        }
                    }
                }
            }
            drop(permit);
        });
    }
}

/// A stream that notes when it last sent or received a byte, for the idle limit.
struct Activity<S> {
    inner: S,
    last: Arc<LastActive>,
}

/// When a connection last moved a byte, as milliseconds since it was accepted.
struct LastActive {
    started: std::time::Instant,
    at_ms: std::sync::atomic::AtomicU64,
}

impl LastActive {
    fn touch(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.at_ms.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let at = self.at_ms.load(std::sync::atomic::Ordering::Relaxed);
        self.started.elapsed().saturating_sub(Duration::from_millis(at))
    }
}

impl<S> Activity<S> {
    fn watch(inner: S) -> (Activity<S>, Arc<LastActive>) {
        let last = Arc::new(LastActive {
            started: std::time::Instant::now(),
            at_ms: std::sync::atomic::AtomicU64::new(0),
        });
        (Activity { inner, last: last.clone() }, last)
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Activity<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.last.touch();
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Activity<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.last.touch();
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The answer of a connection past the limit: 503 with a JSON error, then closed.
async fn refuse_connection(mut stream: tokio::net::TcpStream, max: usize) {
    use tokio::io::AsyncWriteExt as _;
    let body = json!({"error": {"message": format!(
        "the server is serving its limit of {max} connections (--max-connections); retry shortly"
    )}})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port_and_malformed_hosts_have_none() {
        for (host, name) in [
            ("127.0.0.1:8080", Some("127.0.0.1")),
            ("[::1]:8080", Some("::1")),
            ("[::1]", Some("::1")),
            ("example.com", Some("example.com")),
            ("LOCALHOST", Some("LOCALHOST")),
            ("[::1]evil", None),
            ("[::1]:80evil", None),
            ("[::1]:", None),
            ("localhost:80x", None),
            ("evil.com/x", None),
            ("evil.com\"x", None),
            ("", None),
            ("[]", None),
        ] {
            assert_eq!(host_name(host), name, "{host:?}");
        }
        assert!(is_loopback("LOCALHOST") && is_loopback("::1") && !is_loopback("localhost.evil"));
    }

    /// A kept-alive connection that goes quiet is closed once idle, and its slot freed.
    #[tokio::test]
    async fn an_idle_kept_alive_connection_is_closed() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = Router::new().route("/", get(|| async { "ok" }));
        tokio::spawn(serve_connections(listener, app, 1, Duration::from_millis(400)));
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 1024];
        let n = s.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        // Kept alive, then quiet: closed within the idle limit and a quarter.
        let closed = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
        assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "still open: {closed:?}");
        // The one slot is free again.
        let mut again = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        again
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        again.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    #[test]
    fn a_body_that_is_not_json_rpc_2_is_named() {
        for (body, code) in [
            (&b"[{}]"[..], Some(-32600)),
            (b"{not json", Some(-32700)),
            (b"\xff\xfe", Some(-32700)),
            (br#"{"jsonrpc": "1.0", "id": 1, "method": "ping"}"#, Some(-32600)),
            (br#"{"id": 1, "method": "ping"}"#, Some(-32600)),
            (br#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#, None),
        ] {
            assert_eq!(
                jsonrpc_problem(body).map(|p| p.0),
                code,
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn bearer_schemes_match_in_any_case() {
        for (value, expect) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER abc", Some("abc")),
            ("Bearer   abc  ", Some("abc")),
            ("Basic abc", None),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearerabc", None),
        ] {
            assert_eq!(bearer_token(value), expect, "{value:?}");
        }
    }

    #[test]
    fn a_challenge_puts_its_parameters_after_one_space() {
        assert_eq!(challenge(&[]), "Bearer");
        assert_eq!(
            challenge(&["error=\"invalid_token\"".into()]),
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(
            challenge(&["resource_metadata=\"u\"".into(), "error=\"insufficient_scope\"".into()]),
            "Bearer resource_metadata=\"u\", error=\"insufficient_scope\""
        );
    }
}
