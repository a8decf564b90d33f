//! The memory budget: a repository whose rows do not fit a build segment's share
//! is written as several build segments, with the same rows, reused by id, rewritten locally;
//! and a repository served by several units answers as one served by one.
//!
//! These builds embed with `HashEmbedder` (tests and hubdex-bench only): what is checked here
//! is which rows go where, not what the vectors mean.

use std::path::{Path, PathBuf};

use hubdex_formats::{
    BuildStats, Edge, FORMAT_VERSION, FileText, Manifest, ManifestSegment, Row, Store,
    ThreadNumbers, read_edges, read_files, read_rows, sha256_hex,
};
use hubdex_indexer::{
    BuildOptions, BuildReport, Config, CrawlReport, MemoryBudget, Shard, build_with, crawl_with,
    embed_with, publish,
};
use hubdex_runtime::TextEmbedder;
use hubdex_tests::{
    HashEmbedder, add_commit, add_commit_at, synthetic_history, synthetic_history_with_references,
};
use serde_json::{Value, json};

use crate::fixture::{options, runtime, state};

/// A budget whose build segments hold about 768 KB of row data each (a test's history of a few
/// MB is cut into several).
fn small_budget() -> MemoryBudget {
    MemoryBudget::unchecked(6 << 20)
}

fn build_into(opts: &BuildOptions) -> BuildReport {
    runtime().block_on(build_with(opts, &HashEmbedder::new(384))).expect("build")
}

/// A build segment as read back: (entry, rows, files, edges).
type ReadSegment = (ManifestSegment, Vec<Row>, Vec<FileText>, Vec<Edge>);

/// Every build segment of the current snapshot.
fn segments(store: &Path) -> Vec<ReadSegment> {
    let cache = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let store = Store::open(&store.display().to_string()).unwrap();
        let m = store.latest_manifest().await.unwrap();
        let mut out = Vec::new();
        for seg in &m.segments {
            let dir = store.fetch_segment(seg, cache.path()).await.unwrap();
            // A segment without files or edges has no such file: both read as empty.
            out.push((
                seg.clone(),
                read_rows(&dir.join("rows.parquet"), true).unwrap(),
                read_files(&dir.join("files.parquet")).unwrap(),
                read_edges(&dir.join("edges.parquet")).unwrap(),
            ));
        }
        out
    })
}

/// The union of the snapshot's rows, files and edges, each sorted.
fn content(store: &Path) -> (Vec<Row>, Vec<(String, String)>, Vec<String>) {
    let mut rows = Vec::new();
    let mut files = Vec::new();
    let mut edges = Vec::new();
    for (_, r, f, e) in segments(store) {
        rows.extend(r);
        files.extend(f.into_iter().map(|f| (f.path, f.content)));
        edges.extend(e.into_iter().map(|e| format!("{e:?}")));
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    files.sort();
    edges.sort();
    (rows, files, edges)
}

fn history(dir: &Path, commits: usize) -> PathBuf {
    let repo = dir.join("history");
    synthetic_history(&repo, commits, 11).unwrap();
    repo
}

#[test]
fn a_repository_over_the_budget_is_several_build_segments_holding_one_builds_rows() {
    let dir = tempfile::tempdir().unwrap();
    let repo = history(dir.path(), 300);
    let whole = options(&dir.path().join("whole"), &repo);
    let report = build_into(&whole);
    assert_eq!(report.segments_written, 1, "{report:?}");
    let mut cut = options(&dir.path().join("cut"), &repo);
    cut.memory_budget = small_budget();
    let report = build_into(&cut);
    let parts = segments(&dir.path().join("cut"));
    assert!(parts.len() >= 4, "{} build segments", parts.len());
    assert_eq!(report.segments_written, parts.len());
    assert!(parts.iter().all(|(s, ..)| s.repo == "local/history"));
    // Several segments hold files and some hold edges; together they are one build's.
    assert!(parts.iter().filter(|(_, _, f, _)| !f.is_empty()).count() > 1);
    let (rows_a, files_a, edges_a) = content(&dir.path().join("whole"));
    let (rows_b, files_b, edges_b) = content(&dir.path().join("cut"));
    assert!(rows_a.len() > 1000, "{} rows", rows_a.len());
    assert_eq!(rows_a.len(), rows_b.len());
    for (a, b) in rows_a.iter().zip(&rows_b) {
        assert_eq!(a, b, "row {} differs", a.id);
    }
    assert_eq!(files_a, files_b);
    assert_eq!(edges_a, edges_b);
}

/// A 400-commit history in `dir`, its store and the options that build its commit and diff
/// rows alone (code rows name the HEAD commit, so a commit changes every segment that holds
/// code: see docs/architecture.md) under [`small_budget`]: (repository, store, options).
fn history_alone(dir: &Path) -> (PathBuf, PathBuf, BuildOptions) {
    rows_of_history_alone(dir, history(dir, 400))
}

/// [`history_alone`] of the repository `repo`.
fn rows_of_history_alone(dir: &Path, repo: PathBuf) -> (PathBuf, PathBuf, BuildOptions) {
    let toml = dir.join("hubdex.toml");
    std::fs::write(
        &toml,
        format!("[[repos]]\nname = {:?}\ntypes = [\"commit\", \"diff\"]\n", repo.display()),
    )
    .unwrap();
    let store = dir.join("store");
    let mut opts = options(&store, &repo);
    opts.memory_budget = small_budget();
    opts.rules = Config::load(&toml).unwrap().rules().unwrap();
    (repo, store, opts)
}

/// The ids of the current snapshot's build segments.
fn segment_ids(store: &Path) -> Vec<String> {
    segments(store).into_iter().map(|s| s.0.id).collect()
}

#[test]
fn an_unchanged_rebuild_reuses_every_build_segment_and_a_new_commit_rewrites_one() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, store, opts) = history_alone(dir.path());
    build_into(&opts);
    let before = segment_ids(&store);
    assert!(before.len() >= 3, "{} build segments", before.len());

    let again = build_into(&opts);
    assert!(!again.published, "{again:?}");
    assert_eq!((again.segments_written, again.segments_unchanged), (0, before.len()));
    // Most build segments were found again by their history spans: their diffs were not read.
    assert!(again.commits_skipped >= 200, "{again:?}");

    add_commit(&repo, "Record the delta in the notes", "notes/delta.dat").unwrap();
    let delta = build_into(&opts);
    assert!(delta.published);
    let after = segment_ids(&store);
    let kept = after.iter().filter(|id| before.contains(id)).count();
    assert_eq!(delta.segments_written, 1, "{delta:?}");
    assert_eq!(kept, before.len() - 1, "before {before:?}, after {after:?}");
    assert_eq!(delta.embedded, 2, "the new commit's row and its diff's");
    assert!(delta.commits_skipped >= 200, "{delta:?}");
    // What the delta published without reading those diffs is what a build from nothing makes.
    assert_same_build_segments(&store, &opts, &dir.path().join("fresh"));
}

#[test]
fn thread_numbers_are_written_as_gaps_and_a_store_that_lists_them_is_found_again_by_its_spans() {
    let dir = tempfile::tempdir().unwrap();
    // Every commit names its pull request and closes an issue.
    let repo = dir.path().join("references");
    synthetic_history_with_references(&repo, 400, 11, true).unwrap();
    let (_, store, opts) = rows_of_history_alone(dir.path(), repo);
    build_into(&opts);
    let before = segment_ids(&store);
    let named = segments(&store)
        .into_iter()
        .filter_map(|(s, ..)| s.history)
        .filter(|h| h.threads.len() >= 2 * h.commits as usize - 2)
        .count();
    assert!(named >= 3, "{named} history spans name their commits' threads");

    // Rewritten as a store written before the gaps holds them: lists, under `threads`.
    let latest_path = store.join("LATEST");
    let mut latest: Value = serde_json::from_slice(&std::fs::read(&latest_path).unwrap()).unwrap();
    let snapshot = latest["snapshot"].as_str().unwrap().to_string();
    let manifest_path = store.join("snapshots").join(snapshot).join("manifest.json");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let mut lists = 0;
    for seg in manifest["segments"].as_array_mut().unwrap() {
        let Some(span) = seg.get_mut("history").and_then(Value::as_object_mut) else { continue };
        assert!(!span.contains_key("threads"), "{span:?}");
        if let Some(gaps) = span.remove("thread_gaps") {
            assert!(gaps.is_string(), "{gaps}");
            let held: ThreadNumbers = serde_json::from_value(gaps).unwrap();
            span.insert("threads".into(), json!(held.to_vec()));
            lists += 1;
        }
    }
    assert!(lists >= named, "{lists} spans with thread numbers in manifest.json");
    let bytes = serde_json::to_vec_pretty(&manifest).unwrap();
    std::fs::write(&manifest_path, &bytes).unwrap();
    latest["manifest_sha256"] = json!(sha256_hex(&bytes));
    std::fs::write(&latest_path, serde_json::to_vec_pretty(&latest).unwrap()).unwrap();

    // Read as lists, the numbers give the same spans: nothing changed, nothing is published.
    let again = build_into(&opts);
    assert!(!again.published, "{again:?}");
    assert_eq!((again.segments_written, again.segments_unchanged), (0, before.len()));
    assert!(again.commits_skipped >= 200, "{again:?}");
}

/// Builds `opts`' repository from nothing into `fresh` and checks that its build segments are
/// `store`'s: the same ids (so the same rows, files and edges) with the same history spans.
fn assert_same_build_segments(store: &Path, opts: &BuildOptions, fresh: &Path) {
    let mut from_nothing = opts.clone();
    from_nothing.store = fresh.display().to_string();
    let report = build_into(&from_nothing);
    assert_eq!(report.commits_skipped, 0, "{report:?}");
    let listed = |store: &Path| {
        segments(store).into_iter().map(|(s, ..)| (s.id, s.history)).collect::<Vec<_>>()
    };
    let (a, b) = (listed(store), listed(fresh));
    assert!(a.iter().filter(|(_, h)| h.is_some()).count() >= 3, "{a:?}");
    assert_eq!(a, b);
}

#[test]
fn a_new_release_tag_rewrites_the_build_segments_whose_commits_it_ships_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, store, opts) = history_alone(dir.path());
    build_into(&opts);
    let before = segment_ids(&store);

    // A release of the history as it was 150 commits ago: each older commit gets a
    // `shipped_in` edge, which its build segment holds, so those segments change; the newer
    // ones do not, and are found again by their spans.
    let out = std::process::Command::new("git")
        .args(["tag", "v0.1.0", "HEAD~150"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let tagged = build_into(&opts);
    assert!(tagged.published, "{tagged:?}");
    let after = segment_ids(&store);
    let kept = after.iter().filter(|id| before.contains(id)).count();
    assert!(tagged.segments_written >= 2, "{tagged:?}");
    // Their texts did not change: every vector is found again (the first changed segment
    // looks for its texts itself, the next ones through the index of every earlier text).
    assert_eq!(tagged.embedded, 0, "{tagged:?}");
    assert!(kept >= 2, "before {before:?}, after {after:?}");
    assert!(tagged.commits_skipped > 0 && tagged.commits_skipped < 250, "{tagged:?}");
    assert_same_build_segments(&store, &opts, &dir.path().join("fresh"));
}

/// The three stages of a staged build (`crawl`, `embed`, `publish`; run `run`, one shard) with
/// the hash embedder: their reports.
fn stages(opts: &BuildOptions, run: &str) -> (CrawlReport, BuildReport, BuildReport) {
    let e = HashEmbedder::new(384);
    runtime().block_on(async {
        let crawled = crawl_with(opts, run, Shard::ALL, e.identity()).await.expect("crawl");
        let embedded = embed_with(opts, run, Shard::ALL, &e).await.expect("embed");
        (crawled, embedded, publish(opts, run).await.expect("publish"))
    })
}

#[test]
fn the_staged_build_cuts_a_history_over_the_budget_as_build_does_and_finds_its_spans_again() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, store, opts) = history_alone(dir.path());
    let (crawled, embedded, published) = stages(&opts, "run-1");
    assert!(published.published, "{published:?}");
    assert!(crawled.parts_staged >= 3 && crawled.parts_reused == 0, "{crawled:?}");
    assert_eq!(embedded.segments_written, crawled.parts_staged, "{embedded:?}");
    // The workflow's three stages publish the build segments one `build` does, spans and all.
    assert_same_build_segments(&store, &opts, &dir.path().join("built"));

    let before = segment_ids(&store);
    add_commit(&repo, "Record the delta in the notes", "notes/delta.dat").unwrap();
    let (crawled, embedded, published) = stages(&opts, "run-2");
    assert!(published.published, "{published:?}");
    // The crawl found most build segments again by their spans, staging nothing for them and
    // reading none of their diffs (measured: 13 of 17, 365 commits skipped); it staged the
    // others (the first share's, whose span it does not take, and the end), of which embed
    // found all but the changed one again by their input hashes.
    assert!(crawled.parts_reused >= before.len() / 2, "{crawled:?}");
    assert_eq!(crawled.parts_reused + crawled.parts_staged, before.len(), "{crawled:?}");
    assert!(crawled.commits_skipped >= 200, "{crawled:?}");
    assert_eq!((embedded.segments_written, embedded.embedded), (1, 2), "{embedded:?}");
    assert_eq!(embedded.segments_unchanged, before.len() - 1, "{embedded:?}");
    assert_same_build_segments(&store, &opts, &dir.path().join("fresh"));

    // A crawl cut for one model is not embedded with another: its cut counted that model's
    // vector bytes and the segments it found again hold that model's vectors.
    let other = HashEmbedder::new(256);
    let err = runtime().block_on(async {
        crawl_with(&opts, "run-3", Shard::ALL, HashEmbedder::new(384).identity()).await.unwrap();
        embed_with(&opts, "run-3", Shard::ALL, &other).await.unwrap_err()
    });
    let msg = format!("{err:#}");
    assert!(msg.contains("was crawled for model") && msg.contains("same --model"), "{msg}");
}

/// Runs git in `repo` with fixed author and committer dates; panics naming the command if it
/// fails.
fn git_at(repo: &Path, authored: &str, committed: &str, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=Dev", "-c", "user.email=dev@example.com"])
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_DATE", authored)
        .env("GIT_COMMITTER_DATE", committed)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn commits_that_land_inside_the_cut_order_and_a_rewritten_tail_publish_what_a_build_from_nothing_does()
 {
    let dir = tempfile::tempdir().unwrap();
    let (repo, store, opts) = history_alone(dir.path());
    build_into(&opts);
    let before = segment_ids(&store);

    // A branch whose two commits were authored long ago (a pull request rebased onto an old
    // commit keeps its authors' dates), merged now: the build cuts the history by author time,
    // so both land in the middle of the cut order, between commits the store already holds
    // in one build segment, and the merge row lists them (it lists its branch's titles and
    // paths), so the mainline's meaning changes for them too.
    let mid = "@1500015030 +0000"; // between the 250th and the 251st synthetic commit
    git_at(&repo, mid, mid, &["checkout", "-q", "-b", "topic", "HEAD~140"]);
    add_commit_at(&repo, "Topic: first step", "topic-a.txt", mid).unwrap();
    add_commit_at(&repo, "Topic: second step", "topic-b.txt", mid).unwrap();
    git_at(&repo, mid, mid, &["checkout", "-q", "main"]);
    let now = "2030-02-02T00:00:00Z";
    git_at(&repo, now, now, &["merge", "-q", "--no-ff", "-m", "Merge branch 'topic'", "topic"]);
    let merged = build_into(&opts);
    assert!(merged.published, "{merged:?}");
    let after = segment_ids(&store);
    let kept = after.iter().filter(|id| before.contains(id)).count();
    // Only the build segment the two commits fall in and the stream's end are rewritten; the
    // rest are found again by their spans, their diffs unread (measured: 2 of 17 written, 292
    // of 403 commits skipped).
    assert!(kept >= before.len() / 2, "before {before:?}, after {after:?}");
    assert!(merged.segments_written >= 2, "{merged:?}");
    assert!(merged.commits_skipped >= 200, "{merged:?}");
    assert_same_build_segments(&store, &opts, &dir.path().join("fresh-merged"));

    // The branch is dropped and main's last commits are rewritten (a force-push): the rows of
    // commits no longer in the history must leave the snapshot, whatever spans held them.
    let tail = segment_ids(&store);
    git_at(&repo, now, now, &["reset", "-q", "--hard", "HEAD~4"]);
    git_at(&repo, now, now, &["branch", "-q", "-D", "topic"]);
    add_commit_at(&repo, "Rewritten tail", "tail.txt", "2030-02-03T00:00:00Z").unwrap();
    let rewritten = build_into(&opts);
    assert!(rewritten.published, "{rewritten:?}");
    // The segment that held the branch's commits goes back to what it was before the merge
    // (the store still holds that one: it is not written again), the end is rewritten, the
    // rest found by their spans (measured: 15 of 17 kept, 292 commits skipped).
    let after = segment_ids(&store);
    let kept = after.iter().filter(|id| tail.contains(id)).count();
    assert!(kept >= tail.len() / 2, "{tail:?} → {after:?}");
    assert!(!after.iter().all(|id| tail.contains(id)), "{after:?}");
    assert!(rewritten.commits_skipped >= 200, "{rewritten:?}");
    assert_same_build_segments(&store, &opts, &dir.path().join("fresh-rewritten"));
}

/// Publishes the store's build segments with each served by a unit of its own, as a repository
/// too large for one unit is.
fn serve_each_segment_alone(store_dir: &Path) {
    let work = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let store = Store::open(&store_dir.display().to_string()).unwrap();
        let prev = store.latest_manifest().await.unwrap();
        let mut merged = Vec::new();
        for seg in &prev.segments {
            let member = store.fetch_segment(seg, &work.path().join("members")).await.unwrap();
            let id = hubdex_formats::merged_id(std::slice::from_ref(seg));
            let dir = work.path().join(&id);
            let side_by_side = hubdex_formats::MergeIndexes::SideBySide;
            hubdex_formats::write_merged_segment(
                &dir,
                &id,
                &[member],
                &prev.model,
                side_by_side,
                1,
                hubdex_formats::GraphBuilder::Usearch,
            )
            .unwrap();
            merged.push(store.upload_segment(&dir, |_| {}).await.unwrap());
        }
        let now = chrono::Utc::now() + chrono::Duration::seconds(5);
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            snapshot: hubdex_formats::snapshot_id(now, b"each segment alone"),
            created_at: now,
            parent: Some(prev.snapshot.clone()),
            model: prev.model.clone(),
            build: BuildStats::default(),
            segments: prev.segments.clone(),
            merged,
            earlier_snapshots: None,
        };
        store.publish(&manifest, false).await.unwrap();
    });
}

async fn tool(st: &std::sync::Arc<hubdex_server::AppState>, name: &str, args: Value) -> Value {
    let mut v = hubdex_server::call_tool(st, name, args.as_object().unwrap()).await.unwrap();
    // The snapshot differs; the answer must not.
    if let Some(o) = v.as_object_mut() {
        o.remove("snapshot");
    }
    v
}

#[test]
fn a_repository_served_by_several_units_answers_as_one_served_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let repo = history(dir.path(), 200);
    let whole = options(&dir.path().join("whole"), &repo);
    build_into(&whole);
    let mut cut = options(&dir.path().join("cut"), &repo);
    cut.memory_budget = small_budget();
    build_into(&cut);
    serve_each_segment_alone(&dir.path().join("cut"));
    let (rows, files, _) = content(&dir.path().join("whole"));
    // A file and commits held by the last build segment, and a file of the first one.
    let parts = segments(&dir.path().join("cut"));
    let last = parts.last().unwrap();
    let first_file = parts.iter().find_map(|p| p.2.first()).unwrap().path.clone();
    let last_file = parts.iter().rev().find_map(|p| p.2.last()).unwrap().path.clone();
    let commit = last.1.iter().chain(&rows).find(|r| r.entity.starts_with("commit/")).unwrap();
    assert!(files.len() > 10);
    runtime().block_on(async {
        let one = state(&dir.path().join("whole")).await;
        let many = state(&dir.path().join("cut")).await;
        let snap = many.snapshot(None).await.unwrap();
        assert_eq!(snap.segments.len(), parts.len(), "one unit per build segment");
        let calls = [
            ("read_span", json!({"repo": "local/history", "path": first_file})),
            ("read_span", json!({"repo": "local/history", "path": last_file})),
            ("related", json!({"repo": "local/history", "id": format!("file/{last_file}")})),
            ("related", json!({"repo": "local/history", "id": format!("file/{first_file}")})),
            ("related", json!({"repo": "local/history", "id": commit.entity})),
        ];
        for (name, args) in calls {
            let a = tool(&one, name, args.clone()).await;
            let b = tool(&many, name, args.clone()).await;
            assert_eq!(a, b, "{name} {args}");
        }
        let args = json!({"repo": "local/history", "id": format!("file/{last_file}")});
        let listed = tool(&many, "related", args).await;
        assert!(listed["count"].as_u64().unwrap_or(0) > 0, "changed_in is listed: {listed}");
    });
}

/// `hubdex-bench build` (the hash embedder) in a process of its own, so the peak memory it
/// reports is that run's: a whole build, or one stage with `["--stage", STAGE]` in `extra`.
/// Its JSON report.
fn bench_build(source: &Path, store: &Path, budget: &str, extra: &[&str]) -> Value {
    let out = std::process::Command::new(hubdex_tests::bin("hubdex-bench"))
        .arg("build")
        .arg("--source")
        .arg(source)
        .arg("--store")
        .arg(store)
        .args(["--budget", budget])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap()
}

/// A build's peak memory once crawled, embedded and written (before the serving merge, which
/// the budget does not govern), in MiB, and its rows.
fn peak_before_publish(source: &Path, store: &Path, budget: &str) -> (u64, u64) {
    let report = bench_build(source, store, budget, &[]);
    let kib = report["peak_rss_before_publish_kib"].as_u64().expect("Linux says its VmHWM");
    (kib >> 10, report["rows"].as_u64().unwrap())
}

/// Synthetic histories of 100 and 6,000 commits in `dir`: (tiny, large).
fn tiny_and_large(dir: &Path) -> (PathBuf, PathBuf) {
    let (tiny, large) = (dir.join("tiny"), dir.join("large"));
    synthetic_history(&tiny, 100, 11).unwrap();
    synthetic_history(&large, 6000, 11).unwrap();
    (tiny, large)
}

#[test]
fn a_build_under_a_small_budget_holds_a_build_segment_not_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let (tiny, large) = tiny_and_large(dir.path());
    let peak = |source: &Path, budget: &str, store: &str| {
        peak_before_publish(source, &dir.path().join(store), budget)
    };
    // What a build needs whatever the history: the code at HEAD (the same in both), the
    // runtime, the writers.
    let (base, tiny_rows) = peak(&tiny, "3GiB", "tiny");
    let (cut, rows) = peak(&large, "32MiB", "large-cut");
    let (whole, _) = peak(&large, "64GiB", "large-whole");
    eprintln!(
        "peak before publish: {base} MiB ({tiny_rows} rows, one segment); {rows} rows: {cut} \
         MiB under 32 MiB, {whole} MiB unbounded"
    );
    assert!(rows > 4 * tiny_rows, "{tiny_rows} → {rows} rows");
    // Under a budget of 32 MiB the build holds no more than that above what any build holds;
    // unbounded, it holds the repository's rows (~60 MB with their texts to embed).
    assert!(cut <= base + 32, "peak {cut} MiB under 32 MiB; {base} MiB for 100 commits");
    assert!(whole >= cut + 50, "peak {cut} MiB under 32 MiB against {whole} MiB unbounded");
}

/// Builds `source` under 32 MiB and a 100-commit synthetic history in `dir` with the default
/// budget (what any build holds), asserts that the first peaks, before publish, within 32 MiB of
/// the second, and gives `source`'s rows.
fn rows_built_within_32_mib_of_100_commits(dir: &Path, source: &Path) -> u64 {
    let tiny = dir.join("tiny");
    synthetic_history(&tiny, 100, 11).unwrap();
    let (base, tiny_rows) = peak_before_publish(&tiny, &dir.join("tiny-store"), "3GiB");
    let (cut, rows) = peak_before_publish(source, &dir.join("cut-store"), "32MiB");
    eprintln!("peak before publish: {base} MiB ({tiny_rows} rows); {rows} rows: {cut} MiB");
    assert!(cut <= base + 32, "peak {cut} MiB under 32 MiB; {base} MiB for 100 commits");
    rows
}

/// A repository at `dir` whose tree at HEAD is `files` Rust files of about 100 KB (50 functions
/// of 2 KB each), added four a commit, so that no one commit's diff is large: its files at HEAD
/// are most of what it holds.
fn wide_tree(dir: &Path, files: usize) {
    let at = "2026-01-01T00:00:00Z";
    let git = |args: &[&str]| git_at(dir, at, at, args);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    git(&["init", "-q", "-b", "main"]);
    for i in 0..files {
        let mut text = String::new();
        for f in 0..50 {
            text.push_str(&format!(
                "/// Step {f} of module {i}.\npub fn step_{i}_{f}(input: &str) -> usize {{\n"
            ));
            for k in 0..60 {
                text.push_str(&format!("    let v{k} = input.len() * {k} + {i};\n"));
            }
            text.push_str("    v59\n}\n\n");
        }
        std::fs::write(dir.join(format!("src/m{i:04}.rs")), text).unwrap();
        if i % 4 == 3 || i + 1 == files {
            git(&["add", "-A"]);
            git(&["commit", "-q", "-m", &format!("Add modules up to {i}")]);
        }
    }
}

#[test]
fn a_build_under_a_small_budget_holds_a_file_at_head_at_a_time_not_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let wide = dir.path().join("wide");
    // 24 MB of code at HEAD: held whole with its rows, it is more than 60 MB.
    wide_tree(&wide, 240);
    let rows = rows_built_within_32_mib_of_100_commits(dir.path(), &wide);
    assert!(rows > 5_000, "{rows} rows of code");
}

/// A repository at `dir` of one commit, `message`, that adds `files` (path, text).
fn one_commit(dir: &Path, message: &str, files: impl IntoIterator<Item = (String, String)>) {
    let at = "2026-01-01T00:00:00Z";
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git_at(dir, at, at, &["init", "-q", "-b", "main"]);
    git_at(dir, at, at, &["add", "-A"]);
    // From a file beside the repository: a message may be longer than an argument may be.
    let file = dir.with_extension("message");
    std::fs::write(&file, message).unwrap();
    git_at(dir, at, at, &["commit", "-q", "-F", file.to_str().unwrap()]);
}

/// A repository at `dir` of one commit that adds `files` vendored files of 150 lines (about 9
/// KB each): no code rows at HEAD (vendored), one diff row a file, each of them near the body
/// cap, so the commit's rows are most of what it holds.
fn import_commit(dir: &Path, files: usize) {
    let files = (0..files).map(|i| {
        let text: String = (0..150)
            .map(|k| format!("// module {i}, line {k}: value = {} and some words\n", k * i % 9973))
            .collect();
        (format!("vendor/lib/m{i:05}.rs"), text)
    });
    one_commit(dir, "Import the vendored library", files);
}

#[test]
fn a_build_under_a_small_budget_holds_a_file_part_of_an_import_commit_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let import = dir.path().join("import");
    // 90 MB of diff in one commit, whose 10,000 diff rows keep about 80 MB: held as the diff,
    // or as the rows made from it, it is more than the budget.
    import_commit(&import, 10_000);
    let rows = rows_built_within_32_mib_of_100_commits(dir.path(), &import);
    assert!(rows > 10_000, "{rows} rows");
    // The vendored files have no rows: their texts are held up to a share of the budget (2
    // MiB of 32), the others listed without text.
    let (mut held, mut over) = (0u64, 0usize);
    for seg in std::fs::read_dir(dir.path().join("cut-store/segments")).unwrap() {
        for f in hubdex_formats::read_files(&seg.unwrap().path().join("files.parquet")).unwrap() {
            match f.skipped {
                None => held += f.content.len() as u64,
                Some(hubdex_formats::Skipped::OverBudget) => over += 1,
                Some(other) => panic!("{} skipped as {other:?}", f.path),
            }
        }
    }
    assert!(held > 0 && held <= 2 << 20, "{held} bytes of vendored text held");
    assert!(over > 9_000, "{over} files listed without their text");
}

/// A repository at `dir` of one commit that adds a minified script: one line of `mb` MB.
fn minified_commit(dir: &Path, mb: usize) {
    let line: String =
        (0..mb * 1_000_000 / 20).map(|i| format!("var a{:07}=b(c,{}),", i, i % 97)).collect();
    one_commit(dir, "Build the bundle", [("dist/app.min.js".to_string(), format!("{line}\n"))]);
}

#[test]
fn a_build_under_a_small_budget_counts_a_minified_line_and_holds_what_its_rows_keep() {
    let dir = tempfile::tempdir().unwrap();
    let minified = dir.path().join("minified");
    // A 32 MB line: held whole (as read, in the commit's cut diff, in its file's part, in the
    // row's text) it is several times the budget; its rows keep 8,000 characters of it.
    minified_commit(&minified, 32);
    let rows = rows_built_within_32_mib_of_100_commits(dir.path(), &minified);
    assert!(rows >= 2, "{rows} rows");
}

#[test]
fn the_staged_crawl_and_embed_under_a_small_budget_hold_a_build_segment_not_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let (tiny, large) = tiny_and_large(dir.path());
    // Each stage's peak memory in its own process, in MiB: (crawl, embed).
    let peaks = |source: &Path, budget: &str, store: &str| {
        let store = dir.path().join(store);
        let mib = |v: Value| v["peak_rss_kib"].as_u64().expect("Linux says its VmHWM") >> 10;
        let crawl = mib(bench_build(source, &store, budget, &["--stage", "crawl"]));
        (crawl, mib(bench_build(source, &store, budget, &["--stage", "embed"])))
    };
    let base = peaks(&tiny, "3GiB", "tiny");
    let cut = peaks(&large, "32MiB", "large-cut");
    let whole = peaks(&large, "64GiB", "large-whole");
    eprintln!(
        "peaks (crawl, embed): 100 commits {base:?} MiB; 6000 commits under 32 MiB {cut:?}, \
         unbounded {whole:?}"
    );
    // Under 32 MiB each stage holds no more than that above what it holds for 100 commits;
    // unbounded, each holds the repository's rows (measured: crawl 46 against 93 MiB, embed
    // 52 against 132 with the vectors).
    assert!(cut.0 <= base.0 + 32 && cut.1 <= base.1 + 32, "{cut:?} against {base:?}");
    assert!(whole.0 >= cut.0 + 32 && whole.1 >= cut.1 + 50, "{whole:?} against {cut:?}");
}

/// A repository at `dir` of `commits` commits, each a rollup whose message names `refs` pull
/// requests a line each, as a merge queue's rollups do: `refs` edges a commit.
fn rollups(dir: &Path, commits: usize, refs: usize) {
    use std::io::Write as _;
    std::fs::create_dir_all(dir).unwrap();
    let at = "2026-01-01T00:00:00Z";
    git_at(dir, at, at, &["init", "-q", "-b", "main"]);
    let mut import = std::process::Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut script = String::new();
    for i in 0..commits {
        let mut message = format!("Rollup of {refs} pull requests\n\nSuccessful merges:\n");
        for k in 0..refs {
            message.push_str(&format!(" - #{} (change {k} of rollup {i})\n", i * refs + k + 1));
        }
        let when = 1_700_000_000 + i * 60;
        let who = format!("A <a@example.com> {when} +0000");
        script.push_str(&format!("commit refs/heads/main\nauthor {who}\ncommitter {who}\n"));
        script.push_str(&format!("data {}\n{message}\n", message.len()));
        let note = format!("{i}\n");
        script.push_str(&format!("M 100644 inline notes.txt\ndata {}\n{note}\n", note.len()));
    }
    import.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    assert!(import.wait().unwrap().success());
}

#[test]
fn a_build_under_a_small_budget_holds_a_commit_s_edges_as_its_rows_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("rollups");
    // 90,000 `mentions` edges: listed until their commits' rows are cut, more than 50 MB.
    rollups(&source, 900, 100);
    let rows = rows_built_within_32_mib_of_100_commits(dir.path(), &source);
    assert!(rows >= 900, "{rows} rows");
}

/// The indexer runs with glibc's malloc thresholds fixed and two arenas (what serving merges
/// free does not pile up in arenas of their own, docs/performance.md):
/// started without them it restarts itself with them, in the same process, caught while it
/// waits to read its config (a FIFO); an arena count the caller set is kept.
#[test]
fn the_indexer_runs_with_fixed_malloc_thresholds_and_two_arenas() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let (trim, arenas) = (hubdex_formats::MALLOC_TRIM_THRESHOLD, hubdex_formats::MALLOC_ARENA_MAX);
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("hubdex.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (given, expected) in [(None, "2"), (Some("4"), "4")] {
        let mut cmd = Command::new(hubdex_tests::bin("hubdex-index"));
        cmd.args(["build", "--config", fifo.to_str().unwrap()])
            .env_remove(trim)
            .env_remove(arenas)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(v) = given {
            cmd.env(arenas, v);
        }
        let mut child = cmd.spawn().unwrap();
        let restarted = format!("{trim}=131072");
        let deadline = Instant::now() + Duration::from_secs(60);
        let environ = loop {
            let set = hubdex_tests::environment(child.id());
            if set.contains(&restarted) {
                break set;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the indexer did not restart with {restarted}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let want = format!("{arenas}={expected}");
        assert!(environ.contains(&want), "{want} not in the environment");
    }
}

/// Texts that count how many of them were made, as [`hubdex_runtime::Embedder::embed_texts`]
/// asks for them.
struct CountedTexts<'a> {
    texts: &'a [String],
    made: std::cell::Cell<usize>,
}

impl hubdex_runtime::Texts for CountedTexts<'_> {
    fn count(&self) -> usize {
        self.texts.len()
    }
    fn len_of(&self, i: usize) -> usize {
        self.texts[i].len()
    }
    fn text(&self, i: usize) -> std::borrow::Cow<'_, str> {
        self.made.set(self.made.get() + 1);
        std::borrow::Cow::Owned(self.texts[i].clone())
    }
}

#[test]
fn the_model_makes_its_texts_a_batch_at_a_time_and_embeds_them_as_if_all_were_made_first() {
    use hubdex_runtime::{BATCH_SIZE, Device, Embedder};
    let embedder = Embedder::load(&hubdex_tests::model_dir(), Device::Cpu).unwrap();
    let texts: Vec<String> = (0..100)
        .map(|i| format!("{}commit {i} of the history", "word ".repeat(i * 7 % 23)))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let all_first = embedder.embed(&refs).unwrap();
    let counted = CountedTexts { texts: &texts, made: std::cell::Cell::new(0) };
    let mut out = vec![Vec::new(); texts.len()];
    let mut made_before_the_first_vector = None;
    embedder
        .embed_texts(&counted, &mut |i, v| {
            made_before_the_first_vector.get_or_insert(counted.made.get());
            out[i] = v;
        })
        .unwrap();
    assert!(out == all_first, "the same vectors, bit for bit, as over the texts all made first");
    assert_eq!(counted.made.get(), texts.len(), "each text made once");
    let first = made_before_the_first_vector.unwrap();
    assert!(first <= BATCH_SIZE, "{first} texts made before the first batch's vectors came");
}

#[test]
fn a_build_under_a_small_budget_counts_a_long_message_and_holds_its_first_mib() {
    let dir = tempfile::tempdir().unwrap();
    let logged = dir.path().join("logged");
    // A generated log of 32 MB pasted into a message, every line naming an issue: held whole
    // (as read in each pass, as the first pass's lines edges read, cleaned, in the commit row's
    // and the diff row's text) it is several times the budget; its rows keep 8,000 characters.
    let log: String =
        (0..800_000).map(|i| format!("entry {i:06}: fixed the walk in #7 again\n")).collect();
    let message = format!("Ship the generated log\n\n{log}");
    one_commit(&logged, &message, [("src/lib.rs".to_string(), "pub fn a() {}\n".to_string())]);
    let rows = rows_built_within_32_mib_of_100_commits(dir.path(), &logged);
    assert!(rows >= 2, "{rows} rows");
}
