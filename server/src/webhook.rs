//! `POST /webhooks/github`: verify GitHub's signature, and queue a delta request. The server
//! never touches the index: this queue entry is its only write.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use hmac::{Hmac, Mac};
use hubdex_formats::QueueEntry;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::state::AppState;

/// Events that can change what is indexed.
pub(crate) const EVENTS: &[&str] = &[
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "release",
    "push",
    "gollum",
];

/// Webhook settings.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The webhook secret GitHub signs deliveries with.
    pub secret: Vec<u8>,
    /// After queueing, send a `repository_dispatch` (event type `hubdex-delta`) to this
    /// repository so its scheduled workflow starts now.
    pub dispatch: Option<Dispatch>,
}

impl WebhookConfig {
    /// Deliveries signed with `secret` are queued; with `dispatch_repo`, each queued delivery
    /// also sends `repository_dispatch` there through `github_api`, with `$GITHUB_TOKEN`.
    pub fn new(
        secret: String,
        dispatch_repo: Option<&str>,
        github_api: &str,
    ) -> anyhow::Result<WebhookConfig> {
        let dispatch = match dispatch_repo {
            None => None,
            Some(repo) => {
                let token = std::env::var("GITHUB_TOKEN")
                    .map_err(|_| anyhow::anyhow!("--dispatch-repo needs $GITHUB_TOKEN"))?;
                Some(Dispatch::new(repo, github_api, token)?)
            }
        };
        Ok(WebhookConfig { secret: secret.into_bytes(), dispatch })
    }
}

/// Where `repository_dispatch` goes.
#[derive(Clone)]
pub struct Dispatch {
    /// owner/name of the repository whose workflow builds the index.
    pub repo: String,
    /// The GitHub client that sends it.
    pub client: octocrab::Octocrab,
}

impl Dispatch {
    /// A dispatcher to `repo` through the API at `api` with `token`.
    pub fn new(repo: &str, api: &str, token: String) -> anyhow::Result<Self> {
        let client = octocrab::Octocrab::builder()
            .base_uri(api)
            .map_err(|e| anyhow::anyhow!("GitHub API URL {api:?}: {e}"))?
            .personal_token(token)
            .build()
            .map_err(|e| anyhow::anyhow!("GitHub client: {e}"))?;
        Ok(Dispatch { repo: repo.to_string(), client })
    }

    async fn send(&self, entry: &QueueEntry) {
        let body = json!({"event_type": "hubdex-delta", "client_payload": {"repo": entry.repo, "delivery": entry.delivery}});
        let path = format!("/repos/{}/dispatches", self.repo);
        match self.client._post(path.as_str(), Some(&body)).await {
            Ok(r) if r.status().is_success() => {
                tracing::info!(repo = %self.repo, "repository_dispatch sent")
            }
            Ok(r) => {
                tracing::warn!(repo = %self.repo, status = r.status().as_u16(), "repository_dispatch refused")
            }
            Err(e) => tracing::warn!(repo = %self.repo, error = %e, "repository_dispatch failed"),
        }
    }
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookConfig { secret: <set> }")
    }
}

/// Whether `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`, compared
/// in constant time.
pub fn verify_signature(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Some(hex_sig) = signature.strip_prefix("sha256=") else { return false };
    let Ok(expected) = hex::decode(hex_sig.trim()) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn reply(status: StatusCode, v: Value) -> Response {
    (status, Json(v)).into_response()
}

/// The delta request a delivery becomes, or why it is not one.
fn queue_entry(event: &str, delivery: &str, payload: &Value) -> Option<QueueEntry> {
    if !EVENTS.contains(&event) {
        return None;
    }
    let repo = payload["repository"]["full_name"].as_str()?;
    let mut numbers: Vec<i64> = Vec::new();
    for key in ["issue", "pull_request"] {
        if let Some(n) = payload[key]["number"].as_i64() {
            numbers.push(n);
        }
    }
    let refs: Vec<String> = [payload["ref"].as_str(), payload["release"]["tag_name"].as_str()]
        .into_iter()
        .flatten()
        .map(str::to_string)
        .collect();
    Some(QueueEntry {
        format_version: hubdex_formats::RECORD_VERSION,
        delivery: delivery.to_string(),
        repo: repo.to_string(),
        event: event.to_string(),
        action: payload["action"].as_str().map(str::to_string),
        numbers,
        refs,
        received_at: Some(Utc::now()),
    })
}

/// The handler.
pub(crate) async fn github_webhook(
    State((state, config)): State<(Arc<AppState>, Arc<WebhookConfig>)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(signature) = h("x-hub-signature-256") else {
        let why = if h("x-hub-signature").is_some() {
            "SHA-1 signatures are not accepted: set a secret so GitHub sends X-Hub-Signature-256"
        } else {
            "X-Hub-Signature-256 is missing"
        };
        return reply(StatusCode::UNAUTHORIZED, json!({"error": why}));
    };
    if !verify_signature(&config.secret, &body, signature) {
        return reply(StatusCode::UNAUTHORIZED, json!({"error": "signature does not match"}));
    }
    let event = h("x-github-event").unwrap_or("");
    let Some(delivery) = h("x-github-delivery").filter(|d| {
        !d.is_empty() && d.len() <= 100 && d.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    }) else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": "X-GitHub-Delivery is missing or not a delivery id"}),
        );
    };
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("the body is not JSON: {e}")}),
            );
        }
    };
    if event == "ping" {
        return reply(StatusCode::OK, json!({"status": "pong"}));
    }
    let Some(entry) = queue_entry(event, delivery, &payload) else {
        return reply(StatusCode::ACCEPTED, json!({"status": "ignored", "event": event}));
    };
    match state.store.enqueue(&entry).await {
        // A redelivery finds its entry already there: one entry, the same answer.
        Ok(created) => {
            tracing::info!(delivery, event, created, "webhook queued");
            if let (true, Some(d)) = (created, config.dispatch.clone()) {
                // Off the request path: GitHub gets its answer now.
                tokio::spawn(async move { d.send(&entry).await });
            }
            reply(
                StatusCode::ACCEPTED,
                json!({"status": "queued", "delivery": delivery, "duplicate": !created}),
            )
        }
        Err(e) => {
            tracing::warn!(delivery, error = %e, "webhook not queued");
            reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": "the queue is unavailable; GitHub will redeliver"}),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_documented_test_vector_verifies() {
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(verify_signature(b"It's a Secret to Everybody", b"Hello, World!", sig));
        assert!(!verify_signature(b"It's a Secret to Everybody", b"Hello, World?", sig));
        assert!(!verify_signature(b"another secret", b"Hello, World!", sig));
        assert!(!verify_signature(
            b"It's a Secret to Everybody",
            b"Hello, World!",
            "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"
        ));
        assert!(!verify_signature(b"It's a Secret to Everybody", b"Hello, World!", "sha256=zz"));
    }

    #[test]
    fn deliveries_become_queue_entries_naming_what_changed() {
        let p = json!({"action": "edited", "issue": {"number": 7}, "repository": {"full_name": "acme/widgets"}});
        let e = queue_entry("issues", "d-1", &p).unwrap();
        assert_eq!(e.repo, "acme/widgets");
        assert_eq!(e.numbers, [7]);
        assert_eq!(e.action.as_deref(), Some("edited"));
        assert_eq!(e.pending_key(), "queue/pending/d-1.json");
        assert!(queue_entry("star", "d-2", &p).is_none());
        let push = json!({"ref": "refs/heads/main", "repository": {"full_name": "acme/widgets"}});
        assert_eq!(queue_entry("push", "d-3", &push).unwrap().refs, ["refs/heads/main"]);
    }
}
