//! Hybrid search over an open snapshot: BM25 and dense candidates per segment, fused by
//! reciprocal rank fusion, folded by entity.

use std::collections::HashMap;

use hubdex_formats::{Row, RowType, ScoreFloor, row_id};
use hubdex_runtime::Embedder;
use rayon::prelude::*;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::{Args, ToolError};
use crate::filter::{
    FILTER_ARGS, Filters, filters_from_args, format_time, index_error, may_match, unmatched,
};
use crate::rerank::Reranker;
use crate::snapshot::OpenSnapshot;

/// The RRF rank offset of the original paper (Cormack et al., 2009): a document at rank r
/// contributes 1 / (k + r). `hubdex eval --blend rrf` and `wrrf:W` use it; what `fusion: rrf`
/// serves is [`SERVED_RRF_K`].
pub const PAPER_RRF_K: f64 = 60.0;

/// The RRF rank offset `fusion: rrf` serves ([`Blend::DEFAULT`]).
pub const SERVED_RRF_K: f64 = 20.0;

/// A row whose vector is at least this close to the query's (cosine) says nearly exactly what
/// was asked: a pasted commit subject, an issue's title. `fusion: rrf` ranks such rows above
/// every fused score, the closest first (their `score` is 1 + the cosine, above any RRF sum).
/// 0.95 sits between a copy of the text (1.0 for this model) and the closest rows natural
/// questions reach on the eval sets (docs/quality.md).
pub(crate) const KNOWN_ITEM_COSINE: f32 = 0.95;

/// Candidates the cross-encoder rescores when `rerank` is asked for.
pub const RERANK_CANDIDATES: usize = 30;

/// Chars of a row the cross-encoder reads (its tokenizer cuts further).
const RERANK_PASSAGE_CHARS: usize = 2000;

/// What `rerank_note` says when rerank was asked for and the server has no model.
pub const NO_RERANK_MODEL: &str =
    "rerank was not applied: this server has no rerank model (hubdex serve --rerank-model DIR)";

/// How `fusion: rrf` combines the two rankings. The default is the one that did best on the
/// eval sets (docs/quality.md); `hubdex eval --blend` tries others.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Blend {
    /// Weighted reciprocal rank fusion: `w_sparse / (k + rank_sparse) + w_dense / (k + rank_dense)`.
    Rrf {
        /// The rank offset (60 in the original paper).
        k: f64,
        /// Weight of the BM25 ranking.
        w_sparse: f64,
        /// Weight of the vector ranking.
        w_dense: f64,
    },
    /// Scores min-max normalised per list, then `(1 - w_dense) * sparse + w_dense * dense`.
    MinMax {
        /// Weight of the vector scores; the BM25 scores get the rest.
        w_dense: f64,
    },
}

impl Blend {
    /// RRF as its paper has it, k = 60, equal weights (`--blend rrf:60`).
    pub const PAPER_RRF: Blend = Blend::Rrf { k: PAPER_RRF_K, w_sparse: 1.0, w_dense: 1.0 };
    /// What `fusion: rrf` uses: RRF with k = 20, equal weights. On the docstring → code set it
    /// beat k = 60, weighted RRF and min-max blends on recall@10 and MRR (docs/quality.md).
    pub const DEFAULT: Blend = Blend::Rrf { k: SERVED_RRF_K, w_sparse: 1.0, w_dense: 1.0 };

    /// Parses `rrf` (what `fusion: rrf` serves, [`Blend::DEFAULT`]), `rrf:K`, `wrrf:W_DENSE`
    /// (weights 1 - w and w, k = 60) or `minmax:W_DENSE`.
    pub fn parse(s: &str) -> Result<Blend, String> {
        let bad =
            || format!("unknown blend {s:?}; allowed: rrf, rrf:K, wrrf:W, minmax:W (0 ≤ W ≤ 1)");
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a.parse::<f64>().map_err(|_| bad())?)),
            None => (s, None),
        };
        let w = |a: Option<f64>| a.filter(|w| (0.0..=1.0).contains(w)).ok_or_else(bad);
        match name {
            "rrf" => Ok(Blend::Rrf { k: arg.unwrap_or(SERVED_RRF_K), w_sparse: 1.0, w_dense: 1.0 }),
            "wrrf" => {
                let w = w(arg)?;
                Ok(Blend::Rrf { k: PAPER_RRF_K, w_sparse: 2.0 * (1.0 - w), w_dense: 2.0 * w })
            }
            "minmax" => Ok(Blend::MinMax { w_dense: w(arg)? }),
            _ => Err(bad()),
        }
    }
}

/// Longest accepted query, in chars.
pub(crate) const MAX_QUERY_CHARS: usize = 2000;

/// How the two rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Keyword (BM25) and semantic rankings fused (the default).
    Rrf,
    /// Semantic ranking only.
    DenseOnly,
    /// Keyword (BM25) ranking only.
    SparseOnly,
}

impl Fusion {
    /// Each value `fusion` accepts by its name.
    pub const CHOICES: [(&'static str, Fusion); 3] = [
        ("rrf", Fusion::Rrf),
        ("dense_only", Fusion::DenseOnly),
        ("sparse_only", Fusion::SparseOnly),
    ];
    /// The names `fusion` accepts.
    pub const NAMES: [&'static str; 3] =
        [Self::CHOICES[0].0, Self::CHOICES[1].0, Self::CHOICES[2].0];
}

/// How results are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Best match first.
    Relevance,
    /// Most recently updated first, among the relevant.
    UpdatedDesc,
    /// Most recently created first, among the relevant.
    CreatedDesc,
}

impl Sort {
    /// Each value `sort` accepts by its name.
    pub const CHOICES: [(&'static str, Sort); 3] = [
        ("relevance", Sort::Relevance),
        ("updated_desc", Sort::UpdatedDesc),
        ("created_desc", Sort::CreatedDesc),
    ];
    /// The names `sort` accepts.
    pub const NAMES: [&'static str; 3] =
        [Self::CHOICES[0].0, Self::CHOICES[1].0, Self::CHOICES[2].0];
}

/// A checked search request.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// What to look for.
    pub query: String,
    /// Distinct entities to return.
    pub top_k: usize,
    /// Which rankings are used.
    pub fusion: Fusion,
    /// The order of the results.
    pub sort: Sort,
    /// The filters, with the caller's scope.
    pub filters: Filters,
    /// Rerank the top candidates with the cross-encoder, when the server has one.
    pub rerank: bool,
    /// Answer from this snapshot; default the newest.
    pub snapshot: Option<String>,
    /// How `fusion: rrf` blends; not a tool argument (see [`Blend::DEFAULT`]).
    pub blend: Blend,
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
            fusion: a.choice("fusion", &Fusion::CHOICES, Fusion::Rrf)?,
            sort: a.choice("sort", &Sort::CHOICES, Sort::Relevance)?,
            filters: filters_from_args(&a)?,
            rerank: a.boolean("rerank", false)?,
            snapshot: a.string("snapshot")?,
            blend: Blend::DEFAULT,
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

impl SameEntityRow {
    /// `r`, folded under a result with its own fused `score`.
    fn of(r: &Row, score: f64) -> Self {
        SameEntityRow {
            id: r.id.clone(),
            row_type: r.kind().to_string(),
            url: r.url.clone(),
            updated_at: format_time(r.updated_at),
            score,
        }
    }
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
    /// The row's id (for fetch).
    pub id: String,
    #[serde(rename = "type")]
    /// The row's type.
    pub row_type: RowType,
    /// `owner/name`.
    pub repo: String,
    /// The issue or pull request number.
    pub number: Option<i64>,
    /// The row's title.
    pub title: Option<String>,
    /// Its web address.
    pub url: Option<String>,
    /// Its path, for docs, code and diffs.
    pub path: Option<String>,
    /// Markdown headings above a doc chunk.
    pub heading_path: Option<Vec<String>>,
    /// First line of a doc or code chunk.
    pub line_start: Option<i64>,
    /// Last line of a doc or code chunk.
    pub line_end: Option<i64>,
    /// The commit, for commits, diffs, docs and code.
    pub commit_sha: Option<String>,
    /// When the row was last updated (RFC 3339).
    pub updated_at: Option<String>,
    /// For `sort: created_desc`; not part of the answer.
    #[serde(skip)]
    pub created_at: Option<String>,
    /// A short excerpt around the query's words.
    pub snippet: String,
    /// The fused score.
    pub score: f64,
    /// The BM25 score, when BM25 found it.
    pub sparse_score: Option<f32>,
    /// Its BM25 rank, 1-based.
    pub sparse_rank: Option<usize>,
    /// The cosine similarity, when the vector search found it.
    pub dense_score: Option<f32>,
    /// Its vector-search rank, 1-based.
    pub dense_rank: Option<usize>,
    /// The cross-encoder's logit, when the answer was reranked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_score: Option<f32>,
    /// Other matching rows of the same entity, folded under this one.
    pub same_entity: Option<SameEntity>,
    /// The entity (aggregation key), for the edge summary; not part of the answer.
    #[serde(skip)]
    pub entity: String,
    /// Commits, pull requests and issues: the first release that shipped them, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_release: Option<crate::related::ReleaseRef>,
    /// Commits, pull requests and issues: their edges per kind (`related` lists them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edges: Option<std::collections::BTreeMap<String, usize>>,
    /// Code: the definitions that start in the chunk's lines, in line order (the `symbols`
    /// tool's table), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<ChunkSymbol>>,
}

/// A definition a code result's chunk holds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChunkSymbol {
    /// Its name.
    pub name: String,
    /// Its kind (function, method, struct, …).
    pub kind: String,
    /// The impl, trait, class or module it is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Its first line.
    pub line: u32,
}

/// The definitions starting in `r`'s lines, from the grep stores of the units serving its
/// repository; `None` for a result that is not code or holds none.
fn chunk_symbols(
    snap: &OpenSnapshot,
    r: &SearchResult,
) -> Result<Option<Vec<ChunkSymbol>>, ToolError> {
    let (Some(path), Some(start), Some(end)) = (&r.path, r.line_start, r.line_end) else {
        return Ok(None);
    };
    if r.row_type != RowType::Code {
        return Ok(None);
    }
    let mut out = Vec::new();
    for seg in snap.segments_of_repo(&r.repo) {
        let Some(store) = &seg.grep else { continue };
        for k in store.symbols_of_file(&r.repo, path).map_err(index_error)? {
            let s = store.symbol(k).map_err(index_error)?;
            if (start..=end).contains(&i64::from(s.line_start)) {
                out.push(ChunkSymbol {
                    name: s.name.to_string(),
                    kind: s.kind.to_string(),
                    container: s.container.map(str::to_string),
                    line: s.line_start,
                });
            }
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The answer of a search.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchAnswer {
    /// The snapshot answered from.
    pub snapshot: String,
    /// Results returned.
    pub count: usize,
    /// Filters that on their own match no row the caller may read.
    pub filters_unmatched: Vec<String>,
    /// Whether the cross-encoder reranked the results.
    pub rerank_applied: bool,
    /// Why rerank was asked for and not applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank_note: Option<String>,
    /// The results, best first.
    pub results: Vec<SearchResult>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    sparse: Option<(f32, usize)>,
    dense: Option<(f32, usize)>,
    fused: f64,
    rerank: Option<f32>,
}

/// Min-max normalisation of one list's scores: (min, max - min).
fn range_of(list: &[(usize, u32, f32)]) -> (f64, f64) {
    let min = list.iter().map(|x| x.2).fold(f32::INFINITY, f32::min) as f64;
    let max = list.iter().map(|x| x.2).fold(f32::NEG_INFINITY, f32::max) as f64;
    (min, (max - min).max(1e-9))
}

/// Runs a search on `snap`. Embeds the query unless the fusion is sparse-only, while BM25
/// searches the units (neither needs the other); rescores the top candidates with `reranker`
/// when the request asks for it and there is one.
pub fn search(
    snap: &OpenSnapshot,
    embedder: &Embedder,
    reranker: Option<&Reranker>,
    req: &SearchRequest,
) -> Result<SearchAnswer, ToolError> {
    let filters_unmatched = unmatched(&req.filters, snap)?;
    let (query_vec, sparse) = match req.fusion {
        Fusion::SparseOnly => (None, retrieve_sparse(snap, req)?),
        _ => {
            let (query_vec, sparse) =
                rayon::join(|| embedder.embed_one(&req.query), || retrieve_sparse(snap, req));
            let query_vec = query_vec
                .map_err(|e| ToolError::Unavailable(format!("embedding the query: {e}")))?;
            (Some(query_vec), sparse?)
        }
    };
    let dense = retrieve_dense(snap, query_vec.as_deref(), req)?;
    answer(snap, filters_unmatched, sparse, dense, reranker, req)
}

/// [`search`] with the query already embedded (`None` for sparse-only): what a benchmark
/// times when it compares search alone. The stages: `retrieve_sparse` and
/// `retrieve_dense` from every unit, side by side, then `answer`.
pub fn search_with_vector(
    snap: &OpenSnapshot,
    query_vec: Option<&[f32]>,
    reranker: Option<&Reranker>,
    req: &SearchRequest,
) -> Result<SearchAnswer, ToolError> {
    let filters_unmatched = unmatched(&req.filters, snap)?;
    let query_vec = query_vec.filter(|_| req.fusion != Fusion::SparseOnly);
    let (sparse, dense) =
        rayon::join(|| retrieve_sparse(snap, req), || retrieve_dense(snap, query_vec, req));
    answer(snap, filters_unmatched, sparse?, dense?, reranker, req)
}

/// The answer from the two candidate lists: [`fuse`] them, [`rank`] with ties broken by row
/// id, [`rerank`] the top, [`fold`] rows into entities, [`sort_by_time`] when asked, and the
/// edge summaries.
fn answer(
    snap: &OpenSnapshot,
    filters_unmatched: Vec<String>,
    sparse: Hits,
    dense: Hits,
    reranker: Option<&Reranker>,
    req: &SearchRequest,
) -> Result<SearchAnswer, ToolError> {
    let mut ranked = rank(snap, fuse(&sparse, &dense, req))?;
    let mut rows = RowCache::new(snap);
    let (rerank_applied, rerank_note) = rerank(&mut ranked, &mut rows, reranker, req)?;
    let mut results = fold(snap, ranked, &mut rows, req)?;
    sort_by_time(&mut results, req);
    for r in &mut results {
        if let Some(s) = crate::related::summary_of(
            snap,
            r.row_type,
            &r.repo,
            &r.entity,
            req.filters.scope.as_ref(),
        )? {
            r.first_release = s.first_release;
            r.edges = Some(s.edges);
        }
        r.symbols = chunk_symbols(snap, r)?;
    }
    Ok(SearchAnswer {
        snapshot: snap.id().to_string(),
        count: results.len(),
        filters_unmatched,
        rerank_applied,
        rerank_note,
        results,
    })
}

/// Candidates of one list, as (unit, doc, score).
type Hits = Vec<(usize, u32, f32)>;

/// `type: commit` also finds a commit by its diff rows (what it changed is often what it is
/// asked by): they are searched with it, fold into it, and the commit row is shown.
fn commits_by_diff(req: &SearchRequest) -> bool {
    req.filters.types.contains(&RowType::Commit) && !req.filters.types.contains(&RowType::Diff)
}

/// The rows `req` searches: its filters, and a `type: commit` search's diff rows.
fn searched(req: &SearchRequest) -> Filters {
    let mut searched = req.filters.clone();
    if commits_by_diff(req) {
        searched.types.push(RowType::Diff);
    }
    searched
}

/// Each list's candidate pool.
fn pool(req: &SearchRequest) -> usize {
    (req.top_k * 5).max(50)
}

/// The BM25 candidates of every unit (none for `dense_only`), cut to the candidate pool and in
/// a fixed order (score, then unit and doc) however the workers finished. Units are searched on
/// the persistent rayon pool, every core at once, and skip BM25 hits under the pool's cut
/// another unit has already found: the same pool, less work (docs/performance.md).
fn retrieve_sparse(snap: &OpenSnapshot, req: &SearchRequest) -> Result<Hits, ToolError> {
    if req.fusion == Fusion::DenseOnly {
        return Ok(Vec::new());
    }
    let searched = searched(req);
    let pool = pool(req);
    let floor = ScoreFloor::new();
    let one_segment = |si: usize| -> Result<Hits, ToolError> {
        let seg = &snap.segments[si];
        if !may_match(&searched, seg) {
            return Ok(Vec::new());
        }
        let filter = seg.text.compile(&searched).map_err(index_error)?;
        let hits = seg
            .text
            .search_with(&req.query, pool, filter.as_ref(), Some(&floor))
            .map_err(index_error)?;
        Ok(hits.into_iter().map(|(doc, score)| (si, doc, score)).collect())
    };
    cut((0..snap.segments.len()).into_par_iter().map(one_segment).collect(), pool)
}

/// The vector candidates of every unit for `query_vec` (none without one), ordered and cut as
/// [`retrieve_sparse`]'s. Diff rows rank a commit by BM25 only: their vectors (one per file,
/// each with the message) crowd the dense list (docs/quality.md).
fn retrieve_dense(
    snap: &OpenSnapshot,
    query_vec: Option<&[f32]>,
    req: &SearchRequest,
) -> Result<Hits, ToolError> {
    let Some(q) = query_vec else { return Ok(Vec::new()) };
    let searched = searched(req);
    let pool = pool(req);
    let one_segment = |si: usize| -> Result<Hits, ToolError> {
        let seg = &snap.segments[si];
        if !may_match(&searched, seg) {
            return Ok(Vec::new());
        }
        let hits = match seg.text.compile(&req.filters).map_err(index_error)? {
            None => seg.vectors.search(q, pool, None),
            Some(f) => {
                let bits = seg.text.filter_bits(&f).map_err(index_error)?;
                if bits.count() == 0 {
                    Ok(Vec::new())
                } else {
                    seg.vectors.search(q, pool, Some(&|k: u64| bits.contains(k)))
                }
            }
        }
        .map_err(index_error)?;
        Ok(hits.into_iter().map(|(k, score)| (si, k as u32, score)).collect())
    };
    cut((0..snap.segments.len()).into_par_iter().map(one_segment).collect(), pool)
}

/// The units' lists as one, best first (ties by unit and doc), cut to `pool`.
fn cut(per_segment: Vec<Result<Hits, ToolError>>, pool: usize) -> Result<Hits, ToolError> {
    let mut hits: Hits = Vec::new();
    for r in per_segment {
        hits.extend(r?);
    }
    hits.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    hits.truncate(pool);
    Ok(hits)
}

/// Each candidate's fused score from its place in the two lists, as `req` blends them.
fn fuse(sparse: &Hits, dense: &Hits, req: &SearchRequest) -> HashMap<Key, Candidate> {
    let mut cands: HashMap<Key, Candidate> = HashMap::new();
    for (rank, &(si, doc, score)) in sparse.iter().enumerate() {
        cands.entry((si, doc)).or_default().sparse = Some((score, rank + 1));
    }
    for (rank, &(si, doc, score)) in dense.iter().enumerate() {
        cands.entry((si, doc)).or_default().dense = Some((score, rank + 1));
    }
    let (s_min, s_span) = range_of(sparse);
    let (d_min, d_span) = range_of(dense);
    for c in cands.values_mut() {
        // A row that nearly repeats the query comes first, whatever the blend.
        let known = c.dense.map(|(s, _)| s).filter(|s| *s >= KNOWN_ITEM_COSINE);
        c.fused = match (req.fusion, req.blend, known) {
            (Fusion::Rrf, _, Some(cosine)) => 1.0 + cosine as f64,
            (Fusion::Rrf, Blend::Rrf { k, w_sparse, w_dense }, None) => {
                c.sparse.map_or(0.0, |(_, r)| w_sparse / (k + r as f64))
                    + c.dense.map_or(0.0, |(_, r)| w_dense / (k + r as f64))
            }
            (Fusion::Rrf, Blend::MinMax { w_dense }, None) => {
                (1.0 - w_dense) * c.sparse.map_or(0.0, |(s, _)| (s as f64 - s_min) / s_span)
                    + w_dense * c.dense.map_or(0.0, |(s, _)| (s as f64 - d_min) / d_span)
            }
            (Fusion::DenseOnly, ..) => c.dense.map_or(0.0, |(s, _)| s as f64),
            (Fusion::SparseOnly, ..) => c.sparse.map_or(0.0, |(s, _)| s as f64),
        };
    }
    cands
}

/// A ranked candidate: its key, its scores, and its row id when it ties with a neighbour.
type Ranked = (Key, Candidate, String);

/// Best fused score first; ties by row id.
fn by_fused(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.1.fused.total_cmp(&a.1.fused).then_with(|| a.2.cmp(&b.2))
}

/// The candidates best first. Ties break on row id so the same snapshot always gives the same
/// order; ids come from the mapped id column, and only for candidates whose score another one
/// shares.
fn rank(snap: &OpenSnapshot, cands: HashMap<Key, Candidate>) -> Result<Vec<Ranked>, ToolError> {
    let mut ranked: Vec<Ranked> =
        cands.into_iter().map(|(key, c)| (key, c, String::new())).collect();
    ranked.sort_by(|a, b| b.1.fused.total_cmp(&a.1.fused));
    let tied: Vec<bool> = (0..ranked.len())
        .map(|i| {
            let f = ranked[i].1.fused;
            (i > 0 && ranked[i - 1].1.fused == f)
                || ranked.get(i + 1).is_some_and(|n| n.1.fused == f)
        })
        .collect();
    for (entry, tied) in ranked.iter_mut().zip(tied) {
        if tied {
            entry.2 = snap.segments[entry.0.0].text.id_of(entry.0.1).map_err(index_error)?;
        }
    }
    ranked.sort_by(by_fused);
    Ok(ranked)
}

/// Rescores the top candidates with the cross-encoder when the request asks for it and there
/// is one: whether it was applied, and the note that says why not when it was asked for.
fn rerank(
    ranked: &mut [Ranked],
    rows: &mut RowCache<'_>,
    reranker: Option<&Reranker>,
    req: &SearchRequest,
) -> Result<(bool, Option<String>), ToolError> {
    let model = match (req.rerank, reranker) {
        (true, Some(model)) => model,
        (true, None) => return Ok((false, Some(NO_RERANK_MODEL.to_string()))),
        (false, _) => return Ok((false, None)),
    };
    let n = ranked.len().min(RERANK_CANDIDATES.max(req.top_k * 2));
    let mut passages = Vec::with_capacity(n);
    for (key, _, _) in &ranked[..n] {
        passages.push(rerank_passage(rows.get(*key)?));
    }
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let scores = model
        .score(&req.query, &refs)
        .map_err(|e| ToolError::Unavailable(format!("reranking: {e}")))?;
    for ((_, c, _), s) in ranked[..n].iter_mut().zip(scores) {
        c.rerank = Some(s);
    }
    ranked[..n].sort_by(|a, b| {
        let (x, y) = (a.1.rerank.unwrap_or(f32::MIN), b.1.rerank.unwrap_or(f32::MIN));
        y.total_cmp(&x).then_with(|| by_fused(a, b))
    });
    Ok((true, None))
}

/// The results: rows of one repository and entity fold into the best-ranked one (an entity
/// lives in one unit), a diff found for `type: commit` shows its commit, and with relevance
/// order only the first `top_k` entities are kept.
fn fold(
    snap: &OpenSnapshot,
    ranked: Vec<Ranked>,
    rows: &mut RowCache<'_>,
    req: &SearchRequest,
) -> Result<Vec<SearchResult>, ToolError> {
    let by_diff = commits_by_diff(req);
    let terms = query_terms(&req.query);
    let mut results: Vec<SearchResult> = Vec::new();
    let mut by_entity: HashMap<EntityKey, usize> = HashMap::new();
    // An entity skipped as a whole (a diff whose commit row is not in the snapshot).
    const DROPPED: usize = usize::MAX;
    for (key, c, _) in ranked {
        let entity = (key.0, snap.segments[key.0].text.entity_key(key.1).map_err(index_error)?);
        if let Some(&i) = by_entity.get(&entity) {
            if i == DROPPED {
                continue;
            }
            let r = rows.get(key)?;
            if r.id == results[i].id {
                continue;
            }
            let same =
                results[i].same_entity.get_or_insert(SameEntity { count: 0, others: Vec::new() });
            same.count += 1;
            same.others.push(SameEntityRow::of(r, c.fused));
            continue;
        }
        if req.sort == Sort::Relevance && results.len() == req.top_k {
            continue;
        }
        let mut shown = key;
        let mut same_entity = None;
        let r = rows.get(key)?;
        if by_diff && r.kind() == RowType::Diff {
            // Show the commit the diff belongs to, the diff folded under it; an entity without
            // a commit row is not a commit.
            let commit = row_id(RowType::Commit, &r.repo, &r.entity, 0);
            let Some(doc) = snap.segments[key.0].text.doc_of_id(&commit).map_err(index_error)?
            else {
                by_entity.insert(entity, DROPPED);
                continue;
            };
            shown = (key.0, doc);
            same_entity =
                Some(SameEntity { count: 1, others: vec![SameEntityRow::of(r, c.fused)] });
        }
        let r = rows.get(shown)?;
        by_entity.insert(entity, results.len());
        results.push(SearchResult {
            id: r.id.clone(),
            row_type: r.kind(),
            repo: r.repo.clone(),
            number: r.number,
            title: r.title.clone(),
            url: r.url.clone(),
            path: r.path.clone(),
            heading_path: (!r.heading_path.is_empty()).then(|| r.heading_path.clone()),
            line_start: r.line_start,
            line_end: r.line_end,
            commit_sha: r.commit_sha.clone(),
            updated_at: format_time(r.updated_at),
            created_at: format_time(r.created_at),
            snippet: snippet(&r.body, &terms, SNIPPET_CHARS),
            score: c.fused,
            sparse_score: c.sparse.map(|s| s.0),
            sparse_rank: c.sparse.map(|s| s.1),
            dense_score: c.dense.map(|s| s.0),
            dense_rank: c.dense.map(|s| s.1),
            rerank_score: c.rerank,
            same_entity,
            entity: r.entity.clone(),
            first_release: None,
            edges: None,
            symbols: None,
        });
    }
    Ok(results)
}

/// With a `sort` other than relevance: the most recent among the relevant, every candidate
/// entity newest first, cut to `top_k`.
fn sort_by_time(results: &mut Vec<SearchResult>, req: &SearchRequest) {
    if req.sort == Sort::Relevance {
        return;
    }
    let key = |r: &SearchResult| match req.sort {
        Sort::CreatedDesc => r.created_at.clone(),
        _ => r.updated_at.clone(),
    };
    results.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| b.score.total_cmp(&a.score)));
    results.truncate(req.top_k);
}

/// A candidate: its segment and doc.
type Key = (usize, u32);

/// An entity: its segment and its (repo, entity) ordinals there.
type EntityKey = (usize, (u64, u64));

/// Stored rows of an answer, each read from its segment's doc store once.
struct RowCache<'a> {
    snap: &'a OpenSnapshot,
    rows: HashMap<Key, Row>,
}

impl<'a> RowCache<'a> {
    fn new(snap: &'a OpenSnapshot) -> Self {
        RowCache { snap, rows: HashMap::new() }
    }

    fn get(&mut self, key: Key) -> Result<&Row, ToolError> {
        if !self.rows.contains_key(&key) {
            let row = self.snap.segments[key.0].text.row(key.1).map_err(index_error)?;
            self.rows.insert(key, row);
        }
        Ok(&self.rows[&key])
    }
}

/// What the cross-encoder reads of a row: where it is, its title and the start of its body.
fn rerank_passage(r: &Row) -> String {
    let mut text = String::new();
    if let Some(p) = &r.path {
        text.push_str(p);
        text.push('\n');
    }
    if let Some(t) = &r.title {
        text.push_str(t);
        text.push('\n');
    }
    text.extend(r.body.chars().take(RERANK_PASSAGE_CHARS));
    text
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
    fn blends_parse_and_bad_ones_are_named() {
        assert_eq!(Blend::parse("rrf").unwrap(), Blend::DEFAULT, "the served k");
        assert_eq!(Blend::parse("rrf:60").unwrap(), Blend::PAPER_RRF);
        assert_eq!(
            Blend::parse("wrrf:0.25").unwrap(),
            Blend::Rrf { k: PAPER_RRF_K, w_sparse: 1.5, w_dense: 0.5 }
        );
        assert_eq!(Blend::parse("minmax:0.5").unwrap(), Blend::MinMax { w_dense: 0.5 });
        for bad in ["minmax:2", "wrrf", "borda", "rrf:x"] {
            assert!(Blend::parse(bad).unwrap_err().contains("allowed"), "{bad}");
        }
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
