//! `grep` over the history (`in: "history"`): the commits `git log -G` finds, in its order,
//! newest or oldest first; the commit that introduced a line with its pull request and first
//! release; a commit past the cap on changed lines said to be capped; path filters on the
//! changed lines; pages; scopes; bad input; and the same answer over REST, the command line and
//! the Python SDK. The repository is made here, a commit at a time, with known lines: one
//! changed three times, a rename, a merge, an import commit over the cap.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use hubdex_formats::RowType;
use hubdex_indexer::{BuildOptions, build};
use hubdex_server::{AppState, Caller};
use hubdex_tests::model_dir;
use serde_json::{Value, json};

use crate::fixture::{runtime, state};

const REPO: &str = "local/history";

struct History {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    store: PathBuf,
}

/// git in `dir` as of day `day` of February 2024 (author and committer time alike).
fn git_on(dir: &Path, day: u32, args: &[&str]) {
    let date = format!("2024-02-{day:02}T12:00:00Z");
    let ok = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

fn write(repo: &Path, path: &str, text: &str) {
    let path = repo.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn commit(repo: &Path, day: u32, message: &str) {
    git_on(repo, day, &["add", "-A"]);
    git_on(repo, day, &["commit", "-q", "-m", message]);
}

fn parser(limit: Option<u32>) -> String {
    let limit = limit.map(|n| format!("const LIMIT: usize = {n};\n")).unwrap_or_default();
    format!("{limit}fn parse_args() -> Args {{\n    Args::default()\n}}\n")
}

/// The repository and its store, built once.
fn history() -> &'static History {
    static H: OnceLock<History> = OnceLock::new();
    H.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("history");
        std::fs::create_dir_all(&repo).unwrap();
        git_on(&repo, 1, &["init", "-q", "-b", "main"]);
        write(&repo, "README.md", "# History\n\nA repository with a known past.\n");
        write(&repo, "src/parse.rs", &parser(None));
        commit(&repo, 1, "Start the parser");
        write(&repo, "src/parse.rs", &parser(Some(10)));
        commit(&repo, 2, "Add the limit (#7)");
        write(&repo, "src/parse.rs", &parser(Some(20)));
        commit(&repo, 3, "Raise the limit");
        git_on(&repo, 3, &["tag", "-a", "v0.1.0", "-m", "v0.1.0"]);
        write(&repo, "src/parse.rs", &parser(Some(30)));
        commit(&repo, 4, "Raise the limit again");
        git_on(&repo, 5, &["mv", "src/parse.rs", "src/args.rs"]);
        commit(&repo, 5, "Rename parse.rs to args.rs");
        git_on(&repo, 6, &["checkout", "-q", "-b", "side"]);
        write(&repo, "docs/notes.md", "# Notes\n\nThe helper parses nothing yet.\n");
        commit(&repo, 6, "Side work: notes on the helper");
        git_on(&repo, 7, &["checkout", "-q", "main"]);
        git_on(&repo, 7, &["merge", "-q", "--no-ff", "-m", "Merge branch side", "side"]);
        // An import commit whose changed lines pass the cap a build keeps of one commit.
        let mut big = String::from("needle_before_the_cap\n");
        for i in 0..40_000 {
            big.push_str(&format!("filler line {i:05} of the import\n"));
        }
        big.push_str("needle_past_the_cap\n");
        assert!(big.len() > hubdex_formats::CHANGES_MAX_BYTES);
        write(&repo, "vendor/big.txt", &big);
        commit(&repo, 8, "Import vendored data");
        let mut no_limit = parser(None);
        no_limit.push_str("// parse_args takes no limit\n");
        write(&repo, "src/args.rs", &no_limit);
        commit(&repo, 9, "Remove the limit");
        let store = dir.path().join("store");
        let mut o =
            BuildOptions::new(&store.display().to_string(), model_dir(), vec![repo.clone()]);
        o.cache = store.with_extension("cache");
        std::thread::scope(|s| s.spawn(|| runtime().block_on(build(&o))).join())
            .expect("the build's thread")
            .expect("build");
        History { _dir: dir, repo, store }
    })
}

async fn call(st: &Arc<AppState>, caller: &Caller, args: Value) -> Result<Value, String> {
    let args = args.as_object().unwrap().clone();
    hubdex_server::call_tool_as(st, caller, "grep", &args).await.map_err(|e| e.to_string())
}

/// The commits of an answer: (SHA, title), in answer order.
fn commits(answer: &Value) -> Vec<(String, String)> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["commit_sha"].as_str().unwrap().to_string(), c["title"].as_str().unwrap().into())
        })
        .collect()
}

/// What `git log -G` finds for `pattern` (git compiles it as a POSIX extended regex; the
/// patterns here mean the same in Rust's syntax), case as written, newest first, with renames
/// as a removal and an addition, as the build reads diffs.
fn git_log_g(repo: &Path, pattern: &str) -> Vec<String> {
    let out = Command::new("git")
        .current_dir(repo)
        .args(["log", "--all", "--no-renames", "--date-order", "--format=%H"])
        .arg(format!("-G{pattern}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn history_grep_finds_the_commits_git_log_g_finds_newest_first() {
    let h = history();
    runtime().block_on(async {
        let st = state(&h.store).await;
        let patterns = [
            "LIMIT",
            "parse_args",
            r"usize = [0-9]0",
            "helper",
            "^fn ",
            r"Args::\w+",
            "needle_before_the_cap",
            r"filler line 0001[0-9]",
            "History|Notes",
            r"^\s+Args",
        ];
        for p in patterns {
            let args = json!({"pattern": p, "in": "history", "case": "sensitive", "limit": 500});
            let answer = call(&st, &Caller::local(), args).await.unwrap();
            let ours: Vec<String> = commits(&answer).into_iter().map(|(sha, _)| sha).collect();
            assert_eq!(ours, git_log_g(&h.repo, p), "{p}: {answer}");
            assert_eq!(answer["commits"], json!(ours.len()), "{p}");
            assert_eq!(answer["exhaustive"], json!(true));
        }
        // The merge changes no line of its own (as `git log -G` without -m): 8 of 9 commits.
        let all =
            call(&st, &Caller::local(), json!({"pattern": ".", "in": "history"})).await.unwrap();
        assert_eq!(all["searched_commits"], json!(8), "{all}");
    });
}

#[test]
fn oldest_first_names_the_commit_that_introduced_a_line_with_its_pull_request_and_release() {
    let h = history();
    runtime().block_on(async {
        let st = state(&h.store).await;
        let args = json!({"pattern": "const LIMIT", "in": "history", "order": "oldest"});
        let answer = call(&st, &Caller::local(), args).await.unwrap();
        let titles: Vec<String> = commits(&answer).into_iter().map(|(_, t)| t).collect();
        assert_eq!(
            titles,
            [
                "Add the limit (#7)",
                "Raise the limit",
                "Raise the limit again",
                "Rename parse.rs to args.rs",
                "Remove the limit"
            ]
        );
        assert_eq!((answer["count"].clone(), answer["commits"].clone()), (json!(8), json!(5)));
        let first = &answer["results"][0];
        assert_eq!(
            first["lines"],
            json!([{"path": "src/parse.rs", "change": "+", "text": "const LIMIT: usize = 10;",
                    "columns": [[0, 11]]}]),
            "{first}"
        );
        assert_eq!(first["pull_request"]["entity"], json!("issue/7"), "{first}");
        assert_eq!(first["first_release"]["tag"], json!("v0.1.0"), "{first}");
        assert_eq!(first["committed_at"], json!("2024-02-02T12:00:00Z"));
        assert_eq!(first["author"], json!("Test <test@example.com>"));
        assert!(first["id"].as_str().is_some(), "{first}");
        // The change is a removal and an addition; no release shipped the later ones.
        let raise = &answer["results"][1]["lines"];
        let sides: Vec<(&str, &str)> = raise
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["change"].as_str().unwrap(), l["text"].as_str().unwrap()))
            .collect();
        assert_eq!(sides, [("-", "const LIMIT: usize = 10;"), ("+", "const LIMIT: usize = 20;")]);
        assert_eq!(answer["results"][2]["first_release"], Value::Null);
        // Newest first is the same commits the other way round.
        let args = json!({"pattern": "const LIMIT", "in": "history"});
        let newest = call(&st, &Caller::local(), args).await.unwrap();
        let mut reversed = commits(&answer);
        reversed.reverse();
        assert_eq!(commits(&newest), reversed);
        // Path filters keep the lines of the files they match.
        let args = json!({"pattern": "const LIMIT", "in": "history", "path_prefix": "src/args"});
        let renamed = call(&st, &Caller::local(), args).await.unwrap();
        let titles: Vec<String> = commits(&renamed).into_iter().map(|(_, t)| t).collect();
        assert_eq!(titles, ["Remove the limit", "Rename parse.rs to args.rs"]);
        assert_eq!(renamed["count"], json!(2), "{renamed}");
        let args = json!({"pattern": "Notes|History", "in": "history", "files_glob": "docs/**"});
        let docs = call(&st, &Caller::local(), args).await.unwrap();
        let titles: Vec<String> = commits(&docs).into_iter().map(|(_, t)| t).collect();
        assert_eq!(titles, ["Side work: notes on the helper"]);
    });
}

#[test]
fn a_commit_past_the_cap_says_how_many_lines_it_hid_and_pages_cover_every_commit_once() {
    let h = history();
    runtime().block_on(async {
        let st = state(&h.store).await;
        let local = Caller::local();
        let before =
            call(&st, &local, json!({"pattern": "needle_before_the_cap", "in": "history"}))
                .await
                .unwrap();
        assert_eq!(before["commits"], json!(1), "{before}");
        let hidden = before["results"][0]["hidden_lines"].as_u64().unwrap();
        // 40,002 lines, of which about 1 MiB is kept.
        assert!((5_000..40_002).contains(&hidden), "{before}");
        assert_eq!(before["capped_commits"], json!(1));
        // git finds the line past the cap; the answer cannot, and says a commit was capped.
        assert_eq!(git_log_g(&h.repo, "needle_past_the_cap").len(), 1);
        let past = call(&st, &local, json!({"pattern": "needle_past_the_cap", "in": "history"}))
            .await
            .unwrap();
        assert_eq!((past["commits"].clone(), past["capped_commits"].clone()), (json!(0), json!(1)));
        // Page by page, one commit at a time: every commit once, in the order of one page.
        let args = json!({"pattern": "LIMIT|parse_args|helper", "in": "history", "limit": 500});
        let whole = commits(&call(&st, &local, args.clone()).await.unwrap());
        let mut paged = Vec::new();
        let mut args = json!({"pattern": "LIMIT|parse_args|helper", "in": "history", "limit": 1});
        loop {
            let page = call(&st, &local, args.clone()).await.unwrap();
            assert_eq!(page["returned"], json!(1), "{page}");
            paged.extend(commits(&page));
            match page["cursor"].as_str() {
                Some(c) => args["cursor"] = json!(c),
                None => break,
            }
        }
        assert_eq!(paged, whole);
        assert!(whole.len() >= 5);
        // A cursor of the history does not continue a grep of the files.
        let page = call(&st, &local, json!({"pattern": "LIMIT", "in": "history", "limit": 1}))
            .await
            .unwrap();
        let cursor = page["cursor"].as_str().unwrap();
        let err = call(&st, &local, json!({"pattern": "LIMIT", "limit": 1, "cursor": cursor}))
            .await
            .unwrap_err();
        assert!(err.contains("argument `cursor`"), "{err}");
    });
}

#[test]
fn a_scoped_caller_greps_the_history_it_may_read_and_bad_arguments_are_named() {
    let h = history();
    runtime().block_on(async {
        let st = state(&h.store).await;
        let scoped = |repos: &[&str], types: &[RowType]| {
            crate::fixture::scoped_caller("scoped", repos, types)
        };
        let args = json!({"pattern": "LIMIT", "in": "history"});
        let everyone = call(&st, &Caller::local(), args.clone()).await.unwrap();
        let commits_only = call(&st, &scoped(&[REPO], &[RowType::Commit]), args.clone()).await;
        assert_eq!(commits(&commits_only.unwrap()), commits(&everyone));
        for caller in [scoped(&[REPO], &[RowType::Issue]), scoped(&["local/other"], &[])] {
            let none = call(&st, &caller, args.clone()).await.unwrap();
            assert_eq!(
                (none["commits"].clone(), none["searched_commits"].clone()),
                (json!(0), json!(0)),
                "{none}"
            );
        }
        let cases = [
            (
                json!({"pattern": "x", "order": "oldest"}),
                "argument `order`: applies to in: \"history\"",
            ),
            (json!({"pattern": "x", "in": "history", "language": "rust"}), "argument `language`"),
            (json!({"pattern": "x", "in": "history", "context": 2}), "argument `context`"),
            (
                json!({"pattern": "x", "in": "history", "skip_generated": true}),
                "argument `skip_generated`",
            ),
            (
                json!({"pattern": "x", "in": "everything"}),
                "argument `in`: must be one of files, history",
            ),
            (
                json!({"pattern": "x", "in": "history", "order": "random"}),
                "argument `order`: must be one of newest, oldest",
            ),
            (json!({"pattern": "(", "in": "history"}), "argument `pattern`: is not a valid regex"),
        ];
        for (args, want) in cases {
            let err = call(&st, &Caller::local(), args.clone()).await.unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
        }
    });
}

#[test]
fn history_grep_answers_rest_the_command_line_and_the_python_sdk_alike() {
    let h = history();
    let store = h.store.to_str().unwrap();
    let args = json!({"pattern": "const LIMIT", "in": "history", "order": "oldest", "limit": 2});
    let in_process = runtime().block_on(async {
        let st = state(&h.store).await;
        call(&st, &Caller::local(), args.clone()).await.unwrap()
    });
    let (_server, port) = crate::mcp_clients::spawn_http(&["--store", store], &[], &[], None);
    let (status, rest) = crate::http::request(port, "POST", "/v1/grep", &args.to_string(), &[]);
    assert_eq!(status, 200, "{rest}");
    let rest: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(rest["results"], in_process["results"]);
    assert_eq!(rest["cursor"], in_process["cursor"]);
    let bad = json!({"pattern": "x", "in": "history", "context": 1}).to_string();
    let (status, _) = crate::http::request(port, "POST", "/v1/grep", &bad, &[]);
    assert_eq!(status, 400);
    let calls = json!([["grep", args], ["grep", {"pattern": "x", "order": "oldest"}]]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/mcp_calls.py");
    let out = Command::new(hubdex_tests::python())
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg("no-token")
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "python client: {}", String::from_utf8_lossy(&out.stderr));
    let r: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r[0]["is_error"], json!(false), "{}", r[0]);
    assert_eq!(r[0]["structured"]["results"], in_process["results"]);
    assert!(r[0]["text"].as_str().unwrap().contains("src/parse.rs:+const LIMIT: usize = 10;"));
    assert_eq!(r[1]["is_error"], json!(true));
    assert!(r[1]["text"].as_str().unwrap().contains("argument `order`"), "{}", r[1]);
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().to_str().unwrap();
    let (code, out, err) = crate::bad_input::hubdex(&[
        "--store",
        store,
        "--cache",
        cache,
        "grep",
        "const LIMIT",
        "--in",
        "history",
        "--order",
        "oldest",
        "--limit",
        "2",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let cli: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cli["results"], in_process["results"]);
    let (code, out, err) = crate::bad_input::hubdex(&[
        "--store",
        store,
        "--cache",
        cache,
        "grep",
        "--in",
        "history",
        "needle_before",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Import vendored data"), "{out}");
    assert!(out.contains("vendor/big.txt:+needle_before_the_cap"), "{out}");
    assert!(out.contains("changed lines past the cap not searched"), "{out}");
    let shas: BTreeSet<String> =
        commits(&in_process).into_iter().map(|(sha, _)| sha[..12].to_string()).collect();
    assert_eq!(shas.len(), 2);
}
