#![warn(missing_docs)]
//! hubdex-server: the read-only server. It opens the newest snapshot from the store through a
//! verified local cache and answers MCP tools over stdio and HTTP, and the `query` command.
//!
//! Only this crate knows MCP and JSON; it turns `hubdex-formats` rows into its own answer
//! structs ([`SearchAnswer`]).

mod access;
mod args;
mod eval;
mod fetch;
mod filter;
mod grep;
mod http;
mod mcp;
mod metrics;
mod oauth;
mod pickaxe;
mod related;
mod render;
mod rerank;
mod scan;
mod search;
mod serve;
mod snapshot;
mod state;
mod symbols;
mod tools;
mod webhook;

pub use access::{AuthError, Caller, CallerKind, TokenEntry, TokenStore, TokensError, TokensFile};
pub use args::{Args, ToolError, tool_args};
pub use eval::{
    EvalQuery, Mode, ModeReport, eval_current, load_eval, matches as eval_matches, render_table,
    run_eval,
};
pub use fetch::{FetchAnswer, SpanAnswer, SpanRequest, fetch, read_span};
pub use filter::Filters;
pub use grep::{Case, GrepAnswer, GrepMatch, GrepRequest, Order, Within, grep, grep_stores};
pub use http::{DEFAULT_MAX_CONNECTIONS, HEADER_READ_TIMEOUT, HttpOptions, router, serve_http};
pub use mcp::HubdexMcp;
pub use oauth::{ClaimGrant, OAuth, OAuthConfig, load_grants, resource_metadata};
pub use pickaxe::{ChangedLine, HistoryAnswer, HistoryMatch, grep_history};
pub use related::{
    EdgeGroup, EdgeSummary, EntityInfo, RelatedAnswer, RelatedEdge, RelatedRequest, ReleaseRef,
    related, summary as edge_summary,
};
pub use render::{
    fetch_text, grep_text, history_text, related_text, scan_text, search_text, span_text,
    symbols_text,
};
pub use rerank::{RERANK_MAX_TOKENS, Reranker};
pub use scan::{Cursor, ScanAnswer, ScanRequest, scan};
pub use search::{
    Blend, ChunkSymbol, Fusion, NO_RERANK_MODEL, PAPER_RRF_K, RERANK_CANDIDATES, SERVED_RRF_K,
    SearchAnswer, SearchRequest, SearchResult, Sort, search, search_with_vector, snippet,
};
pub use serve::{ServeArgs, health, open_store, serve};
pub use snapshot::{
    OpenError, OpenSegments, OpenSnapshot, default_cache, open_snapshot, open_snapshot_in,
    pull_snapshot,
};
pub use state::{AppState, StateSetup, query_embedder};
pub use symbols::{SymbolItem, SymbolsAnswer, SymbolsRequest, symbols, symbols_in};
pub use tools::{ToolAnswer, ToolSpec, call_tool, call_tool_as, call_tool_via, tool_specs};
pub use webhook::{Dispatch, WebhookConfig, verify_signature};
