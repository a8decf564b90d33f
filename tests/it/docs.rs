//! The docs name everything a user can set or read: every command-line flag of both binaries,
//! every tool argument and every metric, compared as generated lists (from `--help`, the tool
//! schemas and the metrics registry) against the text of README.md and docs/*.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use hubdex_server::tool_specs;
use hubdex_tests::bin;

use crate::fixture::{fixture, runtime, state};

/// README.md and every page of docs/, as one text.
fn docs_text() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            text.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    text
}

fn help(binary: &str, args: &[&str]) -> String {
    let out = Command::new(bin(binary)).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{binary} {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a `--help` lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every `--long-flag` a help text offers, but `--help` and `--version`.
fn flags(help: &str) -> BTreeSet<String> {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()).to_string())
        .filter(|w| w != "--help" && w != "--version")
        .collect()
}

#[test]
fn every_flag_tool_argument_and_metric_is_in_the_docs() {
    let docs = docs_text();
    let mut missing = Vec::new();
    for binary in ["hubdex", "hubdex-index"] {
        let top = help(binary, &[]);
        let mut all = flags(&top);
        for sub in subcommands(&top) {
            all.extend(flags(&help(binary, &[&sub])));
        }
        assert!(!all.is_empty(), "{binary} has no flags?");
        for f in all {
            // The flag as a word: `--store` is not found inside `--store-url`.
            let word =
                regex::Regex::new(&format!(r"{}(?:[^A-Za-z0-9-]|$)", regex::escape(&f))).unwrap();
            if !word.is_match(&docs) {
                missing.push(format!("flag {f} of {binary}"));
            }
        }
    }
    for spec in tool_specs() {
        let props = spec.input_schema["properties"].as_object().unwrap();
        for name in props.keys() {
            if !docs.contains(&format!("`{name}`")) {
                missing.push(format!("argument `{name}` of tool {}", spec.name));
            }
        }
    }
    let store = fixture();
    let metrics = runtime().block_on(async { state(&store.store).await.metrics_text() });
    let names: BTreeSet<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_whitespace().next())
        .collect();
    assert!(names.len() >= 5, "{metrics}");
    for name in names {
        if !docs.contains(name) {
            missing.push(format!("metric {name}"));
        }
    }
    assert!(missing.is_empty(), "not in README.md or docs/*.md:\n{}", missing.join("\n"));
}

/// The `.rs` files under `dir`, relative to `root`, recursively.
fn rust_files(root: &std::path::Path, dir: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root.join(dir)).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            rust_files(root, &rel, out);
        } else if rel.ends_with(".rs") {
            out.push(rel);
        }
    }
}

/// The paragraph of the code map that describes the crate in `dir` (`- \`formats/\` — …` up
/// to the next crate's bullet).
fn crate_paragraph<'a>(map: &'a str, dir: &str) -> &'a str {
    let start = map
        .find(&format!("\n- `{dir}/`"))
        .unwrap_or_else(|| panic!("docs/architecture.md has no code map paragraph for {dir}/"));
    let rest = &map[start + 1..];
    let end = rest[2..].find("\n- `").map_or(rest.len(), |e| e + 2);
    &rest[..end]
}

/// Each crate of the code map: its name, its paragraph in architecture.md and its source files.
fn code_map_crates<'a>(root: &Path, map: &'a str) -> Vec<(&'static str, &'a str, Vec<String>)> {
    [
        ("formats", &["formats/src"][..]),
        ("runtime", &["runtime/src"][..]),
        ("indexer", &["indexer/src"][..]),
        ("server", &["server/src"][..]),
        ("tests", &["tests/src", "tests/it"][..]),
    ]
    .into_iter()
    .map(|(krate, dirs)| {
        let mut files = Vec::new();
        for dir in dirs {
            rust_files(root, dir, &mut files);
        }
        (krate, crate_paragraph(map, krate), files)
    })
    .collect()
}

#[test]
fn the_architecture_code_map_names_every_source_file_and_no_file_that_is_gone() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut missing = Vec::new();
    for (krate, para, files) in code_map_crates(&root, &map) {
        // Each file is named in its own crate's paragraph by its file name in backticks, and
        // a file in a subfolder of src/ (`github/`) with that folder named there too;
        // `src/bin/hubdex-bench.rs` is named with its folder. So `state.rs` of the server does
        // not stand for `github/state.rs` of the indexer.
        for f in &files {
            let (_, within) = f.split_once("/src/").or_else(|| f.split_once("/it/")).unwrap();
            let name = within.rsplit('/').next().unwrap();
            let named = match within.rsplit_once('/') {
                None => para.contains(&format!("`{name}`")),
                Some(("bin", _)) => para.contains(&format!("`src/{within}`")),
                Some((folder, _)) => {
                    para.contains(&format!("`{folder}/`")) && para.contains(&format!("`{name}`"))
                }
            };
            if !named {
                missing.push(format!("{f} (not named in the {krate}/ paragraph)"));
            }
        }
        // And every `name.rs` the paragraph names is a file of that crate.
        let names: BTreeSet<&str> = files.iter().map(|f| f.rsplit('/').next().unwrap()).collect();
        for w in para.split('`').skip(1).step_by(2) {
            if w.ends_with(".rs")
                && !w.contains(' ')
                && !names.contains(w.rsplit('/').next().unwrap())
            {
                missing.push(format!("{w} (named in the {krate}/ paragraph, not in that crate)"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/architecture.md's code map:\n{}", missing.join("\n"));
}

/// What the code map says a file holds, where that can be checked: every item name it gives in
/// the parenthesis after a file's name (a backticked word with a capital or an underscore,
/// `RowFilter`, `verify_sums`) occurs in that file's code.
#[test]
fn the_code_map_names_only_items_its_files_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let file_then_paren = regex::Regex::new(r"`([a-z_0-9/]+\.rs)` \(").unwrap();
    let item = regex::Regex::new(r"`([A-Za-z_][A-Za-z0-9_]*)`").unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (_, para, files) in code_map_crates(&root, &map) {
        for m in file_then_paren.captures_iter(para) {
            let name = m.get(1).unwrap().as_str();
            // The parenthesis, to its matching close.
            let rest = &para[m.get(0).unwrap().end()..];
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            let Some(file) = files.iter().find(|f| f.ends_with(&format!("/{name}"))) else {
                continue;
            };
            let code = std::fs::read_to_string(root.join(file)).unwrap();
            for c in item.captures_iter(&rest[..end]) {
                let word = &c[1];
                if !word.chars().any(|ch| ch.is_ascii_uppercase() || ch == '_') {
                    continue;
                }
                checked += 1;
                let whole = regex::Regex::new(&format!(r"\b{}\b", regex::escape(word))).unwrap();
                if !whole.is_match(&code) {
                    wrong.push(format!(
                        "{file}: the code map names `{word}`, which it does not hold"
                    ));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} names checked: is the code map still read right?");
    assert!(wrong.is_empty(), "docs/architecture.md's code map:\n{}", wrong.join("\n"));
}

/// The string literals of the binaries' sources (formats, indexer, server; tests excluded)
/// that name an environment variable hubdex reads, and the variables of docs/deploy.md's table.
fn variables_read_and_documented() -> (BTreeSet<String>, BTreeSet<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let literal = regex::Regex::new(
        r#""((?:HUBDEX|ORT|HF)_[A-Z0-9_]+|GITHUB_TOKEN|GITHUB_RUN_ID|SSL_CERT_FILE)""#,
    )
    .unwrap();
    let mut read = BTreeSet::new();
    for krate in ["formats", "runtime", "indexer", "server"] {
        for entry in walkdir::WalkDir::new(root.join(krate).join("src")) {
            let entry = entry.unwrap();
            if entry.path().extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap();
            // A module's tests set variables for themselves; what they name is not read.
            let code = text.split("#[cfg(test)]").next().unwrap_or(&text);
            read.extend(literal.captures_iter(code).map(|c| c[1].to_string()));
        }
    }
    let deploy = std::fs::read_to_string(root.join("docs/deploy.md")).unwrap();
    let table = &deploy[deploy.find("## Environment variables").expect("the section")..];
    let row = regex::Regex::new(r"(?m)^\| `([A-Z][A-Z0-9_]+)` \|").unwrap();
    let documented = row.captures_iter(table).map(|c| c[1].to_string()).collect();
    (read, documented)
}

/// Every environment variable the binaries read (a clap `env =`, a `std::env::var`) is in
/// docs/deploy.md's table, and every variable the table names is read.
#[test]
fn every_environment_variable_read_is_documented_and_every_documented_one_is_read() {
    let (read, documented) = variables_read_and_documented();
    assert!(read.contains("HUBDEX_STORE") && read.contains("HUBDEX_LOG"), "{read:?}");
    let undocumented: Vec<_> = read.difference(&documented).collect();
    let unread: Vec<_> = documented.difference(&read).collect();
    assert!(undocumented.is_empty(), "read but not in docs/deploy.md's table: {undocumented:?}");
    assert!(unread.is_empty(), "in docs/deploy.md's table but read nowhere: {unread:?}");
}

/// The format versions the docs name are the ones the code writes and reads.
#[test]
fn the_format_versions_in_the_docs_are_the_code_s() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let format = std::fs::read_to_string(root.join("docs/format.md")).unwrap();
    let written = hubdex_formats::FORMAT_VERSION;
    let readable = hubdex_formats::READABLE_VERSIONS;
    let (first, last) = (readable[0], *readable.last().unwrap());
    assert!(readable.windows(2).all(|w| w[1] == w[0] + 1), "{readable:?} has a gap");
    let manifest_row = format!(
        "| `format_version` | `{written}` (readers also accept `{first}` to `{}`) |",
        written - 1
    );
    assert!(format.contains(&manifest_row), "docs/format.md lacks {manifest_row}");
    let versioning = format!("(today: {first} to {last})");
    assert!(format.contains(&versioning), "docs/format.md lacks {versioning}");
    // Every "format N" or "version N" the docs name is one the code can read.
    let named = regex::Regex::new(r"(?i)\bformat[- ](?:version )?`?(\d+)\b").unwrap();
    for doc in ["docs/format.md", "docs/architecture.md", "README.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for c in named.captures_iter(&text) {
            let v: u32 = c[1].parse().unwrap();
            assert!(readable.contains(&v), "{doc} names format {v}, which no reader reads");
        }
    }
    // And a golden fixture per readable version.
    for v in readable {
        let dir = root.join(format!("tests/fixtures/golden-v{v}"));
        assert!(dir.join("LATEST").is_file(), "{} has no LATEST", dir.display());
    }
}

/// For each top-level module of `krate` (a file or directory under src/, lib.rs and main.rs
/// aside), the other modules of the crate its code names, each with the first place it does:
/// `crate::m` and names the crate root re-exports from `m` (`pub use m::{…}` in lib.rs).
/// Comment lines and the `#[cfg(test)] mod tests` at a file's end are left out.
fn module_imports(krate: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src");
    let top_of = |path: &Path| {
        let rel = path.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        first.trim_end_matches(".rs").to_string()
    };
    let mut modules: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut texts = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let top = top_of(entry.path());
        if top == "lib" || top == "main" {
            continue;
        }
        modules.entry(top.clone()).or_default();
        texts.push((top, entry.path().to_path_buf()));
    }
    // What lib.rs re-exports, by the module it comes from.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let reexport =
        regex::Regex::new(r"(?s)pub use ([a-z_0-9]+)(?:::[a-z_0-9]+)*::(\{[^}]*\}|[A-Za-z_0-9]+);")
            .unwrap();
    let mut from_module = BTreeMap::new();
    for c in reexport.captures_iter(&lib) {
        for name in
            c[2].trim_matches(['{', '}']).split(',').map(str::trim).filter(|n| !n.is_empty())
        {
            from_module.insert(name.to_string(), c[1].to_string());
        }
    }
    let named = regex::Regex::new(r"crate::([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    for (top, path) in texts {
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or(&text);
        for (i, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for c in named.captures_iter(line) {
                let name = &c[1];
                let module = if modules.contains_key(name) {
                    name.to_string()
                } else if let Some(m) = from_module.get(name) {
                    m.clone()
                } else {
                    continue;
                };
                if module != top {
                    let at = format!("{}:{}", path.strip_prefix(&src).unwrap().display(), i + 1);
                    modules.get_mut(&top).unwrap().entry(module).or_insert(at);
                }
            }
        }
    }
    modules
}

/// docs/architecture.md's layer order of `krate`: under "## Layers", its "### krate" list, one
/// numbered line a layer (`1. `a`, `b``), lowest first.
fn documented_layers(krate: &str) -> BTreeMap<String, usize> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let arch = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let layers = &arch[arch.find("\n## Layers").expect("architecture.md has a Layers section")..];
    let start =
        layers.find(&format!("\n### {krate}\n")).unwrap_or_else(|| panic!("no ### {krate}"));
    let mut out = BTreeMap::new();
    let line = regex::Regex::new(r"^(\d+)\. (.*)$").unwrap();
    for l in layers[start..].lines().skip(2) {
        if l.starts_with('#') {
            break;
        }
        let Some(c) = line.captures(l) else { continue };
        let n: usize = c[1].parse().unwrap();
        for m in c[2].split(',').map(|m| m.trim().trim_matches('`')) {
            assert!(out.insert(m.to_string(), n).is_none(), "{krate}: `{m}` listed twice");
        }
    }
    out
}

/// The imports of `imports` (module → the modules it names, each with where) that do not go
/// down architecture.md's "### `name`" layer list; that list must name every module once.
fn imports_that_go_up(
    name: &str,
    imports: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<String> {
    let layers = documented_layers(name);
    let listed: BTreeSet<&String> = layers.keys().collect();
    let found: BTreeSet<&String> = imports.keys().collect();
    assert_eq!(listed, found, "{name}: architecture.md's layers list every module once");
    let mut wrong = Vec::new();
    for (module, uses) in imports {
        for (used, at) in uses {
            if layers[used] >= layers[module] {
                wrong.push(format!(
                    "{name}: `{module}` (layer {}) names `{used}` (layer {}) at {at}",
                    layers[module], layers[used]
                ));
            }
        }
    }
    wrong
}

/// Each crate is layered as docs/architecture.md says: every module is in exactly one layer,
/// and a module names only modules of lower layers (so no two modules import each other,
/// directly or round a circle). A failure names the import and where it is.
#[test]
fn every_module_imports_only_the_layers_below_it() {
    let mut wrong = Vec::new();
    for krate in ["formats", "runtime", "indexer", "server"] {
        wrong.extend(imports_that_go_up(krate, &module_imports(krate)));
    }
    assert!(wrong.is_empty(), "imports that do not go down:\n{}", wrong.join("\n"));
}

/// Every place that cites a section of a document (`docs/format.md, "Merged segments"`, in the
/// docs or in a comment, across a line break or not) names a heading of that document, or the
/// bold lead of one of its paragraphs (`**Memory.**`): a renamed or removed section fails here,
/// naming the file that cites it.
#[test]
fn every_cited_section_of_a_document_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let listed = Command::new("git")
        .args(["ls-files", "*.rs", "*.md", "*.py"])
        .current_dir(&root)
        .output()
        .unwrap();
    let files = String::from_utf8(listed.stdout).unwrap();
    let joined = regex::Regex::new(r"\n\s*(?://[/!]?|#)?\s*").unwrap();
    let citation = regex::Regex::new(r#"((?:docs/[a-z_]+|README)\.md),? "([^"]{3,100})""#).unwrap();
    let heading = regex::Regex::new(r"(?m)^#+ (.+)$").unwrap();
    let lead = regex::Regex::new(r"\*\*([^*]+?)\.\*\*").unwrap();
    let mut wrong = Vec::new();
    let mut cited = 0;
    for file in files.lines() {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        let text = joined.replace_all(&text, " ");
        for c in citation.captures_iter(&text) {
            let (doc, section) = (&c[1], &c[2]);
            let Ok(target) = std::fs::read_to_string(root.join(doc)) else { continue };
            cited += 1;
            let is_heading = heading.captures_iter(&target).any(|h| h[1].trim() == section);
            let is_lead = lead.captures_iter(&target).any(|l| &l[1] == section);
            if !is_heading && !is_lead {
                wrong.push(format!("{file} cites {doc}, \"{section}\", which it does not hold"));
            }
        }
    }
    assert!(cited > 5, "only {cited} citations found: the pattern is wrong");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// For each folder module of `krate` (a directory under src/), its files' modules (mod.rs
/// aside) and, for each, the sibling modules its code names, each with the first place it does:
/// `super::m`, `crate::folder::m` and `super::{…, m, …}`. Comments and the tests at a file's
/// end are left out.
fn folder_imports(krate: &str) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src");
    let mut folders = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut texts = Vec::new();
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.extension().is_some_and(|e| e == "rs") && stem != "mod" {
                files.insert(stem.clone(), BTreeMap::new());
                texts.push((stem, path));
            }
        }
        let named = regex::Regex::new(&format!(
            r"(?:crate::{folder}::|super::)(?:([A-Za-z_][A-Za-z0-9_]*)|\{{([^}}]*)\}})"
        ))
        .unwrap();
        for (module, path) in texts {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("\n#[cfg(test)]\nmod tests").next().unwrap_or(&text);
            let code: String = code
                .lines()
                .map(|l| if l.trim_start().starts_with("//") { "" } else { l })
                .collect::<Vec<_>>()
                .join("\n");
            for c in named.captures_iter(&code) {
                let line = code[..c.get(0).unwrap().start()].lines().count().max(1);
                let names: Vec<&str> = match (c.get(1), c.get(2)) {
                    (Some(one), _) => vec![one.as_str()],
                    (None, Some(group)) => group
                        .as_str()
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap())
                        .collect(),
                    _ => continue,
                };
                for name in names {
                    if name != module && files.contains_key(name) {
                        let at = format!("{folder}/{module}.rs:{line}");
                        files.get_mut(&module).unwrap().entry(name.to_string()).or_insert(at);
                    }
                }
            }
        }
        folders.insert(folder, files);
    }
    folders
}

/// Inside each folder module the files are layered too, as architecture.md's
/// "### crate/folder" list says: a file names only siblings of lower layers.
#[test]
fn every_file_of_a_folder_imports_only_the_layers_below_it() {
    let mut wrong = Vec::new();
    for krate in ["formats", "runtime", "indexer", "server"] {
        for (folder, imports) in folder_imports(krate) {
            wrong.extend(imports_that_go_up(&format!("{krate}/{folder}"), &imports));
        }
    }
    assert!(wrong.is_empty(), "imports that do not go down:\n{}", wrong.join("\n"));
}
