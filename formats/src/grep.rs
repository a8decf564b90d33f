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

const MAGIC: &[u8; 4] = b"HXGF";
const LAYOUT: u32 = 1;
const HEADER: usize = 16;
const ENTRY: usize = 48;

const VENDORED: u32 = 1;
const GENERATED: u32 = 2;
const BINARY: u32 = 4;
const TOO_LARGE: u32 = 8;

/// Writes a grep store a file at a time: the texts stream to disk, the trigram index spills
/// past its bound ([`NgramWriter`]), and what is held is the table (48 bytes a file) and the
/// string pool.
pub struct GrepStoreWriter {
    dir: PathBuf,
    texts: std::io::BufWriter<std::fs::File>,
    written: u64,
    entries: Vec<u8>,
    pool: Vec<u8>,
    interned: HashMap<String, (u32, u32)>,
    trigrams: NgramWriter,
    files: u32,
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
            pool: Vec::new(),
            interned: HashMap::new(),
            trigrams: NgramWriter::new(),
            files: 0,
        })
    }

    fn string(&mut self, s: &str, intern: bool) -> Result<(u32, u32), FormatError> {
        if intern && let Some(&at) = self.interned.get(s) {
            return Ok(at);
        }
        let at = (self.pool.len(), s.len());
        if at.0 + at.1 > u32::MAX as usize {
            return Err(self.too_large("its path and name strings pass 4 GiB"));
        }
        self.pool.extend_from_slice(s.as_bytes());
        let at = (at.0 as u32, at.1 as u32);
        if intern {
            self.interned.insert(s.to_string(), at);
        }
        Ok(at)
    }

    fn too_large(&self, what: &str) -> FormatError {
        FormatError::Schema { what: self.dir.display().to_string(), detail: what.to_string() }
    }

    /// Adds one file of `repo`.
    pub fn add(&mut self, repo: &str, f: &FileText) -> Result<(), FormatError> {
        let io = |e| FormatError::io(self.dir.join(TEXTS), e);
        let text: &[u8] = if f.skipped.is_some() { b"" } else { f.content.as_bytes() };
        let len = u32::try_from(text.len())
            .map_err(|_| self.too_large(&format!("{} is over 4 GiB", f.path)))?;
        let offset = self.written;
        self.texts.write_all(text).map_err(io)?;
        self.written += text.len() as u64;
        self.trigrams.add(text).map_err(|e| FormatError::io(self.dir.join(TRIGRAMS), e))?;
        let path = self.string(&f.path, false)?;
        let repo = self.string(repo, true)?;
        let sha = self.string(&f.commit_sha, true)?;
        let lang = match &f.language {
            Some(l) => self.string(l, true)?,
            None => (0, 0),
        };
        let skipped = match f.skipped {
            None => 0,
            Some(Skipped::Binary) => BINARY,
            Some(Skipped::TooLarge) => TOO_LARGE,
        };
        let flags =
            (u32::from(f.vendored) * VENDORED) | (u32::from(f.generated) * GENERATED) | skipped;
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
        for w in words {
            self.entries.extend_from_slice(&w.to_le_bytes());
        }
        self.files += 1;
        Ok(())
    }

    /// How many files were added.
    pub fn files(&self) -> u32 {
        self.files
    }

    /// Writes the table and the trigram index.
    pub fn finish(self) -> Result<(), FormatError> {
        let GrepStoreWriter { dir, texts, entries, pool, trigrams, files, .. } = self;
        let texts_path = dir.join(TEXTS);
        let texts = texts.into_inner().map_err(|e| FormatError::io(&texts_path, e.into_error()))?;
        texts.sync_all().map_err(|e| FormatError::io(&texts_path, e))?;
        let table_path = dir.join(FILES);
        let mut table = Vec::with_capacity(HEADER + entries.len() + pool.len());
        table.extend_from_slice(MAGIC);
        table.extend_from_slice(&LAYOUT.to_le_bytes());
        table.extend_from_slice(&files.to_le_bytes());
        table.extend_from_slice(&(pool.len() as u32).to_le_bytes());
        table.extend_from_slice(&entries);
        table.extend_from_slice(&pool);
        std::fs::write(&table_path, &table).map_err(|e| FormatError::io(&table_path, e))?;
        let tri_path = dir.join(TRIGRAMS);
        let io = |e| FormatError::io(&tri_path, e);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tri_path).map_err(io)?);
        trigrams.finish_into(&mut out).map_err(io)?;
        out.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
        Ok(())
    }
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
    files: u32,
    dir: PathBuf,
}

impl std::fmt::Debug for GrepStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrepStore").field("dir", &self.dir).field("files", &self.files).finish()
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
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
        if table.len() < HEADER || &table[..4] != MAGIC {
            return Err(bad(FILES, "no HXGF header".into()));
        }
        let layout = u32_at(&table, 4);
        if layout != LAYOUT {
            return Err(bad(FILES, format!("layout {layout}, this reader reads {LAYOUT}")));
        }
        let files = u32_at(&table, 8);
        let pool = u32_at(&table, 12) as usize;
        let pool_at = HEADER + files as usize * ENTRY;
        if table.len() != pool_at + pool {
            return Err(bad(
                FILES,
                format!("{} bytes, its header says {}", table.len(), pool_at + pool),
            ));
        }
        let index = NgramIndex::from_bytes(&trigrams).map_err(|e| bad(TRIGRAMS, e.to_string()))?;
        if index.docs() != files {
            return Err(bad(TRIGRAMS, format!("{} files, the table lists {files}", index.docs())));
        }
        let store = GrepStore { texts, table, trigrams, files, dir: dir.to_path_buf() };
        for i in 0..files {
            let e = store.entry(i);
            let text_end = (u64::from(e[1]) << 32 | u64::from(e[0])) + u64::from(e[2]);
            let strings_fit = [(3, 4), (5, 6), (7, 8), (9, 10)]
                .iter()
                .all(|&(o, l)| e[o] as usize + e[l] as usize <= pool);
            if text_end > store.texts.len() as u64 || !strings_fit {
                return Err(bad(FILES, format!("entry {i} points past its file")));
            }
        }
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

    /// Bytes of text it holds.
    pub fn text_bytes(&self) -> u64 {
        self.texts.len() as u64
    }

    /// Bytes of its table and trigram index: what exact search adds to the texts.
    pub fn index_bytes(&self) -> u64 {
        (self.table.len() + self.trigrams.len()) as u64
    }
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
