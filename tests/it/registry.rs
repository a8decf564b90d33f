//! server.json, hubdex's entry in the official MCP registry: valid against the rules of the
//! 2025-12-11 schema (ci/registry's transcription; release.yml checks the published file), and
//! in agreement with what the release publishes (version, image name and label, documented
//! environment variables). The checker first shows it refuses broken copies.

use std::path::Path;
use std::process::Command;

#[test]
fn server_json_is_a_valid_registry_entry_for_this_release() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(hubdex_tests::python())
        .arg(root.join("ci/registry/check_server_json.py"))
        .arg(root.join("server.json"))
        .arg("--schema")
        .arg(root.join("ci/registry/server-json-2025-12-11.schema.json"))
        .arg("--repo")
        .arg(&root)
        .arg("--self-test")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "server.json check failed:\n{stdout}{stderr}");
    assert!(stdout.contains("every broken copy was refused"), "{stdout}");
    assert!(stdout.contains("agrees with the repository"), "{stdout}");
}
