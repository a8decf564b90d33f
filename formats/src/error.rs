//! Errors of the formats crate, one enum per concern.

use std::path::PathBuf;

/// Reading or writing a segment, a manifest or the rows of a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// An artifact names a format version this build cannot read.
    #[error(
        "{what} has format version {found}, this hubdex reads versions {supported}: \
         rebuild the snapshot with this hubdex or upgrade hubdex"
    )]
    UnsupportedVersion {
        /// The artifact, e.g. `manifest.json of snapshot …`.
        what: String,
        /// The version it names.
        found: u32,
        /// The versions this build reads, e.g. `1 to 3`.
        supported: String,
    },
    /// A file's bytes do not hash to the sha256 its segment.json records.
    #[error(
        "{path}: sha256 is {actual}, segment.json says {expected}: the file is corrupt or was changed"
    )]
    ChecksumMismatch {
        /// The file, relative to its segment.
        path: String,
        /// The sha256 segment.json records.
        expected: String,
        /// The sha256 of the bytes read.
        actual: String,
    },
    /// A file a segment.json or manifest names is absent.
    #[error("{path}: missing from the segment")]
    MissingFile {
        /// The file that is absent.
        path: String,
    },
    /// A JSON artifact could not be parsed.
    #[error("{what} is not valid: {source}")]
    Json {
        /// The artifact, e.g. `segment.json of …`.
        what: String,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The rows of a segment do not fit the row schema.
    #[error("{what}: {detail}")]
    Schema {
        /// The artifact that does not fit.
        what: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Parquet or Arrow failed reading or writing rows.
    #[error("Parquet file {path}: {source}")]
    Parquet {
        /// The Parquet file.
        path: PathBuf,
        /// What the Parquet reader or writer said.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Arrow failed assembling or reading a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// The tantivy index could not be written or opened.
    #[error("text index at {path}: {source}")]
    Tantivy {
        /// The index directory.
        path: PathBuf,
        /// What tantivy said.
        #[source]
        source: tantivy::TantivyError,
    },
    /// The usearch index could not be written or opened.
    #[error("vector index at {path}: {detail}")]
    Vectors {
        /// The vector file.
        path: PathBuf,
        /// What is wrong with it, or what usearch said.
        detail: String,
    },
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

impl FormatError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    pub(crate) fn json(what: impl Into<String>, source: serde_json::Error) -> Self {
        Self::Json { what: what.into(), source }
    }
}

/// Talking to the object store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store URL could not be understood.
    #[error("store URL {url:?} is not valid: {detail}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The store holds no LATEST object: nothing was ever published there.
    #[error("store {url} holds no snapshot yet: run `hubdex-index build` against it first")]
    NoSnapshot {
        /// The store's URL.
        url: String,
    },
    /// A named snapshot does not exist.
    #[error("snapshot {id} is not in store {url}: `hubdex snapshots` lists the ones that are")]
    UnknownSnapshot {
        /// The snapshot id asked for.
        id: String,
        /// The store's URL.
        url: String,
    },
    /// A snapshot's manifest.json does not hash to what LATEST or the current snapshot records
    /// for it: it changed after it was published, and is not read.
    #[error(
        "snapshot {id} is refused: its manifest.json has sha256 {actual}, but {vouched_by} \
         records {expected}; it was changed after it was published"
    )]
    TamperedSnapshot {
        /// The snapshot id.
        id: String,
        /// Who records the expected hash: `LATEST` or `snapshot <current id>`.
        vouched_by: String,
        /// The sha256 recorded when it was published.
        expected: String,
        /// The sha256 of the bytes read now.
        actual: String,
    },
    /// A snapshot named by id that no record the store trusts vouches for.
    #[error("snapshot {id} cannot be verified and is not opened: {why}")]
    UnverifiedSnapshot {
        /// The snapshot id.
        id: String,
        /// Why no hash is recorded for it, and what to do.
        why: String,
    },
    /// Another publisher moved LATEST between our read and our write.
    #[error(
        "LATEST moved while publishing {snapshot} (another publisher won): \
         nothing was lost, rerun the build to publish on top of the new snapshot"
    )]
    Conflict {
        /// The snapshot that was not published.
        snapshot: String,
    },
    /// The store cannot do conditional updates and the caller did not allow unsafe updates.
    #[error(
        "store {url} cannot update LATEST conditionally, so two publishers could overwrite each \
         other: publish from one place only and pass --allow-unsafe-latest"
    )]
    NoConditionalUpdate {
        /// The store's URL.
        url: String,
    },
    /// An object store operation failed.
    #[error("store {key}: {source}")]
    Object {
        /// The object's key in the store.
        key: String,
        /// What the object store said.
        #[source]
        source: object_store::Error,
    },
    /// An artifact read from the store was not valid.
    #[error(transparent)]
    Format(#[from] FormatError),
}
