//! The serving index's schema: its fields and analyzers, and opening its one segment.

use std::path::Path;

use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, INDEXED, IndexRecordOption, STORED, STRING,
    Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{
    DateTime, DocId, DocSet, Index, IndexReader, ReloadPolicy, Searcher, SegmentReader, TERMINATED,
    Term,
};

use crate::error::FormatError;
use crate::text::{IDENT, WORDS};

use super::Fields;

/// Which analyzer each BM25 field is indexed with. Format 3 on writes [`Analyzers::current`]; a
/// format-1 or -2 segment upgraded on open keeps the analyzers it was built with, so its scores
/// do not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Analyzers {
    pub(crate) prose: String,
    pub(crate) path: String,
    pub(crate) symbol: bool,
}

impl Analyzers {
    pub(crate) fn current() -> Analyzers {
        Analyzers { prose: WORDS.into(), path: IDENT.into(), symbol: true }
    }

    /// The analyzers of an older `text/` index, read from its schema.
    pub(crate) fn of_index(dir: &Path) -> Result<Analyzers, FormatError> {
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let schema = Index::open_in_dir(dir).map_err(tv)?.schema();
        let tokenizer = |name: &str| -> Result<String, FormatError> {
            let field = schema.get_field(name).map_err(tv)?;
            match schema.get_field_entry(field).field_type() {
                tantivy::schema::FieldType::Str(o) => Ok(o
                    .get_indexing_options()
                    .map(|i| i.tokenizer().to_string())
                    .unwrap_or_else(|| "default".into())),
                _ => Err(FormatError::Schema {
                    what: dir.display().to_string(),
                    detail: format!("field {name} is not a text field"),
                }),
            }
        };
        Ok(Analyzers {
            prose: tokenizer("title")?,
            path: tokenizer("path")?,
            symbol: schema.get_field("symbol").is_ok(),
        })
    }
}

pub(super) fn schema(an: &Analyzers) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let analysed = |tokenizer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer)
                .set_index_option(IndexRecordOption::WithFreqs),
        )
    };
    let date = DateOptions::default()
        .set_indexed()
        .set_fast()
        .set_precision(DateTimePrecision::Microseconds);
    let fields = Fields {
        ord: b.add_u64_field("ord", FAST | INDEXED),
        id: b.add_text_field("id", STRING | FAST),
        row_type: b.add_text_field("type", STRING),
        repo: b.add_text_field("repo", STRING | FAST),
        entity: b.add_text_field("entity", STRING | FAST),
        state: b.add_text_field("state", STRING),
        labels: b.add_text_field("labels", STRING),
        milestone: b.add_text_field("milestone", STRING),
        assignees: b.add_text_field("assignees", STRING),
        author: b.add_text_field("author", STRING),
        paths: b.add_text_field("paths", STRING),
        updated_at: b.add_date_field("updated_at", date.clone()),
        created_at: b.add_date_field("created_at", date),
        title: b.add_text_field("title", analysed(&an.prose)),
        body: b.add_text_field("body", analysed(&an.prose)),
        path: b.add_text_field("path", analysed(&an.path)),
        symbol: an.symbol.then(|| b.add_text_field("symbol", analysed(&an.path))),
        row: b.add_bytes_field("row", STORED),
    };
    (b.build(), fields)
}

pub(super) fn fields_of(schema: &Schema) -> Result<Fields, tantivy::TantivyError> {
    Ok(Fields {
        ord: schema.get_field("ord")?,
        id: schema.get_field("id")?,
        row_type: schema.get_field("type")?,
        repo: schema.get_field("repo")?,
        entity: schema.get_field("entity")?,
        state: schema.get_field("state")?,
        labels: schema.get_field("labels")?,
        milestone: schema.get_field("milestone")?,
        assignees: schema.get_field("assignees")?,
        author: schema.get_field("author")?,
        paths: schema.get_field("paths")?,
        updated_at: schema.get_field("updated_at")?,
        created_at: schema.get_field("created_at")?,
        title: schema.get_field("title")?,
        body: schema.get_field("body")?,
        path: schema.get_field("path")?,
        symbol: schema.get_field("symbol").ok(),
        row: schema.get_field("row")?,
    })
}

pub(super) fn micros(t: chrono::DateTime<chrono::Utc>) -> DateTime {
    DateTime::from_timestamp_micros(t.timestamp_micros())
}

/// Commits `writer`, merges what it wrote into one tantivy segment (in whatever order the
/// index's meta lists the segments: a hash map's; the serving index, whose order matters, is
/// written in parts by `ServingIndexWriter` instead) and removes the files the merge left
/// behind.
pub(crate) fn commit_as_one_segment<D: tantivy::Document>(
    index: &Index,
    mut writer: tantivy::IndexWriter<D>,
    dir: &Path,
) -> Result<(), FormatError> {
    let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
    writer.commit().map_err(tv)?;
    let segments = index.searchable_segments().map_err(tv)?;
    if segments.len() > 1 {
        let ids: Vec<_> = segments.iter().map(|segment| segment.id()).collect();
        writer.merge(&ids).wait().map_err(tv)?;
    }
    writer.garbage_collect_files().wait().map_err(tv)?;
    writer.wait_merging_threads().map_err(tv)?;
    Ok(())
}

/// A searcher over the index in `dir` that never reloads, keeping `cache_blocks` decompressed
/// doc-store blocks.
pub(crate) fn open_searcher(
    index: &Index,
    dir: &Path,
    cache_blocks: usize,
) -> Result<(IndexReader, Searcher), FormatError> {
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .doc_store_cache_num_blocks(cache_blocks)
        .try_into()
        .map_err(|source| FormatError::Tantivy { path: dir.to_path_buf(), source })?;
    let searcher = reader.searcher();
    Ok((reader, searcher))
}

/// The first doc holding `term` in one tantivy segment, by the term dictionary and postings.
pub(crate) fn doc_of_term(
    seg: &SegmentReader,
    term: &Term,
    path: &Path,
) -> Result<Option<DocId>, FormatError> {
    let inv = seg
        .inverted_index(term.field())
        .map_err(|source| FormatError::Tantivy { path: path.to_path_buf(), source })?;
    let io = |e| FormatError::io(path, e);
    let Some(info) = inv.get_term_info(term).map_err(io)? else { return Ok(None) };
    let postings = inv.read_postings_from_terminfo(&info, IndexRecordOption::Basic).map_err(io)?;
    let doc = postings.doc();
    Ok((doc != TERMINATED).then_some(doc))
}

/// The terms of `field` in one tantivy segment that start with `prefix`, in order, at most
/// `limit`, from the term dictionary.
pub(crate) fn terms_with_prefix(
    seg: &SegmentReader,
    field: Field,
    prefix: &str,
    limit: usize,
    path: &Path,
) -> Result<Vec<String>, FormatError> {
    let inv = seg
        .inverted_index(field)
        .map_err(|source| FormatError::Tantivy { path: path.to_path_buf(), source })?;
    let mut stream = inv
        .terms()
        .range()
        .ge(prefix.as_bytes())
        .into_stream()
        .map_err(|e| FormatError::io(path, e))?;
    let mut out = Vec::new();
    while stream.advance() && out.len() < limit {
        let key = String::from_utf8_lossy(stream.key()).into_owned();
        if !key.starts_with(prefix) {
            break;
        }
        out.push(key);
    }
    Ok(out)
}
