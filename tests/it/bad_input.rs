//! Bad input never panics: tool errors name the argument and what it allows; the CLI says one
//! clear line and exits non-zero.

use std::process::Command;

use serde_json::{Value, json};

use crate::fixture::{fixture, runtime, state};

fn check(args: Value, expect: &str) {
    let f = fixture();
    let map = args.as_object().unwrap().clone();
    let err = runtime()
        .block_on(async { hubdex_server::call_tool(&state(&f.store).await, "search", &map).await })
        .expect_err("bad input must be a tool error");
    assert_eq!(err.to_string(), expect, "for {args}");
}

#[test]
fn search_arguments_are_checked_one_by_one() {
    check(json!({"query": ""}), "argument `query`: must not be empty");
    check(json!({}), "argument `query`: is required");
    check(json!({"query": 7}), "argument `query`: must be a string, got a number");
    check(
        json!({"query": "x", "top_k": 0}),
        "argument `top_k`: must be an integer from 1 to 50, got 0",
    );
    check(
        json!({"query": "x", "top_k": 500}),
        "argument `top_k`: must be an integer from 1 to 50, got 500",
    );
    check(
        json!({"query": "x", "top_k": "5"}),
        "argument `top_k`: must be an integer from 1 to 50, got a string",
    );
    check(
        json!({"query": "x", "fusion": "best"}),
        "argument `fusion`: must be one of rrf, dense_only, sparse_only, got \"best\"",
    );
    check(
        json!({"query": "x", "type": "issues"}),
        "argument `type`: unknown type \"issues\"; allowed: issue, pull_request, issue_comment, pr_review, \
         pr_review_comment, release, doc, wiki_doc, commit, diff, code",
    );
    check(
        json!({"query": "x", "type": [1]}),
        "argument `type`: must be a string or a list of strings, got a list holding a number",
    );
    check(
        json!({"query": "x", "rerank": "yes"}),
        "argument `rerank`: must be true or false, got a string",
    );
    check(
        json!({"query": "x", "snapshot": "../etc"}),
        "argument `snapshot`: \"../etc\" is not a snapshot id (like 20261129T180000Z-1a2b3c4d)",
    );
    let unknown = "argument `snapshot`: no snapshot 20200101T000000Z-00000000 in this store; the current one is";
    let f = fixture();
    let map =
        json!({"query": "x", "snapshot": "20200101T000000Z-00000000"}).as_object().unwrap().clone();
    let err = runtime()
        .block_on(async { hubdex_server::call_tool(&state(&f.store).await, "search", &map).await })
        .unwrap_err();
    assert!(err.to_string().starts_with(unknown), "{err}");
    check(
        json!({"query": "x", "colour": "red"}),
        "argument `colour`: unknown argument; allowed: query, top_k, fusion, sort, rerank, snapshot, repo, type, \
         state, labels, milestone, assignee, author, path_prefix, files_glob, since, until",
    );
}

#[test]
fn a_filter_that_matches_nothing_is_reported() {
    let f = fixture();
    let map = json!({"query": "widgets", "repo": "widgets", "type": "release"})
        .as_object()
        .unwrap()
        .clone();
    let answer = runtime()
        .block_on(async { hubdex_server::call_tool(&state(&f.store).await, "search", &map).await })
        .unwrap();
    assert_eq!(answer["count"], json!(0));
    assert_eq!(answer["filters_unmatched"], json!(["repo", "type"]));
}

fn hubdex(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(hubdex_tests::bin("hubdex")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_store_that_does_not_exist_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let (code, stdout, stderr) = hubdex(&["--store", missing.to_str().unwrap(), "query", "x"]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!missing.exists(), "querying must not create a store");
}

#[test]
fn a_store_without_a_snapshot_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = hubdex(&["--store", dir.path().to_str().unwrap(), "query", "x"]);
    assert_eq!(code, 1);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("holds no snapshot yet"), "{stderr}");
    let (code, _, stderr) = hubdex(&["--store", dir.path().to_str().unwrap(), "snapshots"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("holds no snapshot yet"), "{stderr}");
}

#[test]
fn the_query_command_rejects_bad_arguments_without_a_panic() {
    let f = fixture();
    let store = f.store.to_str().unwrap();
    for (args, needle) in [
        (vec!["--top-k", "0"], "argument `top_k`"),
        (vec!["--fusion", "best"], "argument `fusion`"),
        (vec!["--type", "nope"], "argument `type`"),
    ] {
        let mut all = vec!["--store", store, "query", "widgets"];
        all.extend(args);
        let (code, _, stderr) = hubdex(&all);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, _, stderr) = hubdex(&["--store", store, "query", ""]);
    assert_eq!(code, 1);
    assert!(stderr.contains("argument `query`: must not be empty"), "{stderr}");
}

#[test]
fn query_json_prints_the_search_tools_object() {
    let f = fixture();
    let (code, stdout, stderr) = hubdex(&[
        "--store",
        f.store.to_str().unwrap(),
        "query",
        "exponential backoff",
        "--json",
        "--type",
        "commit",
        "--top-k",
        "2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["snapshot", "count", "filters_unmatched", "rerank_applied", "results"]);
    assert_eq!(v["count"], json!(2));
    let r = &v["results"][0];
    assert_eq!(r["type"], json!("commit"));
    assert_eq!(r["commit_sha"].as_str().unwrap().len(), 40);
    for k in [
        "id",
        "repo",
        "title",
        "snippet",
        "score",
        "sparse_score",
        "sparse_rank",
        "dense_score",
        "dense_rank",
        "same_entity",
    ] {
        assert!(r.get(k).is_some(), "result lacks {k}: {r}");
    }
}
