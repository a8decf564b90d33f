//! The serving index read: opened, searched by BM25 (MaxScore), rows and columns read back.

use std::ops::Bound;
use std::path::Path;

use tantivy::columnar::StrColumn;
use tantivy::query::{Bm25Weight, BooleanQuery, Occur, Query, RangeQuery};
use tantivy::schema::{Field, IndexRecordOption, Value};
use tantivy::{DateTime, DocAddress, DocId, Index, SegmentReader, TantivyDocument, Term};

use crate::error::FormatError;
use crate::maxscore::{self, TermCursor};
use crate::row::Row;
use crate::scope_stats::{ScopeCache, ScopeDocs, Stats};
use crate::text::{BOOST_BODY, BOOST_PATH, BOOST_SYMBOL, BOOST_TITLE, register_analyzers};
#[cfg(test)]
use tantivy::query::{BoostQuery, ConstScoreQuery, EnableScoring, TermQuery};

use super::{
    Columns, CompiledFilter, DOC_STORE_CACHE_BLOCKS, ServingIndex, doc_of_term, fields_of, micros,
    open_searcher, terms_with_prefix,
};

/// One scanned row: its time in microseconds, its id and its doc id.
pub type ScanHit = (i64, String, u32);

/// The score a BM25 hit needs to make a search's pool, shared by the indexes searched for it
/// (from different threads): the best `limit`-th score any one of them has found so far, since
/// the pool holds at least that index's `limit` docs at or above it. Starts at 0; BM25 scores
/// are not negative.
#[derive(Debug, Default)]
pub struct ScoreFloor(std::sync::atomic::AtomicU32);

impl ScoreFloor {
    /// A floor no hit is under.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the floor to `score` if it is higher. Non-negative floats order as their bits.
    fn raise(&self, score: f32) {
        if score > 0.0 {
            self.0.fetch_max(score.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// What a doc must beat (tantivy passes on only scores above the threshold): just under
    /// the floor, so a doc equal to it is still kept, as the pool's cut by (score, unit, doc)
    /// may keep it.
    fn threshold(&self) -> f32 {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => f32::MIN,
            bits => f32::from_bits(bits - 1),
        }
    }
}

/// One BM25 hit, ordered worse-first by score and then by the later doc (so a min-heap's top
/// is the one to drop).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hit {
    score: f32,
    doc: u32,
}

impl Eq for Hit {}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score.total_cmp(&other.score).then(other.doc.cmp(&self.doc))
    }
}

/// The best `limit` hits of one index so far: a min-heap, the worst on top. As in tantivy's
/// TopDocs, a doc is passed on only when it beats the threshold, so of equal scores the first
/// stays. With a shared floor, the threshold is the higher of it and this heap's worst once
/// full, and a full heap raises the floor.
struct TopHits<'a> {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Hit>>,
    limit: usize,
    floor: Option<&'a ScoreFloor>,
}

impl<'a> TopHits<'a> {
    fn new(limit: usize, floor: Option<&'a ScoreFloor>) -> Self {
        let heap = std::collections::BinaryHeap::with_capacity(limit + 1);
        TopHits { heap, limit, floor }
    }

    /// What a doc must beat now.
    fn threshold(&self) -> f32 {
        let shared = self.floor.map_or(f32::MIN, ScoreFloor::threshold);
        match self.heap.peek() {
            Some(worst) if self.heap.len() == self.limit => shared.max(worst.0.score),
            _ => shared,
        }
    }

    /// Keeps `doc` if it is among the best `limit`; returns the threshold after it.
    fn push(&mut self, doc: DocId, score: f32) -> f32 {
        self.heap.push(std::cmp::Reverse(Hit { score, doc }));
        if self.heap.len() > self.limit {
            self.heap.pop();
        }
        if self.heap.len() == self.limit
            && let (Some(f), Some(worst)) = (self.floor, self.heap.peek())
        {
            f.raise(worst.0.score);
        }
        self.threshold()
    }

    /// The hits, best first, ties by doc.
    fn into_sorted(self) -> Vec<(u32, f32)> {
        let mut hits: Vec<(u32, f32)> =
            self.heap.into_iter().map(|h| (h.0.doc, h.0.score)).collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits
    }
}

impl ServingIndex {
    /// Opens the serving index in `dir` (mmap). The caller has verified its files.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let mapped = tantivy::directory::MmapDirectory::open_with_madvice(
            dir,
            tantivy::directory::Advice::Random,
        )
        .map_err(|e| tv(e.into()))?;
        let index = Index::open(mapped).map_err(tv)?;
        register_analyzers(&index);
        let f = fields_of(&index.schema()).map_err(|e| FormatError::Schema {
            what: dir.display().to_string(),
            detail: format!("not a format-3 serving index: {e}"),
        })?;
        let (reader, searcher) = open_searcher(&index, dir, DOC_STORE_CACHE_BLOCKS)?;
        if searcher.segment_readers().len() > 1 {
            return Err(FormatError::Schema {
                what: dir.display().to_string(),
                detail: format!(
                    "{} tantivy segments, expected one",
                    searcher.segment_readers().len()
                ),
            });
        }
        let columns = match searcher.segment_readers().first() {
            None => None,
            Some(seg) => {
                let ff = seg.fast_fields();
                let str_col = |name: &str| -> Result<StrColumn, FormatError> {
                    ff.str(name).map_err(tv)?.ok_or_else(|| FormatError::Schema {
                        what: dir.display().to_string(),
                        detail: format!("fast field {name} is missing"),
                    })
                };
                Some(Columns {
                    id: str_col("id")?,
                    repo: str_col("repo")?,
                    entity: str_col("entity")?,
                    updated: ff.date("updated_at").map_err(tv)?,
                    created: ff.date("created_at").map_err(tv)?,
                })
            }
        };
        let mut weighted = vec![(f.title, BOOST_TITLE), (f.body, BOOST_BODY), (f.path, BOOST_PATH)];
        weighted.extend(f.symbol.map(|s| (s, BOOST_SYMBOL)));
        let mut bm25 = Vec::new();
        for (field, boost) in weighted {
            bm25.push((field, boost, index.tokenizer_for_field(field).map_err(tv)?));
        }
        Ok(ServingIndex {
            _reader: reader,
            searcher,
            f,
            bm25,
            columns,
            path: dir.to_path_buf(),
            decoded: std::sync::atomic::AtomicU64::new(0),
            scopes: ScopeCache::default(),
        })
    }

    pub(super) fn tv(&self) -> impl Fn(tantivy::TantivyError) -> FormatError + '_ {
        |source| FormatError::Tantivy { path: self.path.clone(), source }
    }

    pub(super) fn io(&self) -> impl Fn(std::io::Error) -> FormatError + '_ {
        |e| FormatError::io(&self.path, e)
    }

    pub(super) fn segment(&self) -> Option<&SegmentReader> {
        self.searcher.segment_readers().first()
    }

    /// Rows in the index.
    pub fn num_docs(&self) -> u64 {
        self.searcher.num_docs()
    }

    /// The terms of the BM25 query of a text: every word it analyses to, in every field, with
    /// the field's weight.
    fn text_terms(&self, text: &str) -> Vec<(Term, f32)> {
        let mut terms: Vec<(Term, f32)> = Vec::new();
        for (field, boost, analyzer) in &self.bm25 {
            let mut analyzer = analyzer.clone();
            let mut stream = analyzer.token_stream(text);
            let mut seen = std::collections::HashSet::new();
            while let Some(tok) = stream.next() {
                if seen.insert(tok.text.clone()) {
                    terms.push((Term::from_field_text(*field, &tok.text), *boost));
                }
            }
        }
        terms
    }

    /// The statistics a search under `filter` is scored with: over the docs its scope allows
    /// when the scope hides some rows of this index, else the whole index's.
    fn stats(&self, filter: Option<&CompiledFilter>) -> Result<Stats<'_>, FormatError> {
        let (Some((key, query)), Some(seg)) =
            (filter.and_then(|f| f.scope.as_ref()), self.segment())
        else {
            return Ok(Stats::whole(&self.searcher));
        };
        let fields: Vec<Field> = self.bm25.iter().map(|(f, _, _)| *f).collect();
        let docs = self
            .scopes
            .get_or_make(key, || {
                let bits = self
                    .bits_of(query.as_ref())
                    .map_err(|e| tantivy::TantivyError::InternalError(e.to_string()))?;
                ScopeDocs::new(seg, bits, &fields)
            })
            .map_err(self.tv())?;
        Ok(Stats::scoped(&self.searcher, seg, docs))
    }

    /// A document scores by the words it has (no operators, so nothing is a syntax error).
    #[cfg(test)]
    fn any_of(terms: Vec<(Term, f32)>) -> BooleanQuery {
        let clauses = terms
            .into_iter()
            .map(|(term, boost)| {
                let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                (Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost)) as Box<dyn Query>)
            })
            .collect();
        BooleanQuery::new(clauses)
    }

    /// BM25 search: up to `limit` (doc, score) pairs, best first, among the docs `filter`
    /// accepts (the filter adds nothing to the score). Every term of the query counts.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        filter: Option<&CompiledFilter>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        self.search_with(query, limit, filter, None)
    }

    /// [`Self::search`] for one of several indexes searched for one pool, which share `floor`:
    /// a doc under the `limit`-th best score another index has found cannot make the pool and
    /// is skipped.
    pub fn search_with(
        &self,
        query: &str,
        limit: usize,
        filter: Option<&CompiledFilter>,
        floor: Option<&ScoreFloor>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let stats = self.stats(filter)?;
        self.top_docs(self.text_terms(query), limit.max(1), filter, floor, &stats)
    }

    /// [`Self::search`] by tantivy's block-max WAND: the same scores by another walk, which
    /// the tests hold MaxScore to.
    #[cfg(test)]
    pub(super) fn search_by_wand(
        &self,
        query: &str,
        limit: usize,
        filter: Option<&CompiledFilter>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let stats = self.stats(filter)?;
        self.top_docs_by_wand(self.text_terms(query), limit.max(1), filter, None, &stats)
    }

    /// The best `limit` (≥ 1) docs of the weighted `terms` that `filter` accepts, by their BM25
    /// score, best first and ties by doc, found by MaxScore. With a `floor`, docs scoring under
    /// it are skipped and the floor is raised to this index's `limit`-th score once it has
    /// `limit` docs.
    fn top_docs(
        &self,
        terms: Vec<(Term, f32)>,
        limit: usize,
        filter: Option<&CompiledFilter>,
        floor: Option<&ScoreFloor>,
        stats: &Stats<'_>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        let bits = filter.map(|f| self.filter_bits(f)).transpose()?;
        if bits.as_ref().is_some_and(|b| b.count() == 0) {
            return Ok(Vec::new());
        }
        let mut cursors = Vec::with_capacity(terms.len());
        for (term, boost) in &terms {
            let field = term.field();
            let inverted = seg.inverted_index(field).map_err(self.tv())?;
            let Some(postings) =
                inverted.read_postings(term, IndexRecordOption::WithFreqs).map_err(self.io())?
            else {
                continue;
            };
            let norms = seg.get_fieldnorms_reader(field).map_err(self.tv())?;
            // As tantivy's TermQuery weighs a term, boosted as its BoostQuery would.
            let weight = Bm25Weight::for_terms(stats, std::slice::from_ref(term))
                .map_err(self.tv())?
                .boost_by(*boost);
            cursors.push(TermCursor::new(postings, norms, weight));
        }
        let mut top = TopHits::new(limit, floor);
        maxscore::for_each_pruning(cursors, top.threshold(), bits.as_ref(), &mut |doc, score| {
            top.push(doc, score)
        });
        Ok(top.into_sorted())
    }

    /// [`Self::top_docs`] by tantivy's block-max WAND over a `BooleanQuery` of the terms (with
    /// a filter, an intersection that does not prune).
    #[cfg(test)]
    fn top_docs_by_wand(
        &self,
        terms: Vec<(Term, f32)>,
        limit: usize,
        filter: Option<&CompiledFilter>,
        floor: Option<&ScoreFloor>,
        stats: &Stats<'_>,
    ) -> Result<Vec<(u32, f32)>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        let text = Self::any_of(terms);
        let query: Box<dyn Query> = match filter {
            None => Box::new(text),
            Some(f) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(text) as Box<dyn Query>),
                (Occur::Must, Box::new(ConstScoreQuery::new(f.query.box_clone(), 0.0))),
            ])),
        };
        let weight = query
            .weight(EnableScoring::enabled_from_statistics_provider(stats, &self.searcher))
            .map_err(self.tv())?;
        let mut top = TopHits::new(limit, floor);
        weight
            .for_each_pruning(top.threshold(), seg, &mut |doc, score| top.push(doc, score))
            .map_err(self.tv())?;
        Ok(top.into_sorted())
    }

    /// The doc of the row with this id.
    pub fn doc_of_id(&self, id: &str) -> Result<Option<u32>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(None) };
        doc_of_term(seg, &Term::from_field_text(self.f.id, id), &self.path)
    }

    /// Entity keys of this index starting with `prefix` (`commit/1a2b` for a short SHA), at
    /// most `limit`, from the term dictionary.
    pub fn entities_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, FormatError> {
        let Some(seg) = self.segment() else { return Ok(Vec::new()) };
        terms_with_prefix(seg, self.f.entity, prefix, limit, &self.path)
    }

    /// How many stored rows [`Self::row`] has decoded since the index was opened: what shows
    /// that a scope check, made on columns, reads no row it refuses.
    pub fn rows_decoded(&self) -> u64 {
        self.decoded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The stored row of `doc`, without its embeddings.
    pub fn row(&self, doc: u32) -> Result<Row, FormatError> {
        self.decoded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d: TantivyDocument = self.searcher.doc(DocAddress::new(0, doc)).map_err(self.tv())?;
        let bytes = d.get_first(self.f.row).and_then(|v| v.as_bytes()).ok_or_else(|| {
            FormatError::Schema {
                what: self.path.display().to_string(),
                detail: format!("doc {doc} has no stored row"),
            }
        })?;
        serde_json::from_slice(bytes)
            .map_err(|e| FormatError::json(format!("{} doc {doc}", self.path.display()), e))
    }

    /// Every stored row, in ordinal order (for tools and tests: a request reads only its own
    /// rows).
    pub fn rows(&self) -> Result<Vec<Row>, FormatError> {
        let max = self.segment().map_or(0, |s| s.max_doc());
        (0..max).map(|d| self.row(d)).collect()
    }

    fn columns(&self) -> Result<&Columns, FormatError> {
        self.columns.as_ref().ok_or_else(|| FormatError::Schema {
            what: self.path.display().to_string(),
            detail: "the index is empty".into(),
        })
    }

    /// The repository of the row at `doc`, from the `repo` column: what a scope check reads
    /// before any stored row is decoded.
    pub fn repo_of(&self, doc: u32) -> Result<String, FormatError> {
        let c = self.columns()?;
        str_of(&c.repo, doc).map_err(self.io())
    }

    /// The id of the row at `doc`, from the `id` column.
    pub fn id_of(&self, doc: u32) -> Result<String, FormatError> {
        let c = self.columns()?;
        str_of(&c.id, doc).map_err(self.io())
    }

    /// A key equal for rows of the same repository and entity in this index.
    pub fn entity_key(&self, doc: u32) -> Result<(u64, u64), FormatError> {
        let c = self.columns()?;
        let ord = |col: &StrColumn| col.term_ords(doc).next().unwrap_or(u64::MAX);
        Ok((ord(&c.repo), ord(&c.entity)))
    }

    /// The rows whose `updated_at` (or `created_at`) lies in [since, until), that `filter`
    /// accepts and that sort before `after` (time, id), newest first; ties on time broken by
    /// id, descending. At most `limit`.
    pub fn scan(
        &self,
        filter: Option<&CompiledFilter>,
        created: bool,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<ScanHit>, FormatError> {
        let Some(c) = &self.columns else { return Ok(Vec::new()) };
        let (field, col) =
            if created { (self.f.created_at, &c.created) } else { (self.f.updated_at, &c.updated) };
        let mut upper = until.timestamp_micros();
        if let Some((t, _)) = after {
            // Rows at the cursor's own time may still come after it (by id): keep them.
            upper = upper.min(t.saturating_add(1));
        }
        let range = RangeQuery::new(
            Bound::Included(Term::from_field_date(field, micros(since))),
            Bound::Excluded(Term::from_field_date(field, DateTime::from_timestamp_micros(upper))),
        );
        let query: Box<dyn Query> = match filter {
            None => Box::new(range),
            Some(f) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(range) as Box<dyn Query>),
                (Occur::Must, f.query.box_clone()),
            ])),
        };
        // A min-heap of the best `limit` (time, id ordinal, doc) seen so far.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(i64, u64, u32)>> =
            std::collections::BinaryHeap::new();
        let mut failed = None;
        let mut id = String::new();
        self.for_each_match(query.as_ref(), &mut |docs| {
            for &d in docs {
                let Some(t) = col.first(d).map(|t| t.into_timestamp_micros()) else { continue };
                let id_ord = c.id.term_ords(d).next().unwrap_or(0);
                if let Some((at, aid)) = after
                    && t == at
                {
                    match c.id.ord_to_str(id_ord, &mut id) {
                        Ok(_) if id.as_str() >= aid => continue,
                        Ok(_) => {}
                        Err(e) => {
                            failed = Some(e);
                            continue;
                        }
                    }
                }
                heap.push(std::cmp::Reverse((t, id_ord, d)));
                if heap.len() > limit {
                    heap.pop();
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(FormatError::io(&self.path, e));
        }
        let mut hits: Vec<(i64, u64, u32)> = heap.into_iter().map(|r| r.0).collect();
        hits.sort_by(|a, b| b.cmp(a));
        hits.into_iter().map(|(t, _, d)| Ok((t, str_of(&c.id, d).map_err(self.io())?, d))).collect()
    }
}

fn str_of(col: &StrColumn, doc: u32) -> std::io::Result<String> {
    let mut s = String::new();
    if let Some(ord) = col.term_ords(doc).next() {
        col.ord_to_str(ord, &mut s)?;
    }
    Ok(s)
}
