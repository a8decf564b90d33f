//! The GitHub source: the REST API (issues, pull requests, comments, reviews, review
//! comments, releases) through a well-behaved client, and the repository and its wiki cloned
//! with git for commits and docs.

mod client;
mod crawl;
mod items;
mod state;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use client::{
    Clock, Fetched, GitHubClient, GitHubError, MAX_TRIES, RequestStats, SECONDARY_MIN_WAIT,
    SystemClock, next_link,
};
pub use crawl::{ApiCrawl, CrawlScope, carried_kind, carried_rows, crawl_api};
pub use items::MIN_COMMENT_CHARS;
pub use state::{Cursor, Pending};

/// The default API base URL.
pub const GITHUB_API: &str = "https://api.github.com";

/// Whether a SOURCE names a GitHub repository (`owner/name`) rather than a local path.
pub fn is_repo_name(source: &str) -> bool {
    let parts: Vec<&str> = source.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        // Owners start with a letter or digit; `.` and `..` are paths, `.github` is a repo.
        && parts[0].starts_with(|c: char| c.is_ascii_alphanumeric())
        && parts[1] != "."
        && parts[1] != ".."
        && !Path::new(source).exists()
}

/// Errors cloning a repository.
#[derive(Debug, thiserror::Error)]
#[error("git {action} {url}: {detail}")]
pub struct CloneError {
    action: &'static str,
    url: String,
    detail: String,
}

/// Clones `url` bare into `dir`, or fetches every branch and tag when `dir` already holds it.
/// The token, when given, travels in the environment (never in arguments or logs).
pub fn clone_or_fetch(url: &str, dir: &Path, token: Option<&str>) -> Result<PathBuf, CloneError> {
    let mut cmd = Command::new("git");
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    // One variable names the CA certificates both clients trust: the REST client reads
    // SSL_CERT_FILE, git's libcurl only its own GIT_SSL_CAINFO (a GitHub Enterprise with a
    // private CA, the image's tests).
    if std::env::var_os("GIT_SSL_CAINFO").is_none()
        && let Some(certs) = std::env::var_os("SSL_CERT_FILE").filter(|c| !c.is_empty())
    {
        cmd.env("GIT_SSL_CAINFO", certs);
    }
    if let Some(t) = token.filter(|_| url.starts_with("https://")) {
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{t}"));
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "http.extraHeader")
            .env("GIT_CONFIG_VALUE_0", format!("Authorization: Basic {basic}"));
    }
    let action = if dir.join("HEAD").is_file() {
        cmd.arg("-C").arg(dir).args([
            "fetch",
            "--quiet",
            "--prune",
            "--force",
            url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ]);
        "fetch"
    } else {
        if let Some(parent) = dir.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        // What a clone killed before it wrote HEAD left (the directory is the indexer's, not
        // the user's): git clones only into an empty directory.
        let _ = std::fs::remove_dir_all(dir);
        cmd.args(["clone", "--quiet", "--bare", url]).arg(dir);
        "clone"
    };
    let out =
        cmd.output().map_err(|e| CloneError { action, url: url.into(), detail: e.to_string() })?;
    if !out.status.success() {
        return Err(CloneError {
            action,
            url: url.into(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    write_commit_graph(dir);
    Ok(dir.to_path_buf())
}

/// Writes git's commit-graph for what the clone holds (`commit-graph write --reachable
/// --split`: after a fetch only the new commits, as a layer of their own). The first pass
/// lists the history with `rev-list --all --date-order`, which reads each commit's parents
/// and date from the graph rather than from the pack: 2.9 s → 0.5 s for a 400,000-commit
/// history (docs/performance.md). A git without commit-graphs
/// (before 2.18) or a failed write only costs that time: it is logged, not an error. A local
/// SOURCE is a user's own repository and is not written to (git's maintenance and `gc` write
/// its graph).
fn write_commit_graph(dir: &Path) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["commit-graph", "write", "--reachable", "--split", "--no-progress"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => tracing::info!(
            dir = %dir.display(),
            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
            "no commit-graph written"
        ),
        Err(e) => tracing::info!(dir = %dir.display(), error = %e, "no commit-graph written"),
    }
}

/// The wiki repository of a clone URL: `<url without .git>.wiki.git`.
pub fn wiki_url(clone_url: &str) -> String {
    format!("{}.wiki.git", clone_url.trim_end_matches('/').trim_end_matches(".git"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names_and_wiki_urls() {
        assert!(is_repo_name("rust-lang/rust"));
        assert!(!is_repo_name("./rust"));
        assert!(!is_repo_name("../rust"));
        assert!(is_repo_name("acme/.github"));
        assert!(!is_repo_name("a/b/c"));
        assert_eq!(wiki_url("https://github.com/o/r.git"), "https://github.com/o/r.wiki.git");
        assert_eq!(wiki_url("/tmp/o/r"), "/tmp/o/r.wiki.git");
    }

    #[test]
    fn a_clone_and_each_fetch_write_the_commit_graph_of_what_they_brought() {
        let tmp = tempfile::tempdir().unwrap();
        let (source, clone) = (tmp.path().join("source"), tmp.path().join("clone.git"));
        let git = crate::sources::git::tests::git_ok;
        std::fs::create_dir(&source).unwrap();
        git(&source, &["init", "-q", "-b", "main"]);
        let commit = |m: &str| git(&source, &["commit", "-q", "--allow-empty", "-m", m]);
        commit("one");
        commit("two");
        let url = source.to_str().unwrap();
        // The chain names each layer's graph file by its hash: it changes when commits come.
        let chain = || {
            let chain = clone.join("objects/info/commit-graphs/commit-graph-chain");
            std::fs::read_to_string(chain).unwrap_or_default()
        };
        clone_or_fetch(url, &clone, None).unwrap();
        let cloned = chain();
        assert_eq!(cloned.lines().count(), 1, "the clone's graph: {cloned:?}");
        clone_or_fetch(url, &clone, None).unwrap();
        assert_eq!(chain(), cloned, "nothing fetched, nothing written");
        commit("three");
        clone_or_fetch(url, &clone, None).unwrap();
        assert!(!chain().is_empty() && chain() != cloned, "the fetched commit's graph");
        git(&clone, &["commit-graph", "verify"]);
        let listed = |dir: &Path| git(dir, &["rev-list", "--all", "--date-order"]);
        assert_eq!(listed(&clone), listed(&source));
        assert_eq!(listed(&clone).lines().count(), 3);
        // A clone killed before it wrote HEAD left files: the next clones again.
        let killed = tmp.path().join("killed.git");
        std::fs::create_dir_all(killed.join("objects/pack")).unwrap();
        std::fs::write(killed.join("objects/pack/tmp_pack_x"), b"half a pack").unwrap();
        clone_or_fetch(url, &killed, None).unwrap();
        assert_eq!(listed(&killed), listed(&source));
    }
}
