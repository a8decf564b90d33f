//! A segment on local disk: the writer the indexer uses and the reader the server uses.
//!
//! ```text
//! <segment dir>/rows.parquet      every row with its embedding (build segments only)
//!               files.parquet     file texts at the indexed commit (when the repo has files)
//!               edges.parquet     cross-references (build segments with edges, crate::edges)
//!               text/             the serving index: BM25, filter and sort columns, stored
//!                                 rows (crate::serving), one tantivy segment
//!               files/            the file store read_span reads (when there are files)
//!               edges/            the edge index `related` reads (when there are edges)
//!               changes.parquet   each commit's added and removed lines (build segments of
//!                                 history, crate::changes)
//!               grep/             every text file and its trigram index, for `grep` (when
//!                                 there are files; crate::grep)
//!               changes/          every commit's changed lines and their trigram index, for
//!                                 `grep` of the history (when there are changes)
//!               vectors.usearch   HNSW over row ordinals
//!               segment.json      counts, versions, model, sha256 of every file above
//! ```
//!
//! From format 5 a build segment holds its rows only (the three Parquet files and
//! segment.json): the serving files are written once, in the merged segment that serves it
//! ([`crate::merge`]). A merged segment holds the serving files only.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use chrono::Utc;
use sha2::{Digest, Sha256};

use crate::changes::{
    CHANGES_DIR, CHANGES_PARQUET, ChangeStore, CommitChanges, write_change_store, write_changes,
};
use crate::edges::{EDGES_DIR, EDGES_PARQUET, Edge, EdgeIndex, write_edges};
use crate::error::FormatError;
use crate::files::{
    FILES_DIR, FILES_PARQUET, FileStore, FileText, read_files, write_file_store, write_files,
};
use crate::grep::{GREP_DIR, GrepStore, write_grep_store};
use crate::manifest::{
    FORMAT_VERSION, FileEntry, ModelIdentity, SegmentMeta, VECTORS_HNSW, VECTORS_USEARCH,
};
use crate::row::{Row, sha256_hex};
use crate::rows::{read_rows, write_rows};
use crate::serving::{Analyzers, ServingIndex, write_serving_index};
use crate::vectors::{
    VECTOR_SCALAR, VectorBase, VectorIndex, vector_file, write_vector_index_from,
};

/// The file name of a segment's metadata.
pub const SEGMENT_JSON: &str = "segment.json";
/// The file name of a segment's rows.
pub const ROWS_PARQUET: &str = "rows.parquet";
/// The directory of a segment's text index.
pub const TEXT_DIR: &str = "text";

/// The id a segment of `repo` with this content and model gets: the repo as a readable slug
/// and a hash of the content (rows.parquet, and files.parquet when present), the model and the
/// format version. Same content, same id.
pub fn segment_id(repo: &str, rows_sha256: &str, model: &ModelIdentity) -> String {
    let slug: String = repo
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    let seed = format!("{FORMAT_VERSION}\n{rows_sha256}\n{}\n{}", model.model_sha256, model.dim);
    format!("{}-{}", slug.trim_matches('-'), &sha256_hex(seed.as_bytes())[..16])
}

/// sha256 and length of a file, streamed.
pub fn hash_file(path: &Path) -> Result<(String, u64), FormatError> {
    sha256_file(path).map_err(|e| FormatError::io(path, e))
}

/// [`hash_file`] with the bare I/O error, for callers whose errors name the file their own way.
pub fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex::encode(h.finalize()), n))
}

/// Every regular file under `dir` except segment.json, as sorted `/`-separated relative paths.
fn list_files(dir: &Path) -> Result<Vec<String>, FormatError> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(|e| FormatError::io(dir, e.into()))?;
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(dir).expect("walkdir stays under its root");
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if rel != SEGMENT_JSON && !rel.ends_with(".lock") {
                out.push(rel);
            }
        }
    }
    Ok(out)
}

/// A segment whose rows.parquet is written and whose id is known, before its indexes are
/// built: a build whose rows did not change finds the id already in the store and stops here.
#[derive(Debug)]
pub struct SegmentDraft {
    dir: PathBuf,
    repo: String,
    id: String,
    model: ModelIdentity,
    input_sha256: Option<String>,
}

/// What a build segment holds beside its rows: its files at HEAD, its edges and its commits'
/// changed lines.
#[derive(Debug, Default)]
pub struct SegmentExtras<'a> {
    /// Files at the indexed commit.
    pub files: &'a mut [FileText],
    /// Cross-references.
    pub edges: &'a mut [Edge],
    /// Each commit's added and removed lines.
    pub changes: &'a mut [CommitChanges],
}

/// Sorts `rows` by id (so the same rows give the same bytes and the same segment id) and
/// writes rows.parquet into the empty directory `dir`, with files.parquet, edges.parquet and
/// changes.parquet when there are files, edges or changes.
pub fn start_segment(
    dir: &Path,
    repo: &str,
    rows: &mut [Row],
    extras: SegmentExtras<'_>,
    model: &ModelIdentity,
) -> Result<SegmentDraft, FormatError> {
    let SegmentExtras { files, edges, changes } = extras;
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(w) = rows.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(FormatError::Schema {
            what: format!("segment of {repo}"),
            detail: format!("row id {} appears twice", w[0].id),
        });
    }
    let rows_path = dir.join(ROWS_PARQUET);
    write_rows(&rows_path, rows, model.dim)?;
    let (mut content_sha, _) = hash_file(&rows_path)?;
    if !files.is_empty() {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let files_path = dir.join(FILES_PARQUET);
        write_files(&files_path, files)?;
        content_sha =
            sha256_hex(format!("{content_sha}\n{}", hash_file(&files_path)?.0).as_bytes());
    }
    if !edges.is_empty() {
        // New tags change the edges (shipped_in) and not the rows: the id must follow them.
        let edges_path = dir.join(EDGES_PARQUET);
        write_edges(&edges_path, edges)?;
        content_sha =
            sha256_hex(format!("{content_sha}\nedges {}", hash_file(&edges_path)?.0).as_bytes());
    }
    if !changes.is_empty() {
        changes.sort_by(|a, b| a.commit_sha.cmp(&b.commit_sha));
        let changes_path = dir.join(CHANGES_PARQUET);
        write_changes(&changes_path, changes)?;
        content_sha = sha256_hex(
            format!("{content_sha}\nchanges {}", hash_file(&changes_path)?.0).as_bytes(),
        );
    }
    Ok(SegmentDraft {
        dir: dir.to_path_buf(),
        repo: repo.to_string(),
        id: segment_id(repo, &content_sha, model),
        model: model.clone(),
        input_sha256: None,
    })
}

impl SegmentDraft {
    /// The id the finished segment will have.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Records what the segment was built from before its vectors were made
    /// ([`SegmentMeta::input_sha256`], see [`input_sha256`]).
    pub fn with_input_sha256(mut self, input: String) -> Self {
        self.input_sha256 = Some(input);
        self
    }

    /// Hashes the files [`start_segment`] wrote and writes segment.json over `rows` (as
    /// sorted by [`start_segment`]). From format 5 a build segment has no serving files: the
    /// text, file, edge and vector indexes are built once, in the merged segment that serves it
    /// ([`crate::plan_merges`], a group of one where it is alone), not a second time here.
    pub fn finish(self, rows: &[Row]) -> Result<SegmentMeta, FormatError> {
        let mut meta = finish_meta(
            &self.dir,
            self.id,
            self.repo,
            &rows.iter().collect::<Vec<_>>(),
            self.model,
            Vec::new(),
            Vec::new(),
        )?;
        if self.input_sha256.is_some() {
            meta.input_sha256 = self.input_sha256;
            write_meta(&self.dir, &meta)?;
        }
        Ok(meta)
    }
}

/// What the indexes of a segment are built from.
pub(crate) struct IndexInputs<'a> {
    pub(crate) rows: Vec<&'a Row>,
    pub(crate) files: Vec<(&'a str, &'a FileText)>,
    pub(crate) changes: Vec<(&'a str, &'a CommitChanges)>,
    pub(crate) analyzers: Analyzers,
    /// A vector index that already holds the first rows (a merge's first member).
    pub(crate) vector_base: Option<VectorBase<'a>>,
}

/// Writes `text/`, `files/` (when there are files) and `vectors.usearch` into `dir`.
pub(crate) fn write_indexes(
    dir: &Path,
    input: &IndexInputs<'_>,
    dim: usize,
) -> Result<(), FormatError> {
    // The text and vector indexes are independent: build them side by side (each stays
    // deterministic; together they take the longer one's time, not the sum).
    let vectors: Vec<&[i8]> = input.rows.iter().map(|r| r.embedding.as_slice()).collect();
    let second: Vec<(u32, &[i8])> = (input.rows.iter().enumerate())
        .filter(|(_, r)| !r.title_embedding.is_empty())
        .map(|(i, r)| (i as u32, r.title_embedding.as_slice()))
        .collect();
    let (text, vecs) = std::thread::scope(|s| {
        let text = s.spawn(|| {
            write_serving_index(&dir.join(TEXT_DIR), input.rows.iter().copied(), &input.analyzers)?;
            if !input.files.is_empty() {
                write_file_store(&dir.join(FILES_DIR), input.files.iter().copied())?;
                write_grep_store(&dir.join(GREP_DIR), input.files.iter().copied())?;
            }
            write_change_store(&dir.join(CHANGES_DIR), input.changes.iter().copied())?;
            Ok::<(), FormatError>(())
        });
        let vecs = write_vector_index_from(
            &dir.join(VECTORS_HNSW),
            dim,
            &vectors,
            &second,
            input.vector_base,
        );
        (text.join(), vecs)
    });
    text.map_err(|_| FormatError::Schema {
        what: dir.join(TEXT_DIR).display().to_string(),
        detail: "the text index writer panicked".into(),
    })??;
    vecs
}

/// Hashes every file of `dir` and writes its segment.json.
pub(crate) fn finish_meta(
    dir: &Path,
    id: String,
    repo: String,
    rows: &[&Row],
    model: ModelIdentity,
    members: Vec<String>,
    repos: Vec<String>,
) -> Result<SegmentMeta, FormatError> {
    let mut stats = RowStats::default();
    for r in rows {
        stats.add(r);
        if !r.title_embedding.is_empty() {
            stats.second_vectors += 1;
        }
    }
    finish_meta_of(dir, id, repo, stats, model, members, repos)
}

/// What segment.json says of a segment's rows, gathered a row at a time.
#[derive(Debug, Default)]
pub(crate) struct RowStats {
    rows: u64,
    rows_per_type: BTreeMap<String, u64>,
    /// Rows with a second (title) vector: counted by whoever sees the vectors.
    pub(crate) second_vectors: u64,
    oldest_updated_at: Option<chrono::DateTime<Utc>>,
    newest_updated_at: Option<chrono::DateTime<Utc>>,
}

impl RowStats {
    /// Counts one row (all but its vectors).
    pub(crate) fn add(&mut self, r: &Row) {
        self.rows += 1;
        *self.rows_per_type.entry(r.kind().as_str().to_string()).or_default() += 1;
        if let Some(t) = r.updated_at {
            self.oldest_updated_at = Some(self.oldest_updated_at.map_or(t, |o| o.min(t)));
            self.newest_updated_at = Some(self.newest_updated_at.map_or(t, |n| n.max(t)));
        }
    }
}

/// [`finish_meta`] from counts gathered as the rows went by.
pub(crate) fn finish_meta_of(
    dir: &Path,
    id: String,
    repo: String,
    stats: RowStats,
    model: ModelIdentity,
    members: Vec<String>,
    repos: Vec<String>,
) -> Result<SegmentMeta, FormatError> {
    let mut files = Vec::new();
    for rel in list_files(dir)? {
        let (sha256, bytes) = hash_file(&dir.join(&rel))?;
        files.push(FileEntry { path: rel, bytes, sha256 });
    }
    let meta = SegmentMeta {
        format_version: FORMAT_VERSION,
        id,
        repo,
        created_at: Utc::now(),
        rows: stats.rows,
        rows_per_type: stats.rows_per_type,
        model,
        vector_scalar: VECTOR_SCALAR.to_string(),
        second_vectors: stats.second_vectors,
        oldest_updated_at: stats.oldest_updated_at,
        newest_updated_at: stats.newest_updated_at,
        files,
        members,
        repos,
        input_sha256: None,
    };
    write_meta(dir, &meta)?;
    Ok(meta)
}

pub(crate) fn write_meta(dir: &Path, meta: &SegmentMeta) -> Result<(), FormatError> {
    let json = dir.join(SEGMENT_JSON);
    std::fs::write(&json, meta.to_bytes()).map_err(|e| FormatError::io(&json, e))
}

/// What a build segment is built from before any vector is made, hashed: its rows (as
/// given: sorted by id, without their vectors), its files and edges, and the model that will
/// embed them. The same input always gives the same segment, so a rebuild that finds a
/// segment with this hash in the current snapshot reuses it without embedding or writing.
pub fn input_sha256(
    rows: &[Row],
    files: &[FileText],
    edges: &[Edge],
    changes: &[CommitChanges],
    model: &ModelIdentity,
) -> String {
    let mut h = Sha256::new();
    h.update(format!("{FORMAT_VERSION}\n{}\n{}\n", model.model_sha256, model.dim).as_bytes());
    let mut put = |what: &str, json: Result<Vec<u8>, serde_json::Error>| {
        h.update(what.as_bytes());
        // These types always serialise; an error would only change the hash.
        h.update(json.unwrap_or_default());
        h.update(b"\n");
    };
    for r in rows {
        if r.embedding.is_empty() && r.title_embedding.is_empty() {
            put("row", serde_json::to_vec(r));
        } else {
            let bare = Row { embedding: Vec::new(), title_embedding: Vec::new(), ..r.clone() };
            put("row", serde_json::to_vec(&bare));
        }
    }
    for f in files {
        let file = (
            &f.path,
            &f.commit_sha,
            &f.language,
            &f.content,
            f.vendored,
            f.generated,
            f.skipped,
            &f.symbols,
        );
        put("file", serde_json::to_vec(&file));
    }
    for e in edges {
        put("edge", serde_json::to_vec(e));
    }
    for c in changes {
        put("changes", serde_json::to_vec(c));
    }
    hex::encode(h.finalize())
}

/// Writes a whole build segment of `repo` (its rows; see [`SegmentDraft::finish`]) into the
/// empty directory `dir`.
pub fn write_segment(
    dir: &Path,
    repo: &str,
    rows: &mut [Row],
    extras: SegmentExtras<'_>,
    model: &ModelIdentity,
) -> Result<SegmentMeta, FormatError> {
    start_segment(dir, repo, rows, extras, model)?.finish(rows)
}

/// Reads segment.json from a segment directory.
pub fn read_segment_meta(dir: &Path) -> Result<SegmentMeta, FormatError> {
    let path = dir.join(SEGMENT_JSON);
    let bytes = std::fs::read(&path).map_err(|e| FormatError::io(&path, e))?;
    SegmentMeta::parse(&path.display().to_string(), &bytes)
}

/// An open, read-only segment (a build segment or a merged one) in the format-3 serving
/// layout: every file memory-mapped, nothing decoded up front.
#[derive(Debug)]
pub struct Segment {
    /// Its `segment.json`.
    pub meta: SegmentMeta,
    /// BM25, filter and sort columns, stored rows.
    pub text: ServingIndex,
    /// The HNSW vector index (usearch view).
    pub vectors: VectorIndex,
    /// File texts for `read_span`; `None` when the segment indexes no files.
    pub files: Option<FileStore>,
    /// Cross-references for `related`; `None` when the segment has no edges.
    pub edges: Option<EdgeIndex>,
    /// Every text file and its trigram index for `grep`; `None` when the segment indexes no
    /// files or is of a format before exact search (8 and older).
    pub grep: Option<GrepStore>,
    /// Every commit's changed lines and their trigram index for `grep` of the history; `None`
    /// when the segment has no history or is of a format before history grep (9 and older).
    pub changes: Option<ChangeStore>,
    /// The local directory the segment was opened from.
    pub dir: PathBuf,
}

impl Segment {
    /// Opens a format-3 segment directory whose files were verified as they entered the cache
    /// (`Store::fetch_segment`: every file against the sha256 and size segment.json lists, and
    /// segment.json against the manifest); a format-1 or -2 segment opens through
    /// [`upgrade_segment`].
    pub fn open(dir: &Path) -> Result<Segment, FormatError> {
        let meta = read_segment_meta(dir)?;
        if !meta.has_serving_files() {
            return Err(FormatError::Schema {
                what: dir.display().to_string(),
                detail: format!(
                    "build segment {} holds only its rows (format {}): it is served through the \
                     merged segment that covers it, and the manifest names none",
                    meta.id, meta.format_version
                ),
            });
        }
        let text = ServingIndex::open(&dir.join(TEXT_DIR))?;
        if text.num_docs() != meta.rows {
            return Err(FormatError::Schema {
                what: dir.display().to_string(),
                detail: format!(
                    "text/ has {} rows, segment.json says {}",
                    text.num_docs(),
                    meta.rows
                ),
            });
        }
        let vectors = VectorIndex::open(
            &dir.join(vector_file(&meta.vector_scalar)),
            meta.model.dim,
            meta.rows,
            meta.second_vectors,
            &meta.vector_scalar,
        )?;
        let files_dir = dir.join(FILES_DIR);
        let files = if files_dir.is_dir() { Some(FileStore::open(&files_dir)?) } else { None };
        let edges_dir = dir.join(EDGES_DIR);
        let edges = if edges_dir.is_dir() { Some(EdgeIndex::open(&edges_dir)?) } else { None };
        let grep_dir = dir.join(GREP_DIR);
        let grep = if grep_dir.is_dir() { Some(GrepStore::open(&grep_dir)?) } else { None };
        let changes_dir = dir.join(CHANGES_DIR);
        let changes =
            if changes_dir.is_dir() { Some(ChangeStore::open(&changes_dir)?) } else { None };
        Ok(Segment { meta, text, vectors, files, edges, grep, changes, dir: dir.to_path_buf() })
    }
}

/// Builds the format-3 serving layout of a verified format-1 or -2 segment in `src` into the
/// empty directory `dst`: its rows and files re-indexed with the analyzers it was built with (so
/// every score stays what it was), its vector index linked or copied as is, its segment.json
/// copied. `dst` then opens with [`Segment::open`].
pub fn upgrade_segment(src: &Path, dst: &Path) -> Result<(), FormatError> {
    let meta = read_segment_meta(src)?;
    std::fs::create_dir_all(dst).map_err(|e| FormatError::io(dst, e))?;
    let rows = read_rows(&src.join(ROWS_PARQUET), false)?;
    let files = read_files(&src.join(FILES_PARQUET))?;
    let analyzers = Analyzers::of_index(&src.join(TEXT_DIR))?;
    write_serving_index(&dst.join(TEXT_DIR), rows.iter(), &analyzers)?;
    if !files.is_empty() {
        write_file_store(&dst.join(FILES_DIR), files.iter().map(|f| (meta.repo.as_str(), f)))?;
        write_grep_store(&dst.join(GREP_DIR), files.iter().map(|f| (meta.repo.as_str(), f)))?;
    }
    let (from, to) = (src.join(VECTORS_USEARCH), dst.join(VECTORS_USEARCH));
    if std::fs::hard_link(&from, &to).is_err() {
        std::fs::copy(&from, &to).map_err(|e| FormatError::io(&to, e))?;
    }
    let json = dst.join(SEGMENT_JSON);
    std::fs::copy(src.join(SEGMENT_JSON), &json).map_err(|e| FormatError::io(&json, e))?;
    Ok(())
}
