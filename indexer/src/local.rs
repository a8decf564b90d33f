//! Rows from a local git repository: one `commit` row per commit on every branch, and `doc`
//! rows for the markdown files at HEAD, chunked by heading.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use hubdex_formats::{FileText, Row, RowType};

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
    mut progress: impl FnMut(&str),
) -> Result<RepoContent, GitError> {
    let mut rows = Vec::new();
    // Newest change per path, from the date-ordered log: a doc's updated_at.
    let mut last_change: HashMap<String, DateTime<Utc>> = HashMap::new();
    git::for_each_commit(dir, |c| {
        for f in &c.files {
            if let Some(t) = c.committed_at {
                last_change.entry(f.clone()).or_insert(t);
            }
        }
        rows.push(commit_row(repo, web, &c));
        if rows.len() % 200 == 0 {
            progress(&format!("{} commits", rows.len()));
        }
    })?;
    let commits = rows.len();
    let mut content = RepoContent { rows, files: Vec::new() };
    read_docs(dir, repo, web, DocSource::Repo, &last_change, &mut content)?;
    progress(&format!("{commits} commits, {} doc chunks", content.rows.len() - commits));
    Ok(content)
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
    read_docs(dir, repo, web, DocSource::Wiki, &last_change, &mut content)?;
    Ok(content)
}

fn read_docs(
    dir: &Path,
    repo: &str,
    web: Option<&str>,
    source: DocSource,
    last_change: &HashMap<String, DateTime<Utc>>,
    out: &mut RepoContent,
) -> Result<(), GitError> {
    let Some(head) = git::head(dir)? else { return Ok(()) };
    let docs: Vec<String> =
        git::tree_files(dir, &head)?.into_iter().filter(|p| is_markdown(p)).collect();
    let blobs = git::read_blobs(dir, &head, &docs)?;
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
        out.rows.extend(doc_rows(repo, web, source, &shown, &head, &text, updated));
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
}
