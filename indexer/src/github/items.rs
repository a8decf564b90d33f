//! GitHub REST items (only the fields hubdex reads) and the rows they become.

use chrono::{DateTime, Utc};
use hubdex_formats::{Row, RowType};
use serde::Deserialize;

use crate::sources::refs::find_refs;

/// Comments shorter than this (trimmed) are dropped at ingest.
pub const MIN_COMMENT_CHARS: usize = 10;

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct User {
    pub login: String,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

impl User {
    /// Bots are dropped at ingest: a login ending in `[bot]` or a user of type Bot.
    pub(crate) fn is_bot(&self) -> bool {
        self.login.ends_with("[bot]") || self.kind.as_deref() == Some("Bot")
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Label {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Milestone {
    pub title: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Repository {
    pub clone_url: String,
    pub html_url: String,
    #[serde(default)]
    pub has_wiki: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Issue {
    pub number: i64,
    pub title: String,
    pub body: Option<String>,
    pub state: String,
    pub state_reason: Option<String>,
    pub html_url: String,
    pub user: Option<User>,
    #[serde(default)]
    pub labels: Vec<Label>,
    pub milestone: Option<Milestone>,
    #[serde(default)]
    pub assignees: Vec<User>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    /// Present (an object) when the item is a pull request.
    pub pull_request: Option<serde_json::Value>,
    #[serde(default)]
    pub comments: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Branch {
    #[serde(rename = "ref")]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PullRequest {
    pub merged_at: Option<DateTime<Utc>>,
    /// The commit a merged pull request landed as (a merge, squash or rebase commit).
    #[serde(default)]
    pub merge_commit_sha: Option<String>,
    #[serde(default)]
    pub draft: Option<bool>,
    pub base: Branch,
    pub head: Branch,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Comment {
    pub id: u64,
    pub body: Option<String>,
    pub user: Option<User>,
    pub html_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Review {
    pub id: u64,
    pub body: Option<String>,
    pub user: Option<User>,
    pub state: String,
    pub html_url: String,
    pub submitted_at: Option<DateTime<Utc>>,
    pub commit_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ReviewComment {
    pub id: u64,
    pub body: Option<String>,
    pub user: Option<User>,
    pub html_url: String,
    pub path: String,
    pub line: Option<i64>,
    pub original_line: Option<i64>,
    pub start_line: Option<i64>,
    pub diff_hunk: Option<String>,
    pub in_reply_to_id: Option<i64>,
    pub commit_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Release {
    pub tag_name: String,
    pub name: Option<String>,
    pub body: Option<String>,
    pub html_url: String,
    pub author: Option<User>,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub prerelease: bool,
    pub created_at: DateTime<Utc>,
    pub published_at: Option<DateTime<Utc>>,
}

/// Whether a comment is kept: not by a bot, at least [`MIN_COMMENT_CHARS`] chars trimmed.
pub(crate) fn keep_comment(user: Option<&User>, body: Option<&str>) -> bool {
    !user.is_some_and(User::is_bot)
        && body.unwrap_or("").trim().chars().count() >= MIN_COMMENT_CHARS
}

/// The rows of one issue or pull request thread, all under the entity `issue/<number>`.
pub(crate) fn thread_rows(
    repo: &str,
    issue: &Issue,
    pr: Option<&PullRequest>,
    comments: &[Comment],
    reviews: &[Review],
    review_comments: &[ReviewComment],
) -> Vec<Row> {
    let entity = format!("issue/{}", issue.number);
    let kind = if issue.pull_request.is_some() { RowType::PullRequest } else { RowType::Issue };
    let mut head = Row::new(kind, repo, &entity, 0);
    head.number = Some(issue.number);
    head.title = Some(issue.title.clone());
    head.url = Some(issue.html_url.clone());
    head.state = Some(match pr.and_then(|p| p.merged_at) {
        Some(_) => "merged".into(),
        None => issue.state.clone(),
    });
    head.state_reason = issue.state_reason.clone();
    head.labels = issue.labels.iter().map(|l| l.name.clone()).collect();
    head.milestone = issue.milestone.as_ref().map(|m| m.title.clone());
    head.assignees = issue.assignees.iter().map(|a| a.login.clone()).collect();
    head.author = issue.user.as_ref().map(|u| u.login.clone());
    head.created_at = Some(issue.created_at);
    head.updated_at = Some(issue.updated_at);
    head.closed_at = issue.closed_at;
    if let Some(p) = pr {
        head.merged_at = p.merged_at;
        head.draft = p.draft;
        head.base_ref = Some(p.base.name.clone());
        head.head_ref = Some(p.head.name.clone());
        // The commit it landed as: the `pull_request_of` edge the crawl states.
        head.commit_sha = p.merge_commit_sha.clone().filter(|_| p.merged_at.is_some());
    }
    let body = issue.body.clone().unwrap_or_default();
    head.refs = find_refs(&body);
    head.set_body(&body);
    let shared = |row: &mut Row| {
        row.number = Some(issue.number);
        row.title = Some(issue.title.clone());
        row.state = head.state.clone();
        row.labels = head.labels.clone();
        row.milestone = head.milestone.clone();
        row.assignees = head.assignees.clone();
    };
    let mut rows = vec![head.clone()];
    for c in comments.iter().filter(|c| keep_comment(c.user.as_ref(), c.body.as_deref())) {
        let mut row =
            Row::keyed(RowType::IssueComment, repo, &entity, &format!("issue_comment/{}", c.id), 0);
        shared(&mut row);
        row.url = Some(c.html_url.clone());
        row.author = c.user.as_ref().map(|u| u.login.clone());
        row.created_at = Some(c.created_at);
        row.updated_at = Some(c.updated_at);
        let body = c.body.clone().unwrap_or_default();
        row.refs = find_refs(&body);
        row.set_body(&body);
        rows.push(row);
    }
    for r in reviews.iter().filter(|r| !r.user.as_ref().is_some_and(User::is_bot)) {
        let body = r.body.clone().unwrap_or_default();
        // An approval without words still says something; an empty COMMENTED review does not.
        if body.trim().chars().count() < MIN_COMMENT_CHARS && r.state == "COMMENTED" {
            continue;
        }
        let mut row =
            Row::keyed(RowType::PrReview, repo, &entity, &format!("pr_review/{}", r.id), 0);
        shared(&mut row);
        row.url = Some(r.html_url.clone());
        row.author = r.user.as_ref().map(|u| u.login.clone());
        row.created_at = r.submitted_at;
        row.updated_at = r.submitted_at;
        row.commit_sha = r.commit_id.clone();
        row.state_reason = Some(r.state.clone());
        row.refs = find_refs(&body);
        row.set_body(&format!("Review: {}\n\n{body}", r.state));
        rows.push(row);
    }
    for c in review_comments.iter().filter(|c| keep_comment(c.user.as_ref(), c.body.as_deref())) {
        let mut row = Row::keyed(
            RowType::PrReviewComment,
            repo,
            &entity,
            &format!("pr_review_comment/{}", c.id),
            0,
        );
        shared(&mut row);
        row.url = Some(c.html_url.clone());
        row.author = c.user.as_ref().map(|u| u.login.clone());
        row.created_at = Some(c.created_at);
        row.updated_at = Some(c.updated_at);
        row.path = Some(c.path.clone());
        let line = c.line.or(c.original_line);
        row.line_start = c.start_line.or(line);
        row.line_end = line;
        row.in_reply_to = c.in_reply_to_id;
        row.commit_sha = c.commit_id.clone();
        let body = c.body.clone().unwrap_or_default();
        row.refs = find_refs(&body);
        let hunk = c.diff_hunk.clone().unwrap_or_default();
        row.set_body_split(&body, &format!("\n\n{}\n{hunk}", c.path));
        rows.push(row);
    }
    rows
}

/// The row of one release.
pub(crate) fn release_row(repo: &str, r: &Release) -> Row {
    let mut row = Row::new(RowType::Release, repo, &format!("release/{}", r.tag_name), 0);
    row.title =
        Some(r.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| r.tag_name.clone()));
    row.tag = Some(r.tag_name.clone());
    row.url = Some(r.html_url.clone());
    row.author = r.author.as_ref().map(|u| u.login.clone());
    row.created_at = Some(r.created_at);
    row.updated_at = Some(r.published_at.unwrap_or(r.created_at));
    row.state = Some(
        if r.draft {
            "draft"
        } else if r.prerelease {
            "prerelease"
        } else {
            "published"
        }
        .into(),
    );
    let body = r.body.clone().unwrap_or_default();
    row.refs = find_refs(&body);
    row.set_body(&body);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(login: &str, kind: &str) -> User {
        User { login: login.into(), kind: Some(kind.into()) }
    }

    #[test]
    fn bots_and_short_comments_are_dropped() {
        assert!(keep_comment(
            Some(&user("octocat", "User")),
            Some("This fixes the flaky test for me.")
        ));
        assert!(!keep_comment(
            Some(&user("dependabot[bot]", "Bot")),
            Some("Bumps serde from 1.0.1 to 1.0.2.")
        ));
        assert!(!keep_comment(
            Some(&user("renovate", "Bot")),
            Some("Update dependency serde to v1.0.2")
        ));
        assert!(!keep_comment(Some(&user("octocat", "User")), Some("  +1 👍   ")));
        assert!(!keep_comment(Some(&user("octocat", "User")), None));
    }
}
