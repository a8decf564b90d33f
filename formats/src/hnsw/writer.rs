//! Writing `vectors.hnsw` without holding its i8 vectors: a graph builder that keeps,
//! per vector, its sign code, its links and its key (about 190 bytes at 384 dimensions, where
//! usearch's builder held ~600), and the i8 vectors in a file beside the one it writes.
//!
//! The graph is HNSW's, with usearch's shape at connectivity 16 (levels drawn as HNSW draws
//! them, [`M0`] links on level 0 and [`M`] above, an insert's beam [`EF_ADD`] wide):
//!
//! - **The walk is on the codes.** An insert descends greedily through the levels above the new
//!   node's, then on each of its own levels keeps a beam of the [`EF_ADD`] best nodes, each
//!   scored from its sign code as a search scores it (the new vector's values summed with the
//!   code's signs, [`nibble_table`]).
//! - **The links are chosen on exact cosines.** The nodes the beam kept are read from the
//!   vector file (positioned reads, through the page cache, not this process's memory) and
//!   rescored on their i8 vectors; the new node links to up to [`M`] of them on every level, as
//!   usearch's builder does (level 0's other slots are left to the links back), those HNSW's
//!   heuristic keeps (a candidate is kept when it is closer to the new node than to any kept
//!   before it).
//! - **A full list is pruned on exact cosines too.** A neighbour that takes a link back when its
//!   list is full is cut back by the same heuristic on its own vector and its links', read back
//!   the same way (up to [`M0`] + 1 reads). Pruning on Hamming distances between codes instead
//!   (in memory, no reads) saved 3–7 s on the 400k history's largest unit and cost 3–4 points
//!   of recall (docs/performance.md).
//!
//! Vectors are inserted in batches of [`BATCH`]. A batch's walks and choices are made on every
//! thread at once against the graph as it stood before the batch, each node also taking the
//! batch's earlier nodes as candidates (scored exactly: their vectors are in memory); then the
//! links are written in order, and the lists that take links back are pruned, again on every
//! thread, each list by one thread. Nothing depends on which thread did what: the same vectors
//! in the same order give the same bytes on any number of threads.
//!
//! The codes are signs around a mean given up front (a merge computes it in a pass over its
//! members' vectors, [`MeanOf`]), so the walk scores the codes the written file serves.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{HEADER, Header, SECOND_BIT, Score, SectionWriter, bad, unit_of};
use crate::error::FormatError;

/// Links a node keeps on level 0 (usearch's `connectivity_base`, twice [`M`]).
const M0: usize = 32;
/// Links a node keeps on each level above 0 (usearch's connectivity, as format 7 was built).
const M: usize = 16;
/// How many nodes an insert's beam keeps on each of its levels (usearch's `expansion_add`).
const EF_ADD: usize = 128;
/// The highest level a node is given (a level is drawn as HNSW draws it, ~1 node in 16 above
/// level 0; level 17 would take 16^17 nodes).
const MAX_LEVEL: usize = 16;
/// Vectors inserted together: walked and linked on every thread against the graph before them.
const BATCH: usize = 256;

/// The mean of unit vectors, added an i8 vector at a time: the point a graph's sign codes are
/// taken around ([`convert_usearch`](super::convert_usearch) computes the same).
pub(crate) struct MeanOf {
    sum: Vec<f64>,
    unit: Vec<f32>,
    bytes: Vec<u8>,
    count: u64,
}

impl MeanOf {
    pub(crate) fn new(dim: usize) -> Self {
        MeanOf { sum: vec![0.0; dim], unit: vec![0.0; dim], bytes: Vec::new(), count: 0 }
    }

    /// Adds a vector's bytes (i8 values as u8, as a usearch file holds them).
    pub(crate) fn add(&mut self, v: &[u8]) {
        unit_of(v, &mut self.unit);
        self.sum.iter_mut().zip(&self.unit).for_each(|(m, x)| *m += f64::from(*x));
        self.count += 1;
    }

    /// Adds an i8 vector.
    pub(crate) fn add_i8(&mut self, v: &[i8]) {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        bytes.extend(v.iter().map(|&x| x as u8));
        self.add(&bytes);
        self.bytes = bytes;
    }

    pub(crate) fn mean(&self) -> Vec<f32> {
        self.sum.iter().map(|m| (*m / self.count.max(1) as f64) as f32).collect()
    }
}

/// The sign code of the unit vector `unit` around `mean`: bit b of byte k set when dimension
/// 8k+b is above the mean.
pub(crate) fn code_of(unit: &[f32], mean: &[f32], code: &mut [u8]) {
    code.fill(0);
    for (d, (x, m)) in unit.iter().zip(mean).enumerate() {
        if x > m {
            code[d / 8] |= 1 << (d % 8);
        }
    }
}

/// A query's table over sign codes by halves of bytes: for each 4 dimensions, the estimate's
/// part for each of the 16 values of their bits (a set bit adds the query's value, a clear one
/// subtracts it): the sums of the search's byte table (`HnswIndex::table`) in 16 entries where
/// it has 256, so a walk reads it from the first-level cache (6 KiB at 384 dimensions, where
/// the byte table is 48).
fn nibble_table(query: &[f32], code_bytes: usize) -> Vec<[f32; 16]> {
    (0..2 * code_bytes)
        .map(|h| {
            let mut t = [0f32; 16];
            for (v, e) in t.iter_mut().enumerate() {
                for b in 0..4 {
                    let q = query.get(4 * h + b).copied().unwrap_or(0.0);
                    *e += if v & (1 << b) != 0 { q } else { -q };
                }
            }
            t
        })
        .collect()
}

/// A code's estimate by a [`nibble_table`] (only its order among codes means anything), summed
/// in four running parts so the additions do not wait on each other.
fn estimate(table: &[[f32; 16]], code: &[u8]) -> f32 {
    let mut part = [0f32; 4];
    for (pair, t) in code.chunks(2).zip(table.chunks(4)) {
        for (k, &b) in pair.iter().enumerate() {
            part[2 * k] += t[2 * k][usize::from(b & 15)];
            part[2 * k + 1] += t[2 * k + 1][usize::from(b >> 4)];
        }
    }
    (part[0] + part[1]) + (part[2] + part[3])
}

/// The dot product of two vectors of i8 values held as i16 (exact, in integers).
fn dot(a: &[i16], b: &[i16]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// Each node's links, level 0 at a fixed stride (count, then [`M0`] slots) and the few nodes
/// above it in a map (count, then [`M`] slots, for each of levels 1..=L).
struct Links {
    level0: Vec<u32>,
    upper: HashMap<u32, Vec<u32>>,
}

impl Links {
    fn push_node(&mut self, slot: u32, level: usize) {
        self.level0.extend(std::iter::repeat_n(0, 1 + M0));
        if level > 0 {
            self.upper.insert(slot, vec![0; level * (1 + M)]);
        }
    }

    fn list(&self, slot: u32, level: usize) -> &[u32] {
        let words = if level == 0 {
            &self.level0[slot as usize * (1 + M0)..][..1 + M0]
        } else {
            match self.upper.get(&slot) {
                Some(w) if w.len() >= level * (1 + M) => &w[(level - 1) * (1 + M)..][..1 + M],
                _ => return &[],
            }
        };
        &words[1..1 + words[0] as usize]
    }

    fn set(&mut self, slot: u32, level: usize, to: &[u32]) {
        let words = if level == 0 {
            &mut self.level0[slot as usize * (1 + M0)..][..1 + M0]
        } else {
            match self.upper.get_mut(&slot) {
                Some(w) if w.len() >= level * (1 + M) => &mut w[(level - 1) * (1 + M)..][..1 + M],
                _ => return,
            }
        };
        let to = &to[..to.len().min(words.len() - 1)];
        words[0] = to.len() as u32;
        words[1..1 + to.len()].copy_from_slice(to);
    }
}

fn cap(level: usize) -> usize {
    if level == 0 { M0 } else { M }
}

/// Which nodes a walk has seen: a bit per node, and the bits set, to clear them after.
#[derive(Default)]
struct Visited {
    bits: Vec<u64>,
    set: Vec<u32>,
}

impl Visited {
    fn start(&mut self, count: usize) {
        for &s in &self.set {
            self.bits[s as usize / 64] = 0;
        }
        self.set.clear();
        self.bits.resize(count.div_ceil(64), 0);
    }

    /// Marks `slot`; whether it was marked already.
    fn seen(&mut self, slot: u32) -> bool {
        let (w, b) = (slot as usize / 64, 1u64 << (slot % 64));
        let was = self.bits[w] & b != 0;
        self.bits[w] |= b;
        if !was {
            self.set.push(slot);
        }
        was
    }
}

/// A vector waiting in the batch: its slot, level and values (as i16, for [`dot`]), with its
/// squared norm and its unit vector (what its walk's table is made from).
struct Pending {
    slot: u32,
    level: usize,
    values: Vec<i16>,
    norm: f32,
    unit: Vec<f32>,
}

fn cosine(dot: i32, a: f32, b: f32) -> f32 {
    let d = (a * b).sqrt();
    if d > 0.0 { dot as f32 / d } else { 0.0 }
}

/// What one thread reuses from walk to walk.
#[derive(Default)]
struct Scratch {
    visited: Visited,
    bytes: Vec<u8>,
}

/// A candidate for a node's links: its slot, exact cosine with the node, values and squared
/// norm.
struct Candidate {
    slot: u32,
    cosine: f32,
    values: Vec<i16>,
    norm: f32,
}

/// Runs `f` on each of `items` on `threads` threads (each every `threads`-th item), and gives
/// the results in the items' order: which thread ran an item changes nothing.
fn on_threads<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T, &mut Scratch) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 2 {
        let mut scratch = Scratch::default();
        return items.iter().map(|x| f(x, &mut scratch)).collect();
    }
    let f = &f;
    let parts: Vec<Vec<R>> = std::thread::scope(|s| {
        let running: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut scratch = Scratch::default();
                    items.iter().skip(t).step_by(threads).map(|x| f(x, &mut scratch)).collect()
                })
            })
            .collect();
        running
            .into_iter()
            .map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut parts: Vec<std::vec::IntoIter<R>> = parts.into_iter().map(Vec::into_iter).collect();
    (0..items.len()).filter_map(|i| parts[i % threads].next()).collect()
}

/// `vectors.hnsw` being built a vector at a time ([`HnswWriter::add`]), written by
/// [`HnswWriter::finish`].
pub(crate) struct HnswWriter {
    path: PathBuf,
    dim: usize,
    mean: Vec<f32>,
    code_bytes: usize,
    threads: usize,
    keys: Vec<u32>,
    rows: u32,
    codes: Vec<u8>,
    links: Links,
    entry: u32,
    max_level: usize,
    /// The i8 vectors in slot order, beside `path` until they are copied into it.
    vectors: File,
    vectors_path: PathBuf,
    rng: u64,
    unit: Vec<f32>,
    code: Vec<u8>,
    bytes: Vec<u8>,
    batch: Vec<Pending>,
}

impl HnswWriter {
    /// A writer of `path` for vectors of `dim` dimensions, coded around `mean`, with room for
    /// `capacity` vectors, inserting on `threads` threads.
    pub(crate) fn new(
        path: &Path,
        dim: usize,
        mean: Vec<f32>,
        capacity: usize,
        threads: usize,
    ) -> Result<HnswWriter, FormatError> {
        if mean.len() != dim {
            return Err(bad(path, format!("a mean of {} dimensions for {dim}", mean.len())));
        }
        let vectors_path = path.with_extension("i8-tmp");
        let vectors = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&vectors_path)
            .map_err(|e| FormatError::io(&vectors_path, e))?;
        let code_bytes = dim.div_ceil(8);
        Ok(HnswWriter {
            path: path.to_path_buf(),
            dim,
            mean,
            code_bytes,
            threads: threads.max(1),
            keys: Vec::with_capacity(capacity),
            rows: 0,
            codes: Vec::with_capacity(capacity * code_bytes),
            links: Links { level0: Vec::with_capacity(capacity * (1 + M0)), upper: HashMap::new() },
            entry: 0,
            max_level: 0,
            vectors,
            vectors_path,
            rng: 0x2545_f491_4f6c_dd1d,
            unit: vec![0.0; dim],
            code: vec![0; code_bytes],
            bytes: vec![0; dim],
            batch: Vec::with_capacity(BATCH),
        })
    }

    /// A level as HNSW draws one: ⌊-ln(u) / ln(M)⌋ for u uniform in (0, 1] (splitmix64 from a
    /// fixed seed, so every build draws the same levels).
    fn draw_level(&mut self) -> usize {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() / (M as f64).ln()) as usize).min(MAX_LEVEL)
    }

    fn code(&self, slot: u32) -> &[u8] {
        &self.codes[slot as usize * self.code_bytes..][..self.code_bytes]
    }

    /// Adds the main vector of row `ordinal`.
    pub(crate) fn add(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        self.insert(ordinal, false, v)
    }

    /// Adds the second (title) vector of row `ordinal`.
    pub(crate) fn add_second(&mut self, ordinal: usize, v: &[i8]) -> Result<(), FormatError> {
        self.insert(ordinal, true, v)
    }

    /// Writes the vector to the vector file, takes its key, code and level, and queues it in
    /// the batch; a full batch is linked.
    fn insert(&mut self, ordinal: usize, second: bool, v: &[i8]) -> Result<(), FormatError> {
        if v.len() != self.dim {
            let detail = format!("a vector of {} dimensions, not {}", v.len(), self.dim);
            return Err(bad(&self.path, detail));
        }
        let ordinal =
            u32::try_from(ordinal).ok().filter(|o| o & SECOND_BIT == 0).ok_or_else(|| {
                bad(&self.path, format!("row ordinal {ordinal} does not fit 31 bits"))
            })?;
        let slot = u32::try_from(self.keys.len())
            .ok()
            .filter(|s| *s < u32::MAX)
            .ok_or_else(|| bad(&self.path, "more vectors than the layout holds"))?;
        self.bytes.clear();
        self.bytes.extend(v.iter().map(|&x| x as u8));
        self.vectors
            .write_all_at(&self.bytes, u64::from(slot) * self.dim as u64)
            .map_err(|e| FormatError::io(&self.vectors_path, e))?;
        unit_of(&self.bytes, &mut self.unit);
        code_of(&self.unit, &self.mean, &mut self.code);
        self.keys.push(if second { ordinal | SECOND_BIT } else { ordinal });
        self.rows += u32::from(!second);
        self.codes.extend_from_slice(&self.code);
        let level = self.draw_level();
        self.links.push_node(slot, level);
        let values: Vec<i16> = v.iter().map(|&x| i16::from(x)).collect();
        let norm = dot(&values, &values) as f32;
        let unit = self.unit.clone();
        self.batch.push(Pending { slot, level, values, norm, unit });
        if self.batch.len() == BATCH { self.link_batch() } else { Ok(()) }
    }

    /// Links the batch: each node's links chosen on every thread, written in order, and the
    /// lists that take links back cut to their caps on every thread.
    fn link_batch(&mut self) -> Result<(), FormatError> {
        let batch = std::mem::take(&mut self.batch);
        let mut start = 0;
        // A graph with no node yet starts from the batch's first, linked to nothing.
        if self.keys.len() == batch.len() {
            let first = &batch[0];
            (self.entry, self.max_level) = (first.slot, first.level);
            start = 1;
        }
        let base = (self.entry, self.max_level);
        let indexes: Vec<usize> = (start..batch.len()).collect();
        let chosen = on_threads(&indexes, self.threads, |&i, scratch| {
            self.choose_links(&batch, i, base, scratch)
        });
        // Written in order: own links, then who links back to whom.
        let mut back: BTreeMap<(usize, u32), Vec<u32>> = BTreeMap::new();
        for (&i, levels) in indexes.iter().zip(chosen) {
            let node = &batch[i];
            for (level, to) in levels?.into_iter().enumerate() {
                for &n in &to {
                    back.entry((level, n)).or_default().push(node.slot);
                }
                self.links.set(node.slot, level, &to);
            }
            if node.level > self.max_level {
                (self.entry, self.max_level) = (node.slot, node.level);
            }
        }
        let back: Vec<((usize, u32), Vec<u32>)> = back.into_iter().collect();
        let lists = on_threads(&back, self.threads, |((level, n), new), scratch| {
            self.linked_back(*n, *level, new, scratch)
        });
        for (((level, n), _), list) in back.iter().zip(lists) {
            self.links.set(*n, *level, &list?);
        }
        self.batch = batch;
        self.batch.clear();
        Ok(())
    }

    /// The links of the batch's node `i` on each of its levels (0 first), chosen against the
    /// graph before the batch (entry and top level `base`) and the batch's earlier nodes.
    fn choose_links(
        &self,
        batch: &[Pending],
        i: usize,
        base: (u32, usize),
        scratch: &mut Scratch,
    ) -> Result<Vec<Vec<u32>>, FormatError> {
        let node = &batch[i];
        let table = nibble_table(&node.unit, self.code_bytes);
        let score = |s: u32| Score(estimate(&table, self.code(s)));
        let graph = batch[0].slot;
        let (entry, top) = base;
        let mut levels = vec![Vec::new(); node.level + 1];
        let mut starts = Vec::new();
        if entry < graph {
            // Greedy descent through the graph's levels above the node's.
            let mut cur = (score(entry), entry);
            for l in (node.level + 1..=top).rev() {
                loop {
                    let mut moved = false;
                    for &n in self.links.list(cur.1, l) {
                        let s = score(n);
                        if s > cur.0 {
                            (cur, moved) = ((s, n), true);
                        }
                    }
                    if !moved {
                        break;
                    }
                }
            }
            starts.push(cur);
        }
        for l in (0..=node.level).rev() {
            let found = if l <= top && !starts.is_empty() {
                self.beam(&score, &starts, l, scratch)
            } else {
                Vec::new()
            };
            let mut candidates = Vec::with_capacity(found.len() + i);
            for &(_, slot) in &found {
                candidates.push(self.read_candidate(slot, &node.values, node.norm, scratch)?);
            }
            let mut earlier: Vec<(f32, &Pending)> = batch[..i]
                .iter()
                .filter(|e| e.level >= l)
                .map(|e| (cosine(dot(&e.values, &node.values), e.norm, node.norm), e))
                .collect();
            earlier.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.slot.cmp(&b.1.slot)));
            for (cosine, e) in earlier.into_iter().take(EF_ADD) {
                let values = e.values.clone();
                candidates.push(Candidate { slot: e.slot, cosine, values, norm: e.norm });
            }
            best_first(&mut candidates);
            candidates.truncate(EF_ADD);
            levels[l] = heuristic(&candidates, M);
            if !found.is_empty() {
                starts = found;
            }
        }
        Ok(levels)
    }

    /// The best [`EF_ADD`] nodes of a beam walk on `level` from `starts`, by `score`, best
    /// first.
    fn beam(
        &self,
        score: &dyn Fn(u32) -> Score,
        starts: &[(Score, u32)],
        level: usize,
        scratch: &mut Scratch,
    ) -> Vec<(Score, u32)> {
        let visited = &mut scratch.visited;
        visited.start(self.keys.len());
        let mut candidates = BinaryHeap::new();
        let mut top = BinaryHeap::new();
        for &(s, slot) in starts {
            if !visited.seen(slot) {
                candidates.push((s, Reverse(slot)));
                top.push(Reverse((s, slot)));
            }
        }
        while top.len() > EF_ADD {
            top.pop();
        }
        while let Some((s, Reverse(c))) = candidates.pop() {
            if top.len() >= EF_ADD && top.peek().is_some_and(|Reverse((w, _))| s < *w) {
                break;
            }
            for &n in self.links.list(c, level) {
                if visited.seen(n) {
                    continue;
                }
                let sn = score(n);
                if top.len() < EF_ADD || top.peek().is_some_and(|Reverse((w, _))| sn > *w) {
                    candidates.push((sn, Reverse(n)));
                    top.push(Reverse((sn, n)));
                    if top.len() > EF_ADD {
                        top.pop();
                    }
                }
            }
        }
        let mut found: Vec<(Score, u32)> = top.into_iter().map(|Reverse(x)| x).collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        found
    }

    /// The i8 values of the vector in `slot`, read from the vector file.
    fn read_values(&self, slot: u32, scratch: &mut Scratch) -> Result<Vec<i16>, FormatError> {
        scratch.bytes.resize(self.dim, 0);
        self.vectors
            .read_exact_at(&mut scratch.bytes, u64::from(slot) * self.dim as u64)
            .map_err(|e| FormatError::io(&self.vectors_path, e))?;
        Ok(scratch.bytes.iter().map(|&b| i16::from(b as i8)).collect())
    }

    /// The vector in `slot`, read from the vector file, as a candidate for the links of the node
    /// whose values are `to` (of squared norm `to_norm`).
    fn read_candidate(
        &self,
        slot: u32,
        to: &[i16],
        to_norm: f32,
        scratch: &mut Scratch,
    ) -> Result<Candidate, FormatError> {
        let values = self.read_values(slot, scratch)?;
        let norm = dot(&values, &values) as f32;
        let cosine = cosine(dot(&values, to), norm, to_norm);
        Ok(Candidate { slot, cosine, values, norm })
    }

    /// `node`'s list on `level` with the links `new` added; past its cap, cut back by the
    /// heuristic on exact cosines (its vector and theirs read back).
    fn linked_back(
        &self,
        node: u32,
        level: usize,
        new: &[u32],
        scratch: &mut Scratch,
    ) -> Result<Vec<u32>, FormatError> {
        let mut all: Vec<u32> = self.links.list(node, level).to_vec();
        all.extend(new.iter().filter(|&&n| n != node));
        if all.len() <= cap(level) {
            return Ok(all);
        }
        all.sort_unstable();
        all.dedup();
        let own = self.read_values(node, scratch)?;
        let own_norm = dot(&own, &own) as f32;
        let mut candidates = Vec::with_capacity(all.len());
        for slot in all {
            candidates.push(self.read_candidate(slot, &own, own_norm, scratch)?);
        }
        best_first(&mut candidates);
        Ok(heuristic(&candidates, cap(level)))
    }

    /// Writes `vectors.hnsw` and removes the vector file beside it.
    pub(crate) fn finish(mut self) -> Result<(), FormatError> {
        if !self.batch.is_empty() {
            self.link_batch()?;
        }
        let written = self.write();
        let removed = std::fs::remove_file(&self.vectors_path)
            .map_err(|e| FormatError::io(&self.vectors_path, e));
        written.and(removed)
    }

    fn write(&self) -> Result<(), FormatError> {
        let dst = &self.path;
        let to_u32 = |n: usize, what: &str| {
            u32::try_from(n).map_err(|_| bad(dst, format!("{what} {n} does not fit the layout")))
        };
        let count = self.keys.len();
        let mut upper_slots: Vec<u32> = self.links.upper.keys().copied().collect();
        upper_slots.sort_unstable();
        let upper_words: usize = upper_slots.iter().map(|s| self.links.upper[s].len()).sum();
        let header = Header {
            dim: to_u32(self.dim, "dimension")?,
            count: to_u32(count, "vector count")?,
            rows: self.rows,
            m0: M0 as u32,
            m: M as u32,
            entry: self.entry,
            max_level: self.max_level as u32,
            upper: to_u32(upper_slots.len(), "upper nodes")?,
            upper_words: to_u32(upper_words, "upper links")?,
        };
        let io = |e| FormatError::io(dst, e);
        let file = File::create(dst).map_err(io)?;
        let mut w =
            SectionWriter { out: std::io::BufWriter::with_capacity(1 << 20, file), written: 0 };
        header.write(&mut w.out).map_err(io)?;
        w.written = HEADER as u64;
        let words = |w: &mut SectionWriter, words: &[u32]| -> std::io::Result<()> {
            words.iter().try_for_each(|x| w.put(&x.to_le_bytes()))
        };
        for m in &self.mean {
            w.put(&m.to_le_bytes()).map_err(io)?;
        }
        w.end_section().map_err(io)?;
        words(&mut w, &self.keys).map_err(io)?;
        w.end_section().map_err(io)?;
        w.put(&self.codes).map_err(io)?;
        w.end_section().map_err(io)?;
        words(&mut w, &self.links.level0).map_err(io)?;
        w.end_section().map_err(io)?;
        words(&mut w, &upper_slots).map_err(io)?;
        w.end_section().map_err(io)?;
        let mut start = 0u32;
        w.put(&start.to_le_bytes()).map_err(io)?;
        for s in &upper_slots {
            start += self.links.upper[s].len() as u32;
            w.put(&start.to_le_bytes()).map_err(io)?;
        }
        w.end_section().map_err(io)?;
        for s in &upper_slots {
            words(&mut w, &self.links.upper[s]).map_err(io)?;
        }
        w.end_section().map_err(io)?;
        // The vectors, copied from the file beside through a buffer (not mapped: a map would
        // bring every page of them into this process's resident set).
        let mut from = &self.vectors;
        from.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| FormatError::io(&self.vectors_path, e))?;
        let mut r = BufReader::with_capacity(1 << 20, from).take((count * self.dim) as u64);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = r.read(&mut buf).map_err(|e| FormatError::io(&self.vectors_path, e))?;
            if n == 0 {
                break;
            }
            w.put(&buf[..n]).map_err(io)?;
        }
        w.end_section().map_err(io)?;
        let written = w.written;
        let mut file = w.out.into_inner().map_err(|e| io(e.into_error()))?;
        file.flush().map_err(io)?;
        file.sync_all().map_err(io)?;
        if written != header.sections().len {
            return Err(bad(
                dst,
                format!("wrote {written} bytes, its header says {}", header.sections().len),
            ));
        }
        Ok(())
    }
}

/// Orders candidates best first: by cosine, then by slot (so ties fall the same way every time).
fn best_first(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| b.cosine.total_cmp(&a.cosine).then(a.slot.cmp(&b.slot)));
}

/// HNSW's heuristic over candidates best first: a candidate is linked when it is closer to the
/// node than to every one linked before it; up to `cap` of them.
fn heuristic(candidates: &[Candidate], cap: usize) -> Vec<u32> {
    let mut kept: Vec<&Candidate> = Vec::with_capacity(cap);
    for c in candidates {
        if kept.len() == cap {
            break;
        }
        if kept.iter().all(|k| cosine(dot(&c.values, &k.values), c.norm, k.norm) < c.cosine) {
            kept.push(c);
        }
    }
    kept.into_iter().map(|k| k.slot).collect()
}

impl Drop for HnswWriter {
    /// A writer dropped unfinished (an error, a cancelled merge) leaves no vector file behind.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.vectors_path);
    }
}
