//! The store's snapshots: LATEST, the pins, and manifests read and verified.

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt as _, UpdateVersion};

use crate::error::{FormatError, StoreError};
use crate::manifest::{Latest, Manifest, Pin, record_bytes};
use crate::row::sha256_hex;

use super::{
    LATEST, PINS_DIR, SNAPSHOTS_DIR, SnapshotListing, Store, VerifiedManifest, manifest_key, obj,
    pin_key,
};

impl Store {
    /// LATEST, or `None` when nothing was published yet.
    pub async fn latest(&self) -> Result<Option<Latest>, StoreError> {
        Ok(self.latest_versioned().await?.map(|(l, _)| l))
    }

    pub(super) async fn latest_versioned(
        &self,
    ) -> Result<Option<(Latest, UpdateVersion)>, StoreError> {
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
    pub(super) async fn earlier_snapshots(
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
}
