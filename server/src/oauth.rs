//! The server as an OAuth 2.1 resource server (MCP authorization, 2026-07-28): access tokens are
//! JWTs of one issuer, verified against the issuer's JWKS (fetched, cached, fetched again when a
//! token names an unknown key), with `exp`, `nbf`, `aud` and `iss` enforced and only asymmetric
//! algorithms accepted (`alg: none` and HMAC signed with a public key are refused). Claims map to
//! repository globs through `[[oauth.grant]]` in hubdex.toml; the protected resource metadata
//! (RFC 9728) tells clients where to get a token.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};

use hubdex_formats::glob_literal;

use crate::access::{AuthError, Caller, CallerKind, scope_of};

/// Algorithms an access token may be signed with: asymmetric ones only.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// A fetched JWKS is used this long before it is fetched again.
const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);

/// An unknown `kid` fetches the JWKS again, but not more often than this.
const JWKS_MIN_REFETCH: Duration = Duration::from_secs(1);

/// After failed fetches the wait before the next one doubles from [`JWKS_MIN_REFETCH`] up to
/// this: an issuer that is down is not asked once per token.
const JWKS_MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The longest claim value a grant takes, in bytes; a longer one grants nothing.
pub(crate) const MAX_CLAIM_VALUE_CHARS: usize = 256;

/// The most values of one list claim a grant takes; past them, the claim grants nothing.
pub(crate) const MAX_CLAIM_VALUES: usize = 64;

/// How many tokens' callers (their compiled scopes) are kept, by the token's sha256.
const CALLER_CACHE_TOKENS: usize = 1024;

/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

/// One `[[oauth.grant]]` of hubdex.toml: when the claim matches, these repositories.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClaimGrant {
    /// A claim of the access token (`sub`, `groups`, `repository_owner`, ...). A list claim
    /// matches when any element does.
    pub claim: String,
    /// The value the claim must have; absent: any value (and `{claim}` in `repos` is replaced
    /// by it).
    pub equals: Option<String>,
    /// Repository globs granted; `{claim}` stands for the claim's value, taken literally (every
    /// glob character in it escaped, backslash included; an empty value grants nothing), e.g.
    /// `repos = ["{repository_owner}/*"]`.
    pub repos: Vec<String>,
}

/// hubdex.toml's `[oauth]` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthSection {
    #[serde(default)]
    grant: Vec<ClaimGrant>,
}

/// Reads the `[[oauth.grant]]` list of a hubdex.toml (other sections are the indexer's).
pub fn load_grants(path: &Path) -> anyhow::Result<Vec<ClaimGrant>> {
    let mut doc = hubdex_runtime::read_config_file(path)?;
    let Some(section) = doc.remove("oauth") else { return Ok(Vec::new()) };
    let section: OAuthSection =
        section.try_into().map_err(|e| anyhow::anyhow!("{} [oauth]: {e}", path.display()))?;
    for g in &section.grant {
        if g.repos.is_empty() {
            anyhow::bail!(
                "{} [[oauth.grant]] on claim {:?}: repos is empty",
                path.display(),
                g.claim
            );
        }
        let probe: Vec<String> =
            g.repos.iter().map(|r| r.replace(&format!("{{{}}}", g.claim), "x")).collect();
        scope_of(&probe, &[]).map_err(|e| {
            anyhow::anyhow!("{} [[oauth.grant]] on claim {:?}: {e}", path.display(), g.claim)
        })?;
    }
    Ok(section.grant)
}

/// How the server checks access tokens.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The issuer (`iss`), e.g. `https://login.example.com/realms/acme`.
    pub issuer: String,
    /// The audience (`aud`) tokens must be issued for: this server.
    pub audience: String,
    /// Where the issuer's keys are; default: discovered from the issuer's metadata
    /// (`/.well-known/oauth-authorization-server`, then `/.well-known/openid-configuration`).
    pub jwks_url: Option<String>,
    /// Claims → repositories.
    pub grants: Vec<ClaimGrant>,
    /// JWT `typ` header values accepted besides RFC 9068's `at+jwt` (and
    /// `application/at+jwt`), compared ignoring ASCII case; `none` accepts a token without
    /// `typ`. For issuers that mark access tokens `JWT` (`--oauth-token-type JWT`).
    pub extra_token_types: Vec<String>,
}

/// The `typ` of an RFC 9068 access token.
const ACCESS_TOKEN_TYPES: [&str; 2] = ["at+jwt", "application/at+jwt"];

impl OAuthConfig {
    /// Whether a token with this `typ` header is an access token here: RFC 9068 §4 says a
    /// resource server refuses any other type, so an ID token (`typ: JWT`) of the same issuer
    /// is not taken for an access token unless the operator says its issuer marks them so.
    fn accepts_type(&self, typ: Option<&str>) -> bool {
        match typ {
            Some(t) => ACCESS_TOKEN_TYPES
                .into_iter()
                .chain(self.extra_token_types.iter().map(String::as_str))
                .any(|a| a.eq_ignore_ascii_case(t)),
            None => self.extra_token_types.iter().any(|a| a == "none"),
        }
    }
}

impl OAuthConfig {
    /// The configuration `serve --oauth-*` describes: tokens of `issuer` for `audience`, their
    /// claims mapped to repositories by the `[[oauth.grant]]` entries of `config_file`, which
    /// must hold at least one.
    pub fn from_config_file(
        issuer: &str,
        audience: &str,
        jwks_url: Option<&str>,
        extra_token_types: &[String],
        config_file: &Path,
    ) -> anyhow::Result<OAuthConfig> {
        let grants = if config_file.is_file() { load_grants(config_file)? } else { Vec::new() };
        if grants.is_empty() {
            anyhow::bail!(
                "--oauth-issuer needs [[oauth.grant]] entries in {} mapping claims to repositories (docs/deploy.md)",
                config_file.display()
            );
        }
        Ok(OAuthConfig {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            jwks_url: jwks_url.map(str::to_string),
            grants,
            extra_token_types: extra_token_types.to_vec(),
        })
    }
}

struct KeyCache {
    keys: HashMap<String, Jwk>,
    /// Keys without a `kid`, tried in turn.
    anonymous: Vec<Jwk>,
    /// When the keys were last fetched.
    fetched: Option<Instant>,
    jwks_url: Option<String>,
    /// When a fetch was last started, and how many have failed in a row since the last one
    /// that worked (with the last error): the next fetch waits [`KeyCache::refetch_gap`].
    attempted: Option<Instant>,
    failures: u32,
    last_error: Option<String>,
}

impl KeyCache {
    /// How long after the last attempt another fetch may start: [`JWKS_MIN_REFETCH`], doubled
    /// for each failure in a row, up to [`JWKS_MAX_BACKOFF`].
    fn refetch_gap(&self) -> Duration {
        let doubled = JWKS_MIN_REFETCH.saturating_mul(1u32 << self.failures.min(16));
        doubled.min(JWKS_MAX_BACKOFF)
    }

    /// Whether a token naming `kid` should fetch the keys again now.
    fn wants_fetch(&self, kid: Option<&str>) -> bool {
        let stale = self.fetched.is_none_or(|t| t.elapsed() > JWKS_MAX_AGE);
        let unknown = match kid {
            Some(k) => !self.keys.contains_key(k),
            None => self.anonymous.is_empty() && self.keys.len() != 1,
        };
        let may = self.attempted.is_none_or(|t| t.elapsed() >= self.refetch_gap());
        (stale || unknown) && may
    }

    fn install(&mut self, set: JwkSet) {
        self.keys.clear();
        self.anonymous.clear();
        for k in set.keys {
            match k.common.key_id.clone() {
                Some(kid) => {
                    self.keys.insert(kid, k);
                }
                None => self.anonymous.push(k),
            }
        }
        self.fetched = Some(Instant::now());
        self.failures = 0;
        self.last_error = None;
    }
}

/// Verifies access tokens; holds the issuer's keys.
pub struct OAuth {
    config: OAuthConfig,
    http: reqwest::Client,
    /// Held only to read or update, never across a fetch.
    cache: std::sync::Mutex<KeyCache>,
    /// Held by the one fetch in progress: a token that needs new keys waits for it only when
    /// no key was ever fetched; every other caller checks against the keys already known.
    fetching: tokio::sync::Mutex<()>,
    /// The callers of recently seen tokens by the token's sha256: a token's scope is compiled
    /// once, not on every request.
    callers: std::sync::Mutex<HashMap<String, Caller>>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth").field("issuer", &self.config.issuer).finish()
    }
}

impl OAuth {
    /// A verifier for `config`; keys are fetched on first use.
    pub fn new(config: OAuthConfig) -> anyhow::Result<OAuth> {
        hubdex_formats::install_tls_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| anyhow::anyhow!("building the HTTP client for the issuer: {e}"))?;
        Ok(OAuth {
            cache: std::sync::Mutex::new(KeyCache {
                keys: HashMap::new(),
                anonymous: Vec::new(),
                fetched: None,
                jwks_url: config.jwks_url.clone(),
                attempted: None,
                failures: 0,
                last_error: None,
            }),
            fetching: tokio::sync::Mutex::new(()),
            callers: std::sync::Mutex::new(HashMap::new()),
            config,
            http,
        })
    }

    /// The issuer tokens come from.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let resp = self.http.get(url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", resp.status()));
        }
        let bytes = resp.bytes().await.map_err(|e| format!("GET {url}: {e}"))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }

    /// The JWKS address from the issuer's metadata.
    async fn discover(&self) -> Result<String, String> {
        let base = self.config.issuer.trim_end_matches('/');
        let mut errors = Vec::new();
        for doc in ["oauth-authorization-server", "openid-configuration"] {
            let url = format!("{base}/.well-known/{doc}");
            match self.get_json(&url).await {
                Ok(meta) => {
                    let iss = meta["issuer"].as_str().unwrap_or("");
                    if iss.trim_end_matches('/') != base {
                        return Err(format!("{url} names issuer {iss:?}, not {base:?}"));
                    }
                    return meta["jwks_uri"]
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{url} has no jwks_uri"));
                }
                Err(e) => errors.push(e),
            }
        }
        Err(errors.join("; "))
    }

    fn key_cache(&self) -> std::sync::MutexGuard<'_, KeyCache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fetches the JWKS (discovering its address first when not known), holding no lock.
    async fn fetch_keys(&self, known_url: Option<String>) -> Result<(String, JwkSet), String> {
        let url = match known_url {
            Some(u) => u,
            None => self.discover().await?,
        };
        let set: JwkSet = serde_json::from_value(self.get_json(&url).await?)
            .map_err(|e| format!("{url} is not a JWKS: {e}"))?;
        Ok((url, set))
    }

    /// The keys a token with this `kid` may be checked against, fetching the JWKS when it is
    /// old or does not hold the `kid` — one fetch at a time, at most once a second, and after
    /// failures less often still ([`KeyCache::refetch_gap`]). A fetch in progress or failing
    /// delays no caller whose key is already known.
    async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Jwk>, String> {
        let (wants, have_keys) = {
            let c = self.key_cache();
            (c.wants_fetch(kid), c.fetched.is_some())
        };
        if wants {
            let guard = if have_keys {
                self.fetching.try_lock().ok()
            } else {
                Some(self.fetching.lock().await)
            };
            if let Some(_fetching) = guard {
                // Another fetch may have finished while this one waited for its turn.
                let url = {
                    let mut c = self.key_cache();
                    c.wants_fetch(kid).then(|| {
                        c.attempted = Some(Instant::now());
                        c.jwks_url.clone()
                    })
                };
                if let Some(url) = url {
                    let fetched = self.fetch_keys(url).await;
                    let mut c = self.key_cache();
                    match fetched {
                        Ok((url, set)) => {
                            c.jwks_url = Some(url.clone());
                            c.install(set);
                            tracing::info!(jwks = %url, keys = c.keys.len() + c.anonymous.len(), "issuer keys fetched");
                        }
                        Err(e) => {
                            c.failures = c.failures.saturating_add(1);
                            tracing::warn!(issuer = %self.config.issuer, error = %e, failures = c.failures, retry_in_s = c.refetch_gap().as_secs(), "fetching the issuer's keys failed");
                            c.last_error = Some(e);
                        }
                    }
                }
            }
        }
        let c = self.key_cache();
        if c.fetched.is_none() {
            let why = c.last_error.clone().unwrap_or_else(|| "no fetch has finished yet".into());
            return Err(format!("the issuer's keys cannot be fetched: {why}"));
        }
        Ok(match kid {
            Some(k) => c.keys.get(k).cloned().into_iter().collect(),
            None if !c.anonymous.is_empty() => c.anonymous.clone(),
            None => c.keys.values().cloned().collect(),
        })
    }

    /// Verifies an access token and maps its claims to a caller.
    pub async fn authenticate(&self, token: &str) -> Result<Caller, AuthError> {
        let jwt = |m: String| AuthError::Jwt(m);
        // The header is read before any check only to pick the key; the algorithm it names must
        // be an asymmetric one and match the key's type.
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| jwt(format!("not a signed JWT ({e})")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(jwt(format!("algorithm {:?} is not accepted", header.alg)));
        }
        if !self.config.accepts_type(header.typ.as_deref()) {
            return Err(jwt(format!(
                "its typ {:?} is not an access token's (at+jwt, RFC 9068; see --oauth-token-type)",
                header.typ.as_deref().unwrap_or("none")
            )));
        }
        let keys = self.keys_for(header.kid.as_deref()).await.map_err(jwt)?;
        if keys.is_empty() {
            return Err(jwt(match &header.kid {
                Some(k) => format!("the issuer has no key {k:?}"),
                None => "the token names no key (kid) and the issuer has several".into(),
            }));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        let mut last = String::new();
        for jwk in keys {
            if !key_fits(&jwk, header.alg) {
                last = format!("key {:?} is not a {:?} key", jwk.common.key_id, header.alg);
                continue;
            }
            let key = DecodingKey::from_jwk(&jwk).map_err(|e| jwt(format!("issuer key: {e}")))?;
            match jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation) {
                Ok(data) => return self.caller_of(token, data.claims).await,
                Err(e) => last = describe(&e),
            }
        }
        Err(jwt(last))
    }

    /// The caller a verified token stands for: kept by the token's sha256, so its scope is
    /// compiled once per token, on a blocking thread rather than the runtime's.
    async fn caller_of(
        &self,
        token: &str,
        claims: serde_json::Map<String, Value>,
    ) -> Result<Caller, AuthError> {
        let key = hubdex_formats::sha256_hex(token.as_bytes());
        let cached = self
            .callers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(caller) = cached {
            return Ok(caller);
        }
        let grants = self.config.grants.clone();
        let caller = tokio::task::spawn_blocking(move || caller_from_claims(&grants, &claims))
            .await
            .map_err(|e| AuthError::Jwt(format!("mapping its claims failed: {e}")))??;
        let mut callers = self.callers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if callers.len() >= CALLER_CACHE_TOKENS {
            callers.clear();
        }
        callers.insert(key, caller.clone());
        Ok(caller)
    }
}

/// The values of claim `name` a grant may use: a string, number or boolean, or a list of
/// them. A value longer than [`MAX_CLAIM_VALUE_CHARS`] bytes or holding a control character
/// is dropped, and a list of more than [`MAX_CLAIM_VALUES`] grants nothing: a claim is the
/// issuer's data, and a huge one must not become a huge pattern.
fn claim_values(name: &str, claim: Option<&Value>) -> Vec<String> {
    let values: Vec<String> = match claim {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.len() > MAX_CLAIM_VALUES => {
            tracing::warn!(
                claim = name,
                values = a.len(),
                max = MAX_CLAIM_VALUES,
                "claim has too many values: it grants nothing"
            );
            return Vec::new();
        }
        Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => vec![v.to_string()],
        _ => Vec::new(),
    };
    values
        .into_iter()
        .filter(|v| {
            let ok = v.len() <= MAX_CLAIM_VALUE_CHARS && !v.chars().any(char::is_control);
            if !ok {
                tracing::warn!(
                    claim = name,
                    bytes = v.len(),
                    "claim value is too long or holds a control character: it grants nothing"
                );
            }
            ok
        })
        .collect()
}

/// The caller verified claims stand for: each grant whose claim matches adds its repository
/// globs, `{claim}` replaced by the value taken literally.
fn caller_from_claims(
    grants: &[ClaimGrant],
    claims: &serde_json::Map<String, Value>,
) -> Result<Caller, AuthError> {
    let mut patterns = Vec::new();
    for g in grants {
        // An empty value would turn `{team}*` into `*`: it grants nothing.
        for v in claim_values(&g.claim, claims.get(&g.claim)).into_iter().filter(|v| !v.is_empty())
        {
            if g.equals.as_ref().is_some_and(|e| e != &v) {
                continue;
            }
            let placeholder = format!("{{{}}}", g.claim);
            patterns.extend(g.repos.iter().map(|r| r.replace(&placeholder, &glob_literal(&v))));
        }
    }
    if patterns.is_empty() {
        return Err(AuthError::NoGrant);
    }
    patterns.sort();
    patterns.dedup();
    let scope = scope_of(&patterns, &[]).map_err(AuthError::Jwt)?;
    let name = ["sub", "client_id", "azp"]
        .iter()
        .find_map(|c| claims.get(*c).and_then(Value::as_str))
        .unwrap_or("unknown")
        .chars()
        .take(MAX_CLAIM_VALUE_CHARS)
        .collect();
    Ok(Caller { name, kind: CallerKind::OAuth, scope })
}

/// Whether a JWK is of the type `alg` signs with (an HMAC or unknown key never is).
fn key_fits(jwk: &Jwk, alg: Algorithm) -> bool {
    if let Some(ka) = jwk.common.key_algorithm
        && Algorithm::try_from(ka).ok() != Some(alg)
    {
        return false;
    }
    matches!(
        (&jwk.algorithm, alg),
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ) | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256 | Algorithm::ES384)
            | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
    )
}

fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "it has expired".into(),
        K::ImmatureSignature => "it is not valid yet (nbf)".into(),
        K::InvalidAudience => "it is not issued for this server (aud)".into(),
        K::InvalidIssuer => "it is not from the configured issuer (iss)".into(),
        K::InvalidSignature => "its signature does not verify".into(),
        K::MissingRequiredClaim(c) => format!("it has no {c} claim"),
        other => format!("{other:?}"),
    }
}

/// The protected resource metadata (RFC 9728) of the MCP endpoint `resource`. It does not list
/// `resource_signing_alg_values_supported`: that field names the algorithms the resource signs
/// its own responses with, and hubdex signs none.
pub fn resource_metadata(resource: &str, issuer: &str) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "hubdex",
        "resource_documentation": "https://github.com/hubdex/hubdex/blob/main/docs/deploy.md",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_load_from_hubdex_toml_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hubdex.toml");
        std::fs::write(
            &path,
            "store = 'x'\n[[repos]]\nname='a/b'\n[[oauth.grant]]\nclaim='groups'\nequals='search'\nrepos=['acme/search*']\n\
             [[oauth.grant]]\nclaim='repository_owner'\nrepos=['{repository_owner}/*']\n",
        )
        .unwrap();
        let g = load_grants(&path).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].repos, ["{repository_owner}/*"]);
        std::fs::write(&path, "[[oauth.grant]]\nclaim='sub'\nrepos=['a/[']\n").unwrap();
        let err = load_grants(&path).unwrap_err().to_string();
        assert!(err.contains("on claim \"sub\"") && err.contains("not a valid glob"), "{err}");
        std::fs::write(&path, "[[oauth.grant]]\nclaim='sub'\nrepo=['a/*']\n").unwrap();
        let err = load_grants(&path).unwrap_err().to_string();
        assert!(err.contains("unknown field `repo`"), "{err}");
    }

    #[test]
    fn claims_map_to_repositories() {
        let grants = vec![
            ClaimGrant {
                claim: "groups".into(),
                equals: Some("search".into()),
                repos: vec!["acme/search".into()],
            },
            ClaimGrant {
                claim: "repository_owner".into(),
                equals: None,
                repos: vec!["{repository_owner}/*".into()],
            },
        ];
        let o = OAuth::new(OAuthConfig {
            issuer: "i".into(),
            audience: "a".into(),
            jwks_url: None,
            grants,
            extra_token_types: Vec::new(),
        })
        .unwrap();
        let claims = |v: Value| v.as_object().unwrap().clone();
        let c = caller_from_claims(
            &o.config.grants,
            &claims(json!({"sub": "ada", "groups": ["x", "search"]})),
        )
        .unwrap();
        assert_eq!(c.name, "ada");
        let s = c.scope.unwrap();
        assert!(s.allows_repo("acme/search") && !s.allows_repo("acme/other"));
        let c = caller_from_claims(
            &o.config.grants,
            &claims(json!({"sub": "ci", "repository_owner": "octo*"})),
        )
        .unwrap();
        let s = c.scope.unwrap();
        assert!(
            s.allows_repo("octo*/x") && !s.allows_repo("octocat/x"),
            "claim values are escaped"
        );
        assert_eq!(
            caller_from_claims(&o.config.grants, &claims(json!({"sub": "eve"}))).unwrap_err(),
            AuthError::NoGrant
        );
    }

    #[test]
    fn only_access_token_types_are_accepted_unless_the_operator_adds_one() {
        let mut config = OAuthConfig {
            issuer: "i".into(),
            audience: "a".into(),
            jwks_url: None,
            grants: Vec::new(),
            extra_token_types: Vec::new(),
        };
        for typ in [Some("at+jwt"), Some("AT+JWT"), Some("application/at+jwt")] {
            assert!(config.accepts_type(typ), "{typ:?}");
        }
        for typ in [Some("JWT"), Some("id+jwt"), Some(""), None] {
            assert!(!config.accepts_type(typ), "{typ:?}");
        }
        config.extra_token_types = vec!["JWT".into(), "none".into()];
        assert!(config.accepts_type(Some("jwt")) && config.accepts_type(None));
        assert!(!config.accepts_type(Some("id+jwt")));
    }

    /// Regression: `globset::escape` left a backslash alone, so a `team` claim of `acme\` or
    /// `\a\c\m\e` read `acme/*`.
    #[test]
    fn a_claim_value_matches_nothing_but_itself() {
        let o = OAuth::new(OAuthConfig {
            issuer: "i".into(),
            audience: "a".into(),
            jwks_url: None,
            grants: vec![ClaimGrant {
                claim: "team".into(),
                equals: None,
                repos: vec!["{team}/*".into(), "shared/{team}-*".into()],
            }],
            extra_token_types: Vec::new(),
        })
        .unwrap();
        let repos = [
            "acme/widgets",
            "acme/secret",
            "shared/acme-notes",
            "stripe/api",
            "kube/x",
            "a/b",
            "ab/c",
            "x/y",
        ];
        let values = [
            "acme\\",
            "ac\\me",
            "\\a\\c\\m\\e",
            "*",
            "a*",
            "?cme",
            "????",
            "[a]cme",
            "[!x]cme",
            "{acme,stripe}",
            "ac[m]e",
            "**",
            "acme/*",
            "\u{17f}tripe",
            "\u{212a}ube",
            "\u{ff41}cme",
        ];
        for v in values {
            let c = caller_from_claims(
                &o.config.grants,
                json!({"sub": "eve", "team": v}).as_object().unwrap(),
            )
            .unwrap();
            let scope = c.scope.expect("a claim grant is scoped");
            for r in repos {
                assert!(!scope.allows_repo(r), "team claim {v:?} read {r}");
            }
            assert!(scope.allows_repo(&format!("{v}/own")), "team claim {v:?} reads its own");
        }
        let empty = caller_from_claims(
            &o.config.grants,
            json!({"sub": "eve", "team": ""}).as_object().unwrap(),
        );
        assert_eq!(empty.unwrap_err(), AuthError::NoGrant, "an empty claim grants nothing");
    }
}
