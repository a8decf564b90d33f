//! The tools, independent of transport: their schemas and how a call is answered. MCP, REST
//! and the `query` command all come through here, so they return the same object.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::args::{Args, ToolError};
use crate::search::{Fusion, MAX_QUERY_CHARS, SearchRequest, search};
use crate::state::AppState;

/// A tool as listed: name, description, input schema.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: Value,
}

/// Every tool the server offers.
pub fn tool_specs() -> Vec<ToolSpec> {
    let types: Vec<&str> = hubdex_formats::RowType::ALL.iter().map(|t| t.as_str()).collect();
    vec![
        ToolSpec {
            name: "search",
            title: "Search GitHub memory",
            description: "Hybrid search (BM25 + embeddings, fused by reciprocal rank) over the indexed GitHub \
                repositories: issues, pull requests, comments, reviews, releases, docs, commits and code. \
                Results are distinct entities (a thread, a file, a commit); other matching rows of the same \
                entity are folded into `same_entity`. Use `fetch` for a result's full stored text.",
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                        "description": "What to look for, in words or code identifiers. Natural-language questions work; exact identifiers and error messages match best in rrf or sparse_only."},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10,
                        "description": "How many distinct entities to return."},
                    "fusion": {"type": "string", "enum": Fusion::NAMES, "default": "rrf",
                        "description": "rrf combines keyword and semantic ranking (best default); dense_only ranks by meaning; sparse_only by keywords (BM25)."},
                    "type": {"oneOf": [
                        {"type": "string", "enum": types},
                        {"type": "array", "items": {"type": "string", "enum": types}}],
                        "description": "Only rows of this type (or any of these types)."},
                    "repo": {"type": "string", "description": "Only this repository, exactly owner/name."},
                    "rerank": {"type": "boolean", "default": false,
                        "description": "Rerank the top candidates with a cross-encoder when the server has one; the answer says whether it was applied."},
                    "snapshot": {"type": "string", "description": "Answer from exactly this snapshot id (pinned, reproducible). Default: the newest."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "index_stats",
            title: "Index statistics",
            description: "What the index holds: snapshot id and creation time, the embedding model, and rows per \
                repository and type. Call it first to learn which repositories and types exist.",
            input_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "snapshot": {"type": "string", "description": "A snapshot id; default: the newest."}
                },
                "additionalProperties": false
            }),
        },
    ]
}

/// Answers one tool call with its structured result.
pub async fn call_tool(
    state: &Arc<AppState>,
    name: &str,
    args: &Map<String, Value>,
) -> Result<Value, ToolError> {
    match name {
        "search" => {
            let req = SearchRequest::from_args(args)?;
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let embedder = state.embedder.clone();
            let answer = tokio::task::spawn_blocking(move || search(&snap, &embedder, &req))
                .await
                .map_err(|e| ToolError::Unavailable(format!("search task failed: {e}")))??;
            Ok(serde_json::to_value(answer).expect("answers serialize"))
        }
        "index_stats" => {
            let a = Args::new(args, &["snapshot"])?;
            let snap = state.snapshot(a.string("snapshot")?.as_deref()).await?;
            Ok(index_stats(&snap))
        }
        other => Err(ToolError::Unavailable(format!(
            "unknown tool {other:?}; tools: {}",
            tool_specs().iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn index_stats(snap: &crate::snapshot::OpenSnapshot) -> Value {
    let m = &snap.manifest;
    let repos: Vec<Value> = snap
        .segments
        .iter()
        .map(|s| {
            json!({
                "repo": s.meta.repo,
                "segment": s.meta.id,
                "rows": s.meta.rows,
                "rows_per_type": s.meta.rows_per_type,
                "oldest_updated_at": s.meta.oldest_updated_at,
                "newest_updated_at": s.meta.newest_updated_at,
            })
        })
        .collect();
    json!({
        "snapshot": m.snapshot,
        "created_at": m.created_at,
        "parent": m.parent,
        "model": m.model,
        "rows": snap.segments.iter().map(|s| s.meta.rows).sum::<u64>(),
        "repos": repos,
        "build": m.build,
    })
}
