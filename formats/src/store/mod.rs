//! The store: any object_store URL, and the publish protocol of a snapshot.
//!
//! Publishing uploads segment files, then each segment.json, then the manifest (create-only),
//! then moves LATEST with a conditional update. Where a store cannot update conditionally:
//! a local directory serialises publishers with an OS file lock held across read-compare-write
//! of LATEST; any other store refuses unless the caller allows unsafe updates.
//!
//! One file per concern: blob I/O and keys here; [`snapshots`] (LATEST, pins, manifests read and
//! verified), [`publish`] (segments uploaded, manifests written, LATEST moved), [`cache`]
//! (segments fetched into the local cache and verified), [`merges`] (serving merges written or
//! found).

mod cache;
mod merges;
mod publish;
mod snapshots;

pub use cache::VERIFIED_MARKER;
pub use cache::file_stamp;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload};

use crate::error::{FormatError, StoreError};
use crate::manifest::Manifest;

/// Test hook: when `$HUBDEX_FAILPOINT` names this point, the process aborts here, as if it
/// were killed (reliability tests use it to stop a publish half-way). Unset, it does nothing.
pub fn failpoint(name: &str) {
    if std::env::var("HUBDEX_FAILPOINT").is_ok_and(|v| v == name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// The store both binaries use when `--store` and `$HUBDEX_STORE` say nothing (an empty
/// `$HUBDEX_STORE` says nothing: `hubdex_runtime::parse_args`).
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
    /// graph or text store is 95-344 MB at 400k commits; docs/performance.md). `on_bytes` hears each MiB as it is read. A multipart upload that fails is
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
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::sha256_hex;

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
