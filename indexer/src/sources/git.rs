//! The local git source: repositories on disk, read with the `git` command line.
//!
//! `git` is used rather than a library because it is on every machine that has a clone
//! (GitHub runners included), reads every object format and pack git itself writes, and
//! streams `git log -p` of any size; hubdex only parses its plain-text output.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::{DateTime, Utc};
use globset::GlobSet;

use crate::sources::diff::{Diff, DiffReader};
use crate::sources::shas::Shas;
use crate::temp::scratch::Scratch;

/// Directories never searched for repositories, whatever `--exclude` says.
const SKIP_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "build",
    "dist",
    "vendor",
    "venv",
    ".venv",
    "virtualenv",
    "__pycache__",
    "site-packages",
];

/// Errors of the git source.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be run at all.
    #[error("running git in {dir}: {source} (is git installed and on PATH?)")]
    Spawn {
        /// The directory git was to run in.
        dir: PathBuf,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// `git` ran and failed.
    #[error("git {args} in {dir} failed: {stderr}")]
    Failed {
        /// The directory git ran in.
        dir: PathBuf,
        /// The git arguments.
        args: String,
        /// What git printed on stderr.
        stderr: String,
    },
    /// What a build keeps out of memory (the files read at HEAD, a large commit's file parts)
    /// could not be written to (or read back from) its temporary file.
    #[error("keeping files read from git in a temporary file: {0}")]
    Spill(#[source] std::io::Error),
    /// A SOURCE path does not exist.
    #[error("source {0} does not exist")]
    NoSuchPath(PathBuf),
    /// A SOURCE directory holds no git repository.
    #[error(
        "source {0} is not a git repository and holds none (hidden, build and vendor directories are skipped)"
    )]
    NoRepository(PathBuf),
}

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir).env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    c
}

/// Runs git and returns its stdout as bytes.
fn run(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let out = git(dir)
        .args(args)
        .output()
        .map_err(|source| GitError::Spawn { dir: dir.to_path_buf(), source })?;
    if !out.status.success() {
        return Err(GitError::Failed {
            dir: dir.to_path_buf(),
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

fn is_repo(dir: &Path) -> bool {
    dir.join(".git").exists() || (dir.join("HEAD").is_file() && dir.join("objects").is_dir())
}

/// The repositories a SOURCE names: itself when it is one, else every repository below it,
/// skipping hidden, build, dist, vendor, node_modules and virtualenv directories and whatever
/// `exclude` matches (relative to SOURCE).
pub(crate) fn discover(source: &Path, exclude: &GlobSet) -> Result<Vec<PathBuf>, GitError> {
    if !source.exists() {
        return Err(GitError::NoSuchPath(source.to_path_buf()));
    }
    if is_repo(source) {
        return Ok(vec![source.to_path_buf()]);
    }
    let mut found = Vec::new();
    let mut walk = walkdir::WalkDir::new(source).min_depth(1).sort_by_file_name().into_iter();
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        let rel = entry.path().strip_prefix(source).unwrap_or(entry.path());
        if name.starts_with('.') || SKIP_DIRS.contains(&name.as_ref()) || exclude.is_match(rel) {
            walk.skip_current_dir();
            continue;
        }
        if is_repo(entry.path()) {
            found.push(entry.path().to_path_buf());
            walk.skip_current_dir();
        }
    }
    if found.is_empty() {
        return Err(GitError::NoRepository(source.to_path_buf()));
    }
    Ok(found)
}

/// The `owner/name` a repository is indexed under: from a GitHub-style origin URL when it has
/// one; else `local/<name>`, the name being the last part of its origin (another host, a
/// bundle, a local path: `/srv/mirrors/fd.git` gives `local/fd`) or, without an origin, its
/// directory's. A repository mounted into a container at /repo is so still named after itself.
pub(crate) fn repo_name(dir: &Path) -> String {
    let origin = run(dir, &["config", "--get", "remote.origin.url"])
        .map(|out| String::from_utf8_lossy(&out).trim().to_string())
        .unwrap_or_default();
    if let Some(name) = name_from_origin(&origin) {
        return name;
    }
    let from_origin = origin
        .trim_end_matches('/')
        .rsplit(['/', ':', '\\'])
        .next()
        .map(|last| last.trim_end_matches(".git").trim_end_matches(".bundle"))
        .filter(|last| !last.is_empty() && !last.starts_with('.'))
        .map(str::to_string);
    let from_dir = || {
        dir.canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    format!("local/{}", from_origin.or_else(from_dir).unwrap_or_else(|| "repo".into()))
}

/// `owner/name` of a GitHub-style origin URL (https, ssh or scp-like), or `None`.
fn name_from_origin(url: &str) -> Option<String> {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let parts: Vec<&str> = url.rsplit(['/', ':']).take(2).collect();
    (parts.len() == 2 && !parts[0].is_empty() && !parts[1].is_empty() && url.contains("github"))
        .then(|| format!("{}/{}", parts[1], parts[0]))
}

/// The web URL of a repository when it lives on GitHub.
pub(crate) fn web_url(repo: &str) -> Option<String> {
    (!repo.starts_with("local/")).then(|| format!("https://github.com/{repo}"))
}

/// One tag: its name, the commit it points to (peeled) and its date (the tagger's for an
/// annotated tag, the commit's for a lightweight one: git's `creatordate`).
#[derive(Debug, Clone)]
pub(crate) struct Tag {
    pub(crate) name: String,
    pub(crate) commit: String,
    pub(crate) date: Option<DateTime<Utc>>,
}

/// One commit as `git log` shows it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Commit {
    pub sha: String,
    pub parents: Vec<String>,
    pub author: String,
    pub author_email: String,
    pub authored_at: Option<DateTime<Utc>>,
    pub committer: String,
    pub committer_email: String,
    pub committed_at: Option<DateTime<Utc>>,
    /// Its message, trailing whitespace trimmed; of one longer than [`FIELD_HELD`] bytes, the
    /// first of them.
    pub message: String,
    /// How many characters of the message were counted past what `message` holds, not held
    /// (its trailing whitespace left out): 0 for any message under a MiB.
    pub message_more: usize,
    pub files: Vec<String>,
    /// What the rows keep of its unified diff (read in pieces, never held whole);
    /// merges and the first pass's summaries have none.
    pub diff: Diff,
}

const RECORD: u8 = 0x1e;
const FIELD: char = '\u{1f}';

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s.trim()).ok().map(|t| t.with_timezone(&Utc))
}

/// Bytes of a record's field held: of a longer one (a commit message of megabytes, a generated
/// log pasted into it) the first MiB is kept and the rest counted, not held ([`Field`]). git
/// sets no limit on a message; a row's body takes 8,000 characters of it.
const FIELD_HELD: usize = 1 << 20;

/// A field of a record as read: its text, at most [`FIELD_HELD`] bytes of it, and how many
/// characters after those were counted, not held (its trailing whitespace left out, as
/// `trim_end` would leave it out).
#[derive(Debug, Default)]
struct Field {
    text: String,
    more: usize,
}

/// Reads one field of a record from `out`: up to the next [`FIELD`] or [`RECORD`] separator (or
/// the output's end), holding at most `held` bytes of it and counting the rest in pieces of at
/// most [`DIFF_PIECE`] bytes; where it stopped (after the separator). Bytes that are not UTF-8
/// become U+FFFD, as if the field were read whole.
fn read_field(
    out: &mut impl BufRead,
    held: usize,
    piece: &mut Vec<u8>,
) -> std::io::Result<(Field, Stop)> {
    let ends = [FIELD as u8, RECORD];
    piece.clear();
    let mut stop = read_piece(out, ends, held, piece)?;
    if stop != Stop::Full {
        let text = String::from_utf8_lossy(without_separator(piece, stop)).into_owned();
        return Ok((Field { text, more: 0 }, stop));
    }
    let mut pieces = Utf8Pieces::default();
    let text = pieces.decode(piece, false).into_owned();
    let (mut more, mut trailing) = (0, 0);
    while stop == Stop::Full {
        piece.clear();
        stop = read_piece(out, ends, DIFF_PIECE, piece)?;
        for c in pieces.decode(without_separator(piece, stop), stop != Stop::Full).chars() {
            more += 1;
            trailing = if c.is_whitespace() { trailing + 1 } else { 0 };
        }
    }
    Ok((Field { text, more: more - trailing }, stop))
}

/// What [`read_piece`] read, less the separator it stopped at.
fn without_separator(piece: &[u8], stop: Stop) -> &[u8] {
    match stop {
        Stop::At(_) => &piece[..piece.len() - 1],
        Stop::Full | Stop::Eof => piece,
    }
}

/// How many fields a record has before what follows its message (the paths of `--name-only`,
/// the diff of `-p`): SHA, parents, author, email and date, committer, email and date, message.
const HEAD_FIELDS: usize = 9;

/// Reads a record's fields up to the separator after its message ([`read_field`], at most
/// `held` bytes of each held); where the last one read stopped: at a [`FIELD`] separator when
/// all [`HEAD_FIELDS`] were read and what follows the message comes next, else where the
/// record ended.
fn read_head(
    out: &mut impl BufRead,
    held: usize,
    piece: &mut Vec<u8>,
) -> std::io::Result<(Vec<Field>, Stop)> {
    let mut fields = Vec::with_capacity(HEAD_FIELDS);
    loop {
        let (field, stop) = read_field(out, held, piece)?;
        fields.push(field);
        if stop != Stop::At(FIELD as u8) || fields.len() == HEAD_FIELDS {
            return Ok((fields, stop));
        }
    }
}

/// The commit a record's head ([`read_head`]) names, without its paths or diff. `None` for a
/// record that is not one.
fn parse_head(fields: Vec<Field>) -> Option<Commit> {
    let [
        sha,
        parents,
        author,
        author_email,
        authored_at,
        committer,
        committer_email,
        committed_at,
        message,
    ] = <[Field; HEAD_FIELDS]>::try_from(fields).ok()?;
    let sha = match sha.more {
        0 => sha.text.trim().to_string(),
        _ => return None, // a field longer than what is held is no SHA
    };
    if sha.len() < 40 {
        return None;
    }
    // A message held whole is trimmed; of one cut short, what follows the part held is not
    // its end.
    let (message, message_more) = match message.more {
        0 => (message.text.trim_end().to_string(), 0),
        more => (message.text, more),
    };
    Some(Commit {
        sha,
        parents: parents.text.split_whitespace().map(str::to_string).collect(),
        author: author.text,
        author_email: author_email.text,
        authored_at: parse_time(&authored_at.text),
        committer: committer.text,
        committer_email: committer_email.text,
        committed_at: parse_time(&committed_at.text),
        message,
        message_more,
        files: Vec::new(),
        diff: Diff::default(),
    })
}

/// The paths of a `--name-only` record, what follows its message: a path a line. A path git
/// quotes (a quote, a backslash or a control character in it) is left out, as [`crate::sources::diff::patch_path`]
/// leaves it out, so both passes name the same files. Bytes that are not UTF-8 (old encodings)
/// become U+FFFD.
fn parse_paths(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    text.lines().filter(|l| !l.is_empty() && !l.starts_with('"')).map(str::to_string).collect()
}

/// Reads past the next [`RECORD`] separator without holding what comes before it (more than a
/// [`DIFF_PIECE`] at a time in `scratch`); false when the output ended first.
fn skip_record(out: &mut impl BufRead, scratch: &mut Vec<u8>) -> std::io::Result<bool> {
    loop {
        scratch.clear();
        match read_piece(out, [RECORD, RECORD], DIFF_PIECE, scratch)? {
            Stop::At(_) => return Ok(true),
            Stop::Eof => return Ok(false),
            Stop::Full => {}
        }
    }
}

/// Where a reader of `git log`'s records is: before its first separator, among its records, or
/// past its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Records {
    Start,
    Reading,
    Done,
}

/// The records of the first pass's `git log --name-only`, read as they come: each commit with
/// its paths. A record's fields are read as [`PatchRecords`] reads them (at most `held` bytes of
/// a message held); its paths whole (an import commit's: every path it adds).
struct SummaryRecords<R> {
    out: R,
    held: usize,
    piece: Vec<u8>,
    paths: Vec<u8>,
    at: Records,
}

impl<R: BufRead> SummaryRecords<R> {
    fn new(out: R, held: usize) -> Self {
        SummaryRecords { out, held, piece: Vec::new(), paths: Vec::new(), at: Records::Start }
    }

    /// The next commit, or `None` past the last record.
    fn next_commit(&mut self) -> std::io::Result<Option<Commit>> {
        if self.at == Records::Start {
            // The bytes before the first separator are no record.
            let found = skip_record(&mut self.out, &mut self.piece)?;
            self.at = if found { Records::Reading } else { Records::Done };
        }
        while self.at == Records::Reading {
            let (fields, mut stop) = read_head(&mut self.out, self.held, &mut self.piece)?;
            reuse(&mut self.paths);
            let files = match stop {
                Stop::At(b) if b == FIELD as u8 => {
                    stop =
                        read_piece(&mut self.out, [RECORD, RECORD], usize::MAX, &mut self.paths)?;
                    parse_paths(without_separator(&self.paths, stop))
                }
                _ => Vec::new(),
            };
            if stop == Stop::Eof {
                self.at = Records::Done;
            }
            if let Some(mut commit) = parse_head(fields) {
                commit.files = files;
                return Ok(Some(commit));
            }
        }
        Ok(None)
    }
}

/// Empties a record's buffer for the next record, and gives it back when one large record (a
/// long message, the paths of an import commit) grew it past [`KEEP_RECORD_BUFFER`]: it would
/// otherwise stay allocated for the rest of its `git log`.
fn reuse(buf: &mut Vec<u8>) {
    buf.clear();
    if buf.capacity() > KEEP_RECORD_BUFFER {
        *buf = Vec::new();
    }
}

/// Bytes of a diff read at a time: a line longer than this comes in pieces.
const DIFF_PIECE: usize = 64 << 10;

/// The records of `git log -p`, read as they come: each commit with its diff. A record's fields
/// are read with at most `held` bytes of each held (a message of megabytes is counted past its
/// first MiB, not held: [`FIELD_HELD`]), its diff in pieces of at most `piece_max` bytes
/// ([`DIFF_PIECE`]), each ending at a line's end or before, into a [`DiffReader`]: no record is
/// held whole, so an import commit's diff (most of a repository) is never in memory at once,
/// nor a minified file's line of megabytes. Bytes that are not UTF-8 become U+FFFD, as if the
/// record were read whole ([`Utf8Pieces`]).
struct PatchRecords<R> {
    out: R,
    piece_max: usize,
    held: usize,
    piece: Vec<u8>,
    at: Records,
}

impl<R: BufRead> PatchRecords<R> {
    fn new(out: R, piece_max: usize, held: usize) -> Self {
        PatchRecords { out, piece_max, held, piece: Vec::new(), at: Records::Start }
    }

    /// The next commit, or `None` past the last record.
    fn next_commit(&mut self) -> Result<Option<Commit>, ReadFailed> {
        if self.at == Records::Start {
            let found = skip_record(&mut self.out, &mut self.piece)?;
            self.at = if found { Records::Reading } else { Records::Done };
        }
        while self.at == Records::Reading {
            let (fields, head_stop) = read_head(&mut self.out, self.held, &mut self.piece)?;
            let mut diff = DiffReader::default();
            let mut text = Utf8Pieces::default();
            let stop = match head_stop {
                Stop::At(b) if b == FIELD as u8 => loop {
                    self.piece.clear();
                    let stop = read_piece(
                        &mut self.out,
                        [b'\n', RECORD],
                        self.piece_max,
                        &mut self.piece,
                    )?;
                    let bytes = self.piece.strip_suffix(&[RECORD]).unwrap_or(&self.piece);
                    diff.push(&text.decode(bytes, stop != Stop::Full));
                    match stop {
                        Stop::At(b'\n') | Stop::Full => {}
                        _ => break stop,
                    }
                },
                stop => stop,
            };
            if stop == Stop::Eof {
                self.at = Records::Done;
            }
            reuse(&mut self.piece);
            if let Some(mut commit) = parse_head(fields) {
                (commit.files, commit.diff) = diff.finish().map_err(ReadFailed::Spill)?;
                return Ok(Some(commit));
            }
        }
        Ok(None)
    }
}

/// Decodes text read in pieces as [`String::from_utf8_lossy`] decodes it whole: a piece that
/// stops inside a character leaves that character's first bytes for the next piece.
#[derive(Debug, Default)]
struct Utf8Pieces {
    carried: Vec<u8>,
}

impl Utf8Pieces {
    /// The text of `bytes` after what was carried; `ends` when no piece of this text follows.
    fn decode<'a>(&mut self, bytes: &'a [u8], ends: bool) -> Cow<'a, str> {
        let cut = |b: &[u8]| if ends { b.len() } else { b.len() - unfinished(b) };
        if self.carried.is_empty() {
            let at = cut(bytes);
            self.carried.extend_from_slice(&bytes[at..]);
            return String::from_utf8_lossy(&bytes[..at]);
        }
        let mut all = std::mem::take(&mut self.carried);
        all.extend_from_slice(bytes);
        let at = cut(&all);
        self.carried.extend_from_slice(&all[at..]);
        Cow::Owned(String::from_utf8_lossy(&all[..at]).into_owned())
    }
}

/// How many of the last bytes of `bytes` begin a character its end cut short: its first byte is
/// within the last three and says more follow. The decoder starts afresh at any byte that is not
/// a continuation byte, so what comes before it decodes the same whatever follows.
fn unfinished(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let width = match bytes[bytes.len() - back] {
            0x80..=0xBF => continue,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if width > back { back } else { 0 };
    }
    0
}

/// Why `git log -p`'s records could not be read ([`PatchRecords`]).
#[derive(Debug)]
enum ReadFailed {
    /// git's output could not be read.
    Output(std::io::Error),
    /// A large commit's file parts could not be written to their temporary file.
    Spill(std::io::Error),
}

impl From<std::io::Error> for ReadFailed {
    fn from(e: std::io::Error) -> ReadFailed {
        ReadFailed::Output(e)
    }
}

/// Where [`read_piece`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// At one of the bytes it was to stop at (the last byte read).
    At(u8),
    /// At the most it was to read.
    Full,
    /// At the end of the output.
    Eof,
}

/// Reads from `out` into `buf` up to and with the first of the bytes `ends`, or until `buf`
/// holds `max` bytes; where it stopped.
fn read_piece(
    out: &mut impl BufRead,
    ends: [u8; 2],
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Stop> {
    loop {
        let (stop, used) = {
            let available = match out.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(Stop::Eof);
            }
            let room = max.saturating_sub(buf.len());
            let available = &available[..available.len().min(room)];
            match memchr::memchr2(ends[0], ends[1], available) {
                Some(i) => {
                    buf.extend_from_slice(&available[..=i]);
                    (Some(Stop::At(available[i])), i + 1)
                }
                None => {
                    buf.extend_from_slice(available);
                    ((buf.len() >= max).then_some(Stop::Full), available.len())
                }
            }
        };
        out.consume(used);
        if let Some(stop) = stop {
            return Ok(stop);
        }
    }
}

/// The gitattributes that give source files git's built-in diff drivers (hunk headers).
const FUNCNAME_ATTRIBUTES: &str = "\
*.rs diff=rust
*.py diff=python
*.go diff=golang
*.java diff=java
*.kt diff=kotlin
*.c diff=cpp
*.h diff=cpp
*.cc diff=cpp
*.cpp diff=cpp
*.hpp diff=cpp
*.cs diff=csharp
*.rb diff=ruby
*.php diff=php
*.pl diff=perl
*.sh diff=bash
*.ex diff=elixir
*.exs diff=elixir
*.m diff=objc
*.css diff=css
*.html diff=html
*.md diff=markdown
";

/// What a `git log` pass reads.
pub(crate) enum Log<'a> {
    /// The commits `listed` names ([`rev_list`]'s: every commit reachable from any branch or
    /// tag, newest first), in that order, with the paths each changed but no diff: the compact
    /// pass a build reads the history with first. With a `cache`, the chunks of commits it
    /// read before are read from there ([`SummaryCache`]).
    Summaries { listed: &'a Shas, cache: Option<&'a SummaryCache> },
    /// These commits, in this order, each with its diff.
    Patches(Box<dyn Iterator<Item = String> + 'a>),
}

/// How many commits one `git log` is asked for (each pass runs one after another for as
/// many as it reads). git reads every commit it is asked for before it writes the first,
/// and keeps them all, with its cache of delta bases, until it exits: 4,096 at a time holds
/// about 33 MiB where a 400,000-commit history at once held 415, and is no slower.
const LOG_CHUNK: usize = 4096;

/// Where the first pass keeps what `git log --name-only` wrote for each chunk of commits, to
/// read it again rather than ask git: a commit's summary and paths never change, and listing a
/// commit's paths is git's work (a tree diff for every commit, ~5 s of a delta of a
/// 400k-commit history on 2 cores). A file a chunk, named by a hash of what it was asked for
/// (the chunk's SHAs in order, git's version and the pass's arguments), written whole before
/// it is named; a complete pass removes the chunks it did not use. Chunks are counted from the
/// oldest commit, so new commits (listed first) change only the newest chunk's name.
#[derive(Debug, Clone)]
pub(crate) struct SummaryCache {
    dir: PathBuf,
}

impl SummaryCache {
    /// The cache of the repository at `repo_dir` under `root` (the indexer's cache directory):
    /// `root/first-pass/<a hash of the repository's path>`. Never inside the repository (a
    /// local source is the user's).
    pub(crate) fn of(root: &Path, repo_dir: &Path) -> SummaryCache {
        let path = std::fs::canonicalize(repo_dir).unwrap_or_else(|_| repo_dir.to_path_buf());
        let hash = hubdex_formats::sha256_hex(path.to_string_lossy().as_bytes());
        SummaryCache { dir: root.join("first-pass").join(&hash[..32]) }
    }

    /// The file of the chunk `request` (its SHAs, a line each) asked with `salt` (git's version
    /// and the pass's arguments).
    fn path(&self, salt: &str, request: &str) -> PathBuf {
        use sha2::Digest as _;
        let key = sha2::Sha256::new().chain_update(salt).chain_update("\n").chain_update(request);
        self.dir.join(format!("{}.log", hex::encode(key.finalize())))
    }

    /// The chunk's records when the cache holds them: a file whose records are exactly the
    /// chunk's commits, in its order (anything else is removed and read from git again).
    fn open(&self, path: &Path, request: &str) -> Option<std::fs::File> {
        use std::io::Seek as _;
        let mut file = std::fs::File::open(path).ok()?;
        let wanted = request.lines();
        if Self::holds(BufReader::new(&file), wanted).unwrap_or(false) && file.rewind().is_ok() {
            return Some(file);
        }
        let file = path.display();
        tracing::warn!(%file, "a first-pass cache file does not hold its commits: git is asked");
        let _ = std::fs::remove_file(path);
        None
    }

    /// Whether the records of `out` are the commits `wanted`, in its order: each record's first
    /// field read (at most a SHA's length of it held), the rest passed over, not held.
    fn holds<'a>(
        mut out: impl BufRead,
        mut wanted: impl Iterator<Item = &'a str>,
    ) -> std::io::Result<bool> {
        let mut piece = Vec::new();
        let mut more = skip_record(&mut out, &mut piece)?; // the bytes before the first separator
        while more && !out.fill_buf()?.is_empty() {
            let (sha, stop) = read_field(&mut out, 128, &mut piece)?;
            if sha.more != 0 || wanted.next() != Some(sha.text.trim()) {
                return Ok(false);
            }
            more = match stop {
                Stop::At(RECORD) => true,
                Stop::Eof => false,
                _ => skip_record(&mut out, &mut piece)?,
            };
        }
        Ok(wanted.next().is_none())
    }

    /// Removes the chunk files a complete pass did not use (`used`), and temporary files an
    /// hour old (left by a build that was killed while git wrote them; a running build's are
    /// newer).
    fn keep_only(&self, used: &std::collections::HashSet<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let hour_old = |e: &std::fs::DirEntry| {
            let age = e.metadata().and_then(|m| m.modified()).map(|t| t.elapsed());
            matches!(age, Ok(Ok(age)) if age.as_secs() > 3600)
        };
        for e in entries.flatten() {
            let path = e.path();
            let chunk = path.extension().is_some_and(|x| x == "log");
            let temporary = e.file_name().to_string_lossy().starts_with(".tmp");
            if (chunk && !used.contains(&path)) || (temporary && hour_old(&e)) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// Writes `request` to a child's stdin from a thread of its own, so the child never waits on a
/// full output pipe while this thread still writes; stdin closes when the request is written.
/// A write error means the child stopped reading (it exited or was killed): what it wrote is
/// read and checked by the caller.
fn feed(mut stdin: std::process::ChildStdin, request: String) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let _ = stdin.write_all(request.as_bytes());
    })
}

/// The commits `log` names, read from git as the iterator is advanced; dropping it early stops
/// the `git log` processes still running, and that is no error.
pub(crate) fn commits<'a>(dir: &Path, log: Log<'a>) -> Result<Commits<'a>, GitError> {
    commits_in_chunks(dir, log, LOG_CHUNK, summary_processes())
}

/// How many `git log` processes the first pass runs at once: one a core, at most four.
fn summary_processes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// [`commits`], asking one `git log` for `chunk` commits at a time. With a `--format` (git's
/// `tformat`) each commit's record is written the same whatever comes before or after it, so
/// the records are the bytes one `git log` of them all writes.
///
/// The summaries' commits are the ones the caller listed with `git rev-list --all
/// --date-order` ([`rev_list`], which holds only the commit graph, where `git log --all
/// --date-order --name-only` holds every commit's message and trees), read in chunks in that
/// order, `at_once` processes at a time ([`Summaries`]): the first pass reads every commit, and
/// listing a commit's paths is git's work (a tree diff), not the indexer's. The patches stream
/// from one process at a time ([`Patches`]): the second pass may stop anywhere (a history span
/// found again), and its rows are the indexer's work.
fn commits_in_chunks<'a>(
    dir: &Path,
    log: Log<'a>,
    chunk: usize,
    at_once: usize,
) -> Result<Commits<'a>, GitError> {
    let chunk = chunk.max(1);
    let (args, source) = match log {
        Log::Summaries { listed, cache } => {
            let args = log_args("--name-only");
            let shas: Box<dyn Iterator<Item = String> + 'a> =
                Box::new(listed.iter().map(|sha| sha.as_ref().to_string()));
            let summaries = Summaries::new(&args, shas, listed.len(), chunk, at_once, cache)?;
            (args, Source::Summaries(summaries))
        }
        Log::Patches(shas) => {
            let patches = Patches { shas: shas.peekable(), chunk, running: None };
            (log_args("-p"), Source::Patches(patches))
        }
    };
    let attributes = funcname_attributes(dir)?;
    Ok(Commits { dir: dir.to_path_buf(), args, attributes, source, done: false })
}

/// The commits of a pass, as [`commits`] reads them: an iterator of owned [`Commit`]s.
pub(crate) struct Commits<'a> {
    dir: PathBuf,
    args: Vec<&'static str>,
    attributes: Attributes,
    source: Source<'a>,
    done: bool,
}

/// Where a pass's commits come from.
enum Source<'a> {
    Summaries(Summaries<'a>),
    Patches(Patches<'a>),
}

impl Iterator for Commits<'_> {
    type Item = Result<Commit, GitError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (dir, args, attributes) = (self.dir.as_path(), &self.args[..], self.attributes.path());
        let next = match &mut self.source {
            Source::Summaries(s) => s.next_commit(dir, args, attributes),
            Source::Patches(p) => p.next_commit(dir, args, attributes),
        };
        // After the last commit or an error, nothing more.
        self.done = !matches!(next, Ok(Some(_)));
        next.transpose()
    }
}

/// The `git log` arguments of a pass: one record a commit, `what` (`--name-only` or `-p`)
/// after its message, the commits read from stdin in the order given.
fn log_args(what: &str) -> Vec<&str> {
    let format = "--format=%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%B%x1f";
    let args = ["log", "--no-color", "--no-ext-diff", "--no-renames", format, "--no-walk=unsorted"];
    [&args[..], &["--stdin", what]].concat()
}

/// A file of git's built-in hunk-header rules per language, for `core.attributesFile`: so a
/// hunk names the function it is in (`@@ … @@ fn parse(`) rather than the last unindented line.
/// In a scratch directory of its own, removed with it (and by a later build when this one is
/// killed: [`Scratch`]).
struct Attributes {
    _dir: Scratch,
    path: PathBuf,
}

impl Attributes {
    fn path(&self) -> &Path {
        &self.path
    }
}

fn funcname_attributes(dir: &Path) -> Result<Attributes, GitError> {
    Scratch::new()
        .and_then(|scratch| {
            let path = scratch.path().join("funcname.gitattributes");
            std::fs::write(&path, FUNCNAME_ATTRIBUTES)?;
            Ok(Attributes { _dir: scratch, path })
        })
        .map_err(|source| GitError::Spawn { dir: dir.to_path_buf(), source })
}

/// `git log` with `args`, its attributes file and quoting as both passes read it.
fn log_command(dir: &Path, attributes: &Path, args: &[&str]) -> Command {
    let mut c = git(dir);
    c.arg("-c")
        .arg(format!("core.attributesFile={}", attributes.display()))
        .args(["-c", "core.quotePath=false"])
        .args(args);
    c
}

/// The request one `git log` process reads on stdin: the next `chunk` SHAs, a line each.
fn next_request(shas: &mut impl Iterator<Item = impl AsRef<str>>, chunk: usize) -> String {
    let mut request = String::new();
    for sha in shas.by_ref().take(chunk.max(1)) {
        request.push_str(sha.as_ref());
        request.push('\n');
    }
    request
}

/// The second pass: `git log --no-walk=unsorted --stdin -p` over `shas`, in that order, `chunk`
/// at a time, one process after another.
struct Patches<'a> {
    shas: std::iter::Peekable<Box<dyn Iterator<Item = String> + 'a>>,
    chunk: usize,
    running: Option<PatchProcess>,
}

impl Patches<'_> {
    fn next_commit(
        &mut self,
        dir: &Path,
        args: &[&str],
        attributes: &Path,
    ) -> Result<Option<Commit>, GitError> {
        loop {
            if let Some(git) = &mut self.running {
                match git.records.next_commit() {
                    Ok(Some(commit)) => return Ok(Some(commit)),
                    Ok(None) => self.running.take().map_or(Ok(()), |git| git.finish(dir, args))?,
                    Err(e) => {
                        self.running = None; // stopped and reaped as it drops
                        return Err(match e {
                            ReadFailed::Output(source) => {
                                GitError::Spawn { dir: dir.to_path_buf(), source }
                            }
                            ReadFailed::Spill(e) => GitError::Spill(e),
                        });
                    }
                }
            }
            if self.shas.peek().is_none() {
                return Ok(None);
            }
            let request = next_request(&mut self.shas, self.chunk);
            self.running = Some(PatchProcess::spawn(dir, attributes, args, request)?);
        }
    }
}

/// One `git log -p` of the second pass: a SHA a line on its stdin, written from a thread of its
/// own ([`feed`]), its records read from its stdout as they come ([`PatchRecords`]).
struct PatchProcess {
    child: std::process::Child,
    feeder: Option<std::thread::JoinHandle<()>>,
    records: PatchRecords<BufReader<std::process::ChildStdout>>,
    waited: bool,
}

impl PatchProcess {
    fn spawn(
        dir: &Path,
        attributes: &Path,
        args: &[&str],
        request: String,
    ) -> Result<PatchProcess, GitError> {
        let mut child = log_command(dir, attributes, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| GitError::Spawn { dir: dir.to_path_buf(), source })?;
        let feeder = child.stdin.take().map(|stdin| feed(stdin, request));
        let stdout = child.stdout.take().expect("stdout is piped");
        let records =
            PatchRecords::new(BufReader::with_capacity(1 << 20, stdout), DIFF_PIECE, FIELD_HELD);
        Ok(PatchProcess { child, feeder, records, waited: false })
    }

    /// Once its output is read to the end: an error naming what git said when it failed.
    fn finish(mut self, dir: &Path, args: &[&str]) -> Result<(), GitError> {
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        let status = self
            .child
            .wait()
            .map_err(|source| GitError::Spawn { dir: dir.to_path_buf(), source })?;
        self.waited = true;
        if !status.success() {
            return Err(GitError::Failed {
                dir: dir.to_path_buf(),
                args: args.join(" "),
                stderr: stderr.trim().to_string(),
            });
        }
        Ok(())
    }
}

impl Drop for PatchProcess {
    /// A process not read to its end (the reader stopped or failed) is stopped and reaped.
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
    }
}

/// One `git log` of the first pass, run ahead of its turn: its stdin, stdout and stderr are
/// files of their own (unnamed, in the temporary directory; its stdout named, in the cache's
/// directory, when it is to be kept: [`SummaryCache`]), so it runs to its end whenever it is
/// read and holds no memory of the indexer's while it waits (a chunk's records are about 1.6
/// MB for 4,096 commits of the 400k-commit history).
struct Ahead {
    child: std::process::Child,
    out: std::fs::File,
    /// `out`'s name in the cache's directory, when it is to be kept by renaming it
    /// ([`SummaryCache`]); removed when dropped unless it was.
    named: Option<tempfile::TempPath>,
    err: std::fs::File,
}

impl Ahead {
    /// `git log` of `request`, its output in a temporary file in `out_dir` (the cache's
    /// directory, to be renamed there) or the system's.
    fn spawn(
        dir: &Path,
        attributes: &Path,
        args: &[&str],
        request: &str,
        out_dir: Option<&Path>,
    ) -> std::io::Result<Ahead> {
        use std::io::{Seek as _, SeekFrom};
        let mut input = tempfile::tempfile()?;
        input.write_all(request.as_bytes())?;
        input.seek(SeekFrom::Start(0))?;
        let (out, named) = match out_dir {
            Some(d) => {
                let (out, named) = tempfile::NamedTempFile::new_in(d)?.into_parts();
                (out, Some(named))
            }
            None => (tempfile::tempfile()?, None),
        };
        let err = tempfile::tempfile()?;
        let child = log_command(dir, attributes, args)
            .stdin(input)
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?)
            .spawn()?;
        Ok(Ahead { child, out, named, err })
    }
}

/// A chunk of the first pass: read from the cache, or git running ahead (to be cached at
/// `keep` when it ends well).
enum Pending {
    Cached(std::fs::File),
    Running { git: Ahead, keep: Option<PathBuf> },
}

impl Drop for Ahead {
    /// A process not read to its end (the reader stopped or failed) is stopped and reaped.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first pass: `git log --no-walk=unsorted --stdin --name-only` over `shas`, in that order,
/// `chunk` commits a process (as [`Patches`] asks for the second pass's), up to `at_once`
/// processes running at a time, each writing its chunk to a file ([`Ahead`]); the chunks are
/// read in order, so the commits come as one process would give them. On 2 cores the
/// 400k-commit history's paths take half the time of one process at a time.
///
/// With a `cache`, a chunk it holds is read from there and git is not asked for it; the
/// others are kept there as git writes them ([`SummaryCache`]). The chunks are counted from
/// the oldest commit: the first (newest) one takes what is left over.
struct Summaries<'a> {
    shas: std::iter::Peekable<Box<dyn Iterator<Item = String> + 'a>>,
    chunk: usize,
    /// The size of the next chunk: the first takes what the others leave over.
    next_chunk: usize,
    at_once: usize,
    cache: Option<&'a SummaryCache>,
    /// What names a chunk in the cache beside its SHAs: git's version and the pass's arguments.
    salt: String,
    used: std::collections::HashSet<PathBuf>,
    pending: std::collections::VecDeque<Pending>,
    reading: Option<SummaryRecords<BufReader<std::fs::File>>>,
}

impl<'a> Summaries<'a> {
    fn new(
        args: &[&str],
        shas: Box<dyn Iterator<Item = String> + 'a>,
        count: usize,
        chunk: usize,
        at_once: usize,
        cache: Option<&'a SummaryCache>,
    ) -> Result<Summaries<'a>, GitError> {
        let cache = cache.filter(|c| std::fs::create_dir_all(&c.dir).is_ok());
        let salt = match cache {
            Some(_) => format!("{}\n{}", version()?, args.join(" ")),
            None => String::new(),
        };
        Ok(Summaries {
            shas: shas.peekable(),
            chunk,
            next_chunk: match count % chunk {
                0 => chunk,
                n => n,
            },
            at_once: at_once.max(1),
            cache,
            salt,
            used: std::collections::HashSet::new(),
            pending: std::collections::VecDeque::new(),
            reading: None,
        })
    }

    fn next_commit(
        &mut self,
        dir: &Path,
        args: &[&str],
        attributes: &Path,
    ) -> Result<Option<Commit>, GitError> {
        let spawn_error = |source| GitError::Spawn { dir: dir.to_path_buf(), source };
        loop {
            if let Some(records) = &mut self.reading {
                match records.next_commit().map_err(spawn_error)? {
                    Some(commit) => return Ok(Some(commit)),
                    None => self.reading = None,
                }
            }
            while self.pending.len() < self.at_once && self.shas.peek().is_some() {
                let size = std::mem::replace(&mut self.next_chunk, self.chunk);
                let request = next_request(&mut self.shas, size);
                let path = self.cache.map(|c| c.path(&self.salt, &request));
                if let (Some(c), Some(path)) = (self.cache, &path) {
                    self.used.insert(path.clone());
                    if let Some(file) = c.open(path, &request) {
                        self.pending.push_back(Pending::Cached(file));
                        continue;
                    }
                }
                let out_dir = self.cache.map(|c| c.dir.as_path());
                let git =
                    Ahead::spawn(dir, attributes, args, &request, out_dir).map_err(spawn_error)?;
                self.pending.push_back(Pending::Running { git, keep: path });
            }
            let out = match self.pending.pop_front() {
                None => {
                    // A complete pass: the cache keeps only the chunks it used.
                    if let Some(c) = self.cache {
                        c.keep_only(&self.used);
                    }
                    return Ok(None);
                }
                Some(Pending::Cached(file)) => file,
                Some(Pending::Running { mut git, keep }) => {
                    let status = git.child.wait().map_err(spawn_error)?;
                    if !status.success() {
                        let mut stderr = String::new();
                        let _ = std::io::Seek::rewind(&mut git.err);
                        let _ = git.err.read_to_string(&mut stderr);
                        return Err(GitError::Failed {
                            dir: dir.to_path_buf(),
                            args: args.join(" "),
                            stderr: stderr.trim().to_string(),
                        });
                    }
                    // Renamed whole once git has written it: a cache file is never partial.
                    if let (Some(named), Some(path)) = (git.named.take(), keep)
                        && let Err(e) = named.persist(&path)
                    {
                        let (file, error) = (path.display(), &e.error);
                        tracing::warn!(%file, %error, "a first-pass chunk could not be cached");
                    }
                    let mut file = git.out.try_clone().map_err(spawn_error)?;
                    std::io::Seek::rewind(&mut file).map_err(spawn_error)?;
                    file
                }
            };
            let out = BufReader::with_capacity(1 << 20, out);
            self.reading = Some(SummaryRecords::new(out, FIELD_HELD));
        }
    }
}

/// Every commit reachable from any branch, tag or HEAD, newest first, no parent before its
/// children (`--date-order`); none in an empty repository. Packed (20 bytes a commit, where
/// git's lines are 41): the first pass asks `git log` for them in this order, and the
/// [`crate::graph::history::History`] keeps them as its commits' SHAs.
pub(crate) fn rev_list(dir: &Path) -> Result<Shas, GitError> {
    let out = match run(dir, &["rev-list", "--all", "--date-order"]) {
        Ok(out) => out,
        // An empty repository has no commits: that is not an error here.
        Err(GitError::Failed { stderr, .. })
            if stderr.contains("does not have any commits")
                || stderr.contains("bad default revision") =>
        {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let lines = out.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    Ok(Shas::of(lines.map(String::from_utf8_lossy)))
}

/// A record buffer larger than this is not kept for the next record: one large record (a long
/// message, the paths of an import commit) would otherwise stay allocated for the rest of its
/// `git log`.
const KEEP_RECORD_BUFFER: usize = 1 << 20;

/// Every tag: its name, the commit it points to (an annotated tag peeled) and git's
/// `creatordate` (the tagger's date, or the commit's for a lightweight tag).
pub(crate) fn tags(dir: &Path) -> Result<Vec<Tag>, GitError> {
    let format =
        "--format=%(refname:strip=2)%1f%(objectname)%1f%(*objectname)%1f%(creatordate:iso-strict)";
    let out = run(dir, &["for-each-ref", "refs/tags", format])?;
    let text = String::from_utf8_lossy(&out);
    Ok(text
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(FIELD).collect();
            let (name, object, peeled, date) = (f.first()?, f.get(1)?, f.get(2)?, f.get(3)?);
            let commit = if peeled.is_empty() { object } else { peeled };
            Some(Tag { name: name.to_string(), commit: commit.to_string(), date: parse_time(date) })
        })
        .collect())
}

/// What `git --version` says: the git that writes the diffs (part of a history span's key,
/// [`crate::pipeline::spans`]).
pub(crate) fn version() -> Result<String, GitError> {
    let out = run(Path::new("."), &["--version"])?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// The commit HEAD points at, or `None` in an empty repository.
pub(crate) fn head(dir: &Path) -> Result<Option<String>, GitError> {
    match run(dir, &["rev-parse", "--verify", "-q", "HEAD^{commit}"]) {
        Ok(out) => Ok(Some(String::from_utf8_lossy(&out).trim().to_string())),
        Err(GitError::Failed { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Paths of the files in the tree of `commit`.
pub(crate) fn tree_files(dir: &Path, commit: &str) -> Result<Vec<String>, GitError> {
    let out = run(dir, &["ls-tree", "-r", "-z", "--name-only", commit])?;
    Ok(out
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// The blobs `<commit>:<path>` of `paths`, read through one `git cat-file --batch` one at a
/// time, in order, as the iterator is advanced: each path with its bytes. A blob larger than
/// `max_bytes` is passed over unread (never held; [`Blobs::too_large`] lists it), and a path
/// that names no blob is left out:
/// a build holds one file at a time here, not the tree.
pub(crate) fn blobs<'a>(
    dir: &Path,
    commit: &str,
    paths: &'a [String],
    max_bytes: u64,
) -> Result<Blobs<'a>, GitError> {
    let mut blobs = Blobs {
        dir: dir.to_path_buf(),
        git: None,
        paths: paths.iter(),
        max_bytes,
        header: String::new(),
        too_large: Vec::new(),
    };
    if paths.is_empty() {
        return Ok(blobs);
    }
    let mut child = git(dir)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| GitError::Spawn { dir: dir.to_path_buf(), source })?;
    let request: String = paths.iter().map(|p| format!("{commit}:{p}\n")).collect();
    let writer = feed(child.stdin.take().expect("stdin is piped"), request);
    let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    blobs.git = Some(CatFile { child, writer: Some(writer), stdout });
    Ok(blobs)
}

/// The blobs [`blobs`] reads.
pub(crate) struct Blobs<'a> {
    dir: PathBuf,
    git: Option<CatFile>,
    paths: std::slice::Iter<'a, String>,
    max_bytes: u64,
    header: String,
    too_large: Vec<&'a str>,
}

impl<'a> Blobs<'a> {
    /// The paths passed over so far as blobs larger than the cap.
    pub(crate) fn too_large(&self) -> &[&'a str] {
        &self.too_large
    }
}

/// The `git cat-file --batch` a [`Blobs`] reads.
struct CatFile {
    child: std::process::Child,
    writer: Option<std::thread::JoinHandle<()>>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for CatFile {
    /// Stopped if it was not read to its end, and reaped.
    fn drop(&mut self) {
        let _ = self.child.kill();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let _ = self.child.wait();
    }
}

impl<'a> Iterator for Blobs<'a> {
    type Item = Result<(&'a str, Vec<u8>), GitError>;

    fn next(&mut self) -> Option<Self::Item> {
        let git = self.git.as_mut()?;
        let read = |e| GitError::Spawn { dir: self.dir.clone(), source: e };
        for p in self.paths.by_ref() {
            self.header.clear();
            if let Err(e) = git.stdout.read_line(&mut self.header) {
                self.git = None;
                return Some(Err(read(e)));
            }
            // `<sha> <type> <size>`, then the content and a newline; `<name> missing` (the name
            // as asked, spaces and all) and `<name> ambiguous` have no content.
            let line = self.header.trim_end();
            if line.ends_with(" missing") || line.ends_with(" ambiguous") {
                continue;
            }
            let mut fields = line.rsplitn(3, ' ');
            let (Some(size), Some(kind)) = (fields.next(), fields.next()) else { continue };
            let Ok(size) = size.parse::<u64>() else { continue };
            if kind != "blob" || size > self.max_bytes {
                if kind == "blob" {
                    self.too_large.push(p.as_str());
                }
                let skipped =
                    std::io::copy(&mut (&mut git.stdout).take(size + 1), &mut std::io::sink());
                if let Err(e) = skipped {
                    self.git = None;
                    return Some(Err(read(e)));
                }
                continue;
            }
            let mut blob = vec![0u8; size as usize + 1];
            if let Err(e) = git.stdout.read_exact(&mut blob) {
                self.git = None;
                return Some(Err(read(e)));
            }
            blob.pop();
            return Some(Ok((p.as_str(), blob)));
        }
        self.git = None; // read to its end: reaped
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The first pass's records of `out` to `each`, holding `held` bytes of a field; whether
    /// `each` stopped them.
    fn each_summary_in(
        out: impl BufRead,
        held: usize,
        mut each: impl FnMut(Commit) -> bool,
    ) -> std::io::Result<bool> {
        let mut records = SummaryRecords::new(out, held);
        while let Some(c) = records.next_commit()? {
            if !each(c) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The second pass's records of `out` to `each`; whether `each` stopped them.
    fn each_patch_record(
        out: impl BufRead,
        each: impl FnMut(Commit) -> bool,
    ) -> Result<bool, ReadFailed> {
        each_patch_record_in(out, DIFF_PIECE, FIELD_HELD, each)
    }

    fn each_patch_record_in(
        out: impl BufRead,
        piece_max: usize,
        held: usize,
        mut each: impl FnMut(Commit) -> bool,
    ) -> Result<bool, ReadFailed> {
        let mut records = PatchRecords::new(out, piece_max, held);
        while let Some(c) = records.next_commit()? {
            if !each(c) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every commit of `commits` to `each` until it returns false.
    fn each_of(
        commits: Result<Commits<'_>, GitError>,
        mut each: impl FnMut(Commit) -> bool,
    ) -> Result<(), GitError> {
        for c in commits? {
            if !each(c?) {
                break;
            }
        }
        Ok(())
    }

    fn for_each_commit_in_chunks(
        dir: &Path,
        log: Log<'_>,
        chunk: usize,
        at_once: usize,
        each: impl FnMut(Commit) -> bool,
    ) -> Result<(), GitError> {
        each_of(commits_in_chunks(dir, log, chunk, at_once), each)
    }

    fn for_each_commit(
        dir: &Path,
        log: Log<'_>,
        each: impl FnMut(Commit) -> bool,
    ) -> Result<(), GitError> {
        each_of(commits(dir, log), each)
    }

    /// The second pass over `shas`, `chunk` commits a process.
    fn log_patches(
        dir: &Path,
        shas: impl Iterator<Item = impl AsRef<str>>,
        chunk: usize,
        each: impl FnMut(Commit) -> bool,
    ) -> Result<(), GitError> {
        let shas: Vec<String> = shas.map(|s| s.as_ref().to_string()).collect();
        each_of(commits_in_chunks(dir, Log::Patches(Box::new(shas.into_iter())), chunk, 1), each)
    }

    /// The first pass over any `shas` (not only a `rev_list`'s), `chunk` commits a process,
    /// `at_once` processes at a time.
    fn log_ahead(
        dir: &Path,
        shas: impl ExactSizeIterator<Item = impl AsRef<str>>,
        chunk: usize,
        at_once: usize,
        cache: Option<&SummaryCache>,
        each: impl FnMut(Commit) -> bool,
    ) -> Result<(), GitError> {
        let args = log_args("--name-only");
        let count = shas.len();
        let shas: Vec<String> = shas.map(|s| s.as_ref().to_string()).collect();
        let commits = || -> Result<Commits<'_>, GitError> {
            let summaries =
                Summaries::new(&args, Box::new(shas.into_iter()), count, chunk, at_once, cache)?;
            Ok(Commits {
                dir: dir.to_path_buf(),
                args: args.clone(),
                attributes: funcname_attributes(dir)?,
                source: Source::Summaries(summaries),
                done: false,
            })
        };
        each_of(commits(), each)
    }

    fn for_each_blob(
        dir: &Path,
        commit: &str,
        paths: &[String],
        max_bytes: u64,
        mut each: impl FnMut(&str, Vec<u8>),
    ) -> Result<(), GitError> {
        for blob in blobs(dir, commit, paths, max_bytes)? {
            let (path, bytes) = blob?;
            each(path, bytes);
        }
        Ok(())
    }

    /// Runs git in `dir` with a fixed identity, failing the test if it fails (with what git
    /// said); its stdout.
    pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> String {
        let out = git(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// A GitHub origin names the repository; any other origin gives `local/` and its last
    /// part; no origin, the directory's name (a mount at /repo named after its origin).
    #[test]
    fn a_repository_is_named_from_its_origin_then_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("repo");
        std::fs::create_dir(&dir).unwrap();
        git_ok(&dir, &["init", "-q"]);
        assert_eq!(repo_name(&dir), "local/repo");
        for (origin, name) in [
            ("https://github.com/sharkdp/fd.git", "sharkdp/fd"),
            ("git@github.com:sharkdp/fd.git", "sharkdp/fd"),
            ("https://gitlab.com/acme/shop.git", "local/shop"),
            ("/srv/eval/fd.bundle", "local/fd"),
            ("../mirrors/widgets/", "local/widgets"),
        ] {
            git_ok(&dir, &["config", "remote.origin.url", origin]);
            assert_eq!(repo_name(&dir), name, "origin {origin}");
        }
    }

    #[test]
    fn a_record_buffer_grown_past_the_limit_is_given_back_and_a_small_one_kept() {
        let mut large = vec![b'x'; 3 * KEEP_RECORD_BUFFER];
        reuse(&mut large);
        assert_eq!((large.len(), large.capacity()), (0, 0));
        let mut small = Vec::with_capacity(4096);
        small.extend_from_slice(b"paths");
        reuse(&mut small);
        assert_eq!((small.len(), small.capacity()), (0, 4096));
    }

    #[test]
    fn a_record_is_passed_over_a_piece_at_a_time_up_to_its_separator() {
        let long = format!("{}\x1eafter", "x".repeat(3 * DIFF_PIECE + 5));
        let (mut out, mut scratch) = (long.as_bytes(), Vec::new());
        assert!(skip_record(&mut out, &mut scratch).unwrap());
        assert_eq!(out, b"after");
        assert!(scratch.len() <= DIFF_PIECE, "{} bytes held", scratch.len());
        assert!(!skip_record(&mut out, &mut scratch).unwrap(), "no separator is left");
        assert!(out.is_empty());
    }

    /// A record of `git log` with the format [`log_args`] gives: `sha` repeated to a SHA's
    /// length, then `message` and what follows it (paths or a diff).
    fn record(sha: char, message: &[u8], after: &str) -> Vec<u8> {
        let mut out = b"\x1e".to_vec();
        let fields = [&sha.to_string().repeat(40), "", "A", "a@x", "2026-01-01T00:00:00Z", "C"];
        for f in fields.into_iter().chain(["c@x", "2026-01-02T00:00:00Z"]) {
            out.extend_from_slice(f.as_bytes());
            out.push(FIELD as u8);
        }
        out.extend_from_slice(message);
        out.push(FIELD as u8);
        out.extend_from_slice(after.as_bytes());
        out
    }

    proptest::proptest! {
        #[test]
        fn a_message_read_holding_a_few_bytes_is_the_start_of_the_message_read_whole_and_a_count(
            messages in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        b'a', b' ', b'\n', b'\r', 0xc3, 0xa9, 0xe2, 0x94, 0x80, 0xff, 0x80,
                    ]),
                    0..120,
                ),
                1..4,
            ),
            // Past a SHA's length: every field is held so, and a SHA cut short is no commit.
            held in 40..100usize,
            piece in proptest::sample::select(vec![1usize, 3, 7, 1 << 20]),
        ) {
            let (mut summaries, mut patches) = (Vec::new(), Vec::new());
            for (i, m) in messages.iter().enumerate() {
                let sha = char::from(b'a' + i as u8);
                summaries.extend(record(sha, m, "\n\nsrc/a.rs\ndocs/b.md\n"));
                patches.extend(record(sha, m, "\ndiff --git a/x b/x\n+1\n"));
            }
            // Both passes' records, holding `held` bytes of a field, through a reader of `piece`.
            let read = |held: usize, piece: usize| {
                let mut got = Vec::new();
                each_summary_in(std::io::BufReader::with_capacity(piece, &summaries[..]), held, |c| {
                    got.push(c);
                    true
                })
                .unwrap();
                let mut patched = Vec::new();
                each_patch_record_in(std::io::BufReader::with_capacity(piece, &patches[..]), DIFF_PIECE, held, |c| {
                    patched.push(c);
                    true
                })
                .unwrap();
                (got, patched)
            };
            let (whole, whole_patched) = read(usize::MAX, 1 << 20);
            let (cut, cut_patched) = read(held, piece);
            proptest::prop_assert_eq!((whole.len(), cut.len()), (messages.len(), messages.len()));
            for (w, c) in whole.iter().zip(&cut) {
                proptest::prop_assert_eq!(w.message_more, 0);
                proptest::prop_assert_eq!(&w.files, &["src/a.rs".to_string(), "docs/b.md".into()]);
                proptest::prop_assert_eq!((&w.sha, &w.files, &w.author), (&c.sha, &c.files, &c.author));
                if c.message_more == 0 {
                    proptest::prop_assert_eq!(&w.message, &c.message);
                } else {
                    proptest::prop_assert!(c.message.chars().count() <= held, "{:?}", c.message);
                    proptest::prop_assert!(w.message.starts_with(&c.message), "{:?} {:?}", w.message, c.message);
                    proptest::prop_assert_eq!(
                        w.message.chars().count(),
                        c.message.chars().count() + c.message_more
                    );
                }
            }
            // The second pass reads a message as the first does, and the diff after it the same
            // whatever it held of the message.
            proptest::prop_assert_eq!(whole_patched.len(), messages.len());
            proptest::prop_assert_eq!(cut_patched.len(), messages.len());
            for ((w, c), (wp, cp)) in whole.iter().zip(&cut).zip(whole_patched.iter().zip(&cut_patched)) {
                proptest::prop_assert_eq!((&w.message, w.message_more), (&wp.message, wp.message_more));
                proptest::prop_assert_eq!((&c.message, c.message_more), (&cp.message, cp.message_more));
                proptest::prop_assert_eq!(&wp.diff, &cp.diff);
                proptest::prop_assert_eq!(&cp.files, &["x".to_string()]);
            }
        }
    }

    #[test]
    fn patch_records_are_read_a_line_at_a_time_into_what_their_rows_keep() {
        let header = |sha: char| {
            [
                sha.to_string().repeat(40),
                String::new(),
                "A".into(),
                "a@x".into(),
                "2026-01-01T00:00:00Z".into(),
                "C".into(),
                "c@x".into(),
                "2026-01-02T00:00:00Z".into(),
                "subject\n\nbody\n".into(),
            ]
            .join("\u{1f}")
        };
        let long: String = (0..300).map(|i| format!("+line {i}\n")).collect();
        let first = format!("diff --git a/caf\u{e9}.rs b/caf\u{e9}.rs\n@@ -1 +1 @@ fn go(\n{long}");
        let second = "diff --git a/b.md b/b.md\n+\u{2502}\n";
        let mut out = b"before the first record\x1e".to_vec();
        out.extend(format!("{}\x1f\n\n{first}{second}\x1e", header('a')).as_bytes());
        // A merge: no diff, and a record that is not one (skipped).
        out.extend(format!("{}\x1f\n\x1enot a commit\x1e", header('b')).as_bytes());
        // Bytes that are not UTF-8 become U+FFFD, in the diff as in the rest; the last record
        // ends with the output, its last line without a newline.
        out.extend(format!("{}\x1f\n", header('c')).as_bytes());
        out.extend(b"diff --git a/x b/x\n+\xff\xe2\x82\n+\xff");
        let mut commits = Vec::new();
        let stopped = each_patch_record(&out[..], |c| {
            commits.push(c);
            true
        });
        assert!(matches!(stopped, Ok(false)));
        let shas: Vec<char> = commits.iter().map(|c| c.sha.chars().next().unwrap()).collect();
        assert_eq!(shas, ['a', 'b', 'c']);
        let a = &commits[0];
        assert_eq!(a.message, "subject\n\nbody");
        assert_eq!(a.files, ["caf\u{e9}.rs", "b.md"]);
        assert_eq!(a.diff, Diff::of(&format!("{first}{second}")));
        assert_eq!(a.diff.symbols, ["go"]);
        assert!(
            a.diff.head.text.ends_with("[… 104 more diff lines not shown]"),
            "{}",
            a.diff.head.text
        );
        assert_eq!((a.diff.files.len(), a.diff.files.path(1)), (2, "b.md"));
        assert_eq!((commits[1].files.len(), &commits[1].diff), (0, &Diff::default()));
        assert_eq!(commits[2].diff.head.text, "diff --git a/x b/x\n+\u{fffd}\u{fffd}\n+\u{fffd}");
        // A caller that stops is told so.
        let mut seen = 0;
        let stopped = each_patch_record(&out[..], |_| {
            seen += 1;
            false
        });
        assert!(matches!(stopped, Ok(true)) && seen == 1);
        // A reader that gives a byte at a time reads the same.
        let mut again = Vec::new();
        each_patch_record(std::io::BufReader::with_capacity(1, &out[..]), |c| {
            again.push(c);
            true
        })
        .unwrap();
        assert_eq!(again, commits);
        // So does one that reads a diff a few bytes at a time: a line comes in pieces, a
        // character of several bytes (é, │, the broken ones) split between two.
        for piece in [1, 2, 3, 5] {
            let mut again = Vec::new();
            each_patch_record_in(&out[..], piece, FIELD_HELD, |c| {
                again.push(c);
                true
            })
            .unwrap();
            assert_eq!(again, commits, "pieces of {piece} bytes");
        }
    }

    proptest::proptest! {
        #[test]
        fn text_decoded_in_pieces_is_the_text_decoded_whole(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![b'a', b'\n', 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x94, 0x82, 0xf0, 0x9f, 0xff]),
                    proptest::num::u8::ANY,
                ],
                0..64,
            ),
            cuts in proptest::collection::vec(0..64usize, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort();
            let mut pieces = Utf8Pieces::default();
            let (mut text, mut from) = (String::new(), 0);
            for &to in &cuts {
                text.push_str(&pieces.decode(&bytes[from..to], false));
                from = to;
            }
            text.push_str(&pieces.decode(&bytes[from..], true));
            proptest::prop_assert_eq!(text, String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn a_hunk_names_the_method_it_is_in_by_the_attributes_file_in_a_scratch_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let d = &tmp.path().join("repo");
        std::fs::create_dir(d).unwrap();
        git_ok(d, &["init", "-q", "-b", "main"]);
        // A method of 30 lines whose last line changes: its hunk starts inside it.
        let body = |n: usize| {
            let lines: String =
                (0..30).map(|i| format!("        let x{i} = {};\n", i * n / 29)).collect();
            format!("struct Args;\n\nimpl Args {{\n    fn parse(&self) {{\n{lines}    }}\n}}\n")
        };
        for n in 1..3 {
            std::fs::write(d.join("args.rs"), body(n)).unwrap();
            git_ok(d, &["add", "-A"]);
            git_ok(d, &["commit", "-q", "-m", &format!("commit {n}")]);
        }
        // Scratch directories no process holds (as a killed one's, or one left behind).
        let scratch_dirs = || {
            std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .filter(|e| {
                    let e = e.as_ref().unwrap();
                    e.file_name().to_string_lossy().starts_with(crate::temp::scratch::PREFIX)
                        && crate::temp::scratch::abandoned_lock(&e.path()).is_some()
                })
                .count()
        };
        let left_before = scratch_dirs();
        let head = rev_list(d).unwrap();
        let mut symbols = Vec::new();
        log_patches(d, head.iter().take(1), 1, |c| {
            symbols = c.diff.symbols.clone();
            true
        })
        .unwrap();
        // Without the rust driver git would name the last unindented line, `impl Args {`.
        assert_eq!(symbols, ["parse"]);
        assert_eq!(scratch_dirs(), left_before, "the attributes' scratch directory is removed");
    }

    #[test]
    fn the_first_pass_reads_again_the_chunks_it_cached_and_asks_git_for_the_new_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let d = &tmp.path().join("repo");
        std::fs::create_dir(d).unwrap();
        git_ok(d, &["init", "-q", "-b", "main"]);
        let commit = |n: usize| {
            std::fs::write(d.join(format!("f{}.rs", n % 3)), format!("// {n}\n")).unwrap();
            git_ok(d, &["add", "-A"]);
            git_ok(d, &["commit", "-q", "-m", &format!("commit {n}")]);
        };
        (0..7).for_each(commit);
        let cache = SummaryCache { dir: tmp.path().join("cache") };
        let summaries = |cache: Option<&SummaryCache>| {
            let mut commits = Vec::new();
            let listed = rev_list(d).unwrap();
            for_each_commit_in_chunks(d, Log::Summaries { listed: &listed, cache }, 2, 2, |c| {
                commits.push(c);
                true
            })
            .unwrap();
            commits
        };
        let files = || {
            let mut names: Vec<String> = std::fs::read_dir(&cache.dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let uncached = summaries(None);
        assert_eq!(summaries(Some(&cache)), uncached);
        // 7 commits in chunks of 2 counted from the oldest: 1 + 2 + 2 + 2, a file each.
        let first = files();
        assert_eq!(first.len(), 4, "{first:?}");
        assert!(first.iter().all(|f| f.ends_with(".log")), "no temporary file is left");
        // A chunk the cache holds is read from it: a message changed there (the same
        // commits) is what the pass gives.
        let oldest_chunk = first
            .iter()
            .map(|f| cache.dir.join(f))
            .find(|p| std::fs::read_to_string(p).unwrap().contains("commit 0"))
            .unwrap();
        let kept = std::fs::read_to_string(&oldest_chunk).unwrap();
        std::fs::write(&oldest_chunk, kept.replace("commit 0", "commit zero")).unwrap();
        let read = summaries(Some(&cache));
        assert_eq!(read.last().unwrap().message.trim(), "commit zero");
        assert_eq!(files(), first);
        std::fs::write(&oldest_chunk, &kept).unwrap();
        // A new commit changes only the newest chunk: the others keep their files, and the
        // one no longer asked for is removed.
        commit(7);
        let uncached = summaries(None);
        assert_eq!(uncached.len(), 8);
        assert_eq!(summaries(Some(&cache)), uncached);
        let second = files();
        assert_eq!(second.len(), 4, "{second:?}");
        assert_eq!(second.iter().filter(|f| first.contains(f)).count(), 3, "{first:?} {second:?}");
        // A file that does not hold its chunk's commits is read from git again and replaced.
        for f in &second {
            std::fs::write(
                cache.dir.join(f),
                "\u{1e}0123456789012345678901234567890123456789\u{1f}",
            )
            .unwrap();
        }
        assert_eq!(summaries(Some(&cache)), uncached);
        assert_eq!(files(), second);
        assert_eq!(summaries(Some(&cache)), uncached);
        // So is one cut short (its last record lost).
        let whole: Vec<(String, Vec<u8>)> =
            second.iter().map(|f| (f.clone(), std::fs::read(cache.dir.join(f)).unwrap())).collect();
        for (f, bytes) in &whole {
            let last = bytes.iter().rposition(|&b| b == RECORD).unwrap();
            std::fs::write(cache.dir.join(f), &bytes[..last]).unwrap();
        }
        assert_eq!(summaries(Some(&cache)), uncached);
        for (f, bytes) in &whole {
            assert_eq!(&std::fs::read(cache.dir.join(f)).unwrap(), bytes, "{f} written again");
        }
        // A pass stopped early removes nothing; a complete one removes what it did not use.
        git_ok(d, &["commit", "-q", "--amend", "-m", "commit 7, amended"]);
        let log = Log::Summaries { listed: &rev_list(d).unwrap(), cache: Some(&cache) };
        for_each_commit_in_chunks(d, log, 2, 2, |_| false).unwrap();
        let stopped = files();
        assert_eq!(stopped.len(), 5, "{stopped:?}");
        assert!(second.iter().all(|f| stopped.contains(f)), "{second:?} {stopped:?}");
        assert_eq!(summaries(Some(&cache)), summaries(None));
        let complete = files();
        assert_eq!(complete.len(), 4, "{complete:?}");
        assert_eq!(complete.iter().filter(|f| second.contains(f)).count(), 3);
        // What a killed build left while git wrote a chunk goes once it is an hour old.
        let (stale, fresh) = (cache.dir.join(".tmpSTALE"), cache.dir.join(".tmpFRESH"));
        for t in [&stale, &fresh] {
            std::fs::write(t, "partial").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        assert_eq!(summaries(Some(&cache)), summaries(None));
        assert!(!stale.exists() && fresh.exists());
    }

    #[test]
    fn commits_read_from_several_git_processes_equal_one_read_of_them_all() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        git_ok(d, &["init", "-q", "-b", "main"]);
        let commit = |m: &str| git_ok(d, &["commit", "-q", "--allow-empty", "-m", m]);
        for i in 0..4 {
            std::fs::write(d.join(format!("f{i}.rs")), format!("fn f{i}() {{}}\n")).unwrap();
            git_ok(d, &["add", "-A"]);
            commit(&format!("add f{i}\n\nwith a body\n\n"));
        }
        commit("an empty commit");
        std::fs::write(d.join("bin.dat"), [0u8, 1, 2, 255, 0]).unwrap();
        git_ok(d, &["add", "-A"]);
        commit("a binary file");
        git_ok(d, &["checkout", "-q", "-b", "side", "HEAD~2"]);
        std::fs::write(d.join("side.md"), "# side\n").unwrap();
        git_ok(d, &["add", "-A"]);
        commit("on a side branch");
        git_ok(d, &["checkout", "-q", "main"]);
        git_ok(d, &["merge", "-q", "--no-ff", "-m", "a merge", "side"]);
        std::fs::remove_file(d.join("f0.rs")).unwrap();
        git_ok(d, &["add", "-A"]);
        commit("the last: a file removed");
        let summaries = |chunk: usize, at_once: usize| {
            let mut commits = Vec::new();
            let listed = rev_list(d).unwrap();
            let log = Log::Summaries { listed: &listed, cache: None };
            for_each_commit_in_chunks(d, log, chunk, at_once, |c| {
                commits.push(c);
                true
            })
            .unwrap();
            commits
        };
        let all = summaries(usize::MAX, 1);
        assert_eq!(all.len(), 9);
        assert_eq!(all[0].message, "the last: a file removed");
        assert_eq!(all[0].files, ["f0.rs"]);
        for (chunk, at_once) in [(1, 1), (4, 1), (1, 3), (2, 4), (4, 2)] {
            let read = summaries(chunk, at_once);
            assert_eq!(read, all, "{chunk} commits a process, {at_once} processes at once");
        }
        // Stopping early in the first pass stops the processes running ahead.
        let mut seen = 0;
        let listed = rev_list(d).unwrap();
        for_each_commit_in_chunks(d, Log::Summaries { listed: &listed, cache: None }, 1, 4, |_| {
            seen += 1;
            seen < 2
        })
        .unwrap();
        assert_eq!(seen, 2);
        let shas: Vec<String> = all.into_iter().map(|c| c.sha).collect();
        let read = |chunk: usize| {
            let mut commits = Vec::new();
            let log = Log::Patches(Box::new(shas.iter().cloned()));
            for_each_commit_in_chunks(d, log, chunk, 1, |c| {
                commits.push(c);
                true
            })
            .unwrap();
            commits
        };
        let whole = read(usize::MAX);
        assert_eq!(
            whole.iter().map(|c| &c.sha).collect::<Vec<_>>(),
            shas.iter().collect::<Vec<_>>()
        );
        for chunk in [1, 2, 3, 8] {
            assert_eq!(read(chunk), whole, "{chunk} commits a process");
        }
        // Stopping early stops every process to come.
        let mut seen = 0;
        let log = Log::Patches(Box::new(shas.iter().cloned()));
        for_each_commit_in_chunks(d, log, 2, 1, |_| {
            seen += 1;
            seen < 3
        })
        .unwrap();
        assert_eq!(seen, 3);
        // A process that fails while it runs ahead is an error when its turn comes, naming
        // what git said, after the chunks before it were read.
        let bad = "0123456789abcdef0123456789abcdef01234567".to_string();
        let asked = [shas[0].clone(), shas[1].clone(), bad.clone(), shas[2].clone()];
        let mut before = 0;
        let err = log_ahead(d, asked.iter(), 1, 4, None, |_| {
            before += 1;
            true
        })
        .unwrap_err();
        assert_eq!(before, 2);
        assert!(matches!(&err, GitError::Failed { stderr, .. } if stderr.contains(&bad)), "{err}");
        // An empty repository has no commits, and that is no error.
        let empty = tempfile::tempdir().unwrap();
        git_ok(empty.path(), &["init", "-q"]);
        let mut any = false;
        let listed = rev_list(empty.path()).unwrap();
        assert_eq!(listed.len(), 0);
        for_each_commit(empty.path(), Log::Summaries { listed: &listed, cache: None }, |_| {
            any = true;
            true
        })
        .unwrap();
        assert!(!any);
    }

    #[test]
    fn a_patch_header_names_its_path_even_when_the_path_holds_b_slash() {
        assert_eq!(
            crate::sources::diff::patch_path("diff --git a/a b/c.rs b/a b/c.rs"),
            Some("a b/c.rs")
        );
        assert_eq!(crate::sources::diff::patch_path("diff --git a/x b/x"), Some("x"));
        assert_eq!(crate::sources::diff::patch_path("diff --git a/t  b/t "), Some("t "));
        assert_eq!(
            crate::sources::diff::patch_path("diff --git a/x b/y"),
            None,
            "a rename: not with --no-renames"
        );
        assert_eq!(
            crate::sources::diff::patch_path("diff --git \"a/q\\\"\" \"b/q\\\"\""),
            None,
            "quoted"
        );
        assert_eq!(crate::sources::diff::patch_path("diff --git a/"), None);
        assert_eq!(
            crate::sources::diff::patch_path("diff --git a/\u{e9}x b/\u{e9}x"),
            Some("\u{e9}x")
        );
        assert_eq!(crate::sources::diff::patch_path("index 1..2"), None);
    }

    #[test]
    fn blobs_over_the_cap_are_passed_over_and_the_rest_still_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_ok(d, &["init", "-q", "-b", "main"]);
        std::fs::write(d.join("small.rs"), "fn a() {}\n").unwrap();
        std::fs::write(d.join("big.rs"), "x".repeat(5000)).unwrap();
        std::fs::write(d.join("last.rs"), "fn b() {}\n").unwrap();
        git_ok(d, &["add", "-A"]);
        git_ok(d, &["commit", "-q", "-m", "files"]);
        let head = head(d).unwrap().unwrap();
        let paths: Vec<String> =
            ["big.rs", "small.rs", "gone.rs", "gone b.rs", "big.rs", "last.rs"]
                .map(String::from)
                .into();
        let mut seen = Vec::new();
        for_each_blob(d, &head, &paths, 100, |p, bytes| {
            seen.push((p.to_string(), String::from_utf8(bytes).unwrap()));
        })
        .unwrap();
        // The big blob is skipped (twice), the missing paths left out (one whose name, with its
        // spaces, looks like a header), and the stream stays in step: each path gets its own
        // content.
        assert_eq!(
            seen,
            [
                ("small.rs".to_string(), "fn a() {}\n".to_string()),
                ("last.rs".into(), "fn b() {}\n".into())
            ]
        );
        let mut all = 0;
        for_each_blob(d, &head, &paths, u64::MAX, |_, _| all += 1).unwrap();
        assert_eq!(all, 4);
    }

    #[test]
    fn both_passes_name_the_same_files_whatever_the_paths_hold() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_ok(d, &["init", "-q", "-b", "main"]);
        // Paths git quotes (a quote, a backslash), a non-ASCII one, one with " b/" inside it,
        // one ending in a space, one that looks like a patch header, and a plain one.
        let paths = [
            "caf\u{e9}.md",
            "say \"hi\".txt",
            "back\\slash.rs",
            "a b/c.rs",
            "trailing .rs",
            "diff --git x",
            "src/plain.rs",
        ];
        for (i, p) in paths.iter().enumerate() {
            let path = d.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("line {i}\n")).unwrap();
            git_ok(d, &["add", "-A"]);
            git_ok(d, &["commit", "-q", "-m", &format!("add {i}")]);
        }
        let mut summaries = Vec::new();
        let listed = rev_list(d).unwrap();
        for_each_commit(d, Log::Summaries { listed: &listed, cache: None }, |c| {
            summaries.push(c);
            true
        })
        .unwrap();
        let shas: Vec<String> = summaries.iter().map(|c| c.sha.clone()).collect();
        let request = || Log::Patches(Box::new(shas.iter().cloned()));
        let mut patches = Vec::new();
        for_each_commit(d, request(), |c| {
            patches.push(c);
            true
        })
        .unwrap();
        assert_eq!(summaries.len(), paths.len());
        // The second pass gives the commits in the order asked, with the same paths.
        assert_eq!(
            patches.iter().map(|c| &c.sha).collect::<Vec<_>>(),
            shas.iter().collect::<Vec<_>>()
        );
        for (s, p) in summaries.iter().zip(&patches) {
            assert_eq!(s.files, p.files, "commit {}", s.message);
            assert!(s.diff == Diff::default() && !p.diff.head.text.is_empty());
        }
        let named: Vec<&str> =
            summaries.iter().flat_map(|c| c.files.iter().map(String::as_str)).collect();
        for kept in ["caf\u{e9}.md", "a b/c.rs", "trailing .rs", "src/plain.rs", "diff --git x"] {
            assert!(named.contains(&kept), "{kept:?} in {named:?}");
        }
        assert_eq!(named.len(), 5, "the quoted paths are left out by both: {named:?}");
        // A caller that stops early ends the log without an error.
        let mut seen = 0;
        for_each_commit(d, request(), |_| {
            seen += 1;
            false
        })
        .unwrap();
        assert_eq!(seen, 1);
    }
}
