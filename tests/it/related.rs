//! Cross-references: the edges the indexer builds (every kind, with evidence) on a generated
//! history crawled through the fake GitHub API, `first_release` and `closes` checked against
//! git itself on real histories (this repository, and sharkdp/fd's from ../shared/eval or the
//! folder $HUBDEX_EVAL_DIR names, as a bundle: required under CI, skipped with a line
//! elsewhere), and the `related` tool over them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use hubdex_formats::{Edge, EdgeKind, RowType, Store, read_edges, row_id};
use hubdex_indexer::{RepoConfig, RepoRules, build};
use serde_json::{Value, json};

use crate::fixture::{options, runtime, state};
use crate::github::env;

fn git_at(dir: &Path, args: &[&str], date: &str) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Ada", "-c", "user.email=ada@example.com"])
        .args(args)
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn commit(dir: &Path, file: &str, message: &str, date: &str) -> String {
    std::fs::write(dir.join(file), format!("{message}\n")).unwrap();
    git_at(dir, &["add", "."], date);
    git_at(dir, &["commit", "-q", "-m", message], date);
    git_at(dir, &["rev-parse", "HEAD"], date)
}

/// The edges of `repo` in the store's current snapshot.
fn edges_of(store: &Path, repo: &str, cache: &Path) -> Vec<Edge> {
    runtime().block_on(async {
        let store = Store::open(&store.display().to_string()).unwrap();
        let m = store.latest_manifest().await.unwrap();
        let seg = m.segments.iter().find(|s| s.repo == repo).unwrap();
        let dir = store.fetch_segment(seg, cache).await.unwrap();
        read_edges(&dir.join("edges.parquet")).unwrap()
    })
}

fn targets(edges: &[Edge], kind: EdgeKind, source: &str) -> Vec<String> {
    let mut t: Vec<String> = edges
        .iter()
        .filter(|e| e.kind == kind && e.source == source)
        .map(|e| format!("{} {}", e.target_repo, e.target))
        .collect();
    t.sort();
    t
}

async fn related(st: &std::sync::Arc<hubdex_server::AppState>, args: Value) -> Value {
    hubdex_server::call_tool(st, "related", args.as_object().unwrap()).await.unwrap()
}

fn group<'a>(answer: &'a Value, kind: &str, direction: &str) -> Vec<&'a Value> {
    answer["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["kind"] == json!(kind) && g["direction"] == json!(direction))
        .flat_map(|g| g["edges"].as_array().unwrap())
        .collect()
}

#[test]
fn every_edge_kind_is_built_with_its_evidence_and_related_answers() {
    let e = env();
    let w = e.dir.path().join("git/widgets");
    // A squash merge that fixes an issue and mentions one issue in a repository of the snapshot
    // and one in a repository outside it.
    let squash = commit(
        &w,
        "retry.txt",
        "Rewrite the retry loop (#8)\n\nFixes #5. Also see acme/gadgets#2 and other/elsewhere#4.",
        "2024-02-01T00:00:00Z",
    );
    // A version tag the crawl has no release for: not a release (the crawl's releases rule).
    git_at(&w, &["tag", "v0.9.0"], "2024-02-01T00:00:00Z");
    let shrink = commit(&w, "cache.txt", "Make the cache smaller", "2024-02-02T00:00:00Z");
    git_at(&w, &["tag", "-a", "v1.0.0", "-m", "Widgets 1.0"], "2024-02-03T00:00:00Z");
    let revert = commit(
        &w,
        "cache.txt",
        &format!("Revert \"Make the cache smaller\"\n\nThis reverts commit {shrink}."),
        "2024-02-04T00:00:00Z",
    );
    let reapply = commit(
        &w,
        "cache2.txt",
        "Revert \"Revert \"Make the cache smaller\"\"",
        "2024-02-05T00:00:00Z",
    );
    git_at(&w, &["checkout", "-q", "-b", "feature-16"], "2024-02-06T00:00:00Z");
    let export = commit(&w, "export.txt", "Add the export button", "2024-02-06T00:00:00Z");
    git_at(&w, &["checkout", "-q", "main"], "2024-02-07T00:00:00Z");
    git_at(
        &w,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "Merge pull request #16 from ada/feature-16\n\nExport",
            "feature-16",
        ],
        "2024-02-07T00:00:00Z",
    );
    let merge = git_at(&w, &["rev-parse", "HEAD"], "2024-02-07T00:00:00Z");
    git_at(&w, &["tag", "v1.1.0"], "2024-02-08T00:00:00Z");
    git_at(&w, &["checkout", "-q", "-b", "experiment"], "2024-02-09T00:00:00Z");
    let branch_only = commit(&w, "alloc.txt", "Try a new allocator", "2024-02-09T00:00:00Z");
    git_at(&w, &["tag", "widgets-cli-0.1.0"], "2024-02-09T00:00:00Z");
    git_at(&w, &["checkout", "-q", "main"], "2024-02-10T00:00:00Z");
    // The crawl: PR 8 closes #3 in its description; PR 16 names the commit it landed as.
    e.fake.edit("acme/widgets", |r| {
        for i in r.issues.iter_mut().filter(|i| i["number"] == json!(8)) {
            i["body"] = json!("Rewrites the retry loop.\n\nCloses #3.");
        }
        r.pulls.get_mut(&16).unwrap()["merge_commit_sha"] = json!(export.clone());
    });
    e.build().unwrap();

    let edges = edges_of(&e.store(), "acme/widgets", &e.dir.path().join("read-cache"));
    let c = |sha: &str| format!("commit/{sha}");
    let w_ = |t: &str| format!("acme/widgets {t}");
    assert_eq!(targets(&edges, EdgeKind::Closes, &c(&squash)), [w_("issue/5")]);
    let fixes =
        edges.iter().find(|x| x.kind == EdgeKind::Closes && x.source == c(&squash)).unwrap();
    assert_eq!(fixes.evidence, "Fixes #5. Also see acme/gadgets#2 and other/elsewhere#4.");
    assert_eq!(
        fixes.evidence_id.as_deref(),
        Some(row_id(RowType::Commit, "acme/widgets", &c(&squash), 0).as_str())
    );
    let pr8 = row_id(RowType::PullRequest, "acme/widgets", "issue/8", 0);
    let closes3 =
        edges.iter().find(|x| x.kind == EdgeKind::Closes && x.source == "issue/8").unwrap();
    assert_eq!(
        (closes3.target.as_str(), closes3.evidence_id.as_deref()),
        ("issue/3", Some(pr8.as_str()))
    );
    assert_eq!(targets(&edges, EdgeKind::PullRequestOf, &c(&squash)), [w_("issue/8")]);
    assert_eq!(targets(&edges, EdgeKind::PullRequestOf, &c(&merge)), [w_("issue/16")]);
    assert_eq!(
        targets(&edges, EdgeKind::PullRequestOf, &c(&export)),
        [w_("issue/16")],
        "the crawl's merge commit"
    );
    assert_eq!(targets(&edges, EdgeKind::Reverts, &c(&revert)), [w_(&c(&shrink))]);
    assert_eq!(
        targets(&edges, EdgeKind::Reverts, &c(&reapply)),
        [w_(&c(&revert))],
        "a revert of a revert"
    );
    assert_eq!(
        targets(&edges, EdgeKind::Mentions, &c(&squash)),
        ["acme/gadgets issue/2".to_string(), "other/elsewhere issue/4".to_string()]
    );
    let elsewhere = edges.iter().find(|x| x.target_repo == "other/elsewhere").unwrap();
    assert_eq!(
        elsewhere.target_url.as_deref(),
        Some("https://github.com/other/elsewhere/issues/4")
    );
    assert!(
        targets(&edges, EdgeKind::Mentions, "issue/5").contains(&w_("issue/6")),
        "issue bodies mention their neighbours"
    );
    // shipped_in: the first crawled release whose tag contains the commit.
    assert_eq!(targets(&edges, EdgeKind::ShippedIn, &c(&squash)), [w_("release/v1.0.0")]);
    assert_eq!(targets(&edges, EdgeKind::ShippedIn, &c(&shrink)), [w_("release/v1.0.0")]);
    assert_eq!(targets(&edges, EdgeKind::ShippedIn, &c(&revert)), [w_("release/v1.1.0")]);
    assert_eq!(targets(&edges, EdgeKind::ShippedIn, &c(&export)), [w_("release/v1.1.0")]);
    assert!(targets(&edges, EdgeKind::ShippedIn, &c(&branch_only)).is_empty(), "no tag has it");
    for (issue, tag) in [
        ("issue/5", "v1.0.0"),
        ("issue/8", "v1.0.0"),
        ("issue/3", "v1.0.0"),
        ("issue/16", "v1.1.0"),
    ] {
        assert_eq!(
            targets(&edges, EdgeKind::ShippedIn, issue),
            [w_(&format!("release/{tag}"))],
            "{issue}"
        );
    }

    runtime().block_on(async {
        let st = state(&e.store()).await;
        // An issue: what closed it and where it shipped.
        let a = related(&st, json!({"id": "issue/5", "repo": "acme/widgets"})).await;
        assert_eq!(a["first_release"]["tag"], json!("v1.0.0"), "{a}");
        let closers = group(&a, "closes", "in");
        assert_eq!(closers[0]["entity"], json!(c(&squash)), "{a}");
        assert_eq!(closers[0]["title"], json!("Rewrite the retry loop (#8)"));
        assert_eq!(closers[0]["evidence"], json!(fixes.evidence));
        // The squash commit says only "Fixes #5": it is found by issue 5's own words, which the
        // crawl gave its row (BM25 first; its message and pull request share none of them).
        let args = json!({"query": "memory grows without bound under load", "type": "commit", "repo": "acme/widgets"});
        let a = hubdex_server::call_tool(&st, "search", args.as_object().unwrap()).await.unwrap();
        assert_eq!(a["results"][0]["commit_sha"], json!(squash), "{a}");
        assert_eq!(a["results"][0]["sparse_rank"], json!(1), "{a}");
        // Cross-repository: the gadgets issue is indexed and sees the widgets commit.
        let a = related(&st, json!({"id": "https://github.com/acme/gadgets/issues/2"})).await;
        assert_eq!(a["entity"]["indexed"], json!(true), "{a}");
        assert_eq!(group(&a, "mentions", "in")[0]["repo"], json!("acme/widgets"), "{a}");
        // From the commit's row id: an indexed end and an unresolved one with its URL.
        let id = row_id(RowType::Commit, "acme/widgets", &c(&squash), 0);
        let a = related(&st, json!({"id": id, "kinds": ["mentions", "pull_request_of"]})).await;
        let out = group(&a, "mentions", "out");
        let gadget = out.iter().find(|x| x["repo"] == json!("acme/gadgets")).unwrap();
        assert_eq!(gadget["indexed"], json!(true));
        let other = out.iter().find(|x| x["repo"] == json!("other/elsewhere")).unwrap();
        assert_eq!(other["indexed"], json!(false));
        assert_eq!(other["url"], json!("https://github.com/other/elsewhere/issues/4"));
        assert_eq!(group(&a, "pull_request_of", "out")[0]["type"], json!("pull_request"));
        assert!(group(&a, "shipped_in", "out").is_empty(), "kinds filters");
        // A short SHA, depth 2: the reapply reverts the revert, which reverts the change.
        let a = related(
            &st,
            json!({"id": format!("commit/{}", &reapply[..8]), "repo": "acme/widgets", "depth": 2, "direction": "out"}),
        )
        .await;
        let first = group(&a, "reverts", "out")[0];
        assert_eq!(first["entity"], json!(c(&revert)), "{a}");
        let second: Vec<&Value> = first["related"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["kind"] == json!("reverts"))
            .flat_map(|g| g["edges"].as_array().unwrap())
            .collect();
        assert_eq!(second[0]["entity"], json!(c(&shrink)), "{a}");
        // A file: the commits that changed it.
        let a = related(&st, json!({"id": "file/cache.txt", "repo": "acme/widgets"})).await;
        let changed: Vec<&Value> = group(&a, "changed_in", "in");
        assert_eq!(changed.len(), 2, "{a}");
        // Unknown ids are a clear error.
        let err = hubdex_server::call_tool(&st, "related", json!({"id": "issue/999", "repo": "acme/widgets"}).as_object().unwrap())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no row of acme/widgets issue/999"), "{err}");
        // Search and fetch results say where a commit shipped and how connected it is.
        let a = hubdex_server::call_tool(
            &st,
            "search",
            json!({"query": "Rewrite the retry loop", "type": "commit", "repo": "acme/widgets", "top_k": 1}).as_object().unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(a["results"][0]["first_release"]["tag"], json!("v1.0.0"), "{a}");
        assert_eq!(a["results"][0]["edges"]["closes"], json!(1), "{a}");
        let f = hubdex_server::call_tool(&st, "fetch", json!({"ids": [pr8]}).as_object().unwrap()).await.unwrap();
        assert_eq!(f["results"][0]["first_release"]["tag"], json!("v1.0.0"), "{f}");
        assert!(f["results"][0]["edges"]["closes"].as_u64().unwrap() >= 1, "{f}");
    });
}

/// Version tags by git's creatordate, as `git for-each-ref` gives them.
fn version_tags(dir: &Path) -> HashMap<String, (i64, String)> {
    let version = regex::Regex::new(r"^v?[0-9]+(\.[0-9]+){1,3}([-+][0-9A-Za-z.+-]+)?$").unwrap();
    let out = git_at(
        dir,
        &["for-each-ref", "refs/tags", "--format=%(refname:strip=2) %(creatordate:unix)"],
        "2024-01-01T00:00:00Z",
    );
    out.lines()
        .filter_map(|l| {
            let (name, t) = l.split_once(' ')?;
            let t: i64 = t.parse().ok()?;
            version.is_match(name).then(|| (name.to_string(), (t, name.to_string())))
        })
        .collect()
}

/// What [`check_real_history`] compared with git.
struct HistoryCheck {
    /// Sampled commits that some version tag contains.
    with_release: usize,
    /// Closing references (`fixes #N`) found in messages, each with its edge.
    closers: usize,
    /// `shipped_in` and `closes` edges from commits.
    shipped_edges: usize,
    closes_edges: usize,
}

/// Checks the edges of a real history against git: `first_release` of 30 commits spread over
/// the history equals the earliest (by tag date) version tag `git tag --contains` names (none
/// when no tag contains it), and every commit whose message uses a closing keyword has its
/// `closes` edge. Returns what it compared, for the caller to require.
fn check_real_history(repo_dir: &Path) -> HistoryCheck {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut o = options(&store, repo_dir);
    let cfg = RepoConfig {
        name: repo_dir.display().to_string(),
        types: Some(vec!["commit".into()]),
        exclude_types: vec![],
        exclude_paths: vec![],
        code_max_file_bytes: None,
        strip_doc_comments: false,
        release_tags: None,
    };
    o.rules = BTreeMap::from([(cfg.name.clone(), RepoRules::new(&cfg).unwrap())]);
    runtime().block_on(build(&o)).unwrap();
    let m = runtime().block_on(async {
        Store::open(&store.display().to_string()).unwrap().latest_manifest().await.unwrap()
    });
    let repo = m.segments[0].repo.clone();
    let edges = edges_of(&store, &repo, &dir.path().join("read-cache"));
    let shipped: HashMap<&str, &str> = edges
        .iter()
        .filter(|e| e.kind == EdgeKind::ShippedIn && e.source.starts_with("commit/"))
        .map(|e| (&e.source["commit/".len()..], &e.target["release/".len()..]))
        .collect();
    let tags = version_tags(repo_dir);
    let all = git_at(repo_dir, &["rev-list", "--all"], "2024-01-01T00:00:00Z");
    let shas: Vec<&str> = all.lines().collect();
    let step = (shas.len() / 30).max(1);
    let mut checked = 0;
    let mut with_release = 0;
    for sha in shas.iter().step_by(step).take(30) {
        let contains = git_at(repo_dir, &["tag", "--contains", sha], "2024-01-01T00:00:00Z");
        let expected = contains.lines().filter_map(|t| tags.get(t)).min().map(|(_, n)| n.as_str());
        assert_eq!(
            shipped.get(sha).copied(),
            expected,
            "first release of {sha} in {}",
            repo_dir.display()
        );
        checked += 1;
        with_release += usize::from(expected.is_some());
    }
    assert_eq!(checked, 30.min(shas.len()));
    let closing =
        regex::Regex::new(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?):?[ \t]+#([0-9]+)").unwrap();
    let log = git_at(repo_dir, &["log", "--all", "--format=%H%x1f%B%x1e"], "2024-01-01T00:00:00Z");
    let mut closers = 0;
    for rec in log.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let (sha, msg) = rec.trim().split_once('\u{1f}').unwrap();
        for m in closing.captures_iter(msg) {
            let want = format!("issue/{}", &m[3]);
            assert!(
                edges.iter().any(|e| e.kind == EdgeKind::Closes
                    && e.source == format!("commit/{sha}")
                    && e.target == want),
                "{sha} says {:?} and has no closes edge to {want}",
                &m[0]
            );
            closers += 1;
        }
    }
    eprintln!(
        "{}: {checked} sampled commits ({with_release} in a release) match git tag --contains; {closers} closing references have their edge",
        repo_dir.display()
    );
    let from_commits = |k: EdgeKind| {
        edges.iter().filter(|e| e.kind == k && e.source.starts_with("commit/")).count()
    };
    HistoryCheck {
        with_release,
        closers,
        shipped_edges: from_commits(EdgeKind::ShippedIn),
        closes_edges: from_commits(EdgeKind::Closes),
    }
}

/// Where sharkdp/fd's history is: `$HUBDEX_EVAL_DIR/fd.bundle`, else `../shared/eval/fd.bundle`
/// beside this checkout (the workflow makes one from GitHub; docs/reliability.md).
fn fd_bundle() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::var_os("HUBDEX_EVAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/eval"))
        .join("fd.bundle")
}

#[test]
fn first_release_and_closes_match_git_on_real_histories() {
    // This repository has no version tag and no closing reference: what it checks is that
    // none is invented (no shipped_in, no closes edge from any commit).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap();
    let own = check_real_history(&root);
    if own.with_release == 0 && own.closers == 0 {
        assert_eq!((own.shipped_edges, own.closes_edges), (0, 0), "edges invented on {root:?}");
    }
    // sharkdp/fd: 2,000 commits, dozens of version tags and closing references.
    let bundle = fd_bundle();
    if !bundle.is_file() {
        // CI (the workflow and .ci/run) always has it: a missing one there is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "{} not found: set HUBDEX_EVAL_DIR to a folder holding fd.bundle (ci.yml makes one)",
            bundle.display()
        );
        eprintln!(
            "SKIPPED the sharkdp/fd half: {} not found (set HUBDEX_EVAL_DIR); only this repository was checked",
            bundle.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fd = dir.path().join("fd");
    let ok = Command::new("git").arg("clone").arg("-q").arg(&bundle).arg(&fd).status().unwrap();
    assert!(ok.success(), "cloning {}", bundle.display());
    let fd_check = check_real_history(&fd);
    assert!(
        fd_check.with_release >= 10,
        "fd: {} sampled commits in a release",
        fd_check.with_release
    );
    assert!(fd_check.closers >= 10, "fd: {} closing references", fd_check.closers);
}

#[test]
fn a_new_tag_alone_publishes_new_shipped_in_edges() {
    let dir = tempfile::tempdir().unwrap();
    let repo = hubdex_tests::make_repo(&dir.path().join("widgets"));
    let store = dir.path().join("store");
    let first = runtime().block_on(build(&options(&store, &repo.dir))).unwrap();
    let before = edges_of(&store, "local/widgets", &dir.path().join("c1"));
    assert!(!before.iter().any(|e| e.kind == EdgeKind::ShippedIn), "no tags yet");
    // No commit, no row changes: only a tag. The segment (and so the snapshot) must change.
    git_at(&repo.dir, &["tag", "v2.0.0"], "2024-03-01T00:00:00Z");
    let second = runtime().block_on(build(&options(&store, &repo.dir))).unwrap();
    assert!(second.published, "a tag alone is a change");
    assert_ne!(first.snapshot, second.snapshot);
    assert_eq!(second.embedded, 0, "no row was embedded again");
    let after = edges_of(&store, "local/widgets", &dir.path().join("c2"));
    let head = git_at(&repo.dir, &["rev-parse", "HEAD"], "2024-03-01T00:00:00Z");
    assert_eq!(
        targets(&after, EdgeKind::ShippedIn, &format!("commit/{head}")),
        ["local/widgets release/v2.0.0"]
    );
    let without_tag: Vec<&Edge> = after.iter().filter(|e| e.kind != EdgeKind::ShippedIn).collect();
    assert_eq!(without_tag.len(), before.len(), "the other edges are as they were");
}

#[test]
fn the_related_command_prints_the_tools_answer_and_refuses_bad_arguments() {
    let f = crate::fixture::fixture();
    let cache = tempfile::tempdir().unwrap();
    let base = ["--store", f.store.to_str().unwrap(), "--cache", cache.path().to_str().unwrap()];
    let run = |extra: &[&str]| crate::bad_input::hubdex(&[&base[..], extra].concat());
    let (code, out, err) = run(&["related", "file/README.md", "--kind", "changed_in", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["entity"]["entity"], json!("file/README.md"), "{v}");
    assert_eq!(v["groups"][0]["kind"], json!("changed_in"), "{v}");
    assert_eq!(v["snapshot"], json!(f.first.snapshot));
    let (code, out, err) = run(&["related", "file/README.md", "--direction", "in", "--limit", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("changed_in (in, 1 of "), "{out}");
    let (code, out, err) = run(&["related", "file/README.md", "--depth", "3"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("argument `depth`: must be an integer from 1 to 2, got 3"), "{err}");
}

/// Regression: within a group the first `limit` edges in index order were kept and then
/// sorted, so "newest first" was the newest of an arbitrary few.
#[test]
fn related_lists_the_newest_of_all_edges_when_there_are_more_than_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let repo = hubdex_tests::make_repo(&dir.path().join("many"));
    // Dates out of commit order, so neither history nor sha order is time order.
    let dates =
        ["2024-03-05", "2024-01-02", "2024-06-09", "2024-02-03", "2024-05-07", "2024-04-01"];
    let mut by_date = BTreeMap::new();
    for (i, d) in dates.iter().enumerate() {
        // Only the message mentions #7: the file's own text does not.
        let at = format!("{d}T00:00:00Z");
        std::fs::write(repo.dir.join(format!("m{i}.txt")), format!("touched {i}\n")).unwrap();
        git_at(&repo.dir, &["add", "."], &at);
        git_at(&repo.dir, &["commit", "-q", "-m", &format!("Touch {i}, see #7")], &at);
        by_date.insert(*d, format!("commit/{}", git_at(&repo.dir, &["rev-parse", "HEAD"], &at)));
    }
    let store = dir.path().join("store");
    runtime().block_on(build(&options(&store, &repo.dir))).unwrap();
    let answer = runtime().block_on(async {
        let st = state(&store).await;
        related(&st, json!({"id": "issue/7", "direction": "in", "kinds": ["mentions"], "limit": 2}))
            .await
    });
    let g = &answer["groups"][0];
    // The six commits, and whatever else of the generated history mentions #7.
    assert!(g["count"].as_u64() >= Some(6) && g["truncated"] == json!(true), "{answer}");
    let listed: Vec<&str> =
        group(&answer, "mentions", "in").iter().map(|e| e["entity"].as_str().unwrap()).collect();
    let newest: Vec<&str> = by_date.values().rev().take(2).map(String::as_str).collect();
    assert_eq!(listed, newest, "{answer}");
}
