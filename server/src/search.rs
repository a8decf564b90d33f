//! Hybrid search over an open snapshot: BM25 and dense candidates per segment, fused by
//! reciprocal rank fusion, folded by entity.

use std::collections::HashMap;
use std::sync::Arc;

use hubdex_formats::{Embedder, Row};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::filter::{FILTER_ARGS, Filters};
use crate::snapshot::OpenSnapshot;

/// The RRF constant: a document at rank r contributes 1 / (K + r).
pub const RRF_K: f64 = 60.0;

/// Longest accepted query, in chars.
pub(crate) const MAX_QUERY_CHARS: usize = 2000;

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    Rrf,
    DenseOnly,
    SparseOnly,
}

impl Fusion {
    /// The names `fusion` accepts.
    pub const NAMES: [&'static str; 3] = ["rrf", "dense_only", "sparse_only"];

    fn parse(s: &str) -> Fusion {
        match s {
            "dense_only" => Fusion::DenseOnly,
            "sparse_only" => Fusion::SparseOnly,
            _ => Fusion::Rrf,
        }
    }
}

/// How results are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Relevance,
    UpdatedDesc,
    CreatedDesc,
}

impl Sort {
    /// The names `sort` accepts.
    pub const NAMES: [&'static str; 3] = ["relevance", "updated_desc", "created_desc"];

    fn parse(s: &str) -> Sort {
        match s {
            "updated_desc" => Sort::UpdatedDesc,
            "created_desc" => Sort::CreatedDesc,
            _ => Sort::Relevance,
        }
    }
}

/// A checked search request.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: String,
    pub top_k: usize,
    pub fusion: Fusion,
    pub sort: Sort,
    pub filters: Filters,
    pub rerank: bool,
    pub snapshot: Option<String>,
}

impl SearchRequest {
    /// Reads and checks the search tool's arguments.
    pub fn from_args(map: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut allowed = vec!["query", "top_k", "fusion", "sort", "rerank", "snapshot"];
        allowed.extend_from_slice(FILTER_ARGS);
        let a = Args::new(map, &allowed)?;
        Ok(SearchRequest {
            query: a.required_text("query", MAX_QUERY_CHARS)?,
            top_k: a.int_in("top_k", 1, 50, 10)? as usize,
            fusion: Fusion::parse(&a.one_of("fusion", &Fusion::NAMES, "rrf")?),
            sort: Sort::parse(&a.one_of("sort", &Sort::NAMES, "relevance")?),
            filters: Filters::from_args(&a)?,
            rerank: a.boolean("rerank", false)?,
            snapshot: a.string("snapshot")?,
        })
    }
}

/// Another row of the same entity, folded under the best-ranked one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SameEntityRow {
    pub id: String,
    #[serde(rename = "type")]
    pub row_type: String,
    pub url: Option<String>,
    pub updated_at: Option<String>,
    pub score: f64,
}

/// The rows folded into a result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SameEntity {
    pub count: usize,
    pub others: Vec<SameEntityRow>,
}

/// One search result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchResult {
    pub id: String,
    #[serde(rename = "type")]
    pub row_type: String,
    pub repo: String,
    pub number: Option<i64>,
    pub title: Option<String>,
    pub url: Option<String>,
    pub path: Option<String>,
    pub heading_path: Option<Vec<String>>,
    pub line_start: Option<i64>,
    pub line_end: Option<i64>,
    pub commit_sha: Option<String>,
    pub updated_at: Option<String>,
    /// For `sort: created_desc`; not part of the answer.
    #[serde(skip)]
    pub created_at: Option<String>,
    pub snippet: String,
    pub score: f64,
    pub sparse_score: Option<f32>,
    pub sparse_rank: Option<usize>,
    pub dense_score: Option<f32>,
    pub dense_rank: Option<usize>,
    pub same_entity: Option<SameEntity>,
}

/// The answer of a search.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchAnswer {
    pub snapshot: String,
    pub count: usize,
    pub filters_unmatched: Vec<String>,
    pub rerank_applied: bool,
    pub results: Vec<SearchResult>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    sparse: Option<(f32, usize)>,
    dense: Option<(f32, usize)>,
    fused: f64,
}

pub(crate) fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// Runs a search on `snap`. Embeds the query unless the fusion is sparse-only.
pub fn search(
    snap: &OpenSnapshot,
    embedder: &Embedder,
    req: &SearchRequest,
) -> Result<SearchAnswer, ToolError> {
    let filters_unmatched = req.filters.unmatched(snap);
    let pool = (req.top_k * 5).max(50);
    let allowed = req
        .filters
        .allowed(snap)
        .map(|per_seg| per_seg.into_iter().map(Arc::new).collect::<Vec<_>>());
    let fail =
        |e: hubdex_formats::FormatError| ToolError::Unavailable(format!("search failed: {e}"));

    let query_vec = match req.fusion {
        Fusion::SparseOnly => None,
        _ => Some(
            embedder
                .embed_one(&req.query)
                .map_err(|e| ToolError::Unavailable(format!("embedding the query: {e}")))?,
        ),
    };

    let mut sparse: Vec<(usize, u64, f32)> = Vec::new();
    let mut dense: Vec<(usize, u64, f32)> = Vec::new();
    for (si, seg) in snap.segments.iter().enumerate() {
        let allow: Option<Arc<dyn Fn(u64) -> bool + Send + Sync>> = match &allowed {
            None => None,
            Some(per_seg) => {
                let ok = per_seg[si].clone();
                if !ok.iter().any(|b| *b) {
                    continue;
                }
                Some(Arc::new(move |ord: u64| ok.get(ord as usize).copied().unwrap_or(false)))
            }
        };
        if req.fusion != Fusion::DenseOnly {
            for (ord, score) in seg.text.search(&req.query, pool, allow.clone()).map_err(fail)? {
                sparse.push((si, ord, score));
            }
        }
        if let Some(q) = &query_vec {
            for (ord, score) in seg.vectors.search(q, pool, allow.as_deref()).map_err(fail)? {
                dense.push((si, ord, score));
            }
        }
    }
    sparse.sort_by(|a, b| b.2.total_cmp(&a.2));
    dense.sort_by(|a, b| b.2.total_cmp(&a.2));
    sparse.truncate(pool);
    dense.truncate(pool);

    let mut cands: HashMap<(usize, u64), Candidate> = HashMap::new();
    for (rank, &(si, ord, score)) in sparse.iter().enumerate() {
        cands.entry((si, ord)).or_default().sparse = Some((score, rank + 1));
    }
    for (rank, &(si, ord, score)) in dense.iter().enumerate() {
        cands.entry((si, ord)).or_default().dense = Some((score, rank + 1));
    }
    for c in cands.values_mut() {
        c.fused = match req.fusion {
            Fusion::Rrf => {
                c.sparse.map_or(0.0, |(_, r)| 1.0 / (RRF_K + r as f64))
                    + c.dense.map_or(0.0, |(_, r)| 1.0 / (RRF_K + r as f64))
            }
            Fusion::DenseOnly => c.dense.map_or(0.0, |(s, _)| s as f64),
            Fusion::SparseOnly => c.sparse.map_or(0.0, |(s, _)| s as f64),
        };
    }
    let mut ranked: Vec<((usize, u64), Candidate)> = cands.into_iter().collect();
    // Ties break on row id so the same snapshot always gives the same order.
    ranked.sort_by(|a, b| {
        b.1.fused.total_cmp(&a.1.fused).then_with(|| row(snap, a.0).id.cmp(&row(snap, b.0).id))
    });

    let terms = query_terms(&req.query);
    let mut results: Vec<SearchResult> = Vec::new();
    let mut by_entity: HashMap<(&str, &str), usize> = HashMap::new();
    for (key, c) in ranked {
        let r = row(snap, key);
        if let Some(&i) = by_entity.get(&(r.repo.as_str(), r.entity.as_str())) {
            let same =
                results[i].same_entity.get_or_insert(SameEntity { count: 0, others: Vec::new() });
            same.count += 1;
            same.others.push(SameEntityRow {
                id: r.id.clone(),
                row_type: r.kind().to_string(),
                url: r.url.clone(),
                updated_at: time(r.updated_at),
                score: c.fused,
            });
            continue;
        }
        if req.sort == Sort::Relevance && results.len() == req.top_k {
            continue;
        }
        by_entity.insert((r.repo.as_str(), r.entity.as_str()), results.len());
        results.push(SearchResult {
            id: r.id.clone(),
            row_type: r.kind().to_string(),
            repo: r.repo.clone(),
            number: r.number,
            title: r.title.clone(),
            url: r.url.clone(),
            path: r.path.clone(),
            heading_path: (!r.heading_path.is_empty()).then(|| r.heading_path.clone()),
            line_start: r.line_start,
            line_end: r.line_end,
            commit_sha: r.commit_sha.clone(),
            updated_at: time(r.updated_at),
            created_at: time(r.created_at),
            snippet: snippet(&r.body, &terms, SNIPPET_CHARS),
            score: c.fused,
            sparse_score: c.sparse.map(|s| s.0),
            sparse_rank: c.sparse.map(|s| s.1),
            dense_score: c.dense.map(|s| s.0),
            dense_rank: c.dense.map(|s| s.1),
            same_entity: None,
        });
    }
    if req.sort != Sort::Relevance {
        // Most recent among the relevant: every candidate entity, newest first.
        let key = |r: &SearchResult| match req.sort {
            Sort::CreatedDesc => r.created_at.clone(),
            _ => r.updated_at.clone(),
        };
        results.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| b.score.total_cmp(&a.score)));
        results.truncate(req.top_k);
    }
    Ok(SearchAnswer {
        snapshot: snap.id().to_string(),
        count: results.len(),
        filters_unmatched,
        rerank_applied: false,
        results,
    })
}

fn row(snap: &OpenSnapshot, (si, ord): (usize, u64)) -> &Row {
    &snap.segments[si].rows[ord as usize]
}

/// Snippet length in chars.
pub(crate) const SNIPPET_CHARS: usize = 320;

fn query_terms(q: &str) -> Vec<String> {
    q.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|t| t.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// A window of about `max` chars of `body` around the first query term it contains (its start
/// when none does), cut on word boundaries and marked with `…` where text was left out.
pub fn snippet(body: &str, terms: &[String], max: usize) -> String {
    let lower = body.to_lowercase();
    // Lowercasing can change byte lengths; only trust positions when it did not.
    let hit = if lower.len() == body.len() {
        terms.iter().filter_map(|t| lower.find(t.as_str())).min()
    } else {
        None
    };
    let chars: Vec<(usize, char)> = body.char_indices().collect();
    if chars.len() <= max {
        return body.trim().to_string();
    }
    let hit_char = hit.map_or(0, |b| chars.partition_point(|(i, _)| *i < b));
    let start = hit_char.saturating_sub(max / 4);
    let end = (start + max).min(chars.len());
    let start = if end == chars.len() { end.saturating_sub(max) } else { start };
    let mut s: usize = start;
    if s > 0 {
        while s < hit_char && !chars[s - 1].1.is_whitespace() {
            s += 1;
        }
    }
    let mut e = end;
    if e < chars.len() {
        while e > s + max / 2 && !chars[e].1.is_whitespace() {
            e -= 1;
        }
    }
    let from = chars[s].0;
    let to = if e < chars.len() { chars[e].0 } else { body.len() };
    let mut out = String::new();
    if s > 0 {
        out.push('…');
    }
    out.push_str(body[from..to].trim());
    if e < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_shows_the_query_term_in_context() {
        let body = format!("{} the needle is here {}", "hay ".repeat(200), "straw ".repeat(200));
        let s = snippet(&body, &["needle".into()], 100);
        assert!(s.contains("needle"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.chars().count() <= 102, "{}", s.chars().count());
    }

    #[test]
    fn a_short_body_is_its_own_snippet() {
        assert_eq!(snippet("  short  ", &[], 100), "short");
    }

    #[test]
    fn multibyte_text_never_splits_a_char() {
        let body = "é".repeat(1000);
        let s = snippet(&body, &["zzz".into()], 50);
        assert!(s.chars().count() <= 52);
    }
}
