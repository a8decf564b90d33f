//! The store: any object_store URL, and the publish protocol of a snapshot.
//!
//! Publishing uploads segment files, then each segment.json, then the manifest (create-only),
//! then moves LATEST with a conditional update. Where a store cannot update conditionally:
//! a local directory serialises publishers with an OS file lock held across read-compare-write
//! of LATEST; any other store refuses unless the caller allows unsafe updates.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};
use sha2::{Digest, Sha256};

use crate::error::{FormatError, StoreError};
use crate::manifest::{
    Latest, Manifest, ManifestSegment, ModelIdentity, Pin, SegmentMeta, record_bytes,
};
use crate::merge::{MergeIndexes, MergeLimits, MergeProgress};
use crate::names::{name_join, safe_join};
use crate::row::sha256_hex;
use crate::segment::{SEGMENT_JSON, read_segment_meta};

/// Test hook: when `$HUBDEX_FAILPOINT` names this point, the process aborts here, as if it
/// were killed (reliability tests use it to stop a publish half-way). Unset, it does nothing.
pub fn failpoint(name: &str) {
    if std::env::var("HUBDEX_FAILPOINT").is_ok_and(|v| v == name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// The store both binaries use when `--store` and `$HUBDEX_STORE` say nothing (an empty
/// `$HUBDEX_STORE` says nothing: [`crate::parse_args`]).
pub const DEFAULT_STORE: &str = "./.hubdex/store";

/// The object LATEST lives at.
pub const LATEST: &str = "LATEST";

/// Where pins live: `pins/<snapshot id>`.
pub const PINS_DIR: &str = "pins";

/// Where snapshots live: `snapshots/<id>/manifest.json`.
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// Where segments live: `segments/<segment id>/…`.
pub const SEGMENTS_DIR: &str = "segments";

/// The key of a snapshot's manifest: `snapshots/<id>/manifest.json`.
pub fn manifest_key(snapshot: &str) -> String {
    format!("{SNAPSHOTS_DIR}/{snapshot}/manifest.json")
}

/// The key of a file of a segment (`path` relative to the segment directory, `/`-separated):
/// `segments/<id>/<path>`.
pub fn segment_key(segment: &str, path: &str) -> String {
    format!("{SEGMENTS_DIR}/{segment}/{path}")
}

/// The name a `<dir>/<name>/…` key belongs to: a segment's id under `segments/`, a staged
/// run's under `staging/`.
pub fn name_under<'a>(dir: &str, key: &'a str) -> Option<&'a str> {
    key.strip_prefix(dir)?.strip_prefix('/')?.split('/').next()
}

fn pin_key(id: &str) -> String {
    format!("{PINS_DIR}/{id}")
}

/// One snapshot as `hubdex snapshots` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotListing {
    /// The snapshot id (its directory under `snapshots/`).
    pub id: String,
    /// LATEST names it.
    pub current: bool,
    /// `gc` keeps it.
    pub pinned: bool,
}

/// A manifest whose bytes matched the hash a trusted record holds for it.
#[derive(Debug, Clone)]
pub struct VerifiedManifest {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// manifest.json exactly as read and checked.
    pub bytes: bytes::Bytes,
    /// Their sha256.
    pub sha256: String,
}

/// An open store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    url: String,
    /// The root directory when the store is a local directory.
    local_root: Option<PathBuf>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("url", &self.url).finish()
    }
}

fn obj(key: &str) -> impl Fn(object_store::Error) -> StoreError + '_ {
    move |source| StoreError::Object { key: key.to_string(), source }
}

/// How LATEST moved (or why not), for the caller to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatestUpdate {
    /// LATEST was created: the store held no snapshot before.
    Created,
    /// LATEST was moved from the given snapshot.
    Moved {
        /// The snapshot LATEST named before.
        from: String,
    },
}

/// Installs ring as rustls's process-wide crypto provider, once (a provider the program
/// installed before stays). reqwest, which object_store's cloud and HTTP stores and the
/// server's OAuth client use, is built without a bundled provider and needs one before its
/// first client; hubdex builds with ring only, so every TLS client shares it.
pub fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Store {
    /// Opens a store from a URL (`file://`, `memory://`, `s3://`, `gs://`, `az://`) or a plain
    /// local path. A local directory is created if missing. Cloud credentials come from the
    /// usual environment variables (AWS_*, GOOGLE_*, AZURE_*).
    pub fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_with(url, &[])
    }

    /// [`Store::open`] with settings given as if they were environment variables
    /// (`AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, …) on top of the real environment; unknown names are
    /// ignored. For programs that talk to several stores at once (tests, tools).
    pub fn open_with(url: &str, settings: &[(&str, &str)]) -> Result<Store, StoreError> {
        let bad = |detail: String| StoreError::BadUrl { url: url.to_string(), detail };
        if url.is_empty() {
            return Err(bad(
                "it is empty: name a directory or a file://, s3://, gs:// or az:// URL".into(),
            ));
        }
        if url == "memory://" || url.starts_with("memory://") {
            return Ok(Store {
                inner: Arc::new(InMemory::new()),
                url: url.to_string(),
                local_root: None,
            });
        }
        let local = match url.strip_prefix("file://") {
            Some(p) => Some(PathBuf::from(p)),
            None if !url.contains("://") => Some(PathBuf::from(url)),
            None => None,
        };
        if let Some(path) = local {
            std::fs::create_dir_all(&path)
                .map_err(|e| bad(format!("cannot create {}: {e}", path.display())))?;
            let root = path.canonicalize().map_err(|e| bad(e.to_string()))?;
            let fs = LocalFileSystem::new_with_prefix(&root).map_err(|e| bad(e.to_string()))?;
            return Ok(Store {
                inner: Arc::new(fs),
                url: format!("file://{}", root.display()),
                local_root: Some(root),
            });
        }
        let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        install_tls_provider();
        let inner: Arc<dyn ObjectStore> = match parsed.scheme() {
            "s3" | "s3a" => {
                let mut b = object_store::aws::AmazonS3Builder::from_env();
                for (k, v) in settings {
                    if let Ok(key) = k.to_ascii_lowercase().parse() {
                        b = b.with_config(key, *v);
                    }
                }
                Arc::new(
                    b.with_url(url)
                        .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
                        .build()
                        .map_err(|e| bad(e.to_string()))?,
                )
            }
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            ),
            "az" | "azure" | "abfs" | "abfss" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            ),
            other => {
                return Err(bad(format!(
                    "unknown scheme {other:?}; use file://, memory://, s3://, gs:// or az://"
                )));
            }
        };
        let prefix = parsed.path().trim_matches('/');
        let inner: Arc<dyn ObjectStore> = if prefix.is_empty() {
            inner
        } else {
            Arc::new(object_store::prefix::PrefixStore::new(inner, prefix))
        };
        Ok(Store { inner, url: url.to_string(), local_root: None })
    }

    /// A store over any object_store implementation (`url` is what messages call it). Tests
    /// use it to put faults between hubdex and a real store.
    pub fn from_object_store(inner: Arc<dyn ObjectStore>, url: &str) -> Store {
        Store { inner, url: url.to_string(), local_root: None }
    }

    /// Whether the store honours create-only writes: writes a probe object, then asks to
    /// create it again, which must fail. A store that says yes to both would let two
    /// publishers overwrite each other's LATEST.
    pub async fn honours_conditional_writes(&self) -> Result<bool, StoreError> {
        const PROBE: &str = "_hubdex/conditional-write-probe";
        self.put(PROBE, b"probe".to_vec()).await?;
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        let again = self
            .inner
            .put_opts(&ObjectPath::from(PROBE), PutPayload::from_static(b"probe"), opts)
            .await;
        Ok(match again {
            Err(object_store::Error::AlreadyExists { .. }) => true,
            // No conditional writes at all: move_latest reports that on its own.
            Err(object_store::Error::NotImplemented { .. }) => true,
            Ok(_) => false,
            Err(e) => return Err(obj(PROBE)(e)),
        })
    }

    /// The URL this store was opened with (canonical for local directories).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Reads an object; `None` when it does not exist.
    pub async fn get_opt(&self, key: &str) -> Result<Option<bytes::Bytes>, StoreError> {
        match self.inner.get(&ObjectPath::from(key)).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(obj(key))?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(obj(key)(e)),
        }
    }

    /// Writes an object (overwriting).
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.inner.put(&ObjectPath::from(key), PutPayload::from(bytes)).await.map_err(obj(key))?;
        Ok(())
    }

    /// Uploads the local file `path` as the object `key`, read a MiB at a time and never held
    /// whole: up to [`UPLOAD_PART_BYTES`] it goes up as one request, a larger file as a
    /// multipart upload of parts that size, at most two sent at once.
    /// What an upload holds is then a few parts, whatever the file (a merged unit's vector
    /// graph or text store is 95-344 MB at 400k commits; docs/performance.md, "No whole file
    /// on upload"). `on_bytes` hears each MiB as it is read. A multipart upload that fails is
    /// aborted, so the store keeps no parts of it.
    pub async fn put_file(
        &self,
        key: &str,
        path: &Path,
        on_bytes: &mut impl FnMut(u64),
    ) -> Result<(), StoreError> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let io = |e| StoreError::from(FormatError::io(path, e));
        let mut file = tokio::fs::File::open(path).await.map_err(io)?;
        let mut w = object_store::buffered::BufWriter::with_capacity(
            Arc::clone(&self.inner),
            ObjectPath::from(key),
            UPLOAD_PART_BYTES,
        )
        .with_max_concurrency(UPLOAD_PARTS_IN_FLIGHT);
        let mut buf = vec![0u8; UPLOAD_READ_BYTES];
        let written: Result<(), StoreError> = async {
            loop {
                let n = file.read(&mut buf).await.map_err(io)?;
                if n == 0 {
                    return Ok(());
                }
                w.write_all(&buf[..n]).await.map_err(|e| upload_error(key, e))?;
                on_bytes(n as u64);
            }
        }
        .await;
        if let Err(e) = written {
            // The parts already sent are discarded (the error that stopped the upload is the
            // one reported; an abort that fails too leaves them to the store's own clean-up of
            // incomplete uploads).
            let _ = w.abort().await;
            return Err(e);
        }
        // Sends what is buffered: the one request, or the last part and the completion (which
        // aborts the upload itself when it fails).
        w.shutdown().await.map_err(|e| upload_error(key, e))
    }

    /// Creates an object that must not exist yet; `false` when it already did.
    pub async fn put_create(&self, key: &str, bytes: Vec<u8>) -> Result<bool, StoreError> {
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.inner.put_opts(&ObjectPath::from(key), PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(obj(key)(e)),
        }
    }

    /// Whether an object exists.
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        match self.inner.head(&ObjectPath::from(key)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(obj(key)(e)),
        }
    }

    /// Deletes an object; a missing one is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.inner.delete(&ObjectPath::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(obj(key)(e)),
        }
    }

    /// Keys of every object under `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let p = ObjectPath::from(prefix);
        let mut out = Vec::new();
        let mut s = self.inner.list(Some(&p));
        while let Some(m) = s.next().await {
            out.push(m.map_err(obj(prefix))?.location.to_string());
        }
        out.sort();
        Ok(out)
    }

    /// Keys of every object under `prefix` with their last-modified times.
    pub async fn list_with_times(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, chrono::DateTime<chrono::Utc>)>, StoreError> {
        let p = ObjectPath::from(prefix);
        let mut out = Vec::new();
        let mut s = self.inner.list(Some(&p));
        while let Some(m) = s.next().await {
            let m = m.map_err(obj(prefix))?;
            out.push((m.location.to_string(), m.last_modified));
        }
        out.sort();
        Ok(out)
    }

    /// Moves an object: writes it under `to`, then deletes `from`.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let bytes = self
            .get_opt(from)
            .await?
            .ok_or_else(|| FormatError::MissingFile { path: from.to_string() })?;
        self.put(to, bytes.to_vec()).await?;
        self.delete(from).await
    }

    /// LATEST, or `None` when nothing was published yet.
    pub async fn latest(&self) -> Result<Option<Latest>, StoreError> {
        Ok(self.latest_versioned().await?.map(|(l, _)| l))
    }

    async fn latest_versioned(&self) -> Result<Option<(Latest, UpdateVersion)>, StoreError> {
        match self.inner.get(&ObjectPath::from(LATEST)).await {
            Ok(r) => {
                let version =
                    UpdateVersion { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
                let bytes = r.bytes().await.map_err(obj(LATEST))?;
                Ok(Some((Latest::parse(&bytes)?, version)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(obj(LATEST)(e)),
        }
    }

    /// The ids of every published snapshot (those with a manifest), oldest first.
    pub async fn snapshots(&self) -> Result<Vec<String>, StoreError> {
        let mut ids: Vec<String> = self
            .list("snapshots")
            .await?
            .iter()
            .filter_map(|k| {
                k.strip_prefix(SNAPSHOTS_DIR)?
                    .strip_prefix('/')?
                    .strip_suffix("/manifest.json")
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Pins a snapshot: `gc` keeps it, and every segment it needs, until it is unpinned. The pin
    /// is `pins/<id>` holding a [`Pin`]; the snapshot must exist.
    pub async fn pin(&self, id: &str) -> Result<(), StoreError> {
        self.verified_manifest(id).await?;
        let key = pin_key(id);
        self.put(&key, record_bytes(&key, &Pin::now(id))?).await
    }

    /// Removes a snapshot's pin; `false` when it was not pinned.
    pub async fn unpin(&self, id: &str) -> Result<bool, StoreError> {
        if !self.exists(&pin_key(id)).await? {
            return Ok(false);
        }
        self.delete(&pin_key(id)).await?;
        Ok(true)
    }

    /// The ids of the pinned snapshots.
    pub async fn pins(&self) -> Result<std::collections::BTreeSet<String>, StoreError> {
        Ok(self
            .list(PINS_DIR)
            .await?
            .iter()
            .filter_map(|k| k.strip_prefix(PINS_DIR)?.strip_prefix('/').map(str::to_string))
            .collect())
    }

    /// Every published snapshot, oldest first, with whether it is current and pinned.
    pub async fn listing(&self) -> Result<Vec<SnapshotListing>, StoreError> {
        let current = self.latest().await?.map(|l| l.snapshot);
        let pins = self.pins().await?;
        Ok(self
            .snapshots()
            .await?
            .into_iter()
            .map(|id| SnapshotListing {
                current: current.as_deref() == Some(id.as_str()),
                pinned: pins.contains(&id),
                id,
            })
            .collect())
    }

    /// A snapshot's manifest.json as stored, unchecked.
    async fn manifest_bytes(&self, id: &str) -> Result<bytes::Bytes, StoreError> {
        crate::check_name("snapshot id", id)?;
        self.get_opt(&manifest_key(id)).await?.ok_or_else(|| StoreError::UnknownSnapshot {
            id: id.to_string(),
            url: self.url.clone(),
        })
    }

    /// Parses manifest bytes of snapshot `id`; it must name itself.
    fn parse_manifest(id: &str, bytes: &[u8]) -> Result<Manifest, StoreError> {
        let key = manifest_key(id);
        let m = Manifest::parse(&key, bytes)?;
        if m.snapshot != id {
            return Err(FormatError::Schema {
                what: key,
                detail: format!("names snapshot {}", m.snapshot),
            }
            .into());
        }
        Ok(m)
    }

    /// Reads and parses a snapshot's manifest, with its sha256, without checking that hash
    /// against anything: for `gc`, which only decides what to keep, and for tests. Whatever
    /// is opened to answer or copied goes through [`Store::verified_manifest`].
    pub async fn unverified_manifest(&self, id: &str) -> Result<(Manifest, String), StoreError> {
        let bytes = self.manifest_bytes(id).await?;
        Ok((Self::parse_manifest(id, &bytes)?, sha256_hex(&bytes)))
    }

    /// Snapshot `id`'s manifest read once and checked before it is parsed: `expected` is the
    /// sha256 that `vouched_by` records for it.
    async fn checked_manifest(
        &self,
        id: &str,
        expected: &str,
        vouched_by: &str,
    ) -> Result<VerifiedManifest, StoreError> {
        let bytes = self.manifest_bytes(id).await?;
        let sha256 = sha256_hex(&bytes);
        if sha256 != expected {
            return Err(StoreError::TamperedSnapshot {
                id: id.to_string(),
                vouched_by: vouched_by.to_string(),
                expected: expected.to_string(),
                actual: sha256,
            });
        }
        Ok(VerifiedManifest { manifest: Self::parse_manifest(id, &bytes)?, bytes, sha256 })
    }

    /// The manifest LATEST names, checked against the hash LATEST records.
    pub async fn latest_manifest(&self) -> Result<Manifest, StoreError> {
        Ok(self.verified_latest().await?.manifest)
    }

    /// [`Store::latest_manifest`] with the bytes it was parsed from.
    pub async fn verified_latest(&self) -> Result<VerifiedManifest, StoreError> {
        let latest =
            self.latest().await?.ok_or_else(|| StoreError::NoSnapshot { url: self.url.clone() })?;
        self.checked_manifest(&latest.snapshot, &latest.manifest_sha256, LATEST).await
    }

    /// Snapshot `id`'s manifest, checked before it is parsed: the current snapshot's against
    /// LATEST, any other against the sha256 the current snapshot records for it
    /// ([`Manifest::earlier_snapshots`]). A snapshot nobody vouches for (never current, or
    /// published before hashes were recorded) is refused, saying why.
    pub async fn verified_manifest(&self, id: &str) -> Result<VerifiedManifest, StoreError> {
        let current = self.verified_latest().await?;
        if current.manifest.snapshot == id {
            return Ok(current);
        }
        let vouched = current.manifest.earlier_snapshots.as_ref();
        if let Some(expected) = vouched.and_then(|e| e.get(id)) {
            let by = format!("snapshot {}", current.manifest.snapshot);
            return self.checked_manifest(id, expected, &by).await;
        }
        if !self.exists(&manifest_key(id)).await? {
            return Err(StoreError::UnknownSnapshot { id: id.to_string(), url: self.url.clone() });
        }
        let now = &current.manifest.snapshot;
        Err(StoreError::UnverifiedSnapshot {
            id: id.to_string(),
            why: match vouched {
                None => format!(
                    "the current snapshot {now} was published before hubdex recorded earlier \
                     snapshots' hashes; the next publish records every snapshot in the store"
                ),
                Some(_) => format!(
                    "the current snapshot {now} records no hash for it: it was never current \
                     (a build that lost the race for LATEST) or was written by hand"
                ),
            },
        })
    }

    /// The current snapshot's manifest (checked against LATEST), or `None` when nothing was
    /// published yet.
    pub async fn current_manifest(&self) -> Result<Option<Manifest>, StoreError> {
        match self.latest().await? {
            Some(_) => Ok(Some(self.latest_manifest().await?)),
            None => Ok(None),
        }
    }

    /// What a snapshot published on top of `parent` records of the snapshots before it: the
    /// parent (its hash from LATEST), and the parent's own record, less the snapshots `gc`
    /// has removed since. A parent written before the record existed vouches for nothing, so
    /// every manifest then in the store is hashed as found (once, by the publisher, who may
    /// write the store anyway).
    async fn earlier_snapshots(
        &self,
        parent: Option<&str>,
        new_id: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, StoreError> {
        let mut out = std::collections::BTreeMap::new();
        let Some(parent) = parent else { return Ok(out) };
        // If LATEST does not name the parent, the publish is refused when it moves LATEST.
        let current = match self.verified_latest().await {
            Ok(c) if c.manifest.snapshot == parent => c,
            Ok(_) | Err(StoreError::NoSnapshot { .. }) => return Ok(out),
            Err(e) => return Err(e),
        };
        let present: std::collections::BTreeSet<String> =
            self.snapshots().await?.into_iter().collect();
        match current.manifest.earlier_snapshots {
            Some(known) => out.extend(known.into_iter().filter(|(id, _)| present.contains(id))),
            None => {
                for id in present.iter().filter(|id| *id != parent && *id != new_id) {
                    match self.manifest_bytes(id).await {
                        Ok(bytes) => {
                            out.insert(id.clone(), sha256_hex(&bytes));
                        }
                        // Collected between the listing and the read.
                        Err(StoreError::UnknownSnapshot { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        out.insert(parent.to_string(), current.sha256);
        Ok(out)
    }
    /// Whether a complete segment is in the store (its segment.json is uploaded last).
    pub async fn has_segment(&self, id: &str) -> Result<bool, StoreError> {
        self.exists(&segment_key(id, SEGMENT_JSON)).await
    }

    /// Uploads a local segment directory: data files first, segment.json last. Returns the
    /// manifest entry. A segment already complete in the store is not uploaded again.
    pub async fn upload_segment(
        &self,
        dir: &Path,
        mut on_bytes: impl FnMut(u64),
    ) -> Result<ManifestSegment, StoreError> {
        let meta = read_segment_meta(dir)?;
        if self.has_segment(&meta.id).await? {
            // Same rows, same model: the stored segment is this one. Keep its segment.json so
            // an unchanged repository keeps an identical manifest entry.
            return Ok(self.stored_segment_entry(&meta.id).await?.1);
        }
        let json_path = dir.join(SEGMENT_JSON);
        let json = std::fs::read(&json_path).map_err(|e| FormatError::io(&json_path, e))?;
        for f in &meta.files {
            let path = safe_join(dir, &f.path)?;
            self.put_file(&segment_key(&meta.id, &f.path), &path, &mut on_bytes).await?;
        }
        self.put(&segment_key(&meta.id, SEGMENT_JSON), json.clone()).await?;
        Ok(manifest_entry(&meta, &json))
    }

    /// The manifest entry of a segment already in the store, read from its segment.json.
    pub async fn stored_segment_entry(
        &self,
        id: &str,
    ) -> Result<(SegmentMeta, ManifestSegment), StoreError> {
        let key = segment_key(id, SEGMENT_JSON);
        let json = self
            .get_opt(&key)
            .await?
            .ok_or_else(|| FormatError::MissingFile { path: key.clone() })?;
        let meta = SegmentMeta::parse(&key, &json)?;
        let entry = manifest_entry(&meta, &json);
        Ok((meta, entry))
    }

    /// Writes the manifest (create-only), with [`Manifest::earlier_snapshots`] filled in, and
    /// moves LATEST to it, provided LATEST still names `manifest.parent`. `allow_unsafe` permits a plain overwrite on stores without
    /// conditional updates.
    pub async fn publish(
        &self,
        manifest: &Manifest,
        allow_unsafe: bool,
    ) -> Result<LatestUpdate, StoreError> {
        let key = manifest_key(&manifest.snapshot);
        let mut manifest = manifest.clone();
        manifest.earlier_snapshots =
            Some(self.earlier_snapshots(manifest.parent.as_deref(), &manifest.snapshot).await?);
        let bytes = manifest.to_bytes();
        if self.local_root.is_none() && !allow_unsafe && !self.honours_conditional_writes().await? {
            return Err(StoreError::NoConditionalUpdate { url: self.url.clone() });
        }
        if !self.put_create(&key, bytes.clone()).await? {
            return Err(StoreError::Conflict { snapshot: manifest.snapshot.clone() });
        }
        crate::failpoint("after-manifest");
        let latest = Latest::new(manifest.snapshot.clone(), sha256_hex(&bytes));
        self.move_latest(&latest, manifest.parent.as_deref(), allow_unsafe).await
    }

    /// Moves LATEST from `expected` (None: there must be no LATEST yet) to `to`.
    pub async fn move_latest(
        &self,
        to: &Latest,
        expected: Option<&str>,
        allow_unsafe: bool,
    ) -> Result<LatestUpdate, StoreError> {
        let conflict = || StoreError::Conflict { snapshot: to.snapshot.clone() };
        if let Some(root) = &self.local_root {
            return self.move_latest_locked(root, to, expected).await;
        }
        let current = self.latest_versioned().await?;
        match (current, expected) {
            (None, None) => {
                if self.put_create(LATEST, to.to_bytes()).await? {
                    Ok(LatestUpdate::Created)
                } else {
                    Err(conflict())
                }
            }
            (Some((cur, version)), Some(exp)) if cur.snapshot == exp => {
                let opts = PutOptions { mode: PutMode::Update(version), ..Default::default() };
                match self
                    .inner
                    .put_opts(&ObjectPath::from(LATEST), PutPayload::from(to.to_bytes()), opts)
                    .await
                {
                    Ok(_) => Ok(LatestUpdate::Moved { from: cur.snapshot }),
                    Err(object_store::Error::Precondition { .. })
                    | Err(object_store::Error::AlreadyExists { .. }) => Err(conflict()),
                    Err(object_store::Error::NotImplemented { .. }) if allow_unsafe => {
                        self.put(LATEST, to.to_bytes()).await?;
                        Ok(LatestUpdate::Moved { from: cur.snapshot })
                    }
                    Err(object_store::Error::NotImplemented { .. }) => {
                        Err(StoreError::NoConditionalUpdate { url: self.url.clone() })
                    }
                    Err(e) => Err(obj(LATEST)(e)),
                }
            }
            _ => Err(conflict()),
        }
    }

    /// LATEST on a local directory: an exclusive OS lock (released by the OS if we die)
    /// around read, compare and an atomic rename.
    async fn move_latest_locked(
        &self,
        root: &Path,
        to: &Latest,
        expected: Option<&str>,
    ) -> Result<LatestUpdate, StoreError> {
        let lock_path = root.join(".LATEST.lock");
        let root = root.to_path_buf();
        let to = to.clone();
        let expected = expected.map(str::to_string);
        tokio::task::spawn_blocking(move || {
            let lock = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(|e| FormatError::io(&lock_path, e))?;
            lock.lock().map_err(|e| FormatError::io(&lock_path, e))?;
            let latest_path = root.join(LATEST);
            let current = match std::fs::read(&latest_path) {
                Ok(b) => Some(Latest::parse(&b)?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(FormatError::io(&latest_path, e).into()),
            };
            let result = match (&current, expected.as_deref()) {
                (None, None) => LatestUpdate::Created,
                (Some(cur), Some(exp)) if cur.snapshot == exp => {
                    LatestUpdate::Moved { from: cur.snapshot.clone() }
                }
                _ => return Err(StoreError::Conflict { snapshot: to.snapshot.clone() }),
            };
            let tmp = root.join(format!(".LATEST.{}.tmp", std::process::id()));
            std::fs::write(&tmp, to.to_bytes()).map_err(|e| FormatError::io(&tmp, e))?;
            std::fs::rename(&tmp, &latest_path).map_err(|e| FormatError::io(&latest_path, e))?;
            drop(lock);
            Ok(result)
        })
        .await
        .map_err(|e| StoreError::Format(FormatError::io("LATEST", std::io::Error::other(e))))?
    }

    /// Downloads a segment into `cache/segments/<id>`, hashing every file as it is copied and
    /// checking it against the manifest before the directory becomes visible. The cache holds
    /// copies, never links to a local store's files: a file rewritten in place in the store
    /// cannot reach a cached segment. A segment already in the cache was verified when it
    /// entered and is not hashed again, as long as every file is still the one verified (its
    /// size, modification time and inode, recorded in the marker); a file changed, truncated
    /// or missing since makes it fetched and verified again.
    pub async fn fetch_segment(
        &self,
        seg: &ManifestSegment,
        cache: &Path,
    ) -> Result<PathBuf, StoreError> {
        let segments = cache.join(SEGMENTS_DIR);
        let final_dir = name_join(&segments, "segment id", &seg.id)?;
        if final_dir.exists() {
            if still_verified(&final_dir, seg) {
                return Ok(final_dir);
            }
            tracing::warn!(segment = %seg.id, dir = %final_dir.display(), "cached segment changed since it was verified: fetching it again");
            std::fs::remove_dir_all(&final_dir).map_err(|e| FormatError::io(&final_dir, e))?;
        }
        let tmp = segments.join(format!(".tmp-{}-{}", seg.id, std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| FormatError::io(&tmp, e))?;
        let result = self.fetch_into(seg, &tmp).await.and_then(|()| {
            let marker = tmp.join(VERIFIED_MARKER);
            let stamps = verified_stamps(&tmp, seg).map_err(|e| FormatError::io(&tmp, e))?;
            std::fs::write(&marker, stamps).map_err(|e| FormatError::io(&marker, e).into())
        });
        if let Err(e) = result {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        match std::fs::rename(&tmp, &final_dir) {
            Ok(()) => {}
            // Another process verified the same segment first: theirs is as good as ours.
            Err(_) if still_verified(&final_dir, seg) => {
                let _ = std::fs::remove_dir_all(&tmp);
            }
            Err(e) => return Err(FormatError::io(&final_dir, e).into()),
        }
        Ok(final_dir)
    }

    async fn fetch_into(&self, seg: &ManifestSegment, dir: &Path) -> Result<(), StoreError> {
        let json_key = segment_key(&seg.id, SEGMENT_JSON);
        let json = self
            .get_opt(&json_key)
            .await?
            .ok_or_else(|| FormatError::MissingFile { path: json_key.clone() })?;
        let sha = sha256_hex(&json);
        if sha != seg.segment_json_sha256 {
            return Err(FormatError::ChecksumMismatch {
                path: json_key,
                expected: seg.segment_json_sha256.clone(),
                actual: sha,
            }
            .into());
        }
        let meta = SegmentMeta::parse(&json_key, &json)?;
        if meta.files != seg.files || meta.id != seg.id {
            return Err(FormatError::Schema {
                what: json_key,
                detail: "does not match the manifest's file list".into(),
            }
            .into());
        }
        for f in &meta.files {
            let key = segment_key(&seg.id, &f.path);
            let path = safe_join(dir, &f.path)?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| FormatError::io(parent, e))?;
            }
            let (sha256, bytes) = self.copy_hashing(&key, &path).await?;
            if sha256 != f.sha256 || bytes != f.bytes {
                return Err(FormatError::ChecksumMismatch {
                    path: key,
                    expected: f.sha256.clone(),
                    actual: sha256,
                }
                .into());
            }
        }
        let json_path = dir.join(SEGMENT_JSON);
        std::fs::write(&json_path, &json).map_err(|e| FormatError::io(&json_path, e))?;
        Ok(())
    }

    async fn copy_hashing(&self, key: &str, to: &Path) -> Result<(String, u64), StoreError> {
        use std::io::Write as _;
        let r = self.inner.get(&ObjectPath::from(key)).await.map_err(|e| match e {
            object_store::Error::NotFound { .. } => {
                StoreError::Format(FormatError::MissingFile { path: key.to_string() })
            }
            e => obj(key)(e),
        })?;
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(to).map_err(|e| FormatError::io(to, e))?);
        let mut h = Sha256::new();
        let mut n = 0u64;
        let mut unsynced = 0usize;
        // Written pages are dirty until the kernel writes them back, and a memory-limited
        // server (a container, a cgroup) is charged for them: a first open copies the whole
        // snapshot, which outgrew a 256 MiB limit at 100k rows. Syncing every few MiB keeps
        // them clean, so they can be dropped under pressure (docs/deploy.md, "Memory").
        let sync = |file: &mut std::io::BufWriter<std::fs::File>| {
            file.flush().and_then(|()| file.get_ref().sync_data())?;
            drop_cached_pages(file.get_ref());
            Ok::<(), std::io::Error>(())
        };
        let mut stream = r.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(obj(key))?;
            h.update(&chunk);
            n += chunk.len() as u64;
            file.write_all(&chunk).map_err(|e| FormatError::io(to, e))?;
            unsynced += chunk.len();
            if unsynced >= COPY_SYNC_BYTES {
                sync(&mut file).map_err(|e| FormatError::io(to, e))?;
                unsynced = 0;
            }
        }
        sync(&mut file).map_err(|e| FormatError::io(to, e))?;
        Ok((hex::encode(h.finalize()), n))
    }
}

/// One line per file of a verified segment (segment.json included): its path, size,
/// modification time and inode as they were once it was hashed. [`still_verified`] compares
/// them with the files found later.
fn verified_stamps(dir: &Path, seg: &ManifestSegment) -> std::io::Result<String> {
    let mut out = String::new();
    for path in std::iter::once(SEGMENT_JSON).chain(seg.files.iter().map(|f| f.path.as_str())) {
        let full = safe_join(dir, path).map_err(std::io::Error::other)?;
        out.push_str(&format!("{path}\t{}\n", file_stamp(&full)?));
    }
    Ok(out)
}

/// A file's size, modification time (nanoseconds since the epoch) and, on Unix, inode.
pub(crate) fn file_stamp(path: &Path) -> std::io::Result<String> {
    let m = std::fs::metadata(path)?;
    let mtime = m.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0u64;
    Ok(format!("{}\t{mtime}\t{inode}", m.len()))
}

/// Whether a cached segment directory still holds the files it was verified with: its marker
/// lists every file of `seg` with the stamp the file has now, and each size is the manifest's
/// (checked before anything is mapped: a shorter file would fault its reader). A marker
/// without stamps (an older cache) is not trusted.
fn still_verified(dir: &Path, seg: &ManifestSegment) -> bool {
    let Ok(marker) = std::fs::read_to_string(dir.join(VERIFIED_MARKER)) else { return false };
    let sizes_match = seg.files.iter().all(|f| {
        safe_join(dir, &f.path)
            .ok()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() == f.bytes)
    });
    sizes_match && verified_stamps(dir, seg).is_ok_and(|now| now == marker)
}

/// How much of a segment file [`Store::fetch_segment`] writes before it syncs it.
const COPY_SYNC_BYTES: usize = 8 << 20;

/// A file up to this size is uploaded in one request; a larger one in parts of this size
/// ([`Store::put_file`]; S3 takes parts of 5 MiB and more).
pub const UPLOAD_PART_BYTES: usize = 8 << 20;

/// The parts of one file [`Store::put_file`] sends at once: with the part being filled,
/// an upload holds at most three parts (24 MiB).
const UPLOAD_PARTS_IN_FLIGHT: usize = 2;

/// What [`Store::put_file`] reads from the file at a time.
const UPLOAD_READ_BYTES: usize = 1 << 20;

/// An error of [`Store::put_file`]'s writer: object_store's, passed through `std::io::Error`
/// (its `AsyncWrite`), taken back out where it is one.
fn upload_error(key: &str, e: std::io::Error) -> StoreError {
    match e.downcast::<object_store::Error>() {
        Ok(source) => StoreError::Object { key: key.to_string(), source },
        Err(e) => StoreError::Object {
            key: key.to_string(),
            source: object_store::Error::Generic { store: "upload", source: Box::new(e) },
        },
    }
}

/// Asks the kernel to drop `file`'s (clean, just synced) pages from the page cache.
fn drop_cached_pages(file: &std::fs::File) {
    // Advice only: where it fails, the pages stay cached, as they would have.
    #[cfg(target_os = "linux")]
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

impl Store {
    /// The merged segments that serve `segments` (see [`crate::plan_merges`]), in plan order:
    /// each reused when the store holds it, otherwise written as [`Self::merged_segment`]
    /// writes it. Merges run side by side as `limits` allow ([`MergeLimits`]: one per core,
    /// as their estimated memory fits), which changes no merged segment's bytes. `progress`
    /// hears how far they are ([`MergeProgress`]) before the first and as each is written or
    /// found.
    pub async fn merge_for_serving(
        &self,
        segments: &[ManifestSegment],
        model: &ModelIdentity,
        cache: &Path,
        work: &Path,
        limits: MergeLimits,
        progress: &(dyn Fn(MergeProgress) + Send + Sync),
    ) -> Result<Vec<ManifestSegment>, StoreError> {
        // Memory is counted in MiB permits. A merge whose indexes side by side would pass the
        // whole allowance writes them in turn; estimated over it even so, it takes it all (it
        // runs alone).
        const MIB: u64 = 1 << 20;
        let mib = |bytes: u64| u32::try_from(bytes / MIB).unwrap_or(u32::MAX).max(1);
        let allowance = mib(limits.memory_bytes);
        let memory = tokio::sync::Semaphore::new(allowance as usize);
        let slots = tokio::sync::Semaphore::new(limits.parallel.max(1));
        let groups = crate::merge::plan_merges(segments);
        let stored = &self.merged_segment_ids().await?;
        let rows_of = |group: &[ManifestSegment]| group.iter().map(|s| s.rows).sum::<u64>();
        let done = std::sync::Mutex::new(MergeProgress {
            units: groups.len(),
            rows: groups.iter().map(|g| rows_of(g)).sum(),
            ..MergeProgress::default()
        });
        progress(*done.lock().unwrap_or_else(|e| e.into_inner()));
        let finished = |rows: u64| {
            let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
            done.done += 1;
            done.rows_done += rows;
            progress(*done);
        };
        let merges = groups.into_iter().map(|group| {
            let (memory, slots, finished) = (&memory, &slots, &finished);
            async move {
                let id = crate::merge::merged_id(&group);
                let rows = rows_of(&group);
                if let Some(entry) = self.stored_merged(&id, stored).await? {
                    finished(rows);
                    return Ok(entry);
                }
                let estimate = |indexes| mib(crate::merge::merge_memory_estimate(rows, indexes));
                let (indexes, need) = match estimate(MergeIndexes::SideBySide) {
                    need if need <= allowance => (MergeIndexes::SideBySide, need),
                    _ => (MergeIndexes::InTurn, estimate(MergeIndexes::InTurn).min(allowance)),
                };
                // Semaphores are never closed here; acquiring in one order (memory, then a
                // slot) everywhere keeps two merges from each holding what the other waits on.
                let _memory = memory.acquire_many(need).await.expect("open semaphore");
                let _slot = slots.acquire().await.expect("open semaphore");
                let threads = crate::merge::graph_threads(rows);
                let how = MergeWay {
                    indexes,
                    graph_threads: threads,
                    in_turn_bytes: limits.in_turn_bytes,
                };
                let entry = self.write_merged(&group, &id, model, cache, work, how).await?;
                finished(rows);
                Ok(entry)
            }
        });
        futures::future::try_join_all(merges).await
    }

    /// The merged segment of the build segments `group` (in plan order): reused when the store
    /// holds it; otherwise written from its members (fetched and verified through `cache`) in
    /// `work` and uploaded, files first, segment.json last.
    pub async fn merged_segment(
        &self,
        group: &[ManifestSegment],
        model: &ModelIdentity,
        cache: &Path,
        work: &Path,
    ) -> Result<ManifestSegment, StoreError> {
        let id = crate::merge::merged_id(group);
        match self.stored_merged(&id, &self.merged_segment_ids().await?).await? {
            Some(entry) => Ok(entry),
            None => {
                let rows = group.iter().map(|s| s.rows).sum();
                let how = MergeWay {
                    indexes: MergeIndexes::SideBySide,
                    graph_threads: crate::merge::graph_threads(rows),
                    in_turn_bytes: u64::MAX,
                };
                self.write_merged(group, &id, model, cache, work, how).await
            }
        }
    }

    /// The ids of every merged segment the store holds, complete or not (one listing of
    /// `segments/`).
    async fn merged_segment_ids(&self) -> Result<Vec<String>, StoreError> {
        let p = ObjectPath::from(SEGMENTS_DIR);
        let listing = self.inner.list_with_delimiter(Some(&p)).await.map_err(obj(SEGMENTS_DIR))?;
        let mut ids: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .filter(|id| id.starts_with("merged-"))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// The manifest entry of a complete merged segment of the members [`merged_id`] named
    /// `id`, when the store holds one: `id` itself (a store written before merged segments
    /// were named by their write), else the first complete write of it among `stored`
    /// ([`Self::merged_segment_ids`]). Any write serves: they hold the same rows.
    ///
    /// [`merged_id`]: crate::merge::merged_id
    async fn stored_merged(
        &self,
        id: &str,
        stored: &[String],
    ) -> Result<Option<ManifestSegment>, StoreError> {
        let writes = stored.iter().filter(|s| crate::merge::is_write_of(s, id));
        for candidate in std::iter::once(id).chain(writes.map(String::as_str)) {
            if self.has_segment(candidate).await? {
                return Ok(Some(self.stored_segment_entry(candidate).await?.1));
            }
        }
        Ok(None)
    }

    /// Writes the merged segment `id` of `group` (see [`Self::merged_segment`]) as `how` says;
    /// uploaded under the id of its write ([`crate::merge::is_write_of`]).
    async fn write_merged(
        &self,
        group: &[ManifestSegment],
        id: &str,
        model: &ModelIdentity,
        cache: &Path,
        work: &Path,
        how: MergeWay,
    ) -> Result<ManifestSegment, StoreError> {
        let mut dirs = Vec::new();
        for m in group {
            dirs.push(self.fetch_segment(m, cache).await?);
        }
        let dir = name_join(work, "merged segment id", id)?;
        let _ = std::fs::remove_dir_all(&dir);
        let (d, i, m) = (dir.clone(), id.to_string(), model.clone());
        let write = move || {
            let vectors = crate::merge::vectors_of(&dirs)?;
            let builder = crate::merge::graph_builder(vectors, how.indexes, how.in_turn_bytes);
            let threads = how.graph_threads;
            crate::merge::write_merged_segment(&d, &i, &dirs, &m, how.indexes, threads, builder)?;
            Ok::<_, FormatError>(builder)
        };
        let builder = tokio::task::spawn_blocking(write)
            .await
            .map_err(|e| FormatError::io(&dir, std::io::Error::other(e)))??;
        failpoint("merged-segment-written");
        // What the text index's many small blocks left in the heap goes back before the next
        // merge builds its graph.
        crate::malloc::give_back_freed();
        let entry = self.upload_segment(&dir, |_| {}).await?;
        let _ = std::fs::remove_dir_all(&dir);
        tracing::info!(merged = %id, members = group.len(), rows = entry.rows, graph = ?builder, "merged segment written");
        Ok(entry)
    }
}

/// How one serving merge is written: its indexes side by side or in turn, its vector graph on
/// how many threads ([`crate::merge::graph_threads`]), and by which builder in turn
/// ([`crate::merge::graph_builder`], [`MergeLimits::in_turn_bytes`]).
#[derive(Debug, Clone, Copy)]
struct MergeWay {
    indexes: MergeIndexes,
    graph_threads: usize,
    in_turn_bytes: u64,
}

/// The marker a cached segment directory gets once every file in it matched its sha256.
pub const VERIFIED_MARKER: &str = ".verified";

fn manifest_entry(meta: &SegmentMeta, json: &[u8]) -> ManifestSegment {
    ManifestSegment {
        id: meta.id.clone(),
        repo: meta.repo.clone(),
        rows: meta.rows,
        rows_per_type: meta.rows_per_type.clone(),
        segment_json_sha256: sha256_hex(json),
        files: meta.files.clone(),
        members: meta.members.clone(),
        input_sha256: meta.input_sha256.clone(),
        history: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_built_and_read_back_in_one_place() {
        assert_eq!(
            manifest_key("20261201T000000Z-ab"),
            "snapshots/20261201T000000Z-ab/manifest.json"
        );
        let key = segment_key("acme-widgets-0123", "text/meta.json");
        assert_eq!(key, "segments/acme-widgets-0123/text/meta.json");
        assert_eq!(name_under(SEGMENTS_DIR, &key), Some("acme-widgets-0123"));
        assert_eq!(name_under(SEGMENTS_DIR, "snapshots/x/manifest.json"), None);
        assert_eq!(name_under(SEGMENTS_DIR, "segmentsx/y"), None);
    }

    #[tokio::test]
    async fn a_cached_file_is_a_copy_of_a_file_inside_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("store");
        std::fs::create_dir_all(root.join("segments/s")).unwrap();
        std::fs::write(root.join("segments/s/rows.parquet"), b"rows").unwrap();
        std::fs::write(tmp.path().join("secret"), b"outside the store").unwrap();
        let store = Store::open(root.to_str().unwrap()).unwrap();
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();

        // Inside the store: copied (its own inode: a write in place in the store cannot reach
        // it) and hashed.
        let inside = cache.join("rows.parquet");
        let (sha, bytes) = store.copy_hashing("segments/s/rows.parquet", &inside).await.unwrap();
        assert_eq!((sha.as_str(), bytes), (sha256_hex(b"rows").as_str(), 4));
        use std::os::unix::fs::MetadataExt as _;
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_ne!(ino(&inside), ino(&root.join("segments/s/rows.parquet")));

        // A key that climbs out of the store (a crafted manifest or segment.json) is refused.
        for key in ["../secret", "segments/../../secret", "/etc/passwd"] {
            let to = cache.join("crafted");
            let copied = store.copy_hashing(key, &to).await;
            assert!(copied.is_err(), "{key} was copied: {copied:?}");
            let leaked = std::fs::read(&to).unwrap_or_default();
            assert!(!leaked.starts_with(b"outside"), "{key} copied the file outside the store");
        }
    }

    #[test]
    fn an_https_cloud_store_opens_with_the_one_tls_provider() {
        // reqwest is built without a bundled crypto provider: opening an HTTPS store must
        // install ours rather than panic in the client builder.
        let settings = [
            ("AWS_ENDPOINT", "https://127.0.0.1:9"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
        ];
        let store = Store::open_with("s3://bucket/prefix", &settings).unwrap();
        assert_eq!(store.url(), "s3://bucket/prefix");
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
