//! `hubdex`: serve, query and list snapshots.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use hubdex_formats::{DEFAULT_STORE, Store, default_model};
use hubdex_server::{
    AppState, Blend, Caller, HttpOptions, HubdexMcp, Mode, OAuth, OAuthConfig, RelatedRequest,
    StateSetup, TokenStore, TokensFile, WebhookConfig, call_tool_via, default_cache, load_eval,
    open_snapshot, related, related_text, render_table, run_eval, serve_http, tool_args,
};
use rmcp::ServiceExt as _;
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "hubdex",
    version,
    about = "Search a hubdex snapshot: MCP server and command line"
)]
struct Cli {
    /// Store URL or directory (file://, memory://, s3://, gs://, az://).
    #[arg(long, global = true, env = "HUBDEX_STORE")]
    store: Option<String>,
    /// Model directory (model.onnx + tokenizer.json) or Hugging Face repo id (default: the
    /// release archive's model beside this binary, else $HUBDEX_MODEL_DIR, else the cache's).
    #[arg(long, global = true)]
    model: Option<String>,
    /// Where verified segments are cached (default $HUBDEX_CACHE, else ~/.cache/hubdex).
    #[arg(long, global = true)]
    cache: Option<PathBuf>,
    /// Cross-encoder model directory (model.onnx + tokenizer.json, one logit per pair) for
    /// `rerank: true`; without one, rerank is not applied and answers say so.
    #[arg(long = "rerank-model", global = true, env = "HUBDEX_RERANK_MODEL")]
    rerank_model: Option<PathBuf>,
    /// Query-embedding sessions (each runs one query at a time and holds its own copy of the
    /// model, about 90 MiB): default one per four cores, at least one.
    #[arg(long = "embed-sessions", global = true, env = "HUBDEX_EMBED_SESSIONS")]
    embed_sessions: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

// Doc comments here are clap's --help text, shown as written: `<sha>` and bare URLs are
// meant for a terminal, not for rustdoc.
#[allow(rustdoc::invalid_html_tags, rustdoc::bare_urls)]
#[derive(Subcommand)]
enum Command {
    /// Search once and print the answer.
    Query {
        /// What to look for.
        text: String,
        /// Print the JSON answer the MCP search tool returns.
        #[arg(long)]
        json: bool,
        #[arg(long = "top-k", default_value_t = 10)]
        top_k: i64,
        /// Only rows of this type (repeatable).
        #[arg(long = "type")]
        types: Vec<String>,
        /// Only this repository (owner/name).
        #[arg(long)]
        repo: Option<String>,
        #[arg(long, default_value = "rrf")]
        fusion: String,
        /// Answer from exactly this snapshot.
        #[arg(long)]
        snapshot: Option<String>,
        /// Rerank the top candidates with the --rerank-model cross-encoder.
        #[arg(long)]
        rerank: bool,
    },
    /// The cross-references of an issue, PR, commit, release or file (the `related` tool):
    /// e.g. `hubdex related commit/1a2b3c4`, `hubdex related https://github.com/o/r/issues/12`.
    Related {
        /// A row id, an entity (issue/123, #123, commit/<sha>, release/<tag>, file/<path>) or a
        /// GitHub URL.
        id: String,
        /// owner/name, when the snapshot holds more than one repository.
        #[arg(long)]
        repo: Option<String>,
        /// Only these kinds (repeatable): closes, mentions, reverts, pull_request_of,
        /// shipped_in, changed_in.
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// out, in or both.
        #[arg(long, default_value = "both")]
        direction: String,
        #[arg(long, default_value_t = 1)]
        depth: i64,
        /// Edges listed per kind and direction.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// Answer from exactly this snapshot.
        #[arg(long)]
        snapshot: Option<String>,
        /// Print the JSON answer the MCP related tool returns.
        #[arg(long)]
        json: bool,
    },
    /// Measure retrieval quality on judged queries (JSON lines: {query, relevant, repo?}):
    /// recall@k, MRR@k, nDCG@10 and latency for sparse_only, dense_only, rrf (and rrf+rerank
    /// with --rerank-model).
    Eval {
        file: PathBuf,
        /// Cut-off of recall and MRR.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=50))]
        k: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also try these blends of the two rankings (rrf:K, wrrf:W, minmax:W; repeatable).
        #[arg(long)]
        blend: Vec<String>,
        /// Score BM25 this way in every mode: `exact` (what is served), `prune:KEEP:FRACTION:MIN_DF`
        /// or `rarest:KEEP:PER_HIT` (measured ways, not served; docs/performance.md).
        #[arg(long, default_value = "exact")]
        text_scoring: hubdex_formats::TextScoring,
    },
    /// Serve MCP over stdio or HTTP.
    Serve(Box<ServeArgs>),
    /// List the store's snapshots, newest last, marking the current and pinned ones.
    Snapshots,
    /// Pin a snapshot: gc keeps it (and every segment it needs) until it is unpinned.
    Pin { id: String },
    /// Unpin a snapshot.
    Unpin { id: String },
    /// Download a snapshot (an id, or `latest`) into DIR as a store of its own, verified.
    Pull { id: String, dir: PathBuf },
    /// Manage the scoped tokens of a tokens file (`serve --tokens-file`).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Ask a running server's /healthz and exit 0 when it answers 200 (the container image's
    /// healthcheck; also a probe for scripts and orchestrators).
    Health {
        /// The server's health URL.
        #[arg(long, default_value = "http://127.0.0.1:8080/healthz")]
        url: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3)]
        timeout: u64,
    },
}

/// `hubdex serve`'s flags.
// As for `Command`: the doc comments are --help text.
#[allow(rustdoc::invalid_html_tags, rustdoc::bare_urls)]
#[derive(clap::Args)]
struct ServeArgs {
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve MCP over HTTP at ADDR (default 127.0.0.1:8080; bind 0.0.0.0 only behind a proxy).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
    http: Option<SocketAddr>,
    /// File holding a bearer token that reads every repository (or set $HUBDEX_TOKEN).
    #[arg(long = "token-file")]
    token_file: Option<PathBuf>,
    /// Scoped tokens (TOML, managed with `hubdex token`): each reads only its repositories.
    /// Re-read when it changes, so a revoke needs no restart.
    #[arg(long = "tokens-file")]
    tokens_file: Option<PathBuf>,
    /// Accept OAuth access tokens (JWTs) of this issuer; hubdex.toml's [[oauth.grant]]
    /// maps their claims to repositories.
    #[arg(long = "oauth-issuer", requires = "oauth_audience")]
    oauth_issuer: Option<String>,
    /// The audience (aud) access tokens must be issued for: this server's resource URL.
    #[arg(long = "oauth-audience", requires = "oauth_issuer")]
    oauth_audience: Option<String>,
    /// The issuer's JWKS URL (default: discovered from the issuer's metadata).
    #[arg(long = "oauth-jwks-url", requires = "oauth_issuer")]
    oauth_jwks_url: Option<String>,
    /// Also accept access tokens whose JWT typ is this (repeatable; `none`: no typ). By
    /// default only RFC 9068's at+jwt is an access token; issuers that mark theirs `JWT`
    /// (Keycloak, Entra ID, Auth0 without the RFC 9068 profile) need `JWT` here.
    #[arg(long = "oauth-token-type", requires = "oauth_issuer")]
    oauth_token_types: Vec<String>,
    /// The hubdex.toml holding [[oauth.grant]] (default ./hubdex.toml).
    #[arg(long, default_value = "hubdex.toml")]
    config: PathBuf,
    /// This server's public base URL (https://hubdex.example.com), named in the OAuth
    /// protected resource metadata; default http://<Host header>.
    #[arg(long = "public-url")]
    public_url: Option<String>,
    /// Put each call's arguments (query text, ids, paths) in its audit line.
    #[arg(long = "audit-queries")]
    audit_queries: bool,
    /// After queueing a webhook delivery, send repository_dispatch (event `hubdex-delta`)
    /// to this owner/name so the index workflow starts now (token from $GITHUB_TOKEN).
    #[arg(long = "dispatch-repo")]
    dispatch_repo: Option<String>,
    /// GitHub API base URL for --dispatch-repo.
    #[arg(
        long = "github-api",
        env = "HUBDEX_GITHUB_API",
        default_value = "https://api.github.com"
    )]
    github_api: String,
    /// How often to check LATEST for a new snapshot (seconds).
    #[arg(long = "poll-interval", default_value_t = 30)]
    poll_interval: u64,
    /// File holding the GitHub webhook secret (or $HUBDEX_WEBHOOK_SECRET): enables
    /// POST /webhooks/github, which queues delta rebuilds.
    #[arg(long = "webhook-secret-file")]
    webhook_secret_file: Option<PathBuf>,
    /// Host header values to accept besides loopback (needed when serving a public name).
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Browser origins to accept (scheme://host:port).
    #[arg(long = "allowed-origin")]
    allowed_origins: Vec<String>,
    /// HTTP connections served at once; one more is answered 503 and closed. Keep it under the
    /// process's open-file limit (`ulimit -n`).
    #[arg(long = "max-connections", default_value_t = hubdex_server::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_connections: u32,
}

#[derive(Subcommand)]
enum TokenAction {
    /// Add a token and print it once (only its sha256 is stored).
    Add {
        /// The token's name, shown in audit lines and metrics.
        name: String,
        /// Repositories it may read: globs like acme/* or acme/widgets (repeatable; * for all).
        #[arg(long = "repos", required = true, num_args = 1..)]
        repos: Vec<String>,
        /// Row types it may read (repeatable; default all).
        #[arg(long = "types", num_args = 1..)]
        types: Vec<String>,
        /// When it stops working: a date (end of that day, UTC) or an RFC 3339 time.
        #[arg(long)]
        expires: Option<String>,
        #[arg(long = "tokens-file", env = "HUBDEX_TOKENS_FILE")]
        tokens_file: PathBuf,
    },
    /// List the tokens: name, repositories, types, expiry.
    List {
        #[arg(long = "tokens-file", env = "HUBDEX_TOKENS_FILE")]
        tokens_file: PathBuf,
    },
    /// Remove a token; a server re-reads the file on its next request.
    Revoke {
        name: String,
        #[arg(long = "tokens-file", env = "HUBDEX_TOKENS_FILE")]
        tokens_file: PathBuf,
    },
}

fn run_token(action: &TokenAction) -> anyhow::Result<()> {
    match action {
        TokenAction::Add { name, repos, types, expires, tokens_file } => {
            let mut file = TokensFile::load(tokens_file)?;
            let token =
                file.add(name, repos, types, expires.as_deref()).map_err(anyhow::Error::msg)?;
            file.save(tokens_file)?;
            eprintln!("added token {name:?} to {}; it is shown once, here:", tokens_file.display());
            println!("{token}");
            Ok(())
        }
        TokenAction::List { tokens_file } => {
            let file = TokensFile::load(tokens_file)?;
            if file.token.is_empty() {
                eprintln!("{} holds no token", tokens_file.display());
            }
            for t in &file.token {
                let types =
                    if t.types.is_empty() { "all types".to_string() } else { t.types.join(",") };
                let expires = t.expires.as_deref().unwrap_or("never");
                println!("{}\trepos {}\t{types}\texpires {expires}", t.name, t.repos.join(","));
            }
            Ok(())
        }
        TokenAction::Revoke { name, tokens_file } => {
            let mut file = TokensFile::load(tokens_file)?;
            if !file.revoke(name) {
                return Err(hubdex_server::TokensError::NoSuchToken {
                    path: tokens_file.clone(),
                    name: name.clone(),
                }
                .into());
            }
            file.save(tokens_file)?;
            eprintln!(
                "revoked {name:?}: a server re-reads {} on its next request",
                tokens_file.display()
            );
            Ok(())
        }
    }
}

/// A secret from a file (`flag`) or else an environment variable, trimmed; empty is an error.
fn read_secret(
    file: Option<&std::path::Path>,
    flag: &str,
    var: &str,
) -> anyhow::Result<Option<String>> {
    let secret = match file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading {flag} {}", p.display()))?
                .trim()
                .to_string(),
        ),
        None => std::env::var(var).ok().map(|t| t.trim().to_string()),
    };
    if secret.as_deref() == Some("") {
        anyhow::bail!("the secret is empty: put it in {flag} or ${var}");
    }
    Ok(secret)
}

/// What the state of a query or a server loads, from the global flags.
fn setup(cli: &Cli, audit_queries: bool) -> StateSetup {
    StateSetup {
        cache: cli.cache.clone().unwrap_or_else(default_cache),
        model: cli.model.clone().unwrap_or_else(default_model),
        embed_sessions: cli.embed_sessions,
        rerank_model: cli.rerank_model.clone(),
        audit_queries,
    }
}

async fn load_state(cli: &Cli, store: Store, audit_queries: bool) -> anyhow::Result<Arc<AppState>> {
    Ok(Arc::new(AppState::load(store, setup(cli, audit_queries)).await?))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Token { action } => return run_token(action),
        Command::Health { url, timeout } => return health(url, *timeout).await,
        _ => {}
    }
    let store_url = cli.store.clone().unwrap_or_else(|| DEFAULT_STORE.to_string());
    // A store that does not exist is an error here: the server never creates one. (An empty
    // name is no directory: opening it says so.)
    if !store_url.is_empty()
        && !store_url.contains("://")
        && !std::path::Path::new(&store_url).is_dir()
    {
        anyhow::bail!(
            "store {store_url} does not exist: build one with `hubdex-index build --store {store_url}`"
        );
    }
    let store = Store::open(&store_url)?;
    match &cli.command {
        // Both answered above, before a store is needed; here for the match to be whole.
        Command::Token { action } => run_token(action),
        Command::Health { url, timeout } => health(url, *timeout).await,
        Command::Snapshots => {
            let listing = store.listing().await?;
            if listing.is_empty() {
                anyhow::bail!("store {} holds no snapshot yet", store.url());
            }
            for s in listing {
                let marks: Vec<&str> = [(s.current, "current"), (s.pinned, "pinned")]
                    .into_iter()
                    .filter_map(|(on, m)| on.then_some(m))
                    .collect();
                let marks = if marks.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", marks.join(", "))
                };
                println!("{}{marks}", s.id);
            }
            Ok(())
        }
        Command::Pin { id } => {
            store.pin(id).await?;
            eprintln!("pinned {id}: gc keeps it until `hubdex unpin {id}`");
            Ok(())
        }
        Command::Unpin { id } => {
            if !store.unpin(id).await? {
                anyhow::bail!("snapshot {id} is not pinned");
            }
            eprintln!("unpinned {id}");
            Ok(())
        }
        Command::Pull { id, dir } => {
            let pulled = hubdex_server::pull_snapshot(&store, id, dir).await?;
            eprintln!(
                "pulled snapshot {pulled} into {}: `hubdex --store {} query ...` works offline",
                dir.display(),
                dir.display()
            );
            println!("{pulled}");
            Ok(())
        }
        Command::Eval { file, k, json, blend, text_scoring } => {
            let queries = load_eval(file)?;
            let mut modes = Mode::standard(cli.rerank_model.is_some());
            for m in &mut modes {
                m.text_scoring = *text_scoring;
            }
            for b in blend {
                let parsed = Blend::parse(b).map_err(anyhow::Error::msg)?;
                modes.push(Mode {
                    name: format!("rrf[{b}]"),
                    fusion: hubdex_server::Fusion::Rrf,
                    blend: parsed,
                    rerank: false,
                    text_scoring: *text_scoring,
                });
            }
            let state = load_state(&cli, store, false).await?;
            let k = *k as usize;
            let total = queries.len();
            let reports = tokio::task::spawn_blocking(move || {
                let snap = state.current.load_full();
                run_eval(
                    &snap,
                    &state.embedder,
                    state.reranker.as_deref(),
                    &queries,
                    k,
                    &modes,
                    |mode, i| {
                        if i == total {
                            eprintln!("{mode}: {total} queries");
                        }
                    },
                )
            })
            .await??;
            if *json {
                println!("{}", serde_json::to_string_pretty(&json!({"k": k, "modes": reports}))?);
            } else {
                print!("{}", render_table(&reports, k));
            }
            Ok(())
        }
        Command::Related { id, repo, kinds, direction, depth, limit, snapshot, json } => {
            let args = tool_args(json!({"id": id, "direction": direction, "depth": depth,
                "limit": limit, "kinds": kinds, "repo": repo}));
            // No model needed: related reads edges and stored rows only.
            let req = RelatedRequest::from_args(&args)?;
            let cache = cli.cache.clone().unwrap_or_else(default_cache);
            let snap = open_snapshot(&store, &cache, snapshot.as_deref()).await?;
            let answer = related(&snap, &req, None)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                print!("{}", related_text(&answer));
            }
            Ok(())
        }
        Command::Query { text, json, top_k, types, repo, fusion, snapshot, rerank } => {
            let state = load_state(&cli, store, false).await?;
            let args = tool_args(json!({"query": text, "top_k": top_k, "fusion": fusion,
                "rerank": rerank, "type": types, "repo": repo, "snapshot": snapshot}));
            let answer = call_tool_via(&state, &Caller::local(), "cli", "search", &args).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&answer.value)?);
            } else {
                print!("{}", answer.text);
            }
            Ok(())
        }
        Command::Serve(args) => serve(&cli, store, args).await,
    }
}

async fn serve(cli: &Cli, store: Store, args: &ServeArgs) -> anyhow::Result<()> {
    if args.stdio && (args.tokens_file.is_some() || args.oauth_issuer.is_some()) {
        anyhow::bail!(
            "--tokens-file and --oauth-issuer apply to --http; stdio serves the local user"
        );
    }
    // Checked before the model loads, so a bad file fails fast.
    let tokens = args.tokens_file.as_deref().map(TokenStore::open).transpose()?.map(Arc::new);
    let oauth = match (&args.oauth_issuer, &args.oauth_audience) {
        (Some(issuer), Some(audience)) => {
            Some(Arc::new(OAuth::new(OAuthConfig::from_config_file(
                issuer,
                audience,
                args.oauth_jwks_url.as_deref(),
                &args.oauth_token_types,
                &args.config,
            )?)?))
        }
        _ => None,
    };
    let state = load_state(cli, store, args.audit_queries).await?;
    if args.poll_interval > 0 {
        state.spawn_poller(std::time::Duration::from_secs(args.poll_interval));
    }
    if args.stdio {
        let service = HubdexMcp::new(state).serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        return Ok(());
    }
    let Some(addr) = args.http else { anyhow::bail!("serve needs --stdio or --http ADDR") };
    let secret = read_secret(
        args.webhook_secret_file.as_deref(),
        "--webhook-secret-file",
        "HUBDEX_WEBHOOK_SECRET",
    )?;
    let opts = HttpOptions {
        allowed_hosts: args.allowed_hosts.clone(),
        allowed_origins: args.allowed_origins.clone(),
        token: read_secret(args.token_file.as_deref(), "--token-file", "HUBDEX_TOKEN")?,
        tokens,
        oauth,
        public_url: args.public_url.clone(),
        max_connections: args.max_connections as usize,
        webhook: secret
            .map(|s| WebhookConfig::new(s, args.dispatch_repo.as_deref(), &args.github_api))
            .transpose()?,
    };
    serve_http(state, addr, &opts).await
}

/// `hubdex health`: GET `url`; Ok when it answers 200 within `timeout_secs`.
async fn health(url: &str, timeout_secs: u64) -> anyhow::Result<()> {
    hubdex_formats::install_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(timeout_secs))
        .build()
        .map_err(|e| anyhow::anyhow!("building the HTTP client: {e}"))?;
    let response = client.get(url).send().await.map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
    let status = response.status();
    anyhow::ensure!(status == reqwest::StatusCode::OK, "{url} answered {status}");
    println!("{url}: {status}");
    Ok(())
}

fn main() -> ExitCode {
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HUBDEX_LOG")
                .unwrap_or_else(|_| "warn,hubdex::audit=info".into()),
        )
        .with_writer(std::io::stderr);
    if std::env::var("HUBDEX_LOG_FORMAT").is_ok_and(|f| f == "json") {
        subscriber.json().init();
    } else {
        subscriber.init();
    }
    // After logging (so a failed restart is logged), before any thread: freed memory goes
    // back to the system (docs/performance.md).
    hubdex_formats::restart_with_fixed_environment(hubdex_formats::Arenas::Default);
    // After the restart: `--version` loads the runtime, whose telemetry must be off by then.
    let commit = option_env!("HUBDEX_GIT_COMMIT");
    if let Some(code) =
        hubdex_formats::print_version_if_asked("hubdex", env!("CARGO_PKG_VERSION"), commit)
    {
        return code;
    }
    let cli: Cli = hubdex_formats::parse_args();
    hubdex_formats::run_to_exit(run(cli))
}
