//! The row: one searchable unit of a snapshot, and its Arrow schema.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bodies longer than this are cut in the index copy (`truncated` says so).
pub const BODY_MAX_CHARS: usize = 8000;

/// What a row is. The string form is the `type` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowType {
    /// An issue: its title and opening post.
    Issue,
    /// A pull request: its title and description.
    PullRequest,
    /// A comment on an issue or a pull request's conversation.
    IssueComment,
    /// A pull request review's summary text.
    PrReview,
    /// A review comment on a line of a pull request's diff.
    PrReviewComment,
    /// A release: its tag, name and notes.
    Release,
    /// A chunk of a Markdown document in the repository, split at headings.
    Doc,
    /// A chunk of a wiki page.
    WikiDoc,
    /// A commit: its message (and, for BM25, its changed paths and symbols).
    Commit,
    /// A chunk of one file's diff in a commit.
    Diff,
    /// A chunk of a source file (a tree-sitter symbol or a line window).
    Code,
}

impl RowType {
    /// Every type, in the order docs and stats list them.
    pub const ALL: [RowType; 11] = [
        RowType::Issue,
        RowType::PullRequest,
        RowType::IssueComment,
        RowType::PrReview,
        RowType::PrReviewComment,
        RowType::Release,
        RowType::Doc,
        RowType::WikiDoc,
        RowType::Commit,
        RowType::Diff,
        RowType::Code,
    ];

    /// The `type` column's value.
    pub fn as_str(self) -> &'static str {
        match self {
            RowType::Issue => "issue",
            RowType::PullRequest => "pull_request",
            RowType::IssueComment => "issue_comment",
            RowType::PrReview => "pr_review",
            RowType::PrReviewComment => "pr_review_comment",
            RowType::Release => "release",
            RowType::Doc => "doc",
            RowType::WikiDoc => "wiki_doc",
            RowType::Commit => "commit",
            RowType::Diff => "diff",
            RowType::Code => "code",
        }
    }

    /// The short prefix of a row id of this type (`cmt_…`).
    pub fn id_prefix(self) -> &'static str {
        match self {
            RowType::Issue => "iss",
            RowType::PullRequest => "pr",
            RowType::IssueComment => "ic",
            RowType::PrReview => "prr",
            RowType::PrReviewComment => "prc",
            RowType::Release => "rel",
            RowType::Doc => "doc",
            RowType::WikiDoc => "wiki",
            RowType::Commit => "cmt",
            RowType::Diff => "diff",
            RowType::Code => "code",
        }
    }

    /// The type a row id names by its prefix ([`row_id`]), if any.
    pub fn of_id(id: &str) -> Option<RowType> {
        let (prefix, _) = id.split_once('_')?;
        RowType::ALL.iter().copied().find(|t| t.id_prefix() == prefix)
    }

    /// The allowed values, for error messages.
    pub fn allowed() -> String {
        RowType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for RowType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown row type name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown row type {0:?}; allowed: {allowed}", allowed = RowType::allowed())]
pub struct UnknownRowType(pub String);

impl FromStr for RowType {
    type Err = UnknownRowType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RowType::ALL
            .iter()
            .copied()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownRowType(s.into()))
    }
}

/// The durable id of a row: a type prefix and the base64url sha256 (first 16 bytes) of what
/// the row is — repository, entity key and chunk — never of when or where it was built.
pub fn row_id(row_type: RowType, repo: &str, entity: &str, chunk: u32) -> String {
    let mut h = Sha256::new();
    h.update(repo.as_bytes());
    h.update([0]);
    h.update(entity.as_bytes());
    h.update([0]);
    h.update(chunk.to_le_bytes());
    let digest = h.finalize();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..16]);
    format!("{}_{b64}", row_type.id_prefix())
}

/// Lowercase hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One row of `rows.parquet`. Every column of the design is here; a source fills what it knows
/// and leaves the rest `None` or empty.
///
/// Its serde form (JSON, empty fields left out, no embedding) is what a format-3 serving index
/// stores per row in tantivy's doc store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Row {
    /// Durable row id: a type prefix and the base64url sha256 of repository, entity key and
    /// chunk (docs/format.md).
    pub id: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    /// What the row is (the `type` column); `None` only in rows being built.
    pub row_type: Option<RowType>,
    /// `owner/name` of the repository the row comes from.
    pub repo: String,
    /// Aggregation key: one issue or PR thread, one file, one commit, one release.
    pub entity: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Issue or pull request number, where the row belongs to one.
    pub number: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Title of the issue, PR, release or document section; a commit's subject.
    pub title: Option<String>,
    /// The index copy of the text, cut at [`BODY_MAX_CHARS`].
    pub body: String,
    /// Length in chars of the full text before any cut.
    pub body_chars: i64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    /// True when `body` was cut at [`BODY_MAX_CHARS`].
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Where the row can be read on GitHub.
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Issue or PR state: `open`, `closed` or `merged`.
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Why an issue was closed (`completed`, `not_planned`), when GitHub says.
    pub state_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Whether a pull request is a draft.
    pub draft: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// Label names, as GitHub spells them.
    pub labels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Milestone title.
    pub milestone: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// Assignee logins.
    pub assignees: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Login (or git author name) of whoever wrote the text.
    pub author: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// A commit's committer, when it differs from the author.
    pub committer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// When the text was created (a commit: its author date).
    pub created_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// When it was last changed.
    pub updated_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// When the issue or PR was closed.
    pub closed_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// When the pull request was merged.
    pub merged_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// A pull request's base branch.
    pub base_ref: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// A pull request's head branch.
    pub head_ref: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// A release's tag.
    pub tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The review comment this one answers, by GitHub id.
    pub in_reply_to: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Repository path of a file, doc or diff row, or of a review comment's line.
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// First line (1-based) of the span the row covers in `path`.
    pub line_start: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Last line (inclusive) of that span.
    pub line_end: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// Headings above a document chunk, outermost first.
    pub heading_path: Vec<String>,
    /// Position of this chunk among the chunks of its entity, from 0.
    pub chunk_index: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Commit the row was read at (a commit or diff row: the commit itself).
    pub commit_sha: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// Paths a commit changed.
    pub files_changed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Language of a code row, as the chunker names it (`rust`, `python`, …).
    pub language: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The symbol a code chunk defines, e.g. `fn parse_args`.
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    /// References found in the text: `#N`, commit SHAs and URLs.
    pub refs: Vec<String>,
    /// sha256 of [`Row::embedding_text`]: unchanged text with the same model reuses its vector.
    pub content_sha256: String,
    #[serde(skip)]
    /// The row's vector from the embedding model as hubdex keeps it ([`crate::quantize`]: unit
    /// length, scaled to 127, i8), empty before it is embedded.
    pub embedding: Vec<i8>,
    #[serde(skip)]
    /// A second vector, of the title alone ([`Row::title_embedding_text`]), for the rows that
    /// have one (empty otherwise): a commit is often asked for by what its subject says, and
    /// the subject's own vector finds it where the subject + message vector does not. Searched
    /// as one row with [`Row::embedding`] (the better of the two counts). Kept as `embedding`.
    pub title_embedding: Vec<i8>,
    /// How many leading chars of `body` the model sees (all when `None`). A commit embeds its
    /// message, not its diff; the diff is there for BM25.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed_chars: Option<usize>,
}

impl Row {
    /// The row type; rows built by [`Row::new`] always have one.
    pub fn kind(&self) -> RowType {
        self.row_type.unwrap_or(RowType::Doc)
    }

    /// A row with its identity set: id, type, repo, entity and chunk index.
    pub fn new(row_type: RowType, repo: &str, entity: &str, chunk: u32) -> Row {
        Row {
            id: row_id(row_type, repo, entity, chunk),
            row_type: Some(row_type),
            repo: repo.to_string(),
            entity: entity.to_string(),
            chunk_index: chunk as i32,
            ..Row::default()
        }
    }

    /// A row whose id derives from `id_key` (e.g. `issue_comment/<id>`) while it aggregates
    /// under `entity` (e.g. `issue/<n>`): comments keep their id when the thread changes.
    pub fn keyed(row_type: RowType, repo: &str, entity: &str, id_key: &str, chunk: u32) -> Row {
        Row { id: row_id(row_type, repo, id_key, chunk), ..Row::new(row_type, repo, entity, chunk) }
    }

    /// Sets the body from the full text: cuts it at [`BODY_MAX_CHARS`] on a char boundary and
    /// records the full length, then hashes what will be embedded.
    pub fn set_body(&mut self, full: &str) {
        self.set_body_cut(full, 0);
    }

    /// Sets the body to `head` + `tail` where only `head` is embedded (see [`Row::set_body`]).
    pub fn set_body_split(&mut self, head: &str, tail: &str) {
        self.set_body_split_cut(head, tail, 0);
    }

    /// [`Row::set_body`] of a text of which only the first characters were kept: `held`, then
    /// `more` characters not held (a diff whose long lines were counted as they were read).
    /// When `more` is not 0, `held` must have at least [`BODY_MAX_CHARS`] characters, all the
    /// body takes; the row is then the same as from the whole text.
    pub fn set_body_cut(&mut self, held: &str, more: usize) {
        self.embed_chars = None;
        self.set_body_text(held, more);
    }

    /// [`Row::set_body_split`] of a tail of which `more` characters were not held (see
    /// [`Row::set_body_cut`]).
    pub fn set_body_split_cut(&mut self, head: &str, tail: &str, more: usize) {
        self.embed_chars = Some(head.chars().count());
        self.set_body_text(&format!("{head}{tail}"), more);
    }

    /// Counts `more` characters of the body's text that were never read, after the body was
    /// set: a commit message of megabytes is read to its first MiB and the rest counted, and
    /// they belong in the part the model sees (`embed_chars`, when set). `body_chars` takes
    /// them in and the body is marked cut.
    pub fn count_unread(&mut self, more: usize) {
        if more > 0 {
            self.body_chars += more as i64;
            self.truncated = true;
            if let Some(n) = &mut self.embed_chars {
                *n += more;
                self.content_sha256 = sha256_hex(self.embedding_text().as_bytes());
            }
        }
    }

    fn set_body_text(&mut self, full: &str, more: usize) {
        let chars = full.chars().count() + more;
        debug_assert!(more == 0 || chars - more >= BODY_MAX_CHARS, "a cut text holds the body");
        self.body_chars = chars as i64;
        if chars > BODY_MAX_CHARS {
            let cut = full.char_indices().nth(BODY_MAX_CHARS).map_or(full.len(), |(i, _)| i);
            self.body = full[..cut].to_string();
            self.truncated = true;
        } else {
            self.body = full.to_string();
            self.truncated = false;
        }
        self.content_sha256 = sha256_hex(self.embedding_text().as_bytes());
    }

    /// The text of the row's second, title-only vector: a commit's subject (its pull request's
    /// title for a merge), when the row's main vector also embeds a message below it. `None`
    /// for every other row, whose one vector is enough (docs/quality.md, "What the
    /// defaults are, and why").
    pub fn title_embedding_text(&self) -> Option<String> {
        let embeds_more = match self.embed_chars {
            Some(n) => self.body.chars().take(n).any(|c| !c.is_whitespace()),
            None => !self.body.trim().is_empty(),
        };
        self.title_text().filter(|_| embeds_more)
    }

    /// What [`Row::title_embedding_text`] is when the body embeds more than whitespace, read
    /// from the row's type and title alone: a rebuild finds the build segments that may hold a
    /// title's vector by it without reading their bodies.
    pub fn title_text(&self) -> Option<String> {
        let title = self.title.as_deref().filter(|t| !t.trim().is_empty())?;
        (self.kind() == RowType::Commit).then(|| format!("{title}\n"))
    }

    /// The text the model embeds: title and body (the model truncates further).
    pub fn embedding_text(&self) -> String {
        let mut text = String::new();
        if let Some(path) = &self.path {
            text.push_str(path);
            text.push('\n');
        }
        if !self.heading_path.is_empty() {
            text.push_str(&self.heading_path.join(" > "));
            text.push('\n');
        }
        if let Some(title) = &self.title {
            text.push_str(title);
            text.push('\n');
        }
        match self.embed_chars {
            Some(n) => text.extend(self.body.chars().take(n)),
            None => text.push_str(&self.body),
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_depend_only_on_identity() {
        let a = row_id(RowType::Commit, "o/r", "commit/abc", 0);
        assert_eq!(a, row_id(RowType::Commit, "o/r", "commit/abc", 0));
        assert_ne!(a, row_id(RowType::Commit, "o/r", "commit/abc", 1));
        assert_ne!(a, row_id(RowType::Commit, "o/r2", "commit/abc", 0));
        assert!(a.starts_with("cmt_"));
        assert_eq!(a.len(), "cmt_".len() + 22);
    }

    #[test]
    fn body_is_cut_on_a_char_boundary() {
        let mut row = Row::new(RowType::Doc, "o/r", "file/a.md", 0);
        let text = "é".repeat(BODY_MAX_CHARS + 5);
        row.set_body(&text);
        assert!(row.truncated);
        assert_eq!(row.body.chars().count(), BODY_MAX_CHARS);
        assert_eq!(row.body_chars, (BODY_MAX_CHARS + 5) as i64);
        row.set_body("short");
        assert!(!row.truncated);
        assert_eq!(row.body, "short");
    }

    #[test]
    fn row_types_round_trip_and_unknown_ones_name_the_allowed() {
        for t in RowType::ALL {
            assert_eq!(t.as_str().parse::<RowType>().unwrap(), t);
        }
        let err = "issues".parse::<RowType>().unwrap_err().to_string();
        assert!(err.contains("pull_request"), "{err}");
    }

    #[test]
    fn only_a_commit_whose_vector_embeds_a_message_gets_a_title_vector() {
        let mut c = Row::new(RowType::Commit, "o/r", "commit/abc", 0);
        c.title = Some("Fix the parser".into());
        c.set_body_split("It dropped the last token.\n", "\nFiles:\nsrc/parse.rs\n");
        assert_eq!(c.title_embedding_text().as_deref(), Some("Fix the parser\n"));
        // A subject alone: the row's one vector already is the title's.
        c.set_body_split("", "\nFiles:\nsrc/parse.rs\n");
        assert_eq!(c.title_embedding_text(), None);
        let mut d = Row::new(RowType::Issue, "o/r", "issue/1", 0);
        d.title = Some("Parser drops a token".into());
        d.set_body("It does.");
        assert_eq!(d.title_embedding_text(), None, "only commits have two vectors");
    }
}
