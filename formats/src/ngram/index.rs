//! The trigram index's bytes: written whole by [`NgramWriter`], read in place by
//! [`NgramIndex`] (a caller maps the file or holds its bytes).
//!
//! Layout, little-endian: the magic `HXNG`, the layout version (`u32`), the number of
//! documents and of trigrams (`u32` each), then a table sorted by trigram of (trigram, byte
//! offset of its postings, document count), `u32` each, then the postings: each trigram's
//! documents in rising order as LEB128 gaps. Every read is bounds-checked: bytes that are not
//! such an index are an error, never a panic.

use integer_encoding::VarInt as _;

use super::{NgramError, Query, Trigram, trigrams_of};

const MAGIC: &[u8; 4] = b"HXNG";
const LAYOUT: u32 = 1;
const HEADER: usize = 16;
const ENTRY: usize = 12;

/// Writes a trigram index: documents are numbered in the order they are added. It holds at
/// most `held_pairs` (trigram, document) pairs: past that they are sorted and spilled to an
/// unnamed temporary file as a run, and [`NgramWriter::finish`] merges the runs, so what it
/// holds does not grow with the corpus. The bytes are the same however many runs were made.
#[derive(Debug)]
pub struct NgramWriter {
    pending: Vec<(Trigram, u32)>,
    held_pairs: usize,
    runs: Vec<std::fs::File>,
    docs: u32,
}

/// The pairs a writer holds by default before it spills a run: 8 MiB of them (a merge under
/// a build budget of 32 MiB holds them beside its other writers).
pub const NGRAM_HELD_PAIRS: usize = 1 << 20;

impl Default for NgramWriter {
    fn default() -> Self {
        Self::holding(NGRAM_HELD_PAIRS)
    }
}

impl NgramWriter {
    /// An empty index, holding [`NGRAM_HELD_PAIRS`] pairs at most.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty index holding at most `held_pairs` (trigram, document) pairs (8 bytes each).
    pub fn holding(held_pairs: usize) -> Self {
        NgramWriter {
            pending: Vec::new(),
            held_pairs: held_pairs.max(1),
            runs: Vec::new(),
            docs: 0,
        }
    }

    /// Adds a document; its number.
    pub fn add(&mut self, text: &[u8]) -> std::io::Result<u32> {
        let doc = self.docs;
        for t in trigrams_of(text) {
            self.pending.push((t, doc));
            if self.pending.len() >= self.held_pairs {
                self.spill()?;
            }
        }
        self.docs += 1;
        Ok(doc)
    }

    /// The pairs held, sorted, to a temporary file of their own.
    fn spill(&mut self) -> std::io::Result<()> {
        use std::io::{Seek as _, Write as _};
        self.pending.sort_unstable();
        let mut out = std::io::BufWriter::new(tempfile::tempfile()?);
        for (t, d) in self.pending.drain(..) {
            out.write_all(&t.to_le_bytes())?;
            out.write_all(&d.to_le_bytes())?;
        }
        let mut file = out.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        self.runs.push(file);
        self.pending.shrink_to(self.held_pairs);
        Ok(())
    }

    /// The index's bytes.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.finish_into(&mut out)?;
        Ok(out)
    }

    /// Writes the index to `out`. The postings go to an unnamed temporary file as they are
    /// made and are copied after the table, so what is held is the table (12 bytes a trigram).
    pub fn finish_into(mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        use std::io::{Seek as _, Write as _};
        let pairs: Box<dyn Iterator<Item = std::io::Result<(Trigram, u32)>>> =
            if self.runs.is_empty() {
                self.pending.sort_unstable();
                Box::new(std::mem::take(&mut self.pending).into_iter().map(Ok))
            } else {
                self.spill()?;
                Box::new(Merged::of(std::mem::take(&mut self.runs))?)
            };
        let mut postings = std::io::BufWriter::new(tempfile::tempfile()?);
        let (mut table, mut terms, mut written) = (Vec::new(), 0u32, 0usize);
        let mut current: Option<(Trigram, u32, u32)> = None; // trigram, count, last doc
        let close = |table: &mut Vec<u8>, t: Trigram, offset: usize, count: u32| {
            table.extend_from_slice(&t.to_le_bytes());
            table.extend_from_slice(&(offset as u32).to_le_bytes());
            table.extend_from_slice(&count.to_le_bytes());
        };
        let mut offset = 0;
        let mut gap = [0u8; 5];
        for pair in pairs {
            let (t, d) = pair?;
            let delta = match &mut current {
                Some((ct, count, last)) if *ct == t => {
                    let delta = d - *last;
                    *count += 1;
                    *last = d;
                    delta
                }
                _ => {
                    if let Some((ct, count, _)) = current {
                        close(&mut table, ct, offset, count);
                        terms += 1;
                    }
                    offset = written;
                    current = Some((t, 1, d));
                    d
                }
            };
            let n = delta.encode_var(&mut gap);
            postings.write_all(&gap[..n])?;
            written += n;
            if written > u32::MAX as usize {
                return Err(std::io::Error::other(
                    "the trigram index's postings pass 4 GiB: index fewer files per segment",
                ));
            }
        }
        if let Some((ct, count, _)) = current {
            close(&mut table, ct, offset, count);
            terms += 1;
        }
        out.write_all(MAGIC)?;
        out.write_all(&LAYOUT.to_le_bytes())?;
        out.write_all(&self.docs.to_le_bytes())?;
        out.write_all(&terms.to_le_bytes())?;
        out.write_all(&table)?;
        let mut postings = postings.into_inner().map_err(|e| e.into_error())?;
        postings.rewind()?;
        std::io::copy(&mut postings, out)?;
        Ok(())
    }
}

/// The spilled runs merged: every (trigram, document) pair in order, a pair of each run held.
struct Merged {
    runs: Vec<std::io::BufReader<std::fs::File>>,
    heads: std::collections::BinaryHeap<std::cmp::Reverse<((Trigram, u32), usize)>>,
}

impl Merged {
    fn of(files: Vec<std::fs::File>) -> std::io::Result<Merged> {
        let mut merged = Merged {
            runs: files.into_iter().map(std::io::BufReader::new).collect(),
            heads: std::collections::BinaryHeap::new(),
        };
        for i in 0..merged.runs.len() {
            merged.advance(i)?;
        }
        Ok(merged)
    }

    /// Reads run `i`'s next pair into the heads, if it has one.
    fn advance(&mut self, i: usize) -> std::io::Result<()> {
        use std::io::Read as _;
        let mut record = [0u8; 8];
        match self.runs[i].read_exact(&mut record) {
            Ok(()) => {
                let t = u32::from_le_bytes(record[..4].try_into().expect("4 bytes"));
                let d = u32::from_le_bytes(record[4..].try_into().expect("4 bytes"));
                self.heads.push(std::cmp::Reverse(((t, d), i)));
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Iterator for Merged {
    type Item = std::io::Result<(Trigram, u32)>;

    fn next(&mut self) -> Option<Self::Item> {
        let std::cmp::Reverse((pair, i)) = self.heads.pop()?;
        Some(self.advance(i).map(|()| pair))
    }
}

/// A trigram index read in place from its bytes.
#[derive(Debug, Clone, Copy)]
pub struct NgramIndex<'a> {
    docs: u32,
    table: &'a [u8],
    postings: &'a [u8],
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

impl<'a> NgramIndex<'a> {
    /// The index in `bytes`, its header and table checked.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Self, NgramError> {
        let damaged = |what: &str| NgramError::Damaged(what.to_string());
        if bytes.get(..4) != Some(MAGIC.as_slice()) {
            return Err(damaged("no HXNG magic"));
        }
        let layout = u32_at(bytes, 4).ok_or_else(|| damaged("no header"))?;
        if layout != LAYOUT {
            return Err(damaged(&format!("layout {layout}, this reader reads {LAYOUT}")));
        }
        let docs = u32_at(bytes, 8).ok_or_else(|| damaged("no header"))?;
        let terms = u32_at(bytes, 12).ok_or_else(|| damaged("no header"))? as usize;
        let table_end = terms
            .checked_mul(ENTRY)
            .and_then(|n| n.checked_add(HEADER))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| damaged("the trigram table is cut short"))?;
        Ok(NgramIndex { docs, table: &bytes[HEADER..table_end], postings: &bytes[table_end..] })
    }

    /// How many documents it indexes.
    pub fn docs(&self) -> u32 {
        self.docs
    }

    /// The documents holding trigram `t`, in rising order.
    pub fn postings(&self, t: Trigram) -> Result<Vec<u32>, NgramError> {
        let entries = self.table.len() / ENTRY;
        let (mut lo, mut hi) = (0, entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let key = u32_at(self.table, mid * ENTRY).expect("within the checked table");
            match key.cmp(&t) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.decode(mid),
            }
        }
        Ok(Vec::new())
    }

    fn decode(&self, entry: usize) -> Result<Vec<u32>, NgramError> {
        let damaged = || NgramError::Damaged(format!("the postings of entry {entry}"));
        let at = u32_at(self.table, entry * ENTRY + 4).ok_or_else(damaged)? as usize;
        let count = u32_at(self.table, entry * ENTRY + 8).ok_or_else(damaged)? as usize;
        let mut bytes = self.postings.get(at..).ok_or_else(damaged)?;
        let mut docs = Vec::with_capacity(count.min(self.docs as usize));
        let mut doc = 0u32;
        for i in 0..count {
            let (gap, used) = u32::decode_var(bytes).ok_or_else(damaged)?;
            doc = if i == 0 { gap } else { doc.checked_add(gap).ok_or_else(damaged)? };
            if doc >= self.docs || (i > 0 && gap == 0) {
                return Err(damaged());
            }
            docs.push(doc);
            bytes = &bytes[used..];
        }
        Ok(docs)
    }

    /// The documents that may match a pattern whose plan is `query`, in rising order: every
    /// document for [`Query::All`].
    pub fn candidates(&self, query: &Query) -> Result<Vec<u32>, NgramError> {
        Ok(match query {
            Query::All => (0..self.docs).collect(),
            Query::Nothing => Vec::new(),
            Query::Trigram(t) => self.postings(*t)?,
            Query::And(parts) => {
                let mut lists =
                    parts.iter().map(|q| self.candidates(q)).collect::<Result<Vec<_>, _>>()?;
                lists.sort_by_key(Vec::len);
                let mut lists = lists.into_iter();
                let mut out = lists.next().unwrap_or_default();
                for list in lists {
                    out.retain(|d| list.binary_search(d).is_ok());
                }
                out
            }
            Query::Or(parts) => {
                let mut out = Vec::new();
                for q in parts {
                    out.extend(self.candidates(q)?);
                }
                out.sort_unstable();
                out.dedup();
                out
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::*;

    fn corpus() -> Vec<Vec<u8>> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut texts = Vec::new();
        for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
            let entry = entry.unwrap();
            if entry.path().extension().is_some_and(|e| e == "rs") {
                texts.push(std::fs::read(entry.path()).unwrap());
            }
        }
        texts
    }

    /// Over this crate's sources: every document a pattern matches is a candidate, and a
    /// pattern with a rare literal leaves most documents out.
    #[test]
    fn candidates_hold_every_match_and_a_rare_literal_prunes() {
        let texts = corpus();
        let mut writer = NgramWriter::new();
        for t in &texts {
            writer.add(t).unwrap();
        }
        let bytes = writer.finish().unwrap();
        let index = NgramIndex::from_bytes(&bytes).unwrap();
        assert_eq!(index.docs() as usize, texts.len());
        let mut pruned = 0;
        for p in [r"fn from_bytes", r"\bunsafe\b", r"(?i)HXNG", r"Query::(And|Or)", r"\d+ MiB"] {
            let re = regex::bytes::Regex::new(p).unwrap();
            let candidates = index.candidates(&plan(p).unwrap()).unwrap();
            for (doc, text) in texts.iter().enumerate() {
                if re.is_match(text) {
                    assert!(candidates.binary_search(&(doc as u32)).is_ok(), "{p}: doc {doc}");
                }
            }
            if candidates.len() * 4 < texts.len() {
                pruned += 1;
            }
        }
        assert!(pruned >= 3, "rare literals should leave most documents out ({pruned} did)");
    }

    #[test]
    fn bytes_that_are_not_an_index_are_an_error() {
        let mut writer = NgramWriter::new();
        writer.add(b"hello world").unwrap();
        writer.add(b"world peace").unwrap();
        let bytes = writer.finish().unwrap();
        let index = NgramIndex::from_bytes(&bytes).unwrap();
        assert_eq!(index.postings(super::super::trigram(*b"wor")).unwrap(), [0, 1]);
        assert!(NgramIndex::from_bytes(b"nope").is_err());
        assert!(NgramIndex::from_bytes(&bytes[..HEADER + 3]).is_err());
        let mut later = bytes.clone();
        later[4] = 9;
        assert!(NgramIndex::from_bytes(&later).is_err(), "another layout is refused");
    }

    proptest::proptest! {
        /// A writer that spills every few pairs writes the same bytes as one that holds them all.
        #[test]
        fn spilled_runs_merge_into_the_same_bytes(
            texts in proptest::collection::vec("[a-e ]{0,40}", 0..12),
            held in 1usize..20,
        ) {
            let write = |held: usize| {
                let mut w = NgramWriter::holding(held);
                for t in &texts {
                    w.add(t.as_bytes()).unwrap();
                }
                w.finish().unwrap()
            };
            proptest::prop_assert_eq!(write(held), write(usize::MAX));
        }

        /// Any cut or changed byte of a valid index gives an error or an answer, never a panic.
        #[test]
        fn a_damaged_index_never_panics(cut in 0usize..400, at in 0usize..400, byte: u8) {
            let mut writer = NgramWriter::new();
            for text in ["fn parse_args", "struct MemoryBudget", "parse the budget", "args"] {
                writer.add(text.as_bytes()).unwrap();
            }
            let mut bytes = writer.finish().unwrap();
            if let Some(b) = bytes.get_mut(at) {
                *b = byte;
            }
            bytes.truncate(cut.max(1).min(bytes.len()));
            if let Ok(index) = NgramIndex::from_bytes(&bytes) {
                for p in ["parse", "budget", "args", "zzz"] {
                    let _ = index.candidates(&plan(p).unwrap());
                }
            }
        }
    }
}
