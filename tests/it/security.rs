//! Hostile input from every side the server and indexer read: a store whose records name
//! paths outside it, files changed under the cache, claims and patterns built to be expensive,
//! and callers scoped by repository and type. Each test names the attack it guards against;
//! docs/reliability.md lists them as the threat model.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bad_input::hubdex;
use crate::fixture::fixture;

/// A copy of the fixture's store, to tamper with.
fn store_copy(dir: &Path) -> PathBuf {
    let to = dir.join("store");
    let ok = Command::new("cp").arg("-r").arg(&fixture().store).arg(&to).status().unwrap();
    assert!(ok.success());
    to
}

/// Rewrites the current manifest of the store at `store` with `edit`, and LATEST to vouch for
/// the result (what anyone who can write the store's objects can do).
fn rewrite_manifest(store: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let latest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("LATEST")).unwrap()).unwrap();
    let id = latest["snapshot"].as_str().unwrap();
    let path = store.join("snapshots").join(id).join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut m);
    let bytes = serde_json::to_vec_pretty(&m).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let fresh = hubdex_formats::Latest::new(id, hubdex_formats::sha256_hex(&bytes));
    std::fs::write(store.join("LATEST"), fresh.to_bytes()).unwrap();
}

/// A manifest naming a segment `../../…/pwned` made `query`, `serve` and `pull` create that
/// directory outside the cache and serve from it.
#[test]
fn a_segment_id_that_climbs_out_of_the_cache_is_refused_before_any_path_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_copy(dir.path());
    let target = dir.path().join("x").join("pwned");
    let climb = format!("{}{}", "../".repeat(24), target.to_str().unwrap().trim_start_matches('/'));
    rewrite_manifest(&store, |m| {
        for list in ["segments", "merged"] {
            for seg in m[list].as_array_mut().unwrap() {
                seg["id"] = climb.clone().into();
            }
        }
    });
    let cache = dir.path().join("cache");
    let (s, c) = (store.to_str().unwrap(), cache.to_str().unwrap());
    let pulled = dir.path().join("pulled");
    for args in [
        vec!["--store", s, "--cache", c, "query", "widgets"],
        vec!["--store", s, "--cache", c, "pull", "latest", pulled.to_str().unwrap()],
    ] {
        let (code, _, stderr) = hubdex(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains("is not a valid name"), "{args:?}: {stderr}");
        assert!(!target.exists() && !dir.path().join("x").exists(), "{args:?} made {target:?}");
    }
}

/// Flips the last byte of `path` in place: the same inode, as a writer that opens a file
/// without truncating it leaves it.
fn flip_last_byte_in_place(path: &Path) {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let bytes = std::fs::read(path).unwrap();
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(bytes.len() as u64 - 1)).unwrap();
    f.write_all(&[bytes[bytes.len() - 1] ^ 0x40]).unwrap();
}

/// A local store's files were hard-linked into the cache and a marker skipped every later
/// check: bytes rewritten in place in the store were served as verified, and a truncated
/// vector file killed the server with SIGBUS.
#[test]
fn the_verified_cache_holds_copies_and_notices_a_file_changed_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = store_copy(dir.path());
    let cache = dir.path().join("cache");
    crate::fixture::runtime().block_on(async {
        let store = hubdex_formats::Store::open(store_dir.to_str().unwrap()).unwrap();
        let m = store.latest_manifest().await.unwrap();
        let seg = m.serving_units()[0].clone();
        let file = seg.files.iter().max_by_key(|f| f.bytes).unwrap().path.clone();
        let cached = store.fetch_segment(&seg, &cache).await.unwrap();
        let verified = std::fs::read(cached.join(&file)).unwrap();

        // Rewritten in place in the store: the cache's copy is untouched.
        let in_store = store_dir.join("segments").join(&seg.id).join(&file);
        flip_last_byte_in_place(&in_store);
        let again = store.fetch_segment(&seg, &cache).await.unwrap();
        assert_eq!(
            std::fs::read(again.join(&file)).unwrap(),
            verified,
            "{file} changed in the cache"
        );

        // Cut short in the cache: noticed before anything maps it, and fetched again, which
        // the altered store file now fails.
        std::fs::OpenOptions::new()
            .write(true)
            .open(cached.join(&file))
            .unwrap()
            .set_len(verified.len() as u64 / 2)
            .unwrap();
        let err = store.fetch_segment(&seg, &cache).await.unwrap_err().to_string();
        assert!(err.contains("checksum") || err.contains("sha256"), "{err}");
        flip_last_byte_in_place(&in_store);
        let mended = store.fetch_segment(&seg, &cache).await.unwrap();
        assert_eq!(std::fs::read(mended.join(&file)).unwrap(), verified);

        // A server opening the snapshot from that cache after the file was cut short again
        // serves from a fresh, whole copy.
        std::fs::OpenOptions::new()
            .write(true)
            .open(mended.join(&file))
            .unwrap()
            .set_len(1)
            .unwrap();
        let snap = hubdex_server::open_snapshot(&store, &cache, None).await.unwrap();
        assert_eq!(std::fs::read(mended.join(&file)).unwrap(), verified);
        assert_eq!(snap.id(), m.snapshot);
    });
}

/// `files_glob` of 300,000 `*` panicked in globset (its regex past the size limit), dropped
/// the connection and logged the regex on every call.
#[test]
fn a_huge_or_expensive_glob_is_a_tool_error_never_a_panic() {
    let store = &fixture().store;
    crate::fixture::runtime().block_on(async {
        let st = crate::fixture::state(store).await;
        let call = |glob: String| {
            let st = st.clone();
            async move {
                let args = serde_json::json!({"query": "widgets", "files_glob": glob});
                hubdex_server::call_tool(&st, "search", args.as_object().unwrap()).await
            }
        };
        let err = call("*".repeat(300_000)).await.unwrap_err().to_string();
        assert!(
            err.starts_with("argument `files_glob`: must be at most 1000 characters, got 300000"),
            "{err}"
        );
        // At the limit, the most expensive shapes either answer or say why, quickly.
        for glob in ["*".repeat(1000), "**/".repeat(333), "{a,b}".repeat(200), "[!a]".repeat(250)] {
            let t = std::time::Instant::now();
            match call(glob.clone()).await {
                Ok(a) => assert!(a["results"].is_array()),
                Err(e) => assert!(e.to_string().starts_with("argument `files_glob`"), "{e}"),
            }
            assert!(t.elapsed() < std::time::Duration::from_secs(10), "{:?}", &glob[..12]);
        }
        // A path as long as `id` allows becomes an escaped glob of twice its length.
        let args = serde_json::json!({"id": format!("file/{}", "*".repeat(1990))});
        match hubdex_server::call_tool(&st, "related", args.as_object().unwrap()).await {
            Ok(a) => assert_eq!(a["count"], serde_json::json!(0), "{a}"),
            Err(e) => assert!(e.to_string().starts_with("argument `id`"), "{e}"),
        }
    });
}

/// One raw HTTP/1.1 exchange on a fresh connection: the request's bytes as given, the answer's
/// status and text (empty when the server closed without answering).
fn raw_exchange(port: u16, request: &[u8]) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

fn post_raw(port: u16, path: &str, headers: &[(&str, &[u8])], body: &[u8]) -> (u16, String) {
    let mut req = format!("POST {path} HTTP/1.1\r\nConnection: close\r\n").into_bytes();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.extend_from_slice(format!("Host: 127.0.0.1:{port}\r\n").as_bytes());
    }
    req.extend_from_slice(
        b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
    );
    for (k, v) in headers {
        req.extend_from_slice(format!("{k}: ").as_bytes());
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    req.extend_from_slice(body);
    raw_exchange(port, &req)
}

/// Host and Origin checks that a look-alike got through (`[::1]evil`, an Origin that is not
/// text) or that refused a real host in capitals; JSON-RPC bodies that are not JSON-RPC 2.0
/// answered 415 instead of 400.
#[test]
fn look_alike_hosts_and_origins_are_refused_and_bad_json_rpc_is_a_400() {
    let (_server, port) = crate::mcp_clients::http_server(&[]);
    let search = br#"{"query": "widgets"}"#;
    for (host, expect) in [
        (&b"[::1]evil"[..], 403),
        (b"[::1]:80evil", 403),
        (b"localhost.evil.example", 403),
        (b"LOCALHOST", 200),
        (b"LocalHost:8080", 200),
        (b"[::1]", 200),
    ] {
        let (status, text) = post_raw(port, "/v1/search", &[("Host", host)], search);
        assert_eq!(status, expect, "Host {:?}: {text}", String::from_utf8_lossy(host));
        let head = text.split("\r\n\r\n").next().unwrap_or("");
        assert!(!head.contains("evil"), "the Host is not reflected in a header: {head}");
    }
    for (origin, expect) in [
        (&b"http://\xff\xfe"[..], 403),
        (b"http://LOCALHOST:3000", 200),
        (b"http://[::1]evil", 403),
    ] {
        let (status, text) = post_raw(port, "/v1/search", &[("Origin", origin)], search);
        assert_eq!(status, expect, "Origin {:?}: {text}", String::from_utf8_lossy(origin));
    }
    for (body, code) in [
        (&b"{not json"[..], "-32700"),
        (b"\xff\xfe\xfd", "-32700"),
        (br#"{"jsonrpc": "1.0", "id": 1, "method": "ping"}"#, "-32600"),
    ] {
        let (status, text) = post_raw(port, "/mcp", &[], body);
        assert_eq!(status, 400, "{:?}: {text}", String::from_utf8_lossy(body));
        assert!(text.contains(code), "{text}");
    }
}

/// A tokens file that cannot be read told unauthenticated callers so; they get 503 with no
/// reason, and the log has it.
#[test]
fn a_broken_tokens_file_is_logged_and_not_told_to_callers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let (code, _, stderr) =
        hubdex(&["token", "add", "ci", "--repos", "*", "--tokens-file", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let log = dir.path().join("server.log");
    let (_server, port) = crate::mcp_clients::spawn_http(
        &["--store", fixture().store.to_str().unwrap()],
        &["--tokens-file", file.to_str().unwrap()],
        &[],
        Some(std::fs::File::create(&log).unwrap()),
    );
    std::fs::write(&file, "[[token]\nbroken = ").unwrap();
    let (status, text) =
        post_raw(port, "/v1/search", &[("Authorization", b"Bearer whatever")], b"{}");
    assert_eq!(status, 503, "{text}");
    assert!(!text.contains("tokens file") && !text.contains("tokens.toml"), "{text}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("tokens file"), "{logged}");
}

/// Connections were unbounded and a request's headers had no deadline: clients trickling a
/// header line at a time held connections open for good, and past the file limit every
/// caller timed out. Past `--max-connections` a connection is answered 503 at once, and a
/// trickling one is closed when its headers are not in within the header timeout.
#[test]
fn connections_are_bounded_and_slow_headers_are_cut_off() {
    use std::io::{Read as _, Write as _};
    let (_server, port) = crate::mcp_clients::http_server(&["--max-connections", "4"]);
    let started = std::time::Instant::now();
    let mut slow: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
            s
        })
        .collect();
    let healthz =
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    // The four are held once the server has accepted them: on a busy machine that can take a
    // moment, so ask until it refuses (or 10 s pass).
    let asked = std::time::Instant::now();
    let (status, text) = loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (status, text) = raw_exchange(port, healthz.as_bytes());
        if status == 503 || asked.elapsed() > std::time::Duration::from_secs(10) {
            break (status, text);
        }
    };
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("limit of 4 connections"), "{text}");
    // Trickling a header line every second does not keep a connection past the timeout.
    let deadline = hubdex_server::HEADER_READ_TIMEOUT + std::time::Duration::from_secs(5);
    for s in &mut slow {
        s.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    }
    let mut open = slow.len();
    while open > 0 && started.elapsed() < deadline {
        std::thread::sleep(std::time::Duration::from_secs(1));
        open = 0;
        for s in &mut slow {
            let _ = s.write_all(b"X-Trickle: 1\r\n");
            let mut buf = [0u8; 256];
            // Nothing to read yet: still open. Anything else (end, reset, an answer before
            // the close) means the server let it go.
            if let Err(e) = s.read(&mut buf)
                && matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
            {
                open += 1;
            }
        }
    }
    assert_eq!(open, 0, "trickling connections still open after {:?}", started.elapsed());
    let (status, text) = raw_exchange(port, healthz.as_bytes());
    assert_eq!(status, 200, "{text}");
}

const GOLDEN_V8: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/golden-v8");

/// Whether `p`, resolved lexically (`..` taking off a part), is below `root`.
fn stays_under(root: &Path, p: &Path) -> bool {
    use std::path::Component;
    let mut parts: Vec<Component<'_>> = Vec::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                parts.pop();
            }
            Component::CurDir => {}
            c => parts.push(c),
        }
    }
    let resolved: PathBuf = parts.iter().collect();
    resolved.starts_with(root) && resolved != root
}

/// The paths a reader builds from a segment entry: its directory under the cache, then each
/// of its files under that.
fn paths_of(root: &Path, id: &str, files: &[hubdex_formats::FileEntry]) -> Vec<PathBuf> {
    let Ok(dir) = hubdex_formats::name_join(root, "segment id", id) else { return Vec::new() };
    let mut out = vec![dir.clone()];
    out.extend(files.iter().filter_map(|f| hubdex_formats::safe_join(&dir, &f.path).ok()));
    out
}

/// A name as an attacker would write one: parts that climb, separators, dots, drive letters,
/// NUL and look-alikes, or plain letters.
fn hostile_name() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let part = prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just("/".to_string()),
        Just("\\".to_string()),
        Just("C:".to_string()),
        Just("\0".to_string()),
        Just("\u{2215}".to_string()),
        "[a-z0-9._-]{1,8}",
    ];
    proptest::collection::vec(part, 1..6).prop_map(|p| p.concat())
}

/// Whatever ids and file paths a manifest, segment.json or staged record names, every path a
/// reader builds from one it accepts stays under the root it is joined to.
#[test]
fn no_path_built_from_a_stores_records_leaves_its_root() {
    use proptest::prelude::*;
    let read = |rel: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(Path::new(GOLDEN_V8).join(rel)).unwrap()).unwrap()
    };
    let manifest = read("snapshots/20261202T141826Z-f3a2b907/manifest.json");
    let meta = read("segments/merged-6ef87b9134c251d6/segment.json");
    let root = Path::new("/cache/segments");
    let config = proptest::test_runner::Config { cases: 256, ..Default::default() };
    proptest::proptest!(config, |(id in hostile_name(), member in hostile_name(), path in hostile_name(), snapshot in hostile_name())| {
        let mut m = manifest.clone();
        m["snapshot"] = snapshot.clone().into();
        m["segments"][0]["id"] = id.clone().into();
        m["merged"][0]["members"][0] = member.clone().into();
        m["merged"][0]["files"][0]["path"] = path.clone().into();
        if let Ok(parsed) = hubdex_formats::Manifest::parse("manifest.json", &serde_json::to_vec(&m).unwrap()) {
            for seg in parsed.segments.iter().chain(&parsed.merged) {
                for p in paths_of(root, &seg.id, &seg.files) {
                    prop_assert!(stays_under(root, &p), "{p:?}");
                }
                for member in &seg.members {
                    prop_assert!(paths_of(root, member, &[]).iter().all(|p| stays_under(root, p)));
                }
            }
        }
        let mut s = meta.clone();
        s["id"] = id.clone().into();
        s["files"][0]["path"] = path.clone().into();
        if let Ok(parsed) = hubdex_formats::SegmentMeta::parse("segment.json", &serde_json::to_vec(&s).unwrap()) {
            for p in paths_of(root, &parsed.id, &parsed.files) {
                prop_assert!(stays_under(root, &p), "{p:?}");
            }
        }
        // A staged record of the same entry, read back from a store.
        let mut staged = m["merged"][0].clone();
        staged["id"] = id.clone().into();
        staged["embedded"] = 0.into();
        staged["reused"] = 0.into();
        staged["embed_seconds"] = 0.0.into();
        let read_back = crate::fixture::runtime().block_on(async {
            let store = hubdex_formats::Store::open("memory://").unwrap();
            let key = hubdex_formats::staged_segment_key("run", "acme/widgets");
            store.put(&key, serde_json::to_vec(&staged).unwrap()).await.unwrap();
            store.staged_segment("run", "acme/widgets").await
        });
        if let Ok(Some(parsed)) = read_back {
            for p in paths_of(root, &parsed.entry.id, &parsed.entry.files) {
                prop_assert!(stays_under(root, &p), "{p:?}");
            }
        }
        // And an id that climbs is never accepted anywhere.
        if id.contains('/') || id.contains('\\') || id.starts_with('.') {
            prop_assert!(hubdex_formats::check_name("id", &id).is_err());
        }
    });
}
