//! Merged segments: small build segments served together, so a query's cost follows the number
//! of serving units, not the number of repositories.
//!
//! The policy has two tiers. A build segment of at least [`MERGE_BELOW_ROWS`] rows is served as
//! it is. The smaller ones, in repository order, are cut into groups by content-defined
//! boundaries: after each repository a boundary falls with probability `rows / TARGET` (decided
//! by a hash of the repository name, not by chance), and always before a group would pass
//! [`MERGED_MAX_ROWS`]. So groups average [`MERGED_TARGET_ROWS`] rows, and a change to one
//! repository moves at most the boundaries next to it: it rewrites its own group and leaves the
//! others' ids, and so their files, as they were (as Lucene's tiered merge policy and Quickwit's
//! split merging bound the cost of a change).

use std::path::{Path, PathBuf};

use crate::error::FormatError;
use crate::files::{FILES_PARQUET, read_files};
use crate::manifest::{FORMAT_VERSION, ManifestSegment, ModelIdentity, SegmentMeta};
use crate::row::sha256_hex;
use crate::rows::read_rows;
use crate::segment::{IndexInputs, ROWS_PARQUET, finish_meta, read_segment_meta, write_indexes};
use crate::serving::Analyzers;

/// Build segments with fewer rows than this are served merged.
pub const MERGE_BELOW_ROWS: u64 = 32_768;
/// The average size of a merged segment.
pub const MERGED_TARGET_ROWS: u64 = 65_536;
/// No merged segment holds more rows than this.
pub const MERGED_MAX_ROWS: u64 = 131_072;

/// Whether a boundary falls after a repository of `rows` rows: true with probability
/// `rows / MERGED_TARGET_ROWS`, decided by the repository's name.
fn boundary_after(repo: &str, rows: u64) -> bool {
    let h = sha256_hex(repo.as_bytes());
    let x = u64::from_str_radix(&h[..12], 16).unwrap_or(0) % (1 << 48);
    (x as u128) * (MERGED_TARGET_ROWS as u128) < (rows as u128) << 48
}

/// Groups the build segments to merge: only groups of two or more; a segment in no group is
/// served as it is. `segments` may come in any order.
pub fn plan_merges(segments: &[ManifestSegment]) -> Vec<Vec<ManifestSegment>> {
    let mut small: Vec<&ManifestSegment> =
        segments.iter().filter(|s| s.members.is_empty() && s.rows < MERGE_BELOW_ROWS).collect();
    small.sort_by(|a, b| a.repo.cmp(&b.repo).then(a.id.cmp(&b.id)));
    let mut groups: Vec<Vec<ManifestSegment>> = Vec::new();
    let mut group: Vec<ManifestSegment> = Vec::new();
    let mut rows = 0u64;
    for s in small {
        if !group.is_empty() && rows + s.rows > MERGED_MAX_ROWS {
            groups.push(std::mem::take(&mut group));
            rows = 0;
        }
        group.push(s.clone());
        rows += s.rows;
        if boundary_after(&s.repo, s.rows) {
            groups.push(std::mem::take(&mut group));
            rows = 0;
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups.retain(|g| g.len() > 1);
    groups
}

/// The id of the merged segment of these build segments (in plan order) and this format.
pub fn merged_id(members: &[ManifestSegment]) -> String {
    let ids: Vec<&str> = members.iter().map(|m| m.id.as_str()).collect();
    let seed = format!("{FORMAT_VERSION}\nmerged\n{}", ids.join("\n"));
    format!("merged-{}", &sha256_hex(seed.as_bytes())[..16])
}

/// Writes the merged segment of the build segments in `member_dirs` (verified local copies,
/// in plan order; only their rows.parquet and files.parquet are read) into the empty directory
/// `dir`. Rows keep their members' order, so the merged segment answers with the same rows.
pub fn write_merged_segment(
    dir: &Path,
    id: &str,
    member_dirs: &[PathBuf],
    model: &ModelIdentity,
) -> Result<SegmentMeta, FormatError> {
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    let mut rows = Vec::new();
    let mut files = Vec::new();
    let mut members = Vec::new();
    let mut repos = Vec::new();
    for m in member_dirs {
        let meta = read_segment_meta(m)?;
        if meta.model.model_sha256 != model.model_sha256 {
            return Err(FormatError::Schema {
                what: m.display().to_string(),
                detail: "was built with another model than the snapshot".into(),
            });
        }
        rows.extend(read_rows(&m.join(ROWS_PARQUET), true)?);
        files.extend(
            read_files(&m.join(FILES_PARQUET))?.into_iter().map(|f| (meta.repo.clone(), f)),
        );
        members.push(meta.id);
        repos.push(meta.repo);
    }
    let input = IndexInputs {
        rows: rows.iter().collect(),
        files: files.iter().map(|(r, f)| (r.as_str(), f)).collect(),
        analyzers: Analyzers::current(),
    };
    write_indexes(dir, &input, model.dim)?;
    finish_meta(dir, id.to_string(), String::new(), &input.rows, model.clone(), members, repos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(repo: &str, rows: u64) -> ManifestSegment {
        ManifestSegment {
            id: format!("{repo}-id"),
            repo: repo.into(),
            rows,
            rows_per_type: Default::default(),
            segment_json_sha256: String::new(),
            files: Vec::new(),
            members: Vec::new(),
        }
    }

    #[test]
    fn small_segments_group_near_the_target_and_big_ones_stay_alone() {
        let mut all: Vec<ManifestSegment> =
            (0..500).map(|i| seg(&format!("org/repo{i:03}"), 2_000)).collect();
        all.push(seg("org/big", 50_000));
        let groups = plan_merges(&all);
        assert!(groups.iter().all(|g| g.iter().all(|s| s.repo != "org/big")));
        let merged: u64 = groups.iter().map(|g| g.len() as u64).sum();
        assert!(merged >= 490, "{merged} of 500 small segments merged");
        for g in &groups {
            assert!(g.iter().map(|s| s.rows).sum::<u64>() <= MERGED_MAX_ROWS);
        }
        let n = groups.len();
        assert!((8..=30).contains(&n), "{n} groups for 1M rows");
    }

    #[test]
    fn a_change_to_one_repository_rewrites_only_its_group() {
        let all: Vec<ManifestSegment> =
            (0..300).map(|i| seg(&format!("org/repo{i:03}"), 1_500)).collect();
        let before: Vec<String> = plan_merges(&all).iter().map(|g| merged_id(g)).collect();
        let mut changed = all.clone();
        changed[150].id = "org/repo150-new".into();
        changed[150].rows = 1_600;
        let after: Vec<String> = plan_merges(&changed).iter().map(|g| merged_id(g)).collect();
        let gone = before.iter().filter(|id| !after.contains(id)).count();
        assert_eq!(gone, 1, "one group rewritten: {before:?} -> {after:?}");
    }
}
