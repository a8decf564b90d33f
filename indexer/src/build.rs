//! `hubdex-index build`: crawl sources, embed what changed, write one segment per repository,
//! publish a snapshot.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::Utc;
use globset::{Glob, GlobSetBuilder};
use hubdex_formats::{
    BuildStats, Device, Embedder, FORMAT_VERSION, Manifest, ManifestSegment, Row, Store, cache_dir,
    read_rows, snapshot_id, start_segment,
};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::git;
use crate::local::read_repo;

/// What a build is asked to do.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub store: String,
    pub model_dir: PathBuf,
    pub device: Device,
    pub sources: Vec<PathBuf>,
    pub exclude: Vec<String>,
    pub allow_unsafe_latest: bool,
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    /// The snapshot LATEST names after the build.
    pub snapshot: String,
    /// False when nothing changed and the previous snapshot stays current.
    pub published: bool,
    pub repos: usize,
    pub rows: u64,
    pub embedded: u64,
    pub reused: u64,
    pub segments_written: usize,
    pub segments_unchanged: usize,
    pub crawl_seconds: f64,
    pub embed_seconds: f64,
    pub write_seconds: f64,
    pub publish_seconds: f64,
    pub snapshot_bytes: u64,
}

impl BuildReport {
    /// Seconds of everything but embedding.
    pub fn other_seconds(&self) -> f64 {
        self.crawl_seconds + self.write_seconds + self.publish_seconds
    }
}

fn bar(mp: &MultiProgress, len: u64, msg: &str) -> ProgressBar {
    let pb = mp.add(ProgressBar::new(len));
    pb.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {per_sec} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(msg.to_string());
    pb
}

/// Vectors of the previous snapshot's rows of `repo`, by content hash, when the model is the
/// same one.
async fn previous_vectors(
    store: &Store,
    prev: Option<&Manifest>,
    repo: &str,
    model_sha: &str,
) -> anyhow::Result<HashMap<String, Vec<f32>>> {
    let Some(prev) = prev else { return Ok(HashMap::new()) };
    if prev.model.model_sha256 != model_sha {
        return Ok(HashMap::new());
    }
    let mut out = HashMap::new();
    for seg in prev.segments.iter().filter(|s| s.repo == repo) {
        let dir = store
            .fetch_segment(seg, &cache_dir())
            .await
            .with_context(|| format!("reading previous segment {}", seg.id))?;
        for row in read_rows(&dir.join(hubdex_formats::ROWS_PARQUET), true)? {
            out.insert(row.content_sha256, row.embedding);
        }
    }
    Ok(out)
}

/// Fills every row's embedding: reused when its text and model are unchanged, else embedded.
/// Returns (embedded, reused).
fn fill_vectors(
    rows: &mut [Row],
    previous: &HashMap<String, Vec<f32>>,
    embedder: &Embedder,
    pb: &ProgressBar,
) -> anyhow::Result<(u64, u64)> {
    let mut todo = Vec::new();
    let mut reused = 0u64;
    for (i, row) in rows.iter_mut().enumerate() {
        match previous.get(&row.content_sha256) {
            Some(v) if v.len() == embedder.identity().dim => {
                row.embedding = v.clone();
                reused += 1;
            }
            _ => todo.push(i),
        }
    }
    pb.set_length(todo.len() as u64);
    let texts: Vec<String> = todo.iter().map(|&i| rows[i].embedding_text()).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs, |n| pb.inc(n as u64))?;
    for (i, v) in todo.iter().zip(vectors) {
        rows[*i].embedding = v;
    }
    Ok((todo.len() as u64, reused))
}

/// Runs a whole build and publishes its snapshot.
pub async fn build(opts: &BuildOptions) -> anyhow::Result<BuildReport> {
    let started = Instant::now();
    let store = Store::open(&opts.store)?;
    let prev = match store.latest().await? {
        Some(_) => Some(store.latest_manifest().await.context("reading the current snapshot")?),
        None => None,
    };

    let mut globs = GlobSetBuilder::new();
    for g in &opts.exclude {
        globs.add(Glob::new(g).with_context(|| format!("--exclude {g:?} is not a valid glob"))?);
    }
    let globs = globs.build()?;
    let mut repos: BTreeMap<String, PathBuf> = BTreeMap::new();
    for source in &opts.sources {
        for dir in git::discover(source, &globs)? {
            let name = git::repo_name(&dir);
            if let Some(other) = repos.insert(name.clone(), dir.clone())
                && other != dir
            {
                bail!(
                    "{} and {} would both be indexed as {name}: index them into separate stores",
                    other.display(),
                    dir.display()
                );
            }
        }
    }

    let embedder = Embedder::load(&opts.model_dir, opts.device)
        .with_context(|| format!("loading the model from {}", opts.model_dir.display()))?;
    let model = embedder.identity().clone();
    let mp = MultiProgress::new();
    let mut report = BuildReport { repos: repos.len(), ..BuildReport::default() };
    let mut segments: Vec<ManifestSegment> = Vec::new();
    let work = tempfile::tempdir().context("creating a scratch directory")?;

    for (repo, dir) in &repos {
        let t = Instant::now();
        let crawl = mp.add(ProgressBar::new_spinner());
        crawl.set_message(format!("crawling {repo}"));
        let content = read_repo(dir, repo, |m| crawl.set_message(format!("crawling {repo}: {m}")))
            .with_context(|| format!("reading {}", dir.display()))?;
        let (mut rows, mut files) = (content.rows, content.files);
        crawl.finish_and_clear();
        report.crawl_seconds += t.elapsed().as_secs_f64();

        let t = Instant::now();
        let previous = previous_vectors(&store, prev.as_ref(), repo, &model.model_sha256).await?;
        let pb = bar(&mp, rows.len() as u64, "embed");
        pb.set_message(repo.clone());
        let (embedded, reused) = fill_vectors(&mut rows, &previous, &embedder, &pb)?;
        pb.finish_and_clear();
        report.embed_seconds += t.elapsed().as_secs_f64();
        report.embedded += embedded;
        report.reused += reused;
        report.rows += rows.len() as u64;

        let t = Instant::now();
        let seg_dir = work.path().join(repo.replace('/', "__"));
        let draft = start_segment(&seg_dir, repo, &mut rows, &mut files, &model)?;
        let entry = if store.has_segment(draft.id()).await? {
            report.segments_unchanged += 1;
            store.stored_segment_entry(draft.id()).await?.1
        } else {
            let meta = draft.finish(&rows)?;
            report.write_seconds += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let total: u64 = meta.files.iter().map(|f| f.bytes).sum();
            let up = bar(&mp, total, "upload");
            up.set_message(repo.clone());
            let entry = store.upload_segment(&seg_dir, |n| up.inc(n)).await?;
            up.finish_and_clear();
            report.publish_seconds += t.elapsed().as_secs_f64();
            report.segments_written += 1;
            entry
        };
        tracing::info!(repo = %repo, rows = entry.rows, embedded, reused, segment = %entry.id, "segment ready");
        segments.push(entry);
        let _ = std::fs::remove_dir_all(&seg_dir);
    }

    // Repositories this build did not touch keep their segments from the previous snapshot.
    if let Some(prev) = &prev
        && prev.model.model_sha256 == model.model_sha256
    {
        for s in &prev.segments {
            if !repos.contains_key(&s.repo) {
                segments.push(s.clone());
            }
        }
    }
    segments.sort_by(|a, b| a.repo.cmp(&b.repo));
    report.snapshot_bytes = segments.iter().flat_map(|s| &s.files).map(|f| f.bytes).sum();

    let t = Instant::now();
    if let Some(prev) = &prev
        && prev.segments == segments
        && prev.model == model
    {
        report.snapshot = prev.snapshot.clone();
        report.published = false;
        return Ok(report);
    }
    let now = Utc::now();
    let seed: String = segments.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join("\n");
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        snapshot: snapshot_id(now, seed.as_bytes()),
        created_at: now,
        parent: prev.as_ref().map(|p| p.snapshot.clone()),
        model,
        build: BuildStats {
            rows: report.rows,
            embedded: report.embedded,
            reused: report.reused,
            seconds: started.elapsed().as_secs_f64(),
            embed_seconds: report.embed_seconds,
        },
        segments,
    };
    store.publish(&manifest, opts.allow_unsafe_latest).await?;
    report.publish_seconds += t.elapsed().as_secs_f64();
    report.snapshot = manifest.snapshot;
    report.published = true;
    Ok(report)
}

/// A store path relative to the current directory or a URL, as given.
pub fn default_store() -> String {
    std::env::var("HUBDEX_STORE").unwrap_or_else(|_| "./.hubdex/store".to_string())
}
