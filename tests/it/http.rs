//! HTTP surface: the REST mirror, /metrics, and the security checks (Host, Origin, bearer
//! token, batches, methods, body cap).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixture::{fixture, runtime, state};
use crate::mcp_clients::{http_server, spawn_http};

/// One HTTP/1.1 request; returns the status and the (de-chunked) body.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let (status, _, body) = request_with_head(port, method, path, body, headers);
    (status, body)
}

/// [`request`], also returning the response head (status line and headers).
pub(crate) fn request_with_head(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let _ = s.write_all(body.as_bytes());
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    (status, head.to_string(), body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n.min(rest.len())]);
        s = rest.get(n + 2..).unwrap_or("");
    }
    out
}

pub(crate) fn post(port: u16, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
    request(port, "POST", path, body, headers)
}

const MCP_HEADERS: &[(&str, &str)] = &[("Accept", "application/json, text/event-stream")];

#[test]
fn rest_answers_are_the_tool_answers() {
    let (_server, port) = http_server(&[]);
    let args = json!({"query": "login attempts", "top_k": 2, "type": "commit"});
    let (status, body) = post(port, "/v1/search", &args.to_string(), &[]);
    assert_eq!(status, 200, "{body}");
    let rest: Value = serde_json::from_str(&body).unwrap();
    let direct = runtime().block_on(async {
        hubdex_server::call_tool(
            &state(&fixture().store).await,
            "search",
            args.as_object().unwrap(),
        )
        .await
        .unwrap()
    });
    assert_eq!(rest, direct);
    for (path, body) in
        [("/v1/scan", r#"{"since": "2000-01-01"}"#), ("/v1/fetch", r#"{"ids": ["x"]}"#)]
    {
        let (status, body) = post(port, path, body, &[]);
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["snapshot"],
            json!(fixture().first.snapshot)
        );
    }
    let (status, body) = request(port, "GET", "/v1/stats", "", &[]);
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["repos"][0]["repo"],
        json!("local/widgets")
    );
    let (status, body) = post(port, "/v1/search", "{not json", &[]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not valid JSON"), "{body}");
}

#[test]
fn metrics_count_tool_calls_and_name_the_snapshot() {
    let (_server, port) = http_server(&[]);
    post(port, "/v1/search", r#"{"query": "widgets"}"#, &[]);
    post(port, "/v1/search", r#"{"query": ""}"#, &[]);
    let (status, body) = request(port, "GET", "/metrics", "", &[]);
    assert_eq!(status, 200);
    assert!(
        body.contains(
            r#"hubdex_tool_calls_total{tool="search",transport="rest",caller="anonymous"} 2"#
        ),
        "{body}"
    );
    assert!(
        body.contains(r#"hubdex_tool_errors_total{tool="search",kind="argument"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            r#"hubdex_snapshot_info{{snapshot="{}"}} 1"#,
            fixture().first.snapshot
        )),
        "{body}"
    );
    assert!(body.contains("hubdex_tool_latency_seconds_bucket"), "{body}");
    assert!(body.contains("hubdex_snapshot_created_timestamp_seconds"), "{body}");
}

#[test]
fn foreign_hosts_and_origins_are_refused() {
    let (_server, port) = http_server(&[]);
    let search = r#"{"query": "x"}"#;
    assert_eq!(post(port, "/v1/search", search, &[("Host", "evil.example")]).0, 403);
    assert_eq!(post(port, "/mcp", search, &[("Host", "evil.example:80")]).0, 403);
    assert_eq!(post(port, "/v1/search", search, &[("Origin", "https://evil.example")]).0, 403);
    assert_eq!(
        post(port, "/v1/search", search, &[("Origin", &format!("http://localhost:{port}"))]).0,
        200
    );
    assert_eq!(post(port, "/v1/search", search, &[("Host", &format!("localhost:{port}"))]).0, 200);
    let (_server2, port2) = http_server(&[
        "--allowed-host",
        "hubdex.example",
        "--allowed-origin",
        "https://app.example",
    ]);
    assert_eq!(post(port2, "/v1/search", search, &[("Host", "hubdex.example")]).0, 200);
    assert_eq!(post(port2, "/v1/search", search, &[("Origin", "https://app.example")]).0, 200);
    assert_eq!(post(port2, "/v1/search", search, &[("Origin", "https://other.example")]).0, 403);
    // RFC 9112 §3.2: a request with two Host headers is a 400, even when both are allowed.
    let twice = [("Host", "127.0.0.1"), ("Host", "hubdex.example")];
    let (status, body) = post(port2, "/v1/search", search, &twice);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("more than one Host header"), "{body}");
}

#[test]
fn a_bearer_token_is_required_when_set_and_never_logged() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let token = "s3cret-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let log = dir.path().join("server.log");
    let (server, port) = spawn_http(
        &["--store", f.store.to_str().unwrap()],
        &["--token-file", token_file.to_str().unwrap()],
        &[("HUBDEX_LOG", "debug")],
        Some(std::fs::File::create(&log).unwrap()),
    );
    let search = r#"{"query": "x"}"#;
    let (status, body) = post(port, "/v1/search", search, &[]);
    assert_eq!(status, 401, "{body}");
    assert_eq!(post(port, "/v1/search", search, &[("Authorization", "Bearer wrong")]).0, 401);
    assert_eq!(post(port, "/mcp", search, &[("Authorization", "Basic abc")]).0, 401);
    assert_eq!(request(port, "GET", "/metrics", "", &[]).0, 401);
    let auth = format!("Bearer {token}");
    assert_eq!(post(port, "/v1/search", search, &[("Authorization", &auth)]).0, 200);
    // RFC 9110 §11.1: the scheme is case-insensitive.
    for scheme in ["BEARER", "bearer", "BeArEr"] {
        let auth = format!("{scheme} {token}");
        assert_eq!(
            post(port, "/v1/search", search, &[("Authorization", &auth)]).0,
            200,
            "{scheme}"
        );
    }
    // A bad token's challenge keeps its error code: `Bearer error=...`, no comma after the
    // scheme (RFC 9110 §11.6.1), and no resource_metadata without OAuth.
    let (status, head, _) = crate::http::request_with_head(
        port,
        "POST",
        "/v1/search",
        search,
        &[("Authorization", "Bearer wrong")],
    );
    assert_eq!(status, 401);
    let challenge = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("www-authenticate: ").or_else(|| l.strip_prefix("WWW-Authenticate: "))
        })
        .unwrap_or_else(|| panic!("no challenge in {head}"));
    assert_eq!(challenge, "Bearer error=\"invalid_token\"");
    let (_, head, _) = crate::http::request_with_head(port, "POST", "/v1/search", search, &[]);
    assert!(head.to_ascii_lowercase().contains("www-authenticate: bearer\r\n"), "{head}");
    // Two credentials in one request are refused, not one of them picked.
    let twice = [("Authorization", auth.as_str()), ("Authorization", "Bearer wrong")];
    assert_eq!(post(port, "/v1/search", search, &twice).0, 400);
    assert_eq!(request(port, "GET", "/healthz", "", &[]).0, 200, "health checks need no token");
    // `hubdex health` (the image's healthcheck) passes on /healthz, and fails, naming the URL
    // and why, on an answer other than 200 and where nothing listens.
    let health = |url: String| {
        std::process::Command::new(hubdex_tests::bin("hubdex"))
            .args(["health", "--url", &url])
            .output()
            .unwrap()
    };
    let ok = health(format!("http://127.0.0.1:{port}/healthz"));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let refused = health(format!("http://127.0.0.1:{port}/metrics"));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("/metrics answered 401"));
    let nobody = format!("http://127.0.0.1:{}/healthz", hubdex_tests::free_port());
    let absent = health(nobody.clone());
    assert!(!absent.status.success());
    assert!(String::from_utf8_lossy(&absent.stderr).contains(&nobody));
    drop(server);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(token), "the token leaked into the log");
}

#[test]
fn batches_methods_and_oversize_bodies_are_refused() {
    let (_server, port) = http_server(&[]);
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#;
    let (status, body) = post(port, "/mcp", batch, MCP_HEADERS);
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], json!(-32600));
    assert_eq!(request(port, "GET", "/mcp", "", &[("Accept", "text/event-stream")]).0, 405);
    assert_eq!(request(port, "DELETE", "/mcp", "", &[]).0, 405);
    let big = format!(r#"{{"query": "{}"}}"#, "a".repeat(2 * 1024 * 1024));
    assert_eq!(post(port, "/v1/search", &big, &[]).0, 413);
    assert_eq!(post(port, "/mcp", &big, MCP_HEADERS).0, 413);
    let (status, body) = post(port, "/mcp", "{oops", MCP_HEADERS);
    assert!((400..500).contains(&status), "malformed JSON-RPC gets a 4xx: {status} {body}");
}

/// The server runs with glibc's malloc thresholds fixed (freed memory goes back to the system):
/// started without the setting it restarts itself with it, in the same process; a value the
/// caller set is kept. Its arenas stay glibc's default (queries allocate on many threads).
#[test]
fn the_server_runs_with_fixed_malloc_thresholds_and_keeps_a_callers_value() {
    use std::process::{Command, Stdio};
    let var = hubdex_formats::MALLOC_TRIM_THRESHOLD;
    let arenas = hubdex_formats::MALLOC_ARENA_MAX;
    for (given, expected) in [(None, "131072"), (Some("65536"), "65536")] {
        let port = hubdex_tests::free_port();
        let mut cmd = Command::new(hubdex_tests::bin("hubdex"));
        cmd.args(["--store", fixture().store.to_str().unwrap()])
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .env_remove(var)
            .env_remove(arenas)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(v) = given {
            cmd.env(var, v);
        }
        let server = crate::mcp_clients::Server(cmd.spawn().unwrap());
        hubdex_tests::wait_for_http(port, Duration::from_secs(60));
        let set = hubdex_tests::environment(server.0.id());
        let want = format!("{var}={expected}");
        assert!(set.contains(&want), "{want} not in the server's environment");
        assert!(!set.iter().any(|v| v.starts_with(arenas)), "{arenas} set");
        assert_eq!(request(port, "GET", "/healthz", "", &[]).0, 200);
    }
}
