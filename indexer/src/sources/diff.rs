//! A commit's diff read in pieces ([`DiffReader`]): what its rows keep of it, never the whole
//! diff nor a whole line of it. A commit row keeps the diff's first
//! [`DIFF_MAX_LINES`] lines and the functions its hunk headers name; a diff row keeps the same
//! of one file's part. An import commit's diff can be most of a repository (87 MB for 47
//! crates' sources), and a minified file's one line megabytes: held whole while its rows were
//! made, either set the build's peak whatever the budget.
//!
//! What is kept is exactly what cutting the whole diff gave ([`cut_diff`], `hunk_symbols`,
//! each file's part cut the same way) up to the [`BODY_MAX_CHARS`] characters a row's body
//! takes, with a count of the characters past them ([`Cut`]), so the rows are the same bytes
//! either way: the tests hold the reading against the whole-diff functions.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

use serde::{Deserialize, Serialize};

use hubdex_formats::{BODY_MAX_CHARS, CHANGES_MAX_BYTES, ChangeRun, CommitChanges};

/// Diff lines a commit row keeps; the rest are counted in a marker line.
pub const DIFF_MAX_LINES: usize = 200;

/// Function names a commit row lists (from its hunk headers).
const SYMBOLS_MAX: usize = 30;

/// Bytes of file parts a [`DiffReader`] holds; past them, its parts go to a temporary file.
/// An import commit's diff rows then come back one at a time, not all together: a commit of
/// 4,000 small files keeps about 24 MB of them, more than a build segment under a small budget.
pub(crate) const PARTS_HELD: usize = 4 << 20;

/// What the rows keep of a commit's diff; merges have none.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Diff {
    /// The diff cut to its first lines ([`cut_diff`] of the whole diff).
    pub head: Cut,
    /// The functions its hunks touch (`hunk_symbols` of the whole diff).
    pub symbols: Vec<String>,
    /// One part per file, in the diff's order.
    pub files: FileParts,
    /// Every added and removed line, up to [`CHANGES_MAX_BYTES`] (history grep): the commit's
    /// SHA, time and title are not filled in here.
    pub changes: CommitChanges,
}

/// The file parts of a commit's diff: held, or once they pass what a reader holds
/// ([`PARTS_HELD`]), each written to an unnamed temporary file as one JSON record as it is read,
/// with only its path and place held. Taken one at a time ([`FileParts::take`]).
#[derive(Debug, Default)]
pub(crate) struct FileParts {
    held: Vec<FilePatch>,
    held_bytes: usize,
    /// The temporary file, once the parts passed what is held.
    spilled: Option<Spill>,
    written: u64,
}

/// The temporary file of a commit's file parts, and each part's path and place in it.
#[derive(Debug)]
struct Spill {
    out: BufWriter<File>,
    places: Vec<(String, u64, usize)>,
}

impl FileParts {
    /// Adds the next part; past `hold` bytes held, every part is in the temporary file.
    fn push(&mut self, part: FilePatch, hold: usize) -> std::io::Result<()> {
        if self.spilled.is_none() {
            self.held_bytes += part.path.len() + part.patch.text.len();
            self.held.push(part);
            if self.held_bytes <= hold {
                return Ok(());
            }
            let out = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
            self.spilled = Some(Spill { out, places: Vec::new() });
            for part in std::mem::take(&mut self.held) {
                self.write(part)?;
            }
            return Ok(());
        }
        self.write(part)
    }

    fn write(&mut self, part: FilePatch) -> std::io::Result<()> {
        let Some(Spill { out, places }) = &mut self.spilled else {
            unreachable!("written once spilled")
        };
        let bytes = serde_json::to_vec(&part).map_err(std::io::Error::other)?;
        out.write_all(&bytes)?;
        places.push((part.path, self.written, bytes.len()));
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Writes out what is buffered, before any part is read back.
    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.spilled {
            Some(spill) => spill.out.flush(),
            None => Ok(()),
        }
    }

    /// How many parts.
    pub(crate) fn len(&self) -> usize {
        match &self.spilled {
            Some(spill) => spill.places.len(),
            None => self.held.len(),
        }
    }

    /// Whether there are none.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the parts are in the temporary file.
    #[cfg(test)]
    pub(crate) fn spilled(&self) -> bool {
        self.spilled.is_some()
    }

    /// The path of part `i`.
    pub(crate) fn path(&self, i: usize) -> &str {
        match &self.spilled {
            Some(spill) => &spill.places[i].0,
            None => &self.held[i].path,
        }
    }

    /// Part `i`, taken: a held part is left empty, a spilled one is read back.
    pub(crate) fn take(&mut self, i: usize) -> std::io::Result<FilePatch> {
        match &self.spilled {
            Some(spill) => spill.read(i),
            None => Ok(std::mem::take(&mut self.held[i])),
        }
    }

    /// Every part, read back (tests).
    #[cfg(test)]
    pub(crate) fn all(&mut self) -> Vec<FilePatch> {
        (0..self.len()).map(|i| self.take(i).expect("a part reads back")).collect()
    }
}

impl Spill {
    /// Part `i`, read back.
    fn read(&self, i: usize) -> std::io::Result<FilePatch> {
        let (_, at, len) = &self.places[i];
        let mut bytes = vec![0; *len];
        self.out.get_ref().read_exact_at(&mut bytes, *at)?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }
}

/// Parts are equal when they read back the same (a part that cannot be read back is equal to
/// none).
impl PartialEq for FileParts {
    fn eq(&self, other: &FileParts) -> bool {
        let read = |p: &FileParts, i: usize| match &p.spilled {
            Some(spill) => spill.read(i).ok(),
            None => Some(p.held[i].clone()),
        };
        self.len() == other.len()
            && (0..self.len()).all(|i| read(self, i).is_some_and(|a| Some(a) == read(other, i)))
    }
}

/// What a diff row keeps of one file's part of a commit's diff.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct FilePatch {
    /// The file's path (the new side; renames are off).
    pub path: String,
    /// Its part of the diff, trailing whitespace trimmed, cut to its first lines.
    pub patch: Cut,
    /// The functions its hunks touch.
    pub symbols: Vec<String>,
}

impl Diff {
    /// What the rows keep of `diff`, a whole diff as `git log -p` writes it after a commit's
    /// message (tests, and commits built in memory).
    #[cfg(test)]
    pub(crate) fn of(diff: &str) -> Diff {
        Diff::read(diff, &[], PARTS_HELD, BODY_MAX_CHARS).1
    }

    /// `diff` read by a reader that holds `hold` bytes of file parts and `keep` characters of
    /// each cut text, pushed in pieces of the sizes `pieces` gives (each ending at the start of
    /// a character at or before it), then a line at a time: the paths it changed, and what its
    /// rows keep (tests).
    #[cfg(test)]
    pub(crate) fn read(
        diff: &str,
        pieces: &[usize],
        hold: usize,
        keep: usize,
    ) -> (Vec<String>, Diff) {
        let mut reader = DiffReader::holding(hold, keep);
        let mut rest = diff;
        for &n in pieces {
            let at = (0..=n.min(rest.len())).rev().find(|&i| rest.is_char_boundary(i)).unwrap();
            reader.push(&rest[..at]);
            rest = &rest[at..];
        }
        for line in rest.split_inclusive('\n') {
            reader.push(line);
        }
        reader.finish().expect("the parts are held or written out")
    }
}

/// Reads a commit's diff in pieces and keeps what its rows need ([`Diff`]), and the paths it
/// changed. A piece is any part of the diff's text: a line longer than the pieces it comes in
/// is never held whole (a minified file's line can be megabytes, a row keeps 8,000 characters).
#[derive(Debug)]
pub(crate) struct DiffReader {
    /// Bytes of file parts held before they go to a temporary file ([`PARTS_HELD`]).
    hold: usize,
    /// Characters of each cut text held ([`BODY_MAX_CHARS`]).
    keep: usize,
    /// The first write to the temporary file that failed.
    failed: Option<std::io::Error>,
    /// Whether the diff has begun: the empty lines before it are not part of it.
    begun: bool,
    /// The line being read, until it ends or passes [`LINE_START_HELD`] bytes; past its start,
    /// the line is open in the heads and its pieces go straight to them.
    start: String,
    whole: Head,
    symbols: Symbols,
    paths: Vec<String>,
    /// The file part being read: its path (`None` for a part whose header names no path this
    /// reads, which no row keeps), its first lines and its functions.
    part: Option<(Option<String>, Head, Symbols)>,
    files: FileParts,
    changes: ChangeLines,
}

/// Bytes of a line's start held whole: what says whether it opens a file's part and names its
/// path (twice: a path of up to 32 KiB, eight times Linux's `PATH_MAX`; a longer one names no
/// part, as a path git quotes names none) or heads a hunk (git writes at most 80 bytes of the
/// function). The rest of a longer line is counted, not held.
const LINE_START_HELD: usize = 64 << 10;

impl Default for DiffReader {
    fn default() -> DiffReader {
        DiffReader::holding(PARTS_HELD, BODY_MAX_CHARS)
    }
}

impl DiffReader {
    /// A reader that holds `hold` bytes of file parts before it writes them out, and `keep`
    /// characters of each cut text.
    pub(crate) fn holding(hold: usize, keep: usize) -> DiffReader {
        DiffReader {
            hold,
            keep,
            failed: None,
            begun: false,
            start: String::new(),
            whole: Head::keeping(keep),
            symbols: Symbols::default(),
            paths: Vec::new(),
            part: None,
            files: FileParts::default(),
            changes: ChangeLines::keeping(CHANGES_MAX_BYTES),
        }
    }

    /// Takes the diff's next piece of text: any part of it, lines ending in `\n` (the last may
    /// have none).
    pub(crate) fn push(&mut self, mut text: &str) {
        while !text.is_empty() {
            let at = text.find('\n').map_or(text.len(), |i| i + 1);
            let (piece, rest) = text.split_at(at);
            text = rest;
            if self.whole.is_open() {
                self.changes.more(piece);
                self.feed(piece);
                continue;
            }
            self.start.push_str(piece);
            if self.start.ends_with('\n') {
                self.take_start(true);
            } else if self.start.len() >= LINE_START_HELD {
                self.take_start(false);
            }
        }
    }

    /// The line's start is read (`whole`: the whole line): what it begins decides where the
    /// line goes.
    fn take_start(&mut self, whole: bool) {
        let line = std::mem::take(&mut self.start);
        if !self.begun {
            if line == "\n" {
                return;
            }
            self.begun = true;
        }
        let bare = bare_line(&line);
        self.symbols.push(bare);
        if line.starts_with("diff --git ") {
            self.end_part();
            let path = patch_path(bare).filter(|_| whole).map(str::to_string);
            if let Some(path) = &path {
                self.paths.push(path.clone());
            }
            self.part = Some((path, Head::keeping(self.keep), Symbols::default()));
        }
        if let Some((Some(_), _, symbols)) = &mut self.part {
            symbols.push(bare);
        }
        self.changes.start(&line, whole);
        self.feed(&line);
        if line.capacity() <= LINE_START_HELD * 2 {
            self.start = line;
            self.start.clear();
        }
    }

    fn feed(&mut self, piece: &str) {
        self.whole.feed(piece);
        if let Some((Some(_), head, _)) = &mut self.part {
            head.feed(piece);
        }
    }

    fn end_part(&mut self) {
        if let Some((Some(path), head, symbols)) = self.part.take() {
            let part = FilePatch { path, patch: head.cut_trimmed(), symbols: symbols.0 };
            if let Err(e) = self.files.push(part, self.hold) {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// The paths the diff changed, and what its rows keep of it; an error when its parts could
    /// not be written to their temporary file.
    pub(crate) fn finish(mut self) -> std::io::Result<(Vec<String>, Diff)> {
        if !self.start.is_empty() {
            self.take_start(true);
        }
        self.end_part();
        if let Some(e) = self.failed {
            return Err(e);
        }
        self.files.flush()?;
        let changes = self.changes.finish();
        let diff =
            Diff { head: self.whole.cut(), symbols: self.symbols.0, files: self.files, changes };
        Ok((self.paths, diff))
    }
}

/// Every added and removed line of a diff read in pieces, without its `+` or `-` and its line
/// end, with the file and side of each (what git's pickaxe `-G` matches): lines are kept up to
/// `cap` bytes in all, and the ones past it counted.
#[derive(Debug, Default)]
struct ChangeLines {
    cap: usize,
    out: CommitChanges,
    /// The file part's path (its `diff --git` line's rest where no path parses from it).
    path: String,
    /// Whether a hunk has begun in the part: only then do `+` and `-` begin changed lines (before
    /// it, `--- a/` and `+++ b/` name the files).
    in_hunk: bool,
    /// The changed line being read: where it starts in `out.lines`, and whether it was added;
    /// `Some((_, None))` for one past the cap, counted and dropped.
    open: Option<(usize, Option<bool>)>,
}

impl ChangeLines {
    fn keeping(cap: usize) -> ChangeLines {
        ChangeLines { cap, ..ChangeLines::default() }
    }

    /// A line's start (`whole`: all of it, its end included when it has one).
    fn start(&mut self, line: &str, whole: bool) {
        self.open = None;
        if line.starts_with("diff --git ") {
            let bare = bare_line(line);
            self.path = match patch_path(bare).filter(|_| whole) {
                Some(p) => p.to_string(),
                None => bare["diff --git ".len()..].to_string(),
            };
            self.in_hunk = false;
            return;
        }
        if line.starts_with("@@") {
            self.in_hunk = true;
            return;
        }
        let added = match line.as_bytes().first() {
            Some(b'+') => true,
            Some(b'-') => false,
            _ => return,
        };
        if !self.in_hunk {
            return;
        }
        self.open = Some((self.out.lines.len(), Some(added)));
        self.more(&line[1..]);
    }

    /// The next piece of the line being read.
    fn more(&mut self, piece: &str) {
        let Some((at, side)) = self.open else { return };
        let (text, ends) = match piece.strip_suffix('\n') {
            Some(t) => (t, true),
            None => (piece, false),
        };
        if side.is_some() {
            if self.out.lines.len() + text.len() + 1 > self.cap {
                self.out.lines.truncate(at);
                self.open = Some((at, None));
            } else {
                self.out.lines.push_str(text);
            }
        }
        if ends {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let Some((_, side)) = self.open.take() else { return };
        let Some(added) = side else {
            self.out.hidden_lines += 1;
            return;
        };
        self.out.lines.push('\n');
        match self.out.runs.last_mut() {
            Some(r) if r.added == added && r.path == self.path => r.lines += 1,
            _ => self.out.runs.push(ChangeRun { path: self.path.clone(), added, lines: 1 }),
        }
    }

    /// The lines read, once the diff has ended (its last line may have no end).
    fn finish(mut self) -> CommitChanges {
        self.end_line();
        self.out
    }
}

/// A line as [`str::lines`] gives it: without its `\n`, or `\r\n`.
fn bare_line(line: &str) -> &str {
    match line.strip_suffix('\n') {
        Some(l) => l.strip_suffix('\r').unwrap_or(l),
        None => line,
    }
}

/// Text cut to what a row can hold: the first characters of a text, and how many more it has.
/// `more` is 0 when `text` is all of it; otherwise `text` holds at least the characters a
/// [`DiffReader`] keeps ([`BODY_MAX_CHARS`] in a build), all a row's body takes of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cut {
    pub text: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// How a line ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum End {
    /// The last line of a text without a newline.
    #[default]
    None,
    Lf,
    CrLf,
}

impl End {
    fn as_str(self) -> &'static str {
        match self {
            End::None => "",
            End::Lf => "\n",
            End::CrLf => "\r\n",
        }
    }
}

/// One line of a [`Head`], read in pieces: its first characters, and counts of the rest.
#[derive(Debug, Default)]
struct Line {
    /// The first `room` characters of the line without its ending.
    text: String,
    /// Characters `text` may hold.
    room: usize,
    /// Characters in `text`.
    kept: usize,
    /// Characters in the line without its ending.
    chars: usize,
    /// Characters up to and with its last one that is not whitespace (0: whitespace only).
    content: usize,
    end: End,
    /// The last piece ended in `\r`, which is the line's ending if `\n` comes next.
    cr: bool,
}

impl Line {
    fn feed(&mut self, mut piece: &str) {
        if self.cr {
            self.cr = false;
            if piece == "\n" {
                self.end = End::CrLf;
                return;
            }
            self.add("\r");
        }
        if let Some(line) = piece.strip_suffix('\n') {
            (piece, self.end) = match line.strip_suffix('\r') {
                Some(line) => (line, End::CrLf),
                None => (line, End::Lf),
            };
        } else if let Some(line) = piece.strip_suffix('\r') {
            (piece, self.cr) = (line, true);
        }
        self.add(piece);
    }

    /// The line ends without a newline (the last of a text).
    fn close(&mut self) {
        if std::mem::take(&mut self.cr) {
            self.add("\r");
        }
    }

    fn add(&mut self, s: &str) {
        let n = s.chars().count();
        let content = s.trim_end();
        if !content.is_empty() {
            self.content = self.chars + n - s[content.len()..].chars().count();
        }
        let take = (self.room - self.kept).min(n);
        if take > 0 {
            let to = s.char_indices().nth(take).map_or(s.len(), |(i, _)| i);
            self.text.push_str(&s[..to]);
            self.kept += take;
        }
        self.chars += n;
    }
}

/// The first [`DIFF_MAX_LINES`] lines of a text read in pieces, and how many it has: what
/// [`cut_diff`] needs of it, the lines' characters past the first `keep` counted, not held.
#[derive(Debug)]
struct Head {
    /// Characters of the cut text held.
    keep: usize,
    lines: usize,
    /// The number of the last line with more than whitespace in it.
    last_content: usize,
    /// The first lines, ended.
    kept: Vec<Line>,
    /// The characters of the lines kept, joined by `\n` (the shortest way the cut writes them:
    /// where the next line starts, at most).
    joined: usize,
    /// The line being read, once a piece of it came.
    open: Option<Line>,
}

/// How [`write()`] writes a [`Head`]'s lines.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// As they were read.
    Raw,
    /// As read, the last without its trailing whitespace and ending (`trim_end`).
    Trimmed,
    /// Without their endings, joined by `\n` ([`str::lines`] joined).
    Joined,
}

impl Head {
    fn keeping(keep: usize) -> Head {
        Head { keep, lines: 0, last_content: 0, kept: Vec::new(), joined: 0, open: None }
    }

    /// Takes the next piece of text: part of one line, and its end if it ends in `\n`.
    fn feed(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        let line = self.open.get_or_insert_with(|| {
            self.lines += 1;
            let room = if self.lines <= DIFF_MAX_LINES {
                self.keep.saturating_sub(self.joined)
            } else {
                0
            };
            Line { room, ..Line::default() }
        });
        line.feed(piece);
        if line.end != End::None {
            self.end_line();
        }
    }

    /// Whether a line is being read: a piece of it came, its end did not.
    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    fn end_line(&mut self) {
        let Some(mut line) = self.open.take() else { return };
        line.close();
        if line.content > 0 {
            self.last_content = self.lines;
        }
        if self.lines <= DIFF_MAX_LINES {
            self.joined += line.chars + 1;
            self.kept.push(line);
        }
    }

    /// [`cut_diff`] of the text read.
    fn cut(mut self) -> Cut {
        self.end_line();
        match self.lines.checked_sub(DIFF_MAX_LINES).filter(|&n| n > 0) {
            None => write(&self.kept, Form::Raw, None),
            Some(more) => write(&self.kept, Form::Joined, Some(more)),
        }
    }

    /// [`cut_diff`] of the text read with its trailing whitespace trimmed: everything after
    /// its last line with content is whitespace, so trimming the lines kept is the same as
    /// trimming the whole whenever that line is among them.
    fn cut_trimmed(mut self) -> Cut {
        self.end_line();
        match self.last_content.checked_sub(DIFF_MAX_LINES).filter(|&n| n > 0) {
            None => write(&self.kept[..self.last_content], Form::Trimmed, None),
            Some(more) => write(&self.kept, Form::Joined, Some(more)),
        }
    }
}

/// `lines` written in `form`, with a marker for `more` lines left out: as much of the text as
/// the lines hold (up to the first line not held whole), and a count of the rest.
///
/// Each line held `keep` less the characters before it joined, at most; in every form a line
/// starts no earlier than joined, so a line not held whole ends the text past `keep`
/// characters.
fn write(lines: &[Line], form: Form, more: Option<usize>) -> Cut {
    let mut text = String::new();
    let (mut total, mut whole) = (0, true);
    for (i, line) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let (len, end) = match form {
            Form::Raw => (line.chars, line.end.as_str()),
            Form::Trimmed if last => (line.content, ""),
            Form::Trimmed => (line.chars, line.end.as_str()),
            Form::Joined => (line.chars, if last { "" } else { "\n" }),
        };
        total += len + end.len();
        if !whole {
            continue;
        }
        if line.kept >= len {
            let to = line.text.char_indices().nth(len).map_or(line.text.len(), |(i, _)| i);
            text.push_str(&line.text[..to]);
            text.push_str(end);
        } else {
            text.push_str(&line.text);
            whole = false;
        }
    }
    if let Some(more) = more {
        let marker = format!("\n[… {more} more diff lines not shown]");
        total += marker.chars().count();
        if whole {
            text.push_str(&marker);
        }
    }
    let more = total - text.chars().count();
    Cut { text, more }
}

/// Cuts a diff to [`DIFF_MAX_LINES`] lines, with a marker saying how many were left out.
pub fn cut_diff(diff: &str) -> String {
    let mut head = Head::keeping(usize::MAX);
    for line in diff.split_inclusive('\n') {
        head.feed(line);
    }
    head.cut().text
}

/// The functions, types and sections a diff's hunks touch, from their headers (`@@ -1,2 +1,3
/// @@ fn parse(…)`): the name after a defining keyword, or the word before the first `(`;
/// distinct, in order, at most [`SYMBOLS_MAX`] (as [`DiffReader`] reads them).
#[cfg(test)]
fn hunk_symbols(diff: &str) -> Vec<String> {
    let mut symbols = Symbols::default();
    for line in diff.lines() {
        symbols.push(line);
    }
    symbols.0
}

/// `hunk_symbols` read a line at a time.
#[derive(Debug, Default)]
struct Symbols(Vec<String>);

impl Symbols {
    /// Takes a line without its line ending.
    fn push(&mut self, line: &str) {
        const DEFINING: [&str; 16] = [
            "fn",
            "def",
            "func",
            "function",
            "class",
            "struct",
            "enum",
            "trait",
            "impl",
            "interface",
            "mod",
            "module",
            "type",
            "sub",
            "macro_rules!",
            "object",
        ];
        let out = &mut self.0;
        if out.len() == SYMBOLS_MAX || !line.starts_with("@@") {
            return;
        }
        let Some(context) = line[2..].split_once("@@").map(|(_, c)| c.trim()) else { return };
        let after_keyword = name_after_keyword(context, &DEFINING);
        let before_paren = context
            .split_once('(')
            .and_then(|(head, _)| head.rsplit(|c: char| !is_word(c)).find(|w| !w.is_empty()));
        let Some(name) = after_keyword.or(before_paren) else { return };
        let name = name.trim_end_matches('!');
        if name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_string());
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The word after the first of `keywords` in `context` (`fn parse(` → `parse`); a Go method's
/// receiver (`func (w *W) Run(`) is skipped.
fn name_after_keyword<'a>(context: &'a str, keywords: &[&str]) -> Option<&'a str> {
    let at = keywords
        .iter()
        .filter_map(|k| {
            context.match_indices(k).find(|(i, _)| {
                let before = context[..*i].chars().next_back();
                let after = context[i + k.len()..].chars().next();
                !before.is_some_and(is_word) && after == Some(' ')
            })
        })
        .map(|(i, k)| i + k.len())
        .min()?;
    let mut rest = context[at..].trim_start();
    if rest.starts_with('(') {
        rest = rest.split_once(')')?.1.trim_start();
    }
    let end = rest.find(|c: char| !is_word(c)).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|w| !w.is_empty())
}

/// The path a patch's `diff --git a/X b/X` header names. Renames are off (`--no-renames`), so
/// both sides are the same X, which is how a path holding " b/" itself is read right. `None`
/// for any other line, and for a header git quoted (a path with a quote, a backslash or a
/// control character: non-ASCII is written as it is, `core.quotePath=false`).
pub(crate) fn patch_path(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("diff --git ")?;
    let twice = rest.len().checked_sub(5)?; // "a/" + X + " b/" + X
    if twice % 2 != 0 {
        return None;
    }
    let (a, b) = rest.split_at_checked(2 + twice / 2)?;
    let (a, b) = (a.strip_prefix("a/")?, b.strip_prefix(" b/")?);
    (a == b).then_some(b)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What the rows keep: the commit row's cut diff and functions, each file's path, cut part
    /// and functions.
    type Kept = (String, Vec<String>, Vec<(String, String, Vec<String>)>);

    /// The diff's rows as they were made from the whole diff held in memory, before it was read
    /// a line at a time: (the commit row's cut diff and functions, each file's path, cut part
    /// and functions). The reading must give exactly these.
    fn held_whole(diff: &str) -> Kept {
        fn cut_whole(diff: &str) -> String {
            let total = diff.lines().count();
            if total <= DIFF_MAX_LINES {
                return diff.to_string();
            }
            let mut out: String = diff.lines().take(DIFF_MAX_LINES).collect::<Vec<_>>().join("\n");
            out.push_str(&format!("\n[… {} more diff lines not shown]", total - DIFF_MAX_LINES));
            out
        }
        let diff = diff.trim_start_matches('\n');
        let mut starts: Vec<usize> = Vec::new();
        let mut at = 0;
        for line in diff.split_inclusive('\n') {
            if line.starts_with("diff --git ") {
                starts.push(at);
            }
            at += line.len();
        }
        let parts = starts
            .iter()
            .enumerate()
            .filter_map(|(i, &s)| {
                let end = starts.get(i + 1).copied().unwrap_or(diff.len());
                let part = &diff[s..end];
                let path = patch_path(part.lines().next()?)?;
                let part = part.trim_end();
                Some((path.to_string(), cut_whole(part), hunk_symbols(part)))
            })
            .collect();
        (cut_whole(diff), hunk_symbols(diff), parts)
    }

    /// The diff read in pieces of the given sizes (then a line at a time) by a reader that
    /// holds `hold` bytes of file parts and `keep` characters of each cut text: what it kept,
    /// and each cut text's count of characters not held.
    fn read_in(diff: &str, pieces: &[usize], hold: usize, keep: usize) -> (Kept, Vec<usize>) {
        let (paths, mut d) = Diff::read(diff, pieces, hold, keep);
        let spilled = d.files.spilled();
        let parts = d.files.all();
        let bytes: usize = parts.iter().map(|p| p.path.len() + p.patch.text.len()).sum();
        assert_eq!(spilled, bytes > hold, "{bytes} bytes of parts, {hold} held");
        assert_eq!(paths, parts.iter().map(|p| p.path.clone()).collect::<Vec<_>>());
        let more = std::iter::once(d.head.more).chain(parts.iter().map(|p| p.patch.more)).collect();
        let parts = parts.into_iter().map(|f| (f.path, f.patch.text, f.symbols)).collect();
        ((d.head.text, d.symbols, parts), more)
    }

    /// The diff read a line at a time by a reader that holds `hold` bytes of file parts, and
    /// every cut text whole.
    fn read_holding(diff: &str, hold: usize) -> Kept {
        let (kept, more) = read_in(diff, &[], hold, usize::MAX);
        assert!(more.iter().all(|&m| m == 0), "{more:?}");
        kept
    }

    /// Each cut text read is the start of the one the whole diff gave, with at least `keep`
    /// characters unless it is all of it, and counts the rest.
    fn starts_of(read: (Kept, Vec<usize>), whole: Kept, keep: usize) -> Result<(), String> {
        let ((head, symbols, parts), more) = read;
        let (whole_head, whole_symbols, whole_parts) = whole;
        if symbols != whole_symbols || parts.len() != whole_parts.len() {
            return Err(format!("{symbols:?} {whole_symbols:?} {parts:?} {whole_parts:?}"));
        }
        let texts = std::iter::once((&head, &whole_head))
            .chain(parts.iter().zip(&whole_parts).map(|(p, w)| (&p.1, &w.1)));
        for ((text, whole), more) in texts.zip(more) {
            let (held, all) = (text.chars().count(), whole.chars().count());
            if !whole.starts_with(text.as_str()) || held + more != all || (more > 0 && held < keep)
            {
                return Err(format!("{text:?} + {more} of {whole:?}, {keep} kept"));
            }
        }
        for (p, w) in parts.iter().zip(&whole_parts) {
            if (&p.0, &p.2) != (&w.0, &w.2) {
                return Err(format!("{p:?} against {w:?}"));
            }
        }
        Ok(())
    }

    /// A line of a diff: headers, hunk headers naming functions, changed lines (some long, some
    /// blank or only whitespace, some with `\r`, some with characters of several bytes).
    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => "[ +-][a-z ]{0,12}\n",
            2 => prop::sample::select(vec!["a.rs", "src/b c.py", "caf\u{e9}.md"])
                .prop_map(|p| format!("diff --git a/{p} b/{p}\n")),
            1 => Just("diff --git a/x b/y\n".to_string()),
            2 => "(fn|def|class|func) [a-z]{1,6}\\(".prop_map(|c| format!("@@ -1 +1 @@ {c}\n")),
            2 => prop::sample::select(vec!["\n", " \n", "\t \n", "\r\n", "+x\r\n", "\u{a0}\n"])
                .prop_map(str::to_string),
            1 => "\\+[\u{2500}-\u{257f}]{1,3}\n",
            1 => "[ +-][a-z \u{e9}\u{2500}\r]{20,90}\n",
        ]
    }

    /// Diffs from a few lines to more than [`DIFF_MAX_LINES`] in one file, with empty lines
    /// before them and whitespace after them, the last line with or without its newline.
    fn diff() -> impl Strategy<Value = String> {
        (
            0..3usize,
            prop::collection::vec(line(), 0..40),
            prop::option::of((0..3usize, 190..215usize)),
            prop::collection::vec(line(), 0..8),
            any::<bool>(),
        )
            .prop_map(|(blank, lines, long, tail, newline)| {
                let mut d = "\n".repeat(blank);
                d.extend(lines);
                if let Some((at, n)) = long {
                    d.push_str("diff --git a/long.rs b/long.rs\n");
                    for i in 0..n {
                        d.push_str(if i % 7 == at { "   \n" } else { "+y\n" });
                    }
                }
                d.extend(tail);
                if !newline {
                    d.pop();
                }
                d
            })
    }

    fn read(diff: &str) -> Kept {
        read_holding(diff, PARTS_HELD)
    }

    proptest! {
        #[test]
        fn a_diff_read_a_line_at_a_time_keeps_what_the_whole_diff_gave(
            d in diff(),
            hold in prop_oneof![Just(PARTS_HELD), 0..3000usize],
        ) {
            prop_assert_eq!(read_holding(&d, hold), held_whole(&d));
        }

        #[test]
        fn a_diff_read_in_pieces_keeps_the_start_of_what_the_whole_diff_gave_and_counts_the_rest(
            d in diff(),
            pieces in prop::collection::vec(1..40usize, 0..60),
            keep in prop_oneof![Just(usize::MAX), 0..120usize],
        ) {
            let read = read_in(&d, &pieces, PARTS_HELD, keep);
            if keep == usize::MAX {
                prop_assert!(read.1.iter().all(|&m| m == 0));
                prop_assert_eq!(read.0, held_whole(&d));
            } else {
                prop_assert_eq!(starts_of(read, held_whole(&d), keep), Ok(()));
            }
        }
    }

    /// A diff with a removed line that looks like a header, a binary part, a new file and a
    /// last line without its end.
    const CHANGED: &str = "diff --git a/src/a.rs b/src/a.rs\nindex 1111111..2222222 100644\n\
        --- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@ fn keep\n fn keep() {}\n-fn old() {}\n\
        --- a/looks like a header\n+fn new() {}\n\\ No newline at end of file\n\
        diff --git a/logo.png b/logo.png\nnew file mode 100644\nindex 0000000..3333333\n\
        Binary files /dev/null and b/logo.png differ\n\
        diff --git a/b.txt b/b.txt\nnew file mode 100644\nindex 0000000..4444444\n\
        --- /dev/null\n+++ b/b.txt\n@@ -0,0 +1,2 @@\n+one\r\n+two";

    fn run(path: &str, added: bool, lines: u32) -> ChangeRun {
        ChangeRun { path: path.to_string(), added, lines }
    }

    #[test]
    fn changed_lines_are_every_added_and_removed_line_with_its_file_and_side() {
        let c = Diff::of(CHANGED).changes;
        assert_eq!(c.lines, "fn old() {}\n-- a/looks like a header\nfn new() {}\none\r\ntwo\n");
        assert_eq!(
            c.runs,
            [run("src/a.rs", false, 2), run("src/a.rs", true, 1), run("b.txt", true, 2)]
        );
        assert_eq!(c.hidden_lines, 0);
        // In pieces of any size, the same lines.
        for piece in [1, 2, 3, 7, 64] {
            let pieces = vec![piece; CHANGED.len()];
            let read = Diff::read(CHANGED, &pieces, PARTS_HELD, BODY_MAX_CHARS).1.changes;
            assert_eq!(read, c, "pieces of {piece}");
        }
    }

    #[test]
    fn changed_lines_past_the_cap_are_counted_not_kept_even_when_a_line_comes_in_pieces() {
        let mut lines = ChangeLines::keeping(16);
        lines.start("diff --git a/a b/a\n", true);
        lines.start("@@ -1 +1 @@\n", true);
        lines.start("+0123456789\n", true);
        // 11 bytes kept; this one would pass 16 in its second piece.
        lines.start("+abc", false);
        lines.more("defgh\n");
        lines.start("-xy\n", true);
        let c = lines.finish();
        assert_eq!(c.lines, "0123456789\nxy\n");
        assert_eq!(c.runs, [run("a", true, 1), run("a", false, 1)]);
        assert_eq!(c.hidden_lines, 1);
    }

    #[test]
    fn a_part_whose_last_content_is_past_the_cut_counts_only_up_to_it() {
        // 210 lines of change then 30 of whitespace: the part trimmed has 211 lines.
        let mut d = "diff --git a/a b/a\n".to_string();
        d.push_str(&"+z\n".repeat(210));
        d.push_str(&" \n".repeat(30));
        let (_, _, parts) = read(&d);
        assert!(parts[0].1.ends_with("[… 11 more diff lines not shown]"), "{}", parts[0].1);
        assert_eq!(read(&d), held_whole(&d));
    }

    #[test]
    fn a_path_longer_than_the_pieces_it_comes_in_names_its_part() {
        let path = format!("{}f.rs", "dir/".repeat(5_000));
        let d = format!("diff --git a/{path} b/{path}\n+{}\n", "x".repeat(3 * BODY_MAX_CHARS));
        let ((head, _, parts), more) = read_in(&d, &[7; 10_000], PARTS_HELD, BODY_MAX_CHARS);
        assert_eq!(parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), [path.as_str()]);
        assert_eq!(head.chars().count(), BODY_MAX_CHARS);
        assert_eq!(more[0] + BODY_MAX_CHARS, d.chars().count());
    }

    #[test]
    fn a_long_diff_is_cut_with_a_count_of_what_was_left_out() {
        let diff: String = (0..250).map(|i| format!("+line {i}\n")).collect();
        let cut = cut_diff(&diff);
        assert_eq!(cut.lines().count(), DIFF_MAX_LINES + 1);
        assert!(
            cut.ends_with("[… 50 more diff lines not shown]"),
            "{}",
            cut.lines().last().unwrap()
        );
        assert_eq!(cut_diff("+a\n+b\n"), "+a\n+b\n");
    }

    #[test]
    fn hunk_headers_name_functions_in_several_languages() {
        let diff = "@@ -1 +1 @@ pub(crate) fn parse_args(x: u8) -> u8 {\n@@ -5 +5 @@ def load(self, path):\n@@ -9 +9 @@ class Walker:\n@@ -12 +12 @@ func (w *Walker) Run() error {\n@@ -20 +20 @@\n@@ -30 +30 @@ static int main_loop(void)\n@@ -40 +40 @@ fn parse_args(y: u8) {";
        assert_eq!(hunk_symbols(diff), ["parse_args", "load", "Walker", "Run", "main_loop"]);
    }
}
