//! The snapshot lifecycle end to end over HTTP: a signed webhook queues a delta, `delta`
//! rebuilds only what changed, the server swaps within a poll interval, pinned queries keep
//! their answers, pulled snapshots answer offline, and gc keeps what is pinned.

use std::process::Command;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use hubdex_formats::Store;
use hubdex_indexer::{delta, gc};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fixture::runtime;
use crate::github::env;
use crate::http::post;
use crate::mcp_clients::{Server, spawn_http};

const SECRET: &str = "It's a Secret to Everybody";

fn sign(body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn serve(store: &std::path::Path, cache: &std::path::Path, extra: &[&str]) -> (Server, u16) {
    let global = ["--store", store.to_str().unwrap(), "--cache", cache.to_str().unwrap()];
    let envs = [("HUBDEX_WEBHOOK_SECRET", SECRET), ("GITHUB_TOKEN", "ghp_dispatch_token")];
    spawn_http(&global, extra, &envs, None)
}

fn search(port: u16, args: Value) -> Value {
    let (status, body) = post(port, "/v1/search", &args.to_string(), &[]);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn deliver(
    port: u16,
    delivery: &str,
    event: &str,
    body: &str,
    signature: Option<&str>,
) -> (u16, String) {
    let mut headers = vec![("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery)];
    if let Some(s) = signature {
        headers.push(("X-Hub-Signature-256", s));
    }
    post(port, "/webhooks/github", body, &headers)
}

#[test]
fn webhook_delta_hot_swap_pin_pull_and_gc() {
    let e = env();
    let first = e.build().unwrap();
    let store_dir = e.store();
    let cache = e.dir.path().join("server-cache");
    let (server, port) = serve(
        &store_dir,
        &cache,
        &["--poll-interval", "1", "--dispatch-repo", "acme/indexer", "--github-api", &e.fake.base],
    );

    let question = json!({"query": "archived projects in search results after reindexing", "repo": "acme/widgets", "type": "issue", "top_k": 3});
    let before = search(port, question.clone());
    assert_eq!(before["snapshot"], json!(first.snapshot));

    // The issue is edited on GitHub, which sends a signed webhook.
    e.fake.edit("acme/widgets", |r| {
        let i = r.issues.iter_mut().find(|i| i["number"] == json!(3)).unwrap();
        i["body"] = json!(
            "Archived projects still appear in search results after the nightly reindex job runs."
        );
        i["updated_at"] = json!("2024-04-01T00:00:00Z");
    });
    let payload = json!({"action": "edited", "issue": {"number": 3}, "repository": {"full_name": "acme/widgets"}}).to_string();
    let started = Instant::now();
    let (status, body) = deliver(port, "d-1", "issues", &payload, Some(&sign(&payload)));
    assert_eq!(status, 202, "{body}");
    assert!(started.elapsed() < Duration::from_secs(1), "webhooks answer fast");
    assert_eq!(
        deliver(port, "d-1", "issues", &payload, Some(&sign(&payload))).0,
        202,
        "a redelivery is accepted"
    );
    let pending = runtime().block_on(async {
        Store::open(store_dir.to_str().unwrap()).unwrap().list("queue/pending").await.unwrap()
    });
    assert_eq!(pending, vec!["queue/pending/d-1.json".to_string()], "one entry for two deliveries");
    // The queued delivery also starts the index workflow now, once.
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.fake.state.lock().unwrap().dispatches.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = e.fake.state.lock().unwrap().dispatches.clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, "acme/indexer");
    assert_eq!(sent[0].1["event_type"], json!("hubdex-delta"));
    assert_eq!(sent[0].1["client_payload"]["repo"], json!("acme/widgets"));
    assert!(sent[0].2, "the dispatch carries the token");

    // Bad deliveries: nothing queued.
    assert_eq!(deliver(port, "d-2", "issues", &payload, Some("sha256=00")).0, 401);
    assert_eq!(deliver(port, "d-3", "issues", &payload, None).0, 401);
    let sha1 = vec![
        ("X-GitHub-Event", "issues"),
        ("X-GitHub-Delivery", "d-4"),
        ("X-Hub-Signature", "sha1=abc"),
    ];
    assert_eq!(post(port, "/webhooks/github", &payload, &sha1).0, 401, "SHA-1 only is refused");
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    assert_eq!(deliver(port, "d-5", "issues", &big, Some(&sign(&big))).0, 413);
    assert_eq!(deliver(port, "d-6", "issues", "{oops", Some(&sign("{oops"))).0, 400);
    assert_eq!(
        deliver(
            port,
            "d-7",
            "ping",
            "{\"zen\": \"Keep it simple.\"}",
            Some(&sign("{\"zen\": \"Keep it simple.\"}"))
        )
        .0,
        200
    );
    let pending = runtime().block_on(async {
        Store::open(store_dir.to_str().unwrap()).unwrap().list("queue/pending").await.unwrap()
    });
    assert_eq!(pending.len(), 1, "{pending:?}");

    // The delta rebuilds acme/widgets only, reusing every unchanged vector.
    let report = runtime().block_on(delta(&e.options())).unwrap();
    let built = report.build.unwrap();
    assert_eq!(report.repos.keys().collect::<Vec<_>>(), vec!["acme/widgets"]);
    assert_eq!(built.embedded, 1, "only the edited issue's row is embedded again");
    assert!(built.published);
    let store = Store::open(store_dir.to_str().unwrap()).unwrap();
    let (done, pending) = runtime().block_on(async {
        (store.list("queue/done").await.unwrap(), store.list("queue/pending").await.unwrap())
    });
    assert_eq!(done, vec!["queue/done/d-1.json".to_string()]);
    assert!(pending.is_empty());

    // Within a poll interval the server answers from the new snapshot.
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let a = search(port, question.clone());
        if a["snapshot"] == json!(built.snapshot) || Instant::now() > deadline {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(after["snapshot"], json!(built.snapshot), "the server swapped to the new snapshot");
    let (_, fetched) =
        post(port, "/v1/fetch", &json!({"ids": [after["results"][0]["id"]]}).to_string(), &[]);
    assert!(fetched.contains("nightly reindex job"), "{fetched}");
    // A query pinned to the first snapshot returns exactly what it returned before.
    let mut pinned_q = question.clone();
    pinned_q["snapshot"] = json!(first.snapshot);
    assert_eq!(search(port, pinned_q.clone()), before);
    drop(server);

    // Pin the first snapshot, pull the current one, and answer offline.
    let hubdex = |args: &[&str]| {
        let out = Command::new(hubdex_tests::bin("hubdex"))
            .args(["--store", store_dir.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "hubdex {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    hubdex(&["pin", &first.snapshot]);
    assert!(hubdex(&["snapshots"]).contains(&format!("{} (pinned)", first.snapshot)));
    let pin_key = format!("pins/{}", first.snapshot);
    let pin = std::fs::read(store_dir.join(&pin_key)).unwrap();
    let pin = hubdex_formats::Pin::parse(&pin_key, &pin).unwrap();
    assert_eq!((pin.format_version, pin.snapshot.as_str()), (1, first.snapshot.as_str()));
    let pulled = e.dir.path().join("pulled");
    assert_eq!(hubdex(&["pull", "latest", pulled.to_str().unwrap()]).trim(), built.snapshot);
    let moved = e.dir.path().join("store-gone");
    std::fs::rename(&store_dir, &moved).unwrap();
    let (pulled_server, pulled_port) = serve(&pulled, &e.dir.path().join("pulled-cache"), &[]);
    assert_eq!(
        search(pulled_port, question.clone()),
        after,
        "the pulled copy answers identically with the original gone"
    );
    drop(pulled_server);
    let out = Command::new(hubdex_tests::python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/py/read_parquet.py"))
        .arg(&pulled)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "DuckDB reads the pulled Parquet: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&moved, &store_dir).unwrap();

    // gc --keep 1 keeps the pinned first snapshot and every segment it needs.
    let store = Store::open(store_dir.to_str().unwrap()).unwrap();
    // Five seconds on with no grace: every unreferenced segment is old enough to go.
    let gc_past_grace = |store: &Store| {
        let later = chrono::Utc::now() + chrono::Duration::seconds(5);
        runtime().block_on(gc(store, 1, chrono::Duration::zero(), later)).unwrap()
    };
    let young =
        runtime().block_on(gc(&store, 1, chrono::Duration::hours(24), chrono::Utc::now())).unwrap();
    assert!(
        young.deleted_segments.is_empty(),
        "nothing is deleted inside the grace period: {young:?}"
    );
    let r = gc_past_grace(&store);
    assert!(
        r.kept_snapshots.contains(&first.snapshot) && r.kept_snapshots.contains(&built.snapshot),
        "{r:?}"
    );
    runtime().block_on(async {
        for id in [&first.snapshot, &built.snapshot] {
            let (m, _) = store.unverified_manifest(id).await.unwrap();
            for seg in &m.segments {
                assert!(
                    store.has_segment(&seg.id).await.unwrap(),
                    "segment {} of {id} was kept",
                    seg.id
                );
            }
        }
    });
    // Unpinned, the first snapshot and the segments only it used go.
    hubdex(&["unpin", &first.snapshot]);
    let r = gc_past_grace(&store);
    assert_eq!(r.deleted_snapshots, vec![first.snapshot.clone()], "{r:?}");
    assert!(!r.deleted_segments.is_empty(), "the old widgets segment is collected: {r:?}");
    let left = runtime().block_on(store.snapshots()).unwrap();
    assert_eq!(left, vec![built.snapshot.clone()]);
}

#[test]
fn a_new_snapshot_that_fails_verification_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let repo = hubdex_tests::make_repo(&dir.path().join("r"));
    let store_dir = dir.path().join("store");
    let rt = runtime();
    let first = rt
        .block_on(hubdex_indexer::build(&crate::fixture::options(&store_dir, &repo.dir)))
        .unwrap();
    rt.block_on(async {
        let st = crate::fixture::state(&store_dir).await;
        // A new commit, a new snapshot, and then one of its new files is corrupted.
        std::fs::write(repo.dir.join("NEW.md"), "# New\n\nA new page.\n").unwrap();
        for args in [
            vec!["add", "."],
            vec!["-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "-m", "Add a page"],
        ] {
            assert!(
                Command::new("git")
                    .arg("-C")
                    .arg(&repo.dir)
                    .args(&args)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        let second =
            hubdex_indexer::build(&crate::fixture::options(&store_dir, &repo.dir)).await.unwrap();
        assert!(second.published);
        let store = Store::open(store_dir.to_str().unwrap()).unwrap();
        let (m, _) = store.unverified_manifest(&second.snapshot).await.unwrap();
        // What the server reads of it: the merged segment serving the build segment.
        let target = store_dir.join("segments").join(&m.merged[0].id).join("vectors.hnsw");
        let mut bytes = std::fs::read(&target).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&target, bytes).unwrap();
        assert_eq!(st.refresh().await, first.snapshot, "the current snapshot keeps serving");
        let metrics = st.metrics_text();
        assert!(metrics.contains("hubdex_snapshot_swap_failures_total 1"), "{metrics}");
    });
}
