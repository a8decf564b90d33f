//! A request's row filter compiled into the serving index's doc sets.

use std::ops::Bound;

use tantivy::query::{
    BooleanQuery, EmptyQuery, EnableScoring, Occur, Query, RangeQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, TERMINATED, Term};

use crate::doc_bits::DocBits;
use crate::error::FormatError;
use crate::filter::{RowFilter, Scope};

use super::{CompiledFilter, ServingIndex, micros};

impl ServingIndex {
    /// The raw terms of `field` that `keep` accepts, streamed from `start` until `keep_going`
    /// says stop.
    fn terms_where(
        &self,
        field: Field,
        start: &str,
        keep_going: impl Fn(&str) -> bool,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<Term>, FormatError> {
        let mut out = Vec::new();
        let Some(seg) = self.segment() else { return Ok(out) };
        let inv = seg.inverted_index(field).map_err(self.tv())?;
        let mut stream =
            inv.terms().range().ge(start.as_bytes()).into_stream().map_err(self.io())?;
        while stream.advance() {
            let Ok(key) = std::str::from_utf8(stream.key()) else { continue };
            if !keep_going(key) {
                break;
            }
            if keep(key) {
                out.push(Term::from_field_text(field, key));
            }
        }
        Ok(out)
    }

    /// Compiles `filter` into a query over this index; `None` when no filter is set.
    pub fn compile(&self, filter: &RowFilter) -> Result<Option<CompiledFilter>, FormatError> {
        if filter.is_empty() && filter.scope.is_none() {
            return Ok(None);
        }
        let f = &self.f;
        let term = |field: Field, v: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(Term::from_field_text(field, v), IndexRecordOption::Basic))
        };
        let mut must: Vec<Box<dyn Query>> = Vec::new();
        if let Some(r) = &filter.repo {
            must.push(term(f.repo, r));
        }
        if !filter.types.is_empty() {
            let terms = filter.types.iter().map(|t| Term::from_field_text(f.row_type, t.as_str()));
            must.push(Box::new(TermSetQuery::new(terms)));
        }
        if let Some(s) = &filter.state {
            must.push(term(f.state, s));
        }
        for l in &filter.labels {
            must.push(term(f.labels, &l.to_ascii_lowercase()));
        }
        if let Some(m) = &filter.milestone {
            must.push(term(f.milestone, &m.to_ascii_lowercase()));
        }
        if let Some(a) = &filter.assignee {
            must.push(term(f.assignees, &a.to_ascii_lowercase()));
        }
        if let Some(a) = &filter.author {
            must.push(term(f.author, &a.to_ascii_lowercase()));
        }
        if let Some(p) = &filter.path_prefix {
            let terms = self.terms_where(f.paths, p, |k| k.starts_with(p.as_str()), |_| true)?;
            must.push(set_or_empty(terms));
        }
        if let Some(g) = &filter.files_glob {
            let terms = self.terms_where(f.paths, "", |_| true, |k| g.is_match(k))?;
            must.push(set_or_empty(terms));
        }
        if filter.since.is_some() || filter.until.is_some() {
            let bound = |t: Option<chrono::DateTime<chrono::Utc>>, incl: bool| match t {
                None => Bound::Unbounded,
                Some(t) => {
                    let term = Term::from_field_date(f.updated_at, micros(t));
                    if incl { Bound::Included(term) } else { Bound::Excluded(term) }
                }
            };
            must.push(Box::new(RangeQuery::new(
                bound(filter.since, true),
                bound(filter.until, false),
            )));
        }
        let mut scope_clauses: Vec<Box<dyn Query>> = Vec::new();
        if let Some(scope) = &filter.scope {
            // Only what the scope excludes from this index becomes a clause: a scope that
            // allows every repository here adds no repository clause at all.
            let all = self.terms_where(f.repo, "", |_| true, |_| true)?;
            let allowed: Vec<Term> = all
                .iter()
                .filter(|t| t.value().as_str().is_some_and(|r| scope.allows_repo(r)))
                .cloned()
                .collect();
            if allowed.len() < all.len() {
                scope_clauses.push(set_or_empty(allowed));
            }
            if !scope.types().is_empty() {
                let terms =
                    scope.types().iter().map(|t| Term::from_field_text(f.row_type, t.as_str()));
                scope_clauses.push(Box::new(TermSetQuery::new(terms)));
            }
        }
        let scope = match scope_clauses.len() {
            0 => None,
            _ if filter.whole_index_statistics => {
                must.extend(scope_clauses);
                None
            }
            _ => {
                let key = filter.scope.as_ref().map(Scope::fingerprint).unwrap_or_default();
                must.extend(scope_clauses.iter().map(|q| q.box_clone()));
                Some((key, all_of(scope_clauses)))
            }
        };
        if must.is_empty() {
            return Ok(None);
        }
        Ok(Some(CompiledFilter { query: all_of(must), scope }))
    }

    /// Calls `each` with every doc `query` matches, in doc order.
    pub(super) fn for_each_match(
        &self,
        query: &dyn Query,
        each: &mut dyn FnMut(&[DocId]),
    ) -> Result<(), FormatError> {
        let Some(seg) = self.segment() else { return Ok(()) };
        let weight = query
            .weight(EnableScoring::disabled_from_searcher(&self.searcher))
            .map_err(self.tv())?;
        weight.for_each_no_score(seg, each).map_err(self.tv())
    }

    /// The docs `filter` accepts, as a bitset over ordinals (for the vector search).
    pub fn filter_bits(&self, filter: &CompiledFilter) -> Result<DocBits, FormatError> {
        self.bits_of(filter.query.as_ref())
    }

    /// The docs `query` matches, as a bitset over ordinals.
    pub(super) fn bits_of(&self, query: &dyn Query) -> Result<DocBits, FormatError> {
        let max = self.segment().map_or(0, |s| s.max_doc());
        let mut bits = DocBits::empty(max);
        self.for_each_match(query, &mut |docs| bits.insert_sorted(docs))?;
        Ok(bits)
    }

    /// Whether `filter` accepts any doc of this index.
    fn any_match(&self, filter: &CompiledFilter) -> Result<bool, FormatError> {
        let Some(seg) = self.segment() else { return Ok(false) };
        let weight = filter
            .query
            .weight(EnableScoring::disabled_from_searcher(&self.searcher))
            .map_err(self.tv())?;
        let scorer = weight.scorer(seg, 1.0).map_err(self.tv())?;
        Ok(scorer.doc() != TERMINATED)
    }

    /// The names of the set filters that, each on its own, accept no doc of this index.
    pub fn unmatched(&self, filter: &RowFilter) -> Result<Vec<&'static str>, FormatError> {
        let mut out = Vec::new();
        for name in filter.set_names() {
            let alone = self.compile(&filter.only(name))?;
            if !alone.map(|c| self.any_match(&c)).transpose()?.unwrap_or(true) {
                out.push(name);
            }
        }
        Ok(out)
    }
}

/// A query matching what every one of `clauses` (at least one) matches.
fn all_of(mut clauses: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    if clauses.len() == 1 {
        return clauses.pop().expect("one clause");
    }
    Box::new(BooleanQuery::new(clauses.into_iter().map(|q| (Occur::Must, q)).collect()))
}

fn set_or_empty(terms: Vec<Term>) -> Box<dyn Query> {
    if terms.is_empty() { Box::new(EmptyQuery) } else { Box::new(TermSetQuery::new(terms)) }
}
