//! The compact git history a build keeps while the history's rows stream (issue 30): every
//! commit's SHA, parents, message, times and changed paths, read once by the first pass over
//! git (`git log --name-only`, see [`crate::local::read_repo`]).
//!
//! It is what edges need (messages, parents, tags: [`crate::edges`]), what a merge row lists its
//! branch from (parents, subjects, paths: [`crate::local`]) and the order the second pass reads
//! the commits in. It grows with the history, so it is kept small: strings end to end in one
//! buffer each, parents as commit numbers, paths interned. Once edges are made, messages are
//! cut to their titles ([`History::keep_titles`]), or dropped when no merge row will list
//! any ([`History::drop_messages`]).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::git::Commit;
use crate::local::clean_message;

/// A commit's place in [`History`] (the order `git log` gave it: newest first).
pub(crate) type CommitNo = u32;

/// A parent the history does not hold (a shallow clone's boundary).
const ABSENT: CommitNo = CommitNo::MAX;

/// One tag: its name, the commit it points to (peeled) and its date (the tagger's for an
/// annotated tag, the commit's for a lightweight one: git's `creatordate`).
#[derive(Debug, Clone)]
pub(crate) struct Tag {
    pub(crate) name: String,
    pub(crate) commit: String,
    pub(crate) date: Option<DateTime<Utc>>,
}

/// Strings kept end to end in one buffer: one allocation, not one per string.
#[derive(Debug, Default)]
struct Texts {
    text: String,
    ends: Vec<usize>,
}

impl Texts {
    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// Lists of numbers kept end to end (each commit's parents, each commit's paths).
#[derive(Debug, Default)]
struct Lists {
    items: Vec<u32>,
    ends: Vec<usize>,
}

impl Lists {
    fn push(&mut self, items: impl IntoIterator<Item = u32>) {
        self.items.extend(items);
        self.ends.push(self.items.len());
    }

    fn get(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.items[start..self.ends[i]]
    }
}

/// What [`History`] keeps of each commit's message.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kept {
    #[default]
    Whole,
    Titles,
    Nothing,
}

/// What the git history says: see the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct History {
    shas: Texts,
    /// Commit numbers ordered by SHA (finding a commit, resolving an abbreviated SHA).
    by_sha: Vec<CommitNo>,
    /// Parent SHAs as read, until [`History::finish`] turns them into `parents`.
    parent_shas: Texts,
    parent_counts: Vec<u32>,
    parents: Lists,
    /// Whole messages, or what [`History::keep_titles`] / [`History::drop_messages`] left.
    messages: Texts,
    kept: Kept,
    committed_at: Vec<Option<DateTime<Utc>>>,
    authored_at: Vec<Option<i64>>,
    files: Lists,
    paths: Vec<Arc<str>>,
    path_numbers: HashMap<Arc<str>, u32>,
    pub(crate) tags: Vec<Tag>,
}

impl History {
    /// Adds the next commit of the log (newest first); call [`History::finish`] after the last.
    pub(crate) fn push(&mut self, c: &Commit) {
        self.shas.push(&c.sha);
        for p in &c.parents {
            self.parent_shas.push(p);
        }
        self.parent_counts.push(u32::try_from(c.parents.len()).expect("fewer than 2^32 parents"));
        self.messages.push(&c.message);
        self.committed_at.push(c.committed_at);
        self.authored_at.push(c.authored_at.map(|t| t.timestamp()));
        let files: Vec<u32> = c.files.iter().map(|f| self.path_number(f)).collect();
        self.files.push(files);
    }

    fn path_number(&mut self, path: &str) -> u32 {
        if let Some(&n) = self.path_numbers.get(path) {
            return n;
        }
        let n = u32::try_from(self.paths.len()).expect("fewer than 2^32 paths");
        let path: Arc<str> = Arc::from(path);
        self.paths.push(path.clone());
        self.path_numbers.insert(path, n);
        n
    }

    /// Indexes the commits by SHA and resolves every parent to its commit number.
    pub(crate) fn finish(&mut self) {
        let n = CommitNo::try_from(self.len()).expect("fewer than 2^32 commits");
        let mut by_sha: Vec<CommitNo> = (0..n).collect();
        by_sha.sort_unstable_by(|a, b| self.sha(*a).cmp(self.sha(*b)));
        self.by_sha = by_sha;
        let parent_shas = std::mem::take(&mut self.parent_shas);
        let mut at = 0;
        for &count in &std::mem::take(&mut self.parent_counts) {
            let count = count as usize;
            let parents: Vec<CommitNo> =
                (at..at + count).map(|k| self.find(parent_shas.get(k)).unwrap_or(ABSENT)).collect();
            at += count;
            self.parents.push(parents);
        }
    }

    /// How many commits the history holds.
    pub(crate) fn len(&self) -> usize {
        self.shas.ends.len()
    }

    /// Every commit number, newest first (the log's order).
    pub(crate) fn commits(&self) -> impl Iterator<Item = CommitNo> + use<> {
        0..CommitNo::try_from(self.len()).expect("fewer than 2^32 commits")
    }

    pub(crate) fn sha(&self, c: CommitNo) -> &str {
        self.shas.get(c as usize)
    }

    /// The commit whose full SHA is `sha`.
    pub(crate) fn find(&self, sha: &str) -> Option<CommitNo> {
        let i = self.by_sha.partition_point(|&c| self.sha(c) < sha);
        self.by_sha.get(i).copied().filter(|&c| self.sha(c) == sha)
    }

    /// The one commit whose SHA starts with `prefix` (any case), if exactly one does.
    pub(crate) fn resolve_prefix(&self, prefix: &str) -> Option<&str> {
        let prefix = prefix.to_ascii_lowercase();
        let i = self.by_sha.partition_point(|&c| self.sha(c) < prefix.as_str());
        let first = self.by_sha.get(i).map(|&c| self.sha(c)).filter(|s| s.starts_with(&prefix))?;
        let unique =
            self.by_sha.get(i + 1).is_none_or(|&c| !self.sha(c).starts_with(prefix.as_str()));
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

    /// The whole message (before [`History::keep_titles`]).
    pub(crate) fn message(&self, c: CommitNo) -> &str {
        debug_assert_eq!(self.kept, Kept::Whole, "messages were cut to their titles or dropped");
        self.messages.get(c as usize)
    }

    /// The cleaned title ([`clean_message`]'s): what a merge row lists of its branch.
    pub(crate) fn title(&self, c: CommitNo) -> String {
        match self.kept {
            Kept::Whole => clean_message(self.messages.get(c as usize)).title,
            Kept::Titles => self.messages.get(c as usize).to_string(),
            Kept::Nothing => {
                debug_assert!(false, "messages were dropped");
                String::new()
            }
        }
    }

    /// Keeps only each message's title: what is needed once edges are made.
    pub(crate) fn keep_titles(&mut self) {
        if self.kept != Kept::Whole {
            return;
        }
        let mut titles = Texts::default();
        for c in self.commits() {
            titles.push(&clean_message(self.messages.get(c as usize)).title);
        }
        self.messages = titles;
        self.kept = Kept::Titles;
    }

    /// Drops every message: what is needed once edges are made when no merge row will list
    /// its branch (a history without merges, or without commit rows).
    pub(crate) fn drop_messages(&mut self) {
        self.messages = Texts::default();
        self.kept = Kept::Nothing;
    }

    /// Whether some commit has more than one parent (after [`History::finish`]).
    pub(crate) fn has_merges(&self) -> bool {
        self.commits().any(|c| self.parents.get(c as usize).len() > 1)
    }

    pub(crate) fn committed_at(&self, c: CommitNo) -> Option<DateTime<Utc>> {
        self.committed_at[c as usize]
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

    /// Every SHA, one a line, in the order a build cuts the history's rows (author time, then
    /// SHA: [`crate::budget`]'s stream order): what the second pass asks git for.
    pub(crate) fn cut_order(&self) -> String {
        let mut order: Vec<CommitNo> = self.commits().collect();
        order.sort_unstable_by(|a, b| {
            (self.authored_at[*a as usize], self.sha(*a))
                .cmp(&(self.authored_at[*b as usize], self.sha(*b)))
        });
        let mut request = String::with_capacity(self.shas.text.len() + order.len());
        for c in order {
            request.push_str(self.sha(c));
            request.push('\n');
        }
        request
    }

    /// A history of `commits` (newest first) and `tags`.
    #[cfg(test)]
    pub(crate) fn of(commits: &[Commit], tags: Vec<Tag>) -> History {
        let mut history = History::default();
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
        assert_eq!(history.message(c3), "Merge branch 'x'\n\nBody");
        assert_eq!(history.find("d4"), None);
        assert_eq!(history.resolve_prefix("B"), Some("b2"));
        assert_eq!(history.first_parent_chain(Some("c3")), [true, true, true]);
        assert_eq!(history.first_parent_chain(Some("b2")), [false, true, true]);
        assert!(history.has_merges());
        history.keep_titles();
        assert_eq!(history.title(a1), "First (#1)");
        assert_eq!(history.title(c3), "Merge branch 'x'");
        history.drop_messages();
        assert_eq!(history.messages.text.len(), 0, "nothing kept of the messages");
        let linear =
            History::of(&[commit("b", &["a"], "B", &[]), commit("a", &[], "A", &[])], vec![]);
        assert!(!linear.has_merges());
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
        let mut history = History::default();
        for (sha, t) in [("bb", Some(5)), ("aa", Some(5)), ("cc", Some(1)), ("dd", None)] {
            history.push(&Commit {
                sha: sha.into(),
                authored_at: t.and_then(at),
                ..Commit::default()
            });
        }
        history.finish();
        assert_eq!(history.cut_order(), "dd\ncc\naa\nbb\n");
    }
}
