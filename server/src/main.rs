//! `hubdex`: serve, query and list snapshots.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use hubdex_runtime::default_model;
use hubdex_server::{
    AppState, Caller, GrepRequest, Mode, RelatedRequest, ServeArgs, StateSetup, SymbolsRequest,
    TokensFile, Within, call_tool_via, default_cache, eval_current, grep, grep_history, grep_text,
    health, history_text, load_eval, open_snapshot, open_store, related, related_text,
    render_table, serve, symbols, symbols_text, tool_args,
};
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
    /// Every line a regex matches in the indexed files (the `grep` tool), as ripgrep finds
    /// them: e.g. `hubdex grep 'fn cut_stream'`, `hubdex grep -w unsafe --glob '**/*.rs'`; with
    /// `--in history`, the commits whose diffs add or remove a matching line, as `git log -G`:
    /// `hubdex grep --in history --order oldest 'fn cut_stream'` names the commit that
    /// introduced it.
    Grep {
        /// A regular expression (Rust regex syntax), matched line by line.
        pattern: String,
        /// Match the pattern as literal text.
        #[arg(short = 'F', long = "fixed-strings")]
        fixed_strings: bool,
        /// smart (insensitive unless the pattern has an upper-case letter), sensitive or
        /// insensitive.
        #[arg(long, default_value = "smart")]
        case: String,
        /// Only matches bounded by non-word characters.
        #[arg(short = 'w', long)]
        word: bool,
        /// Only this repository (owner/name).
        #[arg(long)]
        repo: Option<String>,
        /// Only paths starting with this.
        #[arg(long = "path-prefix")]
        path_prefix: Option<String>,
        /// Only paths matching this glob.
        #[arg(long)]
        glob: Option<String>,
        /// Only files of this language.
        #[arg(long)]
        language: Option<String>,
        /// Leave out vendored and generated files.
        #[arg(long = "skip-generated")]
        skip_generated: bool,
        /// Lines of context before and after each match (files only).
        #[arg(short = 'C', long)]
        context: Option<i64>,
        /// files (at the indexed commit) or history (every line each commit added or removed).
        #[arg(long = "in", default_value = "files")]
        within: String,
        /// History only: newest (the default) or oldest first.
        #[arg(long)]
        order: Option<String>,
        /// Matching lines per page (commits in the history): 50 (20 in the history) by default.
        #[arg(long)]
        limit: Option<i64>,
        /// The cursor of the previous page.
        #[arg(long)]
        cursor: Option<String>,
        /// Answer from exactly this snapshot.
        #[arg(long)]
        snapshot: Option<String>,
        /// Print the JSON answer the grep tool returns.
        #[arg(long)]
        json: bool,
    },
    /// Where a name is defined (the `symbols` tool): e.g. `hubdex symbols MemoryBudget`,
    /// `hubdex symbols parse --match prefix --kind function --references`.
    Symbols {
        /// The name.
        name: String,
        /// exact (default), prefix or substring.
        #[arg(long = "match", default_value = "exact")]
        how: String,
        /// Only definitions of this kind (repeatable): function, method, struct, class, enum,
        /// union, trait, interface, type, const, module, macro.
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Only files of this language.
        #[arg(long)]
        language: Option<String>,
        /// Only this repository (owner/name).
        #[arg(long)]
        repo: Option<String>,
        /// Only paths starting with this.
        #[arg(long = "path-prefix")]
        path_prefix: Option<String>,
        /// Also list the lines naming it, by file.
        #[arg(long)]
        references: bool,
        /// Definitions listed at most.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Answer from exactly this snapshot.
        #[arg(long)]
        snapshot: Option<String>,
        /// Print the JSON answer the symbols tool returns.
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
            let token = TokensFile::add_to(tokens_file, name, repos, types, expires.as_deref())?;
            eprintln!("added token {name:?} to {}; it is shown once, here:", tokens_file.display());
            println!("{token}");
        }
        TokenAction::List { tokens_file } => {
            let lines = TokensFile::load(tokens_file)?.lines();
            if lines.is_empty() {
                eprintln!("{} holds no token", tokens_file.display());
            }
            lines.iter().for_each(|line| println!("{line}"));
        }
        TokenAction::Revoke { name, tokens_file } => {
            TokensFile::revoke_in(tokens_file, name)?;
            let path = tokens_file.display();
            eprintln!("revoked {name:?}: a server re-reads {path} on its next request");
        }
    }
    Ok(())
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

async fn run(cli: Cli) -> anyhow::Result<()> {
    let store = || open_store(cli.store.as_deref());
    // The snapshot `id` (default the newest) through the local cache, for the commands that
    // answer without a model.
    let snapshot_of = async |id: Option<&str>| -> anyhow::Result<_> {
        let cache = cli.cache.clone().unwrap_or_else(default_cache);
        Ok(open_snapshot(&store()?, &cache, id).await?)
    };
    match &cli.command {
        Command::Token { action } => run_token(action),
        Command::Health { url, timeout } => {
            println!("{}", health(url, *timeout).await?);
            Ok(())
        }
        Command::Snapshots => {
            let store = store()?;
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
            store()?.pin(id).await?;
            eprintln!("pinned {id}: gc keeps it until `hubdex unpin {id}`");
            Ok(())
        }
        Command::Unpin { id } => {
            if !store()?.unpin(id).await? {
                anyhow::bail!("snapshot {id} is not pinned");
            }
            eprintln!("unpinned {id}");
            Ok(())
        }
        Command::Pull { id, dir } => {
            let pulled = hubdex_server::pull_snapshot(&store()?, id, dir).await?;
            let dir = dir.display();
            eprintln!(
                "pulled snapshot {pulled} into {dir}: `hubdex --store {dir} query ...` works offline"
            );
            println!("{pulled}");
            Ok(())
        }
        Command::Eval { file, k, json, blend } => {
            let queries = load_eval(file)?;
            let modes = Mode::with_blends(cli.rerank_model.is_some(), blend)?;
            let state = Arc::new(AppState::load(store()?, setup(&cli, false)).await?);
            let k = *k as usize;
            let reports = eval_current(state, queries, k, modes).await?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&json!({"k": k, "modes": reports}))?);
            } else {
                print!("{}", render_table(&reports, k));
            }
            Ok(())
        }
        Command::Grep {
            pattern,
            fixed_strings,
            case,
            word,
            repo,
            path_prefix,
            glob,
            language,
            skip_generated,
            context,
            within,
            order,
            limit,
            cursor,
            snapshot,
            json,
        } => {
            let args = tool_args(json!({"pattern": pattern, "fixed_strings": fixed_strings,
                "case": case, "word": word, "repo": repo, "path_prefix": path_prefix,
                "files_glob": glob, "language": language, "skip_generated": skip_generated,
                "context": context, "in": within, "order": order, "limit": limit,
                "cursor": cursor, "snapshot": snapshot}));
            // No model needed: grep reads the texts and their trigram index.
            let req = GrepRequest::from_args(&args)?;
            let snap = snapshot_of(req.snapshot.as_deref()).await?;
            match req.within {
                Within::History => {
                    print_answer(*json, &grep_history(&snap, &req, None)?, history_text)
                }
                Within::Files => print_answer(*json, &grep(&snap, &req, None)?, grep_text),
            }
        }
        Command::Symbols {
            name,
            how,
            kinds,
            language,
            repo,
            path_prefix,
            references,
            limit,
            snapshot,
            json,
        } => {
            let args = tool_args(json!({"name": name, "match": how, "kind": kinds,
                "language": language, "repo": repo, "path_prefix": path_prefix,
                "references": references, "limit": limit, "snapshot": snapshot}));
            // No model needed: symbols reads the symbol tables and, for references, grep's.
            let req = SymbolsRequest::from_args(&args)?;
            let snap = snapshot_of(req.snapshot.as_deref()).await?;
            print_answer(*json, &symbols(&snap, &req, None)?, symbols_text)
        }
        Command::Related { id, repo, kinds, direction, depth, limit, snapshot, json } => {
            let args = tool_args(json!({"id": id, "direction": direction, "depth": depth,
                "limit": limit, "kinds": kinds, "repo": repo}));
            // No model needed: related reads edges and stored rows only.
            let req = RelatedRequest::from_args(&args)?;
            let snap = snapshot_of(snapshot.as_deref()).await?;
            print_answer(*json, &related(&snap, &req, None)?, related_text)
        }
        Command::Query { text, json, top_k, types, repo, fusion, snapshot, rerank } => {
            let state = Arc::new(AppState::load(store()?, setup(&cli, false)).await?);
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
        Command::Serve(args) => serve(store()?, setup(&cli, args.audit_queries), args).await,
    }
}

/// Prints a tool's answer: its JSON object (`json`), or its text.
fn print_answer<T: serde::Serialize>(
    json: bool,
    answer: &T,
    text: fn(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(answer)?);
    } else {
        print!("{}", text(answer));
    }
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
    hubdex_runtime::restart_with_fixed_environment(hubdex_formats::Arenas::Default);
    // After the restart: `--version` loads the runtime, whose telemetry must be off by then.
    let commit = option_env!("HUBDEX_GIT_COMMIT");
    if let Some(code) =
        hubdex_runtime::print_version_if_asked("hubdex", env!("CARGO_PKG_VERSION"), commit)
    {
        return code;
    }
    let cli: Cli = hubdex_runtime::parse_args();
    hubdex_runtime::run_to_exit(run(cli))
}
