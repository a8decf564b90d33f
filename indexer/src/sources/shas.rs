//! Commit SHAs held compactly: packed as bytes when every SHA is lowercase hex of one length,
//! as text otherwise, or in a temporary file once only read in order ([`Shas`]); and strings
//! kept end to end in one buffer ([`Texts`]). What `git rev-list` lists and what the history
//! keeps of each commit.

use crate::temp::spill::Spilled;

/// Strings kept end to end in one buffer: one allocation, not one per string.
#[derive(Debug, Default)]
pub(crate) struct Texts {
    text: String,
    ends: Vec<usize>,
}

impl Texts {
    /// How many strings are kept.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether none is.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * size_of::<usize>()
    }

    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    pub(crate) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// The most hex digits a packed SHA has (a SHA-256 repository's 64; SHA-1's are 40).
const MAX_DIGITS: usize = 64;

/// Commit SHAs, one after another. git's are lowercase hex of one length (40, or 64 in a
/// SHA-256 repository), kept two digits to a byte: 20 bytes a commit where text and its end
/// took 48. Names that are not (a test's `m1`) turn every SHA kept so far, and every later one,
/// into text.
#[derive(Debug)]
pub(crate) enum Shas {
    /// `digits` hex digits a SHA (0 before the first), `digits / 2` bytes each in `bytes`.
    Packed {
        digits: usize,
        bytes: Vec<u8>,
    },
    Text(Texts),
    /// Packed as [`Shas::Packed`], in a temporary file once the second pass reads them one at
    /// a time ([`crate::graph::history::History::spill`]).
    Spilled(Spilled),
}

impl Default for Shas {
    fn default() -> Self {
        Shas::Packed { digits: 0, bytes: Vec::new() }
    }
}

/// Whether `sha` can be packed beside SHAs of `digits` digits (any even number up to
/// [`MAX_DIGITS`] when `digits` is 0).
fn packs(sha: &str, digits: usize) -> bool {
    let fits = if digits == 0 { sha.len() <= MAX_DIGITS } else { sha.len() == digits };
    fits && !sha.is_empty()
        && sha.len().is_multiple_of(2)
        && sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Shas {
    pub(crate) fn len(&self) -> usize {
        match self {
            Shas::Packed { digits: 0, .. } => 0,
            Shas::Packed { digits, bytes } => bytes.len() / (digits / 2),
            Shas::Text(texts) => texts.ends.len(),
            Shas::Spilled(file) => file.len(),
        }
    }

    pub(crate) fn push(&mut self, sha: &str) {
        match self {
            Shas::Packed { digits, bytes } if packs(sha, *digits) => {
                *digits = sha.len();
                let start = bytes.len();
                bytes.resize(start + sha.len() / 2, 0);
                // `packs` let only hex digits of an even count through: this cannot fail.
                let _ = hex::decode_to_slice(sha, &mut bytes[start..]);
            }
            Shas::Text(texts) => texts.push(sha),
            Shas::Packed { .. } | Shas::Spilled(_) => {
                let mut texts = Texts::default();
                for kept in self.iter() {
                    texts.push(&kept);
                }
                texts.push(sha);
                *self = Shas::Text(texts);
            }
        }
    }

    pub(crate) fn get(&self, i: usize) -> Sha<'_> {
        match self {
            Shas::Packed { digits, bytes } => {
                let width = digits / 2;
                Sha::unpack(&bytes[i * width..(i + 1) * width])
            }
            Shas::Text(texts) => Sha::Text(texts.get(i)),
            Shas::Spilled(file) => {
                let mut packed = [0u8; MAX_DIGITS / 2];
                let packed = &mut packed[..file.width()];
                file.read(i, packed);
                Sha::unpack(packed)
            }
        }
    }

    /// SHAs kept as [`Shas::push`] keeps them, the buffer shrunk to fit.
    pub(crate) fn of<S: AsRef<str>>(shas: impl IntoIterator<Item = S>) -> Shas {
        let mut kept = Shas::default();
        for sha in shas {
            kept.push(sha.as_ref());
        }
        kept.shrink_to_fit();
        kept
    }

    /// Every SHA, in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = Sha<'_>> {
        (0..self.len()).map(|i| self.get(i))
    }

    /// SHA `i` against SHA `j`, as text compares (packed digits compare the same).
    pub(crate) fn cmp(&self, i: usize, j: usize) -> std::cmp::Ordering {
        match self {
            Shas::Packed { digits, bytes } => {
                let width = digits / 2;
                bytes[i * width..(i + 1) * width].cmp(&bytes[j * width..(j + 1) * width])
            }
            Shas::Text(texts) => texts.get(i).cmp(texts.get(j)),
            Shas::Spilled(_) => self.get(i).cmp(&self.get(j)),
        }
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        match self {
            Shas::Packed { bytes, .. } => bytes.shrink_to_fit(),
            Shas::Text(texts) => texts.shrink_to_fit(),
            Shas::Spilled(_) => {}
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Shas::Packed { bytes, .. } => bytes.capacity(),
            Shas::Text(texts) => texts.heap_bytes(),
            Shas::Spilled(_) => crate::temp::spill::BLOCK,
        }
    }

    /// Packed SHAs into a temporary file (text ones, a test's names, stay).
    pub(crate) fn spill(&mut self) -> std::io::Result<()> {
        if let Shas::Packed { digits, bytes } = self
            && *digits > 0
        {
            let file = Spilled::write(bytes, *digits / 2)?;
            *self = Shas::Spilled(file);
        }
        Ok(())
    }

    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            Shas::Spilled(file) => file.error(),
            _ => None,
        }
    }
}

/// A commit's SHA as [`crate::graph::history::History::sha`] gives it: its digits unpacked on the stack, or the text
/// kept. Reads as a `&str`.
#[derive(Clone, Copy)]
pub(crate) enum Sha<'a> {
    Hex { digits: usize, hex: [u8; MAX_DIGITS] },
    Text(&'a str),
}

impl Sha<'_> {
    /// The SHA packed in `packed` (two digits a byte, at most [`MAX_DIGITS`] / 2 bytes).
    pub(crate) fn unpack(packed: &[u8]) -> Self {
        let digits = packed.len() * 2;
        let mut hex = [0u8; MAX_DIGITS];
        // Two lowercase digits a byte, into exactly twice the bytes: this cannot fail.
        let _ = hex::encode_to_slice(packed, &mut hex[..digits]);
        Sha::Hex { digits, hex }
    }
}

impl std::ops::Deref for Sha<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            // Hex digits are ASCII: never the default.
            Sha::Hex { digits, hex } => std::str::from_utf8(&hex[..*digits]).unwrap_or_default(),
            Sha::Text(text) => text,
        }
    }
}

impl AsRef<str> for Sha<'_> {
    fn as_ref(&self) -> &str {
        self
    }
}

impl std::fmt::Display for Sha<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for Sha<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq<&str> for Sha<'_> {
    fn eq(&self, other: &&str) -> bool {
        **self == **other
    }
}
