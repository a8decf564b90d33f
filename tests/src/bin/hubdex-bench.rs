//! `hubdex-bench`: the measuring half of `ci/bench` (the script runs it, the Python baseline
//! and the server, and prints the comparison).
//!
//! - `prepare`: grows real rows (with their real vectors) from base stores to N rows with
//!   variation, writes them as segments through the real writer and publishes a snapshot;
//!   times the non-embedding part of a build.
//! - `search`: opens that snapshot (first open, then cold open from the local cache), embeds the
//!   queries (saved for the baseline) and times search in process: search alone and with the
//!   query embedding, per mode, and QPS with 8 threads.
//! - `load`: QPS and latency of 8 concurrent HTTP clients against `hubdex serve`.
//! - `embed`: hubdex's embedder on texts from the base rows (saved for the ORT baseline).
//! - `sparse`: BM25 scored other ways than exactly (pruned, rarest terms first) against exact:
//!   latency and how much of the top 10 and 50 is the same.
//! - `embedder-memory`: the anonymous memory a query embedder built one way costs, its query
//!   latency, and whether its vectors are the indexer's bytes (one way per process).
//! - `merge`: writes the merged segment of the largest merge group of a store, streaming its
//!   members or holding them (one way per process, so the peak RSS is that way's).
//! - `vectors`: one format-6 `vectors.usearch` (a merged segment's) written as format 7's
//!   `vectors.hnsw`: open time, anonymous memory, and, for bench queries, latency and recall of
//!   the exact top 10 and 50 of usearch's walk and of the code walk at several widths.
//! - `history`: writes a synthetic git history (`git fast-import`) of N commits.
//! - `build`: one build of a local repository into a store, as `hubdex-index build` runs it,
//!   with the model or with the cheap hash embedder (labelled so): rows, segments, seconds
//!   and the process's peak RSS (one build per process, so the peak is that build's).
//!
//! Every subcommand prints one JSON object on stdout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use hubdex_formats::{
    BuildStats, Edge, EdgeKind, FORMAT_VERSION, Manifest, Row, SegmentExtras, Store, read_rows,
    row_id, write_segment,
};
use hubdex_runtime::{Device, Embedder, SessionOptions};
use hubdex_server::{Fusion, SearchRequest, Sort, open_snapshot, search, search_with_vector};
use hubdex_tests::Mix;
use serde_json::{Value, json};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Prepare {
        /// Stores whose current snapshot gives the real rows.
        #[arg(long, required = true)]
        base: Vec<String>,
        #[arg(long)]
        rows: usize,
        /// Directory of the new store.
        #[arg(long)]
        out: PathBuf,
        /// Rows per segment (one segment per synthetic repository).
        #[arg(long, default_value_t = 50_000)]
        segment_rows: usize,
        /// Serving merges at once at most (default: what the default memory budget allows on
        /// this machine's cores, as a build's publish runs them); 1 runs them one at a time.
        #[arg(long)]
        merge_parallel: Option<usize>,
    },
    Search {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        model: PathBuf,
        /// JSON lines with a `query` field.
        #[arg(long, required = true)]
        queries: Vec<PathBuf>,
        /// Where to write [{query, vector}] for the baseline.
        #[arg(long)]
        vectors_out: PathBuf,
        #[arg(long, default_value_t = 300)]
        n: usize,
        #[arg(long, default_value_t = 10)]
        qps_seconds: u64,
    },
    Load {
        #[arg(long)]
        port: u16,
        #[arg(long, required = true)]
        queries: Vec<PathBuf>,
        #[arg(long, default_value_t = 8)]
        clients: usize,
        #[arg(long, default_value_t = 15)]
        seconds: u64,
    },
    Embed {
        #[arg(long)]
        base: String,
        #[arg(long)]
        model: PathBuf,
        #[arg(long, default_value_t = 512)]
        n: usize,
        #[arg(long)]
        texts_out: PathBuf,
        /// Also write the vectors (JSON), to compare two builds' bytes.
        #[arg(long)]
        vectors_out: Option<PathBuf>,
        /// Tokens a batch may hold (0: batches of 32 texts whatever their length).
        #[arg(long, default_value_t = hubdex_runtime::BATCH_TOKENS)]
        batch_tokens: usize,
    },
    /// One merge, streamed or held in memory: seconds and peak RSS.
    Merge {
        #[arg(long)]
        store: PathBuf,
        /// `streaming` (what hubdex does: text index and vector graph side by side), `in-turn`
        /// (streamed, one index after the other, as under a small budget) or `in-memory` (every
        /// member's rows held).
        #[arg(long)]
        way: String,
        /// Threads inserting into the vector graph of a streamed merge (the default: what a
        /// build takes for a unit of that size, `hubdex_formats::graph_threads`).
        #[arg(long)]
        graph_threads: Option<usize>,
        /// The graph's builder: `usearch`, or `codes` (hubdex's own,
        /// `hubdex_formats::GraphBuilder::HnswWriter`, what a build's merge in turn uses when
        /// usearch's graph would pass its share of the budget: `hubdex_formats::graph_builder`).
        #[arg(long, default_value = "usearch", value_parser = ["usearch", "codes"])]
        graph: String,
    },
    /// A synthetic history for the build-scale bench.
    History {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        commits: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Messages that name their pull request and close an issue (two edges a commit)
        #[arg(long)]
        references: bool,
    },
    /// One build of SOURCE into STORE (the build-scale bench).
    Build {
        #[arg(long)]
        source: PathBuf,
        #[arg(long)]
        store: PathBuf,
        /// `hash` (cheap, deterministic, not a model) or a model directory.
        #[arg(long, default_value = "hash")]
        embedder: String,
        /// The build's memory budget (as `hubdex-index build --memory-budget`), without the
        /// floor the command line keeps.
        #[arg(long)]
        budget: Option<String>,
        /// Commit a new file before building (a one-commit delta), with this subject.
        #[arg(long)]
        add_commit: Option<String>,
        /// Run one stage of the staged build (as a workflow does: `crawl`, then `embed`, then
        /// `publish`, each in a process of its own, run id `bench`) instead of `build`.
        #[arg(long, value_parser = ["crawl", "embed", "publish"])]
        stage: Option<String>,
    },
    /// The query embedder's memory: load it with the sessions `--sessions`,
    /// `--arena`, `--prepack` and `--share-prepacked` say, embed the queries one at a time, and
    /// report anonymous memory before, after loading and after the queries, the latency, and
    /// how many query vectors equal the indexer's (`Embedder::load`) to the byte.
    Vectors {
        /// A merged segment directory of format 4 to 6 (segment.json, vectors.usearch).
        #[arg(long)]
        segment: PathBuf,
        /// [{query, vector}] as `search` writes them.
        #[arg(long)]
        query_vectors: PathBuf,
        /// Walk widths of the code walk to measure.
        #[arg(long, value_delimiter = ',', default_value = "64,96,128,192,256")]
        ef: Vec<usize>,
        /// Candidates rescored on i8 vectors per row asked for (each with each width; 0: all,
        /// as served).
        #[arg(long, value_delimiter = ',', default_value = "0")]
        rescore: Vec<usize>,
    },
    /// `grep` over a directory of repositories (each directory under `corpus` one
    /// repository): the exact-search store written as a merge writes it (build time, peak
    /// memory, bytes), then each pattern answered by the tool's own code, timed.
    Grep {
        #[arg(long)]
        corpus: PathBuf,
        /// A JSON file: a list of `[kind, pattern]` (Rust regex syntax).
        #[arg(long)]
        patterns: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Write each pattern's matches here, `<n>.txt`, one `repo/path:line` a line, sorted
        /// (for patterns of at most 20,000 matching lines).
        #[arg(long)]
        matches_out: Option<PathBuf>,
        /// Where the store is written (default: a temporary directory).
        #[arg(long)]
        store: Option<PathBuf>,
    },
    /// `grep` of the history over a store's newest snapshot: each pattern answered by the
    /// tool's own code (case-sensitive, as `git log -G`), its first page timed, every commit
    /// found written out; the `changes/` stores' bytes.
    Pickaxe {
        #[arg(long)]
        store: PathBuf,
        /// A JSON file: a list of `[kind, pattern]` (patterns that mean the same as a POSIX
        /// extended regex, which is what `git log -G` takes).
        #[arg(long)]
        patterns: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Write each pattern's commits here, `<n>.txt`, one SHA a line, in answer order.
        #[arg(long)]
        commits_out: PathBuf,
    },
    /// The definitions the indexer lists (tree-sitter tags) for every file under `dir`, as
    /// JSON: `[{path, line, end, name, kind, container}]` (ci/bench-grep compares them with
    /// Universal Ctags').
    Symbols {
        #[arg(long)]
        dir: PathBuf,
    },
    EmbedderMemory {
        #[arg(long)]
        model: PathBuf,
        #[arg(long, required = true)]
        queries: Vec<PathBuf>,
        #[arg(long, default_value_t = 200)]
        n: usize,
        #[arg(long, default_value_t = 1)]
        sessions: usize,
        #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
        arena: bool,
        #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
        prepack: bool,
        #[arg(long, action = clap::ArgAction::Set, default_value_t = false)]
        share_prepacked: bool,
        #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
        fold_constants: bool,
    },
}

async fn base_rows(stores: &[String], cache: &Path) -> anyhow::Result<(Vec<Row>, Manifest)> {
    let mut rows = Vec::new();
    let mut model = None;
    for url in stores {
        let store = Store::open(url)?;
        let m = store.latest_manifest().await.with_context(|| format!("base store {url}"))?;
        for seg in &m.segments {
            let dir = store.fetch_segment(seg, cache).await?;
            rows.extend(read_rows(&dir.join(hubdex_formats::ROWS_PARQUET), true)?);
        }
        model.get_or_insert(m);
    }
    let m = model.context("no base store")?;
    anyhow::ensure!(!rows.is_empty(), "the base stores hold no rows");
    Ok((rows, m))
}

/// Copy `k` (≥ 1) of a base row: a new identity, every (k mod 5 + 3)-th word dropped and a
/// marker word added, and the vector moved by small Gaussian noise.
fn variant(base: &Row, k: usize, repo: &str, rng: &mut Mix) -> Row {
    let mut r = base.clone();
    r.repo = repo.to_string();
    r.id = row_id(base.kind(), repo, &format!("{}#v{k}", base.id), 0);
    r.entity = format!("{}/{}#v{k}", base.repo, base.entity);
    let step = k % 5 + 3;
    let body: Vec<&str> = base
        .body
        .split(' ')
        .enumerate()
        .filter(|(i, _)| i % step != step - 1)
        .map(|(_, w)| w)
        .collect();
    r.set_body(&format!("{} v{k}", body.join(" ")));
    // The base vector near unit length again (kept vectors are scaled to 127), moved a little,
    // and kept as a build keeps a model's vector.
    let v: Vec<f32> =
        base.embedding.iter().map(|&x| f32::from(x) / 127.0 + 0.02 * rng.gauss()).collect();
    r.embedding = hubdex_formats::quantize(&v);
    r
}

/// Cross-references for a synthetic segment, about as dense as a real history's (sharkdp/fd:
/// 1.6 edges per commit): per entity, a `mentions` edge to another entity of the segment and,
/// for two in three, a `closes` or `shipped_in` edge.
fn synthetic_edges(repo: &str, seg: &[Row]) -> Vec<Edge> {
    let heads: Vec<&Row> = seg.iter().filter(|r| r.chunk_index == 0).collect();
    let mut edges = Vec::new();
    for (i, r) in heads.iter().enumerate() {
        let other = heads[(i * 7919 + 13) % heads.len()];
        let edge = |kind: EdgeKind, target: String| Edge {
            kind,
            source_repo: repo.to_string(),
            source: r.entity.clone(),
            target_repo: repo.to_string(),
            target,
            target_url: None,
            evidence_id: Some(r.id.clone()),
            evidence: format!("{} (synthetic)", kind.as_str()),
        };
        if other.entity != r.entity {
            edges.push(edge(EdgeKind::Mentions, other.entity.clone()));
        }
        match i % 3 {
            0 => edges.push(edge(EdgeKind::ShippedIn, format!("release/v0.{}.0", i % 40))),
            1 => {
                edges.push(edge(EdgeKind::Closes, heads[(i * 31 + 7) % heads.len()].entity.clone()))
            }
            _ => {}
        }
    }
    edges
}

async fn prepare(
    base: &[String],
    n: usize,
    out: &Path,
    segment_rows: usize,
    merge_parallel: Option<usize>,
) -> anyhow::Result<Value> {
    let cache = out.join("base-cache");
    let (rows, base_manifest) = base_rows(base, &cache).await?;
    let store_dir = out.join("store");
    let _ = std::fs::remove_dir_all(&store_dir);
    let store = Store::open(store_dir.to_str().context("utf-8 path")?)?;
    let work = out.join("work");
    let mut rng = Mix(7);
    let mut entries = Vec::new();
    let (mut write_s, mut generate_s, mut bytes) = (0.0, 0.0, 0u64);
    let mut edge_count = 0usize;
    let segments = n.div_ceil(segment_rows);
    for s in 0..segments {
        let t = Instant::now();
        let repo = format!("bench/repo{s:03}");
        let count = segment_rows.min(n - s * segment_rows);
        let mut seg: Vec<Row> = (0..count)
            .map(|i| {
                let g = s * segment_rows + i;
                let (k, b) = (g / rows.len(), &rows[g % rows.len()]);
                if k == 0 {
                    let mut r = b.clone();
                    r.repo = repo.clone();
                    r.id = row_id(b.kind(), &repo, &b.id, 0);
                    r.entity = format!("{}/{}", b.repo, b.entity);
                    r
                } else {
                    variant(b, k, &repo, &mut rng)
                }
            })
            .collect();
        let mut edges = synthetic_edges(&repo, &seg);
        edge_count += edges.len();
        generate_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let dir = work.join(format!("seg{s}"));
        let _ = std::fs::remove_dir_all(&dir);
        let meta = write_segment(
            &dir,
            &repo,
            &mut seg,
            SegmentExtras { edges: &mut edges, ..SegmentExtras::default() },
            &base_manifest.model,
        )?;
        bytes += meta.files.iter().map(|f| f.bytes).sum::<u64>();
        entries.push(store.upload_segment(&dir, |_| {}).await?);
        std::fs::remove_dir_all(&dir)?;
        write_s += t.elapsed().as_secs_f64();
        eprintln!("prepare: segment {}/{segments} ({count} rows)", s + 1);
    }
    // Small segments are served merged, as a real publish does; then what a change to one
    // repository costs: rewriting the one merged segment that holds it.
    let t = Instant::now();
    let merge_cache = out.join("merge-cache");
    let mut limits = hubdex_indexer::MemoryBudget::default().merges();
    if let Some(n) = merge_parallel {
        limits.parallel = n;
    }
    let merged = store
        .merge_for_serving(
            &entries,
            &base_manifest.model,
            &merge_cache,
            &work.join("merged"),
            limits,
            &|_| {},
        )
        .await?;
    let merge_s = t.elapsed().as_secs_f64();
    let mut one_repo_change = Value::Null;
    if let Some(group) = hubdex_formats::plan_merges(&entries).first() {
        let dirs: Vec<PathBuf> =
            group.iter().map(|m| merge_cache.join("segments").join(&m.id)).collect();
        let dir = work.join("one-change");
        let _ = std::fs::remove_dir_all(&dir);
        let rows = group.iter().map(|m| m.rows).sum();
        let t = Instant::now();
        let meta = hubdex_formats::write_merged_segment(
            &dir,
            "merged-probe",
            &dirs,
            &base_manifest.model,
            hubdex_formats::MergeIndexes::SideBySide,
            hubdex_formats::graph_threads(rows),
            hubdex_formats::GraphBuilder::Usearch,
        )?;
        one_repo_change = json!({"merged_rows": meta.rows, "members": group.len(), "seconds": t.elapsed().as_secs_f64()});
        std::fs::remove_dir_all(&dir)?;
    }
    let _ = std::fs::remove_dir_all(&merge_cache);
    let t = Instant::now();
    let now = chrono::Utc::now();
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        snapshot: format!("{}-bench{:03}", now.format("%Y%m%dT%H%M%SZ"), segments),
        created_at: now,
        parent: None,
        model: base_manifest.model.clone(),
        build: BuildStats { rows: n as u64, ..BuildStats::default() },
        merged,
        segments: entries,
        earlier_snapshots: None,
    };
    store.publish(&manifest, false).await?;
    write_s += t.elapsed().as_secs_f64() + merge_s;
    let merged_bytes: u64 = manifest.merged.iter().flat_map(|m| &m.files).map(|f| f.bytes).sum();
    Ok(json!({
        "rows": n,
        "edges": edge_count,
        "base_rows": rows.len(),
        "real_vectors": n.min(rows.len()),
        "synthesized_vectors": n.saturating_sub(rows.len()),
        "segments": segments,
        "serving_units": manifest.serving_units().len(),
        "merge_seconds": merge_s,
        "merge_parallel": limits.parallel,
        "one_repo_change": one_repo_change,
        "write_seconds": write_s,
        "write_rows_per_s": n as f64 / write_s,
        "generate_seconds": generate_s,
        // The store as a whole: build segments (what rebuilds and merges read) and the
        // merged segments that serve them.
        "bytes": bytes + merged_bytes,
        "bytes_per_row": (bytes + merged_bytes) as f64 / n as f64,
        "build_segment_bytes_per_row": bytes as f64 / n as f64,
        "merged_bytes_per_row": merged_bytes as f64 / n as f64,
    }))
}

fn load_queries(files: &[PathBuf], n: usize) -> anyhow::Result<Vec<String>> {
    let mut all = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(f)?.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line)?;
            all.push(v["query"].as_str().context("a query line without query")?.to_string());
        }
    }
    // Interleave the sets so a short run sees all of them.
    let step = (all.len() / n.max(1)).max(1);
    Ok(all.into_iter().step_by(step).take(n).collect())
}

fn percentiles(mut ms: Vec<f64>) -> Value {
    ms.sort_by(f64::total_cmp);
    let p = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    json!({"p50_ms": p(0.5), "p95_ms": p(0.95), "p99_ms": p(0.99), "n": ms.len()})
}

fn request(query: &str, fusion: Fusion) -> SearchRequest {
    SearchRequest {
        query: query.to_string(),
        top_k: 10,
        fusion,
        sort: Sort::Relevance,
        filters: hubdex_server::Filters::default(),
        rerank: false,
        snapshot: None,
        blend: hubdex_server::Blend::DEFAULT,
    }
}

fn status_kib(field: &str) -> u64 {
    kib_in(&std::fs::read_to_string("/proc/self/status").unwrap_or_default(), field)
}

/// A `kB` field (`VmHWM:`, `RssAnon:`, …) of a /proc/PID/status text; 0 where it is missing.
fn kib_in(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn anon_mib() -> f64 {
    status_kib("RssAnon:") as f64 / 1024.0
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Resident memory split as the issue asks: anonymous (heap) and file-backed (mapped index
/// pages, which the page cache can drop).
fn rss_split() -> Value {
    json!({
        "total_kib": status_kib("VmRSS:"),
        "anon_kib": status_kib("RssAnon:"),
        "file_kib": status_kib("RssFile:"),
        "file_kib_by_kind": file_rss_by_kind(),
    })
}

/// File-backed resident memory grouped by what the mapped file is (its extension, or
/// `other` for libraries and the binary), from /proc/self/smaps: which serving files the
/// queries actually touched.
fn file_rss_by_kind() -> Value {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut by_kind: std::collections::BTreeMap<String, u64> = Default::default();
    let mut kind: Option<String> = None;
    for line in smaps.lines() {
        let mut parts = line.split_whitespace();
        let first = parts.next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            // A mapping header: address perms offset dev inode [path].
            kind = parts.nth(4).filter(|p| p.starts_with('/')).map(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                match name.rsplit_once('.') {
                    Some((_, ext)) if !ext.contains(|c: char| c.is_ascii_digit()) => {
                        ext.to_string()
                    }
                    _ => "other".to_string(),
                }
            });
        } else if first == "Rss:"
            && let (Some(k), Some(kib)) = (&kind, parts.next().and_then(|v| v.parse::<u64>().ok()))
        {
            *by_kind.entry(k.clone()).or_default() += kib;
        }
    }
    json!(by_kind)
}

async fn search_bench(
    store_dir: &Path,
    model: &Path,
    queries: &[PathBuf],
    vectors_out: &Path,
    n: usize,
    qps_seconds: u64,
) -> anyhow::Result<Value> {
    let store = Store::open(store_dir.to_str().context("utf-8 path")?)?;
    let cache = tempfile::tempdir()?;
    let t = Instant::now();
    let first = open_snapshot(&store, cache.path(), None).await?;
    let first_open_s = t.elapsed().as_secs_f64();
    drop(first);
    let t = Instant::now();
    let snap = open_snapshot(&store, cache.path(), None).await?;
    let cold_open_s = t.elapsed().as_secs_f64();
    let rss_open = rss_kib();
    // The embedder `hubdex serve` loads, so that in process and served differ only by serving.
    let embedder = hubdex_server::query_embedder(model, None)?;
    let queries = load_queries(queries, n)?;
    let mut embed_ms = Vec::new();
    let mut vectors = Vec::new();
    for q in &queries {
        let t = Instant::now();
        vectors.push(embedder.embed_one(q)?);
        embed_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let dump: Vec<Value> =
        queries.iter().zip(&vectors).map(|(q, v)| json!({"query": q, "vector": v})).collect();
    std::fs::write(vectors_out, serde_json::to_vec(&dump)?)?;
    let fail = |e: hubdex_server::ToolError| anyhow::anyhow!("{e}");
    let mut modes = serde_json::Map::new();
    // Resident memory after each phase: which work maps which files.
    let mut rss_by_phase = vec![json!({"phase": "open", "rss": rss_split()})];
    for (name, fusion) in [
        ("sparse_only", Fusion::SparseOnly),
        ("dense_only", Fusion::DenseOnly),
        ("rrf", Fusion::Rrf),
    ] {
        let mut alone = Vec::new();
        for (q, v) in queries.iter().zip(&vectors) {
            let t = Instant::now();
            search_with_vector(&snap, Some(v), None, &request(q, fusion)).map_err(fail)?;
            alone.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        // The tail, named: the slowest queries of this mode and how long they took.
        let mut by_time: Vec<(f64, &String)> = alone.iter().copied().zip(&queries).collect();
        by_time.sort_by(|a, b| b.0.total_cmp(&a.0));
        let slowest: Vec<Value> =
            by_time.iter().take(5).map(|(ms, q)| json!({"ms": ms, "query": q})).collect();
        let mut with = Vec::new();
        for q in &queries {
            let t = Instant::now();
            search(&snap, &embedder, None, &request(q, fusion)).map_err(fail)?;
            with.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        modes.insert(
            name.to_string(),
            json!({"search": percentiles(alone), "with_embedding": percentiles(with), "slowest": slowest}),
        );
        rss_by_phase.push(json!({"phase": name, "rss": rss_split()}));
    }
    // A caller's scope is an index filter: rrf search alone, scoped and unscoped, interleaved
    // query by query so both see the same cache state. Two scopes: every other repository
    // (each merged segment then needs a repository clause and filter bits for the vectors) and
    // one repository's glob (the other segments are skipped).
    let repos: Vec<String> = {
        let mut r: Vec<String> = snap.segments.iter().flat_map(|s| s.meta.repositories()).collect();
        r.sort();
        r.dedup();
        r
    };
    let mut scoped = serde_json::Map::new();
    for (name, patterns) in [
        ("every_other_repository", repos.iter().step_by(2).cloned().collect::<Vec<_>>()),
        ("one_repository_glob", vec![format!("{}*", repos[0])]),
    ] {
        let scope = hubdex_formats::Scope::new(&patterns, &[])?;
        // Scoped twice: with BM25 statistics over the scope's rows (what callers get) and with
        // the whole index's (what they cost without them).
        let (mut plain, mut within, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        for (q, v) in queries.iter().zip(&vectors) {
            let t = Instant::now();
            search_with_vector(&snap, Some(v), None, &request(q, Fusion::Rrf)).map_err(fail)?;
            plain.push(t.elapsed().as_secs_f64() * 1000.0);
            for (whole_stats, out) in [(false, &mut within), (true, &mut whole)] {
                let mut req = request(q, Fusion::Rrf);
                req.filters.scope = Some(scope.clone());
                req.filters.whole_index_statistics = whole_stats;
                let t = Instant::now();
                let a = search_with_vector(&snap, Some(v), None, &req).map_err(fail)?;
                out.push(t.elapsed().as_secs_f64() * 1000.0);
                if let Some(r) = a.results.iter().find(|r| !scope.allows_repo(&r.repo)) {
                    anyhow::bail!("scoped search returned {} of {}", r.id, r.repo);
                }
            }
        }
        let (p, w, o) = (percentiles(plain), percentiles(within), percentiles(whole));
        let p50 = |x: &Value| x["p50_ms"].as_f64().unwrap_or(0.0);
        let ratio = p50(&w) / p50(&p).max(1e-9);
        let stats_ratio = p50(&w) / p50(&o).max(1e-9);
        scoped.insert(
            name.to_string(),
            json!({"repositories": patterns.len(), "unscoped": p, "scoped": w,
                   "scoped_whole_index_statistics": o, "p50_ratio": ratio,
                   "scope_statistics_p50_ratio": stats_ratio}),
        );
        rss_by_phase.push(json!({"phase": format!("scoped_{name}"), "rss": rss_split()}));
    }
    // QPS of search alone (rrf) from 8 threads in this process.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let shared = Arc::new((snap.clone(), queries.clone(), vectors.clone()));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (stop, done, shared) = (stop.clone(), done.clone(), shared.clone());
            std::thread::spawn(move || {
                let (snap, qs, vs) = &*shared;
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let j = k % qs.len();
                    let _ =
                        search_with_vector(snap, Some(&vs[j]), None, &request(&qs[j], Fusion::Rrf));
                    done.fetch_add(1, Ordering::Relaxed);
                    k += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(qps_seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let qps = done.load(Ordering::Relaxed) as f64 / qps_seconds as f64;
    rss_by_phase.push(json!({"phase": "qps_rrf_8_threads", "rss": rss_split()}));
    // fetch of 10 ids, and a 7-day scan with one filter, against the same snapshot.
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for (q, v) in queries.iter().zip(&vectors).take(50) {
            let a =
                search_with_vector(&snap, Some(v), None, &request(q, Fusion::Rrf)).map_err(fail)?;
            ids.extend(a.results.into_iter().map(|r| r.id));
        }
        ids
    };
    // What the edge summary (first_release, edges per kind) adds to a search or fetch answer:
    // per commit, PR or issue result (an answer summarises at most 10), timed alone on the
    // 100 newest commits.
    let mut summary_ms = Vec::new();
    let mut args = serde_json::Map::new();
    args.insert("type".into(), json!(["commit", "pull_request", "issue"]));
    args.insert("since".into(), json!("1970-01-01"));
    args.insert("limit".into(), json!(100));
    let req = hubdex_server::ScanRequest::from_args(&args).map_err(fail)?;
    for r in hubdex_server::scan(&snap, &req).map_err(fail)?.results {
        let entity = snap.row(&r.id)?.map(|row| row.entity).unwrap_or_default();
        let t = Instant::now();
        hubdex_server::edge_summary(&snap, &r.repo, &entity, None).map_err(fail)?;
        summary_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let mut fetch_ms = Vec::new();
    for chunk in ids.chunks(10).filter(|c| c.len() == 10) {
        let t = Instant::now();
        hubdex_server::fetch(&snap, chunk, None).map_err(fail)?;
        fetch_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let newest = snap.segments.iter().filter_map(|s| s.meta.newest_updated_at).max();
    let mut scan_ms = Vec::new();
    if let Some(until) = newest {
        for (i, t) in ["commit", "code", "doc", "diff"].iter().cycle().take(100).enumerate() {
            let until = until - chrono::Duration::days((i % 10) as i64 * 30);
            let mut args = serde_json::Map::new();
            args.insert("type".into(), json!(t));
            args.insert("until".into(), json!(until.to_rfc3339()));
            let req = hubdex_server::ScanRequest::from_args(&args).map_err(fail)?;
            let t = Instant::now();
            hubdex_server::scan(&snap, &req).map_err(fail)?;
            scan_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    // related, depth 1, by row id, for the entities of those results.
    let mut related_ms = Vec::new();
    let mut related_edges = 0usize;
    for id in ids.iter().take(300) {
        let args = json!({"id": id});
        let req = hubdex_server::RelatedRequest::from_args(args.as_object().expect("object"))
            .map_err(fail)?;
        let t = Instant::now();
        let a = hubdex_server::related(&snap, &req, None).map_err(fail)?;
        related_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        related_edges += a.count;
    }
    Ok(json!({
        "rows": snap.segments.iter().map(|s| s.meta.rows).sum::<u64>(),
        "edge_summary_per_result": if summary_ms.is_empty() { Value::Null } else { percentiles(summary_ms) },
        "related_depth1": if related_ms.is_empty() { Value::Null } else {
            json!({"latency": percentiles(related_ms.clone()), "edges_listed_per_call": related_edges as f64 / related_ms.len() as f64})
        },
        "fetch_10_ids": if fetch_ms.is_empty() { Value::Null } else { percentiles(fetch_ms) },
        "scan_7d_one_filter": if scan_ms.is_empty() { Value::Null } else { percentiles(scan_ms) },
        "rss_split_after_run": rss_split(),
        "rss_by_phase": rss_by_phase,
        "segments": snap.segments.len(),
        "first_open_seconds": first_open_s,
        "cold_open_seconds": cold_open_s,
        "rss_after_open_kib": rss_open,
        "rss_after_run_kib": rss_kib(),
        "query_embedding": percentiles(embed_ms),
        "modes": modes,
        "scoped_rrf": scoped,
        "qps_rrf_8_threads": qps,
    }))
}

fn post_full(port: u16, body: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let req = format!(
        "POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or("no status")?;
    Ok((status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

fn load(port: u16, queries: &[PathBuf], clients: usize, seconds: u64) -> anyhow::Result<Value> {
    let queries = Arc::new(load_queries(queries, 300)?);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (stop, errors, queries, first_error) =
                (stop.clone(), errors.clone(), queries.clone(), first_error.clone());
            std::thread::spawn(move || {
                let mut ms = Vec::new();
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let body =
                        json!({"query": queries[k % queries.len()], "top_k": 10}).to_string();
                    let t = Instant::now();
                    let status = post_full(port, &body);
                    if status.as_ref().map(|s| s.0) != Ok(200) {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut e) = first_error.lock() {
                            e.get_or_insert(format!("{status:?}"));
                        }
                    }
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                    k += 1;
                }
                ms
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))?);
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(json!({
        "clients": clients,
        "requests": all.len(),
        "errors": errors.load(Ordering::Relaxed),
        "first_error": first_error.lock().ok().and_then(|e| e.clone()),
        "qps": all.len() as f64 / secs,
        "latency": percentiles(all),
    }))
}

async fn embed_bench(
    base: &str,
    model: &Path,
    n: usize,
    texts_out: &Path,
    vectors_out: Option<&Path>,
    batch_tokens: usize,
) -> anyhow::Result<Value> {
    let cache = tempfile::tempdir()?;
    let (rows, _) = base_rows(&[base.to_string()], cache.path()).await?;
    let step = (rows.len() / n).max(1);
    let texts: Vec<String> = rows.iter().step_by(step).take(n).map(Row::embedding_text).collect();
    std::fs::write(texts_out, serde_json::to_vec(&texts)?)?;
    let mut embedder = Embedder::load(model, Device::Cpu)?;
    embedder.set_batch_tokens(if batch_tokens == 0 { usize::MAX } else { batch_tokens });
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    embedder.embed(&refs[..refs.len().min(32)])?; // warm-up
    let t = Instant::now();
    let vectors = embedder.embed(&refs)?;
    let s = t.elapsed().as_secs_f64();
    if let Some(path) = vectors_out {
        std::fs::write(path, serde_json::to_vec(&vectors)?)?;
    }
    Ok(
        json!({"texts": texts.len(), "batch": hubdex_runtime::BATCH_SIZE, "batch_tokens": batch_tokens, "seconds": s, "chunks_per_s": texts.len() as f64 / s,
               "peak_rss_kib": status_kib("VmHWM:"), "rss_kib": status_kib("VmRSS:")}),
    )
}

/// Writes the merged segment of the store's largest merge group one way.
async fn merge_bench(
    store_dir: &Path,
    way: &str,
    graph_threads: Option<usize>,
    graph: &str,
) -> anyhow::Result<Value> {
    let builder = match graph {
        "codes" => hubdex_formats::GraphBuilder::HnswWriter,
        _ => hubdex_formats::GraphBuilder::Usearch,
    };
    let store = Store::open(store_dir.to_str().context("utf-8 store path")?)?;
    let manifest = store.latest_manifest().await?;
    let group = hubdex_formats::plan_merges(&manifest.segments)
        .into_iter()
        .max_by_key(|g| g.iter().map(|s| s.rows).sum::<u64>())
        .context("the store has nothing to merge")?;
    let cache = store_dir.with_extension("merge-bench");
    let mut dirs = Vec::new();
    for seg in &group {
        dirs.push(store.fetch_segment(seg, &cache).await?);
    }
    let start_kib = status_kib("VmHWM:");
    let out = cache.join(format!("out-{way}"));
    let _ = std::fs::remove_dir_all(&out);
    let id = hubdex_formats::merged_id(&group);
    let indexes = match way {
        "streaming" => Some(hubdex_formats::MergeIndexes::SideBySide),
        "in-turn" => Some(hubdex_formats::MergeIndexes::InTurn),
        "in-memory" => None,
        other => anyhow::bail!("--way {other:?}: streaming, in-turn or in-memory"),
    };
    let rows = group.iter().map(|s| s.rows).sum();
    // Held in memory, the graph is built on one thread.
    let threads =
        indexes.map_or(1, |_| graph_threads.unwrap_or_else(|| hubdex_formats::graph_threads(rows)));
    let t = Instant::now();
    let meta = match indexes {
        Some(indexes) => hubdex_formats::write_merged_segment(
            &out,
            &id,
            &dirs,
            &manifest.model,
            indexes,
            threads,
            builder,
        )?,
        None => hubdex_formats::write_merged_in_memory(&out, &id, &dirs, &manifest.model)?,
    };
    let seconds = t.elapsed().as_secs_f64();
    // The vector graph: vectors.hnsw from format 5, vectors.usearch before.
    let graph = [hubdex_formats::VECTORS_HNSW, hubdex_formats::VECTORS_USEARCH]
        .into_iter()
        .map(|name| out.join(name))
        .find(|path| path.exists())
        .context("the merged segment has no vector graph")?;
    let vectors = hubdex_formats::hash_file(&graph)?.0;
    let peak_kib = status_kib("VmHWM:");
    let recall_at_10 = match graph.ends_with(hubdex_formats::VECTORS_HNSW) {
        true => Value::from(graph_recall(&graph, &meta, &dirs[0])?),
        false => Value::Null,
    };
    std::fs::remove_dir_all(&out)?;
    Ok(
        json!({"way": way, "graph": graph, "graph_threads": threads, "members": group.len(), "rows": meta.rows,
              "seconds": seconds, "peak_rss_kib": peak_kib, "peak_before_merge_kib": start_kib,
              "vectors_sha256": vectors, "recall_at_10": recall_at_10}),
    )
}

/// A merged graph's recall of the exact top 10 (as served: ef 192, every candidate rescored),
/// for 200 of the first member's row vectors as queries (the same rows every run, so graphs
/// built on one thread and on several compare).
fn graph_recall(
    graph: &Path,
    meta: &hubdex_formats::SegmentMeta,
    first_member: &Path,
) -> anyhow::Result<f64> {
    use hubdex_formats::hnsw::{DEFAULT_EF, HnswIndex};
    let index = HnswIndex::open(graph, meta.model.dim, meta.rows, meta.second_vectors)?;
    let rows = read_rows(&first_member.join(hubdex_formats::ROWS_PARQUET), true)?;
    let step = (rows.len() / 200).max(1);
    let queries: Vec<Vec<f32>> = rows
        .iter()
        .step_by(step)
        .take(200)
        .map(|r| r.embedding.iter().map(|&x| f32::from(x)).collect())
        .collect();
    let mut sum = 0.0;
    for q in &queries {
        let got = index.search(q, 10, DEFAULT_EF, None, None)?;
        sum += recall(&got, &index.exact(q, 10));
    }
    Ok(sum / queries.len().max(1) as f64)
}

/// The most memory the `git` processes this one starts hold, sampled every 20 ms from /proc
/// (their own peaks, VmHWM, are read at each sample too): git runs beside the indexer, so its
/// memory is the build's as much as the indexer's is.
struct GitMemory {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<(u64, u64)>,
}

impl GitMemory {
    fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let sampler = std::thread::spawn(move || {
            let (mut anon, mut hwm) = (0u64, 0u64);
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let mut now = 0;
                for pid in child_pids() {
                    let status =
                        std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                    if !status
                        .lines()
                        .any(|l| l.strip_prefix("Name:").is_some_and(|n| n.trim() == "git"))
                    {
                        continue;
                    }
                    now += kib_in(&status, "RssAnon:");
                    hwm = hwm.max(kib_in(&status, "VmHWM:"));
                }
                anon = anon.max(now);
                std::thread::sleep(Duration::from_millis(20));
            }
            (anon, hwm)
        });
        GitMemory { stop, sampler }
    }

    /// The peak anonymous memory of the git processes running at once, and the largest VmHWM
    /// (anonymous and mapped pack files) one of them reached, in KiB.
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap_or((0, 0))
    }
}

/// The processes this one started (every thread's children).
fn child_pids() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

/// One build, as the build-scale bench runs it (one per process: the peak is its own).
async fn build_bench(
    source: &Path,
    store: &Path,
    embedder: &str,
    budget: Option<&str>,
    add_commit: Option<String>,
    stage: Option<String>,
) -> anyhow::Result<Value> {
    if let Some(subject) = &add_commit {
        hubdex_tests::add_commit(source, subject, "notes/delta.dat")?;
    }
    let model_dir = if embedder == "hash" { PathBuf::from(".") } else { PathBuf::from(embedder) };
    let mut opts = hubdex_indexer::BuildOptions::new(
        store.to_str().context("utf-8 store path")?,
        model_dir.clone(),
        vec![source.to_path_buf()],
    );
    opts.cache = store.with_extension("cache");
    if let Some(b) = budget {
        let bytes = hubdex_indexer::parse_size(b).map_err(anyhow::Error::msg)?;
        opts.memory_budget = hubdex_indexer::MemoryBudget::unchecked(bytes);
    }
    if let Some(stage) = stage {
        return stage_bench(&opts, &stage, embedder, &model_dir).await;
    }
    let git = GitMemory::start();
    let t = Instant::now();
    let (report, label) = if embedder == "hash" {
        let e = hubdex_tests::HashEmbedder::new(384);
        (hubdex_indexer::build_with(&opts, &e).await?, "hash embedder (not a model)")
    } else {
        let e = Embedder::load(&model_dir, Device::Cpu)?;
        (hubdex_indexer::build_with(&opts, &e).await?, "the model")
    };
    let seconds = t.elapsed().as_secs_f64();
    let (git_anon, git_hwm) = git.finish();
    Ok(json!({
        "embedder": label,
        "budget": opts.memory_budget.to_string(),
        "rows": report.rows,
        "embedded": report.embedded,
        "segments_written": report.segments_written,
        "segments_unchanged": report.segments_unchanged,
        "commits_skipped": report.commits_skipped,
        "published": report.published,
        "seconds": seconds,
        "embed_seconds": report.embed_seconds,
        "crawl_seconds": report.crawl_seconds,
        "write_seconds": report.write_seconds,
        "publish_seconds": report.publish_seconds,
        "non_embedding_rows_per_s": report.rows as f64 / report.other_seconds().max(1e-9),
        "peak_rss_kib": status_kib("VmHWM:"),
        "peak_rss_before_publish_kib": report.peak_rss_before_publish.map(|b| b >> 10),
        "git_peak_anon_kib": git_anon,
        "git_peak_rss_kib": git_hwm,
    }))
}

/// One stage of the staged build (`hubdex-index crawl`, `embed` or `publish`, run `bench`,
/// one shard), as [`build_bench`] measures a build.
async fn stage_bench(
    opts: &hubdex_indexer::BuildOptions,
    stage: &str,
    embedder: &str,
    model_dir: &Path,
) -> anyhow::Result<Value> {
    use hubdex_indexer::{Shard, crawl_with, embed_with, publish};
    let (run, all) = ("bench", Shard::ALL);
    let hash = hubdex_tests::HashEmbedder::new(384);
    let model: Box<dyn hubdex_runtime::TextEmbedder> = if embedder == "hash" {
        Box::new(hash)
    } else {
        Box::new(Embedder::load(model_dir, Device::Cpu)?)
    };
    let label = if embedder == "hash" { "hash embedder (not a model)" } else { "the model" };
    let t = Instant::now();
    let mut out = match stage {
        "crawl" => {
            let r = crawl_with(opts, run, all, model.identity()).await?;
            json!({"repos": r.repos.len(), "parts_staged": r.parts_staged,
                   "parts_reused": r.parts_reused, "commits_skipped": r.commits_skipped})
        }
        "embed" => {
            let r = embed_with(opts, run, all, model.as_ref()).await?;
            json!({"rows": r.rows, "embedded": r.embedded, "segments_written": r.segments_written,
                   "segments_unchanged": r.segments_unchanged, "embed_seconds": r.embed_seconds})
        }
        _ => {
            let r = publish(opts, run).await?;
            json!({"rows": r.rows, "published": r.published, "publish_seconds": r.publish_seconds})
        }
    };
    out["stage"] = json!(stage);
    out["embedder"] = json!(label);
    out["budget"] = json!(opts.memory_budget.to_string());
    out["seconds"] = json!(t.elapsed().as_secs_f64());
    out["peak_rss_kib"] = json!(status_kib("VmHWM:"));
    Ok(out)
}

fn embedder_memory(
    model: &Path,
    queries: &[PathBuf],
    n: usize,
    options: SessionOptions,
) -> anyhow::Result<Value> {
    let queries = load_queries(queries, n)?;
    let mib = |field: &str| status_kib(field) as f64 / 1024.0;
    let process = mib("RssAnon:");
    // What is there before any session: the runtime library loaded and its environment, and
    // the tokenizer.
    hubdex_runtime::ort_environment()?;
    let runtime = mib("RssAnon:");
    let (_, tokenizer) = hubdex_runtime::model_files(model, hubdex_runtime::MAX_TOKENS)?;
    let with_tokenizer = mib("RssAnon:");
    drop(tokenizer);
    let before = mib("RssAnon:");
    let t = Instant::now();
    let embedder = Embedder::load_with(model, Device::Cpu, options)?;
    let load_s = t.elapsed().as_secs_f64();
    let loaded = mib("RssAnon:");
    let mut ms = Vec::with_capacity(queries.len());
    let mut vectors = Vec::with_capacity(queries.len());
    for q in &queries {
        let t = Instant::now();
        vectors.push(embedder.embed_one(q)?);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let after = mib("RssAnon:");
    let peak = mib("VmHWM:");
    drop(embedder);
    // The indexer's embedder, after the measurement: do the query vectors equal its bytes?
    let indexer = Embedder::load(model, Device::Cpu)?;
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let same = indexer
        .embed(&refs)?
        .iter()
        .zip(&vectors)
        .filter(|(a, b)| a.iter().map(|x| x.to_bits()).eq(b.iter().map(|x| x.to_bits())))
        .count();
    Ok(json!({
        "options": format!("{options:?}"),
        "queries": queries.len(),
        "load_seconds": load_s,
        "anon_mib": {"process": process, "runtime_library": runtime, "with_tokenizer": with_tokenizer,
                     "before": before, "loaded": loaded, "after_queries": after},
        "embedder_anon_mib": after - before,
        "peak_rss_mib": peak,
        "latency": percentiles(ms),
        "vectors_equal_to_indexer": same,
    }))
}

/// (row ordinal, similarity) pairs, best first.
type Ranked = Vec<(u64, f32)>;

/// The share of `want`'s ordinals that `got` holds.
fn recall(got: &[(u64, f32)], want: &[(u64, f32)]) -> f64 {
    let got: std::collections::HashSet<u64> = got.iter().map(|h| h.0).collect();
    want.iter().filter(|h| got.contains(&h.0)).count() as f64 / want.len().max(1) as f64
}

fn vectors_bench(
    segment: &Path,
    query_vectors: &Path,
    efs: &[usize],
    rescores: &[usize],
) -> anyhow::Result<Value> {
    use hubdex_formats::{VectorIndex, hnsw::HnswIndex, read_segment_meta};
    let meta = read_segment_meta(segment)?;
    let queries: Vec<Value> = serde_json::from_slice(&std::fs::read(query_vectors)?)?;
    let queries: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| serde_json::from_value(q["vector"].clone()))
        .collect::<Result<_, _>>()?;
    let dim = meta.model.dim;
    let (rows, second) = (meta.rows, meta.second_vectors);
    let tmp = tempfile::tempdir_in(segment.parent().unwrap_or(Path::new(".")))?;
    let hnsw_path = tmp.path().join("vectors.hnsw");
    let t = Instant::now();
    hubdex_formats::hnsw::convert_usearch(&segment.join("vectors.usearch"), &hnsw_path, dim)?;
    let convert_s = t.elapsed().as_secs_f64();
    let before = anon_mib();
    let t = Instant::now();
    let usearch = VectorIndex::open(&segment.join("vectors.usearch"), dim, rows, second, "i8")?;
    let usearch_open_ms = t.elapsed().as_secs_f64() * 1e3;
    let usearch_anon = anon_mib() - before;
    let before = anon_mib();
    let t = Instant::now();
    let hnsw = HnswIndex::open(&hnsw_path, dim, rows, second)?;
    let hnsw_open_ms = t.elapsed().as_secs_f64() * 1e3;
    let hnsw_anon = anon_mib() - before;
    let exact: Vec<(Ranked, Ranked)> = queries
        .iter()
        .map(|q| {
            let top = hnsw.exact(q, 50);
            (top[..top.len().min(10)].to_vec(), top)
        })
        .collect();
    let measure = |search: &dyn Fn(&[f32], usize) -> Ranked| {
        let (mut r10, mut r50, mut served, mut ms) = (0.0, 0.0, 0.0, Vec::new());
        for (q, (e10, e50)) in queries.iter().zip(&exact) {
            let t = Instant::now();
            let got = search(q, 10);
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            r10 += recall(&got, e10);
            let pool = search(q, 50);
            r50 += recall(&pool, e50);
            served += recall(&pool[..pool.len().min(10)], e10);
        }
        let n = queries.len().max(1) as f64;
        // The server asks each unit for a pool of at least 50 rows: its top 10 is what a
        // dense answer is made of.
        json!({"recall_at_10": r10 / n, "recall_at_50": r50 / n,
               "recall_at_10_of_a_pool_of_50": served / n, "latency_top10": percentiles(ms)})
    };
    let mut ways = vec![json!({"way": "usearch i8 walk (format 6)",
        "measured": measure(&|q, k| usearch.search(q, k, None).unwrap())})];
    for &ef in efs {
        for &r in rescores {
            let per_row = (r > 0).then_some(r);
            let rescored = per_row.map_or("all".to_string(), |r| format!("{r} per row"));
            ways.push(json!({"way": format!("code walk, ef {ef}, {rescored} rescored (format 7)"),
                "measured": measure(&|q, k| hnsw.search(q, k, ef, per_row, None).unwrap())}));
        }
    }
    Ok(json!({
        "rows": rows, "second_vectors": second, "queries": queries.len(),
        "bytes": {"usearch": std::fs::metadata(segment.join("vectors.usearch"))?.len(),
                  "hnsw": std::fs::metadata(&hnsw_path)?.len()},
        "convert_seconds": convert_s,
        "open_ms": {"usearch": usearch_open_ms, "hnsw": hnsw_open_ms},
        "anon_mib_at_open": {"usearch": usearch_anon, "hnsw": hnsw_anon},
        "ways": ways,
    }))
}

/// `symbols`: every definition the indexer lists for the files under `dir`.
fn symbols_bench(dir: &Path) -> anyhow::Result<Value> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry?;
        if !entry.file_type().is_file() || entry.metadata()?.len() > 1 << 20 {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
        let path = entry.path().strip_prefix(dir)?.to_string_lossy().to_string();
        for s in hubdex_indexer::symbols_of(&path, &text) {
            out.push(json!({"path": path, "line": s.line_start, "end": s.line_end,
                "name": s.name, "kind": s.kind, "container": s.container}));
        }
    }
    Ok(Value::Array(out))
}

/// Patterns with more matching lines than this have only their count compared with
/// ripgrep's: paging through a million blank lines 500 at a time costs minutes.
const MATCHES_OUT_MAX: u64 = 20_000;

/// `grep`: the exact-search store of `corpus` (each directory under it one repository, its
/// files read as the indexer reads a tree: binary and over-2-MiB ones listed without text),
/// then each pattern of `patterns` answered by the `grep` tool's code (`grep_stores`, 50
/// matches a page, totals over all), the median of `runs` timings after one untimed run.
async fn history_bench(
    store_dir: &Path,
    patterns: &Path,
    runs: usize,
    commits_out: &Path,
) -> anyhow::Result<Value> {
    use hubdex_server::{GrepRequest, grep_history};
    let patterns: Vec<(String, String)> = serde_json::from_slice(&std::fs::read(patterns)?)?;
    let store = Store::open(store_dir.to_str().context("utf-8 path")?)?;
    let cache = tempfile::tempdir()?;
    let snap = open_snapshot(&store, cache.path(), None).await?;
    let (mut commits, mut text_bytes, mut index_bytes) = (0u64, 0u64, 0u64);
    for seg in &snap.segments {
        if let Some(c) = &seg.changes {
            commits += u64::from(c.len());
            text_bytes += c.text_bytes();
            index_bytes += c.index_bytes();
        }
    }
    std::fs::create_dir_all(commits_out)?;
    let mut out = Vec::new();
    for (n, (kind, pattern)) in patterns.iter().enumerate() {
        let args = |cursor: Option<&str>| {
            hubdex_server::tool_args(json!({"pattern": pattern, "in": "history",
                "case": "sensitive", "limit": 500, "cursor": cursor}))
        };
        let req = match GrepRequest::from_args(&args(None)) {
            Ok(r) => r,
            Err(e) => {
                out.push(json!({"kind": kind, "pattern": pattern, "error": e.to_string()}));
                continue;
            }
        };
        let mut times = Vec::with_capacity(runs);
        let mut first = grep_history(&snap, &req, None)?; // untimed: the pages in the cache
        for _ in 0..runs {
            let t = Instant::now();
            first = grep_history(&snap, &req, None)?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let mut shas: Vec<String> = first.results.iter().map(|c| c.commit_sha.clone()).collect();
        let mut cursor = first.cursor.clone();
        while let Some(c) = cursor {
            let page = grep_history(&snap, &GrepRequest::from_args(&args(Some(&c)))?, None)?;
            shas.extend(page.results.iter().map(|c| c.commit_sha.clone()));
            cursor = page.cursor;
        }
        std::fs::write(commits_out.join(format!("{n}.txt")), shas.join("\n"))?;
        out.push(json!({"kind": kind, "pattern": pattern, "ms": times[times.len() / 2],
            "commits": first.commits, "lines": first.count,
            "candidates": first.candidate_commits, "exhaustive": first.exhaustive}));
    }
    Ok(json!({"snapshot": snap.id(), "commits_with_changes": commits,
        "changes_text_bytes": text_bytes, "changes_index_bytes": index_bytes, "patterns": out}))
}

fn grep_bench(
    corpus: &Path,
    patterns: &Path,
    runs: usize,
    matches_out: Option<&Path>,
    store: Option<&Path>,
) -> anyhow::Result<Value> {
    use hubdex_formats::{
        FileText, GrepStore, GrepStoreWriter, MAX_TEXT_FILE_BYTES, Skipped, is_binary,
    };
    let patterns: Vec<(String, String)> = serde_json::from_slice(&std::fs::read(patterns)?)?;
    let patterns: Vec<String> = patterns.into_iter().map(|(_, p)| p).collect();
    let tmp = tempfile::tempdir()?;
    let dir = store.map_or_else(|| tmp.path().join("grep"), Path::to_path_buf);
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let mut writer = GrepStoreWriter::create(&dir)?;
    let (mut files, mut text_bytes, mut binary, mut too_large) = (0u64, 0u64, 0u64, 0u64);
    let mut repos: Vec<PathBuf> = std::fs::read_dir(corpus)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    repos.sort();
    for repo_dir in &repos {
        let repo = repo_dir.file_name().unwrap_or_default().to_string_lossy().to_string();
        for entry in walkdir::WalkDir::new(repo_dir).sort_by_file_name() {
            let entry = entry?;
            if !entry.file_type().is_file() {
                continue;
            }
            let path = entry.path().strip_prefix(repo_dir)?.to_string_lossy().to_string();
            let len = entry.metadata()?.len();
            let mut file = FileText::new(&path, "0000000", None, String::new());
            if len > MAX_TEXT_FILE_BYTES {
                file.skipped = Some(Skipped::TooLarge);
                too_large += 1;
            } else {
                let bytes = std::fs::read(entry.path())?;
                if is_binary(&bytes) {
                    file.skipped = Some(Skipped::Binary);
                    binary += 1;
                } else {
                    text_bytes += len;
                    file.content = match String::from_utf8(bytes) {
                        Ok(t) => {
                            // As a build lists them: files with a grammar up to 1 MiB.
                            if len <= 1 << 20 {
                                file.symbols = hubdex_indexer::symbols_of(&path, &t);
                            }
                            t
                        }
                        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    };
                }
            }
            writer.add(&repo, &file)?;
            files += 1;
        }
    }
    writer.finish()?;
    let build_seconds = started.elapsed().as_secs_f64();
    let peak_mib = status_kib("VmHWM:") as f64 / 1024.0;
    let grep = GrepStore::open(&dir)?;
    let stores = [&grep];
    let request = |pattern: &str, cursor: Option<&str>, limit: u64| {
        let mut args = json!({"pattern": pattern, "limit": limit});
        if let Some(c) = cursor {
            args["cursor"] = json!(c);
        }
        hubdex_server::GrepRequest::from_args(args.as_object().expect("an object"))
    };
    let mut rows = Vec::new();
    for (n, p) in patterns.iter().enumerate() {
        let req = match request(p, None, 50) {
            Ok(r) => r,
            Err(e) => {
                rows.push(json!({"pattern": p, "error": e.to_string()}));
                continue;
            }
        };
        let first = hubdex_server::grep_stores(&stores, "bench", &req, None)?;
        let mut times = Vec::new();
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            hubdex_server::grep_stores(&stores, "bench", &req, None)?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        if let Some(out) = matches_out.filter(|_| first.count <= MATCHES_OUT_MAX) {
            // Every page, for the comparison with ripgrep (untimed).
            std::fs::create_dir_all(out)?;
            let mut lines = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let page = hubdex_server::grep_stores(
                    &stores,
                    "bench",
                    &request(p, cursor.as_deref(), 500)?,
                    None,
                )?;
                for m in &page.results {
                    lines.push(format!("{}/{}:{}", m.repo, m.path, m.line));
                }
                match page.cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            lines.sort();
            std::fs::write(out.join(format!("{n}.txt")), lines.join("\n") + "\n")?;
        }
        rows.push(json!({
            "pattern": p, "count": first.count, "files": first.files,
            "candidates": first.candidate_files, "exhaustive": first.exhaustive,
            "ms": times[times.len() / 2], "ms_max": times[times.len() - 1],
        }));
    }
    // `symbols`: exact lookups of every 500th name of the table, timed.
    let mut lookups = Vec::new();
    let mut symbol_ms = Vec::new();
    for i in (0..grep.symbol_count()).step_by(500) {
        lookups.push(grep.symbol(i)?.name.to_string());
    }
    for name in &lookups {
        let req = hubdex_server::SymbolsRequest::from_args(
            json!({"name": name}).as_object().expect("an object"),
        )?;
        hubdex_server::symbols_in(&stores, "bench", &req, None)?;
        let t = Instant::now();
        hubdex_server::symbols_in(&stores, "bench", &req, None)?;
        symbol_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    symbol_ms.sort_by(f64::total_cmp);
    let at = |q: f64| symbol_ms.get(((symbol_ms.len() as f64 - 1.0) * q).round() as usize).copied();
    Ok(json!({
        "symbols": grep.symbol_count(), "symbol_bytes": grep.symbol_bytes(),
        "symbol_lookups": symbol_ms.len(), "symbol_p50_ms": at(0.5), "symbol_p99_ms": at(0.99),
        "repos": repos.len(), "files": files, "text_bytes": text_bytes,
        "binary": binary, "too_large": too_large,
        "build_seconds": build_seconds, "build_peak_mib": peak_mib,
        "index_bytes": grep.index_bytes(), "texts_bytes": grep.text_bytes(),
        "patterns": rows,
    }))
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Build { .. } | Command::Merge { .. }) {
        // A build, and a merge as a build runs it, are measured with the malloc settings
        // `hubdex-index` runs with (it restarts itself with them): without them glibc keeps
        // freed blocks, and the peak measured is the allocator's, not the build's (40k commits
        // under 256 MiB: 543 against 349-414 MiB; a 400k build's largest merge: 142 against
        // 127-128).
        hubdex_runtime::restart_with_fixed_environment(hubdex_formats::Arenas::Two);
    }
    let rt = tokio::runtime::Runtime::new()?;
    let out = match cli.command {
        Command::Prepare { base, rows, out, segment_rows, merge_parallel } => {
            rt.block_on(prepare(&base, rows, &out, segment_rows, merge_parallel))?
        }
        Command::Search { store, model, queries, vectors_out, n, qps_seconds } => {
            rt.block_on(search_bench(&store, &model, &queries, &vectors_out, n, qps_seconds))?
        }
        Command::Load { port, queries, clients, seconds } => {
            load(port, &queries, clients, seconds)?
        }
        Command::Embed { base, model, n, texts_out, vectors_out, batch_tokens } => rt.block_on(
            embed_bench(&base, &model, n, &texts_out, vectors_out.as_deref(), batch_tokens),
        )?,
        Command::Merge { store, way, graph_threads, graph } => {
            rt.block_on(merge_bench(&store, &way, graph_threads, &graph))?
        }
        Command::History { out, commits, seed, references } => {
            let t = Instant::now();
            hubdex_tests::synthetic_history_with_references(&out, commits, seed, references)?;
            json!({"commits": commits, "seconds": t.elapsed().as_secs_f64()})
        }
        Command::Build { source, store, embedder, budget, add_commit, stage } => rt.block_on(
            build_bench(&source, &store, &embedder, budget.as_deref(), add_commit, stage),
        )?,
        Command::Vectors { segment, query_vectors, ef, rescore } => {
            vectors_bench(&segment, &query_vectors, &ef, &rescore)?
        }
        Command::Symbols { dir } => symbols_bench(&dir)?,
        Command::Pickaxe { store, patterns, runs, commits_out } => {
            rt.block_on(history_bench(&store, &patterns, runs, &commits_out))?
        }
        Command::Grep { corpus, patterns, runs, matches_out, store } => {
            grep_bench(&corpus, &patterns, runs, matches_out.as_deref(), store.as_deref())?
        }
        Command::EmbedderMemory {
            model,
            queries,
            n,
            sessions,
            arena,
            prepack,
            share_prepacked,
            fold_constants,
        } => {
            let options = SessionOptions {
                sessions,
                spin: false,
                arena,
                prepacking: prepack,
                share_prepacked,
                fold_constants,
            };
            embedder_memory(&model, &queries, n, options)?
        }
    };
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
