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

/// A registry on loopback that answers as ghcr.io does: an anonymous pull token from `/token`,
/// then the manifest with that token when the package is public, 401 when it is private.
fn fake_image_registry(public: bool) -> String {
    use axum::Router;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    let app =
        Router::new().route("/token", get(|| async { r#"{"token":"anonymous-pull"}"# })).route(
            "/v2/acme/hubdex/manifests/{tag}",
            get(move |headers: HeaderMap| async move {
                let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
                if public && bearer == Some("Bearer anonymous-pull") {
                    (StatusCode::OK, r#"{"schemaVersion":2,"manifests":[]}"#)
                } else {
                    (StatusCode::UNAUTHORIZED, r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#)
                }
            }),
        );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// release.yml's registry job stops before publishing when the image cannot be pulled
/// anonymously (a first release's ghcr.io package is private), saying which click fixes it;
/// a public image passes.
#[test]
fn the_registry_job_stops_early_naming_the_step_when_the_image_is_private() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let check = |public: bool| {
        Command::new(root.join("ci/check-image-public"))
            .arg("ghcr.io/acme/hubdex:0.1.0")
            .env("HUBDEX_REGISTRY_URL", fake_image_registry(public))
            .output()
            .unwrap()
    };
    let private = check(false);
    let stderr = String::from_utf8_lossy(&private.stderr);
    assert_eq!(private.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ghcr.io/acme/hubdex:0.1.0 cannot be pulled anonymously (HTTP 401)"),
        "{stderr}"
    );
    assert!(stderr.contains("https://github.com/acme/hubdex/pkgs/container/hubdex"), "{stderr}");
    assert!(stderr.contains("Change visibility"), "{stderr}");
    let public = check(true);
    assert!(public.status.success(), "{}", String::from_utf8_lossy(&public.stderr));
    let workflow = std::fs::read_to_string(root.join(".github/workflows/release.yml")).unwrap();
    let registry_job = &workflow[workflow.find("\n  registry:").unwrap()..];
    let checked = registry_job.find("ci/check-image-public").expect("the registry job checks");
    assert!(checked < registry_job.find("mcp-publisher publish").unwrap(), "checked first");
}
