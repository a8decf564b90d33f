//! The cross-references of one repository (see `hubdex_formats::Edge`): built from its rows
//! and its git history once per build, so an incremental build recomputes them with the rows
//! it rewrites and `shipped_in` follows the tags as they are now.
//!
//! - `closes`: GitHub's closing keywords in commit messages and pull request descriptions;
//! - `reverts`: `This reverts commit <sha>`, else a `Revert "<subject>"` subject (the newest
//!   earlier commit with that subject, so a revert of a revert finds the revert);
//! - `pull_request_of`: "Merge pull request #N", a squash subject ending in `(#N)`, and the
//!   merge commit the crawl gives a merged pull request;
//! - `mentions`: every other `#N`, `owner/repo#N`, issue / PR / commit / release URL and commit
//!   SHA (a SHA only when it names a commit of this repository);
//! - `shipped_in`: a commit to the first release (by tag date) whose tag contains it; an issue
//!   or pull request to the earliest release of the commits that close or merge it.
//!
//! In a tagged history nearly every commit has a `shipped_in` edge, and listed they held about
//! 1 KB a commit (the edge's strings and the set that deduplicates edges): [`RepoEdges`] keeps
//! a commit's release as two numbers instead ([`CommitReleases`]), and its edge is made when
//! the build cuts that commit's rows. The edges commit messages state go to a temporary file as
//! they are made, a record a commit, read back when the build cuts its rows
//! ([`MessageEdges`]), so they do not grow the crawl with the history.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, OnceLock};

use chrono::{DateTime, Utc};

use hubdex_formats::{Edge, EdgeKind, Row, RowType, entity_web_path, row_id};
use regex::Regex;

use crate::graph::history::{CommitNo, History};
use crate::sources::git::Tag;
use crate::sources::refs::find_refs;
use crate::sources::tree::TreeFiles;
use crate::temp::spill::Records;

/// Tags that version the repository itself: `1.2`, `1.2.3`, `v1.2.3`, `v1.2.3-rc.1`; not a
/// sub-package's `name-1.2.3`.
static VERSION_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^v?[0-9]+(\.[0-9]+){1,3}([-+][0-9A-Za-z.+-]+)?$").expect("a valid regex")
});

/// GitHub's closing keywords followed by what they close.
static CLOSING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?[ \t]+(#[0-9]+|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#[0-9]+|https?://\S+/issues/[0-9]+)",
    )
    .expect("a valid regex")
});

/// `This reverts commit <sha>` (git revert's line).
static REVERTS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bthis reverts commit ([0-9a-f]{7,40})\b").expect("a valid regex")
});

/// Which tags are releases, by the rule a repository's config or its crawl gives.
#[derive(Debug, Clone, Default)]
pub(crate) enum ReleaseTags {
    /// The repository's `X.Y.Z` / `vX.Y.Z` tags (no crawled releases, no pattern).
    #[default]
    Versions,
    /// The tags of these releases (the crawl's).
    Named(HashSet<String>),
    /// Tags matching `release_tags` in hubdex.toml.
    Pattern(Regex),
}

impl ReleaseTags {
    /// The rule for a repository: its pattern when it has one, else its crawled releases when
    /// there are any, else version tags.
    pub(crate) fn of(pattern: Option<&Regex>, rows: &[Row]) -> ReleaseTags {
        if let Some(p) = pattern {
            return ReleaseTags::Pattern(p.clone());
        }
        let named: HashSet<String> = rows
            .iter()
            .filter(|r| r.kind() == RowType::Release && r.state.as_deref() != Some("draft"))
            .filter_map(|r| r.tag.clone())
            .collect();
        if named.is_empty() { ReleaseTags::Versions } else { ReleaseTags::Named(named) }
    }

    fn is_release(&self, tag: &str) -> bool {
        match self {
            ReleaseTags::Versions => VERSION_TAG.is_match(tag),
            ReleaseTags::Named(n) => n.contains(tag),
            ReleaseTags::Pattern(p) => p.is_match(tag),
        }
    }
}

/// Where an entity of `repo` is on the web, given this repository's web address `web`
/// (`https://github.com/o/r` or a GitHub Enterprise one).
fn url_of(web: Option<&str>, this_repo: &str, repo: &str, entity: &str) -> Option<String> {
    let base = web?.strip_suffix(this_repo)?.trim_end_matches('/');
    Some(format!("{base}/{repo}/{}", entity_web_path(entity)?))
}

/// The entity a reference names: (repository, entity). `#N` and issue or pull URLs give
/// `issue/N`; a SHA gives `commit/<full sha>` when it is one of this repository's commits.
fn resolve_ref(r: &str, repo: &str, history: &History) -> Option<(String, String)> {
    if let Some(n) = r.strip_prefix('#') {
        return Some((repo.to_string(), format!("issue/{n}")));
    }
    if let Some(rest) = r.strip_prefix("https://").or_else(|| r.strip_prefix("http://")) {
        let path = rest.split(['#', '?']).next()?;
        let parts: Vec<&str> = path.split('/').collect();
        let (other, kind) = (format!("{}/{}", parts.get(1)?, parts.get(2)?), *parts.get(3)?);
        let id = *parts.get(4)?;
        let entity = match kind {
            "issues" | "pull" if id.chars().all(|c| c.is_ascii_digit()) && !id.is_empty() => {
                format!("issue/{id}")
            }
            "commit" | "commits" if id.len() >= 7 && id.chars().all(|c| c.is_ascii_hexdigit()) => {
                let full =
                    if other == repo { history.resolve_prefix(id)?.to_string() } else { id.into() };
                format!("commit/{}", full.to_ascii_lowercase())
            }
            "releases" if id == "tag" => format!("release/{}", parts.get(5)?),
            _ => return None,
        };
        return Some((other, entity));
    }
    if let Some((other, n)) = r.split_once('#') {
        return Some((other.to_string(), format!("issue/{n}")));
    }
    history.resolve_prefix(r).map(|full| (repo.to_string(), format!("commit/{full}")))
}

/// The issues of `repo` that `text` closes with GitHub's closing keywords (`Fixes #5`,
/// `closes owner/repo#5`, `resolves https://github.com/owner/repo/issues/5`): their numbers, in
/// order, once each.
pub(crate) fn closed_issues(text: &str, repo: &str) -> Vec<i64> {
    let no_commits = History::default();
    let mut out = Vec::new();
    for m in CLOSING.captures_iter(text) {
        let Some((target_repo, entity)) = resolve_ref(&m[1], repo, &no_commits) else { continue };
        let n = entity.strip_prefix("issue/").and_then(|n| n.parse::<i64>().ok());
        if let Some(n) = n.filter(|n| target_repo.eq_ignore_ascii_case(repo) && !out.contains(n)) {
            out.push(n);
        }
    }
    out
}

/// The line of `text` holding byte offset `at`, trimmed and cut to about 200 chars around it.
fn phrase_at(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = text[start..end].trim();
    if line.chars().count() <= 200 {
        return line.to_string();
    }
    let skip = text[start..at].chars().count().saturating_sub(80);
    let cut: String = line.chars().skip(skip).take(200).collect();
    format!("…{}…", cut.trim())
}

/// The phrase of `text` that mentions `r` (the first line holding it).
fn phrase_of(text: &str, r: &str) -> String {
    text.find(r).map_or_else(|| r.to_string(), |at| phrase_at(text, at))
}

/// Edges of one repository, deduplicated: one per (kind, source, target), the first evidence.
struct EdgeSet<'a> {
    repo: &'a str,
    web: Option<&'a str>,
    seen: HashSet<(EdgeKind, String, String, String)>,
    edges: Vec<Edge>,
}

impl<'a> EdgeSet<'a> {
    fn add(
        &mut self,
        kind: EdgeKind,
        source: &str,
        target: (String, String),
        evidence_id: Option<&str>,
        evidence: String,
    ) {
        let (target_repo, target) = target;
        if target_repo == self.repo && target == source {
            return;
        }
        if self.seen.insert((kind, source.to_string(), target_repo.clone(), target.clone())) {
            self.edges.push(Edge {
                kind,
                source_repo: self.repo.to_string(),
                source: source.to_string(),
                target_url: url_of(self.web, self.repo, &target_repo, &target),
                target_repo,
                target,
                evidence_id: evidence_id.map(str::to_string),
                evidence,
            });
        }
    }

    fn has(&self, kind: EdgeKind, source: &str, target: &(String, String)) -> bool {
        self.seen.contains(&(kind, source.to_string(), target.0.clone(), target.1.clone()))
    }
}

/// The number a squash subject (`… (#12)`) or a GitHub merge subject ("Merge pull request #12
/// from …") names.
fn pull_request_number(subject: &str) -> Option<u64> {
    if let Some(rest) = subject.strip_prefix("Merge pull request #") {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return digits.parse().ok();
    }
    subject.trim_end().strip_suffix(')')?.rsplit_once("(#")?.1.parse().ok()
}

/// A repository's edges ([`repo_edges`]), in their order: the listed ones with their places,
/// and each commit's own, read back or made when asked ([`CommitEdges`]).
#[derive(Debug, Default)]
pub(crate) struct RepoEdges {
    /// Every edge but the commits' own, each with its place in the order.
    pub(crate) listed: Vec<(usize, Edge)>,
    pub(crate) commits: CommitEdges,
}

impl RepoEdges {
    /// Edges already made, in this order (tests).
    #[cfg(test)]
    pub(crate) fn of(edges: Vec<Edge>) -> RepoEdges {
        RepoEdges { listed: edges.into_iter().enumerate().collect(), ..RepoEdges::default() }
    }

    /// Every edge, in order, the commits' made now: for what holds them all at once (tests).
    #[cfg(test)]
    pub(crate) fn into_vec(mut self, history: &History) -> Vec<Edge> {
        let mut all = self.listed;
        all.extend(self.commits.take_rest(history));
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, e)| e).collect()
    }
}

/// No release, or an edge already taken.
const NO_RELEASE: u32 = u32::MAX;

/// The edges of a commit, each with its place in the repository's order: those its message
/// states, then its `shipped_in` one.
#[derive(Debug, Default)]
pub(crate) struct CommitEdges {
    pub(crate) messages: MessageEdges,
    pub(crate) releases: CommitReleases,
}

impl CommitEdges {
    /// The edges of the commit `entity` names (`commit/<sha>`); once.
    pub(crate) fn take(&mut self, history: &History, entity: &str) -> Vec<(usize, Edge)> {
        if self.messages.records.is_empty() && self.releases.release.is_empty() {
            return Vec::new();
        }
        match entity.strip_prefix("commit/").and_then(|sha| history.find(sha)) {
            Some(c) => self.take_commit(history, c),
            None => Vec::new(),
        }
    }

    /// The edges of commit `c`; once.
    pub(crate) fn take_commit(&mut self, history: &History, c: CommitNo) -> Vec<(usize, Edge)> {
        let mut edges = self.messages.take(history, c);
        edges.extend(self.releases.take_commit(history, c));
        edges
    }

    /// The edges of commit `c` not taken yet; left in place.
    pub(crate) fn peek(&self, history: &History, c: CommitNo) -> Vec<(usize, Edge)> {
        let mut edges = self.messages.peek(history, c);
        edges.extend(self.releases.peek(history, c));
        edges
    }

    /// Every edge not taken yet, in order.
    pub(crate) fn take_rest(&mut self, history: &History) -> Vec<(usize, Edge)> {
        let mut edges = self.messages.take_rest(history);
        edges.extend(self.releases.take_rest(history));
        edges.sort_by_key(|(i, _)| *i);
        edges
    }

    /// Where a failed read of the message edges is kept: the build stops with it before
    /// anything it made is published.
    pub(crate) fn failures(&self) -> Arc<OnceLock<String>> {
        Arc::clone(&self.messages.failed)
    }
}

/// No record: a commit whose message states no edge, or whose edges were taken.
const NO_RECORD: u64 = u64::MAX;

/// What a record keeps of an edge a commit's message states; its source (the commit), source
/// repository, evidence row (the commit's) and target URL are made again from the commit.
type Stated = (usize, EdgeKind, String, String, String);

/// The edges commit messages state (`closes`, `reverts`, `pull_request_of`, `mentions`), in an
/// unnamed temporary file (removed by the system once closed, however the build ends): a
/// record a commit that has any, its edges with their places, read back when the build cuts
/// that commit's rows. A read that fails gives no edges and is kept ([`Self::failed`]).
#[derive(Debug, Default)]
pub(crate) struct MessageEdges {
    repo: String,
    web: Option<String>,
    /// Whether every commit has a row (the edges' evidence).
    commit_rows: bool,
    /// Per commit number: where its record starts, [`NO_RECORD`] for none or once taken.
    at: Vec<u64>,
    records: Records,
    failed: Arc<OnceLock<String>>,
}

impl MessageEdges {
    fn new(repo: &str, web: Option<&str>, commit_rows: bool, commits: usize) -> MessageEdges {
        MessageEdges {
            repo: repo.to_string(),
            web: web.map(str::to_string),
            commit_rows,
            at: vec![NO_RECORD; commits],
            ..MessageEdges::default()
        }
    }

    /// Keeps `edges`, the edges commit `c`'s message states, from place `first` on.
    fn keep(&mut self, c: CommitNo, first: usize, edges: &[Edge]) -> std::io::Result<()> {
        if edges.is_empty() {
            return Ok(());
        }
        let stated: Vec<Stated> = edges
            .iter()
            .enumerate()
            .map(|(k, e)| {
                let (repo, target, evidence) = (&e.target_repo, &e.target, &e.evidence);
                (first + k, e.kind, repo.clone(), target.clone(), evidence.clone())
            })
            .collect();
        let json = serde_json::to_vec(&stated).map_err(std::io::Error::other)?;
        let start = self.records.append(&json)?;
        if let Some(at) = self.at.get_mut(c as usize) {
            *at = start;
        }
        Ok(())
    }

    /// The edges commit `c`'s message states, with their places; left in place.
    fn peek(&self, history: &History, c: CommitNo) -> Vec<(usize, Edge)> {
        let Some(&at) = self.at.get(c as usize) else { return Vec::new() };
        if at == NO_RECORD {
            return Vec::new();
        }
        match self.read(at) {
            Ok(stated) => {
                let source = format!("commit/{}", history.sha(c));
                stated.into_iter().map(|s| (s.0, self.edge(&source, s))).collect()
            }
            Err(e) => {
                self.failed.get_or_init(|| format!("reading back a commit's edges: {e}"));
                Vec::new()
            }
        }
    }

    /// The edges commit `c`'s message states; once.
    fn take(&mut self, history: &History, c: CommitNo) -> Vec<(usize, Edge)> {
        let edges = self.peek(history, c);
        if let Some(at) = self.at.get_mut(c as usize) {
            *at = NO_RECORD;
        }
        edges
    }

    /// Every edge not taken yet, in order.
    fn take_rest(&mut self, history: &History) -> Vec<(usize, Edge)> {
        let left: Vec<CommitNo> =
            history.commits().filter(|&c| self.at.get(c as usize) != Some(&NO_RECORD)).collect();
        left.into_iter().flat_map(|c| self.take(history, c)).collect()
    }

    /// The edges commit `c`'s message states, without their places (for [`repo_edges`]).
    fn of(&self, history: &History, c: CommitNo) -> Vec<Edge> {
        self.peek(history, c).into_iter().map(|(_, e)| e).collect()
    }

    fn read(&self, at: u64) -> std::io::Result<Vec<Stated>> {
        serde_json::from_slice(&self.records.read(at)?).map_err(std::io::Error::other)
    }

    /// The edge a record keeps, of the commit `source` names.
    fn edge(&self, source: &str, (_, kind, target_repo, target, evidence): Stated) -> Edge {
        let repo = self.repo.as_str();
        Edge {
            kind,
            source_repo: repo.to_string(),
            source: source.to_string(),
            target_url: url_of(self.web.as_deref(), repo, &target_repo, &target),
            target_repo,
            target,
            evidence_id: self.commit_rows.then(|| row_id(RowType::Commit, repo, source, 0)),
            evidence,
        }
    }
}

/// The `shipped_in` edge of each commit a release holds, kept as numbers and made when asked:
/// the one [`repo_edges`] would have listed, at the same place in the order.
#[derive(Debug, Default)]
pub(crate) struct CommitReleases {
    repo: String,
    web: Option<String>,
    /// Whether every commit has a row (the edge's evidence).
    commit_rows: bool,
    /// The release tags, oldest first: name and date.
    tags: Vec<(String, Option<DateTime<Utc>>)>,
    /// Per commit number: its release (a place in `tags`), [`NO_RELEASE`] for none or once its
    /// edge is taken.
    release: Vec<u32>,
    /// Per commit number: its edge's place in the repository's edge order.
    place: Vec<u32>,
}

impl CommitReleases {
    /// How many edges are left to take.
    pub(crate) fn len(&self) -> usize {
        self.release.iter().filter(|&&r| r != NO_RELEASE).count()
    }

    /// Every edge not taken yet, in order.
    pub(crate) fn take_rest(&mut self, history: &History) -> Vec<(usize, Edge)> {
        let left: Vec<CommitNo> = history.commits().filter(|&c| self.holds(c)).collect();
        left.into_iter().filter_map(|c| self.take_commit(history, c)).collect()
    }

    fn holds(&self, c: CommitNo) -> bool {
        self.release.get(c as usize).is_some_and(|&r| r != NO_RELEASE)
    }

    /// The edge of commit `c`, with its place; once.
    pub(crate) fn take_commit(&mut self, history: &History, c: CommitNo) -> Option<(usize, Edge)> {
        let edge = self.peek(history, c);
        *self.release.get_mut(c as usize)? = NO_RELEASE;
        edge
    }

    /// The edge of commit `c` with its place, when it has one not taken yet; left in place.
    pub(crate) fn peek(&self, history: &History, c: CommitNo) -> Option<(usize, Edge)> {
        let ti = *self.release.get(c as usize)?;
        if ti == NO_RELEASE {
            return None;
        }
        let (name, date) = self.tags.get(ti as usize)?;
        let sha = history.sha(c);
        let date = date.map(|d| format!(" ({})", d.date_naive())).unwrap_or_default();
        let evidence = format!("tag {name}{date} contains {}", &sha[..sha.floor_char_boundary(12)]);
        let source = format!("commit/{sha}");
        let target = format!("release/{name}");
        let edge = Edge {
            kind: EdgeKind::ShippedIn,
            source_repo: self.repo.clone(),
            evidence_id: self.commit_rows.then(|| row_id(RowType::Commit, &self.repo, &source, 0)),
            source,
            target_url: url_of(self.web.as_deref(), &self.repo, &self.repo, &target),
            target_repo: self.repo.clone(),
            target,
            evidence,
        };
        Some((self.place[c as usize] as usize, edge))
    }
}

/// Every edge of `repo`, from `history`, the repository's other final `rows` (threads,
/// releases: after its rules; its history's rows, if given, are passed over) and its files at
/// HEAD (`tree`: docs, wiki pages, code, read back one path at a time). `commit_rows` says
/// whether every commit of the history has a row (evidence of its edges); `web` is the
/// repository's web address (edge URLs); `releases` says which tags are releases.
pub(crate) fn repo_edges(
    repo: &str,
    web: Option<&str>,
    rows: &[Row],
    tree: &TreeFiles,
    history: &History,
    commit_rows: bool,
    releases: &ReleaseTags,
) -> std::io::Result<RepoEdges> {
    let commit_row =
        |sha: &str| commit_rows.then(|| row_id(RowType::Commit, repo, &format!("commit/{sha}"), 0));

    // Subjects, for `Revert "<subject>"` without a SHA: the newest earlier commit wins. Only
    // the subjects some revert names are listed: a map of every subject would grow with the
    // history.
    fn subject_of(message: &str) -> &str {
        message.lines().next().unwrap_or("").trim()
    }
    fn reverted_subject(subject: &str) -> Option<&str> {
        subject.strip_prefix("Revert \"")?.strip_suffix('"')
    }
    let mut by_subject: HashMap<String, Vec<CommitNo>> = history
        .commits()
        .filter_map(|c| Some(reverted_subject(subject_of(&history.edge_lines(c)))?.to_string()))
        .map(|s| (s, Vec::new()))
        .collect();
    if !by_subject.is_empty() {
        for c in history.commits() {
            if let Some(commits) = by_subject.get_mut(subject_of(&history.edge_lines(c))) {
                commits.push(c);
            }
        }
    }

    // Each commit's edges have that commit as their source, so each is deduplicated within its
    // own: they are kept a commit at a time, out of memory, and no set holds them all.
    let mut messages = MessageEdges::new(repo, web, commit_rows, history.len());
    let mut stated = 0;
    for c in history.commits() {
        let mut set = EdgeSet { repo, web, seen: HashSet::new(), edges: Vec::new() };
        let (sha, committed_at) = (history.sha(c), history.committed_at(c));
        let source = format!("commit/{sha}");
        let evidence_id = commit_row(&sha);
        let evidence_id = evidence_id.as_deref();
        let msg = history.edge_lines(c);
        let msg = msg.as_ref();
        let subject = subject_of(msg);
        for m in CLOSING.captures_iter(msg) {
            let whole = m.get(0).expect("group 0");
            if let Some(t) = resolve_ref(&m[1], repo, history).filter(|t| t.1.starts_with("issue/"))
            {
                set.add(EdgeKind::Closes, &source, t, evidence_id, phrase_at(msg, whole.start()));
            }
        }
        let reverted = REVERTS.captures(msg).and_then(|m| {
            let full = history.resolve_prefix(&m[1])?;
            Some((full.to_string(), phrase_at(msg, m.get(0)?.start())))
        });
        let reverted = reverted.or_else(|| {
            let candidates = by_subject.get(reverted_subject(subject)?)?;
            let earlier = candidates
                .iter()
                .map(|&o| (history.committed_at(o), o))
                .filter(|&(t, o)| o != c && (committed_at.is_none() || t <= committed_at))
                .max_by_key(|&(t, _)| t)?;
            Some((history.sha(earlier.1).to_string(), subject.to_string()))
        });
        if let Some((sha, phrase)) = reverted {
            set.add(
                EdgeKind::Reverts,
                &source,
                (repo.to_string(), format!("commit/{sha}")),
                evidence_id,
                phrase,
            );
        }
        if let Some(n) = pull_request_number(subject) {
            set.add(
                EdgeKind::PullRequestOf,
                &source,
                (repo.to_string(), format!("issue/{n}")),
                evidence_id,
                subject.to_string(),
            );
        }
        mentions(&mut set, &source, evidence_id, msg, repo, history);
        messages.keep(c, stated, &set.edges)?;
        stated += set.edges.len();
    }

    // Threads, releases and files: closing keywords in a pull request's description, the merge
    // commit the crawl gives, and what every row mentions. The rows are taken in one order (a
    // thread's own row states an edge before its comments do; then by time), and an edge is
    // kept once per source: so a row's edges depend only on its entity's rows before it, and
    // the files' rows can be read a path at a time (a path's rows are its entity's) and their
    // edges put in that order afterwards.
    let mut rows_sorted: Vec<&Row> =
        rows.iter().filter(|r| !matches!(r.kind(), RowType::Commit | RowType::Diff)).collect();
    rows_sorted.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
    let mut set = EdgeSet { repo, web, seen: HashSet::new(), edges: Vec::new() };
    let start = set.edges.len();
    // The row that made each edge from `start` on, by its place in that order.
    let mut made_by: Vec<(bool, Option<DateTime<Utc>>, String)> = Vec::new();
    let mut row_edges = |set: &mut EdgeSet<'_>, r: &Row| {
        let before = set.edges.len();
        thread_and_file_edges(set, r, repo, history, &messages);
        let (head, time, id) = row_order(r);
        made_by.extend(std::iter::repeat_n((head, time, id.clone()), set.edges.len() - before));
    };
    for r in rows_sorted {
        row_edges(&mut set, r);
    }
    for path in tree.paths()? {
        let (_, mut rows) = path?;
        rows.sort_by(|a, b| row_order(a).cmp(&row_order(b)));
        rows.iter().for_each(|r| row_edges(&mut set, r));
    }
    let mut order: Vec<usize> = (0..made_by.len()).collect();
    // Stable: one row's edges keep the order it made them in.
    order.sort_by(|&a, &b| made_by[a].cmp(&made_by[b]));
    let mut made: Vec<Option<Edge>> = set.edges.drain(start..).map(Some).collect();
    set.edges.extend(order.into_iter().filter_map(|i| made[i].take()));

    let mut commits = CommitReleases {
        repo: repo.to_string(),
        web: web.map(str::to_string),
        commit_rows,
        ..CommitReleases::default()
    };
    let before = set.edges.len();
    shipped_in(&mut set, history, releases, &mut commits, &messages, stated);
    // The commits' messages' edges come first; their `shipped_in` ones between the edges made
    // before them and the ones after.
    let after = commits.len();
    let listed = set.edges.into_iter().enumerate();
    let place = |i: usize| stated + if i < before { i } else { i + after };
    let listed = listed.map(|(i, e)| (place(i), e)).collect();
    Ok(RepoEdges { listed, commits: CommitEdges { messages, releases: commits } })
}

/// Where a thread's, release's or file's row comes in [`repo_edges`]' order.
fn row_order(r: &Row) -> (bool, Option<DateTime<Utc>>, &String) {
    (!is_head(r), r.created_at, &r.id)
}

/// The edges one thread's, release's or file's row states: closing keywords in a pull
/// request's description, the merge commit the crawl gives, and what the row mentions.
fn thread_and_file_edges(
    set: &mut EdgeSet<'_>,
    r: &Row,
    repo: &str,
    history: &History,
    messages: &MessageEdges,
) {
    if r.kind() == RowType::PullRequest && r.chunk_index == 0 {
        for m in CLOSING.captures_iter(&r.body) {
            let whole = m.get(0).expect("group 0");
            if let Some(t) = resolve_ref(&m[1], repo, history).filter(|t| t.1.starts_with("issue/"))
            {
                set.add(
                    EdgeKind::Closes,
                    &r.entity,
                    t,
                    Some(&r.id),
                    phrase_at(&r.body, whole.start()),
                );
            }
        }
        // Unless the merge commit's message states it already.
        let stated = |sha: &str| {
            history.find(sha).is_some_and(|c| {
                messages.of(history, c).iter().any(|e| {
                    (e.kind, e.target_repo.as_str(), &e.target)
                        == (EdgeKind::PullRequestOf, repo, &r.entity)
                })
            })
        };
        if let (Some(sha), Some("merged")) = (&r.commit_sha, r.state.as_deref())
            && !stated(sha)
        {
            set.add(
                EdgeKind::PullRequestOf,
                &format!("commit/{sha}"),
                (repo.to_string(), r.entity.clone()),
                Some(&r.id),
                format!("merged as {}", &sha[..sha.floor_char_boundary(12)]),
            );
        }
    }
    mentions(set, &r.entity, Some(&r.id), &r.body, repo, history);
}

/// A release (its position among the release tags), how an entity reached it, and the row
/// that says so.
type Shipped = (usize, String, Option<String>);

/// Keeps the earlier of `offered` and what `best` holds for `target`.
fn offer(best: &mut HashMap<String, Shipped>, target: &str, offered: Shipped) {
    match best.get(target) {
        Some(held) if held.0 <= offered.0 => {}
        _ => {
            best.insert(target.to_string(), offered);
        }
    }
}

fn is_head(r: &Row) -> bool {
    matches!(r.kind(), RowType::Issue | RowType::PullRequest | RowType::Release)
        && r.chunk_index == 0
}

/// `mentions` edges for every reference in `text` that no stronger edge of `source` states.
fn mentions(
    set: &mut EdgeSet<'_>,
    source: &str,
    evidence_id: Option<&str>,
    text: &str,
    repo: &str,
    history: &History,
) {
    for r in find_refs(text) {
        let Some(t) = resolve_ref(&r, repo, history) else { continue };
        let stronger = [EdgeKind::Closes, EdgeKind::Reverts, EdgeKind::PullRequestOf]
            .iter()
            .any(|k| set.has(*k, source, &t));
        if !stronger {
            set.add(EdgeKind::Mentions, source, t, evidence_id, phrase_of(text, &r));
        }
    }
}

/// `shipped_in` edges: each commit to the first release (by tag date, then name) whose tag
/// contains it (in `commits`, its edge to be made when asked: [`CommitReleases`]); each issue
/// or pull request to the earliest release of the commits that close or merge it (through a
/// pull request that closes it, too), in `set`.
fn shipped_in(
    set: &mut EdgeSet<'_>,
    history: &History,
    releases: &ReleaseTags,
    commits: &mut CommitReleases,
    messages: &MessageEdges,
    stated: usize,
) {
    let repo = set.repo.to_string();
    let mut tags: Vec<(&Tag, CommitNo)> = history
        .tags
        .iter()
        .filter(|t| releases.is_release(&t.name))
        .filter_map(|t| Some((t, history.find(&t.commit)?)))
        .collect();
    tags.sort_by(|(a, _), (b, _)| (a.date, &a.name).cmp(&(b.date, &b.name)));
    // Walking tags oldest first and stopping at commits already given a release is exact:
    // a commit's ancestors are all in every tag that contains it.
    let mut release_of: Vec<Option<usize>> = vec![None; history.len()];
    for (ti, &(_, tagged)) in tags.iter().enumerate() {
        let mut stack = vec![tagged];
        while let Some(c) = stack.pop() {
            if release_of[c as usize].is_some() {
                continue;
            }
            release_of[c as usize] = Some(ti);
            stack.extend(history.parents(c).flatten());
        }
    }
    let release = |ti: usize| (repo.clone(), format!("release/{}", tags[ti].0.name));
    let short = |sha: &str| sha[..sha.floor_char_boundary(12)].to_string();
    // Each commit's edge, in commit order after the edges made so far: kept as numbers.
    let any_release = release_of.iter().any(Option::is_some);
    if any_release {
        let first = stated + set.edges.len();
        commits.tags = tags.iter().map(|(t, _)| (t.name.clone(), t.date)).collect();
        commits.release = Vec::with_capacity(history.len());
        commits.place = Vec::with_capacity(history.len());
        let mut next = first;
        for ti in &release_of {
            let ti = ti.and_then(|ti| u32::try_from(ti).ok()).unwrap_or(NO_RELEASE);
            commits.release.push(ti);
            commits.place.push(u32::try_from(next).unwrap_or(u32::MAX));
            next += usize::from(ti != NO_RELEASE);
        }
    }
    // Issues and pull requests: the earliest release of what closes or merges them.
    let commit_release = |entity: &str| {
        let sha = entity.strip_prefix("commit/")?;
        release_of[history.find(sha)? as usize]
    };
    let mut best: HashMap<String, Shipped> = HashMap::new();
    let mut offer_commit_edge = |e: &Edge| {
        if e.target_repo == repo
            && matches!(e.kind, EdgeKind::PullRequestOf | EdgeKind::Closes)
            && let Some(ti) = commit_release(&e.source)
        {
            let via = format!("via commit {}", short(e.source.trim_start_matches("commit/")));
            offer(&mut best, &e.target, (ti, via, e.evidence_id.clone()));
        }
    };
    // In the repository's order: the commits' messages' edges, then the others.
    if any_release {
        for c in history.commits() {
            messages.of(history, c).iter().for_each(&mut offer_commit_edge);
        }
    }
    set.edges.iter().for_each(offer_commit_edge);
    // A pull request that closes an issue ships it when the pull request ships (its source is
    // a pull request: no commit's edge is one of these).
    let pulls: HashMap<String, usize> = best.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    for e in set.edges.iter().filter(|e| e.kind == EdgeKind::Closes && e.target_repo == repo) {
        if let Some(&ti) = pulls.get(&e.source) {
            let via = format!("via {}", e.source.replace("issue/", "#"));
            offer(&mut best, &e.target, (ti, via, e.evidence_id.clone()));
        }
    }
    let mut inherited: Vec<(String, Shipped)> = best.into_iter().collect();
    inherited.sort();
    for (entity, (ti, via, id)) in inherited {
        let evidence = format!("{} {via}", tags[ti].0.name);
        set.add(EdgeKind::ShippedIn, &entity, release(ti), id.as_deref(), evidence);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::history::edge_lines;
    use crate::sources::git::Commit;
    use chrono::{DateTime, Utc};
    use hubdex_formats::FileText;
    use proptest::prelude::*;

    /// What edges read in a commit message: its subject, the references, the closing and
    /// revert patterns' matches, each with its phrase of evidence.
    fn what_edges_read(msg: &str) -> (String, Vec<String>, Vec<(String, String)>) {
        let subject = msg.lines().next().unwrap_or("").trim().to_string();
        let refs = find_refs(msg);
        let mut matches: Vec<(String, String)> = CLOSING
            .captures_iter(msg)
            .map(|m| (m[1].to_string(), phrase_at(msg, m.get(0).unwrap().start())))
            .collect();
        matches.extend(
            REVERTS
                .captures(msg)
                .map(|m| (m[1].to_string(), phrase_at(msg, m.get(0).unwrap().start()))),
        );
        (subject, refs, matches)
    }

    #[test]
    fn the_files_edges_read_back_a_path_at_a_time_fall_where_held_rows_would_put_them() {
        // Comments and two files' chunks, each mentioning an issue, at times that interleave;
        // one file's two chunks mention the same issue (kept once, by the chunk first in order).
        let at = |t: i64| DateTime::<Utc>::from_timestamp(1_700_000_000 + t, 0);
        let row = |kind, entity: &str, chunk, t, body: &str| {
            let mut r = Row::new(kind, "o/r", entity, chunk);
            r.created_at = at(t);
            r.set_body(body);
            r
        };
        let comments = vec![
            row(RowType::IssueComment, "issue/1", 1, 10, "see #11"),
            row(RowType::IssueComment, "issue/2", 1, 30, "see #12"),
            row(RowType::IssueComment, "issue/2", 2, 20, "see #13"),
        ];
        let files = [
            ("b.md", vec![row(RowType::Doc, "file/b.md", 0, 20, "#14 and #15")]),
            ("a.rs", (0..4).map(|i| row(RowType::Code, "file/a.rs", i, 20, "about #16")).collect()),
        ];
        let mut tree = TreeFiles::default();
        for (path, rows) in files.clone() {
            let text = FileText::new(path, &"c".repeat(40), None, String::new());
            tree.add(text, rows).unwrap();
        }
        tree.flush().unwrap();
        let history = History::default();
        let edges = |rows: &[Row], tree: &TreeFiles| {
            repo_edges("o/r", None, rows, tree, &history, false, &ReleaseTags::Versions)
                .unwrap()
                .into_vec(&history)
        };
        let spilled = edges(&comments, &tree);
        let mut held = comments.clone();
        held.extend(files.into_iter().flat_map(|(_, rows)| rows));
        assert_eq!(spilled, edges(&held, &TreeFiles::default()));
        let targets: Vec<(&str, &str)> =
            spilled.iter().map(|e| (e.source.as_str(), e.target.as_str())).collect();
        // By time (10, 20, 30); the rows of time 20 by id.
        let mut at_20: Vec<&Row> = held.iter().filter(|r| r.created_at == at(20)).collect();
        at_20.sort_by(|a, b| a.id.cmp(&b.id));
        let mut expected = vec![("issue/1", "issue/11")];
        let mut a_rs = false;
        for r in at_20 {
            match r.entity.as_str() {
                "issue/2" => expected.push(("issue/2", "issue/13")),
                "file/b.md" => {
                    expected.extend([("file/b.md", "issue/14"), ("file/b.md", "issue/15")])
                }
                _ if !a_rs => {
                    a_rs = true;
                    expected.push(("file/a.rs", "issue/16"));
                }
                _ => {}
            }
        }
        expected.push(("issue/2", "issue/12"));
        assert_eq!(targets, expected);
    }

    proptest! {
        /// The history keeps only a message's first line and the lines that could hold a
        /// reference: edges read the same in them as in the whole message.
        #[test]
        fn the_lines_a_history_keeps_give_edges_what_the_whole_message_does(
            lines in prop::collection::vec(
                prop::collection::vec(
                    (
                        prop::sample::select(vec![
                            "Fixes", "closes:", "Resolved", "#12", "o/r#7", "(#31)",
                            "https://github.com/o/r/issues/3", "http://x.io/a/issues/9",
                            "https://github.com/o/r/commit/1a2b3c4d", "1a2b3c4", "deadbee",
                            "DEADBEEF1", "abc123", "This", "reverts", "commit", "prose", "the",
                            "Signed-off-by:", "caf\u{e9}", "C#", "a://b", "\r", "Revert", "\"x\"",
                        ]),
                        prop::sample::select(vec![" ", "\t", "", ". ", ", "]),
                    ),
                    0..8,
                ),
                0..8,
            ),
            crlf in any::<bool>(),
        ) {
            let line = |words: &Vec<(&str, &str)>| -> String {
                words.iter().map(|(w, sep)| format!("{w}{sep}")).collect()
            };
            let msg = lines.iter().map(line).collect::<Vec<_>>().join(if crlf { "\r\n" } else { "\n" });
            let kept = edge_lines(&msg);
            prop_assert!(kept.len() <= msg.len());
            prop_assert_eq!(what_edges_read(&kept), what_edges_read(&msg), "{:?} kept as {:?}", msg, kept);
        }
    }

    #[test]
    fn a_body_of_prose_is_not_kept_and_a_line_with_a_reference_is() {
        let msg = "Fix the lexer\n\nThe lexer dropped a token at the end of a line.\n\
                   Fixes #12 and see https://example.com/x\n\nSigned-off-by: A <a@b.c>";
        assert_eq!(edge_lines(msg), "Fix the lexer\nFixes #12 and see https://example.com/x");
        assert_eq!(edge_lines("Only a subject"), "Only a subject");
        assert_eq!(
            edge_lines("S\n\nThis reverts commit 1a2b3c4d."),
            "S\nThis reverts commit 1a2b3c4d."
        );
    }

    fn commit(sha: &str, parents: &[&str], message: &str, day: u32) -> Commit {
        Commit {
            sha: sha.repeat(40 / sha.len()),
            parents: parents.iter().map(|p| p.repeat(40 / p.len())).collect(),
            message: message.into(),
            committed_at: Some(
                DateTime::parse_from_rfc3339(&format!("2024-01-{day:02}T00:00:00Z"))
                    .unwrap()
                    .with_timezone(&Utc),
            ),
            ..Commit::default()
        }
    }

    fn find<'a>(edges: &'a [Edge], kind: EdgeKind, source: &str) -> Vec<&'a str> {
        edges
            .iter()
            .filter(|e| e.kind == kind && e.source.starts_with(source))
            .map(|e| e.target.as_str())
            .collect()
    }

    #[test]
    fn history_gives_every_kind_with_its_evidence() {
        let history = History::of(
            &[
                commit("a1", &[], "Add the parser", 1),
                commit("b2", &["a1"], "Fix the lexer (#5)\n\nFixes #3, see #4", 2),
                commit(
                    "c3",
                    &["b2"],
                    "Revert \"Fix the lexer (#5)\"\n\nThis reverts commit b2b2b2b.",
                    3,
                ),
                commit("d4", &["c3"], "Revert \"Revert \"Fix the lexer (#5)\"\"", 4),
                commit(
                    "e5",
                    &["d4"],
                    "closes o/other#9 and mentions https://github.com/o/r/issues/8",
                    5,
                ),
                commit("f6", &["a1"], "On a branch no tag has", 6),
            ],
            vec![
                Tag { name: "v0.1.0".into(), commit: "b2".repeat(20), date: None },
                Tag { name: "v0.2.0".into(), commit: "e5".repeat(20), date: None },
                Tag { name: "widget-0.1.0".into(), commit: "f6".repeat(20), date: None },
            ],
        );
        let edges = repo_edges(
            "o/r",
            Some("https://github.com/o/r"),
            &[],
            &TreeFiles::default(),
            &history,
            false,
            &ReleaseTags::Versions,
        )
        .unwrap()
        .into_vec(&history);
        assert_eq!(find(&edges, EdgeKind::Closes, "commit/b2"), ["issue/3"]);
        assert_eq!(find(&edges, EdgeKind::PullRequestOf, "commit/b2"), ["issue/5"]);
        assert_eq!(find(&edges, EdgeKind::Mentions, "commit/b2"), ["issue/4"]);
        assert_eq!(
            find(&edges, EdgeKind::Reverts, "commit/c3"),
            [format!("commit/{}", "b2".repeat(20))]
        );
        assert_eq!(
            find(&edges, EdgeKind::Reverts, "commit/d4"),
            [format!("commit/{}", "c3".repeat(20))]
        );
        let cross: Vec<&Edge> = edges
            .iter()
            .filter(|e| e.kind == EdgeKind::Closes && e.source.starts_with("commit/e5"))
            .collect();
        assert_eq!(cross[0].target_repo, "o/other");
        assert_eq!(cross[0].target_url.as_deref(), Some("https://github.com/o/other/issues/9"));
        assert_eq!(find(&edges, EdgeKind::Mentions, "commit/e5"), ["issue/8"]);
        let revert = edges
            .iter()
            .find(|e| e.kind == EdgeKind::Reverts && e.source.starts_with("commit/c3"))
            .unwrap();
        assert_eq!(revert.evidence, "This reverts commit b2b2b2b.");
        // shipped_in: by ancestry; the branch commit and the sub-package tag give nothing.
        assert_eq!(find(&edges, EdgeKind::ShippedIn, "commit/a1"), ["release/v0.1.0"]);
        assert_eq!(find(&edges, EdgeKind::ShippedIn, "commit/c3"), ["release/v0.2.0"]);
        assert!(find(&edges, EdgeKind::ShippedIn, "commit/f6").is_empty());
        // Issues and pull requests inherit the release of what closes or merges them.
        assert_eq!(find(&edges, EdgeKind::ShippedIn, "issue/3"), ["release/v0.1.0"]);
        assert_eq!(find(&edges, EdgeKind::ShippedIn, "issue/5"), ["release/v0.1.0"]);
    }

    #[test]
    fn a_merged_pull_request_gives_its_commit_one_edge_whether_or_not_the_message_names_it() {
        let history = History::of(
            &[
                commit("a1", &[], "Add the parser", 1),
                commit("b2", &["a1"], "Fix the lexer (#5)", 2),
            ],
            vec![],
        );
        let merged = |n: u64, sha: &str| {
            let mut r = Row::new(RowType::PullRequest, "o/r", &format!("issue/{n}"), 0);
            r.state = Some("merged".into());
            r.commit_sha = Some(sha.repeat(20));
            r
        };
        let rows = [merged(5, "b2"), merged(6, "a1")];
        let no_files = TreeFiles::default();
        let edges =
            repo_edges("o/r", None, &rows, &no_files, &history, true, &ReleaseTags::Versions)
                .unwrap()
                .into_vec(&history);
        let of = |sha: &str| -> Vec<(&str, &str, bool)> {
            let source = format!("commit/{}", sha.repeat(20));
            let pr_of = edges.iter().filter(|e| e.kind == EdgeKind::PullRequestOf);
            pr_of
                .filter(|e| e.source == source)
                .map(|e| (e.target.as_str(), e.evidence.as_str(), e.evidence_id.is_some()))
                .collect()
        };
        // The message names #5: its edge, with the commit row as evidence, and not the thread's.
        assert_eq!(of("b2"), [("issue/5", "Fix the lexer (#5)", true)]);
        assert_eq!(of("a1"), [("issue/6", "merged as a1a1a1a1a1a1", true)]);
    }

    #[test]
    fn refs_resolve_to_entities() {
        let shas = History::of(&[commit("ab12", &[], "x", 1)], vec![]);
        let full = "ab12".repeat(10);
        assert_eq!(resolve_ref("#7", "o/r", &shas), Some(("o/r".into(), "issue/7".into())));
        assert_eq!(resolve_ref("x/y#7", "o/r", &shas), Some(("x/y".into(), "issue/7".into())));
        assert_eq!(
            resolve_ref("https://github.com/x/y/pull/3/files", "o/r", &shas),
            Some(("x/y".into(), "issue/3".into()))
        );
        assert_eq!(
            resolve_ref("ab12ab1", "o/r", &shas),
            Some(("o/r".into(), format!("commit/{full}")))
        );
        assert_eq!(resolve_ref("deadbee1", "o/r", &shas), None);
        assert_eq!(resolve_ref("https://github.com/o/r/blob/main/x.rs", "o/r", &shas), None);
        assert!(VERSION_TAG.is_match("v1.2.3") && VERSION_TAG.is_match("10.0.0-rc.1"));
        assert!(!VERSION_TAG.is_match("fd-find-1.2.3") && !VERSION_TAG.is_match("nightly"));
    }
}
