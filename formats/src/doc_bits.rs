//! A set of doc ids (= ordinals) of one index as a bitset: what a filter or a scope accepts,
//! read by the vector search, BM25's MaxScore and the scoped statistics.

use tantivy::{DocId, TERMINATED};

/// The doc ids (= ordinals) a filter accepts in one index.
#[derive(Debug, Clone)]
pub struct DocBits {
    words: Vec<u64>,
    count: u32,
}

impl DocBits {
    /// The empty set of an index of `max_doc` docs.
    pub(crate) fn empty(max_doc: DocId) -> DocBits {
        DocBits { words: vec![0; (max_doc as usize).div_ceil(64)], count: 0 }
    }

    /// Adds `docs`, each below the index's `max_doc` and not in the set yet (a query's matches,
    /// as tantivy gives them: ascending, each once).
    pub(crate) fn insert_sorted(&mut self, docs: &[DocId]) {
        for &d in docs {
            self.words[(d / 64) as usize] |= 1 << (d % 64);
        }
        self.count += docs.len() as u32;
    }

    /// Whether `doc` is in the set.
    pub fn contains(&self, doc: u64) -> bool {
        self.words.get((doc / 64) as usize).is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    /// How many docs are in the set.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The first doc in the set at or after `doc`, or `TERMINATED`.
    pub(crate) fn first_from(&self, doc: DocId) -> DocId {
        let mut w = (doc / 64) as usize;
        let Some(&first) = self.words.get(w) else { return TERMINATED };
        let mut word = first & (u64::MAX << (doc % 64));
        loop {
            if word != 0 {
                return (w * 64) as DocId + word.trailing_zeros();
            }
            w += 1;
            match self.words.get(w) {
                Some(&next) => word = next,
                None => return TERMINATED,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter's bitset finds the next doc it holds from anywhere, across words.
    #[test]
    fn a_filters_bitset_finds_the_next_doc_it_holds() {
        let mut bits = DocBits::empty(256);
        bits.insert_sorted(&[0, 63, 64, 200]);
        assert_eq!(bits.count(), 4);
        let firsts: Vec<u32> = [0, 1, 63, 64, 65, 199, 200].map(|d| bits.first_from(d)).into();
        assert_eq!(firsts, vec![0, 63, 63, 64, 200, 200, 200]);
        assert_eq!(bits.first_from(201), TERMINATED);
        assert_eq!(bits.first_from(10_000), TERMINATED);
        assert!(bits.contains(64) && !bits.contains(65) && !bits.contains(100_000));
    }
}
