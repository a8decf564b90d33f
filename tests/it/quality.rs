//! Retrieval quality machinery: code chunks on a real build, code-aware BM25, the cross-encoder
//! rerank path (on a tiny ONNX graph this test builds) and `hubdex eval`.

use std::sync::Arc;

use hubdex_formats::RowType;
use hubdex_server::Reranker;
use hubdex_server::{NO_RERANK_MODEL, SpanRequest, call_tool, read_span};
use hubdex_tests::{CODE_FILES, bin, make_code_repo, model_dir, python};
use serde_json::{Value, json};

use crate::fixture::{fixture, options, runtime, state};

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// A store built from the repository `make` writes into `<tmp>/<name>`.
fn store_of(name: &str, make: fn(&std::path::Path)) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join(name);
    make(&repo);
    let store = dir.path().join("store");
    runtime().block_on(hubdex_indexer::build(&options(&store, &repo))).unwrap();
    (dir, store)
}

/// A store built from the seven-language repository.
fn code_store() -> (tempfile::TempDir, std::path::PathBuf) {
    store_of("shop", make_code_repo)
}

#[test]
fn code_chunks_cover_every_file_name_symbols_and_read_back_through_read_span() {
    let (_dir, store) = code_store();
    runtime().block_on(async {
        let st = state(&store).await;
        let snap = st.current.load_full();
        let all = snap.segments[0].text.rows().unwrap();
        let rows: Vec<_> = all.iter().filter(|r| r.kind() == RowType::Code).collect();
        for (path, text, symbols) in CODE_FILES {
            let mut chunks: Vec<_> =
                rows.iter().filter(|r| r.path.as_deref() == Some(*path)).collect();
            chunks.sort_by_key(|r| r.line_start);
            assert!(!chunks.is_empty(), "{path} has no code rows");
            let got: Vec<&str> = chunks.iter().filter_map(|r| r.symbol.as_deref()).collect();
            assert_eq!(got, *symbols, "{path}");
            // Every line in exactly one chunk, or blank.
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let mut owner = vec![0; lines.len()];
            for c in &chunks {
                for l in c.line_start.unwrap()..=c.line_end.unwrap() {
                    owner[(l - 1) as usize] += 1;
                }
                let span = read_span(
                    &snap,
                    &SpanRequest {
                        repo: c.repo.clone(),
                        path: path.to_string(),
                        start_line: c.line_start.unwrap(),
                        end_line: c.line_end.unwrap(),
                        snapshot: None,
                    },
                    None,
                )
                .unwrap();
                assert_eq!(span.text.trim_end(), c.body, "{path}:{:?}", c.line_start);
                assert!(c.url.is_none() || c.url.as_deref().unwrap().contains("#L"));
                assert!(c.commit_sha.as_deref().is_some_and(|s| s.len() == 40));
            }
            for (i, n) in owner.iter().enumerate() {
                assert!(
                    *n == 1 || (*n == 0 && lines[i].trim().is_empty()),
                    "{path}:{} in {n} chunks",
                    i + 1
                );
            }
        }
        let langs: std::collections::BTreeSet<&str> =
            rows.iter().filter_map(|r| r.language.as_deref()).collect();
        assert_eq!(
            langs.into_iter().collect::<Vec<_>>(),
            ["c", "cpp", "go", "java", "javascript", "python", "rust", "typescript"]
        );
        // One diff row per file of the one commit, beside its commit row.
        let diffs = all.iter().filter(|r| r.kind() == RowType::Diff).count();
        assert_eq!(diffs, CODE_FILES.len());
    });
}

#[test]
fn identifiers_are_found_by_their_parts_and_whole() {
    let (_dir, store) = code_store();
    runtime().block_on(async {
        let st = state(&store).await;
        for (query, symbol) in [
            ("parse http request", "parseHttpRequest"),
            ("parseHttpRequest", "parseHttpRequest"),
            ("restock shelves", "Inventory.restockShelves"),
            ("evict oldest", "store::evict_oldest"),
            ("store::evict_oldest", "store::evict_oldest"),
            ("add route", "Router::add_route"),
        ] {
            let a =
                args(json!({"query": query, "fusion": "sparse_only", "type": "code", "top_k": 3}));
            let answer = call_tool(&st, "search", &a).await.unwrap();
            let top = answer["results"][0]["title"].as_str().unwrap_or("");
            assert!(top.starts_with(symbol), "{query:?}: top result is {top:?}");
        }
    });
}

/// A cross-encoder that scores a passage by how often `word` occurs in it.
fn counting_reranker(word: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rerank");
    let status = std::process::Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/py/make_rerank_model.py"))
        .arg(model_dir().join("tokenizer.json"))
        .arg(word)
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "make_rerank_model.py failed");
    (dir, out)
}

#[test]
fn rerank_reorders_the_top_candidates_by_the_cross_encoder_logit() {
    let f = fixture();
    let (_dir, model) = counting_reranker("hooks");
    let reranker = Reranker::load(&model).unwrap();
    let scores = reranker
        .score("anything", &["no match here", "hooks and more hooks", "one hooks"])
        .unwrap();
    assert_eq!(scores, [0.0, 2.0, 1.0]);
    runtime().block_on(async {
        let base = state(&f.store).await;
        let mut st = hubdex_server::AppState::new(
            base.store.clone(),
            base.cache.clone(),
            base.current.load_full(),
            base.embedder.clone(),
        );
        st.reranker = Some(Arc::new(reranker));
        let st = Arc::new(st);
        let q = "how are widgets stored in the database";
        let plain = call_tool(&st, "search", &args(json!({"query": q, "top_k": 5}))).await.unwrap();
        assert_eq!(plain["rerank_applied"], json!(false));
        let answer =
            call_tool(&st, "search", &args(json!({"query": q, "top_k": 5, "rerank": true})))
                .await
                .unwrap();
        assert_eq!(answer["rerank_applied"], json!(true));
        let results = answer["results"].as_array().unwrap();
        let first = &results[0];
        assert!(first["rerank_score"].as_f64().unwrap() >= 1.0, "{first:#}");
        let snap = st.current.load_full();
        assert!(snap.row(first["id"].as_str().unwrap()).unwrap().unwrap().body.contains("hooks"));
        let logits: Vec<f64> = results.iter().filter_map(|r| r["rerank_score"].as_f64()).collect();
        assert!(logits.windows(2).all(|w| w[0] >= w[1]), "{logits:?}");
        assert_ne!(
            plain["results"][0]["id"], first["id"],
            "the plain order put hooks first already"
        );
    });
}

#[test]
fn without_a_rerank_model_the_answer_says_rerank_was_not_applied() {
    let f = fixture();
    runtime().block_on(async {
        let st = state(&f.store).await;
        let answer = call_tool(&st, "search", &args(json!({"query": "widgets", "rerank": true})))
            .await
            .unwrap();
        assert_eq!(answer["rerank_applied"], json!(false));
        assert_eq!(answer["rerank_note"], json!(NO_RERANK_MODEL));
    });
}

#[test]
fn a_rerank_model_directory_without_a_model_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = Reranker::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("model.onnx is missing"), "{err}");
}

#[test]
fn hubdex_eval_prints_every_mode_with_its_figures() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("set.jsonl");
    let lines = [
        json!({"query": "Where are widgets stored?", "relevant": ["docs/design.md:3-5"]}),
        json!({"query": "Initial import of the widget service", "relevant": [first_sha(&f.repo.dir)]}),
    ];
    std::fs::write(&file, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let cache = dir.path().join("cache");
    let out = std::process::Command::new(bin("hubdex"))
        .args(["--store", f.store.to_str().unwrap(), "--cache", cache.to_str().unwrap()])
        .args(["eval", file.to_str().unwrap(), "--json", "--blend", "minmax:0.5"])
        .env("HUBDEX_MODEL_DIR", model_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let modes: Vec<&str> =
        report["modes"].as_array().unwrap().iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["sparse_only", "dense_only", "rrf", "rrf[minmax:0.5]"]);
    for m in report["modes"].as_array().unwrap() {
        for key in ["recall_at_k", "mrr_at_k", "ndcg_at_10"] {
            let v = m[key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{key} = {v}");
        }
        assert!(m["p50_ms"].as_f64().unwrap() > 0.0);
    }
    // The known-item commit query is found by every mode.
    assert!(
        report["modes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["recall_at_k"].as_f64().unwrap() >= 0.5)
    );

    std::fs::write(&file, "{\"query\": \"x\"}\n").unwrap();
    let out = std::process::Command::new(bin("hubdex"))
        .args(["--store", f.store.to_str().unwrap(), "eval", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("set.jsonl:1") && err.contains("relevant"), "{err}");
}

fn first_sha(repo: &std::path::Path) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-list", "--max-parents=0", "HEAD"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_commit_search_finds_a_commit_by_a_diff_row_and_shows_the_commit() {
    let (_dir, store) = store_of("shards", hubdex_tests::make_long_diff_repo);
    runtime().block_on(async {
        let st = state(&store).await;
        let snap = st.current.load_full();
        let rows = snap.segments[0].text.rows().unwrap();
        let commit = rows
            .iter()
            .find(|r| r.kind() == RowType::Commit && r.title.as_deref() == Some("Grow the table"))
            .expect("the big commit's row");
        // The commit row keeps 200 diff lines: the late file's function is past them.
        assert!(!commit.body.contains(hubdex_tests::LATE_FUNCTION), "{}", commit.body);
        let search = |types: &str| {
            let a = args(json!({"query": hubdex_tests::LATE_FUNCTION, "type": types,
                "fusion": "sparse_only"}));
            let st = st.clone();
            async move { call_tool(&st, "search", &a).await.unwrap() }
        };
        let answer = search("commit").await;
        let results = answer["results"].as_array().unwrap();
        assert!(results.iter().all(|r| r["type"] == "commit"), "{answer:#}");
        assert_eq!(results[0]["id"], commit.id.as_str());
        let folded = &results[0]["same_entity"]["others"];
        assert_eq!(folded[0]["type"], "diff", "{answer:#}");
        // Asked for diffs, the diff row itself is the answer.
        let answer = search("diff").await;
        assert_eq!(answer["results"][0]["type"], "diff", "{answer:#}");
    });
}

#[test]
fn a_query_that_repeats_a_commit_subject_finds_that_commit_first_though_bm25_prefers_another() {
    let (_dir, store) = store_of("resolver", hubdex_tests::make_near_duplicate_repo);
    runtime().block_on(async {
        let st = state(&store).await;
        let search = |query: &str, fusion: &str| {
            let a = args(json!({"query": query, "type": "commit", "fusion": fusion}));
            let st = st.clone();
            async move { call_tool(&st, "search", &a).await.unwrap() }
        };
        let title =
            |answer: &Value, i: usize| answer["results"][i]["title"].as_str().map(String::from);
        let known = hubdex_tests::KNOWN_SUBJECT;
        let applied = format!("{known} (applied)");
        // The premise: BM25 alone ranks the longer commit that repeats the words first.
        let sparse = search(known, "sparse_only").await;
        assert_eq!(title(&sparse, 0).as_deref(), Some(applied.as_str()), "{sparse:#}");
        // Fused, the commit whose subject the query repeats comes first, scored above any RRF
        // sum (1 + its cosine).
        let fused = search(known, "rrf").await;
        assert_eq!(title(&fused, 0).as_deref(), Some(known), "{fused:#}");
        let first = &fused["results"][0];
        assert!(first["dense_score"].as_f64().unwrap() >= 0.95, "{fused:#}");
        assert!(first["score"].as_f64().unwrap() > 1.9, "{fused:#}");
        // A question in other words is ranked by RRF alone: no score reaches 1.
        let asked = search("relative paths mistaken for a repository name", "rrf").await;
        let results = asked["results"].as_array().unwrap();
        assert!(!results.is_empty(), "{asked:#}");
        assert!(results.iter().all(|r| r["score"].as_f64().unwrap() < 1.0), "{asked:#}");
    });
}
