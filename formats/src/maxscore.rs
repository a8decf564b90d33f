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
//! of near-copies that score alike, that bookkeeping is the cost (docs/performance.md, "BM25's
//! tail, round 3").
//!
//! A document's score is the sum of its terms' BM25 scores, each computed as tantivy's
//! `TermScorer` does (same weight, field norm and frequency), summed in one fixed order (the
//! terms by falling bound) so that it does not depend on the threshold; only that order may
//! differ from tantivy's, in the last bit.

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::Bm25Weight;
use tantivy::{DocId, DocSet, Score, TERMINATED};

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

/// Calls `callback(doc, score)` for documents scoring above `threshold`, in doc order, and
/// takes the threshold it returns (as tantivy's `Weight::for_each_pruning`): every document
/// scoring above the threshold in force when it is reached is passed on; others may be
/// skipped. With `accepted`, only the documents it accepts count: `accepted(doc)` is the first
/// accepted document at or after `doc` (`TERMINATED` if none), and the cursors leap to it, so
/// a narrow filter drives the walk.
pub(crate) fn for_each_pruning(
    mut cursors: Vec<TermCursor>,
    mut threshold: Score,
    accepted: Option<&dyn Fn(DocId) -> DocId>,
    callback: &mut dyn FnMut(DocId, Score) -> Score,
) {
    cursors.retain(|c| c.doc() != TERMINATED);
    cursors.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    // below[i]: the most the first i cursors can add together.
    let mut below = Vec::with_capacity(cursors.len() + 1);
    let mut sum = 0.0f32;
    below.push(0.0);
    for c in &cursors {
        sum += c.bound;
        below.push(sum * BOUND_MARGIN);
    }
    // The first essential cursor: the first i whose prefix (with it) could beat the threshold.
    let essential = |threshold: Score| below[1..].partition_point(|&b| b <= threshold);
    let mut first = essential(threshold);
    while first < cursors.len() {
        let doc = cursors[first..].iter().map(TermCursor::doc).min().unwrap_or(TERMINATED);
        if doc == TERMINATED {
            return;
        }
        if let Some(accepted) = accepted {
            let next = accepted(doc);
            if next != doc {
                if next == TERMINATED {
                    return;
                }
                for c in &mut cursors[first..] {
                    if c.doc() < next {
                        c.postings.seek(next);
                    }
                }
                continue;
            }
        }
        // A doc's terms are summed from the highest bound down, essential ones first and then
        // the others, so the order is one whatever the threshold (which depends on what other
        // threads found first): the same query always gives the same bits.
        let mut score = 0.0f32;
        for c in cursors[first..].iter().rev() {
            if c.doc() == doc {
                score += c.score();
            }
        }
        // The non-essential cursors, the highest bound first, while the doc can still win.
        let mut i = first;
        while i > 0 && score + below[i] > threshold {
            i -= 1;
            if cursors[i].reach(doc) {
                score += cursors[i].score();
            }
        }
        let was = first;
        if i == 0 && score > threshold {
            threshold = callback(doc, score);
            first = essential(threshold);
        }
        for c in &mut cursors[was..] {
            if c.doc() == doc {
                c.postings.advance();
            }
        }
    }
}
