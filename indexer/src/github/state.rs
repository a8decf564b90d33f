//! The crawl cursor of one repository: `state/<owner>/<repo>/cursor.json` in the store.
//! Written only after the snapshot holding what was crawled is published.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hubdex_formats::Store;
use serde::{Deserialize, Serialize};

/// The cursor's format version.
const CURSOR_VERSION: u32 = 1;

/// An item that failed or was deferred: retried on the next run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub number: i64,
    pub updated_at: DateTime<Utc>,
    pub reason: String,
}

/// Where the last published crawl of a repository stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    pub version: u32,
    /// Every issue and PR updated before this was indexed; the next crawl asks for items
    /// updated at or after it (`since` is inclusive, so the boundary item is seen twice).
    pub watermark: Option<DateTime<Utc>>,
    pub pending: Vec<Pending>,
    /// ETag per request path, for conditional requests.
    pub etags: BTreeMap<String, String>,
    pub clone_url: Option<String>,
    pub html_url: Option<String>,
    pub has_wiki: bool,
}

fn key(repo: &str) -> String {
    format!("state/{repo}/cursor.json")
}

impl Cursor {
    /// Reads the cursor of `repo` (owner/name); a missing or unreadable one starts afresh.
    pub async fn load(store: &Store, repo: &str) -> Cursor {
        match store.get_opt(&key(repo)).await {
            Ok(Some(bytes)) => match serde_json::from_slice::<Cursor>(&bytes) {
                Ok(c) if c.version == CURSOR_VERSION => c,
                _ => {
                    tracing::warn!(
                        repo,
                        "crawl cursor unreadable or of another version: crawling from the start"
                    );
                    Cursor::default()
                }
            },
            _ => Cursor::default(),
        }
    }

    /// Writes the cursor (after the snapshot that holds its items is published).
    pub async fn save(&self, store: &Store, repo: &str) -> Result<(), hubdex_formats::StoreError> {
        let mut c = self.clone();
        c.version = CURSOR_VERSION;
        store.put(&key(repo), serde_json::to_vec_pretty(&c).expect("cursor serializes")).await
    }
}
