//! files.parquet: the full text of the files a segment indexes (docs, later code), at the
//! commit they were read at, so `read_span` can return exact lines. Optional in version 1: a
//! segment without it simply has no spans to read.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::FormatError;

/// The file name of a segment's file texts.
pub const FILES_PARQUET: &str = "files.parquet";

/// One file's text at one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileText {
    pub path: String,
    pub commit_sha: String,
    pub language: Option<String>,
    pub content: String,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("commit_sha", DataType::Utf8, false),
        Field::new("language", DataType::Utf8, true),
        Field::new("content", DataType::Utf8, false),
    ]))
}

/// Writes `files` (sorted by path by the caller) to `path`.
pub fn write_files(path: &Path, files: &[FileText]) -> Result<(), FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::create(path).map_err(|e| FormatError::io(path, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).map_err(pq)?))
        .build();
    let mut w = ArrowWriter::try_new(file, schema(), Some(props)).map_err(pq)?;
    for chunk in files.chunks(1024) {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(chunk.iter().map(|f| Some(f.path.as_str())).collect::<StringArray>()),
                Arc::new(
                    chunk.iter().map(|f| Some(f.commit_sha.as_str())).collect::<StringArray>(),
                ),
                Arc::new(chunk.iter().map(|f| f.language.as_deref()).collect::<StringArray>()),
                Arc::new(chunk.iter().map(|f| Some(f.content.as_str())).collect::<StringArray>()),
            ],
        )?;
        w.write(&batch).map_err(pq)?;
    }
    w.close().map_err(pq)?;
    Ok(())
}

/// Reads files.parquet; an absent file is no files.
pub fn read_files(path: &Path) -> Result<Vec<FileText>, FormatError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?.build().map_err(pq)?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch?;
        let col = |name: &str| -> Result<&StringArray, FormatError> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| FormatError::Schema {
                    what: path.display().to_string(),
                    detail: format!("column {name} is missing or not utf8"),
                })
        };
        let (p, c, l, t) = (col("path")?, col("commit_sha")?, col("language")?, col("content")?);
        for i in 0..batch.num_rows() {
            out.push(FileText {
                path: p.value(i).to_string(),
                commit_sha: c.value(i).to_string(),
                language: (!l.is_null(i)).then(|| l.value(i).to_string()),
                content: t.value(i).to_string(),
            });
        }
    }
    Ok(out)
}
