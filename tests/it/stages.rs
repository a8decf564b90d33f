//! The stage commands a workflow runs (crawl and embed per shard, one publish) give the same
//! rows and vectors as one `build`; publish refuses a staged segment that fails verification.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use hubdex_formats::{Store, read_rows};
use hubdex_indexer::{BuildOptions, Shard, build, crawl, embed, publish};

use crate::fixture::runtime;

/// Three repositories under one directory.
fn repos(dir: &std::path::Path) -> PathBuf {
    let root = dir.join("src");
    for name in ["alpha", "beta", "gamma"] {
        hubdex_tests::make_repo(&root.join(name));
        std::fs::write(
            root.join(name).join("NAME.md"),
            format!("# {name}\n\nThe {name} project.\n"),
        )
        .unwrap();
        let git = |args: &[&str]| {
            assert!(
                Command::new("git")
                    .arg("-C")
                    .arg(root.join(name))
                    .args(args)
                    .status()
                    .unwrap()
                    .success()
            )
        };
        git(&["add", "."]);
        git(&[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            &format!("Name the {name} project"),
        ]);
    }
    root
}

fn opts(store: &std::path::Path, src: &std::path::Path) -> BuildOptions {
    let mut o = BuildOptions::new(
        store.to_str().unwrap(),
        hubdex_tests::model_dir(),
        vec![src.to_path_buf()],
    );
    o.cache = store.with_extension("cache");
    o
}

/// repo → (id, content hash, embedding) of every row in the store's current snapshot.
fn snapshot_rows(store: &std::path::Path) -> BTreeMap<String, Vec<(String, String, Vec<i8>)>> {
    runtime().block_on(async {
        let s = Store::open(store.to_str().unwrap()).unwrap();
        let m = s.latest_manifest().await.unwrap();
        let cache = tempfile::tempdir().unwrap();
        let mut out = BTreeMap::new();
        for seg in &m.segments {
            let dir = s.fetch_segment(seg, cache.path()).await.unwrap();
            let rows = read_rows(&dir.join("rows.parquet"), true).unwrap();
            out.insert(
                seg.repo.clone(),
                rows.into_iter().map(|r| (r.id, r.content_sha256, r.embedding)).collect(),
            );
        }
        out
    })
}

#[test]
fn two_shards_through_the_stage_commands_equal_one_build() {
    let dir = tempfile::tempdir().unwrap();
    let src = repos(dir.path());
    let one = dir.path().join("one");
    let staged = dir.path().join("staged");
    runtime().block_on(build(&opts(&one, &src))).unwrap();
    let o = opts(&staged, &src);
    let shards: Vec<Shard> = vec!["1/2".parse().unwrap(), "2/2".parse().unwrap()];
    runtime().block_on(async {
        let mut crawled = Vec::new();
        for s in &shards {
            crawled.extend(crawl(&o, "run-1", *s).await.unwrap().repos);
        }
        crawled.sort();
        assert_eq!(
            crawled,
            vec!["local/alpha", "local/beta", "local/gamma"],
            "every repo in exactly one shard"
        );
        for s in &shards {
            embed(&o, "run-1", *s).await.unwrap();
        }
        let r = publish(&o, "run-1").await.unwrap();
        assert!(r.published);
        assert!(
            Store::open(staged.to_str().unwrap())
                .unwrap()
                .list("staging")
                .await
                .unwrap()
                .is_empty(),
            "staging is cleaned up"
        );
    });
    assert_eq!(snapshot_rows(&staged), snapshot_rows(&one), "same rows and vectors as one build");
    // The manifest's build figures are those of the one-process build (timings aside).
    let stats = |store: &std::path::Path| {
        let m = runtime()
            .block_on(Store::open(store.to_str().unwrap()).unwrap().current_manifest())
            .unwrap()
            .expect("a snapshot");
        (m.build.rows, m.build.embedded, m.build.reused, m.build.embed_seconds > 0.0)
    };
    let (one_stats, staged_stats) = (stats(&one), stats(&staged));
    assert!(one_stats.1 > 0, "the one build embedded rows: {one_stats:?}");
    assert_eq!(staged_stats, one_stats, "staged (rows, embedded, reused, timed) = one build's");
}

#[test]
fn publish_refuses_a_staged_segment_that_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let src = repos(dir.path());
    let store = dir.path().join("store");
    let o = opts(&store, &src);
    let first = runtime().block_on(build(&o)).unwrap();
    std::fs::write(src.join("alpha").join("MORE.md"), "# More\n\nAnother page.\n").unwrap();
    let git = |args: &[&str]| {
        assert!(
            Command::new("git")
                .arg("-C")
                .arg(src.join("alpha"))
                .args(args)
                .status()
                .unwrap()
                .success()
        )
    };
    git(&["add", "."]);
    git(&["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "More pages"]);
    runtime().block_on(async {
        crawl(&o, "run-2", Shard::ALL).await.unwrap();
        embed(&o, "run-2", Shard::ALL).await.unwrap();
        // Corrupt the new alpha segment after it was staged.
        let s = Store::open(store.to_str().unwrap()).unwrap();
        let entry: hubdex_formats::ManifestSegment = serde_json::from_slice(
            &s.get_opt("staging/run-2/segments/local__alpha.json").await.unwrap().unwrap(),
        )
        .unwrap();
        let target = store.join("segments").join(&entry.id).join("rows.parquet");
        let mut bytes = std::fs::read(&target).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&target, bytes).unwrap();
        let err = publish(&o, "run-2").await.unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("failed verification") && msg.contains("rows.parquet"), "{msg}");
        assert_eq!(
            s.latest().await.unwrap().unwrap().snapshot,
            first.snapshot,
            "LATEST did not move"
        );
        // The run never published: its staged records stay until gc finds them older than
        // the grace period, then go with the segment only they named.
        let grace = chrono::Duration::hours(1);
        let young = hubdex_indexer::gc(&s, 5, grace, chrono::Utc::now()).await.unwrap();
        assert_eq!(young.young_staged_runs, ["run-2"], "{young:?}");
        assert!(young.deleted_staged_runs.is_empty() && young.deleted_segments.is_empty());
        assert!(!s.list("staging/run-2").await.unwrap().is_empty());
        let later = chrono::Utc::now() + chrono::Duration::hours(2);
        let old = hubdex_indexer::gc(&s, 5, grace, later).await.unwrap();
        assert_eq!(old.deleted_staged_runs, ["run-2"], "{old:?}");
        assert!(old.deleted_segments.contains(&entry.id), "{old:?}");
        assert!(s.list("staging").await.unwrap().is_empty());
        assert_eq!(s.latest().await.unwrap().unwrap().snapshot, first.snapshot);
        assert!(s.verified_latest().await.is_ok(), "the snapshot keeps every file it names");
    });
}
