//! `grep`: every line of every text file at the indexed commit that a regex matches, as
//! ripgrep finds them. The pattern is planned into a trigram query ([`hubdex_formats::ngram`]),
//! each serving unit's trigram index names the candidate files, and ripgrep's own matcher and
//! searcher (`grep-regex`, `grep-searcher`) verify them in the memory-mapped texts, several
//! files at a time. Every page verifies every candidate, so `count` and `files` are the totals.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use globset::GlobSet;
use grep_matcher::Matcher as _;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use hubdex_formats::{FileCounts, GrepFile, GrepStore, RowType, Scope, Segment};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::snapshot::OpenSnapshot;

/// The longest pattern taken, in characters.
pub(crate) const MAX_PATTERN_CHARS: usize = 1000;
/// Matching lines a page holds at most.
pub(crate) const MAX_LIMIT: i64 = 500;
/// Matching lines a page holds by default.
pub(crate) const DEFAULT_LIMIT: i64 = 50;
/// Context lines before and after a match, at most.
pub(crate) const MAX_CONTEXT: i64 = 5;
/// A line (matched or context) is cut at this many characters.
pub(crate) const MAX_LINE_CHARS: usize = 300;
/// How long one call verifies candidates before it answers with what it has
/// (`exhaustive: false`): a pattern without a usable literal reads every file.
pub(crate) const TIME_BUDGET: Duration = Duration::from_secs(2);
/// The compiled regex's size limit and its lazy DFA's cache: a pattern that compiles to more
/// is refused (`(a{1000}){1000}`), never built.
const REGEX_SIZE_LIMIT: usize = 2 << 20;
const DFA_SIZE_LIMIT: usize = 8 << 20;
/// Fewer candidates than this are verified on the calling thread.
const PARALLEL_FROM: usize = 64;

/// What a grep searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Within {
    /// Every text file at the indexed commit.
    Files,
    /// Every line each commit's diff adds or removes (`grep_history`).
    History,
}

/// The order of history grep's commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// The newest commit first.
    Newest,
    /// The oldest first: the first one answers "which commit introduced it".
    Oldest,
}

/// Commits a history page holds by default.
pub(crate) const DEFAULT_HISTORY_LIMIT: i64 = 20;

/// How letter case is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// Insensitive unless the pattern has an upper-case letter (ripgrep's `--smart-case`).
    Smart,
    /// As written.
    Sensitive,
    /// Either case.
    Insensitive,
}

/// A checked grep request.
#[derive(Debug, Clone)]
pub struct GrepRequest {
    /// The regex (Rust `regex` syntax) or, with `fixed_strings`, the literal text.
    pub pattern: String,
    /// Match `pattern` as a literal.
    pub fixed_strings: bool,
    /// How letter case is matched.
    pub case: Case,
    /// Only matches bounded by non-word characters.
    pub word: bool,
    /// Only this repository.
    pub repo: Option<String>,
    /// Only paths starting with this.
    pub path_prefix: Option<String>,
    /// Only paths matching this glob.
    pub files_glob: Option<GlobSet>,
    /// Only files of this language.
    pub language: Option<String>,
    /// Leave out vendored and generated files.
    pub skip_generated: bool,
    /// Lines of context before and after each match.
    pub context: usize,
    /// Files or the history.
    pub within: Within,
    /// The history's order.
    pub order: Order,
    /// Matching lines (commits, in the history) a page holds.
    pub limit: usize,
    /// Where the previous page stopped.
    pub after: Option<Cursor>,
    /// Answer from this snapshot; default the newest (or the cursor's).
    pub snapshot: Option<String>,
    /// The arguments that decide the matches, as given: a cursor is refused for other ones.
    pub(crate) fingerprint: String,
}

/// Where a page stopped: the last match's file and line, or in the history the last commit's
/// SHA (as `path`) and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "s")]
    pub(crate) snapshot: String,
    #[serde(rename = "r")]
    pub(crate) repo: String,
    #[serde(rename = "p")]
    pub(crate) path: String,
    #[serde(rename = "l")]
    pub(crate) line: u64,
    /// The last commit's time (history grep).
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub(crate) time: Option<i64>,
    /// The request's fingerprint: a cursor continues only the query that made it.
    #[serde(rename = "q")]
    pub(crate) query: String,
    /// The caller's scope fingerprint (absent: every repository).
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<String>,
}

impl Cursor {
    pub(crate) fn encode(&self) -> String {
        crate::args::encode_cursor(self)
    }

    fn decode(s: &str) -> Result<Cursor, ToolError> {
        crate::args::decode_cursor(s, "grep")
    }
}

impl GrepRequest {
    /// Reads and checks grep's arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let a = Args::new(
            map,
            &[
                "pattern",
                "fixed_strings",
                "case",
                "word",
                "repo",
                "path_prefix",
                "files_glob",
                "language",
                "skip_generated",
                "context",
                "in",
                "order",
                "limit",
                "cursor",
                "snapshot",
            ],
        )?;
        let pattern =
            a.string("pattern")?.ok_or_else(|| ToolError::arg("pattern", "is required"))?;
        if pattern.is_empty() {
            return Err(ToolError::arg("pattern", "must not be empty"));
        }
        let chars = pattern.chars().count();
        if chars > MAX_PATTERN_CHARS {
            return Err(ToolError::arg(
                "pattern",
                format!("must be at most {MAX_PATTERN_CHARS} characters, got {chars}"),
            ));
        }
        let case = a.choice(
            "case",
            &[
                ("smart", Case::Smart),
                ("sensitive", Case::Sensitive),
                ("insensitive", Case::Insensitive),
            ],
            Case::Smart,
        )?;
        let fixed_strings = a.boolean("fixed_strings", false)?;
        let word = a.boolean("word", false)?;
        let text = |name: &str| -> Result<Option<String>, ToolError> {
            match a.string(name)? {
                Some(s) if s.is_empty() => Err(ToolError::arg(name, "must not be empty")),
                Some(s) if s.chars().count() > 1000 => {
                    Err(ToolError::arg(name, "must be at most 1000 characters"))
                }
                other => Ok(other),
            }
        };
        let (repo, path_prefix, language) =
            (text("repo")?, text("path_prefix")?, text("language")?);
        let files_glob = crate::filter::files_glob(&a)?;
        let skip_generated = a.boolean("skip_generated", false)?;
        let context = a.int_in("context", 0, MAX_CONTEXT, 0)? as usize;
        let within = a.choice(
            "in",
            &[("files", Within::Files), ("history", Within::History)],
            Within::Files,
        )?;
        let order = a.choice(
            "order",
            &[("newest", Order::Newest), ("oldest", Order::Oldest)],
            Order::Newest,
        )?;
        let history_only = |name: &str| {
            ToolError::arg(
                name,
                "applies to in: \"history\"; files come in (repo, path, line) order",
            )
        };
        let files_only = |name: &str, what: &str| {
            ToolError::arg(name, format!("applies to in: \"files\"; {what}"))
        };
        match within {
            Within::Files if a.string("order").ok().flatten().is_some() => {
                return Err(history_only("order"));
            }
            Within::History if language.is_some() => {
                return Err(files_only(
                    "language",
                    "in the history, filter by path_prefix or files_glob",
                ));
            }
            Within::History if skip_generated => {
                return Err(files_only("skip_generated", "the history marks no file generated"));
            }
            Within::History if context > 0 => {
                return Err(files_only("context", "the history lists each changed line alone"));
            }
            _ => {}
        }
        let default_limit =
            if within == Within::History { DEFAULT_HISTORY_LIMIT } else { DEFAULT_LIMIT };
        let limit = a.int_in("limit", 1, MAX_LIMIT, default_limit)? as usize;
        let after = a.string("cursor")?.map(|c| Cursor::decode(&c)).transpose()?;
        let mut snapshot = a.string("snapshot")?;
        if let Some(c) = &after {
            if snapshot.as_ref().is_some_and(|s| *s != c.snapshot) {
                return Err(ToolError::arg(
                    "cursor",
                    format!(
                        "was made on snapshot {}, not {}",
                        c.snapshot,
                        snapshot.unwrap_or_default()
                    ),
                ));
            }
            snapshot = Some(c.snapshot.clone());
        }
        let fingerprint = {
            let decides: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "cursor" | "limit" | "context" | "snapshot"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            hubdex_formats::sha256_hex(Value::Object(decides).to_string().as_bytes())[..16]
                .to_string()
        };
        if after.as_ref().is_some_and(|c| c.query != fingerprint) {
            return Err(ToolError::arg(
                "cursor",
                "was made for another pattern or other filters; start again without it",
            ));
        }
        Ok(GrepRequest {
            pattern,
            fixed_strings,
            case,
            word,
            repo,
            path_prefix,
            files_glob,
            language,
            skip_generated,
            context,
            within,
            order,
            limit,
            after,
            snapshot,
            fingerprint,
        })
    }

    /// What a grep of the files or the history starts from, checked: the matcher, the trigram
    /// query and the caller's scope fingerprint (a cursor made under another scope is refused).
    pub(crate) fn prepare(
        &self,
        scope: Option<&Scope>,
    ) -> Result<(RegexMatcher, hubdex_formats::ngram::Query, Option<String>), ToolError> {
        let scope_fp = scope.map(Scope::fingerprint);
        if self.after.as_ref().is_some_and(|c| c.scope != scope_fp) {
            return Err(ToolError::arg(
                "cursor",
                "was made by another caller (another access scope); start again without it",
            ));
        }
        Ok((self.matcher()?, self.query()?, scope_fp))
    }

    /// ripgrep's matcher for the request: line by line (a match never spans a line end),
    /// with the size limits set.
    fn matcher(&self) -> Result<RegexMatcher, ToolError> {
        let mut b = RegexMatcherBuilder::new();
        b.line_terminator(Some(b'\n'))
            .fixed_strings(self.fixed_strings)
            .word(self.word)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT);
        match self.case {
            Case::Smart => b.case_smart(true),
            Case::Sensitive => b.case_insensitive(false),
            Case::Insensitive => b.case_insensitive(true),
        };
        b.build(&self.pattern).map_err(|e| {
            let shown: String = e.to_string().chars().take(500).collect();
            ToolError::arg("pattern", format!("is not a valid regex: {shown}"))
        })
    }

    /// The trigram query of the request: the pattern (escaped when it is a literal), folded
    /// unless matched case-sensitively. A superset of what the matcher accepts is enough.
    fn query(&self) -> Result<hubdex_formats::ngram::Query, ToolError> {
        let escaped;
        let pattern = if self.fixed_strings {
            escaped = regex::escape(&self.pattern);
            &escaped
        } else {
            &self.pattern
        };
        let folded = match self.case {
            Case::Sensitive => pattern.to_string(),
            _ => format!("(?i:{pattern})"),
        };
        hubdex_formats::ngram::plan(&folded)
            .map_err(|e| ToolError::arg("pattern", format!("is not a valid regex: {e}")))
    }
}

/// One matching line.
#[derive(Debug, Clone, Serialize)]
pub struct GrepMatch {
    /// `owner/name`.
    pub repo: String,
    /// The file's path in the repository.
    pub path: String,
    /// 1-based.
    pub line: u64,
    /// Each match on the line as `[start, end)` byte offsets into the whole line.
    pub columns: Vec<[usize; 2]>,
    /// The line without its end, cut at `MAX_LINE_CHARS` characters.
    pub text: String,
    /// Whether `text` was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub text_truncated: bool,
    /// Lines before it (with `context`), nearest last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<String>,
    /// Lines after it (with `context`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// The commit the file was indexed at.
    pub commit_sha: String,
    /// `path:line-line@sha`, as read_span cites.
    pub citation: String,
    /// The file's language, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// A vendored file (under vendor/, third_party/, node_modules/).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vendored: bool,
    /// A generated file (minified, a lock file, marked generated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub generated: bool,
}

/// Files left out of the search, counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Skipped {
    /// Binary files (a NUL byte in them).
    pub binary: u64,
    /// Files over the size cap (2 MiB).
    pub too_large: u64,
    /// Files without rows of their own (vendored, generated, of no known language) whose text
    /// the build did not hold past its memory budget.
    pub over_budget: u64,
}

/// The answer of grep.
#[derive(Debug, Clone, Serialize)]
pub struct GrepAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// Matching lines in all (every page's).
    pub count: u64,
    /// Files with a matching line.
    pub files: u64,
    /// Matching lines on this page.
    pub returned: usize,
    /// Whether more matching lines follow this page (pass `cursor` for them).
    pub truncated: bool,
    /// The next page's cursor, when truncated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Whether every candidate file was verified: false when the time budget ran out first
    /// (then `count` and `files` are what was found by then).
    pub exhaustive: bool,
    /// Text files the filters and scope let through.
    pub searched_files: u64,
    /// Of them, the ones the trigram index could not rule out and the regex verified.
    pub candidate_files: u64,
    /// Files of the searched repositories that have no text in the snapshot.
    pub skipped_files: Skipped,
    /// Repositories in scope whose serving unit predates exact search (format 8 or older).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_searchable: Vec<String>,
    /// The matching lines, by repository, path and line.
    pub results: Vec<GrepMatch>,
}

/// The matching line numbers of a file's text, as ripgrep's searcher reports them.
struct LineNumbers(Vec<u64>);

impl Sink for LineNumbers {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        let first = m.line_number().unwrap_or(1);
        for (i, _) in m.lines().enumerate() {
            self.0.push(first + i as u64);
        }
        Ok(true)
    }
}

fn searcher() -> Searcher {
    // Files with a NUL are left out when indexed; a store written by another indexer could
    // still hold one, and the search then stops as ripgrep's does.
    SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::quit(0)).build()
}

/// Whether `scope` lets the caller read `file`: its repository, and a type whose rows the
/// file's would be ([`sees`]).
pub(crate) fn visible(scope: Option<&Scope>, file: &GrepFile<'_>) -> bool {
    sees(scope, file.repo, file.language == Some("markdown"))
}

/// Whether `scope` lets the caller read the files of `repo` that are markdown or not: doc or
/// wiki_doc rows for markdown, code rows for any other.
fn sees(scope: Option<&Scope>, repo: &str, markdown: bool) -> bool {
    match scope {
        None => true,
        Some(s) if !s.allows_repo(repo) => false,
        Some(s) if markdown => s.allows_type(RowType::Doc) || s.allows_type(RowType::WikiDoc),
        Some(s) => s.allows_type(RowType::Code),
    }
}

impl GrepRequest {
    fn keeps(&self, file: &GrepFile<'_>) -> bool {
        self.repo.as_deref().is_none_or(|r| r == file.repo)
            && self.path_prefix.as_deref().is_none_or(|p| file.path.starts_with(p))
            && self.files_glob.as_ref().is_none_or(|g| g.is_match(file.path))
            && self.language.as_deref().is_none_or(|l| file.language == Some(l))
            && !(self.skip_generated && (file.vendored || file.generated))
    }
}

/// Answers a grep over `snap` for a caller who sees `scope`.
pub fn grep(
    snap: &OpenSnapshot,
    req: &GrepRequest,
    scope: Option<&Scope>,
) -> Result<GrepAnswer, ToolError> {
    let mut not_searchable = Vec::new();
    let mut stores = Vec::new();
    for seg in &snap.segments {
        match &seg.grep {
            Some(store) => stores.push(store),
            None => note_unsearchable(seg, scope, req, &mut not_searchable),
        }
    }
    let mut answer = grep_stores(&stores, snap.id(), req, scope)?;
    not_searchable.sort();
    not_searchable.dedup();
    answer.not_searchable = not_searchable;
    Ok(answer)
}

/// [`grep`] over `stores`, the exact-search stores of snapshot `snapshot`'s serving units.
pub fn grep_stores(
    stores: &[&GrepStore],
    snapshot: &str,
    req: &GrepRequest,
    scope: Option<&Scope>,
) -> Result<GrepAnswer, ToolError> {
    let started = Instant::now();
    let (matcher, query, scope_fp) = req.prepare(scope)?;
    let index_error = |e: hubdex_formats::FormatError| ToolError::Unavailable(e.to_string());
    let mut counted = FileCounts::default();
    let mut candidates: Vec<GrepFile<'_>> = Vec::new();
    let path_filtered = req.path_prefix.is_some()
        || req.files_glob.is_some()
        || req.language.is_some()
        || req.skip_generated;
    for store in stores {
        if path_filtered {
            // Counting the files searched reads the table (48 bytes a file).
            for i in 0..store.len() {
                let file = store.file(i).map_err(index_error)?;
                if visible(scope, &file) && req.keeps(&file) {
                    counted.add(FileCounts::of(file.skipped));
                }
            }
        } else {
            // Counted at open, by repository and by markdown or not: what the scope and the
            // repo filter decide.
            for (repo, markdown, c) in store.counts() {
                if sees(scope, repo, markdown) && req.repo.as_deref().is_none_or(|r| r == repo) {
                    counted.add(c);
                }
            }
        }
        for i in store.candidates(&query).map_err(index_error)? {
            let file = store.file(i).map_err(index_error)?;
            if file.skipped.is_none() && visible(scope, &file) && req.keeps(&file) {
                candidates.push(file);
            }
        }
    }
    candidates.sort_by(|a, b| (a.repo, a.path).cmp(&(b.repo, b.path)));
    let (lines, exhaustive) = verify(&matcher, &candidates, started + TIME_BUDGET);
    let count: u64 = lines.iter().map(|l| l.len() as u64).sum();
    let files = lines.iter().filter(|l| !l.is_empty()).count() as u64;
    // The page: matches after the cursor, in (repo, path, line) order.
    let after = req.after.as_ref().map(|c| (c.repo.as_str(), c.path.as_str(), c.line));
    let mut page = Vec::new();
    let mut truncated = false;
    'files: for (file, found) in candidates.iter().zip(&lines) {
        let key = (file.repo, file.path);
        for &line in found {
            if after.is_some_and(|(r, p, l)| (key.0, key.1, line) <= (r, p, l)) {
                continue;
            }
            if page.len() == req.limit {
                truncated = true;
                break 'files;
            }
            page.push((file, line));
        }
    }
    let results: Vec<GrepMatch> =
        page.iter().map(|(file, line)| one_match(&matcher, file, *line, req.context)).collect();
    let cursor = truncated.then(|| {
        let last = results.last().expect("a truncated page holds a match");
        Cursor {
            snapshot: snapshot.to_string(),
            repo: last.repo.clone(),
            path: last.path.clone(),
            line: last.line,
            time: None,
            query: req.fingerprint.clone(),
            scope: scope_fp.clone(),
        }
        .encode()
    });
    Ok(GrepAnswer {
        snapshot: snapshot.to_string(),
        count,
        files,
        returned: results.len(),
        truncated,
        cursor,
        exhaustive,
        searched_files: counted.text,
        candidate_files: candidates.len() as u64,
        skipped_files: Skipped {
            binary: counted.binary,
            too_large: counted.too_large,
            over_budget: counted.over_budget,
        },
        not_searchable: Vec::new(),
        results,
    })
}

/// Lists the repositories of a serving unit without a grep store that the caller sees and the
/// request names.
fn note_unsearchable(
    seg: &Segment,
    scope: Option<&Scope>,
    req: &GrepRequest,
    out: &mut Vec<String>,
) {
    if seg.files.is_none() {
        return;
    }
    for repo in seg.meta.repositories() {
        let repo: &str = &repo;
        if scope.is_none_or(|s| s.allows_repo(repo))
            && req.repo.as_deref().is_none_or(|r| r == repo)
        {
            out.push(repo.to_string());
        }
    }
}

/// The matching line numbers of every candidate, in order, verified on every core when there
/// are many; whether every one was verified before `deadline`.
pub(crate) fn verify(
    matcher: &RegexMatcher,
    candidates: &[GrepFile<'_>],
    deadline: Instant,
) -> (Vec<Vec<u64>>, bool) {
    let one = |searcher: &mut Searcher, file: &GrepFile<'_>| {
        let mut sink = LineNumbers(Vec::new());
        // A search of bytes in memory fails only through the sink, which does not fail.
        let _ = searcher.search_slice(matcher, file.text, &mut sink);
        sink.0
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if candidates.len() < PARALLEL_FROM || threads == 1 {
        let mut searcher = searcher();
        let mut out = Vec::with_capacity(candidates.len());
        for c in candidates {
            if Instant::now() > deadline {
                out.resize(candidates.len(), Vec::new());
                return (out, false);
            }
            out.push(one(&mut searcher, c));
        }
        return (out, true);
    }
    let next = AtomicUsize::new(0);
    let late = AtomicBool::new(false);
    let mut found: Vec<(usize, Vec<u64>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut searcher = searcher();
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(c) = candidates.get(i) else { break };
                        if Instant::now() > deadline {
                            late.store(true, Ordering::Relaxed);
                            break;
                        }
                        mine.push((i, one(&mut searcher, c)));
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
    });
    let mut out = vec![Vec::new(); candidates.len()];
    for (i, lines) in found.drain(..) {
        out[i] = lines;
    }
    (out, !late.load(Ordering::Relaxed))
}

/// The line `n` (1-based) of `text` without its end, and the lines around it.
fn one_match(matcher: &RegexMatcher, file: &GrepFile<'_>, n: u64, context: usize) -> GrepMatch {
    let text = file.text;
    let first = (n as usize).saturating_sub(context).max(1);
    let last = n as usize + context;
    let mut lines: Vec<&[u8]> = Vec::with_capacity(last - first + 1);
    let mut start = 0;
    let mut number = 1;
    // A final line end closes the last line: no empty line follows it.
    while number <= last && (start < text.len() || (start == 0 && text.is_empty())) {
        let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        if number >= first {
            lines.push(&text[start..end]);
        }
        if end == text.len() {
            break;
        }
        start = end + 1;
        number += 1;
    }
    let at = n as usize - first;
    let line = lines.get(at).copied().unwrap_or_default();
    let mut columns = Vec::new();
    let _ = matcher.find_iter(line, |m| {
        columns.push([m.start(), m.end()]);
        true
    });
    let (shown, text_truncated) = cut(line);
    let before = lines[..at.min(lines.len())].iter().map(|l| cut(l).0).collect();
    let after = lines.get(at + 1..).unwrap_or_default().iter().map(|l| cut(l).0).collect();
    GrepMatch {
        repo: file.repo.to_string(),
        path: file.path.to_string(),
        line: n,
        columns,
        text: shown,
        text_truncated,
        before,
        after,
        commit_sha: file.commit_sha.to_string(),
        citation: format!("{}:{n}-{n}@{}", file.path, file.commit_sha),
        language: file.language.map(str::to_string),
        vendored: file.vendored,
        generated: file.generated,
    }
}

/// A line as text (a `\r` before its end dropped), cut at [`MAX_LINE_CHARS`]; whether it was.
pub(crate) fn cut(line: &[u8]) -> (String, bool) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => (text[..at].to_string(), true),
        None => (text.into_owned(), false),
    }
}
