//! What each commit's diff adds and removes, line by line, for history grep (`grep` with
//! `in: "history"`, git's pickaxe `-G`): every changed line, not the first lines a diff row keeps
//! for embedding.
//!
//! A build segment of history rows holds `changes.parquet`, one row per commit whose diff
//! changes a line. A merged segment turns its members' rows into `changes/`: a grep store
//! ([`crate::grep`]) with one text per commit (its changed lines, in the diff's order, without
//! their `+` or `-`), and two tables that place each line and describe each commit:
//!
//! ```text
//! changes/texts.bin, files.bin, trigrams.bin, symbols.bin
//!                     a grep store, one text a commit (its path is the commit's SHA)
//! changes/commits.bin HXHC, layout, commit count, string-pool length (u32 each), then a
//!                     32-byte entry a commit in the store's order (8 u32: commit time in
//!                     seconds low and high, whether it is known, title as pool offset and
//!                     length, first run, run count, lines the cap hid), then the pool
//! changes/runs.bin    HXHR, layout, run count, string-pool length, then a 16-byte entry a
//!                     run of lines of one file and one side (4 u32: path as pool offset and
//!                     length, lines, 1 when added), then the pool (each path once)
//! ```
//!
//! A commit's lines are kept up to [`CHANGES_MAX_BYTES`]; the lines past it are counted
//! (`hidden_lines`), so an answer says when the cap hid some.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tantivy::directory::OwnedBytes;

use crate::error::FormatError;
use crate::grep::{
    GrepFile, GrepStore, GrepStoreWriter, HEADER, StringPool, table_layout, u32_at, write_table,
};
use crate::ngram::Query;
use crate::rows::{read_batches, utf8_column, zstd_writer};

/// The file name of a build segment's changed lines.
pub const CHANGES_PARQUET: &str = "changes.parquet";
/// The directory of a serving unit's history-grep store.
pub const CHANGES_DIR: &str = "changes";
/// Bytes of changed lines kept of one commit: past them, lines are counted, not kept (an
/// import commit of a vendored tree can change hundreds of megabytes).
pub const CHANGES_MAX_BYTES: usize = 1 << 20;

const COMMITS: &str = "commits.bin";
const RUNS: &str = "runs.bin";
const COMMIT_MAGIC: &[u8; 4] = b"HXHC";
const RUN_MAGIC: &[u8; 4] = b"HXHR";
const COMMIT_ENTRY: usize = 32;
const RUN_ENTRY: usize = 16;

/// The lines one commit's diff adds and removes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitChanges {
    /// The commit.
    pub commit_sha: String,
    /// When it was committed.
    pub committed_at: Option<DateTime<Utc>>,
    /// Its message's first line.
    pub title: String,
    /// The changed lines in the diff's order, each without its `+` or `-` and ending in `\n`.
    pub lines: String,
    /// Which file and side each line is of: runs of lines in order, summing to the lines.
    pub runs: Vec<ChangeRun>,
    /// Changed lines past [`CHANGES_MAX_BYTES`], not kept.
    pub hidden_lines: u64,
}

/// Consecutive changed lines of one file on one side of a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRun {
    /// The file's path (the new side's; renames are a removal and an addition).
    pub path: String,
    /// Added (`+`) or removed (`-`).
    pub added: bool,
    /// How many lines.
    pub lines: u32,
}

impl CommitChanges {
    /// Bytes it holds in memory, about.
    pub fn heap_bytes(&self) -> u64 {
        let runs: usize = self.runs.iter().map(|r| r.path.len() + 40).sum();
        (self.commit_sha.len() + self.title.len() + self.lines.len() + runs + 96) as u64
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("commit_sha", DataType::Utf8, false),
        Field::new(
            "committed_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("title", DataType::Utf8, false),
        Field::new("lines", DataType::Utf8, false),
        Field::new("runs", DataType::Utf8, false),
        Field::new("hidden_lines", DataType::Int64, false),
    ]))
}

/// Writes `changes` (in the caller's order) to `path`: `runs` as JSON
/// (`[{"path", "added", "lines"}]`).
pub fn write_changes(path: &Path, changes: &[CommitChanges]) -> Result<(), FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let mut w = zstd_writer(path, schema(), None)?;
    for chunk in changes.chunks(64) {
        let runs: Vec<String> =
            chunk.iter().map(|c| serde_json::to_string(&c.runs).expect("runs serialize")).collect();
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(
                    chunk.iter().map(|c| Some(c.commit_sha.as_str())).collect::<StringArray>(),
                ),
                Arc::new(
                    chunk
                        .iter()
                        .map(|c| c.committed_at.map(|t| t.timestamp_micros()))
                        .collect::<TimestampMicrosecondArray>()
                        .with_timezone("UTC"),
                ),
                Arc::new(chunk.iter().map(|c| Some(c.title.as_str())).collect::<StringArray>()),
                Arc::new(chunk.iter().map(|c| Some(c.lines.as_str())).collect::<StringArray>()),
                Arc::new(runs.iter().map(|r| Some(r.as_str())).collect::<StringArray>()),
                Arc::new(
                    chunk
                        .iter()
                        .map(|c| Some(i64::try_from(c.hidden_lines).unwrap_or(i64::MAX)))
                        .collect::<Int64Array>(),
                ),
            ],
        )?;
        w.write(&batch).map_err(pq)?;
    }
    w.close().map_err(pq)?;
    Ok(())
}

/// Reads changes.parquet; an absent file is no changes. Each commit's runs are checked to sum
/// to its lines.
pub fn read_changes(path: &Path) -> Result<Vec<CommitChanges>, FormatError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let bad = |detail: String| FormatError::Schema { what: path.display().to_string(), detail };
    let mut out = Vec::new();
    for batch in read_batches(path)? {
        let batch = batch?;
        let col = |name: &str| utf8_column(&batch, name, path);
        let (sha, title, lines, runs) =
            (col("commit_sha")?, col("title")?, col("lines")?, col("runs")?);
        let time = batch
            .column_by_name("committed_at")
            .and_then(|c| c.as_any().downcast_ref::<TimestampMicrosecondArray>())
            .ok_or_else(|| bad("column committed_at is missing or not a timestamp".into()))?;
        let hidden = batch
            .column_by_name("hidden_lines")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
            .ok_or_else(|| bad("column hidden_lines is missing or not int64".into()))?;
        for i in 0..batch.num_rows() {
            let runs: Vec<ChangeRun> = serde_json::from_str(runs.value(i))
                .map_err(|e| bad(format!("runs of {} do not parse: {e}", sha.value(i))))?;
            let text = lines.value(i);
            let counted: u64 = runs.iter().map(|r| u64::from(r.lines)).sum();
            let held = text.bytes().filter(|&b| b == b'\n').count() as u64;
            if counted != held {
                return Err(bad(format!(
                    "the runs of {} count {counted} lines, its text holds {held}",
                    sha.value(i)
                )));
            }
            out.push(CommitChanges {
                commit_sha: sha.value(i).to_string(),
                committed_at: time
                    .is_valid(i)
                    .then(|| DateTime::from_timestamp_micros(time.value(i)))
                    .flatten(),
                title: title.value(i).to_string(),
                lines: text.to_string(),
                runs,
                hidden_lines: u64::try_from(hidden.value(i)).unwrap_or(0),
            });
        }
    }
    Ok(out)
}

/// Writes a serving unit's `changes/` a commit at a time: the texts stream to disk through a
/// [`GrepStoreWriter`]; what is held is the tables (32 bytes a commit, 16 a run) and their pools.
pub struct ChangeStoreWriter {
    dir: PathBuf,
    grep: GrepStoreWriter,
    commits: Vec<u32>,
    titles: StringPool,
    runs: Vec<u32>,
    paths: StringPool,
    count: u32,
}

impl std::fmt::Debug for ChangeStoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStoreWriter")
            .field("dir", &self.dir)
            .field("commits", &self.count)
            .finish()
    }
}

impl ChangeStoreWriter {
    /// A new, empty store in `dir` (created).
    pub fn create(dir: &Path) -> Result<Self, FormatError> {
        Ok(ChangeStoreWriter {
            dir: dir.to_path_buf(),
            grep: GrepStoreWriter::create(dir)?,
            commits: Vec::new(),
            titles: StringPool::default(),
            runs: Vec::new(),
            paths: StringPool::default(),
            count: 0,
        })
    }

    fn full(&self, what: &str) -> FormatError {
        FormatError::Schema {
            what: self.dir.display().to_string(),
            detail: format!("its {what} pass 4 GiB"),
        }
    }

    /// Adds one commit of `repo`.
    pub fn add(&mut self, repo: &str, c: &CommitChanges) -> Result<(), FormatError> {
        let sha = c.commit_sha.as_str();
        self.grep.add_text(repo, sha, sha, None, c.lines.as_bytes(), 0)?;
        let title = self.titles.add(&c.title, false).ok_or_else(|| self.full("titles"))?;
        let first = (self.runs.len() / 4) as u32;
        for r in &c.runs {
            let path = self.paths.add(&r.path, true).ok_or_else(|| self.full("paths"))?;
            self.runs.extend_from_slice(&[path.0, path.1, r.lines, u32::from(r.added)]);
        }
        let time = c.committed_at.map_or(0, |t| t.timestamp());
        self.commits.extend_from_slice(&[
            time as u32,
            (time >> 32) as u32,
            u32::from(c.committed_at.is_some()),
            title.0,
            title.1,
            first,
            c.runs.len() as u32,
            u32::try_from(c.hidden_lines).unwrap_or(u32::MAX),
        ]);
        self.count += 1;
        Ok(())
    }

    /// Writes the tables and the grep store.
    pub fn finish(self) -> Result<(), FormatError> {
        let ChangeStoreWriter { dir, grep, commits, titles, runs, paths, count } = self;
        grep.finish()?;
        write_table(&dir.join(COMMITS), COMMIT_MAGIC, count, commits, &titles.bytes)?;
        let run_count = (runs.len() / 4) as u32;
        write_table(&dir.join(RUNS), RUN_MAGIC, run_count, runs, &paths.bytes)
    }
}

/// Writes the `changes/` store of `changes` (each with its repository) into `dir`, when there
/// are any.
pub(crate) fn write_change_store<'a>(
    dir: &Path,
    changes: impl Iterator<Item = (&'a str, &'a CommitChanges)>,
) -> Result<(), FormatError> {
    let mut w: Option<ChangeStoreWriter> = None;
    for (repo, c) in changes {
        let w = match &mut w {
            Some(w) => w,
            None => w.insert(ChangeStoreWriter::create(dir)?),
        };
        w.add(repo, c)?;
    }
    w.map_or(Ok(()), ChangeStoreWriter::finish)
}

/// One commit of a [`ChangeStore`], borrowed from its maps.
#[derive(Debug, Clone, Copy)]
pub struct ChangedCommit<'a> {
    /// Its number in the store.
    pub index: u32,
    /// `owner/name`.
    pub repo: &'a str,
    /// The commit.
    pub sha: &'a str,
    /// When it was committed, in seconds since 1970.
    pub committed_at: Option<i64>,
    /// Its message's first line.
    pub title: &'a str,
    /// Changed lines past the cap, not kept.
    pub hidden_lines: u64,
    /// Its changed lines, each ending in `\n`.
    pub lines: &'a [u8],
    runs: (u32, u32),
}

impl<'a> ChangedCommit<'a> {
    /// Its text as a grep store file, to verify with the searcher.
    pub fn as_file(&self) -> GrepFile<'a> {
        GrepFile {
            repo: self.repo,
            path: self.sha,
            commit_sha: self.sha,
            language: None,
            vendored: false,
            generated: false,
            skipped: None,
            text: self.lines,
        }
    }
}

/// An open, memory-mapped `changes/` store.
pub struct ChangeStore {
    grep: GrepStore,
    /// Commits per repository, and how many of them the cap hid lines of (counted at open).
    per_repo: std::collections::HashMap<String, (u64, u64)>,
    commits: OwnedBytes,
    runs: OwnedBytes,
    run_count: u32,
    dir: PathBuf,
}

impl std::fmt::Debug for ChangeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStore").field("dir", &self.dir).field("commits", &self.len()).finish()
    }
}

impl ChangeStore {
    /// Opens the store in `dir`, checking both tables' headers and every entry's ranges, and
    /// that each commit's runs count the lines its text holds.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let bad = |what: &str, detail: String| FormatError::Schema {
            what: dir.join(what).display().to_string(),
            detail,
        };
        let grep = GrepStore::open(dir)?;
        let commits = crate::hnsw::map(&dir.join(COMMITS))?;
        let runs = crate::hnsw::map(&dir.join(RUNS))?;
        let (count, titles_at) =
            table_layout(&commits, COMMIT_MAGIC, COMMIT_ENTRY).map_err(|d| bad(COMMITS, d))?;
        let (run_count, paths_at) =
            table_layout(&runs, RUN_MAGIC, RUN_ENTRY).map_err(|d| bad(RUNS, d))?;
        if count != grep.len() {
            return Err(bad(
                COMMITS,
                format!("{count} commits, the grep table lists {}", grep.len()),
            ));
        }
        let mut store = ChangeStore {
            grep,
            per_repo: Default::default(),
            commits,
            runs,
            run_count,
            dir: dir.to_path_buf(),
        };
        let (title_pool, path_pool) =
            (store.commits.len() - titles_at, store.runs.len() - paths_at);
        for r in 0..run_count {
            let e = store.run_entry(r);
            if e[0] as usize + e[1] as usize > path_pool {
                return Err(bad(RUNS, format!("run {r} points past its file")));
            }
        }
        let mut per_repo: std::collections::HashMap<String, (u64, u64)> = Default::default();
        for i in 0..count {
            let e = store.commit_entry(i);
            let fits = e[3] as usize + e[4] as usize <= title_pool
                && u64::from(e[5]) + u64::from(e[6]) <= u64::from(run_count);
            if !fits {
                return Err(bad(COMMITS, format!("commit {i} points past its file")));
            }
            let lines: u64 = (e[5]..e[5] + e[6]).map(|r| u64::from(store.run_entry(r)[2])).sum();
            let file = store.grep.file(i)?;
            let held = file.text.iter().filter(|&&b| b == b'\n').count() as u64;
            if lines != held {
                return Err(bad(
                    COMMITS,
                    format!("commit {i}'s runs count {lines} lines, its text holds {held}"),
                ));
            }
            let counts = per_repo.entry(file.repo.to_string()).or_default();
            counts.0 += 1;
            counts.1 += u64::from(e[7] > 0);
        }
        store.per_repo = per_repo;
        Ok(store)
    }

    fn commit_entry(&self, i: u32) -> [u32; 8] {
        let at = HEADER + i as usize * COMMIT_ENTRY;
        std::array::from_fn(|k| u32_at(&self.commits, at + 4 * k))
    }

    fn run_entry(&self, i: u32) -> [u32; 4] {
        let at = HEADER + i as usize * RUN_ENTRY;
        std::array::from_fn(|k| u32_at(&self.runs, at + 4 * k))
    }

    /// How many commits it holds.
    pub fn len(&self) -> u32 {
        self.grep.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.grep.is_empty()
    }

    /// Commit `i` (`i < len()`).
    pub fn commit(&self, i: u32) -> Result<ChangedCommit<'_>, FormatError> {
        let file = self.grep.file(i)?;
        let e = self.commit_entry(i);
        let count = self.commits_count();
        let pool = &self.commits[HEADER + count as usize * COMMIT_ENTRY..];
        let title =
            std::str::from_utf8(&pool[e[3] as usize..(e[3] + e[4]) as usize]).map_err(|_| {
                FormatError::Schema {
                    what: self.dir.join(COMMITS).display().to_string(),
                    detail: format!("commit {i}'s title is not UTF-8"),
                }
            })?;
        let time = i64::from(e[0]) | (i64::from(e[1]) << 32);
        Ok(ChangedCommit {
            index: i,
            repo: file.repo,
            sha: file.commit_sha,
            committed_at: (e[2] != 0).then_some(time),
            title,
            hidden_lines: u64::from(e[7]),
            lines: file.text,
            runs: (e[5], e[6]),
        })
    }

    fn commits_count(&self) -> u32 {
        u32_at(&self.commits, 8)
    }

    /// The file and side of line `n` (1-based) of `commit`'s text: its path and whether it was
    /// added.
    pub fn place(&self, commit: &ChangedCommit<'_>, n: u64) -> Result<(&str, bool), FormatError> {
        let pool = &self.runs[HEADER + self.run_count as usize * RUN_ENTRY..];
        let mut seen = 0u64;
        for r in commit.runs.0..commit.runs.0 + commit.runs.1 {
            let e = self.run_entry(r);
            seen += u64::from(e[2]);
            if n <= seen {
                let path = std::str::from_utf8(&pool[e[0] as usize..(e[0] + e[1]) as usize])
                    .map_err(|_| FormatError::Schema {
                        what: self.dir.join(RUNS).display().to_string(),
                        detail: format!("run {r}'s path is not UTF-8"),
                    })?;
                return Ok((path, e[3] != 0));
            }
        }
        Err(FormatError::Schema {
            what: self.dir.join(RUNS).display().to_string(),
            detail: format!("commit {} has no line {n}", commit.sha),
        })
    }

    /// The commits whose changed lines may match a pattern planned into `query`.
    pub fn candidates(&self, query: &Query) -> Result<Vec<u32>, FormatError> {
        self.grep.candidates(query)
    }

    /// Its repositories' commits counted: (repository, commits, commits the cap hid lines of).
    pub fn repo_counts(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.per_repo.iter().map(|(repo, (n, capped))| (repo.as_str(), *n, *capped))
    }

    /// Bytes of changed lines it holds.
    pub fn text_bytes(&self) -> u64 {
        self.grep.text_bytes()
    }

    /// Bytes of its tables and trigram index.
    pub fn index_bytes(&self) -> u64 {
        self.grep.index_bytes() + (self.commits.len() + self.runs.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(sha: &str, lines: &[(&str, bool, &str)]) -> CommitChanges {
        let mut c = CommitChanges {
            commit_sha: sha.to_string(),
            committed_at: DateTime::from_timestamp(1_700_000_000, 0),
            title: format!("commit {sha}"),
            ..CommitChanges::default()
        };
        for (path, added, text) in lines {
            c.lines.push_str(text);
            c.lines.push('\n');
            match c.runs.last_mut() {
                Some(r) if r.path == *path && r.added == *added => r.lines += 1,
                _ => c.runs.push(ChangeRun { path: path.to_string(), added: *added, lines: 1 }),
            }
        }
        c
    }

    #[test]
    fn changes_round_trip_through_parquet_and_the_store_places_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let changes = vec![
            commit("a1", &[("src/a.rs", false, "fn old() {}"), ("src/a.rs", true, "fn new() {}")]),
            commit("b2", &[("README.md", true, "# Title"), ("src/b.rs", true, "let x = 1;")]),
        ];
        let pq = dir.path().join(CHANGES_PARQUET);
        write_changes(&pq, &changes).unwrap();
        assert_eq!(read_changes(&pq).unwrap(), changes);
        let store_dir = dir.path().join(CHANGES_DIR);
        let mut w = ChangeStoreWriter::create(&store_dir).unwrap();
        for c in &changes {
            w.add("o/r", c).unwrap();
        }
        w.finish().unwrap();
        let store = ChangeStore::open(&store_dir).unwrap();
        assert_eq!(store.len(), 2);
        let b = store.commit(1).unwrap();
        assert_eq!((b.sha, b.title, b.repo), ("b2", "commit b2", "o/r"));
        assert_eq!(b.committed_at, Some(1_700_000_000));
        assert_eq!(store.place(&b, 1).unwrap(), ("README.md", true));
        assert_eq!(store.place(&b, 2).unwrap(), ("src/b.rs", true));
        assert!(store.place(&b, 3).is_err());
        let a = store.commit(0).unwrap();
        assert_eq!(store.place(&a, 1).unwrap(), ("src/a.rs", false));
        let q = crate::ngram::plan("fn new").unwrap();
        assert_eq!(store.candidates(&q).unwrap(), vec![0]);
    }

    #[test]
    fn runs_that_do_not_count_the_text_are_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = commit("a1", &[("a.rs", true, "x")]);
        c.runs[0].lines = 2;
        let pq = dir.path().join(CHANGES_PARQUET);
        write_changes(&pq, &[c.clone()]).unwrap();
        let err = read_changes(&pq).unwrap_err().to_string();
        assert!(err.contains("count 2 lines, its text holds 1"), "{err}");
        let store_dir = dir.path().join(CHANGES_DIR);
        let mut w = ChangeStoreWriter::create(&store_dir).unwrap();
        w.add("o/r", &c).unwrap();
        w.finish().unwrap();
        let err = ChangeStore::open(&store_dir).unwrap_err().to_string();
        assert!(err.contains("runs count 2 lines, its text holds 1"), "{err}");
    }
}
