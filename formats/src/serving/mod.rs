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
//!
//! Its parts: `schema` (the fields, the analyzers, opening a searcher), `writer` (the index
//! written a row at a time), `reader` (BM25 search, rows and columns read back), `compile` (a
//! request's filter compiled into doc sets). The types they share are defined here.

mod compile;
mod reader;
mod schema;
mod writer;

pub use reader::{ScanHit, ScoreFloor};
pub(crate) use schema::{
    Analyzers, commit_as_one_segment, doc_of_term, open_searcher, terms_with_prefix,
};
use schema::{fields_of, micros};
pub(crate) use writer::write_serving_index;

use std::path::PathBuf;

use tantivy::columnar::{Column, StrColumn};
use tantivy::query::Query;
use tantivy::schema::Field;
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DateTime, IndexReader, Searcher, TantivyDocument};

use crate::scope_stats::ScopeCache;

/// Heap for the single indexing thread; tantivy needs at least 15 MB per thread.
pub(crate) const WRITER_HEAP_BYTES: usize = 96 * 1024 * 1024;

/// Decompressed doc-store blocks kept per open index (16 KiB each): an answer reads a few rows.
const DOC_STORE_CACHE_BLOCKS: usize = 8;

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

/// The serving index being written, a row at a time (ordinal = the order rows are added): a
/// merge streams its members' rows through it instead of holding them.
///
/// Rows are indexed on the caller's thread, not through tantivy's `IndexWriter`: its queue
/// holds up to 10,000 documents waiting for the indexing thread, each with its body and its
/// row's JSON (at a merge's peak, ~4 KB a row of diffs: 40–50 MiB beside the writer's heap;
/// docs/performance.md). Each time the heap fills, the part written
/// so far is saved as an index of its own under `.parts/`; `finish` merges the parts, in the
/// order they were written, into one segment in `dir` (or moves the only one there), reading
/// them through [`crate::read_dir::ReadDirectory`] rather than mapping them (docs/performance.md).
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

#[cfg(test)]
mod tests {
    use super::writer::PARTS_DIR;
    use super::{Analyzers, ScoreFloor, ServingIndex, ServingIndexWriter};
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
                        let hits = index.search_with(q, limit, None, floor);
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
                    let got = index.search_with(q, limit, filter, None);
                    let want = index.search_by_wand(q, limit, filter);
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

    /// Format 6 indexes the BM25 fields without positions (nothing reads them); their scores
    /// are what frequencies and lengths give, with positions or without.
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
}
