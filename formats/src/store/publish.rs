//! Publishing: segments uploaded (data files, then segment.json), then the manifest
//! (create-only), then LATEST moved with a conditional update.

use std::path::Path;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};

use crate::error::{FormatError, StoreError};
use crate::manifest::{Latest, Manifest, ManifestSegment, SegmentMeta};
use crate::names::safe_join;
use crate::row::sha256_hex;
use crate::segment::{SEGMENT_JSON, read_segment_meta};

use super::{LATEST, LatestUpdate, Store, manifest_key, obj, segment_key};

impl Store {
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
}

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
