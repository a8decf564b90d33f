//! Rows from a local git repository: one `commit` row per commit on every branch and one `diff`
//! row per file it changed, `doc` rows for the markdown files at HEAD (chunked by heading) and
//! `code` rows for the other text files at HEAD (chunked by syntax, see [`crate::code`]).

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use hubdex_formats::{FileText, Row, RowType};

use crate::code::{ChunkOptions, Lang, chunk_code, plain_language};
use crate::config::{RepoRules, looks_generated};
use crate::git::{self, Commit, GitError};
use crate::markdown::chunk_markdown;
use crate::refs::find_refs;

/// Diff lines a commit row keeps; the rest are counted in a marker line.
pub const DIFF_MAX_LINES: usize = 200;

/// Markdown files larger than this are skipped (generated changelogs, dumps).
const DOC_MAX_BYTES: usize = 1 << 20;

/// What a repository yields: its rows, and the full texts of the files they were cut from.
#[derive(Debug, Default)]
pub(crate) struct RepoContent {
    pub(crate) rows: Vec<Row>,
    pub(crate) files: Vec<FileText>,
}

/// Where doc rows come from: the repository itself, or its wiki.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DocSource {
    Repo,
    Wiki,
}

/// Reads every row of the repository at `dir`, indexed under the name `repo`; `web` is its
/// web URL when it has one (links in rows).
pub(crate) fn read_repo(
    dir: &Path,
    repo: &str,
    web: Option<&str>,
    rules: &RepoRules,
    mut progress: impl FnMut(&str),
) -> Result<RepoContent, GitError> {
    let mut rows = Vec::new();
    // Newest change per path, from the date-ordered log: a doc's updated_at.
    let mut last_change: HashMap<String, DateTime<Utc>> = HashMap::new();
    let mut commits = 0usize;
    git::for_each_commit(dir, |c| {
        for f in &c.files {
            if let Some(t) = c.committed_at {
                last_change.entry(f.clone()).or_insert(t);
            }
        }
        if rules.wants(RowType::Commit) {
            rows.push(commit_row(repo, web, &c));
        }
        if rules.wants(RowType::Diff) {
            rows.extend(diff_rows(repo, web, &c));
        }
        commits += 1;
        if commits.is_multiple_of(200) {
            progress(&format!("{commits} commits"));
        }
    })?;
    let history = rows.len();
    let mut content = RepoContent { rows, files: Vec::new() };
    let Some(tree) = head_tree(dir)? else { return Ok(content) };
    read_docs(dir, &tree, repo, web, DocSource::Repo, &last_change, &mut content)?;
    let docs = content.rows.len() - history;
    if rules.wants(RowType::Code) {
        read_code(dir, &tree, repo, web, rules, &last_change, &mut content)?;
    }
    let code = content.rows.len() - history - docs;
    progress(&format!("{commits} commits, {docs} doc chunks, {code} code chunks"));
    Ok(content)
}

/// Reads the source files at HEAD as `code` rows (see [`crate::code`]): every text file that is
/// not markdown, not vendored or generated, and not larger than the rules allow.
fn read_code(
    dir: &Path,
    tree: &HeadTree,
    repo: &str,
    web: Option<&str>,
    rules: &RepoRules,
    last_change: &HashMap<String, DateTime<Utc>>,
    out: &mut RepoContent,
) -> Result<(), GitError> {
    let head = &tree.head;
    let paths: Vec<String> = tree
        .files
        .iter()
        .filter(|p| !is_markdown(p) && rules.keeps_path(p) && !rules.code.skip.is_match(p))
        .filter(|p| Lang::of_path(p).is_some() || plain_language(p).is_some())
        .cloned()
        .collect();
    let blobs = git::read_blobs(dir, head, &paths)?;
    let opts = ChunkOptions { strip_doc_comments: rules.code.strip_doc_comments };
    for path in &paths {
        let Some(bytes) = blobs.get(path) else { continue };
        if bytes.len() as u64 > rules.code.max_file_bytes
            || bytes[..bytes.len().min(8000)].contains(&0)
        {
            continue;
        }
        let Ok(text) = std::str::from_utf8(bytes) else { continue };
        if looks_generated(&text[..text.len().min(2000)]) {
            continue;
        }
        let language = Lang::of_path(path).map(Lang::name).or_else(|| plain_language(path));
        let updated = last_change.get(path).copied();
        let file_name = path.rsplit('/').next().unwrap_or(path);
        let chunked = chunk_code(path, text, opts);
        for (i, chunk) in chunked.chunks.into_iter().enumerate() {
            let mut row = Row::new(RowType::Code, repo, &format!("file/{path}"), i as u32);
            row.title = Some(match &chunk.symbol {
                Some(sym) => format!("{sym} ({file_name})"),
                None => format!("{file_name}:{}-{}", chunk.line_start, chunk.line_end),
            });
            row.symbol = chunk.symbol;
            row.path = Some(path.clone());
            row.language = language.map(str::to_string);
            row.line_start = Some(chunk.line_start as i64);
            row.line_end = Some(chunk.line_end as i64);
            row.commit_sha = Some(head.clone());
            row.created_at = updated;
            row.updated_at = updated;
            row.url = web.map(|w| {
                format!("{w}/blob/{head}/{path}#L{}-L{}", chunk.line_start, chunk.line_end)
            });
            row.set_body(&chunk.text);
            out.rows.push(row);
        }
        out.files.push(FileText {
            path: path.clone(),
            commit_sha: head.clone(),
            language: language.map(str::to_string),
            content: text.to_string(),
        });
    }
    Ok(())
}

/// Reads the markdown pages of a wiki repository as `wiki_doc` rows (paths under `wiki/`).
pub(crate) fn read_wiki(
    dir: &Path,
    repo: &str,
    web: Option<&str>,
) -> Result<RepoContent, GitError> {
    let mut last_change: HashMap<String, DateTime<Utc>> = HashMap::new();
    git::for_each_commit(dir, |c| {
        for f in &c.files {
            if let Some(t) = c.committed_at {
                last_change.entry(f.clone()).or_insert(t);
            }
        }
    })?;
    let mut content = RepoContent::default();
    if let Some(tree) = head_tree(dir)? {
        read_docs(dir, &tree, repo, web, DocSource::Wiki, &last_change, &mut content)?;
    }
    Ok(content)
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

fn read_docs(
    dir: &Path,
    tree: &HeadTree,
    repo: &str,
    web: Option<&str>,
    source: DocSource,
    last_change: &HashMap<String, DateTime<Utc>>,
    out: &mut RepoContent,
) -> Result<(), GitError> {
    let head = &tree.head;
    let docs: Vec<String> = tree.files.iter().filter(|p| is_markdown(p)).cloned().collect();
    let blobs = git::read_blobs(dir, head, &docs)?;
    for path in &docs {
        let Some(bytes) = blobs.get(path) else { continue };
        if bytes.len() > DOC_MAX_BYTES {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        let updated = last_change.get(path).copied();
        let shown = match source {
            DocSource::Repo => path.clone(),
            DocSource::Wiki => format!("wiki/{path}"),
        };
        out.rows.extend(doc_rows(repo, web, source, &shown, head, &text, updated));
        out.files.push(FileText {
            path: shown,
            commit_sha: head.clone(),
            language: Some("markdown".into()),
            content: text.into_owned(),
        });
    }
    Ok(())
}

fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown") || lower.ends_with(".mdx")
}

/// Cuts a diff to [`DIFF_MAX_LINES`] lines, with a marker saying how many were left out.
pub fn cut_diff(diff: &str) -> String {
    let total = diff.lines().count();
    if total <= DIFF_MAX_LINES {
        return diff.to_string();
    }
    let mut out: String = diff.lines().take(DIFF_MAX_LINES).collect::<Vec<_>>().join("\n");
    out.push_str(&format!("\n[… {} more diff lines not shown]", total - DIFF_MAX_LINES));
    out
}

/// The row of one commit.
pub(crate) fn commit_row(repo: &str, web: Option<&str>, c: &Commit) -> Row {
    let mut row = Row::new(RowType::Commit, repo, &format!("commit/{}", c.sha), 0);
    let subject = c.message.lines().next().unwrap_or("").trim().to_string();
    row.title = Some(subject);
    row.author = Some(format!("{} <{}>", c.author, c.author_email));
    row.committer = Some(format!("{} <{}>", c.committer, c.committer_email));
    row.created_at = c.authored_at;
    row.updated_at = c.committed_at;
    row.commit_sha = Some(c.sha.clone());
    row.files_changed = c.files.clone();
    row.url = web.map(|w| format!("{w}/commit/{}", c.sha));
    row.refs = find_refs(&c.message);
    // The model sees the message and the files touched; BM25 also sees who and the diff.
    let mut head = c.message.clone();
    if !c.files.is_empty() {
        head.push_str(&format!("\n\nFiles: {}", c.files.join(", ")));
    }
    let mut tail = format!(
        "\n\nAuthor: {} <{}>\nCommitter: {} <{}>\n",
        c.author, c.author_email, c.committer, c.committer_email
    );
    if c.parents.len() > 1 {
        tail.push_str(&format!("Merge of {}\n", c.parents.join(" ")));
    }
    if !c.diff.is_empty() {
        tail.push('\n');
        tail.push_str(&cut_diff(&c.diff));
    }
    row.set_body_split(&head, &tail);
    row
}

/// One row per file a commit changed: the commit message, the path and that file's patch.
pub(crate) fn diff_rows(repo: &str, web: Option<&str>, c: &Commit) -> Vec<Row> {
    let subject = c.message.lines().next().unwrap_or("").trim().to_string();
    split_diff(&c.diff)
        .into_iter()
        .map(|(path, patch)| {
            let entity = format!("commit/{}", c.sha);
            let mut row =
                Row::keyed(RowType::Diff, repo, &entity, &format!("diff/{}/{path}", c.sha), 0);
            row.title = Some(subject.clone());
            row.path = Some(path.to_string());
            row.author = Some(format!("{} <{}>", c.author, c.author_email));
            row.committer = Some(format!("{} <{}>", c.committer, c.committer_email));
            row.created_at = c.authored_at;
            row.updated_at = c.committed_at;
            row.commit_sha = Some(c.sha.clone());
            row.files_changed = vec![path.to_string()];
            row.url = web.map(|w| format!("{w}/commit/{}", c.sha));
            row.refs = find_refs(&c.message);
            row.set_body(&format!("{}\n\n{}", c.message, cut_diff(patch)));
            row
        })
        .collect()
}

/// A commit's unified diff split per file: (new path, that file's part of the diff).
fn split_diff(diff: &str) -> Vec<(&str, &str)> {
    let mut starts: Vec<usize> = Vec::new();
    let mut at = 0;
    for line in diff.split_inclusive('\n') {
        if line.starts_with("diff --git ") {
            starts.push(at);
        }
        at += line.len();
    }
    starts
        .iter()
        .enumerate()
        .filter_map(|(i, &s)| {
            let end = starts.get(i + 1).copied().unwrap_or(diff.len());
            let part = &diff[s..end];
            let header = part.lines().next()?.strip_prefix("diff --git ")?;
            let path = &header[header.rfind(" b/")? + 3..];
            Some((path, part.trim_end()))
        })
        .collect()
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

    #[test]
    fn a_long_diff_is_cut_with_a_count_of_what_was_left_out() {
        let diff: String = (0..250).map(|i| format!("+line {i}\n")).collect();
        let cut = cut_diff(&diff);
        assert_eq!(cut.lines().count(), DIFF_MAX_LINES + 1);
        assert!(
            cut.ends_with("[… 50 more diff lines not shown]"),
            "{}",
            cut.lines().last().unwrap()
        );
        assert_eq!(cut_diff("+a\n+b\n"), "+a\n+b\n");
    }

    #[test]
    fn a_commit_diff_splits_into_one_part_per_file() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/docs/my file.md b/docs/my file.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/my file.md\n@@ -0,0 +1 @@\n+hi\n";
        let parts = split_diff(diff);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].0, "src/a.rs");
        assert!(parts[0].1.ends_with("+y"));
        assert_eq!(parts[1].0, "docs/my file.md");
        let c = Commit {
            sha: "a".repeat(40),
            message: "Fix the parser\n\nIt broke on #12.".into(),
            diff: diff.into(),
            ..Commit::default()
        };
        let rows = diff_rows("o/r", Some("https://github.com/o/r"), &c);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.entity == format!("commit/{}", c.sha)));
        assert_ne!(rows[0].id, rows[1].id);
        assert!(rows[0].body.starts_with("Fix the parser") && rows[0].body.contains("+y"));
        assert_eq!(rows[1].refs, ["#12"]);
    }
}
