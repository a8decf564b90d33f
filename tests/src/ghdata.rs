//! Content for the fake GitHub API: two repositories shaped like the real API's answers.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::fakegh::FakeRepo;

fn user(login: &str, id: u64) -> Value {
    let kind = if login.ends_with("[bot]") { "Bot" } else { "User" };
    json!({"login": login, "id": id, "node_id": format!("U_{id}"), "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
           "url": format!("https://api.github.com/users/{login}"), "html_url": format!("https://github.com/{login}"),
           "type": kind, "site_admin": false})
}

fn at(hours: i64) -> String {
    (chrono::DateTime::parse_from_rfc3339("2024-03-01T00:00:00Z").expect("valid")
        + chrono::Duration::hours(hours))
    .with_timezone(&chrono::Utc)
    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Topics of the generated issues: each distinct, so each can be found.
pub const TOPICS: &[&str] = &[
    "Crash when the config file is missing",
    "Add support for YAML configuration",
    "Search results ignore the archived flag",
    "Implement OAuth login with GitHub",
    "Memory grows without bound under load",
    "Document the plugin API",
    "CSV export drops the header row",
    "Implement rate limiting for the public API",
    "Timezone offsets are applied twice",
    "Dark mode colors have poor contrast",
    "Upgrade to the new database driver",
    "Websocket reconnect loop never backs off",
    "Translate the settings page to French",
    "Flaky test in the scheduler suite",
    "Thumbnails are generated at the wrong size",
    "Add a metrics endpoint for Prometheus",
    "Typo in the installation guide",
    "Deleting a user leaves orphaned sessions",
    "Support HTTP proxies for outgoing requests",
    "Replace the JSON parser with a faster one",
    "Audit log misses permission changes",
    "Pagination skips the last page",
    "Add keyboard navigation to the editor",
    "Cache invalidation after a schema migration",
    "Allow exporting reports as PDF",
];

/// acme/widgets: 25 issues and pull requests (every 4th is a PR), comments from people and
/// bots, reviews and inline review comments, two releases, a wiki. `clone_url` points at the
/// local repository `git_dir`.
pub fn widgets(base: &str, git_dir: &Path) -> FakeRepo {
    let repo = "acme/widgets";
    let mut r = FakeRepo { repo: repo_json(base, repo, git_dir, true), ..FakeRepo::default() };
    for (k, topic) in TOPICS.iter().enumerate() {
        let n = k as i64 + 1;
        let is_pr = n % 4 == 0;
        let comments = if n == 1 || is_pr { 3 } else { 0 };
        let mut issue = json!({
            "url": format!("{base}/repos/{repo}/issues/{n}"), "repository_url": format!("{base}/repos/{repo}"),
            "html_url": format!("https://github.com/{repo}/{}/{n}", if is_pr {"pull"} else {"issues"}),
            "id": 1000 + n, "node_id": format!("I_{n}"), "number": n, "title": topic,
            "user": user(if n % 3 == 0 { "grace" } else { "ada" }, 7 + (n as u64 % 3)),
            "labels": if n % 5 == 0 { json!([{"id": 1, "node_id": "L_1", "name": "bug", "color": "d73a4a", "default": true, "description": "Something isn't working"}]) } else { json!([{"id": 2, "node_id": "L_2", "name": "enhancement", "color": "a2eeef", "default": true, "description": null}]) },
            "state": if n % 2 == 0 { "closed" } else { "open" },
            "state_reason": if n % 2 == 0 { json!("completed") } else { Value::Null },
            "locked": false, "assignee": null,
            "assignees": if n % 7 == 0 { json!([user("linus", 11)]) } else { json!([]) },
            "milestone": if n <= 5 { json!({"id": 1, "number": 1, "title": "v1.0", "state": "open"}) } else { Value::Null },
            "comments": comments, "created_at": at(n), "updated_at": at(100 + n),
            "closed_at": if n % 2 == 0 { json!(at(100 + n)) } else { Value::Null },
            "author_association": "MEMBER", "active_lock_reason": null,
            "body": format!("{topic}.\n\nSteps to reproduce are in the linked discussion. This affects release 1.{n}. See #{}.", n + 1),
            "reactions": {"url": format!("{base}/repos/{repo}/issues/{n}/reactions"), "total_count": 0, "+1": 0},
            "timeline_url": format!("{base}/repos/{repo}/issues/{n}/timeline"), "performed_via_github_app": null,
        });
        if is_pr {
            issue["pull_request"] = json!({"url": format!("{base}/repos/{repo}/pulls/{n}"), "html_url": format!("https://github.com/{repo}/pull/{n}"),
                "diff_url": format!("https://github.com/{repo}/pull/{n}.diff"), "patch_url": format!("https://github.com/{repo}/pull/{n}.patch"),
                "merged_at": if n % 8 == 0 { json!(at(100 + n)) } else { Value::Null }});
            r.pulls.insert(n, json!({"url": format!("{base}/repos/{repo}/pulls/{n}"), "id": 5000 + n, "number": n, "state": issue["state"],
                "title": topic, "user": issue["user"], "body": issue["body"], "draft": n == 12,
                "merged_at": if n % 8 == 0 { json!(at(100 + n)) } else { Value::Null }, "merge_commit_sha": null,
                "head": {"label": format!("ada:feature-{n}"), "ref": format!("feature-{n}"), "sha": "1111111111111111111111111111111111111111"},
                "base": {"label": "acme:main", "ref": "main", "sha": "2222222222222222222222222222222222222222"},
                "created_at": at(n), "updated_at": at(100 + n)}));
            r.reviews.insert(n, vec![
                json!({"id": 7000 + n, "node_id": format!("R_{n}"), "user": user("linus", 11), "body": format!("Looks right to me: the change to {} is well tested.", topic.to_lowercase()),
                    "state": "APPROVED", "html_url": format!("https://github.com/{repo}/pull/{n}#pullrequestreview-{}", 7000 + n),
                    "submitted_at": at(100 + n), "commit_id": "1111111111111111111111111111111111111111", "author_association": "MEMBER"}),
                json!({"id": 7100 + n, "node_id": format!("R2_{n}"), "user": user("ci-helper[bot]", 99), "body": "Automated review: all checks passed.",
                    "state": "COMMENTED", "html_url": format!("https://github.com/{repo}/pull/{n}#pullrequestreview-{}", 7100 + n),
                    "submitted_at": at(100 + n), "commit_id": "1111111111111111111111111111111111111111", "author_association": "NONE"}),
            ]);
            r.review_comments.insert(n, vec![
                json!({"id": 8000 + n, "node_id": format!("RC_{n}"), "pull_request_review_id": 7000 + n, "user": user("linus", 11),
                    "body": format!("This unwrap can panic when the input for PR {n} is empty; return an error instead."),
                    "path": format!("src/module{}.rs", n % 3), "line": 40 + n, "original_line": 40 + n, "start_line": null, "side": "RIGHT",
                    "diff_hunk": "@@ -38,6 +38,9 @@ fn parse(input: &str) -> Config {\n+    let first = input.lines().next().unwrap();",
                    "in_reply_to_id": null, "commit_id": "1111111111111111111111111111111111111111",
                    "html_url": format!("https://github.com/{repo}/pull/{n}#discussion_r{}", 8000 + n), "created_at": at(100 + n), "updated_at": at(100 + n)}),
                json!({"id": 8100 + n, "node_id": format!("RC2_{n}"), "pull_request_review_id": 7000 + n, "user": user("ada", 7),
                    "body": "Good catch, I switched it to the ? operator and added a test.",
                    "path": format!("src/module{}.rs", n % 3), "line": 40 + n, "original_line": 40 + n, "start_line": null, "side": "RIGHT",
                    "diff_hunk": "@@ -38,6 +38,9 @@ fn parse(input: &str) -> Config {", "in_reply_to_id": 8000 + n,
                    "commit_id": "1111111111111111111111111111111111111111",
                    "html_url": format!("https://github.com/{repo}/pull/{n}#discussion_r{}", 8100 + n), "created_at": at(100 + n), "updated_at": at(100 + n)}),
            ]);
        }
        if comments > 0 {
            r.comments.insert(
                n,
                vec![
                    comment(
                        base,
                        repo,
                        n,
                        9000 + n as u64,
                        "grace",
                        &format!(
                            "I can reproduce this on the latest build: {}.",
                            topic.to_lowercase()
                        ),
                    ),
                    comment(
                        base,
                        repo,
                        n,
                        9100 + n as u64,
                        "dependabot[bot]",
                        "Bumps serde from 1.0.1 to 1.0.2 as part of this change.",
                    ),
                    comment(base, repo, n, 9200 + n as u64, "ada", "+1"),
                ],
            );
        }
        r.issues.push(issue);
    }
    r.releases = vec![
        release(
            base,
            repo,
            1,
            "v1.1.0",
            "Widgets 1.1",
            "Adds YAML configuration and fixes the CSV header bug.",
        ),
        release(base, repo, 2, "v1.0.0", "", "First stable release of the widget service."),
    ];
    r
}

/// acme/gadgets: three issues, one release, no wiki repository although has_wiki is true.
pub fn gadgets(base: &str, git_dir: &Path) -> FakeRepo {
    let repo = "acme/gadgets";
    let mut r = FakeRepo { repo: repo_json(base, repo, git_dir, true), ..FakeRepo::default() };
    for n in 1..=3i64 {
        r.issues.push(json!({"url": format!("{base}/repos/{repo}/issues/{n}"), "html_url": format!("https://github.com/{repo}/issues/{n}"),
            "id": 2000 + n, "number": n, "title": format!("Gadget calibration drifts after {n} hours"), "user": user("ada", 7),
            "labels": [], "state": "open", "state_reason": null, "locked": false, "assignee": null, "assignees": [], "milestone": null,
            "comments": 0, "created_at": at(n), "updated_at": at(200 + n), "closed_at": null, "author_association": "OWNER",
            "body": "The gadget's sensor calibration drifts; recalibrating fixes it for a while.", "performed_via_github_app": null}));
    }
    r.releases = vec![release(
        base,
        repo,
        3,
        "g0.1",
        "Gadgets preview",
        "A first preview of the gadget firmware.",
    )];
    r
}

fn comment(base: &str, repo: &str, n: i64, id: u64, login: &str, body: &str) -> Value {
    json!({"url": format!("{base}/repos/{repo}/issues/comments/{id}"), "html_url": format!("https://github.com/{repo}/issues/{n}#issuecomment-{id}"),
        "issue_url": format!("{base}/repos/{repo}/issues/{n}"), "id": id, "node_id": format!("IC_{id}"), "user": user(login, id),
        "created_at": at(100 + n), "updated_at": at(100 + n), "author_association": "CONTRIBUTOR", "body": body,
        "reactions": {"total_count": 0}, "performed_via_github_app": null})
}

fn release(base: &str, repo: &str, id: u64, tag: &str, name: &str, body: &str) -> Value {
    json!({"url": format!("{base}/repos/{repo}/releases/{id}"), "html_url": format!("https://github.com/{repo}/releases/tag/{tag}"),
        "id": id, "node_id": format!("RE_{id}"), "tag_name": tag, "target_commitish": "main", "name": if name.is_empty() { Value::Null } else { json!(name) },
        "draft": false, "prerelease": tag.starts_with('g'), "created_at": at(300 + id as i64), "published_at": at(300 + id as i64),
        "author": user("ada", 7), "assets": [], "body": body})
}

fn repo_json(base: &str, repo: &str, git_dir: &Path, has_wiki: bool) -> Value {
    let (owner, name) = repo.split_once('/').expect("owner/name");
    json!({"id": 42, "node_id": "R_42", "name": name, "full_name": repo, "private": false,
        "owner": user(owner, 1), "html_url": format!("https://github.com/{repo}"), "description": "A fake repository for tests",
        "fork": false, "url": format!("{base}/repos/{repo}"), "clone_url": git_dir.display().to_string(),
        "git_url": format!("git://github.com/{repo}.git"), "ssh_url": format!("git@github.com:{repo}.git"),
        "default_branch": "main", "has_issues": true, "has_wiki": has_wiki, "has_pages": false, "archived": false,
        "visibility": "public", "pushed_at": "2024-03-10T00:00:00Z", "created_at": "2023-01-01T00:00:00Z", "updated_at": "2024-03-10T00:00:00Z"})
}

/// Both repositories, keyed by owner/name.
pub fn fake_repos(
    base: &str,
    widgets_git: &Path,
    gadgets_git: &Path,
) -> BTreeMap<String, FakeRepo> {
    BTreeMap::from([
        ("acme/widgets".to_string(), widgets(base, widgets_git)),
        ("acme/gadgets".to_string(), gadgets(base, gadgets_git)),
    ])
}
