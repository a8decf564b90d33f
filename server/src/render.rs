//! The plain-text face of each answer, rendered from its type: what MCP clients that show text
//! read next to the structured answer, and what the command line prints.

use std::fmt::Write as _;

use crate::fetch::{FetchAnswer, SpanAnswer};
use crate::grep::GrepAnswer;
use crate::pickaxe::HistoryAnswer;
use crate::related::RelatedAnswer;
use crate::scan::ScanAnswer;
use crate::search::SearchAnswer;
use crate::symbols::SymbolsAnswer;

/// Words on one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What one result line shows.
struct Line<'a> {
    kind: &'a str,
    title: Option<&'a str>,
    repo: &'a str,
    id: &'a str,
    place: Option<&'a str>,
    commit: Option<&'a str>,
    updated: Option<&'a str>,
    snippet: &'a str,
}

/// One result line and its snippet: `N. [type] title (repo) id=… place commit … updated …`.
fn result_lines(out: &mut String, i: usize, l: Line<'_>) {
    let Line { kind, title, repo, id, place, commit, updated, snippet } = l;
    let _ = write!(out, "{}. [{kind}] {} ({repo}) id={id}", i + 1, title.unwrap_or(""));
    if let Some(p) = place.filter(|p| !p.is_empty()) {
        let _ = write!(out, " {p}");
    }
    if let Some(sha) = commit {
        let _ = write!(out, " commit {}", &sha[..sha.floor_char_boundary(12)]);
    }
    if let Some(t) = updated {
        let _ = write!(out, " updated {t}");
    }
    let _ = writeln!(out, "\n   {}", one_line(snippet));
}

fn unmatched_note(out: &mut String, unmatched: &[String]) {
    if !unmatched.is_empty() {
        let _ = write!(out, "; filters matching nothing: {}", unmatched.join(", "));
    }
}

/// A list of results as text: the header (count, snapshot, `more` when truncated, filters that
/// matched nothing), then one entry per result.
fn list_text<'a>(
    count: usize,
    snapshot: &str,
    truncated: bool,
    unmatched: &[String],
    lines: impl Iterator<Item = Line<'a>>,
) -> String {
    let mut out = format!("{count} results from snapshot {snapshot}");
    if truncated {
        out.push_str(" (more: pass the cursor)");
    }
    unmatched_note(&mut out, unmatched);
    out.push('\n');
    for (i, line) in lines.enumerate() {
        result_lines(&mut out, i, line);
    }
    out
}

/// A search answer as text.
pub fn search_text(a: &SearchAnswer) -> String {
    let lines = a.results.iter().map(|r| Line {
        kind: r.row_type.as_str(),
        title: r.title.as_deref(),
        repo: &r.repo,
        id: &r.id,
        place: r.url.as_deref().or(r.path.as_deref()),
        commit: r.commit_sha.as_deref(),
        updated: r.updated_at.as_deref(),
        snippet: &r.snippet,
    });
    list_text(a.count, &a.snapshot, false, &a.filters_unmatched, lines)
}

/// A scan answer as text.
pub fn scan_text(a: &ScanAnswer) -> String {
    let lines = a.results.iter().map(|r| Line {
        kind: &r.row_type,
        title: r.title.as_deref(),
        repo: &r.repo,
        id: &r.id,
        place: r.url.as_deref().or(r.path.as_deref()),
        commit: r.commit_sha.as_deref(),
        updated: r.updated_at.as_deref(),
        snippet: &r.snippet,
    });
    list_text(a.count, &a.snapshot, a.truncated, &a.filters_unmatched, lines)
}

/// A fetch answer as text: each row's stored text.
pub fn fetch_text(a: &FetchAnswer) -> String {
    let mut out = format!("{} rows from snapshot {} (index copy)\n", a.count, a.snapshot);
    for r in &a.results {
        let _ = writeln!(
            out,
            "--- {} [{}] {}\n{}",
            r.id,
            r.row_type,
            r.title.as_deref().unwrap_or(""),
            r.content
        );
        if r.content_truncated {
            let _ = writeln!(
                out,
                "[cut at {} of {} chars]",
                hubdex_formats::BODY_MAX_CHARS,
                r.content_chars
            );
        }
    }
    if !a.not_found.is_empty() {
        let _ = writeln!(out, "not found: {}", a.not_found.join(", "));
    }
    out
}

/// A read_span answer as text: the citation, then the lines.
pub fn span_text(a: &SpanAnswer) -> String {
    format!("{} (snapshot {}, {} lines in file)\n{}", a.citation, a.snapshot, a.total_lines, a.text)
}

/// A related answer as text: the entity, its first release, then each group of edges.
pub fn related_text(a: &RelatedAnswer) -> String {
    let e = &a.entity;
    let mut out = format!(
        "{} {} [{}] {} (snapshot {})\n",
        e.repo,
        e.entity,
        e.entity_type,
        e.title.as_deref().unwrap_or(""),
        a.snapshot
    );
    if let Some(u) = &e.url {
        let _ = writeln!(out, "{u}");
    }
    if let Some(r) = &a.first_release {
        let _ = writeln!(out, "first release: {} ({})", r.tag, r.evidence);
    }
    for g in &a.groups {
        let _ = writeln!(out, "{} ({}, {} of {}):", g.kind, g.direction, g.edges.len(), g.count);
        for x in &g.edges {
            let _ = writeln!(
                out,
                "  {} {} [{}] {}\n    \"{}\"",
                x.other.repo,
                x.other.entity,
                x.other.entity_type,
                x.other.title.as_deref().unwrap_or(""),
                x.evidence
            );
        }
    }
    if a.groups.is_empty() {
        out.push_str("no cross-references\n");
    }
    out
}

/// A grep answer as text: the totals, then `path:line:text` per match (as ripgrep prints it,
/// the repository heading its files), context lines with `-`.
pub fn grep_text(a: &GrepAnswer) -> String {
    let mut out = format!(
        "{} matching lines in {} files ({} searched, {} verified) from snapshot {}",
        a.count, a.files, a.searched_files, a.candidate_files, a.snapshot
    );
    if !a.exhaustive {
        out.push_str("; the time budget ran out: not every file was verified");
    }
    if a.truncated {
        out.push_str("; more: pass the cursor");
    }
    out.push('\n');
    let mut repo = "";
    for m in &a.results {
        if m.repo != repo {
            repo = &m.repo;
            let _ = writeln!(out, "# {repo}");
        }
        let start = m.line as usize - m.before.len();
        for (i, l) in m.before.iter().enumerate() {
            let _ = writeln!(out, "{}-{}-{l}", m.path, start + i);
        }
        let _ = writeln!(out, "{}:{}:{}", m.path, m.line, m.text);
        for (i, l) in m.after.iter().enumerate() {
            let _ = writeln!(out, "{}-{}-{l}", m.path, m.line as usize + 1 + i);
        }
    }
    if let Some(c) = &a.cursor {
        let _ = writeln!(out, "cursor: {c}");
    }
    out
}

/// A history grep answer as text: the totals, then per commit a heading (short SHA, date,
/// title, pull request, first release) and its matching lines as `path:+text` or `path:-text`.
pub fn history_text(a: &HistoryAnswer) -> String {
    let mut out = format!(
        "{} matching changed lines in {} commits ({} searched, {} verified) from snapshot {}, {} first",
        a.count,
        a.commits,
        a.searched_commits,
        a.candidate_commits,
        a.snapshot,
        match a.order {
            crate::grep::Order::Newest => "newest",
            crate::grep::Order::Oldest => "oldest",
        }
    );
    if !a.exhaustive {
        out.push_str("; the time budget ran out: not every commit was verified");
    }
    if a.truncated {
        out.push_str("; more: pass the cursor");
    }
    out.push('\n');
    for c in &a.results {
        let short = c.commit_sha.get(..12).unwrap_or(&c.commit_sha);
        let date = c.committed_at.as_deref().and_then(|d| d.get(..10)).unwrap_or("");
        let _ = write!(out, "# {} {short} {date} {}", c.repo, c.title);
        if let Some(pr) = &c.pull_request {
            let _ = write!(out, " [{}]", pr.entity);
        }
        if let Some(r) = &c.first_release {
            let _ = write!(out, " (first in {})", r.tag);
        }
        out.push('\n');
        for l in &c.lines {
            let _ = writeln!(out, "{}:{}{}", l.path, l.change, l.text);
        }
        if c.lines_truncated {
            let _ = writeln!(out, "… {} matching lines in all", c.count);
        }
        if c.hidden_lines > 0 {
            let _ = writeln!(out, "… {} changed lines past the cap not searched", c.hidden_lines);
        }
    }
    if let Some(c) = &a.cursor {
        let _ = writeln!(out, "cursor: {c}");
    }
    out
}

/// A symbols answer as text: one definition a line (`kind name in container  path:start-end`
/// and its signature), then the references by file.
pub fn symbols_text(a: &SymbolsAnswer) -> String {
    let mut out = format!("{} definitions from snapshot {}", a.count, a.snapshot);
    if a.truncated {
        out.push_str(&format!(" ({} listed)", a.results.len()));
    }
    out.push('\n');
    for s in &a.results {
        let container = s.container.as_deref().map(|c| format!(" in {c}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{} {}{container}  {} {}:{}-{}\n   {}",
            s.kind, s.name, s.repo, s.path, s.line_start, s.line_end, s.signature
        );
    }
    if let Some(r) = &a.references {
        let _ = writeln!(out, "references: {} lines in {} files", r.count, r.files);
        for f in &r.by_file {
            for l in &f.lines {
                let mark = if l["definition"] == serde_json::json!(true) { "*" } else { " " };
                let _ = writeln!(
                    out,
                    "{mark} {}:{}:{}",
                    f.path,
                    l["line"],
                    l["text"].as_str().unwrap_or("")
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_that_is_not_hex_is_shortened_at_a_character_not_a_byte() {
        // Stored rows come from an API as well as from git: a commit field is any UTF-8.
        let line = |commit| {
            let mut out = String::new();
            let l = Line {
                kind: "commit",
                title: None,
                repo: "o/r",
                id: "c_1",
                place: None,
                commit: Some(commit),
                updated: None,
                snippet: "",
            };
            result_lines(&mut out, 0, l);
            out
        };
        assert!(line("0123456789abcdef").contains(" commit 0123456789ab\n"));
        // "€" is three bytes: byte 12 falls inside the fourth.
        assert!(line("ab€€€€").contains(" commit ab€€€\n"), "{}", line("ab€€€€"));
    }
}
