//! What the server holds: the store, the current snapshot (swapped atomically), the few
//! snapshots last asked for by id (a pinned query names any snapshot of the store), and the
//! query embedder.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use hubdex_formats::{Manifest, Store};
use hubdex_runtime::{Embedder, resolve_model_dir};

use crate::args::ToolError;
use crate::metrics::Metrics;
use crate::rerank::Reranker;
use crate::snapshot::{OpenSegments, OpenSnapshot, open_snapshot_in};

/// Snapshots asked for by id kept open besides the current one.
const BY_ID_OPEN: usize = 4;

/// The query embedder a server loads: `sessions` ONNX sessions (default one per four cores, at
/// least one), each on its share of the cores and not spinning between queries (they share the
/// cores with search).
pub fn query_embedder(
    dir: &std::path::Path,
    sessions: Option<usize>,
) -> Result<Embedder, hubdex_runtime::EmbedError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Embedder::load_pooled(dir, hubdex_runtime::Device::Cpu, sessions.unwrap_or(cores / 4).max(1))
}

/// What a server or a command-line query loads besides its store: where segments are cached,
/// the query model, the reranker.
#[derive(Debug, Clone)]
pub struct StateSetup {
    /// Where verified segments are cached.
    pub cache: PathBuf,
    /// Model directory or Hugging Face repo id; it must be the current snapshot's model.
    pub model: String,
    /// Query-embedding sessions ([`query_embedder`]).
    pub embed_sessions: Option<usize>,
    /// Cross-encoder model directory for `rerank: true`.
    pub rerank_model: Option<PathBuf>,
    /// Whether audit lines carry each call's arguments.
    pub audit_queries: bool,
}

/// Why query vectors of `embedder` cannot search a snapshot made by `manifest`'s model, if
/// they cannot: vectors are only comparable between equal models.
pub(crate) fn model_mismatch(embedder: &Embedder, manifest: &Manifest) -> Option<String> {
    (embedder.identity().model_sha256 != manifest.model.model_sha256).then(|| {
        format!(
            "snapshot {} was built with another model ({}, sha256 {})",
            manifest.snapshot,
            manifest.model.name,
            &manifest.model.model_sha256[..12.min(manifest.model.model_sha256.len())]
        )
    })
}

impl AppState {
    /// Opens the current snapshot of `store` and loads what `setup` names: the state a server
    /// serves and a command-line query answers from.
    pub async fn load(store: Store, setup: StateSetup) -> anyhow::Result<AppState> {
        let snap = open_snapshot_in(&store, &setup.cache, &OpenSegments::default(), None).await?;
        let model = setup.model.clone();
        let dir = resolve_model_dir(&model).with_context(|| format!("model {model}"))?;
        let sessions = setup.embed_sessions;
        let embedder =
            tokio::task::spawn_blocking(move || query_embedder(&dir, sessions)).await??;
        if let Some(why) = model_mismatch(&embedder, &snap.manifest) {
            anyhow::bail!("the model at {model} is not the one to use: {why}; pass --model");
        }
        let mut state = AppState::new(store, setup.cache, snap, Arc::new(embedder));
        state.audit_queries = setup.audit_queries;
        if let Some(dir) = setup.rerank_model {
            let shown = dir.display().to_string();
            let reranker = tokio::task::spawn_blocking(move || Reranker::load(&dir))
                .await?
                .with_context(|| format!("--rerank-model {shown}"))?;
            state.reranker = Some(Arc::new(reranker));
        }
        Ok(state)
    }
}

/// Shared server state.
pub struct AppState {
    /// Where snapshots are read from.
    pub store: Store,
    /// Where verified segments are cached.
    pub cache: PathBuf,
    /// The snapshot served by default.
    pub current: ArcSwap<OpenSnapshot>,
    /// The query embedder.
    pub embedder: Arc<Embedder>,
    /// The cross-encoder for `rerank: true`, when one is configured.
    pub reranker: Option<Arc<Reranker>>,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Whether audit lines carry each call's arguments (query text, ids, paths).
    pub audit_queries: bool,
    /// Open segments, shared by the current snapshot and those opened by id.
    pub open: OpenSegments,
    /// The snapshots last opened by id, most recently used first.
    by_id: Mutex<Vec<Arc<OpenSnapshot>>>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.store)
            .field("snapshot", &self.current.load().id())
            .finish()
    }
}

impl AppState {
    /// State serving `current`.
    pub fn new(
        store: Store,
        cache: PathBuf,
        current: Arc<OpenSnapshot>,
        embedder: Arc<Embedder>,
    ) -> Self {
        let metrics = Metrics::default();
        metrics.serving(current.id(), current.manifest.created_at);
        let open = OpenSegments::default();
        open.adopt(&current);
        metrics.segments_opened(open.opened());
        AppState {
            open,
            store,
            cache,
            current: ArcSwap::new(current),
            embedder,
            reranker: None,
            metrics,
            audit_queries: false,
            by_id: Mutex::new(Vec::new()),
        }
    }

    /// The snapshot a request asked for: the current one, or any other of the store by id,
    /// verified and opened on demand (the most recently used few stay open).
    pub async fn snapshot(&self, id: Option<&str>) -> Result<Arc<OpenSnapshot>, ToolError> {
        let current = self.current.load_full();
        let Some(id) = id else { return Ok(current) };
        if current.id() == id {
            return Ok(current);
        }
        if let Some(s) = self.recent_by_id(id) {
            return Ok(s);
        }
        let valid = id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid {
            return Err(ToolError::arg(
                "snapshot",
                format!("{id:?} is not a snapshot id (like 20261129T180000Z-1a2b3c4d)"),
            ));
        }
        let opened = open_snapshot_in(&self.store, &self.cache, &self.open, Some(id))
            .await
            .map_err(|e| match e {
                crate::snapshot::OpenError::Store(
                    hubdex_formats::StoreError::UnknownSnapshot { .. },
                ) => ToolError::arg(
                    "snapshot",
                    format!("no snapshot {id} in this store; the current one is {}", current.id()),
                ),
                other => ToolError::Unavailable(format!("opening snapshot {id}: {other}")),
            })?;
        self.metrics.segments_opened(self.open.opened());
        let mut by_id = self.by_id.lock().expect("by-id lock");
        by_id.insert(0, opened.clone());
        by_id.truncate(BY_ID_OPEN);
        Ok(opened)
    }

    /// A snapshot opened by id before, moved to the front of the few kept open.
    fn recent_by_id(&self, id: &str) -> Option<Arc<OpenSnapshot>> {
        let mut by_id = self.by_id.lock().expect("by-id lock");
        let i = by_id.iter().position(|s| s.id() == id)?;
        let s = by_id.remove(i);
        by_id.insert(0, s.clone());
        Some(s)
    }
}

impl AppState {
    /// Checks LATEST once: when it names a new snapshot, downloads and verifies its missing
    /// segments, opens it and swaps it in atomically. Requests in flight keep the snapshot
    /// they started on (they hold its `Arc`). A snapshot that fails is logged, counted and
    /// skipped; the current one keeps serving. Returns the id served afterwards.
    pub async fn refresh(&self) -> String {
        let current = self.current.load_full();
        let latest = match self.store.latest().await {
            Ok(Some(l)) => l.snapshot,
            Ok(None) => return current.id().to_string(),
            Err(e) => {
                tracing::warn!(error = %e, "reading LATEST failed; keeping the current snapshot");
                return current.id().to_string();
            }
        };
        if latest == current.id() {
            return latest;
        }
        let opened = open_snapshot_in(&self.store, &self.cache, &self.open, None)
            .await
            .map_err(|e| e.to_string())
            .and_then(|next| match model_mismatch(&self.embedder, &next.manifest) {
                Some(why) => Err(why),
                None => Ok(next),
            });
        match opened {
            Ok(next) => {
                tracing::info!(from = %current.id(), to = %next.id(), "swapped to the new snapshot");
                self.metrics.serving(next.id(), next.manifest.created_at);
                self.metrics.swap(true);
                self.metrics.segments_opened(self.open.opened());
                self.current.store(next);
            }
            Err(e) => {
                tracing::error!(snapshot = %latest, error = %e, "new snapshot refused; keeping the current one");
                self.metrics.swap(false);
            }
        }
        self.current.load().id().to_string()
    }

    /// The Prometheus text of this server's metrics.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    /// Polls LATEST every `interval` until the process ends.
    pub fn spawn_poller(self: &Arc<Self>, interval: std::time::Duration) {
        let state = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                state.refresh().await;
            }
        });
    }
}
