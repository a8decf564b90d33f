//! segment.json, manifest.json and LATEST: the typed, versioned metadata of a snapshot.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FormatError;

/// The format version this build writes. Version 2 added the `symbol` field and the code-aware
/// analyzers to `text/`; diff and code rows use columns version 1 already had. Version 3 made
/// `text/` the serving index (filter and sort columns, stored rows), added the `files/` store
/// and merged segments.
pub const FORMAT_VERSION: u32 = 3;

/// The format versions this build reads. Segments of versions 1 and 2 are upgraded to the
/// version-3 serving layout once, as they enter a server's cache.
pub const READABLE_VERSIONS: &[u32] = &[1, 2, 3];

/// Which model made a snapshot's vectors. Vectors are only comparable (and reusable) between
/// equal identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelIdentity {
    /// A name for people: the model directory's name or the Hugging Face repo id.
    pub name: String,
    pub dim: usize,
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
    pub bytes: u64,
    pub sha256: String,
}

/// `segments/<id>/segment.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentMeta {
    pub format_version: u32,
    pub id: String,
    pub repo: String,
    pub created_at: DateTime<Utc>,
    pub rows: u64,
    /// Rows per type name.
    pub rows_per_type: BTreeMap<String, u64>,
    pub model: ModelIdentity,
    /// Quantization of vectors.usearch: `f16` or `i8`.
    pub vector_scalar: String,
    /// Oldest and newest `updated_at` of the segment's rows.
    pub oldest_updated_at: Option<DateTime<Utc>>,
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
    pub id: String,
    pub repo: String,
    pub rows: u64,
    pub rows_per_type: BTreeMap<String, u64>,
    /// sha256 of the segment's segment.json: pins every file through its hashes.
    pub segment_json_sha256: String,
    pub files: Vec<FileEntry>,
    /// A merged segment: the build segments it serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

/// `snapshots/<id>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub snapshot: String,
    pub created_at: DateTime<Utc>,
    pub parent: Option<String>,
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
}

/// What a build did, recorded in its manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildStats {
    pub rows: u64,
    pub embedded: u64,
    pub reused: u64,
    pub seconds: f64,
    pub embed_seconds: f64,
}

/// The `LATEST` object: which snapshot is current, and the hash of its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latest {
    pub snapshot: String,
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
    /// Parses and version-checks a segment.json.
    pub fn parse(what: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_version(what, version_of(what, bytes)?)?;
        serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))
    }

    /// The canonical bytes written to segment.json.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("segment meta serializes");
        v.push(b'\n');
        v
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

    /// Parses and version-checks a manifest.json.
    pub fn parse(what: &str, bytes: &[u8]) -> Result<Self, FormatError> {
        check_version(what, version_of(what, bytes)?)?;
        serde_json::from_slice(bytes).map_err(|e| FormatError::json(what, e))
    }

    /// The canonical bytes written to manifest.json.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).expect("manifest serializes");
        v.push(b'\n');
        v
    }

    /// Rows per repository and type over every segment.
    pub fn rows_per_repo_and_type(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for s in &self.segments {
            let e = out.entry(s.repo.clone()).or_default();
            for (t, n) in &s.rows_per_type {
                *e.entry(t.clone()).or_default() += n;
            }
        }
        out
    }
}

impl Latest {
    /// Parses LATEST.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        serde_json::from_slice(bytes).map_err(|e| FormatError::json("LATEST", e))
    }

    /// The bytes written to LATEST.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("latest serializes")
    }
}

/// A snapshot id that sorts by time: `20261129T180000Z-<hash8>`.
pub fn snapshot_id(at: DateTime<Utc>, seed: &[u8]) -> String {
    format!("{}-{}", at.format("%Y%m%dT%H%M%SZ"), &crate::row::sha256_hex(seed)[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_version_is_refused_with_what_to_do() {
        let err = Manifest::parse("manifest.json", br#"{"format_version": 9, "whatever": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("format version 9"), "{err}");
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
    fn snapshot_ids_sort_by_time() {
        let a = snapshot_id(DateTime::from_timestamp(1_700_000_000, 0).unwrap(), b"x");
        let b = snapshot_id(DateTime::from_timestamp(1_700_000_001, 0).unwrap(), b"a");
        assert!(a < b);
        assert_eq!(a.len(), "20231114T221320Z-".len() + 8);
    }
}
