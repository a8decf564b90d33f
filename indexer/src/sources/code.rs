//! Source files → code chunks with exact line spans.
//!
//! Functions, methods, classes, impls and traits are units (tree-sitter). A unit too long for
//! one chunk is cut into line windows that keep its name; a container (impl, trait, class,
//! module, namespace) is split into its members, with the container's own lines (its header,
//! fields, closing brace) attached to a neighbouring member or kept as chunks under the
//! container's name. Lines outside every unit become line windows; blank runs are skipped.
//! Files in a language without a grammar are all line windows.
//!
//! The invariant the tests check: every line of a file is in exactly one chunk, or in
//! [`Chunked::skipped`].

use std::collections::BTreeSet;

use tree_sitter::{Language, Node, Parser};

/// A unit longer than this (lines or chars) is cut into windows.
pub const UNIT_MAX_LINES: usize = 120;
/// The same limit in chars: a longer unit is cut into windows too.
pub const UNIT_MAX_CHARS: usize = 6000;
/// The size of a line window.
pub const WINDOW_LINES: usize = 60;
/// A run of container lines this short sits next to a member instead of being its own chunk.
const SMALL_GAP_LINES: usize = 3;

/// A language with a tree-sitter grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust (`.rs`).
    Rust,
    /// Python (`.py`, `.pyi`).
    Python,
    /// JavaScript (`.js`, `.mjs`, `.cjs`, `.jsx`).
    JavaScript,
    /// TypeScript (`.ts`, `.mts`, `.cts`).
    TypeScript,
    /// TypeScript with JSX (`.tsx`).
    Tsx,
    /// Go (`.go`).
    Go,
    /// Java (`.java`).
    Java,
    /// C (`.c`, `.h`).
    C,
    /// C++ (`.cc`, `.cpp`, `.hpp`, …).
    Cpp,
}

impl Lang {
    /// The language of a path, by its extension.
    pub fn of_path(path: &str) -> Option<Lang> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "mjs" | "cjs" | "jsx" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" => Lang::Cpp,
            _ => return None,
        })
    }

    /// The `language` column's value.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript | Lang::Tsx => "typescript",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
        }
    }

    pub(crate) fn grammar(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    /// How the language joins a member to its container: `Type::method` or `Class.method`.
    fn separator(self) -> &'static str {
        match self {
            Lang::Rust | Lang::Cpp => "::",
            _ => ".",
        }
    }
}

/// The `language` column for a file without a grammar, by extension (line windows).
pub fn plain_language(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "Dockerfile" {
        return Some("dockerfile");
    }
    if name == "Makefile" {
        return Some("make");
    }
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "toml" => "toml",
        "yml" | "yaml" => "yaml",
        "json" => "json",
        "sh" | "bash" => "shell",
        "rb" => "ruby",
        "kt" | "kts" => "kotlin",
        "swift" => "swift",
        "cs" => "csharp",
        "php" => "php",
        "scala" => "scala",
        "sql" => "sql",
        "html" | "htm" => "html",
        "css" | "scss" => "css",
        "proto" => "protobuf",
        "txt" | "rst" => "text",
        _ => return None,
    })
}

/// One chunk of a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChunk {
    /// The unit's name as its language names it (`Type::method`, `Class.method`); `None` for
    /// a window of top-level lines.
    pub symbol: Option<String>,
    /// 1-based, inclusive.
    pub line_start: usize,
    /// Last line of the chunk, 1-based, inclusive.
    pub line_end: usize,
    /// The chunk's source text.
    pub text: String,
}

/// A file cut into chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunked {
    /// The file's chunks, in file order.
    pub chunks: Vec<CodeChunk>,
    /// Line ranges (1-based, inclusive) in no chunk: blank runs, and doc comments when they are
    /// stripped.
    pub skipped: Vec<(usize, usize)>,
}

/// How files are cut.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChunkOptions {
    /// Leave doc comments (`///`, `/** */`, Go's leading `//`) out of every chunk, so that a
    /// query written from a doc comment is not answered by a copy of itself (eval sets).
    pub strip_doc_comments: bool,
}

/// A span of 0-based rows, inclusive, and its name.
#[derive(Debug, Clone)]
struct Span {
    start: usize,
    end: usize,
    symbol: Option<String>,
}

/// A recognised unit: its name and, for containers, the node holding its members.
struct Unit<'t> {
    name: String,
    body: Option<Node<'t>>,
}

/// Cuts `text` (the file at `path`) into chunks.
pub fn chunk_code(path: &str, text: &str, opts: ChunkOptions) -> Chunked {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() {
        return Chunked::default();
    }
    let mut cutter = Chunker { lines: &lines, skipped: BTreeSet::new(), lang: None, opts };
    let units = match Lang::of_path(path).and_then(|l| parse(l, text).map(|t| (l, t))) {
        Some((lang, tree)) => {
            cutter.lang = Some(lang);
            let mut units = Vec::new();
            cutter.collect(tree.root_node(), text, None, &mut units);
            units
        }
        None => Vec::new(),
    };
    let spans = cutter.fill(0, lines.len() - 1, None, units);
    let chunks = spans
        .into_iter()
        .map(|s| CodeChunk {
            text: lines[s.start..=s.end].concat().trim_end().to_string(),
            symbol: s.symbol,
            line_start: s.start + 1,
            line_end: s.end + 1,
        })
        .collect();
    Chunked { chunks, skipped: ranges(&cutter.skipped) }
}

fn parse(lang: Lang, text: &str) -> Option<tree_sitter::Tree> {
    let mut parser = Parser::new();
    parser.set_language(&lang.grammar()).ok()?;
    parser.parse(text, None)
}

/// Consecutive rows → 1-based inclusive ranges.
fn ranges(rows: &BTreeSet<usize>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &r in rows {
        match out.last_mut() {
            Some((_, end)) if *end == r => *end = r + 1,
            _ => out.push((r + 1, r + 1)),
        }
    }
    out
}

struct Chunker<'a> {
    lines: &'a [&'a str],
    skipped: BTreeSet<usize>,
    lang: Option<Lang>,
    opts: ChunkOptions,
}

/// The last row a node covers (a node ending at column 0 ends on the row before).
fn end_row(n: Node<'_>) -> usize {
    let end = n.end_position();
    if end.column == 0 && end.row > n.start_position().row { end.row - 1 } else { end.row }
}

fn is_comment(n: Node<'_>) -> bool {
    matches!(n.kind(), "comment" | "line_comment" | "block_comment")
}

fn is_attribute(n: Node<'_>) -> bool {
    matches!(n.kind(), "attribute_item" | "attribute_declaration")
}

fn text_of<'s>(n: Node<'_>, src: &'s str) -> &'s str {
    src.get(n.byte_range()).unwrap_or("")
}

fn field_text(n: Node<'_>, field: &str, src: &str) -> Option<String> {
    n.child_by_field_name(field).map(|c| text_of(c, src).to_string())
}

/// `Foo<T>` → `Foo`, `&'a mut Foo` → `Foo`: the name a type's members are called under.
fn type_name(t: &str) -> String {
    let t = t.trim_start_matches(['&', '*', ' ']);
    let t = t.strip_prefix("mut ").unwrap_or(t);
    let t = t.split('<').next().unwrap_or(t);
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Chunker<'_> {
    fn is_doc_comment(&self, n: Node<'_>, src: &str) -> bool {
        let t = text_of(n, src);
        match self.lang {
            Some(Lang::Rust) => {
                (t.starts_with("///") && !t.starts_with("////")) || t.starts_with("/**")
            }
            Some(Lang::Go) => t.starts_with("//"),
            Some(Lang::Python) => false,
            _ => t.starts_with("/**") || t.starts_with("///"),
        }
    }

    /// Whether rows `a..=b` fit in one chunk.
    fn fits(&self, a: usize, b: usize) -> bool {
        b + 1 - a <= UNIT_MAX_LINES
            && self.lines[a..=b].iter().map(|l| l.len()).sum::<usize>() <= UNIT_MAX_CHARS
    }

    fn is_blank(&self, row: usize) -> bool {
        self.lines[row].trim().is_empty()
    }

    /// Whether a row holds nothing but braces and separators.
    fn is_trivial(&self, row: usize) -> bool {
        self.lines[row].trim().chars().all(|c| "{}()[];,".contains(c))
    }

    /// The units among `parent`'s children (recursively through containers), in order and
    /// not overlapping.
    fn collect(&mut self, parent: Node<'_>, src: &str, prefix: Option<&str>, out: &mut Vec<Span>) {
        let Some(lang) = self.lang else { return };
        let mut cursor = parent.walk();
        let children: Vec<Node<'_>> = parent.named_children(&mut cursor).collect();
        // Comments and attributes directly above the next unit belong to it.
        let mut lead: Vec<Node<'_>> = Vec::new();
        for child in children {
            if is_comment(child) || is_attribute(child) {
                let adjacent =
                    lead.last().is_none_or(|l| child.start_position().row <= end_row(*l) + 1);
                if !adjacent {
                    lead.clear();
                }
                lead.push(child);
                continue;
            }
            if let Some(unit) = unit_of(lang, child, src) {
                let own_start = child.start_position().row;
                let lead_ok = lead.last().is_some_and(|l| end_row(*l) + 1 >= own_start);
                let mut start = own_start;
                if lead_ok {
                    start = lead[0].start_position().row;
                    let last_doc = lead
                        .iter()
                        .rposition(|n| is_comment(*n) && self.is_doc_comment(*n, src))
                        .filter(|_| self.opts.strip_doc_comments);
                    if let Some(last_doc) = last_doc {
                        for n in &lead[..=last_doc] {
                            if is_comment(*n) && self.is_doc_comment(*n, src) {
                                self.skipped.extend(n.start_position().row..=end_row(*n));
                            }
                        }
                        start =
                            lead.get(last_doc + 1).map_or(own_start, |n| n.start_position().row);
                    }
                }
                // Never reach back into the previous unit (several units on one line).
                if let Some(prev) = out.last() {
                    start = start.max(prev.end + 1);
                }
                let end = end_row(child);
                let symbol = match prefix {
                    Some(p) => format!("{p}{}{}", lang.separator(), unit.name),
                    None => unit.name,
                };
                if end < start {
                    // Entirely on the previous unit's last row: it is part of that chunk.
                } else if let Some(body) = unit.body {
                    let mut inner = Vec::new();
                    self.collect(body, src, Some(&symbol), &mut inner);
                    if inner.is_empty() && self.fits(start, end) {
                        out.push(Span { start, end, symbol: Some(symbol) });
                    } else {
                        out.extend(self.fill(start, end, Some(symbol), inner));
                    }
                } else if self.fits(start, end) {
                    out.push(Span { start, end, symbol: Some(symbol) });
                } else {
                    out.extend(self.windows(start, end, Some(symbol)));
                }
            } else if let Some(inner) = transparent(child) {
                self.collect(inner, src, prefix, out);
            }
            lead.clear();
        }
    }

    /// Covers rows `lo..=hi` with `units` and, around them, chunks named `symbol`.
    fn fill(
        &mut self,
        lo: usize,
        hi: usize,
        symbol: Option<String>,
        units: Vec<Span>,
    ) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        let mut cur = lo;
        // Rows waiting to be prepended to the next unit (a container's header).
        let mut carry: Option<usize> = None;
        for mut u in units {
            if u.start > cur {
                self.gap(cur, u.start - 1, &symbol, &mut out, &mut carry, true);
            }
            if let Some(c) = carry.take() {
                u.start = c;
            }
            cur = u.end + 1;
            out.push(u);
        }
        if cur <= hi {
            self.gap(cur, hi, &symbol, &mut out, &mut carry, false);
        }
        if let Some(c) = carry {
            // Nothing came after: the rows become a chunk of their own.
            out.extend(self.windows(c, hi, symbol));
        }
        out
    }

    /// Rows `a..=b` between units: skipped, attached to a neighbour, or windows.
    fn gap(
        &mut self,
        a: usize,
        b: usize,
        symbol: &Option<String>,
        out: &mut Vec<Span>,
        carry: &mut Option<usize>,
        unit_follows: bool,
    ) {
        // Split around skipped rows (stripped doc comments): each run is its own gap.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for r in a..=b {
            if self.skipped.contains(&r) {
                continue;
            }
            match runs.last_mut() {
                Some((_, e)) if *e + 1 == r => *e = r,
                _ => runs.push((r, r)),
            }
        }
        let n = runs.len();
        for (i, (s, e)) in runs.into_iter().enumerate() {
            let Some(core_s) = (s..=e).find(|&r| !self.is_blank(r)) else {
                self.skipped.extend(s..=e);
                continue;
            };
            let core_e = (s..=e).rev().find(|&r| !self.is_blank(r)).unwrap_or(core_s);
            let touches_prev = out.last().is_some_and(|p| p.end + 1 == s);
            let touches_next = unit_follows && i + 1 == n && e == b;
            let small = core_e + 1 - core_s <= SMALL_GAP_LINES;
            if touches_prev && (core_s..=core_e).all(|r| self.is_trivial(r)) {
                // A closing brace: the end of the member before it.
                out.last_mut().expect("touches_prev").end = e;
                continue;
            }
            if symbol.is_some() && small && touches_next {
                // A container's header: the start of its first member.
                self.skipped.extend(s..core_s);
                *carry = Some(core_s);
                continue;
            }
            if symbol.is_some() && small && touches_prev {
                // A container's tail: the end of its last member.
                out.last_mut().expect("touches_prev").end = core_e;
            } else {
                self.skipped.extend(s..core_s);
                out.extend(self.windows(core_s, core_e, symbol.clone()));
            }
            self.skipped.extend(core_e + 1..=e);
        }
    }

    /// Rows `a..=b` as line windows named `symbol`.
    fn windows(&self, a: usize, b: usize, symbol: Option<String>) -> Vec<Span> {
        let mut out = Vec::new();
        let mut start = a;
        let mut chars = 0;
        for r in a..=b {
            let len = self.lines[r].len();
            if r > start && (r - start >= WINDOW_LINES || chars + len > UNIT_MAX_CHARS) {
                out.push(Span { start, end: r - 1, symbol: symbol.clone() });
                start = r;
                chars = 0;
            }
            chars += len;
        }
        out.push(Span { start, end: b, symbol });
        out
    }
}

/// A node whose children are read as if they were its parent's (`extern "C" { … }`,
/// `#ifdef` blocks, Rust `extern` blocks).
fn transparent(n: Node<'_>) -> Option<Node<'_>> {
    match n.kind() {
        "linkage_specification" | "foreign_mod_item" => n.child_by_field_name("body"),
        "preproc_if" | "preproc_ifdef" | "preproc_else" | "preproc_elif" | "declaration_list" => {
            Some(n)
        }
        _ => None,
    }
}

/// The name of a C/C++ declarator: `int *foo(void)` → `foo`, `Foo::bar` stays `Foo::bar`.
fn declarator_name(mut n: Node<'_>, src: &str) -> Option<String> {
    for _ in 0..16 {
        match n.kind() {
            "identifier"
            | "field_identifier"
            | "qualified_identifier"
            | "destructor_name"
            | "operator_name"
            | "type_identifier"
            | "template_function" => {
                return Some(text_of(n, src).to_string());
            }
            _ => {
                n = n.child_by_field_name("declarator").or_else(|| n.named_child(0))?;
            }
        }
    }
    None
}

/// If `n` is a unit of `lang`: its name, and its members' node for containers.
fn unit_of<'t>(lang: Lang, n: Node<'t>, src: &str) -> Option<Unit<'t>> {
    let named = |body: Option<Node<'t>>| field_text(n, "name", src).map(|name| Unit { name, body });
    let body = n.child_by_field_name("body");
    match lang {
        Lang::Rust => match n.kind() {
            "function_item"
            | "function_signature_item"
            | "struct_item"
            | "enum_item"
            | "union_item"
            | "type_item"
            | "const_item"
            | "static_item"
            | "macro_definition" => named(None),
            "trait_item" | "mod_item" => named(body),
            "impl_item" => {
                let ty = field_text(n, "type", src)?;
                Some(Unit { name: type_name(&ty), body })
            }
            _ => None,
        },
        Lang::Python => match n.kind() {
            "function_definition" => named(None),
            "class_definition" => named(body),
            "decorated_definition" => {
                let def = n.child_by_field_name("definition")?;
                let inner = unit_of(lang, def, src)?;
                Some(inner)
            }
            _ => None,
        },
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => match n.kind() {
            "function_declaration"
            | "generator_function_declaration"
            | "function_signature"
            | "method_definition"
            | "method_signature"
            | "abstract_method_signature"
            | "interface_declaration"
            | "type_alias_declaration"
            | "enum_declaration" => named(None),
            "class_declaration" | "abstract_class_declaration" | "internal_module" | "module" => {
                named(body)
            }
            "export_statement" => {
                let decl = n.child_by_field_name("declaration")?;
                unit_of(lang, decl, src)
            }
            // `namespace NS { … }` is an expression statement in the TypeScript grammar.
            "expression_statement" => unit_of(lang, n.named_child(0)?, src),
            "lexical_declaration" | "variable_declaration" => {
                // `const f = (…) => …`, `const C = class { … }`
                let mut c = n.walk();
                let decls: Vec<Node<'t>> = n.named_children(&mut c).collect();
                let [d] = decls.as_slice() else { return None };
                let value = d.child_by_field_name("value")?;
                if !matches!(
                    value.kind(),
                    "arrow_function" | "function_expression" | "function" | "class"
                ) {
                    return None;
                }
                let body = (value.kind() == "class").then(|| value.child_by_field_name("body"));
                Some(Unit { name: field_text(*d, "name", src)?, body: body.flatten() })
            }
            _ => None,
        },
        Lang::Go => match n.kind() {
            "function_declaration" => named(None),
            "method_declaration" => {
                let name = field_text(n, "name", src)?;
                let recv = n
                    .child_by_field_name("receiver")
                    .and_then(|r| r.named_child(0))
                    .and_then(|p| p.child_by_field_name("type"))
                    .map(|t| type_name(text_of(t, src)));
                Some(Unit {
                    name: match recv {
                        Some(r) => format!("{r}.{name}"),
                        None => name,
                    },
                    body: None,
                })
            }
            "type_declaration" => {
                let spec = n.named_child(0)?;
                Some(Unit { name: field_text(spec, "name", src)?, body: None })
            }
            _ => None,
        },
        Lang::Java => match n.kind() {
            "method_declaration"
            | "constructor_declaration"
            | "compact_constructor_declaration" => named(None),
            "class_declaration"
            | "interface_declaration"
            | "enum_declaration"
            | "record_declaration"
            | "annotation_type_declaration" => named(body),
            _ => None,
        },
        Lang::C | Lang::Cpp => match n.kind() {
            "function_definition" => {
                let d = n.child_by_field_name("declarator")?;
                Some(Unit { name: declarator_name(d, src)?, body: None })
            }
            "class_specifier" | "struct_specifier" | "union_specifier" | "enum_specifier" => {
                let b = body?;
                let name = field_text(n, "name", src)?;
                let members = (lang == Lang::Cpp && n.kind() != "enum_specifier").then_some(b);
                Some(Unit { name, body: members })
            }
            "namespace_definition" => {
                let name = field_text(n, "name", src).unwrap_or_else(|| "(anonymous)".into());
                Some(Unit { name, body })
            }
            "type_definition" => {
                let d = n.child_by_field_name("declarator")?;
                Some(Unit { name: declarator_name(d, src)?, body: None })
            }
            "template_declaration" => {
                let mut c = n.walk();
                let inner: Vec<Node<'t>> = n.named_children(&mut c).collect();
                inner.into_iter().rev().find_map(|i| unit_of(lang, i, src))
            }
            "declaration" => {
                // `struct foo { … };` and friends.
                let ty = n.child_by_field_name("type")?;
                if n.child_by_field_name("declarator").is_some() {
                    return None;
                }
                unit_of(lang, ty, src)
            }
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line is in exactly one chunk or skipped, chunks are in order, and each chunk's
    /// text is its span of the source.
    fn check_cover(path: &str, src: &str, opts: ChunkOptions) -> Chunked {
        let c = chunk_code(path, src, opts);
        let lines: Vec<&str> = src.split_inclusive('\n').collect();
        let mut owner = vec![0usize; lines.len()];
        for ch in &c.chunks {
            assert!(ch.line_start <= ch.line_end, "{ch:?}");
            for l in ch.line_start..=ch.line_end {
                owner[l - 1] += 1;
            }
            assert_eq!(ch.text, lines[ch.line_start - 1..ch.line_end].concat().trim_end());
        }
        for &(a, b) in &c.skipped {
            for l in a..=b {
                owner[l - 1] += 1;
            }
        }
        for (i, n) in owner.iter().enumerate() {
            assert_eq!(*n, 1, "{path}: line {} is in {n} places\n{c:#?}", i + 1);
        }
        for w in c.chunks.windows(2) {
            assert!(w[0].line_end < w[1].line_start);
        }
        c
    }

    fn symbols(c: &Chunked) -> Vec<String> {
        c.chunks.iter().filter_map(|c| c.symbol.clone()).collect()
    }

    const RUST: &str = r#"//! Module docs.

use std::fmt;

/// A point.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl Point {
    /// Makes one.
    pub fn new(x: i32) -> Self {
        Point { x }
    }

    pub fn x(&self) -> i32 {
        self.x
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.x)
    }
}

pub trait Shape {
    fn area(&self) -> f64;
}

mod inner {
    pub fn helper() {}
}

fn main() {}
"#;

    #[test]
    fn rust_units_are_named_as_rust_names_them() {
        let c = check_cover("src/lib.rs", RUST, ChunkOptions::default());
        assert_eq!(
            symbols(&c),
            [
                "Point",
                "Point::new",
                "Point::x",
                "Point::fmt",
                "Shape::area",
                "inner::helper",
                "main"
            ]
        );
        let new = c.chunks.iter().find(|c| c.symbol.as_deref() == Some("Point::new")).unwrap();
        assert!(new.text.contains("/// Makes one."), "{}", new.text);
        let point = c.chunks.iter().find(|c| c.symbol.as_deref() == Some("Point")).unwrap();
        assert!(point.text.starts_with("/// A point."), "{}", point.text);
    }

    #[test]
    fn stripped_doc_comments_are_skipped_not_chunked() {
        let c = check_cover("src/lib.rs", RUST, ChunkOptions { strip_doc_comments: true });
        assert!(c.chunks.iter().all(|c| !c.text.contains("Makes one")), "{c:#?}");
        assert!(c.chunks.iter().all(|c| !c.text.contains("A point.")), "{c:#?}");
        // `//! Module docs.` is an inner doc of the file, not of a unit: kept.
        assert!(c.chunks.iter().any(|c| c.text.contains("Module docs")));
        assert!(c.skipped.contains(&(12, 12)), "{:?}", c.skipped);
        let new = c.chunks.iter().find(|c| c.symbol.as_deref() == Some("Point::new")).unwrap();
        assert_eq!(new.line_start, 13);
    }

    #[test]
    fn python_methods_are_class_dot_name() {
        let src = "import os\n\n\n@dataclass\nclass Foo:\n    \"\"\"Doc.\"\"\"\n\n    x: int = 1\n\n    def bar(self):\n        return 1\n\n    @staticmethod\n    def baz():\n        pass\n\n\ndef top(a, b):\n    return a + b\n";
        let c = check_cover("pkg/mod.py", src, ChunkOptions::default());
        assert_eq!(symbols(&c), ["Foo", "Foo.bar", "Foo.baz", "top"]);
        let baz = c.chunks.iter().find(|c| c.symbol.as_deref() == Some("Foo.baz")).unwrap();
        assert!(baz.text.trim_start().starts_with("@staticmethod"));
    }

    #[test]
    fn javascript_and_typescript_units() {
        let js = "import x from 'y';\n\nexport function go(a) {\n  return a;\n}\n\nconst arrow = (b) => b * 2;\n\nclass Widget extends Base {\n  constructor() {\n    super();\n  }\n\n  render() {\n    return 1;\n  }\n}\n\nexport default Widget;\n";
        let c = check_cover("web/app.js", js, ChunkOptions::default());
        assert_eq!(symbols(&c), ["go", "arrow", "Widget.constructor", "Widget.render"]);
        let ts = "/** Options. */\nexport interface Opts {\n  a: number;\n}\n\ntype Id = string;\n\nexport class Store<T> {\n  private items: T[] = [];\n\n  add(item: T): void {\n    this.items.push(item);\n  }\n}\n\nnamespace NS {\n  export function inner(): number { return 1; }\n}\n";
        let c = check_cover("src/store.ts", ts, ChunkOptions::default());
        assert_eq!(symbols(&c), ["Opts", "Id", "Store.add", "NS.inner"]);
        let c = check_cover(
            "src/view.tsx",
            "export const View = () => <div>hi</div>;\n",
            ChunkOptions::default(),
        );
        assert_eq!(symbols(&c), ["View"]);
    }

    #[test]
    fn go_methods_name_their_receiver() {
        let src = "package main\n\nimport \"fmt\"\n\n// Server serves.\ntype Server struct {\n\taddr string\n}\n\n// Start starts it.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n";
        let c = check_cover("cmd/main.go", src, ChunkOptions::default());
        assert_eq!(symbols(&c), ["Server", "Server.Start", "main"]);
        let c = check_cover("cmd/main.go", src, ChunkOptions { strip_doc_comments: true });
        assert!(c.chunks.iter().all(|c| !c.text.contains("starts it")));
    }

    #[test]
    fn java_classes_and_methods() {
        let src = "package a.b;\n\nimport java.util.List;\n\npublic class Greeter {\n    private final String name;\n\n    public Greeter(String name) {\n        this.name = name;\n    }\n\n    /** Says hello. */\n    @Override\n    public String greet() {\n        return \"hi \" + name;\n    }\n}\n";
        let c = check_cover("src/Greeter.java", src, ChunkOptions::default());
        assert_eq!(symbols(&c), ["Greeter.Greeter", "Greeter.greet"]);
        let first = &c.chunks[1];
        assert!(first.text.starts_with("public class Greeter {"), "{}", first.text);
    }

    #[test]
    fn c_and_cpp_units() {
        let c_src = "#ifndef A_H\n#define A_H\n#include <stdio.h>\n\ntypedef struct point {\n  int x;\n} point_t;\n\nstatic int *make(int n) {\n  return 0;\n}\n\n#endif\n";
        let c = check_cover("src/a.h", c_src, ChunkOptions::default());
        assert_eq!(symbols(&c), ["point_t", "make"]);
        let cpp = "#include <string>\n\nnamespace app {\n\nclass Engine {\n public:\n  Engine();\n  int run(int x) {\n    return x;\n  }\n};\n\nint Engine::start() {\n  return 0;\n}\n\ntemplate <typename T>\nT twice(T v) {\n  return v + v;\n}\n\n}  // namespace app\n";
        let c = check_cover("src/engine.cpp", cpp, ChunkOptions::default());
        assert_eq!(symbols(&c), ["app::Engine::run", "app::Engine::start", "app::twice"]);
    }

    #[test]
    fn long_units_become_windows_that_keep_the_name() {
        let body: String = (0..300).map(|i| format!("    let v{i} = {i};\n")).collect();
        let src = format!("fn big() {{\n{body}}}\n");
        let c = check_cover("src/big.rs", &src, ChunkOptions::default());
        assert!(c.chunks.len() >= 5, "{}", c.chunks.len());
        assert!(c.chunks.iter().all(|c| c.symbol.as_deref() == Some("big")));
        assert!(c.chunks.iter().all(|c| c.line_end + 1 - c.line_start <= WINDOW_LINES));
    }

    #[test]
    fn files_without_a_grammar_are_line_windows_and_blank_runs_are_skipped() {
        let src: String = (0..130)
            .map(|i| if i % 50 == 0 { "\n".into() } else { format!("k{i} = 1\n") })
            .collect();
        let c = check_cover("conf/app.toml", &src, ChunkOptions::default());
        assert!(c.chunks.len() >= 3);
        assert!(c.chunks.iter().all(|c| c.symbol.is_none()));
        assert_eq!(plain_language("conf/app.toml"), Some("toml"));
        let c = check_cover("empty.rs", "\n\n\n", ChunkOptions::default());
        assert!(c.chunks.is_empty());
        assert_eq!(c.skipped, [(1, 3)]);
    }

    #[test]
    fn broken_source_is_still_covered() {
        let src = "fn ok() {}\n\nfn broken( {\n  let = ;\n\nstruct S { a: }\n";
        check_cover("src/broken.rs", src, ChunkOptions::default());
    }
}
