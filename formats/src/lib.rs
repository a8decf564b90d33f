#![warn(missing_docs)]
//! hubdex-formats: the contract between hubdex's writer (the indexer) and its reader (the
//! server).
//!
//! Each artifact has a writer and a reader here:
//! - a [`Row`] and `rows.parquet` ([`write_rows`], [`read_rows`]);
//! - an [`Edge`] (a cross-reference), `edges.parquet` ([`write_edges`], [`read_edges`]) and the
//!   edge index ([`EdgeIndex`]);
//! - a segment directory ([`write_segment`], [`Segment::open`]; verified where it enters the
//!   cache, in [`Store::fetch_segment`]), its
//!   serving index ([`ServingIndex`]: BM25, filter and sort columns, stored rows), its file
//!   store ([`FileStore`]), its exact-search store ([`GrepStore`]) and merged segments ([`plan_merges`], [`write_merged_segment`]);
//! - `segment.json`, `manifest.json` and `LATEST` ([`SegmentMeta`], [`Manifest`], [`Latest`]);
//! - the small versioned records beside them: pins ([`Pin`]), delta-queue entries
//!   ([`QueueEntry`]) and a sharded build's staged records ([`StagedCrawl`], [`StagedSegment`]);
//! - the store, its key layout ([`manifest_key`], [`segment_key`]) and its publish protocol
//!   ([`Store`]);
//! - the model a snapshot's vectors come from ([`ModelIdentity`]); the model itself runs in
//!   `hubdex-runtime`.
//!
//! It knows nothing of MCP, HTTP or GitHub.
//!
//! ```
//! use hubdex_formats::{Row, RowType};
//!
//! let mut row = Row::new(RowType::Commit, "owner/repo", "commit/0123abc", 0);
//! row.title = Some("Fix the parser".into());
//! row.set_body("The parser dropped the last token.");
//! assert!(row.id.starts_with("cmt_"));
//! assert_eq!(row.id, Row::new(RowType::Commit, "owner/repo", "commit/0123abc", 0).id);
//! ```

mod changes;
mod doc_bits;
mod edges;
mod error;
mod files;
mod filter;
mod grep;
pub mod hnsw;
mod malloc;
mod manifest;
mod maxscore;
mod merge;
mod names;
pub mod ngram;
mod queue;
mod read_dir;
mod row;
mod rows;
mod scope_stats;
mod segment;
mod serving;
mod staging;
mod store;
mod text;
mod vectors;

pub use changes::{
    CHANGES_DIR, CHANGES_MAX_BYTES, CHANGES_PARQUET, ChangeRun, ChangeStore, ChangeStoreWriter,
    ChangedCommit, CommitChanges, read_changes, write_changes,
};
pub use doc_bits::DocBits;
pub use edges::{
    Direction, EDGES_DIR, EDGES_PARQUET, Edge, EdgeIndex, EdgeKind, entity_key, entity_type,
    entity_web_path, read_edges, write_edges,
};
pub use error::{FormatError, StoreError};
pub use files::{
    FILES_DIR, FILES_PARQUET, FileStore, FileSymbol, FileText, MAX_TEXT_FILE_BYTES, Skipped,
    is_binary, read_files, write_files,
};
pub use filter::{
    FILTER_NAMES, MAX_GLOB_CHARS, RowFilter, Scope, ScopeError, glob_literal, glob_matcher,
};
pub use grep::{
    FileCounts, GREP_DIR, GrepFile, GrepStore, GrepStoreWriter, NameMatch, SYMBOL_KINDS, SymbolRef,
};
pub use malloc::{Arenas, MALLOC_ARENA_MAX, MALLOC_TRIM_THRESHOLD, TRIM_BYTES, give_back_freed};
pub use manifest::{
    BuildStats, FORMAT_VERSION, FileEntry, HistorySpan, Latest, Manifest, ManifestSegment,
    ModelIdentity, Pin, READABLE_VERSIONS, RECORD_VERSION, SegmentMeta, ThreadNumbers,
    VECTORS_HNSW, VECTORS_USEARCH, snapshot_id,
};
pub use merge::{
    GraphBuilder, MERGE_BELOW_ROWS, MERGED_MAX_ROWS, MERGED_TARGET_ROWS, MERGED_TIER2_MAX_ROWS,
    MERGED_TIER2_TARGET_ROWS, MergeIndexes, MergeLimits, MergeProgress, PARALLEL_GRAPH_MIN_ROWS,
    boundary_after, graph_builder, graph_threads, is_write_of, merge_memory_estimate, merged_id,
    plan_merges, write_merged_in_memory, write_merged_segment,
};
pub use names::{MAX_NAME_CHARS, check_name, name_join, safe_join};
pub use queue::{QUEUE_DONE, QUEUE_PENDING, QueueEntry};
pub use row::{BODY_MAX_CHARS, Row, RowType, UnknownRowType, row_id, sha256_hex};
pub use rows::{batch_to_rows, read_rows, read_text_keys, row_schema, write_rows};
pub use segment::{
    ROWS_PARQUET, SEGMENT_JSON, Segment, SegmentDraft, SegmentExtras, TEXT_DIR, hash_file,
    input_sha256, read_segment_meta, segment_id, sha256_file, start_segment, upgrade_segment,
    write_segment,
};
pub use serving::{CompiledFilter, ScanHit, ScoreFloor, ServingIndex};
pub use staging::{
    STAGING_DIR, StagedCrawl, StagedPart, StagedSegment, repo_slug, staged_crawl_prefix,
    staged_part_prefix, staged_segment_key, staging_prefix,
};
pub use store::{
    DEFAULT_STORE, LATEST, LatestUpdate, PINS_DIR, SEGMENTS_DIR, SNAPSHOTS_DIR, SnapshotListing,
    Store, UPLOAD_PART_BYTES, VERIFIED_MARKER, VerifiedManifest, failpoint, file_stamp,
    install_tls_provider, manifest_key, name_under, segment_key,
};
pub use vectors::{
    SECOND_VECTOR, USEARCH_I8, VECTOR_SCALAR, VectorBase, VectorIndex, quantize, vector_file,
    write_vector_index, write_vector_index_from,
};
