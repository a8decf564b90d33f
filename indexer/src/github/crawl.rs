//! Crawling one repository from the GitHub REST API, incrementally.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use hubdex_formats::{Row, RowType};
use serde::de::DeserializeOwned;

use super::client::{Fetched, GitHubClient, GitHubError};
use super::items::{
    Comment, Issue, PullRequest, Release, Repository, Review, ReviewComment, release_row,
    thread_rows,
};
use super::state::{Cursor, Pending};

/// What to crawl of a repository.
#[derive(Debug, Clone)]
pub struct CrawlScope {
    /// Crawl issues and their comments.
    pub issues: bool,
    /// Crawl pull requests, their reviews and review comments.
    pub pulls: bool,
    /// Crawl releases.
    pub releases: bool,
}

impl Default for CrawlScope {
    fn default() -> Self {
        CrawlScope { issues: true, pulls: true, releases: true }
    }
}

/// The result of crawling one repository's API.
#[derive(Debug, Default)]
pub struct ApiCrawl {
    /// Threads re-crawled: entity → its rows (replacing any previous rows of that entity).
    pub threads: HashMap<String, Vec<Row>>,
    /// All release rows when the releases changed; `None` when unchanged (keep the old ones).
    pub releases: Option<Vec<Row>>,
    /// Items per type, for the report.
    pub counts: HashMap<&'static str, u64>,
    /// Where the crawl stopped, for the next incremental run.
    pub cursor: Cursor,
}

async fn get_json<T: DeserializeOwned>(
    client: &GitHubClient,
    path: &str,
) -> Result<T, GitHubError> {
    match client.get(path, None).await? {
        Fetched::Page { body, .. } => serde_json::from_slice(&body)
            .map_err(|e| GitHubError::Decode { path: path.into(), detail: e.to_string() }),
        Fetched::NotModified => Err(GitHubError::Decode {
            path: path.into(),
            detail: "304 without a conditional request".into(),
        }),
    }
}

/// Every page of a list, following Link headers, while `take` accepts its items: the first
/// item it refuses ends the list there (a crawl stops at its watermark). With `etag`, the
/// first page is asked conditionally; `Ok(None)` means it had not changed. Else the items and
/// the first page's ETag.
async fn get_pages<T: DeserializeOwned>(
    client: &GitHubClient,
    first: &str,
    etag: Option<&str>,
    mut take: impl FnMut(&T) -> bool,
) -> Result<Option<(Vec<T>, Option<String>)>, GitHubError> {
    let mut out = Vec::new();
    let mut path = first.to_string();
    let mut first_etag = None;
    let mut conditional = etag;
    loop {
        match client.get(&path, conditional).await? {
            Fetched::NotModified => return Ok(None),
            Fetched::Page { body, etag, next } => {
                if path == first {
                    first_etag = etag;
                }
                let items: Vec<T> = serde_json::from_slice(&body).map_err(|e| {
                    GitHubError::Decode { path: path.clone(), detail: e.to_string() }
                })?;
                for item in items {
                    if !take(&item) {
                        return Ok(Some((out, first_etag)));
                    }
                    out.push(item);
                }
                match next {
                    Some(n) => path = n,
                    None => return Ok(Some((out, first_etag))),
                }
            }
        }
        conditional = None;
    }
}

/// Every item of every page of a list, asked unconditionally.
async fn get_all<T: DeserializeOwned>(
    client: &GitHubClient,
    first: &str,
) -> Result<Vec<T>, GitHubError> {
    Ok(get_pages(client, first, None, |_| true).await?.map(|p| p.0).unwrap_or_default())
}

/// Records the first page's ETag of `list` in the cursor (or forgets an old one).
fn remember_etag(cur: &mut Cursor, list: &str, etag: Option<String>) {
    match etag {
        Some(e) => cur.etags.insert(list.to_string(), e),
        None => cur.etags.remove(list),
    };
}

/// Crawls the API side of `repo` (owner/name) from `cursor`.
pub async fn crawl_api(
    client: &GitHubClient,
    repo: &str,
    previous: &Cursor,
    scope: &CrawlScope,
    mut progress: impl FnMut(&str),
) -> Result<ApiCrawl, GitHubError> {
    let mut cur = previous.clone();
    let mut out = ApiCrawl::default();
    let base = format!("/repos/{repo}");

    let repo_etag = previous.etags.get(&base).map(String::as_str);
    match client.get(&base, repo_etag.filter(|_| previous.clone_url.is_some())).await? {
        Fetched::NotModified => {}
        Fetched::Page { body, etag, .. } => {
            let r: Repository = serde_json::from_slice(&body)
                .map_err(|e| GitHubError::Decode { path: base.clone(), detail: e.to_string() })?;
            cur.clone_url = Some(r.clone_url.clone());
            cur.html_url = Some(r.html_url.clone());
            cur.has_wiki = r.has_wiki;
            if let Some(e) = etag {
                cur.etags.insert(base.clone(), e);
            }
        }
    }

    if scope.issues || scope.pulls {
        // Newest first, always the same URL: its first page's ETag says whether anything
        // changed at all (a 304 costs no quota), and paging stops at the watermark.
        let list = format!("{base}/issues?state=all&sort=updated&direction=desc&per_page=100");
        let conditional =
            previous.etags.get(&list).map(String::as_str).filter(|_| previous.watermark.is_some());
        // Items updated before the watermark were indexed already; the boundary second itself
        // is crawled again (overlap).
        let fresh = |i: &Issue| previous.watermark.is_none_or(|w| i.updated_at >= w);
        let mut issues: Vec<Issue> = match get_pages(client, &list, conditional, fresh).await? {
            None => Vec::new(),
            Some((issues, etag)) => {
                remember_etag(&mut cur, &list, etag);
                issues
            }
        };
        // Items that failed last time are fetched again whatever the watermark says.
        let listed: BTreeSet<i64> = issues.iter().map(|i| i.number).collect();
        for p in &previous.pending {
            if !listed.contains(&p.number) {
                match get_json::<Issue>(client, &format!("{base}/issues/{}", p.number)).await {
                    Ok(i) => issues.push(i),
                    Err(e @ GitHubError::RateLimited { .. }) => return Err(e),
                    Err(GitHubError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        issues.retain(|i| if i.pull_request.is_some() { scope.pulls } else { scope.issues });

        let mut pending = Vec::new();
        let mut newest: Option<DateTime<Utc>> = previous.watermark;
        for (k, issue) in issues.iter().enumerate() {
            progress(&format!(
                "{} {}/{}",
                if issue.pull_request.is_some() { "pull" } else { "issue" },
                k + 1,
                issues.len()
            ));
            match crawl_thread(client, repo, issue).await {
                Ok((rows, counts)) => {
                    for (t, n) in counts {
                        *out.counts.entry(t).or_default() += n;
                    }
                    out.threads.insert(format!("issue/{}", issue.number), rows);
                    newest = newest.max(Some(issue.updated_at));
                }
                Err(e @ GitHubError::RateLimited { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(repo, number = issue.number, error = %e, "deferred to the next run");
                    pending.push(Pending {
                        number: issue.number,
                        updated_at: issue.updated_at,
                        reason: e.to_string(),
                    });
                }
            }
        }
        // Never move the watermark past an item that was not indexed.
        let oldest_failed = pending.iter().map(|p| p.updated_at).min();
        cur.watermark = match (newest, oldest_failed) {
            (Some(n), Some(f)) => Some(n.min(f)),
            (n, f) => n.or(f),
        };
        cur.pending = pending;
    }

    if scope.releases {
        let list = format!("{base}/releases?per_page=100");
        let conditional = previous.etags.get(&list).map(String::as_str);
        match get_pages::<Release>(client, &list, conditional, |_| true).await? {
            None => {}
            Some((releases, etag)) => {
                remember_etag(&mut cur, &list, etag);
                *out.counts.entry("release").or_default() += releases.len() as u64;
                out.releases = Some(releases.iter().map(|r| release_row(repo, r)).collect());
            }
        }
    }
    out.cursor = cur;
    Ok(out)
}

async fn crawl_thread(
    client: &GitHubClient,
    repo: &str,
    issue: &Issue,
) -> Result<(Vec<Row>, Vec<(&'static str, u64)>), GitHubError> {
    let base = format!("/repos/{repo}");
    let n = issue.number;
    let comments: Vec<Comment> = if issue.comments > 0 {
        get_all(client, &format!("{base}/issues/{n}/comments?per_page=100")).await?
    } else {
        Vec::new()
    };
    let (pr, reviews, review_comments) = if issue.pull_request.is_some() {
        let pr: PullRequest = get_json(client, &format!("{base}/pulls/{n}")).await?;
        let reviews: Vec<Review> =
            get_all(client, &format!("{base}/pulls/{n}/reviews?per_page=100")).await?;
        let rc: Vec<ReviewComment> =
            get_all(client, &format!("{base}/pulls/{n}/comments?per_page=100")).await?;
        (Some(pr), reviews, rc)
    } else {
        (None, Vec::new(), Vec::new())
    };
    let rows = thread_rows(repo, issue, pr.as_ref(), &comments, &reviews, &review_comments);
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    for r in &rows {
        *counts.entry(r.kind().as_str()).or_default() += 1;
    }
    Ok((rows, counts.into_iter().collect()))
}

/// Whether rows of this type come from the API (threads and releases): the only ones a crawl
/// carries over from the previous snapshot ([`carried_rows`]).
pub fn carried_kind(kind: RowType) -> bool {
    matches!(
        kind,
        RowType::Issue
            | RowType::PullRequest
            | RowType::IssueComment
            | RowType::PrReview
            | RowType::PrReviewComment
            | RowType::Release
    )
}

/// Rows of the previous snapshot that a crawl keeps: API rows of threads not re-crawled, and
/// release rows when releases did not change. Git-sourced rows are always re-read.
pub fn carried_rows(previous: Vec<Row>, crawl: &ApiCrawl) -> Vec<Row> {
    previous
        .into_iter()
        .filter(|r| match r.kind() {
            RowType::Release => crawl.releases.is_none(),
            kind => carried_kind(kind) && !crawl.threads.contains_key(&r.entity),
        })
        .collect()
}
