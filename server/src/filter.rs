//! Filters shared by `search` and `scan`: parsed from tool arguments, applied to rows inside
//! the index (before any cap), and checked against the snapshot so a filter that matches
//! nothing at all is reported by name.

use chrono::{DateTime, NaiveDate, Utc};
use globset::{Glob, GlobSet};
use hubdex_formats::{MAX_GLOB_CHARS, RowFilter, RowType, glob_matcher};

use crate::args::{Args, ToolError};
use crate::snapshot::OpenSnapshot;

/// Argument names every filtering tool takes.
pub(crate) const FILTER_ARGS: &[&str] = &hubdex_formats::FILTER_NAMES;

/// The states `state` accepts.
pub(crate) const STATES: [&str; 4] = ["open", "closed", "merged", "all"];

/// A checked set of filters; an absent filter matches everything. Compiled per segment into
/// index queries (`hubdex_formats::ServingIndex::compile`).
pub type Filters = RowFilter;

/// A time as every answer shows it: RFC 3339, UTC, whole seconds (`2024-05-01T12:00:00Z`);
/// the form [`parse_time`] reads back.
pub(crate) fn format_time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// Parses an ISO 8601 date or date-time (RFC 3339, or `YYYY-MM-DD` meaning midnight UTC).
pub(crate) fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, ToolError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    Err(ToolError::arg(
        name,
        format!(
            "must be an ISO 8601 date or date-time like 2024-05-01 or 2024-05-01T12:00:00Z, got {s:?}"
        ),
    ))
}

/// The `files_glob` argument compiled, when given.
pub(crate) fn files_glob(a: &Args<'_>) -> Result<Option<GlobSet>, ToolError> {
    Ok(match non_empty("files_glob", a.string("files_glob")?)? {
        None => None,
        Some(g) if g.chars().count() > MAX_GLOB_CHARS => {
            return Err(ToolError::arg(
                "files_glob",
                format!("must be at most {MAX_GLOB_CHARS} characters, got {}", g.chars().count()),
            ));
        }
        Some(g) => {
            let glob = Glob::new(&g).map_err(|e| {
                ToolError::arg("files_glob", format!("is not a valid glob: {}", e.kind()))
            })?;
            Some(glob_matcher(glob).map_err(|e| ToolError::arg("files_glob", e))?)
        }
    })
}

fn non_empty(name: &str, v: Option<String>) -> Result<Option<String>, ToolError> {
    match v {
        Some(s) if s.trim().is_empty() => Err(ToolError::arg(name, "must not be empty")),
        other => Ok(other),
    }
}

/// Reads the filter arguments.
pub(crate) fn filters_from_args(a: &Args<'_>) -> Result<Filters, ToolError> {
    let types = a
        .string_list("type")?
        .iter()
        .map(|t| {
            t.parse::<RowType>().map_err(|_| {
                ToolError::arg(
                    "type",
                    format!("unknown type {t:?}; allowed: {}", RowType::allowed()),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let state = match a.string("state")? {
        None => None,
        Some(s) if STATES.contains(&s.as_str()) => (s != "all").then_some(s),
        Some(s) => {
            return Err(ToolError::arg(
                "state",
                format!("must be one of {}, got {s:?}", STATES.join(", ")),
            ));
        }
    };
    let files_glob = files_glob(a)?;
    let since = a.string("since")?.map(|s| parse_time("since", &s)).transpose()?;
    let until = a.string("until")?.map(|s| parse_time("until", &s)).transpose()?;
    if let (Some(s), Some(u)) = (since, until)
        && s >= u
    {
        return Err(ToolError::arg(
            "since",
            format!("must be before until ({} is not before {})", s.to_rfc3339(), u.to_rfc3339()),
        ));
    }
    Ok(Filters {
        repo: non_empty("repo", a.string("repo")?)?,
        types,
        state,
        labels: a.string_list("labels")?,
        milestone: non_empty("milestone", a.string("milestone")?)?,
        assignee: non_empty("assignee", a.string("assignee")?)?,
        author: non_empty("author", a.string("author")?)?,
        path_prefix: non_empty("path_prefix", a.string("path_prefix")?)?,
        files_glob,
        since,
        until,
        // Set from the caller, never from arguments.
        scope: None,
        whole_index_statistics: false,
    })
}

/// Whether a segment can hold rows `filters` accept, judged from what the manifest says of it
/// (a `repo` filter or the caller's scope skips every segment of other repositories without
/// touching it).
pub(crate) fn may_match(filters: &Filters, seg: &hubdex_formats::Segment) -> bool {
    let repos = seg.meta.repositories();
    filters.repo.as_ref().is_none_or(|r| repos.contains(r))
        && filters.scope.as_ref().is_none_or(|s| repos.iter().any(|r| s.allows_repo(r)))
}

/// The filters that, each on its own, match no row of the snapshot: answered from each
/// segment's term dictionaries and columns, not by reading rows.
pub(crate) fn unmatched(filters: &Filters, snap: &OpenSnapshot) -> Result<Vec<String>, ToolError> {
    let mut unmatched: Vec<&'static str> = filters.set_names();
    for seg in &snap.segments {
        if unmatched.is_empty() {
            break;
        }
        let here = seg.text.unmatched(filters).map_err(index_error)?;
        unmatched.retain(|n| here.contains(n));
    }
    Ok(unmatched.into_iter().map(str::to_string).collect())
}

pub(crate) fn index_error(e: hubdex_formats::FormatError) -> ToolError {
    ToolError::Unavailable(format!("reading the index failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_take_dates_and_date_times() {
        assert_eq!(
            parse_time("since", "2024-05-01").unwrap().to_rfc3339(),
            "2024-05-01T00:00:00+00:00"
        );
        assert_eq!(
            parse_time("since", "2024-05-01T12:00:00+02:00").unwrap().to_rfc3339(),
            "2024-05-01T10:00:00+00:00"
        );
        let err = parse_time("until", "May 1st").unwrap_err().to_string();
        assert!(err.starts_with("argument `until`: must be an ISO 8601 date"), "{err}");
    }
}
