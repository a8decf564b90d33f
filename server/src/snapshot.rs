//! Opening snapshots: fetch the segments a manifest names into the local cache (verified as
//! they enter it), then open them read-only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hubdex_formats::{Manifest, Row, Segment, Store, StoreError};

/// An open snapshot: its manifest and every segment, ready to search.
#[derive(Debug)]
pub struct OpenSnapshot {
    pub manifest: Manifest,
    pub segments: Vec<Segment>,
    /// Row id → (segment, ordinal).
    by_id: HashMap<String, (usize, usize)>,
}

impl OpenSnapshot {
    /// Indexes the rows of `segments` by id.
    pub fn new(manifest: Manifest, segments: Vec<Segment>) -> Self {
        let mut by_id = HashMap::new();
        for (si, seg) in segments.iter().enumerate() {
            for (ord, row) in seg.rows.iter().enumerate() {
                by_id.insert(row.id.clone(), (si, ord));
            }
        }
        OpenSnapshot { manifest, segments, by_id }
    }

    /// The row with this id.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.by_id.get(id).map(|&(s, o)| &self.segments[s].rows[o])
    }

    /// The snapshot id.
    pub fn id(&self) -> &str {
        &self.manifest.snapshot
    }
}

/// Where the server keeps verified segments: `--cache`, else `~/.cache/hubdex`.
pub fn default_cache() -> PathBuf {
    hubdex_formats::cache_dir()
}

/// Errors opening a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("segment {segment}: {source}")]
    Segment {
        segment: String,
        #[source]
        source: hubdex_formats::FormatError,
    },
}

/// Opens snapshot `id` (or the one LATEST names) from `store`, through `cache`.
pub async fn open_snapshot(
    store: &Store,
    cache: &Path,
    id: Option<&str>,
) -> Result<Arc<OpenSnapshot>, OpenError> {
    let manifest = match id {
        None => store.latest_manifest().await?,
        Some(id) => store.manifest(id).await?.0,
    };
    let mut segments = Vec::with_capacity(manifest.segments.len());
    for seg in &manifest.segments {
        let dir = store.fetch_segment(seg, cache).await?;
        let opened = tokio::task::spawn_blocking(move || Segment::open(&dir))
            .await
            .map_err(|e| OpenError::Segment {
                segment: seg.id.clone(),
                source: hubdex_formats::FormatError::Io {
                    path: PathBuf::new(),
                    source: std::io::Error::other(e),
                },
            })?
            .map_err(|source| OpenError::Segment { segment: seg.id.clone(), source })?;
        segments.push(opened);
    }
    Ok(Arc::new(OpenSnapshot::new(manifest, segments)))
}

/// Downloads snapshot `id` (or the current one for `latest`) into `dir` as a store of its
/// own: its manifest, every segment (each file verified against its sha256 as it is copied),
/// and a LATEST naming it. `hubdex --store DIR query|serve` then needs no network.
pub async fn pull_snapshot(store: &Store, id: &str, dir: &Path) -> Result<String, OpenError> {
    let (manifest, sha) = if id == "latest" {
        let m = store.latest_manifest().await?;
        let id = m.snapshot.clone();
        store.manifest(&id).await?
    } else {
        store.manifest(id).await?
    };
    let target = Store::open(&dir.display().to_string())?;
    for seg in &manifest.segments {
        // Verified into DIR/segments/<id>/ exactly as the cache would hold it.
        store.fetch_segment(seg, dir).await?;
    }
    let key = format!("snapshots/{}/manifest.json", manifest.snapshot);
    let bytes = store.get_opt(&key).await?.ok_or_else(|| StoreError::UnknownSnapshot {
        id: manifest.snapshot.clone(),
        url: store.url().to_string(),
    })?;
    target.put(&key, bytes.to_vec()).await?;
    let latest =
        hubdex_formats::Latest { snapshot: manifest.snapshot.clone(), manifest_sha256: sha };
    target.put(hubdex_formats::LATEST, latest.to_bytes()).await?;
    Ok(manifest.snapshot)
}
