//! Prometheus metrics: tool calls and their latency per tool and transport, errors, HTTP
//! requests by status, and which snapshot is served and how old it is.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    transport: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    transport: String,
    /// The token's name (never the token); `oauth` for OAuth callers.
    caller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuthLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolErrorLabels {
    tool: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SnapshotLabels {
    snapshot: String,
}

/// The server's metrics registry.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    auth_refused: Family<AuthLabels, Counter>,
    errors: Family<ToolErrorLabels, Counter>,
    latency: Family<ToolLabels, Histogram>,
    http: Family<HttpLabels, Counter>,
    snapshot: Family<SnapshotLabels, Gauge>,
    snapshot_created: Gauge<i64>,
    swaps: Counter,
    swap_failures: Counter,
    segments_opened: Counter,
    current: Mutex<String>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("hubdex");
        let calls = Family::<CallLabels, Counter>::default();
        let auth_refused = Family::<AuthLabels, Counter>::default();
        let errors = Family::<ToolErrorLabels, Counter>::default();
        let latency = Family::<ToolLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let http = Family::<HttpLabels, Counter>::default();
        let snapshot = Family::<SnapshotLabels, Gauge>::default();
        let snapshot_created = Gauge::<i64>::default();
        registry.register(
            "tool_calls",
            "Tool calls by tool, transport and caller (token name)",
            calls.clone(),
        );
        registry.register(
            "auth_refused",
            "Requests refused for their credentials, by reason",
            auth_refused.clone(),
        );
        registry.register(
            "tool_errors",
            "Tool calls answered with an error, by tool and kind",
            errors.clone(),
        );
        registry.register(
            "tool_latency_seconds",
            "Tool call latency by tool and transport",
            latency.clone(),
        );
        registry.register("http_responses", "HTTP responses by status", http.clone());
        registry.register("snapshot_info", "The snapshot being served (value 1)", snapshot.clone());
        registry.register(
            "snapshot_created_timestamp_seconds",
            "Creation time of the served snapshot; its age is time() minus this",
            snapshot_created.clone(),
        );
        let swaps = Counter::default();
        let swap_failures = Counter::default();
        registry.register(
            "snapshot_swaps",
            "Snapshots swapped in after LATEST moved",
            swaps.clone(),
        );
        registry.register(
            "snapshot_swap_failures",
            "New snapshots refused (verification or open failed); the current one kept serving",
            swap_failures.clone(),
        );
        let segments_opened = Counter::default();
        registry.register(
            "segments_opened",
            "Segments opened since start: at start, on a swap and when a snapshot is opened by id (a segment already open is not reopened)",
            segments_opened.clone(),
        );
        Metrics {
            segments_opened,
            registry,
            calls,
            auth_refused,
            errors,
            latency,
            http,
            snapshot,
            snapshot_created,
            swaps,
            swap_failures,
            current: Mutex::new(String::new()),
        }
    }
}

impl Metrics {
    /// Records one tool call.
    pub(crate) fn tool(
        &self,
        tool: &str,
        transport: &str,
        caller: &str,
        seconds: f64,
        error: Option<&str>,
    ) {
        let labels = ToolLabels { tool: tool.to_string(), transport: transport.to_string() };
        let call = CallLabels {
            tool: tool.to_string(),
            transport: transport.to_string(),
            caller: caller.to_string(),
        };
        self.calls.get_or_create(&call).inc();
        self.latency.get_or_create(&labels).observe(seconds);
        if let Some(kind) = error {
            self.errors
                .get_or_create(&ToolErrorLabels { tool: tool.to_string(), kind: kind.to_string() })
                .inc();
        }
    }

    /// Records a request refused for its credentials.
    pub(crate) fn auth_refused(&self, reason: &str) {
        self.auth_refused.get_or_create(&AuthLabels { reason: reason.to_string() }).inc();
    }

    /// Records one HTTP response.
    pub(crate) fn http(&self, status: u16) {
        self.http.get_or_create(&HttpLabels { status: status.to_string() }).inc();
    }

    /// Records which snapshot is served.
    pub(crate) fn serving(&self, id: &str, created_at: chrono::DateTime<chrono::Utc>) {
        let mut current = self.current.lock().expect("metrics lock");
        if !current.is_empty() {
            self.snapshot.get_or_create(&SnapshotLabels { snapshot: current.clone() }).set(0);
        }
        self.snapshot.get_or_create(&SnapshotLabels { snapshot: id.to_string() }).set(1);
        self.snapshot_created.set(created_at.timestamp());
        *current = id.to_string();
    }

    /// Records a swap to a new snapshot, or a refused one.
    pub(crate) fn swap(&self, ok: bool) {
        if ok {
            self.swaps.inc()
        } else {
            self.swap_failures.inc()
        };
    }

    /// Records how many segments were opened since start (a count that only grows).
    pub(crate) fn segments_opened(&self, n: u64) {
        let counted = self.segments_opened.get();
        if n > counted {
            self.segments_opened.inc_by(n - counted);
        }
    }

    /// The text exposition format.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
