//! Bad input never panics: tool errors name the argument and what it allows; the CLI says one
//! clear line and exits non-zero.

use std::process::Command;

use serde_json::{Value, json};

use crate::fixture::{fixture, runtime, state};

/// (tool, arguments, the start of the error): one case per argument and kind of mistake.
const MATRIX: &[(&str, &str, &str)] = &[
    ("search", r#"{"query": ""}"#, "argument `query`: must not be empty"),
    ("search", r#"{}"#, "argument `query`: is required"),
    ("search", r#"{"query": 7}"#, "argument `query`: must be a string, got a number"),
    (
        "search",
        r#"{"query": "x", "top_k": 0}"#,
        "argument `top_k`: must be an integer from 1 to 50, got 0",
    ),
    (
        "search",
        r#"{"query": "x", "top_k": 500}"#,
        "argument `top_k`: must be an integer from 1 to 50, got 500",
    ),
    (
        "search",
        r#"{"query": "x", "top_k": "5"}"#,
        "argument `top_k`: must be an integer from 1 to 50, got a string",
    ),
    (
        "search",
        r#"{"query": "x", "fusion": "best"}"#,
        "argument `fusion`: must be one of rrf, dense_only, sparse_only, got \"best\"",
    ),
    (
        "search",
        r#"{"query": "x", "sort": "oldest"}"#,
        "argument `sort`: must be one of relevance, updated_desc, created_desc",
    ),
    (
        "search",
        r#"{"query": "x", "type": "issues"}"#,
        "argument `type`: unknown type \"issues\"; allowed: issue, pull_request",
    ),
    (
        "search",
        r#"{"query": "x", "type": [1]}"#,
        "argument `type`: must be a string or a list of strings, got a list holding a number",
    ),
    (
        "search",
        r#"{"query": "x", "state": "done"}"#,
        "argument `state`: must be one of open, closed, merged, all",
    ),
    (
        "search",
        r#"{"query": "x", "labels": {"a": 1}}"#,
        "argument `labels`: must be a string or a list of strings, got an object",
    ),
    ("search", r#"{"query": "x", "milestone": ""}"#, "argument `milestone`: must not be empty"),
    (
        "search",
        r#"{"query": "x", "assignee": 3}"#,
        "argument `assignee`: must be a string, got a number",
    ),
    (
        "search",
        r#"{"query": "x", "author": true}"#,
        "argument `author`: must be a string, got a boolean",
    ),
    ("search", r#"{"query": "x", "path_prefix": ""}"#, "argument `path_prefix`: must not be empty"),
    (
        "search",
        r#"{"query": "x", "files_glob": "src/[a"}"#,
        "argument `files_glob`: is not a valid glob",
    ),
    (
        "search",
        r#"{"query": "x", "since": "yesterday"}"#,
        "argument `since`: must be an ISO 8601 date or date-time",
    ),
    (
        "search",
        r#"{"query": "x", "until": "2024-13-45"}"#,
        "argument `until`: must be an ISO 8601 date or date-time",
    ),
    (
        "search",
        r#"{"query": "x", "since": "2024-05-01", "until": "2024-04-01"}"#,
        "argument `since`: must be before until",
    ),
    (
        "search",
        r#"{"query": "x", "rerank": "yes"}"#,
        "argument `rerank`: must be true or false, got a string",
    ),
    (
        "search",
        r#"{"query": "x", "snapshot": "../etc"}"#,
        "argument `snapshot`: \"../etc\" is not a snapshot id",
    ),
    (
        "search",
        r#"{"query": "x", "snapshot": "20200101T000000Z-00000000"}"#,
        "argument `snapshot`: no snapshot 20200101T000000Z-00000000 in this store",
    ),
    (
        "search",
        r#"{"query": "x", "colour": "red"}"#,
        "argument `colour`: unknown argument; allowed: query, top_k, fusion, sort, rerank, snapshot, repo, type",
    ),
    ("scan", r#"{"limit": 0}"#, "argument `limit`: must be an integer from 1 to 200, got 0"),
    ("scan", r#"{"limit": 201}"#, "argument `limit`: must be an integer from 1 to 200, got 201"),
    (
        "scan",
        r#"{"order": "oldest"}"#,
        "argument `order`: must be one of updated_desc, created_desc",
    ),
    (
        "scan",
        r#"{"since": "2024-02-30"}"#,
        "argument `since`: must be an ISO 8601 date or date-time",
    ),
    (
        "scan",
        r#"{"cursor": "not-a-cursor"}"#,
        "argument `cursor`: is not a cursor this server gave out",
    ),
    ("scan", r#"{"type": "nope"}"#, "argument `type`: unknown type \"nope\""),
    ("fetch", r#"{}"#, "argument `ids`: is required: 1 to 50 row ids"),
    ("fetch", r#"{"ids": []}"#, "argument `ids`: is required: 1 to 50 row ids"),
    (
        "fetch",
        r#"{"ids": 5}"#,
        "argument `ids`: must be a string or a list of strings, got a number",
    ),
    ("fetch", FIFTY_ONE_IDS, "argument `ids`: takes at most 50 ids, got 51"),
    ("read_span", r#"{"repo": "local/widgets"}"#, "argument `path`: is required"),
    ("grep", r#"{"pattern": "fn (("}"#, "argument `pattern`: is not a valid regex"),
    ("grep", r#"{"pattern": "(a{1000}){1000}"}"#, "argument `pattern`: is not a valid regex"),
    (
        "grep",
        r#"{"pattern": "x", "files_glob": "a[b"}"#,
        "argument `files_glob`: is not a valid glob",
    ),
    (
        "grep",
        r#"{"pattern": "x", "context": 6}"#,
        "argument `context`: must be an integer from 0 to 5",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "../../etc/passwd"}"#,
        "argument `path`: must be a relative path inside the repository, without . or .. parts",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "/etc/passwd"}"#,
        "argument `path`: must be a relative path inside the repository",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "docs/./guide.md"}"#,
        "argument `path`: must be a relative path inside the repository",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "src/secret.rs"}"#,
        "argument `path`: src/secret.rs is not an indexed file of local/widgets",
    ),
    (
        "read_span",
        r#"{"repo": "nobody/none", "path": "README.md"}"#,
        "argument `repo`: nobody/none is not in snapshot",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "README.md", "start_line": 0}"#,
        "argument `start_line`: must be an integer from 1",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "README.md", "start_line": 5, "end_line": 2}"#,
        "argument `end_line`: must be at least start_line (5), got 2",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "README.md", "start_line": 1, "end_line": 1000}"#,
        "argument `end_line`: spans at most 400 lines",
    ),
    (
        "read_span",
        r#"{"repo": "local/widgets", "path": "README.md", "start_line": 900}"#,
        "argument `start_line`: README.md has 11 lines, start_line is 900",
    ),
    ("related", r#"{}"#, "argument `id`: is required"),
    ("related", r#"{"id": " "}"#, "argument `id`: must not be empty"),
    ("related", r#"{"id": 5}"#, "argument `id`: must be a string, got a number"),
    ("related", r#"{"id": "issue/1", "extra": 1}"#, "argument `extra`: unknown argument"),
    (
        "related",
        r#"{"id": "issue/1", "depth": 3}"#,
        "argument `depth`: must be an integer from 1 to 2, got 3",
    ),
    (
        "related",
        r#"{"id": "issue/1", "limit": 0}"#,
        "argument `limit`: must be an integer from 1 to 100, got 0",
    ),
    (
        "related",
        r#"{"id": "issue/1", "direction": "sideways"}"#,
        "argument `direction`: must be one of out, in, both, got \"sideways\"",
    ),
    (
        "related",
        r#"{"id": "issue/1", "kinds": ["fixes"]}"#,
        "argument `kinds`: must name kinds among closes",
    ),
    (
        "related",
        r#"{"id": "issue/1", "kinds": 7}"#,
        "argument `kinds`: must be a string or a list of strings",
    ),
    ("related", r#"{"id": "issue/1", "repo": "widgets"}"#, "argument `repo`: must be owner/name"),
    ("related", r#"{"id": "issue/abc"}"#, "argument `id`: \"issue/abc\" names no issue number"),
    ("related", r#"{"id": "commit/zzzzzzz"}"#, "argument `id`: \"zzzzzzz\" is not a commit SHA"),
    ("related", r#"{"id": "cmt_nope"}"#, "argument `id`: no row has id \"cmt_nope\""),
    ("related", r#"{"id": "issue/424242"}"#, "argument `id`: snapshot "),
    (
        "related",
        r#"{"id": "https://github.com/o/r/wiki/Home"}"#,
        "argument `id`: \"https://github.com/o/r/wiki/Home\" is not an issue, pull request, commit",
    ),
    (
        "related",
        r#"{"id": "issue/1", "snapshot": 5}"#,
        "argument `snapshot`: must be a string, got a number",
    ),
    ("index_stats", r#"{"snapshot": 5}"#, "argument `snapshot`: must be a string, got a number"),
];

const FIFTY_ONE_IDS: &str = r#"{"ids": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u","v","w","x","y","z","a1","b1","c1","d1","e1","f1","g1","h1","i1","j1","k1","l1","m1","n1","o1","p1","q1","r1","s1","t1","u1","v1","w1","x1","y1"]}"#;

#[test]
fn every_bad_argument_is_a_tool_error_naming_it() {
    let f = fixture();
    runtime().block_on(async {
        let st = state(&f.store).await;
        for (tool, args, expect) in MATRIX {
            let map = serde_json::from_str::<Value>(args).unwrap().as_object().unwrap().clone();
            let err = hubdex_server::call_tool(&st, tool, &map)
                .await
                .expect_err(&format!("{tool} {args} must fail"));
            assert!(
                err.to_string().starts_with(expect),
                "{tool} {args}:\n  got  {err}\n  want {expect}…"
            );
        }
    });
}

#[test]
fn every_bad_argument_over_rest_is_a_400_never_a_500() {
    let (_server, port) = crate::mcp_clients::http_server(&[]);
    for (tool, args, expect) in MATRIX {
        let path = if *tool == "index_stats" { continue } else { format!("/v1/{tool}") };
        let (status, body) = crate::http::post(port, &path, args, &[]);
        assert_eq!(status, 400, "{tool} {args}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(expect),
            "{tool} {args}: {body}"
        );
    }
}

/// Every tool the server lists, probed without a token, with an unknown one and with an
/// expired one, over REST and MCP, on a server that has scoped tokens: 401 each time, never an
/// answer.
#[test]
fn every_tool_without_a_valid_token_is_refused_when_tokens_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let mut tokens = hubdex_server::TokensFile::default();
    let expired = tokens.add("old", &["*".into()], &[], Some("2099-01-01")).unwrap();
    // It ran out since (a token cannot be added already expired).
    tokens.token[0].expires = Some("2020-01-01".into());
    tokens.save(&file).unwrap();
    let (_server, port) =
        crate::mcp_clients::http_server(&["--tokens-file", file.to_str().unwrap()]);
    let expired = format!("Bearer {expired}");
    let probes: [&[(&str, &str)]; 3] = [
        &[],
        &[("Authorization", "Bearer hdx_not_a_token")],
        &[("Authorization", expired.as_str())],
    ];
    for spec in hubdex_server::tool_specs() {
        let tool = spec.name;
        let (method, path) = match tool {
            "index_stats" => ("GET", "/v1/stats".to_string()),
            t => ("POST", format!("/v1/{t}")),
        };
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}})
        .to_string();
        for headers in probes {
            let (status, body) = crate::http::request(port, method, &path, "{}", headers);
            assert_eq!(status, 401, "REST {tool} {headers:?}: {body}");
            let mut mcp = vec![("Accept", "application/json, text/event-stream")];
            mcp.extend_from_slice(headers);
            let (status, body) = crate::http::post(port, "/mcp", &call, &mcp);
            assert_eq!(status, 401, "MCP {tool} {headers:?}: {body}");
            assert!(!body.contains("snapshot"), "nothing of the index in a refusal: {body}");
        }
    }
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

pub(crate) fn hubdex(args: &[&str]) -> (i32, String, String) {
    hubdex_with_env(args, &[])
}

/// [`hubdex`] with `env` set on top of this process's environment.
fn hubdex_with_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(hubdex_tests::bin("hubdex"));
    let out = command.args(args).envs(env.iter().copied()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn pinning_an_unknown_snapshot_or_unpinning_an_unpinned_one_is_one_clear_line() {
    let store = fixture().store.to_str().unwrap().to_string();
    for (args, expect) in [
        (
            vec!["pin", "20990101T000000Z-deadbeef"],
            "snapshot 20990101T000000Z-deadbeef is not in store",
        ),
        (vec!["unpin", fixture().first.snapshot.as_str()], "is not pinned"),
    ] {
        let mut all = vec!["--store", store.as_str()];
        all.extend(args.iter().copied());
        let (code, _, stderr) = hubdex(&all);
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
    let (code, stdout, _) = hubdex(&["--store", store.as_str(), "snapshots"]);
    assert_eq!(code, 0);
    assert!(stdout.contains(&format!("{} (current)", fixture().first.snapshot)), "{stdout}");
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
fn an_empty_environment_variable_counts_as_unset_and_an_empty_argument_does_not() {
    // A workflow passes an empty string for every repository variable it does not define.
    let f = fixture();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let (code, _, stderr) = hubdex_with_env(args, env);
        (code, stderr)
    };
    let store = f.store.to_str().unwrap();
    let empty = [
        ("HUBDEX_RERANK_MODEL", ""),
        ("HUBDEX_EMBED_SESSIONS", ""),
        ("HUBDEX_GITHUB_API", ""),
        ("HUBDEX_TOKENS_FILE", ""),
    ];
    let (code, stderr) = run(
        &["query", "exponential backoff", "--top-k", "1"],
        &[&empty[..], &[("HUBDEX_STORE", store)]].concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    // Unset, a required option is missing (not a tokens file called "").
    let (code, stderr) = run(&["token", "list"], &empty);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--tokens-file"), "{stderr}");
    // Given on the command line, an empty value is still one, and an error.
    let (code, stderr) = run(&["--store", "", "query", "x"], &[("HUBDEX_STORE", store)]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(r#"store URL "" is not valid"#), "{stderr}");
}

/// hubdex-index's store: an empty `$HUBDEX_STORE` leaves hubdex.toml's store in force, and an
/// empty store there leaves the default (`./.hubdex/store`), each found by where `gc` makes it.
#[test]
fn an_empty_store_variable_leaves_hubdex_toml_in_force_and_an_empty_one_there_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let gc = |config: &str| {
        let out = Command::new(hubdex_tests::bin("hubdex-index"))
            .args(["gc", "--keep", "1", "--config", config])
            .env("HUBDEX_STORE", "")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    std::fs::write(dir.path().join("named.toml"), "store = \"from-toml\"\n").unwrap();
    std::fs::write(dir.path().join("empty.toml"), "store = \"\"\n").unwrap();
    gc("named.toml");
    assert!(dir.path().join("from-toml").is_dir(), "hubdex.toml's store was not used");
    assert!(!dir.path().join(".hubdex").exists(), "the default store was used");
    gc("empty.toml");
    assert!(dir.path().join(".hubdex/store").is_dir(), "the default store was not used");
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
    // Without --json: the text the MCP tool sends, rendered from the same answer.
    let (code, text, stderr) = hubdex(&[
        "--store",
        f.store.to_str().unwrap(),
        "query",
        "exponential backoff",
        "--type",
        "commit",
        "--top-k",
        "2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let first = format!("2 results from snapshot {}", v["snapshot"].as_str().unwrap());
    assert!(text.starts_with(&first), "{text}");
    let line = format!("1. [commit] {} ", r["title"].as_str().unwrap());
    assert!(
        text.contains(&line) && text.contains(&format!("id={}", r["id"].as_str().unwrap())),
        "{text}"
    );
    let sha = &r["commit_sha"].as_str().unwrap()[..12];
    assert!(text.contains(&format!("commit {sha}")), "{text}");
}

/// `--version` said where the runtime and model are, and exited 0 when either could not be
/// used: a broken install looked healthy to a script that checks the exit code.
#[test]
fn version_exits_non_zero_naming_a_runtime_or_model_that_cannot_be_used() {
    let dir = tempfile::tempdir().unwrap();
    let no_lib = dir.path().join("libonnxruntime.so");
    let no_model = dir.path().join("no-model");
    let empty_model = dir.path().join("empty-model");
    for binary in ["hubdex", "hubdex-index"] {
        let run = |env: &[(&str, &str)]| {
            let out = Command::new(hubdex_tests::bin(binary))
                .arg("--version")
                .envs(env.iter().copied())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), err)
        };
        let (code, out, err) = run(&[]);
        assert_eq!(code, Some(0), "{binary}: {out}{err}");
        assert!(out.starts_with(&format!("{binary} ")) && err.is_empty(), "{out}{err}");
        let (code, out, err) = run(&[("ORT_DYLIB_PATH", no_lib.to_str().unwrap())]);
        assert_eq!(code, Some(1), "{binary}: {out}{err}");
        assert!(out.contains("onnx runtime: not loaded"), "{out}");
        assert!(err.contains("ONNX Runtime library cannot be used"), "{err}");
        // No such directory: every place looked at is named, the variable's value among them.
        let (code, _, err) = run(&[("HUBDEX_MODEL_DIR", no_model.to_str().unwrap())]);
        assert_eq!(code, Some(1), "{binary}: {err}");
        assert!(err.contains("no model: looked at"), "{err}");
        assert!(err.contains(&format!("$HUBDEX_MODEL_DIR = {}", no_model.display())), "{err}");
        // A directory without the files: each missing file is named.
        std::fs::create_dir_all(&empty_model).unwrap();
        let (code, _, err) = run(&[("HUBDEX_MODEL_DIR", empty_model.to_str().unwrap())]);
        assert_eq!(code, Some(1), "{binary}: {err}");
        assert!(err.contains(&format!("{}/model.onnx", empty_model.display())), "{err}");
        assert!(err.contains("tokenizer.json"), "{err}");
    }
}
