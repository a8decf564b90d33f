//! The serving merges a publish needs: each reused when the store holds it, else written.

use std::path::Path;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::error::{FormatError, StoreError};
use crate::manifest::{ManifestSegment, ModelIdentity};
use crate::merge::{MergeIndexes, MergeLimits, MergeProgress};
use crate::names::name_join;

use super::{SEGMENTS_DIR, Store, failpoint, obj};

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
