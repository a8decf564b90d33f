//! The build as three stages a workflow can run on different machines, sharded:
//! `crawl` (rows without vectors, files and edges to `staging/<run>/crawl/`), `embed` (vectors, segments
//! uploaded, entries to `staging/<run>/segments/`), `publish` (verify every staged segment,
//! write the manifest, move LATEST, save cursors, consume the delta queue it covered).

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::Context as _;
use hubdex_formats::{
    EDGES_PARQUET, FileText, ManifestSegment, Row, StagedCrawl, StagedSegment, read_edges,
    read_files, read_rows, repo_slug, sha256_hex, staged_crawl_prefix, staged_segment_key,
    staging_prefix, write_edges, write_files, write_rows,
};
use indicatif::MultiProgress;

use crate::build::{
    BuildOptions, BuildReport, Publication, SegmentInput, SegmentWriter, crawl_one, cut_parts,
    embed_one, load_embedder, plan, previous_threads, publish_segments,
};
use crate::github::Cursor;

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

/// Stage 1: crawls the repositories of `shard` and stages their rows (without vectors).
pub async fn crawl(opts: &BuildOptions, run: &str, shard: Shard) -> anyhow::Result<Vec<String>> {
    let plan = plan(opts).await?;
    let work = tempfile::tempdir()?;
    let mut report = BuildReport::default();
    let mut done = Vec::new();
    let queue = plan.store.pending().await?;
    for (repo, source) in plan.repos.iter().filter(|(r, _)| shard.owns(r)) {
        let spinner = crate::progress::spinner(None);
        // A GitHub crawl carries unchanged threads over from the current snapshot; a local
        // repository is read whole and needs nothing from it here.
        let prev_rows = match (&plan.prev, source) {
            (Some(m), crate::build::Source::GitHub) => {
                previous_threads(&plan.store, &opts.cache, Some(m), repo, &m.model.model_sha256)
                    .await?
            }
            _ => Vec::new(),
        };
        let mut c = crawl_one(opts, &plan, repo, source, prev_rows, &mut report, &spinner).await?;
        // The staged crawl is one file of rows: the history's are read into it here.
        let mut rows =
            c.commits.collect().with_context(|| format!("reading the history of {repo}"))?;
        rows.append(&mut c.rows);
        spinner.finish_and_clear();
        for r in &mut rows {
            r.embedding.clear();
            r.title_embedding.clear();
        }
        let dir = work.path().join(repo_slug(repo));
        std::fs::create_dir_all(&dir)?;
        write_rows(&dir.join("rows.parquet"), &rows, 0)?;
        write_files(&dir.join("files.parquet"), &c.files)?;
        let mut edges = std::mem::take(&mut c.edges).into_vec(c.commits.history());
        write_edges(&dir.join(EDGES_PARQUET), &mut edges)?;
        let prefix = staged_crawl_prefix(run, repo);
        for name in ["rows.parquet", "files.parquet", EDGES_PARQUET] {
            plan.store.put(&format!("{prefix}/{name}"), std::fs::read(dir.join(name))?).await?;
        }
        // The queue entries this run will cover are the ones pending when it crawled.
        let covered: Vec<String> = queue
            .iter()
            .filter(|(_, e)| e.as_ref().is_ok_and(|e| &e.repo == repo))
            .map(|(k, _)| k.clone())
            .collect();
        plan.store.put_staged_crawl(run, &Staged::new(repo.clone(), c.cursor, covered)).await?;
        done.push(repo.clone());
    }
    Ok(done)
}

async fn staged_repos(store: &hubdex_formats::Store, run: &str) -> anyhow::Result<Vec<Staged>> {
    Ok(store.staged_crawls(run).await?)
}

/// Stage 2: embeds the staged rows of `shard` (reusing every unchanged vector), writes and
/// uploads their segments, and stages their manifest entries.
pub async fn embed(opts: &BuildOptions, run: &str, shard: Shard) -> anyhow::Result<BuildReport> {
    let store = hubdex_formats::Store::open(&opts.store)?;
    let prev = store.current_manifest().await.context("reading the current snapshot")?;
    let embedder = load_embedder(opts)?;
    let model = embedder.identity().clone();
    let mp = MultiProgress::new();
    let work = tempfile::tempdir()?;
    let mut report = BuildReport::default();
    for staged in staged_repos(&store, run).await?.into_iter().filter(|s| shard.owns(&s.repo)) {
        let prefix = staged_crawl_prefix(run, &staged.repo);
        let dir = work.path().join(format!("in-{}", repo_slug(&staged.repo)));
        std::fs::create_dir_all(&dir)?;
        for name in ["rows.parquet", "files.parquet", EDGES_PARQUET] {
            let bytes = store
                .get_opt(&format!("{prefix}/{name}"))
                .await?
                .with_context(|| format!("{prefix}/{name} is missing"))?;
            std::fs::write(dir.join(name), bytes)?;
        }
        let rows: Vec<Row> = read_rows(&dir.join("rows.parquet"), false)?;
        let files: Vec<FileText> = read_files(&dir.join("files.parquet"))?;
        let edges = read_edges(&dir.join(EDGES_PARQUET))?;
        let prev_segments = SegmentInput::prev_segments(prev.as_ref(), &staged.repo, &model);
        let before = (report.embedded, report.reused, report.embed_seconds);
        let writer = SegmentWriter {
            store: &store,
            cache: &opts.cache,
            embedder: &embedder,
            budget: opts.memory_budget,
            work: work.path(),
            mp: &mp,
        };
        let share = opts.memory_budget.segment_bytes();
        let input = SegmentInput {
            repo: staged.repo.clone(),
            parts: cut_parts(rows, files, edges, share, model.dim),
            prev_segments,
        };
        let entries = embed_one(writer, input, &mut report).await?;
        let done = StagedSegment::new(
            entries,
            report.embedded - before.0,
            report.reused - before.1,
            report.embed_seconds - before.2,
        );
        store.put_staged_segment(run, &staged.repo, &done).await?;
        report.repos += 1;
    }
    Ok(report)
}

/// Stage 3: verifies every staged segment (each file against its sha256, before anything
/// else), publishes the snapshot, saves the cursors and moves the covered queue entries to
/// done. A segment that fails verification stops the publish; LATEST stays where it was.
pub async fn publish(opts: &BuildOptions, run: &str) -> anyhow::Result<BuildReport> {
    let started = Instant::now();
    let store = hubdex_formats::Store::open(&opts.store)?;
    let prev = store.current_manifest().await.context("reading the current snapshot")?;
    let staged = staged_repos(&store, run).await?;
    let check = tempfile::tempdir()?;
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
            store.fetch_segment(entry, check.path()).await.with_context(|| {
                format!("staged segment {} of {} failed verification", entry.id, s.repo)
            })?;
            let (meta, _) = store.stored_segment_entry(&entry.id).await?;
            model = Some(meta.model);
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
