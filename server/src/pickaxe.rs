//! `grep` with `in: "history"`: the commits whose diffs add or remove a line a regex matches,
//! as git's pickaxe (`git log -G`) finds them, newest or oldest first, each with those lines,
//! its title, pull request and first release. Each serving unit's `changes/` store
//! ([`hubdex_formats::ChangeStore`]) holds every commit's changed lines as one text with a
//! trigram index: the pattern is planned and verified as for files ([`mod@crate::grep`]), and each
//! matching line is placed in its file and side. Every page verifies every candidate, so `count`
//! and `commits` are the totals.

use std::time::Instant;

use grep_matcher::Matcher as _;
use grep_regex::RegexMatcher;
use hubdex_formats::{ChangeStore, ChangedCommit, GrepFile, RowType, Scope};
use serde::Serialize;

use crate::args::ToolError;
use crate::grep::{Cursor, GrepRequest, Order, TIME_BUDGET, cut, verify};
use crate::related::{CommitLinks, EntityInfo, ReleaseRef, commit_links};
use crate::snapshot::OpenSnapshot;

/// Matching lines listed of one commit; `count` says how many it has.
pub(crate) const LINES_PER_COMMIT: usize = 20;

/// One added or removed line that matches.
#[derive(Debug, Clone, Serialize)]
pub struct ChangedLine {
    /// The file's path (the new side's).
    pub path: String,
    /// `+` added or `-` removed.
    pub change: &'static str,
    /// The line without its end, cut at 300 characters.
    pub text: String,
    /// Whether `text` was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub text_truncated: bool,
    /// Each match on the line as `[start, end)` byte offsets into the whole line.
    pub columns: Vec<[usize; 2]>,
}

/// One commit whose diff adds or removes a matching line.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryMatch {
    /// `owner/name`.
    pub repo: String,
    /// The commit.
    pub commit_sha: String,
    /// Its message's first line.
    pub title: String,
    /// When it was committed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<String>,
    /// Its author, when the snapshot holds its commit row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Its commit row's id (for fetch and related), when the snapshot holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its web page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The pull request it came in through, as `related` knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<EntityInfo>,
    /// The first release that shipped it, as `related` knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_release: Option<ReleaseRef>,
    /// Its matching lines in all.
    pub count: u64,
    /// The first of them (at most 20), in the diff's order.
    pub lines: Vec<ChangedLine>,
    /// Whether `lines` lists fewer than `count`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lines_truncated: bool,
    /// Changed lines of the commit past the cap a build keeps of one commit (1 MiB), not
    /// searched: a match among them is not found.
    #[serde(skip_serializing_if = "is_zero")]
    pub hidden_lines: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The answer of grep over the history.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// Always `history`.
    #[serde(rename = "in")]
    pub within: &'static str,
    /// `newest` or `oldest` first.
    pub order: Order,
    /// Matching changed lines in all (every page's).
    pub count: u64,
    /// Commits with a matching line.
    pub commits: u64,
    /// Commits on this page.
    pub returned: usize,
    /// Whether more commits follow this page (pass `cursor` for them).
    pub truncated: bool,
    /// The next page's cursor, when truncated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Whether every candidate commit was verified: false when the time budget ran out first.
    pub exhaustive: bool,
    /// Commits with changed lines the scope and the repo filter let through.
    pub searched_commits: u64,
    /// Of them, the ones the trigram index could not rule out and the regex verified.
    pub candidate_commits: u64,
    /// Searched commits of which the cap hid changed lines (each result says how many).
    pub capped_commits: u64,
    /// Repositories in scope whose serving unit predates history grep (format 9 or older).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searchable: Vec<String>,
    /// The commits, in `order`.
    pub results: Vec<HistoryMatch>,
}

/// Whether `scope` lets the caller read the history of `repo`: commit or diff rows.
fn sees_history(scope: Option<&Scope>, repo: &str) -> bool {
    scope.is_none_or(|s| {
        s.allows_repo(repo) && (s.allows_type(RowType::Commit) || s.allows_type(RowType::Diff))
    })
}

/// A candidate's matching lines in files the path filters keep: (line, path, added).
type Kept<'a> = Vec<(u64, &'a str, bool)>;

/// A candidate commit and where it sorts.
struct Candidate<'a> {
    store: &'a ChangeStore,
    commit: ChangedCommit<'a>,
}

impl Candidate<'_> {
    /// Its place in `order`: time first (newest or oldest), then repository and SHA.
    fn key(&self, order: Order) -> (i64, &str, &str) {
        (sort_time(order, self.commit.committed_at), self.commit.repo, self.commit.sha)
    }
}

/// A commit time as `order` sorts it, ascending: negated for newest first; a commit without
/// one last either way.
fn sort_time(order: Order, t: Option<i64>) -> i64 {
    match (order, t) {
        (_, None) => i64::MAX,
        (Order::Newest, Some(t)) => t.saturating_neg(),
        (Order::Oldest, Some(t)) => t,
    }
}

/// Answers a history grep over `snap` for a caller who sees `scope`.
pub fn grep_history(
    snap: &OpenSnapshot,
    req: &GrepRequest,
    scope: Option<&Scope>,
) -> Result<HistoryAnswer, ToolError> {
    let started = Instant::now();
    let (matcher, query, scope_fp) = req.prepare(scope)?;
    let index_error = |e: hubdex_formats::FormatError| ToolError::Unavailable(e.to_string());
    let wanted =
        |repo: &str| sees_history(scope, repo) && req.repo.as_deref().is_none_or(|r| r == repo);
    let mut not_searchable = Vec::new();
    let (mut searched, mut capped) = (0u64, 0u64);
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for seg in &snap.segments {
        let Some(store) = &seg.changes else {
            let has_history = ["commit", "diff"]
                .iter()
                .any(|t| seg.meta.rows_per_type.get(*t).is_some_and(|n| *n > 0));
            if has_history && seg.meta.format_version < 10 {
                not_searchable
                    .extend(seg.meta.repositories().iter().filter(|r| wanted(r)).cloned());
            }
            continue;
        };
        for (repo, n, hidden) in store.repo_counts() {
            if wanted(repo) {
                searched += n;
                capped += hidden;
            }
        }
        for i in store.candidates(&query).map_err(index_error)? {
            let commit = store.commit(i).map_err(index_error)?;
            if wanted(commit.repo) {
                candidates.push(Candidate { store, commit });
            }
        }
    }
    candidates.sort_by(|a, b| a.key(req.order).cmp(&b.key(req.order)));
    let files: Vec<GrepFile<'_>> = candidates.iter().map(|c| c.commit.as_file()).collect();
    let (found, exhaustive) = verify(&matcher, &files, started + TIME_BUDGET);
    // Each candidate's matching lines in files the path filters keep: (line, path, added).
    let mut matched: Vec<(usize, Kept<'_>)> = Vec::new();
    for (k, lines) in found.into_iter().enumerate() {
        let c = &candidates[k];
        let mut kept = Vec::new();
        for n in lines {
            let (path, added) = c.store.place(&c.commit, n).map_err(index_error)?;
            let keep = req.path_prefix.as_deref().is_none_or(|p| path.starts_with(p))
                && req.files_glob.as_ref().is_none_or(|g| g.is_match(path));
            if keep {
                kept.push((n, path, added));
            }
        }
        if !kept.is_empty() {
            matched.push((k, kept));
        }
    }
    let count: u64 = matched.iter().map(|(_, l)| l.len() as u64).sum();
    let commits = matched.len() as u64;
    // The page: commits after the cursor, in order.
    let after =
        req.after.as_ref().map(|c| (sort_time(req.order, c.time), c.repo.clone(), c.path.clone()));
    let mut page = Vec::new();
    let mut truncated = false;
    for (k, lines) in &matched {
        let key = candidates[*k].key(req.order);
        if after.as_ref().is_some_and(|(t, r, s)| key <= (*t, r.as_str(), s.as_str())) {
            continue;
        }
        if page.len() == req.limit {
            truncated = true;
            break;
        }
        page.push((&candidates[*k], lines));
    }
    let mut results = Vec::with_capacity(page.len());
    for (c, lines) in &page {
        results.push(one_commit(snap, &matcher, c, lines, scope)?);
    }
    let cursor = truncated.then(|| {
        let last = page.last().expect("a truncated page holds a commit");
        Cursor {
            snapshot: snap.id().to_string(),
            repo: last.0.commit.repo.to_string(),
            path: last.0.commit.sha.to_string(),
            line: 0,
            time: last.0.commit.committed_at,
            query: req.fingerprint.clone(),
            scope: scope_fp.clone(),
        }
        .encode()
    });
    not_searchable.sort();
    not_searchable.dedup();
    Ok(HistoryAnswer {
        snapshot: snap.id().to_string(),
        within: "history",
        order: req.order,
        count,
        commits,
        returned: results.len(),
        truncated,
        cursor,
        exhaustive,
        searched_commits: searched,
        candidate_commits: candidates.len() as u64,
        capped_commits: capped,
        not_searchable,
        results,
    })
}

/// One commit of the page, with its first matching lines and what `related` knows of it.
fn one_commit(
    snap: &OpenSnapshot,
    matcher: &RegexMatcher,
    c: &Candidate<'_>,
    lines: &[(u64, &str, bool)],
    scope: Option<&Scope>,
) -> Result<HistoryMatch, ToolError> {
    let commit = &c.commit;
    let shown = &lines[..lines.len().min(LINES_PER_COMMIT)];
    let mut listed = Vec::with_capacity(shown.len());
    let (mut number, mut start) = (1u64, 0usize);
    for &(n, path, added) in shown {
        // The lines come in order: walk the text once.
        while number < n {
            start += memchr::memchr(b'\n', &commit.lines[start..]).map_or(0, |i| i + 1);
            number += 1;
        }
        let end =
            memchr::memchr(b'\n', &commit.lines[start..]).map_or(commit.lines.len(), |i| start + i);
        let line = &commit.lines[start..end];
        let mut columns = Vec::new();
        let _ = matcher.find_iter(line, |m| {
            columns.push([m.start(), m.end()]);
            true
        });
        let (text, text_truncated) = cut(line);
        listed.push(ChangedLine {
            path: path.to_string(),
            change: if added { "+" } else { "-" },
            text,
            text_truncated,
            columns,
        });
    }
    let CommitLinks { row, pull_request, first_release } =
        commit_links(snap, commit.repo, commit.sha, scope)?;
    let committed_at = commit
        .committed_at
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    Ok(HistoryMatch {
        repo: commit.repo.to_string(),
        commit_sha: commit.sha.to_string(),
        title: commit.title.to_string(),
        committed_at,
        author: row.as_ref().and_then(|r| r.author.clone()),
        id: row.as_ref().map(|r| r.id.clone()),
        url: row.as_ref().and_then(|r| r.url.clone()),
        pull_request,
        first_release,
        count: lines.len() as u64,
        lines: listed,
        lines_truncated: lines.len() > shown.len(),
        hidden_lines: commit.hidden_lines,
    })
}
