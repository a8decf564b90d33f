//! Opening snapshots: fetch the segments a manifest serves from into the local cache (verified
//! as they enter it), then open them read-only, memory-mapped. An open segment is shared by
//! every snapshot that names it ([`OpenSegments`]), so a hot swap opens only new segments.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use hubdex_formats::{FormatError, Manifest, Row, Segment, Store, StoreError};

/// An open snapshot: its manifest and the segments that serve it.
#[derive(Debug)]
pub struct OpenSnapshot {
    /// The snapshot's manifest.
    pub manifest: Manifest,
    /// The serving units: merged segments and unmerged build segments, in manifest order.
    pub segments: Vec<Arc<Segment>>,
}

impl OpenSnapshot {
    /// A snapshot served by `segments`.
    pub fn new(manifest: Manifest, segments: Vec<Arc<Segment>>) -> Self {
        OpenSnapshot { manifest, segments }
    }

    /// The segment and doc of the row with this id.
    pub fn locate(&self, id: &str) -> Result<Option<(usize, u32)>, FormatError> {
        for (si, seg) in self.segments.iter().enumerate() {
            if let Some(doc) = seg.text.doc_of_id(id)? {
                return Ok(Some((si, doc)));
            }
        }
        Ok(None)
    }

    /// The stored row with this id.
    pub fn row(&self, id: &str) -> Result<Option<Row>, FormatError> {
        match self.locate(id)? {
            Some((si, doc)) => self.segments[si].text.row(doc).map(Some),
            None => Ok(None),
        }
    }

    /// The stored row with this id when `scope` may read it; `None` for an id the snapshot
    /// does not hold and for a row outside the scope alike. The scope is checked on the id's
    /// type prefix and the `repo` column before the row is decoded, so a hidden row costs what
    /// a missing one does (no timing tells them apart).
    pub fn row_in_scope(
        &self,
        id: &str,
        scope: Option<&hubdex_formats::Scope>,
    ) -> Result<Option<Row>, FormatError> {
        if let Some(s) = scope {
            let typed = hubdex_formats::RowType::of_id(id);
            if typed.is_none_or(|t| !s.allows_type(t)) {
                return Ok(None);
            }
        }
        let Some((si, doc)) = self.locate(id)? else { return Ok(None) };
        let text = &self.segments[si].text;
        if let Some(s) = scope
            && !s.allows_repo(&text.repo_of(doc)?)
        {
            return Ok(None);
        }
        let row = text.row(doc)?;
        Ok(scope.is_none_or(|s| s.allows(&row)).then_some(row))
    }

    /// The segments holding `repo`'s rows: one, or several when the indexer's memory budget
    /// cut the repository into build segments that are served by different units.
    pub fn segments_of_repo(&self, repo: &str) -> Vec<&Arc<Segment>> {
        self.segments.iter().filter(|s| s.meta.repositories().iter().any(|r| r == repo)).collect()
    }

    /// The snapshot id.
    pub fn id(&self) -> &str {
        &self.manifest.snapshot
    }
}

/// Open segments by id, shared by every open snapshot that names them. Segments a snapshot
/// holds stay open through its `Arc`s; of the others, the most recently used few stay open so
/// a pinned query or a swap back does not reopen them.
#[derive(Debug, Default)]
pub struct OpenSegments {
    inner: Mutex<SegmentsInner>,
}

#[derive(Debug, Default)]
struct SegmentsInner {
    live: HashMap<String, Weak<Segment>>,
    recent: Vec<Arc<Segment>>,
    opened: u64,
}

/// Segments kept open beyond those an open snapshot holds.
const RECENT_SEGMENTS: usize = 32;

impl OpenSegments {
    fn get(&self, id: &str) -> Option<Arc<Segment>> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let seg = inner.live.get(id)?.upgrade()?;
        inner.touch(&seg);
        Some(seg)
    }

    /// Adds the segments of an already open snapshot.
    pub fn adopt(&self, snap: &OpenSnapshot) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for seg in &snap.segments {
            if inner.live.insert(seg.meta.id.clone(), Arc::downgrade(seg)).is_none() {
                inner.opened += 1;
            }
            inner.touch(seg);
        }
    }

    fn insert(&self, id: &str, seg: Arc<Segment>) -> Arc<Segment> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // Another request may have opened the same segment meanwhile: keep one.
        if let Some(existing) = inner.live.get(id).and_then(Weak::upgrade) {
            inner.touch(&existing);
            return existing;
        }
        inner.opened += 1;
        inner.live.retain(|_, w| w.strong_count() > 0);
        inner.live.insert(id.to_string(), Arc::downgrade(&seg));
        inner.touch(&seg);
        seg
    }

    /// How many segments were opened (not found open) since the server started.
    pub fn opened(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).opened
    }
}

impl SegmentsInner {
    fn touch(&mut self, seg: &Arc<Segment>) {
        self.recent.retain(|s| !Arc::ptr_eq(s, seg));
        self.recent.insert(0, seg.clone());
        self.recent.truncate(RECENT_SEGMENTS);
    }
}

/// Where the server keeps verified segments: `--cache`, else `~/.cache/hubdex`.
pub fn default_cache() -> PathBuf {
    hubdex_runtime::cache_dir()
}

/// Errors opening a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A segment could not be opened.
    #[error("segment {segment}: {source}")]
    Segment {
        /// The segment's id.
        segment: String,
        /// Why.
        #[source]
        source: FormatError,
    },
}

/// The directory a verified cached segment serves from: itself for format 3; for formats 1
/// and 2, its upgrade to the format-3 serving layout, built once under `cache/upgraded/`.
fn serving_dir(cache: &Path, dir: PathBuf) -> Result<PathBuf, FormatError> {
    let meta = hubdex_formats::read_segment_meta(&dir)?;
    if meta.format_version >= 3 {
        return Ok(dir);
    }
    let upgraded = cache.join("upgraded");
    let done = hubdex_formats::name_join(&upgraded, "segment id", &meta.id)?;
    if done.join(hubdex_formats::VERIFIED_MARKER).is_file() {
        return Ok(done);
    }
    let tmp = upgraded.join(format!(".tmp-{}-{}", meta.id, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let built = hubdex_formats::upgrade_segment(&dir, &tmp).and_then(|()| {
        let marker = tmp.join(hubdex_formats::VERIFIED_MARKER);
        std::fs::write(&marker, b"").map_err(|e| FormatError::Io { path: marker, source: e })
    });
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    match std::fs::rename(&tmp, &done) {
        Ok(()) => Ok(done),
        // Another process upgraded the same segment first.
        Err(_) if done.join(hubdex_formats::VERIFIED_MARKER).is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(done)
        }
        Err(e) => Err(FormatError::Io { path: done, source: e }),
    }
}

/// Opens snapshot `id` (or the one LATEST names) from `store`, through `cache`.
pub async fn open_snapshot(
    store: &Store,
    cache: &Path,
    id: Option<&str>,
) -> Result<Arc<OpenSnapshot>, OpenError> {
    open_snapshot_in(store, cache, &OpenSegments::default(), id).await
}

/// [`open_snapshot`], reusing the segments `open` already holds and adding the ones it opens.
pub async fn open_snapshot_in(
    store: &Store,
    cache: &Path,
    open: &OpenSegments,
    id: Option<&str>,
) -> Result<Arc<OpenSnapshot>, OpenError> {
    let manifest = match id {
        None => store.latest_manifest().await?,
        Some(id) => store.verified_manifest(id).await?.manifest,
    };
    let mut segments = Vec::new();
    for seg in manifest.serving_units() {
        if let Some(s) = open.get(&seg.id) {
            segments.push(s);
            continue;
        }
        let dir = store.fetch_segment(seg, cache).await?;
        let cache = cache.to_path_buf();
        let fail = |source| OpenError::Segment { segment: seg.id.clone(), source };
        let opened = tokio::task::spawn_blocking(move || {
            serving_dir(&cache, dir).and_then(|d| Segment::open(&d))
        })
        .await
        .map_err(|e| {
            fail(FormatError::Io { path: PathBuf::new(), source: std::io::Error::other(e) })
        })?
        .map_err(fail)?;
        segments.push(open.insert(&seg.id, Arc::new(opened)));
    }
    Ok(Arc::new(OpenSnapshot::new(manifest, segments)))
}

/// Downloads snapshot `id` (or the current one for `latest`) into `dir` as a store of its
/// own: its manifest (verified before anything of it is read, and written as the bytes that
/// were checked), every segment (each file verified against its sha256 as it is copied), and
/// a LATEST naming it. `hubdex --store DIR query|serve` then needs no network.
pub async fn pull_snapshot(store: &Store, id: &str, dir: &Path) -> Result<String, OpenError> {
    let verified = if id == "latest" {
        store.verified_latest().await?
    } else {
        store.verified_manifest(id).await?
    };
    let manifest = &verified.manifest;
    let target = Store::open(&dir.display().to_string())?;
    for seg in manifest.segments.iter().chain(&manifest.merged) {
        // Verified into DIR/segments/<id>/ exactly as the cache would hold it.
        store.fetch_segment(seg, dir).await?;
    }
    let key = hubdex_formats::manifest_key(&manifest.snapshot);
    target.put(&key, verified.bytes.to_vec()).await?;
    let latest = hubdex_formats::Latest::new(manifest.snapshot.clone(), verified.sha256.clone());
    target.put(hubdex_formats::LATEST, latest.to_bytes()).await?;
    Ok(manifest.snapshot.clone())
}
