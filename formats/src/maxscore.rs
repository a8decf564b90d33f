//! The top BM25 documents of a disjunction of weighted terms by MaxScore (Turtle and Flood,
//! 1995; Lucene's `MaxScoreBulkScorer` is the same idea), the way the serving index answers a
//! text query.
//!
//! Each term has an upper bound: the most it can add to a document's score (its BM25 weight).
//! With the terms in rising order of bound, the *non-essential* ones are the longest prefix
//! whose bounds sum to no more than the current threshold: a document that holds only those
//! cannot beat it. So documents are enumerated from the *essential* terms' postings alone, and
//! the non-essential terms are looked up (a seek) for a candidate only while its score plus what
//! the remaining ones could add still beats the threshold. As the threshold rises, terms move to
//! the non-essential side and their postings (a long query's common words, in four fields) are
//! no longer walked, only sought.
//!
//! Block-max WAND (what tantivy's `BooleanQuery` does) keeps every term's cursor sorted by doc
//! and re-sorts them after each scored document; over a 30-word query (~120 terms) on a corpus
//! of near-copies that score alike, that bookkeeping is the cost (docs/performance.md).
//!
//! A document's score is the sum of its terms' BM25 scores, each computed as tantivy's
//! `TermScorer` does (same weight, field norm and frequency), summed in one fixed order (the
//! terms by falling bound) so that it does not depend on the threshold; only that order may
//! differ from tantivy's, in the last bit.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::Bm25Weight;
use tantivy::{DocId, DocSet, Score, TERMINATED};

use crate::doc_bits::DocBits;

/// How much a sum of bounds is raised before it may prune: a float sum in another order can
/// come out a few ulps over the exact one, and a bound must never be under a score.
const BOUND_MARGIN: f32 = 1.0 + 1e-4;

/// One term's postings in one segment, with what scores it.
pub(crate) struct TermCursor {
    postings: SegmentPostings,
    norms: FieldNormReader,
    weight: Bm25Weight,
    /// The most this term adds to any document's score.
    bound: Score,
}

impl TermCursor {
    /// A cursor on the first posting; `weight` is the term's BM25 weight with its field's boost.
    pub(crate) fn new(
        postings: SegmentPostings,
        norms: FieldNormReader,
        weight: Bm25Weight,
    ) -> Self {
        let bound = weight.max_score();
        TermCursor { postings, norms, weight, bound }
    }

    fn doc(&self) -> DocId {
        self.postings.doc()
    }

    /// The score of the doc the cursor is on (as tantivy's `TermScorer::score`).
    fn score(&self) -> Score {
        let doc = self.postings.doc();
        self.weight.score(self.norms.fieldnorm_id(doc), self.postings.term_freq())
    }

    /// Moves to the first doc ≥ `target` and says whether that is `target`.
    fn reach(&mut self, target: DocId) -> bool {
        let at = self.postings.doc();
        let at = if at < target { self.postings.seek(target) } else { at };
        at == target
    }
}

/// The terms of one query in one segment, in rising order of bound, with the bounds' prefix
/// sums.
struct Terms {
    cursors: Vec<TermCursor>,
    /// `below[i]`: the most the first `i` cursors can add together (raised by `BOUND_MARGIN`).
    below: Vec<Score>,
}

impl Terms {
    fn new(mut cursors: Vec<TermCursor>) -> Self {
        cursors.retain(|c| c.doc() != TERMINATED);
        cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        let mut below = Vec::with_capacity(cursors.len() + 1);
        let mut sum = 0.0f32;
        below.push(0.0);
        for c in &cursors {
            sum += c.bound;
            below.push(sum * BOUND_MARGIN);
        }
        Terms { cursors, below }
    }

    /// The first essential cursor under `threshold`: the cursors before it together cannot
    /// beat it.
    fn essential(&self, threshold: Score) -> usize {
        self.below[1..].partition_point(|&b| b <= threshold)
    }

    /// Adds the non-essential cursors' scores of `doc` (those before `first`), the highest
    /// bound first, while the doc can still beat `threshold`; `None` once it cannot.
    fn complete(
        &mut self,
        doc: DocId,
        mut score: Score,
        first: usize,
        threshold: Score,
    ) -> Option<Score> {
        let mut i = first;
        while i > 0 {
            if score + self.below[i] <= threshold {
                return None;
            }
            i -= 1;
            if self.cursors[i].reach(doc) {
                score += self.cursors[i].score();
            }
        }
        (score > threshold).then_some(score)
    }
}

/// The doc ids gathered at once (see [`for_each_pruning`]): a candidate costs its postings, not
/// a look at every essential term (Lucene's `MaxScoreBulkScorer` does the same). Under test,
/// windows of 64 so that the test indexes' few hundred docs span several.
#[cfg(not(test))]
const WINDOW: u32 = 4096;
#[cfg(test)]
const WINDOW: u32 = 64;

/// Calls `callback(doc, score)` for documents scoring above `threshold`, in doc order, and
/// takes the threshold it returns (as tantivy's `Weight::for_each_pruning`): every document
/// scoring above the threshold in force when it is reached is passed on; others may be
/// skipped. With `filter`, only the documents it holds count, and each window starts at one
/// (the cursors leap to it, so a narrow filter drives the walk).
///
/// A window of doc ids is gathered at once: each essential term's postings in it are added
/// into a score per doc, from the highest bound down; then each doc of the window that some
/// essential term holds takes the non-essential terms' scores, the highest bound first, while
/// it can still win. So a doc's terms are summed in one order whatever the threshold (which
/// depends on what other threads found first), and the same query always gives the same bits.
pub(crate) fn for_each_pruning(
    cursors: Vec<TermCursor>,
    mut threshold: Score,
    filter: Option<&DocBits>,
    callback: &mut dyn FnMut(DocId, Score) -> Score,
) {
    let mut terms = Terms::new(cursors);
    let mut scores = vec![0.0f32; WINDOW as usize];
    let mut held = vec![0u64; WINDOW as usize / 64];
    let mut first = terms.essential(threshold);
    while first < terms.cursors.len() {
        let essential = &mut terms.cursors[first..];
        let start = essential.iter().map(TermCursor::doc).min().unwrap_or(TERMINATED);
        if start == TERMINATED {
            return;
        }
        if let Some(filter) = filter {
            let next = filter.first_from(start);
            if next == TERMINATED {
                return;
            }
            if next != start {
                for c in essential.iter_mut() {
                    c.reach(next);
                }
                continue;
            }
        }
        let end = start.saturating_add(WINDOW);
        for c in essential.iter_mut().rev() {
            let mut doc = c.doc();
            while doc < end {
                if filter.is_none_or(|f| f.contains(u64::from(doc))) {
                    let at = (doc - start) as usize;
                    held[at / 64] |= 1 << (at % 64);
                    scores[at] += c.score();
                }
                doc = c.postings.advance();
            }
        }
        for (w, bits) in held.iter_mut().enumerate() {
            let mut word = std::mem::take(bits);
            while word != 0 {
                let at = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let score = std::mem::take(&mut scores[at]);
                let doc = start + at as DocId;
                if let Some(score) = terms.complete(doc, score, first, threshold) {
                    threshold = callback(doc, score);
                }
            }
        }
        first = terms.essential(threshold);
    }
}
