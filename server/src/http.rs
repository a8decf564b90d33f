//! The HTTP face: MCP streamable HTTP at `/mcp`, and `/healthz`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use crate::mcp::HubdexMcp;
use crate::state::AppState;

/// How the HTTP server is set up.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Extra `Host` values to accept besides loopback (public deployments name their hosts).
    pub allowed_hosts: Vec<String>,
    /// Browser origins to accept; empty accepts requests without Origin only... see docs/tools.md.
    pub allowed_origins: Vec<String>,
}

async fn healthz(State(state): State<Arc<AppState>>) -> Json<Value> {
    let snap = state.current.load();
    Json(json!({"status": "ok", "snapshot": snap.id(), "created_at": snap.manifest.created_at}))
}

/// The router serving every HTTP route.
pub fn router(state: Arc<AppState>, opts: &HttpOptions) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None);
    if !opts.allowed_hosts.is_empty() {
        let mut hosts: Vec<String> =
            ["localhost", "127.0.0.1", "::1", "[::1]"].iter().map(|s| s.to_string()).collect();
        hosts.extend(opts.allowed_hosts.iter().cloned());
        config = config.with_allowed_hosts(hosts);
    }
    if !opts.allowed_origins.is_empty() {
        config = config.with_allowed_origins(opts.allowed_origins.clone());
    }
    let mcp_state = state.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(HubdexMcp::new(mcp_state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service("/mcp", mcp).route("/healthz", get(healthz)).with_state(state)
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
