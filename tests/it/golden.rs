//! The committed golden snapshot of format version 1 still opens and answers: a reader change
//! that breaks old snapshots fails here.

use hubdex_formats::{FORMAT_VERSION, Segment, Store, read_rows};
use serde_json::json;

use crate::fixture::{runtime, state};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v1");
const GOLDEN_SNAPSHOT: &str = "20261129T193202Z-c1deaba1";

#[test]
fn the_golden_v1_snapshot_verifies_opens_and_answers() {
    assert_eq!(
        FORMAT_VERSION, 1,
        "a new format version needs a golden fixture of its own (tests/fixtures/make-golden.sh)"
    );
    // Work on a copy: opening a local store must not need to write into the fixture.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("golden");
    copy_dir(std::path::Path::new(GOLDEN), &copy);
    runtime().block_on(async {
        let store = Store::open(copy.to_str().unwrap()).unwrap();
        let manifest = store.latest_manifest().await.unwrap();
        assert_eq!(manifest.snapshot, GOLDEN_SNAPSHOT);
        assert_eq!(manifest.format_version, 1);
        let seg = &manifest.segments[0];
        let cache = dir.path().join("cache");
        let seg_dir = store.fetch_segment(seg, &cache).await.unwrap();
        let opened = Segment::open(&seg_dir).unwrap();
        assert_eq!(opened.rows.len(), 5);
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
        assert_eq!(answer["snapshot"], json!(GOLDEN_SNAPSHOT));
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
