//! Filters shared by `search` and `scan`: parsed from tool arguments, applied to rows inside
//! the index (before any cap), and checked against the snapshot so a filter that matches
//! nothing at all is reported by name.

use chrono::{DateTime, NaiveDate, Utc};
use globset::{Glob, GlobMatcher};
use hubdex_formats::{Row, RowType};

use crate::args::{Args, ToolError};
use crate::snapshot::OpenSnapshot;

/// Argument names every filtering tool takes.
pub(crate) const FILTER_ARGS: &[&str] = &[
    "repo",
    "type",
    "state",
    "labels",
    "milestone",
    "assignee",
    "author",
    "path_prefix",
    "files_glob",
    "since",
    "until",
];

/// The states `state` accepts.
pub(crate) const STATES: [&str; 4] = ["open", "closed", "merged", "all"];

/// A named test a row must pass.
type Check<'a> = (&'static str, Box<dyn Fn(&Row) -> bool + 'a>);

/// A checked set of filters; an absent filter matches everything.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub repo: Option<String>,
    pub types: Vec<RowType>,
    pub state: Option<String>,
    pub labels: Vec<String>,
    pub milestone: Option<String>,
    pub assignee: Option<String>,
    pub author: Option<String>,
    pub path_prefix: Option<String>,
    pub files_glob: Option<(String, GlobMatcher)>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
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

fn non_empty(name: &str, v: Option<String>) -> Result<Option<String>, ToolError> {
    match v {
        Some(s) if s.trim().is_empty() => Err(ToolError::arg(name, "must not be empty")),
        other => Ok(other),
    }
}

impl Filters {
    /// Reads the filter arguments.
    pub(crate) fn from_args(a: &Args<'_>) -> Result<Self, ToolError> {
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
        let files_glob = match non_empty("files_glob", a.string("files_glob")?)? {
            None => None,
            Some(g) => {
                let m = Glob::new(&g)
                    .map_err(|e| ToolError::arg("files_glob", format!("is not a valid glob: {e}")))?
                    .compile_matcher();
                Some((g, m))
            }
        };
        let since = a.string("since")?.map(|s| parse_time("since", &s)).transpose()?;
        let until = a.string("until")?.map(|s| parse_time("until", &s)).transpose()?;
        if let (Some(s), Some(u)) = (since, until)
            && s >= u
        {
            return Err(ToolError::arg(
                "since",
                format!(
                    "must be before until ({} is not before {})",
                    s.to_rfc3339(),
                    u.to_rfc3339()
                ),
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
        })
    }

    /// Whether no filter is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.checks().is_empty()
    }

    /// The names of the filters that are set, each with its test.
    fn checks(&self) -> Vec<Check<'_>> {
        let mut c: Vec<Check<'_>> = Vec::new();
        if let Some(repo) = &self.repo {
            c.push(("repo", Box::new(move |r: &Row| &r.repo == repo)));
        }
        if !self.types.is_empty() {
            c.push(("type", Box::new(move |r: &Row| self.types.contains(&r.kind()))));
        }
        if let Some(state) = &self.state {
            c.push(("state", Box::new(move |r: &Row| r.state.as_deref() == Some(state.as_str()))));
        }
        if !self.labels.is_empty() {
            c.push((
                "labels",
                Box::new(move |r: &Row| {
                    self.labels.iter().all(|l| r.labels.iter().any(|x| x.eq_ignore_ascii_case(l)))
                }),
            ));
        }
        if let Some(m) = &self.milestone {
            c.push((
                "milestone",
                Box::new(move |r: &Row| {
                    r.milestone.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(m))
                }),
            ));
        }
        if let Some(a) = &self.assignee {
            c.push((
                "assignee",
                Box::new(move |r: &Row| r.assignees.iter().any(|x| x.eq_ignore_ascii_case(a))),
            ));
        }
        if let Some(a) = &self.author {
            c.push((
                "author",
                Box::new(move |r: &Row| r.author.as_deref().is_some_and(|x| author_matches(x, a))),
            ));
        }
        if let Some(p) = &self.path_prefix {
            c.push((
                "path_prefix",
                Box::new(move |r: &Row| {
                    r.path.as_deref().is_some_and(|x| x.starts_with(p.as_str()))
                        || r.files_changed.iter().any(|f| f.starts_with(p.as_str()))
                }),
            ));
        }
        if let Some((_, g)) = &self.files_glob {
            c.push((
                "files_glob",
                Box::new(move |r: &Row| {
                    r.path.as_deref().is_some_and(|x| g.is_match(x))
                        || r.files_changed.iter().any(|f| g.is_match(f))
                }),
            ));
        }
        if let Some(s) = self.since {
            c.push(("since", Box::new(move |r: &Row| r.updated_at.is_some_and(|t| t >= s))));
        }
        if let Some(u) = self.until {
            c.push(("until", Box::new(move |r: &Row| r.updated_at.is_some_and(|t| t < u))));
        }
        c
    }

    /// Whether a row passes every filter.
    pub fn matches(&self, row: &Row) -> bool {
        self.checks().iter().all(|(_, f)| f(row))
    }

    /// Per segment, which rows pass (`None` when no filter is set: all pass).
    pub(crate) fn allowed(&self, snap: &OpenSnapshot) -> Option<Vec<Vec<bool>>> {
        if self.is_empty() {
            return None;
        }
        let checks = self.checks();
        Some(
            snap.segments
                .iter()
                .map(|s| s.rows.iter().map(|r| checks.iter().all(|(_, f)| f(r))).collect())
                .collect(),
        )
    }

    /// The filters that, each on its own, match no row of the snapshot.
    pub(crate) fn unmatched(&self, snap: &OpenSnapshot) -> Vec<String> {
        self.checks()
            .into_iter()
            .filter(|(_, f)| !snap.segments.iter().any(|s| s.rows.iter().any(f)))
            .map(|(name, _)| name.to_string())
            .collect()
    }
}

/// An author filter matches a login exactly, or a commit author `Name <email>` by whole
/// string, name or email, ignoring case.
fn author_matches(author: &str, wanted: &str) -> bool {
    if author.eq_ignore_ascii_case(wanted) {
        return true;
    }
    match author.rsplit_once(" <") {
        Some((name, email)) => {
            name.eq_ignore_ascii_case(wanted)
                || email.trim_end_matches('>').eq_ignore_ascii_case(wanted)
        }
        None => false,
    }
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

    #[test]
    fn authors_match_by_login_name_or_email() {
        assert!(author_matches("octocat", "OctoCat"));
        assert!(author_matches("Ada Lovelace <ada@example.com>", "ada@example.com"));
        assert!(author_matches("Ada Lovelace <ada@example.com>", "ada lovelace"));
        assert!(!author_matches("Ada Lovelace <ada@example.com>", "ada"));
    }
}
