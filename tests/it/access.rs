//! Who may read what: two callers of disjoint scope over a two-repository snapshot see only
//! their repository in every tool — asked by id, URL, path, entity, cursor or pinned snapshot —
//! in process, over REST and over the Python MCP SDK; tokens-file tokens are revoked without a
//! restart; OAuth access tokens are checked against an issuer the test runs itself.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use hubdex_formats::RowType;
use hubdex_server::{AppState, Caller, TokensFile};
use serde_json::{Map, Value, json};

use crate::fixture::{runtime, state};
use crate::github::{Env, env};
use crate::http::request;
use crate::mcp_clients::spawn_http;

const W: &str = "acme/widgets";
const G: &str = "acme/gadgets";

fn caller(name: &str, repos: &[&str], types: &[RowType]) -> Caller {
    crate::fixture::scoped_caller(name, repos, types)
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

async fn call(st: &Arc<AppState>, c: &Caller, tool: &str, args: Value) -> Result<Value, String> {
    hubdex_server::call_tool_as(st, c, tool, &obj(args)).await.map_err(|e| e.to_string())
}

/// The two-repository snapshot, with a widgets commit that mentions a gadgets issue (an edge
/// across the two scopes).
fn two_repos() -> Env {
    let e = env();
    let w = e.dir.path().join("git/widgets");
    commit_file(
        &w,
        "firmware.txt",
        "see gadgets\n",
        "Follow the gadgets firmware\n\nSee acme/gadgets#2.",
    );
    e.build().unwrap();
    e
}

/// Writes `name` in the git repository `repo` and commits it with `message`.
fn commit_file(repo: &Path, name: &str, text: &str, message: &str) {
    std::fs::write(repo.join(name), text).unwrap();
    crate::github::git(repo, &["add", "."]);
    crate::github::git(repo, &["commit", "-q", "-m", message]);
}

/// Every repository an answer's items name (a visible row's own text may mention another
/// repository: that is its content, not a leak).
fn repos_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if (k == "repo") && x.is_string() {
                    out.push(x.as_str().unwrap().to_string());
                }
                repos_in(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| repos_in(x, out)),
        _ => {}
    }
}

fn assert_only(v: &Value, own: &str, what: &str) {
    let mut seen = Vec::new();
    repos_in(v, &mut seen);
    seen.dedup();
    let text: String = v.to_string().chars().take(600).collect();
    assert!(seen.iter().all(|r| r == own), "{what}: names {seen:?}, not only {own}: {text}");
}

#[test]
fn scoped_callers_see_only_their_repository_in_every_tool() {
    let e = two_repos();
    let first = runtime().block_on(async {
        let st = state(&e.store()).await;
        st.current.load().id().to_string()
    });
    // A second snapshot, so the first can be asked for by id (pinned).
    e.build().unwrap();
    runtime().block_on(async {
        let st = state(&e.store()).await;
        let all = Caller::local();
        let a = caller("team-w", &[W], &[]);
        let b = caller("team-g", &["acme/gad*"], &[]);
        // What exists, from the unscoped view.
        let everything = call(&st, &all, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
        let ids_of = |repo: &str| -> Vec<String> {
            everything["results"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["repo"] == json!(repo))
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        };
        let (w_ids, g_ids) = (ids_of(W), ids_of(G));
        assert!(!w_ids.is_empty() && !g_ids.is_empty());

        for (c, own, other, other_ids) in [(&a, W, G, &g_ids), (&b, G, W, &w_ids)] {
            let who = &c.name;
            // index_stats: only the own repository, its rows, no build totals.
            let s = call(&st, c, "index_stats", json!({})).await.unwrap();
            assert_only(&s, own, &format!("{who} index_stats"));
            assert_eq!(s["repos"].as_array().unwrap().len(), 1);
            assert_eq!(s["rows"], s["repos"][0]["rows"], "{who}: rows count the own repository");
            assert_eq!(s["build"], Value::Null, "{who}: build totals count hidden rows");
            // search and scan, also when asking for the other repository by name: the answer is
            // the one a repository the snapshot does not hold gets.
            for q in ["gadgets firmware", "widgets retry", "README"] {
                let r = call(&st, c, "search", json!({"query": q, "top_k": 50})).await.unwrap();
                assert_only(&r, own, &format!("{who} search {q}"));
            }
            let hidden = call(&st, c, "search", json!({"query": "firmware", "repo": other})).await.unwrap();
            let absent = call(&st, c, "search", json!({"query": "firmware", "repo": "acme/nothing"})).await.unwrap();
            assert_eq!(hidden["results"], json!([]));
            assert_eq!(hidden["filters_unmatched"], absent["filters_unmatched"], "{who}");
            assert_eq!(hidden["filters_unmatched"], json!(["repo"]), "{who}");
            let sc = call(&st, c, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
            assert_only(&sc, own, &format!("{who} scan"));
            assert!(sc["count"].as_u64().unwrap() > 0);
            // fetch by the other repository's ids: not found, exactly like an unknown id.
            let mut asked: Vec<String> = other_ids.iter().take(40).cloned().collect();
            asked.push("cmt_doesnotexist".into());
            let f = call(&st, c, "fetch", json!({"ids": asked})).await.unwrap();
            assert_eq!(f["results"], json!([]), "{who}: {f}");
            assert_eq!(f["not_found"], json!(asked), "{who}");
            // read_span of the other repository: the words of a repository that is not there.
            let span = |repo: &str| {
                let c = c.clone();
                let st = st.clone();
                let repo = repo.to_string();
                async move { call(&st, &c, "read_span", json!({"repo": repo, "path": "README.md"})).await }
            };
            let hidden = span(other).await.unwrap_err();
            let absent = span("acme/nothing").await.unwrap_err();
            assert_eq!(hidden.replace(other, "R"), absent.replace("acme/nothing", "R"), "{who}");
            // related by entity, URL and row id of the other repository: unknown, same words.
            let unknown = call(&st, c, "related", json!({"id": "issue/2", "repo": other})).await.unwrap_err();
            let nothing = call(&st, c, "related", json!({"id": "issue/2", "repo": "acme/nothing"})).await.unwrap_err();
            assert_eq!(unknown.replace(other, "R"), nothing.replace("acme/nothing", "R"), "{who}");
            let url = format!("https://github.com/{other}/issues/2");
            assert!(call(&st, c, "related", json!({"id": url})).await.is_err(), "{who}");
            let by_id = call(&st, c, "related", json!({"id": other_ids[0]})).await.unwrap_err();
            assert!(by_id.contains("no row has id"), "{who}: {by_id}");
            // An entity id without repo: only one repository is visible, so it is the own one.
            let r = call(&st, c, "related", json!({"id": "issue/1"})).await;
            if let Ok(r) = r {
                assert_only(&r, own, &format!("{who} related issue/1"));
            }
            // A pinned (older) snapshot is scoped the same way.
            let old = call(&st, c, "scan", json!({"since": "2000-01-01", "limit": 200, "snapshot": first})).await.unwrap();
            assert_eq!(old["snapshot"], json!(first));
            assert_only(&old, own, &format!("{who} pinned scan"));
        }

        // The cross-scope edge: widgets' commit mentions gadgets#2; neither side sees the other.
        let commit = call(&st, &all, "search", json!({"query": "Follow the gadgets firmware", "type": "commit", "repo": W, "top_k": 1})).await.unwrap();
        let commit_id = commit["results"][0]["id"].as_str().unwrap().to_string();
        let full = call(&st, &all, "related", json!({"id": commit_id, "kinds": "mentions"})).await.unwrap();
        assert!(full.to_string().contains(G), "the unscoped view has the edge: {full}");
        let seen_by_w = call(&st, &a, "related", json!({"id": commit_id, "kinds": "mentions"})).await.unwrap();
        assert_only(&seen_by_w, W, "widgets' related");
        assert_eq!(seen_by_w["count"], json!(0), "{seen_by_w}");
        let f = call(&st, &a, "fetch", json!({"ids": [commit_id]})).await.unwrap();
        assert_eq!(f["results"][0]["edges"].get("mentions"), None, "hidden edges are not counted: {f}");
        let seen_by_g = call(&st, &b, "related", json!({"id": "issue/2", "direction": "in", "kinds": "mentions"})).await.unwrap();
        assert_only(&seen_by_g, G, "gadgets' related");

        // A cursor made under one scope is refused under another, and works under its own.
        let page = call(&st, &a, "scan", json!({"since": "2000-01-01", "limit": 1})).await.unwrap();
        let cursor = page["cursor"].as_str().unwrap().to_string();
        let next = call(&st, &a, "scan", json!({"since": "2000-01-01", "limit": 1, "cursor": cursor})).await.unwrap();
        assert_only(&next, W, "the next page");
        for other in [&b, &all] {
            let err = call(&st, other, "scan", json!({"since": "2000-01-01", "limit": 1, "cursor": cursor})).await.unwrap_err();
            assert!(err.starts_with("argument `cursor`: was made by another caller"), "{err}");
        }

        // A types scope: issues only.
        let issues = caller("issues-only", &["acme/*"], &[RowType::Issue]);
        let r = call(&st, &issues, "scan", json!({"since": "2000-01-01", "limit": 200})).await.unwrap();
        assert!(r["count"].as_u64().unwrap() > 0);
        assert!(r["results"].as_array().unwrap().iter().all(|x| x["type"] == json!("issue")), "{r}");
        let s = call(&st, &issues, "index_stats", json!({})).await.unwrap();
        for repo in s["repos"].as_array().unwrap() {
            let types: Vec<&String> = repo["rows_per_type"].as_object().unwrap().keys().collect();
            assert!(types.iter().all(|t| *t == "issue"), "{s}");
        }
        let f = call(&st, &issues, "fetch", json!({"ids": [commit_id]})).await.unwrap();
        assert_eq!(f["not_found"], json!([commit_id]));
    });
}

/// A docs-only token reads docs, never code: not a code file's lines (read_span), not its row's
/// id, title or URL (related on `file/<path>` or a blob URL), over the tools and REST.
#[test]
fn a_docs_only_scope_reads_no_code_file_through_read_span_or_related() {
    let e = env();
    let w = e.dir.path().join("git/widgets");
    let lib = "/// Stores a widget.\npub fn store_widget(id: u64) -> bool {\n    id > 0\n}\n";
    commit_file(&w, "lib.rs", lib, "Add the widget store");
    e.build().unwrap();
    runtime().block_on(async {
        let st = state(&e.store()).await;
        let all = Caller::local();
        let docs = caller("docs-only", &["acme/*"], &[RowType::Doc]);
        let code = json!({"repo": W, "path": "lib.rs"});
        let seen = call(&st, &all, "read_span", code.clone()).await.unwrap();
        assert!(seen["text"].as_str().unwrap().contains("store_widget"), "{seen}");
        let err = call(&st, &docs, "read_span", code).await.unwrap_err();
        assert!(err.contains("is not an indexed file"), "{err}");
        let readme = call(&st, &docs, "read_span", json!({"repo": W, "path": "README.md"})).await;
        assert!(readme.unwrap()["text"].as_str().unwrap().contains("Widget service"));

        let related = json!({"id": "file/lib.rs", "repo": W});
        let full = call(&st, &all, "related", related.clone()).await.unwrap();
        assert!(full["entity"]["id"].is_string(), "{full}");
        let code_id = full["entity"]["id"].as_str().unwrap().to_string();
        for id in [related, json!({"id": "https://github.com/acme/widgets/blob/main/lib.rs"})] {
            let err = call(&st, &docs, "related", id).await.unwrap_err();
            assert!(err.contains("holds no row of acme/widgets file/lib.rs"), "{err}");
            assert!(!err.contains(&code_id));
        }
        let doc = call(&st, &docs, "related", json!({"id": "file/README.md", "repo": W})).await;
        assert!(doc.unwrap()["entity"]["id"].is_string());
        let f = call(&st, &docs, "fetch", json!({"ids": [code_id.clone()]})).await.unwrap();
        assert_eq!(f["not_found"], json!([code_id]));

        // A hidden row is refused from its id and the repo column: never decoded, so fetching
        // it costs what fetching an id no row has does (a timing told them apart).
        let decoded =
            || -> u64 { st.current.load().segments.iter().map(|s| s.text.rows_decoded()).sum() };
        let gadgets = caller("team-g", &[G], &[]);
        let before = decoded();
        let missing = "code_AAAAAAAAAAAAAAAAAAAAAA";
        let f =
            call(&st, &gadgets, "fetch", json!({"ids": [code_id.clone(), missing]})).await.unwrap();
        assert_eq!(f["not_found"], json!([code_id, missing]));
        assert_eq!(decoded(), before, "a hidden row was decoded");
        let f = call(&st, &docs, "fetch", json!({"ids": [code_id.clone()]})).await.unwrap();
        assert_eq!(f["not_found"], json!([code_id]));
        assert_eq!(decoded(), before, "a row of a hidden type was decoded");
        let err = call(&st, &gadgets, "related", json!({"id": code_id})).await.unwrap_err();
        assert!(err.contains("no row has id"), "{err}");
        assert_eq!(decoded(), before);
        let own = call(&st, &all, "fetch", json!({"ids": [code_id.clone()]})).await.unwrap();
        assert_eq!(own["count"], json!(1));
        assert!(decoded() > before, "the counter counts");
    });

    // The same token from a tokens file, over REST and the Python MCP SDK.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let out = Command::new(hubdex_tests::bin("hubdex"))
        .args(["token", "add", "docs-only", "--tokens-file"])
        .arg(&file)
        .args(["--repos", "acme/*", "--types", "doc"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let (_server, port) = spawn_http(
        &["--store", e.store().to_str().unwrap()],
        &["--tokens-file", file.to_str().unwrap()],
        &[],
        None,
    );
    let (status, r) = rest(port, &token, "read_span", json!({"repo": W, "path": "lib.rs"}));
    assert_eq!(status, 400, "{r}");
    let (status, r) = rest(port, &token, "read_span", json!({"repo": W, "path": "README.md"}));
    assert_eq!(status, 200, "{r}");
    let (status, r) = rest(port, &token, "related", json!({"id": "file/lib.rs", "repo": W}));
    assert_eq!(status, 400, "{r}");
    let calls = json!([
        ["read_span", {"repo": W, "path": "lib.rs"}],
        ["related", {"id": "file/lib.rs", "repo": W}],
        ["read_span", {"repo": W, "path": "README.md"}],
        ["search", {"query": "store widget", "top_k": 20}],
    ]);
    let reports = python_calls(port, &token, &calls);
    assert_eq!(reports[0]["is_error"], json!(true), "{}", reports[0]);
    assert_eq!(reports[1]["is_error"], json!(true), "{}", reports[1]);
    assert_eq!(reports[2]["is_error"], json!(false), "{}", reports[2]);
    let results = reports[3]["structured"]["results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["type"] == json!("doc")), "{}", reports[3]);
}

/// Adds a token to a tokens file with the CLI; returns the token it printed.
fn add_token(file: &Path, name: &str, repos: &[&str]) -> String {
    let out = Command::new(hubdex_tests::bin("hubdex"))
        .args(["token", "add", name, "--tokens-file"])
        .arg(file)
        .arg("--repos")
        .args(repos)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn rest(port: u16, token: &str, tool: &str, body: Value) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str())];
    let (status, text) = if tool == "stats" {
        request(port, "GET", "/v1/stats", "", &headers)
    } else {
        request(port, "POST", &format!("/v1/{tool}"), &body.to_string(), &headers)
    };
    (status, serde_json::from_str(&text).unwrap_or(json!({"raw": text})))
}

/// Every tool over the Python MCP SDK with a bearer token; one report per call.
fn python_calls(port: u16, token: &str, calls: &Value) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/mcp_calls.py");
    let out = Command::new(hubdex_tests::python())
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .arg(token)
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "python client: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

#[test]
fn two_tokens_over_rest_and_the_python_sdk_see_disjoint_repositories_and_a_revoke_needs_no_restart()
{
    let e = two_repos();
    // An older snapshot, pinned: a token reading it by id still sees only its repository.
    let first =
        runtime().block_on(async { state(&e.store()).await.current.load().id().to_string() });
    e.build().unwrap();
    let pin = Command::new(hubdex_tests::bin("hubdex"))
        .args(["--store", e.store().to_str().unwrap(), "pin", &first])
        .output()
        .unwrap();
    assert!(pin.status.success(), "{}", String::from_utf8_lossy(&pin.stderr));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let tw = add_token(&file, "team-w", &[W]);
    let tg = add_token(&file, "team-g", &["acme/gad*"]);
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, "admin-secret-token\n").unwrap();
    let log = dir.path().join("server.log");
    let (_server, port) = spawn_http(
        &["--store", e.store().to_str().unwrap()],
        &["--tokens-file", file.to_str().unwrap(), "--token-file", admin_file.to_str().unwrap()],
        &[("HUBDEX_LOG_FORMAT", "json")],
        Some(std::fs::File::create(&log).unwrap()),
    );
    // No token, a wrong one: 401 on every tool.
    for tool in ["search", "scan", "fetch", "read_span", "related", "stats"] {
        assert_eq!(rest(port, "", tool, json!({})).0, 401, "{tool}");
        assert_eq!(rest(port, "hdx_wrong", tool, json!({})).0, 401, "{tool}");
    }
    // What each token can get by itself: its row ids and a scan cursor, to try with the other.
    let mut ids = std::collections::HashMap::new();
    let mut cursors = std::collections::HashMap::new();
    for (token, own) in [(&tw, W), (&tg, G)] {
        let (status, r) = rest(port, token, "scan", json!({"since": "2000-01-01", "limit": 5}));
        assert_eq!(status, 200, "{r}");
        assert_only(&r, own, "REST scan page");
        let own_ids: Vec<String> = r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect();
        ids.insert(own, own_ids);
        cursors.insert(own, r["cursor"].as_str().unwrap().to_string());
    }
    let probes = |own: &str, other: &str| {
        json!([
            ["index_stats", {}],
            ["search", {"query": "gadgets firmware widgets", "top_k": 50}],
            ["search", {"query": "firmware", "repo": other}],
            ["scan", {"since": "2000-01-01", "limit": 200}],
            ["read_span", {"repo": other, "path": "README.md"}],
            ["related", {"id": format!("https://github.com/{other}/issues/2")}],
            ["related", {"id": "issue/2", "repo": own}],
            ["fetch", {"ids": ids[other]}],
            ["scan", {"since": "2000-01-01", "limit": 5, "cursor": cursors[other]}],
            ["scan", {"since": "2000-01-01", "limit": 200, "snapshot": first}],
            ["related", {"id": ids[other][0]}],
        ])
    };
    for (token, own, other) in [(&tw, W, G), (&tg, G, W)] {
        // REST.
        let (status, s) = rest(port, token, "stats", json!({}));
        assert_eq!(status, 200, "{s}");
        assert_only(&s, own, "REST stats");
        let (status, r) =
            rest(port, token, "search", json!({"query": "gadgets firmware widgets", "top_k": 50}));
        assert_eq!(status, 200);
        assert_only(&r, own, "REST search");
        let (status, r) = rest(port, token, "scan", json!({"since": "2000-01-01", "limit": 200}));
        assert_eq!(status, 200);
        assert_only(&r, own, "REST scan");
        let (status, r) =
            rest(port, token, "read_span", json!({"repo": other, "path": "README.md"}));
        assert_eq!(status, 400, "{r}");
        let (status, r) = rest(port, token, "fetch", json!({"ids": ids[other]}));
        assert_eq!((status, &r["results"], &r["not_found"]), (200, &json!([]), &json!(ids[other])));
        let (status, r) =
            rest(port, token, "scan", json!({"since": "2000-01-01", "cursor": cursors[other]}));
        assert_eq!(status, 400, "another token's cursor: {r}");
        // MCP, Python SDK.
        let reports = python_calls(port, token, &probes(own, other));
        for (i, rep) in reports.iter().enumerate() {
            if rep["is_error"] == json!(false) {
                assert_only(&rep["structured"], own, &format!("MCP call {i}"));
            }
        }
        assert_eq!(reports[0]["structured"]["repos"].as_array().unwrap().len(), 1);
        assert_eq!(reports[2]["structured"]["filters_unmatched"], json!(["repo"]));
        assert_eq!(reports[4]["is_error"], json!(true));
        assert_eq!(reports[5]["is_error"], json!(true));
        assert_eq!(reports[7]["structured"]["not_found"], json!(ids[other]), "fetch by id");
        assert_eq!(reports[7]["structured"]["count"], json!(0));
        assert_eq!(reports[8]["is_error"], json!(true), "another token's cursor");
        assert_eq!(reports[9]["structured"]["snapshot"], json!(first), "the pinned snapshot");
        assert!(reports[9]["structured"]["count"].as_u64().unwrap() > 0);
        assert_eq!(reports[10]["is_error"], json!(true), "related by another's row id");
    }
    // /metrics needs a token that reads everything; it counts calls by token name.
    assert_eq!(
        request(port, "GET", "/metrics", "", &[("Authorization", &format!("Bearer {tw}"))]).0,
        403
    );
    let (status, metrics) =
        request(port, "GET", "/metrics", "", &[("Authorization", "Bearer admin-secret-token")]);
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"caller="team-w""#) && metrics.contains(r#"caller="team-g""#),
        "{metrics}"
    );
    assert!(!metrics.contains(&tw), "never the token");
    // Revoke team-w: its next request is refused; team-g still works. No restart.
    let out = Command::new(hubdex_tests::bin("hubdex"))
        .args(["token", "revoke", "team-w", "--tokens-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rest(port, &tw, "stats", json!({})).0, 401);
    assert_eq!(rest(port, &tg, "stats", json!({})).0, 200);
    // The audit log: one JSON line per call naming the token, never the token or the query.
    let log = std::fs::read_to_string(&log).unwrap();
    let audit: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == json!("hubdex::audit") && v["fields"]["tool"].is_string())
        .collect();
    assert!(
        audit
            .iter()
            .any(|v| v["fields"]["caller"] == json!("team-g")
                && v["fields"]["tool"] == json!("search")),
        "{log}"
    );
    assert!(audit.iter().all(|v| v["fields"]["results"].is_u64()), "{log}");
    assert!(!log.contains(&tw) && !log.contains(&tg), "tokens never reach the log");
    assert!(!log.contains("gadgets firmware widgets"), "no query text without --audit-queries");
}

#[test]
fn the_token_commands_manage_a_tokens_file_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    let token = add_token(&file, "ci", &["acme/*"]);
    assert!(token.starts_with("hdx_") && token.len() > 40, "{token}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(&token));
    let loaded = TokensFile::load(&file).unwrap();
    assert_eq!(loaded.token[0].repos, ["acme/*"]);
    let run = |args: &[&str]| {
        let out = Command::new(hubdex_tests::bin("hubdex"))
            .args(args)
            .arg("--tokens-file")
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, out, _) = run(&["token", "list"]);
    assert!(ok && out.starts_with("ci\trepos acme/*\tall types\texpires never"), "{out}");
    for (args, expect) in [
        (&["token", "add", "ci", "--repos", "x/*"][..], "a token named \"ci\" exists"),
        (&["token", "add", "bad name", "--repos", "x/*"][..], "token name \"bad name\""),
        (&["token", "add", "t2", "--repos", "x/["][..], "is not a valid glob"),
        (
            &["token", "add", "t3", "--repos", "x/*", "--types", "issues"][..],
            "unknown row type \"issues\"",
        ),
        (
            &["token", "add", "t4", "--repos", "x/*", "--expires", "someday"][..],
            "expiry \"someday\"",
        ),
        (&["token", "revoke", "nobody"][..], "has no token named \"nobody\""),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(expect) && err.lines().count() == 1, "{args:?}: {err}");
    }
}

/// An OAuth issuer on loopback: its metadata and a JWKS the test can rotate, make fail (500)
/// or slow, counting the JWKS requests.
struct Issuer {
    url: String,
    jwks: Arc<std::sync::Mutex<Value>>,
    jwks_fails: Arc<std::sync::atomic::AtomicBool>,
    jwks_delay_ms: Arc<std::sync::atomic::AtomicU64>,
    jwks_fetches: Arc<std::sync::atomic::AtomicUsize>,
    _thread: std::thread::JoinHandle<()>,
}

fn issuer() -> Issuer {
    use std::sync::atomic::Ordering::SeqCst;
    // Bound here, on a port the OS picks: no other test can take it before the issuer serves.
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let jwks = Arc::new(std::sync::Mutex::new(json!({"keys": []})));
    let fails = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let delay = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (meta_url, keys) = (url.clone(), jwks.clone());
    let (f, d, n) = (fails.clone(), delay.clone(), fetches.clone());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let meta = json!({"issuer": meta_url, "jwks_uri": format!("{meta_url}/jwks")});
            let jwks_route = move || {
                let (keys, f, d, n) = (keys.clone(), f.clone(), d.clone(), n.clone());
                async move {
                    use axum::response::IntoResponse as _;
                    n.fetch_add(1, SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(d.load(SeqCst))).await;
                    if f.load(SeqCst) {
                        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
                    }
                    axum::Json(keys.lock().unwrap().clone()).into_response()
                }
            };
            let app = axum::Router::new()
                .route(
                    "/.well-known/oauth-authorization-server",
                    axum::routing::get(move || async move { axum::Json(meta) }),
                )
                .route("/jwks", axum::routing::get(jwks_route));
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    Issuer {
        url,
        jwks,
        jwks_fails: fails,
        jwks_delay_ms: delay,
        jwks_fetches: fetches,
        _thread: thread,
    }
}

/// An ES256 key made here from random bytes: (signing key, its public JWK with `kid`).
fn es256_key(kid: &str) -> (jsonwebtoken::EncodingKey, Value) {
    use p256::pkcs8::EncodePrivateKey as _;
    use sha2::Digest as _;
    let seed = sha2::Sha256::digest(format!("{kid} {:?}", std::time::SystemTime::now()).as_bytes());
    let key = p256::ecdsa::SigningKey::from_slice(&seed).unwrap();
    let der = key.to_pkcs8_der().unwrap();
    let enc = jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes());
    let mut jwk =
        jsonwebtoken::jwk::Jwk::from_encoding_key(&enc, jsonwebtoken::Algorithm::ES256).unwrap();
    jwk.common.key_id = Some(kid.into());
    (enc, serde_json::to_value(jwk).unwrap())
}

/// An RFC 9068 access token (`typ: at+jwt`) signed with `key`.
fn jwt(key: &jsonwebtoken::EncodingKey, kid: &str, claims: &Value) -> String {
    jwt_typed(key, kid, claims, Some("at+jwt"))
}

fn jwt_typed(
    key: &jsonwebtoken::EncodingKey,
    kid: &str,
    claims: &Value,
    typ: Option<&str>,
) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    header.typ = typ.map(str::to_string);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

#[test]
fn oauth_access_tokens_are_verified_against_the_issuers_keys() {
    use base64::Engine as _;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let iss = issuer();
    let (k1, jwk1) = es256_key("k1");
    let (k2, jwk2) = es256_key("k2");
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1.clone()]});
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hubdex.toml");
    std::fs::write(
        &config,
        "[[oauth.grant]]\nclaim = \"groups\"\nequals = \"widgets-team\"\nrepos = [\"local/*\"]\n",
    )
    .unwrap();
    let (_server, port) = spawn_http(
        &["--store", crate::fixture::fixture().store.to_str().unwrap()],
        &[
            "--oauth-issuer",
            &iss.url,
            "--oauth-audience",
            "hubdex-test",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        None,
    );
    let now = chrono::Utc::now().timestamp();
    let good = json!({"iss": iss.url, "aud": "hubdex-test", "sub": "ada", "groups": ["widgets-team"], "exp": now + 600, "iat": now});
    let with = |patch: Value| {
        let mut c = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let stats = |token: &str| {
        let auth = format!("Bearer {token}");
        request(port, "GET", "/v1/stats", "", &[("Authorization", auth.as_str())]).0
    };
    // The 401 names the protected resource metadata, which lists RFC 9728's fields only.
    let (status, head, _) = crate::http::request_with_head(port, "POST", "/mcp", "{}", &[]);
    assert_eq!(status, 401);
    let expected = format!(
        "resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp\""
    );
    assert!(
        head.to_ascii_lowercase().contains("www-authenticate: bearer") && head.contains(&expected),
        "{head}"
    );
    let (status, body) = request(port, "GET", "/.well-known/oauth-protected-resource/mcp", "", &[]);
    assert_eq!(status, 200);
    let meta: Value = serde_json::from_str(&body).unwrap();
    const RFC9728: [&str; 15] = [
        "resource",
        "authorization_servers",
        "jwks_uri",
        "scopes_supported",
        "bearer_methods_supported",
        "resource_signing_alg_values_supported",
        "resource_name",
        "resource_documentation",
        "resource_policy_uri",
        "resource_tos_uri",
        "tls_client_certificate_bound_access_tokens",
        "authorization_details_types_supported",
        "dpop_signing_alg_values_supported",
        "dpop_bound_access_tokens_required",
        "signed_metadata",
    ];
    for k in meta.as_object().unwrap().keys() {
        assert!(RFC9728.contains(&k.as_str()), "{k} is not an RFC 9728 field");
    }
    // RFC 9728 §2: the algorithms the resource signs its responses with; hubdex signs none.
    assert!(meta.get("resource_signing_alg_values_supported").is_none(), "{meta}");
    assert_eq!(meta["resource"], json!(format!("http://127.0.0.1:{port}/mcp")));
    assert_eq!(meta["authorization_servers"], json!([iss.url]));
    assert!(
        meta["bearer_methods_supported"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| ["header", "body", "query"].contains(&m.as_str().unwrap()))
    );
    let (_, root) = request(port, "GET", "/.well-known/oauth-protected-resource", "", &[]);
    assert_eq!(
        serde_json::from_str::<Value>(&root).unwrap()["resource"],
        json!(format!("http://127.0.0.1:{port}"))
    );

    // Each token, and the answer it must get.
    let none = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&good));
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("k1".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &good,
        &jsonwebtoken::EncodingKey::from_secret(jwk1.to_string().as_bytes()).unwrap(),
    )
    .unwrap();
    // Signed with k2 but naming k1.
    let forged = jwt(&k2, "k1", &good);
    for (what, token, expect) in [
        ("valid", jwt(&k1, "k1", &good), 200),
        ("expired", jwt(&k1, "k1", &with(json!({"exp": now - 3600}))), 401),
        ("not yet valid", jwt(&k1, "k1", &with(json!({"nbf": now + 3600}))), 401),
        ("wrong audience", jwt(&k1, "k1", &with(json!({"aud": "someone-else"}))), 401),
        ("wrong issuer", jwt(&k1, "k1", &with(json!({"iss": "https://evil.example"}))), 401),
        ("bad signature", forged, 401),
        ("alg none", none, 401),
        ("HMAC with the public key", hmac, 401),
        ("no matching grant", jwt(&k1, "k1", &with(json!({"groups": ["other"]}))), 403),
        ("unknown kid", jwt(&k2, "k2", &good), 401),
        // RFC 9068 §4: an ID token (typ JWT) or one without typ is not an access token.
        ("typ JWT", jwt_typed(&k1, "k1", &good, Some("JWT")), 401),
        ("no typ", jwt_typed(&k1, "k1", &good, None), 401),
        ("typ in another case", jwt_typed(&k1, "k1", &good, Some("AT+JWT")), 200),
    ] {
        assert_eq!(stats(&token), expect, "{what}");
    }
    // Key rotation: the issuer publishes k2; a token signed with it works once the JWKS is
    // fetched again (an unknown kid fetches it, at most once a second).
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1, jwk2]});
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(stats(&jwt(&k2, "k2", &good)), 200, "after rotation");
    // A valid token answers tools with its scope.
    let auth = format!("Bearer {}", jwt(&k1, "k1", &good));
    let (status, body) = request(
        port,
        "POST",
        "/v1/search",
        r#"{"query": "widgets"}"#,
        &[("Authorization", auth.as_str())],
    );
    assert_eq!(status, 200, "{body}");
}

/// An in-process verifier of `iss`'s tokens for audience `hubdex-test`, with one grant.
fn verifier(iss: &Issuer, grant: hubdex_server::ClaimGrant) -> hubdex_server::OAuth {
    hubdex_server::OAuth::new(hubdex_server::OAuthConfig {
        issuer: iss.url.clone(),
        audience: "hubdex-test".into(),
        jwks_url: None,
        grants: vec![grant],
        extra_token_types: Vec::new(),
    })
    .unwrap()
}

/// `acme/*` for any subject.
fn grant_of_sub() -> hubdex_server::ClaimGrant {
    hubdex_server::ClaimGrant { claim: "sub".into(), equals: None, repos: vec!["acme/*".into()] }
}

fn claims(iss: &Issuer, extra: Value) -> Value {
    let now = chrono::Utc::now().timestamp();
    let mut c = json!({"iss": iss.url, "aud": "hubdex-test", "sub": "ada", "exp": now + 600});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A `{team}` grant compiled the claim's value into a glob on every request, on the runtime's
/// threads: a team of 200,000 characters hung every route for minutes. A value past the bound
/// grants nothing, and a list past its bound too.
#[test]
fn a_huge_claim_grants_nothing_and_costs_nothing() {
    let iss = issuer();
    let (k1, jwk1) = es256_key("k1");
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1]});
    let grant = hubdex_server::ClaimGrant {
        claim: "team".into(),
        equals: None,
        repos: vec!["{team}/*".into()],
    };
    let oauth = verifier(&iss, grant);
    runtime().block_on(async {
        let ok = oauth.authenticate(&jwt(&k1, "k1", &claims(&iss, json!({"team": "acme"})))).await;
        let scope = ok.unwrap().scope.unwrap();
        assert!(scope.allows_repo("acme/widgets") && !scope.allows_repo("other/x"));
        for (what, team) in [
            ("200,000 characters", json!("a".repeat(200_000))),
            ("a control character", json!("acme\u{1b}")),
            ("too many values", json!((0..1000).map(|i| format!("t{i}")).collect::<Vec<_>>())),
        ] {
            let t = std::time::Instant::now();
            let token = jwt(&k1, "k1", &claims(&iss, json!({"team": team})));
            let got = oauth.authenticate(&token).await;
            assert_eq!(got.unwrap_err(), hubdex_server::AuthError::NoGrant, "{what}");
            assert!(t.elapsed() < std::time::Duration::from_secs(2), "{what}: {:?}", t.elapsed());
        }
    });
}

/// A failed JWKS fetch never recorded itself, so every unknown `kid` fetched again, and the
/// fetch held the key cache's lock: an issuer answering 500 took one fetch per token, and a
/// slow one stalled every valid call behind it.
#[test]
fn a_failing_or_slow_issuer_is_asked_with_backoff_and_stalls_no_known_key() {
    use std::sync::atomic::Ordering::SeqCst;
    let iss = issuer();
    let (k1, jwk1) = es256_key("k1");
    *iss.jwks.lock().unwrap() = json!({"keys": [jwk1]});
    let oauth = Arc::new(verifier(&iss, grant_of_sub()));
    let good = jwt(&k1, "k1", &claims(&iss, json!({})));
    runtime().block_on(async {
        oauth.authenticate(&good).await.unwrap();
        assert_eq!(iss.jwks_fetches.load(SeqCst), 1);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        iss.jwks_fails.store(true, SeqCst);
        for i in 0..30 {
            let (k, _) = es256_key(&format!("random-{i}"));
            let token = jwt(&k, &format!("random-{i}"), &claims(&iss, json!({})));
            assert!(oauth.authenticate(&token).await.is_err());
            // Known keys keep working while the issuer fails.
            oauth.authenticate(&good).await.unwrap();
        }
        let fetched = iss.jwks_fetches.load(SeqCst) - 1;
        assert!(fetched <= 2, "30 unknown kids against a failing issuer fetched {fetched} times");

        // A slow fetch in flight delays no token whose key is known (a fresh verifier, so no
        // backoff from the failures above is in force).
        iss.jwks_fails.store(false, SeqCst);
        let oauth = Arc::new(verifier(&iss, grant_of_sub()));
        oauth.authenticate(&good).await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        iss.jwks_delay_ms.store(3000, SeqCst);
        let before = iss.jwks_fetches.load(SeqCst);
        let slow = {
            let (oauth, (k, _)) = (oauth.clone(), es256_key("later"));
            let token = jwt(&k, "later", &claims(&iss, json!({})));
            tokio::spawn(async move { oauth.authenticate(&token).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(iss.jwks_fetches.load(SeqCst), before + 1, "the unknown kid is fetching");
        let t = std::time::Instant::now();
        oauth.authenticate(&good).await.unwrap();
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "waited {:?}", t.elapsed());
        assert!(slow.await.unwrap().is_err());
    });
}

/// BM25 weighed every term with the whole index's statistics: a scoped caller's own rows
/// scored differently after a repository it cannot see alone added a word, which told it the
/// word was there. A scoped caller's scores depend on what it may read only.
#[test]
fn a_scoped_callers_scores_do_not_move_when_a_hidden_repository_changes() {
    let e = env();
    let w = e.dir.path().join("git/widgets");
    let g = e.dir.path().join("git/gadgets");
    let travel = "# Travel\n\nThe widget crates ship through zanzibar by sea.\n";
    commit_file(&w, "TRAVEL.md", travel, "Add the travel notes");
    e.build().unwrap();
    let scores = |st: &Arc<AppState>, c: &Caller| {
        let st = st.clone();
        let c = c.clone();
        runtime().block_on(async move {
            let args = json!({"query": "zanzibar crates", "fusion": "sparse_only", "top_k": 5});
            let a = call(&st, &c, "search", args).await.unwrap();
            a["results"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["repo"] == json!(W))
                .map(|r| {
                    (r["id"].as_str().unwrap().to_string(), r["sparse_score"].as_f64().unwrap())
                })
                .collect::<Vec<_>>()
        })
    };
    let widgets = caller("team-w", &[W], &[]);
    let all = Caller::local();
    let st = runtime().block_on(state(&e.store()));
    let units = st.current.load().segments.len();
    let (scoped_before, all_before) = (scores(&st, &widgets), scores(&st, &all));
    assert!(!scoped_before.is_empty(), "the word is found");
    // Only the hidden repository changes: many rows that say the word.
    let notes: String =
        (0..40).map(|i| format!("## Port {i}\n\nzanzibar zanzibar harbour {i}\n\n")).collect();
    commit_file(&g, "PORTS.md", &format!("# Ports\n\n{notes}"), "Add the ports");
    e.build().unwrap();
    let st = runtime().block_on(state(&e.store()));
    let (scoped_after, all_after) = (scores(&st, &widgets), scores(&st, &all));
    assert_eq!(units, 1, "both repositories are served by one unit, whose statistics they share");
    assert_ne!(all_before, all_after, "an unscoped caller's statistics count every repository");
    assert_eq!(scoped_after.len(), scoped_before.len());
    for ((id_a, a), (id_b, b)) in scoped_before.iter().zip(&scoped_after) {
        assert_eq!(id_a, id_b);
        assert!((a - b).abs() <= 1e-5 * a.abs(), "{id_a}: {a} before, {b} after");
    }
}
