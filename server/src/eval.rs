//! `hubdex eval`: retrieval quality of a snapshot on a set of judged queries.
//!
//! An eval file is JSON lines, one query each:
//! `{"query": "...", "relevant": ["<row id>" | "<url>" | "<commit sha>" | "path:L" | "path:L-M"],
//! "repo": "owner/name", "type": "commit"}` (`repo` optional: limits what `path:L` specs match;
//! `type` optional: the query is asked with that type filter, as an agent would). A result is
//! relevant when its row (not the rows folded under it) matches a spec: the same id or url, a
//! commit or diff row of that commit, or a row of that path whose line span overlaps the spec's.

use std::path::Path;
use std::time::Instant;

use hubdex_formats::{Row, RowType};
use hubdex_runtime::Embedder;
use serde::{Deserialize, Serialize};

use crate::filter::Filters;
use crate::rerank::Reranker;
use crate::search::{Blend, Fusion, SearchRequest, Sort, search};
use crate::snapshot::OpenSnapshot;

/// One judged query.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalQuery {
    /// The question.
    pub query: String,
    /// Ids, paths or SHAs of the results that answer it.
    pub relevant: Vec<String>,
    #[serde(default)]
    /// Only this repository, when set.
    pub repo: Option<String>,
    /// Asked with this type filter (`type: commit` for "the commit that did X").
    #[serde(default, rename = "type")]
    pub row_type: Option<RowType>,
}

/// Reads an eval file; a bad line is an error naming the file and line.
pub fn load_eval(path: &Path) -> anyhow::Result<Vec<EvalQuery>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: EvalQuery = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?;
        if q.query.trim().is_empty() || q.relevant.is_empty() {
            anyhow::bail!(
                "{}:{}: a query needs text and at least one relevant item",
                path.display(),
                i + 1
            );
        }
        out.push(q);
    }
    if out.is_empty() {
        anyhow::bail!("{}: no queries", path.display());
    }
    Ok(out)
}

/// A way of searching that the eval compares.
#[derive(Debug, Clone)]
pub struct Mode {
    /// The mode's name in the report (`rrf`, `rrf[minmax:0.5]`, …).
    pub name: String,
    /// Which rankings are used.
    pub fusion: Fusion,
    /// How rrf combines them.
    pub blend: Blend,
    /// Rerank with the cross-encoder.
    pub rerank: bool,
}

impl Mode {
    /// sparse_only, dense_only and the default rrf; rrf+rerank when there is a reranker.
    pub fn standard(rerank: bool) -> Vec<Mode> {
        let m = |name: &str, fusion, rerank| Mode {
            name: name.to_string(),
            fusion,
            blend: Blend::DEFAULT,
            rerank,
        };
        let mut modes = vec![
            m("sparse_only", Fusion::SparseOnly, false),
            m("dense_only", Fusion::DenseOnly, false),
            m("rrf", Fusion::Rrf, false),
        ];
        if rerank {
            modes.push(m("rrf+rerank", Fusion::Rrf, true));
        }
        modes
    }

    /// The standard modes and an rrf mode per blend (`rrf:K`, `wrrf:W`, `minmax:W`); a blend
    /// that does not parse is an error naming it.
    pub fn with_blends(rerank: bool, blends: &[String]) -> anyhow::Result<Vec<Mode>> {
        let mut modes = Mode::standard(rerank);
        for b in blends {
            modes.push(Mode {
                name: format!("rrf[{b}]"),
                fusion: Fusion::Rrf,
                blend: Blend::parse(b).map_err(anyhow::Error::msg)?,
                rerank: false,
            });
        }
        Ok(modes)
    }
}

/// Runs the eval on the state's current snapshot, off the async runtime's threads, printing a
/// line to stderr as each mode ends.
pub async fn eval_current(
    state: std::sync::Arc<crate::AppState>,
    queries: Vec<EvalQuery>,
    k: usize,
    modes: Vec<Mode>,
) -> anyhow::Result<Vec<ModeReport>> {
    let total = queries.len();
    tokio::task::spawn_blocking(move || {
        let snap = state.current.load_full();
        let reranker = state.reranker.as_deref();
        run_eval(&snap, &state.embedder, reranker, &queries, k, &modes, |mode, i| {
            if i == total {
                eprintln!("{mode}: {total} queries");
            }
        })
    })
    .await?
}

/// The figures of one mode over the whole set.
#[derive(Debug, Clone, Serialize)]
pub struct ModeReport {
    /// The mode's name.
    pub mode: String,
    /// Queries run.
    pub queries: usize,
    /// Share of queries with a relevant result within k.
    pub recall_at_k: f64,
    /// Recall@k when rows folded under a result (same file, same thread) count too.
    pub recall_at_k_folded: f64,
    /// Mean reciprocal rank of the first relevant result within k.
    pub mrr_at_k: f64,
    /// nDCG over the top 10.
    pub ndcg_at_10: f64,
    /// Median latency per query.
    pub p50_ms: f64,
    /// 95th-percentile latency per query.
    pub p95_ms: f64,
    /// Per query, in file order: the 1-based rank of the first relevant result within k, or
    /// null. What `ci/bench-quality` compares mode by mode.
    pub first_hit: Vec<Option<usize>>,
}

/// Whether `row` is what `spec` names.
pub fn matches(spec: &str, row: &Row, repo: Option<&str>) -> bool {
    if spec == row.id || row.url.as_deref() == Some(spec) {
        return true;
    }
    let is_sha = spec.len() >= 7 && spec.len() <= 40 && spec.bytes().all(|b| b.is_ascii_hexdigit());
    if is_sha {
        return matches!(row.kind(), RowType::Commit | RowType::Diff)
            && row.commit_sha.as_deref().is_some_and(|s| s.starts_with(spec));
    }
    let Some((path, lines)) = spec.rsplit_once(':') else { return false };
    let (a, b) = match lines.split_once('-') {
        Some((a, b)) => (a.parse::<i64>(), b.parse::<i64>()),
        None => (lines.parse::<i64>(), lines.parse::<i64>()),
    };
    let (Ok(a), Ok(b)) = (a, b) else { return false };
    repo.is_none_or(|r| r == row.repo)
        && row.path.as_deref() == Some(path)
        && row.line_start.is_some_and(|s| s <= b)
        && row.line_end.is_some_and(|e| e >= a)
}

/// Runs every query in every mode; `k` is the cut-off of recall and MRR.
pub fn run_eval(
    snap: &OpenSnapshot,
    embedder: &Embedder,
    reranker: Option<&Reranker>,
    queries: &[EvalQuery],
    k: usize,
    modes: &[Mode],
    mut progress: impl FnMut(&str, usize),
) -> anyhow::Result<Vec<ModeReport>> {
    let mut reports = Vec::new();
    for mode in modes {
        let (mut recall, mut recall_folded, mut mrr, mut ndcg) = (0.0, 0.0, 0.0, 0.0);
        let mut latencies = Vec::with_capacity(queries.len());
        let mut first_hit = Vec::with_capacity(queries.len());
        for (qi, q) in queries.iter().enumerate() {
            let req = SearchRequest {
                query: q.query.clone(),
                top_k: k.clamp(10, 50),
                fusion: mode.fusion,
                sort: Sort::Relevance,
                filters: Filters { types: q.row_type.into_iter().collect(), ..Filters::default() },
                rerank: mode.rerank,
                snapshot: None,
                blend: mode.blend,
            };
            let started = Instant::now();
            let answer = search(snap, embedder, reranker, &req)
                .map_err(|e| anyhow::anyhow!("query {:?}: {e}", q.query))?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            let rows: Vec<Row> =
                answer.results.iter().filter_map(|r| snap.row(&r.id).ok().flatten()).collect();
            let rows: Vec<&Row> = rows.iter().collect();
            let judged = judge(&rows, q);
            let found: std::collections::HashSet<usize> =
                judged.iter().take(k).flatten().copied().collect();
            recall += found.len() as f64 / q.relevant.len() as f64;
            let folded: Vec<Row> = answer
                .results
                .iter()
                .take(k)
                .flat_map(|r| {
                    let others = r.same_entity.iter().flat_map(|s| s.others.iter().map(|o| &o.id));
                    std::iter::once(&r.id).chain(others)
                })
                .filter_map(|id| snap.row(id).ok().flatten())
                .collect();
            let folded: Vec<&Row> = folded.iter().collect();
            let found_folded = judge(&folded, q).into_iter().flatten().count();
            recall_folded += found_folded as f64 / q.relevant.len() as f64;
            let rank = judged.iter().take(k).position(|m| !m.is_empty());
            if let Some(rank) = rank {
                mrr += 1.0 / (rank + 1) as f64;
            }
            first_hit.push(rank.map(|r| r + 1));
            ndcg += ndcg_at_10(&judged, q.relevant.len());
            progress(&mode.name, qi + 1);
        }
        latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
        let n = queries.len() as f64;
        reports.push(ModeReport {
            mode: mode.name.clone(),
            queries: queries.len(),
            recall_at_k: recall / n,
            recall_at_k_folded: recall_folded / n,
            mrr_at_k: mrr / n,
            ndcg_at_10: ndcg / n,
            p50_ms: pct(0.5),
            p95_ms: pct(0.95),
            first_hit,
        });
    }
    Ok(reports)
}

/// For each result row, the relevant specs it matches that no better-ranked row matched.
fn judge(rows: &[&Row], q: &EvalQuery) -> Vec<Vec<usize>> {
    let mut seen = std::collections::HashSet::new();
    rows.iter()
        .map(|row| {
            (0..q.relevant.len())
                .filter(|&i| matches(&q.relevant[i], row, q.repo.as_deref()) && seen.insert(i))
                .collect()
        })
        .collect()
}

/// Binary-gain nDCG over the first 10 results.
fn ndcg_at_10(judged: &[Vec<usize>], relevant: usize) -> f64 {
    let dcg: f64 = judged
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, m)| !m.is_empty())
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..relevant.min(10)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    if ideal > 0.0 { dcg / ideal } else { 0.0 }
}

/// The table `hubdex eval` prints.
pub fn render_table(reports: &[ModeReport], k: usize) -> String {
    let mut out = format!(
        "{:<16} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8}\n",
        "mode",
        "queries",
        format!("recall@{k}"),
        "+folded",
        format!("MRR@{k}"),
        "nDCG@10",
        "p50 ms",
        "p95 ms"
    );
    for r in reports {
        out.push_str(&format!(
            "{:<16} {:>8} {:>10.3} {:>10.3} {:>8.3} {:>8.3} {:>8.1} {:>8.1}\n",
            r.mode,
            r.queries,
            r.recall_at_k,
            r.recall_at_k_folded,
            r.mrr_at_k,
            r.ndcg_at_10,
            r.p50_ms,
            r.p95_ms
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_row() -> Row {
        let mut r = Row::new(RowType::Code, "local/x", "file/src/a.rs", 0);
        r.path = Some("src/a.rs".into());
        r.line_start = Some(10);
        r.line_end = Some(20);
        r.commit_sha = Some("abcdef1234".into());
        r
    }

    #[test]
    fn specs_match_ids_spans_and_commits() {
        let r = code_row();
        assert!(matches(&r.id, &r, None));
        assert!(matches("src/a.rs:15", &r, None));
        assert!(matches("src/a.rs:5-10", &r, Some("local/x")));
        assert!(!matches("src/a.rs:5-10", &r, Some("local/y")));
        assert!(!matches("src/a.rs:21", &r, None));
        assert!(!matches("src/b.rs:15", &r, None));
        // A code row read at a commit is not that commit.
        assert!(!matches("abcdef1", &r, None));
        let mut c = Row::new(RowType::Commit, "local/x", "commit/abcdef1234", 0);
        c.commit_sha = Some("abcdef1234".into());
        assert!(matches("abcdef1", &c, None));
    }

    #[test]
    fn ndcg_rewards_early_hits() {
        let first = ndcg_at_10(&[vec![0], vec![], vec![]], 1);
        let third = ndcg_at_10(&[vec![], vec![], vec![0]], 1);
        assert!((first - 1.0).abs() < 1e-9);
        assert!(third < first && third > 0.0);
        assert_eq!(ndcg_at_10(&[vec![], vec![]], 1), 0.0);
    }
}
