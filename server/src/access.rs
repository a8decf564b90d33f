//! Who is calling and what they may read.
//!
//! A [`Caller`] comes with every tool call: the local operator (stdio, the command line), the
//! holder of the single `--token-file` token (every repository), a token from a tokens file
//! ([`TokensFile`]: per token a name, the sha256 of the token, repository globs, row types and an
//! expiry), or an OAuth access token (`oauth`). Its [`Scope`] travels into every tool as an
//! index filter; `None` means every repository.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use chrono::{DateTime, NaiveDate, Utc};
use hubdex_formats::{RowType, Scope, sha256_hex};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerKind {
    /// The process's own user: stdio and the command line.
    Local,
    /// No authentication is configured: the HTTP server is open to whoever reaches it.
    Anonymous,
    /// The single `--token-file` / `$HUBDEX_TOKEN` token.
    Token,
    /// A token of the tokens file.
    ScopedToken,
    /// An OAuth access token (a JWT of the configured issuer).
    OAuth,
}

impl CallerKind {
    /// The name audit lines give it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerKind::Local => "local",
            CallerKind::Anonymous => "anonymous",
            CallerKind::Token => "token",
            CallerKind::ScopedToken => "scoped_token",
            CallerKind::OAuth => "oauth",
        }
    }
}

/// The caller of a tool: a name for logs and metrics (never the token) and what it may read.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name, the JWT's subject, or `local` / `anonymous` / `token`.
    pub name: String,
    /// How it authenticated.
    pub kind: CallerKind,
    /// What the caller may read; `None`: everything the snapshot holds.
    pub scope: Option<Scope>,
}

impl Caller {
    /// The local operator: every repository.
    pub fn local() -> Caller {
        Caller { name: "local".into(), kind: CallerKind::Local, scope: None }
    }

    /// Whether the caller may read every repository (and so the server-wide metrics).
    pub fn is_unscoped(&self) -> bool {
        self.scope.is_none()
    }

    /// The label metrics carry: the token's name; `oauth` for every OAuth caller (subjects are
    /// unbounded, and audit lines name them).
    pub fn metrics_label(&self) -> &str {
        match self.kind {
            CallerKind::OAuth => "oauth",
            _ => &self.name,
        }
    }
}

/// The scope of repository globs and row types, or `None` when it allows everything (`*` and
/// no type).
pub(crate) fn scope_of(patterns: &[String], types: &[RowType]) -> Result<Option<Scope>, String> {
    if types.is_empty() && patterns.iter().any(|p| p == "*" || p == "**" || p == "*/*") {
        return Ok(None);
    }
    Scope::new(patterns, types).map(Some).map_err(|e| e.to_string())
}

/// One token of a tokens file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// Shown in audit lines and metrics; unique in the file.
    pub name: String,
    /// The hex sha256 of the token; the token itself is never stored.
    pub sha256: String,
    /// Repository globs (`acme/*`, `acme/widgets`, `*`).
    pub repos: Vec<String>,
    /// Row types the token may read; empty or absent: every type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// RFC 3339 time or date after which the token is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// When `hubdex token add` made it (RFC 3339).
    pub created: Option<String>,
}

/// A tokens file: `[[token]]` tables. `hubdex token add|list|revoke` manage it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokensFile {
    #[serde(default)]
    /// The tokens, one `[[token]]` table each.
    pub token: Vec<TokenEntry>,
}

/// A tokens file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file cannot be read or written.
    #[error("tokens file {path}: {source}")]
    Io {
        /// The tokens file.
        path: PathBuf,
        /// Why it could not be read or written.
        source: std::io::Error,
    },
    /// The file is not the TOML a tokens file is.
    #[error("tokens file {path}: {detail}")]
    Invalid {
        /// The tokens file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A command named a token the file does not hold.
    #[error("tokens file {path} has no token named {name:?}")]
    NoSuchToken {
        /// The tokens file.
        path: PathBuf,
        /// The name asked for.
        name: String,
    },
}

/// Parses an expiry: an RFC 3339 time, or a date meaning the end of that day (UTC).
pub(crate) fn parse_expiry(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(23, 59, 59).expect("a valid time").and_utc());
    }
    Err(format!("expiry {s:?} is not a date (2027-01-31) or an RFC 3339 time"))
}

fn parse_types(types: &[String]) -> Result<Vec<RowType>, String> {
    types
        .iter()
        .map(|t| {
            t.parse::<RowType>()
                .map_err(|_| format!("unknown row type {t:?}; allowed: {}", RowType::allowed()))
        })
        .collect()
}

/// A token entry, checked and ready to match.
#[derive(Debug, Clone)]
struct Grant {
    name: String,
    hash: [u8; 32],
    scope: Option<Scope>,
    expires: Option<DateTime<Utc>>,
}

impl TokenEntry {
    fn check(&self) -> Result<Grant, String> {
        let name = &self.name;
        if !valid_name(name) {
            return Err(format!(
                "token name {name:?} must be 1 to 64 letters, digits, '.', '_' or '-'"
            ));
        }
        let mut hash = [0u8; 32];
        hex::decode_to_slice(&self.sha256, &mut hash)
            .map_err(|_| format!("token {name:?}: sha256 must be 64 hex digits"))?;
        if self.repos.is_empty() {
            return Err(format!("token {name:?}: repos must list at least one glob"));
        }
        let types = parse_types(&self.types).map_err(|e| format!("token {name:?}: {e}"))?;
        let scope = scope_of(&self.repos, &types).map_err(|e| format!("token {name:?}: {e}"))?;
        let expires = self
            .expires
            .as_deref()
            .map(parse_expiry)
            .transpose()
            .map_err(|e| format!("token {name:?}: {e}"))?;
        Ok(Grant { name: name.clone(), hash, scope, expires })
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl TokensFile {
    /// Reads and checks a tokens file; a missing file is an empty one.
    pub fn load(path: &Path) -> Result<TokensFile, TokensError> {
        Self::read_checked(path).map(|(file, _)| file)
    }

    /// Reads a tokens file and checks every entry once: the file and its grants.
    fn read_checked(path: &Path) -> Result<(TokensFile, Vec<Grant>), TokensError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(TokensError::Io { path: path.into(), source }),
        };
        let file: TokensFile = toml::from_str(&text)
            .map_err(|e| TokensError::Invalid { path: path.into(), detail: e.to_string() })?;
        let grants =
            file.grants().map_err(|detail| TokensError::Invalid { path: path.into(), detail })?;
        Ok((file, grants))
    }

    fn grants(&self) -> Result<Vec<Grant>, String> {
        let grants = self.token.iter().map(TokenEntry::check).collect::<Result<Vec<_>, _>>()?;
        for (i, g) in grants.iter().enumerate() {
            if grants[..i].iter().any(|o| o.name == g.name) {
                return Err(format!("token name {:?} appears twice", g.name));
            }
            if grants[..i].iter().any(|o| o.hash == g.hash) {
                return Err(format!("token {:?} has the same sha256 as another token", g.name));
            }
        }
        Ok(grants)
    }

    /// Writes the file atomically (a temporary file renamed over it), readable by its owner
    /// only.
    pub fn save(&self, path: &Path) -> Result<(), TokensError> {
        let io = |source| TokensError::Io { path: path.into(), source };
        let body = toml::to_string_pretty(self)
            .map_err(|e| TokensError::Invalid { path: path.into(), detail: e.to_string() })?;
        let text = format!(
            "# hubdex tokens: managed with `hubdex token add|list|revoke`. Only the sha256 of each\n\
             # token is stored; a server started with --tokens-file re-reads this file when it changes.\n\n{body}"
        );
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("tokens"),
            std::process::id()
        ));
        std::fs::write(&tmp, text).map_err(io)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Adds a token and returns it (the only time it is shown).
    pub fn add(
        &mut self,
        name: &str,
        repos: &[String],
        types: &[String],
        expires: Option<&str>,
    ) -> Result<String, String> {
        let token = new_token()?;
        let entry = TokenEntry {
            name: name.to_string(),
            sha256: sha256_hex(token.as_bytes()),
            repos: repos.to_vec(),
            types: types.to_vec(),
            expires: expires.map(str::to_string),
            created: Some(Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        };
        let grant = entry.check()?;
        if let Some(t) = grant.expires
            && t <= Utc::now()
        {
            return Err(format!(
                "token {name:?}: expiry {} is in the past; a token must expire later than now",
                t.to_rfc3339()
            ));
        }
        if self.token.iter().any(|t| t.name == name) {
            return Err(format!("a token named {name:?} exists: revoke it first"));
        }
        self.token.push(entry);
        Ok(token)
    }

    /// Removes the token `name`; whether it was there.
    pub fn revoke(&mut self, name: &str) -> bool {
        let before = self.token.len();
        self.token.retain(|t| t.name != name);
        self.token.len() != before
    }

    /// `hubdex token add`: adds a token to the file at `path` (made if missing) and saves it;
    /// the token, which is shown once.
    pub fn add_to(
        path: &Path,
        name: &str,
        repos: &[String],
        types: &[String],
        expires: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut file = TokensFile::load(path)?;
        let token = file.add(name, repos, types, expires).map_err(anyhow::Error::msg)?;
        file.save(path)?;
        Ok(token)
    }

    /// `hubdex token revoke`: removes `name` from the file at `path` and saves it; a name the
    /// file does not hold is an error naming both.
    pub fn revoke_in(path: &Path, name: &str) -> Result<(), TokensError> {
        let mut file = TokensFile::load(path)?;
        if !file.revoke(name) {
            return Err(TokensError::NoSuchToken { path: path.to_path_buf(), name: name.into() });
        }
        file.save(path)
    }

    /// `hubdex token list`: a line per token (name, repositories, types, expiry).
    pub fn lines(&self) -> Vec<String> {
        self.token
            .iter()
            .map(|t| {
                let types =
                    if t.types.is_empty() { "all types".to_string() } else { t.types.join(",") };
                let expires = t.expires.as_deref().unwrap_or("never");
                format!("{}\trepos {}\t{types}\texpires {expires}", t.name, t.repos.join(","))
            })
            .collect()
    }
}

/// A new random token: `hdx_` and 32 random bytes, base64url.
fn new_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    Ok(format!("hdx_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

/// Why a bearer token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("a bearer token is required: Authorization: Bearer <token>")]
    Missing,
    /// The token is not one this server knows (revoked tokens included).
    #[error("the bearer token is not valid")]
    Invalid,
    /// A tokens-file token past its expiry.
    #[error("the bearer token expired at {0}")]
    Expired(String),
    /// The tokens file cannot be read: every token of it is refused until it can. The caller
    /// is told only that authentication is unavailable (503); the log says why.
    #[error("the server cannot check tokens right now; try again later")]
    TokensUnavailable,
    /// An OAuth access token that does not verify.
    #[error("the access token is not valid: {0}")]
    Jwt(String),
    /// A valid OAuth token whose claims grant no repository.
    #[error(
        "the access token grants no repository here (no hubdex.toml [[oauth.grant]] matches its claims)"
    )]
    NoGrant,
}

/// What identifies one version of a file on disk: a change of any part means re-read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&m),
    })
}

/// A tokens file the server serves from: re-read on the first request after it changes (its
/// time, size or inode), so a revoke needs no restart. A file that stops parsing refuses all
/// its tokens (fail closed) until it is fixed.
#[derive(Debug)]
pub struct TokenStore {
    path: PathBuf,
    loaded: Mutex<Loaded>,
}

/// The file version last read, and its tokens (`None`: it did not parse).
type Loaded = (Option<Stamp>, Option<Arc<Vec<Grant>>>);

impl TokenStore {
    /// Opens `path`; it must exist and parse.
    pub fn open(path: &Path) -> Result<TokenStore, TokensError> {
        if !path.is_file() {
            return Err(TokensError::Invalid {
                path: path.into(),
                detail: "no such file: create it with `hubdex token add`".into(),
            });
        }
        let stamp = stamp(path);
        let (_, grants) = TokensFile::read_checked(path)?;
        Ok(TokenStore { path: path.into(), loaded: Mutex::new((stamp, Some(Arc::new(grants)))) })
    }

    fn grants(&self) -> Option<Arc<Vec<Grant>>> {
        let now = stamp(&self.path);
        let mut loaded = self.loaded.lock().expect("tokens lock");
        if loaded.0 != now {
            loaded.0 = now;
            loaded.1 = match TokensFile::read_checked(&self.path) {
                Ok((_, g)) => {
                    tracing::info!(path = %self.path.display(), tokens = g.len(), "tokens file re-read");
                    Some(Arc::new(g))
                }
                Err(e) => {
                    tracing::error!(error = %e, "tokens file refused; its tokens are refused until it is fixed");
                    None
                }
            };
        }
        loaded.1.clone()
    }

    /// The caller a token names, if the file holds it. `Ok(None)`: not one of this file's.
    pub fn authenticate(&self, token: &str) -> Result<Option<Caller>, AuthError> {
        let Some(grants) = self.grants() else { return Err(AuthError::TokensUnavailable) };
        let hash: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let Some(g) = grants.iter().find(|g| bool::from(g.hash.ct_eq(&hash))) else {
            return Ok(None);
        };
        if let Some(t) = g.expires
            && t <= Utc::now()
        {
            return Err(AuthError::Expired(t.to_rfc3339()));
        }
        Ok(Some(Caller {
            name: g.name.clone(),
            kind: CallerKind::ScopedToken,
            scope: g.scope.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stored_as_its_hash_and_matches_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let mut file = TokensFile::default();
        let token = file.add("team-a", &["acme/*".into()], &[], None).unwrap();
        file.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token), "the token itself is never stored");
        let store = TokenStore::open(&path).unwrap();
        let caller = store.authenticate(&token).unwrap().unwrap();
        assert_eq!(caller.name, "team-a");
        assert!(caller.scope.unwrap().allows_repo("acme/widgets"));
        assert_eq!(store.authenticate("hdx_other").unwrap().map(|c| c.name), None);
        file.revoke("team-a");
        file.save(&path).unwrap();
        assert_eq!(store.authenticate(&token).unwrap().map(|c| c.name), None);
    }

    #[test]
    fn bad_entries_are_named() {
        let check = |toml: &str, expect: &str| {
            let file: TokensFile = toml::from_str(toml).unwrap();
            let err = file.grants().unwrap_err();
            assert!(err.contains(expect), "{err}");
        };
        let sha = "0".repeat(64);
        check(
            &format!("[[token]]\nname='a b'\nsha256='{sha}'\nrepos=['x/*']"),
            "token name \"a b\"",
        );
        check("[[token]]\nname='a'\nsha256='zz'\nrepos=['x/*']", "64 hex digits");
        check(&format!("[[token]]\nname='a'\nsha256='{sha}'\nrepos=[]"), "at least one glob");
        check(
            &format!("[[token]]\nname='a'\nsha256='{sha}'\nrepos=['x/*']\ntypes=['issues']"),
            "unknown row type \"issues\"",
        );
        check(
            &format!("[[token]]\nname='a'\nsha256='{sha}'\nrepos=['x/*']\nexpires='soon'"),
            "expiry \"soon\"",
        );
    }

    #[test]
    fn a_token_cannot_be_added_already_expired() {
        let mut file = TokensFile::default();
        for past in ["2020-01-01", "2001-02-03T04:05:06Z"] {
            let err = file.add("late", &["*".into()], &[], Some(past)).unwrap_err();
            assert!(err.contains("is in the past"), "{err}");
        }
        assert!(file.token.is_empty(), "nothing is added");
        file.add("ok", &["*".into()], &[], Some("2099-12-31")).unwrap();
    }

    #[test]
    fn an_expired_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        let mut file = TokensFile::default();
        let token = file.add("old", &["*".into()], &[], Some("2099-01-01")).unwrap();
        // A file edited by hand, or a token that ran out since it was added.
        file.token[0].expires = Some("2020-01-01".into());
        file.save(&path).unwrap();
        let store = TokenStore::open(&path).unwrap();
        assert!(matches!(store.authenticate(&token), Err(AuthError::Expired(_))));
    }
}
