//! The `text/` tantivy index of a segment: schema, writer and BM25 search.

use std::path::Path;
use std::sync::Arc;

use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    Token, TokenStream, Tokenizer,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

/// Format 1's analyzer of prose fields: words, lowercased, English stop words dropped, English
/// stems. Still registered so format-1 snapshots open.
const PROSE_V1: &str = "hubdex_prose";
/// Format 2's analyzer of `title` and `body`: code-aware words ([`CodeTokenizer`]), English stop
/// words dropped, English stems.
const WORDS: &str = "hubdex_words";
/// Format 2's analyzer of `symbol` and `path`: code-aware words, lowercased, nothing dropped.
const IDENT: &str = "hubdex_ident";

/// Per-field weights of the BM25 query.
const BOOST_TITLE: f32 = 2.0;
const BOOST_BODY: f32 = 1.0;
const BOOST_PATH: f32 = 1.5;
const BOOST_SYMBOL: f32 = 2.5;

fn register_analyzers(index: &Index) {
    let stop = || StopWordFilter::new(Language::English).expect("tantivy ships English stop words");
    let prose = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(stop())
        .filter(Stemmer::new(Language::English))
        .build();
    index.tokenizers().register(PROSE_V1, prose);
    let words = TextAnalyzer::builder(CodeTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(stop())
        .filter(Stemmer::new(Language::English))
        .build();
    index.tokenizers().register(WORDS, words);
    let ident = TextAnalyzer::builder(CodeTokenizer::default())
        .filter(RemoveLongFilter::limit(100))
        .build();
    index.tokenizers().register(IDENT, ident);
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

use crate::error::FormatError;
use crate::row::Row;

/// Heap for the single indexing thread; tantivy needs at least 15 MB per thread.
const WRITER_HEAP_BYTES: usize = 64 * 1024 * 1024;

/// The fields of the text index.
#[derive(Debug, Clone, Copy)]
struct Fields {
    ord: Field,
    row_type: Field,
    repo: Field,
    title: Field,
    body: Field,
    path: Field,
    /// Format 2 and later.
    symbol: Option<Field>,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let prose = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(WORDS)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let ident = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(IDENT)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        ord: b.add_u64_field("ord", FAST | INDEXED | STORED),
        row_type: b.add_text_field("type", STRING),
        repo: b.add_text_field("repo", STRING),
        title: b.add_text_field("title", prose.clone()),
        body: b.add_text_field("body", prose),
        path: b.add_text_field("path", ident.clone()),
        symbol: Some(b.add_text_field("symbol", ident)),
    };
    (b.build(), fields)
}

fn fields_of(schema: &Schema) -> Result<Fields, tantivy::TantivyError> {
    Ok(Fields {
        ord: schema.get_field("ord")?,
        row_type: schema.get_field("type")?,
        repo: schema.get_field("repo")?,
        title: schema.get_field("title")?,
        body: schema.get_field("body")?,
        path: schema.get_field("path")?,
        symbol: schema.get_field("symbol").ok(),
    })
}

/// Writes the text index of `rows` (ordinal = position) into `dir`, merged to one tantivy
/// segment.
pub fn write_text_index(dir: &Path, rows: &[Row]) -> Result<(), FormatError> {
    let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
    let (schema, f) = schema();
    let index = Index::create_in_dir(dir, schema).map_err(tv)?;
    register_analyzers(&index);
    let mut writer =
        index.writer_with_num_threads::<TantivyDocument>(1, WRITER_HEAP_BYTES).map_err(tv)?;
    for (ord, row) in rows.iter().enumerate() {
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.ord, ord as u64);
        doc.add_text(f.row_type, row.kind().as_str());
        doc.add_text(f.repo, &row.repo);
        if let Some(t) = &row.title {
            doc.add_text(f.title, t);
        }
        if !row.heading_path.is_empty() {
            doc.add_text(f.title, row.heading_path.join(" "));
        }
        doc.add_text(f.body, &row.body);
        if let Some(p) = &row.path {
            doc.add_text(f.path, p);
        }
        if let (Some(field), Some(sym)) = (f.symbol, &row.symbol) {
            doc.add_text(field, sym);
        }
        writer.add_document(doc).map_err(tv)?;
    }
    writer.commit().map_err(tv)?;
    let ids = index.searchable_segment_ids().map_err(tv)?;
    if ids.len() > 1 {
        writer.merge(&ids).wait().map_err(tv)?;
    }
    writer.garbage_collect_files().wait().map_err(tv)?;
    writer.wait_merging_threads().map_err(tv)?;
    Ok(())
}

/// A read-only, memory-mapped text index.
pub struct TextIndex {
    reader: IndexReader,
    /// The searched fields, their weights and the analyzer each was indexed with.
    fields: Vec<(Field, f32, TextAnalyzer)>,
    path: std::path::PathBuf,
}

impl std::fmt::Debug for TextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextIndex").field("path", &self.path).finish()
    }
}

impl TextIndex {
    /// Opens the index in `dir` (mmap). The caller has verified its files.
    pub fn open(dir: &Path) -> Result<Self, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let index = Index::open_in_dir(dir).map_err(tv)?;
        register_analyzers(&index);
        let f = fields_of(&index.schema()).map_err(tv)?;
        let reader =
            index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(tv)?;
        let mut weighted = vec![(f.title, BOOST_TITLE), (f.body, BOOST_BODY), (f.path, BOOST_PATH)];
        weighted.extend(f.symbol.map(|s| (s, BOOST_SYMBOL)));
        let mut fields = Vec::new();
        for (field, boost) in weighted {
            fields.push((field, boost, index.tokenizer_for_field(field).map_err(tv)?));
        }
        Ok(TextIndex { reader, fields, path: dir.to_path_buf() })
    }

    /// The BM25 query of a text: every word it analyses to, in every field, with the field's
    /// weight; a document scores by the words it has (no operators, so nothing is a syntax
    /// error).
    fn query(&self, text: &str) -> BooleanQuery {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, boost, analyzer) in &self.fields {
            let mut analyzer = analyzer.clone();
            let mut stream = analyzer.token_stream(text);
            let mut seen = std::collections::HashSet::new();
            while let Some(tok) = stream.next() {
                if seen.insert(tok.text.clone()) {
                    let term = Term::from_field_text(*field, &tok.text);
                    let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                    clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), *boost))));
                }
            }
        }
        BooleanQuery::new(clauses)
    }

    /// BM25 search: up to `limit` (ordinal, score) pairs, best first, keeping only ordinals
    /// `allow` accepts.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        allow: Option<Arc<dyn Fn(u64) -> bool + Send + Sync>>,
    ) -> Result<Vec<(u64, f32)>, FormatError> {
        let tv = |source| FormatError::Tantivy { path: self.path.clone(), source };
        let q = self.query(query);
        let searcher = self.reader.searcher();
        let top = TopDocs::with_limit(limit.max(1));
        let docs = match allow {
            Some(allow) => {
                let pred = move |ord: u64| allow(ord);
                searcher
                    .search(&q, &FilterCollector::new("ord".to_string(), pred, top))
                    .map_err(tv)?
            }
            None => searcher.search(&q, &top).map_err(tv)?,
        };
        let mut out = Vec::with_capacity(docs.len());
        for (score, addr) in docs {
            let seg = searcher.segment_reader(addr.segment_ord);
            let col = seg.fast_fields().u64("ord").map_err(tv)?;
            if let Some(ord) = col.first(addr.doc_id) {
                out.push((ord, score));
            }
        }
        Ok(out)
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
