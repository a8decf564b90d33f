//! The analyzers of the BM25 fields: the code-aware tokenizer and the per-field weights the
//! serving index ([`crate::serving`]) queries with.

use tantivy::Index;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    Token, TokenStream, Tokenizer, TokenizerManager,
};

/// Format 1's analyzer of prose fields: words, lowercased, English stop words dropped, English
/// stems. Still registered so format-1 snapshots open.
const PROSE_V1: &str = "hubdex_prose";
/// Format 2's analyzer of `title` and `body`: code-aware words ([`CodeTokenizer`]), English stop
/// words dropped, English stems.
pub(crate) const WORDS: &str = "hubdex_words";
/// Format 2's analyzer of `symbol` and `path`: code-aware words, lowercased, nothing dropped.
pub(crate) const IDENT: &str = "hubdex_ident";

/// Per-field weights of the BM25 query.
pub(crate) const BOOST_TITLE: f32 = 2.0;
pub(crate) const BOOST_BODY: f32 = 1.0;
pub(crate) const BOOST_PATH: f32 = 1.5;
pub(crate) const BOOST_SYMBOL: f32 = 2.5;

pub(crate) fn register_analyzers(index: &Index) {
    register_into(index.tokenizers());
}

/// The tokenizers our text fields name (with tantivy's own), for an index being created.
pub(crate) fn analyzers() -> TokenizerManager {
    let manager = TokenizerManager::default();
    register_into(&manager);
    manager
}

fn register_into(manager: &TokenizerManager) {
    let stop = || StopWordFilter::new(Language::English).expect("tantivy ships English stop words");
    let prose = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(stop())
        .filter(Stemmer::new(Language::English))
        .build();
    manager.register(PROSE_V1, prose);
    let words = TextAnalyzer::builder(CodeTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(stop())
        .filter(Stemmer::new(Language::English))
        .build();
    manager.register(WORDS, words);
    let ident = TextAnalyzer::builder(CodeTokenizer::default())
        .filter(RemoveLongFilter::limit(100))
        .build();
    manager.register(IDENT, ident);
}

/// Splits text into lowercased words the way code is written: an identifier is indexed whole
/// and as its parts (`parseHttpRequest` → `parsehttprequest`, `parse`, `http`, `request`;
/// `snake_case` and `kebab-case` alike), and a path of identifiers joined by `::`, `.`, `/` or
/// `-` is indexed whole as well as word by word (`std::fs::read`, `src/text.rs`). Parts share
/// their word's position.
#[derive(Debug, Clone, Default)]
pub(crate) struct CodeTokenizer {
    tokens: Vec<Token>,
}

/// The tokens of one text, handed out one by one.
#[derive(Debug)]
pub(crate) struct CodeTokenStream<'a> {
    tokens: &'a mut Vec<Token>,
    next: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream<'a> {
        self.tokens.clear();
        split_code(text, &mut self.tokens);
        CodeTokenStream { tokens: &mut self.tokens, next: 0 }
    }
}

impl TokenStream for CodeTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The joiner (`::`, `.`, `/`, `-`) at `i` when a word char follows it: its length in bytes.
fn joiner_at(text: &str, i: usize) -> Option<usize> {
    let rest = &text[i..];
    let len = if rest.starts_with("::") {
        2
    } else if rest.starts_with(['.', '/', '-']) {
        1
    } else {
        return None;
    };
    rest[len..].chars().next().filter(|c| is_word_char(*c)).map(|_| len)
}

/// The parts of one identifier: split at `_` and at case changes (`HTTPServer` → `HTTP`,
/// `Server`); empty when it has only one part.
fn ident_parts(word: &str) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut start: Option<usize> = None;
    for (k, &(i, c)) in chars.iter().enumerate() {
        if c == '_' {
            if let Some(s) = start.take() {
                parts.push((s, i));
            }
            continue;
        }
        let Some(s) = start else {
            start = Some(i);
            continue;
        };
        let prev = chars[k - 1].1;
        let next = chars.get(k + 1).map(|x| x.1);
        let boundary = c.is_uppercase()
            && (prev.is_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_uppercase() && next.is_some_and(char::is_lowercase)));
        if boundary {
            parts.push((s, i));
            start = Some(i);
        }
    }
    if let Some(s) = start {
        parts.push((s, word.len()));
    }
    if parts.len() < 2 { Vec::new() } else { parts }
}

fn split_code(text: &str, out: &mut Vec<Token>) {
    let mut position = 0usize;
    let push = |out: &mut Vec<Token>, from: usize, to: usize, position: usize| {
        out.push(Token {
            offset_from: from,
            offset_to: to,
            position,
            text: text[from..to].to_lowercase(),
            position_length: 1,
        });
    };
    let mut i = 0;
    while i < text.len() {
        let Some(c) = text[i..].chars().next() else { break };
        if !is_word_char(c) {
            i += c.len_utf8();
            continue;
        }
        // One compound: words joined by joiners.
        let start = i;
        let mut words: Vec<(usize, usize)> = Vec::new();
        loop {
            let w = i;
            while let Some(c) = text[i..].chars().next().filter(|c| is_word_char(*c)) {
                i += c.len_utf8();
            }
            words.push((w, i));
            match joiner_at(text, i) {
                Some(len) => i += len,
                None => break,
            }
        }
        if words.len() > 1 {
            push(out, start, i, position);
        }
        for (ws, we) in words {
            push(out, ws, we, position);
            for (ps, pe) in ident_parts(&text[ws..we]) {
                push(out, ws + ps, ws + pe, position);
            }
            position += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<(String, usize)> {
        let mut t = CodeTokenizer::default();
        let mut s = t.token_stream(text);
        let mut out = Vec::new();
        while let Some(tok) = s.next() {
            out.push((tok.text.clone(), tok.position));
        }
        out
    }

    fn words(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn identifiers_are_indexed_whole_and_split() {
        assert_eq!(words("parseHttpRequest"), ["parsehttprequest", "parse", "http", "request"]);
        assert_eq!(words("HTTPServer"), ["httpserver", "http", "server"]);
        assert_eq!(words("read_rows"), ["read_rows", "read", "rows"]);
        assert_eq!(words("kebab-case"), ["kebab-case", "kebab", "case"]);
        assert_eq!(words("std::fs::read"), ["std::fs::read", "std", "fs", "read"]);
        assert_eq!(
            words("formats/src/text.rs"),
            ["formats/src/text.rs", "formats", "src", "text", "rs"]
        );
        // Prose stays prose: a full stop or a spaced dash joins nothing.
        assert_eq!(words("It works. Then - done"), ["it", "works", "then", "done"]);
    }

    #[test]
    fn parts_share_their_word_position() {
        let t = tokens("call fooBar now");
        assert_eq!(
            t,
            [
                ("call".to_string(), 0),
                ("foobar".to_string(), 1),
                ("foo".to_string(), 1),
                ("bar".to_string(), 1),
                ("now".to_string(), 2)
            ]
        );
    }

    #[test]
    fn non_ascii_text_is_split_on_char_boundaries() {
        assert_eq!(words("naïve Ünïcode_wörd"), ["naïve", "ünïcode_wörd", "ünïcode", "wörd"]);
        assert!(words("日本語 テキスト").len() == 2);
    }
}
