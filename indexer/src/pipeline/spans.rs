//! History spans: a rebuild reuses a build segment of history rows without reading its commits'
//! diffs.
//!
//! The history's rows come in a fixed order (author time, then SHA; one commit's rows by id) and
//! are cut into build segments by content-defined boundaries ([`crate::pipeline::budget::Cutter`]): where a
//! segment starts, the rows that follow decide where it ends. So a run of rows that starts where
//! a build segment starts, and holds the same rows as a segment of the current snapshot, ends
//! where that one did: it *is* that segment. A build segment of history rows alone records its
//! run in the manifest ([`HistorySpan`]: its first and last commit and row, its bytes) and a key
//! of everything its rows are made from apart from the diffs, which a commit's SHA fixes:
//!
//! - the indexer's row version ([`ROWS_VERSION`], with the crate's version) and git's version
//!   (which writes the diffs);
//! - the repository's name, web address and rules, the cut's share and the vectors' width;
//! - each commit's SHA and what a merge row lists of its branch (from the rest of the history);
//! - the edges the segment holds (a commit's release, its cross-references);
//! - the text of the crawl's threads its commits' messages name (pull requests they merged,
//!   issues they close), which their commit rows take in.
//!
//! A rebuild that reaches the start of such a run with an empty segment (a boundary just fell)
//! computes the run's key from what it holds before any diff is read, and on a match takes the
//! segment as it is and asks git only for the commits after it. So a one-commit delta on a long
//! history reads the diffs of the last build segment, not of every commit.

use hubdex_formats::{Edge, HistorySpan, RowType, ThreadNumbers, sha256_hex};

use crate::graph::history::CommitNo;
use crate::local::CommitRows;
use crate::sources::shas::Sha;

/// The version of how history rows are made from commits. Bump it with any change to what a
/// commit row or a diff row holds (crate::local's `commit_row`, `diff_rows`, the links of
/// threads, the rules' filtering) or to the changed lines a build segment keeps of its commits
/// (crate::sources::diff's `ChangeLines`): a build segment recorded under another version is
/// read again. The unit test `history_rows_made_from_a_fixed_commit_are_pinned` fails when the
/// rows change, to say so.
pub(crate) const ROWS_VERSION: u32 = 2;

/// A row's place in the history's stream: its commit's place in the cut order, its place among
/// that commit's rows, and whether it is the commit's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowAt {
    pub(crate) commit: usize,
    pub(crate) row: u32,
    pub(crate) last: bool,
}

impl RowAt {
    /// The places of the commits whose first row a run from this row to the commit at `last`
    /// holds: a build segment holds the edges of those (an edge goes with its source's first
    /// row), not of a commit it starts within.
    pub(crate) fn commits_headed_to(self, last: usize) -> std::ops::RangeInclusive<usize> {
        self.commit + usize::from(self.row > 0)..=last
    }
}

/// What a repository's history spans are keyed by ([`HistorySpan::key`]).
pub(crate) struct SpanKeys<'a> {
    commits: &'a CommitRows,
    /// Everything the key holds that is the same for every span of the repository.
    salt: String,
}

impl<'a> SpanKeys<'a> {
    /// The keys of `commits`' spans, cut with segments of `share` bytes and vectors of `dim`
    /// dimensions, their diffs written by git `git_version` (`git --version`).
    pub(crate) fn new(commits: &'a CommitRows, share: u64, dim: usize, git_version: &str) -> Self {
        let (repo, web) = commits.repo();
        let salt = format!(
            "hubdex history rows {ROWS_VERSION} ({})\n{git_version}\nrepo {repo}\nweb {web:?}\n{}\n\
             share {share}\ndim {dim}\n",
            env!("CARGO_PKG_VERSION"),
            commits.rules().history_identity(),
        );
        SpanKeys { commits, salt }
    }

    /// How many commits the history holds.
    pub(crate) fn len(&self) -> usize {
        self.commits.history().len()
    }

    /// The commit at place `at` of the cut order.
    pub(crate) fn commit(&self, at: usize) -> CommitNo {
        self.commits.history().in_cut_order(at)
    }

    /// The SHA of the commit at place `at` of the cut order.
    pub(crate) fn sha(&self, at: usize) -> Sha<'_> {
        self.commits.history().sha(self.commit(at))
    }

    /// Whether every commit has a row (a commit row): a span is reused only where a row is sure
    /// to follow it, since the stream's last segment takes what no row claimed.
    pub(crate) fn every_commit_has_a_row(&self) -> bool {
        self.commits.rules().wants(RowType::Commit)
    }

    /// The span of the rows from `first` to `last`, weighing `bytes`, whose edges are `edges`
    /// (in the segment's order) and whose commit rows name the threads `threads` (sorted).
    pub(crate) fn span<'e>(
        &self,
        first: RowAt,
        last: RowAt,
        bytes: u64,
        edges: impl Iterator<Item = &'e Edge>,
        threads: ThreadNumbers,
    ) -> HistorySpan {
        let key = self.key(first, last, edges, &threads);
        HistorySpan {
            first: self.sha(first.commit).to_string(),
            first_row: first.row,
            last: self.sha(last.commit).to_string(),
            last_row: last.row,
            ends_commit: last.last,
            commits: (last.commit - first.commit + 1) as u64,
            bytes,
            threads,
            key,
        }
    }

    /// [`HistorySpan::key`] of the rows from `first` to `last` with `edges` and `threads`.
    pub(crate) fn key<'e>(
        &self,
        first: RowAt,
        last: RowAt,
        edges: impl Iterator<Item = &'e Edge>,
        threads: &ThreadNumbers,
    ) -> String {
        let mut text = self.salt.clone();
        text.push_str(&format!(
            "rows {} to {} (ends its commit: {})\n",
            first.row, last.row, last.last
        ));
        for at in first.commit..=last.commit {
            let c = self.commit(at);
            text.push_str(&self.sha(at));
            text.push('\u{1f}');
            text.push_str(&self.commits.merged_text(c));
            text.push('\n');
        }
        for e in edges {
            text.push_str(&serde_json::to_string(e).unwrap_or_default());
            text.push('\n');
        }
        text.push_str(&format!("threads {threads:?}\n"));
        text.push_str(&self.commits.links().text_of(&threads.to_vec()));
        sha256_hex(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use hubdex_formats::Row;

    use crate::local::{Merged, ThreadLinks, commit_row, diff_rows};
    use crate::sources::git::Commit;

    use super::*;

    fn thread(kind: RowType, n: i64, title: &str, body: &str) -> Row {
        let mut r = Row::new(kind, "o/r", &format!("issue/{n}"), 0);
        r.number = Some(n);
        r.title = Some(title.into());
        r.set_body(body);
        r
    }

    /// A squash-merged commit that fixes an issue, with a diff of two files.
    fn commit() -> Commit {
        let at = chrono::DateTime::parse_from_rfc3339("2024-05-01T10:00:00Z").unwrap().to_utc();
        Commit {
            sha: "0123456789abcdef0123456789abcdef01234567".into(),
            parents: vec!["89abcdef0123456789abcdef0123456789abcdef".into()],
            author: "Ada".into(),
            author_email: "ada@example.com".into(),
            authored_at: Some(at),
            committer: "GitHub".into(),
            committer_email: "noreply@github.com".into(),
            committed_at: Some(at),
            message: "Walk hidden directories (#12)\n\nFixes #3.\n\nSigned-off-by: Ada <ada@example.com>\n"
                .into(),
            message_more: 0,
            files: vec!["src/walk.rs".into(), "README.md".into()],
            diff: crate::sources::diff::Diff::of(
                "diff --git a/src/walk.rs b/src/walk.rs\n--- a/src/walk.rs\n+++ b/src/walk.rs\n\
                 @@ -10,3 +10,4 @@ fn spawn_senders(config: &Config) {\n-a\n+b\n\
                 diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n\
                 @@ -1 +1 @@\n-old\n+new\n",
            ),
        }
    }

    fn links(pull_title: &str) -> ThreadLinks {
        ThreadLinks::of(&[
            thread(RowType::PullRequest, 12, pull_title, "Closes #4"),
            thread(RowType::Issue, 3, "Hidden files are skipped", ""),
            thread(RowType::Issue, 4, "No way to walk dot directories", ""),
            thread(RowType::PullRequest, 99, "Unrelated", ""),
        ])
    }

    /// The rows one commit makes, linked to `links`.
    fn rows(links: &ThreadLinks) -> Vec<Row> {
        let mut c = commit();
        let mut row = commit_row("o/r", Some("https://github.com/o/r"), &mut c, &Merged::default());
        links.apply(&mut row);
        let mut rows = vec![row];
        rows.extend(diff_rows("o/r", Some("https://github.com/o/r"), &mut c));
        rows
    }

    #[test]
    fn history_rows_made_from_a_fixed_commit_are_pinned() {
        let json: Vec<String> = rows(&links("Walk hidden directories"))
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        let digest = sha256_hex(json.join("\n").as_bytes());
        // A rebuild reuses build segments of history rows by a key that does not read the
        // rows (crate::pipeline::spans). When this fails, history rows are made differently now: bump
        // ROWS_VERSION (so stores built before read their history again) and pin the new digest.
        assert_eq!(
            (ROWS_VERSION, digest.as_str()),
            (2, "7d0eb5aa10738c9afa23f23709140fc9d8994729f1043e22314792ee55b85792"),
            "history rows changed: bump ROWS_VERSION and pin the new digest"
        );
    }

    #[test]
    fn a_span_key_reads_the_threads_its_commit_rows_name_and_no_others() {
        let before = links("Walk hidden directories");
        let row = rows(&before).remove(0);
        // The pull request it merged, the issue it fixes; the one the pull request closes is
        // found through the pull request.
        let named = ThreadLinks::numbers_named(&row);
        assert!(named.contains(&12) && named.contains(&3), "{named:?}");
        assert!(!named.contains(&99), "{named:?}");
        let mut named = named;
        named.sort_unstable();
        named.dedup();
        let text = before.text_of(&named);
        assert!(text.contains("No way to walk dot directories"), "{text}");
        // Retitling the merged pull request changes what the rows are made from; a change to
        // another thread does not.
        assert_ne!(text, links("Walk hidden directories, and dot files").text_of(&named));
        let mut other = vec![thread(RowType::PullRequest, 99, "Renamed", "")];
        other.extend([
            thread(RowType::PullRequest, 12, "Walk hidden directories", "Closes #4"),
            thread(RowType::Issue, 3, "Hidden files are skipped", ""),
            thread(RowType::Issue, 4, "No way to walk dot directories", ""),
        ]);
        assert_eq!(text, ThreadLinks::of(&other).text_of(&named));
    }
}
