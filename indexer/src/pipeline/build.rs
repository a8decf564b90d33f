//! `hubdex-index build`: crawl sources, embed what changed, write one segment per repository,
//! publish a snapshot.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::Utc;
use globset::{Glob, GlobSetBuilder};
use hubdex_formats::{
    BuildStats, FORMAT_VERSION, Manifest, ManifestSegment, MergeLimits, MergeProgress,
    ModelIdentity, Row, SegmentExtras, Store, quantize, read_rows, sha256_hex, snapshot_id,
    start_segment,
};
use hubdex_runtime::{Device, Embedder, TextEmbedder, Texts, cache_dir};
use indicatif::{MultiProgress, ProgressBar};

use crate::pipeline::budget::{self, MemoryBudget};
use crate::progress::{bar, count, spinner, stop_counting};

use crate::config::RepoRules;
use crate::github::{
    self, Clock, CrawlScope, Cursor, GITHUB_API, GitHubClient, SystemClock, carried_rows, crawl_api,
};
use crate::graph::edges::{ReleaseTags, RepoEdges, repo_edges};
use crate::local::{CommitRows, ThreadLinks, read_repo, read_wiki};
use crate::pipeline::spans::{RowAt, SpanKeys};
use crate::sources::git;
use crate::sources::tree::TreeFiles;
use crate::temp::scratch::Scratch;
use crate::temp::spill::KeyRuns;

/// What a build is asked to do.
#[derive(Clone)]
pub struct BuildOptions {
    /// Store URL or directory to publish to.
    pub store: String,
    /// The embedding model directory (model.onnx + tokenizer.json).
    pub model_dir: PathBuf,
    /// Where embedding runs (CPU, or CUDA on a GPU runner).
    pub device: Device,
    /// Local paths (repositories, or directories searched for them) and `owner/name`s.
    pub sources: Vec<PathBuf>,
    /// Globs of directories under a local source not searched for repositories (`--exclude`,
    /// e.g. `archive/**`). Row types and file paths left out are in `rules`.
    pub exclude_dirs: Vec<String>,
    /// Publish to a store that cannot update LATEST conditionally (one publisher only).
    pub allow_unsafe_latest: bool,
    /// The GitHub API base URL (GitHub Enterprise: `https://host/api/v3`).
    pub github_api: String,
    /// Never printed.
    pub github_token: Option<String>,
    /// Which GitHub artifacts a crawl asks for.
    pub scope: CrawlScope,
    /// The time source (a test's fake clock, or the wall clock).
    pub clock: Arc<dyn Clock>,
    /// Where clones and previous segments are cached (default ~/.cache/hubdex).
    pub cache: PathBuf,
    /// Per-repository rules from hubdex.toml (types and paths kept).
    pub rules: BTreeMap<String, RepoRules>,
    /// What the build may hold in memory: a repository whose rows do not fit a build
    /// segment's share of it is written as several build segments (`budget.rs`).
    pub memory_budget: MemoryBudget,
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("store", &self.store)
            .field("sources", &self.sources)
            .field("github_api", &self.github_api)
            .field("github_token", &self.github_token.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

impl BuildOptions {
    /// Options for a build of `sources` into `store` with the model in `model_dir`; the GitHub
    /// API and token come from $HUBDEX_GITHUB_API and $GITHUB_TOKEN.
    pub fn new(store: &str, model_dir: PathBuf, sources: Vec<PathBuf>) -> Self {
        BuildOptions {
            store: store.to_string(),
            model_dir,
            device: Device::Cpu,
            sources,
            exclude_dirs: Vec::new(),
            allow_unsafe_latest: false,
            github_api: std::env::var("HUBDEX_GITHUB_API")
                .unwrap_or_else(|_| GITHUB_API.to_string()),
            github_token: std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty()),
            scope: CrawlScope::default(),
            clock: Arc::new(SystemClock),
            cache: cache_dir(),
            rules: BTreeMap::new(),
            memory_budget: MemoryBudget::default(),
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct BuildReport {
    /// The snapshot LATEST names after the build.
    pub snapshot: String,
    /// False when nothing changed and the previous snapshot stays current.
    pub published: bool,
    /// Repositories built.
    pub repos: usize,
    /// Rows in the rebuilt repositories' segments.
    pub rows: u64,
    /// Rows embedded by the model.
    pub embedded: u64,
    /// Rows whose vectors were all reused from the current snapshot (same texts, same model).
    pub reused: u64,
    /// Segments written and uploaded.
    pub segments_written: usize,
    /// Segments the store already held (the same id).
    pub segments_unchanged: usize,
    /// Commits whose diffs were not read: their rows are in build segments reused by their
    /// history spans (`spans.rs`).
    pub commits_skipped: u64,
    /// Seconds crawling.
    pub crawl_seconds: f64,
    /// Seconds embedding.
    pub embed_seconds: f64,
    /// Seconds writing segments.
    pub write_seconds: f64,
    /// Seconds uploading and publishing.
    pub publish_seconds: f64,
    /// Bytes of the published snapshot's segments.
    pub snapshot_bytes: u64,
    /// GitHub API requests: (all, conditional, answered 304, retried).
    pub github_requests: (u64, u64, u64, u64),
    /// Items crawled from the GitHub API, per type.
    pub github_items: BTreeMap<String, u64>,
    /// The budget the build was given, in bytes (`--memory-budget`).
    pub memory_budget: u64,
    /// The process's peak resident memory once every repository was crawled, embedded and
    /// written, before the serving units are merged and the snapshot published (Linux's
    /// VmHWM; `None` where the system does not say).
    pub peak_rss_before_publish: Option<u64>,
}

impl BuildReport {
    /// Seconds of everything but embedding.
    pub fn other_seconds(&self) -> f64 {
        self.crawl_seconds + self.write_seconds + self.publish_seconds
    }
}

/// The rows a GitHub crawl of `repo` carries over from the previous snapshot (its threads and
/// releases: [`crate::github::carried_rows`]), without their vectors. They are carried whatever
/// model made the previous snapshot: the crawl cursor's watermark limits the API crawl to
/// items updated since that snapshot, so a thread not carried here would be lost. Their vectors
/// are made again where the model changed, as every row's are ([`fill_vectors`] reuses a
/// vector only from segments of the same model). Read a build segment at a time, keeping only
/// those rows: what is held is bounded by the API's items, not by the history (commit, diff,
/// doc and code rows are not kept). A local repository is read whole and carries nothing.
pub(crate) async fn previous_threads_and_releases(
    store: &Store,
    cache: &std::path::Path,
    prev: Option<&Manifest>,
    repo: &str,
    source: &Source,
) -> anyhow::Result<Vec<Row>> {
    let (Some(prev), Source::GitHub) = (prev, source) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for seg in prev.segments.iter().filter(|s| s.repo == repo) {
        let dir = store
            .fetch_segment(seg, cache)
            .await
            .with_context(|| format!("reading previous segment {}", seg.id))?;
        let rows = read_rows(&dir.join(hubdex_formats::ROWS_PARQUET), false)?;
        out.extend(rows.into_iter().filter(|r| crate::github::carried_kind(r.kind())));
    }
    Ok(out)
}

/// Where a repository's rows come from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    Local(PathBuf),
    GitHub,
}

/// Fills every row's embedding, and the title embedding of the rows that have one
/// ([`Row::title_embedding_text`]): each reused when the same text was embedded before with
/// this model (`previous`: sha256 of a text → its vector), else embedded and quantized as it
/// is kept ([`quantize`]). Returns (embedded,
/// reused) in rows: a row counts as embedded when any of its vectors was computed.
///
/// The texts to embed are made a batch at a time ([`RowTexts`]), not all first: a build
/// segment's would be a second copy of its rows' texts, up to two shares of the budget.
fn fill_vectors(
    rows: &mut [Row],
    previous: &HashMap<String, Vec<i8>>,
    embedder: &dyn TextEmbedder,
    pb: &ProgressBar,
) -> anyhow::Result<(u64, u64)> {
    let dim = embedder.identity().dim;
    let reusable = |sha: &str| previous.get(sha).filter(|v| v.len() == dim);
    // (row, whether the title vector, the text's length) of every vector to embed.
    let mut todo: Vec<(usize, bool, usize)> = Vec::new();
    for (i, row) in rows.iter_mut().enumerate() {
        match reusable(&row.content_sha256) {
            Some(v) => row.embedding = v.clone(),
            None => todo.push((i, false, row.embedding_text().len())),
        }
        row.title_embedding.clear();
        if let Some(text) = row.title_embedding_text() {
            match reusable(&sha256_hex(text.as_bytes())) {
                Some(v) => row.title_embedding = v.clone(),
                None => todo.push((i, true, text.len())),
            }
        }
    }
    let mut computed: Vec<usize> = todo.iter().map(|t| t.0).collect();
    computed.dedup();
    pb.inc_length(todo.len() as u64);
    // Each vector is kept as i8 as it comes: only a batch's float32 vectors are ever held.
    let mut made: Vec<Vec<i8>> = vec![Vec::new(); todo.len()];
    let texts = RowTexts { rows: &*rows, todo: &todo };
    embedder.embed_texts(&texts, &mut |k, v| {
        made[k] = quantize(&v);
        pb.inc(1);
    })?;
    for (&(i, title, _), v) in todo.iter().zip(made) {
        if title {
            rows[i].title_embedding = v;
        } else {
            rows[i].embedding = v;
        }
    }
    let embedded = computed.len() as u64;
    Ok((embedded, rows.len() as u64 - embedded))
}

/// The texts [`fill_vectors`] embeds, made when the embedder asks for them: row `todo[k].0`'s
/// [`Row::embedding_text`], or its [`Row::title_embedding_text`] where `todo[k].1`; `todo[k].2`
/// is the text's length, taken when `todo` was made.
struct RowTexts<'a> {
    rows: &'a [Row],
    todo: &'a [(usize, bool, usize)],
}

impl Texts for RowTexts<'_> {
    fn count(&self) -> usize {
        self.todo.len()
    }

    fn len_of(&self, k: usize) -> usize {
        self.todo[k].2
    }

    fn text(&self, k: usize) -> Cow<'_, str> {
        let (i, title, _) = self.todo[k];
        let row = &self.rows[i];
        Cow::Owned(if title {
            row.title_embedding_text().unwrap_or_default()
        } else {
            row.embedding_text()
        })
    }
}

/// The hashes of the texts `rows` embed: each row's `content_sha256`, and the hash of its
/// title text when it has a title vector.
fn text_hashes(rows: &[Row]) -> HashSet<String> {
    hashes_with_titles(rows, Row::title_embedding_text)
}

/// The hashes of the texts rows read without their bodies ([`hubdex_formats::read_text_keys`])
/// may hold vectors of: each row's main text (`content_sha256`), and each commit row's title
/// ([`Row::title_text`]). A commit's title has a vector of its own only where its body embeds
/// more than whitespace ([`Row::title_embedding_text`]), which the body would tell: so this may
/// name a title without one. It only picks the build segments worth reading whole;
/// [`keep_reusable`] takes the vectors they hold.
fn held_text_hashes(rows: &[Row]) -> HashSet<String> {
    hashes_with_titles(rows, Row::title_text)
}

/// Each row's `content_sha256`, and the hash of the title text `title` gives it, if any.
fn hashes_with_titles(rows: &[Row], title: impl Fn(&Row) -> Option<String>) -> HashSet<String> {
    let mut out = HashSet::with_capacity(rows.len() * 2);
    for r in rows {
        out.insert(r.content_sha256.clone());
        if let Some(text) = title(r) {
            out.insert(sha256_hex(text.as_bytes()));
        }
    }
    out
}

/// Adds to `out` the vectors of `previous` (rows of the repository's current segments) whose
/// texts are in `wanted`: main vectors by `content_sha256`, title vectors by the hash of their
/// text.
fn keep_reusable(previous: &[Row], wanted: &HashSet<String>, out: &mut HashMap<String, Vec<i8>>) {
    for r in previous {
        if let Some(text) = r.title_embedding_text()
            && !r.title_embedding.is_empty()
        {
            let sha = sha256_hex(text.as_bytes());
            if wanted.contains(&sha) {
                out.insert(sha, r.title_embedding.clone());
            }
        }
        if wanted.contains(&r.content_sha256) {
            out.insert(r.content_sha256.clone(), r.embedding.clone());
        }
    }
}

/// What a build works on: the store, its current snapshot, the repositories the sources name
/// and a GitHub client when one of them is on GitHub.
pub(crate) struct Plan {
    pub(crate) store: Store,
    pub(crate) prev: Option<Manifest>,
    pub(crate) repos: BTreeMap<String, Source>,
    pub(crate) client: Option<GitHubClient>,
    /// hubdex.toml's rules by repository name (a local path's entry under the name it gets).
    pub(crate) rules: BTreeMap<String, RepoRules>,
}

impl Plan {
    /// The rules of `repo` (the defaults when hubdex.toml has no entry for it).
    pub(crate) fn rules_of(&self, repo: &str) -> RepoRules {
        self.rules.get(repo).cloned().unwrap_or_default()
    }
}

/// Resolves the sources of `opts` into repositories.
pub(crate) async fn plan(opts: &BuildOptions) -> anyhow::Result<Plan> {
    let store = Store::open(&opts.store)?;
    let prev = store.current_manifest().await.context("reading the current snapshot")?;
    let mut globs = GlobSetBuilder::new();
    for g in &opts.exclude_dirs {
        globs.add(Glob::new(g).with_context(|| format!("--exclude {g:?} is not a valid glob"))?);
    }
    let globs = globs.build()?;
    let mut repos: BTreeMap<String, Source> = BTreeMap::new();
    let mut rules = opts.rules.clone();
    for source in &opts.sources {
        if let Some(name) = source.to_str().filter(|s| github::is_repo_name(s)) {
            repos.insert(name.to_string(), Source::GitHub);
            continue;
        }
        let entry = opts.rules.get(source.to_string_lossy().as_ref());
        for dir in git::discover(source, &globs)? {
            let name = git::repo_name(&dir);
            if let Some(r) = entry {
                rules.entry(name.clone()).or_insert_with(|| r.clone());
            }
            if let Some(Source::Local(other)) =
                repos.insert(name.clone(), Source::Local(dir.clone()))
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
    let client = if repos.values().any(|s| matches!(s, Source::GitHub)) {
        Some(GitHubClient::new(&opts.github_api, opts.github_token.clone(), opts.clock.clone())?)
    } else {
        None
    };
    Ok(Plan { store, prev, repos, client, rules })
}

/// What crawling one repository gives: its threads' and releases' rows (without vectors unless
/// carried over), its files at HEAD with their rows, spilled ([`TreeFiles`]), and its history,
/// whose rows are read as a stream when its build segments are cut ([`CommitRows`]); and the
/// crawl cursor to save once published.
pub(crate) struct Crawled {
    /// Threads and releases: bounded by the API's items.
    pub(crate) rows: Vec<Row>,
    /// Docs, wiki pages and code with their files' texts, read back a path at a time.
    pub(crate) tree: TreeFiles,
    /// The history's rows (commits and diffs), streamed from git.
    pub(crate) commits: CommitRows,
    /// Cross-references of the repository (see [`crate::graph::edges`]).
    pub(crate) edges: RepoEdges,
    pub(crate) cursor: Option<Cursor>,
}

/// One repository crawled and cut into build segments as its history is read: the step per
/// repository that [`build_with`] (which embeds each part) and the staged `crawl` (which
/// stages it) share, so the two cannot drift apart. A GitHub crawl carries the previous
/// snapshot's unchanged threads and releases over, whatever model made them.
pub(crate) struct CutCrawl {
    /// Where a GitHub crawl stopped: saved once a snapshot holding what it read is published.
    pub(crate) cursor: Option<Cursor>,
    /// The build segments, in order, as they are cut.
    pub(crate) parts: tokio::sync::mpsc::Receiver<budget::Part>,
    /// The previous snapshot's segments of this repository (same model) a part may be found
    /// again in.
    pub(crate) prev_segments: Vec<ManifestSegment>,
    /// The crawl's thread, waited for by [`CrawlDone::finish`].
    pub(crate) done: CrawlDone,
}

/// The thread a [`CutCrawl`] reads the history on, and its progress line.
pub(crate) struct CrawlDone {
    crawling: tokio::task::JoinHandle<anyhow::Result<u64>>,
    progress: ProgressBar,
}

impl CrawlDone {
    /// Waits for the crawl once the parts were consumed (`consumed`: what that gave). An error
    /// consuming comes first: it closed the channel, which stopped the crawl. Gives what was
    /// consumed and the number of commits the crawl skipped.
    pub(crate) async fn finish<T>(self, consumed: anyhow::Result<T>) -> anyhow::Result<(T, u64)> {
        let crawled = self.crawling.await.context("the crawl's thread stopped")?;
        self.progress.finish_and_clear();
        let consumed = consumed?;
        Ok((consumed, crawled?))
    }
}

/// Crawls `repo` from `source` and starts cutting it for `model` (see [`CutCrawl`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn crawl_and_cut(
    opts: &BuildOptions,
    plan: &Plan,
    repo: &str,
    source: &Source,
    model: &ModelIdentity,
    git_version: &str,
    report: &mut BuildReport,
    progress: ProgressBar,
) -> anyhow::Result<CutCrawl> {
    let previous =
        previous_threads_and_releases(&plan.store, &opts.cache, plan.prev.as_ref(), repo, source)
            .await?;
    let mut crawled = crawl_one(opts, plan, repo, source, previous, report, &progress).await?;
    let cursor = crawled.cursor.take();
    let cut = CutOptions::new(opts.memory_budget, model.dim, git_version.to_string());
    let prev_segments = SegmentInput::prev_segments(plan.prev.as_ref(), repo, model);
    let (parts, crawling) = cut_stream(crawled, cut, prev_segments.clone(), progress.clone(), repo);
    Ok(CutCrawl { cursor, parts, prev_segments, done: CrawlDone { crawling, progress } })
}

/// Crawls one repository. `previous` are its threads and releases in the current snapshot
/// ([`previous_threads_and_releases`]; a GitHub crawl carries the unchanged ones over).
pub(crate) async fn crawl_one(
    opts: &BuildOptions,
    plan: &Plan,
    repo: &str,
    source: &Source,
    previous: Vec<Row>,
    report: &mut BuildReport,
    crawl: &ProgressBar,
) -> anyhow::Result<Crawled> {
    let (mut rows, tree, cursor, mut commits, web) = match source {
        Source::Local(dir) => {
            let web = git::web_url(repo);
            let summaries = git::SummaryCache::of(&opts.cache, dir);
            let rules = plan.rules_of(repo);
            let content = read_repo(dir, repo, web.as_deref(), &rules, Some(&summaries), |m| {
                crawl.set_message(format!("crawling {repo}: {m}"))
            })
            .with_context(|| format!("reading {}", dir.display()))?;
            (Vec::new(), content.tree, None, content.commits, web)
        }
        Source::GitHub => {
            let client = plan.client.as_ref().expect("a client exists when a GitHub source does");
            let cursor = Cursor::load(&plan.store, repo)
                .await
                .with_context(|| format!("reading the crawl cursor of {repo}"))?;
            let quota = client.stats.clone();
            let scope = plan.rules.get(repo).map_or_else(|| opts.scope.clone(), RepoRules::scope);
            let api = crawl_api(client, repo, &cursor, &scope, |m| {
                let left = quota.remaining.load(std::sync::atomic::Ordering::Relaxed);
                let left = if left == u64::MAX { "?".to_string() } else { left.to_string() };
                crawl.set_message(format!("crawling {repo}: {m} (quota left {left})"));
            })
            .await
            .with_context(|| format!("crawling {repo} from {}", opts.github_api))?;
            for (t, n) in &api.counts {
                *report.github_items.entry(t.to_string()).or_default() += n;
            }
            let clone_url = api.cursor.clone_url.clone().context("GitHub gave no clone_url")?;
            let web = api.cursor.html_url.clone();
            let token = opts.github_token.as_deref();
            crawl.set_message(format!("cloning {repo}"));
            let dir = github::clone_or_fetch(
                &clone_url,
                &opts.cache.join("repos").join(format!("{repo}.git")),
                token,
            )?;
            let summaries = git::SummaryCache::of(&opts.cache, &dir);
            let rules = plan.rules_of(repo);
            let mut content =
                read_repo(&dir, repo, web.as_deref(), &rules, Some(&summaries), |m| {
                    crawl.set_message(format!("reading {repo}: {m}"))
                })?;
            if api.cursor.has_wiki {
                let wiki_dir = opts.cache.join("repos").join(format!("{repo}.wiki.git"));
                match github::clone_or_fetch(&github::wiki_url(&clone_url), &wiki_dir, token) {
                    Ok(d) => {
                        let wiki = read_wiki(&d, repo, web.as_deref(), &rules)?;
                        content.tree.append(wiki).context("keeping the wiki's pages")?;
                        content.tree.flush().context("keeping the wiki's pages")?;
                    }
                    // A repository whose wiki was never written has no wiki repository.
                    Err(e) => tracing::info!(repo = %repo, error = %e, "no wiki"),
                }
            }
            let mut rows = carried_rows(previous, &api);
            rows.extend(api.threads.into_values().flatten());
            if let Some(releases) = api.releases {
                rows.extend(releases);
            }
            let mut seen = std::collections::HashSet::new();
            rows.reverse();
            rows.retain(|r| seen.insert(r.id.clone()));
            // Commit rows take in the text of the threads that merged or closed them.
            content.commits.link(ThreadLinks::of(&rows));
            (rows, content.tree, Some(api.cursor), content.commits, web)
        }
    };
    let rules = plan.rules_of(repo);
    // The files at HEAD were kept by these rules as they were read.
    rows.retain(|r| rules.keeps(r));
    let history = commits.history();
    let held = history.heap_bytes() as f64 / f64::from(1 << 20);
    crawl.set_message(format!(
        "cross-references of {repo} ({} commits, history held {held:.1} MiB)",
        history.len()
    ));
    let releases = ReleaseTags::of(rules.release_tags.as_ref(), &rows);
    let commit_rows = commits.has_commit_rows();
    let edges =
        repo_edges(repo, web.as_deref(), &rows, &tree, commits.history(), commit_rows, &releases)
            .with_context(|| format!("reading back the files at HEAD of {repo}"))?;
    commits.edges_made();
    Ok(Crawled { rows, tree, commits, edges, cursor })
}

/// One repository's build segments as they are cut (see [`cut_stream`]), ready to embed.
pub(crate) struct SegmentInput {
    pub(crate) repo: String,
    /// The build segments' content, in order, as the crawl cuts them.
    pub(crate) parts: tokio::sync::mpsc::Receiver<budget::Part>,
    /// The repository's build segments in the current snapshot (none when it was built with
    /// another model): a build segment whose input ([`hubdex_formats::input_sha256`]) one of
    /// them has is reused as it is; for the others, their vectors of unchanged texts are.
    pub(crate) prev_segments: Vec<ManifestSegment>,
}

/// Cuts a crawled repository into build segments on a thread of its own: the history's rows
/// are read from git one commit at a time ([`CommitRows::commit_rows`]), then the other
/// rows follow in stream order, and each build segment goes out through the returned channel
/// as soon as it is cut. The channel holds one segment, so the crawl runs at most one segment
/// ahead of the embedding, and it waits while the rows it holds and those it handed on and not
/// yet seen written pass `cut.in_flight` ([`budget::InFlight`]). The handle says whether the
/// crawl ended well (and how many commits' diffs were not read): a receiver that stops early
/// ends it.
///
/// Where a build segment of `previous` (the repository's in the current snapshot) starts with a
/// span of history rows whose key still holds ([`crate::pipeline::spans`]), it is taken as it is and git
/// is asked only for the commits after it.
pub(crate) fn cut_stream(
    crawled: Crawled,
    cut: CutOptions,
    previous: Vec<ManifestSegment>,
    progress: ProgressBar,
    repo: &str,
) -> (tokio::sync::mpsc::Receiver<budget::Part>, tokio::task::JoinHandle<anyhow::Result<u64>>) {
    let (tx, rx) = tokio::sync::mpsc::channel::<budget::Part>(1);
    let repo = repo.to_string();
    let handle = tokio::task::spawn_blocking(move || {
        let Crawled { mut rows, tree, commits, edges, .. } = crawled;
        let CutOptions { share, dim, git_version, in_flight } = cut;
        let keys = SpanKeys::new(&commits, share, dim, &git_version);
        let edge_reads = edges.commits.failures();
        let mut cutter = budget::Cutter::new(Vec::new(), edges, commits.history(), share, dim)
            .with_spans(&keys, &previous);
        let gate = budget::InFlight::new(in_flight);
        let mut open = true;
        // Hands on the parts cut, then waits while the rows held here and those handed on
        // pass what may be in flight.
        let mut send = |cutter: &mut budget::Cutter| {
            for part in cutter.take_ready() {
                open = open && tx.blocking_send(gate.hand_on(part)).is_ok();
            }
            if open {
                gate.wait_for_room(cutter.holding());
            }
            open
        };
        // Commits git was asked for and gave, of `all`, each counted once (a pass that starts
        // inside a commit, after a span that ends there, reads that commit again); the others'
        // rows are all in build segments found again by their spans.
        let (all, read) = (keys.len(), std::cell::Cell::new(0usize));
        let last_read = std::cell::Cell::new(None::<usize>);
        // Where the next history row to cut is: a commit's place in the cut order, and the
        // place of the row among that commit's rows.
        let mut at = (0usize, 0u32);
        loop {
            while let Some(next) = cutter.try_reuse(at) {
                at = next;
            }
            if at.0 >= all || !send(&mut cutter) {
                break;
            }
            let (start, mut jump) = (at, None);
            let mut read_rows = || -> Result<(), git::GitError> {
                for next in commits.commit_rows(start.0)? {
                    let (commit, mut rows) = next?;
                    if last_read.replace(Some(commit)) != Some(commit) {
                        read.set(read.get() + 1);
                    }
                    let (n, mut going) = (rows.len(), true);
                    // A commit's changed lines go with its first row: where it has none, in the
                    // build segment being filled; where that row is in a build segment reused
                    // before, they are in it.
                    let mut changes = rows.take_changes();
                    if n == 0
                        && let Some(c) = changes.take()
                    {
                        cutter.push_changes(c);
                    }
                    if commit == start.0 && start.1 > 0 {
                        changes = None;
                    }
                    for (i, row) in rows.by_ref().enumerate() {
                        let i = i as u32;
                        if commit == start.0 && i < start.1 {
                            continue; // in the build segment reused before
                        }
                        let last = i as usize + 1 == n;
                        cutter.push_history(row, RowAt { commit, row: i, last }, changes.take());
                        if !send(&mut cutter) {
                            going = false;
                            break;
                        }
                        if cutter.at_boundary() {
                            let next = if last { (commit + 1, 0) } else { (commit, i + 1) };
                            if let Some(after) = cutter.try_reuse(next) {
                                jump = Some(after);
                                going = false;
                                break;
                            }
                        }
                    }
                    if let Some(e) = rows.take_failure() {
                        return Err(git::GitError::Spill(e));
                    }
                    let place = commit + 1;
                    if place.is_multiple_of(200) || place == all {
                        let skipped = place - read.get();
                        progress.set_message(format!(
                            "reading {repo} ({skipped} commits in build segments reused as they \
                                 were), commits"
                        ));
                        count(&progress, place as u64, all as u64);
                    }
                    if !going {
                        break;
                    }
                }
                Ok(())
            };
            let read_rows = read_rows();
            // A failed read of the spilled history gave answers that were not its own: that is
            // the cause of whatever followed.
            spill_check(&commits, &edge_reads, &repo)?;
            read_rows.with_context(|| format!("reading the history of {repo}"))?;
            match jump {
                Some(after) => at = after,
                None => break,
            }
        }
        stop_counting(&progress);
        let skipped = if cutter.reused_any() { (all - read.get()) as u64 } else { 0 };
        // Threads and releases, then the files at HEAD by path: the stream's order (the files'
        // rows are none of the held ones).
        rows.sort_by(|a, b| budget::stream_key(a).cmp(&budget::stream_key(b)));
        let mut going = true;
        for row in rows {
            cutter.push(row);
            going = send(&mut cutter);
            if !going {
                break;
            }
        }
        if going {
            let reading = || format!("reading back the files at HEAD of {repo}");
            'paths: for path in tree.paths().with_context(reading)? {
                let (files, mut rows) = path.with_context(reading)?;
                rows.sort_by(|a, b| budget::stream_key(a).cmp(&budget::stream_key(b)));
                cutter.expect_files(files, rows.is_empty());
                for row in rows {
                    cutter.push(row);
                    if !send(&mut cutter) {
                        break 'paths;
                    }
                }
            }
        }
        let last = cutter.finish();
        spill_check(&commits, &edge_reads, &repo)?;
        for part in last {
            if tx.blocking_send(gate.hand_on(part)).is_err() {
                break;
            }
        }
        Ok(skipped)
    });
    (rx, handle)
}

/// An error when a read of `commits`' spilled history ([`crate::graph::history::History::spill`]) or
/// of its commits' edges kept in a file ([`crate::graph::edges::MessageEdges`]) failed.
fn spill_check(
    commits: &CommitRows,
    edge_reads: &std::sync::OnceLock<String>,
    repo: &str,
) -> anyhow::Result<()> {
    match commits.history().spill_error().or_else(|| edge_reads.get().cloned()) {
        Some(e) => Err(anyhow::anyhow!("{e}")).context(format!("reading the history of {repo}")),
        None => Ok(()),
    }
}

/// How [`cut_stream`] cuts a repository: build segments of `share` bytes with vectors of `dim`
/// dimensions; `git_version` is what `git --version` says (part of a history span's key). The
/// build segments being cut and those not yet written hold at most `in_flight` bytes of row
/// data together ([`budget::InFlight`]).
pub(crate) struct CutOptions {
    pub(crate) share: u64,
    pub(crate) dim: usize,
    pub(crate) git_version: String,
    pub(crate) in_flight: u64,
}

impl CutOptions {
    /// The cut a build under `budget` makes of rows with vectors of `dim` dimensions.
    pub(crate) fn new(budget: MemoryBudget, dim: usize, git_version: String) -> CutOptions {
        CutOptions {
            share: budget.segment_bytes(),
            dim,
            git_version,
            in_flight: budget.in_flight_bytes(),
        }
    }
}

impl SegmentInput {
    /// The repository's build segments in `prev` when it was built with `model` (vectors of
    /// another model cannot be reused).
    pub(crate) fn prev_segments(
        prev: Option<&Manifest>,
        repo: &str,
        model: &ModelIdentity,
    ) -> Vec<ManifestSegment> {
        prev.filter(|m| m.model.model_sha256 == model.model_sha256 && m.model.dim == model.dim)
            .map(|m| m.segments.iter().filter(|s| s.repo == repo).cloned().collect())
            .unwrap_or_default()
    }
}

/// What embedding and writing segments needs: the store, the model, the memory budget, a
/// work directory and the progress display.
#[derive(Clone, Copy)]
pub(crate) struct SegmentWriter<'a> {
    pub(crate) store: &'a Store,
    /// Where previous segments are fetched to, to reuse their vectors.
    pub(crate) cache: &'a std::path::Path,
    pub(crate) embedder: &'a dyn TextEmbedder,
    pub(crate) budget: MemoryBudget,
    pub(crate) work: &'a std::path::Path,
    pub(crate) mp: &'a MultiProgress,
}

/// Embeds what changed of one repository's build segments and writes them, one at a time as
/// they come ([`cut_stream`]): a build segment whose input the current snapshot already has is
/// reused as it is; the others are embedded (reusing the vectors of unchanged texts), written
/// and uploaded (unless the store already holds the same one) before the next one is taken.
/// Returns their manifest entries.
pub(crate) async fn embed_one(
    writer: SegmentWriter<'_>,
    input: SegmentInput,
    report: &mut BuildReport,
) -> anyhow::Result<Vec<ManifestSegment>> {
    let SegmentWriter { store, cache, embedder, budget, work, mp } = writer;
    let SegmentInput { repo, mut parts, prev_segments } = input;
    let repo = repo.as_str();
    let model = embedder.identity().clone();
    let mut earlier = EarlierVectors::new(store, cache, prev_segments);
    let pb = bar(mp, 0, "embed");
    let mut entries = Vec::new();
    loop {
        // Waiting for the next build segment is the crawl's time (the history is read while
        // the segments before are embedded and written).
        let t = Instant::now();
        let Some(part) = parts.recv().await else { break };
        report.crawl_seconds += t.elapsed().as_secs_f64();
        // What the build segment before freed goes back to the system: a long history's pass
        // otherwise sits on its holes.
        hubdex_formats::give_back_freed();
        let k = entries.len();
        // `_handed` gives the part's row data back to the cut when this turn ends.
        let budget::Part {
            mut rows,
            mut files,
            mut edges,
            mut changes,
            reused,
            history,
            handed: _handed,
            ..
        } = part;
        if let Some(entry) = reused {
            // Found again by its history span: its rows were not read.
            report.segments_unchanged += 1;
            report.reused += entry.rows;
            report.rows += entry.rows;
            entries.push(entry);
            continue;
        }
        // What the build segment is built from, hashed: a segment of the current snapshot
        // with the same input is reused as it is (nothing embedded, nothing written).
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        files.sort_by(|a, b| a.path.cmp(&b.path));
        // Edges keep the crawl's order (deterministic), which start_segment's writer sorts.
        changes.sort_by(|a, b| a.commit_sha.cmp(&b.commit_sha));
        let input = hubdex_formats::input_sha256(&rows, &files, &edges, &changes, &model);
        if let Some(entry) = earlier.segment_with_input(&input) {
            report.segments_unchanged += 1;
            report.reused += rows.len() as u64;
            report.rows += rows.len() as u64;
            entries.push(ManifestSegment { history, ..entry });
            continue;
        }
        let name = format!("{repo}: build segment {} (budget {budget})", k + 1);
        pb.set_message(name.clone());
        let reusable = earlier.vectors_for(&rows).await?;
        let t = Instant::now();
        let (embedded, reused) = fill_vectors(&mut rows, &reusable, embedder, &pb)?;
        drop(reusable);
        report.embed_seconds += t.elapsed().as_secs_f64();
        report.embedded += embedded;
        report.reused += reused;
        report.rows += rows.len() as u64;

        let t = Instant::now();
        let seg_dir = work.join(format!("{}.{k}", hubdex_formats::repo_slug(repo)));
        let extras = SegmentExtras { files: &mut files, edges: &mut edges, changes: &mut changes };
        let draft =
            start_segment(&seg_dir, repo, &mut rows, extras, &model)?.with_input_sha256(input);
        let entry = if store.has_segment(draft.id()).await? {
            report.segments_unchanged += 1;
            store.stored_segment_entry(draft.id()).await?.1
        } else {
            let writing = spinner(Some(mp));
            writing.set_message(format!("writing {name} ({} rows)", rows.len()));
            let meta = draft.finish(&rows)?;
            writing.finish_and_clear();
            if report.segments_written == 1 {
                // Killed with one build segment uploaded, the next written (tests/it/reliability.rs).
                hubdex_formats::failpoint("second-build-segment-written");
            }
            report.write_seconds += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let bytes: u64 = meta.files.iter().map(|f| f.bytes).sum();
            let up = bar(mp, bytes, "upload");
            up.set_message(name.clone());
            let entry = store.upload_segment(&seg_dir, |n| up.inc(n)).await?;
            up.finish_and_clear();
            report.publish_seconds += t.elapsed().as_secs_f64();
            report.segments_written += 1;
            entry
        };
        tracing::info!(repo = %repo, rows = entry.rows, embedded, reused, segment = %entry.id, part = k + 1, "segment ready");
        let _ = std::fs::remove_dir_all(&seg_dir);
        entries.push(ManifestSegment { history, ..entry });
    }
    pb.finish_and_clear();
    Ok(entries)
}

/// What a repository's current build segments offer a rebuild: themselves, by input hash, and
/// the vectors of their texts. The first build segment that is not reused whole reads every
/// earlier segment's text keys (its rows without bodies) and keeps the hashes of the texts each
/// may hold, 8 bytes of each, as a sorted run a segment in a temporary file ([`KeyRuns`]); each
/// changed segment then looks its own texts up there, a block at a time, and reads the vectors
/// of only the earlier segments holding them. So a rebuild holds one segment's text hashes at a
/// time, not every text of the repository, even when a delta changes a second build segment,
/// as a commit adding or editing a file at HEAD does.
struct EarlierVectors<'a> {
    store: &'a Store,
    cache: &'a std::path::Path,
    segments: Vec<ManifestSegment>,
    /// The hashes of the texts each of `segments` may hold, a run each, once read.
    texts: Option<KeyRuns>,
}

/// The first 8 bytes of a hex sha256, as a number: enough to find which earlier build segments
/// to read (two texts sharing them at worst cost a read of one segment more: the vectors
/// themselves are taken by the whole hash, [`keep_reusable`]).
fn text_key(sha_hex: &str) -> u64 {
    let hex = |h: &str| h.get(..16).and_then(|h| u64::from_str_radix(h, 16).ok());
    hex(sha_hex).or_else(|| hex(&sha256_hex(sha_hex.as_bytes()))).unwrap_or(0)
}

impl<'a> EarlierVectors<'a> {
    fn new(store: &'a Store, cache: &'a std::path::Path, segments: Vec<ManifestSegment>) -> Self {
        EarlierVectors { store, cache, segments, texts: None }
    }

    /// The current build segment built from `input`, if there is one.
    fn segment_with_input(&self, input: &str) -> Option<ManifestSegment> {
        self.segments.iter().find(|s| s.input_sha256.as_deref() == Some(input)).cloned()
    }

    /// Build segment `k`'s rows with their vectors.
    async fn read(&self, k: usize) -> anyhow::Result<Vec<Row>> {
        Ok(read_rows(&self.rows_parquet(k).await?, true)?)
    }

    /// The hashes of the texts build segment `k` may hold vectors of ([`held_text_hashes`]),
    /// read from three of its columns.
    async fn texts_of(&self, k: usize) -> anyhow::Result<HashSet<String>> {
        let rows = hubdex_formats::read_text_keys(&self.rows_parquet(k).await?)?;
        Ok(held_text_hashes(&rows))
    }

    async fn rows_parquet(&self, k: usize) -> anyhow::Result<std::path::PathBuf> {
        let seg = &self.segments[k];
        let dir = self
            .store
            .fetch_segment(seg, self.cache)
            .await
            .with_context(|| format!("reading previous segment {}", seg.id))?;
        Ok(dir.join(hubdex_formats::ROWS_PARQUET))
    }

    /// The earlier vectors of the texts `rows` embed (sha256 of a text → its vector).
    async fn vectors_for(&mut self, rows: &[Row]) -> anyhow::Result<HashMap<String, Vec<i8>>> {
        let wanted = text_hashes(rows);
        let mut out = HashMap::new();
        if self.segments.is_empty() {
            return Ok(out);
        }
        let keeping = "keeping the earlier build segments' text hashes in a temporary file";
        if self.texts.is_none() {
            let mut runs = KeyRuns::new().context(keeping)?;
            for k in 0..self.segments.len() {
                runs.push(self.texts_of(k).await?.iter().map(|t| text_key(t))).context(keeping)?;
            }
            self.texts = Some(runs);
        }
        let runs = self.texts.as_mut().expect("read above");
        for k in runs.holding(wanted.iter().map(|t| text_key(t))).context(keeping)? {
            keep_reusable(&self.read(k).await?, &wanted, &mut out);
        }
        Ok(out)
    }
}

/// What a build publishes: its new segments, what it rebuilt, the cursors to save after.
pub(crate) struct Publication<'a> {
    pub(crate) store: &'a Store,
    /// The current snapshot, whose segments of repositories not rebuilt are kept.
    pub(crate) prev: Option<&'a Manifest>,
    pub(crate) model: &'a ModelIdentity,
    pub(crate) segments: Vec<ManifestSegment>,
    pub(crate) rebuilt: &'a BTreeSet<String>,
    pub(crate) cursors: &'a [(String, Cursor)],
    pub(crate) allow_unsafe_latest: bool,
    pub(crate) started: Instant,
    /// Where the members of merged segments are fetched to (kept for later builds).
    pub(crate) cache: &'a std::path::Path,
    /// Where merged segments are written before upload: the build's scratch directory
    /// ([`Scratch`]), so one a killed build leaves is removed by the next.
    pub(crate) work: &'a std::path::Path,
    /// How many serving merges may run at once (from the memory budget).
    pub(crate) merges: MergeLimits,
}

/// Publishes a snapshot of `segments` plus the current snapshot's segments of repositories
/// not rebuilt, unless nothing changed; then saves the crawl cursors.
pub(crate) async fn publish_segments(
    publication: Publication<'_>,
    report: &mut BuildReport,
) -> anyhow::Result<()> {
    let Publication {
        store,
        prev,
        model,
        mut segments,
        rebuilt,
        cursors,
        allow_unsafe_latest,
        started,
        cache,
        work,
        merges,
    } = publication;
    // Repositories this build did not touch keep their segments from the previous snapshot.
    if let Some(prev) = prev
        && prev.model.model_sha256 == model.model_sha256
    {
        segments.extend(prev.segments.iter().filter(|s| !rebuilt.contains(&s.repo)).cloned());
    }
    segments.sort_by(|a, b| a.repo.cmp(&b.repo));
    report.snapshot_bytes = segments.iter().flat_map(|s| &s.files).map(|f| f.bytes).sum();
    let t = Instant::now();
    if let Some(prev) = prev
        && prev.segments == segments
        && &prev.model == model
    {
        report.snapshot = prev.snapshot.clone();
        report.published = false;
        save_cursors(store, cursors).await?;
        return Ok(());
    }
    // Build segments are served through merged segments (small ones together, others alone);
    // a merged segment already in the store is reused.
    let merge_cache = cache.join("merge");
    // Where builds before the scratch directories wrote serving units: what a killed one left
    // there would stay for good.
    let _ = std::fs::remove_dir_all(merge_cache.join("work"));
    let merging = spinner(None);
    let what = format!(
        "serving units of {} build segments (up to {} written at once, as memory allows)",
        segments.len(),
        merges.parallel
    );
    merging.set_message(format!("writing the {what}"));
    // Counted in rows, so that the plain line's rate and ETA mean something: units range from
    // a few rows to over a hundred thousand.
    let progress = |p: MergeProgress| {
        count(&merging, p.rows_done, p.rows);
        merging.set_message(format!("{what}: {}/{} done, rows", p.done, p.units));
    };
    let merged = store
        .merge_for_serving(&segments, model, &merge_cache, work, merges, &progress)
        .await
        .context("writing merged segments")?;
    merging.finish_and_clear();
    let now = Utc::now();
    let seed: String = segments.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join("\n");
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        snapshot: fresh_snapshot_id(store, now, seed.as_bytes(), prev.map(|p| p.snapshot.as_str()))
            .await?,
        created_at: now,
        parent: prev.map(|p| p.snapshot.clone()),
        model: model.clone(),
        build: BuildStats {
            rows: report.rows,
            embedded: report.embedded,
            reused: report.reused,
            seconds: started.elapsed().as_secs_f64(),
            embed_seconds: report.embed_seconds,
        },
        segments,
        merged,
        earlier_snapshots: None,
    };
    hubdex_formats::failpoint("before-manifest");
    store.publish(&manifest, allow_unsafe_latest).await?;
    // Only now, with the snapshot that holds the crawled items published, do cursors move.
    save_cursors(store, cursors).await?;
    report.publish_seconds += t.elapsed().as_secs_f64();
    report.snapshot = manifest.snapshot;
    report.published = true;
    Ok(())
}

/// Loads the model named by the options.
pub(crate) fn load_embedder(opts: &BuildOptions) -> anyhow::Result<Embedder> {
    Embedder::load(&opts.model_dir, opts.device)
        .with_context(|| format!("loading the model from {}", opts.model_dir.display()))
}

/// Runs a whole build (crawl, embed, publish in one process) and publishes its snapshot.
pub async fn build(opts: &BuildOptions) -> anyhow::Result<BuildReport> {
    let embedder = load_embedder(opts)?;
    build_with(opts, &embedder).await
}

/// [`build`] with an embedder of the caller's: `hubdex-bench` measures a build's memory at
/// scale with a cheap stand-in for the model (labelled so in its output); everything else
/// builds with [`build`].
pub async fn build_with(
    opts: &BuildOptions,
    embedder: &dyn TextEmbedder,
) -> anyhow::Result<BuildReport> {
    let started = Instant::now();
    let plan = plan(opts).await?;
    let model = embedder.identity().clone();
    let mp = MultiProgress::new();
    let mut report = BuildReport { repos: plan.repos.len(), ..BuildReport::default() };
    let mut segments = Vec::new();
    let mut cursors = Vec::new();
    let work = Scratch::for_build().context("creating a scratch directory")?;
    // The git that writes the diffs: part of every history span's key (crate::pipeline::spans).
    let git_version = git::version()?;
    for (repo, source) in &plan.repos {
        let t = Instant::now();
        let crawl = spinner(Some(&mp));
        crawl.set_message(format!("crawling {repo}"));
        let cut =
            crawl_and_cut(opts, &plan, repo, source, &model, &git_version, &mut report, crawl)
                .await?;
        report.crawl_seconds += t.elapsed().as_secs_f64();
        if let Some(cursor) = cut.cursor {
            cursors.push((repo.clone(), cursor));
        }
        // The history is read while the build segments cut from it are embedded and written;
        // each reuses what it can by input hash and text hash (embed_one).
        let written = embed_one(
            SegmentWriter {
                store: &plan.store,
                cache: &opts.cache,
                embedder,
                budget: opts.memory_budget,
                work: work.path(),
                mp: &mp,
            },
            SegmentInput { repo: repo.clone(), parts: cut.parts, prev_segments: cut.prev_segments },
            &mut report,
        )
        .await;
        let (written, skipped) = cut.done.finish(written).await?;
        segments.extend(written);
        report.commits_skipped += skipped;
    }
    if let Some(c) = &plan.client {
        report.github_requests = c.stats.snapshot();
    }
    report.memory_budget = opts.memory_budget.bytes();
    report.peak_rss_before_publish = peak_rss();
    // What the history's pass freed goes back before the first serving unit's graph is built.
    hubdex_formats::give_back_freed();
    let rebuilt: BTreeSet<String> = plan.repos.keys().cloned().collect();
    let publication = Publication {
        store: &plan.store,
        prev: plan.prev.as_ref(),
        model: &model,
        segments,
        rebuilt: &rebuilt,
        cursors: &cursors,
        allow_unsafe_latest: opts.allow_unsafe_latest,
        started,
        cache: &opts.cache,
        work: work.path(),
        merges: opts.memory_budget.merges(),
    };
    publish_segments(publication, &mut report).await?;
    Ok(report)
}

/// This process's peak resident memory in bytes (VmHWM in /proc/self/status), where the
/// system says.
pub(crate) fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// A snapshot id that sorts after `parent` even when both fall in the same second (ids have
/// one-second resolution, then a hash): time moves on a second until it does.
fn next_snapshot_id(now: chrono::DateTime<Utc>, seed: &[u8], parent: Option<&str>) -> String {
    let mut at = now;
    loop {
        let id = snapshot_id(at, seed);
        if parent.is_none_or(|p| id.as_str() > p) {
            return id;
        }
        at += chrono::Duration::seconds(1);
    }
}

/// A snapshot id after `parent` whose manifest does not exist yet: a publish killed after
/// writing its manifest leaves one behind, and a rerun in the same second with the same
/// segments would otherwise pick the same id and collide with it.
async fn fresh_snapshot_id(
    store: &Store,
    now: chrono::DateTime<Utc>,
    seed: &[u8],
    parent: Option<&str>,
) -> anyhow::Result<String> {
    let mut at = now;
    loop {
        let id = next_snapshot_id(at, seed, parent);
        if !store.exists(&hubdex_formats::manifest_key(&id)).await? {
            return Ok(id);
        }
        at += chrono::Duration::seconds(1);
    }
}

async fn save_cursors(store: &Store, cursors: &[(String, Cursor)]) -> anyhow::Result<()> {
    for (repo, c) in cursors {
        c.save(store, repo).await.with_context(|| format!("saving the crawl cursor of {repo}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_id_sorts_after_its_parent_within_one_second() {
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        for seed in [b"a".as_slice(), b"b", b"c", b"d"] {
            let parent = snapshot_id(now, b"zzz");
            let id = next_snapshot_id(now, seed, Some(&parent));
            assert!(id > parent, "{id} <= {parent}");
        }
        assert_eq!(next_snapshot_id(now, b"a", None), snapshot_id(now, b"a"));
    }

    #[test]
    fn the_texts_a_segment_holds_read_without_bodies_include_every_text_it_embeds() {
        use hubdex_formats::RowType;
        let row = |kind: RowType, entity: &str, title: Option<&str>, body: &str| {
            let mut r = Row::new(kind, "o/r", entity, 0);
            r.title = title.map(str::to_string);
            r.body = body.to_string();
            r.content_sha256 = sha256_hex(r.embedding_text().as_bytes());
            r.embedding = vec![1, 2, 3, 4];
            if r.title_embedding_text().is_some() {
                r.title_embedding = vec![4, 3, 2, 1];
            }
            r
        };
        let rows = vec![
            row(RowType::Commit, "a", Some("Fix the parser"), "It dropped the last line."),
            row(RowType::Commit, "b", Some("Bump the version"), "  \n"),
            row(RowType::Commit, "c", Some("   "), "A body under a blank title."),
            row(RowType::Diff, "a:src/p.rs", Some("src/p.rs"), "@@ fn parse\n+ last line"),
            row(RowType::Issue, "#1", Some("The parser drops a line"), "Seen on 0.3."),
        ];
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rows.parquet");
        hubdex_formats::write_rows(&path, &rows, 4).unwrap();
        let keys = hubdex_formats::read_text_keys(&path).unwrap();
        assert!(keys.iter().all(|r| r.body.is_empty()), "no body is read");
        assert_eq!(
            keys.iter().map(|r| &r.id).collect::<Vec<_>>(),
            rows.iter().map(|r| &r.id).collect::<Vec<_>>()
        );
        let (held, embedded) = (held_text_hashes(&keys), text_hashes(&rows));
        assert!(held.is_superset(&embedded));
        // One more: the title of the commit whose body is blank (it has no vector of its own).
        let extra: Vec<_> = held.difference(&embedded).collect();
        assert_eq!(extra, [&sha256_hex(b"Bump the version\n")]);
    }

    #[test]
    fn a_rerun_never_reuses_the_id_of_an_orphan_manifest() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let store = Store::open("memory://").unwrap();
            let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
            let orphan = next_snapshot_id(now, b"seed", None);
            store.put(&hubdex_formats::manifest_key(&orphan), b"{}".to_vec()).await.unwrap();
            let id = fresh_snapshot_id(&store, now, b"seed", None).await.unwrap();
            assert_ne!(id, orphan);
            assert!(id > orphan);
        });
    }
}
