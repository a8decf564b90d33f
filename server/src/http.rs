//! The HTTP face: MCP streamable HTTP at `/mcp`, the REST mirror under `/v1`, `/healthz` and
//! `/metrics`, behind Host/Origin checks, an optional bearer token, a body cap and timeouts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
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

use crate::args::ToolError;
use crate::mcp::HubdexMcp;
use crate::state::AppState;
use crate::tools::call_tool_via;
use crate::webhook::{WebhookConfig, github_webhook};

/// Where GitHub delivers webhooks (authenticated by signature, not by the bearer token).
pub(crate) const WEBHOOK_PATH: &str = "/webhooks/github";

/// Largest request body accepted (413 beyond).
pub(crate) const MAX_BODY_BYTES: usize = 1024 * 1024;

/// A request (headers, body and answer) must finish within this, or it gets 408.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// How the HTTP server is set up.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// `Host` values accepted besides loopback names (a public deployment names its hosts).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides loopback ones, as `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
    /// When set, every route but `/healthz` and the webhook needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// When set, `POST /webhooks/github` verifies deliveries with this secret and queues them.
    pub webhook: Option<WebhookConfig>,
}

struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    token: Option<String>,
    state: Arc<AppState>,
}

fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':')
        .map_or(host, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { host })
}

impl Guard {
    fn host_ok(&self, host: &str) -> bool {
        let name = host_name(host);
        LOOPBACK_HOSTS.contains(&name)
            || self
                .hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
    }

    fn origin_ok(&self, origin: &str) -> bool {
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        LOOPBACK_HOSTS.contains(&host_name(rest))
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return true };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(token.as_bytes())))
    }
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": {"message": message}}))).into_response()
}

/// Host and Origin validation (DNS rebinding), bearer auth, and response counting.
async fn guard(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let response = if !g.host_ok(host) {
        error_response(
            StatusCode::FORBIDDEN,
            &format!("Host {host:?} is not allowed (see --allowed-host)"),
        )
    } else if let Some(origin) =
        headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()).filter(|o| !g.origin_ok(o))
    {
        error_response(
            StatusCode::FORBIDDEN,
            &format!("Origin {origin:?} is not allowed (see --allowed-origin)"),
        )
    } else if !["/healthz", WEBHOOK_PATH].contains(&req.uri().path()) && !g.token_ok(headers) {
        let mut r = error_response(
            StatusCode::UNAUTHORIZED,
            "a bearer token is required: Authorization: Bearer <token>",
        );
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        r
    } else {
        next.run(req).await
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
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        let body = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "JSON-RPC batches are not supported: send one request per POST"}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
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

async fn rest(state: &Arc<AppState>, tool: &str, body: Option<Bytes>) -> Response {
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
    match call_tool_via(state, "rest", tool, &args).await {
        Ok(v) => Json(v).into_response(),
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
        move || Ok(HubdexMcp::new(mcp_state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard_state = Arc::new(Guard {
        hosts: opts.allowed_hosts.clone(),
        origins: opts.allowed_origins.clone(),
        token: opts.token.clone(),
        state: state.clone(),
    });
    let rest_route = |tool: &'static str| {
        post(move |State(s): State<Arc<AppState>>, body: Bytes| async move {
            rest(&s, tool, Some(body)).await
        })
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
        .route("/v1/search", rest_route("search"))
        .route("/v1/scan", rest_route("scan"))
        .route("/v1/fetch", rest_route("fetch"))
        .route("/v1/read_span", rest_route("read_span"))
        .route("/v1/related", rest_route("related"))
        .route(
            "/v1/stats",
            get(
                |State(s): State<Arc<AppState>>| async move { rest(&s, "index_stats", None).await },
            ),
        )
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(state)
        .layer(middleware::from_fn_with_state(guard_state, guard))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
}

/// Serves until the process is stopped.
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
    axum::serve(listener, router(state, opts)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
    }
}
