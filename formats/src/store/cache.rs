//! Segments fetched from the store into the local cache, hashed as they are copied and
//! verified before the directory becomes visible.

use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use object_store::ObjectStoreExt as _;
use object_store::path::Path as ObjectPath;
use sha2::{Digest, Sha256};

use crate::error::{FormatError, StoreError};
use crate::manifest::{ManifestSegment, SegmentMeta};
use crate::names::{name_join, safe_join};
use crate::row::sha256_hex;
use crate::segment::SEGMENT_JSON;

use super::{SEGMENTS_DIR, Store, drop_cached_pages, obj, segment_key};

impl Store {
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

    pub(super) async fn copy_hashing(
        &self,
        key: &str,
        to: &Path,
    ) -> Result<(String, u64), StoreError> {
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
        // server (a container, a cgroup) is charged for them, and a first open copies the whole
        // snapshot. Syncing every few MiB keeps them clean, so they can be dropped under
        // pressure (docs/deploy.md, "Memory").
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
pub fn file_stamp(path: &Path) -> std::io::Result<String> {
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

/// The marker a cached segment directory gets once every file in it matched its sha256.
pub const VERIFIED_MARKER: &str = ".verified";
