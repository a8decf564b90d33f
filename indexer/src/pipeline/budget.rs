//! A build's memory budget, and the build segments it cuts a large repository into.
//!
//! A repository whose rows hold more than a build segment's share of the budget
//! ([`MemoryBudget::segment_bytes`]) is written as several build segments. Each is embedded,
//! written and uploaded before the next one's vectors are made, so the vectors and the writer's
//! buffers a build holds at once are one segment's, not the repository's.
//!
//! The cut is content-defined, as the merge policy's ([`hubdex_formats::plan_merges`]) is:
//! rows go in stream order (the history by time, then GitHub's threads by time, then files by
//! path), and a boundary falls after a row with probability `its bytes / the segment share`,
//! decided by a hash of the row's id, not by chance. So the same rows always give the same
//! segments (the same ids: an unchanged rebuild uploads nothing), and a change moves only the
//! boundaries next to it: a new commit lands in the history's last segment, a changed file in
//! the segment holding that path, and the other segments keep their ids.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use hubdex_formats::{
    CommitChanges, Edge, FileText, HistorySpan, ManifestSegment, MergeLimits, Row, RowType,
    Skipped, ThreadNumbers, boundary_after,
};

use crate::graph::edges::{CommitEdges, RepoEdges};
use crate::graph::history::History;
use crate::local::ThreadLinks;
use crate::pipeline::spans::{RowAt, SpanKeys};

/// The default `--memory-budget`: fits a 7 GB GitHub-hosted runner with room to spare.
pub const DEFAULT_MEMORY_BUDGET: u64 = 3 << 30;

/// The smallest budget a build accepts: below it, the model and the index writers alone do
/// not fit.
pub(crate) const MIN_MEMORY_BUDGET: u64 = 64 << 20;

/// How many build segments' worth of row data (as [`row_bytes`] counts it) the budget is cut
/// into. Up to three build segments are in memory at once (one being cut, one waiting, one
/// being embedded and written; at most [`SHARES_IN_FLIGHT`] shares of row data together), and
/// one being written costs a few times its row data (the texts to embed, the Parquet writer's
/// buffers for 1,024 rows at a time): a sixteenth per segment and at most two sixteenths in
/// one keeps a build within its budget (`hubdex-bench build` measures it).
const SEGMENT_SHARE: u64 = 16;

/// No build segment holds more than this many times the share: the cut falls there whatever
/// the hash says (a run of rows that long without a boundary has probability e^-2; where it
/// falls then depends on the rows before it, until the next boundary of the hash's own).
const SEGMENT_MAX_SHARES: u64 = 2;

/// How many shares of row data the build segments in memory may hold together: the one being
/// cut and those cut but not yet written (waiting, or being embedded and written). Without it
/// the three build segments in memory at once could hold up to six shares (three of the
/// largest in a row), and a long history draws such runs where a short one does not
/// ([`InFlight`]). A long history's second pass reaches this cap where a short one may not, so
/// it sets how far the pass's peak grows with the history: at two shares a 400k-commit
/// history's peak is within 1.09× a 10k-commit one's.
const SHARES_IN_FLIGHT: u64 = 2;

/// How many shares of the budget a serving merge in turn may hold for its vector graph
/// ([`MergeLimits::in_turn_bytes`]): usearch's graph where it fits them, whose merge (its graph,
/// then its text index under it) holds less than the history's second pass does at its peak; a
/// larger unit's graph is built by hubdex's own writer.
const MERGE_GRAPH_SHARES: u64 = 3;

/// What a build holds beside its serving merges when it publishes (the runtime, the model's
/// session, the manifest): the budget less this is what merges running at once may hold.
const MERGE_RESERVE: u64 = 128 << 20;

/// What a build may hold in memory, in bytes (`hubdex-index build --memory-budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget(u64);

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget(DEFAULT_MEMORY_BUDGET)
    }
}

impl MemoryBudget {
    /// A budget of `bytes`; an error names the smallest one allowed.
    pub fn new(bytes: u64) -> Result<Self, String> {
        if bytes < MIN_MEMORY_BUDGET {
            return Err(format!(
                "a memory budget of {} is too small: at least {} (the model and the index \
                 writers need that much)",
                human(bytes),
                human(MIN_MEMORY_BUDGET)
            ));
        }
        Ok(MemoryBudget(bytes))
    }

    /// A budget of `bytes` without the floor [`MemoryBudget::new`] keeps: tests and
    /// `hubdex-bench` cut small repositories into several build segments with it.
    pub fn unchecked(bytes: u64) -> Self {
        MemoryBudget(bytes.max(1))
    }

    /// The budget in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// How many serving merges a publish may run at once: one per core, as their estimated
    /// memory ([`hubdex_formats::merge_memory_estimate`]) fits the budget less
    /// `MERGE_RESERVE` (128 MiB); a merge that would not fit writes its text index and vector
    /// graph in turn rather than side by side. In turn a unit's graph may hold three shares of
    /// the budget (`MERGE_GRAPH_SHARES`, 48 MiB under 256 MiB): usearch's where it fits,
    /// hubdex's own writer's (a third the bytes) where not, the text index's heap following it
    /// ([`hubdex_formats::graph_builder`]). So a publish holds less than the history's second
    /// pass does under the same budget, whatever the history.
    pub fn merges(self) -> MergeLimits {
        let limits = MergeLimits::within(self.0.saturating_sub(MERGE_RESERVE));
        let graph = self.segment_bytes() * MERGE_GRAPH_SHARES;
        MergeLimits { in_turn_bytes: limits.in_turn_bytes.min(graph), ..limits }
    }

    /// The row data (texts and vectors, as `row_bytes` counts it) one build segment holds
    /// on average.
    pub fn segment_bytes(self) -> u64 {
        self.0 / SEGMENT_SHARE
    }

    /// The row data the build segments being cut, waiting and being written may hold together
    /// (`InFlight`).
    pub fn in_flight_bytes(self) -> u64 {
        self.segment_bytes() * SHARES_IN_FLIGHT
    }
}

impl std::fmt::Display for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&human(self.0))
    }
}

impl std::str::FromStr for MemoryBudget {
    type Err = String;

    /// A size ([`parse_size`]) of at least `MIN_MEMORY_BUDGET` (64 MiB).
    fn from_str(s: &str) -> Result<Self, String> {
        MemoryBudget::new(parse_size(s)?)
    }
}

/// `3GiB`, `512MiB`, `2G`, `800M`, `1500000000` (bytes) in bytes; units are powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{s:?} is not a size: unknown unit {other:?} (use B, KiB, MiB, GiB, e.g. 3GiB)"
            ));
        }
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size: give a number and a unit, e.g. 3GiB"))?;
    if !n.is_finite() || n <= 0.0 {
        return Err(format!("{s:?} is not a size: it must be positive"));
    }
    Ok((n * scale as f64) as u64)
}

/// `bytes` for people: `3.0 GiB`, `384 MiB`.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// What a row weighs in a build's memory: its texts, its vectors (`dim` bytes each: kept as
/// i8 from the moment the model makes them, format 8) and a fixed part for the other fields.
pub(crate) fn row_bytes(row: &Row, dim: usize) -> u64 {
    let vectors = if row.title.is_some() { 2 } else { 1 };
    (row.body.len() + row.title.as_deref().map_or(0, str::len) + dim * vectors + 256) as u64
}

/// Where a row goes in a repository's stream: the history (commits and their diffs) by time,
/// then GitHub's threads and releases by time, then files (docs, wiki, code) by path. The
/// history's rows come from git in this order already ([`crate::local::CommitRows`]); the
/// others are sorted by it.
pub(crate) fn stream_key(r: &Row) -> (u8, Option<i64>, &str, i32, &str) {
    let group = match r.kind() {
        RowType::Commit | RowType::Diff => 0,
        RowType::Doc | RowType::WikiDoc | RowType::Code => 2,
        _ => 1,
    };
    let time = if group == 2 { None } else { r.created_at.map(|t| t.timestamp()) };
    (group, time, r.entity.as_str(), r.chunk_index, r.id.as_str())
}

/// One build segment's content.
#[derive(Debug, Default)]
pub(crate) struct Part {
    pub(crate) rows: Vec<Row>,
    pub(crate) files: Vec<FileText>,
    pub(crate) edges: Vec<Edge>,
    /// The added and removed lines of the commits whose first row it holds (history grep).
    pub(crate) changes: Vec<CommitChanges>,
    /// A build segment of the current snapshot the cut found again by its history span
    /// ([`Cutter::try_reuse`]): its rows were not read, and it is taken as it is.
    pub(crate) reused: Option<ManifestSegment>,
    /// Where a segment of history rows alone lies in the history, to record in the manifest
    /// ([`crate::pipeline::spans`]).
    pub(crate) history: Option<HistorySpan>,
    /// Its row data as [`row_bytes`] counts it (none when reused: its rows were not read).
    pub(crate) bytes: u64,
    /// Its place in the row data in flight, given back when the part is dropped ([`InFlight`]).
    pub(crate) handed: Option<Handed>,
}

/// The row data of build segments cut and not yet written, against a cap: the cut waits
/// ([`InFlight::wait_for_room`]) while what it holds and what it has handed on would pass the
/// cap, until the writer drops a part it was handed ([`Handed`]). So the build segments in
/// memory hold at most the cap (and one commit's rows) however large the ones in a row are:
/// the cut of a long history meets more runs of large segments than a short one's does.
///
/// The cut never waits when nothing is handed on (a part larger than the cap still goes), so
/// it cannot wait for a writer that has nothing to write.
#[derive(Debug)]
pub(crate) struct InFlight {
    cap: u64,
    handed: Mutex<u64>,
    given_back: Condvar,
}

/// A part's row data while it is handed on: given back to its [`InFlight`] when dropped.
#[derive(Debug)]
pub(crate) struct Handed {
    gate: Arc<InFlight>,
    bytes: u64,
}

impl InFlight {
    /// Row data in flight of at most `cap` bytes.
    pub(crate) fn new(cap: u64) -> Arc<InFlight> {
        Arc::new(InFlight { cap, handed: Mutex::new(0), given_back: Condvar::new() })
    }

    /// Blocks while `holding` (the row data the cut holds) and what was handed on pass the cap
    /// and something handed on is still held. Returns whether it waited.
    pub(crate) fn wait_for_room(&self, holding: u64) -> bool {
        let mut handed = self.handed.lock().unwrap_or_else(|e| e.into_inner());
        let mut waited = false;
        while *handed > 0 && *handed + holding > self.cap {
            waited = true;
            handed = self.given_back.wait(handed).unwrap_or_else(|e| e.into_inner());
        }
        waited
    }

    /// Hands `part` on: its row data counts as in flight until it is dropped.
    pub(crate) fn hand_on(self: &Arc<Self>, mut part: Part) -> Part {
        *self.handed.lock().unwrap_or_else(|e| e.into_inner()) += part.bytes;
        part.handed = Some(Handed { gate: Arc::clone(self), bytes: part.bytes });
        part
    }

    /// The row data handed on and not yet given back.
    #[cfg(test)]
    fn handed(&self) -> u64 {
        *self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Handed {
    fn drop(&mut self) {
        let mut handed = self.gate.handed.lock().unwrap_or_else(|e| e.into_inner());
        *handed = handed.saturating_sub(self.bytes);
        self.gate.given_back.notify_all();
    }
}

/// A part while the cutter fills it: its edges keep their index in the repository's list,
/// so each part lists them in that order whatever order their entities came in.
#[derive(Default)]
struct Filling {
    rows: Vec<Row>,
    files: Vec<FileText>,
    edges: Vec<(usize, Edge)>,
    changes: Vec<CommitChanges>,
    bytes: u64,
    /// The places of its first and last history rows.
    first: Option<RowAt>,
    last: Option<RowAt>,
    /// Whether it holds rows that are not the history's.
    other: bool,
    reused: Option<ManifestSegment>,
    history: Option<HistorySpan>,
}

impl Filling {
    fn into_part(mut self) -> Part {
        self.edges.sort_by_key(|(i, _)| *i);
        let bytes = self.held();
        Part {
            rows: self.rows,
            files: self.files,
            edges: self.edges.into_iter().map(|(_, e)| e).collect(),
            changes: self.changes,
            reused: self.reused,
            history: self.history,
            bytes,
            handed: None,
        }
    }

    /// The row data it holds: none when it is a build segment reused (its rows were not read).
    fn held(&self) -> u64 {
        if self.reused.is_some() { 0 } else { self.bytes }
    }

    fn append(&mut self, other: Filling) {
        self.rows.extend(other.rows);
        self.files.extend(other.files);
        self.edges.extend(other.edges);
        self.changes.extend(other.changes);
        self.bytes += other.bytes;
    }
}

/// Cuts a stream of rows, in stream order ([`stream_key`]), into build segments of about
/// `share` bytes each (as [`row_bytes`] counts them with vectors of `dim` bytes), handing each
/// out as soon as it is known to be one: all of them as one segment when they fit in `share`.
/// A file goes with the segment holding the first row of its entity (`file/<path>`), an edge
/// with the segment holding the first row of its source entity; the others with the last
/// segment.
///
/// Only the rows of the segment being filled (and, until the rows pass `share`, the ones
/// before it) are held: the cut of a whole repository never is. A commit's own edges (those
/// its message states, its `shipped_in` one) are read back or made when its first row comes
/// ([`CommitEdges`]).
pub(crate) struct Cutter<'h> {
    share: u64,
    dim: usize,
    /// Files by the entity of their rows, until that entity's first row comes.
    files: HashMap<String, Vec<FileText>>,
    /// Bytes of text of files without rows held so far: they wait for the last build segment,
    /// so past a share they are kept without their text ([`Skipped::OverBudget`]).
    rowless_bytes: u64,
    /// Edges (with their place in the repository's order) by source entity, likewise.
    edges: HashMap<String, Vec<(usize, Edge)>>,
    /// The commits' own edges, read back or made from `history` as their commits' rows come.
    commit_edges: CommitEdges,
    history: &'h History,
    open: Filling,
    /// Closed parts not handed out yet: all of them while the rows fit in one share, then the
    /// one closed last until a row follows it (were the stream to end there, it would be the
    /// last part, which takes the files and edges no row claimed).
    closed: Vec<Filling>,
    /// Parts ready to be handed out.
    ready: Vec<Part>,
    total: u64,
    /// The keys of history spans, when the cut records them ([`Self::with_spans`]).
    spans: Option<&'h SpanKeys<'h>>,
    /// The current snapshot's build segments of history rows, by their first commit and row.
    previous: HashMap<(String, u32), ManifestSegment>,
    reused_any: bool,
}

impl<'h> Cutter<'h> {
    /// A cutter of rows whose files and edges are `files` and `edges` (of `history`'s commits).
    pub(crate) fn new(
        files: Vec<FileText>,
        edges: RepoEdges,
        history: &'h History,
        share: u64,
        dim: usize,
    ) -> Cutter<'h> {
        let mut by_entity: HashMap<String, Vec<FileText>> = HashMap::new();
        for f in files {
            by_entity.entry(format!("file/{}", f.path)).or_default().push(f);
        }
        let mut by_source: HashMap<String, Vec<(usize, Edge)>> = HashMap::new();
        for (i, e) in edges.listed {
            by_source.entry(e.source.clone()).or_default().push((i, e));
        }
        // Most sources have one edge, and a Vec grown by one push has room for four.
        by_source.values_mut().for_each(Vec::shrink_to_fit);
        Cutter {
            share,
            dim,
            files: by_entity,
            rowless_bytes: 0,
            edges: by_source,
            commit_edges: edges.commits,
            history,
            open: Filling::default(),
            closed: Vec::new(),
            ready: Vec::new(),
            total: 0,
            spans: None,
            previous: HashMap::new(),
            reused_any: false,
        }
    }

    /// Records each build segment of history rows alone with its span ([`crate::pipeline::spans`]), and
    /// lets [`Self::try_reuse`] take the `previous` build segments whose spans it meets again.
    pub(crate) fn with_spans(
        mut self,
        spans: &'h SpanKeys<'h>,
        previous: &[ManifestSegment],
    ) -> Cutter<'h> {
        self.spans = Some(spans);
        self.previous = previous
            .iter()
            .filter_map(|s| {
                let h = s.history.as_ref()?;
                Some(((h.first.clone(), h.first_row), s.clone()))
            })
            .collect();
        self
    }

    /// Files whose rows come next: they go in the build segment of their entity's first row
    /// (the last build segment's, with the other files no row claimed, if none comes). Files
    /// with no row (`rowless`: vendored, generated, of no known language) are held with their
    /// text up to a share of the budget in all, and without it past that.
    pub(crate) fn expect_files(&mut self, files: Vec<FileText>, rowless: bool) {
        for mut f in files {
            if rowless && f.skipped.is_none() {
                let bytes = f.content.len() as u64;
                if self.rowless_bytes + bytes > self.share {
                    f.content = String::new();
                    f.symbols = Vec::new();
                    f.skipped = Some(Skipped::OverBudget);
                } else {
                    self.rowless_bytes += bytes;
                }
            }
            self.files.entry(format!("file/{}", f.path)).or_default().push(f);
        }
    }

    /// Takes the next row of the stream: one that is not the history's.
    pub(crate) fn push(&mut self, row: Row) {
        self.push_at(row, None, None);
    }

    /// Takes the next row of the stream: a history row, at `at`; with its commit's changed
    /// lines when it is the commit's first row (they go in the build segment that row does,
    /// and weigh in its row data).
    pub(crate) fn push_history(&mut self, row: Row, at: RowAt, changes: Option<CommitChanges>) {
        self.push_at(row, Some(at), changes);
    }

    /// The changed lines of a commit with no row kept: in the build segment being filled.
    pub(crate) fn push_changes(&mut self, changes: CommitChanges) {
        let b = changes.heap_bytes();
        self.open.changes.push(changes);
        self.open.bytes += b;
        self.total += b;
    }

    /// The row data of the rows it holds: the segment being filled and the parts not taken yet.
    pub(crate) fn holding(&self) -> u64 {
        self.open.held()
            + self.closed.iter().map(Filling::held).sum::<u64>()
            + self.ready.iter().map(|p| p.bytes).sum::<u64>()
    }

    /// Whether the segment being filled is empty: the next row starts a build segment.
    pub(crate) fn at_boundary(&self) -> bool {
        self.open.rows.is_empty()
    }

    fn push_at(&mut self, row: Row, at: Option<RowAt>, changes: Option<CommitChanges>) {
        let b = row_bytes(&row, self.dim) + changes.as_ref().map_or(0, CommitChanges::heap_bytes);
        if !self.open.rows.is_empty() && self.open.bytes + b > self.share * SEGMENT_MAX_SHARES {
            self.close();
        }
        if let Some(files) = self.files.remove(row.entity.as_str()) {
            self.open.files.extend(files);
        }
        if let Some(edges) = self.edges.remove(row.entity.as_str()) {
            self.open.edges.extend(edges);
        }
        // A history row's commit is known by its place; another row's by its entity.
        let edges = match at {
            Some(at) => {
                self.commit_edges.take_commit(self.history, self.history.in_cut_order(at.commit))
            }
            None => self.commit_edges.take(self.history, &row.entity),
        };
        self.open.edges.extend(edges);
        let boundary = boundary_after(&row.id, b, self.share);
        match at {
            Some(at) => {
                self.open.first.get_or_insert(at);
                self.open.last = Some(at);
            }
            None => self.open.other = true,
        }
        self.open.rows.push(row);
        self.open.changes.extend(changes);
        self.open.bytes += b;
        self.total += b;
        if self.total > self.share {
            // More than one segment's share, and a row after every closed part: none of them
            // is the last (which takes what no row claimed), so each is final and goes out
            // now rather than when the open one closes (one segment's rows less held while
            // the embedding is busy).
            self.ready.extend(self.closed.drain(..).map(Filling::into_part));
        }
        if boundary {
            self.close();
        }
    }

    fn close(&mut self) {
        let mut f = std::mem::take(&mut self.open);
        if let (Some(spans), Some(first), Some(last), false) =
            (self.spans, f.first, f.last, f.other)
        {
            let mut edges: Vec<&(usize, Edge)> = f.edges.iter().collect();
            edges.sort_by_key(|(i, _)| *i);
            let threads: ThreadNumbers =
                f.rows.iter().flat_map(ThreadLinks::numbers_named).collect();
            f.history =
                Some(spans.span(first, last, f.bytes, edges.into_iter().map(|(_, e)| e), threads));
        }
        self.closed.push(f);
    }

    /// At a boundary (the segment being filled is empty) before the history row at `at`: when
    /// a build segment of the current snapshot starts there and its span's key is what these
    /// rows are made from now, takes it as it is (its rows are not read: [`crate::pipeline::spans`]) and
    /// returns where the rows after it start. `None` when nothing is reused (read the rows).
    ///
    /// A segment is taken only where the cut would make it: right after a boundary, with the
    /// same rows (the key), not the stream's last (a row follows it: the rest of its last
    /// commit, or the next commit's commit row), and not within the first share of the stream
    /// (which, were the stream to end within it, would be one segment).
    pub(crate) fn try_reuse(&mut self, at: (usize, u32)) -> Option<(usize, u32)> {
        let spans = self.spans?;
        if !self.at_boundary() || at.0 >= spans.len() || !spans.every_commit_has_a_row() {
            return None;
        }
        let entry = self.previous.get(&(spans.sha(at.0).to_string(), at.1))?;
        let span = entry.history.as_ref()?;
        let last = at.0.checked_add(usize::try_from(span.commits).ok()?.checked_sub(1)?)?;
        let follows = if span.ends_commit { last + 1 < spans.len() } else { last < spans.len() };
        if !follows || *spans.sha(last) != *span.last || self.total + span.bytes <= self.share {
            return None;
        }
        let first = RowAt { commit: at.0, row: at.1, last: false };
        let end = RowAt { commit: last, row: span.last_row, last: span.ends_commit };
        let edges = self.span_edges(spans, first, last);
        let key = spans.key(first, end, edges.iter().map(|(_, e)| e), &span.threads);
        if key != span.key {
            return None;
        }
        let entry = entry.clone();
        let bytes = span.bytes;
        // Its edges are in it: the rows that follow do not take them.
        for c in first.commits_headed_to(last) {
            self.edges.remove(&format!("commit/{}", spans.sha(c)));
            self.commit_edges.take_commit(self.history, spans.commit(c));
        }
        self.total += bytes;
        if self.total > self.share {
            // A part follows each closed one: none of them is the last.
            self.ready.extend(self.closed.drain(..).map(Filling::into_part));
        }
        self.reused_any = true;
        let history = entry.history.clone();
        self.closed.push(Filling { reused: Some(entry), history, bytes, ..Filling::default() });
        Some(if end.last { (last + 1, 0) } else { (last, end.row + 1) })
    }

    /// Whether [`Self::try_reuse`] took a build segment.
    pub(crate) fn reused_any(&self) -> bool {
        self.reused_any
    }

    /// The edges the build segment of the history rows from `first` to the commit at `last`
    /// would hold, in its order: those of each commit whose first row it holds.
    fn span_edges(&self, spans: &SpanKeys, first: RowAt, last: usize) -> Vec<(usize, Edge)> {
        let mut edges = Vec::new();
        for c in first.commits_headed_to(last) {
            let entity = format!("commit/{}", spans.sha(c));
            if let Some(listed) = self.edges.get(&entity) {
                edges.extend(listed.iter().cloned());
            }
            edges.extend(self.commit_edges.peek(self.history, spans.commit(c)));
        }
        edges.sort_by_key(|(i, _)| *i);
        edges
    }

    /// The build segments known so far, in order.
    pub(crate) fn take_ready(&mut self) -> Vec<Part> {
        std::mem::take(&mut self.ready)
    }

    /// The rest of the build segments, once the stream has ended: the last one takes the files
    /// and edges no row claimed.
    pub(crate) fn finish(mut self) -> Vec<Part> {
        if !self.open.rows.is_empty() {
            self.close();
        }
        let mut last = Filling::default();
        if self.total > self.share {
            last = self.closed.pop().unwrap_or_default();
            self.ready.extend(self.closed.drain(..).map(Filling::into_part));
        }
        if last.reused.is_some() {
            // try_reuse takes no segment that ends the stream; were one to, it stays as it
            // is and what no row claimed goes in a segment of its own.
            self.ready.push(std::mem::take(&mut last).into_part());
        }
        // The last segment takes what no row claimed: it is not found again by its span.
        last.history = None;
        // Within one share: everything is one segment.
        for f in self.closed.drain(..) {
            last.append(f);
        }
        last.files.extend(self.files.into_values().flatten());
        last.edges.extend(self.edges.into_values().flatten());
        last.edges.extend(self.commit_edges.take_rest(self.history));
        let mut out = self.ready;
        out.push(last.into_part());
        out
    }
}

/// Cuts a repository's rows into build segments (as [`Cutter`] does, with the rows sorted
/// into stream order first): what the unit tests compare the cutter against.
#[cfg(test)]
pub(crate) fn cut(
    mut rows: Vec<Row>,
    files: Vec<FileText>,
    edges: Vec<Edge>,
    share: u64,
    dim: usize,
) -> Vec<Part> {
    rows.sort_by(|a, b| stream_key(a).cmp(&stream_key(b)));
    let no_history = History::default();
    let mut cutter = Cutter::new(files, RepoEdges::of(edges), &no_history, share, dim);
    let mut parts = Vec::new();
    for r in rows {
        cutter.push(r);
        parts.extend(cutter.take_ready());
    }
    parts.extend(cutter.finish());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn commit(n: usize) -> Row {
        let mut r = Row::new(RowType::Commit, "o/r", &format!("commit/{n:040x}"), 0);
        r.created_at = chrono::Utc.timestamp_opt(1_600_000_000 + n as i64 * 60, 0).single();
        r.set_body(&format!("commit number {n} {}", "x".repeat(500)));
        r
    }

    fn ids(parts: &[Part]) -> Vec<Vec<String>> {
        parts.iter().map(|p| p.rows.iter().map(|r| r.id.clone()).collect()).collect()
    }

    #[test]
    fn budgets_parse_with_units_and_name_what_is_wrong() {
        assert_eq!("3GiB".parse::<MemoryBudget>().unwrap().bytes(), 3 << 30);
        assert_eq!("512 MiB".parse::<MemoryBudget>().unwrap().bytes(), 512 << 20);
        assert_eq!("1.5G".parse::<MemoryBudget>().unwrap().bytes(), 3 << 29);
        assert_eq!("100000000".parse::<MemoryBudget>().unwrap().bytes(), 100_000_000);
        assert!("3 parsecs".parse::<MemoryBudget>().unwrap_err().contains("unknown unit"));
        assert!("GiB".parse::<MemoryBudget>().unwrap_err().contains("give a number"));
        assert!("1MiB".parse::<MemoryBudget>().unwrap_err().contains("at least 64 MiB"));
        assert!("-5GiB".parse::<MemoryBudget>().is_err());
    }

    /// Under a small budget a large unit's merge in turn builds its graph on hubdex's own
    /// writer, so the publish holds about what the second pass does; under the default budget
    /// every unit's graph is usearch's.
    #[test]
    fn a_small_budget_builds_a_large_units_graph_on_the_writer_and_the_default_on_usearch() {
        use hubdex_formats::{GraphBuilder, MERGED_MAX_ROWS, MergeIndexes, graph_builder};
        let small = MemoryBudget::new(256 << 20).unwrap().merges();
        assert_eq!(small.in_turn_bytes, 48 << 20, "three shares of the budget");
        // The largest units of the 10k- and 400k-commit histories built under 256 MiB: 28,727
        // rows (with as many second vectors at most), and 111,717 rows with 31,967.
        let in_turn = |limits: MergeLimits, vectors| {
            graph_builder(vectors, MergeIndexes::InTurn, limits.in_turn_bytes)
        };
        assert_eq!(in_turn(small, 2 * 28_727), GraphBuilder::Usearch);
        assert_eq!(in_turn(small, 143_684), GraphBuilder::HnswWriter);
        let default = MemoryBudget::default().merges();
        assert_eq!(in_turn(default, MERGED_MAX_ROWS * 2), GraphBuilder::Usearch);
        // The largest tier-2 unit fits side by side, on usearch.
        let tier2 = hubdex_formats::MERGED_TIER2_MAX_ROWS;
        let side_by_side = hubdex_formats::merge_memory_estimate(tier2, MergeIndexes::SideBySide);
        assert!(side_by_side <= default.memory_bytes, "{side_by_side}");
        let graph = graph_builder(2 * tier2, MergeIndexes::SideBySide, default.in_turn_bytes);
        assert_eq!(graph, GraphBuilder::Usearch);
        let tiny = MemoryBudget::unchecked(6 << 20).merges();
        assert_eq!(in_turn(tiny, 10_000), GraphBuilder::HnswWriter);
    }

    #[test]
    fn rows_within_the_share_stay_one_segment_in_their_order() {
        let rows: Vec<Row> = (0..50).map(commit).collect();
        let before: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let parts = cut(rows, Vec::new(), Vec::new(), 1 << 30, 384);
        assert_eq!(ids(&parts), vec![before]);
    }

    #[test]
    fn a_large_history_is_cut_and_a_new_commit_changes_only_the_last_segment() {
        let share = 200_000;
        let rows: Vec<Row> = (0..2000).map(commit).collect();
        let per_row = row_bytes(&rows[0], 384);
        let parts = ids(&cut(rows.clone(), Vec::new(), Vec::new(), share, 384));
        assert!(parts.len() > 5, "{} segments", parts.len());
        // Every row is in exactly one segment, none over the cap.
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), 2000);
        assert!(parts.iter().all(|p| p.len() as u64 * per_row <= share * SEGMENT_MAX_SHARES));
        // Same rows in another order: the same segments.
        let mut shuffled = rows.clone();
        shuffled.reverse();
        assert_eq!(ids(&cut(shuffled, Vec::new(), Vec::new(), share, 384)), parts);
        // One commit more (the newest): every segment but the last keeps its rows.
        let mut grown = rows;
        grown.push(commit(2000));
        let after = ids(&cut(grown, Vec::new(), Vec::new(), share, 384));
        let kept = parts.iter().filter(|p| after.contains(p)).count();
        assert!(kept >= parts.len() - 1, "{kept} of {} segments kept", parts.len());
    }

    #[test]
    fn a_part_goes_out_as_soon_as_a_row_follows_it() {
        let share = 200_000;
        let rows: Vec<Row> = (0..2000).map(commit).collect();
        let whole = ids(&cut(rows.clone(), Vec::new(), Vec::new(), share, 384));
        let no_history = History::default();
        let mut cutter =
            Cutter::new(Vec::new(), RepoEdges::of(Vec::new()), &no_history, share, 384);
        let first_rows: Vec<&String> = whole.iter().map(|p| &p[0]).collect();
        let (mut streamed, mut total) = (Vec::new(), 0);
        for r in rows {
            total += row_bytes(&r, 384);
            let starts = first_rows.iter().position(|f| **f == r.id);
            cutter.push(r);
            streamed.extend(cutter.take_ready());
            // Once the rows pass one share, every part is out by the time the first row of
            // the next one is in: the cutter holds only the part it fills, not the one before.
            if let (Some(k), true) = (starts, total > share) {
                assert_eq!(streamed.len(), k, "parts out when part {k} began");
            }
        }
        streamed.extend(cutter.finish());
        assert!(whole.len() > 5, "{} segments", whole.len());
        assert_eq!(ids(&streamed), whole);
    }

    #[test]
    fn files_and_edges_go_with_the_rows_they_belong_to() {
        let mut rows: Vec<Row> = (0..600).map(commit).collect();
        for (i, path) in ["a.rs", "b.rs"].iter().enumerate() {
            let mut r = Row::new(RowType::Code, "o/r", &format!("file/{path}"), 0);
            r.set_body(&"fn f() {}\n".repeat(40 + i));
            rows.push(r);
        }
        let file = |p: &str| FileText::new(p, "c", None, "x".into());
        let edge = |source: String| Edge {
            kind: hubdex_formats::EdgeKind::Reverts,
            source_repo: "o/r".into(),
            source,
            target_repo: "o/r".into(),
            target: "commit/0".into(),
            target_url: None,
            evidence_id: None,
            evidence: String::new(),
        };
        let source = format!("commit/{:040x}", 3);
        let parts = cut(
            rows,
            vec![file("a.rs"), file("gone.rs")],
            vec![edge(source.clone()), edge("issue/9".into())],
            60_000,
            384,
        );
        assert!(parts.len() > 2);
        let holding = |pred: &dyn Fn(&Part) -> bool| parts.iter().position(pred).unwrap();
        let a_rows = holding(&|p| p.rows.iter().any(|r| r.entity == "file/a.rs"));
        assert_eq!(holding(&|p| p.files.iter().any(|f| f.path == "a.rs")), a_rows);
        assert_eq!(holding(&|p| p.files.iter().any(|f| f.path == "gone.rs")), parts.len() - 1);
        let src_rows = holding(&|p| p.rows.iter().any(|r| r.entity == source));
        assert_eq!(holding(&|p| p.edges.iter().any(|e| e.source == source)), src_rows);
        assert_eq!(holding(&|p| p.edges.iter().any(|e| e.source == "issue/9")), parts.len() - 1);
    }

    /// A tagged history's commits' `shipped_in` edges, made as their rows are cut, are the ones
    /// the whole list holds, in the same build segments at the same places; a commit without a
    /// row gives its edge to the last segment, as a listed edge without a row goes.
    #[test]
    fn commit_edges_made_as_their_rows_come_land_where_the_listed_ones_do() {
        use crate::graph::edges::{ReleaseTags, repo_edges};
        use crate::graph::history::History;
        use crate::sources::git::Commit;
        use crate::sources::git::Tag;
        let sha = |i: usize| format!("{i:040x}");
        let commits: Vec<Commit> = (0..600)
            .rev()
            .map(|i| Commit {
                sha: sha(i),
                parents: if i > 0 { vec![sha(i - 1)] } else { vec![] },
                message: if i % 50 == 7 { format!("Fix #{i}") } else { format!("Change {i}") },
                ..Commit::default()
            })
            .collect();
        let tag =
            |k: usize| Tag { name: format!("v0.{k}.0"), commit: sha(k * 100 + 50), date: None };
        let history = History::of(&commits, (0..6).map(tag).collect());
        let mut rows: Vec<Row> = (0..600).filter(|i| i % 97 != 5).map(commit).collect();
        rows.push(Row::new(RowType::Issue, "o/r", "issue/57", 0));
        rows.sort_by(|a, b| stream_key(a).cmp(&stream_key(b)));
        let edges = || {
            let threads = &rows[rows.len() - 1..];
            let no_files = crate::sources::tree::TreeFiles::default();
            repo_edges("o/r", None, threads, &no_files, &history, true, &ReleaseTags::Versions)
                .unwrap()
        };
        let share = 60_000;
        let mut cutter = Cutter::new(Vec::new(), edges(), &history, share, 384);
        let mut lazily = Vec::new();
        for r in rows.clone() {
            cutter.push(r);
            lazily.extend(cutter.take_ready());
        }
        lazily.extend(cutter.finish());
        let listed = cut(rows.clone(), Vec::new(), edges().into_vec(&history), share, 384);
        assert!(listed.len() > 3, "{} segments", listed.len());
        assert_eq!(ids(&lazily), ids(&listed));
        for (a, b) in lazily.iter().zip(&listed) {
            assert_eq!(a.edges, b.edges);
        }
        let shipped =
            |p: &Part| p.edges.iter().filter(|e| e.target.starts_with("release/")).count();
        // Commits 0..=550 are in a release tag, and so ships each issue one of them fixes
        // (#7, #57, … #507).
        assert_eq!(lazily.iter().map(shipped).sum::<usize>(), 551 + 11);
        let rowless = format!("commit/{}", sha(5));
        let last = lazily.last().unwrap();
        assert!(last.edges.iter().any(|e| e.source == rowless), "a row-less commit's edge");
    }

    #[test]
    fn the_cut_waits_while_what_it_holds_and_what_it_handed_on_pass_the_cap_until_a_part_is_dropped()
     {
        let gate = InFlight::new(100);
        // Nothing handed on: the cut goes on whatever it holds (a part over the cap still goes).
        assert!(!gate.wait_for_room(1_000));
        let part = |bytes| Part { bytes, ..Part::default() };
        let first = gate.hand_on(part(60));
        let second = gate.hand_on(part(30));
        assert_eq!(gate.handed(), 90);
        assert!(!gate.wait_for_room(10), "90 handed on and 10 held fit 100");
        // 90 handed on and 40 held do not: the cut waits until the writer drops what it took.
        let (done_tx, done) = std::sync::mpsc::channel();
        let waiting = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || {
                let waited = gate.wait_for_room(40);
                done_tx.send(gate.handed()).unwrap();
                waited
            })
        };
        let timeout = std::time::Duration::from_millis(100);
        assert!(done.recv_timeout(timeout).is_err(), "the cut went on past the cap");
        drop(second); // 60 + 40 fit 100, but the first is still handed on
        assert_eq!(done.recv_timeout(std::time::Duration::from_secs(10)), Ok(60));
        assert!(waiting.join().unwrap(), "it says it waited");
        drop(first);
        assert_eq!(gate.handed(), 0, "each part gives back its bytes once");
    }

    #[test]
    fn what_the_cutter_holds_and_the_parts_it_gave_count_every_row_once() {
        let no_history = History::default();
        let share = 20 * row_bytes(&commit(0), 384);
        let mut cutter = Cutter::new(Vec::new(), RepoEdges::default(), &no_history, share, 384);
        let (mut pushed, mut given, mut parts) = (0, 0, 0);
        for n in 0..400 {
            let row = commit(n);
            pushed += row_bytes(&row, 384);
            cutter.push(row);
            for part in cutter.take_ready() {
                assert_eq!(part.bytes, part.rows.iter().map(|r| row_bytes(r, 384)).sum::<u64>());
                given += part.bytes;
                parts += 1;
            }
            assert_eq!(cutter.holding() + given, pushed, "after row {n}");
        }
        let last: u64 = cutter.finish().iter().map(|p| p.bytes).sum();
        assert_eq!(given + last, pushed);
        assert!(parts > 5, "{parts} parts");
    }
}
