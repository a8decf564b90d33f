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
    /// The issue or pull request number.
    pub number: i64,
    /// Its `updated_at` when it failed.
    pub updated_at: DateTime<Utc>,
    /// Why it failed.
    pub reason: String,
}

/// Where the last published crawl of a repository stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    /// The cursor format's version.
    pub version: u32,
    /// Every issue and PR updated before this was indexed; the next crawl asks for items
    /// updated at or after it (`since` is inclusive, so the boundary item is seen twice).
    pub watermark: Option<DateTime<Utc>>,
    /// Items that failed and are retried next run (the watermark waits for them).
    pub pending: Vec<Pending>,
    /// ETag per request path, for conditional requests.
    pub etags: BTreeMap<String, String>,
    /// The clone URL the crawl found.
    pub clone_url: Option<String>,
    /// The repository's web address.
    pub html_url: Option<String>,
    /// Whether GitHub says the repository has a wiki.
    pub has_wiki: bool,
}

fn key(repo: &str) -> String {
    format!("state/{repo}/cursor.json")
}

impl Cursor {
    /// Reads the cursor of `repo` (owner/name). A missing one, or one of another version or
    /// unreadable, starts afresh (a full crawl); a store that cannot be read is an error, not
    /// "no cursor" — that would silently recrawl everything.
    pub async fn load(store: &Store, repo: &str) -> Result<Cursor, hubdex_formats::StoreError> {
        let Some(bytes) = store.get_opt(&key(repo)).await? else { return Ok(Cursor::default()) };
        match serde_json::from_slice::<Cursor>(&bytes) {
            Ok(c) if c.version == CURSOR_VERSION => Ok(c),
            _ => {
                tracing::warn!(
                    repo,
                    "crawl cursor unreadable or of another version: crawling from the start"
                );
                Ok(Cursor::default())
            }
        }
    }

    /// Writes the cursor (after the snapshot that holds its items is published).
    pub async fn save(&self, store: &Store, repo: &str) -> Result<(), hubdex_formats::StoreError> {
        let mut c = self.clone();
        c.version = CURSOR_VERSION;
        store.put(&key(repo), serde_json::to_vec_pretty(&c).expect("cursor serializes")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_cursor_starts_afresh_and_an_unreadable_store_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let fresh = Cursor::load(&store, "acme/widgets").await.unwrap();
        assert_eq!(fresh.version, Cursor::default().version);
        assert!(fresh.etags.is_empty());
        // A cursor saved then read back.
        let c = Cursor { has_wiki: true, ..Cursor::default() };
        c.save(&store, "acme/widgets").await.unwrap();
        assert!(Cursor::load(&store, "acme/widgets").await.unwrap().has_wiki);
        // The cursor's key is a link to itself: the store cannot read it (ELOOP).
        let gadgets = dir.path().join("state/acme/gadgets");
        std::fs::create_dir_all(&gadgets).unwrap();
        std::os::unix::fs::symlink(gadgets.join("cursor.json"), gadgets.join("cursor.json"))
            .unwrap();
        let err = Cursor::load(&store, "acme/gadgets").await.unwrap_err();
        assert!(err.to_string().contains("cursor.json"), "{err}");
    }
}
