//! Real MCP clients drive `hubdex serve` and call every tool: the official Python client over
//! stdio and HTTP in 2026-07-28 and legacy (initialize) modes, and the official TypeScript SDK
//! client over HTTP.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixture::fixture;

/// A server process killed when dropped.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `hubdex --store STORE [global args] serve --http 127.0.0.1:PORT [extra]` with `envs`
/// and waits for /healthz; stderr goes to `stderr` when given.
pub(crate) fn spawn_http(
    global: &[&str],
    extra: &[&str],
    envs: &[(&str, &str)],
    stderr: Option<std::fs::File>,
) -> (Server, u16) {
    let port = hubdex_tests::free_port();
    let mut cmd = Command::new(hubdex_tests::bin("hubdex"));
    cmd.args(global)
        .args(["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stdout(Stdio::null());
    cmd.envs(envs.iter().copied());
    cmd.stderr(stderr.map_or_else(Stdio::null, Stdio::from));
    let server = Server(cmd.spawn().unwrap());
    hubdex_tests::wait_for_http(port, Duration::from_secs(60));
    (server, port)
}

/// Starts `hubdex serve --http` on the fixture store and waits for /healthz.
pub(crate) fn http_server(extra: &[&str]) -> (Server, u16) {
    spawn_http(&["--store", fixture().store.to_str().unwrap()], extra, &[], None)
}

fn python_client(transport_args: &[String], mode: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/mcp_client.py");
    let out = Command::new(hubdex_tests::python())
        .arg(script)
        .args(["--mode", mode])
        .args(transport_args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client failed in {mode} mode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What every client must have seen, whatever its language or transport.
fn check_report(r: &Value, who: &str, is_error: &str, structured: &str) {
    let snapshot = json!(fixture().first.snapshot);
    assert_eq!(
        r["tools"],
        json!([
            "fetch",
            "grep",
            "index_stats",
            "read_span",
            "related",
            "scan",
            "search",
            "symbols"
        ]),
        "{who}"
    );
    for tool in ["stats", "search", "scan", "fetch", "span", "related", "grep"] {
        assert_eq!(r[tool][is_error], json!(false), "{who}: {tool} failed: {}", r[tool]);
        assert_eq!(r[tool][structured]["snapshot"], snapshot, "{who}: {tool} names its snapshot");
        assert!(
            !r[tool]["text"].as_str().unwrap_or("").is_empty(),
            "{who}: {tool} has a text rendering"
        );
    }
    assert_eq!(r["stats"][structured]["repos"][0]["repo"], json!("local/widgets"), "{who}");
    let search = &r["search"][structured];
    assert_eq!(search["count"], json!(3), "{who}");
    assert!(
        search["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["title"]
                == json!("Add exponential backoff when retrying failed HTTP requests")),
        "{who}: {search}"
    );
    assert_eq!(r["scan"][structured]["count"], json!(5), "{who}");
    assert_eq!(r["scan"][structured]["truncated"], json!(true), "{who}");
    assert_eq!(r["fetch"][structured]["count"], json!(1), "{who}");
    assert_eq!(r["fetch"][structured]["not_found"], json!(["cmt_doesnotexist"]), "{who}");
    assert_eq!(r["fetch"][structured]["results"][0]["content_source"], json!("index"), "{who}");
    assert_eq!(
        r["span"][structured]["text"],
        json!("# User guide\n\n## Creating widgets\n"),
        "{who}"
    );
    assert!(
        r["span"][structured]["citation"].as_str().unwrap().starts_with("docs/guide.md:1-3@"),
        "{who}"
    );
    let related = &r["related"][structured];
    assert_eq!(related["entity"]["entity"], json!("file/docs/guide.md"), "{who}: {related}");
    assert_eq!(related["groups"][0]["kind"], json!("changed_in"), "{who}: {related}");
    assert_eq!(
        related["groups"][0]["edges"][0]["title"],
        json!("Initial import of the widget service"),
        "{who}: {related}"
    );
    let grep = &r["grep"][structured];
    assert_eq!(grep["results"][0]["path"], json!("docs/guide.md"), "{who}: {grep}");
    assert_eq!(grep["results"][0]["line"], json!(3), "{who}: {grep}");
    assert_eq!(grep["results"][0]["before"], json!([""]), "{who}: {grep}");
    assert!(
        grep["results"][0]["citation"].as_str().unwrap().starts_with("docs/guide.md:3-3@"),
        "{who}: {grep}"
    );
    assert_eq!(r["bad"][is_error], json!(true), "{who}");
    assert!(
        r["bad"]["text"]
            .as_str()
            .unwrap()
            .contains("argument `top_k`: must be an integer from 1 to 50"),
        "{who}: {}",
        r["bad"]
    );
}

#[test]
fn python_client_over_stdio_in_both_protocol_eras() {
    let f = fixture();
    let cmd = vec![
        "stdio".to_string(),
        "--".to_string(),
        hubdex_tests::bin("hubdex").display().to_string(),
        "--store".into(),
        f.store.display().to_string(),
        "serve".into(),
        "--stdio".into(),
    ];
    for mode in ["2026-07-28", "legacy"] {
        check_report(
            &python_client(&cmd, mode),
            &format!("python stdio {mode}"),
            "is_error",
            "structured",
        );
    }
}

#[test]
fn python_client_over_http_in_both_protocol_eras() {
    let (_server, port) = http_server(&[]);
    let url = vec!["http".to_string(), format!("http://127.0.0.1:{port}/mcp")];
    for mode in ["2026-07-28", "legacy"] {
        check_report(
            &python_client(&url, mode),
            &format!("python http {mode}"),
            "is_error",
            "structured",
        );
    }
}

#[test]
fn typescript_sdk_client_over_http() {
    let (_server, port) = http_server(&[]);
    let node_dir = hubdex_tests::node_dir();
    let out = Command::new(node_dir.join("bin").join("node"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/ts/client.cjs"))
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .env("HUBDEX_NODE_DIR", &node_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "TypeScript client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_report(&r, "typescript http", "isError", "structured");
}
