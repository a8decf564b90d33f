//! The trigram index's bytes: written whole by [`NgramWriter`], read in place by
//! [`NgramIndex`] (a caller maps the file or holds its bytes).
//!
//! Layout, little-endian: the magic `HXNG`, the layout version (`u32`), the number of
//! documents and of trigrams (`u32` each), then a table sorted by trigram of (trigram, byte
//! offset of its postings, document count), `u32` each, then the postings: each trigram's
//! documents in rising order as LEB128 gaps. Every read is bounds-checked: bytes that are not
//! such an index are an error, never a panic.

use std::collections::HashMap;

use integer_encoding::VarInt as _;

use super::{NgramError, Query, Trigram, trigrams_of};

const MAGIC: &[u8; 4] = b"HXNG";
const LAYOUT: u32 = 1;
const HEADER: usize = 16;
const ENTRY: usize = 12;

/// Writes a trigram index: documents are numbered in the order they are added.
#[derive(Debug, Default)]
pub struct NgramWriter {
    postings: HashMap<Trigram, Vec<u32>>,
    docs: u32,
}

impl NgramWriter {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a document; its number.
    pub fn add(&mut self, text: &[u8]) -> u32 {
        let doc = self.docs;
        for t in trigrams_of(text) {
            self.postings.entry(t).or_default().push(doc);
        }
        self.docs += 1;
        doc
    }

    /// The index's bytes.
    pub fn finish(self) -> Vec<u8> {
        let mut terms: Vec<(Trigram, Vec<u32>)> = self.postings.into_iter().collect();
        terms.sort_unstable_by_key(|(t, _)| *t);
        let mut postings = Vec::new();
        let mut table = Vec::with_capacity(terms.len() * ENTRY);
        for (t, docs) in &terms {
            table.extend_from_slice(&t.to_le_bytes());
            table.extend_from_slice(&(postings.len() as u32).to_le_bytes());
            table.extend_from_slice(&(docs.len() as u32).to_le_bytes());
            let mut last = 0u32;
            for (i, &d) in docs.iter().enumerate() {
                let gap = if i == 0 { d } else { d - last };
                postings.extend_from_slice(&gap.encode_var_vec());
                last = d;
            }
        }
        let mut out = Vec::with_capacity(HEADER + table.len() + postings.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&LAYOUT.to_le_bytes());
        out.extend_from_slice(&self.docs.to_le_bytes());
        out.extend_from_slice(&(terms.len() as u32).to_le_bytes());
        out.extend_from_slice(&table);
        out.extend_from_slice(&postings);
        out
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
            writer.add(t);
        }
        let bytes = writer.finish();
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
        writer.add(b"hello world");
        writer.add(b"world peace");
        let bytes = writer.finish();
        let index = NgramIndex::from_bytes(&bytes).unwrap();
        assert_eq!(index.postings(super::super::trigram(*b"wor")).unwrap(), [0, 1]);
        assert!(NgramIndex::from_bytes(b"nope").is_err());
        assert!(NgramIndex::from_bytes(&bytes[..HEADER + 3]).is_err());
        let mut later = bytes.clone();
        later[4] = 9;
        assert!(NgramIndex::from_bytes(&later).is_err(), "another layout is refused");
    }

    proptest::proptest! {
        /// Any cut or changed byte of a valid index gives an error or an answer, never a panic.
        #[test]
        fn a_damaged_index_never_panics(cut in 0usize..400, at in 0usize..400, byte: u8) {
            let mut writer = NgramWriter::new();
            for text in ["fn parse_args", "struct MemoryBudget", "parse the budget", "args"] {
                writer.add(text.as_bytes());
            }
            let mut bytes = writer.finish();
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
