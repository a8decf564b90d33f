//! The tools, independent of transport: their schemas, how a call is answered, and the text
//! rendering of each answer. MCP, REST and the `query` command all come through here, so they
//! return the same object.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use hubdex_formats::{RowType, Scope};

use crate::access::Caller;
use crate::args::{Args, ToolError};
use crate::fetch::{MAX_IDS, MAX_SPAN_LINES, SpanRequest, fetch, fetch_ids, read_span};
use crate::filter::STATES;
use crate::grep::{GrepRequest, Within, grep};
use crate::pickaxe::grep_history;
use crate::related::{DEFAULT_LIMIT, KIND_NAMES, RelatedRequest, related};
use crate::render::{
    fetch_text, grep_text, history_text, related_text, scan_text, search_text, span_text,
    symbols_text,
};
use crate::scan::{DEFAULT_WINDOW_DAYS, MAX_LIMIT, ScanRequest, scan};
use crate::search::{Fusion, MAX_QUERY_CHARS, SearchRequest, Sort, search};
use crate::snapshot::OpenSnapshot;
use crate::state::AppState;
use crate::symbols::{SymbolsRequest, symbols};

/// A tool as listed: name, title, description, input schema.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: &'static str,
    /// A short human title.
    pub title: &'static str,
    /// What it does, for the model reading the tool list.
    pub description: &'static str,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
}

const SCHEMA: &str = "https://json-schema.org/draft/2020-12/schema";

fn snapshot_prop() -> Value {
    json!({"type": "string", "pattern": "^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$",
        "description": "Answer from exactly this snapshot id (as named in an earlier answer) for a reproducible result. Default: the newest."})
}

/// The filter properties `search` and `scan` share.
fn filter_props() -> Map<String, Value> {
    let types: Vec<&str> = hubdex_formats::RowType::ALL.iter().map(|t| t.as_str()).collect();
    let props = json!({
        "repo": {"type": "string", "description": "Only this repository, exactly owner/name (index_stats lists them)."},
        "type": {"anyOf": [
            {"type": "string", "enum": types},
            {"type": "array", "items": {"type": "string", "enum": types}, "minItems": 1}],
            "description": "Only rows of this type, or of any of these types."},
        "state": {"type": "string", "enum": STATES, "description": "Issue/PR state; rows without a state (commits, docs) never match open/closed/merged."},
        "labels": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "Rows carrying every one of these labels (case-insensitive)."},
        "milestone": {"type": "string", "description": "Rows in this milestone."},
        "assignee": {"type": "string", "description": "Rows assigned to this login."},
        "author": {"type": "string", "description": "Rows by this login; for commits also the author's name or email."},
        "path_prefix": {"type": "string", "description": "Rows whose path, or a file the commit changed, starts with this (e.g. src/server/)."},
        "files_glob": {"type": "string", "description": "Rows whose path, or a file the commit changed, matches this glob (e.g. **/*.rs)."},
        "since": {"type": "string", "description": "Only rows updated at or after this ISO 8601 date or date-time (2024-05-01 or 2024-05-01T12:00:00Z)."},
        "until": {"type": "string", "description": "Only rows updated before this ISO 8601 date or date-time."}
    });
    match props {
        Value::Object(m) => m,
        _ => unreachable!("a literal object"),
    }
}

fn object_schema(mut props: Map<String, Value>, required: &[&str]) -> Value {
    props.insert("snapshot".into(), snapshot_prop());
    json!({"$schema": SCHEMA, "type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// Every tool the server offers.
pub fn tool_specs() -> Vec<ToolSpec> {
    let mut search_props = filter_props();
    search_props.extend(
        json!({
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                "description": "What to look for: words, a question, code identifiers, an error message."},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10,
                "description": "How many distinct entities (threads, files, commits) to return."},
            "fusion": {"type": "string", "enum": Fusion::NAMES, "default": "rrf",
                "description": "rrf combines keyword (BM25) and semantic ranking and is the best default; sparse_only for exact identifiers or error strings; dense_only for meaning when words differ."},
            "sort": {"type": "string", "enum": Sort::NAMES, "default": "relevance",
                "description": "relevance, or the most recently updated / created among the relevant."},
            "rerank": {"type": "boolean", "default": false,
                "description": "Rerank the top candidates with a cross-encoder when the server has one; the answer's rerank_applied says whether it was."}
        })
        .as_object()
        .expect("object")
        .clone(),
    );
    let mut scan_props = filter_props();
    scan_props.extend(
        json!({
            "order": {"type": "string", "enum": ["updated_desc", "created_desc"], "default": "updated_desc",
                "description": "Newest first by update time or by creation time; since/until apply to the same time."},
            "since": {"type": "string", "description": format!("Window start (inclusive), ISO 8601. Default: {DEFAULT_WINDOW_DAYS} days before until.")},
            "until": {"type": "string", "description": "Window end (exclusive), ISO 8601. Default: now."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 50, "description": "Rows per page."},
            "cursor": {"type": "string", "description": "The cursor of the previous answer, to get the next page (same snapshot)."}
        })
        .as_object()
        .expect("object")
        .clone(),
    );
    vec![
        ToolSpec {
            name: "search",
            title: "Search GitHub memory",
            description: "Hybrid search (BM25 + embeddings, fused by reciprocal rank) over the indexed repositories: \
                issues, pull requests, comments, reviews, releases, docs, commits and code. Results are distinct \
                entities; other matching rows of the same entity fold into `same_entity`. Snippets are short: use \
                `fetch` for a result's stored text and `read_span` for exact file lines. Commit, pull request and \
                issue results carry `first_release` and `edges` (cross-references per kind): call `related` for them.",
            input_schema: object_schema(search_props, &["query"]),
        },
        ToolSpec {
            name: "scan",
            title: "Scan recent activity",
            description: "Time-ordered rows (newest first) in a [since, until) window, default the last 7 days, with \
                the same filters as search. Use it for 'what changed recently'. `truncated: true` means more rows \
                exist: pass `cursor` back for the next page.",
            input_schema: object_schema(scan_props, &[]),
        },
        ToolSpec {
            name: "fetch",
            title: "Fetch rows by id",
            description: "The stored text of up to 50 rows by id (ids come from search and scan). Unknown ids are listed \
                in `not_found`; the rest are returned. The text is the index copy (`content_source: index`), cut at \
                8000 chars (`content_truncated`). Commits, pull requests and issues carry `first_release` and `edges` \
                counts, as in search.",
            input_schema: object_schema(
                json!({"ids": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_IDS}],
                    "description": "One row id or a list of 1 to 50."}})
                .as_object()
                .expect("object")
                .clone(),
                &["ids"],
            ),
        },
        ToolSpec {
            name: "read_span",
            title: "Read file lines",
            description: "Exact lines of an indexed file at the commit it was indexed at, with a citation \
                `path:start-end@sha`. Only files the snapshot holds can be read.",
            input_schema: object_schema(
                json!({
                    "repo": {"type": "string", "description": "owner/name"},
                    "path": {"type": "string", "description": "Path inside the repository, as results give it."},
                    "start_line": {"type": "integer", "minimum": 1, "default": 1, "description": "First line, 1-based."},
                    "end_line": {"type": "integer", "minimum": 1,
                        "description": format!("Last line, inclusive; at most {MAX_SPAN_LINES} lines after start_line. Default: start_line + {}.", MAX_SPAN_LINES - 1)}
                })
                .as_object()
                .expect("object")
                .clone(),
                &["repo", "path"],
            ),
        },
        ToolSpec {
            name: "grep",
            title: "Exact search in files",
            description: "Every line that a regex (Rust regex syntax, as ripgrep) matches in every text file of the indexed \
                repositories at their indexed commit: code, docs, configuration, lock and data files, vendored and \
                generated ones included and marked. Use it for 'where exactly': every call site of a function, every \
                use of a string, whether a word appears at all. Matches come in a stable order (repo, path, line) with \
                byte column spans and a read_span citation; `count` and `files` are the totals over every page, \
                `truncated: true` means pass `cursor` back for the next page. Binary files and files over 2 MiB are \
                skipped and counted. A pattern without a literal of 3 characters reads every file and may stop at \
                the time budget (`exhaustive: false`). With `in: \"history\"` it lists instead the commits whose diffs \
                add or remove a matching line (as git log -G), newest first or with `order: \"oldest\"` oldest first \
                (which commit introduced it), each with those lines, its title, pull request and first release; \
                `limit` then counts commits.",
            input_schema: object_schema(
                json!({
                    "pattern": {"type": "string", "minLength": 1, "maxLength": crate::grep::MAX_PATTERN_CHARS,
                        "description": "A regular expression (Rust regex syntax, as ripgrep), matched line by line; with fixed_strings, literal text."},
                    "fixed_strings": {"type": "boolean", "default": false, "description": "Match pattern as literal text."},
                    "case": {"type": "string", "enum": ["smart", "sensitive", "insensitive"], "default": "smart",
                        "description": "smart: insensitive unless the pattern has an upper-case letter (as ripgrep --smart-case)."},
                    "word": {"type": "boolean", "default": false, "description": "Only matches with a non-word character (or line edge) on each side."},
                    "repo": {"type": "string", "description": "Only this repository, exactly owner/name."},
                    "path_prefix": {"type": "string", "description": "Only files whose path starts with this (e.g. src/server/)."},
                    "files_glob": {"type": "string", "description": "Only files whose path matches this glob (e.g. **/*.rs)."},
                    "language": {"type": "string", "description": "Only files of this language (rust, python, markdown, toml, ... as results name them)."},
                    "skip_generated": {"type": "boolean", "default": false, "description": "Leave out vendored and generated files (vendor/, node_modules/, lock files, minified files, files marked @generated)."},
                    "context": {"type": "integer", "minimum": 0, "maximum": crate::grep::MAX_CONTEXT, "default": 0, "description": "Lines of context before and after each match (files only)."},
                    "in": {"type": "string", "enum": ["files", "history"], "default": "files",
                        "description": "files: the files at the indexed commit; history: every line each commit added or removed."},
                    "order": {"type": "string", "enum": ["newest", "oldest"], "default": "newest", "description": "History only: newest commit first, or oldest (which commit introduced it)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": crate::grep::MAX_LIMIT, "description": "Matching lines per page (default 50); commits per page in the history (default 20)."},
                    "cursor": {"type": "string", "description": "The cursor of the previous answer, for the next page (same pattern and filters)."}
                })
                .as_object()
                .expect("object")
                .clone(),
                &["pattern"],
            ),
        },
        ToolSpec {
            name: "symbols",
            title: "Find definitions",
            description: "Where a function, method, struct, class, enum, trait, interface, type, constant, module or macro \
                is defined in the indexed files (tree-sitter tags of Rust, Python, JavaScript, TypeScript, Go, Java, C, \
                C++), with its kind, the impl, class or module it is in, its signature line and a read_span citation \
                `path:start-end@sha`. Match the name exactly (default), by prefix, or as a case-insensitive substring. \
                With `references: true`, also every line naming it as a word (from grep), grouped by file, the \
                definitions marked.",
            input_schema: object_schema(
                json!({
                    "name": {"type": "string", "minLength": 1, "maxLength": crate::symbols::MAX_NAME_CHARS,
                        "description": "The name, e.g. parse_args, MemoryBudget."},
                    "match": {"type": "string", "enum": ["exact", "prefix", "substring"], "default": "exact",
                        "description": "exact and prefix match the case as written; substring either case."},
                    "kind": {"anyOf": [
                        {"type": "string", "enum": hubdex_formats::SYMBOL_KINDS},
                        {"type": "array", "items": {"type": "string", "enum": hubdex_formats::SYMBOL_KINDS}, "minItems": 1}],
                        "description": "Only definitions of this kind, or of any of these."},
                    "language": {"type": "string", "description": "Only files of this language (rust, python, go, ...)."},
                    "repo": {"type": "string", "description": "Only this repository, exactly owner/name."},
                    "path_prefix": {"type": "string", "description": "Only files whose path starts with this."},
                    "references": {"type": "boolean", "default": false,
                        "description": "Also list the lines naming it (word-bounded, case-sensitive), by file; at most 500, `references.count` counts all."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": crate::symbols::MAX_LIMIT, "default": 50,
                        "description": "Definitions listed at most; `count` counts all."}
                })
                .as_object()
                .expect("object")
                .clone(),
                &["name"],
            ),
        },
        ToolSpec {
            name: "related",
            title: "Cross-references and releases",
            description: "What an issue, pull request, commit, release or file is connected to: which commit or PR \
                closes an issue, what a commit reverts, the PR a commit came in through, which release first shipped \
                a commit (and so the issues and PRs it fixed), who mentions what, and the commits that changed a file. \
                Use it for 'which PR fixed #123', 'what did this commit revert', 'which release shipped the fix'. \
                Edges are grouped by kind and direction (out: this entity states it; in: another does), each with the \
                other end and the phrase that states it; entities only referenced (an issue of a repository indexed \
                from git alone) answer too.",
            input_schema: object_schema(
                json!({
                    "id": {"type": "string", "minLength": 1, "maxLength": 2000,
                        "description": "A row id (from search, scan or fetch), an entity (issue/123, #123, pull/123, owner/name#123, commit/<sha or 7+ char prefix>, release/<tag>, file/<path>) or a GitHub URL of an issue, pull request, commit, release or file."},
                    "repo": {"type": "string", "description": "owner/name: needed with an entity id when the snapshot holds more than one repository."},
                    "kinds": {"anyOf": [
                        {"type": "string", "enum": KIND_NAMES},
                        {"type": "array", "items": {"type": "string", "enum": KIND_NAMES}, "minItems": 1}],
                        "description": "Only these kinds (default all): closes, mentions, reverts, pull_request_of, shipped_in, changed_in (a file's commits)."},
                    "direction": {"type": "string", "enum": ["out", "in", "both"], "default": "both",
                        "description": "out: edges this entity states; in: edges to it; both."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 2, "default": 1,
                        "description": "2 also lists a few edges of each listed end (e.g. issue -> closing commit -> its release)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": crate::related::MAX_LIMIT, "default": DEFAULT_LIMIT,
                        "description": "Edges listed per kind and direction; `count` says how many exist."}
                })
                .as_object()
                .expect("object")
                .clone(),
                &["id"],
            ),
        },
        ToolSpec {
            name: "index_stats",
            title: "Index statistics",
            description: "What the index holds: snapshot id and time, the embedding model, rows per repository and \
                type, and the oldest and newest update per repository. Call it first to learn what exists.",
            input_schema: object_schema(Map::new(), &[]),
        },
    ]
}

/// How much of a call's arguments an audit line shows.
const AUDIT_ARGUMENT_CHARS: usize = 1000;

/// Answers one tool call for `caller` with its structured result, counting it in the metrics
/// under `transport` (mcp, rest, cli) and the caller's name, and writing one audit line
/// (target `hubdex::audit`) for calls that came over MCP or REST.
pub async fn call_tool_via(
    state: &Arc<AppState>,
    caller: &Caller,
    transport: &str,
    name: &str,
    args: &Map<String, Value>,
) -> Result<ToolAnswer, ToolError> {
    let started = std::time::Instant::now();
    let result = answer_tool(state, caller, name, args).await;
    let kind = result.as_ref().err().map(|e| match e {
        ToolError::Argument { .. } => "argument",
        ToolError::UnknownTool(_) => "unknown_tool",
        ToolError::Unavailable(_) => "unavailable",
    });
    let tool = if matches!(result, Err(ToolError::UnknownTool(_))) { "unknown" } else { name };
    let seconds = started.elapsed().as_secs_f64();
    state.metrics.tool(tool, transport, caller.metrics_label(), seconds, kind);
    if transport != "cli" {
        let results = match &result {
            Ok(a) => a.value["count"].as_u64().unwrap_or(1),
            Err(_) => 0,
        };
        // The arguments (query text, ids, paths) only when the operator asked for them.
        // Cut to a bounded length: an argument can be as long as a request body.
        let arguments = state.audit_queries.then(|| {
            let all = Value::Object(args.clone()).to_string();
            match all.char_indices().nth(AUDIT_ARGUMENT_CHARS) {
                Some((cut, _)) => format!("{}… ({} bytes in all)", &all[..cut], all.len()),
                None => all,
            }
        });
        tracing::info!(
            target: "hubdex::audit",
            caller = %caller.name,
            auth = caller.kind.as_str(),
            tool,
            transport,
            results,
            error = kind,
            ms = (seconds * 1000.0).round() as u64,
            arguments,
            "tool call"
        );
    }
    result
}

/// Answers one tool call with its structured result, as the local operator (every
/// repository).
pub async fn call_tool(
    state: &Arc<AppState>,
    name: &str,
    args: &Map<String, Value>,
) -> Result<Value, ToolError> {
    call_tool_as(state, &Caller::local(), name, args).await
}

/// Answers one tool call for `caller`: every tool sees only the caller's scope.
pub async fn call_tool_as(
    state: &Arc<AppState>,
    caller: &Caller,
    name: &str,
    args: &Map<String, Value>,
) -> Result<Value, ToolError> {
    answer_tool(state, caller, name, args).await.map(|a| a.value)
}

/// A tool's answer: the structured object (MCP `structuredContent`, the REST body) and its
/// text, rendered from the typed answer.
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    /// The structured answer.
    pub value: Value,
    /// The answer as text.
    pub text: String,
}

/// The answer of a typed tool result and its text rendering.
fn typed<T: serde::Serialize>(answer: &T, text: String) -> Result<ToolAnswer, ToolError> {
    let value = serde_json::to_value(answer)
        .map_err(|e| ToolError::Unavailable(format!("encoding the answer: {e}")))?;
    Ok(ToolAnswer { value, text })
}

/// Runs `tool`'s answer on the blocking pool: it reads mapped files and uses every core, which
/// the runtime's workers must not wait on.
async fn blocking<T: Send + 'static>(
    tool: &str,
    answer: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(answer)
        .await
        .map_err(|e| ToolError::Unavailable(format!("{tool} task failed: {e}")))?
}

async fn answer_tool(
    state: &Arc<AppState>,
    caller: &Caller,
    name: &str,
    args: &Map<String, Value>,
) -> Result<ToolAnswer, ToolError> {
    let scope = caller.scope.as_ref();
    match name {
        "search" => {
            let mut req = SearchRequest::from_args(args)?;
            req.filters.scope = caller.scope.clone();
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let embedder = state.embedder.clone();
            let reranker = state.reranker.clone();
            let answer =
                blocking("search", move || search(&snap, &embedder, reranker.as_deref(), &req))
                    .await?;
            typed(&answer, search_text(&answer))
        }
        "scan" => {
            let mut req = ScanRequest::from_args(args)?;
            req.filters.scope = caller.scope.clone();
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let answer = scan(&snap, &req)?;
            typed(&answer, scan_text(&answer))
        }
        "fetch" => {
            let (ids, snapshot) = fetch_ids(args)?;
            let snap = state.snapshot(snapshot.as_deref()).await?;
            let answer = fetch(&snap, &ids, scope)?;
            typed(&answer, fetch_text(&answer))
        }
        "read_span" => {
            let req = SpanRequest::from_args(args)?;
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let answer = read_span(&snap, &req, scope)?;
            typed(&answer, span_text(&answer))
        }
        "grep" => {
            let req = GrepRequest::from_args(args)?;
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let scope = caller.scope.clone();
            if req.within == Within::History {
                let answer =
                    blocking("grep", move || grep_history(&snap, &req, scope.as_ref())).await?;
                return typed(&answer, history_text(&answer));
            }
            let answer = blocking("grep", move || grep(&snap, &req, scope.as_ref())).await?;
            typed(&answer, grep_text(&answer))
        }
        "symbols" => {
            let req = SymbolsRequest::from_args(args)?;
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let scope = caller.scope.clone();
            let answer = blocking("symbols", move || symbols(&snap, &req, scope.as_ref())).await?;
            typed(&answer, symbols_text(&answer))
        }
        "related" => {
            let req = RelatedRequest::from_args(args)?;
            let snap = state.snapshot(req.snapshot.as_deref()).await?;
            let answer = related(&snap, &req, scope)?;
            typed(&answer, related_text(&answer))
        }
        "index_stats" => {
            let a = Args::new(args, &["snapshot"])?;
            let snap = state.snapshot(a.string("snapshot")?.as_deref()).await?;
            let value = index_stats(&snap, scope);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            Ok(ToolAnswer { value, text })
        }
        other => Err(ToolError::UnknownTool(other.to_string())),
    }
}

/// What the snapshot holds, as far as `scope` sees: repositories outside it are not listed,
/// not counted, and the build's totals (which count them) are left out.
fn index_stats(snap: &OpenSnapshot, scope: Option<&Scope>) -> Value {
    let m = &snap.manifest;
    let sees = |repo: &str| scope.is_none_or(|s| s.allows_repo(repo));
    // Per build segment (one per repository): a merged segment serving several says so.
    let visible: Vec<&hubdex_formats::ManifestSegment> =
        m.segments.iter().filter(|ms| sees(&ms.repo)).collect();
    let repos: Vec<Value> = visible
        .iter()
        .map(|ms| {
            let own = snap.segments.iter().find(|s| s.meta.id == ms.id);
            let merged = snap.segments.iter().find(|s| s.meta.members.contains(&ms.id));
            let mut v = match (own, merged) {
                (Some(s), _) => json!({
                    "repo": s.meta.repo,
                    "segment": s.meta.id,
                    "rows": s.meta.rows,
                    "rows_per_type": s.meta.rows_per_type,
                    "oldest_updated_at": s.meta.oldest_updated_at,
                    "newest_updated_at": s.meta.newest_updated_at,
                    "files": s.files.as_ref().map_or(0, |f| f.len()),
                }),
                (None, merged) => json!({
                    "repo": ms.repo,
                    "segment": ms.id,
                    "rows": ms.rows,
                    "rows_per_type": ms.rows_per_type,
                    "served_by": merged.map(|s| s.meta.id.clone()),
                }),
            };
            if let Some(s) = scope.filter(|s| !s.types().is_empty())
                && let Some(per_type) = v["rows_per_type"].as_object()
            {
                let kept: Map<String, Value> = per_type
                    .iter()
                    .filter(|(t, _)| t.parse::<RowType>().is_ok_and(|t| s.allows_type(t)))
                    .map(|(t, n)| (t.clone(), n.clone()))
                    .collect();
                v["rows"] = json!(kept.values().filter_map(Value::as_u64).sum::<u64>());
                v["rows_per_type"] = Value::Object(kept);
                // The times span every type, hidden ones included.
                if let Some(o) = v.as_object_mut() {
                    o.remove("oldest_updated_at");
                    o.remove("newest_updated_at");
                }
            }
            v
        })
        .collect();
    let rows: u64 = repos.iter().filter_map(|r| r["rows"].as_u64()).sum();
    let mut answer = json!({
        "snapshot": m.snapshot,
        "created_at": m.created_at,
        "parent": m.parent,
        "model": m.model,
        "rows": rows,
        "repos": repos,
        "build": m.build,
    });
    if scope.is_some() {
        answer["build"] = Value::Null;
    }
    answer
}
