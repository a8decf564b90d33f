//! files.parquet: the full text of every text file of a repository at the commit it was
//! indexed at, so `read_span` can return exact lines and `grep` search every one; the files
//! exact search skips (binary, over its size cap) are listed with no text. Optional: a segment
//! without it simply has no spans to read.

use std::path::Path;
use std::sync::Arc;

use crate::error::FormatError;
use crate::rows::{read_batches, utf8_column, zstd_writer};
use arrow::array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The file name of a segment's file texts.
pub const FILES_PARQUET: &str = "files.parquet";

/// One file's text at one commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileText {
    /// Repository path.
    pub path: String,
    /// The commit the text was read at.
    pub commit_sha: String,
    /// Language as the chunker names it, when known.
    pub language: Option<String>,
    /// The whole file, UTF-8 (empty when `skipped` says why it is not held).
    pub content: String,
    /// Vendored: a copy of someone else's code (under `vendor/`, `third_party/`,
    /// `node_modules/`). Exact search includes it and marks it.
    #[serde(default)]
    pub vendored: bool,
    /// Generated: minified, a lock file, or a file whose head says a tool wrote it.
    #[serde(default)]
    pub generated: bool,
    /// Why the file's text is not held, for a file that is listed only to be counted.
    #[serde(default)]
    pub skipped: Option<Skipped>,
    /// The definitions it holds, in the order they start (files with a grammar).
    #[serde(default)]
    pub symbols: Vec<FileSymbol>,
}

/// A definition in a file: what `symbols` lists.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileSymbol {
    /// Its name as written.
    pub name: String,
    /// function, method, struct, class, enum, union, trait, interface, type, const, module,
    /// macro (or other).
    pub kind: String,
    /// The nearest enclosing impl (its type), trait, class, interface, namespace or module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// First line, 1-based.
    pub line_start: u32,
    /// Last line, inclusive.
    pub line_end: u32,
    /// Its first line, trimmed.
    pub signature: String,
}

impl FileText {
    /// A text file as read, neither vendored nor generated.
    pub fn new(path: &str, commit_sha: &str, language: Option<&str>, content: String) -> Self {
        FileText {
            path: path.to_string(),
            commit_sha: commit_sha.to_string(),
            language: language.map(str::to_string),
            content,
            vendored: false,
            generated: false,
            skipped: None,
            symbols: Vec::new(),
        }
    }
}

/// Why a file of the tree has no text in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// A NUL byte in it ([`is_binary`]).
    Binary,
    /// Larger than [`MAX_TEXT_FILE_BYTES`].
    TooLarge,
    /// A file no row of which is kept (vendored, generated, of no known language) past what
    /// the build's memory budget lets it hold of such files: a segment's share per repository.
    OverBudget,
}

impl Skipped {
    /// The name files.parquet and the tools use.
    pub fn as_str(self) -> &'static str {
        match self {
            Skipped::Binary => "binary",
            Skipped::TooLarge => "too_large",
            Skipped::OverBudget => "over_budget",
        }
    }

    fn parse(s: &str) -> Option<Skipped> {
        [Skipped::Binary, Skipped::TooLarge, Skipped::OverBudget]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// The largest file whose text a snapshot holds: 2 MiB, zoekt's cap. Larger files are listed
/// as [`Skipped::TooLarge`].
pub const MAX_TEXT_FILE_BYTES: u64 = 2 << 20;

/// Whether `bytes` are a binary file's: a NUL byte anywhere. ripgrep stops at the first NUL
/// and reports no line of the buffer that holds it, so a file with one has no lines to
/// search; git's own test reads only the first 8,000 bytes.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("commit_sha", DataType::Utf8, false),
        Field::new("language", DataType::Utf8, true),
        Field::new("content", DataType::Utf8, false),
        Field::new("vendored", DataType::Boolean, true),
        Field::new("generated", DataType::Boolean, true),
        Field::new("skipped", DataType::Utf8, true),
        Field::new("symbols", DataType::Utf8, true),
    ]))
}

/// Writes `files` (sorted by path by the caller) to `path`.
pub fn write_files(path: &Path, files: &[FileText]) -> Result<(), FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let mut w = zstd_writer(path, schema(), None)?;
    for chunk in files.chunks(1024) {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(chunk.iter().map(|f| Some(f.path.as_str())).collect::<StringArray>()),
                Arc::new(
                    chunk.iter().map(|f| Some(f.commit_sha.as_str())).collect::<StringArray>(),
                ),
                Arc::new(chunk.iter().map(|f| f.language.as_deref()).collect::<StringArray>()),
                Arc::new(chunk.iter().map(|f| Some(f.content.as_str())).collect::<StringArray>()),
                Arc::new(
                    chunk.iter().map(|f| f.vendored.then_some(true)).collect::<BooleanArray>(),
                ),
                Arc::new(
                    chunk.iter().map(|f| f.generated.then_some(true)).collect::<BooleanArray>(),
                ),
                Arc::new(
                    chunk.iter().map(|f| f.skipped.map(Skipped::as_str)).collect::<StringArray>(),
                ),
                Arc::new(
                    chunk
                        .iter()
                        .map(|f| {
                            (!f.symbols.is_empty()).then(|| {
                                serde_json::to_string(&f.symbols).expect("symbols serialize")
                            })
                        })
                        .collect::<StringArray>(),
                ),
            ],
        )?;
        w.write(&batch).map_err(pq)?;
    }
    w.close().map_err(pq)?;
    Ok(())
}

/// Reads files.parquet; an absent file is no files.
pub fn read_files(path: &Path) -> Result<Vec<FileText>, FormatError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for batch in read_batches(path)? {
        let batch = batch?;
        let col = |name: &str| utf8_column(&batch, name, path);
        let (p, c, l, t) = (col("path")?, col("commit_sha")?, col("language")?, col("content")?);
        // Written before files carried their marks: absent columns, nothing marked.
        let flag = |name: &str| {
            batch.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
        };
        let (vendored, generated) = (flag("vendored"), flag("generated"));
        let skipped =
            batch.column_by_name("skipped").and_then(|c| c.as_any().downcast_ref::<StringArray>());
        let set =
            |a: Option<&BooleanArray>, i: usize| a.is_some_and(|a| a.is_valid(i) && a.value(i));
        let symbols =
            batch.column_by_name("symbols").and_then(|c| c.as_any().downcast_ref::<StringArray>());
        for i in 0..batch.num_rows() {
            let skipped = match skipped.filter(|s| s.is_valid(i)) {
                None => None,
                Some(s) => Some(Skipped::parse(s.value(i)).ok_or_else(|| FormatError::Schema {
                    what: path.display().to_string(),
                    detail: format!(
                        "skipped is {:?}, not binary, too_large or over_budget",
                        s.value(i)
                    ),
                })?),
            };
            let symbols = match symbols.filter(|s| s.is_valid(i)) {
                None => Vec::new(),
                Some(s) => serde_json::from_str(s.value(i)).map_err(|e| FormatError::Schema {
                    what: path.display().to_string(),
                    detail: format!("symbols of {} do not parse: {e}", p.value(i)),
                })?,
            };
            out.push(FileText {
                path: p.value(i).to_string(),
                commit_sha: c.value(i).to_string(),
                language: (!l.is_null(i)).then(|| l.value(i).to_string()),
                content: t.value(i).to_string(),
                vendored: set(vendored, i),
                generated: set(generated, i),
                skipped,
                symbols,
            });
        }
    }
    Ok(out)
}

/// The directory of a segment's file store: the texts `read_span` reads.
pub const FILES_DIR: &str = "files";

fn store_schema() -> (tantivy::schema::Schema, [tantivy::schema::Field; 4]) {
    use tantivy::schema::{STORED, STRING};
    let mut b = tantivy::schema::Schema::builder();
    let f = [
        b.add_text_field("key", STRING),
        b.add_text_field("commit_sha", STORED),
        b.add_text_field("language", STORED),
        b.add_text_field("content", STORED),
    ];
    (b.build(), f)
}

/// The lookup key of a file: repository and path.
fn file_key(repo: &str, path: &str) -> String {
    format!("{repo}\n{path}")
}

/// Writes the file store of `files` (each with its repository) into `dir`: a tantivy index
/// whose only indexed field is the (repo, path) key, the texts in its compressed doc store.
pub(crate) fn write_file_store<'a>(
    dir: &Path,
    files: impl Iterator<Item = (&'a str, &'a FileText)>,
) -> Result<(), FormatError> {
    let mut w = FileStoreWriter::create(dir)?;
    for (repo, f) in files {
        w.add(repo, f)?;
    }
    w.finish()
}

/// The file store being written, a file at a time: a merge streams its members' files through
/// it instead of holding them.
pub(crate) struct FileStoreWriter {
    index: tantivy::Index,
    writer: tantivy::IndexWriter<tantivy::TantivyDocument>,
    fields: [tantivy::schema::Field; 4],
    dir: std::path::PathBuf,
}

impl FileStoreWriter {
    /// A new, empty file store in `dir`.
    pub(crate) fn create(dir: &Path) -> Result<Self, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        let (schema, fields) = store_schema();
        let index = tantivy::Index::create_in_dir(dir, schema).map_err(tv)?;
        let writer = index
            .writer_with_num_threads::<tantivy::TantivyDocument>(1, 32 * 1024 * 1024)
            .map_err(tv)?;
        Ok(FileStoreWriter { index, writer, fields, dir: dir.to_path_buf() })
    }

    /// Adds the text of one file of `repo`; a file listed without its text is left out.
    pub(crate) fn add(&mut self, repo: &str, f: &FileText) -> Result<(), FormatError> {
        if f.skipped.is_some() {
            return Ok(());
        }
        let [key, sha, lang, content] = self.fields;
        let mut doc = tantivy::TantivyDocument::default();
        doc.add_text(key, file_key(repo, &f.path));
        doc.add_text(sha, &f.commit_sha);
        if let Some(l) = &f.language {
            doc.add_text(lang, l);
        }
        doc.add_text(content, &f.content);
        self.writer
            .add_document(doc)
            .map_err(|source| FormatError::Tantivy { path: self.dir.clone(), source })?;
        Ok(())
    }

    /// Commits the store as one tantivy segment.
    pub(crate) fn finish(self) -> Result<(), FormatError> {
        crate::serving::commit_as_one_segment(&self.index, self.writer, &self.dir)?;
        Ok(())
    }
}

/// A read-only, memory-mapped file store.
pub struct FileStore {
    searcher: tantivy::Searcher,
    fields: [tantivy::schema::Field; 4],
    path: std::path::PathBuf,
}

impl std::fmt::Debug for FileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore").field("path", &self.path).finish()
    }
}

impl FileStore {
    /// Opens the file store in `dir`. The caller has verified its files.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let index = tantivy::Index::open_in_dir(dir).map_err(tv)?;
        let schema = index.schema();
        let field = |n: &str| schema.get_field(n).map_err(tv);
        let fields = [field("key")?, field("commit_sha")?, field("language")?, field("content")?];
        let (_reader, searcher) = crate::serving::open_searcher(&index, dir, 2)?;
        Ok(FileStore { searcher, fields, path: dir.to_path_buf() })
    }

    /// How many files the store holds.
    pub fn len(&self) -> u64 {
        self.searcher.num_docs()
    }

    /// Whether the store holds no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text of `path` in `repo`, if the store holds it.
    pub fn get(&self, repo: &str, path: &str) -> Result<Option<FileText>, FormatError> {
        use tantivy::schema::Value;
        let tv = |source| FormatError::Tantivy { path: self.path.clone(), source };
        let [key, sha, lang, content] = self.fields;
        let term = tantivy::Term::from_field_text(key, &file_key(repo, path));
        for (ord, seg) in self.searcher.segment_readers().iter().enumerate() {
            let Some(doc) = crate::serving::doc_of_term(seg, &term, &self.path)? else {
                continue;
            };
            let d: tantivy::TantivyDocument =
                self.searcher.doc(tantivy::DocAddress::new(ord as u32, doc)).map_err(tv)?;
            let text = |f| d.get_first(f).and_then(|v| v.as_str()).map(str::to_string);
            return Ok(Some(FileText {
                language: text(lang),
                ..FileText::new(
                    path,
                    &text(sha).unwrap_or_default(),
                    None,
                    text(content).unwrap_or_default(),
                )
            }));
        }
        Ok(None)
    }
}
