//! `symbols`: definitions by name from each serving unit's symbol table (tree-sitter tags
//! queries, run by the indexer), with their kind, container, signature and a read_span
//! citation; with `references`, the name's word-bounded occurrences from `grep`, grouped by
//! file, the definitions' lines marked.

use hubdex_formats::{GrepStore, NameMatch, SYMBOL_KINDS, Scope};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::args::{Args, ToolError};
use crate::grep::{GrepRequest, grep_stores, visible};
use crate::snapshot::OpenSnapshot;

/// Definitions a page holds at most.
pub(crate) const MAX_LIMIT: i64 = 500;
/// The longest name taken, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 200;
/// Reference lines an answer lists at most (`references.count` counts them all).
const MAX_REFERENCES: u64 = 500;

/// A checked symbols request.
#[derive(Debug, Clone)]
pub struct SymbolsRequest {
    /// The name looked for.
    pub name: String,
    /// How it is matched.
    pub how: NameMatch,
    /// Only these kinds (empty: every kind).
    pub kinds: Vec<String>,
    /// Only this language.
    pub language: Option<String>,
    /// Only this repository.
    pub repo: Option<String>,
    /// Only paths starting with this.
    pub path_prefix: Option<String>,
    /// Also list the name's occurrences.
    pub references: bool,
    /// Definitions listed at most.
    pub limit: usize,
    /// Answer from this snapshot; default the newest.
    pub snapshot: Option<String>,
}

impl SymbolsRequest {
    /// Reads and checks the tool's arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let a = Args::new(
            map,
            &[
                "name",
                "match",
                "kind",
                "language",
                "repo",
                "path_prefix",
                "references",
                "limit",
                "snapshot",
            ],
        )?;
        let name = a.required_text("name", MAX_NAME_CHARS)?;
        let how = a.choice(
            "match",
            &[
                ("exact", NameMatch::Exact),
                ("prefix", NameMatch::Prefix),
                ("substring", NameMatch::Substring),
            ],
            NameMatch::Exact,
        )?;
        let kinds = a.string_list("kind")?;
        if let Some(k) = kinds.iter().find(|k| !SYMBOL_KINDS.contains(&k.as_str())) {
            return Err(ToolError::arg(
                "kind",
                format!("unknown kind {k:?}; allowed: {}", SYMBOL_KINDS.join(", ")),
            ));
        }
        let text = |n: &str| -> Result<Option<String>, ToolError> {
            match a.string(n)? {
                Some(s) if s.is_empty() => Err(ToolError::arg(n, "must not be empty")),
                other => Ok(other),
            }
        };
        Ok(SymbolsRequest {
            name,
            how,
            kinds,
            language: text("language")?,
            repo: text("repo")?,
            path_prefix: text("path_prefix")?,
            references: a.boolean("references", false)?,
            limit: a.int_in("limit", 1, MAX_LIMIT, 50)? as usize,
            snapshot: a.string("snapshot")?,
        })
    }
}

/// One definition.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolItem {
    /// Its name.
    pub name: String,
    /// function, method, struct, class, enum, union, trait, interface, type, const, module,
    /// macro or other.
    pub kind: String,
    /// The nearest enclosing impl (its type), trait, class, interface, namespace or module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Its first line, trimmed.
    pub signature: String,
    /// `owner/name`.
    pub repo: String,
    /// The file's path.
    pub path: String,
    /// The file's language.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// First line, 1-based.
    pub line_start: u32,
    /// Last line, inclusive.
    pub line_end: u32,
    /// The commit the file was indexed at.
    pub commit_sha: String,
    /// `path:start-end@sha`, ready for read_span.
    pub citation: String,
}

/// A file's lines that name the symbol.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceFile {
    /// `owner/name`.
    pub repo: String,
    /// The file's path.
    pub path: String,
    /// Each line: its number, its text, and whether a listed definition starts there.
    pub lines: Vec<Value>,
}

/// The name's occurrences.
#[derive(Debug, Clone, Serialize)]
pub struct References {
    /// Lines naming it, in all.
    pub count: u64,
    /// Files with such a line.
    pub files: u64,
    /// Whether more lines exist than listed (500 at most; `grep` pages through them all).
    pub truncated: bool,
    /// Whether every file was read within grep's time budget.
    pub exhaustive: bool,
    /// The lines, by file.
    pub by_file: Vec<ReferenceFile>,
}

/// The answer of symbols.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolsAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// Definitions matching, in all.
    pub count: usize,
    /// Whether more definitions match than listed.
    pub truncated: bool,
    /// The definitions, by repository, path and line.
    pub results: Vec<SymbolItem>,
    /// With `references: true`: the name's word-bounded occurrences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub references: Option<References>,
}

/// Answers symbols over `snap` for a caller who sees `scope`.
pub fn symbols(
    snap: &OpenSnapshot,
    req: &SymbolsRequest,
    scope: Option<&Scope>,
) -> Result<SymbolsAnswer, ToolError> {
    let stores: Vec<&GrepStore> = snap.segments.iter().filter_map(|s| s.grep.as_ref()).collect();
    symbols_in(&stores, snap.id(), req, scope)
}

/// [`symbols`] over `stores`, the grep stores of snapshot `snapshot`'s serving units.
pub fn symbols_in(
    stores: &[&GrepStore],
    snapshot: &str,
    req: &SymbolsRequest,
    scope: Option<&Scope>,
) -> Result<SymbolsAnswer, ToolError> {
    let index_error = |e: hubdex_formats::FormatError| ToolError::Unavailable(e.to_string());
    let mut all = Vec::new();
    for store in stores {
        for i in store.find_symbols(&req.name, req.how).map_err(index_error)? {
            let s = store.symbol(i).map_err(index_error)?;
            if !req.kinds.is_empty() && !req.kinds.iter().any(|k| k == s.kind) {
                continue;
            }
            let f = store.file(s.file).map_err(index_error)?;
            let keep = visible(scope, &f)
                && req.repo.as_deref().is_none_or(|r| r == f.repo)
                && req.path_prefix.as_deref().is_none_or(|p| f.path.starts_with(p))
                && req.language.as_deref().is_none_or(|l| f.language == Some(l));
            if keep {
                all.push(SymbolItem {
                    name: s.name.to_string(),
                    kind: s.kind.to_string(),
                    container: s.container.map(str::to_string),
                    signature: s.signature.to_string(),
                    repo: f.repo.to_string(),
                    path: f.path.to_string(),
                    language: f.language.map(str::to_string),
                    line_start: s.line_start,
                    line_end: s.line_end,
                    commit_sha: f.commit_sha.to_string(),
                    citation: format!(
                        "{}:{}-{}@{}",
                        f.path, s.line_start, s.line_end, f.commit_sha
                    ),
                });
            }
        }
    }
    all.sort_by(|a, b| {
        (&a.repo, &a.path, a.line_start, &a.name).cmp(&(&b.repo, &b.path, b.line_start, &b.name))
    });
    let references =
        if req.references { Some(references(stores, snapshot, req, scope, &all)?) } else { None };
    let count = all.len();
    all.truncate(req.limit);
    Ok(SymbolsAnswer {
        snapshot: snapshot.to_string(),
        count,
        truncated: count > all.len(),
        results: all,
        references,
    })
}

/// The name's word-bounded, case-sensitive occurrences through grep, grouped by file; a line
/// where one of `defs` starts is marked.
fn references(
    stores: &[&GrepStore],
    snapshot: &str,
    req: &SymbolsRequest,
    scope: Option<&Scope>,
    defs: &[SymbolItem],
) -> Result<References, ToolError> {
    let mut args = json!({"pattern": req.name, "fixed_strings": true, "word": true,
        "case": "sensitive", "limit": MAX_REFERENCES});
    for (k, v) in
        [("repo", &req.repo), ("path_prefix", &req.path_prefix), ("language", &req.language)]
    {
        if let Some(v) = v {
            args[k] = json!(v);
        }
    }
    let grep_req = GrepRequest::from_args(args.as_object().expect("an object"))
        .map_err(|e| ToolError::arg("name", e.to_string()))?;
    let found = grep_stores(stores, snapshot, &grep_req, scope)?;
    let mut by_file: Vec<ReferenceFile> = Vec::new();
    for m in &found.results {
        let definition = defs
            .iter()
            .any(|d| d.repo == m.repo && d.path == m.path && u64::from(d.line_start) == m.line);
        let line = json!({"line": m.line, "text": m.text, "definition": definition});
        match by_file.last_mut() {
            Some(f) if f.repo == m.repo && f.path == m.path => f.lines.push(line),
            _ => by_file.push(ReferenceFile {
                repo: m.repo.clone(),
                path: m.path.clone(),
                lines: vec![line],
            }),
        }
    }
    Ok(References {
        count: found.count,
        files: found.files,
        truncated: found.truncated,
        exhaustive: found.exhaustive,
        by_file,
    })
}
