//! BM25 statistics over what a scoped caller may read. BM25 weighs a term by how many
//! documents hold it and a document by its length against the average; taken over the whole
//! index, both count rows the caller cannot see, so a score would move when a hidden
//! repository alone adds a word. For a caller whose scope hides rows of an index, the
//! statistics are taken over the rows it may read instead: the document count and each
//! field's token total over its scope's docs (computed once per index and scope, kept in a
//! small cache), and a term's document frequency counted on its postings within the scope
//! (kept with the scope's docs for the terms asked most recently: a caller's queries share
//! words).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, SegmentReader, TERMINATED, Term};

use crate::doc_bits::DocBits;

/// How many scopes' document sets one index keeps.
const SCOPES_KEPT: usize = 16;

/// How many terms' document frequencies a scope keeps in one index (~100 bytes each).
const TERMS_KEPT: usize = 4096;

/// The docs a scope allows in one index, with each BM25 field's token total over them and the
/// document frequencies within them of the terms counted so far.
#[derive(Debug)]
pub(crate) struct ScopeDocs {
    bits: DocBits,
    tokens: Vec<(Field, u64)>,
    dfs: Mutex<HashMap<Term, u64>>,
}

impl ScopeDocs {
    /// The statistics of the docs `bits` holds: each field's token total, summed from the
    /// field norms (the lengths BM25 itself uses).
    pub(crate) fn new(
        seg: &SegmentReader,
        bits: DocBits,
        fields: &[Field],
    ) -> tantivy::Result<ScopeDocs> {
        let mut tokens = Vec::with_capacity(fields.len());
        for &field in fields {
            let norms = seg.get_fieldnorms_reader(field)?;
            let mut total = 0u64;
            let mut doc = bits.first_from(0);
            while doc != TERMINATED {
                total += u64::from(norms.fieldnorm(doc));
                doc = bits.first_from(doc + 1);
            }
            tokens.push((field, total));
        }
        Ok(ScopeDocs { bits, tokens, dfs: Mutex::new(HashMap::new()) })
    }

    /// Docs of the scope holding `term`: counted on its postings the first time, then kept.
    fn doc_freq(&self, seg: &SegmentReader, term: &Term) -> tantivy::Result<u64> {
        let lock = || self.dfs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&n) = lock().get(term) {
            return Ok(n);
        }
        let inverted = seg.inverted_index(term.field())?;
        let mut n = 0u64;
        if let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::Basic)? {
            let mut doc = postings.doc();
            while doc != TERMINATED {
                n += u64::from(self.bits.contains(u64::from(doc)));
                doc = postings.advance();
            }
        }
        let mut kept = lock();
        if kept.len() >= TERMS_KEPT {
            kept.clear();
        }
        kept.insert(term.clone(), n);
        Ok(n)
    }
}

/// The scopes' document sets of one index, by scope fingerprint.
#[derive(Debug, Default)]
pub(crate) struct ScopeCache {
    kept: Mutex<HashMap<String, Arc<ScopeDocs>>>,
}

impl ScopeCache {
    /// The document set of scope `key`, made by `make` unless kept.
    pub(crate) fn get_or_make(
        &self,
        key: &str,
        make: impl FnOnce() -> tantivy::Result<ScopeDocs>,
    ) -> tantivy::Result<Arc<ScopeDocs>> {
        let lock = || self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = lock().get(key) {
            return Ok(d.clone());
        }
        let made = Arc::new(make()?);
        let mut kept = lock();
        if kept.len() >= SCOPES_KEPT {
            kept.clear();
        }
        kept.insert(key.to_string(), made.clone());
        Ok(made)
    }
}

/// The statistics one query is scored with: the whole index's, or those of the docs a scope
/// allows.
pub(crate) struct Stats<'a> {
    searcher: &'a Searcher,
    scoped: Option<(&'a SegmentReader, Arc<ScopeDocs>)>,
}

impl<'a> Stats<'a> {
    /// The whole index's statistics.
    pub(crate) fn whole(searcher: &'a Searcher) -> Stats<'a> {
        Stats { searcher, scoped: None }
    }

    /// The statistics of the docs `docs` holds.
    pub(crate) fn scoped(
        searcher: &'a Searcher,
        seg: &'a SegmentReader,
        docs: Arc<ScopeDocs>,
    ) -> Stats<'a> {
        Stats { searcher, scoped: Some((seg, docs)) }
    }
}

impl Bm25StatisticsProvider for Stats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match &self.scoped {
            None => self.searcher.total_num_tokens(field),
            Some((_, d)) => match d.tokens.iter().find(|(f, _)| *f == field) {
                Some((_, n)) => Ok(*n),
                None => self.searcher.total_num_tokens(field),
            },
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        match &self.scoped {
            None => self.searcher.total_num_docs(),
            Some((_, d)) => Ok(u64::from(d.bits.count())),
        }
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        match &self.scoped {
            None => self.searcher.doc_freq(term),
            Some((seg, docs)) => docs.doc_freq(seg, term),
        }
    }
}
