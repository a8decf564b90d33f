//! The `text/` tantivy index of a segment: schema, writer and BM25 search.

use std::path::Path;
use std::sync::Arc;

use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::query::QueryParser;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument};

/// The analyzer of prose fields: words, lowercased, English stop words dropped (so "on" and
/// "in" in a question do not match every document), English stems.
const PROSE: &str = "hubdex_prose";

fn register_analyzers(index: &Index) {
    let prose = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
        .filter(Stemmer::new(Language::English))
        .build();
    index.tokenizers().register(PROSE, prose);
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
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let prose = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(PROSE)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let plain = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("default")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        ord: b.add_u64_field("ord", FAST | INDEXED | STORED),
        row_type: b.add_text_field("type", STRING),
        repo: b.add_text_field("repo", STRING),
        title: b.add_text_field("title", prose.clone()),
        body: b.add_text_field("body", prose),
        path: b.add_text_field("path", plain),
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
    parser: QueryParser,
    fields: Fields,
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
        let fields = fields_of(&index.schema()).map_err(tv)?;
        let reader =
            index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(tv)?;
        let mut parser =
            QueryParser::for_index(&index, vec![fields.title, fields.body, fields.path]);
        parser.set_field_boost(fields.title, 2.0);
        parser.set_field_boost(fields.path, 1.5);
        Ok(TextIndex { reader, parser, fields, path: dir.to_path_buf() })
    }

    /// BM25 search: up to `limit` (ordinal, score) pairs, best first, keeping only ordinals
    /// `allow` accepts. Query syntax errors are forgiven (lenient parsing).
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        allow: Option<Arc<dyn Fn(u64) -> bool + Send + Sync>>,
    ) -> Result<Vec<(u64, f32)>, FormatError> {
        let tv = |source| FormatError::Tantivy { path: self.path.clone(), source };
        let (q, _errors) = self.parser.parse_query_lenient(query);
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
        let _ = self.fields.ord;
        Ok(out)
    }
}
