//! The official Python MCP client drives `hubdex serve` over stdio and HTTP, in 2026-07-28 and
//! legacy (initialize) modes.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::fixture::fixture;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client(transport_args: &[String], mode: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/mcp_client.py");
    let out = Command::new(hubdex_tests::python())
        .arg(script)
        .args(["--mode", mode, "--query", "retry network calls with increasing delays"])
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

fn check_report(report: &Value, mode: &str) {
    assert!(
        report["tools"].as_array().unwrap().contains(&Value::from("search")),
        "{mode}: {report}"
    );
    assert_eq!(report["search"]["is_error"], Value::Bool(false), "{mode}: {report}");
    let answer = &report["search"]["structured"];
    assert_eq!(answer["snapshot"], Value::from(fixture().first.snapshot.clone()), "{mode}");
    assert_eq!(answer["count"], Value::from(3), "{mode}: {answer}");
    assert!(answer["results"][0]["id"].as_str().unwrap().contains('_'));
    assert_eq!(report["bad"]["is_error"], Value::Bool(true), "{mode}: {report}");
    assert!(
        report["bad"]["text"]
            .as_str()
            .unwrap()
            .contains("argument `top_k`: must be an integer from 1 to 50"),
        "{mode}: {report}"
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
        check_report(&client(&cmd, mode), mode);
    }
}

#[test]
fn python_client_over_http_in_both_protocol_eras() {
    let f = fixture();
    let port = hubdex_tests::free_port();
    let _server = Server(
        Command::new(hubdex_tests::bin("hubdex"))
            .args([
                "--store",
                f.store.to_str().unwrap(),
                "serve",
                "--http",
                &format!("127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    hubdex_tests::wait_for_http(port, Duration::from_secs(60));
    let url = vec!["http".to_string(), format!("http://127.0.0.1:{port}/mcp")];
    for mode in ["2026-07-28", "legacy"] {
        check_report(&client(&url, mode), mode);
    }
}
