//! `fetch`: the stored text of rows by id, and `read_span`: exact lines of an indexed file.

use hubdex_formats::Scope;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::filter::format_time;
use crate::snapshot::OpenSnapshot;

/// Ids one fetch takes at most.
pub(crate) const MAX_IDS: usize = 50;

/// Lines one read_span returns at most.
pub(crate) const MAX_SPAN_LINES: i64 = 400;

/// One fetched row.
#[derive(Debug, Clone, Serialize)]
pub struct FetchItem {
    pub id: String,
    #[serde(rename = "type")]
    pub row_type: String,
    pub repo: String,
    pub entity: String,
    pub number: Option<i64>,
    pub title: Option<String>,
    pub url: Option<String>,
    pub state: Option<String>,
    pub labels: Vec<String>,
    pub author: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub path: Option<String>,
    pub heading_path: Option<Vec<String>>,
    pub line_start: Option<i64>,
    pub line_end: Option<i64>,
    pub commit_sha: Option<String>,
    pub files_changed: Vec<String>,
    pub refs: Vec<String>,
    /// Always `"index"`: the copy stored in the snapshot, not the live source.
    pub content_source: &'static str,
    pub content: String,
    /// Length of the original text in chars.
    pub content_chars: i64,
    /// Whether `content` was cut at the index's limit (8000 chars).
    pub content_truncated: bool,
    /// Commits, pull requests and issues: the first release that shipped them, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_release: Option<crate::related::ReleaseRef>,
    /// Commits, pull requests and issues: their edges per kind (`related` lists them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edges: Option<std::collections::BTreeMap<String, usize>>,
}

/// The answer of a fetch.
#[derive(Debug, Clone, Serialize)]
pub struct FetchAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// Rows returned.
    pub count: usize,
    /// The rows, in the order asked.
    pub results: Vec<FetchItem>,
    /// Ids that name no row the caller may read.
    pub not_found: Vec<String>,
}

/// Reads `ids` (a string or a list of 1 to 50 strings).
pub(crate) fn fetch_ids(
    map: &Map<String, Value>,
) -> Result<(Vec<String>, Option<String>), ToolError> {
    let a = Args::new(map, &["ids", "snapshot"])?;
    let ids = a.string_list("ids")?;
    if ids.is_empty() {
        return Err(ToolError::arg(
            "ids",
            format!("is required: 1 to {MAX_IDS} row ids from search or scan results"),
        ));
    }
    if ids.len() > MAX_IDS {
        return Err(ToolError::arg(
            "ids",
            format!("takes at most {MAX_IDS} ids, got {}", ids.len()),
        ));
    }
    Ok((ids, a.string("snapshot")?))
}

/// Fetches rows by id; unknown ids are listed in `not_found`, the rest returned in order. A row
/// outside `scope` is not found, exactly like an unknown id.
pub fn fetch(
    snap: &OpenSnapshot,
    ids: &[String],
    scope: Option<&Scope>,
) -> Result<FetchAnswer, ToolError> {
    let mut results = Vec::new();
    let mut not_found = Vec::new();
    for id in ids {
        let row = snap.row_in_scope(id, scope).map_err(crate::filter::index_error)?;
        let Some(r) = row else {
            not_found.push(id.clone());
            continue;
        };
        let summary = crate::related::summary_of(snap, r.kind(), &r.repo, &r.entity, scope)?;
        results.push(FetchItem {
            id: r.id.clone(),
            row_type: r.kind().to_string(),
            repo: r.repo.clone(),
            entity: r.entity.clone(),
            number: r.number,
            title: r.title.clone(),
            url: r.url.clone(),
            state: r.state.clone(),
            labels: r.labels.clone(),
            author: r.author.clone(),
            created_at: format_time(r.created_at),
            updated_at: format_time(r.updated_at),
            path: r.path.clone(),
            heading_path: (!r.heading_path.is_empty()).then(|| r.heading_path.clone()),
            line_start: r.line_start,
            line_end: r.line_end,
            commit_sha: r.commit_sha.clone(),
            files_changed: r.files_changed.clone(),
            refs: r.refs.clone(),
            content_source: "index",
            content: r.body.clone(),
            content_chars: r.body_chars,
            content_truncated: r.truncated,
            first_release: summary.as_ref().and_then(|s| s.first_release.clone()),
            edges: summary.map(|s| s.edges),
        });
    }
    Ok(FetchAnswer { snapshot: snap.id().to_string(), count: results.len(), results, not_found })
}

/// The answer of read_span.
#[derive(Debug, Clone, Serialize)]
pub struct SpanAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// `owner/name`.
    pub repo: String,
    /// The file's path in the repository.
    pub path: String,
    /// The commit the file was indexed at.
    pub commit_sha: String,
    /// First line returned, 1-based.
    pub start_line: i64,
    /// Last line returned, inclusive (the file's end when it is shorter).
    pub end_line: i64,
    /// Lines in the whole file.
    pub total_lines: i64,
    /// `path:start-end@sha`, to cite.
    pub citation: String,
    /// The lines.
    pub text: String,
}

/// A checked read_span request.
#[derive(Debug, Clone)]
pub struct SpanRequest {
    /// `owner/name`.
    pub repo: String,
    /// Path inside the repository.
    pub path: String,
    /// First line, 1-based.
    pub start_line: i64,
    /// Last line, inclusive.
    pub end_line: i64,
    /// Answer from this snapshot; default the newest.
    pub snapshot: Option<String>,
}

impl SpanRequest {
    /// Reads and checks read_span's arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let a = Args::new(map, &["repo", "path", "start_line", "end_line", "snapshot"])?;
        let repo = a.required_text("repo", 200)?;
        let path = a.required_text("path", 1000)?;
        if path.starts_with('/')
            || path.contains('\\')
            || path.split('/').any(|c| c == ".." || c == "." || c.is_empty())
        {
            return Err(ToolError::arg(
                "path",
                format!(
                    "must be a relative path inside the repository, without . or .. parts, got {path:?}"
                ),
            ));
        }
        let start_line = a.int_in("start_line", 1, i64::from(u32::MAX), 1)?;
        let end_line =
            a.int_in("end_line", 1, i64::from(u32::MAX), start_line + MAX_SPAN_LINES - 1)?;
        if end_line < start_line {
            return Err(ToolError::arg(
                "end_line",
                format!("must be at least start_line ({start_line}), got {end_line}"),
            ));
        }
        if end_line - start_line + 1 > MAX_SPAN_LINES {
            return Err(ToolError::arg(
                "end_line",
                format!(
                    "spans at most {MAX_SPAN_LINES} lines from start_line, got {}",
                    end_line - start_line + 1
                ),
            ));
        }
        Ok(SpanRequest { repo, path, start_line, end_line, snapshot: a.string("snapshot")? })
    }
}

/// Returns the exact lines of an indexed file, at the commit it was indexed at. A repository
/// outside `scope` is answered exactly like one the snapshot does not hold, and a file of a row
/// type outside it like a file that is not indexed.
pub fn read_span(
    snap: &OpenSnapshot,
    req: &SpanRequest,
    scope: Option<&Scope>,
) -> Result<SpanAnswer, ToolError> {
    let segs: Vec<_> = snap
        .segments_of_repo(&req.repo)
        .into_iter()
        .filter(|_| scope.is_none_or(|s| s.allows_repo(&req.repo)))
        .collect();
    if segs.is_empty() {
        return Err(ToolError::arg(
            "repo",
            format!(
                "{} is not in snapshot {}; index_stats lists its repositories",
                req.repo,
                snap.id()
            ),
        ));
    }
    let mut file = None;
    for seg in segs {
        if let Some(files) = &seg.files {
            file = files.get(&req.repo, &req.path).map_err(crate::filter::index_error)?;
            if file.is_some() {
                break;
            }
        }
    }
    let allowed = crate::related::file_allowed(snap, &req.repo, &req.path, scope)?;
    let file = file.filter(|_| allowed);
    let Some(file) = file else {
        return Err(ToolError::arg(
            "path",
            format!(
                "{} is not an indexed file of {} in snapshot {}",
                req.path,
                req.repo,
                snap.id()
            ),
        ));
    };
    let lines: Vec<&str> = file.content.split_inclusive('\n').collect();
    let total = lines.len() as i64;
    if req.start_line > total {
        return Err(ToolError::arg(
            "start_line",
            format!("{} has {total} lines, start_line is {}", req.path, req.start_line),
        ));
    }
    let end = req.end_line.min(total);
    let text: String = lines[(req.start_line - 1) as usize..end as usize].concat();
    Ok(SpanAnswer {
        snapshot: snap.id().to_string(),
        repo: req.repo.clone(),
        path: req.path.clone(),
        commit_sha: file.commit_sha.clone(),
        start_line: req.start_line,
        end_line: end,
        total_lines: total,
        citation: format!("{}:{}-{}@{}", req.path, req.start_line, end, file.commit_sha),
        text,
    })
}
