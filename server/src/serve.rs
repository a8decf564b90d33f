//! `hubdex serve`: its flags, and how they become a running server (credentials checked before
//! the model loads, then stdio or HTTP); the store policy every command shares; `hubdex health`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use hubdex_formats::{DEFAULT_STORE, Store};
use rmcp::ServiceExt as _;

use crate::{
    AppState, HttpOptions, HubdexMcp, OAuth, OAuthConfig, StateSetup, TokenStore, WebhookConfig,
    serve_http,
};

/// `hubdex serve`'s flags.
// As for `Command`: the doc comments are --help text.
#[allow(rustdoc::invalid_html_tags, rustdoc::bare_urls)]
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Serve MCP over stdin and stdout, to the local user.
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve MCP over HTTP at ADDR (default 127.0.0.1:8080; bind 0.0.0.0 only behind a proxy).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8080")]
    pub http: Option<SocketAddr>,
    /// File holding a bearer token that reads every repository (or set $HUBDEX_TOKEN).
    #[arg(long = "token-file")]
    pub token_file: Option<PathBuf>,
    /// Scoped tokens (TOML, managed with `hubdex token`): each reads only its repositories.
    /// Re-read when it changes, so a revoke needs no restart.
    #[arg(long = "tokens-file")]
    pub tokens_file: Option<PathBuf>,
    /// Accept OAuth access tokens (JWTs) of this issuer; hubdex.toml's [[oauth.grant]]
    /// maps their claims to repositories.
    #[arg(long = "oauth-issuer", requires = "oauth_audience")]
    pub oauth_issuer: Option<String>,
    /// The audience (aud) access tokens must be issued for: this server's resource URL.
    #[arg(long = "oauth-audience", requires = "oauth_issuer")]
    pub oauth_audience: Option<String>,
    /// The issuer's JWKS URL (default: discovered from the issuer's metadata).
    #[arg(long = "oauth-jwks-url", requires = "oauth_issuer")]
    pub oauth_jwks_url: Option<String>,
    /// Also accept access tokens whose JWT typ is this (repeatable; `none`: no typ). By
    /// default only RFC 9068's at+jwt is an access token; issuers that mark theirs `JWT`
    /// (Keycloak, Entra ID, Auth0 without the RFC 9068 profile) need `JWT` here.
    #[arg(long = "oauth-token-type", requires = "oauth_issuer")]
    pub oauth_token_types: Vec<String>,
    /// The hubdex.toml holding [[oauth.grant]] (default ./hubdex.toml).
    #[arg(long, default_value = "hubdex.toml")]
    pub config: PathBuf,
    /// This server's public base URL (https://hubdex.example.com), named in the OAuth
    /// protected resource metadata; default http://<Host header>.
    #[arg(long = "public-url")]
    pub public_url: Option<String>,
    /// Put each call's arguments (query text, ids, paths) in its audit line.
    #[arg(long = "audit-queries")]
    pub audit_queries: bool,
    /// After queueing a webhook delivery, send repository_dispatch (event `hubdex-delta`)
    /// to this owner/name so the index workflow starts now (token from $GITHUB_TOKEN).
    #[arg(long = "dispatch-repo")]
    pub dispatch_repo: Option<String>,
    /// GitHub API base URL for --dispatch-repo.
    #[arg(
        long = "github-api",
        env = "HUBDEX_GITHUB_API",
        default_value = "https://api.github.com"
    )]
    pub github_api: String,
    /// How often to check LATEST for a new snapshot (seconds).
    #[arg(long = "poll-interval", default_value_t = 30)]
    pub poll_interval: u64,
    /// File holding the GitHub webhook secret (or $HUBDEX_WEBHOOK_SECRET): enables
    /// POST /webhooks/github, which queues delta rebuilds.
    #[arg(long = "webhook-secret-file")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Host header values to accept besides loopback (needed when serving a public name).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins to accept (scheme://host:port).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// HTTP connections served at once; one more is answered 503 and closed. Keep it under the
    /// process's open-file limit (`ulimit -n`).
    #[arg(long = "max-connections", default_value_t = crate::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
}

/// Opens the store at `url` (default [`DEFAULT_STORE`]) for reading. A local store that does
/// not exist is an error naming how to make one: the server never creates a store. (An empty
/// name is no directory: opening it says so.)
pub fn open_store(url: Option<&str>) -> anyhow::Result<Store> {
    let url = url.unwrap_or(DEFAULT_STORE);
    if !url.is_empty() && !url.contains("://") && !Path::new(url).is_dir() {
        anyhow::bail!(
            "store {url} does not exist: build one with `hubdex-index build --store {url}`"
        );
    }
    Ok(Store::open(url)?)
}

/// Serves `store` as `args` say until the transport closes: stdio for the local user, or HTTP
/// with the credentials, webhook and limits configured.
pub async fn serve(store: Store, setup: StateSetup, args: &ServeArgs) -> anyhow::Result<()> {
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
    let state = Arc::new(AppState::load(store, setup).await?);
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

/// A secret from a file (`flag`) or else an environment variable, trimmed; empty is an error.
fn read_secret(file: Option<&Path>, flag: &str, var: &str) -> anyhow::Result<Option<String>> {
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

/// `hubdex health`: GET `url`; its status line when it answers 200 within `timeout_secs`.
pub async fn health(url: &str, timeout_secs: u64) -> anyhow::Result<String> {
    hubdex_formats::install_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(timeout_secs))
        .build()
        .map_err(|e| anyhow::anyhow!("building the HTTP client: {e}"))?;
    let response = client.get(url).send().await.map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
    let status = response.status();
    anyhow::ensure!(status == reqwest::StatusCode::OK, "{url} answered {status}");
    Ok(format!("{url}: {status}"))
}
