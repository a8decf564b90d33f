//! Merged segments: small build segments served together, so a query's cost follows the number
//! of serving units, not the number of repositories.
//!
//! The policy has two tiers of like-sized segments. Build segments under [`MERGE_BELOW_ROWS`]
//! rows form the first tier, larger ones (under [`MERGED_TIER2_MAX_ROWS`]) the second; a larger
//! segment still is served as it is. Each tier, in repository order, is cut into groups by
//! content-defined boundaries: after each repository a boundary falls with probability
//! `rows / target` (decided by a hash of the repository name, not by chance), and always before
//! a group would pass the tier's maximum. So groups average the tier's target, and a change to
//! one repository moves at most the boundaries next to it: it rewrites its own group and leaves
//! the others' ids, and so their files, as they were (as Lucene's tiered merge policy and
//! Quickwit's split merging bound the cost of a change). A small repository's change rewrites a
//! unit of about 64k rows, a large one's a unit of about 256k.
//!
//! From format 5 a build segment has no serving files of its own (it would be a second copy
//! of the unit's): a group of one such segment is a merged segment too, and so is a build
//! segment too large for either tier. Older build segments alone are served as they are.

use std::path::{Path, PathBuf};

use crate::changes::{CHANGES_DIR, CHANGES_PARQUET, ChangeStoreWriter, read_changes};
use crate::error::FormatError;
use crate::files::{FILES_DIR, FILES_PARQUET, FileStoreWriter, read_files};
use crate::grep::{GREP_DIR, GrepStoreWriter};
use crate::hnsw::{HnswWriter, MeanOf};
use crate::manifest::{FORMAT_VERSION, ManifestSegment, ModelIdentity, SegmentMeta};
use crate::manifest::{VECTORS_HNSW, VECTORS_USEARCH};
use crate::row::sha256_hex;
use crate::rows::{Columns, read_rows, row_batches};
use crate::segment::{
    IndexInputs, ROWS_PARQUET, RowStats, TEXT_DIR, finish_meta, finish_meta_of, read_segment_meta,
    write_indexes, write_meta,
};
use crate::serving::{Analyzers, ServingIndexWriter};
use crate::vectors::{USEARCH_I8, VectorBase, VectorIndexBuilder};

/// Build segments with fewer rows than this are merged in the first tier.
pub const MERGE_BELOW_ROWS: u64 = 32_768;
/// The average size of a first-tier merged segment.
pub const MERGED_TARGET_ROWS: u64 = 65_536;
/// No first-tier merged segment holds more rows than this: 1.75 × the target. A unit's merge
/// holds its vector graph and its text index's heap, each growing with its rows, so this cap
/// sets what a publish holds at its peak whatever the history; 1.75 × cuts only the tail of
/// exponentially spread group sizes, and a lower cap costs more units to query than it saves
/// (docs/performance.md, "Tried and dropped").
pub const MERGED_MAX_ROWS: u64 = MERGED_TARGET_ROWS / 4 * 7; // 114,688
/// The average size of a second-tier merged segment (build segments of at least
/// [`MERGE_BELOW_ROWS`] rows, merged so that a query visits a few large units).
pub const MERGED_TIER2_TARGET_ROWS: u64 = 262_144;
/// No second-tier merged segment holds more rows than this; a build segment this large is
/// served alone.
pub const MERGED_TIER2_MAX_ROWS: u64 = 524_288;

/// How a merge writes its two indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeIndexes {
    /// The text index and the vector graph on two threads at once: faster, holding both.
    SideBySide,
    /// The vector graph, then the text index (and file store): one thread, holding the larger
    /// of the two. What a merge does when side by side would pass its memory allowance.
    InTurn,
}

/// Which builder writes a streamed merge's vector graph (the same `vectors.hnsw` layout, read
/// the same way). A publish picks one per unit with [`graph_builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphBuilder {
    /// usearch's, holding each vector and its links in memory (~600 bytes a vector): what a
    /// merge uses wherever the budget holds it ([`graph_builder`]).
    Usearch,
    /// hubdex's own (`HnswWriter`): the walk on sign codes, ~190 bytes a vector, the i8 vectors
    /// in a file beside; the same bytes on any number of threads. What a merge in turn uses
    /// when usearch's graph would hold more than [`MergeLimits::in_turn_bytes`]: slower than
    /// usearch and a little lower in recall (docs/performance.md, "The build at scale");
    /// `hubdex-bench merge --graph codes` measures it.
    HnswWriter,
}

impl GraphBuilder {
    /// What building a graph holds for each vector. usearch: its i8 vector and its links
    /// (64-byte aligned nodes), ~600 bytes as measured on a 143,684-vector unit. The writer: a
    /// sign code (48 bytes at 384 dimensions), level-0 links (132) and a key (4).
    pub fn bytes_per_vector(self) -> u64 {
        match self {
            GraphBuilder::Usearch => 600,
            GraphBuilder::HnswWriter => 190,
        }
    }
}

/// Which builder writes the vector graph of a merge of `vectors` vectors (rows and second
/// vectors), its indexes written as `indexes` says. Side by side, usearch's: a budget that
/// holds both indexes at once holds its graph. In turn, usearch's when its graph would hold no
/// more than `in_turn_bytes` ([`MergeLimits::in_turn_bytes`]), else the writer's, about a third
/// the bytes; the merge's text index then follows the smaller graph (its heap sized to it), so a
/// unit's merge holds what the budget allows, not what the unit's size asks.
pub fn graph_builder(vectors: u64, indexes: MergeIndexes, in_turn_bytes: u64) -> GraphBuilder {
    let usearch = GraphBuilder::Usearch;
    match indexes {
        MergeIndexes::InTurn
            if vectors.saturating_mul(usearch.bytes_per_vector()) > in_turn_bytes =>
        {
            GraphBuilder::HnswWriter
        }
        _ => usearch,
    }
}

/// A streamed merge's vector graph, by either builder.
enum MergedGraph {
    Usearch(VectorIndexBuilder),
    HnswWriter(Box<HnswWriter>),
}

impl MergedGraph {
    fn add(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        match self {
            MergedGraph::Usearch(g) => g.add(ordinal, v),
            MergedGraph::HnswWriter(g) => g.add(ordinal, v),
        }
    }

    fn add_second(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        match self {
            MergedGraph::Usearch(g) => g.add_second(ordinal, v),
            MergedGraph::HnswWriter(g) => g.add_second(ordinal, v),
        }
    }

    fn finish(self) -> Result<(), FormatError> {
        match self {
            MergedGraph::Usearch(g) => g.save(),
            MergedGraph::HnswWriter(g) => g.finish(),
        }
    }
}

/// What writing one merged segment of `rows` rows holds at its peak, in bytes: an estimate
/// for deciding how many merges may run at once and how ([`MergeLimits`], [`MergeIndexes`]).
/// The text index: its writer's heap, then per row its buffers; the vector graph: per row its
/// vector and links (`hubdex-bench merge` measures a unit's real peak). The in-turn figure is
/// kept high: in a build a merge starts from what the history's passes left, and under a small
/// budget every such merge runs alone either way.
pub fn merge_memory_estimate(rows: u64, indexes: MergeIndexes) -> u64 {
    const MIB: u64 = 1 << 20;
    let text = 96 * MIB + rows.saturating_mul(900);
    let graph = rows.saturating_mul(1_000);
    match indexes {
        MergeIndexes::SideBySide => text + graph,
        MergeIndexes::InTurn => text.max(graph),
    }
}

/// The least text heap [`merge_text_heap`] gives: below it a unit's text index is written in
/// many small parts, each merge of them costing time for memory the graph holds anyway.
pub(crate) const MIN_MERGE_TEXT_HEAP: usize = 32 << 20;

/// The heap a merge of `vectors` vectors (rows and second vectors) writes its text index with,
/// its graph built by `builder`. Side by side it is the writer's own
/// ([`crate::serving::WRITER_HEAP_BYTES`], 96 MiB). In turn the merge holds the larger of its
/// graph and its text index, and the graph is as small as its builder makes it: so the text
/// index is held to the graph's size, its heap the graph's estimate
/// ([`GraphBuilder::bytes_per_vector`]) less what saving a part adds to it (the sorted term
/// list and the fast fields: ~22% of a full heap, measured with heaptrack), between
/// [`MIN_MERGE_TEXT_HEAP`] and the writer's own. A text
/// index that outgrows it is written in parts and merged through positioned reads, answering as
/// one written whole.
pub(crate) fn merge_text_heap(vectors: u64, indexes: MergeIndexes, builder: GraphBuilder) -> usize {
    let full = crate::serving::WRITER_HEAP_BYTES;
    match indexes {
        MergeIndexes::SideBySide => full,
        MergeIndexes::InTurn => {
            let graph = vectors.saturating_mul(builder.bytes_per_vector());
            let heap = usize::try_from(graph / 100 * 82).unwrap_or(usize::MAX);
            heap.clamp(MIN_MERGE_TEXT_HEAP, full)
        }
    }
}

/// How many serving merges may run at once: as many as there are cores and as their
/// estimated memory ([`merge_memory_estimate`]) fits `memory_bytes` (a large merge's vector
/// graph is also built on every core: [`graph_threads`]). A merge whose indexes side by side
/// would pass `memory_bytes` writes them in turn, its graph by the builder `in_turn_bytes`
/// picks ([`graph_builder`]); one merge runs whatever its estimate: a unit cannot be written in
/// parts. Which merges run together, and how, changes no merged segment's rows, text index
/// content or members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeLimits {
    /// What the merges running at once may hold together, as [`merge_memory_estimate`] counts.
    pub memory_bytes: u64,
    /// At most this many merges at once.
    pub parallel: usize,
    /// What a merge in turn may hold for its vector graph: a unit whose graph usearch would
    /// build on more is built by hubdex's own writer, on about a third the bytes
    /// ([`graph_builder`]).
    pub in_turn_bytes: u64,
}

/// How far a publish's serving merges are ([`crate::Store::merge_for_serving`] reports it
/// once before the first unit and again as each unit is written or found already stored):
/// units done of all, and the rows of those units of the rows of all (what a progress line's
/// rate and ETA are counted in: units range from a few rows to [`MERGED_MAX_ROWS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MergeProgress {
    /// Units written or found stored.
    pub done: usize,
    /// Units in all.
    pub units: usize,
    /// The rows of the units done.
    pub rows_done: u64,
    /// The rows of all units.
    pub rows: u64,
}

impl MergeLimits {
    /// One merge at a time, whatever the memory.
    pub fn one_at_a_time() -> Self {
        MergeLimits { memory_bytes: u64::MAX, parallel: 1, in_turn_bytes: u64::MAX }
    }

    /// Merges within `memory_bytes`, at most one per core; a graph in turn within it too.
    pub fn within(memory_bytes: u64) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        MergeLimits { memory_bytes, parallel: cores, in_turn_bytes: memory_bytes }
    }
}

/// Whether a content-defined boundary falls after the item `key` of weight `weight`: true with
/// probability `weight / target`, decided by a hash of the key, not by chance. The merge policy
/// cuts repositories (weighed in rows) into units with it, and the indexer a repository's rows
/// (weighed in bytes) into build segments.
pub fn boundary_after(key: &str, weight: u64, target: u64) -> bool {
    let h = sha256_hex(key.as_bytes());
    let x = u64::from_str_radix(&h[..12], 16).unwrap_or(0) % (1 << 48);
    (x as u128) * (target as u128) < (weight as u128) << 48
}

/// Cuts `tier` (in repository order; a repository's build segments in the order they are
/// listed) into content-defined groups of about `target` rows, none over `max`. A boundary is
/// decided by the repository's name, or by the segment's id when the memory budget cut the
/// repository into several build segments (so a change to one of them moves only the
/// boundaries next to it, as a change to a repository does).
fn cut(mut tier: Vec<&ManifestSegment>, target: u64, max: u64) -> Vec<Vec<ManifestSegment>> {
    // A stable sort: a repository's build segments keep their order, which the manifest lists
    // as the cut made them (the history oldest first, then threads, then files). A changed
    // build segment then keeps its place, and only its group is rewritten: by id, its old id
    // left one group and its new one joined another (a one-commit delta of a 400k-commit
    // history rewrote two or three units, up to 360k rows).
    tier.sort_by(|a, b| a.repo.cmp(&b.repo));
    let mut per_repo: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for s in &tier {
        *per_repo.entry(s.repo.as_str()).or_default() += 1;
    }
    let key = |s: &ManifestSegment| {
        if per_repo[s.repo.as_str()] > 1 { s.id.clone() } else { s.repo.clone() }
    };
    let mut groups: Vec<Vec<ManifestSegment>> = Vec::new();
    let mut group: Vec<ManifestSegment> = Vec::new();
    let mut rows = 0u64;
    for s in tier {
        if !group.is_empty() && rows + s.rows > max {
            groups.push(std::mem::take(&mut group));
            rows = 0;
        }
        group.push(s.clone());
        rows += s.rows;
        if boundary_after(&key(s), s.rows, target) {
            groups.push(std::mem::take(&mut group));
            rows = 0;
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups.retain(|g| g.len() > 1 || !g[0].has_serving_files());
    groups
}

/// Groups the build segments to merge; a segment in no group is served as it is. Two tiers, as
/// a tiered merge policy keeps segments of like sizes together: segments under
/// [`MERGE_BELOW_ROWS`] rows merge into units of about [`MERGED_TARGET_ROWS`]; larger ones (up
/// to [`MERGED_TIER2_MAX_ROWS`]) into units of about [`MERGED_TIER2_TARGET_ROWS`]. A group of
/// one is kept only for a segment without serving files of its own (format 5), as is a group
/// of one such segment too large for the tiers. Repositories may come in any order; a
/// repository's build segments are taken in the order `segments` lists them (a manifest's: as
/// its build cut them).
pub fn plan_merges(segments: &[ManifestSegment]) -> Vec<Vec<ManifestSegment>> {
    let build: Vec<&ManifestSegment> = segments.iter().filter(|s| s.members.is_empty()).collect();
    let small: Vec<&ManifestSegment> =
        build.iter().copied().filter(|s| s.rows < MERGE_BELOW_ROWS).collect();
    let large: Vec<&ManifestSegment> = build
        .iter()
        .copied()
        .filter(|s| (MERGE_BELOW_ROWS..MERGED_TIER2_MAX_ROWS).contains(&s.rows))
        .collect();
    let mut groups = cut(small, MERGED_TARGET_ROWS, MERGED_MAX_ROWS);
    groups.extend(cut(large, MERGED_TIER2_TARGET_ROWS, MERGED_TIER2_MAX_ROWS));
    let mut huge: Vec<&ManifestSegment> = build
        .iter()
        .copied()
        .filter(|s| s.rows >= MERGED_TIER2_MAX_ROWS && !s.has_serving_files())
        .collect();
    huge.sort_by(|a, b| a.repo.cmp(&b.repo));
    groups.extend(huge.into_iter().map(|s| vec![s.clone()]));
    groups
}

/// What names the merged segment of these build segments (in plan order) and this format:
/// `merged-<16 hex>`. A merged segment written now is stored as one write of it,
/// `merged-<16 hex>-<16 hex>` ([`is_write_of`]): the second part hashes its files, so two
/// builders that write the same unit at once (whose text indexes, and vector graphs built on
/// several threads, differ in bytes) write two segments and never mix their files. Stores
/// written before name a merged segment by this id alone.
pub fn merged_id(members: &[ManifestSegment]) -> String {
    let ids: Vec<&str> = members.iter().map(|m| m.id.as_str()).collect();
    let seed = format!("{FORMAT_VERSION}\nmerged\n{}", ids.join("\n"));
    format!("merged-{}", &sha256_hex(seed.as_bytes())[..16])
}

/// Whether the segment `id` serves the members [`merged_id`] named `members_id`: it is that id
/// (as stores written before name it) or one write of it (`<members_id>-<16 hex>`).
pub fn is_write_of(id: &str, members_id: &str) -> bool {
    match id.strip_prefix(members_id) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('-').is_some_and(|h| {
            h.len() == 16 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }),
        None => false,
    }
}

/// Names the merged segment just written in `dir` (its segment.json says `meta`, id
/// [`merged_id`]'s) by its write: its id gets the first 16 hex of a hash of its files' paths
/// and sha256s, and segment.json is written again with it.
fn name_by_write(dir: &Path, mut meta: SegmentMeta) -> Result<SegmentMeta, FormatError> {
    let mut files = String::new();
    for f in &meta.files {
        files.push_str(&format!("{}\n{}\n", f.path, f.sha256));
    }
    meta.id = format!("{}-{}", meta.id, &sha256_hex(files.as_bytes())[..16]);
    write_meta(dir, &meta)?;
    Ok(meta)
}

/// Below this many rows a merge builds its vector graph on one thread, in insertion order: the
/// graph is then the same bytes every time, and a small graph gains little from more threads.
pub const PARALLEL_GRAPH_MIN_ROWS: u64 = 16_384;

/// How many threads a merge of `rows` rows builds its vector graph on: one per core from
/// [`PARALLEL_GRAPH_MIN_ROWS`] rows, else one, whichever way the merge writes its indexes: with
/// the graph built first on a trimmed heap the second thread adds no memory, and a 128k-row
/// unit's graph takes about half the time.
pub fn graph_threads(rows: u64) -> usize {
    if rows < PARALLEL_GRAPH_MIN_ROWS {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The vectors of the merged segment of the build segments in `member_dirs`: every row's, and
/// the second (title) vectors.
pub(crate) fn vectors_of(member_dirs: &[PathBuf]) -> Result<u64, FormatError> {
    let mut vectors = 0;
    for m in member_dirs {
        let meta = read_segment_meta(m)?;
        vectors += meta.rows + meta.second_vectors;
    }
    Ok(vectors)
}

/// Writes the merged segment of the build segments in `member_dirs` (verified local copies,
/// in plan order; only their rows.parquet, files.parquet and edges.parquet are read) into the empty directory
/// `dir`. Rows keep their members' order, so the merged segment answers with the same rows.
///
/// The members are streamed, a batch of rows at a time: the text index and the file store
/// take their rows and files as they are read, and the vector graph its vectors (main vectors
/// in row order, then the second ones, as [`crate::write_vector_index_from`] inserts them, so
/// the files are the same bytes); what a merge holds is the graph, the index writers' buffers
/// and one batch, not the unit's rows.
///
/// `indexes` says whether the text index and the vector graph are written side by side or in
/// turn (the same files either way); `graph_threads` how many threads insert into the vector
/// graph ([`graph_threads`]: on more than one usearch's graph differs in bytes from write to
/// write); `builder` which builder writes it ([`GraphBuilder`]).
/// `id` is the members' id ([`merged_id`]); the segment is named by its write
/// ([`is_write_of`]), as the returned meta says.
pub fn write_merged_segment(
    dir: &Path,
    id: &str,
    member_dirs: &[PathBuf],
    model: &ModelIdentity,
    indexes: MergeIndexes,
    graph_threads: usize,
    builder: GraphBuilder,
) -> Result<SegmentMeta, FormatError> {
    let metas = member_metas(member_dirs, model)?;
    // A first member with a usearch graph in i8 (format 4) starts the merged graph.
    if metas.first().is_some_and(|meta| {
        meta.has_serving_files() && meta.vector_scalar == USEARCH_I8 && meta.rows > 0
    }) {
        return write_merged_in_memory(dir, id, member_dirs, model);
    }
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    let rows: usize = metas.iter().map(|m| m.rows as usize).sum();
    let seconds: usize = metas.iter().map(|m| m.second_vectors as usize).sum();
    let capacity = rows + seconds;
    let text = || {
        let heap = merge_text_heap(capacity as u64, indexes, builder);
        merge_text(dir, member_dirs, &metas, heap)
    };
    let vectors = || merge_vectors(dir, member_dirs, model, capacity, graph_threads, builder);
    // The text and vector indexes are independent: built side by side, as write_indexes does,
    // or one after the other to hold only the larger.
    let (mut stats, second) = match indexes {
        MergeIndexes::SideBySide => {
            let (text, second) = std::thread::scope(|s| {
                let text = s.spawn(text);
                let second = vectors();
                (text.join(), second)
            });
            let stats = text.map_err(|_| FormatError::Schema {
                what: dir.join(TEXT_DIR).display().to_string(),
                detail: "the text index writer panicked".into(),
            })??;
            (stats, second?)
        }
        // The graph first: what usearch allocates for it is given back whole when it is
        // dropped, where the text index's many small blocks leave the heap fragmented, and a
        // graph built after them grew on top of what they left (docs/performance.md).
        MergeIndexes::InTurn => {
            let second = vectors()?;
            (text()?, second)
        }
    };
    stats.second_vectors = second;
    crate::edges::merge_edge_indexes(dir, member_dirs)?;
    let members = metas.iter().map(|m| m.id.clone()).collect();
    let repos = metas.into_iter().map(|m| m.repo).collect();
    let meta =
        finish_meta_of(dir, id.to_string(), String::new(), stats, model.clone(), members, repos)?;
    name_by_write(dir, meta)
}

/// The members' metas, each checked to be of `model`: a merge never mixes vectors of two models.
fn member_metas(
    member_dirs: &[PathBuf],
    model: &ModelIdentity,
) -> Result<Vec<SegmentMeta>, FormatError> {
    let mut metas = Vec::with_capacity(member_dirs.len());
    for m in member_dirs {
        let meta = read_segment_meta(m)?;
        if meta.model.model_sha256 != model.model_sha256 {
            return Err(FormatError::Schema {
                what: m.display().to_string(),
                detail: "was built with another model than the snapshot".into(),
            });
        }
        metas.push(meta);
    }
    Ok(metas)
}

/// A merge's text index (its writer's heap `heap` bytes) and file store, from the members' rows
/// and files a batch at a time; the rows' statistics. After each batch what its rows freed goes
/// back to the system (`give_back_freed`): in a build the heap is one the history's pass left
/// large and full of holes, and a batch's rows would land in holes whose pages were given
/// back, fault them in again and keep them. A trim costs ~0.6 ms a batch.
fn merge_text(
    dir: &Path,
    member_dirs: &[PathBuf],
    metas: &[SegmentMeta],
    heap: usize,
) -> Result<RowStats, FormatError> {
    let mut index =
        ServingIndexWriter::with_heap(&dir.join(TEXT_DIR), &Analyzers::current(), heap)?;
    let mut stats = RowStats::default();
    for m in member_dirs {
        for batch in row_batches(&m.join(ROWS_PARQUET), Columns::WithoutVectors)? {
            for row in &batch? {
                stats.add(row);
                index.add(row)?;
            }
            crate::malloc::give_back_freed();
        }
    }
    index.finish()?;
    let mut stores: Option<(FileStoreWriter, GrepStoreWriter)> = None;
    for (m, meta) in member_dirs.iter().zip(metas) {
        for f in read_files(&m.join(FILES_PARQUET))? {
            let (files, grep) = match &mut stores {
                Some(w) => w,
                None => stores.insert((
                    FileStoreWriter::create(&dir.join(FILES_DIR))?,
                    GrepStoreWriter::create(&dir.join(GREP_DIR))?,
                )),
            };
            files.add(&meta.repo, &f)?;
            grep.add(&meta.repo, &f)?;
        }
    }
    if let Some((files, grep)) = stores {
        files.finish()?;
        grep.finish()?;
    }
    // A member's changes at a time: a build segment holds at most a share of the build's
    // budget of them.
    let mut history: Option<ChangeStoreWriter> = None;
    for (m, meta) in member_dirs.iter().zip(metas) {
        for c in read_changes(&m.join(CHANGES_PARQUET))? {
            let w = match &mut history {
                Some(w) => w,
                None => history.insert(ChangeStoreWriter::create(&dir.join(CHANGES_DIR))?),
            };
            w.add(&meta.repo, &c)?;
        }
    }
    if let Some(w) = history {
        w.finish()?;
    }
    Ok(stats)
}

/// A merge's vector graph of `capacity` vectors, built by `builder` on `graph_threads` threads
/// from the members' vectors a batch at a time: main vectors in row order, then the second
/// ones, as [`crate::write_vector_index_from`] inserts them; how many second vectors it holds.
fn merge_vectors(
    dir: &Path,
    member_dirs: &[PathBuf],
    model: &ModelIdentity,
    capacity: usize,
    graph_threads: usize,
    builder: GraphBuilder,
) -> Result<u64, FormatError> {
    let path = dir.join(VECTORS_HNSW);
    let mut graph = match builder {
        GraphBuilder::Usearch => MergedGraph::Usearch(VectorIndexBuilder::new(
            &path,
            model.dim,
            capacity,
            graph_threads,
        )?),
        GraphBuilder::HnswWriter => {
            // The point the graph's sign codes are taken around: a pass over the vectors.
            let mut mean = MeanOf::new(model.dim);
            for m in member_dirs {
                for batch in row_batches(&m.join(ROWS_PARQUET), Columns::Vectors)? {
                    for row in &batch? {
                        mean.add_i8(&row.embedding);
                        if !row.title_embedding.is_empty() {
                            mean.add_i8(&row.title_embedding);
                        }
                    }
                }
            }
            let dim = model.dim;
            MergedGraph::HnswWriter(Box::new(HnswWriter::new(
                &path,
                dim,
                mean.mean(),
                capacity,
                graph_threads,
            )?))
        }
    };
    let mut ordinal = 0;
    for m in member_dirs {
        for batch in row_batches(&m.join(ROWS_PARQUET), Columns::Embedding)? {
            for row in &batch? {
                graph.add(ordinal, &row.embedding)?;
                ordinal += 1;
            }
            crate::malloc::give_back_freed();
        }
    }
    let (mut ordinal, mut second) = (0, 0);
    for m in member_dirs {
        for batch in row_batches(&m.join(ROWS_PARQUET), Columns::TitleEmbedding)? {
            for row in &batch? {
                if !row.title_embedding.is_empty() {
                    graph.add_second(ordinal, &row.title_embedding)?;
                    second += 1;
                }
                ordinal += 1;
            }
            crate::malloc::give_back_freed();
        }
    }
    graph.finish()?;
    Ok(second)
}

/// [`write_merged_segment`] holding every member's rows in memory: what a merge whose first
/// member's vector graph (format 4) starts the merged one does, and the baseline
/// `hubdex-bench merge` measures the streaming merge against. The same files.
pub fn write_merged_in_memory(
    dir: &Path,
    id: &str,
    member_dirs: &[PathBuf],
    model: &ModelIdentity,
) -> Result<SegmentMeta, FormatError> {
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    let mut rows = Vec::new();
    let mut files = Vec::new();
    let mut changes = Vec::new();
    let mut members = Vec::new();
    let mut repos = Vec::new();
    // The first member's vector graph is the start of the merged one (its rows come first):
    // only the other members' vectors are inserted. A first member without one (format 5) or
    // of an older format (f16 vectors) cannot start it: then every vector is inserted.
    let first_graph = member_dirs.first().map(|m| m.join(VECTORS_USEARCH));
    let mut vector_base = None;
    for (k, m) in member_dirs.iter().enumerate() {
        let meta = read_segment_meta(m)?;
        if meta.model.model_sha256 != model.model_sha256 {
            return Err(FormatError::Schema {
                what: m.display().to_string(),
                detail: "was built with another model than the snapshot".into(),
            });
        }
        rows.extend(read_rows(&m.join(ROWS_PARQUET), true)?);
        if k == 0
            && meta.has_serving_files()
            && meta.vector_scalar == USEARCH_I8
            && !rows.is_empty()
        {
            // Its vectors.usearch holds exactly its rows.parquet's rows (checked on load too).
            vector_base = first_graph.as_deref().map(|path| VectorBase { path, rows: rows.len() });
        }
        files.extend(
            read_files(&m.join(FILES_PARQUET))?.into_iter().map(|f| (meta.repo.clone(), f)),
        );
        changes.extend(
            read_changes(&m.join(CHANGES_PARQUET))?.into_iter().map(|c| (meta.repo.clone(), c)),
        );
        members.push(meta.id);
        repos.push(meta.repo);
    }
    let input = IndexInputs {
        rows: rows.iter().collect(),
        files: files.iter().map(|(r, f)| (r.as_str(), f)).collect(),
        changes: changes.iter().map(|(r, c)| (r.as_str(), c)).collect(),
        analyzers: Analyzers::current(),
        vector_base,
    };
    write_indexes(dir, &input, model.dim)?;
    crate::edges::merge_edge_indexes(dir, member_dirs)?;
    let meta = finish_meta(
        dir,
        id.to_string(),
        String::new(),
        &input.rows,
        model.clone(),
        members,
        repos,
    )?;
    name_by_write(dir, meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build segment of format 4: it has serving files of its own.
    fn seg(repo: &str, rows: u64) -> ManifestSegment {
        let graph = crate::manifest::FileEntry {
            path: VECTORS_USEARCH.into(),
            bytes: 1,
            sha256: String::new(),
        };
        ManifestSegment { files: vec![graph], ..lean(repo, rows) }
    }

    /// A build segment of format 5: its rows only.
    fn lean(repo: &str, rows: u64) -> ManifestSegment {
        ManifestSegment {
            id: format!("{repo}-id"),
            repo: repo.into(),
            rows,
            rows_per_type: Default::default(),
            segment_json_sha256: String::new(),
            files: Vec::new(),
            members: Vec::new(),
            input_sha256: None,
            history: None,
        }
    }

    #[test]
    fn every_format_5_segment_is_in_a_group_and_older_ones_alone_stay_alone() {
        let mut all: Vec<ManifestSegment> =
            (0..40).map(|i| lean(&format!("org/small{i:02}"), 1_500)).collect();
        all.push(lean("org/huge", 600_000));
        all.push(lean("org/mid", 40_000));
        all.push(seg("org/old-huge", 700_000));
        let groups = plan_merges(&all);
        let covered: Vec<&str> = groups.iter().flatten().map(|s| s.repo.as_str()).collect();
        for s in all.iter().filter(|s| !s.has_serving_files()) {
            assert_eq!(covered.iter().filter(|r| **r == s.repo).count(), 1, "{}", s.repo);
        }
        assert!(!covered.contains(&"org/old-huge"), "a format-4 segment alone serves itself");
        assert!(groups.iter().any(|g| g.len() == 1 && g[0].repo == "org/huge"));
        // Groups of one and of many alike: the small ones still share units.
        assert!(groups.len() < 20, "{} groups", groups.len());
    }

    #[test]
    fn a_large_merge_builds_its_graph_on_every_core_whichever_way_it_writes_its_indexes() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(graph_threads(PARALLEL_GRAPH_MIN_ROWS - 1), 1, "one thread: the same bytes");
        assert_eq!(graph_threads(PARALLEL_GRAPH_MIN_ROWS), cores);
        assert_eq!(graph_threads(MERGED_TIER2_MAX_ROWS), cores);
    }

    /// Side by side a merge's text index has the writer's whole heap; in turn it is held under
    /// what the unit's graph holds, between the floor and the writer's heap.
    #[test]
    fn a_merge_in_turn_holds_its_text_index_under_its_graph() {
        let full = crate::serving::WRITER_HEAP_BYTES;
        let (usearch, codes) = (GraphBuilder::Usearch, GraphBuilder::HnswWriter);
        let heap = |vectors, indexes, builder| merge_text_heap(vectors, indexes, builder);
        for vectors in [0, 50_000, 143_684, 10_000_000] {
            for builder in [usearch, codes] {
                assert_eq!(heap(vectors, MergeIndexes::SideBySide, builder), full, "{vectors}");
            }
        }
        // The largest unit of a 400k-commit history: 111,717 rows and 31,967 second vectors.
        let in_turn = heap(143_684, MergeIndexes::InTurn, usearch) as u64;
        let graph = 143_684 * usearch.bytes_per_vector();
        assert!(in_turn < graph && in_turn > graph / 2, "{in_turn} against a graph of {graph}");
        // On the writer's graph, a third the bytes, the floor.
        assert_eq!(heap(143_684, MergeIndexes::InTurn, codes), MIN_MERGE_TEXT_HEAP);
        assert_eq!(heap(10_000, MergeIndexes::InTurn, usearch), MIN_MERGE_TEXT_HEAP);
        assert_eq!(heap(u64::MAX, MergeIndexes::InTurn, codes), full);
        for builder in [usearch, codes] {
            let mut last = 0;
            for vectors in (0..1_000_000).step_by(7_919) {
                let h = heap(vectors, MergeIndexes::InTurn, builder);
                assert!(h >= last && h >= 15_000_000, "{vectors}: {h} after {last}");
                last = h;
            }
        }
    }

    /// Side by side a merge's graph is usearch's; in turn, usearch's while it fits the
    /// allowance, the writer's past it.
    #[test]
    fn a_merge_in_turn_builds_its_graph_on_the_writer_past_its_allowance() {
        let allowance = 48 << 20;
        let fits = allowance / GraphBuilder::Usearch.bytes_per_vector();
        for (vectors, indexes, builder) in [
            (fits, MergeIndexes::InTurn, GraphBuilder::Usearch),
            (fits + 1, MergeIndexes::InTurn, GraphBuilder::HnswWriter),
            (u64::MAX, MergeIndexes::InTurn, GraphBuilder::HnswWriter),
            (u64::MAX, MergeIndexes::SideBySide, GraphBuilder::Usearch),
            (0, MergeIndexes::InTurn, GraphBuilder::Usearch),
        ] {
            assert_eq!(
                graph_builder(vectors, indexes, allowance),
                builder,
                "{vectors} {indexes:?}"
            );
        }
        assert_eq!(graph_builder(1, MergeIndexes::InTurn, 0), GraphBuilder::HnswWriter);
        assert_eq!(MergeLimits::within(allowance).in_turn_bytes, allowance);
        assert_eq!(MergeLimits::one_at_a_time().in_turn_bytes, u64::MAX);
    }

    #[test]
    fn large_segments_merge_in_their_own_tier_and_huge_ones_stay_alone() {
        let mut all: Vec<ManifestSegment> =
            (0..20).map(|i| seg(&format!("org/large{i:02}"), 50_000)).collect();
        all.push(seg("org/huge", 600_000));
        all.push(seg("org/tiny", 100));
        let groups = plan_merges(&all);
        assert!(
            groups.iter().all(|g| g.iter().all(|s| s.repo != "org/huge" && s.repo != "org/tiny"))
        );
        for g in &groups {
            assert!(g.iter().map(|s| s.rows).sum::<u64>() <= MERGED_TIER2_MAX_ROWS);
        }
        let merged: usize = groups.iter().map(Vec::len).sum();
        let units = groups.len() + (20 - merged) + 2;
        assert!(units <= 10, "{units} serving units for 20 large segments: {groups:?}");
    }

    #[test]
    fn small_segments_group_near_the_target_and_big_ones_stay_alone() {
        let mut all: Vec<ManifestSegment> =
            (0..500).map(|i| seg(&format!("org/repo{i:03}"), 2_000)).collect();
        all.push(seg("org/big", 50_000));
        let groups = plan_merges(&all);
        assert!(groups.iter().all(|g| g.iter().all(|s| s.repo != "org/big")));
        let merged: u64 = groups.iter().map(|g| g.len() as u64).sum();
        assert!(merged >= 490, "{merged} of 500 small segments merged");
        for g in &groups {
            assert!(g.iter().map(|s| s.rows).sum::<u64>() <= MERGED_MAX_ROWS);
        }
        let n = groups.len();
        assert!((8..=30).contains(&n), "{n} groups for 1M rows");
    }

    #[test]
    fn a_change_to_one_repository_rewrites_only_its_group() {
        let all: Vec<ManifestSegment> =
            (0..300).map(|i| seg(&format!("org/repo{i:03}"), 1_500)).collect();
        let before: Vec<String> = plan_merges(&all).iter().map(|g| merged_id(g)).collect();
        let mut changed = all.clone();
        changed[150].id = "org/repo150-new".into();
        changed[150].rows = 1_600;
        let after: Vec<String> = plan_merges(&changed).iter().map(|g| merged_id(g)).collect();
        let gone = before.iter().filter(|id| !after.contains(id)).count();
        assert_eq!(gone, 1, "one group rewritten: {before:?} -> {after:?}");
    }

    #[test]
    fn a_new_last_build_segment_of_a_repository_rewrites_only_the_group_at_its_end() {
        // A history cut into 60 build segments (ids are content hashes: in no order), then a
        // new commit: its last build segment has a new id.
        let id = |i: u64| format!("org/big-{}", &crate::row::sha256_hex(&i.to_le_bytes())[..16]);
        let all: Vec<ManifestSegment> =
            (0..60).map(|i| ManifestSegment { id: id(i), ..lean("org/big", 2_000) }).collect();
        let before: Vec<String> = plan_merges(&all).iter().map(|g| merged_id(g)).collect();
        assert!(before.len() > 1, "{before:?}");
        let mut changed = all.clone();
        changed[59] = ManifestSegment { id: id(1_000), ..lean("org/big", 2_001) };
        let after: Vec<String> = plan_merges(&changed).iter().map(|g| merged_id(g)).collect();
        let gone: Vec<&String> = before.iter().filter(|id| !after.contains(id)).collect();
        assert_eq!(gone.len(), 1, "one group rewritten: {before:?} -> {after:?}");
        assert_eq!(gone[0], before.last().unwrap(), "the group at the repository's end");
    }

    /// Segment ids come from a store listing, which anyone with write access to the bucket can
    /// add to: only the members id itself or it with one lowercase 16-hex write suffix serve it.
    #[test]
    fn only_the_members_id_or_one_write_of_it_is_taken_as_serving_those_members() {
        let members = merged_id(&[seg("org/a", 10), seg("org/b", 20)]);
        let other = merged_id(&[seg("org/a", 10)]);
        let write = format!("{members}-0123456789abcdef");
        assert!(is_write_of(&members, &members));
        assert!(is_write_of(&write, &members));
        assert!(is_write_of(&format!("{members}-{}", "f".repeat(16)), &members));
        let look_alikes = [
            format!("{members}-0123456789ABCDEF"),  // uppercase hex
            format!("{members}-0123456789abcde"),   // one short
            format!("{members}-0123456789abcdef0"), // one long
            format!("{members}-0123456789abcdeg"),  // not hex
            format!("{members}0123456789abcdef"),   // no dash
            format!("{members}--0123456789abcdef"), // extra dash
            format!("{write}-0123456789abcdef"),    // a write of a write
            format!("{members}-"),                  // empty suffix
            format!("{members}-01234567 89abcdef"), // space
            format!("{members}-0123456789abcdé"),   // multibyte, 16 bytes
            format!("x{write}"),                    // another prefix
            format!("{other}-0123456789abcdef"),    // another unit's write
            other.clone(),
            members[..members.len() - 1].to_string(), // a prefix of the id
            String::new(),
        ];
        for id in &look_alikes {
            assert!(!is_write_of(id, &members), "{id:?} taken as a write of {members}");
        }
        // The members id is fixed-length, so no other unit's id or write starts with it.
        assert_eq!(members.len(), other.len());
    }
}
