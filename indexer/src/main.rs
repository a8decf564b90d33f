//! `hubdex-index`: the batch indexer's command line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use hubdex_formats::Device;
use hubdex_indexer::{BuildOptions, Config, build, default_store};

#[derive(Parser)]
#[command(name = "hubdex-index", version, about = "Build and publish hubdex snapshots")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Crawl SOURCEs, embed what changed and publish a snapshot.
    Build {
        /// owner/name of GitHub repositories, local git repositories, or directories searched
        /// for them (default: .).
        sources: Vec<PathBuf>,
        /// Store URL or directory (file://, memory://, s3://, gs://, az://).
        #[arg(long, env = "HUBDEX_STORE")]
        store: Option<String>,
        /// Model directory (model.onnx + tokenizer.json) or Hugging Face repo id.
        #[arg(long, env = "HUBDEX_MODEL_DIR")]
        model: Option<String>,
        /// Where to run the model.
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
        device: String,
        /// Glob of directories (relative to a SOURCE) not to search for repositories.
        #[arg(long)]
        exclude: Vec<String>,
        /// Overwrite LATEST on stores that cannot update it conditionally.
        #[arg(long)]
        allow_unsafe_latest: bool,
        /// GitHub API base URL (GitHub Enterprise: https://HOST/api/v3); token from $GITHUB_TOKEN.
        #[arg(long, env = "HUBDEX_GITHUB_API")]
        github_api: Option<String>,
        /// hubdex.toml: repositories, per-repository types and paths, store, model, API URL.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn default_model() -> String {
    hubdex_formats::cache_dir().join("models").join("all-MiniLM-L6-v2-int8").display().to_string()
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Build {
            sources,
            store,
            model,
            device,
            exclude,
            allow_unsafe_latest,
            github_api,
            config,
        } => {
            let config = match &config {
                Some(path) => Config::load(path)?,
                None => Config::default(),
            };
            let model = model.or(config.model.clone()).unwrap_or_else(default_model);
            let model_dir = hubdex_formats::resolve_model_dir(&model)
                .with_context(|| format!("model {model}"))?;
            let mut sources = sources;
            sources.extend(config.repos.iter().map(|r| PathBuf::from(&r.name)));
            if sources.is_empty() {
                sources.push(PathBuf::from("."));
            }
            let store = store.or(config.store.clone()).unwrap_or_else(default_store);
            let mut opts = BuildOptions::new(&store, model_dir, sources);
            opts.device = device.parse::<Device>().map_err(anyhow::Error::msg)?;
            opts.exclude = exclude;
            opts.allow_unsafe_latest = allow_unsafe_latest;
            opts.rules = config.rules()?;
            if let Some(api) = github_api.or(config.github_api.clone()) {
                opts.github_api = api;
            }
            let r = build(&opts).await?;
            let rows_per_s = |rows: u64, s: f64| if s > 0.0 { rows as f64 / s } else { 0.0 };
            eprintln!(
                "{} rows from {} repositories: embedded {}, reused {} unchanged vectors",
                r.rows, r.repos, r.embedded, r.reused
            );
            eprintln!(
                "segments: {} written, {} unchanged; snapshot {} bytes ({:.0} bytes/row)",
                r.segments_written,
                r.segments_unchanged,
                r.snapshot_bytes,
                if r.rows > 0 { r.snapshot_bytes as f64 / r.rows as f64 } else { 0.0 }
            );
            eprintln!(
                "time: embedding {:.2}s ({:.0} rows/s), the rest {:.2}s ({:.0} rows/s)",
                r.embed_seconds,
                rows_per_s(r.embedded, r.embed_seconds),
                r.other_seconds(),
                rows_per_s(r.rows, r.other_seconds())
            );
            if r.github_requests.0 > 0 {
                let items: Vec<String> =
                    r.github_items.iter().map(|(t, n)| format!("{n} {t}")).collect();
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
            println!("{}", r.snapshot);
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HUBDEX_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
