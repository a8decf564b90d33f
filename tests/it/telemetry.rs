//! No telemetry: the ONNX Runtime library hubdex ships carries Microsoft's telemetry client,
//! which writes a device id under `~/.cache/Microsoft` and later looks up its collector. A
//! server run under `strace` with an empty `$HOME` must do neither.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::fixture;

/// How long the server is kept up: the client's lookup came about 10 s after start.
const WATCHED: Duration = Duration::from_secs(15);

#[test]
fn the_server_writes_no_device_id_and_sends_nothing_but_its_answers() {
    let strace =
        ["/usr/bin/strace", "/bin/strace"].into_iter().find(|p| std::path::Path::new(p).exists());
    let strace =
        strace.expect("strace is needed to watch the server's system calls (ci/test installs it)");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let log = dir.path().join("strace.log");
    let port = hubdex_tests::free_port();
    let mut server = Command::new(strace)
        .args(["-f", "-s", "256", "-e", "trace=openat,connect,sendto,sendmsg", "-o"])
        .arg(&log)
        .arg(hubdex_tests::bin("hubdex"))
        .args(["--store", fixture().store.to_str().unwrap(), "--cache"])
        .arg(dir.path().join("cache"))
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .env("HOME", &home)
        .env_remove("ORT_DISABLE_TELEMETRY")
        .env_remove("XDG_CACHE_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    hubdex_tests::wait_for_http(port, Duration::from_secs(90));
    // A search loads the query embedder: the runtime's environment and a session exist.
    let (status, body) =
        crate::http::post(port, "/v1/search", r#"{"query": "widgets", "top_k": 3}"#, &[]);
    assert_eq!(status, 200, "{body}");
    std::thread::sleep(WATCHED.saturating_sub(started.elapsed()));
    // strace killed alone would leave the server running, detached: kill the server first.
    let pid = server.id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    for child in children.unwrap_or_default().split_whitespace() {
        let _ = Command::new("kill").args(["-9", child]).status();
    }
    let _ = server.kill();
    let _ = server.wait();
    let trace = std::fs::read_to_string(&log).unwrap();
    assert!(trace.contains("libonnxruntime"), "the runtime was loaded under the trace");
    let microsoft = home.join(".cache").join("Microsoft");
    assert!(!microsoft.exists(), "{} was written", microsoft.display());
    for line in trace.lines() {
        assert!(!line.contains("deviceid") && !line.contains("onnxruntime.db"), "{line}");
        assert!(!line.contains("microsoft") && !line.contains("mobile"), "a lookup: {line}");
        if line.contains("connect(") || line.contains("sendto(") || line.contains("sendmsg(") {
            // Only loopback answers to the test's requests: no DNS (port 53), no other host.
            assert!(!line.contains("htons(53)"), "a DNS query: {line}");
            let inet = line.contains("AF_INET");
            assert!(!inet || line.contains("127.0.0.1"), "a connection out: {line}");
        }
    }
}
