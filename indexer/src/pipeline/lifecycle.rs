//! The snapshot lifecycle on the indexer side: consuming the webhook delta queue, and
//! garbage-collecting snapshots and segments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context as _;
use chrono::{DateTime, Duration, Utc};
use hubdex_formats::{
    Manifest, SEGMENTS_DIR, SNAPSHOTS_DIR, STAGING_DIR, Store, StoreError, name_under,
};

use crate::pipeline::build::{BuildOptions, BuildReport, build};

/// What a delta run did.
#[derive(Debug, Default)]
pub struct DeltaReport {
    /// Entries consumed, per repository.
    pub repos: BTreeMap<String, usize>,
    /// Entries that could not be read (left pending, named in the log).
    pub unreadable: Vec<String>,
    /// The build that covered the queue, when anything was queued.
    pub build: Option<BuildReport>,
}

/// Reads the pending queue, rebuilds the repositories it names (incrementally, reusing every
/// unchanged vector and every untouched segment), publishes, and only then moves the entries
/// it covered to `queue/done/`. A crash before publishing leaves them pending; a rerun is safe.
pub async fn delta(template: &BuildOptions) -> anyhow::Result<DeltaReport> {
    let store = Store::open(&template.store)?;
    let mut report = DeltaReport::default();
    let mut covered: Vec<String> = Vec::new();
    for (key, entry) in store.pending().await? {
        match entry {
            Ok(e) => {
                *report.repos.entry(e.repo.clone()).or_default() += 1;
                covered.push(key);
            }
            Err(err) => {
                tracing::warn!(key, error = %err, "unreadable queue entry left pending");
                report.unreadable.push(key);
            }
        }
    }
    if report.repos.is_empty() {
        return Ok(report);
    }
    let mut opts = template.clone();
    opts.sources = report.repos.keys().map(PathBuf::from).collect();
    let built = build(&opts).await.context("rebuilding the queued repositories")?;
    for key in &covered {
        store.mark_done(key).await?;
    }
    report.build = Some(built);
    Ok(report)
}

/// What gc removed and kept.
#[derive(Debug, Default)]
pub struct GcReport {
    /// Snapshots kept (newest, current, pinned).
    pub kept_snapshots: Vec<String>,
    /// Snapshots deleted.
    pub deleted_snapshots: Vec<String>,
    /// Segments deleted (referenced by no kept snapshot, older than the grace period).
    pub deleted_segments: Vec<String>,
    /// Unreferenced segments left because they are younger than the grace period.
    pub young_segments: Vec<String>,
    /// Staged runs deleted: a sharded build's `staging/<run>/` that no write has touched
    /// for the grace period (its publish, which deletes it, never came: a job failed).
    pub deleted_staged_runs: Vec<String>,
    /// Staged runs left because they were written to within the grace period.
    pub young_staged_runs: Vec<String>,
}

/// Parses a duration like `24h`, `30m`, `7d`, `90s`.
pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    let (num, unit) =
        s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: i64 =
        num.parse().with_context(|| format!("{s:?} is not a duration like 24h, 30m, 7d or 90s"))?;
    Ok(match unit {
        "s" => Duration::seconds(n),
        "m" => Duration::minutes(n),
        "h" | "" => Duration::hours(n),
        "d" => Duration::days(n),
        _ => anyhow::bail!("{s:?} is not a duration like 24h, 30m, 7d or 90s"),
    })
}

/// Deletes snapshots beyond the newest `keep` (never the current one or a pinned one), then
/// every object under `segments/` that no remaining snapshot references and that is older
/// than `grace` (a build in progress uploads segments before its manifest exists), then every
/// staged run (`staging/<run>/`) whose newest object is older than `grace`: its publish
/// deletes it, so one left is a run whose crawl or embed job failed or was cancelled (and whose
/// staged segments, unreferenced, are deleted as above after the same period).
pub async fn gc(
    store: &Store,
    keep: usize,
    grace: Duration,
    now: DateTime<Utc>,
) -> anyhow::Result<GcReport> {
    let mut report = GcReport::default();
    let ids = store.snapshots().await?;
    let current = store.latest().await?.map(|l| l.snapshot);
    let pinned: BTreeSet<String> = store.pins().await?;
    let newest: BTreeSet<&String> = ids.iter().rev().take(keep).collect();
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    for id in &ids {
        let keep_it = newest.contains(id) || pinned.contains(id) || current.as_ref() == Some(id);
        if keep_it {
            // Checked where a hash is recorded, so a changed manifest cannot make gc delete
            // segments a kept snapshot needs; one nobody vouches for (never current, or older
            // than the record) is read as found: gc only keeps more for it.
            let m: Manifest = match store.verified_manifest(id).await {
                Ok(v) => v.manifest,
                Err(StoreError::UnverifiedSnapshot { .. }) => {
                    store.unverified_manifest(id).await?.0
                }
                Err(e) => return Err(e.into()),
            };
            referenced.extend(m.segments.iter().chain(&m.merged).map(|s| s.id.clone()));
            report.kept_snapshots.push(id.clone());
        } else {
            for key in store.list(&format!("{SNAPSHOTS_DIR}/{id}")).await? {
                store.delete(&key).await?;
            }
            report.deleted_snapshots.push(id.clone());
        }
    }
    for (id, objects) in objects_by_name(store, SEGMENTS_DIR).await? {
        if referenced.contains(&id) {
            continue;
        }
        if written_within(&objects, now, grace) {
            report.young_segments.push(id);
            continue;
        }
        // segment.json first: a segment without it is incomplete, never reused by a build.
        let mut keys: Vec<String> = objects.into_iter().map(|(k, _)| k).collect();
        keys.sort_by_key(|k| !k.ends_with("/segment.json"));
        for key in keys {
            store.delete(&key).await?;
        }
        report.deleted_segments.push(id);
    }
    for (run, objects) in objects_by_name(store, STAGING_DIR).await? {
        if written_within(&objects, now, grace) {
            report.young_staged_runs.push(run);
            continue;
        }
        for (key, _) in objects {
            store.delete(&key).await?;
        }
        report.deleted_staged_runs.push(run);
    }
    Ok(report)
}

/// The objects under `dir` (keys `dir/<name>/…`) with their times, by name: a segment's id, a
/// staged run.
async fn objects_by_name(
    store: &Store,
    dir: &str,
) -> Result<BTreeMap<String, Vec<(String, DateTime<Utc>)>>, StoreError> {
    let mut by_name: BTreeMap<String, Vec<(String, DateTime<Utc>)>> = BTreeMap::new();
    for (key, at) in store.list_with_times(dir).await? {
        if let Some(name) = name_under(dir, &key) {
            by_name.entry(name.to_string()).or_default().push((key, at));
        }
    }
    Ok(by_name)
}

/// Whether the newest of `objects` was written less than `grace` before `now`.
fn written_within(
    objects: &[(String, DateTime<Utc>)],
    now: DateTime<Utc>,
    grace: Duration,
) -> bool {
    let newest = objects.iter().map(|(_, at)| *at).max().unwrap_or(now);
    now - newest < grace
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("24h").unwrap(), Duration::hours(24));
        assert_eq!(parse_duration("7d").unwrap(), Duration::days(7));
        assert_eq!(parse_duration("0s").unwrap(), Duration::zero());
        assert!(parse_duration("soon").unwrap_err().to_string().contains("24h"));
        assert!(parse_duration("5w").is_err());
    }
}
