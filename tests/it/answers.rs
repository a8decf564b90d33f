//! Snapshot tests (insta) of every tool's answer on the committed golden snapshot: any change
//! to what an agent sees shows up as a reviewed diff.

use serde_json::{Value, json};

use crate::fixture::{runtime, state};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v1");

fn answer(tool: &str, args: Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("golden");
    crate::golden::copy_dir(std::path::Path::new(GOLDEN), &copy);
    let map = args.as_object().unwrap().clone();
    runtime()
        .block_on(async { hubdex_server::call_tool(&state(&copy).await, tool, &map).await })
        .unwrap()
}

/// Scores are floats from a neural model and BM25: compare them to 3 decimals.
macro_rules! check {
    ($name:literal, $value:expr) => {
        insta::assert_json_snapshot!($name, $value, {
            ".results[].score" => insta::rounded_redaction(3),
            ".results[].dense_score" => insta::rounded_redaction(3),
            ".results[].sparse_score" => insta::rounded_redaction(3),
            ".results[].same_entity.others[].score" => insta::rounded_redaction(3),
            ".until" => "[now]",
        })
    };
}

#[test]
fn search_answers() {
    check!("search_rrf", answer("search", json!({"query": "flowers in the garden", "top_k": 3})));
    check!(
        "search_sparse_commit",
        answer("search", json!({"query": "roses", "fusion": "sparse_only", "type": "commit"}))
    );
    check!(
        "search_filters_unmatched",
        answer("search", json!({"query": "roses", "repo": "nobody/none", "state": "open"}))
    );
}

#[test]
fn scan_answers() {
    check!("scan_all", answer("scan", json!({"since": "2024-01-01", "limit": 2})));
    check!(
        "scan_created",
        answer(
            "scan",
            json!({"since": "2024-02-02", "until": "2024-02-04", "order": "created_desc"})
        )
    );
}

#[test]
fn fetch_read_span_and_stats_answers() {
    let first = answer("search", json!({"query": "tulips", "fusion": "sparse_only", "top_k": 1}));
    let id = first["results"][0]["id"].as_str().unwrap().to_string();
    check!("fetch", answer("fetch", json!({"ids": [id, "doc_missing"]})));
    check!(
        "read_span",
        answer(
            "read_span",
            json!({"repo": "local/golden", "path": "README.md", "start_line": 3, "end_line": 7})
        )
    );
    check!("index_stats", answer("index_stats", json!({})));
}
