//! Markdown → heading-scoped chunks with exact line spans.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

/// A section longer than this is split at line boundaries into several chunks.
const MAX_CHUNK_CHARS: usize = 6000;

/// Lines a piece of a split section repeats from the piece before it.
const OVERLAP_LINES: usize = 3;

/// One chunk of a markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdChunk {
    /// Titles of the enclosing headings, outermost first; empty before the first heading.
    pub heading_path: Vec<String>,
    /// The section's text.
    pub text: String,
    /// 1-based, inclusive.
    pub line_start: usize,
    /// Last line of the section, 1-based, inclusive.
    pub line_end: usize,
}

fn level(l: HeadingLevel) -> usize {
    l as usize
}

/// Splits markdown into one chunk per heading section (a heading and the text up to the next
/// heading), plus the text before the first heading. Blank sections are dropped.
pub fn chunk_markdown(src: &str) -> Vec<MdChunk> {
    // (byte offset where the section starts, heading path of the section)
    let mut starts: Vec<(usize, Vec<String>)> = vec![(0, Vec::new())];
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut in_heading: Option<(usize, usize, String)> = None;
    for (event, range) in Parser::new(src).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level: l, .. }) => {
                in_heading = Some((level(l), range.start, String::new()))
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, _, text)) = in_heading.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((lvl, start, text)) = in_heading.take() {
                    while stack.last().is_some_and(|(l, _)| *l >= lvl) {
                        stack.pop();
                    }
                    stack.push((lvl, text.trim().to_string()));
                    starts.push((start, stack.iter().map(|(_, t)| t.clone()).collect()));
                }
            }
            _ => {}
        }
    }
    let line_of = |byte: usize| src[..byte.min(src.len())].matches('\n').count() + 1;
    let mut out = Vec::new();
    for (i, (start, path)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(src.len(), |(s, _)| *s);
        let section = &src[*start..end];
        if section.trim().is_empty() {
            continue;
        }
        let first_line = line_of(*start);
        let lines: Vec<&str> = section.split_inclusive('\n').collect();
        let mut piece_start = 0;
        let mut len = 0;
        for (k, line) in lines.iter().enumerate() {
            if k > piece_start && len + line.len() > MAX_CHUNK_CHARS {
                push(&mut out, path, &lines[piece_start..k].concat(), first_line + piece_start);
                // The next piece repeats the end of this one, so a passage cut in two is whole
                // in one of them.
                piece_start = k.saturating_sub(OVERLAP_LINES).max(piece_start + 1);
                len = lines[piece_start..k].iter().map(|l| l.len()).sum();
            }
            len += line.len();
        }
        push(&mut out, path, &lines[piece_start..].concat(), first_line + piece_start);
    }
    out
}

fn push(out: &mut Vec<MdChunk>, path: &[String], text: &str, line_start: usize) {
    if text.trim().is_empty() {
        return;
    }
    let lines = text.trim_end_matches('\n').matches('\n').count();
    out.push(MdChunk {
        heading_path: path.to_vec(),
        text: text.trim_end().to_string(),
        line_start,
        line_end: line_start + lines,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(src: &str, expect: &[(&[&str], usize, usize)]) {
        let got: Vec<(Vec<String>, usize, usize)> = chunk_markdown(src)
            .into_iter()
            .map(|c| (c.heading_path, c.line_start, c.line_end))
            .collect();
        let want: Vec<(Vec<String>, usize, usize)> = expect
            .iter()
            .map(|(p, s, e)| (p.iter().map(|x| x.to_string()).collect(), *s, *e))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn sections_nest_by_level() {
        check(
            "intro\n\n# A\n\ntext a\n\n## B\n\ntext b\n\n# C\nc\n",
            &[(&[], 1, 1), (&["A"], 3, 5), (&["A", "B"], 7, 9), (&["C"], 11, 12)],
        );
    }

    #[test]
    fn setext_headings_and_code_in_headings_count() {
        check(
            "Title\n=====\n\nbody\n\n## The `run` step\nx\n",
            &[(&["Title"], 1, 4), (&["Title", "The run step"], 6, 7)],
        );
    }

    #[test]
    fn a_long_section_is_split_on_line_boundaries() {
        let body = "word ".repeat(40) + "\n";
        let src = format!("# Big\n{}", body.repeat(100));
        let chunks = chunk_markdown(&src);
        assert!(chunks.len() > 1);
        assert!(chunks.iter().all(|c| c.heading_path == vec!["Big".to_string()]));
        assert_eq!(chunks.last().unwrap().line_end, 101);
        for w in chunks.windows(2) {
            assert_eq!(w[1].line_start + OVERLAP_LINES, w[0].line_end + 1, "pieces overlap");
        }
    }

    #[test]
    fn blank_files_give_nothing() {
        check("\n\n", &[]);
    }
}
