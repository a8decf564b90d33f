//! The definitions a source file holds, for the `symbols` tool: each grammar's own tags query
//! (`TAGS_QUERY`, what GitHub's code navigation runs), its `@definition.*` captures read with
//! the kind refined from the syntax node (a Rust `function_item` in an impl is a method, a Go
//! `type_spec` of a struct is a struct), the nearest enclosing container (impl, trait, class,
//! module) and the definition's first line as its signature.

use std::sync::OnceLock;

use hubdex_formats::FileSymbol;
use tree_sitter::{Node, Parser, Query, QueryCursor, StreamingIterator as _};

use super::code::Lang;

/// A signature is the definition's first line, cut to this many characters.
const SIGNATURE_CHARS: usize = 200;

/// Rust's tags query has no constants and no trait methods without a body; ctags lists both.
const RUST_EXTRA: &str = "
(function_signature_item name: (identifier) @name) @definition.method
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
";

fn query_text(lang: Lang) -> String {
    match lang {
        Lang::Rust => format!("{}\n{RUST_EXTRA}", tree_sitter_rust::TAGS_QUERY),
        Lang::Python => tree_sitter_python::TAGS_QUERY.to_string(),
        Lang::JavaScript => tree_sitter_javascript::TAGS_QUERY.to_string(),
        // TypeScript's tags extend JavaScript's, as its grammar extends JavaScript's.
        Lang::TypeScript | Lang::Tsx => {
            format!(
                "{}\n{}",
                tree_sitter_javascript::TAGS_QUERY,
                tree_sitter_typescript::TAGS_QUERY
            )
        }
        Lang::Go => tree_sitter_go::TAGS_QUERY.to_string(),
        Lang::Java => tree_sitter_java::TAGS_QUERY.to_string(),
        Lang::C => tree_sitter_c::TAGS_QUERY.to_string(),
        Lang::Cpp => tree_sitter_cpp::TAGS_QUERY.to_string(),
    }
}

/// The compiled query of `lang`, once per process; `None` when the grammar's query does not
/// compile against it (then the language has no symbols, and a test says so).
fn query(lang: Lang) -> Option<&'static Query> {
    static QUERIES: [OnceLock<Option<Query>>; 9] = [const { OnceLock::new() }; 9];
    let slot = match lang {
        Lang::Rust => 0,
        Lang::Python => 1,
        Lang::JavaScript => 2,
        Lang::TypeScript => 3,
        Lang::Tsx => 4,
        Lang::Go => 5,
        Lang::Java => 6,
        Lang::C => 7,
        Lang::Cpp => 8,
    };
    QUERIES[slot].get_or_init(|| Query::new(&lang.grammar(), &query_text(lang)).ok()).as_ref()
}

/// The definitions in the file `path` (its language by extension) holding `text`: what a
/// build lists for it (`hubdex-bench` measures them against Universal Ctags).
pub fn symbols_of(path: &str, text: &str) -> Vec<FileSymbol> {
    Lang::of_path(path).map(|lang| symbols(lang, text)).unwrap_or_default()
}

/// The definitions in `text`, a file in `lang`, in the order they start.
pub(crate) fn symbols(lang: Lang, text: &str) -> Vec<FileSymbol> {
    let Some(query) = query(lang) else { return Vec::new() };
    let mut parser = Parser::new();
    if parser.set_language(&lang.grammar()).is_err() {
        return Vec::new();
    }
    let Some(tree) = parser.parse(text, None) else { return Vec::new() };
    let names = query.capture_names();
    let mut out: Vec<FileSymbol> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(query, tree.root_node(), text.as_bytes());
    while let Some(m) = matches.next() {
        let mut name = None;
        let mut def = None;
        for c in m.captures() {
            let capture = names[c.index as usize];
            if capture == "name" {
                name = Some(c.node);
            } else if let Some(kind) = capture.strip_prefix("definition.") {
                def = Some((c.node, kind));
            }
        }
        let (Some(name), Some((node, captured))) = (name, def) else { continue };
        let Ok(name) = name.utf8_text(text.as_bytes()) else { continue };
        let node = whole_definition(node);
        if name.is_empty() || !seen.insert((node.start_byte(), name.to_string())) {
            continue;
        }
        let first = text[node.start_byte()..node.end_byte()].lines().next().unwrap_or("").trim();
        let signature = match first.char_indices().nth(SIGNATURE_CHARS) {
            Some((cut, _)) => first[..cut].to_string(),
            None => first.to_string(),
        };
        out.push(FileSymbol {
            name: name.to_string(),
            kind: kind_of(node, captured).to_string(),
            container: container_of(node, text),
            line_start: node.start_position().row as u32 + 1,
            line_end: node.end_position().row as u32 + 1,
            signature,
        });
    }
    out.sort_by_key(|s| (s.line_start, s.line_end));
    out
}

/// C and C++ capture a function's declarator: its definition is the enclosing one.
fn whole_definition(node: Node<'_>) -> Node<'_> {
    if node.kind() != "function_declarator" {
        return node;
    }
    let mut at = node;
    for _ in 0..3 {
        match at.parent() {
            Some(p) if p.kind() == "function_definition" => return p,
            Some(p) => at = p,
            None => break,
        }
    }
    node
}

/// The kind a definition is listed as: from its syntax node where that says more than the
/// tags query's capture, else the capture's (`definition.function` → function).
fn kind_of(node: Node<'_>, captured: &str) -> &'static str {
    // A function directly in an impl, a trait or a class body is a method.
    let in_container = || {
        let mut at = node.parent();
        while let Some(p) = at {
            match p.kind() {
                "declaration_list" => {
                    return p
                        .parent()
                        .is_some_and(|g| matches!(g.kind(), "impl_item" | "trait_item"));
                }
                "class_definition" | "class_body" | "class_declaration" => return true,
                "function_item" | "function_definition" | "source_file" | "module" => {
                    return false;
                }
                _ => at = p.parent(),
            }
        }
        false
    };
    match node.kind() {
        "struct_item" | "struct_specifier" => "struct",
        "enum_item" | "enum_specifier" | "enum_declaration" => "enum",
        "union_item" | "union_specifier" => "union",
        "type_item" | "type_definition" | "type_alias_declaration" => "type",
        "trait_item" => "trait",
        "mod_item" | "namespace_definition" => "module",
        "macro_definition" => "macro",
        "const_item" | "static_item" => "const",
        "class_definition"
        | "class_declaration"
        | "class_specifier"
        | "abstract_class_declaration"
        | "class" => "class",
        "interface_declaration" => "interface",
        "type_spec" => match node.child_by_field_name("type").map(|t| t.kind()) {
            Some("struct_type") => "struct",
            Some("interface_type") => "interface",
            _ => "type",
        },
        "function_item" | "function_definition" if in_container() => "method",
        "function_signature_item" => "method",
        "function_item"
        | "function_declaration"
        | "function_signature"
        | "function_definition"
        | "generator_function_declaration" => "function",
        "method_declaration"
        | "method_definition"
        | "method_signature"
        | "abstract_method_signature" => "method",
        _ => match captured {
            "function" => "function",
            "method" => "method",
            "class" => "class",
            "interface" => "interface",
            "module" => "module",
            "macro" => "macro",
            "constant" => "const",
            "type" => "type",
            _ => "other",
        },
    }
}

/// The nearest enclosing impl (its type), trait, class, interface, namespace or module.
fn container_of(node: Node<'_>, text: &str) -> Option<String> {
    let field = |n: Node<'_>, f: &str| {
        n.child_by_field_name(f).and_then(|c| c.utf8_text(text.as_bytes()).ok()).map(str::to_string)
    };
    if node.kind() == "method_declaration"
        && let Some(receiver) = node.child_by_field_name("receiver")
    {
        // Go: `func (r *Reader) Read(...)`: the receiver's type, without its pointer.
        let t = receiver.utf8_text(text.as_bytes()).ok()?;
        let ty = t.trim_matches(|c| c == '(' || c == ')').split_whitespace().last()?;
        return Some(ty.trim_start_matches('*').to_string());
    }
    let mut at = node.parent();
    while let Some(p) = at {
        match p.kind() {
            "impl_item" => return field(p, "type"),
            "trait_item"
            | "mod_item"
            | "class_definition"
            | "class_declaration"
            | "abstract_class_declaration"
            | "interface_declaration"
            | "class_specifier"
            | "struct_specifier"
            | "namespace_definition"
            | "enum_declaration" => {
                if let Some(name) = field(p, "name") {
                    return Some(name);
                }
            }
            _ => {}
        }
        at = p.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(lang: Lang, text: &str) -> Vec<(String, String, Option<String>, u32, u32)> {
        symbols(lang, text)
            .into_iter()
            .map(|s| (s.name, s.kind, s.container, s.line_start, s.line_end))
            .collect()
    }

    fn s(
        name: &str,
        kind: &str,
        container: Option<&str>,
        a: u32,
        b: u32,
    ) -> (String, String, Option<String>, u32, u32) {
        (name.into(), kind.into(), container.map(str::to_string), a, b)
    }

    #[test]
    fn every_language_s_tags_query_compiles() {
        for lang in [
            Lang::Rust,
            Lang::Python,
            Lang::JavaScript,
            Lang::TypeScript,
            Lang::Tsx,
            Lang::Go,
            Lang::Java,
            Lang::C,
            Lang::Cpp,
        ] {
            assert!(query(lang).is_some(), "{lang:?}");
        }
    }

    #[test]
    fn rust_definitions_with_their_kinds_containers_and_spans() {
        let text = "pub struct Budget {\n    bytes: u64,\n}\n\nimpl Budget {\n    pub fn new(bytes: u64) -> Self {\n        Budget { bytes }\n    }\n}\n\npub trait Spill {\n    fn spill(&self);\n}\n\npub enum Kind { A, B }\n\nconst LIMIT: usize = 3;\n\nmod inner {\n    pub fn helper() {}\n}\n\nmacro_rules! twice { ($e:expr) => { $e; $e } }\n\nfn main() {}\n";
        assert_eq!(
            listed(Lang::Rust, text),
            [
                s("Budget", "struct", None, 1, 3),
                s("new", "method", Some("Budget"), 6, 8),
                s("Spill", "trait", None, 11, 13),
                s("spill", "method", Some("Spill"), 12, 12),
                s("Kind", "enum", None, 15, 15),
                s("LIMIT", "const", None, 17, 17),
                s("inner", "module", None, 19, 21),
                s("helper", "function", Some("inner"), 20, 20),
                s("twice", "macro", None, 23, 23),
                s("main", "function", None, 25, 25),
            ]
        );
        let sig = symbols(Lang::Rust, text).into_iter().find(|s| s.name == "new").unwrap();
        assert_eq!(sig.signature, "pub fn new(bytes: u64) -> Self {");
    }

    #[test]
    fn python_go_and_typescript_definitions() {
        let py = "RETRIES = 3\n\nclass Client:\n    def get(self, url):\n        return url\n\ndef main():\n    pass\n";
        assert_eq!(
            listed(Lang::Python, py),
            [
                s("RETRIES", "const", None, 1, 1),
                s("Client", "class", None, 3, 5),
                s("get", "method", Some("Client"), 4, 5),
                s("main", "function", None, 7, 8),
            ]
        );
        let go = "package x\n\ntype Reader struct {\n\tn int\n}\n\nfunc (r *Reader) Read() int {\n\treturn r.n\n}\n\nfunc New() *Reader { return nil }\n";
        assert_eq!(
            listed(Lang::Go, go),
            [
                s("Reader", "struct", None, 3, 5),
                s("Read", "method", Some("Reader"), 7, 9),
                s("New", "function", None, 11, 11),
            ]
        );
        let ts = "interface Shape {\n  area(): number;\n}\n\nclass Square {\n  side = 1;\n  area() {\n    return 1;\n  }\n}\n\nfunction make(): Square {\n  return new Square();\n}\n";
        let found = listed(Lang::TypeScript, ts);
        for want in [
            s("Shape", "interface", None, 1, 3),
            s("Square", "class", None, 5, 10),
            s("area", "method", Some("Square"), 7, 9),
            s("make", "function", None, 12, 14),
        ] {
            assert!(found.contains(&want), "{want:?} in {found:?}");
        }
    }
}
