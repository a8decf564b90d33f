//! `vectors.hnsw` (format 7): the HNSW graph of a merged segment in a layout whose hot set is
//! small, read through a memory map with nothing per vector in anonymous memory.
//!
//! The graph is the one usearch builds (same options, same insert order, so the same links as a
//! format-6 `vectors.usearch`), converted ([`convert_usearch`]); or one of the same shape that
//! hubdex's own `HnswWriter` (`hnsw/writer.rs`) builds on the sign codes below, holding ~190
//! bytes a vector where usearch holds ~600 (a merge's `GraphBuilder::HnswWriter`: what a merge in
//! turn uses when usearch's graph would pass its share of the budget). The file is laid out for
//! reading it:
//!
//! - one bit per dimension per vector (the sign of the vector minus the segment's mean vector):
//!   the graph walk scores neighbours on these codes, 48 bytes a vector for 384 dimensions;
//! - level 0's links at a fixed stride, so a node's links are found by arithmetic;
//! - the few nodes on upper levels (about 1 in 16) in a table sorted by slot;
//! - the i8 vectors (usearch's, as written) read only to rescore the walk's best candidates.
//!
//! A search at 1M rows touches the codes and links of the nodes it visits (about 180 bytes a
//! node) and the i8 vectors of ~100 candidates, where usearch's view reads the i8 vector of every
//! node it visits and keeps per-vector tables (offsets, key lookup) in anonymous memory, built by
//! reading every node at open.
//!
//! The header is read and checked against segment.json (dimension, vector counts) and the file's
//! exact length before anything is mapped; link targets are checked as they are read.
//!
//! Layout, little-endian, every section starting on an 8-byte boundary:
//!
//! | bytes | what |
//! | --- | --- |
//! | 64 | header: `HUBDEXHN`, version, dim, count, rows, m0, m, entry, max_level, upper, upper_words |
//! | dim × 4 | mean vector (f32) |
//! | count × 4 | key per slot: the row ordinal, bit 31 set for a row's second vector |
//! | count × ⌈dim/8⌉ | sign codes, bit b of byte k = dimension 8k+b |
//! | count × (1 + m0) × 4 | level-0 links: count, then m0 slots |
//! | upper × 4 | the slots of nodes above level 0, ascending |
//! | (upper + 1) × 4 | where each one's links start in the next section (in u32 words) |
//! | upper_words × 4 | levels 1..=L of each: count, then m slots, per level |
//! | count × dim | i8 vectors, slot order |

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tantivy::directory::{Directory, MmapDirectory, OwnedBytes};

use crate::error::FormatError;

/// The key of a row's second vector: [`SECOND_VECTOR`] + the row's ordinal (a row's first
/// vector is keyed by its ordinal). A search reads either back as the ordinal.
pub const SECOND_VECTOR: u64 = 1 << 32;

mod writer;

use writer::code_of;
pub(crate) use writer::{HnswWriter, MeanOf};

/// The file's first eight bytes.
const MAGIC: &[u8; 8] = b"HUBDEXHN";
/// The layout version in the header.
const VERSION: u32 = 1;
/// The header's length.
const HEADER: usize = 64;
/// Bit 31 of a key: the vector is its row's second (title) vector.
const SECOND_BIT: u32 = 1 << 31;
/// How wide the level-0 walk is at least (it keeps that many nodes by code, and at least six
/// per row asked for: 300 for the server's pool of 50; all of them are rescored on their i8
/// vectors): measured against the exact top 10 and 50 on the 100k bench queries
/// (docs/performance.md), at or above usearch's walk on both. Rescoring fewer loses
/// recall (four per row: 0.966 → 0.878 of the exact top 10).
pub const DEFAULT_EF: usize = 192;

fn bad(path: &Path, detail: impl Into<String>) -> FormatError {
    FormatError::Vectors { path: path.to_path_buf(), detail: detail.into() }
}

fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// What the header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    dim: u32,
    count: u32,
    rows: u32,
    m0: u32,
    m: u32,
    entry: u32,
    max_level: u32,
    upper: u32,
    upper_words: u32,
}

/// Where each section starts, and the file's whole length, for a header.
#[derive(Debug, Clone, Copy)]
struct Sections {
    /// Not read by a search (the codes are signs around it); kept to say how they were made.
    #[allow(dead_code)]
    mean: usize,
    keys: usize,
    codes: usize,
    level0: usize,
    upper_slots: usize,
    upper_starts: usize,
    upper_links: usize,
    vectors: usize,
    len: u64,
}

impl Header {
    fn code_bytes(&self) -> u64 {
        u64::from(self.dim).div_ceil(8)
    }

    fn sections(&self) -> Sections {
        let (dim, count) = (u64::from(self.dim), u64::from(self.count));
        let mut at = HEADER as u64;
        let mut next = |bytes: u64| {
            let start = at;
            at = round8(at + bytes);
            start as usize
        };
        let mean = next(dim * 4);
        let keys = next(count * 4);
        let codes = next(count * self.code_bytes());
        let level0 = next(count * (1 + u64::from(self.m0)) * 4);
        let upper_slots = next(u64::from(self.upper) * 4);
        let upper_starts = next((u64::from(self.upper) + 1) * 4);
        let upper_links = next(u64::from(self.upper_words) * 4);
        let vectors = next(count * dim);
        Sections {
            mean,
            keys,
            codes,
            level0,
            upper_slots,
            upper_starts,
            upper_links,
            vectors,
            len: at,
        }
    }

    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut h = [0u8; HEADER];
        h[..8].copy_from_slice(MAGIC);
        let fields = [
            VERSION,
            self.dim,
            self.count,
            self.rows,
            self.m0,
            self.m,
            self.entry,
            self.max_level,
            self.upper,
            self.upper_words,
        ];
        for (i, f) in fields.iter().enumerate() {
            h[8 + 4 * i..12 + 4 * i].copy_from_slice(&f.to_le_bytes());
        }
        out.write_all(&h)
    }

    fn parse(path: &Path, h: &[u8]) -> Result<Header, FormatError> {
        if h.len() < HEADER || &h[..8] != MAGIC {
            return Err(bad(path, "not a hubdex vector file (no HUBDEXHN header)"));
        }
        let version = u32_at(h, 8);
        if version != VERSION {
            return Err(bad(
                path,
                format!("layout version {version}; this reader reads {VERSION}"),
            ));
        }
        let f = |i: usize| u32_at(h, 12 + 4 * i);
        Ok(Header {
            dim: f(0),
            count: f(1),
            rows: f(2),
            m0: f(3),
            m: f(4),
            entry: f(5),
            max_level: f(6),
            upper: f(7),
            upper_words: f(8),
        })
    }
}

/// A file written a section at a time, each padded to an 8-byte boundary.
struct SectionWriter {
    out: std::io::BufWriter<std::fs::File>,
    written: u64,
}

impl SectionWriter {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.written += b.len() as u64;
        self.out.write_all(b)
    }

    fn end_section(&mut self) -> std::io::Result<()> {
        let to = round8(self.written);
        self.out.write_all(&vec![0u8; (to - self.written) as usize])?;
        self.written = to;
        Ok(())
    }
}

/// Maps `path` read-only (random access: no read-ahead of pages a search will not touch).
pub(crate) fn map(path: &Path) -> Result<OwnedBytes, FormatError> {
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(d), Some(n)) => (d, Path::new(n)),
        _ => return Err(bad(path, "not a file path")),
    };
    let dir = MmapDirectory::open_with_madvice(dir, tantivy::directory::Advice::Random)
        .map_err(|e| bad(path, format!("opening its directory: {e}")))?;
    let handle = dir.get_file_handle(name).map_err(|e| bad(path, format!("mapping: {e}")))?;
    let len = handle.len();
    handle.read_bytes(0..len).map_err(|e| FormatError::io(path, e))
}

/// The usearch file as written by `index_dense_gt::save` (2.x, u64 keys, u32 slots, 32-bit
/// matrix dimensions): the sections [`convert_usearch`] reads. It is read in sequential passes
/// (through a buffer, not a map): a map would leave every page of the file (the whole graph)
/// in the writing process's resident set while it converts.
struct UsearchFile {
    path: PathBuf,
    count: usize,
    dim: usize,
    m: usize,
    m0: usize,
    max_level: usize,
    entry: usize,
    /// Each node's level (usearch's -1 read as 0).
    levels: Vec<u16>,
    /// Where the nodes' tapes start.
    nodes: u64,
}

/// Where a usearch file's vectors start (after its rows and columns counts).
const USEARCH_VECTORS: u64 = 8;

impl UsearchFile {
    fn open(path: &Path, dim: usize) -> Result<UsearchFile, FormatError> {
        let io = |e| FormatError::io(path, e);
        let mut file = std::fs::File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let short = || bad(path, "usearch file is shorter than its own header says");
        let mut first = [0u8; 8];
        if file_len < 8 {
            return Err(short());
        }
        file.read_exact(&mut first).map_err(io)?;
        let (count, cols) = (u32_at(&first, 0) as usize, u32_at(&first, 4) as usize);
        if cols != dim {
            return Err(bad(path, format!("{cols} bytes a vector, not {dim} (i8)")));
        }
        let head = USEARCH_VECTORS + (count * cols) as u64;
        if file_len < head + 64 + 40 {
            return Err(short());
        }
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(head)).map_err(io)?;
        let mut b = [0u8; 64 + 40];
        file.read_exact(&mut b).map_err(io)?;
        if &b[..7] != b"usearch" {
            return Err(short());
        }
        // The dense head: metric, scalar, key and slot kinds at 13..17 (usearch's enum values:
        // i8 = 23, u64 = 14, u32 = 15).
        let (scalar, key, slot) = (b[14], b[15], b[16]);
        if (scalar, key, slot) != (23, 14, 15) {
            return Err(bad(
                path,
                format!("scalar/key/slot kinds {scalar}/{key}/{slot}, not i8/u64/u32"),
            ));
        }
        let g = 64;
        let size = u64_at(&b, g) as usize;
        let (m, m0) = (u64_at(&b, g + 8) as usize, u64_at(&b, g + 16) as usize);
        let (max_level, entry) = (u64_at(&b, g + 24) as usize, u64_at(&b, g + 32) as usize);
        if size != count || (count > 0 && entry >= count) || m == 0 || m0 == 0 {
            return Err(bad(path, format!("graph header: {size} nodes of {count}, entry {entry}")));
        }
        let nodes = head + 64 + 40 + 2 * count as u64;
        if file_len < nodes {
            return Err(short());
        }
        let mut raw = vec![0u8; 2 * count];
        file.read_exact(&mut raw).map_err(io)?;
        let levels: Vec<u16> =
            raw.chunks_exact(2).map(|l| i16::from_le_bytes([l[0], l[1]]).max(0) as u16).collect();
        let u = UsearchFile {
            path: path.to_path_buf(),
            count,
            dim,
            m,
            m0,
            max_level,
            entry,
            levels,
            nodes,
        };
        let len = nodes + (0..count).map(|s| u.node_len(s) as u64).sum::<u64>();
        if file_len != len {
            return Err(bad(path, format!("{file_len} bytes, its graph needs {len}")));
        }
        Ok(u)
    }

    fn level(&self, slot: usize) -> usize {
        usize::from(self.levels[slot])
    }

    /// A node's tape: key (8), level (2), level 0 (1 + m0 words), levels 1.. (1 + m words).
    fn node_len(&self, slot: usize) -> usize {
        10 + 4 * (1 + self.m0) + self.level(slot) * 4 * (1 + self.m)
    }

    /// A buffered reader from `at`.
    fn reader(&self, at: u64) -> Result<std::io::BufReader<std::fs::File>, FormatError> {
        use std::io::Seek;
        let io = |e| FormatError::io(&self.path, e);
        let mut file = std::fs::File::open(&self.path).map_err(io)?;
        file.seek(std::io::SeekFrom::Start(at)).map_err(io)?;
        Ok(std::io::BufReader::with_capacity(1 << 20, file))
    }

    /// Calls `f` with each vector (i8, as bytes) in slot order.
    fn for_each_vector(
        &self,
        mut f: impl FnMut(&[u8]) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        let mut r = self.reader(USEARCH_VECTORS)?;
        let mut v = vec![0u8; self.dim];
        for _ in 0..self.count {
            r.read_exact(&mut v).map_err(|e| FormatError::io(&self.path, e))?;
            f(&v)?;
        }
        Ok(())
    }

    /// Calls `f` with each node's tape, in slot order.
    fn for_each_node(
        &self,
        mut f: impl FnMut(&[u8]) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        let mut r = self.reader(self.nodes)?;
        let mut node = Vec::new();
        for slot in 0..self.count {
            node.resize(self.node_len(slot), 0);
            r.read_exact(&mut node).map_err(|e| FormatError::io(&self.path, e))?;
            f(&node)?;
        }
        Ok(())
    }
}

/// The unit vector an i8 vector stands for.
fn unit_of(v: &[u8], out: &mut [f32]) {
    let mut norm = 0f32;
    for (o, &x) in out.iter_mut().zip(v) {
        *o = f32::from(x as i8);
        norm += *o * *o;
    }
    let inv = if norm > 0.0 { norm.sqrt().recip() } else { 0.0 };
    out.iter_mut().for_each(|o| *o *= inv);
}

/// Writes `dst` (`vectors.hnsw`) from the usearch file `src` that `vectors.rs` built: the
/// same graph and i8 vectors, with sign codes around the mean. Reads `src` in sequential
/// passes, one section at a time; holds only the mean, each node's level and a node's links.
pub fn convert_usearch(src: &Path, dst: &Path, dim: usize) -> Result<(), FormatError> {
    let u = UsearchFile::open(src, dim)?;
    let count = u.count;
    let mut mean = MeanOf::new(dim);
    u.for_each_vector(|v| {
        mean.add(v);
        Ok(())
    })?;
    let mean = mean.mean();
    let mut unit = vec![0f32; dim];
    let upper_slots: Vec<u32> = (0..count).filter(|&s| u.level(s) > 0).map(|s| s as u32).collect();
    let upper_words: usize = upper_slots.iter().map(|&s| u.level(s as usize) * (1 + u.m)).sum();
    let to_u32 = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| bad(dst, format!("{what} {n} does not fit the layout")))
    };
    let header = Header {
        dim: to_u32(dim, "dimension")?,
        count: to_u32(count, "vector count")?,
        rows: 0,
        m0: to_u32(u.m0, "connectivity")?,
        m: to_u32(u.m, "connectivity")?,
        entry: to_u32(u.entry, "entry slot")?,
        // usearch's empty graph has level -1.
        max_level: if count == 0 { 0 } else { to_u32(u.max_level, "level")? },
        upper: to_u32(upper_slots.len(), "upper nodes")?,
        upper_words: to_u32(upper_words, "upper links")?,
    };
    let io = |e| FormatError::io(dst, e);
    let file = std::fs::File::create(dst).map_err(io)?;
    let mut w = SectionWriter { out: std::io::BufWriter::with_capacity(1 << 20, file), written: 0 };
    // The row count is known once the keys are read: patched into the header at the end.
    let mut rows = 0u32;
    header.write(&mut w.out).map_err(io)?;
    w.written = HEADER as u64;
    for m in &mean {
        w.put(&m.to_le_bytes()).map_err(io)?;
    }
    w.end_section().map_err(io)?;
    u.for_each_node(|node| {
        let key = u64_at(node, 0);
        let ordinal = key & (SECOND_VECTOR - 1);
        if ordinal >= u64::from(SECOND_BIT) {
            return Err(bad(dst, format!("row ordinal {ordinal} does not fit 31 bits")));
        }
        let second = key >= SECOND_VECTOR;
        rows += u32::from(!second);
        let k = ordinal as u32 | if second { SECOND_BIT } else { 0 };
        w.put(&k.to_le_bytes()).map_err(io)
    })?;
    w.end_section().map_err(io)?;
    let mut code = vec![0u8; header.code_bytes() as usize];
    u.for_each_vector(|v| {
        unit_of(v, &mut unit);
        code_of(&unit, &mean, &mut code);
        w.put(&code).map_err(io)
    })?;
    w.end_section().map_err(io)?;
    let level0 = 10..10 + 4 * (1 + u.m0);
    u.for_each_node(|node| w.put(&node[level0.clone()]).map_err(io))?;
    w.end_section().map_err(io)?;
    for slot in &upper_slots {
        w.put(&slot.to_le_bytes()).map_err(io)?;
    }
    w.end_section().map_err(io)?;
    let mut start = 0u32;
    w.put(&start.to_le_bytes()).map_err(io)?;
    for slot in &upper_slots {
        start += (u.level(*slot as usize) * (1 + u.m)) as u32;
        w.put(&start.to_le_bytes()).map_err(io)?;
    }
    w.end_section().map_err(io)?;
    u.for_each_node(|node| w.put(&node[level0.end..]).map_err(io))?;
    w.end_section().map_err(io)?;
    u.for_each_vector(|v| w.put(v).map_err(io))?;
    w.end_section().map_err(io)?;
    let written = w.written;
    let mut file = w.out.into_inner().map_err(|e| io(e.into_error()))?;
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(20)).map_err(io)?;
    file.write_all(&rows.to_le_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    debug_assert_eq!(written, Header { rows, ..header }.sections().len);
    Ok(())
}

/// A score with a total order (NaN never comes from finite inputs; it sorts lowest if it does).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Score(f32);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A read-only `vectors.hnsw`, memory-mapped.
pub struct HnswIndex {
    bytes: OwnedBytes,
    header: Header,
    at: Sections,
    path: PathBuf,
}

impl std::fmt::Debug for HnswIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswIndex").field("count", &self.header.count).finish()
    }
}

impl HnswIndex {
    /// Opens `path` after checking, before it is mapped, that its header describes `rows` rows
    /// and `second` second vectors of `dim` dimensions and that the file is exactly as long as
    /// that header's sections.
    pub fn open(path: &Path, dim: usize, rows: u64, second: u64) -> Result<HnswIndex, FormatError> {
        let mut file = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
        let file_len = file.metadata().map_err(|e| FormatError::io(path, e))?.len();
        let mut h = [0u8; HEADER];
        if file.read_exact(&mut h).is_err() {
            return Err(bad(path, format!("{file_len} bytes: shorter than the header")));
        }
        let header = Header::parse(path, &h)?;
        if header.dim as usize != dim {
            return Err(bad(
                path,
                format!("header says {} dimensions, the model has {dim}", header.dim),
            ));
        }
        if u64::from(header.rows) != rows || u64::from(header.count) != rows + second {
            return Err(bad(
                path,
                format!(
                    "header says {} vectors of {} rows, segment has {rows} rows and {second} \
                     second vectors",
                    header.count, header.rows
                ),
            ));
        }
        let sane_links = (1..=1024).contains(&header.m0) && (1..=1024).contains(&header.m);
        if !sane_links
            || header.max_level > 64
            || header.upper > header.count
            || (header.count > 0 && header.entry >= header.count)
        {
            return Err(bad(path, format!("header is not a graph's: {header:?}")));
        }
        let at = header.sections();
        if file_len != at.len {
            return Err(bad(
                path,
                format!("{file_len} bytes, the header's sections need exactly {}", at.len),
            ));
        }
        drop(file);
        let bytes = map(path)?;
        if bytes.len() as u64 != at.len {
            return Err(bad(path, "changed while it was opened"));
        }
        Ok(HnswIndex { bytes, header, at, path: path.to_path_buf() })
    }

    /// How many vectors it holds.
    pub fn len(&self) -> usize {
        self.header.count as usize
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.header.count == 0
    }

    fn corrupt(&self, detail: String) -> FormatError {
        bad(&self.path, detail)
    }

    /// The row ordinal of a slot.
    fn ordinal(&self, slot: u32) -> u64 {
        u64::from(u32_at(&self.bytes, self.at.keys + 4 * slot as usize) & !SECOND_BIT)
    }

    /// The links of `slot` on `level` (checked against the slot count).
    fn links(&self, slot: u32, level: u32, out: &mut Vec<u32>) -> Result<(), FormatError> {
        out.clear();
        let h = &self.header;
        let (start, cap) = if level == 0 {
            (self.at.level0 + slot as usize * (1 + h.m0 as usize) * 4, h.m0)
        } else {
            let slots =
                &self.bytes[self.at.upper_slots..self.at.upper_slots + 4 * h.upper as usize];
            let (mut lo, mut hi) = (0usize, h.upper as usize);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if u32_at(slots, 4 * mid) < slot { lo = mid + 1 } else { hi = mid }
            }
            if lo == h.upper as usize || u32_at(slots, 4 * lo) != slot {
                return Ok(());
            }
            let s = u32_at(&self.bytes, self.at.upper_starts + 4 * lo);
            let e = u32_at(&self.bytes, self.at.upper_starts + 4 * (lo + 1));
            let first = s as u64 + u64::from(level - 1) * u64::from(1 + h.m);
            if e > h.upper_words || s > e {
                return Err(self.corrupt(format!("upper links of slot {slot} out of range")));
            }
            if first + u64::from(1 + h.m) > u64::from(e) {
                return Ok(());
            }
            (self.at.upper_links + 4 * first as usize, h.m)
        };
        let n = u32_at(&self.bytes, start);
        if n > cap {
            return Err(
                self.corrupt(format!("slot {slot} has {n} links on level {level}, at most {cap}"))
            );
        }
        for i in 0..n as usize {
            let to = u32_at(&self.bytes, start + 4 + 4 * i);
            if to >= h.count {
                return Err(self.corrupt(format!("slot {slot} links to slot {to} of {}", h.count)));
            }
            out.push(to);
        }
        Ok(())
    }

    /// The query's lookup table: for each code byte (8 dimensions), the estimate's part for
    /// each of its 256 values (a set bit adds the query's value, a clear one subtracts it),
    /// built from the two halves' 16-entry tables.
    fn table(&self, query: &[f32]) -> Vec<[f32; 256]> {
        let half = |dims: usize| -> [f32; 16] {
            let mut t = [0f32; 16];
            for (v, e) in t.iter_mut().enumerate() {
                for b in 0..4 {
                    let q = query.get(dims + b).copied().unwrap_or(0.0);
                    *e += if v & (1 << b) != 0 { q } else { -q };
                }
            }
            t
        };
        (0..self.header.code_bytes() as usize)
            .map(|k| {
                let (lo, hi) = (half(8 * k), half(8 * k + 4));
                std::array::from_fn(|v| lo[v & 15] + hi[v >> 4])
            })
            .collect()
    }

    /// The estimate of the query's similarity to `slot` from its sign code (only its order
    /// among slots means anything).
    fn estimate(&self, table: &[[f32; 256]], slot: u32) -> f32 {
        let cb = table.len();
        let code = &self.bytes[self.at.codes + slot as usize * cb..][..cb];
        code.iter().zip(table).map(|(&byte, t)| t[byte as usize]).sum()
    }

    /// The cosine similarity of the query and `slot`'s i8 vector.
    fn cosine(&self, query: &[f32], slot: u32) -> f32 {
        let dim = self.header.dim as usize;
        let v = &self.bytes[self.at.vectors + slot as usize * dim..][..dim];
        let (mut dot, mut norm) = (0f32, 0f32);
        let mut qnorm = 0f32;
        for (q, &x) in query.iter().zip(v) {
            let x = f32::from(x as i8);
            dot += q * x;
            norm += x * x;
            qnorm += q * q;
        }
        if norm > 0.0 && qnorm > 0.0 { dot / (norm * qnorm).sqrt() } else { 0.0 }
    }

    /// The unit query cast to i8 as usearch casts it (scaled to 127, truncated): rescoring
    /// with it gives a row the score format 6 gave it (docs/quality.md, "What the defaults are, and why").
    fn as_i8(unit: &[f32]) -> Vec<f32> {
        unit.iter().map(|x| (x * 127.0).clamp(-127.0, 127.0).trunc()).collect()
    }

    fn unit(query: &[f32]) -> Vec<f32> {
        let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
        let inv = if norm > 0.0 { norm.recip() } else { 0.0 };
        query.iter().map(|x| x * inv).collect()
    }

    /// Up to `limit` (ordinal, cosine similarity) pairs, best first, among ordinals `allow`
    /// accepts; a row with two vectors counts once, by the closer. The walk keeps the `ef` best
    /// nodes by code (at least six per row asked for), and the allowed ones among them are
    /// rescored on their i8 vectors: all of them, or the best `rescore × limit` by code.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        ef: usize,
        rescore: Option<usize>,
        allow: Option<&(dyn Fn(u64) -> bool + Send + Sync)>,
    ) -> Result<Vec<(u64, f32)>, FormatError> {
        if self.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let q = Self::unit(query);
        let table = self.table(&q);
        let ef = ef.max(6 * limit);
        let mut links = Vec::with_capacity(self.header.m0 as usize);
        // Greedy descent on the upper levels.
        let mut cur = self.header.entry;
        let mut cur_s = self.estimate(&table, cur);
        for level in (1..=self.header.max_level).rev() {
            loop {
                let mut moved = false;
                self.links(cur, level, &mut links)?;
                for &n in &links {
                    let s = self.estimate(&table, n);
                    if s > cur_s {
                        (cur, cur_s, moved) = (n, s, true);
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        // Beam search on level 0: `top` steers the walk over every node; `found` keeps the
        // allowed ones.
        let mut visited = vec![0u64; (self.header.count as usize).div_ceil(64)];
        let mut seen = |s: u32| {
            let (w, b) = (s as usize / 64, 1u64 << (s % 64));
            let was = visited[w] & b != 0;
            visited[w] |= b;
            was
        };
        seen(cur);
        let allowed = |s: u32| allow.is_none_or(|a| a(self.ordinal(s)));
        let mut candidates = BinaryHeap::from([(Score(cur_s), Reverse(cur))]);
        let mut top = BinaryHeap::from([Reverse((Score(cur_s), cur))]);
        let mut found = BinaryHeap::new();
        if allowed(cur) {
            found.push(Reverse((Score(cur_s), cur)));
        }
        while let Some((Score(s), Reverse(c))) = candidates.pop() {
            if top.len() >= ef && top.peek().is_some_and(|Reverse((w, _))| s < w.0) {
                break;
            }
            self.links(c, 0, &mut links)?;
            for &n in &links {
                if seen(n) {
                    continue;
                }
                let sn = self.estimate(&table, n);
                let worst = top.peek().map(|Reverse((w, _))| w.0);
                if top.len() < ef || worst.is_some_and(|w| sn > w) {
                    candidates.push((Score(sn), Reverse(n)));
                    top.push(Reverse((Score(sn), n)));
                    if top.len() > ef {
                        top.pop();
                    }
                    if allowed(n) {
                        found.push(Reverse((Score(sn), n)));
                        if found.len() > ef {
                            found.pop();
                        }
                    }
                }
            }
        }
        let mut best: Vec<(Score, u32)> = found.into_iter().map(|Reverse(x)| x).collect();
        best.sort_by(|a, b| b.cmp(a));
        if let Some(per_row) = rescore {
            best.truncate(per_row.max(1).saturating_mul(limit));
        }
        let q8 = Self::as_i8(&q);
        let mut rescored: Vec<(f32, u32)> =
            best.into_iter().map(|(_, s)| (self.cosine(&q8, s), s)).collect();
        rescored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<(u64, f32)> = Vec::with_capacity(limit);
        for (score, slot) in rescored {
            let ordinal = self.ordinal(slot);
            if out.len() == limit {
                break;
            }
            if !out.iter().any(|(o, _)| *o == ordinal) {
                out.push((ordinal, score));
            }
        }
        Ok(out)
    }

    /// The exact top `limit` rows by the score a search gives (cosine of the i8-cast query and
    /// every i8 vector, max over a row's two): what the walk is measured against (benches and
    /// tests; reads every vector).
    pub fn exact(&self, query: &[f32], limit: usize) -> Vec<(u64, f32)> {
        let q = Self::as_i8(&Self::unit(query));
        let mut best: std::collections::HashMap<u64, f32> = Default::default();
        for slot in 0..self.header.count {
            let s = self.cosine(&q, slot);
            let e = best.entry(self.ordinal(slot)).or_insert(f32::MIN);
            *e = e.max(s);
        }
        let mut all: Vec<(u64, f32)> = best.into_iter().collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(limit);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::write_vector_index;
    use crate::{VECTOR_SCALAR, VectorIndex, quantize};

    /// `n` vectors of `dim` dimensions around 20 centres (clustered, as sentence vectors are).
    fn clustered(n: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        };
        let centres: Vec<Vec<f32>> = (0..20).map(|_| (0..dim).map(|_| next()).collect()).collect();
        (0..n).map(|i| centres[i % 20].iter().map(|c| c + 0.4 * next()).collect()).collect()
    }

    /// `vectors.hnsw` of `vectors` (and of the `second` vectors of some rows), each kept as
    /// rows.parquet keeps it.
    fn written(dir: &Path, vectors: &[Vec<f32>], second: &[(u32, &[f32])]) -> PathBuf {
        let path = dir.join("vectors.hnsw");
        let kept: Vec<Vec<i8>> = vectors.iter().map(|v| quantize(v)).collect();
        let refs: Vec<&[i8]> = kept.iter().map(Vec::as_slice).collect();
        let second_kept: Vec<(u32, Vec<i8>)> =
            second.iter().map(|(o, v)| (*o, quantize(v))).collect();
        let second: Vec<(u32, &[i8])> =
            second_kept.iter().map(|(o, v)| (*o, v.as_slice())).collect();
        write_vector_index(&path, vectors[0].len(), &refs, &second).unwrap();
        path
    }

    #[test]
    fn the_code_walk_finds_the_exact_top_10_within_a_stated_tolerance() {
        let dir = tempfile::tempdir().unwrap();
        let vectors = clustered(3000, 64);
        let path = written(dir.path(), &vectors, &[]);
        let index = HnswIndex::open(&path, 64, 3000, 0).unwrap();
        let (mut found, mut asked) = (0, 0);
        for q in vectors.iter().step_by(37) {
            let exact: Vec<u64> = index.exact(q, 10).into_iter().map(|h| h.0).collect();
            let got = index.search(q, 10, DEFAULT_EF, None, None).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "best first: {got:?}");
            found += got.iter().filter(|h| exact.contains(&h.0)).count();
            asked += 10;
        }
        // The tolerance: 95% of the exact top 10 (the 100k bench finds 96.7%, usearch's own
        // i8 walk 93.7%).
        assert!(found as f64 >= 0.95 * asked as f64, "{found} of {asked}");
    }

    /// `vectors.hnsw` of `vectors` (and of some rows' `second` vectors) by [`HnswWriter`],
    /// around their mean.
    fn written_by_codes(
        dir: &Path,
        vectors: &[Vec<f32>],
        second: &[(u32, &[f32])],
        threads: usize,
    ) -> PathBuf {
        let path = dir.join("vectors.hnsw");
        let dim = vectors.first().map_or(8, Vec::len);
        let kept: Vec<Vec<i8>> = vectors.iter().map(|v| quantize(v)).collect();
        let second: Vec<(u32, Vec<i8>)> = second.iter().map(|(o, v)| (*o, quantize(v))).collect();
        let mut mean = MeanOf::new(dim);
        kept.iter().chain(second.iter().map(|(_, v)| v)).for_each(|v| mean.add_i8(v));
        let mut w = HnswWriter::new(&path, dim, mean.mean(), kept.len(), threads).unwrap();
        for (o, v) in kept.iter().enumerate() {
            w.add(o, v).unwrap();
        }
        for (o, v) in &second {
            w.add_second(*o as usize, v).unwrap();
        }
        w.finish().unwrap();
        path
    }

    #[test]
    fn a_graph_built_on_codes_finds_the_exact_top_10_as_usearch_s_does() {
        let dir = tempfile::tempdir().unwrap();
        let vectors = clustered(3000, 64);
        let ours = HnswIndex::open(&written_by_codes(dir.path(), &vectors, &[], 2), 64, 3000, 0);
        let ours = ours.unwrap();
        let other = tempfile::tempdir().unwrap();
        let usearch = HnswIndex::open(&written(other.path(), &vectors, &[]), 64, 3000, 0).unwrap();
        let found = |index: &HnswIndex| {
            let mut found = 0;
            for q in vectors.iter().step_by(37) {
                let exact: Vec<u64> = index.exact(q, 10).into_iter().map(|h| h.0).collect();
                let got = index.search(q, 10, DEFAULT_EF, None, None).unwrap();
                found += got.iter().filter(|h| exact.contains(&h.0)).count();
            }
            found
        };
        let (ours, theirs, asked) =
            (found(&ours), found(&usearch), vectors.len().div_ceil(37) * 10);
        // The same tolerance as usearch's graph is held to, and no fewer than 1% below it.
        assert!(ours as f64 >= 0.95 * asked as f64, "{ours} of {asked}");
        assert!(
            ours as f64 >= 0.99 * theirs as f64,
            "{ours} against usearch's {theirs} of {asked}"
        );
        // Nothing is left beside the file.
        let left: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["vectors.hnsw"]);
    }

    #[test]
    fn a_graph_built_on_codes_is_the_same_bytes_each_time_and_serves_second_vectors() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let vectors = clustered(700, 16);
        let far: Vec<f32> = clustered(721, 16)[720].iter().map(|x| -x).collect();
        let second = [(7u32, far.as_slice())];
        let (pa, pb) = (
            written_by_codes(a.path(), &vectors, &second, 1),
            written_by_codes(b.path(), &vectors, &second, 3),
        );
        assert_eq!(std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
        let index = HnswIndex::open(&pa, 16, 700, 1).unwrap();
        let hits = index.search(&far, 5, DEFAULT_EF, None, None).unwrap();
        assert_eq!(hits[0].0, 7, "{hits:?}");
        assert_eq!(hits.iter().filter(|h| h.0 == 7).count(), 1, "{hits:?}");
        // An empty graph is a file that answers nothing.
        let empty = written_by_codes(b.path(), &[], &[], 1);
        let index = HnswIndex::open(&empty, 8, 0, 0).unwrap();
        assert!(index.search(&[1.0; 8], 5, DEFAULT_EF, None, None).unwrap().is_empty());
    }

    /// Many batches (6,000 rows, every tenth with a second vector), written on one thread and
    /// on three: the same bytes, and each vector found first by its own search.
    #[test]
    fn a_graph_built_on_codes_on_several_threads_holds_every_vector_and_finds_each() {
        let (dim, n) = (64, 6_000);
        let all = clustered(n + n / 10, dim);
        let (vectors, extra) = all.split_at(n);
        let seconds: Vec<(u32, &[f32])> =
            (0..n as u32).step_by(10).zip(extra).map(|(o, v)| (o, v.as_slice())).collect();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let one = written_by_codes(a.path(), vectors, &seconds, 1);
        let three = written_by_codes(b.path(), vectors, &seconds, 3);
        assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&three).unwrap());
        let index = HnswIndex::open(&one, dim, n as u64, seconds.len() as u64).unwrap();
        let first = |q: &[f32], want: u64| {
            usize::from(index.search(q, 1, DEFAULT_EF, None, None).unwrap()[0].0 == want)
        };
        let mut found = 0;
        for (i, v) in vectors.iter().enumerate().step_by(7) {
            found += first(v, i as u64);
        }
        for (o, v) in seconds.iter().step_by(3) {
            found += first(v, u64::from(*o));
        }
        let asked = n.div_ceil(7) + seconds.len().div_ceil(3);
        assert!(found * 100 >= asked * 98, "found {found} of {asked} first");
    }

    #[test]
    fn a_vector_of_another_dimension_is_refused_and_a_dropped_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.hnsw");
        let mut w = HnswWriter::new(&path, 16, vec![0.0; 16], 4, 1).unwrap();
        w.add(0, &[1; 16]).unwrap();
        let err = w.add(1, &[1; 8]).unwrap_err().to_string();
        assert!(err.contains("8 dimensions, not 16") && err.contains("vectors.hnsw"), "{err}");
        let err = w.add(1 << 31, &[1; 16]).unwrap_err().to_string();
        assert!(err.contains("does not fit 31 bits"), "{err}");
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let err = HnswWriter::new(&path, 16, vec![0.0; 8], 4, 1).err().unwrap().to_string();
        assert!(err.contains("a mean of 8 dimensions for 16"), "{err}");
    }

    #[test]
    fn second_vectors_answer_as_their_row_once_and_filters_see_ordinals() {
        let dir = tempfile::tempdir().unwrap();
        let vectors = clustered(500, 16);
        // Row 7's second vector: one more draw, in no cluster.
        let far: Vec<f32> = clustered(521, 16)[520].iter().map(|x| -x).collect();
        let path = written(dir.path(), &vectors, &[(7, far.as_slice())]);
        let index = HnswIndex::open(&path, 16, 500, 1).unwrap();
        let hits = index.search(&far, 5, DEFAULT_EF, None, None).unwrap();
        assert_eq!(hits[0].0, 7, "{hits:?}");
        assert_eq!(hits.iter().filter(|h| h.0 == 7).count(), 1, "{hits:?}");
        let without: &(dyn Fn(u64) -> bool + Send + Sync) = &|o| o != 7;
        let hits = index.search(&far, 5, DEFAULT_EF, None, Some(without)).unwrap();
        assert_eq!(hits.len(), 5);
        assert!(hits.iter().all(|h| h.0 != 7), "{hits:?}");
    }

    #[test]
    fn an_empty_index_answers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.hnsw");
        write_vector_index(&path, 8, &[], &[]).unwrap();
        let index = VectorIndex::open(&path, 8, 0, 0, VECTOR_SCALAR).unwrap();
        assert!(index.search(&[1.0; 8], 5, None).unwrap().is_empty());
    }

    /// What a crafted or cut usearch file gets from the conversion: an error naming what is
    /// wrong, never a panic or a converted file.
    #[test]
    fn a_truncated_or_tampered_usearch_file_is_refused_by_the_conversion() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("vectors.usearch-tmp"), dir.path().join("vectors.hnsw"));
        let index = usearch::Index::new(&usearch::IndexOptions {
            dimensions: 16,
            metric: usearch::MetricKind::Cos,
            quantization: usearch::ScalarKind::I8,
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 96,
            multi: false,
        })
        .unwrap();
        index.reserve(300).unwrap();
        for (i, v) in clustered(300, 16).iter().enumerate() {
            index.add(i as u64, &quantize(v)).unwrap();
        }
        index.save(src.to_str().unwrap()).unwrap();
        let good = std::fs::read(&src).unwrap();
        convert_usearch(&src, &dst, 16).unwrap();
        assert!(HnswIndex::open(&dst, 16, 300, 0).is_ok());
        let refused = |bytes: &[u8], dim: usize, want: &str| {
            std::fs::write(&src, bytes).unwrap();
            let err = convert_usearch(&src, &dst, dim).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} in {err}");
        };
        let head = 8 + 300 * 16;
        refused(&good[..good.len() - 1], 16, "its graph needs");
        refused(&good[..6], 16, "shorter than its own header");
        refused(&good[..head + 50], 16, "shorter than its own header");
        refused(&good[..head + 104 + 10], 16, "shorter than its own header");
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 8]);
        refused(&longer, 16, "its graph needs");
        refused(&good, 32, "16 bytes a vector, not 32");
        let mut magic = good.clone();
        magic[head] = b'X';
        refused(&magic, 16, "shorter than its own header");
        let mut scalar = good.clone();
        scalar[head + 14] = 1;
        refused(&scalar, 16, "scalar/key/slot kinds 1/14/15");
        let mut size = good.clone();
        size[head + 64..head + 72].copy_from_slice(&301u64.to_le_bytes());
        refused(&size, 16, "graph header: 301 nodes of 300");
        // A node's level raised: its tape would be longer than the file holds.
        let mut level = good.clone();
        level[head + 104..head + 106].copy_from_slice(&5i16.to_le_bytes());
        refused(&level, 16, "its graph needs");
    }

    /// What a crafted or cut file gets: an error naming the file and what is wrong, from open
    /// (before the map) or from the search that reads a bad link; never a panic.
    #[test]
    fn a_crafted_or_truncated_file_is_refused_before_it_is_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let vectors = clustered(300, 16);
        let path = written(dir.path(), &vectors, &[]);
        let good = std::fs::read(&path).unwrap();
        let refused = |bytes: &[u8], want: &str| {
            std::fs::write(&path, bytes).unwrap();
            let err = HnswIndex::open(&path, 16, 300, 0).unwrap_err().to_string();
            assert!(err.contains("vectors.hnsw") && err.contains(want), "{err}");
        };
        refused(&good[..good.len() - 1], "need exactly");
        refused(&good[..40], "shorter than the header");
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 8]);
        refused(&longer, "need exactly");
        let mut magic = good.clone();
        magic[0] = b'X';
        refused(&magic, "HUBDEXHN");
        // A header claiming more vectors than segment.json.
        let mut count = good.clone();
        count[16..20].copy_from_slice(&301u32.to_le_bytes());
        refused(&count, "301 vectors");
        // A header whose sections claim more than the file holds, consistently with the
        // segment (upper links inflated).
        let mut upper = good.clone();
        upper[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
        refused(&upper, "need exactly");
        let mut entry = good.clone();
        entry[32..36].copy_from_slice(&300u32.to_le_bytes());
        refused(&entry, "not a graph's");
        // Wrong dimension and row counts from segment.json.
        std::fs::write(&path, &good).unwrap();
        let err = HnswIndex::open(&path, 32, 300, 0).unwrap_err().to_string();
        assert!(err.contains("16 dimensions"), "{err}");
        let err = HnswIndex::open(&path, 16, 299, 1).unwrap_err().to_string();
        assert!(err.contains("299 rows"), "{err}");
        // A link to a slot past the end: the search that reads it says so.
        let h = Header::parse(&path, &good).unwrap();
        let at = h.sections().level0 + (h.entry as usize) * (1 + h.m0 as usize) * 4;
        let mut link = good.clone();
        link[at + 4..at + 8].copy_from_slice(&5000u32.to_le_bytes());
        std::fs::write(&path, &link).unwrap();
        let index = HnswIndex::open(&path, 16, 300, 0).unwrap();
        let err = index.search(&vectors[0], 10, DEFAULT_EF, None, None).unwrap_err().to_string();
        assert!(err.contains("links to slot 5000"), "{err}");
    }
}
