//! segment.json, manifest.json and LATEST: the typed, versioned metadata of a snapshot.

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use integer_encoding::VarInt as _;
use serde::{Deserialize, Serialize};

use crate::error::FormatError;

/// The file name of a segment's vector index.
pub const VECTORS_USEARCH: &str = "vectors.usearch";
/// The vector graph of a segment of format 7 and later ([`crate::hnsw`]).
pub const VECTORS_HNSW: &str = "vectors.hnsw";

/// The format version this build writes. Version 2 added the `symbol` field and the code-aware
/// analyzers to `text/`; diff and code rows use columns version 1 already had. Version 3 made
/// `text/` the serving index (filter and sort columns, stored rows), added the `files/` store
/// and merged segments. Version 4 writes vectors.usearch with i8 vectors instead of f16 (half
/// the bytes a server maps; segment.json's `vector_scalar` says which). Version 5 writes build
/// segments of rows only, each served through a merged segment (a group of one where alone).
/// Version 6 indexes the BM25 fields of `text/` without positions (nothing read them).
/// Version 7 writes a merged segment's graph as `vectors.hnsw` (walked on sign codes, rescored
/// on i8). Version 8 keeps rows.parquet's vectors as i8 ([`crate::quantize`]: what the graphs
/// hold) instead of float32. Version 9 lists every text file of a repository in files.parquet
/// (vendored and generated ones marked, binary and oversized ones listed without text) and
/// writes a merged segment's exact-search store, `grep/` ([`crate::GrepStore`]). Version 10
/// keeps each commit's added and removed lines in its build segment's changes.parquet and
/// writes a merged segment's history-grep store, `changes/` ([`crate::ChangeStore`]).
pub const FORMAT_VERSION: u32 = 10;

/// The format versions this build reads. Segments of versions 1 and 2 are upgraded to the
/// version-3 serving layout once, as they enter a server's cache; versions 3 and 4 share that
/// layout and differ only in the vectors' scalar; version 5 writes build segments without
/// serving files, every one served through a merged segment; version 6 differs from 5 only in
/// the positions `text/` no longer keeps; 7 in the merged segments' vector file; 8 in the
/// element type of rows.parquet's vectors (float32 ones are read quantized); 9 in the files it
/// lists and its `grep/` (a segment of 8 or older answers every tool but `grep`); 10 in its
/// changes (a segment of 9 or older answers every tool but `grep` of the history).
pub const READABLE_VERSIONS: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

/// Which model made a snapshot's vectors. Vectors are only comparable (and reusable) between
/// equal identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// A name for people: the model directory's name or the Hugging Face repo id.
    pub name: String,
    /// Length of the vectors it makes.
    pub dim: usize,
    /// Tokens it reads per text; longer texts are cut.
    pub max_tokens: usize,
    /// Always `"mean"` today: mean over the attention mask, then L2-normalised.
    pub pooling: String,
    /// sha256 of model.onnx: two copies of one model agree, a changed model does not.
    pub model_sha256: String,
}

/// One file of a segment, as segment.json and the manifest record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the segment directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// sha256 of the bytes, lowercase hex.
    pub sha256: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `segments/<id>/segment.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentMeta {
    /// The segment format this directory is written in ([`FORMAT_VERSION`] when written now).
    pub format_version: u32,
    /// The segment id: the repository and a hash of what went into the segment
    /// (docs/format.md, segment.json).
    pub id: String,
    /// `owner/name` of a build segment's repository; empty for a merged segment.
    pub repo: String,
    /// When the segment was written.
    pub created_at: DateTime<Utc>,
    /// How many rows it holds.
    pub rows: u64,
    /// Rows per type name.
    pub rows_per_type: BTreeMap<String, u64>,
    /// Which model made its vectors.
    pub model: ModelIdentity,
    /// Quantization of vectors.usearch: `f16` or `i8`.
    pub vector_scalar: String,
    /// How many rows also have a second, title-only vector in vectors.usearch (format 4;
    /// absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub second_vectors: u64,
    /// The oldest `updated_at` of the segment's rows.
    pub oldest_updated_at: Option<DateTime<Utc>>,
    /// The newest `updated_at` of the segment's rows.
    pub newest_updated_at: Option<DateTime<Utc>>,
    /// Every file of the segment except segment.json itself, sorted by path.
    pub files: Vec<FileEntry>,
    /// A merged segment (format 3): the build segments it serves, in row order. Empty for a
    /// build segment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// A merged segment: the repositories of its members (its `repo` is empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repos: Vec<String>,
    /// A build segment: sha256 of what it was built from before any vector was made (its rows
    /// without vectors, its files and edges, and the model): a rebuild whose input hashes the
    /// same reuses the segment without embedding or writing anything. Absent on segments
    /// written before it was recorded, and on merged segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_sha256: Option<String>,
}

impl SegmentMeta {
    /// The repositories whose rows the segment holds.
    pub fn repositories(&self) -> Vec<String> {
        if self.repos.is_empty() { vec![self.repo.clone()] } else { self.repos.clone() }
    }
}

/// A segment as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestSegment {
    /// The segment id (its directory under `segments/`).
    pub id: String,
    /// Its repository (empty for a merged segment).
    pub repo: String,
    /// How many rows it holds.
    pub rows: u64,
    /// Rows per type name.
    pub rows_per_type: BTreeMap<String, u64>,
    /// sha256 of the segment's segment.json: pins every file through its hashes.
    pub segment_json_sha256: String,
    /// Every file of the segment, with its size and sha256.
    pub files: Vec<FileEntry>,
    /// A merged segment: the build segments it serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// A build segment: sha256 of what it was built from before any vector was made (its rows
    /// without vectors, its files and edges, and the model): a rebuild whose input hashes the
    /// same reuses the segment without embedding or writing anything. Absent on segments
    /// written before it was recorded, and on merged segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_sha256: Option<String>,
    /// A build segment of a local history's rows alone: which rows of which commits it holds
    /// and a key of what they are made from, so a rebuild reuses it without reading those
    /// commits' diffs ([`HistorySpan`]). Absent on other segments and on segments written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistorySpan>,
}

/// Where a build segment of history rows lies in its repository's history, and what its rows
/// are made from. The history's rows are cut in a fixed order (author time, then SHA; a
/// commit's rows by id), so a segment is a run of that order: from row `first_row` of commit
/// `first` to row `last_row` of commit `last`, `commits` commits in all. A rebuild that finds
/// the same run starting where a build segment starts, with the same `key`, knows the cut
/// makes the same segment there and reuses it without asking git for those commits' diffs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySpan {
    /// The SHA of its first commit.
    pub first: String,
    /// Its first row's place among that commit's rows.
    pub first_row: u32,
    /// The SHA of its last commit.
    pub last: String,
    /// Its last row's place among that commit's rows.
    pub last_row: u32,
    /// Whether its last row is its last commit's last row.
    pub ends_commit: bool,
    /// How many commits it holds rows of.
    pub commits: u64,
    /// Its rows' bytes as the cut weighs them.
    pub bytes: u64,
    /// The pull request and issue numbers its commits' messages name: the crawl's threads of
    /// these numbers are part of what its commit rows are made from.
    /// Written as `thread_gaps` (see [`ThreadNumbers`]); a manifest written before holds the
    /// list `threads`, read as well.
    #[serde(
        rename = "thread_gaps",
        alias = "threads",
        default,
        skip_serializing_if = "ThreadNumbers::is_empty"
    )]
    pub threads: ThreadNumbers,
    /// sha256 of what its rows are made from, apart from the diffs (which a commit's SHA
    /// fixes): the indexer's row version and git's, the repository, its rules and the cut's
    /// share, each commit's SHA and what a merge lists, its edges, and those threads.
    pub key: String,
}

/// The thread numbers of a [`HistorySpan`]: sorted, distinct, and held as the gaps between
/// them, each a LEB128 varint (a byte for a gap under 128). A history whose every commit names
/// its pull request and closes an issue names two numbers a commit; as `Vec<i64>`s they are
/// 16 MB at a million commits (and more with their growth slack), held through the whole build
/// and cloned again while the publish planned its merges, and as a JSON list they made the
/// manifest of a 400k-commit history 14 MB (docs/performance.md).
/// In JSON it is those bytes in base64 (standard alphabet, padded); a list of numbers (what
/// manifests held before) reads as well. The bytes are shared: a clone of a manifest entry
/// (the publish's merge plan clones every build segment's) does not copy them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ThreadNumbers {
    gaps: std::sync::Arc<[u8]>,
    len: usize,
}

impl ThreadNumbers {
    /// How many numbers it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no number.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The numbers, in order.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        let mut at = 0;
        let mut last = 0i64;
        std::iter::from_fn(move || {
            let (gap, read) = u64::decode_var(self.gaps.get(at..)?)?;
            at += read;
            // Wrapping both ways: the first gap is the first number itself, negative or not.
            last = last.wrapping_add(gap as i64);
            Some(last)
        })
    }

    /// The numbers, in order, as a list.
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }
}

impl FromIterator<i64> for ThreadNumbers {
    /// The numbers sorted, without repeats.
    fn from_iter<I: IntoIterator<Item = i64>>(numbers: I) -> ThreadNumbers {
        let mut numbers: Vec<i64> = numbers.into_iter().collect();
        numbers.sort_unstable();
        numbers.dedup();
        let mut gaps = Vec::with_capacity(numbers.len());
        let mut last = 0i64;
        for &n in &numbers {
            let gap = n.wrapping_sub(last) as u64;
            let mut buf = [0u8; 10];
            let used = gap.encode_var(&mut buf);
            gaps.extend_from_slice(&buf[..used]);
            last = n;
        }
        ThreadNumbers { gaps: gaps.into(), len: numbers.len() }
    }
}

impl std::fmt::Debug for ThreadNumbers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for ThreadNumbers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.gaps))
    }
}

impl<'de> Deserialize<'de> for ThreadNumbers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ThreadNumbersVisitor)
    }
}

/// Reads [`ThreadNumbers`] from its base64 gaps or from a list of numbers.
struct ThreadNumbersVisitor;

impl<'de> serde::de::Visitor<'de> for ThreadNumbersVisitor {
    type Value = ThreadNumbers;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("base64 varint gaps between increasing thread numbers, or a list of numbers")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ThreadNumbers, E> {
        let gaps = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| E::custom(format!("thread_gaps is not base64: {e}")))?;
        let (mut at, mut last, mut numbers) = (0, 0i64, Vec::new());
        while at < gaps.len() {
            let (gap, read) = u64::decode_var(&gaps[at..])
                .ok_or_else(|| E::custom("thread_gaps ends inside a varint"))?;
            at += read;
            // The first gap is the first number itself (wrapping: it may be negative); each
            // next one must move past the last without leaving i64's range.
            last = match numbers.is_empty() {
                true => gap as i64,
                false => last.checked_add_unsigned(gap).filter(|_| gap > 0).ok_or_else(|| {
                    E::custom(format!("thread_gaps: a gap of {gap} after {last}"))
                })?,
            };
            numbers.push(last);
        }
        // Collected again, so that equal numbers hold equal bytes whatever varints were read.
        Ok(numbers.into_iter().collect())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<ThreadNumbers, A::Error> {
        let mut numbers = Vec::new();
        while let Some(n) = seq.next_element::<i64>()? {
            numbers.push(n);
        }
        Ok(numbers.into_iter().collect())
    }
}

/// `snapshots/<id>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The snapshot format ([`FORMAT_VERSION`] when written now).
    pub format_version: u32,
    /// The snapshot id (its directory under `snapshots/`).
    pub snapshot: String,
    /// When the snapshot was published.
    pub created_at: DateTime<Utc>,
    /// The snapshot LATEST named when this one was published.
    pub parent: Option<String>,
    /// Which model made every segment's vectors.
    pub model: ModelIdentity,
    /// How the build went: rows embedded and reused, seconds spent.
    #[serde(default)]
    pub build: BuildStats,
    /// The build segments: one per repository, each with its rows.parquet.
    pub segments: Vec<ManifestSegment>,
    /// Format 3: merged segments that serve small build segments together (docs/format.md,
    /// "Merged segments"). A server opens these instead of their members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<ManifestSegment>,
    /// The sha256 of every earlier snapshot's manifest.json still in the store when this one
    /// was published, by id: what a snapshot opened by id (a pinned query, `hubdex pull ID`) is
    /// checked against, as LATEST's `manifest_sha256` checks the current one. The publisher
    /// carries its parent's entries forward and adds its parent; a parent written before this
    /// field existed (`None`) has every manifest then in the store hashed as found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_snapshots: Option<BTreeMap<String, String>>,
}

/// What a build did, recorded in its manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildStats {
    /// Rows in the snapshot.
    pub rows: u64,
    /// Rows whose vectors were computed in this build.
    pub embedded: u64,
    /// Rows whose vectors were reused from an earlier segment (same text, same model).
    pub reused: u64,
    /// Wall-clock seconds of the whole build.
    pub seconds: f64,
    /// Seconds spent embedding.
    pub embed_seconds: f64,
}

/// The version of the small JSON records beside the manifest — `LATEST`, pins, queue entries
/// and the staged build files — this build writes and reads. A record written before records
/// carried `format_version` reads as version 1.
pub const RECORD_VERSION: u32 = 1;

pub(crate) fn record_version() -> u32 {
    RECORD_VERSION
}

/// A small JSON record's bytes as written (pretty JSON); `what` names it in an error.
pub(crate) fn record_bytes<T: Serialize>(what: &str, record: &T) -> Result<Vec<u8>, FormatError> {
    serde_json::to_vec_pretty(record).map_err(|e| FormatError::json(what, e))
}

/// Parses a small JSON record after checking its `format_version` (absent: 1).
pub(crate) fn parse_record<T: serde::de::DeserializeOwned>(
    what: &str,
    bytes: &[u8],
) -> Result<T, FormatError> {
    #[derive(Deserialize)]
    struct Version {
        #[serde(default = "record_version")]
        format_version: u32,
    }
    let v: Version = serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))?;
    if v.format_version != RECORD_VERSION {
        return Err(FormatError::UnsupportedVersion {
            what: what.to_string(),
            found: v.format_version,
            supported: RECORD_VERSION.to_string(),
        });
    }
    serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))
}

/// The `LATEST` object: which snapshot is current, and the hash of its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latest {
    /// The record format ([`RECORD_VERSION`]).
    #[serde(default = "record_version")]
    pub format_version: u32,
    /// The current snapshot's id.
    pub snapshot: String,
    /// sha256 of its manifest.json: a reader checks the manifest it fetches against it.
    pub manifest_sha256: String,
}

fn check_version(what: &str, found: u32) -> Result<(), FormatError> {
    if READABLE_VERSIONS.contains(&found) {
        Ok(())
    } else {
        let supported =
            READABLE_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
        Err(FormatError::UnsupportedVersion { what: what.to_string(), found, supported })
    }
}

/// The format version of a JSON artifact, read before the rest so an unknown version gets a
/// version error rather than a field error.
fn version_of(what: &str, bytes: &[u8]) -> Result<u32, FormatError> {
    #[derive(Deserialize)]
    struct Versioned {
        format_version: u32,
    }
    let v: Versioned = serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))?;
    Ok(v.format_version)
}

impl SegmentMeta {
    /// Parses and version-checks a segment.json, and checks every name in it
    /// ([`crate::check_name`]) and file path ([`crate::safe_join`]).
    pub fn parse(what: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_version(what, version_of(what, bytes)?)?;
        let meta: SegmentMeta =
            serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))?;
        check_segment_names(what, &meta.id, &meta.members, &meta.files)?;
        Ok(meta)
    }

    /// The canonical bytes written to segment.json.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("segment meta serializes");
        v.push(b'\n');
        v
    }
}

/// Whether a segment whose files are `files` has serving files of its own (`text/`,
/// `vectors.hnsw` or, before format 7, `vectors.usearch`): every merged segment, and a build
/// segment of format 1 to 4. A build segment of format 5 holds only its rows (rows.parquet,
/// files.parquet, edges.parquet) and is served through the merged segment that covers it, a
/// group of one where it is alone.
fn has_serving_files(files: &[FileEntry]) -> bool {
    (files.iter()).any(|f| f.path == VECTORS_USEARCH || f.path == VECTORS_HNSW)
}

/// Checks a segment's id and members ([`crate::check_name`]) and its files' paths
/// ([`crate::safe_join`]): all of them become paths under a cache or a pulled copy.
fn check_segment_names(
    what: &str,
    id: &str,
    members: &[String],
    files: &[FileEntry],
) -> Result<(), FormatError> {
    crate::check_name(what, id)?;
    for m in members {
        crate::check_name(what, m)?;
    }
    for f in files {
        crate::safe_join(std::path::Path::new(""), &f.path)?;
    }
    Ok(())
}

impl ManifestSegment {
    /// Checks its id, members and file paths as [`Manifest::parse`] does: for an entry read
    /// from elsewhere in a store (a staged record).
    pub fn check_names(&self, what: &str) -> Result<(), FormatError> {
        check_segment_names(what, &self.id, &self.members, &self.files)
    }

    /// Whether the segment has serving files of its own (a vector graph and a text index):
    /// every merged segment, and a build segment of format 1 to 4.
    pub fn has_serving_files(&self) -> bool {
        has_serving_files(&self.files)
    }
}

impl SegmentMeta {
    /// Whether the segment has serving files of its own (a vector graph and a text index):
    /// every merged segment, and a build segment of format 1 to 4.
    pub fn has_serving_files(&self) -> bool {
        has_serving_files(&self.files)
    }
}

impl Manifest {
    /// What a server opens to answer: every merged segment, and every build segment no merged
    /// segment covers.
    pub fn serving_units(&self) -> Vec<&ManifestSegment> {
        let covered: std::collections::HashSet<&str> =
            self.merged.iter().flat_map(|m| m.members.iter().map(String::as_str)).collect();
        self.merged
            .iter()
            .chain(self.segments.iter().filter(|s| !covered.contains(s.id.as_str())))
            .collect()
    }

    /// Parses and version-checks a manifest.json, and checks every name in it (snapshot and
    /// segment ids: [`crate::check_name`]) and file path ([`crate::safe_join`]) before any of
    /// them can become a path.
    pub fn parse(what: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_version(what, version_of(what, bytes)?)?;
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))?;
        crate::check_name(what, &m.snapshot)?;
        if let Some(parent) = &m.parent {
            crate::check_name(what, parent)?;
        }
        for id in m.earlier_snapshots.iter().flat_map(|e| e.keys()) {
            crate::check_name(what, id)?;
        }
        for seg in m.segments.iter().chain(&m.merged) {
            seg.check_names(what)?;
        }
        Ok(m)
    }

    /// The canonical bytes written to manifest.json.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("manifest serializes");
        v.push(b'\n');
        v
    }
}

impl Latest {
    /// LATEST naming `snapshot`, whose manifest.json hashes to `manifest_sha256`.
    pub fn new(snapshot: impl Into<String>, manifest_sha256: impl Into<String>) -> Latest {
        Latest {
            format_version: RECORD_VERSION,
            snapshot: snapshot.into(),
            manifest_sha256: manifest_sha256.into(),
        }
    }

    /// Parses and version-checks LATEST, and checks the snapshot id it names.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        let latest: Latest = parse_record("LATEST", bytes)?;
        crate::check_name("LATEST", &latest.snapshot)?;
        Ok(latest)
    }

    /// The bytes written to LATEST.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("latest serializes")
    }
}

/// The body of `pins/<snapshot id>`: `gc` keeps a pinned snapshot and every segment it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The record format ([`RECORD_VERSION`]).
    #[serde(default = "record_version")]
    pub format_version: u32,
    /// The pinned snapshot's id (also the object's name).
    pub snapshot: String,
    /// When it was pinned.
    pub pinned_at: DateTime<Utc>,
}

impl Pin {
    /// A pin of `snapshot` made now.
    pub fn now(snapshot: impl Into<String>) -> Pin {
        Pin { format_version: RECORD_VERSION, snapshot: snapshot.into(), pinned_at: Utc::now() }
    }

    /// Parses and version-checks a pin read from `key`, and checks the snapshot id it names.
    pub fn parse(key: &str, bytes: &[u8]) -> Result<Pin, FormatError> {
        let pin: Pin = parse_record(key, bytes)?;
        crate::check_name(key, &pin.snapshot)?;
        Ok(pin)
    }
}

/// A snapshot id that sorts by time: `20261129T180000Z-<hash8>`.
pub fn snapshot_id(at: DateTime<Utc>, seed: &[u8]) -> String {
    format!("{}-{}", at.format("%Y%m%dT%H%M%SZ"), &crate::row::sha256_hex(seed)[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn thread_numbers_hold_the_sorted_distinct_numbers_and_write_them_as_a_list(
            numbers in proptest::collection::vec(proptest::num::i64::ANY, 0..50),
        ) {
            let held: ThreadNumbers = numbers.iter().copied().collect();
            let mut expect = numbers.clone();
            expect.sort_unstable();
            expect.dedup();
            proptest::prop_assert_eq!(held.to_vec(), expect.clone());
            proptest::prop_assert_eq!(held.len(), expect.len());
            // Its JSON reads back as the same numbers, and so does the list manifests held.
            let json = serde_json::to_string(&held).unwrap();
            let back: ThreadNumbers = serde_json::from_str(&json).unwrap();
            proptest::prop_assert_eq!(&back, &held);
            let list: ThreadNumbers =
                serde_json::from_str(&serde_json::to_string(&numbers).unwrap()).unwrap();
            proptest::prop_assert_eq!(list, held);
        }
    }

    #[test]
    fn thread_numbers_take_a_byte_a_number_when_they_are_close() {
        let held: ThreadNumbers = (1000..3000).chain(5000..5100).collect();
        assert_eq!(held.len(), 2100);
        // 1000 itself takes two bytes, the gap of 2001 two; the rest one each.
        assert_eq!(held.gaps.len(), 2100 + 2);
        // A clone (the publish's merge plan clones every manifest entry) shares the bytes.
        assert!(std::sync::Arc::ptr_eq(&held.clone().gaps, &held.gaps));
        assert_eq!(format!("{:?}", ThreadNumbers::from_iter([3, 1, 2, 3])), "[1, 2, 3]");
        let span: HistorySpan = serde_json::from_str(
            r#"{"first":"a","first_row":0,"last":"b","last_row":1,"ends_commit":true,
                "commits":2,"bytes":10,"threads":[12,3],"key":"k"}"#,
        )
        .unwrap();
        assert_eq!(span.threads.to_vec(), [3, 12]);
        // Written as the gaps 3 and 9.
        let json = serde_json::to_value(&span).unwrap();
        assert_eq!(json["thread_gaps"], "Awk=");
        assert!(json.get("threads").is_none());
        let back: HistorySpan = serde_json::from_value(json).unwrap();
        assert_eq!(back, span);
        // 3, then a gap that would pass i64::MAX.
        let past_the_end = base64::engine::general_purpose::STANDARD
            .encode([&3u64.encode_var_vec()[..], &(i64::MAX as u64).encode_var_vec()].concat());
        for (bad, why) in [
            ("Aw", "not base64"),
            ("gA==", "ends inside a varint"),
            ("AwA=", "a gap of 0 after 3"),
            (past_the_end.as_str(), "a gap of 9223372036854775807 after 3"),
        ] {
            let json = format!(
                r#"{{"first":"a","first_row":0,"last":"b","last_row":1,"ends_commit":true,
                    "commits":2,"bytes":10,"thread_gaps":"{bad}","key":"k"}}"#
            );
            let err = serde_json::from_str::<HistorySpan>(&json).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let none: HistorySpan = serde_json::from_str(
            r#"{"first":"a","first_row":0,"last":"b","last_row":1,"ends_commit":true,
                "commits":2,"bytes":10,"key":"k"}"#,
        )
        .unwrap();
        assert!(none.threads.is_empty());
        assert!(!serde_json::to_string(&none).unwrap().contains("thread"));
    }

    #[test]
    fn an_unknown_version_is_refused_with_what_to_do() {
        let err = Manifest::parse("manifest.json", br#"{"format_version": 99, "whatever": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("format version 99"), "{err}");
        assert!(err.contains("reads versions 1, 2"), "{err}");
        assert!(err.contains("upgrade hubdex"), "{err}");
    }

    #[test]
    fn garbage_is_a_json_error_naming_the_artifact() {
        let err =
            SegmentMeta::parse("segments/x/segment.json", b"{not json").unwrap_err().to_string();
        assert!(err.starts_with("segments/x/segment.json is not valid"), "{err}");
    }

    #[test]
    fn a_record_without_a_version_reads_as_version_1_and_a_newer_one_is_refused() {
        let old = Latest::parse(br#"{"snapshot": "s", "manifest_sha256": "ab"}"#).unwrap();
        assert_eq!(old, Latest::new("s", "ab"));
        let written: serde_json::Value = serde_json::from_slice(&old.to_bytes()).unwrap();
        assert_eq!(written["format_version"], 1);
        let err =
            Latest::parse(br#"{"format_version": 2, "snapshot": "s", "manifest_sha256": "ab"}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("LATEST has format version 2"), "{err}");
        let pin = Pin::now("s");
        assert_eq!(Pin::parse("pins/s", &serde_json::to_vec(&pin).unwrap()).unwrap(), pin);
        let err = Pin::parse("pins/s", br#"{"format_version": 7, "snapshot": "s"}"#).unwrap_err();
        assert!(err.to_string().contains("pins/s has format version 7"), "{err}");
    }

    #[test]
    fn snapshot_ids_sort_by_time() {
        let a = snapshot_id(DateTime::from_timestamp(1_700_000_000, 0).unwrap(), b"x");
        let b = snapshot_id(DateTime::from_timestamp(1_700_000_001, 0).unwrap(), b"a");
        assert!(a < b);
        assert_eq!(a.len(), "20231114T221320Z-".len() + 8);
    }
}
