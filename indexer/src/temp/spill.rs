//! Fixed-width records kept in an unnamed temporary file and read back a block at a time
//! ([`Spilled`]): what the compact history holds of every commit and the second pass reads one
//! commit at a time (SHAs, the cut order, commit numbers by SHA), out of the build's memory
//! once edges are made. The pages read stay in the kernel's page cache, not in the
//! process.
//! And sorted runs of keys in such a file ([`KeyRuns`]): the texts each earlier build segment
//! holds, which a rebuild's changed segments look their texts up in; and records of any length
//! ([`Records`]): a commit's edges until its rows are cut.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Bytes read from the file at once: the second pass reads its records in order (a block
/// serves about 200 SHAs), a binary search one block a probe.
pub(crate) const BLOCK: usize = 4 << 10;

/// Records of `width` bytes in an unnamed temporary file (removed by the system once closed,
/// however the build ends).
pub(crate) struct Spilled {
    width: usize,
    len: usize,
    reader: Mutex<Reader>,
    /// The first read that failed: its record read as zeros, and the build is stopped with
    /// this ([`Spilled::error`]) before anything it made is published.
    failed: OnceLock<String>,
}

/// The file and the block of it read last.
struct Reader {
    file: File,
    start: u64,
    block: Vec<u8>,
}

impl Reader {
    fn new(file: File) -> Reader {
        Reader { file, start: 0, block: Vec::new() }
    }

    /// The `len` bytes at `at` of the file's first `end`, from the block read last or else
    /// from a new one: the block holding `at`, and enough after it for the `len` bytes whole.
    fn bytes(&mut self, at: u64, len: usize, end: u64) -> std::io::Result<&[u8]> {
        let Reader { file, start, block } = self;
        let to = at + len as u64;
        if at < *start || to > *start + block.len() as u64 {
            let from = at - at % BLOCK as u64;
            let until = (from + (BLOCK + len) as u64).min(end);
            block.resize((until - from) as usize, 0);
            let read = file.seek(SeekFrom::Start(from)).and_then(|_| file.read_exact(block));
            if let Err(e) = read {
                block.clear();
                return Err(e);
            }
            *start = from;
        }
        Ok(&block[(at - *start) as usize..(to - *start) as usize])
    }
}

impl std::fmt::Debug for Spilled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spilled").field("width", &self.width).field("len", &self.len).finish()
    }
}

impl Spilled {
    /// Writes `bytes`, records of `width` bytes each, to an unnamed temporary file.
    pub(crate) fn write(bytes: &[u8], width: usize) -> std::io::Result<Spilled> {
        if width == 0 || !bytes.len().is_multiple_of(width) {
            let what = format!("{} bytes are not whole records of {width}", bytes.len());
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
        }
        let mut file = tempfile::tempfile()?;
        file.write_all(bytes)?;
        let reader = Reader::new(file);
        Ok(Spilled {
            width,
            len: bytes.len() / width,
            reader: Mutex::new(reader),
            failed: OnceLock::new(),
        })
    }

    /// How many records it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes of a record.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// Copies record `i` (of [`Self::len`]) into `out` ([`Self::width`] bytes). A read that
    /// fails gives zeros and is kept for [`Self::error`].
    pub(crate) fn read(&self, i: usize, out: &mut [u8]) {
        if i >= self.len {
            self.failed.get_or_init(|| format!("record {i} of {} asked for", self.len));
            out.fill(0);
            return;
        }
        let (at, width) = ((i * self.width) as u64, self.width);
        let mut reader = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        match reader.bytes(at, width, (self.len * width) as u64) {
            Ok(bytes) => out.copy_from_slice(bytes),
            Err(e) => {
                self.failed.get_or_init(|| e.to_string());
                out.fill(0);
            }
        }
    }

    /// What the first failed read said, if one failed.
    pub(crate) fn error(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }
}

/// Commit numbers (`u32`), held or spilled.
#[derive(Debug)]
pub(crate) enum Numbers {
    Held(Vec<u32>),
    Spilled(Spilled),
}

impl Default for Numbers {
    fn default() -> Self {
        Numbers::Held(Vec::new())
    }
}

impl Numbers {
    pub(crate) fn len(&self) -> usize {
        match self {
            Numbers::Held(v) => v.len(),
            Numbers::Spilled(s) => s.len(),
        }
    }

    /// Number `i`, if there is one.
    pub(crate) fn get(&self, i: usize) -> Option<u32> {
        match self {
            Numbers::Held(v) => v.get(i).copied(),
            Numbers::Spilled(s) if i < s.len() => {
                let mut b = [0u8; 4];
                s.read(i, &mut b);
                Some(u32::from_le_bytes(b))
            }
            Numbers::Spilled(_) => None,
        }
    }

    /// The first place where `pred` no longer holds (the numbers partitioned by it), as
    /// [`slice::partition_point`].
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(u32) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid) {
                Some(n) if pred(n) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// The same numbers in a temporary file (left held where it cannot be written).
    pub(crate) fn spill(&mut self) -> std::io::Result<()> {
        if let Numbers::Held(v) = self {
            let bytes: Vec<u8> = v.iter().flat_map(|n| n.to_le_bytes()).collect();
            *self = Numbers::Spilled(Spilled::write(&bytes, 4)?);
        }
        Ok(())
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Numbers::Held(v) => v.capacity() * size_of::<u32>(),
            Numbers::Spilled(_) => BLOCK,
        }
    }

    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            Numbers::Held(_) => None,
            Numbers::Spilled(s) => s.error(),
        }
    }
}

/// Records of any length in an unnamed temporary file, each read back whole by where it starts:
/// what a commit's message states of edges, kept until its rows are cut
/// ([`crate::graph::edges::MessageEdges`]). The file is made with the first record.
#[derive(Debug, Default)]
pub(crate) struct Records {
    file: Option<Mutex<File>>,
    end: u64,
}

impl Records {
    /// Whether no record was ever added.
    pub(crate) fn is_empty(&self) -> bool {
        self.file.is_none()
    }

    /// Adds `bytes` as a record; returns where it starts.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> std::io::Result<u64> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(Mutex::new(tempfile::tempfile()?)),
        };
        let file = file.get_mut().unwrap_or_else(PoisonError::into_inner);
        file.seek(SeekFrom::Start(self.end))?;
        file.write_all(&(bytes.len() as u64).to_le_bytes())?;
        file.write_all(bytes)?;
        let at = self.end;
        self.end += 8 + bytes.len() as u64;
        Ok(at)
    }

    /// The record that starts `at` ([`Self::append`]'s answer).
    pub(crate) fn read(&self, at: u64) -> std::io::Result<Vec<u8>> {
        let file = self.file.as_ref().ok_or_else(|| std::io::Error::other("no record kept"))?;
        let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
        file.seek(SeekFrom::Start(at))?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)?;
        let mut bytes = vec![0u8; u64::from_le_bytes(len) as usize];
        file.read_exact(&mut bytes)?;
        Ok(bytes)
    }
}

/// Bytes of strings [`Strings`] gathers before it writes them out.
const STRINGS_PENDING: usize = 64 << 10;

/// Strings kept one after another in an unnamed temporary file, each read back by its number
/// a block at a time: what a commit's message says of edges, and the titles merge rows list
/// ([`crate::graph::history::History`]), out of the build's memory. What is held is each
/// string's end (8 bytes), the block read last and the strings not yet written out. A read is
/// answered from those strings when it asks for one, so strings may be read while more are
/// added.
pub(crate) struct Strings {
    ends: Vec<u64>,
    file: Mutex<StringsFile>,
    /// The first write or read that failed: strings read after it are empty, and the build is
    /// stopped with this ([`Strings::error`]) before anything it made is published.
    failed: OnceLock<String>,
}

struct StringsFile {
    /// The file, and the block of it read last.
    reader: Reader,
    /// The bytes written to the file so far.
    written: u64,
    /// The strings after those, not yet written.
    pending: Vec<u8>,
}

impl std::fmt::Debug for Strings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Strings").field("len", &self.ends.len()).finish()
    }
}

impl Strings {
    /// No strings yet, in a new unnamed temporary file.
    pub(crate) fn new() -> std::io::Result<Strings> {
        let file = StringsFile {
            reader: Reader::new(tempfile::tempfile()?),
            written: 0,
            pending: Vec::new(),
        };
        Ok(Strings { ends: Vec::new(), file: Mutex::new(file), failed: OnceLock::new() })
    }

    /// Adds `s` as the next string.
    pub(crate) fn push(&mut self, s: &str) {
        let end = self.ends.last().copied().unwrap_or(0) + s.len() as u64;
        self.ends.push(end);
        let f = self.file.get_mut().unwrap_or_else(PoisonError::into_inner);
        f.pending.extend_from_slice(s.as_bytes());
        if f.pending.len() >= STRINGS_PENDING {
            let StringsFile { reader: Reader { file, .. }, written, pending } = f;
            let result = file.seek(SeekFrom::Start(*written)).and_then(|_| file.write_all(pending));
            if let Err(e) = result {
                // What could not be written reads as empty, and the build stops on the error.
                self.failed.get_or_init(|| e.to_string());
            }
            *written += pending.len() as u64;
            pending.clear();
        }
    }

    /// String `i` (of those pushed); empty past the end or where a write or read failed (kept
    /// for [`Self::error`]).
    pub(crate) fn get(&self, i: usize) -> String {
        let Some(&to) = self.ends.get(i) else {
            self.failed.get_or_init(|| format!("string {i} of {} asked for", self.ends.len()));
            return String::new();
        };
        if self.failed.get().is_some() {
            return String::new();
        }
        let from = if i == 0 { 0 } else { self.ends[i - 1] };
        let mut guard = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let StringsFile { reader, written, pending } = &mut *guard;
        let bytes = if from >= *written {
            // Not written out yet: strings are written out whole, so all of it is pending.
            &pending[(from - *written) as usize..(to - *written) as usize]
        } else {
            match reader.bytes(from, (to - from) as usize, *written) {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.failed.get_or_init(|| e.to_string());
                    return String::new();
                }
            }
        };
        match std::str::from_utf8(bytes) {
            Ok(s) => s.to_string(),
            Err(e) => {
                self.failed.get_or_init(|| format!("string {i} read back is not UTF-8: {e}"));
                String::new()
            }
        }
    }

    /// Gives back what the ends grew by and did not fill.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.ends.shrink_to_fit();
    }

    /// What it holds in memory: the ends, the strings not yet written and the block read last.
    pub(crate) fn heap_bytes(&self) -> usize {
        let f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        self.ends.capacity() * size_of::<u64>() + f.pending.capacity() + f.reader.block.capacity()
    }

    /// What the first failed write or read said, if one failed.
    pub(crate) fn error(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }
}

/// Sets of 8-byte keys, each kept sorted as a run in an unnamed temporary file: which runs
/// hold any of a sorted list of keys is answered by reading them back a block at a time
/// beside that list. A rebuild keeps here the texts each earlier build segment holds (a run
/// a segment), so what it holds in memory is one block, not every text of the repository.
pub(crate) struct KeyRuns {
    file: File,
    /// Each run's first key and its end, counted in keys from the file's start.
    runs: Vec<(u64, u64)>,
    /// Where the next run goes, in keys.
    end: u64,
}

/// Keys read from the file at once (64 KiB).
const KEYS_A_BLOCK: usize = 8 << 10;

impl std::fmt::Debug for KeyRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRuns").field("runs", &self.runs.len()).field("keys", &self.end).finish()
    }
}

impl KeyRuns {
    /// No runs yet, in a new unnamed temporary file.
    pub(crate) fn new() -> std::io::Result<KeyRuns> {
        Ok(KeyRuns { file: tempfile::tempfile()?, runs: Vec::new(), end: 0 })
    }

    /// Adds the set of `keys` (in any order, repeats allowed) as the next run.
    pub(crate) fn push(&mut self, keys: impl IntoIterator<Item = u64>) -> std::io::Result<()> {
        let mut keys: Vec<u64> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
        self.file.seek(SeekFrom::Start(self.end * 8))?;
        self.file.write_all(&bytes)?;
        let len = keys.len() as u64;
        self.runs.push((self.end, self.end + len));
        self.end += len;
        Ok(())
    }

    /// The runs (by number, ascending) that hold at least one of `wanted` (in any order,
    /// repeats allowed). Each run is read until its first such key, a block at a time.
    pub(crate) fn holding(
        &mut self,
        wanted: impl IntoIterator<Item = u64>,
    ) -> std::io::Result<Vec<usize>> {
        let mut wanted: Vec<u64> = wanted.into_iter().collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut out = Vec::new();
        if wanted.is_empty() {
            return Ok(out);
        }
        let mut buf = vec![0u8; KEYS_A_BLOCK * 8];
        for (n, &(start, end)) in self.runs.iter().enumerate() {
            // `i` walks `wanted` and the block's keys walk the run, both ascending.
            let (mut at, mut i) = (start, 0);
            'run: while at < end && i < wanted.len() {
                let keys = (end - at).min(KEYS_A_BLOCK as u64) as usize;
                let block = &mut buf[..keys * 8];
                self.file.seek(SeekFrom::Start(at * 8))?;
                self.file.read_exact(block)?;
                for bytes in block.chunks_exact(8) {
                    let key = u64::from_le_bytes(std::array::from_fn(|j| bytes[j]));
                    while i < wanted.len() && wanted[i] < key {
                        i += 1;
                    }
                    match wanted.get(i) {
                        Some(&w) if w == key => {
                            out.push(n);
                            break 'run;
                        }
                        Some(_) => {}
                        None => break 'run,
                    }
                }
                at += keys as u64;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_records_read_back_as_written_in_any_order_across_blocks() {
        // 23-byte records: most blocks end inside one.
        let width = 23;
        let records: Vec<Vec<u8>> =
            (0..1000u32).map(|i| (0..width as u32).map(|k| (i * 31 + k) as u8).collect()).collect();
        let spilled = Spilled::write(&records.concat(), width).unwrap();
        assert_eq!(spilled.len(), 1000);
        let mut out = vec![0u8; width];
        // Forward, backward, and jumping about.
        let order: Vec<usize> =
            (0..1000).chain((0..1000).rev()).chain((0..1000).map(|i| (i * 7919) % 1000)).collect();
        for i in order {
            spilled.read(i, &mut out);
            assert_eq!(out, records[i], "record {i}");
        }
        assert_eq!(spilled.error(), None);
        // A record past the end reads as zeros, and the error is kept for the cut to stop on.
        spilled.read(1000, &mut out);
        assert!(out.iter().all(|&b| b == 0));
        assert!(spilled.error().is_some_and(|e| e.contains("record 1000 of 1000")));
    }

    #[test]
    fn spilled_numbers_answer_as_held_ones() {
        let held: Vec<u32> = (0..5000u32).map(|i| i * 3 + 1).collect();
        let mut numbers = Numbers::Held(held.clone());
        numbers.spill().unwrap();
        assert!(matches!(numbers, Numbers::Spilled(_)));
        assert_eq!(numbers.len(), held.len());
        for (i, n) in held.iter().enumerate() {
            assert_eq!(numbers.get(i), Some(*n));
        }
        assert_eq!(numbers.get(held.len()), None);
        for probe in [0, 1, 2, 3, 4, 7_000, 14_999, 15_000, 20_000] {
            assert_eq!(
                numbers.partition_point(|n| n < probe),
                held.partition_point(|&n| n < probe),
                "{probe}"
            );
        }
        assert!(numbers.heap_bytes() < held.len());
    }

    #[test]
    fn strings_read_back_as_pushed_in_any_order_while_more_are_pushed() {
        // Empty ones, ones longer than a block, and characters of several bytes; enough of them
        // that most are written out and the last are still pending.
        let texts: Vec<String> = (0..3000)
            .map(|i| match i % 5 {
                0 => String::new(),
                1 => "ä€𝄞".repeat(i % 700),
                _ => format!("{i} ").repeat(i % 97),
            })
            .collect();
        let mut strings = Strings::new().unwrap();
        for (i, t) in texts.iter().enumerate() {
            strings.push(t);
            // Read back as they are pushed: the newest, and one far behind.
            assert_eq!(strings.get(i), *t, "string {i} as pushed");
            assert_eq!(strings.get(i / 3), texts[i / 3], "string {} at {i}", i / 3);
        }
        let order: Vec<usize> =
            (0..3000).chain((0..3000).rev()).chain((0..3000).map(|i| i * 7919 % 3000)).collect();
        for i in order {
            assert_eq!(strings.get(i), texts[i], "string {i}");
        }
        assert_eq!(strings.error(), None);
        // What is held: the ends, the pending strings and one block, not the strings.
        let total: usize = texts.iter().map(String::len).sum();
        assert!(strings.heap_bytes() < total / 4, "{} of {total}", strings.heap_bytes());
        // Past the end: empty, and the error is kept for the build to stop on.
        assert_eq!(strings.get(3000), "");
        assert!(strings.error().is_some_and(|e| e.contains("string 3000 of 3000")));
    }

    #[test]
    fn strings_whose_file_was_tampered_with_or_cut_short_read_as_empty_and_say_why() {
        let texts: Vec<String> = (0..2000).map(|i| format!("Fixes #{i}").repeat(8)).collect();
        let pushed = || {
            let mut strings = Strings::new().unwrap();
            texts.iter().for_each(|t| strings.push(t));
            strings
        };
        // A byte that cannot be UTF-8 where the first string was written.
        let mut tampered = pushed();
        let file = &mut tampered.file.get_mut().unwrap().reader.file;
        file.seek(SeekFrom::Start(0)).unwrap();
        file.write_all(&[0xff]).unwrap();
        assert_eq!(tampered.get(0), "");
        assert!(tampered.error().is_some_and(|e| e.contains("string 0 read back is not UTF-8")));
        // Every later read is empty too: what it would give is not what was pushed.
        assert_eq!(tampered.get(1), "");
        // The file cut short: a read past its end fails.
        let mut cut = pushed();
        cut.file.get_mut().unwrap().reader.file.set_len(10).unwrap();
        assert_eq!(cut.get(1000), "");
        assert!(cut.error().is_some(), "a read past the cut is reported");
    }

    #[test]
    fn records_read_back_as_appended_in_any_order() {
        let mut records = Records::default();
        assert!(records.is_empty());
        let texts: Vec<Vec<u8>> = (0..300).map(|i| vec![i as u8; i * 37 % 5000]).collect();
        let at: Vec<u64> = texts.iter().map(|t| records.append(t).unwrap()).collect();
        assert!(!records.is_empty());
        for i in (0..300).rev().chain((0..300).map(|i| i * 7 % 300)) {
            assert_eq!(records.read(at[i]).unwrap(), texts[i], "record {i}");
        }
        // Appending after reads still adds at the end.
        let last = records.append(b"last").unwrap();
        assert_eq!(records.read(last).unwrap(), b"last");
        assert_eq!(records.read(at[0]).unwrap(), texts[0]);
        // Where no record starts: an error, not a panic.
        assert!(Records::default().read(0).is_err());
    }

    proptest::proptest! {
        #[test]
        fn the_runs_holding_a_key_are_those_a_search_of_each_set_finds(
            // Small keys, so that runs and the keys asked for meet; runs past a block long.
            runs in proptest::collection::vec(
                proptest::collection::vec(0u64..40_000, 0..20_000), 0..6),
            wanted in proptest::collection::vec(0u64..40_000, 0..50),
        ) {
            let mut spilled = KeyRuns::new().unwrap();
            for run in &runs {
                spilled.push(run.iter().copied()).unwrap();
            }
            let expected: Vec<usize> = runs
                .iter()
                .enumerate()
                .filter(|(_, run)| run.iter().any(|k| wanted.contains(k)))
                .map(|(n, _)| n)
                .collect();
            proptest::prop_assert_eq!(spilled.holding(wanted.iter().copied()).unwrap(), expected);
        }
    }
}
