//! `hubdex-index`: the batch indexer's command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use hubdex_formats::{DEFAULT_STORE, Store};
use hubdex_indexer::{
    BuildOptions, BuildReport, Config, MemoryBudget, Shard, build, crawl, delta, embed, gc,
    parse_duration, publish,
};
use hubdex_runtime::{Device, default_model};

#[derive(Parser)]
#[command(name = "hubdex-index", version, about = "Build and publish hubdex snapshots")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What every build-like command shares.
#[derive(Args)]
struct Common {
    /// Store URL or directory (file://, memory://, s3://, gs://, az://).
    #[arg(long, env = "HUBDEX_STORE")]
    store: Option<String>,
    /// Model directory (model.onnx + tokenizer.json) or Hugging Face repo id (default: the
    /// release archive's model beside this binary, else $HUBDEX_MODEL_DIR, else the cache's).
    #[arg(long)]
    model: Option<String>,
    /// Where to run the model.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    device: String,
    /// Overwrite LATEST on stores that cannot update it conditionally.
    #[arg(long)]
    allow_unsafe_latest: bool,
    /// GitHub API base URL (GitHub Enterprise: https://HOST/api/v3); token from $GITHUB_TOKEN.
    #[arg(long, env = "HUBDEX_GITHUB_API")]
    github_api: Option<String>,
    /// hubdex.toml: repositories, per-repository types and paths, store, model, API URL.
    #[arg(long)]
    config: Option<PathBuf>,
    /// What the build may hold in memory (e.g. 3GiB, 512MiB; default 3GiB, which fits a
    /// 7 GB runner): a repository whose rows do not fit a sixteenth of it is written as
    /// several build segments, cut as its history is read and written one at a time.
    #[arg(long, env = "HUBDEX_MEMORY_BUDGET")]
    memory_budget: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Crawl SOURCEs, embed what changed and publish a snapshot.
    Build {
        /// owner/name of GitHub repositories, local git repositories, or directories searched
        /// for them (default: .).
        sources: Vec<PathBuf>,
        /// Glob of directories (relative to a SOURCE) not to search for repositories.
        #[arg(long)]
        exclude: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Stage 1 of a sharded build: crawl this shard's repositories, stage rows without vectors.
    Crawl {
        /// owner/name of GitHub repositories or local paths (with or instead of --config).
        sources: Vec<PathBuf>,
        /// This job's shard, i/n (1-based).
        #[arg(long, default_value = "1/1")]
        shard: Shard,
        /// The run the three stages share (default: $GITHUB_RUN_ID, else "local").
        #[arg(long, env = "GITHUB_RUN_ID", default_value = "local")]
        run: String,
        #[command(flatten)]
        common: Common,
    },
    /// Stage 2: embed this shard's staged rows (reusing unchanged vectors), upload segments.
    Embed {
        #[arg(long, default_value = "1/1")]
        shard: Shard,
        #[arg(long, env = "GITHUB_RUN_ID", default_value = "local")]
        run: String,
        #[command(flatten)]
        common: Common,
    },
    /// Stage 3: verify every staged segment, publish, save cursors, consume covered deltas.
    Publish {
        #[arg(long, env = "GITHUB_RUN_ID", default_value = "local")]
        run: String,
        #[command(flatten)]
        common: Common,
    },
    /// Embed a fixed corpus (the markdown under docs/ and README.md, chunked, repeated to N
    /// texts) and print chunks/s: the figure ci/bench-gpu compares between cuda and cpu.
    BenchEmbed {
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
        device: String,
        #[arg(long, default_value_t = 2000)]
        n: usize,
        #[arg(long)]
        model: Option<String>,
    },
    /// Rebuild the repositories the webhook queue names, publish, then mark the entries done.
    Delta {
        #[command(flatten)]
        common: Common,
    },
    /// Delete snapshots beyond the newest N (never pinned ones) and unreferenced segments.
    Gc {
        /// Snapshots to keep, newest first (the current and pinned ones are always kept).
        #[arg(long)]
        keep: usize,
        /// Leave unreferenced segments and staged runs younger than this (a build may be
        /// uploading them).
        #[arg(long, default_value = "24h")]
        grace: String,
        /// Store URL or directory (file://, memory://, s3://, gs://, az://).
        #[arg(long, env = "HUBDEX_STORE")]
        store: Option<String>,
        /// hubdex.toml, for its store when neither --store nor $HUBDEX_STORE names one.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

/// hubdex.toml, or an empty one when none is given.
fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    })
}

/// `--store` (or `$HUBDEX_STORE`), else the config's, else `./.hubdex/store`. An empty
/// variable counts as unset (an undefined workflow variable is an empty one; `parse_args`),
/// and so does an empty `store` in hubdex.toml.
fn store_url(given: Option<String>, config: &Config) -> String {
    given
        .or_else(|| config.store.clone().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| DEFAULT_STORE.to_string())
}

fn options(common: Common, mut sources: Vec<PathBuf>) -> anyhow::Result<BuildOptions> {
    let config = load_config(common.config.as_deref())?;
    let model = common.model.or(config.model.clone()).unwrap_or_else(default_model);
    let model_dir =
        hubdex_runtime::resolve_model_dir(&model).with_context(|| format!("model {model}"))?;
    sources.extend(config.repos.iter().map(|r| PathBuf::from(&r.name)));
    let store = store_url(common.store, &config);
    let mut opts = BuildOptions::new(&store, model_dir, sources);
    opts.device = common.device.parse::<Device>().map_err(anyhow::Error::msg)?;
    opts.allow_unsafe_latest = common.allow_unsafe_latest;
    opts.rules = config.rules()?;
    if let Some(budget) = common.memory_budget {
        opts.memory_budget = budget
            .parse::<MemoryBudget>()
            .map_err(|e| anyhow::anyhow!("--memory-budget (or $HUBDEX_MEMORY_BUDGET): {e}"))?;
    }
    if let Some(api) = common.github_api.or(config.github_api.clone()) {
        opts.github_api = api;
    }
    Ok(opts)
}

fn print_report(r: &BuildReport) {
    let rows_per_s = |rows: u64, s: f64| if s > 0.0 { rows as f64 / s } else { 0.0 };
    eprintln!(
        "{} rows from {} repositories: embedded {}, reused {} unchanged vectors",
        r.rows, r.repos, r.embedded, r.reused
    );
    eprintln!(
        "segments: {} written, {} unchanged ({} commits' diffs not read); snapshot {} bytes \
         ({:.0} bytes/row)",
        r.segments_written,
        r.segments_unchanged,
        r.commits_skipped,
        r.snapshot_bytes,
        if r.rows > 0 { r.snapshot_bytes as f64 / r.rows as f64 } else { 0.0 }
    );
    // A rate of nothing says nothing: a build that reused every vector says so instead.
    let embedding = if r.embedded == 0 {
        "none (every vector reused)".to_string()
    } else {
        format!("{:.2}s ({:.0} rows/s)", r.embed_seconds, rows_per_s(r.embedded, r.embed_seconds))
    };
    eprintln!(
        "time: embedding {embedding}, the rest {:.2}s ({:.0} rows/s)",
        r.other_seconds(),
        rows_per_s(r.rows, r.other_seconds())
    );
    if let Some(peak) = r.peak_rss_before_publish {
        eprintln!(
            "memory: peak {} MiB while crawling, embedding and writing (budget {})",
            peak >> 20,
            hubdex_indexer::MemoryBudget::unchecked(r.memory_budget)
        );
    }
    if r.github_requests.0 > 0 {
        let items: Vec<String> = r.github_items.iter().map(|(t, n)| format!("{n} {t}")).collect();
        eprintln!(
            "GitHub: {} requests ({} conditional, {} unchanged 304s, {} retried); crawled {}",
            r.github_requests.0,
            r.github_requests.1,
            r.github_requests.2,
            r.github_requests.3,
            if items.is_empty() { "nothing new".to_string() } else { items.join(", ") }
        );
    }
    if r.published {
        eprintln!("published snapshot {}", r.snapshot);
    } else {
        eprintln!("nothing changed: snapshot {} stays current", r.snapshot);
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Build { sources, exclude, common } => {
            let has_config = common.config.is_some();
            let mut opts = options(common, sources)?;
            if opts.sources.is_empty() && !has_config {
                opts.sources.push(PathBuf::from("."));
            }
            opts.exclude_dirs = exclude;
            let r = build(&opts).await?;
            print_report(&r);
            println!("{}", r.snapshot);
        }
        Command::BenchEmbed { device, n, model } => {
            let model = model.unwrap_or_else(default_model);
            let dir = hubdex_runtime::resolve_model_dir(&model)?;
            let device = device.parse::<Device>().map_err(anyhow::Error::msg)?;
            let report = hubdex_indexer::embed_bench(&dir, device, n, Path::new("."))?;
            println!("{}", serde_json::to_string(&report)?);
        }
        Command::Crawl { sources, shard, run, common } => {
            let opts = options(common, sources)?;
            let r = crawl(&opts, &run, shard).await?;
            eprintln!(
                "staged {} repositories for run {run}: {}; {} build segments staged, {} found again by their history spans ({} commits' diffs not read)",
                r.repos.len(),
                r.repos.join(", "),
                r.parts_staged,
                r.parts_reused,
                r.commits_skipped
            );
            if let Some(peak) = r.peak_rss {
                eprintln!("memory: peak {} MiB (budget {})", peak >> 20, opts.memory_budget);
            }
        }
        Command::Embed { shard, run, common } => {
            let opts = options(common, Vec::new())?;
            let r = embed(&opts, &run, shard).await?;
            eprintln!(
                "embedded {} repositories of run {run}: {} rows, {} embedded, {} reused; {} segments written, {} unchanged",
                r.repos, r.rows, r.embedded, r.reused, r.segments_written, r.segments_unchanged
            );
            if let Some(peak) = r.peak_rss_before_publish {
                eprintln!("memory: peak {} MiB (budget {})", peak >> 20, opts.memory_budget);
            }
        }
        Command::Publish { run, common } => {
            let opts = options(common, Vec::new())?;
            let r = publish(&opts, &run).await?;
            if r.published {
                eprintln!("published snapshot {}", r.snapshot);
            } else {
                eprintln!("nothing changed: snapshot {} stays current", r.snapshot);
            }
            println!("{}", r.snapshot);
        }
        Command::Delta { common } => {
            let opts = options(common, Vec::new())?;
            let r = delta(&opts).await?;
            for key in &r.unreadable {
                eprintln!("warning: {key} is not a queue entry; left pending");
            }
            match &r.build {
                None => eprintln!("the delta queue is empty: nothing to do"),
                Some(b) => {
                    let repos: Vec<String> =
                        r.repos.iter().map(|(k, n)| format!("{k} ({n})")).collect();
                    eprintln!("queue entries consumed: {}", repos.join(", "));
                    print_report(b);
                    println!("{}", b.snapshot);
                }
            }
        }
        Command::Gc { keep, grace, store, config } => {
            let config = load_config(config.as_deref())?;
            let store = Store::open(&store_url(store, &config))?;
            let r = gc(&store, keep, parse_duration(&grace)?, chrono::Utc::now()).await?;
            eprintln!(
                "kept {} snapshots; deleted {} snapshots, {} segments and {} staged runs; {} unreferenced segments and {} staged runs are younger than {grace}",
                r.kept_snapshots.len(),
                r.deleted_snapshots.len(),
                r.deleted_segments.len(),
                r.deleted_staged_runs.len(),
                r.young_segments.len(),
                r.young_staged_runs.len()
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HUBDEX_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // After logging (so a failed restart is logged), before any thread: freed memory goes
    // back to the system, and two arenas keep what the merges free from piling up
    // (docs/performance.md).
    hubdex_runtime::restart_with_fixed_environment(hubdex_formats::Arenas::Two);
    // After the restart: `--version` loads the runtime, whose telemetry must be off by then.
    let commit = option_env!("HUBDEX_GIT_COMMIT");
    if let Some(code) =
        hubdex_runtime::print_version_if_asked("hubdex-index", env!("CARGO_PKG_VERSION"), commit)
    {
        return code;
    }
    let cli: Cli = hubdex_runtime::parse_args();
    hubdex_runtime::run_to_exit(run(cli))
}
