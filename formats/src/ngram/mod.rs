//! A trigram index for exact search, as Russ Cox's codesearch and zoekt keep one: each
//! document's set of byte trigrams (ASCII letters folded to lower case), posting lists of
//! document numbers per trigram, and a regex planned into a trigram query ([`plan()`]) whose
//! candidates are then verified with the real regex engine. A pattern with no usable literal
//! plans to [`Query::All`]: every document is a candidate, and the caller scans.
//!
//! `plan.rs` turns a regex into a [`Query`]; `index.rs` writes an index ([`NgramWriter`]) and
//! reads one from its bytes ([`NgramIndex`]).

mod index;
mod plan;

pub use index::{NGRAM_HELD_PAIRS, NgramIndex, NgramWriter};
pub use plan::plan;

/// A trigram: three bytes, ASCII letters folded to lower case, packed big-endian in a `u32`.
pub type Trigram = u32;

/// Packs `t`'s three bytes, ASCII letters folded to lower case.
pub fn trigram(t: [u8; 3]) -> Trigram {
    let [a, b, c] = t.map(|b| b.to_ascii_lowercase());
    u32::from_be_bytes([0, a, b, c])
}

/// Every trigram of `text`, folded, sorted and without repeats: what a document is indexed by.
pub fn trigrams_of(text: &[u8]) -> Vec<Trigram> {
    let mut all: Vec<Trigram> = text.windows(3).map(|w| trigram([w[0], w[1], w[2]])).collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Which documents may match a pattern: trigrams they must hold, combined. A document that
/// matches the pattern always satisfies its query; the converse is for the regex to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// Every document (the pattern has no literal of three bytes the query could require).
    All,
    /// No document (the pattern can match nothing, such as an empty class).
    Nothing,
    /// Documents holding this trigram.
    Trigram(Trigram),
    /// Documents satisfying every part.
    And(Vec<Query>),
    /// Documents satisfying at least one part.
    Or(Vec<Query>),
}

impl Query {
    /// Whether a document with the sorted trigram set `trigrams` satisfies the query.
    pub fn accepts(&self, trigrams: &[Trigram]) -> bool {
        match self {
            Query::All => true,
            Query::Nothing => false,
            Query::Trigram(t) => trigrams.binary_search(t).is_ok(),
            Query::And(parts) => parts.iter().all(|q| q.accepts(trigrams)),
            Query::Or(parts) => parts.iter().any(|q| q.accepts(trigrams)),
        }
    }

    /// `parts` required together, simplified: `All` parts dropped, `Nothing` wins, nested
    /// `And`s flattened, each repeated part once.
    fn and(parts: Vec<Query>) -> Query {
        let mut flat = Vec::new();
        for p in parts {
            match p {
                Query::All => {}
                Query::Nothing => return Query::Nothing,
                Query::And(inner) => inner.into_iter().for_each(|q| push_once(&mut flat, q)),
                other => push_once(&mut flat, other),
            }
        }
        match flat.len() {
            0 => Query::All,
            1 => flat.pop().expect("one part"),
            _ => Query::And(flat),
        }
    }

    /// Any of `parts`, simplified: an `All` part makes the whole `All`, `Nothing` parts
    /// dropped, nested `Or`s flattened, each repeated part once.
    fn or(parts: Vec<Query>) -> Query {
        let mut flat = Vec::new();
        for p in parts {
            match p {
                Query::All => return Query::All,
                Query::Nothing => {}
                Query::Or(inner) => inner.into_iter().for_each(|q| push_once(&mut flat, q)),
                other => push_once(&mut flat, other),
            }
        }
        match flat.len() {
            0 => Query::Nothing,
            1 => flat.pop().expect("one part"),
            _ => Query::Or(flat),
        }
    }
}

/// Adds `q` to `parts` unless an equal part is there already: a literal like `abcabc` names
/// `abc` twice, and its postings need reading once.
fn push_once(parts: &mut Vec<Query>, q: Query) {
    if !parts.contains(&q) {
        parts.push(q);
    }
}

/// Why a pattern could not be planned or an index read.
#[derive(Debug, thiserror::Error)]
pub enum NgramError {
    /// The pattern is not a regex (Rust `regex` syntax).
    #[error("pattern {pattern:?}: {detail}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What the parser said.
        detail: String,
    },
    /// The index's bytes are not an index of this layout.
    #[error("trigram index: {0}")]
    Damaged(String),
}
