//! The exact-search store of a serving unit (`grep/`): every text file's bytes as they are, a
//! table of the files, and a trigram index over them ([`crate::ngram`]). `grep` plans a regex
//! into trigrams, reads the candidate files' bytes from the memory-mapped texts and verifies
//! them with the real regex engine; nothing is decoded or decompressed on the way.
//!
//! ```text
//! grep/texts.bin     the files' bytes, one after another, in table order
//! grep/files.bin     HXGF, layout, file count, string-pool length (u32 each), then a
//!                    48-byte entry a file (12 u32: text offset low and high, text length,
//!                    path, repo, commit and language each as pool offset and length, flags),
//!                    then the string pool (repos, commits and languages stored once)
//! grep/trigrams.bin  the trigram index, its document numbers the table's (ngram/index.rs)
//! grep/symbols.bin   HXSY, layout, symbol count, string-pool length (u32 each), then a
//!                    40-byte entry a definition (10 u32: file, name, container and signature
//!                    each as pool offset and length, kind, first and last line) sorted by
//!                    name folded to lower case, then name, file and line; then the pool
//!                    (each string stored once)
//! grep/symfiles.bin  HXSF, layout, file count, the order's length in bytes (u32 each), then a
//!                    12-byte entry a file sorted by repository and path (3 u32: the file,
//!                    its first place in the order and its definition count), then the order:
//!                    the symbol table's entry numbers by file and first line (u32 each)
//! ```
//!
//! A file listed without its text ([`Skipped`]) has an empty text and indexes no trigram: it
//! is there to be counted. Every read is bounds-checked at open: damaged bytes are an error,
//! never a panic.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use tantivy::directory::OwnedBytes;

use crate::error::FormatError;
use crate::files::{FileText, Skipped};
use crate::ngram::{NgramIndex, NgramWriter, Query};

/// The directory of a serving unit's exact-search store.
pub const GREP_DIR: &str = "grep";
const TEXTS: &str = "texts.bin";
const FILES: &str = "files.bin";
const TRIGRAMS: &str = "trigrams.bin";
const SYMBOLS: &str = "symbols.bin";
const SYMBOL_MAGIC: &[u8; 4] = b"HXSY";
const SYMBOL_ENTRY: usize = 40;
const SYMFILES: &str = "symfiles.bin";
const SYMFILES_MAGIC: &[u8; 4] = b"HXSF";
const SYMFILES_ENTRY: usize = 12;

/// The kinds a definition is listed as; an entry holds its index.
pub const SYMBOL_KINDS: &[&str] = &[
    "function",
    "method",
    "struct",
    "class",
    "enum",
    "union",
    "trait",
    "interface",
    "type",
    "const",
    "module",
    "macro",
    "other",
];

const MAGIC: &[u8; 4] = b"HXGF";
const LAYOUT: u32 = 1;
pub(crate) const HEADER: usize = 16;
const ENTRY: usize = 48;

const VENDORED: u32 = 1;
const GENERATED: u32 = 2;
const BINARY: u32 = 4;
const TOO_LARGE: u32 = 8;
const OVER_BUDGET: u32 = 16;

/// Writes a grep store a file at a time: the texts stream to disk, the trigram index spills
/// past its bound ([`NgramWriter`]), and what is held is the table (48 bytes a file) and the
/// string pool.
pub struct GrepStoreWriter {
    dir: PathBuf,
    texts: std::io::BufWriter<std::fs::File>,
    written: u64,
    /// The files' entries, 12 words each.
    entries: Vec<u32>,
    pool: StringPool,
    trigrams: NgramWriter,
    files: u32,
    /// Every definition so far as its 10-word entry (strings in `symbol_pool`), sorted at
    /// finish: 40 bytes a definition and its strings once, not a struct of owned strings.
    symbols: Vec<[u32; 10]>,
    /// Names, containers and signatures, each stored once (signatures such as
    /// `fn new() -> Self {` repeat: a third of the table's bytes).
    symbol_pool: StringPool,
}

/// A table's string pool: each string as (offset, length) in it. A string added with
/// `intern` is stored once.
#[derive(Default)]
pub(crate) struct StringPool {
    pub(crate) bytes: Vec<u8>,
    seen: HashMap<String, (u32, u32)>,
}

impl StringPool {
    /// `s` in the pool; `None` when it would end past 4 GiB (what a `u32` offset reaches).
    pub(crate) fn add(&mut self, s: &str, intern: bool) -> Option<(u32, u32)> {
        if intern && let Some(&at) = self.seen.get(s) {
            return Some(at);
        }
        if self.bytes.len() + s.len() > u32::MAX as usize {
            return None;
        }
        let at = (self.bytes.len() as u32, s.len() as u32);
        self.bytes.extend_from_slice(s.as_bytes());
        if intern {
            self.seen.insert(s.to_string(), at);
        }
        Some(at)
    }
}

impl std::fmt::Debug for GrepStoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrepStoreWriter")
            .field("dir", &self.dir)
            .field("files", &self.files)
            .finish()
    }
}

impl GrepStoreWriter {
    /// A new, empty store in `dir` (created).
    pub fn create(dir: &Path) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        let path = dir.join(TEXTS);
        let texts = std::fs::File::create(&path).map_err(|e| FormatError::io(&path, e))?;
        Ok(GrepStoreWriter {
            dir: dir.to_path_buf(),
            texts: std::io::BufWriter::with_capacity(1 << 20, texts),
            written: 0,
            entries: Vec::new(),
            pool: StringPool::default(),
            trigrams: NgramWriter::new(),
            files: 0,
            symbols: Vec::new(),
            symbol_pool: StringPool::default(),
        })
    }

    fn string(&mut self, s: &str, intern: bool) -> Result<(u32, u32), FormatError> {
        match self.pool.add(s, intern) {
            Some(at) => Ok(at),
            None => Err(self.too_large("its path and name strings pass 4 GiB")),
        }
    }

    fn too_large(&self, what: &str) -> FormatError {
        FormatError::Schema { what: self.dir.display().to_string(), detail: what.to_string() }
    }

    /// Adds one file of `repo`.
    pub fn add(&mut self, repo: &str, f: &FileText) -> Result<(), FormatError> {
        let text: &[u8] = if f.skipped.is_some() { b"" } else { f.content.as_bytes() };
        let skipped = match f.skipped {
            None => 0,
            Some(Skipped::Binary) => BINARY,
            Some(Skipped::TooLarge) => TOO_LARGE,
            Some(Skipped::OverBudget) => OVER_BUDGET,
        };
        let flags =
            (u32::from(f.vendored) * VENDORED) | (u32::from(f.generated) * GENERATED) | skipped;
        self.add_text(repo, &f.path, &f.commit_sha, f.language.as_deref(), text, flags)?;
        for sym in &f.symbols {
            let name = self.symbol_string(&sym.name)?;
            let container = match &sym.container {
                Some(c) => self.symbol_string(c)?,
                None => (0, 0),
            };
            let signature = self.symbol_string(&sym.signature)?;
            let kind =
                SYMBOL_KINDS.iter().position(|k| *k == sym.kind).unwrap_or(SYMBOL_KINDS.len() - 1);
            self.symbols.push([
                self.files - 1,
                name.0,
                name.1,
                container.0,
                container.1,
                signature.0,
                signature.1,
                kind as u32,
                sym.line_start,
                sym.line_end,
            ]);
        }
        Ok(())
    }

    /// Adds one text of `repo` to the table and the trigram index (as file number
    /// `len()` before the call): a file's bytes, or a commit's changed lines.
    pub(crate) fn add_text(
        &mut self,
        repo: &str,
        path: &str,
        sha: &str,
        language: Option<&str>,
        text: &[u8],
        flags: u32,
    ) -> Result<(), FormatError> {
        let io = |e| FormatError::io(self.dir.join(TEXTS), e);
        let len = u32::try_from(text.len())
            .map_err(|_| self.too_large(&format!("{path} is over 4 GiB")))?;
        let offset = self.written;
        self.texts.write_all(text).map_err(io)?;
        self.written += text.len() as u64;
        self.trigrams.add(text).map_err(|e| FormatError::io(self.dir.join(TRIGRAMS), e))?;
        let path = self.string(path, false)?;
        let repo = self.string(repo, true)?;
        let sha = self.string(sha, true)?;
        let lang = match language {
            Some(l) => self.string(l, true)?,
            None => (0, 0),
        };
        let words = [
            offset as u32,
            (offset >> 32) as u32,
            len,
            path.0,
            path.1,
            repo.0,
            repo.1,
            sha.0,
            sha.1,
            lang.0,
            lang.1,
            flags,
        ];
        self.entries.extend_from_slice(&words);
        self.files += 1;
        Ok(())
    }

    fn symbol_string(&mut self, s: &str) -> Result<(u32, u32), FormatError> {
        match self.symbol_pool.add(s, true) {
            Some(at) => Ok(at),
            None => Err(self.too_large("its symbol strings pass 4 GiB")),
        }
    }

    /// Writes the table and the trigram index.
    pub fn finish(self) -> Result<(), FormatError> {
        let GrepStoreWriter {
            dir,
            texts,
            entries,
            pool,
            trigrams,
            files,
            symbols,
            symbol_pool,
            ..
        } = self;
        let symbols = sort_symbols(symbols, &symbol_pool.bytes);
        write_symfiles(&dir.join(SYMFILES), &symbols, &entries, &pool.bytes)?;
        let count = symbols.len() as u32;
        write_table(
            &dir.join(SYMBOLS),
            SYMBOL_MAGIC,
            count,
            symbols.into_iter().flatten(),
            &symbol_pool.bytes,
        )?;
        let texts_path = dir.join(TEXTS);
        let texts = texts.into_inner().map_err(|e| FormatError::io(&texts_path, e.into_error()))?;
        texts.sync_all().map_err(|e| FormatError::io(&texts_path, e))?;
        write_table(&dir.join(FILES), MAGIC, files, entries, &pool.bytes)?;
        let tri_path = dir.join(TRIGRAMS);
        let io = |e| FormatError::io(&tri_path, e);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tri_path).map_err(io)?);
        trigrams.finish_into(&mut out).map_err(io)?;
        out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
        Ok(())
    }
}

/// Sorts the symbol table's definitions by folded name, then name, file and line (names
/// compared in the pool, folded a character at a time, nothing allocated).
fn sort_symbols(mut symbols: Vec<[u32; 10]>, pool: &[u8]) -> Vec<[u32; 10]> {
    let name = |e: &[u32; 10]| {
        std::str::from_utf8(&pool[e[1] as usize..(e[1] + e[2]) as usize]).unwrap_or_default()
    };
    let folded = |s: &str| s.chars().flat_map(char::to_lowercase).collect::<Vec<char>>();
    symbols.sort_by(|a, b| {
        let (na, nb) = (name(a), name(b));
        na.chars()
            .flat_map(char::to_lowercase)
            .cmp(nb.chars().flat_map(char::to_lowercase))
            .then_with(|| na.cmp(nb))
            .then_with(|| (a[0], a[8], a[9]).cmp(&(b[0], b[8], b[9])))
    });
    debug_assert!(symbols.windows(2).all(|w| folded(name(&w[0])) <= folded(name(&w[1]))));
    symbols
}

/// Writes the definitions of each file: the files sorted by repository and path (`entries`,
/// the file table's 12 words a file, strings in `pool`), each with its place in the order of
/// the symbol table's entries (`symbols`, as sorted) by file and first line.
fn write_symfiles(
    path: &Path,
    symbols: &[[u32; 10]],
    entries: &[u32],
    pool: &[u8],
) -> Result<(), FormatError> {
    let mut order: Vec<u32> = (0..symbols.len() as u32).collect();
    order.sort_by_key(|&k| (symbols[k as usize][0], symbols[k as usize][8], k));
    let files = entries.len() / 12;
    let mut first = vec![(0u32, 0u32); files];
    for (at, &k) in order.iter().enumerate().rev() {
        let f = symbols[k as usize][0] as usize;
        first[f] = (at as u32, first[f].1 + 1);
    }
    let string = |o: u32, l: u32| &pool[o as usize..(o + l) as usize];
    let key = |f: usize| {
        let e = &entries[f * 12..f * 12 + 12];
        (string(e[5], e[6]), string(e[3], e[4]))
    };
    let mut by_path: Vec<usize> = (0..files).collect();
    by_path.sort_by(|&a, &b| key(a).cmp(&key(b)).then(a.cmp(&b)));
    let words = by_path.iter().flat_map(|&f| [f as u32, first[f].0, first[f].1]);
    let bytes: Vec<u8> = order.iter().flat_map(|k| k.to_le_bytes()).collect();
    write_table(path, SYMFILES_MAGIC, files as u32, words, &bytes)
}

/// Writes a table file: `magic`, the layout, the entry count and the pool's length (`u32`
/// each), the entries' words, then the string pool.
pub(crate) fn write_table(
    path: &Path,
    magic: &[u8; 4],
    count: u32,
    words: impl IntoIterator<Item = u32>,
    pool: &[u8],
) -> Result<(), FormatError> {
    let io = |e| FormatError::io(path, e);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    for w in [u32::from_le_bytes(*magic), LAYOUT, count, pool.len() as u32] {
        out.write_all(&w.to_le_bytes()).map_err(io)?;
    }
    for w in words {
        out.write_all(&w.to_le_bytes()).map_err(io)?;
    }
    out.write_all(pool).map_err(io)?;
    out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)
}

/// A table file's entry count and where its string pool starts, its header and its length
/// checked against each other.
pub(crate) fn table_layout(
    bytes: &[u8],
    magic: &[u8; 4],
    entry: usize,
) -> Result<(u32, usize), String> {
    if bytes.len() < HEADER || &bytes[..4] != magic {
        return Err(format!("no {} header", String::from_utf8_lossy(magic)));
    }
    let layout = u32_at(bytes, 4);
    if layout != LAYOUT {
        return Err(format!("layout {layout}, this reader reads {LAYOUT}"));
    }
    let count = u32_at(bytes, 8);
    let pool_at = HEADER + count as usize * entry;
    let expected = pool_at + u32_at(bytes, 12) as usize;
    if bytes.len() != expected {
        return Err(format!("{} bytes, its header says {expected}", bytes.len()));
    }
    Ok((count, pool_at))
}

/// How a symbol's name is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameMatch {
    /// The whole name, case as written.
    Exact,
    /// The name's start, case as written.
    Prefix,
    /// Anywhere in the name, either case.
    Substring,
}

/// One definition of a grep store's symbol table, borrowed from its map.
#[derive(Debug, Clone, Copy)]
pub struct SymbolRef<'a> {
    /// The file it is in (its number in the store's table: [`GrepStore::file`]).
    pub file: u32,
    /// Its name.
    pub name: &'a str,
    /// Its kind ([`SYMBOL_KINDS`]).
    pub kind: &'static str,
    /// The nearest enclosing impl, trait, class, interface, namespace or module.
    pub container: Option<&'a str>,
    /// Its first line, trimmed.
    pub signature: &'a str,
    /// First line, 1-based.
    pub line_start: u32,
    /// Last line, inclusive.
    pub line_end: u32,
}

/// Writes the grep store of `files` (each with its repository) into `dir`.
pub(crate) fn write_grep_store<'a>(
    dir: &Path,
    files: impl Iterator<Item = (&'a str, &'a FileText)>,
) -> Result<(), FormatError> {
    let mut w = GrepStoreWriter::create(dir)?;
    for (repo, f) in files {
        w.add(repo, f)?;
    }
    w.finish()
}

/// One file of a grep store, borrowed from its maps.
#[derive(Debug, Clone, Copy)]
pub struct GrepFile<'a> {
    /// `owner/name`.
    pub repo: &'a str,
    /// Path in the repository.
    pub path: &'a str,
    /// The commit the file was read at.
    pub commit_sha: &'a str,
    /// Its language, when the chunker or the file's extension names one.
    pub language: Option<&'a str>,
    /// Vendored ([`FileText::vendored`]).
    pub vendored: bool,
    /// Generated ([`FileText::generated`]).
    pub generated: bool,
    /// Why its text is not held, when it is not.
    pub skipped: Option<Skipped>,
    /// Its bytes (empty for a skipped file).
    pub text: &'a [u8],
}

/// An open, memory-mapped grep store.
pub struct GrepStore {
    texts: OwnedBytes,
    table: OwnedBytes,
    trigrams: OwnedBytes,
    /// symbols.bin; empty for a store written without one.
    symbols: OwnedBytes,
    symbol_count: u32,
    /// symfiles.bin: each file's definitions; empty for a store written without one.
    symfiles: OwnedBytes,
    files: u32,
    /// Files per (repository, markdown or not), by what each holds. Counted at open, so
    /// a search without path filters counts what it searched without reading the table.
    counts: HashMap<(String, bool), FileCounts>,
    dir: PathBuf,
}

/// The files of one repository's markdown or other files, counted ([`GrepStore::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// Files with their text.
    pub text: u64,
    /// Binary files.
    pub binary: u64,
    /// Files over the size cap.
    pub too_large: u64,
    /// Files without rows held without text past the build's memory budget.
    pub over_budget: u64,
}

impl FileCounts {
    /// One file: a text file, or why it has no text.
    pub fn of(skipped: Option<Skipped>) -> FileCounts {
        let mut c = FileCounts::default();
        match skipped {
            None => c.text = 1,
            Some(Skipped::Binary) => c.binary = 1,
            Some(Skipped::TooLarge) => c.too_large = 1,
            Some(Skipped::OverBudget) => c.over_budget = 1,
        }
        c
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: FileCounts) {
        self.text += other.text;
        self.binary += other.binary;
        self.too_large += other.too_large;
        self.over_budget += other.over_budget;
    }
}

impl std::fmt::Debug for GrepStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrepStore").field("dir", &self.dir).field("files", &self.files).finish()
    }
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

impl GrepStore {
    /// Opens the store in `dir`, checking its header, every entry's ranges and the trigram
    /// index's header: what opens reads without a bounds failure.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let bad = |what: &str, detail: String| FormatError::Schema {
            what: dir.join(what).display().to_string(),
            detail,
        };
        let (texts, table, trigrams) = (
            crate::hnsw::map(&dir.join(TEXTS))?,
            crate::hnsw::map(&dir.join(FILES))?,
            crate::hnsw::map(&dir.join(TRIGRAMS))?,
        );
        let (files, pool_at) = table_layout(&table, MAGIC, ENTRY).map_err(|d| bad(FILES, d))?;
        let pool = table.len() - pool_at;
        let index = NgramIndex::from_bytes(&trigrams).map_err(|e| bad(TRIGRAMS, e.to_string()))?;
        if index.docs() != files {
            return Err(bad(TRIGRAMS, format!("{} files, the table lists {files}", index.docs())));
        }
        let symbols_path = dir.join(SYMBOLS);
        let symbols = if symbols_path.exists() {
            crate::hnsw::map(&symbols_path)?
        } else {
            OwnedBytes::empty()
        };
        let symbol_count = check_symbols(&symbols, files).map_err(|d| bad(SYMBOLS, d))?;
        let symfiles_path = dir.join(SYMFILES);
        let symfiles = if symfiles_path.exists() {
            crate::hnsw::map(&symfiles_path)?
        } else {
            OwnedBytes::empty()
        };
        check_symfiles(&symfiles, files, symbol_count).map_err(|d| bad(SYMFILES, d))?;
        let mut store = GrepStore {
            texts,
            table,
            trigrams,
            symbols,
            symbol_count,
            symfiles,
            files,
            counts: HashMap::new(),
            dir: dir.to_path_buf(),
        };
        let mut counts: HashMap<(String, bool), FileCounts> = HashMap::new();
        for i in 0..files {
            let e = store.entry(i);
            let text_end = (u64::from(e[1]) << 32 | u64::from(e[0])) + u64::from(e[2]);
            let strings_fit = [(3, 4), (5, 6), (7, 8), (9, 10)]
                .iter()
                .all(|&(o, l)| e[o] as usize + e[l] as usize <= pool);
            if text_end > store.texts.len() as u64 || !strings_fit {
                return Err(bad(FILES, format!("entry {i} points past its file")));
            }
            let f = store.file(i)?;
            let key = (f.repo.to_string(), f.language == Some("markdown"));
            counts.entry(key).or_default().add(FileCounts::of(f.skipped));
        }
        store.counts = counts;
        Ok(store)
    }

    fn entry(&self, i: u32) -> [u32; 12] {
        let at = HEADER + i as usize * ENTRY;
        std::array::from_fn(|k| u32_at(&self.table, at + 4 * k))
    }

    /// How many files it lists, skipped ones included.
    pub fn len(&self) -> u32 {
        self.files
    }

    /// Whether it lists no file.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }

    /// File `i` (`i < len()`).
    pub fn file(&self, i: u32) -> Result<GrepFile<'_>, FormatError> {
        if i >= self.files {
            return Err(FormatError::Schema {
                what: self.dir.display().to_string(),
                detail: format!("file {i} of {}", self.files),
            });
        }
        let e = self.entry(i);
        let pool = &self.table[HEADER + self.files as usize * ENTRY..];
        let string = |o: usize, l: usize| {
            std::str::from_utf8(&pool[e[o] as usize..e[o] as usize + e[l] as usize]).map_err(|_| {
                FormatError::Schema {
                    what: self.dir.join(FILES).display().to_string(),
                    detail: format!("entry {i} holds a string that is not UTF-8"),
                }
            })
        };
        let offset = (u64::from(e[1]) << 32 | u64::from(e[0])) as usize;
        let flags = e[11];
        Ok(GrepFile {
            path: string(3, 4)?,
            repo: string(5, 6)?,
            commit_sha: string(7, 8)?,
            language: Some(string(9, 10)?).filter(|l| !l.is_empty()),
            vendored: flags & VENDORED != 0,
            generated: flags & GENERATED != 0,
            skipped: if flags & BINARY != 0 {
                Some(Skipped::Binary)
            } else if flags & TOO_LARGE != 0 {
                Some(Skipped::TooLarge)
            } else if flags & OVER_BUDGET != 0 {
                Some(Skipped::OverBudget)
            } else {
                None
            },
            text: &self.texts[offset..offset + e[2] as usize],
        })
    }

    /// The files that may match a pattern planned into `query`, in table order.
    pub fn candidates(&self, query: &Query) -> Result<Vec<u32>, FormatError> {
        let damaged = |e: crate::ngram::NgramError| FormatError::Schema {
            what: self.dir.join(TRIGRAMS).display().to_string(),
            detail: e.to_string(),
        };
        NgramIndex::from_bytes(&self.trigrams).and_then(|ix| ix.candidates(query)).map_err(damaged)
    }

    /// Its files counted by repository and by whether they are markdown (`true`) or not.
    pub fn counts(&self) -> impl Iterator<Item = (&str, bool, FileCounts)> + '_ {
        self.counts.iter().map(|((repo, md), c)| (repo.as_str(), *md, *c))
    }

    /// How many definitions its symbol table lists.
    pub fn symbol_count(&self) -> u32 {
        self.symbol_count
    }

    fn symbol_entry(&self, i: u32) -> [u32; 10] {
        let at = HEADER + i as usize * SYMBOL_ENTRY;
        std::array::from_fn(|k| u32_at(&self.symbols, at + 4 * k))
    }

    /// Definition `i` of the symbol table (`i < symbol_count()`; checked at open).
    pub fn symbol(&self, i: u32) -> Result<SymbolRef<'_>, FormatError> {
        let damaged = || FormatError::Schema {
            what: self.dir.join(SYMBOLS).display().to_string(),
            detail: format!("symbol {i} holds a string that is not UTF-8"),
        };
        if i >= self.symbol_count {
            return Err(FormatError::Schema {
                what: self.dir.join(SYMBOLS).display().to_string(),
                detail: format!("symbol {i} of {}", self.symbol_count),
            });
        }
        let e = self.symbol_entry(i);
        let pool = &self.symbols[HEADER + self.symbol_count as usize * SYMBOL_ENTRY..];
        let string = |o: usize| {
            std::str::from_utf8(&pool[e[o] as usize..(e[o] + e[o + 1]) as usize])
                .map_err(|_| damaged())
        };
        Ok(SymbolRef {
            file: e[0],
            name: string(1)?,
            container: Some(string(3)?).filter(|c| !c.is_empty()),
            signature: string(5)?,
            kind: SYMBOL_KINDS.get(e[7] as usize).copied().unwrap_or("other"),
            line_start: e[8],
            line_end: e[9],
        })
    }

    /// The definitions in file `path` of `repo`, by first line (symbol table entry numbers):
    /// a binary search of symfiles.bin. None for a file the store does not hold, or a store
    /// written without it.
    pub fn symbols_of_file(&self, repo: &str, path: &str) -> Result<Vec<u32>, FormatError> {
        if self.symfiles.is_empty() {
            return Ok(Vec::new());
        }
        let entry = |i: u32| -> [u32; 3] {
            let at = HEADER + i as usize * SYMFILES_ENTRY;
            std::array::from_fn(|k| u32_at(&self.symfiles, at + 4 * k))
        };
        let (mut lo, mut hi) = (0, self.files);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let f = self.file(entry(mid)[0])?;
            if (f.repo, f.path) < (repo, path) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == self.files {
            return Ok(Vec::new());
        }
        let [file, first, count] = entry(lo);
        let f = self.file(file)?;
        if (f.repo, f.path) != (repo, path) {
            return Ok(Vec::new());
        }
        let order = HEADER + self.files as usize * SYMFILES_ENTRY;
        Ok((first..first + count).map(|k| u32_at(&self.symfiles, order + 4 * k as usize)).collect())
    }

    /// The definitions whose name matches `name` as `how` says, in table order (by name).
    pub fn find_symbols(&self, name: &str, how: NameMatch) -> Result<Vec<u32>, FormatError> {
        let folded = name.to_lowercase();
        let mut out = Vec::new();
        if how == NameMatch::Substring {
            for i in 0..self.symbol_count {
                if self.symbol(i)?.name.to_lowercase().contains(&folded) {
                    out.push(i);
                }
            }
            return Ok(out);
        }
        // The first entry whose folded name is not below the folded query.
        let (mut lo, mut hi) = (0, self.symbol_count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.symbol(mid)?.name.to_lowercase() < folded {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        for i in lo..self.symbol_count {
            let s = self.symbol(i)?;
            let f = s.name.to_lowercase();
            if !f.starts_with(&folded) {
                break;
            }
            let keep = match how {
                NameMatch::Exact => s.name == name,
                _ => s.name.starts_with(name),
            };
            if keep {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// Bytes of text it holds.
    pub fn text_bytes(&self) -> u64 {
        self.texts.len() as u64
    }

    /// Bytes of its table and trigram index: what exact search adds to the texts.
    pub fn index_bytes(&self) -> u64 {
        (self.table.len() + self.trigrams.len()) as u64
    }

    /// Bytes of its symbol table.
    pub fn symbol_bytes(&self) -> u64 {
        self.symbols.len() as u64
    }
}

/// Checks symfiles.bin's header, that it lists every file once and that its order names
/// definitions of the table (`symbols` of them).
fn check_symfiles(bytes: &[u8], files: u32, symbols: u32) -> Result<(), String> {
    if bytes.is_empty() {
        return Ok(());
    }
    let (count, order_at) = table_layout(bytes, SYMFILES_MAGIC, SYMFILES_ENTRY)?;
    let order = (bytes.len() - order_at) / 4;
    if count != files || order != symbols as usize || !(bytes.len() - order_at).is_multiple_of(4) {
        return Err(format!(
            "{count} files and {order} definitions, the tables hold {files} and {symbols}"
        ));
    }
    for i in 0..count as usize {
        let at = HEADER + i * SYMFILES_ENTRY;
        let (file, first, n) = (u32_at(bytes, at), u32_at(bytes, at + 4), u32_at(bytes, at + 8));
        if file >= files || first as usize + n as usize > order {
            return Err(format!("file entry {i} points past its file"));
        }
    }
    if (0..order).any(|k| u32_at(bytes, order_at + 4 * k) >= symbols) {
        return Err("the order names a definition past the table".into());
    }
    Ok(())
}

/// Checks a symbol table's header and every entry's ranges; its symbol count (0 for none).
fn check_symbols(bytes: &[u8], files: u32) -> Result<u32, String> {
    if bytes.is_empty() {
        return Ok(0);
    }
    let (count, pool_at) = table_layout(bytes, SYMBOL_MAGIC, SYMBOL_ENTRY)?;
    let pool = bytes.len() - pool_at;
    for i in 0..count as usize {
        let at = HEADER + i * SYMBOL_ENTRY;
        let e: [u32; 10] = std::array::from_fn(|k| u32_at(bytes, at + 4 * k));
        let fits = [1, 3, 5].iter().all(|&o| e[o] as usize + e[o + 1] as usize <= pool);
        if e[0] >= files || !fits {
            return Err(format!("symbol {i} points past its file"));
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> FileText {
        FileText::new(path, "abc123", Some("rust"), text.to_string())
    }

    #[test]
    fn a_store_lists_its_files_with_their_marks_and_finds_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = GrepStoreWriter::create(dir.path()).unwrap();
        w.add("o/a", &file("src/main.rs", "fn parse_args() {}\n")).unwrap();
        w.add("o/a", &FileText { vendored: true, ..file("vendor/x.rs", "parse_args();\n") })
            .unwrap();
        w.add("o/b", &FileText { skipped: Some(Skipped::Binary), ..file("logo.png", "") }).unwrap();
        w.add("o/b", &FileText { language: None, ..file("notes.txt", "nothing here\n") }).unwrap();
        w.finish().unwrap();
        let store = GrepStore::open(dir.path()).unwrap();
        assert_eq!(store.len(), 4);
        let f = store.file(1).unwrap();
        assert_eq!(
            (f.repo, f.path, f.vendored, f.text),
            ("o/a", "vendor/x.rs", true, &b"parse_args();\n"[..])
        );
        let png = store.file(2).unwrap();
        assert_eq!(
            (png.skipped, png.text.len(), png.language),
            (Some(Skipped::Binary), 0, Some("rust"))
        );
        assert_eq!(store.file(3).unwrap().language, None);
        let q = crate::ngram::plan("parse_args").unwrap();
        assert_eq!(store.candidates(&q).unwrap(), vec![0, 1]);
        assert!(store.file(4).is_err());
    }

    #[test]
    fn each_files_definitions_are_found_by_repository_and_path_in_line_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = GrepStoreWriter::create(dir.path()).unwrap();
        let sym = |name: &str, line: u32| crate::files::FileSymbol {
            name: name.into(),
            kind: "function".into(),
            container: None,
            line_start: line,
            line_end: line,
            signature: format!("fn {name}() {{}}"),
        };
        let text = "fn zeta() {}\nfn alpha() {}\n";
        w.add(
            "o/b",
            &FileText { symbols: vec![sym("zeta", 1), sym("alpha", 2)], ..file("z.rs", text) },
        )
        .unwrap();
        w.add("o/a", &file("none.rs", "")).unwrap();
        w.add("o/a", &FileText { symbols: vec![sym("beta", 3)], ..file("b.rs", text) }).unwrap();
        w.finish().unwrap();
        let store = GrepStore::open(dir.path()).unwrap();
        let names = |repo: &str, path: &str| -> Vec<(String, u32)> {
            let found = store.symbols_of_file(repo, path).unwrap();
            found
                .into_iter()
                .map(|k| store.symbol(k).unwrap())
                .map(|s| (s.name.to_string(), s.line_start))
                .collect()
        };
        assert_eq!(names("o/b", "z.rs"), [("zeta".to_string(), 1), ("alpha".to_string(), 2)]);
        assert_eq!(names("o/a", "b.rs"), [("beta".to_string(), 3)]);
        assert!(names("o/a", "none.rs").is_empty());
        assert!(names("o/a", "z.rs").is_empty());
        assert!(names("o/c", "a.rs").is_empty());
        drop(store);
        // Damaged: an order naming a definition past the table.
        let path = dir.path().join(SYMFILES);
        let mut bad = std::fs::read(&path).unwrap();
        let n = bad.len();
        bad[n - 4..].copy_from_slice(&9u32.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let err = GrepStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symfiles.bin") && err.contains("past the table"), "{err}");
    }

    #[test]
    fn a_damaged_symbol_table_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = GrepStoreWriter::create(dir.path()).unwrap();
        let sym = crate::files::FileSymbol {
            name: "parse".into(),
            kind: "function".into(),
            container: None,
            line_start: 1,
            line_end: 1,
            signature: "fn parse() {}".into(),
        };
        w.add("o/a", &FileText { symbols: vec![sym], ..file("a.rs", "fn parse() {}\n") }).unwrap();
        w.finish().unwrap();
        let path = dir.path().join(SYMBOLS);
        let good = std::fs::read(&path).unwrap();
        let store = GrepStore::open(dir.path()).unwrap();
        assert_eq!(store.find_symbols("parse", NameMatch::Exact).unwrap(), vec![0]);
        drop(store);
        // A definition in a file the table does not list.
        let mut bad = good.clone();
        bad[HEADER..HEADER + 4].copy_from_slice(&7u32.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let err = GrepStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symbols.bin") && err.contains("past"), "{err}");
        // Cut short, and with another magic.
        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        let err = GrepStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symbols.bin") && err.contains("its header says"), "{err}");
        let mut other = good.clone();
        other[..4].copy_from_slice(b"HXGF");
        std::fs::write(&path, &other).unwrap();
        assert!(GrepStore::open(dir.path()).unwrap_err().to_string().contains("no HXSY header"));
    }

    #[test]
    fn a_damaged_table_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = GrepStoreWriter::create(dir.path()).unwrap();
        w.add("o/a", &file("a.rs", "hello world\n")).unwrap();
        w.finish().unwrap();
        let table = dir.path().join(FILES);
        let mut bytes = std::fs::read(&table).unwrap();
        // The text length of the one entry, far past texts.bin.
        bytes[HEADER + 8..HEADER + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&table, &bytes).unwrap();
        let err = GrepStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("files.bin") && err.contains("past"), "{err}");
        std::fs::write(&table, &bytes[..10]).unwrap();
        assert!(GrepStore::open(dir.path()).unwrap_err().to_string().contains("HXGF"));
    }
}
