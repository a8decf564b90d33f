//! The committed golden snapshot of every readable format version still opens and answers: a
//! reader change that breaks old snapshots fails here.

use arrow::datatypes::DataType;
use hubdex_formats::{
    FORMAT_VERSION, READABLE_VERSIONS, Segment, Store, read_rows, upgrade_segment,
};
use serde_json::{Value, json};

use crate::fixture::{runtime, state};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v1");
const GOLDEN_SNAPSHOT: &str = "20261129T193202Z-c1deaba1";
const GOLDEN_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v2");
const GOLDEN_V2_SNAPSHOT: &str = "20261129T212733Z-142190f8";
const GOLDEN_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v3");
const GOLDEN_V4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v4");
const GOLDEN_V5: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v5");
const GOLDEN_V6: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v6");
const GOLDEN_V7: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v7");
const GOLDEN_V8: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v8");
const GOLDEN_V9: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v9");
const GOLDEN_V10: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v10");

/// Every version a reader accepts, the one written included, has a fixture under
/// `fixtures/golden-v<N>` whose current snapshot verifies and is of that version: a new
/// format version fails here until its fixture is made (tests/fixtures/make-golden.sh).
#[test]
fn every_readable_format_version_has_a_golden_fixture() {
    assert!(READABLE_VERSIONS.contains(&FORMAT_VERSION), "{READABLE_VERSIONS:?}");
    for &version in READABLE_VERSIONS {
        let dir = format!("{}/fixtures/golden-v{version}", env!("CARGO_MANIFEST_DIR"));
        assert!(
            std::path::Path::new(&dir).join("LATEST").is_file(),
            "no golden fixture for format {version}: make one with tests/fixtures/make-golden.sh"
        );
        let store = Store::open(&dir).unwrap();
        let latest = runtime().block_on(store.verified_latest()).unwrap();
        assert_eq!(latest.manifest.format_version, version, "{dir}'s snapshot");
    }
}

#[test]
fn the_golden_v1_snapshot_verifies_opens_and_answers() {
    check_golden(GOLDEN, GOLDEN_SNAPSHOT, 1, 5);
}

#[test]
fn the_golden_v2_snapshot_verifies_opens_and_answers() {
    // 3 commits, their 3 diff rows, 2 README sections and flowers.txt as one code chunk.
    check_golden(GOLDEN_V2, GOLDEN_V2_SNAPSHOT, 2, 9);
}

#[test]
fn the_golden_v3_snapshot_verifies_opens_and_answers_through_its_merged_segment() {
    check_golden(GOLDEN_V3, &latest_snapshot(GOLDEN_V3), 3, 9);
}

#[test]
fn the_golden_v4_snapshot_verifies_opens_and_answers_with_its_i8_and_title_vectors() {
    check_golden(GOLDEN_V4, &latest_snapshot(GOLDEN_V4), 4, 9);
}

#[test]
fn the_golden_v5_snapshot_verifies_opens_and_answers_with_build_segments_of_rows_only() {
    check_golden(GOLDEN_V5, &latest_snapshot(GOLDEN_V5), 5, 9);
}

#[test]
fn the_golden_v6_snapshot_verifies_opens_and_answers_without_positions() {
    check_golden(GOLDEN_V6, &latest_snapshot(GOLDEN_V6), 6, 9);
}

#[test]
fn the_golden_v7_snapshot_verifies_opens_and_answers_with_its_code_walk() {
    check_golden(GOLDEN_V7, &latest_snapshot(GOLDEN_V7), 7, 9);
}

#[test]
fn the_golden_v8_snapshot_verifies_opens_and_answers_with_i8_rows() {
    check_golden(GOLDEN_V8, &latest_snapshot(GOLDEN_V8), 8, 9);
    // Its rows.parquet files keep i8 vectors, which pyarrow and DuckDB read
    // (tests/it/parquet_readers.rs); format 7's kept float32.
    for (fixture, item) in [(GOLDEN_V7, DataType::Float32), (GOLDEN_V8, DataType::Int8)] {
        for file in build_segment_rows(fixture) {
            let f = std::fs::File::open(&file).unwrap();
            let b =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
            let schema = b.schema();
            for (name, ty) in [
                ("embedding", schema.field_with_name("embedding").unwrap()),
                ("title_embedding", schema.field_with_name("title_embedding").unwrap()),
            ] {
                let inner = match ty.data_type() {
                    DataType::FixedSizeList(f, 384) | DataType::List(f) => f.data_type().clone(),
                    other => panic!("{name}: {other}"),
                };
                assert_eq!(inner, item, "{} {name}", file.display());
            }
        }
    }
}

#[test]
fn the_golden_v9_snapshot_verifies_opens_and_answers_grep_where_v8_cannot() {
    check_golden(GOLDEN_V9, &latest_snapshot(GOLDEN_V9), 9, 9);
    let grep = |fixture: &str, pattern: &str| {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("golden");
        copy_dir(std::path::Path::new(fixture), &copy);
        runtime().block_on(async {
            let st = state(&copy).await;
            let args = json!({"pattern": pattern}).as_object().unwrap().clone();
            hubdex_server::call_tool(&st, "grep", &args).await.unwrap()
        })
    };
    // Format 9 holds every text file of both repositories: flowers.txt (no code rows of its
    // own before format 9 made it a file) and the READMEs.
    let tulip = grep(GOLDEN_V9, "tulip|rose");
    let lines: Vec<(&str, &str, u64)> = tulip["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["repo"].as_str().unwrap(), m["path"].as_str().unwrap(), m["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(lines, [("local/golden", "flowers.txt", 1), ("local/golden", "flowers.txt", 2)]);
    assert_eq!((tulip["count"].clone(), tulip["files"].clone()), (json!(2), json!(1)));
    let readme = grep(GOLDEN_V9, "^# ");
    assert_eq!(readme["files"], json!(2), "{readme}");
    assert_eq!(readme["searched_files"], json!(3), "{readme}");
    // Format 8 has no exact-search store: grep answers, and names what it could not search.
    let old = grep(GOLDEN_V8, "tulip");
    assert_eq!(old["count"], json!(0));
    assert_eq!(old["not_searchable"], json!(["local/golden", "local/golden-two"]), "{old}");
}

#[test]
fn the_golden_v10_snapshot_verifies_opens_and_answers_history_grep_where_v9_cannot() {
    check_golden(GOLDEN_V10, &latest_snapshot(GOLDEN_V10), 10, 9);
    let grep = |fixture: &str, args: Value| {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("golden");
        copy_dir(std::path::Path::new(fixture), &copy);
        runtime().block_on(async {
            let st = state(&copy).await;
            let args = args.as_object().unwrap().clone();
            hubdex_server::call_tool(&st, "grep", &args).await.unwrap()
        })
    };
    // Each flower came in with its own commit; the roses' commit added one line.
    let flowers =
        grep(GOLDEN_V10, json!({"pattern": "tulip|rose", "in": "history", "order": "oldest"}));
    let commits: Vec<(&str, &str)> = flowers["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["title"].as_str().unwrap(), c["lines"][0]["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        commits,
        [("Plant tulips in the flower bed", "tulip"), ("Prune the roses before winter", "rose")]
    );
    assert_eq!(flowers["results"][1]["lines"][0]["change"], json!("+"), "{flowers}");
    assert_eq!(flowers["results"][1]["lines"][0]["path"], json!("flowers.txt"));
    // Four commits change lines in the two repositories.
    assert_eq!(flowers["searched_commits"], json!(4), "{flowers}");
    // Format 9 keeps no changed lines: history grep names what it could not search.
    let old = grep(GOLDEN_V9, json!({"pattern": "tulip", "in": "history"}));
    assert_eq!(old["commits"], json!(0));
    assert_eq!(old["not_searchable"], json!(["local/golden", "local/golden-two"]), "{old}");
}

/// The rows.parquet files of `fixture`'s build segments.
fn build_segment_rows(fixture: &str) -> Vec<std::path::PathBuf> {
    let segments = std::path::Path::new(fixture).join("segments");
    let mut out: Vec<_> = std::fs::read_dir(&segments)
        .unwrap()
        .map(|e| e.unwrap().path().join("rows.parquet"))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// The bytes of the `vectors.hnsw` of `fixture`'s one merged segment.
fn merged_graph(fixture: &str) -> Vec<u8> {
    let segments = std::path::Path::new(fixture).join("segments");
    let unit = std::fs::read_dir(&segments)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("merged-"))
        .unwrap();
    std::fs::read(unit.join("vectors.hnsw")).unwrap()
}

/// What a copy of `fixture` answers to `search` in `fusion` for each query: (id, score) pairs,
/// in answer order.
fn answers(fixture: &str, fusion: &str, top_k: u64, queries: &[&str]) -> Vec<Vec<(Value, Value)>> {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("golden");
    copy_dir(std::path::Path::new(fixture), &copy);
    runtime().block_on(async {
        let st = state(&copy).await;
        let mut out = Vec::new();
        for q in queries {
            let args =
                json!({"query": q, "fusion": fusion, "top_k": top_k}).as_object().unwrap().clone();
            let answer = hubdex_server::call_tool(&st, "search", &args).await.unwrap();
            let results = answer["results"].as_array().unwrap();
            out.push(results.iter().map(|r| (r["id"].clone(), r["score"].clone())).collect());
        }
        out
    })
}

/// Format 7 walks the same graph on sign codes and rescores on the same i8 vectors: on the
/// golden v6 and v7 fixtures (the same repositories) every dense answer has the same rows in
/// the same order, and the same scores within 0.005 (both score the query cast to i8 against
/// the same i8 vectors; usearch's kernel rounds differently).
#[test]
fn formats_6_and_7_answer_dense_queries_alike() {
    let queries = ["tulips", "prune the roses before winter", "a second repository", "why"];
    let v6 = answers(GOLDEN_V6, "dense_only", 5, &queries);
    let v7 = answers(GOLDEN_V7, "dense_only", 5, &queries);
    for ((a, b), q) in v6.iter().zip(&v7).zip(queries) {
        assert_eq!((a.len(), b.len()), (5, 5), "{q}");
        let ids = |x: &[(Value, Value)]| x.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
        assert_eq!(ids(a), ids(b));
        for (x, y) in a.iter().zip(b) {
            let (x, y) = (x.1.as_f64().unwrap(), y.1.as_f64().unwrap());
            assert!((x - y).abs() < 0.005, "{a:?} {b:?}");
        }
    }
}

/// Format 8 keeps rows.parquet's vectors as the i8 values usearch kept of the float32 ones
/// format 7 wrote: built from the same repositories, the golden v7 and v8 fixtures hold the
/// same vector graph to the byte and answer every query alike, in every fusion, to the score.
#[test]
fn formats_7_and_8_hold_the_same_graph_and_answer_alike() {
    assert!(merged_graph(GOLDEN_V7) == merged_graph(GOLDEN_V8), "vectors.hnsw differs");
    let queries = ["tulips", "prune the roses before winter", "a second repository", "why"];
    for fusion in ["dense_only", "sparse_only", "rrf"] {
        let v7 = answers(GOLDEN_V7, fusion, 5, &queries);
        assert!(v7.iter().all(|a| !a.is_empty()), "{fusion}");
        assert_eq!(v7, answers(GOLDEN_V8, fusion, 5, &queries), "{fusion}");
    }
}

/// Format 6 dropped the BM25 fields' positions, which nothing read: the golden v5 and v6
/// fixtures (the same repositories) rank and score every sparse answer alike.
#[test]
fn formats_5_and_6_score_bm25_alike() {
    let queries = ["tulips", "prune the roses before winter", "golden snapshot readme"];
    let v5 = answers(GOLDEN_V5, "sparse_only", 10, &queries);
    for (results, q) in v5.iter().zip(queries) {
        assert!(!results.is_empty(), "{q}");
    }
    assert_eq!(v5, answers(GOLDEN_V6, "sparse_only", 10, &queries));
}

/// A copy of the golden fixture of format `version`, rebuilt from its own repositories (made
/// again, the same commits): the build must publish a snapshot of the current format on top of
/// it without embedding anything. Returns the copy's directory (in `dir`) and the new manifest.
fn rebuilt_without_embedding(
    fixture: &str,
    version: u32,
    dir: &std::path::Path,
) -> (std::path::PathBuf, hubdex_formats::Manifest) {
    let copy = dir.join("store");
    copy_dir(std::path::Path::new(fixture), &copy);
    let repos = dir.join("repos");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/make-golden.sh");
    let made = std::process::Command::new("bash")
        .args([script, "--repos"])
        .arg(&repos)
        .arg(version.to_string())
        .status()
        .unwrap();
    assert!(made.success());
    let mut opts = crate::fixture::options(&copy, &repos.join("golden"));
    opts.sources.push(repos.join("golden-two"));
    let m = runtime().block_on(async {
        let store = Store::open(copy.to_str().unwrap()).unwrap();
        let before = store.latest_manifest().await.unwrap();
        let report = hubdex_indexer::build(&opts).await.unwrap();
        assert!(report.published);
        assert_eq!((report.embedded, report.reused), (0, report.rows), "{report:?}");
        let m = store.latest_manifest().await.unwrap();
        assert_eq!(
            (m.format_version, m.parent.as_deref()),
            (FORMAT_VERSION, Some(before.snapshot.as_str()))
        );
        assert_eq!(m.build.rows, before.segments.iter().map(|s| s.rows).sum::<u64>());
        assert!(m.segments.iter().all(|s| !s.has_serving_files()), "{:?}", m.segments);
        assert_eq!(m.serving_units().len(), 1);
        m
    });
    (copy, m)
}

/// A store built before format 5 keeps rebuilding incrementally: the golden v4 fixture rebuilt
/// publishes a snapshot of the current format without embedding anything, and it answers as
/// the v4 one did.
#[test]
fn a_format_4_store_rebuilds_as_the_current_format_reusing_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let (copy, m) = rebuilt_without_embedding(GOLDEN_V4, 4, dir.path());
    runtime().block_on(async {
        let st = state(&copy).await;
        let args = json!({"query": "plant tulips in the flower bed", "top_k": 1})
            .as_object()
            .unwrap()
            .clone();
        let answer = hubdex_server::call_tool(&st, "search", &args).await.unwrap();
        assert_eq!(answer["snapshot"], json!(m.snapshot));
        assert_eq!(answer["results"][0]["title"], json!("Plant tulips in the flower bed"));
    });
}

/// A format-7 store (float32 vectors in rows.parquet) rebuilt reuses every vector, quantized
/// as usearch quantized it: the new merged unit's graph is the old one to the byte.
#[test]
fn a_format_7_store_rebuilds_with_its_vectors_kept_as_its_graph_kept_them() {
    let dir = tempfile::tempdir().unwrap();
    let (copy, m) = rebuilt_without_embedding(GOLDEN_V7, 7, dir.path());
    let unit = &m.serving_units()[0];
    let rebuilt = copy.join("segments").join(&unit.id).join("vectors.hnsw");
    assert!(std::fs::read(&rebuilt).unwrap() == merged_graph(GOLDEN_V7));
    let v7: std::collections::HashMap<String, hubdex_formats::Row> = build_segment_rows(GOLDEN_V7)
        .into_iter()
        .flat_map(|f| read_rows(&f, true).unwrap())
        .map(|r| (r.id.clone(), r))
        .collect();
    for file in build_segment_rows(copy.to_str().unwrap()) {
        for r in read_rows(&file, true).unwrap() {
            if let Some(o) = v7.get(&r.id) {
                assert_eq!((&r.embedding, &r.title_embedding), (&o.embedding, &o.title_embedding));
            }
        }
    }
}

/// The snapshot a committed fixture's LATEST names.
fn latest_snapshot(fixture: &str) -> String {
    let latest = std::fs::read_to_string(format!("{fixture}/LATEST")).unwrap();
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    latest["snapshot"].as_str().unwrap().to_string()
}

fn check_golden(fixture: &str, snapshot: &str, version: u32, rows: usize) {
    // Work on a copy: opening a local store must not need to write into the fixture.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("golden");
    copy_dir(std::path::Path::new(fixture), &copy);
    runtime().block_on(async {
        let store = Store::open(copy.to_str().unwrap()).unwrap();
        let manifest = store.latest_manifest().await.unwrap();
        assert_eq!(manifest.snapshot, snapshot);
        assert_eq!(manifest.format_version, version);
        let seg = &manifest.segments[0];
        let cache = dir.path().join("cache");
        let seg_dir = store.fetch_segment(seg, &cache).await.unwrap();
        let (serve_dir, rows) = if version < 3 {
            // Older segments are upgraded to the serving layout as they enter a cache.
            let up = dir.path().join("upgraded");
            upgrade_segment(&seg_dir, &up).unwrap();
            (up, rows)
        } else if version >= 5 {
            // A format-5 build segment holds its rows only: its merged segment serves it.
            let err = Segment::open(&seg_dir).unwrap_err().to_string();
            assert!(err.contains("holds only its rows"), "{err}");
            let unit = &manifest.merged[0];
            assert!(unit.members.contains(&seg.id));
            let unit_rows = unit.rows as usize;
            assert!(unit_rows > rows, "the unit serves both repositories");
            (store.fetch_segment(unit, &cache).await.unwrap(), unit_rows)
        } else {
            (seg_dir.clone(), rows)
        };
        let opened = Segment::open(&serve_dir).unwrap();
        assert_eq!(opened.text.rows().unwrap().len(), rows);
        // Format 4 wrote i8 vectors, and a second (title-only) vector for the one commit with a
        // message body; every older format's f16 vectors still open as f16, one per row.
        let scalar = match version {
            7.. => "b1+i8",
            4..=6 => "i8",
            _ => "f16",
        };
        assert_eq!(opened.meta.vector_scalar, scalar);
        assert_eq!(opened.meta.second_vectors, if version >= 4 { 1 } else { 0 });
        if version >= 3 {
            // Two repositories, served by one merged segment.
            assert_eq!(manifest.segments.len(), 2);
            assert_eq!(manifest.merged.len(), 1);
            assert_eq!(manifest.serving_units().len(), 1);
        }
        let rows = read_rows(&seg_dir.join("rows.parquet"), true).unwrap();
        let titles: Vec<&str> = rows.iter().filter_map(|r| r.title.as_deref()).collect();
        assert!(titles.contains(&"Plant tulips in the flower bed"), "{titles:?}");
        assert!(rows.iter().all(|r| r.embedding.len() == 384));

        let st = state(&copy).await;
        let args = json!({"query": "tulips", "fusion": "sparse_only", "top_k": 1})
            .as_object()
            .unwrap()
            .clone();
        let answer = hubdex_server::call_tool(&st, "search", &args).await.unwrap();
        assert_eq!(answer["snapshot"], json!(snapshot));
        assert_eq!(answer["results"][0]["title"], json!("Plant tulips in the flower bed"));
        // The vectors answer too, in whichever scalar they were written.
        let args = json!({"query": "plant tulips in the flower bed", "fusion": "dense_only",
            "type": "commit", "top_k": 1})
        .as_object()
        .unwrap()
        .clone();
        let answer = hubdex_server::call_tool(&st, "search", &args).await.unwrap();
        assert_eq!(answer["results"][0]["title"], json!("Plant tulips in the flower bed"));
    });
}

#[test]
fn a_corrupted_golden_file_is_refused_before_anything_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("golden");
    copy_dir(std::path::Path::new(GOLDEN), &copy);
    let seg_dir = std::fs::read_dir(copy.join("segments")).unwrap().next().unwrap().unwrap().path();
    let target = seg_dir.join("vectors.usearch");
    let mut bytes = std::fs::read(&target).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&target, bytes).unwrap();
    runtime().block_on(async {
        let store = Store::open(copy.to_str().unwrap()).unwrap();
        let manifest = store.latest_manifest().await.unwrap();
        let err = store
            .fetch_segment(&manifest.segments[0], &dir.path().join("cache"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("vectors.usearch"), "{err}");
        assert!(err.to_string().contains("sha256"), "{err}");
        assert!(
            !dir.path().join("cache/segments").join(&manifest.segments[0].id).exists(),
            "nothing half-verified enters the cache"
        );
    });
}

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(from).unwrap();
        let dest = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The writer of rows.parquet, generated from one list of columns, writes the golden v8
/// segments' own rows back to the very bytes the fixture holds: the schema, the column order
/// and every type are what format 8 wrote.
#[test]
fn golden_v8_rows_written_again_are_the_same_bytes() {
    let files = build_segment_rows(GOLDEN_V8);
    assert_eq!(files.len(), 2, "the golden v8 fixture has two build segments");
    for rows_file in files {
        let rows = read_rows(&rows_file, true).unwrap();
        let dim = rows[0].embedding.len();
        let dir = tempfile::tempdir().unwrap();
        let again = dir.path().join("rows.parquet");
        hubdex_formats::write_rows(&again, &rows, dim).unwrap();
        assert!(
            std::fs::read(&again).unwrap() == std::fs::read(&rows_file).unwrap(),
            "{} written again differs",
            rows_file.display()
        );
    }
}
