//! rows.parquet: the Arrow schema of a row, its writer and its reader.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, FixedSizeListArray, FixedSizeListBuilder,
    Float32Array, Float32Builder, Int32Array, Int64Array, ListArray, ListBuilder, RecordBatch,
    StringArray, StringBuilder, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::FormatError;
use crate::row::{Row, RowType};

/// Rows per Parquet row group: small enough to read a page of results cheaply.
const ROW_GROUP_ROWS: usize = 8192;

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn ts(name: &str) -> Field {
    Field::new(name, DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true)
}

fn list(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), false)
}

/// The Arrow schema of rows.parquet for embeddings of `dim` dimensions.
pub fn row_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("id", false),
        utf8("type", false),
        utf8("repo", false),
        utf8("entity", false),
        Field::new("number", DataType::Int64, true),
        utf8("title", true),
        utf8("body", false),
        Field::new("body_chars", DataType::Int64, false),
        Field::new("truncated", DataType::Boolean, false),
        utf8("url", true),
        utf8("state", true),
        utf8("state_reason", true),
        Field::new("draft", DataType::Boolean, true),
        list("labels"),
        utf8("milestone", true),
        list("assignees"),
        utf8("author", true),
        utf8("committer", true),
        ts("created_at"),
        ts("updated_at"),
        ts("closed_at"),
        ts("merged_at"),
        utf8("base_ref", true),
        utf8("head_ref", true),
        utf8("tag", true),
        Field::new("in_reply_to", DataType::Int64, true),
        utf8("path", true),
        Field::new("line_start", DataType::Int64, true),
        Field::new("line_end", DataType::Int64, true),
        list("heading_path"),
        Field::new("chunk_index", DataType::Int32, false),
        utf8("commit_sha", true),
        list("files_changed"),
        utf8("language", true),
        utf8("symbol", true),
        list("refs"),
        utf8("content_sha256", false),
        Field::new("embed_chars", DataType::Int64, true),
        Field::new(
            "embedding",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, false)),
                dim as i32,
            ),
            false,
        ),
        // Null for the rows without a second vector (format 4; absent in older files).
        Field::new(
            "title_embedding",
            DataType::List(Arc::new(Field::new("item", DataType::Float32, false))),
            true,
        ),
    ]))
}

fn strings<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.collect::<StringArray>())
}

fn lists<'a>(values: impl Iterator<Item = &'a Vec<String>>) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for v in values {
        for s in v {
            b.values().append_value(s);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn times<'a>(values: impl Iterator<Item = Option<&'a DateTime<Utc>>>) -> ArrayRef {
    Arc::new(
        values
            .map(|t| t.map(|t| t.timestamp_micros()))
            .collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC"),
    )
}

/// Assembles rows into one Arrow batch. Every row must carry a `dim`-long embedding, and a
/// `dim`-long title embedding or none.
pub fn rows_to_batch(rows: &[Row], dim: usize) -> Result<RecordBatch, FormatError> {
    if let Some(bad) = rows.iter().find(|r| r.embedding.len() != dim) {
        return Err(FormatError::Schema {
            what: format!("row {}", bad.id),
            detail: format!("embedding has {} values, the model gives {dim}", bad.embedding.len()),
        });
    }
    if let Some(bad) =
        rows.iter().find(|r| !r.title_embedding.is_empty() && r.title_embedding.len() != dim)
    {
        return Err(FormatError::Schema {
            what: format!("row {}", bad.id),
            detail: format!(
                "title_embedding has {} values, the model gives {dim}",
                bad.title_embedding.len()
            ),
        });
    }
    let mut title_emb = ListBuilder::new(Float32Builder::new()).with_field(Arc::new(Field::new(
        "item",
        DataType::Float32,
        false,
    )));
    for r in rows {
        if r.title_embedding.is_empty() {
            title_emb.append_null();
        } else {
            title_emb.values().append_slice(&r.title_embedding);
            title_emb.append(true);
        }
    }
    let mut emb = FixedSizeListBuilder::with_capacity(
        Float32Builder::with_capacity(rows.len() * dim),
        dim as i32,
        rows.len(),
    )
    .with_field(Arc::new(Field::new("item", DataType::Float32, false)));
    for r in rows {
        emb.values().append_slice(&r.embedding);
        emb.append(true);
    }
    // Rows staged before embedding have no vectors: a zero-width list, whose length Arrow
    // takes from its validity buffer.
    let embeddings: ArrayRef = if dim == 0 {
        Arc::new(FixedSizeListArray::try_new(
            Arc::new(Field::new("item", DataType::Float32, false)),
            0,
            Arc::new(Float32Array::from(Vec::<f32>::new())),
            Some(arrow::buffer::NullBuffer::new_valid(rows.len())),
        )?)
    } else {
        Arc::new(emb.finish())
    };
    let mut truncated = BooleanBuilder::new();
    let mut draft = BooleanBuilder::new();
    for r in rows {
        truncated.append_value(r.truncated);
        draft.append_option(r.draft);
    }
    let columns: Vec<ArrayRef> = vec![
        strings(rows.iter().map(|r| Some(r.id.as_str()))),
        strings(rows.iter().map(|r| Some(r.kind().as_str()))),
        strings(rows.iter().map(|r| Some(r.repo.as_str()))),
        strings(rows.iter().map(|r| Some(r.entity.as_str()))),
        Arc::new(rows.iter().map(|r| r.number).collect::<Int64Array>()),
        strings(rows.iter().map(|r| r.title.as_deref())),
        strings(rows.iter().map(|r| Some(r.body.as_str()))),
        Arc::new(rows.iter().map(|r| Some(r.body_chars)).collect::<Int64Array>()),
        Arc::new(truncated.finish()),
        strings(rows.iter().map(|r| r.url.as_deref())),
        strings(rows.iter().map(|r| r.state.as_deref())),
        strings(rows.iter().map(|r| r.state_reason.as_deref())),
        Arc::new(draft.finish()),
        lists(rows.iter().map(|r| &r.labels)),
        strings(rows.iter().map(|r| r.milestone.as_deref())),
        lists(rows.iter().map(|r| &r.assignees)),
        strings(rows.iter().map(|r| r.author.as_deref())),
        strings(rows.iter().map(|r| r.committer.as_deref())),
        times(rows.iter().map(|r| r.created_at.as_ref())),
        times(rows.iter().map(|r| r.updated_at.as_ref())),
        times(rows.iter().map(|r| r.closed_at.as_ref())),
        times(rows.iter().map(|r| r.merged_at.as_ref())),
        strings(rows.iter().map(|r| r.base_ref.as_deref())),
        strings(rows.iter().map(|r| r.head_ref.as_deref())),
        strings(rows.iter().map(|r| r.tag.as_deref())),
        Arc::new(rows.iter().map(|r| r.in_reply_to).collect::<Int64Array>()),
        strings(rows.iter().map(|r| r.path.as_deref())),
        Arc::new(rows.iter().map(|r| r.line_start).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.line_end).collect::<Int64Array>()),
        lists(rows.iter().map(|r| &r.heading_path)),
        Arc::new(rows.iter().map(|r| Some(r.chunk_index)).collect::<Int32Array>()),
        strings(rows.iter().map(|r| r.commit_sha.as_deref())),
        lists(rows.iter().map(|r| &r.files_changed)),
        strings(rows.iter().map(|r| r.language.as_deref())),
        strings(rows.iter().map(|r| r.symbol.as_deref())),
        lists(rows.iter().map(|r| &r.refs)),
        strings(rows.iter().map(|r| Some(r.content_sha256.as_str()))),
        Arc::new(rows.iter().map(|r| r.embed_chars.map(|n| n as i64)).collect::<Int64Array>()),
        embeddings,
        Arc::new(title_emb.finish()),
    ];
    Ok(RecordBatch::try_new(row_schema(dim), columns)?)
}

/// A zstd (level 3) Parquet writer of `schema` into a new file at `path`, every Parquet file of
/// a segment is written through; `row_group_rows` caps a row group (Parquet's default when
/// `None`).
pub(crate) fn zstd_writer(
    path: &Path,
    schema: SchemaRef,
    row_group_rows: Option<usize>,
) -> Result<ArrowWriter<std::fs::File>, FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::create(path).map_err(|e| FormatError::io(path, e))?;
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).map_err(pq)?));
    if let Some(n) = row_group_rows.filter(|&n| n > 0) {
        props = props.set_max_row_group_row_count(Some(n));
    }
    ArrowWriter::try_new(file, schema, Some(props.build())).map_err(pq)
}

/// Every record batch of the Parquet file at `path`, every column.
pub(crate) fn read_batches(path: &Path) -> Result<ParquetRecordBatchReader, FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?.build().map_err(pq)
}

/// Column `name` of `batch`, a batch of the file at `path`, as utf8.
pub(crate) fn utf8_column<'b>(
    batch: &'b RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'b StringArray, FormatError> {
    batch.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<StringArray>()).ok_or_else(
        || FormatError::Schema {
            what: path.display().to_string(),
            detail: format!("column {name} is missing or not utf8"),
        },
    )
}

/// Writes rows to `path` as zstd Parquet. Rows are written in the order given; callers sort
/// them so the same rows always give the same bytes.
pub fn write_rows(path: &Path, rows: &[Row], dim: usize) -> Result<(), FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let mut writer = zstd_writer(path, row_schema(dim), Some(ROW_GROUP_ROWS))?;
    for chunk in rows.chunks(ROW_GROUP_ROWS) {
        writer.write(&rows_to_batch(chunk, dim)?).map_err(pq)?;
    }
    writer.close().map_err(pq)?;
    Ok(())
}

/// Reads the rows of a rows.parquet file, with their embeddings (and title embeddings) when
/// `with_embeddings`.
pub fn read_rows(path: &Path, with_embeddings: bool) -> Result<Vec<Row>, FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    let schema = builder.schema().clone();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| {
            with_embeddings
                || !matches!(schema.field(i).name().as_str(), "embedding" | "title_embedding")
        })
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), keep);
    let reader =
        builder.with_projection(mask).with_batch_size(ROW_GROUP_ROWS).build().map_err(pq)?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch?;
        batch_to_rows(&batch, &mut rows)
            .map_err(|detail| FormatError::Schema { what: path.display().to_string(), detail })?;
    }
    Ok(rows)
}

struct Cols<'a>(&'a RecordBatch);

impl<'a> Cols<'a> {
    fn get<T: 'static>(&self, name: &str) -> Result<Option<&'a T>, String> {
        match self.0.column_by_name(name) {
            None => Ok(None),
            Some(c) => c.as_any().downcast_ref::<T>().map(Some).ok_or_else(|| {
                format!("column {name} has type {}, not the row schema's", c.data_type())
            }),
        }
    }
    fn need<T: 'static>(&self, name: &str) -> Result<&'a T, String> {
        self.get(name)?.ok_or_else(|| format!("column {name} is missing"))
    }
}

fn opt_str(a: Option<&StringArray>, i: usize) -> Option<String> {
    a.and_then(|a| (!a.is_null(i)).then(|| a.value(i).to_string()))
}

fn opt_i64(a: Option<&Int64Array>, i: usize) -> Option<i64> {
    a.and_then(|a| (!a.is_null(i)).then(|| a.value(i)))
}

fn opt_time(a: Option<&TimestampMicrosecondArray>, i: usize) -> Option<DateTime<Utc>> {
    a.and_then(|a| (!a.is_null(i)).then(|| DateTime::from_timestamp_micros(a.value(i))).flatten())
}

fn str_list(a: Option<&ListArray>, i: usize) -> Vec<String> {
    let Some(a) = a else { return Vec::new() };
    if a.is_null(i) {
        return Vec::new();
    }
    let v = a.value(i);
    let Some(s) = v.as_any().downcast_ref::<StringArray>() else { return Vec::new() };
    (0..s.len()).filter(|&j| !s.is_null(j)).map(|j| s.value(j).to_string()).collect()
}

/// The values of one vector cell of column `name`.
fn floats(cell: ArrayRef, name: &str) -> Result<Vec<f32>, String> {
    let f = cell
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| format!("{name} items are not float32"))?;
    Ok(f.values().to_vec())
}

/// Appends the rows of one batch to `out`. Optional columns may be absent (a projection).
pub fn batch_to_rows(batch: &RecordBatch, out: &mut Vec<Row>) -> Result<(), String> {
    let c = Cols(batch);
    let id = c.need::<StringArray>("id")?;
    let kind = c.need::<StringArray>("type")?;
    let repo = c.need::<StringArray>("repo")?;
    let entity = c.need::<StringArray>("entity")?;
    let body = c.get::<StringArray>("body")?;
    let title = c.get::<StringArray>("title")?;
    let number = c.get::<Int64Array>("number")?;
    let body_chars = c.get::<Int64Array>("body_chars")?;
    let truncated = c.get::<BooleanArray>("truncated")?;
    let draft = c.get::<BooleanArray>("draft")?;
    let (url, state, state_reason) = (c.get("url")?, c.get("state")?, c.get("state_reason")?);
    let (milestone, author, committer) =
        (c.get("milestone")?, c.get("author")?, c.get("committer")?);
    let (base_ref, head_ref, tag) = (c.get("base_ref")?, c.get("head_ref")?, c.get("tag")?);
    let (path, commit_sha) = (c.get("path")?, c.get("commit_sha")?);
    let (language, symbol, sha) =
        (c.get("language")?, c.get("symbol")?, c.get::<StringArray>("content_sha256")?);
    let (created, updated, closed, merged) =
        (c.get("created_at")?, c.get("updated_at")?, c.get("closed_at")?, c.get("merged_at")?);
    let (in_reply_to, line_start, line_end) =
        (c.get("in_reply_to")?, c.get("line_start")?, c.get("line_end")?);
    let (labels, assignees, heading_path) =
        (c.get("labels")?, c.get("assignees")?, c.get("heading_path")?);
    let (files_changed, refs) = (c.get("files_changed")?, c.get("refs")?);
    let chunk_index = c.get::<Int32Array>("chunk_index")?;
    let embed_chars = c.get::<Int64Array>("embed_chars")?;
    let embedding = c.get::<FixedSizeListArray>("embedding")?;
    let title_embedding = c.get::<ListArray>("title_embedding")?;
    for i in 0..batch.num_rows() {
        let row_type: RowType =
            kind.value(i).parse().map_err(|e: crate::row::UnknownRowType| e.to_string())?;
        let embedding = match embedding {
            Some(e) => floats(e.value(i), "embedding")?,
            None => Vec::new(),
        };
        let title_embedding = match title_embedding {
            Some(e) if !e.is_null(i) => floats(e.value(i), "title_embedding")?,
            _ => Vec::new(),
        };
        out.push(Row {
            id: id.value(i).to_string(),
            row_type: Some(row_type),
            repo: repo.value(i).to_string(),
            entity: entity.value(i).to_string(),
            number: opt_i64(number, i),
            title: opt_str(title, i),
            body: opt_str(body, i).unwrap_or_default(),
            body_chars: opt_i64(body_chars, i).unwrap_or_default(),
            truncated: truncated.is_some_and(|a| a.value(i)),
            url: opt_str(url, i),
            state: opt_str(state, i),
            state_reason: opt_str(state_reason, i),
            draft: draft.and_then(|a| (!a.is_null(i)).then(|| a.value(i))),
            labels: str_list(labels, i),
            milestone: opt_str(milestone, i),
            assignees: str_list(assignees, i),
            author: opt_str(author, i),
            committer: opt_str(committer, i),
            created_at: opt_time(created, i),
            updated_at: opt_time(updated, i),
            closed_at: opt_time(closed, i),
            merged_at: opt_time(merged, i),
            base_ref: opt_str(base_ref, i),
            head_ref: opt_str(head_ref, i),
            tag: opt_str(tag, i),
            in_reply_to: opt_i64(in_reply_to, i),
            path: opt_str(path, i),
            line_start: opt_i64(line_start, i),
            line_end: opt_i64(line_end, i),
            heading_path: str_list(heading_path, i),
            chunk_index: chunk_index.map_or(0, |a| a.value(i)),
            commit_sha: opt_str(commit_sha, i),
            files_changed: str_list(files_changed, i),
            language: opt_str(language, i),
            symbol: opt_str(symbol, i),
            refs: str_list(refs, i),
            content_sha256: opt_str(sha, i).unwrap_or_default(),
            embedding,
            title_embedding,
            embed_chars: opt_i64(embed_chars, i).map(|n| n as usize),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let mut a = Row::new(RowType::Commit, "o/r", "commit/abc", 0);
        a.title = Some("fix the parser".into());
        a.set_body("long body");
        a.files_changed = vec!["src/a.rs".into(), "src/b.rs".into()];
        a.created_at = DateTime::from_timestamp(1_700_000_000, 0);
        a.commit_sha = Some("abc".into());
        a.embedding = vec![0.5, -0.5];
        a.title_embedding = vec![0.25, 0.75];
        let mut b = Row::new(RowType::Doc, "o/r", "file/README.md", 1);
        b.heading_path = vec!["Intro".into(), "Install".into()];
        b.set_body("run it");
        b.embedding = vec![1.0, 0.0];
        write_rows(&path, &[a.clone(), b.clone()], 2).unwrap();
        assert_eq!(read_rows(&path, true).unwrap(), vec![a.clone(), b]);
        let without = read_rows(&path, false).unwrap();
        assert!(without[0].embedding.is_empty() && without[0].title_embedding.is_empty());
        assert_eq!(without[0].files_changed, a.files_changed);
    }

    #[test]
    fn a_wrong_embedding_length_is_refused_by_name() {
        let mut a = Row::new(RowType::Doc, "o/r", "file/x", 0);
        a.embedding = vec![1.0];
        let err = rows_to_batch(&[a.clone()], 3).unwrap_err().to_string();
        assert!(err.contains(&a.id) && err.contains("3"), "{err}");
    }
}
