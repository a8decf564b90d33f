//! `scan`: time-ordered activity in a [since, until) window, filtered inside the index, with a
//! cursor to continue.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::filter::{
    FILTER_ARGS, Filters, filters_from_args, format_time, index_error, may_match, parse_time,
    unmatched,
};
use crate::snapshot::OpenSnapshot;

/// Rows a scan returns at most per call.
pub(crate) const MAX_LIMIT: i64 = 200;

/// The default window: this long before `until`.
pub(crate) const DEFAULT_WINDOW_DAYS: i64 = 7;

/// A checked scan request.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    /// `updated_desc` or `created_desc`.
    pub order: String,
    /// Window start (inclusive).
    pub since: DateTime<Utc>,
    /// Window end (exclusive).
    pub until: DateTime<Utc>,
    /// Rows per page.
    pub limit: usize,
    /// The filters, with the caller's scope.
    pub filters: Filters,
    /// Where the previous page stopped.
    pub after: Option<Cursor>,
    /// Answer from this snapshot; default the newest (or the cursor's).
    pub snapshot: Option<String>,
}

/// Where a scan stopped: the last row's time and id, in the snapshot it ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "s")]
    /// The snapshot the scan ran on.
    pub snapshot: String,
    #[serde(rename = "t")]
    /// The last row's time, in microseconds.
    pub time_micros: i64,
    #[serde(rename = "i")]
    /// The last row's id (ties on time are broken by id).
    pub id: String,
    /// The fingerprint of the caller's scope (absent: every repository): a cursor made under
    /// one scope is refused under another.
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Cursor {
    fn encode(&self) -> String {
        crate::args::encode_cursor(self)
    }

    fn decode(s: &str) -> Result<Cursor, ToolError> {
        crate::args::decode_cursor(s, "scan")
    }
}

/// One scanned row.
#[derive(Debug, Clone, Serialize)]
pub struct ScanItem {
    pub id: String,
    #[serde(rename = "type")]
    pub row_type: String,
    pub repo: String,
    pub number: Option<i64>,
    pub title: Option<String>,
    pub url: Option<String>,
    pub path: Option<String>,
    pub commit_sha: Option<String>,
    pub author: Option<String>,
    pub state: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub snippet: String,
}

/// The answer of a scan.
#[derive(Debug, Clone, Serialize)]
pub struct ScanAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// The order used.
    pub order: String,
    /// Window start, RFC 3339.
    pub since: String,
    /// Window end, RFC 3339.
    pub until: String,
    /// Rows returned.
    pub count: usize,
    /// Whether more rows exist (pass `cursor` for them).
    pub truncated: bool,
    /// The next page's cursor, when truncated.
    pub cursor: Option<String>,
    /// Filters that on their own match no row the caller may read.
    pub filters_unmatched: Vec<String>,
    /// The rows, newest first.
    pub results: Vec<ScanItem>,
}

impl ScanRequest {
    /// Reads and checks the scan tool's arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut allowed = vec!["order", "limit", "cursor", "snapshot"];
        allowed.extend_from_slice(FILTER_ARGS);
        let a = Args::new(map, &allowed)?;
        let mut filters = filters_from_args(&a)?;
        // The window belongs to the scan: it applies to the order's time field.
        filters.since = None;
        filters.until = None;
        let until = a
            .string("until")?
            .map(|s| parse_time("until", &s))
            .transpose()?
            .unwrap_or_else(Utc::now);
        let since = a
            .string("since")?
            .map(|s| parse_time("since", &s))
            .transpose()?
            .unwrap_or(until - Duration::days(DEFAULT_WINDOW_DAYS));
        if since >= until {
            return Err(ToolError::arg("since", "must be before until"));
        }
        let after = a.string("cursor")?.map(|c| Cursor::decode(&c)).transpose()?;
        let mut snapshot = a.string("snapshot")?;
        if let Some(c) = &after {
            match &snapshot {
                Some(s) if s != &c.snapshot => {
                    return Err(ToolError::arg(
                        "cursor",
                        format!("belongs to snapshot {}, not {s}", c.snapshot),
                    ));
                }
                _ => snapshot = Some(c.snapshot.clone()),
            }
        }
        Ok(ScanRequest {
            order: a.one_of("order", &["updated_desc", "created_desc"], "updated_desc")?,
            since,
            until,
            limit: a.int_in("limit", 1, MAX_LIMIT, 50)? as usize,
            filters,
            after,
            snapshot,
        })
    }
}

/// Runs a scan on `snap`: per segment, a range query on the order's time column with the
/// filters, the newest `limit + 1` by (time, id) kept; then merged.
pub fn scan(snap: &OpenSnapshot, req: &ScanRequest) -> Result<ScanAnswer, ToolError> {
    let scope = req.filters.scope.as_ref().map(|s| s.fingerprint());
    if req.after.as_ref().is_some_and(|c| c.scope != scope) {
        return Err(ToolError::arg(
            "cursor",
            "was made by another caller (another access scope); start the scan again without it",
        ));
    }
    let created = req.order == "created_desc";
    let after = req.after.as_ref().map(|c| (c.time_micros, c.id.as_str()));
    let mut hits: Vec<(i64, String, usize, u32)> = Vec::new();
    for (si, seg) in snap.segments.iter().enumerate() {
        if !may_match(&req.filters, seg) {
            continue;
        }
        let filter = seg.text.compile(&req.filters).map_err(index_error)?;
        let found = seg
            .text
            .scan(filter.as_ref(), created, req.since, req.until, after, req.limit + 1)
            .map_err(index_error)?;
        hits.extend(found.into_iter().map(|(t, id, doc)| (t, id, si, doc)));
    }
    // Newest first; ties on time broken by id, descending, so a cursor is exact.
    hits.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    let truncated = hits.len() > req.limit;
    hits.truncate(req.limit);
    let mut results = Vec::with_capacity(hits.len());
    for (_, _, si, doc) in &hits {
        let r = snap.segments[*si].text.row(*doc).map_err(index_error)?;
        results.push(ScanItem {
            snippet: crate::search::snippet(&r.body, &[], 200),
            row_type: r.kind().to_string(),
            created_at: format_time(r.created_at),
            updated_at: format_time(r.updated_at),
            id: r.id,
            repo: r.repo,
            number: r.number,
            title: r.title,
            url: r.url,
            path: r.path,
            commit_sha: r.commit_sha,
            author: r.author,
            state: r.state,
        });
    }
    let cursor = truncated
        .then(|| {
            hits.last().map(|(t, id, _, _)| {
                Cursor {
                    snapshot: snap.id().to_string(),
                    time_micros: *t,
                    id: id.clone(),
                    scope: scope.clone(),
                }
                .encode()
            })
        })
        .flatten();
    Ok(ScanAnswer {
        snapshot: snap.id().to_string(),
        order: req.order.clone(),
        since: format_time(Some(req.since)).unwrap_or_default(),
        until: format_time(Some(req.until)).unwrap_or_default(),
        count: results.len(),
        truncated,
        cursor,
        filters_unmatched: unmatched(&req.filters, snap)?,
        results,
    })
}
