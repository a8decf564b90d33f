//! The delta queue: one object per webhook delivery under `queue/pending/`, moved to
//! `queue/done/` once a published snapshot covers it. The server's webhook writes entries,
//! `hubdex-index delta` and the staged `publish` consume them; this is their one shape.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{FormatError, StoreError};
use crate::manifest::{parse_record, record_bytes, record_version};
use crate::store::Store;

/// Where pending entries are.
pub const QUEUE_PENDING: &str = "queue/pending";
/// Where covered entries go.
pub const QUEUE_DONE: &str = "queue/done";

/// One queued delta request: a repository changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// The record format ([`RECORD_VERSION`](crate::RECORD_VERSION)).
    #[serde(default = "record_version")]
    pub format_version: u32,
    /// GitHub's delivery id (`X-GitHub-Delivery`): the entry's key, so a redelivery is one entry.
    pub delivery: String,
    /// `owner/name`.
    pub repo: String,
    /// The GitHub event (`issues`, `push`, …).
    pub event: String,
    /// The payload's `action`, when it has one.
    #[serde(default)]
    pub action: Option<String>,
    /// Issue and pull request numbers the event names.
    #[serde(default)]
    pub numbers: Vec<i64>,
    /// Git refs and release tags the event names.
    #[serde(default)]
    pub refs: Vec<String>,
    #[serde(default)]
    /// When the webhook delivery arrived.
    pub received_at: Option<DateTime<Utc>>,
}

impl QueueEntry {
    /// The key of this entry while pending.
    pub fn pending_key(&self) -> String {
        format!("{QUEUE_PENDING}/{}.json", self.delivery)
    }

    /// Parses an entry read from `key`, and checks the delivery id it names.
    pub fn parse(key: &str, bytes: &[u8]) -> Result<QueueEntry, FormatError> {
        let entry: QueueEntry = parse_record(key, bytes)?;
        crate::check_name(key, &entry.delivery)?;
        Ok(entry)
    }
}

impl Store {
    /// Queues an entry unless its delivery is already queued; `false` when it was.
    pub async fn enqueue(&self, entry: &QueueEntry) -> Result<bool, StoreError> {
        let key = entry.pending_key();
        self.put_create(&key, record_bytes(&key, entry)?).await
    }

    /// The pending entries, oldest key first: each key with its entry, or why it could not be
    /// read (an unreadable entry stays pending and is named, never dropped).
    pub async fn pending(
        &self,
    ) -> Result<Vec<(String, Result<QueueEntry, FormatError>)>, StoreError> {
        let mut out = Vec::new();
        for key in self.list(QUEUE_PENDING).await? {
            let Some(bytes) = self.get_opt(&key).await? else { continue };
            let entry = QueueEntry::parse(&key, &bytes);
            out.push((key, entry));
        }
        Ok(out)
    }

    /// Moves a pending entry to `queue/done/` (after a published snapshot covers it).
    pub async fn mark_done(&self, pending_key: &str) -> Result<(), StoreError> {
        let done = pending_key.replacen(QUEUE_PENDING, QUEUE_DONE, 1);
        self.rename(pending_key, &done).await
    }
}
