//! Building a snapshot of a generated repository: layout, checksums, rows, search, reuse.

use hubdex_formats::{Manifest, SegmentMeta, hash_file, read_rows};
use hubdex_indexer::build;
use hubdex_tests::PARAPHRASES;
use serde_json::{Map, json};

use crate::fixture::{fixture, options, runtime, state};

#[test]
fn the_store_has_the_layout_of_the_design() {
    let f = fixture();
    let latest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.store.join("LATEST")).unwrap()).unwrap();
    let id = latest["snapshot"].as_str().unwrap();
    assert_eq!(id, f.first.snapshot);
    assert!(latest["manifest_sha256"].as_str().unwrap().len() == 64);
    let manifest_path = f.store.join("snapshots").join(id).join("manifest.json");
    let bytes = std::fs::read(&manifest_path).unwrap();
    assert_eq!(hubdex_formats::sha256_hex(&bytes), latest["manifest_sha256"].as_str().unwrap());
    let manifest = Manifest::parse("manifest", &bytes).unwrap();
    assert_eq!(manifest.segments.len(), 1);
    assert_eq!(manifest.parent, None);
    assert_eq!(manifest.model.dim, 384);
    let seg = &manifest.segments[0];
    assert_eq!(seg.repo, "local/widgets");
    let seg_dir = f.store.join("segments").join(&seg.id);
    for name in ["rows.parquet", "segment.json"] {
        assert!(seg_dir.join(name).is_file(), "{name} missing from {}", seg_dir.display());
    }
    // The build segment holds its rows; the serving files are written once, in the merged
    // segment that serves it alone (format 5).
    for name in ["vectors.hnsw", "text"] {
        assert!(!seg_dir.join(name).exists(), "{name} in {}", seg_dir.display());
    }
    assert_eq!(manifest.merged.len(), 1);
    assert_eq!(manifest.merged[0].members, std::slice::from_ref(&seg.id));
    let unit_dir = f.store.join("segments").join(&manifest.merged[0].id);
    for name in ["vectors.hnsw", "segment.json", "text/meta.json"] {
        assert!(unit_dir.join(name).is_file(), "{name} missing from {}", unit_dir.display());
    }
    assert!(!unit_dir.join("rows.parquet").exists(), "no second copy of the rows");
    // Snapshot ids sort by time: 20261129T180000Z-<hash8>.
    assert_eq!(id.len(), 25);
    assert_eq!(&id[8..9], "T");
    assert_eq!(&id[15..17], "Z-");
}

/// The fixture's build segment (the one holding rows.parquet; the other is its merged unit).
fn build_segment_dir(store: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(store.join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("rows.parquet").is_file())
        .expect("a build segment")
}

#[test]
fn every_sha256_in_segment_json_matches_its_file() {
    let f = fixture();
    for seg_dir in std::fs::read_dir(f.store.join("segments")).unwrap() {
        every_listed_file_matches(&seg_dir.unwrap().path());
    }
}

fn every_listed_file_matches(seg_dir: &std::path::Path) {
    let meta =
        SegmentMeta::parse("segment.json", &std::fs::read(seg_dir.join("segment.json")).unwrap())
            .unwrap();
    let on_disk: Vec<String> = walkdir::WalkDir::new(seg_dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(seg_dir).unwrap().to_string_lossy().replace('\\', "/"))
        .filter(|p| p != "segment.json")
        .collect();
    assert_eq!(meta.files.len(), on_disk.len(), "segment.json lists every file: {on_disk:?}");
    for file in &meta.files {
        let (sha, bytes) = hash_file(&seg_dir.join(&file.path)).unwrap();
        assert_eq!(sha, file.sha256, "{}", file.path);
        assert_eq!(bytes, file.bytes, "{}", file.path);
    }
}

#[test]
fn commits_on_every_branch_and_doc_chunks_become_rows() {
    let f = fixture();
    let seg_dir = build_segment_dir(&f.store);
    let rows = read_rows(&seg_dir.join("rows.parquet"), true).unwrap();
    let commits: Vec<_> = rows.iter().filter(|r| r.kind().as_str() == "commit").collect();
    assert_eq!(commits.len(), f.repo.commits);
    assert!(
        commits.iter().any(|r| r
            .title
            .as_deref()
            .unwrap_or("")
            .starts_with("Search feature step 3")),
        "feature branch commits are indexed"
    );

    let merge = commits
        .iter()
        .find(|r| r.title.as_deref() == Some(f.repo.merge_subject.as_str()))
        .expect("merge commit");
    assert!(merge.body.contains("Merge of "), "{}", merge.body);

    let latin1 = commits
        .iter()
        .find(|r| r.title.as_deref().unwrap_or("").starts_with(&f.repo.non_utf8_subject_prefix))
        .unwrap();
    assert_eq!(latin1.title.as_deref(), Some("Caf\u{fffd}: fix encoding of the menu"));

    let big = commits
        .iter()
        .find(|r| r.title.as_deref() == Some(f.repo.big_diff_subject.as_str()))
        .unwrap();
    assert!(
        big.body.contains("more diff lines not shown]"),
        "{}",
        &big.body[big.body.len() - 200..]
    );
    assert_eq!(big.files_changed, vec!["data/big.txt".to_string()]);
    assert_eq!(big.author.as_deref(), Some("Ada Lovelace <ada@example.com>"));
    assert_eq!(big.committer.as_deref(), Some("Grace Hopper <grace@example.com>"));
    assert!(big.commit_sha.as_ref().unwrap().len() == 40);
    assert!(big.embedding.len() == 384);

    let docs: Vec<_> = rows.iter().filter(|r| r.kind().as_str() == "doc").collect();
    let mut paths: Vec<String> = docs.iter().filter_map(|r| r.path.clone()).collect();
    paths.dedup();
    paths.sort();
    paths.dedup();
    assert_eq!(paths, f.repo.markdown_files);
    let deleting = docs
        .iter()
        .find(|r| r.heading_path == vec!["User guide".to_string(), "Deleting widgets".to_string()])
        .unwrap();
    assert_eq!((deleting.line_start, deleting.line_end), (Some(7), Some(9)));
    assert!(deleting.body.contains("thirty days"));
}

#[test]
fn a_paraphrase_of_a_commit_subject_finds_it_in_the_top_3() {
    let f = fixture();
    runtime().block_on(async {
        let st = state(&f.store).await;
        for (query, subject) in PARAPHRASES {
            let mut args = Map::new();
            args.insert("query".into(), json!(query));
            args.insert("top_k".into(), json!(3));
            args.insert("type".into(), json!("commit"));
            let answer = hubdex_server::call_tool(&st, "search", &args).await.unwrap();
            let titles: Vec<&str> = answer["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["title"].as_str().unwrap())
                .collect();
            assert!(
                titles.contains(subject),
                "{query:?} should find {subject:?} in the top 3, got {titles:?}"
            );
            let hit = answer["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["title"] == json!(subject))
                .unwrap();
            assert_eq!(hit["commit_sha"].as_str().unwrap().len(), 40);
            assert_eq!(answer["snapshot"], json!(f.first.snapshot));
        }
    });
}

#[test]
fn a_second_build_with_no_change_embeds_nothing_and_publishes_nothing() {
    let f = fixture();
    assert!(f.first.embedded > 50, "first build embeds every row: {}", f.first.embedded);
    let again = runtime().block_on(build(&options(&f.store, &f.repo.dir))).unwrap();
    assert_eq!(again.embedded, 0);
    assert_eq!(again.reused, f.first.rows);
    assert!(!again.published);
    assert_eq!(again.snapshot, f.first.snapshot);
}

#[test]
fn a_new_commit_embeds_only_its_row_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let repo = hubdex_tests::make_repo(&dir.path().join("r"));
    let store = dir.path().join("store");
    let rt = runtime();
    let first = rt.block_on(build(&options(&store, &repo.dir))).unwrap();
    std::fs::write(repo.dir.join("NEW.txt"), "new\n").unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo.dir)
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["add", "."]);
    git(&[
        "-c",
        "user.name=T",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-q",
        "-m",
        "Add the NEW file",
    ]);
    let second = rt.block_on(build(&options(&store, &repo.dir))).unwrap();
    // The commit, its one diff row, and the new file's one code chunk; the rest is reused.
    assert_eq!(second.embedded, 3, "only the new commit and the new file are embedded");
    assert_eq!(second.rows, first.rows + 3);
    assert!(second.published);
    let m = rt.block_on(async {
        hubdex_formats::Store::open(&store.display().to_string())
            .unwrap()
            .latest_manifest()
            .await
            .unwrap()
    });
    assert_eq!(m.parent.as_deref(), Some(first.snapshot.as_str()));
    assert_eq!(m.build.embedded, 3);
}
