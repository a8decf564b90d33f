//! The HNSW index over row ordinals: built by usearch, written as `vectors.hnsw` (format 7,
//! [`crate::hnsw`]; a merge may build it with hubdex's own writer instead,
//! [`crate::hnsw::HnswWriter`]); `vectors.usearch` of formats 1 to 6 is still read, through
//! usearch's view.

use std::path::Path;

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::error::FormatError;
use crate::hnsw::{DEFAULT_EF, HnswIndex, convert_usearch};

/// segment.json's `vector_scalar` for what is written now (format 7): `vectors.hnsw`, the walk
/// on sign codes (b1) and the best candidates rescored on usearch's i8 vectors.
pub const VECTOR_SCALAR: &str = "b1+i8";

/// `vector_scalar` of a `vectors.usearch` in i8 (formats 4 to 6; formats 1 to 3 wrote `f16`).
/// usearch's i8 scales each vector to unit length and then by 127: half the bytes of f16, and
/// no measured loss of retrieval quality (docs/performance.md).
pub const USEARCH_I8: &str = "i8";

/// A model vector as hubdex keeps it (format 8: rows.parquet, the graphs): scaled to unit
/// length and then by 127, each value truncated toward zero into an i8. This is usearch's own
/// cast from f32 to i8, step for step (the magnitude in f64, `x * 127 / magnitude`, clamped,
/// truncated), so a graph built from the kept vector is the graph format 7 built from the
/// model's float32 one; a zero or NaN-length vector is all zeros, as usearch makes it. The
/// cosine of two kept vectors is their models' cosine within the rounding (docs/format.md).
pub fn quantize(v: &[f32]) -> Vec<i8> {
    let magnitude = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    // Zero, or NaN from a NaN value (usearch's `!(magnitude > 0)`).
    if magnitude.is_nan() || magnitude <= 0.0 {
        return vec![0; v.len()];
    }
    // `as i8` truncates toward zero, as C++'s static_cast does; the clamp keeps it in range.
    v.iter().map(|&x| (f64::from(x) * 127.0 / magnitude).clamp(-127.0, 127.0) as i8).collect()
}

/// The vector file of a segment whose segment.json says `vector_scalar`.
pub fn vector_file(vector_scalar: &str) -> &'static str {
    if vector_scalar == VECTOR_SCALAR {
        crate::manifest::VECTORS_HNSW
    } else {
        crate::manifest::VECTORS_USEARCH
    }
}

/// Saves a built usearch index as `vectors.hnsw` at `path`: through a usearch file beside it,
/// converted and removed. The index is dropped once saved, so the conversion (which maps the
/// saved file) does not hold the graph a second time.
fn save_as_hnsw(index: Index, path: &Path, dim: usize) -> Result<(), FormatError> {
    let tmp = path.with_extension("usearch-tmp");
    index.save(utf8(&tmp)?).map_err(vector_error(&tmp))?;
    drop(index);
    let converted = convert_usearch(&tmp, path, dim);
    let removed = std::fs::remove_file(&tmp).map_err(|e| FormatError::io(&tmp, e));
    converted.and(removed)
}

/// The usearch scalar kind a segment.json's `vector_scalar` names, and its bytes per dimension.
fn scalar_kind(name: &str) -> Option<(ScalarKind, u64)> {
    match name {
        "f16" => Some((ScalarKind::F16, 2)),
        "i8" => Some((ScalarKind::I8, 1)),
        _ => None,
    }
}

fn options(dim: usize, quantization: ScalarKind) -> IndexOptions {
    IndexOptions {
        dimensions: dim,
        metric: MetricKind::Cos,
        quantization,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 96,
        multi: false,
    }
}

pub use crate::hnsw::SECOND_VECTOR;

/// The row ordinal a vector key stands for.
fn ordinal_of(key: u64) -> u64 {
    key & (SECOND_VECTOR - 1)
}

/// Writes an HNSW index of `vectors` (key = position) and of the `second` vectors of some rows
/// (`(ordinal, vector)`, key = [`SECOND_VECTOR`] + ordinal) to `path`, as `vectors.hnsw`.
pub fn write_vector_index(
    path: &Path,
    dim: usize,
    vectors: &[&[i8]],
    second: &[(u32, &[i8])],
) -> Result<(), FormatError> {
    write_vector_index_from(path, dim, vectors, second, None)
}

/// An index already written for the first rows of a new one: the vectors of ordinals below
/// `rows` (and their second vectors), a `vectors.usearch` in [`USEARCH_I8`] (a format-4 build
/// segment's).
#[derive(Debug, Clone, Copy)]
pub struct VectorBase<'a> {
    /// Its `vectors.usearch`.
    pub path: &'a Path,
    /// The rows it holds: ordinals `0..rows`.
    pub rows: usize,
}

/// Vectors a graph built on several threads takes in at a time (one batch is split among the
/// threads; about 1.5 MiB of 384-dimension vectors).
const GRAPH_BATCH: usize = 4096;

/// The vector index being built a vector at a time (no first graph to start from): a merge
/// streams its members' vectors into it, main vectors in row order, then the second vectors,
/// as [`write_vector_index_from`] inserts them.
///
/// On one thread the file is the same bytes as [`write_vector_index_from`] writes. On more,
/// vectors are taken in batches of [`GRAPH_BATCH`] and each batch is inserted by every thread
/// at once (usearch's graph takes concurrent inserts): the same vectors and as good a graph,
/// but which links a node gets depends on how the threads interleave, so two builds differ in
/// bytes (a merged segment's id names its write: [`crate::merge`]).
pub(crate) struct VectorIndexBuilder {
    index: Index,
    path: std::path::PathBuf,
    dim: usize,
    threads: usize,
    batch: Vec<(u64, Vec<i8>)>,
}

impl VectorIndexBuilder {
    /// An empty index of `dim` dimensions with room for `capacity` vectors, inserted on
    /// `threads` threads (at least one).
    pub(crate) fn new(
        path: &Path,
        dim: usize,
        capacity: usize,
        threads: usize,
    ) -> Result<Self, FormatError> {
        let err = vector_error(path);
        let threads = threads.max(1);
        let index = Index::new(&options(dim, ScalarKind::I8)).map_err(&err)?;
        index.reserve_capacity_and_threads(capacity.max(1), threads).map_err(&err)?;
        let batch = Vec::with_capacity(if threads > 1 { GRAPH_BATCH } else { 0 });
        Ok(VectorIndexBuilder { index, path: path.to_path_buf(), dim, threads, batch })
    }

    /// Adds the main vector of row `ordinal`.
    pub(crate) fn add(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        self.insert(ordinal as u64, v)
    }

    /// Adds the second (title) vector of row `ordinal`.
    pub(crate) fn add_second(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        self.insert(SECOND_VECTOR + ordinal as u64, v)
    }

    fn insert(&mut self, key: u64, v: &[i8]) -> Result<(), FormatError> {
        if self.threads == 1 {
            return self.index.add(key, v).map_err(vector_error(&self.path));
        }
        self.batch.push((key, v.to_vec()));
        if self.batch.len() == GRAPH_BATCH { self.insert_batch() } else { Ok(()) }
    }

    /// Inserts the batch taken in so far, each thread every `threads`-th vector of it.
    fn insert_batch(&mut self) -> Result<(), FormatError> {
        let (index, batch, threads) = (&self.index, &self.batch, self.threads);
        let failed = std::thread::scope(|s| {
            let inserting: Vec<_> =
                (0..threads)
                    .map(|t| {
                        s.spawn(move || {
                            batch.iter().skip(t).step_by(threads).try_for_each(|(key, v)| {
                                index.add(*key, v).map_err(|e| e.to_string())
                            })
                        })
                    })
                    .collect();
            let ended: Vec<_> = inserting.into_iter().map(|t| t.join()).collect();
            ended.into_iter().find_map(|r| match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a thread inserting vectors panicked".to_string()),
            })
        });
        self.batch.clear();
        match failed {
            None => Ok(()),
            Some(detail) => Err(FormatError::Vectors { path: self.path.clone(), detail }),
        }
    }

    /// Writes the index to its file (`vectors.hnsw`).
    pub(crate) fn save(mut self) -> Result<(), FormatError> {
        if !self.batch.is_empty() {
            self.insert_batch()?;
        }
        save_as_hnsw(self.index, &self.path, self.dim)
    }
}

/// [`write_vector_index`], starting from `base`'s graph when given: only the vectors of
/// ordinals from `base.rows` on are inserted (what a merge of segments costs is then the
/// members after the first, not all of them). Deterministic either way.
pub fn write_vector_index_from(
    path: &Path,
    dim: usize,
    vectors: &[&[i8]],
    second: &[(u32, &[i8])],
    base: Option<VectorBase<'_>>,
) -> Result<(), FormatError> {
    let err = vector_error(path);
    let index = Index::new(&options(dim, ScalarKind::I8)).map_err(&err)?;
    let start = match base {
        None => 0,
        Some(b) => {
            index.load(utf8(b.path)?).map_err(vector_error(b.path))?;
            let base_second = second.iter().filter(|(o, _)| (*o as usize) < b.rows).count();
            if b.rows > vectors.len()
                || index.size() != b.rows + base_second
                || index.dimensions() != dim
            {
                return Err(FormatError::Vectors {
                    path: b.path.to_path_buf(),
                    detail: format!(
                        "holds {} vectors of {} dimensions, not the {} rows and {base_second} \
                         second vectors of the merge's first member",
                        index.size(),
                        index.dimensions(),
                        b.rows
                    ),
                });
            }
            b.rows
        }
    };
    index.reserve((vectors.len() + second.len()).max(1)).map_err(&err)?;
    for (i, v) in vectors.iter().enumerate().skip(start) {
        index.add(i as u64, v).map_err(&err)?;
    }
    for (ordinal, v) in second.iter().filter(|(o, _)| *o as usize >= start) {
        index.add(SECOND_VECTOR + *ordinal as u64, v).map_err(&err)?;
    }
    save_as_hnsw(index, path, dim)
}

/// The path as usearch takes it.
fn utf8(path: &Path) -> Result<&str, FormatError> {
    path.to_str().ok_or_else(|| FormatError::Vectors {
        path: path.to_path_buf(),
        detail: "path is not valid UTF-8".into(),
    })
}

fn vector_error<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> FormatError + '_ {
    move |e| FormatError::Vectors { path: path.to_path_buf(), detail: e.to_string() }
}

/// Searches that may run on one index at once. usearch keeps one search context per thread
/// slot and fails a search when none is free, so the slots are reserved at open and a search
/// waits for a free one.
const SEARCH_SLOTS: usize = 16;

/// A counting semaphore over the search slots.
#[derive(Debug)]
struct Slots {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    fn acquire(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        SlotGuard(self)
    }
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// A read-only, memory-mapped vector index: a `vectors.hnsw` (format 7) or a usearch view of an
/// older `vectors.usearch`.
#[derive(Debug)]
pub struct VectorIndex(MappedGraph);

enum MappedGraph {
    Hnsw(HnswIndex),
    Usearch {
        index: Index,
        /// How many rows have a second vector.
        second: u64,
        slots: Slots,
    },
}

impl std::fmt::Debug for MappedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MappedGraph::Hnsw(h) => h.fmt(f),
            MappedGraph::Usearch { index, .. } => {
                f.debug_struct("Usearch").field("size", &index.size()).finish()
            }
        }
    }
}

impl VectorIndex {
    /// Opens `path`, written as segment.json's `vector_scalar` says ([`vector_file`] names the
    /// file), after checking that its header fits the expected dimension and vector count
    /// (`rows`, plus `second` rows' second vectors) and that the file is as long as the header
    /// needs, before anything is mapped.
    pub fn open(
        path: &Path,
        dim: usize,
        rows: u64,
        second: u64,
        scalar: &str,
    ) -> Result<Self, FormatError> {
        if scalar == VECTOR_SCALAR {
            return Ok(VectorIndex(MappedGraph::Hnsw(HnswIndex::open(path, dim, rows, second)?)));
        }
        let bad = |detail: String| FormatError::Vectors { path: path.to_path_buf(), detail };
        let (kind, bytes_per_dim) = scalar_kind(scalar).ok_or_else(|| {
            bad(format!("vector_scalar {scalar:?} is not {VECTOR_SCALAR}, f16 or i8"))
        })?;
        let s = utf8(path)?;
        let file_len = std::fs::metadata(path).map_err(|e| FormatError::io(path, e))?.len();
        let meta = Index::metadata(s).map_err(|e| bad(format!("header: {e}")))?;
        if meta.dimensions as usize != dim {
            return Err(bad(format!(
                "header says {} dimensions, the model has {dim}",
                meta.dimensions
            )));
        }
        let vectors = rows.saturating_add(second);
        if meta.count_present != vectors {
            return Err(bad(format!(
                "header says {} vectors, segment has {rows} rows and {second} second vectors",
                meta.count_present
            )));
        }
        // The vectors alone need this many bytes; a header claiming more than the file holds
        // is crafted or cut, and must not reach the native reader.
        let min_bytes = vectors.saturating_mul(dim as u64 * bytes_per_dim);
        if file_len < min_bytes {
            return Err(bad(format!(
                "file has {file_len} bytes, too short for {vectors} vectors of {dim} dimensions"
            )));
        }
        let index = Index::new(&options(dim, kind)).map_err(|e| bad(e.to_string()))?;
        index.view(s).map_err(|e| bad(format!("view: {e}")))?;
        index
            .reserve_capacity_and_threads(vectors as usize, SEARCH_SLOTS)
            .map_err(|e| bad(format!("reserving search threads: {e}")))?;
        let slots = Slots { free: std::sync::Mutex::new(SEARCH_SLOTS), freed: Default::default() };
        Ok(VectorIndex(MappedGraph::Usearch { index, second, slots }))
    }

    /// Up to `limit` (ordinal, cosine similarity) pairs, best first, keeping only ordinals
    /// `allow` accepts. A row with two vectors counts once, by the closer one (max-sim).
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        allow: Option<&(dyn Fn(u64) -> bool + Send + Sync)>,
    ) -> Result<Vec<(u64, f32)>, FormatError> {
        let (index, second, slots) = match &self.0 {
            MappedGraph::Hnsw(h) => {
                return h.search(query, limit, DEFAULT_EF, None, allow);
            }
            MappedGraph::Usearch { index, second, slots } => (index, second, slots),
        };
        if index.size() == 0 {
            return Ok(Vec::new());
        }
        // Both vectors of a row may come back: ask for enough to still give `limit` rows.
        let wanted = limit + (*second as usize).min(limit);
        let _slot = slots.acquire();
        let m = match allow {
            Some(allow) => index.filtered_search(query, wanted, |k: u64| allow(ordinal_of(k))),
            None => index.search(query, wanted),
        }
        .map_err(|e| FormatError::Vectors { path: Default::default(), detail: e.to_string() })?;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(limit);
        for (k, d) in m.keys.into_iter().zip(m.distances) {
            if out.len() == limit {
                break;
            }
            if seen.insert(ordinal_of(k)) {
                out.push((ordinal_of(k), 1.0 - d));
            }
        }
        Ok(out)
    }

    /// The format-7 graph, when it is one (benches measure its walk at other widths).
    pub fn hnsw(&self) -> Option<&HnswIndex> {
        match &self.0 {
            MappedGraph::Hnsw(h) => Some(h),
            MappedGraph::Usearch { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(vectors: &[Vec<f32>]) -> Vec<Vec<i8>> {
        vectors.iter().map(|v| quantize(v)).collect()
    }

    /// Numbers in [-1, 1) from an xorshift generator seeded with `seed`: the same every run.
    fn uniform(mut seed: u64) -> impl FnMut() -> f32 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
        }
    }

    #[test]
    fn quantize_keeps_what_usearch_keeps_of_a_float_vector() {
        // usearch's i8 index casts each f32 vector it is given; the vector read back is what
        // it kept. `quantize` must give the same bytes, or a graph built from rows.parquet's
        // i8 vectors would not be the graph built from the model's floats.
        let mut next = uniform(0x2545_f491_4f6c_dd1d);
        let dim = 384;
        let mut vectors: Vec<Vec<f32>> =
            (0..500).map(|_| (0..dim).map(|_| next() * next()).collect()).collect();
        // Edge cases: a unit axis (exactly 127), a tiny vector, halves that land on .5 steps,
        // and the zero vector.
        vectors.push((0..dim).map(|i| if i == 3 { 1.0 } else { 0.0 }).collect());
        vectors.push((0..dim).map(|i| 1e-30 * (i as f32 - 100.0)).collect());
        vectors.push((0..dim).map(|i| ((i % 7) as f32 - 3.0) / 2.0).collect());
        vectors.push(vec![0.0; dim]);
        let index = Index::new(&options(dim, ScalarKind::I8)).unwrap();
        index.reserve(vectors.len()).unwrap();
        for (i, v) in vectors.iter().enumerate() {
            index.add(i as u64, v).unwrap();
        }
        for (i, v) in vectors.iter().enumerate() {
            let mut stored = vec![0i8; dim];
            assert_eq!(index.get(i as u64, &mut stored).unwrap(), 1);
            assert_eq!(quantize(v), stored, "vector {i}");
        }
        assert_eq!(quantize(&vectors[500])[3], 127);
    }

    #[test]
    fn a_graph_built_on_several_threads_holds_every_vector_and_finds_each_as_well() {
        // 6,000 rows (two batches and a part of one), every tenth with a second vector.
        let (dim, n) = (64, 6_000);
        let mut next = uniform(0x9e37_79b9_7f4a_7c15);
        let vectors: Vec<Vec<f32>> = (0..n).map(|_| (0..dim).map(|_| next()).collect()).collect();
        let seconds: Vec<(u32, Vec<f32>)> =
            (0..n as u32).step_by(10).map(|o| (o, (0..dim).map(|_| next()).collect())).collect();
        let dir = tempfile::tempdir().unwrap();
        let build = |threads: usize| {
            let path = dir.path().join(format!("{threads}.hnsw"));
            let mut b = VectorIndexBuilder::new(&path, dim, n + seconds.len(), threads).unwrap();
            for (i, v) in vectors.iter().enumerate() {
                b.add(i, &quantize(v)).unwrap();
            }
            for (o, v) in &seconds {
                b.add_second(*o as usize, &quantize(v)).unwrap();
            }
            b.save().unwrap();
            path
        };
        let (one, three, again) = (build(1), build(3), build(1));
        let bytes = |p: &Path| std::fs::read(p).unwrap();
        assert_eq!(bytes(&one), bytes(&again), "one thread: the same bytes every time");
        let found = |path: &Path| {
            let index = VectorIndex::open(path, dim, n as u64, seconds.len() as u64, VECTOR_SCALAR)
                .unwrap();
            let mut first = 0;
            for (i, v) in vectors.iter().enumerate().step_by(7) {
                first += usize::from(index.search(v, 1, None).unwrap()[0].0 == i as u64);
            }
            for (o, v) in seconds.iter().step_by(3) {
                first += usize::from(index.search(v, 1, None).unwrap()[0].0 == u64::from(*o));
            }
            first
        };
        let asked = n.div_ceil(7) + seconds.len().div_ceil(3);
        let (by_one, by_three) = (found(&one), found(&three));
        assert!(by_one * 100 >= asked * 98, "one thread found {by_one} of {asked} first");
        assert!(by_three * 100 >= asked * 98, "three threads found {by_three} of {asked} first");
    }

    #[test]
    fn more_concurrent_searches_than_slots_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.usearch");
        let vectors: Vec<Vec<f32>> =
            (0..200).map(|i| (0..8).map(|d| ((i * 7 + d) % 13) as f32 + 0.5).collect()).collect();
        let kept = kept(&vectors);
        let refs: Vec<&[i8]> = kept.iter().map(Vec::as_slice).collect();
        write_vector_index(&path, 8, &refs, &[]).unwrap();
        let index =
            std::sync::Arc::new(VectorIndex::open(&path, 8, 200, 0, VECTOR_SCALAR).unwrap());
        let threads: Vec<_> = (0..SEARCH_SLOTS * 3)
            .map(|t| {
                let index = index.clone();
                let q = vectors[t % 200].clone();
                std::thread::spawn(move || {
                    (0..50).map(|_| index.search(&q, 5, None).map(|r| r.len())).collect::<Vec<_>>()
                })
            })
            .collect();
        for t in threads {
            for r in t.join().unwrap() {
                assert_eq!(r.unwrap(), 5);
            }
        }
    }

    #[test]
    fn a_row_with_two_vectors_is_found_by_either_once_with_the_closer_and_filtered_by_ordinal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.usearch");
        let unit =
            |d: usize| -> Vec<f32> { (0..8).map(|i| if i == d { 1.0 } else { 0.0 }).collect() };
        // Rows 0..4 point along axes 0..4; row 1's second vector points along axis 6.
        let vectors: Vec<Vec<f32>> = (0..4).map(unit).collect();
        let kept = kept(&vectors);
        let refs: Vec<&[i8]> = kept.iter().map(Vec::as_slice).collect();
        let second = quantize(&unit(6));
        write_vector_index(&path, 8, &refs, &[(1, second.as_slice())]).unwrap();
        assert!(VectorIndex::open(&path, 8, 4, 0, VECTOR_SCALAR).is_err(), "the count is checked");
        let index = VectorIndex::open(&path, 8, 4, 1, VECTOR_SCALAR).unwrap();
        // Along axis 6 only row 1's second vector is close: it answers as row 1.
        let hits = index.search(&unit(6), 4, None).unwrap();
        assert_eq!(hits[0].0, 1);
        assert!(hits[0].1 > 0.99, "{hits:?}");
        // Halfway between axis 1 and 6, both of row 1's vectors are close: one hit for row 1.
        let mid: Vec<f32> = (0..8).map(|i| if i == 1 || i == 6 { 0.7 } else { 0.0 }).collect();
        let hits = index.search(&mid, 4, None).unwrap();
        assert_eq!(hits.iter().filter(|h| h.0 == 1).count(), 1, "{hits:?}");
        assert_eq!(hits.len(), 4, "still four rows: {hits:?}");
        // A filter sees ordinals: without row 1, its second vector is not found either.
        let hits = index.search(&unit(6), 4, Some(&|k: u64| k != 1)).unwrap();
        assert!(hits.iter().all(|h| h.0 != 1), "{hits:?}");
    }

    #[test]
    fn an_index_extended_from_a_base_holds_every_row_and_second_vector_once() {
        let dir = tempfile::tempdir().unwrap();
        let unit =
            |d: usize| -> Vec<f32> { (0..8).map(|i| if i == d { 1.0 } else { 0.0 }).collect() };
        // Rows 0..3 are the base (row 1 has a second vector); rows 3..6 are added to it (row 4
        // has one too).
        let vectors: Vec<Vec<f32>> = (0..6).map(unit).collect();
        let kept = kept(&vectors);
        let refs: Vec<&[i8]> = kept.iter().map(Vec::as_slice).collect();
        let (s1, s4) = (quantize(&unit(6)), quantize(&unit(7)));
        // A base is a format-4 segment's vectors.usearch: written by usearch as it was then.
        let base = dir.path().join("base.usearch");
        let graph = Index::new(&options(8, ScalarKind::I8)).unwrap();
        graph.reserve(4).unwrap();
        for (i, v) in refs[..3].iter().enumerate() {
            graph.add(i as u64, v).unwrap();
        }
        graph.add(SECOND_VECTOR + 1, &s1).unwrap();
        graph.save(base.to_str().unwrap()).unwrap();
        let path = dir.path().join("v.usearch");
        let second = [(1, s1.as_slice()), (4, s4.as_slice())];
        let from = Some(VectorBase { path: &base, rows: 3 });
        write_vector_index_from(&path, 8, &refs, &second, from).unwrap();
        let index = VectorIndex::open(&path, 8, 6, 2, VECTOR_SCALAR).unwrap();
        for (row, v) in [(0, unit(0)), (1, unit(6)), (3, unit(3)), (4, unit(7)), (5, unit(5))] {
            let hits = index.search(&v, 6, None).unwrap();
            assert_eq!(hits[0].0, row, "{hits:?}");
            assert_eq!(hits.len(), 6, "every row once: {hits:?}");
        }
        // A base that does not hold what it is said to hold is refused, naming the file.
        let wrong = Some(VectorBase { path: &base, rows: 2 });
        let err = write_vector_index_from(&path, 8, &refs, &second, wrong).unwrap_err();
        assert!(err.to_string().contains("base.usearch"), "{err}");
    }
}
