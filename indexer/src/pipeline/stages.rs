//! The build as three stages a workflow can run on different machines, sharded: `crawl` (each
//! repository cut into build segments as `build` cuts it, within the memory budget: each
//! one's rows without vectors, files and edges to `staging/<run>/crawl/<repo>/part-<k>/`, or
//! the current segment its history span found again), `embed` (the staged segments read back
//! one at a time: vectors, segments uploaded, entries to `staging/<run>/segments/`), `publish`
//! (verify every staged segment, write the manifest, move LATEST, save cursors, consume the
//! delta queue it covered).

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::Context as _;
use hubdex_formats::{
    CHANGES_PARQUET, EDGES_PARQUET, FILES_PARQUET, ManifestSegment, ModelIdentity, ROWS_PARQUET,
    Row, StagedCrawl, StagedPart, StagedSegment, Store, read_changes, read_edges, read_files,
    read_rows, repo_slug, sha256_hex, staged_part_prefix, staged_segment_key, staging_prefix,
    write_changes, write_edges, write_files, write_rows,
};
use hubdex_runtime::TextEmbedder;
use indicatif::MultiProgress;

use crate::github::Cursor;
use crate::pipeline::budget::Part;
use crate::pipeline::build::{
    BuildOptions, BuildReport, Plan, Publication, SegmentInput, SegmentWriter, crawl_and_cut,
    embed_one, load_embedder, plan, publish_segments,
};
use crate::sources::git;
use crate::temp::scratch::Scratch;

/// Which part of the repositories a stage handles: shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard's index, from 0.
    pub index: u32,
    /// How many shards there are.
    pub count: u32,
}

impl Shard {
    /// All repositories.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether `repo` belongs to this shard: by a hash of its name, so adding a repository
    /// never moves the others.
    pub fn owns(&self, repo: &str) -> bool {
        let h = sha256_hex(repo.as_bytes());
        let n = u32::from_str_radix(&h[..8], 16).expect("hex digits");
        n % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `i/n` with 1 <= i <= n (as workflow matrices count).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--shard {s:?} must be i/n with 1 <= i <= n, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (i, n): (u32, u32) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if n == 0 || i == 0 || i > n {
            return Err(bad());
        }
        Ok(Shard { index: i - 1, count: n })
    }
}

/// What `crawl` stages per repository, with the GitHub crawler's cursor.
type Staged = StagedCrawl<Cursor>;

/// What `crawl` staged: the repositories, and of their build segments how many were staged
/// and how many found again by their history spans (nothing staged, their diffs not read).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CrawlReport {
    /// The repositories staged, in the order crawled.
    pub repos: Vec<String>,
    /// Build segments whose rows, files and edges were staged.
    pub parts_staged: usize,
    /// Build segments of the current snapshot found again by their history spans.
    pub parts_reused: usize,
    /// History commits whose diffs were not read (see [`BuildReport::commits_skipped`]).
    pub commits_skipped: u64,
    /// The process's peak resident memory in bytes once crawled, where the system says.
    pub peak_rss: Option<u64>,
}

/// Stage 1: crawls the repositories of `shard` and stages their build segments, cut as
/// `build` cuts them while the history is read (one at a time, within the memory budget):
/// each one's rows (without vectors), files and edges, or, for one found again by its history
/// span in the current snapshot, that segment as it is.
pub async fn crawl(opts: &BuildOptions, run: &str, shard: Shard) -> anyhow::Result<CrawlReport> {
    let plan = plan(opts).await?;
    if !plan.repos.keys().any(|r| shard.owns(r)) {
        return Ok(CrawlReport::default());
    }
    // The cut counts each row's vector bytes, and a segment found again holds its model's
    // vectors: the crawl needs the model's identity (the current snapshot's when it is the
    // same model file, else from a light session, dropped at once).
    let known = plan.prev.as_ref().map(|m| &m.model);
    let model = hubdex_runtime::Embedder::identity_of(&opts.model_dir, known)
        .with_context(|| format!("loading the model from {}", opts.model_dir.display()))?;
    hubdex_formats::give_back_freed();
    crawl_planned(opts, plan, run, shard, &model).await
}

/// [`crawl`] for the model `model` names (`hubdex-bench` and tests: the identity of their
/// cheap stand-in for the model).
pub async fn crawl_with(
    opts: &BuildOptions,
    run: &str,
    shard: Shard,
    model: &ModelIdentity,
) -> anyhow::Result<CrawlReport> {
    crawl_planned(opts, plan(opts).await?, run, shard, model).await
}

async fn crawl_planned(
    opts: &BuildOptions,
    plan: Plan,
    run: &str,
    shard: Shard,
    model: &ModelIdentity,
) -> anyhow::Result<CrawlReport> {
    let work = Scratch::for_build()?;
    let mut report = BuildReport::default();
    let mut out = CrawlReport::default();
    let queue = plan.store.pending().await?;
    let git_version = git::version()?;
    for (repo, source) in plan.repos.iter().filter(|(r, _)| shard.owns(r)) {
        let spinner = crate::progress::spinner(None);
        let cut =
            crawl_and_cut(opts, &plan, repo, source, model, &git_version, &mut report, spinner)
                .await?;
        let mut cuts = cut.parts;
        let staged = async {
            let mut parts = Vec::new();
            while let Some(part) = cuts.recv().await {
                let k = parts.len();
                parts.push(stage_part(&plan.store, work.path(), run, repo, k, part).await?);
            }
            anyhow::Ok(parts)
        }
        .await;
        let (parts, skipped) = cut.done.finish(staged).await?;
        out.commits_skipped += skipped;
        let reused = parts.iter().filter(|p| matches!(p, StagedPart::Reused(_))).count();
        out.parts_reused += reused;
        out.parts_staged += parts.len() - reused;
        // The queue entries this run will cover are the ones pending when it crawled.
        let covered: Vec<String> = queue
            .iter()
            .filter(|(_, e)| e.as_ref().is_ok_and(|e| &e.repo == repo))
            .map(|(k, _)| k.clone())
            .collect();
        let record = Staged::new(repo.clone(), cut.cursor, covered, model.clone(), parts);
        plan.store.put_staged_crawl(run, &record).await?;
        out.repos.push(repo.clone());
    }
    out.peak_rss = crate::pipeline::build::peak_rss();
    Ok(out)
}

/// Stages build segment `k` of `repo` as the cut gave it: its rows without vectors, its files
/// and edges under [`staged_part_prefix`], or, found again by its span, nothing.
async fn stage_part(
    store: &Store,
    work: &std::path::Path,
    run: &str,
    repo: &str,
    k: usize,
    part: Part,
) -> anyhow::Result<StagedPart> {
    let Part { mut rows, files, mut edges, changes, reused, history, .. } = part;
    if let Some(entry) = reused {
        return Ok(StagedPart::Reused(entry));
    }
    for r in &mut rows {
        r.embedding.clear();
        r.title_embedding.clear();
    }
    let dir = work.join(format!("{}.{k}", repo_slug(repo)));
    std::fs::create_dir_all(&dir)?;
    write_rows(&dir.join(ROWS_PARQUET), &rows, 0)?;
    drop(rows);
    write_files(&dir.join(FILES_PARQUET), &files)?;
    write_edges(&dir.join(EDGES_PARQUET), &mut edges)?;
    write_changes(&dir.join(CHANGES_PARQUET), &changes)?;
    let prefix = staged_part_prefix(run, repo, k);
    for name in [ROWS_PARQUET, FILES_PARQUET, EDGES_PARQUET, CHANGES_PARQUET] {
        store.put(&format!("{prefix}/{name}"), std::fs::read(dir.join(name))?).await?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(StagedPart::Rows { history })
}

/// Reads staged build segment `k` of `repo` back as the cut gave it.
async fn staged_part(
    store: &Store,
    work: &std::path::Path,
    run: &str,
    repo: &str,
    k: usize,
    staged: StagedPart,
) -> anyhow::Result<Part> {
    let history = match staged {
        StagedPart::Reused(entry) => {
            let history = entry.history.clone();
            let (rows, files, edges) = (Vec::new(), Vec::new(), Vec::new());
            return Ok(Part {
                rows,
                files,
                edges,
                reused: Some(entry),
                history,
                ..Part::default()
            });
        }
        StagedPart::Rows { history } => history,
    };
    let prefix = staged_part_prefix(run, repo, k);
    let dir = work.join(format!("in-{}.{k}", repo_slug(repo)));
    std::fs::create_dir_all(&dir)?;
    for name in [ROWS_PARQUET, FILES_PARQUET, EDGES_PARQUET] {
        let bytes = store
            .get_opt(&format!("{prefix}/{name}"))
            .await?
            .with_context(|| format!("{prefix}/{name} is missing"))?;
        std::fs::write(dir.join(name), bytes)?;
    }
    // A part staged without changes.parquet has no changed lines.
    let changes_key = format!("{prefix}/{CHANGES_PARQUET}");
    if let Some(bytes) = store.get_opt(&changes_key).await? {
        std::fs::write(dir.join(CHANGES_PARQUET), bytes)?;
    }
    let rows: Vec<Row> = read_rows(&dir.join(ROWS_PARQUET), false)?;
    let files = read_files(&dir.join(FILES_PARQUET))?;
    let edges = read_edges(&dir.join(EDGES_PARQUET))?;
    let changes = read_changes(&dir.join(CHANGES_PARQUET))?;
    std::fs::remove_dir_all(&dir)?;
    Ok(Part { rows, files, edges, changes, reused: None, history, ..Part::default() })
}

async fn staged_crawls(store: &hubdex_formats::Store, run: &str) -> anyhow::Result<Vec<Staged>> {
    Ok(store.staged_crawls(run).await?)
}

/// Stage 2: embeds the staged build segments of `shard` one at a time as `crawl` cut them
/// (reusing every unchanged vector; a segment the crawl found again is taken as it is), writes
/// and uploads them, and stages their manifest entries.
pub async fn embed(opts: &BuildOptions, run: &str, shard: Shard) -> anyhow::Result<BuildReport> {
    embed_with(opts, run, shard, &load_embedder(opts)?).await
}

/// [`embed`] with an embedder of the caller's (`hubdex-bench` and tests: a cheap stand-in for
/// the model).
pub async fn embed_with(
    opts: &BuildOptions,
    run: &str,
    shard: Shard,
    embedder: &dyn TextEmbedder,
) -> anyhow::Result<BuildReport> {
    let store = Store::open(&opts.store)?;
    let prev = store.current_manifest().await.context("reading the current snapshot")?;
    let model = embedder.identity().clone();
    let mp = MultiProgress::new();
    let work = Scratch::for_build()?;
    let mut report = BuildReport::default();
    for staged in staged_crawls(&store, run).await?.into_iter().filter(|s| shard.owns(&s.repo)) {
        same_model(&staged, &model)?;
        let repo = staged.repo.clone();
        let prev_segments = SegmentInput::prev_segments(prev.as_ref(), &repo, &model);
        let before = (report.embedded, report.reused, report.embed_seconds);
        let writer = SegmentWriter {
            store: &store,
            cache: &opts.cache,
            embedder,
            budget: opts.memory_budget,
            work: work.path(),
            mp: &mp,
        };
        // One segment is read ahead of the one being embedded, as `build`'s cut runs one ahead.
        let (tx, parts) = tokio::sync::mpsc::channel::<Part>(1);
        let feed = async {
            for (k, part) in staged.parts.into_iter().enumerate() {
                let part = staged_part(&store, work.path(), run, &repo, k, part).await?;
                if tx.send(part).await.is_err() {
                    break; // the embedding stopped: its error is the cause
                }
            }
            drop(tx);
            anyhow::Ok(())
        };
        let input = SegmentInput { repo: repo.clone(), parts, prev_segments };
        let (fed, entries) = tokio::join!(feed, embed_one(writer, input, &mut report));
        let entries = entries?;
        fed?;
        if entries.is_empty() {
            anyhow::bail!("the crawl of {repo} staged no build segment: run crawl again");
        }
        let done = StagedSegment::new(
            entries,
            report.embedded - before.0,
            report.reused - before.1,
            report.embed_seconds - before.2,
        );
        store.put_staged_segment(run, &repo, &done).await?;
        report.repos += 1;
    }
    report.memory_budget = opts.memory_budget.bytes();
    report.peak_rss_before_publish = crate::pipeline::build::peak_rss();
    Ok(report)
}

/// Refuses to embed what was crawled for another model: the cut counted that model's vector
/// bytes, and the segments it found again hold that model's vectors.
fn same_model(staged: &Staged, model: &ModelIdentity) -> anyhow::Result<()> {
    let crawled = &staged.model;
    if crawled.model_sha256 != model.model_sha256 || crawled.dim != model.dim {
        anyhow::bail!(
            "{} was crawled for model {} (sha256 {}, {} dimensions) but this embed has {} (sha256 \
             {}, {} dimensions): run crawl and embed with the same --model",
            staged.repo,
            crawled.name,
            crawled.model_sha256,
            crawled.dim,
            model.name,
            model.model_sha256,
            model.dim
        );
    }
    Ok(())
}

/// Stage 3: verifies every staged segment the current snapshot does not already serve (each
/// file against its sha256, before anything else), publishes the snapshot, saves the cursors and moves the covered queue entries to
/// done. A segment that fails verification stops the publish; LATEST stays where it was.
pub async fn publish(opts: &BuildOptions, run: &str) -> anyhow::Result<BuildReport> {
    let started = Instant::now();
    let store = hubdex_formats::Store::open(&opts.store)?;
    let prev = store.current_manifest().await.context("reading the current snapshot")?;
    let staged = staged_crawls(&store, run).await?;
    let check = Scratch::for_build()?;
    let mut segments: Vec<ManifestSegment> = Vec::new();
    let mut model = None;
    let mut report = BuildReport { repos: staged.len(), ..BuildReport::default() };
    for s in &staged {
        let staged = store.staged_segment(run, &s.repo).await?.with_context(|| {
            format!(
                "{} was crawled but not embedded: {} is missing",
                s.repo,
                staged_segment_key(run, &s.repo)
            )
        })?;
        report.embedded += staged.embedded;
        report.reused += staged.reused;
        report.embed_seconds += staged.embed_seconds;
        for entry in staged.entries() {
            // A build segment the current snapshot already serves, file for file, was verified
            // when it was published: only the others are downloaded and checked (a one-commit
            // delta of a long history stages hundreds of unchanged segments).
            let published = prev.as_ref().is_some_and(|m| {
                m.segments.iter().any(|p| {
                    p.id == entry.id
                        && p.segment_json_sha256 == entry.segment_json_sha256
                        && p.files == entry.files
                })
            });
            if !published {
                store.fetch_segment(entry, check.path()).await.with_context(|| {
                    format!("staged segment {} of {} failed verification", entry.id, s.repo)
                })?;
                let (meta, _) = store.stored_segment_entry(&entry.id).await?;
                model = Some(meta.model);
            }
            segments.push(entry.clone());
        }
    }
    let Some(model) = model.or_else(|| prev.as_ref().map(|p| p.model.clone())) else {
        anyhow::bail!("run {run} staged nothing: run `crawl` and `embed` first");
    };
    report.rows = segments.iter().map(|s| s.rows).sum();
    let rebuilt: BTreeSet<String> = staged.iter().map(|s| s.repo.clone()).collect();
    let cursors: Vec<(String, Cursor)> =
        staged.iter().filter_map(|s| s.cursor.clone().map(|c| (s.repo.clone(), c))).collect();
    let publication = Publication {
        store: &store,
        prev: prev.as_ref(),
        model: &model,
        segments,
        rebuilt: &rebuilt,
        cursors: &cursors,
        allow_unsafe_latest: opts.allow_unsafe_latest,
        started,
        cache: &opts.cache,
        work: check.path(),
        merges: opts.memory_budget.merges(),
    };
    publish_segments(publication, &mut report).await?;
    for key in staged.iter().flat_map(|s| &s.queue) {
        if store.exists(key).await? {
            store.mark_done(key).await?;
        }
    }
    for key in store.list(&staging_prefix(run)).await? {
        store.delete(&key).await?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_split_every_repo_exactly_once() {
        assert_eq!("2/4".parse::<Shard>().unwrap(), Shard { index: 1, count: 4 });
        for bad in ["0/4", "5/4", "x", "1/0"] {
            assert!(bad.parse::<Shard>().unwrap_err().contains("i/n"), "{bad}");
        }
        let shards: Vec<Shard> = (1..=3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for repo in ["a/b", "rust-lang/rust", "acme/widgets", "acme/gadgets", "x/y"] {
            assert_eq!(shards.iter().filter(|s| s.owns(repo)).count(), 1, "{repo}");
        }
    }
}
