//! The GitHub crawler against an in-process fake GitHub REST API: every artifact type,
//! incremental reruns with conditional requests, and rate limits waited out on injected time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use hubdex_formats::{Row, Store, read_rows};
use hubdex_indexer::github::Clock;
use hubdex_indexer::{BuildOptions, BuildReport, build};
use hubdex_tests::fakegh::{FakeGitHub, Fault};
use hubdex_tests::{ghdata, make_repo, model_dir};
use serde_json::json;

use crate::fixture::{runtime, state};

/// Time that passes only when the crawler sleeps: every wait is recorded, none is real.
#[derive(Debug)]
pub(crate) struct FakeClock {
    now: Mutex<DateTime<Utc>>,
    sleeps: Mutex<Vec<Duration>>,
}

#[async_trait]
impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap()
    }
    async fn sleep(&self, d: Duration) {
        self.sleeps.lock().unwrap().push(d);
        *self.now.lock().unwrap() += chrono::Duration::from_std(d).unwrap();
    }
}

pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) fake: FakeGitHub,
    pub(crate) clock: Arc<FakeClock>,
}

pub(crate) fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
}

fn small_repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "Initial pages"]);
}

pub(crate) fn env() -> Env {
    env_at("")
}

fn env_at(prefix: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let widgets = dir.path().join("git/widgets");
    make_repo(&widgets);
    // The wiki lives next to the repository, as GitHub's `<repo>.wiki.git`.
    small_repo(
        &dir.path().join("git/widgets.wiki.git"),
        &[(
            "Home.md",
            "# Widgets wiki\n\nStart here.\n\n## Troubleshooting\n\nIf the daemon will not start, delete the stale lock file.\n",
        )],
    );
    let gadgets = dir.path().join("git/gadgets");
    small_repo(&gadgets, &[("README.md", "# Gadgets\n\nFirmware for gadgets.\n")]);
    let fake = FakeGitHub::start_at(Default::default(), prefix);
    fake.set_repos(ghdata::fake_repos(&fake.base, &widgets, &gadgets));
    let clock = Arc::new(FakeClock { now: Mutex::new(Utc::now()), sleeps: Mutex::new(Vec::new()) });
    Env { dir, fake, clock }
}

impl Env {
    pub(crate) fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub(crate) fn options(&self) -> BuildOptions {
        let mut o = BuildOptions::new(
            &self.store().display().to_string(),
            model_dir(),
            vec![PathBuf::from("acme/widgets"), PathBuf::from("acme/gadgets")],
        );
        o.github_api = self.fake.base.clone();
        o.github_token = Some("ghp_testtoken".into());
        o.clock = self.clock.clone();
        o.cache = self.dir.path().join("cache");
        o
    }

    /// One of the binaries, run as a user runs it against this fake: its own cache, the test
    /// model and runtime.
    pub(crate) fn command(&self, binary: &str) -> Command {
        let mut c = Command::new(hubdex_tests::bin(binary));
        c.env("HUBDEX_CACHE", self.dir.path().join("cli-cache"))
            .env("HUBDEX_MODEL_DIR", model_dir())
            .env("ORT_DYLIB_PATH", hubdex_runtime::runtime_library_path());
        c
    }

    pub(crate) fn build(&self) -> anyhow::Result<BuildReport> {
        runtime().block_on(build(&self.options()))
    }

    fn rows(&self, repo: &str) -> Vec<Row> {
        runtime().block_on(async {
            let store = Store::open(&self.store().display().to_string()).unwrap();
            let m = store.latest_manifest().await.unwrap();
            let seg = m.segments.iter().find(|s| s.repo == repo).unwrap();
            let dir = store.fetch_segment(seg, &self.dir.path().join("read-cache")).await.unwrap();
            read_rows(&dir.join("rows.parquet"), false).unwrap()
        })
    }
}

fn of<'a>(rows: &'a [Row], t: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.kind().as_str() == t).collect()
}

#[test]
fn every_artifact_type_is_crawled_and_bots_and_short_comments_are_not() {
    let e = env();
    let report = e.build().unwrap();
    assert!(report.published);
    let rows = e.rows("acme/widgets");
    assert_eq!(of(&rows, "issue").len(), 19);
    assert_eq!(of(&rows, "pull_request").len(), 6);
    // Issue 1 and each PR have three comments: one kept, one by a bot, one "+1".
    let comments = of(&rows, "issue_comment");
    assert_eq!(comments.len(), 7);
    assert!(comments.iter().all(|c| c.author.as_deref() == Some("grace")));
    assert!(
        !rows.iter().any(|r| r.author.as_deref().is_some_and(|a| a.ends_with("[bot]"))),
        "no bot rows"
    );
    assert!(!rows.iter().any(|r| r.body.trim() == "+1"), "no short comments");
    assert_eq!(of(&rows, "pr_review").len(), 6, "approvals kept, the bot's review dropped");
    let rc = of(&rows, "pr_review_comment");
    assert_eq!(rc.len(), 12);
    let reply = rc.iter().find(|r| r.in_reply_to.is_some()).unwrap();
    assert!(reply.path.as_deref().unwrap().starts_with("src/module"));
    assert!(reply.line_end.is_some());
    assert!(reply.body.contains("@@ -38,6"), "the diff hunk is in the body");
    assert_eq!(of(&rows, "release").len(), 2);
    let untitled =
        of(&rows, "release").into_iter().find(|r| r.tag.as_deref() == Some("v1.0.0")).unwrap();
    assert_eq!(
        untitled.title.as_deref(),
        Some("v1.0.0"),
        "a release without a name is titled by its tag"
    );
    let wiki = of(&rows, "wiki_doc");
    assert!(
        wiki.iter()
            .any(|r| r.heading_path
                == vec!["Widgets wiki".to_string(), "Troubleshooting".to_string()])
    );
    assert!(of(&rows, "commit").len() > 50, "commits come from the clone");

    let pr8 = of(&rows, "pull_request").into_iter().find(|r| r.number == Some(8)).unwrap();
    assert_eq!(pr8.state.as_deref(), Some("merged"));
    assert_eq!(pr8.base_ref.as_deref(), Some("main"));
    assert_eq!(pr8.head_ref.as_deref(), Some("feature-8"));
    let issue5 = of(&rows, "issue").into_iter().find(|r| r.number == Some(5)).unwrap();
    assert_eq!(issue5.labels, vec!["bug".to_string()]);
    assert_eq!(issue5.milestone.as_deref(), Some("v1.0"));
    assert_eq!(issue5.url.as_deref(), Some("https://github.com/acme/widgets/issues/5"));
    assert!(issue5.refs.contains(&"#6".to_string()));
    let issue7 = of(&rows, "issue").into_iter().find(|r| r.number == Some(7)).unwrap();
    assert_eq!(issue7.assignees, vec!["linus".to_string()]);
    assert!(
        comments.iter().all(|c| c.entity.starts_with("issue/")),
        "comments fold into their thread"
    );

    let gadgets = e.rows("acme/gadgets");
    assert_eq!(of(&gadgets, "issue").len(), 3);
    assert_eq!(of(&gadgets, "release").len(), 1);
    assert!(of(&gadgets, "wiki_doc").is_empty(), "a missing wiki is not an error");

    // Search finds each type.
    runtime().block_on(async {
        let st = state(&e.store()).await;
        let args = json!({"query": "unwrap can panic on empty input", "type": "pr_review_comment", "top_k": 3});
        let a = hubdex_server::call_tool(&st, "search", args.as_object().unwrap()).await.unwrap();
        assert_eq!(a["results"][0]["type"], json!("pr_review_comment"), "{a}");
        let args = json!({"query": "stale lock file", "type": "wiki_doc"});
        let a = hubdex_server::call_tool(&st, "search", args.as_object().unwrap()).await.unwrap();
        assert_eq!(a["results"][0]["title"], json!("Troubleshooting"), "{a}");
        let args = json!({"query": "OAuth login", "repo": "acme/widgets", "state": "merged"});
        let a = hubdex_server::call_tool(&st, "search", args.as_object().unwrap()).await.unwrap();
        assert!(a["results"].as_array().unwrap().iter().all(|r| r["type"] == json!("pull_request") || r["type"].as_str().unwrap().starts_with("pr_") || r["type"] == json!("issue_comment")), "{a}");
    });
}

#[test]
fn a_rerun_with_nothing_changed_makes_only_conditional_requests_and_embeds_nothing() {
    let e = env();
    let first = e.build().unwrap();
    let first_log = e.fake.take_log();
    assert!(
        first_log.len() > 30,
        "the first crawl pages through everything: {} requests",
        first_log.len()
    );
    assert!(first_log.iter().any(|l| l.path.ends_with("/issues") && l.status == 200));
    let again = e.build().unwrap();
    let log = e.fake.take_log();
    assert_eq!(log.len(), 6, "repository, issue list and releases of two repositories: {log:?}");
    assert!(log.iter().all(|l| l.conditional && l.status == 304), "{log:?}");
    assert_eq!(again.embedded, 0);
    assert!(!again.published);
    assert_eq!(again.snapshot, first.snapshot);
}

#[test]
fn one_edited_issue_re_embeds_exactly_its_changed_rows() {
    let e = env();
    e.build().unwrap();
    e.fake.edit("acme/widgets", |r| {
        let i = r.issues.iter_mut().find(|i| i["number"] == json!(3)).unwrap();
        i["body"] =
            json!("Archived projects still appear in search results after the reindex job runs.");
        i["updated_at"] = json!("2024-04-01T00:00:00Z");
    });
    e.fake.take_log();
    let report = e.build().unwrap();
    assert!(report.published);
    assert_eq!(report.embedded, 1, "only the edited issue's own row changed text");
    let rows = e.rows("acme/widgets");
    let i3 = rows.iter().find(|r| r.number == Some(3) && r.kind().as_str() == "issue").unwrap();
    assert!(i3.body.contains("reindex job"));
    assert_eq!(of(&rows, "issue").len(), 19, "untouched issues are carried over");
    assert_eq!(of(&rows, "pr_review_comment").len(), 12);
    let log = e.fake.take_log();
    assert!(
        log.iter().any(|l| l.path == "/repos/acme/widgets/issues" && l.status == 200),
        "{log:?}"
    );
}

/// The GitHub entities (threads, their comments and reviews, releases) of every repository in
/// the store's current snapshot, as (repo, type, entity) — what a rerun carries over.
fn thread_entities(e: &Env) -> std::collections::BTreeSet<(String, String, String)> {
    runtime().block_on(async {
        let store = Store::open(&e.store().display().to_string()).unwrap();
        let m = store.latest_manifest().await.unwrap();
        let mut out = std::collections::BTreeSet::new();
        for seg in &m.segments {
            let dir = store.fetch_segment(seg, &e.dir.path().join("read-cache")).await.unwrap();
            for r in read_rows(&dir.join("rows.parquet"), false).unwrap() {
                if hubdex_indexer::github::carried_kind(r.kind()) {
                    out.insert((r.repo.clone(), r.kind().as_str().to_string(), r.entity.clone()));
                }
            }
        }
        out
    })
}

/// A rerun with another model file: the watermark limits the crawl to what changed since, so
/// every unchanged thread must come from the snapshot before, whatever model made it.
#[test]
fn a_model_change_keeps_every_thread_the_crawl_does_not_see_again() {
    let e = env();
    e.build().unwrap();
    let before = thread_entities(&e);
    let kinds: std::collections::BTreeSet<&str> = before.iter().map(|t| t.1.as_str()).collect();
    assert!(kinds.contains("issue") && kinds.contains("release"), "{kinds:?}");
    let mut o = e.options();
    o.model_dir = hubdex_tests::resaved_model(&e.dir.path().join("model-b"), "re-saved");
    let report = runtime().block_on(build(&o)).unwrap();
    assert!(report.published);
    let after = thread_entities(&e);
    assert_eq!(after, before, "every thread, comment, review and release is kept");
    let model = runtime().block_on(async {
        Store::open(&e.store().display().to_string())
            .unwrap()
            .latest_manifest()
            .await
            .unwrap()
            .model
    });
    let b_sha = hubdex_formats::hash_file(&o.model_dir.join("model.onnx")).unwrap().0;
    assert_eq!(model.model_sha256, b_sha, "the second snapshot is the second model's");
}

/// The same through the staged crawl → embed → publish commands.
#[test]
fn a_model_change_keeps_every_thread_through_the_stage_commands() {
    use hubdex_indexer::{Shard, crawl, embed, publish};
    let e = env();
    e.build().unwrap();
    let before = thread_entities(&e);
    assert!(!before.is_empty());
    let mut o = e.options();
    o.model_dir = hubdex_tests::resaved_model(&e.dir.path().join("model-b"), "re-saved");
    runtime().block_on(async {
        crawl(&o, "run-b", Shard::ALL).await.unwrap();
        embed(&o, "run-b", Shard::ALL).await.unwrap();
        let report = publish(&o, "run-b").await.unwrap();
        assert!(report.published);
    });
    assert_eq!(thread_entities(&e), before, "every thread, comment, review and release is kept");
}

#[test]
fn rate_limits_are_waited_out_as_github_documents() {
    let e = env();
    // The first request meets each limit in turn, then succeeds.
    e.fake.inject([
        Fault::Exhausted { reset_in: 120 },
        Fault::Forbidden,
        Fault::TooMany { retry_after: 30 },
        Fault::BadGateway,
    ]);
    let report = e.build().unwrap();
    assert!(report.published);
    let sleeps: Vec<u64> = e.clock.sleeps.lock().unwrap().iter().map(Duration::as_secs).collect();
    assert_eq!(sleeps.len(), 4, "{sleeps:?}");
    assert!(
        (115..=125).contains(&sleeps[0]),
        "remaining 0 waits for X-RateLimit-Reset: {sleeps:?}"
    );
    assert!(sleeps[1] >= 60, "403 without headers waits at least a minute: {sleeps:?}");
    assert_eq!(sleeps[2], 30, "429 waits Retry-After: {sleeps:?}");
    assert_eq!(sleeps[3], 1, "502 is retried after a short backoff: {sleeps:?}");
    assert_eq!(of(&e.rows("acme/widgets"), "issue").len(), 19);
}

#[test]
fn giving_up_on_a_limit_names_it_and_publishes_nothing() {
    let e = env();
    e.fake.inject(std::iter::repeat_n(Fault::Forbidden, 6));
    let err = e.build().unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("secondary rate limit"), "{msg}");
    assert!(msg.contains("retry after"), "{msg}");
    assert!(msg.contains("nothing was published"), "{msg}");
    assert!(!e.store().join("LATEST").exists(), "nothing is published");
    assert!(!e.store().join("state").exists(), "no cursor moves");
    let sleeps = e.clock.sleeps.lock().unwrap().clone();
    assert!(sleeps.windows(2).all(|w| w[1] >= w[0]), "backoff grows: {sleeps:?}");
}

/// The crawl sends $GITHUB_TOKEN with every API request, and no line the indexer writes holds
/// it, at the most verbose log level; nor does the options' `Debug`.
#[test]
fn the_token_is_sent_and_never_printed() {
    let e = env();
    assert!(!format!("{:?}", e.options()).contains("ghp_testtoken"));
    let out = e
        .command("hubdex-index")
        .args(["build", "acme/widgets", "--github-api", &e.fake.base, "--store"])
        .arg(e.store())
        .env("GITHUB_TOKEN", "ghp_sent_not_printed")
        .env("HUBDEX_LOG", "trace")
        .env("HUBDEX_PROGRESS_SECS", "0")
        .output()
        .unwrap();
    let printed =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{printed}");
    assert!(printed.lines().count() > 20, "trace logging wrote little: {printed}");
    assert!(!printed.contains("ghp_sent_not_printed"), "the token was printed");
    let log = e.fake.take_log();
    assert!(log.len() >= 5, "{log:?}");
    for request in &log {
        let auth = request.authorization.as_deref().unwrap_or("");
        assert!(auth.ends_with(" ghp_sent_not_printed"), "{} sent {auth:?}", request.path);
    }
}

#[test]
fn the_command_line_builds_from_a_config_file_and_queries_by_type() {
    let e = env();
    let config = e.dir.path().join("hubdex.toml");
    std::fs::write(
        &config,
        format!(
            "store = \"{}\"\ngithub_api = \"{}\"\n\n[[repos]]\nname = \"acme/widgets\"\nexclude_types = [\"release\"]\n\n[[repos]]\nname = \"acme/gadgets\"\n",
            e.store().display(),
            e.fake.base
        ),
    )
    .unwrap();
    let run = |bin: &str, args: &[&str]| {
        let out =
            e.command(bin).args(args).env("GITHUB_TOKEN", "ghp_secret_for_cli").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{bin} {args:?}: {stderr}");
        assert!(!stderr.contains("ghp_secret_for_cli"), "the token never appears in output");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    };
    let (_, stderr) = run("hubdex-index", &["build", "--config", config.to_str().unwrap()]);
    assert!(stderr.contains("GitHub: ") && stderr.contains("pr_review_comment"), "{stderr}");
    let store = e.store().display().to_string();
    let (stdout, _) = run(
        "hubdex",
        &[
            "--store",
            &store,
            "query",
            "unwrap can panic on empty input",
            "--type",
            "pr_review_comment",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["results"][0]["type"], json!("pr_review_comment"), "{v}");
    let (stdout, _) = run(
        "hubdex",
        &[
            "--store",
            &store,
            "query",
            "widgets release",
            "--type",
            "release",
            "--repo",
            "acme/widgets",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["count"], json!(0), "releases were excluded by the config: {v}");
    let (_, stderr) = run("hubdex-index", &["build", "--config", config.to_str().unwrap()]);
    assert!(stderr.contains("nothing changed"), "{stderr}");
    assert!(stderr.contains("5 requests (5 conditional, 5 unchanged 304s"), "{stderr}");
}

#[test]
fn an_item_that_failed_is_retried_next_run_and_the_watermark_waits_for_it() {
    let e = env();
    let pr8 = e.fake.state.lock().unwrap().repos["acme/widgets"].pulls[&8].clone();
    e.fake.edit("acme/widgets", |r| {
        r.pulls.remove(&8);
    });
    let first = e.build().unwrap();
    assert!(first.published, "one failed item does not stop the rest");
    let rows = e.rows("acme/widgets");
    assert!(!rows.iter().any(|r| r.number == Some(8)), "PR 8 failed and is not indexed yet");
    assert_eq!(of(&rows, "pull_request").len(), 5);
    let cursor: serde_json::Value = serde_json::from_slice(
        &std::fs::read(e.store().join("state/acme/widgets/cursor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cursor["pending"][0]["number"], json!(8), "{cursor}");
    assert_eq!(
        cursor["watermark"],
        json!("2024-03-05T12:00:00Z"),
        "the watermark stops at PR 8's update time"
    );

    e.fake.edit("acme/widgets", |r| {
        r.pulls.insert(8, pr8);
    });
    let second = e.build().unwrap();
    assert!(second.published);
    let rows = e.rows("acme/widgets");
    assert_eq!(of(&rows, "pull_request").len(), 6, "PR 8 is indexed on the next run");
    let cursor: serde_json::Value = serde_json::from_slice(
        &std::fs::read(e.store().join("state/acme/widgets/cursor.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cursor["pending"], json!([]));
}

#[test]
fn a_github_enterprise_base_url_works_the_same_way() {
    // This fake answers only under /api/v3: a request that lost the prefix gets a 404.
    let e = env_at("/api/v3");
    assert!(e.fake.base.ends_with("/api/v3"));
    let report = e.build().unwrap();
    assert!(report.published);
    assert_eq!(of(&e.rows("acme/widgets"), "issue").len(), 19);
    let log = e.fake.take_log();
    assert!(log.iter().all(|l| l.status == 200), "every request reached the prefixed API: {log:?}");
}

/// One per-repository step serves both paths: a GitHub build through `build` and through the
/// stage commands (crawl, embed, publish) gives the same rows and vectors, on a first crawl and
/// on the incremental one after an issue is edited (threads carried from the previous snapshot).
#[test]
fn a_github_build_and_the_stage_commands_give_the_same_rows() {
    use hubdex_indexer::{Shard, crawl, embed, publish};
    let e = env();
    let mut staged = e.options();
    staged.store = e.dir.path().join("staged-store").display().to_string();
    staged.cache = e.dir.path().join("staged-cache");
    let through_stages = |run: &str| {
        runtime().block_on(async {
            crawl(&staged, run, Shard::ALL).await.unwrap();
            embed(&staged, run, Shard::ALL).await.unwrap();
            assert!(publish(&staged, run).await.unwrap().published);
        })
    };
    let compare = |when: &str| {
        let one = crate::stages::snapshot_rows(&e.store());
        let other = crate::stages::snapshot_rows(std::path::Path::new(&staged.store));
        assert_eq!(one.keys().collect::<Vec<_>>(), ["acme/gadgets", "acme/widgets"], "{when}");
        assert_eq!(one, other, "{when}: the staged snapshot's rows differ from the build's");
    };
    e.build().unwrap();
    through_stages("run-1");
    compare("first crawl");
    e.fake.edit("acme/widgets", |r| {
        let i = r.issues.iter_mut().find(|i| i["number"] == json!(3)).unwrap();
        i["body"] = json!("Archived projects still appear after the reindex job runs.");
        i["updated_at"] = json!("2024-04-01T00:00:00Z");
    });
    e.build().unwrap();
    through_stages("run-2");
    compare("incremental crawl");
}
