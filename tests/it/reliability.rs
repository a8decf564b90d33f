//! Reliability and security scenarios (docs/reliability.md), one test each, named after the
//! scenario. Scenarios 9 and 10 (webhook and HTTP refusals) live with the HTTP tests
//! (`lifecycle::webhook_delta_hot_swap_pin_pull_and_gc`, `http::*`); the slow-client part of 10
//! and the webhook-body fuzzing of 11 are here.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::BoxStream;
use hmac::{Hmac, Mac};
use hubdex_formats::{Latest, Manifest, Segment, SegmentMeta, Store, StoreError, sha256_hex};
use hubdex_tests::{bin, free_port, make_code_repo, model_dir, python};
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt as _, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fixture::{fixture, options, runtime, state};
use crate::golden::copy_dir;
use crate::mcp_clients::{Server, spawn_http};

const GOLDEN_V2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v2");
const GOLDEN_V3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v3");
const GOLDEN_V7: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v7");

/// The format-3 golden fixture's build segment of `local/golden`: rows.parquet, files.parquet,
/// the serving index text/, the file store files/, vectors.usearch.
fn golden_v3_segment() -> PathBuf {
    std::fs::read_dir(Path::new(GOLDEN_V3).join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("local-golden-") && !name.starts_with("local-golden-two")
        })
        .unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// Adds a commit that changes one file of the repository.
fn change(repo: &Path, what: &str) {
    std::fs::write(repo.join("NOTES.md"), format!("# Notes\n\n{what}\n")).unwrap();
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", what]);
}

/// `hubdex-index build REPO --store STORE` with `envs`; the exit status.
fn index(repo: &Path, store: &str, envs: &[(&str, &str)]) -> std::process::Output {
    Command::new(bin("hubdex-index"))
        .arg("build")
        .arg(repo)
        .args(["--store", store])
        .env("HUBDEX_MODEL_DIR", model_dir())
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

fn latest_of(store: &str) -> Option<String> {
    runtime().block_on(latest_now(store))
}

async fn latest_now(store: &str) -> Option<String> {
    Store::open(store).unwrap().latest().await.unwrap().map(|l| l.snapshot)
}

/// A POST that reports failures instead of panicking (load tests count them).
fn try_post(port: u16, path: &str, body: &str) -> Result<(u16, String), String> {
    // GET for the one read-only REST route without arguments.
    let method = if path == "/v1/stats" { "GET" } else { "POST" };
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| e.to_string())?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {out:?}"))?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// The body of a chunked or plain HTTP response, as JSON.
fn json_body(body: &str) -> Option<Value> {
    serde_json::from_str(body).ok().or_else(|| {
        let start = body.find('{')?;
        let end = body.rfind('}')?;
        serde_json::from_str(&body[start..=end]).ok()
    })
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn s01_an_indexer_killed_mid_publish_leaves_the_previous_snapshot_serving() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("shop");
    make_code_repo(&repo);
    let store = dir.path().join("store");
    let store_s = store.to_str().unwrap();
    assert!(index(&repo, store_s, &[]).status.success());
    let first = latest_of(store_s).unwrap();
    runtime().block_on(async {
        let st = state(&store).await;
        // Killed after uploading its segments, before any manifest.
        change(&repo, "First change, never published");
        let out = index(&repo, store_s, &[("HUBDEX_FAILPOINT", "before-manifest")]);
        assert!(!out.status.success(), "the failpoint aborts the build");
        assert_eq!(latest_now(store_s).await.unwrap(), first);
        assert_eq!(st.refresh().await, first);
        // Killed after writing the manifest, before moving LATEST.
        change(&repo, "Second change, published on the rerun");
        let out = index(&repo, store_s, &[("HUBDEX_FAILPOINT", "after-manifest")]);
        assert!(!out.status.success());
        assert_eq!(latest_now(store_s).await.unwrap(), first, "LATEST did not move");
        let store_h = Store::open(store_s).unwrap();
        assert_eq!(store_h.snapshots().await.unwrap().len(), 2, "an orphan manifest exists");
        assert_eq!(st.refresh().await, first);
        // The rerun completes and the server moves to it.
        let out = index(&repo, store_s, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let now = latest_now(store_s).await.unwrap();
        assert_ne!(now, first);
        assert_eq!(st.refresh().await, now);
        // The first killed run's segment is an orphan: kept through the grace period, then
        // collected.
        let young =
            hubdex_indexer::gc(&store_h, 10, chrono::Duration::hours(1), chrono::Utc::now())
                .await
                .unwrap();
        assert!(!young.young_segments.is_empty(), "{young:?}");
        assert!(young.deleted_segments.is_empty(), "{young:?}");
        let later = chrono::Utc::now() + chrono::Duration::hours(2);
        let old =
            hubdex_indexer::gc(&store_h, 10, chrono::Duration::hours(1), later).await.unwrap();
        assert_eq!(old.deleted_segments, young.young_segments);
        assert_eq!(st.refresh().await, now);
        assert!(store_h.latest_manifest().await.is_ok());
    });
}

/// `hubdex-bench build` (the hash embedder) of `source` into `store` under a 6 MiB budget (a
/// few hundred commits are several build segments), with `$TMPDIR` at `tmp` and `envs`.
fn bench_build_in(source: &Path, store: &Path, tmp: &Path, envs: &[(&str, &str)]) -> Output {
    Command::new(bin("hubdex-bench"))
        .arg("build")
        .arg("--source")
        .arg(source)
        .arg("--store")
        .arg(store)
        .args(["--budget", "6MiB"])
        .env("TMPDIR", tmp)
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            if e.file_type().unwrap().is_dir() {
                walk(root, &e.path(), out);
            } else {
                out.insert(e.path().strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn s01_a_build_killed_as_it_streams_publishes_nothing_and_the_next_clears_what_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("history");
    hubdex_tests::synthetic_history(&repo, 300, 11).unwrap();
    let (store, tmp) = (dir.path().join("store"), dir.path().join("tmp"));
    std::fs::create_dir(&tmp).unwrap();
    let store_s = store.to_str().unwrap();
    let build = |envs: &[(&str, &str)]| bench_build_in(&repo, &store, &tmp, envs);
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let out = build(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = latest_of(store_s).unwrap();
    assert!(names_in(&tmp).is_empty(), "a build removes its scratch: {:?}", names_in(&tmp));
    let published = files_under(&store);

    // Killed with a build segment of the new history uploaded and the next one written to its
    // scratch directory: the history is still being read, git still running.
    hubdex_tests::add_commit(&repo, "Never published", "notes/a.dat").unwrap();
    let out = build(&[("HUBDEX_FAILPOINT", "second-build-segment-written")]);
    assert!(stderr(&out).contains("failpoint second-build-segment-written"), "{}", stderr(&out));
    assert!(!out.status.success());
    assert_eq!(latest_of(store_s).unwrap(), first);
    let store_h = Store::open(store_s).unwrap();
    assert_eq!(runtime().block_on(store_h.snapshots()).unwrap(), vec![first.clone()]);
    let orphans: Vec<String> = files_under(&store).difference(&published).cloned().collect();
    assert!(!orphans.is_empty(), "the uploaded build segment is in the store, unpublished");
    assert!(orphans.iter().all(|f| f.starts_with("segments/")), "{orphans:?}");
    let left = names_in(&tmp);
    assert_eq!(left.len(), 1, "the killed build's scratch is left: {left:?}");
    let written = files_under(&tmp.join(&left[0]));
    assert!(written.iter().any(|f| f.ends_with("rows.parquet")), "{written:?}");

    // Killed in the publish, a serving unit written to its scratch directory: the first
    // killed build's scratch is removed as this one starts.
    let out = build(&[("HUBDEX_FAILPOINT", "merged-segment-written")]);
    assert!(stderr(&out).contains("failpoint merged-segment-written"), "{}", stderr(&out));
    assert_eq!(latest_of(store_s).unwrap(), first);
    let now = names_in(&tmp);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, left);
    let written = files_under(&tmp.join(&now[0]));
    assert!(written.iter().any(|f| f.starts_with("merged-")), "{written:?}");

    // The next build publishes, and leaves nothing of its own or of the killed ones.
    let out = build(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(latest_of(store_s).unwrap(), first);
    assert!(names_in(&tmp).is_empty(), "{:?}", names_in(&tmp));
    // Past the grace period gc finds nothing to collect: the build segment the killed build
    // uploaded is the new snapshot's (found again by its input, not written twice), and every
    // file in the store is a snapshot's.
    let later = chrono::Utc::now() + chrono::Duration::hours(2);
    let report = runtime()
        .block_on(hubdex_indexer::gc(&store_h, 10, chrono::Duration::hours(1), later))
        .unwrap();
    assert!(report.deleted_segments.is_empty(), "{report:?}");
    let named: BTreeSet<String> = runtime().block_on(async {
        let mut named = BTreeSet::new();
        for id in store_h.snapshots().await.unwrap() {
            let (m, _) = store_h.unverified_manifest(&id).await.unwrap();
            named.extend(m.segments.iter().chain(&m.merged).map(|s| s.id.clone()));
        }
        named
    });
    for f in &orphans {
        let id = f.strip_prefix("segments/").and_then(|r| r.split('/').next()).unwrap();
        assert!(named.contains(id), "the killed build's {id} is taken up by the next");
    }
    for f in files_under(&store) {
        let seg = f.strip_prefix("segments/").and_then(|r| r.split('/').next());
        assert!(seg.is_none_or(|id| named.contains(id)), "{f} is no snapshot's");
    }
}

/// A manifest of the golden v2 store, and that store opened from a fresh copy.
fn golden_store(dir: &Path) -> (Store, Manifest) {
    let copy = dir.join("golden");
    copy_dir(Path::new(GOLDEN_V2), &copy);
    let store = Store::open(copy.to_str().unwrap()).unwrap();
    let m = runtime().block_on(store.latest_manifest()).unwrap();
    (store, m)
}

fn child_of(m: &Manifest, id: &str) -> Manifest {
    Manifest { snapshot: id.to_string(), parent: Some(m.snapshot.clone()), ..m.clone() }
}

/// Two publishers with the same parent: exactly one wins, the other gets a conflict, and
/// LATEST never moves back.
async fn two_publishers(store: &Store, base: &Manifest) {
    let a = child_of(base, "20991231T000001Z-aaaaaaaa");
    let b = child_of(base, "20991231T000001Z-bbbbbbbb");
    let (ra, rb) = tokio::join!(store.publish(&a, false), store.publish(&b, false));
    let wins = [ra.is_ok(), rb.is_ok()];
    assert_eq!(wins.iter().filter(|w| **w).count(), 1, "{ra:?} {rb:?}");
    let loser = match (ra, rb) {
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => e,
        other => panic!("exactly one publisher wins: {other:?}"),
    };
    assert!(matches!(loser, StoreError::Conflict { .. }), "{loser}");
    assert!(loser.to_string().contains("20991231T000001Z"), "{loser}");
    let winner = if wins[0] { &a } else { &b };
    assert_eq!(store.latest().await.unwrap().unwrap().snapshot, winner.snapshot);
    // A publisher that still believes the old snapshot is current cannot move LATEST back.
    let stale = Latest::new(base.snapshot.clone(), "0".repeat(64));
    let back = store.move_latest(&stale, Some(&base.snapshot), false).await;
    assert!(matches!(back, Err(StoreError::Conflict { .. })), "{back:?}");
    assert_eq!(store.latest().await.unwrap().unwrap().snapshot, winner.snapshot);
}

#[test]
fn s02_two_publishers_at_once_exactly_one_moves_latest() {
    let dir = tempfile::tempdir().unwrap();
    let (store, m) = golden_store(dir.path());
    runtime().block_on(two_publishers(&store, &m));
}

/// An in-memory object store with faults switched on for tests. `ignores_conditions`: it says
/// yes to every conditional write and does a plain one instead, and every copy is a plain copy,
/// create-only or not. `refuse_part`: every multipart upload's part of that number (from 1) is
/// refused; `aborted` records whether an upload was aborted.
#[derive(Debug, Default)]
struct FaultyStore {
    inner: object_store::memory::InMemory,
    ignores_conditions: bool,
    refuse_part: Option<usize>,
    aborted: Arc<AtomicBool>,
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStore")
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.ignores_conditions {
            return self.inner.put(location, payload).await;
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(match self.refuse_part {
            Some(refused) => Box::new(FailingUpload {
                inner,
                parts: 0,
                refused,
                aborted: Arc::clone(&self.aborted),
            }),
            None => inner,
        })
    }
    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        if self.ignores_conditions {
            return self.inner.copy(from, to).await;
        }
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload of [`FaultyStore`] that refuses its part number `refused`.
#[derive(Debug)]
struct FailingUpload {
    inner: Box<dyn MultipartUpload>,
    parts: usize,
    refused: usize,
    aborted: Arc<AtomicBool>,
}

#[async_trait]
impl MultipartUpload for FailingUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.parts += 1;
        if self.parts == self.refused {
            let detail = format!("part {} was refused", self.parts);
            return Box::pin(async move {
                Err(object_store::Error::Generic { store: "FaultyStore", source: detail.into() })
            });
        }
        self.inner.put_part(data)
    }
    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.inner.complete().await
    }
    async fn abort(&mut self) -> object_store::Result<()> {
        self.aborted.store(true, Ordering::SeqCst);
        self.inner.abort().await
    }
}

#[test]
fn s03_a_store_that_ignores_conditional_writes_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (_, m) = golden_store(dir.path());
    runtime().block_on(async {
        let liar = Store::from_object_store(
            Arc::new(FaultyStore { ignores_conditions: true, ..Default::default() }),
            "liar://bucket",
        );
        assert!(!liar.honours_conditional_writes().await.unwrap());
        let first = Manifest { parent: None, ..m.clone() };
        let err = liar.publish(&first, false).await.unwrap_err();
        assert!(matches!(err, StoreError::NoConditionalUpdate { .. }), "{err}");
        assert!(err.to_string().contains("--allow-unsafe-latest"), "{err}");
        assert!(liar.latest().await.unwrap().is_none(), "nothing was published");
        liar.publish(&first, true).await.unwrap();
        assert_eq!(liar.latest().await.unwrap().unwrap().snapshot, first.snapshot);
        // A store that honours them passes the probe.
        let honest = Store::open("memory://").unwrap();
        assert!(honest.honours_conditional_writes().await.unwrap());
    });
}

#[test]
fn s04_every_artifact_truncated_or_bit_flipped_is_refused_before_anything_opens_it() {
    let src = Path::new(GOLDEN_V3);
    let seg_rel: PathBuf = golden_v3_segment().strip_prefix(src).unwrap().to_path_buf();
    let mut targets: Vec<PathBuf> = walkdir::WalkDir::new(src.join(&seg_rel))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() != "segment.json")
        .map(|e| e.path().strip_prefix(src).unwrap().to_path_buf())
        .collect();
    targets.sort();
    let names: BTreeSet<String> =
        targets.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for needed in ["rows.parquet", "files.parquet", "vectors.usearch", "meta.json", ".managed.json"]
    {
        assert!(names.contains(needed), "{needed} is among the artifacts: {names:?}");
    }
    targets.push(seg_rel.join("segment.json"));
    let snapshot = std::fs::read_to_string(src.join("LATEST")).unwrap();
    let snapshot: Value = serde_json::from_str(&snapshot).unwrap();
    targets.push(PathBuf::from(format!(
        "snapshots/{}/manifest.json",
        snapshot["snapshot"].as_str().unwrap()
    )));
    let rt = runtime();
    for target in &targets {
        for damage in ["truncate", "flip"] {
            let dir = tempfile::tempdir().unwrap();
            let copy = dir.path().join("store");
            copy_dir(src, &copy);
            let path = copy.join(target);
            let mut bytes = std::fs::read(&path).unwrap();
            if damage == "truncate" {
                bytes.truncate(bytes.len() / 2);
            } else {
                let i = bytes.len() / 2;
                bytes[i] ^= 0x10;
            }
            std::fs::write(&path, &bytes).unwrap();
            let cache = dir.path().join("cache");
            let result = rt.block_on(async {
                let store = Store::open(copy.to_str().unwrap()).unwrap();
                let m = store.latest_manifest().await?;
                store.fetch_segment(&m.segments[0], &cache).await.map(|_| ())
            });
            let err = result.expect_err(&format!("{damage} {} was accepted", target.display()));
            let text = err.to_string();
            let file = target.file_name().unwrap().to_string_lossy();
            assert!(
                text.contains(file.as_ref())
                    || text.contains("sha256")
                    || text.contains("manifest"),
                "{damage} {}: {text}",
                target.display()
            );
            let cached = walkdir::WalkDir::new(&cache)
                .into_iter()
                .filter_map(Result::ok)
                .any(|e| e.file_name() == "vectors.usearch");
            assert!(!cached, "{damage} {}: a refused segment entered the cache", target.display());
        }
    }
}

/// Scenario 5 for format 7: a crafted `vectors.hnsw` in the golden v7 unit, its sha256
/// rewritten to match, is refused by `Segment::open` with an error naming it, from its header
/// and length alone (before it is mapped); one whose links point past the end opens and its
/// search fails with an error, never a panic.
#[test]
fn s05_a_crafted_format_7_vectors_file_whose_sha256_matches_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let unit = std::fs::read_dir(Path::new(GOLDEN_V7).join("segments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("merged-"))
        .unwrap();
    let work = dir.path().join("seg");
    copy_dir(&unit, &work);
    let path = work.join("vectors.hnsw");
    let original = std::fs::read(&path).unwrap();
    let meta_bytes = std::fs::read(work.join("segment.json")).unwrap();
    let write = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let mut m: Value = serde_json::from_slice(&meta_bytes).unwrap();
        for f in m["files"].as_array_mut().unwrap() {
            if f["path"] == "vectors.hnsw" {
                f["sha256"] = json!(sha256_hex(bytes));
                f["bytes"] = json!(bytes.len());
            }
        }
        std::fs::write(work.join("segment.json"), serde_json::to_vec(&m).unwrap()).unwrap();
    };
    let u32_field = |at: usize, value: u32| {
        let mut b = original.clone();
        b[at..at + 4].copy_from_slice(&value.to_le_bytes());
        b
    };
    let crafted: Vec<(&str, Vec<u8>)> = vec![
        ("header only", original[..64].to_vec()),
        ("cut by one byte", original[..original.len() - 1].to_vec()),
        ("garbage", vec![0xff; original.len()]),
        ("a header claiming more vectors", u32_field(16, 1 << 30)),
        ("a header claiming more upper links", u32_field(44, u32::MAX)),
        ("an entry past the end", u32_field(32, 1 << 20)),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in crafted {
        write(&bytes);
        let result = std::panic::catch_unwind(|| Segment::open(&work).map(|_| ()));
        let opened = result.unwrap_or_else(|_| panic!("{what}: opening panicked"));
        let err = opened.expect_err(&format!("{what}: a crafted vectors file opened"));
        assert!(err.to_string().contains("vectors.hnsw"), "{what}: {err}");
    }
    // Every level-0 link of every node pointing past the end: opens (links are not read at
    // open), and a search says which link is wrong.
    let header = |i: usize| u32::from_le_bytes(original[8 + 4 * i..12 + 4 * i].try_into().unwrap());
    let (dim, count, m0) = (header(1) as usize, header(2) as usize, header(4) as usize);
    let round8 = |n: usize| n.div_ceil(8) * 8;
    let level0 = round8(round8(round8(64 + dim * 4) + count * 4) + count * dim.div_ceil(8));
    let mut links = original.clone();
    for slot in 0..count {
        let at = level0 + slot * (1 + m0) * 4;
        links[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
        links[at + 4..at + 8].copy_from_slice(&(count as u32 + 7).to_le_bytes());
    }
    write(&links);
    let seg = Segment::open(&work).unwrap();
    let search = std::panic::AssertUnwindSafe(|| seg.vectors.search(&vec![0.1; dim], 5, None));
    let result = std::panic::catch_unwind(search);
    let err = result.expect("no panic").expect_err("a link past the end was followed");
    assert!(err.to_string().contains("links to slot"), "{err}");
}

#[test]
fn s05_a_crafted_vectors_file_whose_sha256_matches_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let seg = golden_v3_segment();
    let work = dir.path().join("seg");
    copy_dir(&seg, &work);
    let path = work.join("vectors.usearch");
    let original = std::fs::read(&path).unwrap();
    let meta_bytes = std::fs::read(work.join("segment.json")).unwrap();
    let meta = SegmentMeta::parse("segment.json", &meta_bytes).unwrap();
    // A malicious store rewrites the file and its recorded sha256 together, so verification
    // passes; opening must still fail on what the header claims.
    let crafted: Vec<(&str, Vec<u8>)> = vec![
        ("header only", original[..64.min(original.len())].to_vec()),
        ("garbage", vec![0xff; original.len()]),
        ("huge matrix shape", {
            let mut b = original.clone();
            for x in b.iter_mut().take(8) {
                *x = 0xff;
            }
            b
        }),
        ("head claims other sizes", {
            let mut b = original.clone();
            let head = b.windows(7).position(|w| w == b"usearch").expect("the head's magic");
            for x in b.iter_mut().skip(head + 16).take(24) {
                *x = 0x7f;
            }
            b
        }),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in crafted {
        std::fs::write(&path, &bytes).unwrap();
        let mut m: Value = serde_json::from_slice(&meta_bytes).unwrap();
        for f in m["files"].as_array_mut().unwrap() {
            if f["path"] == "vectors.usearch" {
                f["sha256"] = json!(sha256_hex(&bytes));
                f["bytes"] = json!(bytes.len());
            }
        }
        std::fs::write(work.join("segment.json"), serde_json::to_vec(&m).unwrap()).unwrap();
        let result = std::panic::catch_unwind(|| Segment::open(&work).map(|_| ()));
        let opened = result.unwrap_or_else(|_| panic!("{what}: opening panicked"));
        let err = opened.expect_err(&format!("{what}: a crafted vectors file opened"));
        assert!(err.to_string().contains("vectors.usearch"), "{what}: {err}");
    }
    let _ = meta;
    std::fs::write(&path, &original).unwrap();
    std::fs::write(work.join("segment.json"), &meta_bytes).unwrap();
    // The serving files, cut or replaced by garbage: opening, reading every row, searching and
    // reading a span fail as errors, never as a panic.
    let serving: Vec<PathBuf> = walkdir::WalkDir::new(&work)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| {
            let rel = p.strip_prefix(&work).unwrap().to_string_lossy().into_owned();
            (rel.starts_with("text/") || rel.starts_with("files/")) && !rel.ends_with(".lock")
        })
        .collect();
    assert!(serving.len() >= 10, "{serving:?}");
    for file in &serving {
        let original = std::fs::read(file).unwrap();
        for (what, bytes) in [
            ("cut in half", original[..original.len() / 2].to_vec()),
            ("garbage", vec![0xa5; original.len()]),
        ] {
            std::fs::write(file, &bytes).unwrap();
            let result = std::panic::catch_unwind(|| -> Result<(), String> {
                let seg = Segment::open(&work).map_err(|e| e.to_string())?;
                seg.text.rows().map_err(|e| e.to_string())?;
                seg.text.search("tulips", 5, None).map_err(|e| e.to_string())?;
                if let Some(f) = &seg.files {
                    f.get("local/golden", "README.md").map_err(|e| e.to_string())?;
                }
                Ok(())
            });
            let name = file.strip_prefix(&work).unwrap().display().to_string();
            let outcome = result.unwrap_or_else(|_| panic!("{name} {what}: panicked"));
            assert!(outcome.is_err(), "{name} {what}: a crafted serving file read as valid");
        }
        std::fs::write(file, &original).unwrap();
    }
}

#[test]
fn s06_hot_swap_under_load_loses_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("shop");
    make_code_repo(&repo);
    let store = dir.path().join("store");
    let rt = runtime();
    rt.block_on(hubdex_indexer::build(&options(&store, &repo))).unwrap();
    let mut published = vec![latest_of(store.to_str().unwrap()).unwrap()];
    let cache = dir.path().join("cache");
    let global = ["--store", store.to_str().unwrap(), "--cache", cache.to_str().unwrap()];
    let (server, port) = spawn_http(&global, &["--poll-interval", "1"], &[], None);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let calls = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (stop, seen, failures, calls) =
                (stop.clone(), seen.clone(), failures.clone(), calls.clone());
            std::thread::spawn(move || {
                let queries = ["compute tax on an invoice", "restock shelves", "notes", "health"];
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"query": queries[i % 4], "top_k": 3}).to_string();
                    match try_post(port, "/v1/search", &body) {
                        Ok((200, b)) => match json_body(&b) {
                            Some(v) => seen
                                .lock()
                                .unwrap()
                                .push(v["snapshot"].as_str().unwrap_or("").to_string()),
                            None => failures.lock().unwrap().push(format!("unreadable body {b:?}")),
                        },
                        Ok((s, b)) => failures.lock().unwrap().push(format!("{s}: {b}")),
                        Err(e) => failures.lock().unwrap().push(e),
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for n in 0..3 {
        change(&repo, &format!("Change number {n} under load"));
        let report = rt.block_on(hubdex_indexer::build(&options(&store, &repo))).unwrap();
        published.push(report.snapshot);
        std::thread::sleep(Duration::from_millis(1500));
    }
    // Let the server pick up the last one.
    let last = published.last().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && seen.lock().unwrap().last() != Some(&last) {
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    drop(server);
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed of {}: {:?}",
        failures.len(),
        calls.load(Ordering::Relaxed),
        &failures[..failures.len().min(5)]
    );
    let seen = seen.lock().unwrap();
    let distinct: BTreeSet<&String> = seen.iter().collect();
    for id in &distinct {
        assert!(published.contains(id), "answer named {id}, never published: {published:?}");
    }
    assert_eq!(seen.last(), Some(&last), "the server reached the newest snapshot");
    assert!(distinct.len() >= 2, "the load spanned a swap: {distinct:?}");
}

#[test]
fn s07_latest_naming_a_snapshot_whose_files_are_missing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, m) = golden_store(dir.path());
    runtime().block_on(async {
        let st = state(Path::new(store.url().trim_start_matches("file://"))).await;
        // A manifest naming a segment that is not in the store.
        let mut broken = child_of(&m, "20991231T000002Z-cccccccc");
        broken.segments[0].id = "0".repeat(32);
        store.publish(&broken, false).await.unwrap();
        assert_eq!(st.refresh().await, m.snapshot, "the current snapshot is kept");
        // And one whose segment was only partly uploaded (a file is missing).
        let root = Path::new(store.url().trim_start_matches("file://")).to_path_buf();
        let partial_id = "1".repeat(32);
        copy_dir(
            &root.join("segments").join(&m.segments[0].id),
            &root.join("segments").join(&partial_id),
        );
        std::fs::remove_file(root.join("segments").join(&partial_id).join("rows.parquet")).unwrap();
        let mut next = child_of(&m, "20991231T000003Z-dddddddd");
        next.parent = Some(broken.snapshot.clone());
        next.segments[0].id = partial_id;
        store.publish(&next, false).await.unwrap();
        assert_eq!(st.refresh().await, m.snapshot);
        assert!(
            st.metrics_text().contains("hubdex_snapshot_swap_failures_total 2"),
            "{}",
            st.metrics_text()
        );
    });
}

/// Mixed tool calls from 8 clients for `seconds`; every call must succeed and RSS stay flat.
pub(crate) fn soak(seconds: u64) {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let global = ["--store", f.store.to_str().unwrap(), "--cache", cache.to_str().unwrap()];
    let (server, port) = spawn_http(&global, &[], &[], None);
    let pid = server.0.id();
    let st = runtime().block_on(state(&f.store));
    let snap = st.current.load_full();
    let all = snap.segments[0].text.rows().unwrap();
    let ids: Vec<String> = all.iter().take(40).map(|r| r.id.clone()).collect();
    let doc = all.iter().find(|r| r.path.is_some() && r.line_start.is_some()).unwrap().clone();
    let calls: Vec<(&str, String)> = vec![
        ("/v1/search", json!({"query": "retry with backoff", "top_k": 5}).to_string()),
        ("/v1/search", json!({"query": "storage engine", "fusion": "sparse_only"}).to_string()),
        (
            "/v1/search",
            json!({"query": "plugins", "type": "doc", "sort": "updated_desc"}).to_string(),
        ),
        ("/v1/scan", json!({"limit": 20}).to_string()),
        ("/v1/fetch", json!({"ids": ids}).to_string()),
        (
            "/v1/read_span",
            json!({"repo": doc.repo, "path": doc.path, "start_line": 1, "end_line": 5}).to_string(),
        ),
        ("/v1/stats", String::new()),
    ];
    let calls = Arc::new(calls);
    let errors = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (calls, errors, done, stop, first_error) =
                (calls.clone(), errors.clone(), done.clone(), stop.clone(), first_error.clone());
            std::thread::spawn(move || {
                let mut k = i;
                while !stop.load(Ordering::Relaxed) {
                    let (path, body) = &calls[k % calls.len()];
                    k += 1;
                    match try_post(port, path, body) {
                        Ok((200, _)) => {}
                        other => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            first_error.lock().unwrap().get_or_insert(format!("{path}: {other:?}"));
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let warmup = Duration::from_secs((seconds / 4).max(3));
    std::thread::sleep(warmup);
    let warm = rss_kib(pid);
    let mut peak = warm;
    let end = Instant::now() + Duration::from_secs(seconds) - warmup;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(rss_kib(pid));
    }
    let last = rss_kib(pid);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let total = done.load(Ordering::Relaxed);
    eprintln!(
        "soak: {total} calls in {seconds} s, {} errors, RSS warm {warm} KiB, last {last} KiB, peak {peak} KiB",
        errors.load(Ordering::Relaxed)
    );
    assert_eq!(errors.load(Ordering::Relaxed), 0, "{:?}", first_error.lock().unwrap());
    assert!(total > 8 * seconds, "the soak made calls: {total}");
    assert!(warm > 0);
    assert!(last * 10 <= warm * 11, "RSS grew more than 10%: {warm} → {last} KiB");
}

#[test]
fn s08_soak_mixed_tool_calls_from_8_clients() {
    // ci/soak runs the full 10 minutes with HUBDEX_SOAK_SECONDS=600.
    let seconds =
        std::env::var("HUBDEX_SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    soak(seconds);
}

#[test]
fn s10_a_slow_client_cannot_hold_the_server() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let global = ["--store", f.store.to_str().unwrap(), "--cache", cache.to_str().unwrap()];
    let (_server, port) = spawn_http(&global, &[], &[], None);
    // Thirty clients that send half a request and then nothing.
    let slow: Vec<TcpStream> = (0..30)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(
                b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"qu",
            )
            .unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    let (status, body) =
        try_post(port, "/v1/search", &json!({"query": "widgets"}).to_string()).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "served in {:?}", started.elapsed());
    drop(slow);
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        prop_oneof![
            Just("rrf"),
            Just("sparse_only"),
            Just("updated_desc"),
            Just("issue"),
            Just("code"),
            Just("2024-01-01"),
            Just("docs/**"),
            Just("local/widgets"),
            Just("issue/1"),
            Just("commit/ab"),
            Just("file/README.md"),
            Just("https://github.com/acme/widgets/issues/1"),
            Just("closes"),
            Just("both"),
            Just("")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const ARG_NAMES: &[&str] = &[
    "query",
    "top_k",
    "fusion",
    "sort",
    "rerank",
    "snapshot",
    "repo",
    "type",
    "state",
    "labels",
    "milestone",
    "assignee",
    "author",
    "path_prefix",
    "files_glob",
    "since",
    "until",
    "ids",
    "path",
    "start_line",
    "end_line",
    "limit",
    "cursor",
    "order",
    "id",
    "kinds",
    "direction",
    "depth",
];

fn arb_args() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    prop::collection::vec((prop::sample::select(ARG_NAMES), arb_json()), 0..6)
        .prop_map(|kv| kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

#[test]
fn s11_fuzzed_tool_arguments_never_panic_and_fail_as_tool_errors() {
    let f = fixture();
    let rt = runtime();
    let st = rt.block_on(state(&f.store));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    });
    let tools: Vec<&'static str> =
        vec!["search", "scan", "fetch", "read_span", "related", "index_stats"];
    runner
        .run(&(prop::sample::select(tools), arb_args()), |(tool, args)| {
            let result = rt.block_on(hubdex_server::call_tool(&st, tool, &args));
            if let Err(e) = result {
                let text = e.to_string();
                prop_assert!(
                    !text.contains("panicked") && !text.contains("task failed"),
                    "{tool} {args:?}: {text}"
                );
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn s11_fuzzed_manifests_and_metadata_are_errors_never_panics() {
    let golden = std::fs::read(
        walkdir::WalkDir::new(Path::new(GOLDEN_V2).join("snapshots"))
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.file_name() == "manifest.json")
            .unwrap()
            .path(),
    )
    .unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    });
    let g = golden.clone();
    runner
        .run(
            &(0..g.len(), any::<u8>(), prop::collection::vec(any::<u8>(), 0..64), 0..4u8),
            |(at, byte, junk, how)| {
                let mut bytes = g.clone();
                match how {
                    0 => bytes[at] = byte,
                    1 => bytes.truncate(at),
                    2 => bytes.splice(at..at, junk.iter().copied()).for_each(drop),
                    _ => bytes = junk.clone(),
                }
                // Each result is a valid record (it writes back to itself) or an error that
                // names the artifact and where it is wrong: a line and column, a missing or
                // mistyped field, or the version.
                fn check<T: PartialEq + std::fmt::Debug>(
                    what: &str,
                    parsed: Result<T, hubdex_formats::FormatError>,
                    again: impl Fn(&T) -> Result<T, hubdex_formats::FormatError>,
                ) -> Result<(), TestCaseError> {
                    match parsed {
                        Ok(v) => {
                            let back = again(&v).ok();
                            prop_assert_eq!(back.as_ref(), Some(&v), "{} round trip", what);
                        }
                        Err(e) => {
                            let text = e.to_string();
                            prop_assert!(text.starts_with(what), "{}", text);
                            // A name or file path that could become a path outside its root
                            // (flipped into `/`, `.`, a control character) is named as such.
                            prop_assert!(
                                text.contains(" line ")
                                    || text.contains("format version")
                                    || text.contains("is not a valid name")
                                    || text.contains("is not a plain relative path"),
                                "{}",
                                text
                            );
                        }
                    }
                    Ok(())
                }
                check("manifest.json", Manifest::parse("manifest.json", &bytes), |m| {
                    Manifest::parse("manifest.json", &m.to_bytes())
                })?;
                check("segment.json", SegmentMeta::parse("segment.json", &bytes), |m| {
                    SegmentMeta::parse("segment.json", &m.to_bytes())
                })?;
                check("LATEST", Latest::parse(&bytes), |l| Latest::parse(&l.to_bytes()))?;
                Ok(())
            },
        )
        .unwrap();
    // A manifest that parses but is wrong in meaning is refused by name.
    let mut v: Value = serde_json::from_slice(&golden).unwrap();
    v["format_version"] = json!(99);
    let err = Manifest::parse("manifest.json", &serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(err.to_string().contains("format version 99"), "{err}");
}

const SECRET: &str = "fuzz-secret";

fn sign(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[test]
fn s11_fuzzed_webhook_bodies_with_valid_signatures_are_4xx_or_queued_never_5xx() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    copy_dir(&f.store, &store);
    let cache = dir.path().join("cache");
    let global = ["--store", store.to_str().unwrap(), "--cache", cache.to_str().unwrap()];
    let (_server, port) = spawn_http(&global, &[], &[("HUBDEX_WEBHOOK_SECRET", SECRET)], None);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    });
    let events: Vec<&'static str> =
        vec!["push", "issues", "pull_request", "release", "gollum", "ping", "unknown"];
    runner
        .run(&(prop::sample::select(events), arb_json(), any::<bool>()), |(event, payload, raw)| {
            let body = if raw { payload.to_string().replace('"', "") } else { payload.to_string() };
            let req = format!(
                "POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nX-GitHub-Event: {event}\r\nX-GitHub-Delivery: fuzz\r\nX-Hub-Signature-256: {}\r\nContent-Length: {}\r\n\r\n{body}",
                sign(body.as_bytes()),
                body.len()
            );
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            let status: u16 = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            prop_assert!((200..500).contains(&status), "{event} {body:?} → {status}");
            Ok(())
        })
        .unwrap();
    // Still serving.
    assert_eq!(try_post(port, "/v1/stats", "").unwrap().0, 200);
}

/// A moto S3 server on loopback with one bucket, stopped on drop.
struct Moto {
    _server: Server,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let port = free_port();
        let moto = python().parent().unwrap().join("moto_server");
        let child = Command::new(moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server from ci/setup's venv");
        let server = Server(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        // CreateBucket: an unsigned PUT /bucket (moto does not check signatures).
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(format!("PUT /hubdex HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "create bucket: {out}");
        Moto { _server: server, port }
    }

    fn envs(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT".into(), format!("http://127.0.0.1:{}", self.port)),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
            ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    }
}

#[test]
fn s12_s3_end_to_end_against_a_real_s3_protocol_server() {
    let moto = Moto::start();
    let envs = moto.envs();
    let env_refs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let url = "s3://hubdex/snapshots-test";
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("shop");
    make_code_repo(&repo);
    let out = index(&repo, url, &env_refs);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = runtime()
        .block_on(async { Store::open_with(url, &env_refs).unwrap().latest().await.unwrap() })
        .unwrap()
        .snapshot;
    // A second build moves LATEST with a conditional update (If-Match on S3).
    change(&repo, "A change published to S3");
    let out = index(&repo, url, &env_refs);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = Store::open_with(url, &env_refs).unwrap();
    let m = runtime().block_on(store.latest_manifest()).unwrap();
    assert_ne!(m.snapshot, first);
    assert_eq!(m.parent.as_deref(), Some(first.as_str()));
    runtime().block_on(async {
        assert!(store.honours_conditional_writes().await.unwrap(), "moto honours If-None-Match");
        two_publishers(&store, &m).await;
    });
    // Pull to a directory, query it offline; serve straight from S3.
    let pulled = dir.path().join("pulled");
    let out = Command::new(bin("hubdex"))
        .args(["--store", url, "pull", "latest", pulled.to_str().unwrap()])
        .envs(env_refs.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(bin("hubdex"))
        .args(["--store", pulled.to_str().unwrap(), "query", "compute tax on an invoice", "--json"])
        .env("HUBDEX_MODEL_DIR", model_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(answer["count"].as_u64().unwrap() > 0);
    let cache = dir.path().join("cache");
    let global = ["--store", url, "--cache", cache.to_str().unwrap()];
    let (_server, port) = spawn_http(&global, &[], &env_refs, None);
    let (status, body) =
        try_post(port, "/v1/search", &json!({"query": "restock shelves"}).to_string()).unwrap();
    assert_eq!(status, 200, "{body}");
    let v = json_body(&body).unwrap();
    assert!(v["results"][0]["title"].as_str().unwrap_or("").contains("restockShelves"), "{v:#}");
}

#[test]
fn s14_a_large_file_is_uploaded_in_parts_and_a_failed_upload_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Two parts and a short third one; and a file small enough for one request.
    let big_len = 2 * hubdex_formats::UPLOAD_PART_BYTES + 12_345;
    let big: Vec<u8> = (0..big_len).map(|i| (i * 31 % 251) as u8).collect();
    let small: Vec<u8> = b"a small file, one request".to_vec();
    let (big_path, small_path) = (dir.path().join("big.bin"), dir.path().join("small.bin"));
    std::fs::write(&big_path, &big).unwrap();
    std::fs::write(&small_path, &small).unwrap();
    let moto = Moto::start();
    let envs = moto.envs();
    let env_refs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let local = dir.path().join("store");
    let stores = [
        Store::open_with("s3://hubdex/parts-test", &env_refs).unwrap(),
        Store::open(local.to_str().unwrap()).unwrap(),
        Store::open("memory://").unwrap(),
    ];
    runtime().block_on(async {
        for store in &stores {
            for (path, bytes) in [(&big_path, &big), (&small_path, &small)] {
                let key = format!("segments/s/{}", path.file_name().unwrap().to_str().unwrap());
                let mut heard = 0u64;
                store.put_file(&key, path, &mut |n| heard += n).await.unwrap();
                assert_eq!(heard, bytes.len() as u64, "{}: progress heard every byte", store.url());
                let back = store.get_opt(&key).await.unwrap().unwrap();
                assert!(back.as_ref() == bytes.as_slice(), "{} {key}: the same bytes", store.url());
            }
            let missing = dir.path().join("no-such-file");
            let err = store.put_file("segments/s/none", &missing, &mut |_| {}).await.unwrap_err();
            assert!(err.to_string().contains("no-such-file"), "{err}");
            assert!(store.get_opt("segments/s/none").await.unwrap().is_none());
        }
        // The second part is refused: the error names the object and the cause, the upload
        // is aborted, and no object is left.
        let failing = FaultyStore { refuse_part: Some(2), ..Default::default() };
        let aborted = Arc::clone(&failing.aborted);
        let store = Store::from_object_store(Arc::new(failing), "fails://bucket");
        let err = store.put_file("segments/s/big.bin", &big_path, &mut |_| {}).await.unwrap_err();
        let text = format!("{err}: {:?}", std::error::Error::source(&err));
        assert!(text.contains("segments/s/big.bin"), "{text}");
        assert!(text.contains("part 2 was refused"), "{text}");
        assert!(aborted.load(Ordering::SeqCst), "the multipart upload was aborted");
        assert!(store.get_opt("segments/s/big.bin").await.unwrap().is_none());
        // The small file still goes up in one request.
        store.put_file("segments/s/small.bin", &small_path, &mut |_| {}).await.unwrap();
        assert!(store.get_opt("segments/s/small.bin").await.unwrap().is_some());
    });
}

#[test]
fn s13_a_snapshot_opened_by_id_is_verified_before_anything_of_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (store, golden) = golden_store(dir.path());
    let root = PathBuf::from(store.url().trim_start_matches("file://"));
    let rt = runtime();
    rt.block_on(async {
        // The golden store predates recorded hashes: an extra manifest written there by hand
        // cannot be vouched for.
        let by_hand = child_of(&golden, "20991231T000000Z-00000000");
        let key = hubdex_formats::manifest_key(&by_hand.snapshot);
        store.put(&key, by_hand.to_bytes()).await.unwrap();
        let err = store.verified_manifest(&by_hand.snapshot).await.unwrap_err();
        assert!(matches!(err, StoreError::UnverifiedSnapshot { .. }), "{err}");
        assert!(err.to_string().contains("published before hubdex recorded"), "{err}");
        store.delete(&key).await.unwrap();

        // Two publishes: the first hashes what it finds, the second carries it forward.
        let a = child_of(&golden, "20991231T000001Z-aaaaaaaa");
        store.publish(&a, false).await.unwrap();
        let b = child_of(&a, "20991231T000002Z-bbbbbbbb");
        store.publish(&b, false).await.unwrap();
        let current = store.latest_manifest().await.unwrap();
        let earlier = current.earlier_snapshots.clone().unwrap();
        assert_eq!(
            earlier.keys().collect::<Vec<_>>(),
            [&golden.snapshot, &a.snapshot],
            "B vouches for A and, through A, for the golden snapshot"
        );
        for id in [&golden.snapshot, &a.snapshot, &b.snapshot] {
            store.verified_manifest(id).await.unwrap_or_else(|e| panic!("{id}: {e}"));
        }

        // A manifest never made current (written by hand now) is refused by id.
        let orphan = child_of(&golden, "20991231T000003Z-cccccccc");
        let key = hubdex_formats::manifest_key(&orphan.snapshot);
        store.put(&key, orphan.to_bytes()).await.unwrap();
        let err = store.verified_manifest(&orphan.snapshot).await.unwrap_err();
        assert!(err.to_string().contains("records no hash for it"), "{err}");

        // A: one byte of its manifest changed after it was published.
        let path = root.join(hubdex_formats::manifest_key(&a.snapshot));
        let text = std::fs::read_to_string(&path).unwrap();
        let rows = format!("\"rows\": {}", a.segments[0].rows);
        assert!(text.contains(&rows), "{text}");
        std::fs::write(&path, text.replacen(&rows, "\"rows\": 1", 1)).unwrap();

        let cache = dir.path().join("cache");
        let open = hubdex_server::open_snapshot(&store, &cache, Some(&a.snapshot)).await;
        let Err(err) = open else { panic!("a tampered snapshot opened by id is refused") };
        let err = err.to_string();
        assert!(err.contains(&a.snapshot) && err.contains("was changed after"), "{err}");
        assert!(err.contains(&format!("snapshot {} records", b.snapshot)), "{err}");
        assert!(!cache.exists() || walkdir::WalkDir::new(&cache).into_iter().count() <= 1);

        let pulled = dir.path().join("pulled");
        let err = hubdex_server::pull_snapshot(&store, &a.snapshot, &pulled).await.unwrap_err();
        assert!(err.to_string().contains(&a.snapshot), "{err}");
        assert!(!pulled.join("LATEST").exists(), "nothing vouches for a refused snapshot");
        assert!(!pulled.join("segments").exists(), "no segment of it was fetched");
        let err = store.pin(&a.snapshot).await.unwrap_err();
        assert!(matches!(err, StoreError::TamperedSnapshot { .. }), "{err}");

        // The others still open, and a pull writes exactly the bytes it checked.
        hubdex_server::open_snapshot(&store, &cache, Some(&golden.snapshot)).await.unwrap();
        let id = hubdex_server::pull_snapshot(&store, &golden.snapshot, &pulled).await.unwrap();
        let copied = Store::open(pulled.to_str().unwrap()).unwrap();
        assert_eq!(copied.latest_manifest().await.unwrap().snapshot, id);
        assert_eq!(
            std::fs::read(pulled.join(hubdex_formats::manifest_key(&id))).unwrap(),
            std::fs::read(root.join(hubdex_formats::manifest_key(&id))).unwrap()
        );
    });
}
