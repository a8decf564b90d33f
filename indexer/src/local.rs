//! Rows from a local git repository: one `commit` row per commit on every branch and one `diff`
//! row per file it changed, `doc` rows for the markdown files at HEAD (chunked by heading) and
//! `code` rows for the other text files at HEAD (chunked by syntax, see [`crate::sources::code`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use hubdex_formats::{
    BODY_MAX_CHARS, CommitChanges, FileText, MAX_TEXT_FILE_BYTES, Row, RowType, Skipped, is_binary,
    row_id,
};

use crate::config::{RepoRules, looks_generated};
use crate::graph::history::{CommitNo, History};
use crate::sources::code::{ChunkOptions, Lang, chunk_code, plain_language};
use crate::sources::diff::{Cut, FilePatch};
use crate::sources::git::{self, Commit, GitError};
use crate::sources::markdown::chunk_markdown;
use crate::sources::message::Message;
use crate::sources::refs::find_refs;
use crate::sources::tree::TreeFiles;

/// Source files larger than this have no definitions listed (generated tables, amalgamations).
const SYMBOLS_MAX_FILE_BYTES: u64 = 1 << 20;

/// Markdown files larger than this are not chunked into doc rows (generated changelogs, dumps).
const DOC_MAX_BYTES: u64 = 1 << 20;

/// What a repository yields before its history's rows: its files at HEAD (docs and code, kept
/// by its rules) with their rows, spilled as they are read ([`TreeFiles`]), and its history
/// ([`CommitRows`]: what cross-references need, and the history's own rows as a stream read
/// once).
#[derive(Debug, Default)]
pub(crate) struct RepoContent {
    pub(crate) tree: TreeFiles,
    pub(crate) commits: CommitRows,
}

/// Where doc rows come from: the repository itself, or its wiki.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocSource {
    Repo,
    Wiki,
}

/// Reads the repository at `dir`, indexed under the name `repo`; `web` is its web URL when it
/// has one (links in rows).
///
/// The history is read twice. This first, compact pass (`git log --name-only`, no diffs) gives
/// every commit's parents, message, time and paths: the [`History`] edges need and a merge row
/// lists its branch from, the order the history's rows are cut in, and each path's last change
/// (a doc's `updated_at`). The rows themselves, a commit row and a diff row per file, come from
/// the second pass ([`CommitRows::commit_rows`]), one commit at a time.
pub(crate) fn read_repo(
    dir: &Path,
    repo: &str,
    web: Option<&str>,
    rules: &RepoRules,
    summaries: Option<&git::SummaryCache>,
    mut progress: impl FnMut(&str),
) -> Result<RepoContent, GitError> {
    let mut history = History::listing(Arc::new(git::rev_list(dir)?));
    let listed = history.listed();
    let mut read = 0usize;
    for c in git::commits(dir, git::Log::Summaries { listed: &listed, cache: summaries })? {
        history.push(&c?);
        read += 1;
        if read.is_multiple_of(1000) {
            progress(&format!("{read} commits"));
        }
    }
    drop(listed);
    history.finish();
    history.tags = git::tags(dir)?;
    let commits = history.len();
    let mainline = if history.has_merges() && rules.wants(RowType::Commit) {
        history.first_parent_chain(git::head(dir)?.as_deref())
    } else {
        Vec::new()
    };
    let mut content = RepoContent {
        tree: TreeFiles::default(),
        commits: CommitRows {
            dir: dir.to_path_buf(),
            repo: repo.to_string(),
            web: web.map(str::to_string),
            rules: rules.clone(),
            history,
            mainline,
            links: ThreadLinks::default(),
        },
    };
    let Some(tree) = head_tree(dir)? else {
        content.commits.history.forget_path_names();
        return Ok(content);
    };
    let (out, history) = (&mut content.tree, &mut content.commits.history);
    read_docs(dir, &tree, repo, web, DocSource::Repo, rules, history, out)?;
    let docs = out.rows();
    if rules.wants(RowType::Code) {
        read_code(dir, &tree, repo, web, rules, history, out)?;
    }
    history.forget_path_names();
    out.flush().map_err(GitError::Spill)?;
    let code = out.rows() - docs;
    progress(&format!("{commits} commits, {docs} doc chunks, {code} code chunks"));
    Ok(content)
}

/// A repository's history ([`History`]) and its rows: a commit row per commit and a diff row
/// per file it changed, after the repository's rules. The rows are read from git in a second
/// pass ([`CommitRows::commit_rows`]) in the order a build cuts them into build segments (by
/// author time, then commit; one commit's rows by id), so a build holds one commit's rows at a
/// time, not the history's.
#[derive(Debug, Default)]
pub(crate) struct CommitRows {
    dir: std::path::PathBuf,
    repo: String,
    web: Option<String>,
    rules: RepoRules,
    history: History,
    /// Whether each commit is on HEAD's first-parent chain (empty without merge rows to make).
    mainline: Vec<bool>,
    links: ThreadLinks,
}

impl CommitRows {
    /// What the history says: edges are made from it before its rows are read.
    pub(crate) fn history(&self) -> &History {
        &self.history
    }

    /// Drops what only edges needed, once they are made: messages but the titles merge rows
    /// list, or every message when no merge row will list titles (no merges, or no commit rows:
    /// `mainline` is empty then), and the rest the second pass does not read
    /// ([`History::keep_what_rows_read`]).
    pub(crate) fn edges_made(&mut self) {
        if self.mainline.is_empty() {
            self.history.drop_messages();
        } else {
            self.history.keep_titles(&self.mainline);
        }
        self.history.tags = Vec::new();
        self.history.keep_what_rows_read(&self.mainline);
        self.history.spill();
    }

    /// Whether the history has commit rows (edges name them as evidence).
    pub(crate) fn has_commit_rows(&self) -> bool {
        self.history.len() > 0 && self.rules.wants(RowType::Commit)
    }

    /// Gives each commit row what the crawl's threads say of it ([`ThreadLinks`]).
    pub(crate) fn link(&mut self, links: ThreadLinks) {
        self.links = links;
    }

    /// The rows of the commits in cut order ([`History::in_cut_order`]) from place `from` on,
    /// read from git as the iterator is advanced: each commit's place and its kept rows, in id
    /// order and made as they are taken ([`OneCommit`]). Nothing when the rules keep neither
    /// commit nor diff rows. Once the caller has taken a commit's rows it asks
    /// [`OneCommit::take_failure`] whether its file parts could all be read back.
    pub(crate) fn commit_rows(&self, from: usize) -> Result<CommitRowsFrom<'_>, GitError> {
        let (wants_commits, wants_diffs) =
            (self.rules.wants(RowType::Commit), self.rules.wants(RowType::Diff));
        let commits = if wants_commits || wants_diffs {
            let history = &self.history;
            let all = history.len();
            let shas =
                (from..all).map(|place| history.sha(history.in_cut_order(place)).to_string());
            Some(git::commits(&self.dir, git::Log::Patches(Box::new(shas)))?)
        } else {
            None
        };
        Ok(CommitRowsFrom { rows: self, commits, at: from, wants_commits, wants_diffs })
    }

    /// The repository's name and web address, as its rows give them.
    pub(crate) fn repo(&self) -> (&str, Option<&str>) {
        (&self.repo, self.web.as_deref())
    }

    /// The rules its rows are kept by.
    pub(crate) fn rules(&self) -> &RepoRules {
        &self.rules
    }

    /// What the crawl's threads say of its commits.
    pub(crate) fn links(&self) -> &ThreadLinks {
        &self.links
    }

    /// What the merge `merge` lists, as text (empty for a commit that is no merge or lists
    /// nothing): what its commit row takes in from the rest of the history.
    pub(crate) fn merged_text(&self, merge: CommitNo) -> String {
        if self.history.parents(merge).nth(1).is_none() {
            return String::new();
        }
        let Merged { subjects, files } = merged_of(&self.history, &self.mainline, merge);
        format!("{}\u{1f}{}", subjects.join("\u{1e}"), files.join("\u{1e}"))
    }
}

/// Reads the files at HEAD other than markdown (when the rules keep code): every one goes to
/// `out` for `read_span` and `grep`, a text file up to [`MAX_TEXT_FILE_BYTES`] with its text
/// (vendored and generated ones marked), a binary or larger one listed without it. A text
/// file that is not vendored or generated, has a language and is not larger than the code
/// rules allow is also chunked into `code` rows (see [`crate::sources::code`]).
fn read_code(
    dir: &Path,
    tree: &HeadTree,
    repo: &str,
    web: Option<&str>,
    rules: &RepoRules,
    history: &History,
    out: &mut TreeFiles,
) -> Result<(), GitError> {
    let head = &tree.head;
    let paths: Vec<String> =
        tree.files.iter().filter(|p| !is_markdown(p) && rules.keeps_path(p)).cloned().collect();
    let opts = ChunkOptions { strip_doc_comments: rules.code.strip_doc_comments };
    let mut blobs = git::blobs(dir, head, &paths, MAX_TEXT_FILE_BYTES)?;
    for blob in blobs.by_ref() {
        let (path, bytes) = blob?;
        let language = language_of(path);
        if is_binary(&bytes) {
            list_without_text(rules, out, path, head, language, Skipped::Binary)?;
            continue;
        }
        let size = bytes.len() as u64;
        let (text, utf8) = match String::from_utf8(bytes) {
            Ok(text) => (text, true),
            Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), false),
        };
        // Its first 2,000 bytes, cut back to a character's start (a file is any UTF-8).
        let generated = rules.code.generated.is_match(path)
            || looks_generated(&text[..text.floor_char_boundary(2000)]);
        let vendored = rules.code.vendored.is_match(path);
        let chunked = utf8
            && !generated
            && language.is_some()
            && size <= rules.code.max_file_bytes
            && !rules.code.skip.is_match(path);
        let rows = if chunked {
            code_rows(repo, web, head, path, language, &text, opts, history)
        } else {
            Vec::new()
        };
        // Definitions for `symbols`: every file with a grammar but generated ones (a generated
        // table of a million entries is no one's definitions).
        let symbols = match Lang::of_path(path) {
            Some(lang) if utf8 && !generated && size <= SYMBOLS_MAX_FILE_BYTES => {
                crate::sources::tags::symbols(lang, &text)
            }
            _ => Vec::new(),
        };
        let file =
            FileText { vendored, generated, symbols, ..FileText::new(path, head, language, text) };
        keep(rules, out, file, rows).map_err(GitError::Spill)?;
    }
    for path in blobs.too_large() {
        list_without_text(rules, out, path, head, language_of(path), Skipped::TooLarge)?;
    }
    Ok(())
}

/// A file's language: its grammar's name, or the plain one its extension names.
fn language_of(path: &str) -> Option<&'static str> {
    Lang::of_path(path).map(Lang::name).or_else(|| plain_language(path))
}

/// Writes `path` (at commit `head`, in `language`) to `out` without its text: `why` says why.
fn list_without_text(
    rules: &RepoRules,
    out: &mut TreeFiles,
    path: &str,
    head: &str,
    language: Option<&str>,
    why: Skipped,
) -> Result<(), GitError> {
    let file =
        FileText { skipped: Some(why), ..FileText::new(path, head, language, String::new()) };
    keep(rules, out, file, Vec::new()).map_err(GitError::Spill)
}

/// The `code` rows of the file `path` at commit `head`.
#[allow(clippy::too_many_arguments)]
fn code_rows(
    repo: &str,
    web: Option<&str>,
    head: &str,
    path: &str,
    language: Option<&str>,
    text: &str,
    opts: ChunkOptions,
    history: &History,
) -> Vec<Row> {
    let updated = history.last_change(path);
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let chunked = chunk_code(path, text, opts);
    let mut rows = Vec::with_capacity(chunked.chunks.len());
    for (i, chunk) in chunked.chunks.into_iter().enumerate() {
        let mut row = Row::new(RowType::Code, repo, &format!("file/{path}"), i as u32);
        row.title = Some(match &chunk.symbol {
            Some(sym) => format!("{sym} ({file_name})"),
            None => format!("{file_name}:{}-{}", chunk.line_start, chunk.line_end),
        });
        row.symbol = chunk.symbol;
        row.path = Some(path.to_string());
        row.language = language.map(str::to_string);
        row.line_start = Some(chunk.line_start as i64);
        row.line_end = Some(chunk.line_end as i64);
        row.commit_sha = Some(head.to_string());
        row.created_at = updated;
        row.updated_at = updated;
        row.url = web
            .map(|w| format!("{w}/blob/{head}/{path}#L{}-L{}", chunk.line_start, chunk.line_end));
        row.set_body(&chunk.text);
        rows.push(row);
    }
    rows
}

/// Writes `file` and the rows of it `rules` keep to `out`, unless its path is excluded (then
/// none of its rows are kept either: they carry its path).
fn keep(
    rules: &RepoRules,
    out: &mut TreeFiles,
    file: FileText,
    mut rows: Vec<Row>,
) -> std::io::Result<()> {
    if !rules.keeps_path(&file.path) {
        return Ok(());
    }
    rows.retain(|r| rules.keeps(r));
    out.add(file, rows)
}

/// Reads the markdown pages of a wiki repository as `wiki_doc` rows (paths under `wiki/`).
pub(crate) fn read_wiki(
    dir: &Path,
    repo: &str,
    web: Option<&str>,
    rules: &RepoRules,
) -> Result<TreeFiles, GitError> {
    let mut history = History::listing(Arc::new(git::rev_list(dir)?));
    let listed = history.listed();
    for c in git::commits(dir, git::Log::Summaries { listed: &listed, cache: None })? {
        history.push(&c?);
    }
    let mut out = TreeFiles::default();
    if let Some(tree) = head_tree(dir)? {
        read_docs(dir, &tree, repo, web, DocSource::Wiki, rules, &history, &mut out)?;
    }
    out.flush().map_err(GitError::Spill)?;
    Ok(out)
}

/// The commit HEAD points at and the paths of its tree, listed once for docs and code.
pub(crate) struct HeadTree {
    head: String,
    files: Vec<String>,
}

/// HEAD's tree, or `None` in an empty repository.
fn head_tree(dir: &Path) -> Result<Option<HeadTree>, GitError> {
    let Some(head) = git::head(dir)? else { return Ok(None) };
    let files = git::tree_files(dir, &head)?;
    Ok(Some(HeadTree { head, files }))
}

/// Reads the markdown files at HEAD as `doc` (or `wiki_doc`) rows, each file to `out` as it is
/// read.
#[allow(clippy::too_many_arguments)]
fn read_docs(
    dir: &Path,
    tree: &HeadTree,
    repo: &str,
    web: Option<&str>,
    source: DocSource,
    rules: &RepoRules,
    history: &History,
    out: &mut TreeFiles,
) -> Result<(), GitError> {
    let head = &tree.head;
    let docs: Vec<String> = tree.files.iter().filter(|p| is_markdown(p)).cloned().collect();
    let shown = |path: &str| match source {
        DocSource::Repo => path.to_string(),
        DocSource::Wiki => format!("wiki/{path}"),
    };
    let markdown = Some("markdown");
    let mut blobs = git::blobs(dir, head, &docs, MAX_TEXT_FILE_BYTES)?;
    for blob in blobs.by_ref() {
        let (path, bytes) = blob?;
        let shown = shown(path);
        if is_binary(&bytes) {
            list_without_text(rules, out, &shown, head, markdown, Skipped::Binary)?;
            continue;
        }
        let size = bytes.len() as u64;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        let updated = history.last_change(path);
        // Larger ones (generated changelogs, dumps) are held for exact search only.
        let rows = if size <= DOC_MAX_BYTES {
            doc_rows(repo, web, source, &shown, head, &text, updated)
        } else {
            Vec::new()
        };
        let file = FileText {
            vendored: rules.code.vendored.is_match(path),
            generated: rules.code.generated.is_match(path),
            ..FileText::new(&shown, head, markdown, text)
        };
        keep(rules, out, file, rows).map_err(GitError::Spill)?;
    }
    for path in blobs.too_large() {
        list_without_text(rules, out, &shown(path), head, markdown, Skipped::TooLarge)?;
    }
    Ok(())
}

fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown") || lower.ends_with(".mdx")
}

/// What a merge brought in: the subjects and files of the commits on the merged branch (its
/// second parent's first-parent chain back to the mainline), at most [`MERGED_MAX`] of them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Merged {
    pub subjects: Vec<String>,
    pub files: Vec<String>,
}

/// Commits of a merged branch a merge row lists.
const MERGED_MAX: usize = 30;

/// What merge `c` brought in: its second parent's first-parent chain until it meets the
/// mainline or the first parent (at most [`MERGED_MAX`] commits), oldest last.
fn merged_by(history: &History, mainline: &[bool], c: &Commit) -> Merged {
    history.find(&c.sha).map(|merge| merged_of(history, mainline, merge)).unwrap_or_default()
}

/// What the merge `merge` brought in ([`merged_by`]).
fn merged_of(history: &History, mainline: &[bool], merge: CommitNo) -> Merged {
    let mut merged = Merged::default();
    let mut parents = history.parents(merge);
    let first = parents.next().flatten();
    let mut at = parents.next().flatten();
    while let Some(p) = at {
        let on_mainline = mainline.get(p as usize).copied().unwrap_or(false);
        if merged.subjects.len() == MERGED_MAX || on_mainline || Some(p) == first {
            break;
        }
        merged.subjects.push(history.title(p));
        for f in history.files(p) {
            if !merged.files.iter().any(|m| m == f) {
                merged.files.push(f.to_string());
            }
        }
        at = history.first_parent(p);
    }
    merged
}

/// The row of one commit. `merged` is what a merge brought in (empty for other commits). The
/// commit's paths move into the row's `files_changed` (`c.files` is left empty): an import
/// commit's are every path it adds.
pub(crate) fn commit_row(repo: &str, web: Option<&str>, c: &mut Commit, merged: &Merged) -> Row {
    let mut row = Row::new(RowType::Commit, repo, &format!("commit/{}", c.sha), 0);
    let message = Message::of(c);
    set_commit_fields(&mut row, web, c, &message, find_refs(&c.message));
    row.files_changed =
        if c.files.is_empty() { merged.files.clone() } else { std::mem::take(&mut c.files) };
    // The model sees the title and what describes the change: the description and what a
    // merge brought in; lists of files and functions, who, and the diff are for BM25 only
    // (measured on the fd set: docs/quality.md).
    let mut head = String::new();
    let section = |out: &mut String, text: &str| {
        if !text.is_empty() {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(text);
        }
    };
    section(&mut head, &message.description);
    section(&mut head, message.extra.as_deref().unwrap_or(""));
    if !merged.subjects.is_empty() {
        let list: Vec<String> = merged.subjects.iter().map(|s| format!("- {s}")).collect();
        section(&mut head, &format!("Merged commits:\n{}", list.join("\n")));
    }
    let mut tail = Tail::after(&head);
    if let Some((first, rest)) = row.files_changed.split_first() {
        tail.section(["Files: ", first].into_iter().chain(rest.iter().flat_map(|f| [", ", f])));
    }
    if let Some((first, rest)) = c.diff.symbols.split_first() {
        let symbols = rest.iter().flat_map(|s| [", ", s.as_str()]);
        tail.section(["Functions: ", first].into_iter().chain(symbols));
    }
    tail.section([
        "Author: ",
        &c.author,
        " <",
        &c.author_email,
        ">\nCommitter: ",
        &c.committer,
        " <",
        &c.committer_email,
        ">",
    ]);
    if let Some((first, rest)) = c.parents.split_first()
        && !rest.is_empty()
    {
        let parents = rest.iter().flat_map(|p| [" ", p.as_str()]);
        tail.section(["Merge of ", first].into_iter().chain(parents));
    }
    tail.section([c.diff.head.text.as_str()]);
    let Cut { text: tail, more } = tail.cut;
    row.set_body_split_cut(&head, &tail, more + c.diff.head.more);
    row.count_unread(c.message_more);
    row
}

/// A commit row's text after its description, held to the characters a body takes
/// ([`BODY_MAX_CHARS`]) and counted past them: an import commit's list of files, every path it
/// adds, is never joined whole. Sections are set apart by a blank line, and from the
/// description before them.
struct Tail {
    cut: Cut,
    /// Characters in `cut.text`.
    chars: usize,
    /// Whether a section was written.
    started: bool,
}

impl Tail {
    /// The text after `head`: a blank line first when `head` is not empty.
    fn after(head: &str) -> Tail {
        let mut tail = Tail { cut: Cut::default(), chars: 0, started: false };
        if !head.is_empty() {
            tail.push("\n\n");
        }
        tail
    }

    /// A section made of `pieces` (none written when they are all empty).
    fn section<'a>(&mut self, pieces: impl IntoIterator<Item = &'a str>) {
        let mut pieces = pieces.into_iter().filter(|p| !p.is_empty()).peekable();
        if pieces.peek().is_none() {
            return;
        }
        if std::mem::replace(&mut self.started, true) {
            self.push("\n\n");
        }
        pieces.for_each(|p| self.push(p));
    }

    fn push(&mut self, s: &str) {
        if self.cut.more > 0 {
            self.cut.more += s.chars().count();
            return;
        }
        let room = BODY_MAX_CHARS - self.chars;
        match s.char_indices().nth(room) {
            None => {
                self.cut.text.push_str(s);
                self.chars += s.chars().count();
            }
            Some((at, _)) => {
                self.cut.text.push_str(&s[..at]);
                self.chars = BODY_MAX_CHARS;
                self.cut.more = s[at..].chars().count();
            }
        }
    }
}

/// Chars of a pull request's description a commit row that merged it takes in.
const PR_BODY_CHARS: usize = 600;

/// The most closed issues whose titles one commit row takes in.
const CLOSED_ISSUES_MAX: usize = 5;

/// Gives each commit row what the crawl's threads say of it, in the text both BM25 and the
/// model see, since a commit is often found by the words of its pull request or of the issue it
/// fixed rather than its own:
/// - a commit that merged a pull request of the same crawl (a squash subject ending in `(#N)`,
///   or GitHub's "Merge pull request #N") takes that pull request's title and the start of its
///   description;
/// - a commit that closes issues of the same crawl (GitHub's closing keywords in its message,
///   or in the description of the pull request it merged) takes their titles (at most
///   [`CLOSED_ISSUES_MAX`]).
#[cfg(test)]
pub(crate) fn link_threads(rows: &mut [Row]) {
    let links = ThreadLinks::of(rows);
    for row in rows.iter_mut() {
        links.apply(row);
    }
}

/// What a commit message (its `title` and the `head` of its row's body) names: the pull request
/// it merged (a squash subject ending in `(#N)`, or GitHub's "Merge pull request #N") and the
/// issues it closes, by number.
fn named_in(title: Option<&str>, head: &str, repo: &str) -> (Option<i64>, Vec<i64>) {
    let squashed =
        title.and_then(|t| t.strip_suffix(')')?.rsplit_once("(#")?.1.parse::<i64>().ok());
    // The message's own words: its subject and description, not the diff.
    let message = format!("{}\n{head}", title.unwrap_or(""));
    let merge = message.split_once("Merge pull request #").and_then(|(_, rest)| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<i64>().ok()
    });
    (squashed.or(merge), crate::graph::edges::closed_issues(&message, repo))
}

/// What a crawl's threads say of the commits (what the tests' `link_threads` applies): each
/// pull request's text and the issues its description closes, and each issue's title line, by
/// number.
#[derive(Debug, Default)]
pub(crate) struct ThreadLinks {
    pulls: HashMap<i64, (String, Vec<i64>)>,
    issues: HashMap<i64, String>,
}

impl ThreadLinks {
    /// The links `rows` (a crawl's threads) give.
    pub(crate) fn of(rows: &[Row]) -> ThreadLinks {
        // A pull request's text for the commit that merged it, and the issues its description
        // closes.
        let mut pulls: HashMap<i64, (String, Vec<i64>)> = HashMap::new();
        let mut issues: HashMap<i64, String> = HashMap::new();
        for r in rows.iter().filter(|r| r.chunk_index == 0) {
            let (Some(n), Some(title)) = (r.number, r.title.as_deref()) else { continue };
            match r.kind() {
                RowType::PullRequest => {
                    let body: String = r.body.chars().take(PR_BODY_CHARS).collect();
                    let text = format!("Pull request #{n}: {title}\n{}", body.trim());
                    pulls.insert(n, (text, crate::graph::edges::closed_issues(&r.body, &r.repo)));
                }
                RowType::Issue => {
                    issues.insert(n, format!("Closes issue #{n}: {title}"));
                }
                _ => {}
            }
        }
        ThreadLinks { pulls, issues }
    }

    /// The thread numbers [`Self::apply`] looks up for the commit row `row` (none for another
    /// row), read from the row as it is: a row that has taken in threads' text may name more
    /// than its message did, never fewer (the text is added after the message's).
    pub(crate) fn numbers_named(row: &Row) -> Vec<i64> {
        if row.kind() != RowType::Commit {
            return Vec::new();
        }
        let head_chars = row.embed_chars.unwrap_or(row.body.chars().count());
        let head: String = row.body.chars().take(head_chars).collect();
        let (merged, mut numbers) = named_in(row.title.as_deref(), &head, &row.repo);
        numbers.extend(merged);
        numbers
    }

    /// What these threads say of the thread numbers `numbers`, as text: each pull request's
    /// text and the issues it closes, each issue's title line, and those of the issues the pull
    /// requests close. Two crawls that say the same of them give commit rows naming only these
    /// the same text.
    pub(crate) fn text_of(&self, numbers: &[i64]) -> String {
        let mut out = String::new();
        let mut issues: Vec<i64> = numbers.to_vec();
        for n in numbers {
            if let Some((text, closes)) = self.pulls.get(n) {
                out.push_str(&format!("pull {n}\u{1f}{text}\u{1f}{closes:?}\u{1e}"));
                issues.extend(closes);
            }
        }
        issues.sort_unstable();
        issues.dedup();
        for n in issues {
            if let Some(title) = self.issues.get(&n) {
                out.push_str(&format!("issue {n}\u{1f}{title}\u{1e}"));
            }
        }
        out
    }

    /// Gives `row`, when it is a commit row, the text of the pull request it merged and the
    /// titles of the issues it closes.
    pub(crate) fn apply(&self, row: &mut Row) {
        let ThreadLinks { pulls, issues } = self;
        if (pulls.is_empty() && issues.is_empty()) || row.kind() != RowType::Commit {
            return;
        }
        let head_chars = row.embed_chars.unwrap_or(row.body.chars().count());
        let head: String = row.body.chars().take(head_chars).collect();
        let tail: String = row.body.chars().skip(head_chars).collect();
        let (merged, mut closed) = named_in(row.title.as_deref(), &head, &row.repo);
        let pull = merged.and_then(|n| pulls.get(&n));
        // What the message closes, then what the pull request's description closes.
        if let Some((_, pr_closed)) = pull {
            for n in pr_closed {
                if !closed.contains(n) {
                    closed.push(*n);
                }
            }
        }
        let mut linked: Vec<&str> = pull.map(|(text, _)| text.as_str()).into_iter().collect();
        linked.extend(
            closed.iter().filter_map(|n| issues.get(n)).take(CLOSED_ISSUES_MAX).map(String::as_str),
        );
        if linked.is_empty() {
            return;
        }
        let linked = linked.join("\n");
        let head = if head.is_empty() { linked } else { format!("{head}\n\n{linked}") };
        row.set_body_split(&head, &tail);
    }
}

/// The rows of a history's commits from a place on, as [`CommitRows::commit_rows`] reads them.
pub(crate) struct CommitRowsFrom<'a> {
    rows: &'a CommitRows,
    commits: Option<git::Commits<'a>>,
    at: usize,
    wants_commits: bool,
    wants_diffs: bool,
}

impl<'a> Iterator for CommitRowsFrom<'a> {
    type Item = Result<(usize, OneCommit<'a>), GitError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut c = match self.commits.as_mut()?.next()? {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let r = self.rows;
        let web = r.web.as_deref();
        let commit_row = self
            .wants_commits
            .then(|| {
                let merged = if c.parents.len() > 1 {
                    merged_by(&r.history, &r.mainline, &c)
                } else {
                    Merged::default()
                };
                let mut row = commit_row(&r.repo, web, &mut c, &merged);
                r.links.apply(&mut row);
                row
            })
            .filter(|row| r.rules.keeps(row));
        let wants_diffs = self.wants_diffs;
        let keeps_part = |path: &str| wants_diffs && r.rules.keeps_path(path);
        let mut rows = OneCommit::new(&r.repo, web, c, commit_row, keeps_part);
        rows.changes = Some(commit_changes(&mut rows, |p| r.rules.keeps_path(p)));
        self.at += 1;
        Some(Ok((self.at - 1, rows)))
    }
}

/// One commit's kept rows in id order, each made as it is taken: a diff row's file part is
/// taken (read back from its temporary file, for a commit of many files: [`crate::sources::diff::FileParts`]) only
/// when its turn comes, so a commit of thousands of files is never held as rows. A part that
/// cannot be read back ends the rows; [`CommitRows::commit_rows`] then fails.
pub(crate) struct OneCommit<'a> {
    repo: &'a str,
    web: Option<&'a str>,
    commit: Commit,
    message: Message,
    refs: Vec<String>,
    commit_row: Option<Row>,
    /// The rows in id order: the commit row (`None`) or a file part's row (its number).
    order: Vec<Option<usize>>,
    next: usize,
    failed: Option<std::io::Error>,
    /// Its added and removed lines, until taken ([`OneCommit::take_changes`]).
    changes: Option<CommitChanges>,
}

impl<'a> OneCommit<'a> {
    /// Its added and removed lines in the files the rules keep (what history grep searches),
    /// once: `None` after the first call. A merge has none.
    pub(crate) fn take_changes(&mut self) -> Option<CommitChanges> {
        self.changes.take().filter(|c| !c.runs.is_empty() || c.hidden_lines > 0)
    }

    /// Why the rows stopped short, if they did: a file part that could not be read back from
    /// its temporary file. Asked once the rows are taken.
    pub(crate) fn take_failure(&mut self) -> Option<std::io::Error> {
        self.failed.take()
    }

    /// The rows of `commit`: `commit_row` if kept, and a diff row for each file part whose path
    /// `keeps_part`.
    fn new(
        repo: &'a str,
        web: Option<&'a str>,
        commit: Commit,
        commit_row: Option<Row>,
        keeps_part: impl Fn(&str) -> bool,
    ) -> OneCommit<'a> {
        let parts = &commit.diff.files;
        let mut ids: Vec<(String, Option<usize>)> = Vec::new();
        if let Some(row) = &commit_row {
            ids.push((row.id.clone(), None));
        }
        for i in 0..parts.len() {
            let path = parts.path(i);
            if keeps_part(path) {
                ids.push((row_id(RowType::Diff, repo, &diff_key(&commit.sha, path), 0), Some(i)));
            }
        }
        ids.sort_by(|a, b| a.0.cmp(&b.0));
        OneCommit {
            repo,
            web,
            message: Message::of(&commit),
            refs: find_refs(&commit.message),
            commit,
            commit_row,
            order: ids.into_iter().map(|(_, part)| part).collect(),
            next: 0,
            failed: None,
            changes: None,
        }
    }
}

/// `rows`' commit's changed lines with its SHA, time and title, without the lines of files
/// `keeps_path` leaves out.
fn commit_changes(rows: &mut OneCommit<'_>, keeps_path: impl Fn(&str) -> bool) -> CommitChanges {
    let mut c = std::mem::take(&mut rows.commit.diff.changes);
    c.commit_sha = rows.commit.sha.clone();
    c.committed_at = rows.commit.committed_at;
    c.title = rows.message.title.clone();
    if c.runs.iter().all(|r| keeps_path(&r.path)) {
        return c;
    }
    let (mut lines, mut runs) = (String::new(), Vec::new());
    let mut rest = c.lines.as_str();
    for run in std::mem::take(&mut c.runs) {
        let mut end = 0;
        for _ in 0..run.lines {
            end += rest[end..].find('\n').map_or(rest.len() - end, |i| i + 1);
        }
        if keeps_path(&run.path) {
            lines.push_str(&rest[..end]);
            runs.push(run);
        }
        rest = &rest[end..];
    }
    CommitChanges { lines, runs, ..c }
}

impl Iterator for OneCommit<'_> {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        let part = *self.order.get(self.next)?;
        self.next += 1;
        let Some(i) = part else { return self.commit_row.take() };
        match self.commit.diff.files.take(i) {
            Ok(part) => {
                Some(diff_row(self.repo, self.web, &self.commit, &self.message, &self.refs, part))
            }
            Err(e) => {
                self.failed = Some(e);
                self.next = self.order.len();
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.order.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for OneCommit<'_> {}

/// What a commit row and its diff rows say alike of the commit: its title, who and when, its
/// SHA and web page, and what its message refers to (`refs`).
fn set_commit_fields(
    row: &mut Row,
    web: Option<&str>,
    c: &Commit,
    message: &Message,
    refs: Vec<String>,
) {
    row.title = Some(message.title.clone());
    row.author = Some(format!("{} <{}>", c.author, c.author_email));
    row.committer = Some(format!("{} <{}>", c.committer, c.committer_email));
    row.created_at = c.authored_at;
    row.updated_at = c.committed_at;
    row.commit_sha = Some(c.sha.clone());
    row.url = web.map(|w| format!("{w}/commit/{}", c.sha));
    row.refs = refs;
}

/// The key a diff row's id is made from.
fn diff_key(sha: &str, path: &str) -> String {
    format!("diff/{sha}/{path}")
}

/// The row of one file a commit changed: the commit message, the path and that file's patch.
fn diff_row(
    repo: &str,
    web: Option<&str>,
    c: &Commit,
    message: &Message,
    refs: &[String],
    FilePatch { path, patch, symbols }: FilePatch,
) -> Row {
    let entity = format!("commit/{}", c.sha);
    let mut row = Row::keyed(RowType::Diff, repo, &entity, &diff_key(&c.sha, &path), 0);
    set_commit_fields(&mut row, web, c, message, refs.to_vec());
    row.files_changed = vec![path.clone()];
    row.path = Some(path);
    let mut body = message.description.clone();
    if !symbols.is_empty() {
        body.push_str(&format!("\n\nFunctions: {}", symbols.join(", ")));
    }
    row.set_body_cut(&format!("{}\n\n{}", body.trim_start(), patch.text), patch.more);
    row.count_unread(c.message_more);
    row
}

/// One row per file a commit changed, in the diff's order (tests: a build takes them through
/// [`OneCommit`]).
#[cfg(test)]
pub(crate) fn diff_rows(repo: &str, web: Option<&str>, c: &mut Commit) -> Vec<Row> {
    let (message, refs) = (Message::of(c), find_refs(&c.message));
    let parts = std::mem::take(&mut c.diff.files).all();
    parts.into_iter().map(|part| diff_row(repo, web, c, &message, &refs, part)).collect()
}

/// The chunk rows of one markdown file at `commit`.
pub(crate) fn doc_rows(
    repo: &str,
    web: Option<&str>,
    source: DocSource,
    path: &str,
    commit: &str,
    text: &str,
    updated: Option<DateTime<Utc>>,
) -> Vec<Row> {
    let file_name = path.rsplit('/').next().unwrap_or(path).to_string();
    chunk_markdown(text)
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| {
            let kind = if source == DocSource::Wiki { RowType::WikiDoc } else { RowType::Doc };
            let mut row = Row::new(kind, repo, &format!("file/{path}"), i as u32);
            row.title =
                Some(chunk.heading_path.last().cloned().unwrap_or_else(|| file_name.clone()));
            row.heading_path = chunk.heading_path;
            row.path = Some(path.to_string());
            row.line_start = Some(chunk.line_start as i64);
            row.line_end = Some(chunk.line_end as i64);
            row.commit_sha = Some(commit.to_string());
            row.updated_at = updated;
            row.created_at = updated;
            row.language = Some("markdown".into());
            row.url = web.map(|w| match source {
                DocSource::Repo => {
                    format!("{w}/blob/{commit}/{path}#L{}-L{}", chunk.line_start, chunk.line_end)
                }
                DocSource::Wiki => {
                    let page = path.trim_start_matches("wiki/");
                    let page = page.rsplit_once('.').map_or(page, |(p, _)| p);
                    format!("{w}/wiki/{page}")
                }
            });
            row.refs = find_refs(&chunk.text);
            row.set_body(&chunk.text);
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::diff::Diff;

    #[test]
    fn a_code_file_with_a_character_across_its_2000th_byte_is_read() {
        // A box-drawing character (3 bytes) over bytes 1999..2002, as in a real licence header:
        // the check for a generated file reads the file's head up to a character's start.
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        crate::sources::git::tests::git_ok(d, &["init", "-q", "-b", "main"]);
        let text = format!("// {}\u{2502}\nfn main() {{}}\n", "x".repeat(1996));
        assert!(!text.is_char_boundary(2000));
        std::fs::write(d.join("main.rs"), &text).unwrap();
        crate::sources::git::tests::git_ok(d, &["add", "-A"]);
        crate::sources::git::tests::git_ok(d, &["commit", "-q", "-m", "one file"]);
        let content = read_repo(d, "o/r", None, &RepoRules::default(), None, |_| {}).unwrap();
        let files: Vec<_> = content.tree.files().unwrap().map(Result::unwrap).collect();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0.content, text);
        assert!(files[0].1.iter().any(|r| r.kind() == RowType::Code), "{:?}", files[0].1);
    }

    #[test]
    fn a_commit_s_rows_come_in_id_order_made_as_taken_whether_its_parts_are_held_or_written_out() {
        use crate::sources::diff::PARTS_HELD;
        let text: String = (0..40)
            .map(|i| format!("diff --git a/f{i}.rs b/f{i}.rs\n@@ -1 +1 @@ fn f{i}(\n-a\n+b {i}\n"))
            .collect();
        let commit = |diff: Diff, files: Vec<String>| Commit {
            sha: "d".repeat(40),
            message: "Touch forty files\n\nSee #7.".into(),
            files,
            diff,
            ..Commit::default()
        };
        // What the rows were when a commit's rows were all made, then sorted by id.
        let row =
            commit_row("o/r", None, &mut commit(Diff::of(&text), Vec::new()), &Merged::default());
        let mut expected = vec![row.clone()];
        expected.extend(diff_rows("o/r", None, &mut commit(Diff::of(&text), Vec::new())));
        expected.retain(|r| r.path.as_deref() != Some("f3.rs"));
        expected.sort_by(|a, b| a.id.cmp(&b.id));
        for hold in [PARTS_HELD, 0] {
            let (files, diff) = Diff::read(&text, &[], hold, hubdex_formats::BODY_MAX_CHARS);
            assert_eq!(diff.files.spilled(), hold == 0);
            let c = commit(diff, files);
            let mut rows = OneCommit::new("o/r", None, c, Some(row.clone()), |p| p != "f3.rs");
            assert_eq!(rows.len(), 40);
            let got: Vec<Row> = rows.by_ref().collect();
            assert!(rows.failed.is_none());
            assert_eq!(got, expected, "holding {hold} bytes");
        }
    }

    /// Every row of `c` (its commit row and a diff row a file), as a build makes them, in id
    /// order.
    fn rows_in_id_order(mut c: Commit) -> Vec<Row> {
        let row = commit_row("o/r", None, &mut c, &Merged::default());
        let mut rows: Vec<Row> = OneCommit::new("o/r", None, c, Some(row), |_| true).collect();
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        rows
    }

    #[test]
    fn rows_of_a_diff_whose_long_lines_were_counted_not_held_are_the_rows_of_the_whole_diff() {
        use crate::sources::diff::PARTS_HELD;
        use hubdex_formats::BODY_MAX_CHARS;
        // A minified file's one line, a long line of several-byte characters ending in
        // whitespace, lines past the cut, and a short file: what rows hold of each.
        let long = "x".repeat(3 * BODY_MAX_CHARS);
        let wide = format!("{}  \r\n", "\u{2500}".repeat(BODY_MAX_CHARS + 7));
        let many: String = (0..250).map(|i| format!("+{}\n", "y".repeat(i * 40))).collect();
        let text = format!(
            "diff --git a/app.min.js b/app.min.js\n@@ -0,0 +1 @@\n+{long}\n\
             diff --git a/w.txt b/w.txt\n+{wide}\
             diff --git a/many.txt b/many.txt\n{many}\
             diff --git a/s.rs b/s.rs\n@@ -1 +1 @@ fn s(\n-a\n+b\n"
        );
        let rows = |keep: usize, piece: Option<usize>| {
            // Pieces of `piece` bytes (`usize::MAX`: the whole text at once), or a line at a
            // time.
            let pieces = piece.map_or(Vec::new(), |n| vec![n; text.len()]);
            let (files, diff) = Diff::read(&text, &pieces, PARTS_HELD, keep);
            assert!(keep == usize::MAX || diff.head.more > 0);
            rows_in_id_order(Commit {
                sha: "e".repeat(40),
                message: "Vendor the app".into(),
                files,
                diff,
                ..Commit::default()
            })
        };
        let whole = rows(usize::MAX, None);
        assert_eq!(whole.len(), 5);
        assert!(whole.iter().filter(|r| r.truncated).count() >= 4, "{whole:?}");
        for piece in [None, Some(usize::MAX), Some(4096), Some(7)] {
            assert_eq!(rows(BODY_MAX_CHARS, piece), whole, "pieces of {piece:?} bytes");
        }
    }

    #[test]
    fn a_commit_row_takes_what_its_body_keeps_of_a_long_list_of_files_and_counts_the_rest() {
        // The text as docs/format.md defines it, joined whole: head, then each section.
        let whole_text = |c: &Commit, files: &[String]| {
            let mut tail = vec![format!("Files: {}", files.join(", "))];
            if !c.diff.symbols.is_empty() {
                tail.push(format!("Functions: {}", c.diff.symbols.join(", ")));
            }
            tail.push(format!("Author: {} <{}>\nCommitter: {} <{}>", "Ada", "a@x", "Bo", "b@x"));
            tail.push(format!("Merge of {}", c.parents.join(" ")));
            tail.push(c.diff.head.text.clone());
            format!("\n\n{}", tail.join("\n\n"))
        };
        let long: String = (0..300).map(|i| format!("+line {i}: {}\n", "é".repeat(40))).collect();
        for (n, diff) in [
            // An import commit: its list of files is far longer than the body.
            (5_000, "diff --git a/s.rs b/s.rs\n@@ -1 +1 @@ fn s(\n-a\n+b\n".to_string()),
            // A few files and a diff cut short: the count goes on past the diff's own.
            (3, format!("diff --git a/s.rs b/s.rs\n{long}")),
        ] {
            let files: Vec<String> = (0..n).map(|i| format!("vendor/pâth/{i}.rs")).collect();
            let (_, diff) =
                Diff::read(&diff, &[], crate::sources::diff::PARTS_HELD, BODY_MAX_CHARS);
            let mut c = Commit {
                sha: "e".repeat(40),
                parents: vec!["1".repeat(40), "2".repeat(40)],
                author: "Ada".into(),
                author_email: "a@x".into(),
                committer: "Bo".into(),
                committer_email: "b@x".into(),
                message: "Import the tree\n\nThe vendored one.".into(),
                files: files.clone(),
                diff,
                ..Commit::default()
            };
            let row = commit_row("o/r", None, &mut c, &Merged::default());
            assert!(c.files.is_empty() && row.files_changed == files, "the paths move to the row");
            let mut whole = row.clone();
            whole.set_body_split_cut(
                "The vendored one.",
                &whole_text(&c, &files),
                c.diff.head.more,
            );
            assert_eq!(row, whole, "{n} files");
            assert!(row.truncated && row.body_chars > BODY_MAX_CHARS as i64, "{n} files");
        }
    }

    #[test]
    fn rows_of_a_message_held_in_part_are_the_rows_of_the_whole_message() {
        use hubdex_formats::BODY_MAX_CHARS;
        // A generated log pasted into a message: its first part held, the rest counted, as
        // git.rs reads a message past its first MiB (its proptest holds the two together). A
        // paragraph of one trailer-like line sits in the middle.
        let log = |n: usize| -> String {
            (0..n)
                .map(|i| format!("entry {i}: fixed the walk in #7"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let message = format!(
            "Ship the generated log\n\n{}\n\nReviewed-by: B <b@x>\n\n{}\n\nSigned-off-by: A <a@x>",
            log(2_000),
            log(500)
        );
        let text = "diff --git a/s.rs b/s.rs\n@@ -1 +1 @@ fn s(\n-a\n+b\n";
        let rows = |message: &str, message_more: usize| {
            let (files, diff) = Diff::read(text, &[], crate::sources::diff::PARTS_HELD, usize::MAX);
            rows_in_id_order(Commit {
                sha: "e".repeat(40),
                message: message.into(),
                message_more,
                files,
                diff,
                ..Commit::default()
            })
        };
        let whole = rows(&message, 0);
        assert!(whole.iter().all(|r| r.truncated && r.body.contains("entry 100:")), "{whole:?}");
        assert!(whole.iter().all(|r| r.body_chars > 2 * BODY_MAX_CHARS as i64), "{whole:?}");
        // Held to the middle of a word, far past what a body takes, its last paragraph the
        // trailer-like line (not the message's last: kept). The sign-off at the end is counted,
        // not left out: the one difference from the whole message's rows.
        let held = &message[..message.find("<b@x>").unwrap() + 2];
        assert!(held.len() > 2 * BODY_MAX_CHARS && held.ends_with("<b"), "{held:?}");
        let sign_off = "\n\nSigned-off-by: A <a@x>".chars().count();
        assert_eq!(rows(&message[..message.len() - sign_off], 0), whole);
        let cut = rows(held, message.chars().count() - held.chars().count());
        for (c, w) in cut.iter().zip(&whole) {
            let embed_chars = c.embed_chars.map(|n| n - sign_off);
            let body_chars = c.body_chars - sign_off as i64;
            assert_eq!(Row { body_chars, embed_chars, ..c.clone() }, *w, "{}", c.id);
        }
        assert_eq!(cut.len(), 2);
    }

    #[test]
    fn a_commit_diff_splits_into_one_part_per_file() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/docs/my file.md b/docs/my file.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/my file.md\n@@ -0,0 +1 @@\n+hi\n";
        let parts = Diff::of(diff).files.all();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].path, "src/a.rs");
        assert!(parts[0].patch.text.ends_with("+y"));
        assert_eq!(parts[1].path, "docs/my file.md");
        let mut c = Commit {
            sha: "a".repeat(40),
            message: "Fix the parser\n\nIt broke on #12.".into(),
            diff: Diff::of(diff),
            ..Commit::default()
        };
        let rows = diff_rows("o/r", Some("https://github.com/o/r"), &mut c);
        assert!(c.diff.files.is_empty(), "the parts are taken as their rows are made");
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.entity == format!("commit/{}", c.sha)));
        assert_ne!(rows[0].id, rows[1].id);
        assert_eq!(rows[0].title.as_deref(), Some("Fix the parser"));
        assert!(rows[0].body.starts_with("It broke on #12.") && rows[0].body.contains("+y"));
        assert_eq!(rows[1].refs, ["#12"]);
    }

    #[test]
    fn a_commit_row_indexes_what_identifies_the_change_and_not_trailers() {
        let diff = "diff --git a/src/walk.rs b/src/walk.rs\n--- a/src/walk.rs\n+++ b/src/walk.rs\n@@ -10,3 +10,4 @@ fn spawn_senders(config: &Config) {\n-a\n+b\n@@ -40,2 +41,2 @@ impl WorkerState {\n-c\n+d\n";
        let mut c = Commit {
            sha: "b".repeat(40),
            message: "Fix the walker\n\nIt dropped entries.\n\nThis reverts commit 0123456789abcdef0123456789abcdef01234567.\n\nSigned-off-by: A Person <a@example.com>\nCo-authored-by: B <b@example.com>\nChange-Id: I1234".into(),
            files: vec!["src/walk.rs".into()],
            diff: Diff::of(diff),
            author: "A Person".into(),
            ..Commit::default()
        };
        let row = commit_row("o/r", None, &mut c, &Merged::default());
        assert_eq!(row.title.as_deref(), Some("Fix the walker"));
        let embedded = row.embedding_text();
        assert!(embedded.contains("It dropped entries."), "{embedded}");
        for gone in ["Signed-off-by", "Co-authored-by", "Change-Id", "This reverts commit"] {
            assert!(!row.body.contains(gone), "{gone} in {}", row.body);
        }
        // Functions the hunks touch and the files are searchable, not embedded.
        assert!(row.body.contains("Functions: spawn_senders, WorkerState"), "{}", row.body);
        assert!(row.body.contains("Files: src/walk.rs"));
        assert!(!embedded.contains("Files:") && !embedded.contains("+b"));
        // The reverted sha is still a reference.
        assert!(row.refs.iter().any(|r| r.starts_with("0123456789abcdef")), "{:?}", row.refs);
    }

    #[test]
    fn a_merged_pull_request_is_titled_by_the_pull_request_and_lists_what_it_merged() {
        let m = crate::sources::message::clean_message(
            "Merge pull request #1872 from someone/fix-windows-links\n\nFix Windows hyperlinks for paths with spaces\n\nMore words.",
            true,
        );
        assert_eq!(m.title, "Fix Windows hyperlinks for paths with spaces");
        assert_eq!(m.description, "More words.");
        assert_eq!(
            m.extra.as_deref(),
            Some("Merge pull request #1872 from someone/fix-windows-links")
        );
        // A merge without a pull-request title keeps its subject.
        assert_eq!(
            crate::sources::message::clean_message("Merge branch 'main' into x", true).title,
            "Merge branch 'main' into x"
        );

        // main: m0 <- m1 (merge of f2, whose branch is f1 <- f2, forked at m0).
        let node = |sha: &str, parents: &[&str], message: &str, files: &[&str]| Commit {
            sha: sha.into(),
            parents: parents.iter().map(|s| s.to_string()).collect(),
            message: message.into(),
            files: files.iter().map(|s| s.to_string()).collect(),
            ..Commit::default()
        };
        let mut history = crate::graph::history::History::of(
            &[
                node("m1", &["m0", "f2"], "Merge pull request #9 from x/flag", &[]),
                node(
                    "f2",
                    &["f1"],
                    "Test the flag\n\nSigned-off-by: x",
                    &["tests/t.rs", "src/cli.rs"],
                ),
                node("f1", &["m0"], "Add the flag", &["src/cli.rs"]),
                node("m0", &[], "start", &["a"]),
            ],
            vec![],
        );
        // Once edges are made only the titles are kept; a merge lists the same either way.
        let mainline = history.first_parent_chain(Some("m1"));
        let before = merged_by(&history, &mainline, &node("m1", &["m0", "f2"], "", &[]));
        history.keep_titles(&mainline);
        history.keep_what_rows_read(&mainline);
        let mut c = Commit {
            sha: "m1".into(),
            parents: vec!["m0".into(), "f2".into()],
            ..Commit::default()
        };
        let merged = merged_by(&history, &mainline, &c);
        assert_eq!(merged.subjects, ["Test the flag", "Add the flag"]);
        assert_eq!((&before.subjects, &before.files), (&merged.subjects, &merged.files));
        assert_eq!(merged.files, ["tests/t.rs", "src/cli.rs"]);
        let row = commit_row("o/r", None, &mut c, &merged);
        assert_eq!(row.files_changed, ["tests/t.rs", "src/cli.rs"]);
        assert!(row.embedding_text().contains("- Add the flag"));
    }

    #[test]
    fn a_commit_that_merged_a_crawled_pull_request_takes_in_its_title_and_description() {
        let mut c = Commit {
            sha: "c".repeat(40),
            message: "Speed up the walker (#42)".into(),
            ..Commit::default()
        };
        let mut pr = Row::new(RowType::PullRequest, "o/r", "issue/42", 0);
        pr.number = Some(42);
        pr.title = Some("Parallel directory traversal".into());
        pr.set_body("Uses a work-stealing queue.");
        let mut rows = vec![commit_row("o/r", None, &mut c, &Merged::default()), pr];
        let before = rows[0].content_sha256.clone();
        link_threads(&mut rows);
        let text = rows[0].embedding_text();
        assert!(text.contains("Pull request #42: Parallel directory traversal"), "{text}");
        assert!(text.contains("work-stealing"));
        assert_ne!(rows[0].content_sha256, before, "the new text is embedded");
    }

    fn thread(kind: RowType, n: i64, title: &str, body: &str) -> Row {
        let mut r = Row::new(kind, "o/r", &format!("issue/{n}"), 0);
        r.number = Some(n);
        r.title = Some(title.into());
        r.set_body(body);
        r
    }

    #[test]
    fn a_commit_takes_in_the_titles_of_the_crawled_issues_it_or_its_pull_request_closes() {
        let commit = |sha: char, message: &str| {
            let mut c = Commit {
                sha: sha.to_string().repeat(40),
                message: message.into(),
                ..Commit::default()
            };
            commit_row("o/r", None, &mut c, &Merged::default())
        };
        let mut rows = vec![
            commit('a', "Update dependencies, closes #437"),
            commit('b', "Bump the version\n\nSee #437 and #12."),
            commit('c', "Walk in parallel (#9)"),
            commit('d', "Tidy up\n\nFixes other/repo#437, fixes https://github.com/o/r/issues/12."),
            thread(
                RowType::Issue,
                437,
                "Directories without permission are not shown",
                "They vanish.",
            ),
            thread(RowType::Issue, 12, "Colors are wrong on Windows", ""),
            thread(RowType::Issue, 10, "Slow on large trees", ""),
            thread(RowType::PullRequest, 9, "Parallel walker", "Resolves #10."),
        ];
        let before: Vec<String> = rows.iter().map(|r| r.content_sha256.clone()).collect();
        link_threads(&mut rows);
        let text = |i: usize| rows[i].embedding_text();
        assert!(
            text(0).contains("Closes issue #437: Directories without permission are not shown"),
            "{}",
            text(0)
        );
        assert_ne!(rows[0].content_sha256, before[0], "the new text is embedded");
        // A mention is not a closing keyword: nothing is taken in.
        assert_eq!(rows[1].content_sha256, before[1], "{}", text(1));
        // Through the pull request the commit merged: its title, and the issue it closes.
        assert!(text(2).contains("Pull request #9: Parallel walker"), "{}", text(2));
        assert!(text(2).contains("Closes issue #10: Slow on large trees"), "{}", text(2));
        // Another repository's #437 is not this one's; a URL to this one's #12 is.
        assert!(!text(3).contains("#437: Directories"), "{}", text(3));
        assert!(text(3).contains("Closes issue #12: Colors are wrong on Windows"), "{}", text(3));
    }
}
