//! Where things are on a machine that ran `ci/setup`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A built binary of the workspace (`hubdex`, `hubdex-index`), next to the test executable's
/// `deps/` directory. `ci/test` builds them before running tests.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target profile directory");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --release --workspace` first (ci/test does)",
        path.display()
    );
    path
}

/// The embedding model directory: $HUBDEX_MODEL_DIR, else where `ci/setup` puts it.
pub fn model_dir() -> PathBuf {
    std::env::var_os("HUBDEX_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(hubdex_runtime::default_model_dir)
}

/// The Python with the test tools (mcp, pyarrow, duckdb) that `ci/setup` installs.
pub fn python() -> PathBuf {
    let p = std::env::var_os("HUBDEX_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| hubdex_runtime::cache_dir().join("venv").join("bin").join("python"));
    assert!(p.is_file(), "{} is missing: run ./ci/setup", p.display());
    p
}

/// The environment process `pid` runs with now (/proc/PID/environ: after an exec, the new one),
/// one `NAME=value` an entry; empty where the process is gone.
pub fn environment(pid: u32) -> Vec<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    environ
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

/// Waits until `GET /healthz` on `port` answers 200, or panics after `timeout`.
pub fn wait_for_http(port: u16, timeout: Duration) {
    use std::io::{Read, Write};
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.write_all(
                b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            );
            let mut buf = String::new();
            let _ = s.read_to_string(&mut buf);
            if buf.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("server on port {port} did not answer /healthz within {timeout:?}");
}

/// Where `ci/setup` installed Node 24, the MCP TypeScript SDK and the conformance suite.
pub fn node_dir() -> PathBuf {
    let dir = std::env::var_os("HUBDEX_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| hubdex_runtime::cache_dir().join("node"));
    assert!(dir.join("bin").join("node").exists(), "{} has no Node: run ./ci/setup", dir.display());
    dir
}

/// A copy of the embedding model in `dir` whose model.onnx is the same weights with another
/// `doc_string`: a different file (another sha256, so another model identity) that embeds
/// exactly as the original. The field is appended to the ModelProto as protobuf allows (the
/// last occurrence of a singular field wins), so no ONNX tooling is needed.
pub fn resaved_model(dir: &std::path::Path, doc: &str) -> PathBuf {
    let from = model_dir();
    std::fs::create_dir_all(dir).expect("model copy directory");
    for entry in std::fs::read_dir(&from).expect("model directory") {
        let entry = entry.expect("model directory entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copying the model");
    }
    assert!(doc.len() < 128, "one length byte");
    // ModelProto.doc_string is field 6, length-delimited: tag (6 << 3) | 2.
    let mut field = vec![(6 << 3) | 2, doc.len() as u8];
    field.extend_from_slice(doc.as_bytes());
    let onnx = dir.join("model.onnx");
    let mut bytes = std::fs::read(&onnx).expect("model.onnx");
    bytes.extend_from_slice(&field);
    std::fs::write(&onnx, bytes).expect("writing model.onnx");
    dir.to_path_buf()
}
