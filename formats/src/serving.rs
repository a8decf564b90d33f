//! The serving index of a segment (`text/`, format 3): one tantivy index that answers
//! everything a request needs of a segment's rows without decoding them all.
//!
//! - BM25 fields `title`, `body`, `path`, `symbol` (the analyzers of [`crate::text`]), with
//!   term frequencies; up to format 5 with positions as well, which nothing reads;
//! - filter fields, indexed as raw terms: `id`, `type`, `repo`, `entity`, `state`, `labels`,
//!   `milestone`, `assignees`, `author` (lowercased; a commit author also by name and email),
//!   `paths` (the row's path and every file it changed), and `updated_at` / `created_at`
//!   (microsecond dates, indexed and fast);
//! - fast (columnar, memory-mapped) fields for ordering and folding: `ord`, `id`, `repo`,
//!   `entity`, `updated_at`, `created_at`;
//! - the row itself (its serde JSON without the embedding) in tantivy's compressed doc store,
//!   read by doc id only for the rows of an answer.
//!
//! Documents are sorted by `ord`, so a doc id is the row's ordinal: the key of its vector in
//! vectors.usearch. The index holds one tantivy segment.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{
    Bm25Weight, BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, EnableScoring, Occur, Query,
    RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING,
    Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{
    DateTime, DocAddress, DocId, DocSet, Index, IndexReader, ReloadPolicy, Searcher, SegmentReader,
    TERMINATED, TantivyDocument, Term,
};

use crate::doc_bits::DocBits;
use crate::error::FormatError;
use crate::filter::{RowFilter, Scope, author_keys};
use crate::maxscore::{self, TermCursor};
use crate::read_dir::ReadDirectory;
use crate::row::Row;
use crate::scope_stats::{ScopeCache, ScopeDocs, Stats};
use crate::text::{
    BOOST_BODY, BOOST_PATH, BOOST_SYMBOL, BOOST_TITLE, IDENT, WORDS, register_analyzers,
};

/// Heap for the single indexing thread; tantivy needs at least 15 MB per thread.
pub(crate) const WRITER_HEAP_BYTES: usize = 96 * 1024 * 1024;

/// Decompressed doc-store blocks kept per open index (16 KiB each): an answer reads a few rows.
const DOC_STORE_CACHE_BLOCKS: usize = 8;

/// Which analyzer each BM25 field is indexed with. Format 3 on writes [`Analyzers::current`]; a
/// format-1 or -2 segment upgraded on open keeps the analyzers it was built with, so its scores
/// do not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Analyzers {
    pub(crate) prose: String,
    pub(crate) path: String,
    pub(crate) symbol: bool,
}

impl Analyzers {
    pub(crate) fn current() -> Analyzers {
        Analyzers { prose: WORDS.into(), path: IDENT.into(), symbol: true }
    }

    /// The analyzers of an older `text/` index, read from its schema.
    pub(crate) fn of_index(dir: &Path) -> Result<Analyzers, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let schema = Index::open_in_dir(dir).map_err(tv)?.schema();
        let tokenizer = |name: &str| -> Result<String, FormatError> {
            let field = schema.get_field(name).map_err(tv)?;
            match schema.get_field_entry(field).field_type() {
                tantivy::schema::FieldType::Str(o) => Ok(o
                    .get_indexing_options()
                    .map(|i| i.tokenizer().to_string())
                    .unwrap_or_else(|| "default".into())),
                _ => Err(FormatError::Schema {
                    what: dir.display().to_string(),
                    detail: format!("field {name} is not a text field"),
                }),
            }
        };
        Ok(Analyzers {
            prose: tokenizer("title")?,
            path: tokenizer("path")?,
            symbol: schema.get_field("symbol").is_ok(),
        })
    }
}

/// The fields of the serving index.
#[derive(Debug, Clone, Copy)]
struct Fields {
    ord: Field,
    id: Field,
    row_type: Field,
    repo: Field,
    entity: Field,
    state: Field,
    labels: Field,
    milestone: Field,
    assignees: Field,
    author: Field,
    paths: Field,
    updated_at: Field,
    created_at: Field,
    title: Field,
    body: Field,
    path: Field,
    symbol: Option<Field>,
    row: Field,
}

fn schema(an: &Analyzers) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let analysed = |tokenizer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqs),
        )
    };
    let date = DateOptions::default()
        .set_indexed()
        .set_fast()
        .set_precision(DateTimePrecision::Microseconds);
    let fields = Fields {
        ord: b.add_u64_field("ord", FAST | INDEXED),
        id: b.add_text_field("id", STRING | FAST),
        row_type: b.add_text_field("type", STRING),
        repo: b.add_text_field("repo", STRING | FAST),
        entity: b.add_text_field("entity", STRING | FAST),
        state: b.add_text_field("state", STRING),
        labels: b.add_text_field("labels", STRING),
        milestone: b.add_text_field("milestone", STRING),
        assignees: b.add_text_field("assignees", STRING),
        author: b.add_text_field("author", STRING),
        paths: b.add_text_field("paths", STRING),
        updated_at: b.add_date_field("updated_at", date.clone()),
        created_at: b.add_date_field("created_at", date),
        title: b.add_text_field("title", analysed(&an.prose)),
        body: b.add_text_field("body", analysed(&an.prose)),
        path: b.add_text_field("path", analysed(&an.path)),
        symbol: an.symbol.then(|| b.add_text_field("symbol", analysed(&an.path))),
        row: b.add_bytes_field("row", STORED),
    };
    (b.build(), fields)
}

fn fields_of(schema: &Schema) -> Result<Fields, tantivy::TantivyError> {
    Ok(Fields {
        ord: schema.get_field("ord")?,
        id: schema.get_field("id")?,
        row_type: schema.get_field("type")?,
        repo: schema.get_field("repo")?,
        entity: schema.get_field("entity")?,
        state: schema.get_field("state")?,
        labels: schema.get_field("labels")?,
        milestone: schema.get_field("milestone")?,
        assignees: schema.get_field("assignees")?,
        author: schema.get_field("author")?,
        paths: schema.get_field("paths")?,
        updated_at: schema.get_field("updated_at")?,
        created_at: schema.get_field("created_at")?,
        title: schema.get_field("title")?,
        body: schema.get_field("body")?,
        path: schema.get_field("path")?,
        symbol: schema.get_field("symbol").ok(),
        row: schema.get_field("row")?,
    })
}

fn micros(t: chrono::DateTime<chrono::Utc>) -> DateTime {
    DateTime::from_timestamp_micros(t.timestamp_micros())
}

/// Commits `writer`, merges what it wrote into one tantivy segment (in whatever order the
/// index's meta lists the segments: a hash map's; the serving index, whose order matters, is
/// written in parts by `ServingIndexWriter` instead) and removes the files the merge left
/// behind.
pub(crate) fn commit_as_one_segment<D: tantivy::Document>(
    index: &Index,
    mut writer: tantivy::IndexWriter<D>,
    dir: &Path,
) -> Result<(), FormatError> {
    let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
    writer.commit().map_err(tv)?;
    let segments = index.searchable_segments().map_err(tv)?;
    if segments.len() > 1 {
        let ids: Vec<_> = segments.iter().map(|segment| segment.id()).collect();
        writer.merge(&ids).wait().map_err(tv)?;
    }
    writer.garbage_collect_files().wait().map_err(tv)?;
    writer.wait_merging_threads().map_err(tv)?;
    Ok(())
}

/// A searcher over the index in `dir` that never reloads, keeping `cache_blocks` decompressed
/// doc-store blocks.
pub(crate) fn open_searcher(
    index: &Index,
    dir: &Path,
    cache_blocks: usize,
) -> Result<(IndexReader, Searcher), FormatError> {
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(cache_blocks)
        .try_into()
        .map_err(|source| FormatError::Tantivy { path: dir.to_path_buf(), source })?;
    let searcher = reader.searcher();
    Ok((reader, searcher))
}

/// The first doc holding `term` in one tantivy segment, by the term dictionary and postings.
pub(crate) fn doc_of_term(
    seg: &SegmentReader,
    term: &Term,
    path: &Path,
) -> Result<Option<DocId>, FormatError> {
    let inv = seg
        .inverted_index(term.field())
        .map_err(|source| FormatError::Tantivy { path: path.to_path_buf(), source })?;
    let io = |e| FormatError::io(path, e);
    let Some(info) = inv.get_term_info(term).map_err(io)? else { return Ok(None) };
    let postings = inv.read_postings_from_terminfo(&info, IndexRecordOption::Basic).map_err(io)?;
    let doc = postings.doc();
    Ok((doc != TERMINATED).then_some(doc))
}

/// The terms of `field` in one tantivy segment that start with `prefix`, in order, at most
/// `limit`, from the term dictionary.
pub(crate) fn terms_with_prefix(
    seg: &SegmentReader,
    field: Field,
    prefix: &str,
    limit: usize,
    path: &Path,
) -> Result<Vec<String>, FormatError> {
    let inv = seg
        .inverted_index(field)
        .map_err(|source| FormatError::Tantivy { path: path.to_path_buf(), source })?;
    let mut stream = inv
        .terms()
        .range()
        .ge(prefix.as_bytes())
        .into_stream()
        .map_err(|e| FormatError::io(path, e))?;
    let mut out = Vec::new();
    while stream.advance() && out.len() < limit {
        let key = String::from_utf8_lossy(stream.key()).into_owned();
        if !key.starts_with(prefix) {
            break;
        }
        out.push(key);
    }
    Ok(out)
}

/// Writes the serving index of `rows` (ordinal = position) into `dir`.
pub(crate) fn write_serving_index<'a>(
    dir: &Path,
    rows: impl Iterator<Item = &'a Row>,
    an: &Analyzers,
) -> Result<(), FormatError> {
    let mut w = ServingIndexWriter::create(dir, an)?;
    for row in rows {
        w.add(row)?;
    }
    w.finish()?;
    Ok(())
}

/// The serving index being written, a row at a time (ordinal = the order rows are added): a
/// merge streams its members' rows through it instead of holding them.
///
/// Rows are indexed on the caller's thread, not through tantivy's `IndexWriter`: its queue
/// holds up to 10,000 documents waiting for the indexing thread, each with its body and its
/// row's JSON (at a merge's peak, ~4 KB a row of diffs: 40–50 MiB beside the writer's heap;
/// docs/performance.md, "The text index's queue"). Each time the heap fills, the part written
/// so far is saved as an index of its own under `.parts/`; `finish` merges the parts, in the
/// order they were written, into one segment in `dir` (or moves the only one there), reading
/// them through [`ReadDirectory`] rather than mapping them (docs/performance.md, "The text
/// index's parts read, not mapped").
pub(crate) struct ServingIndexWriter {
    schema: tantivy::schema::Schema,
    part: Option<tantivy::indexer::SingleSegmentIndexWriter<TantivyDocument>>,
    /// How many parts are saved under `.parts/` (`.parts/0` up to this, not included).
    parts: usize,
    heap: usize,
    f: Fields,
    dir: std::path::PathBuf,
    n: u64,
}

/// Where a serving index being written keeps its parts until `finish` merges them.
const PARTS_DIR: &str = ".parts";

/// A part is saved when its heap is within this of full (tantivy's `IndexWriter` margin).
const PART_MARGIN_BYTES: usize = 1_000_000;

impl ServingIndexWriter {
    /// A new, empty serving index in `dir`.
    pub(crate) fn create(dir: &Path, an: &Analyzers) -> Result<Self, FormatError> {
        Self::with_heap(dir, an, WRITER_HEAP_BYTES)
    }

    /// [`ServingIndexWriter::create`] with a writer heap of `heap` bytes (at least tantivy's 15
    /// MB): a part is written each time the heap fills.
    pub(crate) fn with_heap(dir: &Path, an: &Analyzers, heap: usize) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        let (schema, f) = schema(an);
        // Not tantivy's index sorting: the rows come in ordinal order already, and sorting at
        // each flush and in the final merge held up to twice the writer's heap more at the
        // peak (docs/performance.md, "A merge's peak"); the parts are merged in the order
        // they were written instead, and `finish` checks the result.
        Ok(ServingIndexWriter {
            schema,
            part: None,
            parts: 0,
            heap,
            f,
            dir: dir.to_path_buf(),
            n: 0,
        })
    }

    fn tv(&self) -> impl Fn(tantivy::TantivyError) -> FormatError + use<> {
        let path = self.dir.clone();
        move |source| FormatError::Tantivy { path: path.clone(), source }
    }

    /// The part being written, started in `.parts/<n>` when there is none.
    fn part(
        &mut self,
    ) -> Result<&mut tantivy::indexer::SingleSegmentIndexWriter<TantivyDocument>, FormatError> {
        if self.part.is_none() {
            let dir = self.dir.join(PARTS_DIR).join(self.parts.to_string());
            std::fs::create_dir_all(&dir).map_err(|e| FormatError::io(&dir, e))?;
            let tv = |source| FormatError::Tantivy { path: dir.clone(), source };
            let directory = tantivy::directory::MmapDirectory::open(&dir)
                .map_err(|e| tv(tantivy::TantivyError::from(e)))?;
            let writer = Index::builder()
                .schema(self.schema.clone())
                .tokenizers(crate::text::analyzers())
                .single_segment_index_writer(directory, self.heap)
                .map_err(tv)?;
            self.part = Some(writer);
        }
        Ok(self.part.as_mut().expect("a part was just started"))
    }

    /// Saves the part being written, if any.
    fn close_part(&mut self) -> Result<(), FormatError> {
        if let Some(part) = self.part.take() {
            // Not kept open: `finish` reads the parts again, through `ReadDirectory`.
            part.finalize().map_err(self.tv())?;
            self.parts += 1;
        }
        Ok(())
    }

    /// Adds the next row (its ordinal is the number of rows added before it).
    pub(crate) fn add(&mut self, row: &Row) -> Result<(), FormatError> {
        let tv = self.tv();
        let f = &self.f;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.ord, self.n);
        doc.add_text(f.id, &row.id);
        doc.add_text(f.row_type, row.kind().as_str());
        doc.add_text(f.repo, &row.repo);
        doc.add_text(f.entity, &row.entity);
        if let Some(s) = &row.state {
            doc.add_text(f.state, s);
        }
        for l in &row.labels {
            doc.add_text(f.labels, l.to_ascii_lowercase());
        }
        if let Some(m) = &row.milestone {
            doc.add_text(f.milestone, m.to_ascii_lowercase());
        }
        for a in &row.assignees {
            doc.add_text(f.assignees, a.to_ascii_lowercase());
        }
        if let Some(a) = &row.author {
            for k in author_keys(a) {
                doc.add_text(f.author, k.to_ascii_lowercase());
            }
        }
        for p in row.path.iter().chain(&row.files_changed) {
            doc.add_text(f.paths, p);
        }
        if let Some(t) = row.updated_at {
            doc.add_date(f.updated_at, micros(t));
        }
        if let Some(t) = row.created_at {
            doc.add_date(f.created_at, micros(t));
        }
        if let Some(t) = &row.title {
            doc.add_text(f.title, t);
        }
        if !row.heading_path.is_empty() {
            doc.add_text(f.title, row.heading_path.join(" "));
        }
        doc.add_text(f.body, &row.body);
        if let Some(p) = &row.path {
            doc.add_text(f.path, p);
        }
        if let (Some(field), Some(sym)) = (f.symbol, &row.symbol) {
            doc.add_text(field, sym);
        }
        let json = serde_json::to_vec(row).map_err(|e| FormatError::json(&row.id, e))?;
        doc.add_bytes(f.row, &json);
        let heap = self.heap;
        let part = self.part()?;
        part.add_document(doc).map_err(tv)?;
        // As tantivy's IndexWriter does: the part is saved once its heap is within a margin
        // of full.
        if part.mem_usage() >= heap.saturating_sub(PART_MARGIN_BYTES) {
            self.close_part()?;
        }
        self.n += 1;
        Ok(())
    }

    /// Saves the last part, makes the parts one tantivy segment in `dir` and checks that doc id
    /// = ordinal. Returns how many parts were written (0 for no rows).
    pub(crate) fn finish(mut self) -> Result<usize, FormatError> {
        self.close_part()?;
        let ServingIndexWriter { schema, parts, dir, n, .. } = self;
        let dir = dir.as_path();
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let parts_dir = dir.join(PARTS_DIR);
        let index = match parts {
            0 => Index::builder().schema(schema).create_in_dir(dir).map_err(tv)?,
            1 => {
                // The only part is the index: its files move up.
                let part = parts_dir.join("0");
                let entries = std::fs::read_dir(&part).map_err(|e| FormatError::io(&part, e))?;
                for entry in entries {
                    let entry = entry.map_err(|e| FormatError::io(&part, e))?;
                    let to = dir.join(entry.file_name());
                    std::fs::rename(entry.path(), &to).map_err(|e| FormatError::io(&to, e))?;
                }
                Index::open_in_dir(dir).map_err(tv)?
            }
            _ => {
                // Each part read through a directory that reads, not maps, its files: mapped,
                // every page the merge touches stays resident until it ends.
                let mut opened = Vec::with_capacity(parts);
                let mut segments = Vec::new();
                for i in 0..parts {
                    let part = parts_dir.join(i.to_string());
                    let tv = |source| FormatError::Tantivy { path: part.clone(), source };
                    let mut index = Index::open(ReadDirectory::new(&part)).map_err(tv)?;
                    index.set_tokenizers(crate::text::analyzers());
                    segments.extend(index.searchable_segments().map_err(tv)?);
                    opened.push(index);
                }
                let settings = opened[0].settings().clone();
                let alive = vec![None; segments.len()];
                let directory = tantivy::directory::MmapDirectory::open(dir)
                    .map_err(|e| tv(tantivy::TantivyError::from(e)))?;
                let index = tantivy::indexer::merge_filtered_segments(
                    &segments, settings, alive, directory,
                )
                .map_err(tv)?;
                drop(segments);
                drop(opened);
                index
            }
        };
        if parts_dir.exists() {
            std::fs::remove_dir_all(&parts_dir).map_err(|e| FormatError::io(&parts_dir, e))?;
        }
        // The doc id must be the ordinal: check it once here rather than trust it on every read.
        let reader = index.reader().map_err(tv)?;
        let searcher = reader.searcher();
        let bad = |detail: String| FormatError::Schema { what: dir.display().to_string(), detail };
        if searcher.num_docs() != n || searcher.segment_readers().len() > 1 {
            return Err(bad(format!(
                "index holds {} docs in {} segments, expected {n} in one",
                searcher.num_docs(),
                searcher.segment_readers().len()
            )));
        }
        if let Some(seg) = searcher.segment_readers().first() {
            let ords = seg.fast_fields().u64("ord").map_err(tv)?;
            if let Some(doc) = (0..seg.max_doc()).find(|&d| ords.first(d) != Some(d as u64)) {
                return Err(bad(format!(
                    "doc {doc} is not ordinal {doc}: the index is not sorted"
                )));
            }
        }
        Ok(parts)
    }
}

/// A filter compiled against one serving index.
pub struct CompiledFilter {
    query: Box<dyn Query>,
    /// When the caller's scope hides rows of this index: the scope's fingerprint and its
    /// clauses alone, whose docs BM25's statistics are taken over ([`crate::scope_stats`]).
    scope: Option<(String, Box<dyn Query>)>,
}

impl std::fmt::Debug for CompiledFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledFilter").finish_non_exhaustive()
    }
}

/// One scanned row: its time in microseconds, its id and its doc id.
pub type ScanHit = (i64, String, u32);

/// Which terms of a long query BM25 would leave out (measured, not served: `hubdex-bench
/// prune` and docs/performance.md, "BM25's tail"). A term's cost is its posting list, and the
/// terms with the longest lists score least (BM25's IDF). A query keeps its `keep_rarest`
/// rarest terms whatever their frequency; of the rest, a term found in more than `min_df`
/// documents *and* in more than `max_df_fraction` of them is left out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermPruning {
    /// The rarest terms every query keeps.
    pub keep_rarest: usize,
    /// A term in more than this share of the documents is common …
    pub max_df_fraction: f64,
    /// … if it is also in more than this many.
    pub min_df: u64,
}

impl TermPruning {
    /// `terms` less the ones this leaves out, in their order; `df` gives a term's document
    /// frequency among `num_docs`.
    fn apply<T>(
        &self,
        terms: Vec<(T, f32)>,
        num_docs: u64,
        df: impl Fn(&T) -> u64,
    ) -> Vec<(T, f32)> {
        if terms.len() <= self.keep_rarest {
            return terms;
        }
        let dfs: Vec<u64> = terms.iter().map(|(t, _)| df(t)).collect();
        let mut by_rarity: Vec<usize> = (0..terms.len()).collect();
        by_rarity.sort_by_key(|&i| dfs[i]);
        let mut keep = vec![false; terms.len()];
        for (rank, &i) in by_rarity.iter().enumerate() {
            let common = dfs[i] > self.min_df
                && dfs[i] as f64 > self.max_df_fraction * num_docs.max(1) as f64;
            keep[i] = rank < self.keep_rarest || !common;
        }
        terms.into_iter().zip(keep).filter_map(|(t, k)| k.then_some(t)).collect()
    }
}

/// How the BM25 side of a search is scored. Every way returns BM25 scores over the four fields
/// (the weighted sum); the measured ones score fewer documents or fewer terms. Only
/// [`TextScoring::Exact`] is served: the others lost quality where they paid, or time
/// (docs/performance.md, "BM25's tail").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TextScoring {
    /// Every query word in every field, one MaxScore over all of them (`maxscore.rs`).
    Exact,
    /// The same scores by tantivy's block-max WAND (`BooleanQuery`), what was served before
    /// MaxScore; kept to measure against.
    Wand,
    /// The exact query less the terms the rule leaves out.
    Pruned(TermPruning),
    /// The best `per_hit × limit` documents by the query's `keep` rarest (field, word) terms
    /// that some document holds, then scored exactly over every term.
    RarestFirst {
        /// Terms the first stage keeps.
        keep: usize,
        /// Candidates per requested hit.
        per_hit: usize,
    },
}

impl std::str::FromStr for TextScoring {
    type Err = String;

    /// `exact`, `wand`, `prune:KEEP:FRACTION:MIN_DF` or `rarest:KEEP:PER_HIT`.
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = |what: &str| format!("text scoring {s:?}: {what}");
        let num = |v: &str| v.parse::<usize>().map_err(|e| bad(&e.to_string()));
        match parts.as_slice() {
            ["exact"] => Ok(TextScoring::Exact),
            ["wand"] => Ok(TextScoring::Wand),
            ["prune", keep, fraction, min_df] => Ok(TextScoring::Pruned(TermPruning {
                keep_rarest: num(keep)?,
                max_df_fraction: fraction.parse().map_err(|e| bad(&format!("{e}")))?,
                min_df: num(min_df)? as u64,
            })),
            ["rarest", keep, per_hit] if num(keep)? > 0 && num(per_hit)? > 0 => {
                Ok(TextScoring::RarestFirst { keep: num(keep)?, per_hit: num(per_hit)? })
            }
            _ => Err(bad(
                "want exact, wand, prune:KEEP:FRACTION:MIN_DF or rarest:KEEP:PER_HIT (> 0)",
            )),
        }
    }
}

/// The score a BM25 hit needs to make a search's pool, shared by the indexes searched for it
/// (from different threads): the best `limit`-th score any one of them has found so far, since
/// the pool holds at least that index's `limit` docs at or above it. Starts at 0; BM25 scores
/// are not negative.
#[derive(Debug, Default)]
pub struct ScoreFloor(std::sync::atomic::AtomicU32);

impl ScoreFloor {
    /// A floor no hit is under.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the floor to `score` if it is higher. Non-negative floats order as their bits.
    fn raise(&self, score: f32) {
        if score > 0.0 {
            self.0.fetch_max(score.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// What a doc must beat (tantivy passes on only scores above the threshold): just under
    /// the floor, so a doc equal to it is still kept, as the pool's cut by (score, unit, doc)
    /// may keep it.
    fn threshold(&self) -> f32 {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => f32::MIN,
            bits => f32::from_bits(bits - 1),
        }
    }
}

/// One BM25 hit, ordered worse-first by score and then by the later doc (so a min-heap's top
/// is the one to drop).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hit {
    score: f32,
    doc: u32,
}

impl Eq for Hit {}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&other.score).then(other.doc.cmp(&self.doc))
    }
}

/// The best `limit` hits of one index so far: a min-heap, the worst on top. As in tantivy's
/// TopDocs, a doc is passed on only when it beats the threshold, so of equal scores the first
/// stays. With a shared floor, the threshold is the higher of it and this heap's worst once
/// full, and a full heap raises the floor.
struct TopHits<'a> {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Hit>>,
    limit: usize,
    floor: Option<&'a ScoreFloor>,
}

impl<'a> TopHits<'a> {
    fn new(limit: usize, floor: Option<&'a ScoreFloor>) -> Self {
        let heap = std::collections::BinaryHeap::with_capacity(limit + 1);
        TopHits { heap, limit, floor }
    }

    /// What a doc must beat now.
    fn threshold(&self) -> f32 {
        let shared = self.floor.map_or(f32::MIN, ScoreFloor::threshold);
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.limit => shared.max(worst.0.score),
            _ => shared,
        }
    }

    /// Keeps `doc` if it is among the best `limit`; returns the threshold after it.
    fn push(&mut self, doc: DocId, score: f32) -> f32 {
        self.heap.push(std::cmp::Reverse(Hit { score, doc }));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
        if self.heap.len() == self.limit
            && let (Some(f), Some(worst)) = (self.floor, self.heap.peek())
        {
            f.raise(worst.0.score);
        }
        self.threshold()
    }

    /// The hits, best first, ties by doc.
    fn into_sorted(self) -> Vec<(u32, f32)> {
        let mut hits: Vec<(u32, f32)> =
            self.heap.into_iter().map(|h| (h.0.doc, h.0.score)).collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits
    }
}

/// A read-only, memory-mapped serving index.
pub struct ServingIndex {
    _reader: IndexReader,
    searcher: Searcher,
    f: Fields,
    /// The BM25 fields, their weights and the analyzer each was indexed with.
    bm25: Vec<(Field, f32, TextAnalyzer)>,
    columns: Option<Columns>,
    path: PathBuf,
    /// Stored rows decoded so far ([`Self::rows_decoded`]).
    decoded: std::sync::atomic::AtomicU64,
    /// The docs of the scopes recently searched, for their BM25 statistics.
    scopes: ScopeCache,
}

/// The fast columns of the index's one tantivy segment.
struct Columns {
    id: StrColumn,
    repo: StrColumn,
    entity: StrColumn,
    updated: Column<DateTime>,
    created: Column<DateTime>,
}

impl std::fmt::Debug for ServingIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingIndex").field("path", &self.path).finish()
    }
}

impl ServingIndex {
    /// Opens the serving index in `dir` (mmap). The caller has verified its files.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let mapped = tantivy::directory::MmapDirectory::open_with_madvice(
            dir,
            tantivy::directory::Advice::Random,
        )
        .map_err(|e| tv(e.into()))?;
        let index = Index::open(mapped).map_err(tv)?;
        register_analyzers(&index);
        let f = fields_of(&index.schema()).map_err(|e| FormatError::Schema {
            what: dir.display().to_string(),
            detail: format!("not a format-3 serving index: {e}"),
        })?;
        let (reader, searcher) = open_searcher(&index, dir, DOC_STORE_CACHE_BLOCKS)?;
        if searcher.segment_readers().len() > 1 {
            return Err(FormatError::Schema {
                what: dir.display().to_string(),
                detail: format!(
                    "{} tantivy segments, expected one",
                    searcher.segment_readers().len()
                ),
            });
        }
        let columns = match searcher.segment_readers().first() {
            None => None,
            Some(seg) => {
                let ff = seg.fast_fields();
                let str_col = |name: &str| -> Result<StrColumn, FormatError> {
                    ff.str(name).map_err(tv)?.ok_or_else(|| FormatError::Schema {
                        what: dir.display().to_string(),
                        detail: format!("fast field {name} is missing"),
                    })
                };
                Some(Columns {
                    id: str_col("id")?,
                    repo: str_col("repo")?,
                    entity: str_col("entity")?,
                    updated: ff.date("updated_at").map_err(tv)?,
                    created: ff.date("created_at").map_err(tv)?,
                })
            }
        };
        let mut weighted = vec![(f.title, BOOST_TITLE), (f.body, BOOST_BODY), (f.path, BOOST_PATH)];
        weighted.extend(f.symbol.map(|s| (s, BOOST_SYMBOL)));
        let mut bm25 = Vec::new();
        for (field, boost) in weighted {
            bm25.push((field, boost, index.tokenizer_for_field(field).map_err(tv)?));
        }
        Ok(ServingIndex {
            _reader: reader,
            searcher,
            f,
            bm25,
            columns,
            path: dir.to_path_buf(),
            decoded: std::sync::atomic::AtomicU64::new(0),
            scopes: ScopeCache::default(),
        })
    }

    fn tv(&self) -> impl Fn(tantivy::TantivyError) -> FormatError + '_ {
        |source| FormatError::Tantivy { path: self.path.clone(), source }
    }

    fn io(&self) -> impl Fn(std::io::Error) -> FormatError + '_ {
        |e| FormatError::io(&self.path, e)
    }

    fn segment(&self) -> Option<&SegmentReader> {
        self.searcher.segment_readers().first()
    }

    /// Rows in the index.
    pub fn num_docs(&self) -> u64 {
        self.searcher.num_docs()
    }

    /// The terms of the BM25 query of a text: every word it analyses to, in every field, with
    /// the field's weight, less the terms `pruning` leaves out.
    fn text_terms(
        &self,
        text: &str,
        pruning: Option<&TermPruning>,
        stats: &Stats<'_>,
    ) -> Vec<(Term, f32)> {
        let mut terms: Vec<(Term, f32)> = Vec::new();
        for (field, boost, analyzer) in &self.bm25 {
            let mut analyzer = analyzer.clone();
            let mut stream = analyzer.token_stream(text);
            let mut seen = std::collections::HashSet::new();
            while let Some(tok) = stream.next() {
                if seen.insert(tok.text.clone()) {
                    terms.push((Term::from_field_text(*field, &tok.text), *boost));
                }
            }
        }
        if let Some(p) = pruning {
            terms = p.apply(terms, stats.num_docs(), |t| stats.df(t));
        }
        terms
    }

    /// The statistics a search under `filter` is scored with: over the docs its scope allows
    /// when the scope hides some rows of this index, else the whole index's.
    fn stats(&self, filter: Option<&CompiledFilter>) -> Result<Stats<'_>, FormatError> {
        let (Some((key, query)), Some(seg)) =
            (filter.and_then(|f| f.scope.as_ref()), self.segment())
        else {
            return Ok(Stats::whole(&self.searcher));
        };
        let fields: Vec<Field> = self.bm25.iter().map(|(f, _, _)| *f).collect();
        let docs = self
            .scopes
            .get_or_make(key, || {
                let bits = self
                    .bits_of(query.as_ref())
                    .map_err(|e| tantivy::TantivyError::InternalError(e.to_string()))?;
                ScopeDocs::new(seg, bits, &fields)
            })
            .map_err(self.tv())?;
        Ok(Stats::scoped(&self.searcher, seg, docs))
    }

    /// A document scores by the words it has (no operators, so nothing is a syntax error).
    fn any_of(terms: Vec<(Term, f32)>) -> BooleanQuery {
        let clauses = terms
            .into_iter()
            .map(|(term, boost)| {
                let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                (Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost)) as Box<dyn Query>)
            })
            .collect();
        BooleanQuery::new(clauses)
    }

    /// BM25 search: up to `limit` (doc, score) pairs, best first, among the docs `filter`
    /// accepts (the filter adds nothing to the score). Every term of the query counts.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        filter: Option<&CompiledFilter>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        self.search_with(query, limit, filter, TextScoring::Exact, None)
    }

    /// [`Self::search`] scored as `scoring` says (`hubdex-bench sparse` and `hubdex eval
    /// --text-scoring` compare them). Indexes searched for one pool share `floor`: a doc under
    /// the `limit`-th best score another index has found cannot make the pool and is skipped.
    pub fn search_with(
        &self,
        query: &str,
        limit: usize,
        filter: Option<&CompiledFilter>,
        scoring: TextScoring,
        floor: Option<&ScoreFloor>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let limit = limit.max(1);
        let stats = self.stats(filter)?;
        let st = &stats;
        match scoring {
            TextScoring::Exact => {
                self.top_docs(self.text_terms(query, None, st), limit, filter, floor, st)
            }
            TextScoring::Wand => {
                self.top_docs_by_wand(self.text_terms(query, None, st), limit, filter, floor, st)
            }
            TextScoring::Pruned(p) => {
                self.top_docs(self.text_terms(query, Some(&p), st), limit, filter, floor, st)
            }
            TextScoring::RarestFirst { keep, per_hit } => {
                // Terms no doc holds cost nothing and would take a place among the rarest.
                let all = self.text_terms(query, None, st);
                let mut terms = all.clone();
                terms.retain(|(t, _)| st.df(t) > 0);
                let rule = TermPruning { keep_rarest: keep, max_df_fraction: 0.0, min_df: 0 };
                let first = rule.apply(terms, st.num_docs(), |t| st.df(t));
                // The first stage's scores are not the final ones: no floor for it.
                let candidates = self.top_docs(first, limit * per_hit.max(1), filter, None, st)?;
                let docs: Vec<u32> = candidates.into_iter().map(|(d, _)| d).collect();
                let mut scored = self.score_exactly(all, &docs, st)?;
                scored.truncate(limit);
                Ok(scored)
            }
        }
    }

    /// The best `limit` (≥ 1) docs of the weighted `terms` that `filter` accepts, by their BM25
    /// score, best first and ties by doc, found by MaxScore. With a `floor`, docs scoring under
    /// it are skipped and the floor is raised to this index's `limit`-th score once it has
    /// `limit` docs.
    fn top_docs(
        &self,
        terms: Vec<(Term, f32)>,
        limit: usize,
        filter: Option<&CompiledFilter>,
        floor: Option<&ScoreFloor>,
        stats: &Stats<'_>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        let bits = filter.map(|f| self.filter_bits(f)).transpose()?;
        if bits.as_ref().is_some_and(|b| b.count() == 0) {
            return Ok(Vec::new());
        }
        let mut cursors = Vec::with_capacity(terms.len());
        for (term, boost) in &terms {
            let field = term.field();
            let inverted = seg.inverted_index(field).map_err(self.tv())?;
            let Some(postings) =
                inverted.read_postings(term, IndexRecordOption::WithFreqs).map_err(self.io())?
            else {
                continue;
            };
            let norms = seg.get_fieldnorms_reader(field).map_err(self.tv())?;
            // As tantivy's TermQuery weighs a term, boosted as its BoostQuery would.
            let weight = Bm25Weight::for_terms(stats, std::slice::from_ref(term))
                .map_err(self.tv())?
                .boost_by(*boost);
            cursors.push(TermCursor::new(postings, norms, weight));
        }
        let mut top = TopHits::new(limit, floor);
        maxscore::for_each_pruning(cursors, top.threshold(), bits.as_ref(), &mut |doc, score| {
            top.push(doc, score)
        });
        Ok(top.into_sorted())
    }

    /// [`Self::top_docs`] by tantivy's block-max WAND over a `BooleanQuery` of the terms (with
    /// a filter, an intersection that does not prune).
    fn top_docs_by_wand(
        &self,
        terms: Vec<(Term, f32)>,
        limit: usize,
        filter: Option<&CompiledFilter>,
        floor: Option<&ScoreFloor>,
        stats: &Stats<'_>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        let text = Self::any_of(terms);
        let query: Box<dyn Query> = match filter {
            None => Box::new(text),
            Some(f) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(text) as Box<dyn Query>),
                (Occur::Must, Box::new(ConstScoreQuery::new(f.query.box_clone(), 0.0))),
            ])),
        };
        let weight = query
            .weight(EnableScoring::enabled_from_statistics_provider(stats, &self.searcher))
            .map_err(self.tv())?;
        let mut top = TopHits::new(limit, floor);
        weight
            .for_each_pruning(top.threshold(), seg, &mut |doc, score| top.push(doc, score))
            .map_err(self.tv())?;
        Ok(top.into_sorted())
    }

    /// `docs` with their exact BM25 score (what [`TextScoring::Exact`] gives them, `terms` being
    /// the query's [`Self::text_terms`]), best first, ties by doc. Each term's postings are read
    /// only where a doc is: a seek per doc, in doc order.
    fn score_exactly(
        &self,
        terms: Vec<(Term, f32)>,
        docs: &[u32],
        stats: &Stats<'_>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let mut scored: Vec<(u32, f32)> = docs.iter().map(|&d| (d, 0.0)).collect();
        scored.sort_unstable_by_key(|&(d, _)| d);
        scored.dedup_by_key(|(d, _)| *d);
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        if scored.is_empty() {
            return Ok(scored);
        }
        let scoring = EnableScoring::enabled_from_statistics_provider(stats, &self.searcher);
        for (term, boost) in terms {
            let query = TermQuery::new(term, IndexRecordOption::WithFreqs);
            let mut scorer =
                query.weight(scoring).and_then(|w| w.scorer(seg, boost)).map_err(self.tv())?;
            for (doc, score) in scored.iter_mut() {
                let at = if scorer.doc() < *doc { scorer.seek(*doc) } else { scorer.doc() };
                if at == TERMINATED {
                    break;
                }
                if at == *doc {
                    *score += scorer.score();
                }
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(scored)
    }

    /// The raw terms of `field` that `keep` accepts, streamed from `start` until `keep_going`
    /// says stop.
    fn terms_where(
        &self,
        field: Field,
        start: &str,
        keep_going: impl Fn(&str) -> bool,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<Term>, FormatError> {
        let mut out = Vec::new();
        let Some(seg) = self.segment() else { return Ok(out) };
        let inv = seg.inverted_index(field).map_err(self.tv())?;
        let mut stream =
            inv.terms().range().ge(start.as_bytes()).into_stream().map_err(self.io())?;
        while stream.advance() {
            let Ok(key) = std::str::from_utf8(stream.key()) else { continue };
            if !keep_going(key) {
                break;
            }
            if keep(key) {
                out.push(Term::from_field_text(field, key));
            }
        }
        Ok(out)
    }

    /// Compiles `filter` into a query over this index; `None` when no filter is set.
    pub fn compile(&self, filter: &RowFilter) -> Result<Option<CompiledFilter>, FormatError> {
        if filter.is_empty() && filter.scope.is_none() {
            return Ok(None);
        }
        let f = &self.f;
        let term = |field: Field, v: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(Term::from_field_text(field, v), IndexRecordOption::Basic))
        };
        let mut must: Vec<Box<dyn Query>> = Vec::new();
        if let Some(r) = &filter.repo {
            must.push(term(f.repo, r));
        }
        if !filter.types.is_empty() {
            let terms = filter.types.iter().map(|t| Term::from_field_text(f.row_type, t.as_str()));
            must.push(Box::new(TermSetQuery::new(terms)));
        }
        if let Some(s) = &filter.state {
            must.push(term(f.state, s));
        }
        for l in &filter.labels {
            must.push(term(f.labels, &l.to_ascii_lowercase()));
        }
        if let Some(m) = &filter.milestone {
            must.push(term(f.milestone, &m.to_ascii_lowercase()));
        }
        if let Some(a) = &filter.assignee {
            must.push(term(f.assignees, &a.to_ascii_lowercase()));
        }
        if let Some(a) = &filter.author {
            must.push(term(f.author, &a.to_ascii_lowercase()));
        }
        if let Some(p) = &filter.path_prefix {
            let terms = self.terms_where(f.paths, p, |k| k.starts_with(p.as_str()), |_| true)?;
            must.push(set_or_empty(terms));
        }
        if let Some(g) = &filter.files_glob {
            let terms = self.terms_where(f.paths, "", |_| true, |k| g.is_match(k))?;
            must.push(set_or_empty(terms));
        }
        if filter.since.is_some() || filter.until.is_some() {
            let bound = |t: Option<chrono::DateTime<chrono::Utc>>, incl: bool| match t {
                None => Bound::Unbounded,
                Some(t) => {
                    let term = Term::from_field_date(f.updated_at, micros(t));
                    if incl { Bound::Included(term) } else { Bound::Excluded(term) }
                }
            };
            must.push(Box::new(RangeQuery::new(
                bound(filter.since, true),
                bound(filter.until, false),
            )));
        }
        let mut scope_clauses: Vec<Box<dyn Query>> = Vec::new();
        if let Some(scope) = &filter.scope {
            // Only what the scope excludes from this index becomes a clause: a scope that
            // allows every repository here adds no repository clause at all.
            let all = self.terms_where(f.repo, "", |_| true, |_| true)?;
            let allowed: Vec<Term> = all
                .iter()
                .filter(|t| t.value().as_str().is_some_and(|r| scope.allows_repo(r)))
                .cloned()
                .collect();
            if allowed.len() < all.len() {
                scope_clauses.push(set_or_empty(allowed));
            }
            if !scope.types().is_empty() {
                let terms =
                    scope.types().iter().map(|t| Term::from_field_text(f.row_type, t.as_str()));
                scope_clauses.push(Box::new(TermSetQuery::new(terms)));
            }
        }
        let scope = match scope_clauses.len() {
            0 => None,
            _ if filter.whole_index_statistics => {
                must.extend(scope_clauses);
                None
            }
            _ => {
                let key = filter.scope.as_ref().map(Scope::fingerprint).unwrap_or_default();
                must.extend(scope_clauses.iter().map(|q| q.box_clone()));
                Some((key, all_of(scope_clauses)))
            }
        };
        if must.is_empty() {
            return Ok(None);
        }
        Ok(Some(CompiledFilter { query: all_of(must), scope }))
    }

    /// Calls `each` with every doc `query` matches, in doc order.
    fn for_each_match(
        &self,
        query: &dyn Query,
        each: &mut dyn FnMut(&[DocId]),
    ) -> Result<(), FormatError> {
        let Some(seg) = self.segment() else { return Ok(()) };
        let weight = query
            .weight(EnableScoring::disabled_from_searcher(&self.searcher))
            .map_err(self.tv())?;
        weight.for_each_no_score(seg, each).map_err(self.tv())
    }

    /// The docs `filter` accepts, as a bitset over ordinals (for the vector search).
    pub fn filter_bits(&self, filter: &CompiledFilter) -> Result<DocBits, FormatError> {
        self.bits_of(filter.query.as_ref())
    }

    /// The docs `query` matches, as a bitset over ordinals.
    fn bits_of(&self, query: &dyn Query) -> Result<DocBits, FormatError> {
        let max = self.segment().map_or(0, |s| s.max_doc());
        let mut bits = DocBits::empty(max);
        self.for_each_match(query, &mut |docs| bits.insert_sorted(docs))?;
        Ok(bits)
    }

    /// Whether `filter` accepts any doc of this index.
    fn any_match(&self, filter: &CompiledFilter) -> Result<bool, FormatError> {
        let Some(seg) = self.segment() else { return Ok(false) };
        let weight = filter
            .query
            .weight(EnableScoring::disabled_from_searcher(&self.searcher))
            .map_err(self.tv())?;
        let scorer = weight.scorer(seg, 1.0).map_err(self.tv())?;
        Ok(scorer.doc() != TERMINATED)
    }

    /// The names of the set filters that, each on its own, accept no doc of this index.
    pub fn unmatched(&self, filter: &RowFilter) -> Result<Vec<&'static str>, FormatError> {
        let mut out = Vec::new();
        for name in filter.set_names() {
            let alone = self.compile(&filter.only(name))?;
            if !alone.map(|c| self.any_match(&c)).transpose()?.unwrap_or(true) {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// The doc of the row with this id.
    pub fn doc_of_id(&self, id: &str) -> Result<Option<u32>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(None) };
        doc_of_term(seg, &Term::from_field_text(self.f.id, id), &self.path)
    }

    /// Entity keys of this index starting with `prefix` (`commit/1a2b` for a short SHA), at
    /// most `limit`, from the term dictionary.
    pub fn entities_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        terms_with_prefix(seg, self.f.entity, prefix, limit, &self.path)
    }

    /// How many stored rows [`Self::row`] has decoded since the index was opened: what shows
    /// that a scope check, made on columns, reads no row it refuses.
    pub fn rows_decoded(&self) -> u64 {
        self.decoded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The stored row of `doc`, without its embeddings.
    pub fn row(&self, doc: u32) -> Result<Row, FormatError> {
        self.decoded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d: TantivyDocument = self.searcher.doc(DocAddress::new(0, doc)).map_err(self.tv())?;
        let bytes = d.get_first(self.f.row).and_then(|v| v.as_bytes()).ok_or_else(|| {
            FormatError::Schema {
                what: self.path.display().to_string(),
                detail: format!("doc {doc} has no stored row"),
            }
        })?;
        serde_json::from_slice(bytes)
            .map_err(|e| FormatError::json(format!("{} doc {doc}", self.path.display()), e))
    }

    /// Every stored row, in ordinal order (for tools and tests: a request reads only its own
    /// rows).
    pub fn rows(&self) -> Result<Vec<Row>, FormatError> {
        let max = self.segment().map_or(0, |s| s.max_doc());
        (0..max).map(|d| self.row(d)).collect()
    }

    fn columns(&self) -> Result<&Columns, FormatError> {
        self.columns.as_ref().ok_or_else(|| FormatError::Schema {
            what: self.path.display().to_string(),
            detail: "the index is empty".into(),
        })
    }

    /// The repository of the row at `doc`, from the `repo` column: what a scope check reads
    /// before any stored row is decoded.
    pub fn repo_of(&self, doc: u32) -> Result<String, FormatError> {
        let c = self.columns()?;
        str_of(&c.repo, doc).map_err(self.io())
    }

    /// The id of the row at `doc`, from the `id` column.
    pub fn id_of(&self, doc: u32) -> Result<String, FormatError> {
        let c = self.columns()?;
        str_of(&c.id, doc).map_err(self.io())
    }

    /// A key equal for rows of the same repository and entity in this index.
    pub fn entity_key(&self, doc: u32) -> Result<(u64, u64), FormatError> {
        let c = self.columns()?;
        let ord = |col: &StrColumn| col.term_ords(doc).next().unwrap_or(u64::MAX);
        Ok((ord(&c.repo), ord(&c.entity)))
    }

    /// The rows whose `updated_at` (or `created_at`) lies in [since, until), that `filter`
    /// accepts and that sort before `after` (time, id), newest first; ties on time broken by
    /// id, descending. At most `limit`.
    pub fn scan(
        &self,
        filter: Option<&CompiledFilter>,
        created: bool,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<ScanHit>, FormatError> {
        let Some(c) = &self.columns else { return Ok(Vec::new()) };
        let (field, col) =
            if created { (self.f.created_at, &c.created) } else { (self.f.updated_at, &c.updated) };
        let mut upper = until.timestamp_micros();
        if let Some((t, _)) = after {
            // Rows at the cursor's own time may still come after it (by id): keep them.
            upper = upper.min(t.saturating_add(1));
        }
        let range = RangeQuery::new(
            Bound::Included(Term::from_field_date(field, micros(since))),
            Bound::Excluded(Term::from_field_date(field, DateTime::from_timestamp_micros(upper))),
        );
        let query: Box<dyn Query> = match filter {
            None => Box::new(range),
            Some(f) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(range) as Box<dyn Query>),
                (Occur::Must, f.query.box_clone()),
            ])),
        };
        // A min-heap of the best `limit` (time, id ordinal, doc) seen so far.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(i64, u64, u32)>> =
            std::collections::BinaryHeap::new();
        let mut failed = None;
        let mut id = String::new();
        self.for_each_match(query.as_ref(), &mut |docs| {
            for &d in docs {
                let Some(t) = col.first(d).map(|t| t.into_timestamp_micros()) else { continue };
                let id_ord = c.id.term_ords(d).next().unwrap_or(0);
                if let Some((at, aid)) = after
                    && t == at
                {
                    match c.id.ord_to_str(id_ord, &mut id) {
                        Ok(_) if id.as_str() >= aid => continue,
                        Ok(_) => {}
                        Err(e) => {
                            failed = Some(e);
                            continue;
                        }
                    }
                }
                heap.push(std::cmp::Reverse((t, id_ord, d)));
                if heap.len() > limit {
                    heap.pop();
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(FormatError::io(&self.path, e));
        }
        let mut hits: Vec<(i64, u64, u32)> = heap.into_iter().map(|r| r.0).collect();
        hits.sort_by(|a, b| b.cmp(a));
        hits.into_iter().map(|(t, _, d)| Ok((t, str_of(&c.id, d).map_err(self.io())?, d))).collect()
    }
}

fn str_of(col: &StrColumn, doc: u32) -> std::io::Result<String> {
    let mut s = String::new();
    if let Some(ord) = col.term_ords(doc).next() {
        col.ord_to_str(ord, &mut s)?;
    }
    Ok(s)
}

/// A query matching what every one of `clauses` (at least one) matches.
fn all_of(mut clauses: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    if clauses.len() == 1 {
        return clauses.pop().expect("one clause");
    }
    Box::new(BooleanQuery::new(clauses.into_iter().map(|q| (Occur::Must, q)).collect()))
}

fn set_or_empty(terms: Vec<Term>) -> Box<dyn Query> {
    if terms.is_empty() { Box::new(EmptyQuery) } else { Box::new(TermSetQuery::new(terms)) }
}

#[cfg(test)]
mod tests {
    use super::{
        Analyzers, PARTS_DIR, ScoreFloor, ServingIndex, ServingIndexWriter, TermPruning,
        TextScoring,
    };
    use crate::row::{Row, RowType};

    /// A writer whose heap fills many times writes many parts; merged into one they keep the
    /// order the rows were added in (doc id = ordinal), which `finish` checks and the rows
    /// read back by doc id confirm, and the parts are removed.
    #[test]
    fn rows_written_as_many_segments_keep_their_ordinals() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            ServingIndexWriter::with_heap(dir.path(), &Analyzers::current(), 15_000_000).unwrap();
        let rows = 3_000;
        let mut next = 1u64;
        for i in 0..rows {
            let mut row = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0);
            let words: Vec<String> = (0..1_500)
                .map(|_| {
                    next = next.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    format!("w{}", (next >> 33) % 20_000)
                })
                .collect();
            row.body = words.join(" ");
            writer.add(&row).unwrap();
        }
        let written = writer.finish().unwrap();
        assert!(written >= 4, "the heap filled {written} times: too few to test the order");
        assert!(!dir.path().join(PARTS_DIR).exists(), "the parts are left behind");
        let index = ServingIndex::open(dir.path()).unwrap();
        for i in (0..rows).step_by(97) {
            let want = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0).id;
            assert_eq!(index.row(i as u32).unwrap().id, want, "doc {i}");
        }
    }

    /// The same rows written whole (one part) and in parts (merged through
    /// [`crate::read_dir::ReadDirectory`]) answer BM25 queries alike: the same docs with the
    /// same scores, and the same rows by doc id.
    #[test]
    fn an_index_written_in_parts_answers_as_one_written_whole() {
        let rows: Vec<Row> = (0..2_000u64)
            .map(|i| {
                let mut row = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0);
                let mut next = i + 1;
                let words: Vec<String> = (0..800)
                    .map(|_| {
                        next = next
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        format!("w{}", (next >> 33) % 5_000)
                    })
                    .collect();
                row.title = Some(format!("title w{} w{}", i % 97, i % 13));
                row.body = words.join(" ");
                row
            })
            .collect();
        let write = |heap: usize| {
            let dir = tempfile::tempdir().unwrap();
            let mut writer =
                ServingIndexWriter::with_heap(dir.path(), &Analyzers::current(), heap).unwrap();
            for row in &rows {
                writer.add(row).unwrap();
            }
            let written = writer.finish().unwrap();
            let index = ServingIndex::open(dir.path()).unwrap();
            (dir, written, index)
        };
        let (_whole_dir, one, whole) = write(200_000_000);
        let (_parts_dir, many, parts) = write(15_000_000);
        assert_eq!(one, 1);
        assert!(many >= 2, "the heap filled {many} times: the index was not written in parts");
        for query in ["w17", "w4999 w3 title", "w12 w13 w14 w15 w16", "title w5", "nothing"] {
            let a = whole.search(query, 50, None).unwrap();
            let b = parts.search(query, 50, None).unwrap();
            assert_eq!(a.is_empty(), query == "nothing", "{query}: {} docs", a.len());
            assert_eq!(a, b, "{query}");
        }
        for doc in (0..rows.len() as u32).step_by(199) {
            assert_eq!(whole.row(doc).unwrap().body, parts.row(doc).unwrap().body, "doc {doc}");
        }
    }

    /// An index written in one part, and one of no rows, are left in `dir` alone: no parts
    /// directory, one segment (or none), every row by its ordinal.
    #[test]
    fn a_small_index_and_an_empty_one_leave_no_parts_behind() {
        for rows in [0usize, 5] {
            let dir = tempfile::tempdir().unwrap();
            let mut writer = ServingIndexWriter::create(dir.path(), &Analyzers::current()).unwrap();
            for i in 0..rows {
                let mut row = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0);
                row.body = format!("fn number_{i}() {{}}");
                writer.add(&row).unwrap();
            }
            let written = writer.finish().unwrap();
            assert_eq!(written, usize::from(rows > 0), "{rows} rows");
            assert!(!dir.path().join(PARTS_DIR).exists(), "{rows} rows: parts left behind");
            let index = ServingIndex::open(dir.path()).unwrap();
            for i in 0..rows {
                let want = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0).id;
                assert_eq!(index.row(i as u32).unwrap().id, want, "doc {i}");
            }
        }
    }

    /// 300 rows of a small vocabulary, each word in a different field in different rows; the
    /// same rows for the same seed.
    fn index_of_varied_rows(seed: u64) -> (tempfile::TempDir, ServingIndex) {
        let vocab = [
            "parse", "request", "header", "buffer", "stream", "token", "error", "retry", "socket",
            "cache", "entry", "insert", "ordered", "map", "key", "value", "iterator", "chunk",
        ];
        let mut next = seed;
        let mut pick = |n: usize| -> Vec<&str> {
            (0..n)
                .map(|_| {
                    next = next.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    vocab[(next >> 33) as usize % vocab.len()]
                })
                .collect()
        };
        let rows: Vec<Row> = (0..300)
            .map(|i| {
                let mut row = Row::new(RowType::Code, "o/r", &format!("file/{i}.rs"), 0);
                row.title = Some(pick(3).join(" "));
                row.body = pick(12 + i % 30).join(" ");
                row.path = Some(format!("src/{}_{}.rs", pick(1)[0], pick(1)[0]));
                row.symbol = Some(pick(2).join("_"));
                row
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        super::write_serving_index(dir.path(), rows.iter(), &Analyzers::current()).unwrap();
        let index = ServingIndex::open(dir.path()).unwrap();
        (dir, index)
    }

    /// Rarest terms first scores what it returns exactly as exact BM25 does; with every term
    /// kept and every match a candidate it returns exact BM25's list itself.
    #[test]
    fn rarest_first_scores_exactly_and_keeping_everything_gives_the_exact_list() {
        let (_dir, index) = index_of_varied_rows(7);
        let queries =
            ["parse request header", "insert the entry into the ordered map", "retry socket"];
        let mut differed = false;
        for q in queries {
            let exact = index.search_with(q, 300, None, TextScoring::Exact, None).unwrap();
            assert!(exact.len() > 40, "{q}: {} matches", exact.len());
            let exact_score: std::collections::HashMap<u32, f32> = exact.iter().copied().collect();
            let cut = TextScoring::RarestFirst { keep: 2, per_hit: 1 };
            let hits = index.search_with(q, 10, None, cut, None).unwrap();
            assert_eq!(hits.len(), 10);
            for (doc, score) in &hits {
                let want = exact_score[doc];
                assert!((score - want).abs() <= 1e-4 * want.abs().max(1.0), "{q}: doc {doc}");
            }
            assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "{q}: best first");
            differed |= hits.iter().map(|h| h.0).ne(exact.iter().take(10).map(|h| h.0));
            let all = TextScoring::RarestFirst { keep: 100, per_hit: 100 };
            let docs = |hits: &[(u32, f32)]| hits.iter().map(|h| h.0).collect::<Vec<_>>();
            let hits = index.search_with(q, 10, None, all, None).unwrap();
            assert_eq!(docs(&hits), docs(&exact[..10]), "{q}");
        }
        // Two terms of many do not find the exact top 10 every time: the assertions on scores
        // above are what the second stage is for.
        assert!(differed, "two rarest terms alone should miss somewhere");
    }

    /// Indexes searched for one pool with a shared floor give the pool they give without it,
    /// ties across indexes included (two identical indexes: every score ties), and return
    /// fewer hits doing so.
    #[test]
    fn a_shared_floor_skips_only_what_cannot_make_the_pool() {
        let (_a, a) = index_of_varied_rows(7);
        let (_b, b) = index_of_varied_rows(7);
        let (_c, c) = index_of_varied_rows(11);
        let (mut returned_with, mut returned_without) = (0, 0);
        for q in ["parse request header", "insert the entry into the ordered map", "retry socket"] {
            for limit in [1, 5, 10, 50] {
                let pooled = |floor: Option<&ScoreFloor>, returned: &mut usize| {
                    let mut all = Vec::new();
                    for (unit, index) in [&a, &b, &c].into_iter().enumerate() {
                        let hits = index.search_with(q, limit, None, TextScoring::Exact, floor);
                        let hits = hits.unwrap();
                        *returned += hits.len();
                        all.extend(hits.into_iter().map(|(doc, score)| (score, unit, doc)));
                    }
                    all.sort_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
                    all.truncate(limit);
                    all
                };
                let floor = ScoreFloor::new();
                let with = pooled(Some(&floor), &mut returned_with);
                let without = pooled(None, &mut returned_without);
                // The same rows; block-max WAND may sum a doc's terms in another order when
                // its threshold differs, so a score may differ in the last bit.
                let rows = |p: &[(f32, usize, u32)]| {
                    let mut r: Vec<(usize, u32)> = p.iter().map(|h| (h.1, h.2)).collect();
                    r.sort();
                    r
                };
                assert_eq!(rows(&with), rows(&without), "{q}, limit {limit}");
                for (w, o) in with.iter().zip(&without) {
                    assert!((w.0 - o.0).abs() <= 1e-5 * o.0, "{q}, limit {limit}: {w:?} {o:?}");
                }
            }
        }
        assert!(returned_with < returned_without, "{returned_with} vs {returned_without}");
    }

    /// MaxScore (served) finds what tantivy's block-max WAND (served before it) finds: the same
    /// scores rank by rank, to the last bits of a sum taken in another order, and the same docs
    /// wherever scores do not tie, for short and long queries, at every limit, with filters
    /// from none to one that accepts nothing.
    #[test]
    fn maxscore_finds_what_block_max_wand_finds() {
        let (_dir, index) = index_of_varied_rows(3);
        let words = [
            "parse",
            "request",
            "header",
            "buffer",
            "stream",
            "token",
            "error",
            "retry",
            "socket",
            "cache",
            "entry",
            "insert",
            "ordered",
            "map",
            "key",
            "value",
            "iterator",
            "chunk",
            "the",
            "into",
            "absent",
            "Parse_Request",
        ];
        let mut next = 17u64;
        let mut word = || {
            next = next.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            words[(next >> 33) as usize % words.len()]
        };
        let queries: Vec<String> =
            (1..=30).map(|n| (0..n).map(|_| word()).collect::<Vec<_>>().join(" ")).collect();
        let mut filters = vec![None];
        for prefix in ["src/", "src/parse", "src/key_m", "nowhere/"] {
            let filter =
                crate::filter::RowFilter { path_prefix: Some(prefix.into()), ..Default::default() };
            filters.push(Some((prefix, index.compile(&filter).unwrap().unwrap())));
        }
        let mut compared = 0;
        for q in &queries {
            for (name, filter) in filters.iter().map(|f| match f {
                None => ("none", None),
                Some((n, f)) => (*n, Some(f)),
            }) {
                for limit in [1, 3, 10, 50, 300] {
                    let got = index.search_with(q, limit, filter, TextScoring::Exact, None);
                    let want = index.search_with(q, limit, filter, TextScoring::Wand, None);
                    let (got, want) = (got.unwrap(), want.unwrap());
                    let at = format!("{q:?}, filter {name}, limit {limit}");
                    assert_eq!(got.len(), want.len(), "{at}");
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g.1 - w.1).abs() <= 1e-5 * w.1, "{at}: {g:?} vs {w:?}");
                    }
                    // Above the last score (and its ties) both hold the same docs.
                    let Some(last) = want.last().map(|w| w.1 * (1.0 + 1e-5)) else { continue };
                    let above = |hits: &[(u32, f32)]| {
                        let mut docs: Vec<u32> =
                            hits.iter().filter(|h| h.1 > last).map(|h| h.0).collect();
                        docs.sort_unstable();
                        docs
                    };
                    assert_eq!(above(&got), above(&want), "{at}");
                    compared += got.len();
                }
            }
        }
        assert!(compared > 10_000, "{compared} hits compared");
    }

    /// Scorings parse from what `hubdex eval --text-scoring` and `hubdex-bench sparse` take,
    /// and a bad one says what was wrong.
    #[test]
    fn text_scorings_parse_and_bad_ones_say_what_is_wrong() {
        assert_eq!("exact".parse::<TextScoring>(), Ok(TextScoring::Exact));
        assert_eq!("wand".parse::<TextScoring>(), Ok(TextScoring::Wand));
        assert_eq!("rarest:24:2".parse(), Ok(TextScoring::RarestFirst { keep: 24, per_hit: 2 }));
        assert!(matches!("prune:8:0.1:2000".parse(), Ok(TextScoring::Pruned(_))));
        for bad in ["rarest:0:2", "rarest:8", "bm25", "prune:8:x:1"] {
            let err = bad.parse::<TextScoring>().unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }

    /// Format 6 indexes the BM25 fields without positions (nothing reads them); their scores
    /// are what frequencies and lengths give, as before.
    #[test]
    fn the_bm25_fields_are_indexed_without_positions() {
        let (dir, _index) = index_of_varied_rows(7);
        let index = tantivy::Index::open_in_dir(dir.path()).unwrap();
        let schema = index.schema();
        for name in ["title", "body", "path", "symbol"] {
            let entry = schema.get_field_entry(schema.get_field(name).unwrap());
            let tantivy::schema::FieldType::Str(options) = entry.field_type() else {
                panic!("{name} is a text field")
            };
            let indexing = options.get_indexing_options().unwrap();
            assert_eq!(indexing.index_option(), tantivy::schema::IndexRecordOption::WithFreqs);
        }
    }

    /// A long query keeps its rarest terms and every term that is rare in either sense; a
    /// short one keeps everything.
    #[test]
    fn pruning_leaves_out_only_common_terms_of_long_queries() {
        let rule = TermPruning { keep_rarest: 2, max_df_fraction: 0.1, min_df: 50 };
        let df = |t: &&str| match *t {
            "the" => 900,   // common in both senses: left out
            "map" => 400,   // common as well (the two rarest are entry and ordered): left out
            "insert" => 40, // under the absolute floor: kept
            "ordered" => 5,
            "entry" => 2,
            _ => 0,
        };
        let terms =
            vec![("the", 1.0), ("map", 1.0), ("insert", 1.0), ("ordered", 1.0), ("entry", 1.0)];
        let kept: Vec<&str> =
            rule.apply(terms.clone(), 1000, df).into_iter().map(|(t, _)| t).collect();
        assert_eq!(kept, ["insert", "ordered", "entry"]);
        // Two terms: both are the rarest two, so nothing is left out.
        let short = vec![("the", 1.0), ("map", 1.0)];
        assert_eq!(rule.apply(short.clone(), 1000, df), short);
        // A small index: every list is under the floor.
        let small = TermPruning { min_df: 10_000, ..rule };
        assert_eq!(small.apply(terms.clone(), 1000, df), terms);
    }
}
