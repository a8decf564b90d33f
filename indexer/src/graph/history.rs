//! The compact git history a build keeps while the history's rows stream: every
//! commit's SHA (as `git rev-list` lists them, the list the first pass asks `git log` for),
//! parents, message, times and changed paths, read once by that first pass (`git log
//! --name-only`, see [`crate::local::read_repo`]). Each SHA is held once: parents are resolved
//! to commit numbers as each commit comes, against the list known before the first.
//!
//! It is what edges need (what messages say, parents, tags: [`crate::graph::edges`]), what a merge row
//! lists its branch from (parents, titles, paths: [`crate::local`]) and the order the second
//! pass reads the commits in. It grows with the history, so it is kept small: what it keeps of
//! messages in a temporary file ([`Strings`], read back a block at a time), parents as commit
//! numbers, times as seconds, paths interned, every buffer shrunk to fit once the log is read.
//! Of a message it keeps what edges read: the first line and the lines that could hold a
//! reference ([`edge_lines`]), not the whole body. Once edges are made those are cut to the
//! titles merge rows list ([`History::keep_titles`]), or dropped when no merge row will list
//! any ([`History::drop_messages`]), and what else the second pass does not read goes too
//! ([`History::keep_what_rows_read`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::sources::git::{Commit, Tag};
use crate::sources::message::Message;
use crate::sources::shas::{Sha, Shas, Texts};
use crate::temp::spill::{Numbers, Strings};

/// A commit's place in [`History`] (the order `git log` gave it: newest first).
pub(crate) type CommitNo = u32;

/// A parent the history does not hold (a shallow clone's boundary).
const ABSENT: CommitNo = CommitNo::MAX;

/// Lists of numbers kept end to end (each commit's parents, each commit's paths). Ends are
/// 4 bytes, as the numbers are: fewer than 2^32 of them in all.
#[derive(Debug, Default)]
struct Lists {
    items: Vec<u32>,
    ends: Vec<u32>,
}

impl Lists {
    fn shrink_to_fit(&mut self) {
        self.items.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    fn heap_bytes(&self) -> usize {
        (self.items.capacity() + self.ends.capacity()) * size_of::<u32>()
    }

    fn push(&mut self, items: impl IntoIterator<Item = u32>) {
        self.items.extend(items);
        self.ends.push(u32::try_from(self.items.len()).expect("fewer than 2^32 numbers"));
    }

    /// List `i`, empty where none was kept ([`History::keep_what_rows_read`]).
    fn get(&self, i: usize) -> &[u32] {
        let Some(&end) = self.ends.get(i) else { return &[] };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.items[start as usize..end as usize]
    }
}

/// The text kept of each commit's message ([`Kept`]): in a temporary file ([`Strings`]), out
/// of the build's memory, or held where no file could be made.
#[derive(Debug)]
enum Messages {
    Held(Texts),
    Spilled(Strings),
}

impl Default for Messages {
    fn default() -> Self {
        Messages::Held(Texts::default())
    }
}

impl Messages {
    /// None yet, in a new temporary file; held (a warning says why) where none can be made.
    fn new() -> Messages {
        match Strings::new() {
            Ok(strings) => Messages::Spilled(strings),
            Err(e) => {
                tracing::warn!(error = %e, "commit messages stay in memory: a temporary file failed");
                Messages::Held(Texts::default())
            }
        }
    }

    fn push(&mut self, s: &str) {
        match self {
            Messages::Held(texts) => texts.push(s),
            Messages::Spilled(strings) => strings.push(s),
        }
    }

    /// Message `i`; empty where none was kept.
    fn get(&self, i: usize) -> Cow<'_, str> {
        match self {
            Messages::Held(texts) if i < texts.len() => Cow::Borrowed(texts.get(i)),
            Messages::Held(_) => Cow::Borrowed(""),
            Messages::Spilled(strings) => Cow::Owned(strings.get(i)),
        }
    }

    fn shrink_to_fit(&mut self) {
        match self {
            Messages::Held(texts) => texts.shrink_to_fit(),
            Messages::Spilled(strings) => strings.shrink_to_fit(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Messages::Held(texts) => texts.heap_bytes(),
            Messages::Spilled(strings) => strings.heap_bytes(),
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            Messages::Held(_) => None,
            Messages::Spilled(strings) => strings.error(),
        }
    }
}

/// What [`History`] keeps of each commit's message.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// What edges read ([`edge_lines`]), and the titles that are not its first line.
    #[default]
    EdgeLines,
    Titles,
    Nothing,
}

/// A time kept as seconds since the epoch; `NO_TIME` for none.
const NO_TIME: i64 = i64::MIN;

/// What edges read of a commit message ([`crate::graph::edges`]): its first line (the subject, for
/// `Revert "…"` and a pull request's number) and every other line that could hold a reference.
/// A reference (`#N`, `owner/repo#N`, a URL, a SHA in `This reverts commit <sha>` or anywhere)
/// holds a `#`, a `://` or seven hex digits in a row, and no pattern edges match spans two
/// lines (each stops at a line's end: [`crate::sources::refs::find_refs`] splits words at whitespace,
/// and the closing and revert patterns join words with spaces or tabs); a phrase of evidence
/// is the line holding the match. So edges made from these lines are the ones the whole
/// message gives, and a body of prose without references costs nothing.
pub(crate) fn edge_lines(message: &str) -> String {
    let (first, rest) = message.split_once('\n').unwrap_or((message, ""));
    let mut kept = first.to_string();
    for line in rest.split('\n').filter(|l| may_hold_reference(l)) {
        kept.push('\n');
        kept.push_str(line);
    }
    kept
}

fn may_hold_reference(line: &str) -> bool {
    let mut hex_run = 0;
    line.contains('#')
        || line.contains("://")
        || line.bytes().any(|b| {
            hex_run = if b.is_ascii_hexdigit() { hex_run + 1 } else { 0 };
            hex_run >= 7
        })
}

/// What the git history says: see the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct History {
    /// Every commit's SHA, as `git rev-list` listed them ([`History::listing`]): shared with
    /// the first pass, which asks `git log` for them in this order, so each SHA is held once.
    shas: Arc<Shas>,
    /// Commit numbers ordered by SHA (finding a commit, resolving an abbreviated SHA).
    by_sha: Numbers,
    /// Each commit's parents as commit numbers, resolved as the log gives them: a list for each
    /// commit the log has given or passed over ([`History::given`]).
    parents: Lists,
    /// What edges read of each message ([`edge_lines`]), or what [`History::keep_titles`] /
    /// [`History::drop_messages`] left: in a temporary file, a block read at a time (the
    /// largest part of a history with references: ~70 of 130 bytes a commit).
    messages: Messages,
    /// What a read of messages since replaced ([`History::keep_titles`]) failed with.
    message_error: Option<String>,
    /// The titles ([`Message::of`]'s) that are not their message's first line, trimmed (a
    /// "Merge pull request #N" subject's is the next line), by commit number, until
    /// [`History::keep_titles`].
    other_titles: Vec<(CommitNo, String)>,
    kept: Kept,
    /// Seconds, [`NO_TIME`] for none.
    committed_at: Vec<i64>,
    /// Until [`History::finish`] makes `order` from them.
    authored_at: Vec<i64>,
    /// The second pass's order ([`History::in_cut_order`]): by author time, then SHA.
    order: Numbers,
    files: Lists,
    paths: Vec<Arc<str>>,
    /// Each path's number, until [`History::forget_path_names`].
    path_numbers: HashMap<Arc<str>, u32>,
    /// By path number: the commit time (seconds, [`NO_TIME`] for none) of the newest commit
    /// that changed the path, the first the log gives with a time (it runs newest first): a
    /// doc's or a code file's `updated_at`. Until [`History::forget_path_names`].
    last_changed: Vec<i64>,
    pub(crate) tags: Vec<Tag>,
}

impl History {
    /// A history of the commits `shas` lists, newest first (what `git rev-list` gave): each is
    /// then given by [`History::push`], in that order; call [`History::finish`] after the last.
    pub(crate) fn listing(shas: Arc<Shas>) -> History {
        let n = CommitNo::try_from(shas.len()).expect("fewer than 2^32 commits");
        let mut by_sha: Vec<CommitNo> = (0..n).collect();
        by_sha.sort_unstable_by(|&a, &b| shas.cmp(a as usize, b as usize));
        History {
            shas,
            by_sha: Numbers::Held(by_sha),
            messages: Messages::new(),
            ..History::default()
        }
    }

    /// The SHAs the history lists, to ask `git log` for them in that order.
    pub(crate) fn listed(&self) -> Arc<Shas> {
        Arc::clone(&self.shas)
    }

    /// Adds what the log says of the next listed commit. A listed commit the log passed over
    /// (a record it could not read) is kept with nothing known but its SHA; a commit that is
    /// not listed, or given twice, is passed over with a warning.
    pub(crate) fn push(&mut self, c: &Commit) {
        let next = self.given();
        let at = if next < self.len() && *self.sha(next as CommitNo) == *c.sha {
            next
        } else {
            match self.find(&c.sha).map(|n| n as usize) {
                Some(at) if at >= next => at,
                _ => {
                    tracing::warn!(sha = %c.sha, "git log gave a commit git rev-list did not list (or twice): passed over");
                    return;
                }
            }
        };
        self.pass_over_to(at);
        let parents: Vec<CommitNo> =
            c.parents.iter().map(|p| self.find(p).unwrap_or(ABSENT)).collect();
        self.parents.push(parents);
        let kept = edge_lines(&c.message);
        let title = Message::of(c).title;
        if kept.lines().next().unwrap_or("").trim() != title {
            let c = CommitNo::try_from(at).expect("fewer than 2^32 commits");
            self.other_titles.push((c, title));
        }
        self.messages.push(&kept);
        let seconds = |t: Option<DateTime<Utc>>| t.map_or(NO_TIME, |t| t.timestamp());
        self.committed_at.push(seconds(c.committed_at));
        self.authored_at.push(seconds(c.authored_at));
        let files: Vec<u32> = c.files.iter().map(|f| self.path_number(f)).collect();
        let committed = seconds(c.committed_at);
        for &f in &files {
            let last = &mut self.last_changed[f as usize];
            if *last == NO_TIME {
                *last = committed;
            }
        }
        self.files.push(files);
    }

    /// How many listed commits the log has given, or passed over, so far.
    fn given(&self) -> usize {
        self.parents.ends.len()
    }

    /// Keeps the listed commits before `at` the log has not given with nothing known of them
    /// but their SHAs: no parents, message, times or paths.
    fn pass_over_to(&mut self, at: usize) {
        for c in self.given()..at {
            tracing::warn!(sha = %self.sha(c as CommitNo), "git log did not give this listed commit: kept with its SHA only");
            self.parents.push([]);
            self.messages.push("");
            self.committed_at.push(NO_TIME);
            self.authored_at.push(NO_TIME);
            self.files.push([]);
        }
    }

    fn path_number(&mut self, path: &str) -> u32 {
        if let Some(&n) = self.path_numbers.get(path) {
            return n;
        }
        let n = u32::try_from(self.paths.len()).expect("fewer than 2^32 paths");
        let path: Arc<str> = Arc::from(path);
        self.paths.push(path.clone());
        self.path_numbers.insert(path, n);
        self.last_changed.push(NO_TIME);
        n
    }

    /// When `path` last changed: the commit time of the newest commit that changed it (one
    /// with a time), `None` when none did or once [`History::forget_path_names`] ran.
    pub(crate) fn last_change(&self, path: &str) -> Option<DateTime<Utc>> {
        let &n = self.path_numbers.get(path)?;
        let seconds = *self.last_changed.get(n as usize)?;
        (seconds != NO_TIME).then(|| DateTime::from_timestamp(seconds, 0)).flatten()
    }

    /// Drops what finds a path by its name and when it last changed: the files at HEAD, which
    /// ask [`History::last_change`], are read.
    pub(crate) fn forget_path_names(&mut self) {
        self.path_numbers = HashMap::new();
        self.last_changed = Vec::new();
    }

    /// Ends the log (a listed commit it did not give is kept with its SHA only), orders the
    /// commits for the second pass and gives back what the buffers grew by and did not fill.
    pub(crate) fn finish(&mut self) {
        self.pass_over_to(self.len());
        self.parents.shrink_to_fit();
        self.messages.shrink_to_fit();
        self.other_titles.shrink_to_fit();
        self.committed_at.shrink_to_fit();
        let mut order: Vec<CommitNo> = self.commits().collect();
        let time = |c: CommitNo| self.authored_at.get(c as usize).copied().unwrap_or(NO_TIME);
        order.sort_unstable_by(|&a, &b| {
            time(a).cmp(&time(b)).then_with(|| self.shas.cmp(a as usize, b as usize))
        });
        self.order = Numbers::Held(order);
        self.authored_at = Vec::new();
        self.files.shrink_to_fit();
        self.paths.shrink_to_fit();
        self.last_changed.shrink_to_fit();
    }

    /// The bytes the history holds on the heap (its buffers' capacities; the path map counted
    /// by its entries): what a build's peak pays for it.
    pub(crate) fn heap_bytes(&self) -> usize {
        let paths: usize = self.paths.iter().map(|p| p.len() + 16).sum();
        let path_map = self.path_numbers.capacity() * (size_of::<Arc<str>>() + size_of::<u32>());
        let titles: usize = self.other_titles.iter().map(|(_, t)| t.capacity() + 32).sum();
        self.shas.heap_bytes()
            + self.by_sha.heap_bytes()
            + self.parents.heap_bytes()
            + self.messages.heap_bytes()
            + titles
            + (self.committed_at.capacity() + self.authored_at.capacity()) * size_of::<i64>()
            + self.order.heap_bytes()
            + self.files.heap_bytes()
            + self.paths.capacity() * size_of::<Arc<str>>()
            + paths
            + path_map
            + self.last_changed.capacity() * size_of::<i64>()
    }

    /// How many commits the history holds.
    pub(crate) fn len(&self) -> usize {
        self.shas.len()
    }

    /// Every commit number, newest first (the log's order).
    pub(crate) fn commits(&self) -> impl Iterator<Item = CommitNo> + use<> {
        0..CommitNo::try_from(self.len()).expect("fewer than 2^32 commits")
    }

    pub(crate) fn sha(&self, c: CommitNo) -> Sha<'_> {
        self.shas.get(c as usize)
    }

    /// The commit whose full SHA is `sha`.
    pub(crate) fn find(&self, sha: &str) -> Option<CommitNo> {
        let i = self.by_sha.partition_point(|c| *self.sha(c) < *sha);
        self.by_sha.get(i).filter(|&c| *self.sha(c) == *sha)
    }

    /// The one commit whose SHA starts with `prefix` (any case), if exactly one does.
    pub(crate) fn resolve_prefix(&self, prefix: &str) -> Option<Sha<'_>> {
        let prefix = prefix.to_ascii_lowercase();
        let i = self.by_sha.partition_point(|c| *self.sha(c) < *prefix);
        let first = self.by_sha.get(i).map(|c| self.sha(c)).filter(|s| s.starts_with(&prefix))?;
        let unique =
            self.by_sha.get(i + 1).is_none_or(|c| !self.sha(c).starts_with(prefix.as_str()));
        unique.then_some(first)
    }

    /// The parents the history holds, first parent first (a parent it does not hold ends a
    /// walk: `None`).
    pub(crate) fn parents(&self, c: CommitNo) -> impl Iterator<Item = Option<CommitNo>> + '_ {
        self.parents.get(c as usize).iter().map(|&p| (p != ABSENT).then_some(p))
    }

    pub(crate) fn first_parent(&self, c: CommitNo) -> Option<CommitNo> {
        self.parents(c).next().flatten()
    }

    /// What edges read of the message ([`edge_lines`]; before [`History::keep_titles`]).
    pub(crate) fn edge_lines(&self, c: CommitNo) -> Cow<'_, str> {
        debug_assert_eq!(self.kept, Kept::EdgeLines, "messages were cut to titles or dropped");
        self.messages.get(c as usize)
    }

    /// The cleaned title ([`Message::of`]'s): what a merge row lists of its branch.
    pub(crate) fn title(&self, c: CommitNo) -> String {
        match self.kept {
            Kept::EdgeLines => match self.other_titles.binary_search_by_key(&c, |(n, _)| *n) {
                Ok(i) => self.other_titles[i].1.clone(),
                Err(_) => {
                    let kept = self.messages.get(c as usize);
                    kept.lines().next().unwrap_or("").trim().to_string()
                }
            },
            Kept::Titles => self.messages.get(c as usize).into_owned(),
            Kept::Nothing => {
                debug_assert!(false, "messages were dropped");
                String::new()
            }
        }
    }

    /// Keeps only the titles of commits off `mainline` (HEAD's first-parent chain, a mark per
    /// commit; none when empty): what a merge row lists once edges are made (its walk stops at
    /// the first mainline commit). The others' are kept empty.
    pub(crate) fn keep_titles(&mut self, mainline: &[bool]) {
        if self.kept != Kept::EdgeLines {
            return;
        }
        let mut titles = Messages::new();
        for c in self.commits() {
            if mainline.get(c as usize).copied().unwrap_or(false) {
                titles.push("");
            } else {
                titles.push(&self.title(c));
            }
        }
        titles.shrink_to_fit();
        self.keep_message_error();
        self.messages = titles;
        self.other_titles = Vec::new();
        self.kept = Kept::Titles;
    }

    /// Drops every message: what is needed once edges are made when no merge row will list
    /// its branch (a history without merges, or without commit rows).
    pub(crate) fn drop_messages(&mut self) {
        self.keep_message_error();
        self.messages = Messages::default();
        self.other_titles = Vec::new();
        self.kept = Kept::Nothing;
    }

    /// Drops what only edges read, once they are made, keeping what the second pass reads as
    /// it makes rows: every SHA (a merge row finds its commit by it), the cut order and, where
    /// merge rows list what their branch brought in (`mainline` is HEAD's first-parent chain,
    /// empty when there are none to make), each commit's parents and the paths of commits off
    /// the mainline (a merge's walk stops at the first mainline commit;
    /// [`History::keep_titles`] keeps their titles). Commit times go either way. A history
    /// without merges keeps ~28 bytes a commit, not ~100, and [`History::spill`] moves those
    /// to temporary files.
    pub(crate) fn keep_what_rows_read(&mut self, mainline: &[bool]) {
        self.committed_at = Vec::new();
        self.forget_path_names();
        if mainline.is_empty() {
            self.parents = Lists::default();
            self.files = Lists::default();
            self.paths = Vec::new();
            return;
        }
        let mut files = Lists::default();
        for c in 0..self.len() {
            let off = !mainline.get(c).copied().unwrap_or(false);
            files.push(if off { self.files.get(c) } else { &[] }.iter().copied());
        }
        files.shrink_to_fit();
        self.files = files;
    }

    /// Keeps what a read of the messages failed with before they are replaced.
    fn keep_message_error(&mut self) {
        if self.message_error.is_none() {
            self.message_error = self.messages.error().map(str::to_string);
        }
    }

    /// Whether some commit has more than one parent (after [`History::finish`]).
    pub(crate) fn has_merges(&self) -> bool {
        self.commits().any(|c| self.parents.get(c as usize).len() > 1)
    }

    /// When `c` was committed (none once [`History::keep_what_rows_read`] dropped the times).
    pub(crate) fn committed_at(&self, c: CommitNo) -> Option<DateTime<Utc>> {
        self.committed_at
            .get(c as usize)
            .copied()
            .filter(|&t| t != NO_TIME)
            .and_then(|t| DateTime::from_timestamp(t, 0))
    }

    /// The paths commit `c` changed.
    pub(crate) fn files(&self, c: CommitNo) -> impl Iterator<Item = &str> + '_ {
        self.files.get(c as usize).iter().map(|&p| &*self.paths[p as usize])
    }

    /// The first-parent chain from `from` (the mainline when `from` is HEAD), as a mark per
    /// commit.
    pub(crate) fn first_parent_chain(&self, from: Option<&str>) -> Vec<bool> {
        let mut on = vec![false; self.len()];
        let mut at = from.and_then(|sha| self.find(sha));
        while let Some(c) = at {
            if std::mem::replace(&mut on[c as usize], true) {
                break;
            }
            at = self.first_parent(c);
        }
        on
    }

    /// The commit at place `at` of the order a build cuts the history's rows in (author time,
    /// then SHA: [`crate::pipeline::budget`]'s stream order): what the second pass asks git for.
    pub(crate) fn in_cut_order(&self, at: usize) -> CommitNo {
        self.order.get(at).unwrap_or(ABSENT)
    }

    /// Every commit in the cut order ([`History::in_cut_order`]).
    #[cfg(test)]
    pub(crate) fn cut_order(&self) -> Vec<CommitNo> {
        (0..self.order.len()).map(|at| self.in_cut_order(at)).collect()
    }

    /// Moves what the second pass reads of every commit one at a time into temporary files
    /// ([`crate::temp::spill`]), out of the build's memory: the SHAs, the cut order and the commits
    /// by SHA (28 bytes a commit with SHA-1, all a history without merges keeps for the second
    /// pass). Where a file cannot be written they stay held and
    /// the build goes on (a warning says why).
    pub(crate) fn spill(&mut self) {
        // Shared only while the first pass reads the log: by now the history holds them alone.
        let shas = Arc::get_mut(&mut self.shas).map_or(Ok(()), Shas::spill);
        let spilled = shas.and_then(|()| self.by_sha.spill()).and_then(|()| self.order.spill());
        if let Err(e) = spilled {
            tracing::warn!(error = %e, "the history stays in memory: a temporary file failed");
        }
    }

    /// What a read of the spilled history ([`History::spill`]) failed with, if one did: its
    /// answers were then not the history's, and the build must stop.
    pub(crate) fn spill_error(&self) -> Option<String> {
        let e = (self.shas.error().or(self.by_sha.error()).or(self.order.error()))
            .or(self.messages.error())
            .or(self.message_error.as_deref())?;
        Some(format!("reading the history back from a temporary file: {e}"))
    }

    /// A history of `commits` (newest first) and `tags`.
    #[cfg(test)]
    pub(crate) fn of(commits: &[Commit], tags: Vec<Tag>) -> History {
        let mut history = History::listing(Arc::new(Shas::of(commits.iter().map(|c| &c.sha))));
        for c in commits {
            history.push(c);
        }
        history.finish();
        history.tags = tags;
        history
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn commit(sha: &str, parents: &[&str], message: &str, files: &[&str]) -> Commit {
        Commit {
            sha: sha.into(),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            message: message.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            ..Commit::default()
        }
    }

    #[test]
    fn a_path_last_changed_with_the_newest_commit_that_has_a_time() {
        let at = |s: i64| DateTime::from_timestamp(s, 0);
        let timed = |sha: &str, files: &[&str], t: Option<DateTime<Utc>>| Commit {
            committed_at: t,
            ..commit(sha, &[], "Change", files)
        };
        // Newest first, as the log gives them; the newest has no time (a broken date).
        let mut history = History::of(
            &[
                timed("c3", &["a.md", "b.rs"], None),
                timed("b2", &["a.md"], at(200)),
                timed("a1", &["a.md", "b.rs", "c.md"], at(100)),
            ],
            vec![],
        );
        let last = |h: &History| ["a.md", "b.rs", "c.md", "d.md"].map(|p| h.last_change(p));
        assert_eq!(last(&history), [at(200), at(100), at(100), None]);
        history.forget_path_names();
        assert_eq!(last(&history), [None; 4]);
        assert_eq!(history.files(1).collect::<Vec<_>>(), ["a.md"], "the paths are kept");
    }

    #[test]
    fn a_history_answers_what_its_commits_said() {
        let mut history = History::of(
            &[
                commit("c3", &["b2", "a1"], "Merge branch 'x'\n\nBody", &["x.rs"]),
                commit("b2", &["a1"], "Second", &["y.rs", "x.rs"]),
                commit("a1", &["f0"], "First (#1)\n\nSigned-off-by: me <m@e>", &[]),
            ],
            vec![],
        );
        assert_eq!(history.len(), 3);
        let c3 = history.find("c3").unwrap();
        let (b2, a1) = (history.find("b2").unwrap(), history.find("a1").unwrap());
        assert_eq!(history.parents(c3).collect::<Vec<_>>(), [Some(b2), Some(a1)]);
        // A parent the history does not hold (a shallow clone) ends a walk.
        assert_eq!(history.parents(a1).collect::<Vec<_>>(), [None]);
        assert_eq!(history.files(b2).collect::<Vec<_>>(), ["y.rs", "x.rs"]);
        assert_eq!(history.edge_lines(c3), "Merge branch 'x'");
        assert_eq!(history.find("d4"), None);
        assert_eq!(history.resolve_prefix("B").as_deref(), Some("b2"));
        assert_eq!(history.first_parent_chain(Some("c3")), [true, true, true]);
        assert_eq!(history.first_parent_chain(Some("b2")), [false, true, true]);
        assert!(history.has_merges());
        history.keep_titles(&[]);
        assert_eq!(history.title(a1), "First (#1)");
        assert_eq!(history.title(c3), "Merge branch 'x'");
        history.drop_messages();
        assert!(
            matches!(&history.messages, Messages::Held(t) if t.is_empty()),
            "nothing kept of the messages"
        );
        let linear =
            History::of(&[commit("b", &["a"], "B", &[]), commit("a", &[], "A", &[])], vec![]);
        assert!(!linear.has_merges());
    }

    #[test]
    fn the_history_holds_every_listed_commit_in_order_whatever_the_log_gives() {
        let mut history = History::listing(Arc::new(Shas::of(["c3", "b2", "a1", "d0"])));
        history.push(&commit("c3", &["b2"], "Third", &["x.rs"]));
        // b2's record was not read; a1 comes next, then a commit never listed and one again.
        history.push(&commit("a1", &[], "First", &["y.rs"]));
        history.push(&commit("ff", &["a1"], "Not listed", &[]));
        history.push(&commit("c3", &[], "Again", &[]));
        // d0 is never given: the log ended early.
        history.finish();
        assert_eq!(history.len(), 4);
        let [c3, b2, a1, d0] = [0, 1, 2, 3];
        assert_eq!(["c3", "b2", "a1", "d0"].map(|s| history.find(s)), [c3, b2, a1, d0].map(Some));
        assert_eq!(history.find("ff"), None);
        // A parent is resolved as its child comes, before its own record.
        assert_eq!(history.parents(c3).collect::<Vec<_>>(), [Some(b2)]);
        assert_eq!([history.edge_lines(c3), history.edge_lines(a1)], ["Third", "First"]);
        assert_eq!(history.files(a1).collect::<Vec<_>>(), ["y.rs"]);
        // What the log did not give is known by its SHA only.
        for passed in [b2, d0] {
            assert_eq!(history.parents(passed).count(), 0);
            assert_eq!(history.edge_lines(passed), "");
            assert_eq!(history.files(passed).count(), 0);
            assert_eq!(history.committed_at(passed), None);
        }
        assert_eq!(history.cut_order().len(), 4);
    }

    #[test]
    fn a_merged_pull_request_s_title_is_its_description_s_first_line_before_and_after_cutting() {
        let mut history = History::of(
            &[
                commit("b", &["a"], "Merge pull request #7 from o/b\n\nAdd the thing\n\nMore", &[]),
                commit("a", &[], "  Start  \n\nprose", &[]),
            ],
            vec![],
        );
        let (b, a) = (history.find("b").unwrap(), history.find("a").unwrap());
        assert_eq!(history.edge_lines(b), "Merge pull request #7 from o/b");
        assert_eq!((history.title(b), history.title(a)), ("Add the thing".into(), "Start".into()));
        history.keep_titles(&[]);
        assert_eq!((history.title(b), history.title(a)), ("Add the thing".into(), "Start".into()));
    }

    /// What a build pays per commit for its history, on commits shaped like real ones (a
    /// subject, a body of prose, a reference now and then, sign-offs, two or three paths).
    #[test]
    fn a_history_holds_little_more_than_each_commit_s_sha_subject_and_numbers() {
        let n = 20_000;
        let commits: Vec<Commit> = (0..n)
            .map(|i| {
                let mut message = format!("Tune the parser's buffer for case {i}\n\n");
                message.push_str(
                    &"The parser read one byte at a time; it reads a block now. ".repeat(3),
                );
                if i % 10 == 0 {
                    message.push_str(&format!("\n\nFixes #{i}"));
                }
                message.push_str("\n\nSigned-off-by: A Person <a.person@example.com>");
                Commit {
                    sha: format!("{:040x}", i as u128 * 0x9e37_79b9_7f4a_7c15),
                    parents: if i + 1 < n {
                        vec![format!("{:040x}", (i + 1) as u128 * 0x9e37_79b9_7f4a_7c15)]
                    } else {
                        vec![]
                    },
                    message,
                    committed_at: DateTime::from_timestamp(1_700_000_000 - i as i64, 0),
                    authored_at: DateTime::from_timestamp(1_700_000_000 - i as i64, 0),
                    files: vec![format!("src/m{}.rs", i % 300), format!("src/m{}.rs", i % 7)],
                    ..Commit::default()
                }
            })
            .collect();
        let message_bytes: usize = commits.iter().map(|c| c.message.len()).sum();
        let history = History::of(&commits, vec![]);
        let per_commit = history.heap_bytes() / n;
        // SHA 20 (packed) + by SHA 4 + parent 4 + its end 4 + the subject's end 8 (the subject
        // is in a temporary file) + the commit time 8 + the cut order 4 + two paths 8 + their
        // end 4 = 64 bytes, and 64 KiB of strings not yet written (69 measured; 104 with the
        // subjects held); the whole messages were ~250 more.
        assert!(per_commit <= 72, "{per_commit} bytes a commit");
        assert!(history.heap_bytes() < message_bytes, "less than the messages alone");
        assert_eq!(
            history.title(history.find(&commits[5].sha).unwrap()),
            "Tune the parser's buffer for case 5"
        );
        // Held where no temporary file can be made: the same answers, ~38 bytes a commit more.
        let mut held = History::listing(Arc::new(Shas::of(commits.iter().map(|c| &c.sha))));
        held.messages = Messages::Held(Texts::default());
        for c in &commits {
            held.push(c);
        }
        held.finish();
        for c in history.commits() {
            assert_eq!(held.edge_lines(c), history.edge_lines(c), "commit {c}");
        }
        let held_per_commit = held.heap_bytes() / n;
        assert!((100..=108).contains(&held_per_commit), "{held_per_commit} bytes a commit held");
        // What the second pass keeps of a history without merges: the SHAs and their index.
        let mut history = history;
        history.drop_messages();
        history.keep_what_rows_read(&[]);
        let per_commit = history.heap_bytes() / n;
        // SHA 20 + by SHA 4 + the second pass's order 4 = 28.
        assert!(per_commit <= 30, "{per_commit} bytes a commit for the second pass");
        assert_eq!(history.find(&commits[7].sha), Some(7));
        assert_eq!(&*history.sha(7), commits[7].sha);
        // Spilled, those 28 bytes are in temporary files: three blocks are held.
        let order = history.cut_order();
        history.spill();
        assert!(matches!(*history.shas, Shas::Spilled(_)));
        assert!(history.heap_bytes() <= 3 * crate::temp::spill::BLOCK, "{}", history.heap_bytes());
        assert_eq!(history.cut_order(), order);
        for (i, c) in commits.iter().enumerate() {
            assert_eq!(history.find(&c.sha), Some(i as CommitNo));
            assert_eq!(&*history.sha(i as CommitNo), c.sha);
        }
        assert_eq!(history.spill_error(), None);
    }

    #[test]
    fn a_failed_read_of_a_message_is_kept_for_the_build_to_stop_on_after_they_are_cut() {
        let mut history =
            History::of(&[commit("b", &["a"], "B", &[]), commit("a", &[], "A", &[])], vec![]);
        assert!(matches!(history.messages, Messages::Spilled(_)));
        assert_eq!(history.spill_error(), None);
        // A read the file cannot answer (here: past the end) reads as empty, and so does every
        // later one (what they give is not the history's)...
        assert_eq!(history.edge_lines(2), "");
        assert_eq!(history.edge_lines(1), "");
        let failed = history.spill_error().expect("the read is reported");
        assert!(failed.contains("string 2 of 2"), "{failed}");
        // ...and it is still reported once the messages are cut to titles, or dropped.
        history.keep_titles(&[true, false]);
        assert_eq!(history.spill_error().as_deref(), Some(failed.as_str()));
        history.drop_messages();
        assert_eq!(history.spill_error().as_deref(), Some(failed.as_str()));
    }

    #[test]
    fn an_octopus_merge_of_hundreds_of_parents_keeps_every_commit_s_parents_in_place() {
        let shas: Vec<String> = (0..300).map(|i| format!("p{i:03}")).collect();
        let parents: Vec<&str> = shas.iter().map(String::as_str).collect();
        let mut commits = vec![commit("m", &parents, "Octopus", &[])];
        commits.extend(shas.iter().map(|s| commit(s, &["root"], s, &[])));
        commits.push(commit("root", &[], "Root", &[]));
        let history = History::of(&commits, vec![]);
        let m = history.find("m").unwrap();
        assert_eq!(history.parents(m).count(), 300);
        assert_eq!(history.sha(history.parents(m).last().flatten().unwrap()), "p299");
        let root = history.find("root");
        for s in &shas {
            assert_eq!(history.first_parent(history.find(s).unwrap()), root, "{s}");
        }
    }

    #[test]
    fn the_second_pass_reads_commits_by_author_time_then_sha() {
        let at = |s: i64| DateTime::from_timestamp(s, 0);
        let commits: Vec<Commit> =
            [("bb", Some(5)), ("aa", Some(5)), ("cc", Some(1)), ("dd", None)]
                .into_iter()
                .map(|(sha, t)| Commit {
                    sha: sha.into(),
                    authored_at: t.and_then(at),
                    ..Commit::default()
                })
                .collect();
        let mut history = History::of(&commits, vec![]);
        // Made once the log is read, the order outlives the author times.
        assert!(history.authored_at.is_empty());
        let order: Vec<String> =
            history.cut_order().iter().map(|&c| history.sha(c).to_string()).collect();
        assert_eq!(order, ["dd", "cc", "aa", "bb"]);
        history.keep_what_rows_read(&[]);
        history.spill();
        let kept: Vec<String> =
            history.cut_order().iter().map(|&c| history.sha(c).to_string()).collect();
        assert_eq!(kept, order);
    }

    proptest! {
        /// Packed SHAs (git's, lowercase hex of one length) answer as the same SHAs kept as
        /// text do: each SHA, finding one, resolving a prefix, the second pass's order.
        #[test]
        fn packed_shas_answer_as_text_does(
            seeds in proptest::collection::vec((any::<u64>(), 0i64..4), 1..60),
            sha256 in any::<bool>(),
            prefix_len in 1usize..6,
        ) {
            let digits = if sha256 { 64 } else { 40 };
            let shas: Vec<String> = seeds
                .iter()
                .enumerate()
                .map(|(i, (s, _))| format!("{s:016x}{i:08x}").repeat(3)[..digits].to_string())
                .collect();
            let commits = |names: &[String]| -> Vec<Commit> {
                names
                    .iter()
                    .enumerate()
                    .map(|(i, sha)| Commit {
                        sha: sha.clone(),
                        authored_at: DateTime::from_timestamp(seeds.get(i).map_or(9, |s| s.1), 0),
                        ..Commit::default()
                    })
                    .collect()
            };
            let packed = History::of(&commits(&shas), vec![]);
            prop_assert!(matches!(*packed.shas, Shas::Packed { .. }), "packed");
            // One name that is not hex turns them all into text.
            let mut names = shas.clone();
            names.push("not-hex".into());
            let text = History::of(&commits(&names), vec![]);
            prop_assert!(matches!(*text.shas, Shas::Text(_)), "text");
            let order = |h: &History| -> Vec<String> {
                h.cut_order().iter().map(|&c| h.sha(c).to_string()).filter(|s| s != "not-hex").collect()
            };
            prop_assert_eq!(order(&packed), order(&text));
            // And so do packed SHAs spilled to temporary files, as the second pass reads them.
            let mut spilled = History::of(&commits(&shas), vec![]);
            spilled.spill();
            prop_assert!(matches!(*spilled.shas, Shas::Spilled(_)), "spilled");
            prop_assert_eq!(order(&spilled), order(&text));
            let resolve = |h: &History, p: &str| h.resolve_prefix(p).map(|s| s.to_string());
            for (i, sha) in shas.iter().enumerate() {
                let c = CommitNo::try_from(i).unwrap();
                prop_assert_eq!(&*packed.sha(c), sha.as_str());
                prop_assert_eq!(&*spilled.sha(c), sha.as_str());
                prop_assert_eq!(packed.find(sha), text.find(sha));
                prop_assert_eq!(spilled.find(sha), text.find(sha));
                let prefix = &sha[..prefix_len];
                prop_assert_eq!(resolve(&spilled, prefix), resolve(&text, prefix));
                prop_assert_eq!(
                    resolve(&packed, prefix),
                    resolve(&text, prefix)
                );
                prop_assert_eq!(
                    resolve(&packed, &prefix.to_ascii_uppercase()),
                    resolve(&text, prefix)
                );
                // An uppercase SHA is not git's: neither finds it.
                let upper = sha.to_ascii_uppercase();
                if upper != *sha {
                    prop_assert_eq!(packed.find(&upper), None);
                }
            }
            prop_assert_eq!(packed.find(&"0".repeat(digits + 2)), None);
            prop_assert_eq!(packed.find("zz"), None);
            prop_assert!(packed.heap_bytes() < text.heap_bytes());
        }
    }
}
