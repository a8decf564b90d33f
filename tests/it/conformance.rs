//! The MCP conformance suite (@modelcontextprotocol/conformance) against `hubdex serve --http`
//! at protocol 2026-07-28: every scenario passes except those listed, with reasons, in
//! tests/conformance/expected-failures.yml.

use std::process::Command;

use crate::mcp_clients::http_server;

#[test]
fn the_conformance_suite_passes_every_scenario_that_applies() {
    let (_server, port) = http_server(&[]);
    let node_dir = hubdex_tests::node_dir();
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(node_dir.join("bin").join("node"))
        .arg(node_dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args([
            "server",
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
            "--spec-version",
            "2026-07-28",
            "--suite",
            "all",
        ])
        .arg("--expected-failures")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/expected-failures.yml"))
        .arg("-o")
        .arg(results.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.split("=== SUMMARY ===").nth(1).unwrap_or(&stdout);
    assert!(
        out.status.success(),
        "conformance failed:\n{summary}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for must_pass in
        ["tools-list", "dns-rebinding-protection", "http-header-validation", "tools-call-error"]
    {
        assert!(summary.contains(&format!("✓ {must_pass}:")), "{must_pass} must pass:\n{summary}");
    }
}
