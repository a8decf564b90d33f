//! A regex planned into a trigram query: what a matching document must hold.
//!
//! Each node of the parsed regex (`regex_syntax`'s HIR) gives the query a match of it implies,
//! and, where the node can only match a few short strings, those strings: a concatenation
//! joins its neighbours' strings (so `a(b|c)d` requires `abd` or `acd`, not only their parts),
//! an alternation unions them, and a string set grown past [`MAX_STRINGS`] or a repetition
//! gives up its strings for the query its parts imply. Zero-width assertions (`\b`, `^`) match
//! no byte, so the literals beside them stay adjacent. Case folds as the index folds it: a
//! class of one letter in both cases (what `(?i)` makes of a letter) is that letter.

use regex_syntax::hir::{Class, Hir, HirKind};

use super::{NgramError, Query, trigram};

/// The most strings a node is kept as before its query stands for it: past it, the product
/// of a concatenation's alternatives would grow without bound.
const MAX_STRINGS: usize = 64;

/// The query a document must satisfy to hold a match of `pattern` (Rust `regex` syntax, as
/// `regex::Regex` reads it). A pattern with no literal of three bytes plans to [`Query::All`].
pub fn plan(pattern: &str) -> Result<Query, NgramError> {
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .map_err(|e| NgramError::Pattern { pattern: pattern.into(), detail: e.to_string() })?;
    Ok(info(&hir).query())
}

/// What a node tells of the text it matches.
struct Info {
    /// Every string it can match, when they are few (folded to lower case); `None` when not.
    exact: Option<Vec<Vec<u8>>>,
    /// What a match implies, beyond `exact`.
    required: Query,
}

impl Info {
    fn exact(strings: Vec<Vec<u8>>) -> Info {
        Info { exact: Some(strings), required: Query::All }
    }

    fn inexact(required: Query) -> Info {
        Info { exact: None, required }
    }

    /// The query the node implies: its strings' trigrams (any of them), and what it requires.
    fn query(&self) -> Query {
        let from_strings = match &self.exact {
            Some(strings) => any_of(strings),
            None => Query::All,
        };
        Query::and(vec![from_strings, self.required.clone()])
    }
}

/// Any of `strings`, each requiring all its trigrams.
fn any_of(strings: &[Vec<u8>]) -> Query {
    Query::or(strings.iter().map(|s| all_trigrams(s)).collect())
}

/// The trigrams of `s`, all required; `All` when it has none.
fn all_trigrams(s: &[u8]) -> Query {
    Query::and(s.windows(3).map(|w| Query::Trigram(trigram([w[0], w[1], w[2]]))).collect())
}

fn info(hir: &Hir) -> Info {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exact(vec![Vec::new()]),
        HirKind::Literal(lit) => Info::exact(vec![lit.0.to_ascii_lowercase()]),
        HirKind::Class(class) => match class_strings(class) {
            Some(strings) if strings.is_empty() => Info::inexact(Query::Nothing),
            Some(strings) => Info::exact(strings),
            None => Info::inexact(Query::All),
        },
        HirKind::Capture(cap) => info(&cap.sub),
        HirKind::Repetition(rep) => {
            let sub = info(&rep.sub);
            match (rep.min, rep.max) {
                // Exactly once: the node itself.
                (1, Some(1)) => sub,
                // Optional, or any number: nothing is implied (it may match nothing).
                (0, _) => Info::inexact(Query::All),
                // At least once: one match of the part is in the text.
                _ => Info::inexact(sub.query()),
            }
        }
        HirKind::Concat(parts) => concat(parts.iter().map(info)),
        HirKind::Alternation(parts) => {
            let infos: Vec<Info> = parts.iter().map(info).collect();
            if infos.iter().all(|i| i.exact.is_some()) {
                let mut strings: Vec<Vec<u8>> =
                    infos.into_iter().flat_map(|i| i.exact.expect("checked")).collect();
                strings.sort();
                strings.dedup();
                if strings.len() <= MAX_STRINGS {
                    return Info::exact(strings);
                }
                return Info::inexact(any_of(&strings));
            }
            Info::inexact(Query::or(infos.iter().map(Info::query).collect()))
        }
    }
}

/// A concatenation: runs of parts with exact strings are joined into the strings they make
/// together (a cross product, while it stays within [`MAX_STRINGS`]); a part without exact
/// strings ends the run, and what each part requires is required too.
fn concat(parts: impl Iterator<Item = Info>) -> Info {
    let mut required = Vec::new();
    let mut run: Vec<Vec<u8>> = vec![Vec::new()];
    let mut all_exact = true;
    for part in parts {
        match part.exact {
            Some(next) if run.len() * next.len() <= MAX_STRINGS => {
                let mut joined = Vec::with_capacity(run.len() * next.len());
                for a in &run {
                    for b in &next {
                        joined.push([a.as_slice(), b.as_slice()].concat());
                    }
                }
                joined.sort();
                joined.dedup();
                run = joined;
            }
            Some(next) => {
                required.push(any_of(&run));
                all_exact = false;
                run = next;
            }
            None => {
                required.push(any_of(&run));
                all_exact = false;
                run = vec![Vec::new()];
            }
        }
        required.push(part.required);
    }
    if all_exact {
        return Info { exact: Some(run), required: Query::and(required) };
    }
    required.push(any_of(&run));
    Info::inexact(Query::and(required))
}

/// The strings a class matches, each a character's UTF-8 bytes with ASCII letters folded to
/// lower case, when they are few (`[Hh]`, `[abc]`, and what `(?i)` makes of `k`: `k`, `K` and
/// the Kelvin sign, U+212A, whose three bytes the index holds as they are); `None` for a wide
/// class (`\w`, `[^x]`).
fn class_strings(class: &Class) -> Option<Vec<Vec<u8>>> {
    let mut strings = Vec::new();
    match class {
        Class::Unicode(c) => {
            for r in c.iter() {
                if r.end() as u32 - r.start() as u32 >= 8 {
                    return None;
                }
                for ch in r.start()..=r.end() {
                    let mut buf = [0u8; 4];
                    strings.push(ch.encode_utf8(&mut buf).as_bytes().to_ascii_lowercase());
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.iter() {
                if r.end() - r.start() >= 8 {
                    return None;
                }
                strings.extend((r.start()..=r.end()).map(|b| vec![b.to_ascii_lowercase()]));
            }
        }
    }
    strings.sort_unstable();
    strings.dedup();
    (strings.len() <= 8).then_some(strings)
}

#[cfg(test)]
mod tests {
    use super::super::trigrams_of;
    use super::*;

    fn t(s: &str) -> Query {
        let b = s.as_bytes();
        Query::Trigram(trigram([b[0], b[1], b[2]]))
    }

    #[test]
    fn a_literal_requires_its_trigrams_and_a_short_or_wide_pattern_requires_nothing() {
        assert_eq!(plan("parse").unwrap(), Query::And(vec![t("par"), t("ars"), t("rse")]));
        assert_eq!(plan("ab").unwrap(), Query::All);
        assert_eq!(plan(r"\w+\s*=\s*\d{5}").unwrap(), Query::All);
        assert_eq!(plan(r"(?i)ABC").unwrap(), t("abc"), "case folds as the index folds it");
        // `(?i)k` also matches the Kelvin sign (U+212A), `(?i)s` the long s (U+017F): their
        // bytes are another string a document may hold, not a reason to require nothing.
        let q = plan("(?i)tokio|smol").unwrap();
        assert_ne!(q, Query::All);
        for text in ["use tokio;", "TOKIO", "to\u{212a}io", "\u{17f}mol", "SMOL"] {
            assert!(q.accepts(&trigrams_of(text.as_bytes())), "{text}");
        }
        assert!(!q.accepts(&trigrams_of(b"async_std")));
        assert_eq!(plan(r"\bmod\b").unwrap(), t("mod"), "assertions keep literals adjacent");
        assert_eq!(plan("a(b|c)d").unwrap(), Query::Or(vec![t("abd"), t("acd")]));
        assert_eq!(
            plan("abcabc").unwrap(),
            Query::And(vec![t("abc"), t("bca"), t("cab")]),
            "a trigram the literal repeats is required once"
        );
        assert_eq!(plan("abc|xy").unwrap(), Query::All, "one branch requires nothing");
        assert!(matches!(plan("fn ("), Err(NgramError::Pattern { .. })));
    }

    /// A document a regex matches always satisfies the regex's plan: checked on this crate's
    /// own sources against patterns of every shape the planner takes apart.
    #[test]
    fn no_document_a_pattern_matches_is_left_out_by_its_plan() {
        let patterns = [
            r"fn \w+\(",
            r"\bunsafe\b",
            r"(?i)hashmap::with_capacity",
            r"impl\s+\w+\s+for\s+Vec<",
            r"Query::(And|Or)\(",
            r"[A-Z]{4}_[0-9]{3}",
            r"pub (fn|struct|enum) [A-Z]\w*",
            r"(ab|cd|ef)(gh|ij)kl",
            r"x*yzw+",
            r"trigram(s_of)?\(",
            r"(?i)[Tt]RIGRAM",
            r"\d+\.\d+",
        ];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut texts = Vec::new();
        for entry in walkdir::WalkDir::new(&src) {
            let entry = entry.unwrap();
            if entry.path().extension().is_some_and(|e| e == "rs") {
                texts.push(std::fs::read(entry.path()).unwrap());
            }
        }
        let mut matched = 0;
        for p in patterns {
            let query = plan(p).unwrap();
            let re = regex::bytes::Regex::new(p).unwrap();
            for text in &texts {
                if re.is_match(text) {
                    matched += 1;
                    assert!(query.accepts(&trigrams_of(text)), "{p}: {query:?} misses a match");
                }
            }
        }
        assert!(matched > 50, "only {matched} documents matched: the check is too weak");
    }

    proptest::proptest! {
        /// Random concatenations and alternations of literals, classes and repetitions: a
        /// string the regex matches always satisfies the plan.
        #[test]
        fn a_match_always_satisfies_the_plan(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "ab", "c", "de|fg", "(hi|jk)", "[lL]", "m+", "n*", "(op)?", "q{2}", r"\b",
                    "rst", "[uv]w", "x|y", "(?i)Zz",
                ]),
                1..7,
            ),
            padding in "[a-z ]{0,12}",
        ) {
            let pattern = parts.concat();
            let Ok(re) = regex::bytes::Regex::new(&pattern) else { return Ok(()) };
            let query = plan(&pattern).unwrap();
            // Strings the regex matches: each candidate made by a simple generator, kept when
            // it matches.
            for text in [pattern.replace(['(', ')', '|', '?', '*', '+', '\\', '[', ']'], ""),
                         format!("{padding}{}", parts.iter().map(|p| p.split('|').next().unwrap()).collect::<String>())] {
                let text = format!("{padding}{text}{padding}");
                if re.is_match(text.as_bytes()) {
                    proptest::prop_assert!(query.accepts(&trigrams_of(text.as_bytes())),
                        "{pattern:?} on {text:?}: {query:?}");
                }
            }
        }
    }
}
