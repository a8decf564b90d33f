//! The MCP face of the tools (rmcp): protocol 2026-07-28, stateless, and older clients that
//! open with `initialize`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::access::Caller;
use crate::state::AppState;
use crate::tools::{call_tool_via, tool_specs};

/// The MCP server: one per connection or request, all sharing the state.
#[derive(Clone)]
pub struct HubdexMcp {
    state: Arc<AppState>,
    /// Who calls over this transport when the request does not say: the local operator over
    /// stdio; nobody over HTTP, where the HTTP layer puts the authenticated [`Caller`] on each
    /// request (a request without one is refused, never served as the operator).
    caller: Option<Caller>,
}

impl HubdexMcp {
    /// A handler over `state` for the local operator (stdio).
    pub fn new(state: Arc<AppState>) -> Self {
        HubdexMcp { state, caller: Some(Caller::local()) }
    }

    /// A handler over `state` whose callers come with each HTTP request.
    pub(crate) fn for_http(state: Arc<AppState>) -> Self {
        HubdexMcp { state, caller: None }
    }
}

fn tools() -> Vec<Tool> {
    tool_specs()
        .into_iter()
        .map(|s| {
            let schema = match s.input_schema {
                serde_json::Value::Object(m) => m,
                _ => serde_json::Map::new(),
            };
            let mut annotations = ToolAnnotations::with_title(s.title);
            annotations.read_only_hint = Some(true);
            annotations.open_world_hint = Some(false);
            Tool::new(s.name, s.description, schema)
                .with_title(s.title)
                .with_annotations(annotations)
        })
        .collect()
}

impl ServerHandler for HubdexMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hubdex", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "hubdex is a read-only, versioned memory of GitHub repositories. Call index_stats to see \
                 what is indexed, search to find issues, pull requests, comments, docs, commits and code. \
                 Every answer names the snapshot it came from; pass that snapshot id back to get the same \
                 answer later.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let from_http = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .cloned();
        let Some(caller) = from_http.or_else(|| self.caller.clone()) else {
            return Err(ErrorData::invalid_request(
                "the request carries no authenticated caller",
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let result = match call_tool_via(&self.state, &caller, "mcp", &request.name, &args).await {
            Ok(answer) => {
                let mut r = CallToolResult::structured(answer.value);
                r.content = vec![ContentBlock::text(answer.text)];
                r
            }
            Err(e) => {
                tracing::info!(tool = %request.name, error = %e, "tool error");
                CallToolResult::error(vec![ContentBlock::text(e.to_string())])
            }
        };
        Ok(result.into())
    }
}
