//! The staged build's records under `staging/<run>/`: what `hubdex-index crawl` leaves for
//! `embed` (per repository, its build segments as the crawl cut them: each one's rows, files
//! and edges, or the current segment it found again by its history span, listed in a
//! [`StagedCrawl`]) and what `embed` leaves for `publish` (a [`StagedSegment`] per
//! repository). `publish` deletes the run's prefix once the snapshot is out.

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::manifest::{
    HistorySpan, ManifestSegment, ModelIdentity, RECORD_VERSION, parse_record, record_bytes,
    record_version,
};
use crate::store::Store;

/// Where staged runs live: `staging/<run>/`.
pub const STAGING_DIR: &str = "staging";

/// A repository's name as one key or directory name: `owner__name`.
pub fn repo_slug(repo: &str) -> String {
    repo.replace('/', "__")
}

/// `staging/<run>`: everything a staged run wrote.
pub fn staging_prefix(run: &str) -> String {
    format!("{STAGING_DIR}/{run}")
}

/// `staging/<run>/crawl/<owner__name>`: a repository's staged.json and its build segments'
/// rows ([`staged_part_prefix`]).
pub fn staged_crawl_prefix(run: &str, repo: &str) -> String {
    format!("{STAGING_DIR}/{run}/crawl/{}", repo_slug(repo))
}

/// `staging/<run>/crawl/<owner__name>/part-<k>`: the rows.parquet (without vectors),
/// files.parquet and edges.parquet of the repository's build segment `k` (from 0).
pub fn staged_part_prefix(run: &str, repo: &str, k: usize) -> String {
    format!("{}/part-{k:05}", staged_crawl_prefix(run, repo))
}

/// One build segment of a staged crawl, as the crawl cut it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StagedPart {
    /// Its rows, files and edges are staged under [`staged_part_prefix`].
    Rows {
        /// Its history span, for the manifest.
        history: Option<HistorySpan>,
    },
    /// A build segment of the snapshot current when the crawl ran, found again by its history
    /// span: taken as it is, nothing staged.
    Reused(ManifestSegment),
}

/// `staging/<run>/segments/<owner__name>.json`: a repository's [`StagedSegment`].
pub fn staged_segment_key(run: &str, repo: &str) -> String {
    format!("{STAGING_DIR}/{run}/segments/{}.json", repo_slug(repo))
}

/// What `crawl` stages per repository (`…/crawl/<repo>/staged.json`). `C` is the crawler's
/// cursor, saved by `publish` once the snapshot holding what was crawled is out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedCrawl<C> {
    /// The record format ([`RECORD_VERSION`]).
    #[serde(default = "record_version")]
    pub format_version: u32,
    /// `owner/name`.
    pub repo: String,
    /// Where the crawl stopped; `None` for a source without a cursor (a local repository).
    pub cursor: Option<C>,
    /// The pending queue entries (their keys) this run covers: the repository's entries
    /// pending when it was crawled.
    pub queue: Vec<String>,
    /// The model the crawl cut for (a row's vector bytes count towards a build segment's share,
    /// and a reused segment holds that model's vectors): `embed` refuses another.
    pub model: ModelIdentity,
    /// The repository's build segments, in order (the `k` of [`staged_part_prefix`] is a
    /// place in this list).
    pub parts: Vec<StagedPart>,
}

/// What `embed` stages per repository for `publish`: its manifest entry and the embedding
/// figures the manifest's build stats add up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedSegment {
    /// The record format ([`RECORD_VERSION`]).
    #[serde(default = "record_version")]
    pub format_version: u32,
    /// The manifest entry's fields, at the top level (the file reads as a manifest entry).
    #[serde(flatten)]
    pub entry: ManifestSegment,
    /// The repository's other build segments, when the memory budget cut its rows into
    /// several (`entry` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<ManifestSegment>,
    /// Rows whose vectors were computed.
    pub embedded: u64,
    /// Rows whose vectors were reused.
    pub reused: u64,
    /// Seconds spent embedding.
    pub embed_seconds: f64,
}

impl Store {
    /// Writes a repository's [`StagedCrawl`] for `run`.
    pub async fn put_staged_crawl<C: Serialize>(
        &self,
        run: &str,
        staged: &StagedCrawl<C>,
    ) -> Result<(), StoreError> {
        let key = format!("{}/staged.json", staged_crawl_prefix(run, &staged.repo));
        self.put(&key, record_bytes(&key, staged)?).await
    }

    /// Every [`StagedCrawl`] of `run`, in key order.
    pub async fn staged_crawls<C: serde::de::DeserializeOwned>(
        &self,
        run: &str,
    ) -> Result<Vec<StagedCrawl<C>>, StoreError> {
        let mut out = Vec::new();
        for key in self.list(&format!("{}/crawl", staging_prefix(run))).await? {
            if key.ends_with("/staged.json") {
                let Some(bytes) = self.get_opt(&key).await? else { continue };
                let staged: StagedCrawl<C> = parse_record(&key, &bytes)?;
                for part in &staged.parts {
                    if let StagedPart::Reused(seg) = part {
                        seg.check_names(&key)?;
                    }
                }
                out.push(staged);
            }
        }
        Ok(out)
    }

    /// Writes a repository's [`StagedSegment`] for `run`.
    pub async fn put_staged_segment(
        &self,
        run: &str,
        repo: &str,
        staged: &StagedSegment,
    ) -> Result<(), StoreError> {
        let key = staged_segment_key(run, repo);
        self.put(&key, record_bytes(&key, staged)?).await
    }

    /// A repository's [`StagedSegment`] for `run`; `None` when `embed` has not staged it.
    pub async fn staged_segment(
        &self,
        run: &str,
        repo: &str,
    ) -> Result<Option<StagedSegment>, StoreError> {
        let key = staged_segment_key(run, repo);
        let Some(bytes) = self.get_opt(&key).await? else { return Ok(None) };
        let staged: StagedSegment = parse_record(&key, &bytes)?;
        for seg in std::iter::once(&staged.entry).chain(&staged.more) {
            seg.check_names(&key)?;
        }
        Ok(Some(staged))
    }
}

impl StagedSegment {
    /// A staged record of a repository's build segments (at least one), of the current record
    /// version.
    pub fn new(
        mut entries: Vec<ManifestSegment>,
        embedded: u64,
        reused: u64,
        embed_seconds: f64,
    ) -> Self {
        assert!(!entries.is_empty(), "a repository has at least one build segment");
        let more = entries.split_off(1);
        let entry = entries.remove(0);
        StagedSegment {
            format_version: RECORD_VERSION,
            entry,
            more,
            embedded,
            reused,
            embed_seconds,
        }
    }

    /// The repository's build segments, the first one first.
    pub fn entries(&self) -> impl Iterator<Item = &ManifestSegment> {
        std::iter::once(&self.entry).chain(&self.more)
    }
}

impl<C> StagedCrawl<C> {
    /// A staged crawl of the current record version.
    pub fn new(
        repo: String,
        cursor: Option<C>,
        queue: Vec<String>,
        model: ModelIdentity,
        parts: Vec<StagedPart>,
    ) -> Self {
        StagedCrawl { format_version: RECORD_VERSION, repo, cursor, queue, model, parts }
    }
}
