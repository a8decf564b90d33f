//! rows.parquet: the Arrow schema of a row, its writer and its reader.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, FixedSizeListArray, FixedSizeListBuilder,
    Float32Array, Int8Array, Int8Builder, Int64Array, ListArray, ListBuilder, PrimitiveArray,
    RecordBatch, StringArray, StringBuilder, TimestampMicrosecondArray,
};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field, Int32Type, Int64Type, Schema, SchemaRef, TimeUnit,
};
use chrono::{DateTime, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::arrow_writer::compute_leaves;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::FormatError;
use crate::row::{Row, RowType};

/// Rows per Parquet row group: small enough to read a page of results cheaply.
const ROW_GROUP_ROWS: usize = 8192;

/// Refuses, naming it, a row whose embedding is not `dim` long or whose title embedding is
/// neither empty nor `dim` long.
fn check_dims(rows: &[Row], dim: usize) -> Result<(), FormatError> {
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
    Ok(())
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

/// How many rows [`write_rows`] turns into Arrow arrays at a time, and [`row_batches`] decodes
/// at a time (row groups still hold [`ROW_GROUP_ROWS`]). A reader holds one batch's Arrow
/// arrays and rows.
const BATCH_ROWS: usize = 1024;

/// Writes rows to `path` as zstd Parquet. Rows are written in the order given; callers sort
/// them so the same rows always give the same bytes.
///
/// A row group is written a column at a time: each column's chunk is encoded from the group's
/// rows, `BATCH_ROWS` at a time, and appended to the file before the next column starts.
/// `ArrowWriter` would encode every column of a batch at once and keep every column's encoder
/// until the group is flushed; the two vector columns' dictionary encoders alone hold their
/// page's indices as 8-byte values, 384 of them a row. One column at a time holds one
/// encoder's. Each column's
/// writer sees the same arrays in the same order either way, so the bytes are the same as
/// `ArrowWriter`'s (a test below compares them).
pub fn write_rows(path: &Path, rows: &[Row], dim: usize) -> Result<(), FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    check_dims(rows, dim)?;
    let schema = row_schema(dim);
    let (mut file, groups) = zstd_writer(path, schema.clone(), Some(ROW_GROUP_ROWS))?
        .into_serialized_writer()
        .map_err(pq)?;
    for (g, group) in rows.chunks(ROW_GROUP_ROWS).enumerate() {
        let mut writers = groups.create_column_writers(g).map_err(pq)?.into_iter();
        let mut row_group = file.next_row_group().map_err(pq)?;
        for (field, column) in schema.fields().iter().zip(COLUMNS) {
            // One leaf a column in this schema (no structs); taken as many as the field has.
            let mut leaf_writers = Vec::new();
            for batch in group.chunks(BATCH_ROWS) {
                let leaves = compute_leaves(field, &column(batch, dim)?).map_err(pq)?;
                if leaf_writers.is_empty() {
                    leaf_writers = writers.by_ref().take(leaves.len()).collect();
                }
                for (writer, leaf) in leaf_writers.iter_mut().zip(&leaves) {
                    writer.write(leaf).map_err(pq)?;
                }
            }
            for writer in leaf_writers {
                writer.close().map_err(pq)?.append_to_row_group(&mut row_group).map_err(pq)?;
            }
        }
        row_group.close().map_err(pq)?;
    }
    file.close().map_err(pq)?;
    Ok(())
}

/// Reads the rows of a rows.parquet file, with their embeddings (and title embeddings) when
/// `with_embeddings`.
pub fn read_rows(path: &Path, with_embeddings: bool) -> Result<Vec<Row>, FormatError> {
    let columns = if with_embeddings { Columns::All } else { Columns::WithoutVectors };
    let mut rows = Vec::new();
    for batch in row_batches(path, columns)? {
        rows.extend(batch?);
    }
    Ok(rows)
}

/// The rows of a rows.parquet file with their identity, `content_sha256` and `title` alone (every
/// other field empty): what a rebuild reads of the current build segments to find which of them
/// hold the texts it is about to embed, without decoding their bodies.
pub fn read_text_keys(path: &Path) -> Result<Vec<Row>, FormatError> {
    let mut rows = Vec::new();
    for batch in row_batches(path, Columns::TextKeys)? {
        rows.extend(batch?);
    }
    Ok(rows)
}

/// Which columns of rows.parquet a reader decodes (a row's identity, `id`, `type`, `repo` and
/// `entity`, always).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Columns {
    All,
    /// Every column but the two vectors.
    WithoutVectors,
    /// The identity and the main vector.
    Embedding,
    /// The identity and the second (title) vector.
    TitleEmbedding,
    /// The identity and both vectors.
    Vectors,
    /// The identity, `content_sha256` and `title`: which texts the rows embed
    /// ([`read_text_keys`]).
    TextKeys,
}

/// Reads rows.parquet a batch of [`BATCH_ROWS`] rows at a time, decoding `columns`: what
/// holds one batch in memory, not the file.
pub(crate) fn row_batches(
    path: &Path,
    columns: Columns,
) -> Result<impl Iterator<Item = Result<Vec<Row>, FormatError>>, FormatError> {
    let pq = |source| FormatError::Parquet { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(|e| FormatError::io(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    let schema = builder.schema().clone();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| {
            let name = schema.field(i).name().as_str();
            let vector = matches!(name, "embedding" | "title_embedding");
            match columns {
                Columns::All => true,
                Columns::WithoutVectors => !vector,
                Columns::TextKeys => {
                    matches!(name, "id" | "type" | "repo" | "entity" | "content_sha256" | "title")
                }
                Columns::Vectors => vector || matches!(name, "id" | "type" | "repo" | "entity"),
                Columns::Embedding | Columns::TitleEmbedding => {
                    let wanted =
                        if columns == Columns::Embedding { "embedding" } else { "title_embedding" };
                    name == wanted || matches!(name, "id" | "type" | "repo" | "entity")
                }
            }
        })
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), keep);
    let reader = builder.with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(pq)?;
    let path = path.to_path_buf();
    Ok(reader.map(move |batch| {
        let batch = batch?;
        let mut rows = Vec::with_capacity(batch.num_rows());
        batch_to_rows(&batch, &mut rows)
            .map_err(|detail| FormatError::Schema { what: path.display().to_string(), detail })?;
        Ok(rows)
    }))
}

/// Makes one column's Arrow array from rows whose embeddings are `dim` long.
type ColumnOf = fn(&[Row], usize) -> Result<ArrayRef, FormatError>;

/// Generates [`row_schema`], the writer's columns and [`batch_to_rows`] from one list of
/// `"name": Kind => field`.
macro_rules! row_columns {
    ($($name:literal: $kind:ident => $field:ident),* $(,)?) => {
        /// The Arrow schema of rows.parquet for embeddings of `dim` dimensions.
        pub fn row_schema(dim: usize) -> SchemaRef {
            Arc::new(Schema::new(vec![$($kind::field($name, dim)),*]))
        }

        /// How each column's array is made from rows, in [`row_schema`]'s order.
        const COLUMNS: &[ColumnOf] =
            &[$(|rows, dim| $kind::write(rows.iter().map(|r| &r.$field), dim)),*];

        /// Appends the rows of one batch to `out`. Only `id`, `type`, `repo` and `entity` must
        /// be there; any other column may be absent (a projection), and its field is empty.
        pub fn batch_to_rows(batch: &RecordBatch, out: &mut Vec<Row>) -> Result<(), String> {
            $(let $field = column::<<$kind as ColumnKind>::Array>(batch, $name, $kind::REQUIRED)?;)*
            for i in 0..batch.num_rows() {
                out.push(Row { $($field: $kind::read($field, i, $name)?,)* });
            }
            Ok(())
        }
    };
}

/// Column `name` of `batch` as the array its kind reads; absent is an error when `required`.
fn column<'a, A: 'static>(
    batch: &'a RecordBatch,
    name: &str,
    required: bool,
) -> Result<Option<&'a A>, String> {
    match batch.column_by_name(name) {
        None if required => Err(format!("column {name} is missing")),
        None => Ok(None),
        Some(c) => c.as_any().downcast_ref::<A>().map(Some).ok_or_else(|| {
            format!("column {name} has type {}, not the row schema's", c.data_type())
        }),
    }
}

/// How one kind of column is declared, written from the `Row` field it holds, and read back.
trait ColumnKind {
    /// The `Row` field's type.
    type Value;
    /// The Arrow array a reader downcasts the column to.
    type Array: 'static;
    /// Whether a batch without the column is refused.
    const REQUIRED: bool = false;
    fn field(name: &str, dim: usize) -> Field;
    fn write<'a>(
        values: impl Iterator<Item = &'a Self::Value>,
        dim: usize,
    ) -> Result<ArrayRef, FormatError>
    where
        Self::Value: 'a;
    /// Row `i`'s value; an absent column gives the field's empty value.
    fn read(array: Option<&Self::Array>, i: usize, name: &str) -> Result<Self::Value, String>;
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn strings<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(values.collect::<StringArray>())
}

fn opt_str(a: Option<&StringArray>, i: usize) -> Option<String> {
    a.and_then(|a| (!a.is_null(i)).then(|| a.value(i).to_string()))
}

fn opt_i64(a: Option<&Int64Array>, i: usize) -> Option<i64> {
    a.and_then(|a| (!a.is_null(i)).then(|| a.value(i)))
}

/// The values of one vector cell of column `name`: i8 as format 8 writes them, or float32 as
/// formats 1 to 7 wrote them, quantized as usearch quantized them when it built their graphs
/// ([`crate::quantize`]), so a rebuild from an older store keeps every graph's bytes.
fn vector_cell(cell: ArrayRef, name: &str) -> Result<Vec<i8>, String> {
    if let Some(v) = cell.as_any().downcast_ref::<Int8Array>() {
        return Ok(v.values().to_vec());
    }
    let f = cell
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| format!("{name} items are neither int8 nor float32"))?;
    Ok(crate::vectors::quantize(f.values()))
}

/// Text that is never null; `REQUIRED`: a batch without the column is refused (a row's
/// identity), else an absent column reads as empty.
struct Utf8<const REQUIRED: bool>;
impl<const R: bool> ColumnKind for Utf8<R> {
    type Value = String;
    type Array = StringArray;
    const REQUIRED: bool = R;
    fn field(name: &str, _: usize) -> Field {
        utf8(name, false)
    }
    fn write<'a>(v: impl Iterator<Item = &'a String>, _: usize) -> Result<ArrayRef, FormatError> {
        Ok(strings(v.map(|s| Some(s.as_str()))))
    }
    fn read(a: Option<&StringArray>, i: usize, _: &str) -> Result<String, String> {
        Ok(opt_str(a, i).unwrap_or_default())
    }
}

/// A row's identity: utf8, never null, always present.
type Key = Utf8<true>;

/// Text that is never null (an absent column reads as empty).
type Text = Utf8<false>;

/// The row type's name.
struct Type;
impl ColumnKind for Type {
    type Value = Option<RowType>;
    type Array = StringArray;
    const REQUIRED: bool = true;
    fn field(name: &str, _: usize) -> Field {
        utf8(name, false)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<RowType>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        // As `Row::kind` reads it: a row without a type is a doc.
        Ok(strings(v.map(|t| Some(t.unwrap_or(RowType::Doc).as_str()))))
    }
    fn read(a: Option<&StringArray>, i: usize, _: &str) -> Result<Option<RowType>, String> {
        let name = opt_str(a, i).unwrap_or_default();
        let t: RowType = name.parse().map_err(|e: crate::row::UnknownRowType| e.to_string())?;
        Ok(Some(t))
    }
}

/// Optional text.
struct OptText;
impl ColumnKind for OptText {
    type Value = Option<String>;
    type Array = StringArray;
    fn field(name: &str, _: usize) -> Field {
        utf8(name, true)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<String>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        Ok(strings(v.map(|s| s.as_deref())))
    }
    fn read(a: Option<&StringArray>, i: usize, _: &str) -> Result<Option<String>, String> {
        Ok(opt_str(a, i))
    }
}

/// A number that is never null: an absent column, or a null, reads as 0.
struct Required<T>(std::marker::PhantomData<T>);
impl<T: ArrowPrimitiveType> ColumnKind for Required<T> {
    type Value = T::Native;
    type Array = PrimitiveArray<T>;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, T::DATA_TYPE, false)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a T::Native>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        Ok(Arc::new(v.map(|n| Some(*n)).collect::<PrimitiveArray<T>>()))
    }
    fn read(a: Option<&PrimitiveArray<T>>, i: usize, _: &str) -> Result<T::Native, String> {
        Ok(a.filter(|a| !a.is_null(i)).map_or_else(Default::default, |a| a.value(i)))
    }
}

/// A count that is never null.
type Int = Required<Int64Type>;

/// A chunk index: int32, never null.
type Int32 = Required<Int32Type>;

/// An optional integer.
struct OptInt;
impl ColumnKind for OptInt {
    type Value = Option<i64>;
    type Array = Int64Array;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::Int64, true)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<i64>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        Ok(Arc::new(v.copied().collect::<Int64Array>()))
    }
    fn read(a: Option<&Int64Array>, i: usize, _: &str) -> Result<Option<i64>, String> {
        Ok(opt_i64(a, i))
    }
}

/// An optional length in chars, stored as int64.
struct Count;
impl ColumnKind for Count {
    type Value = Option<usize>;
    type Array = Int64Array;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::Int64, true)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<usize>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        Ok(Arc::new(v.map(|n| n.map(|n| n as i64)).collect::<Int64Array>()))
    }
    fn read(a: Option<&Int64Array>, i: usize, _: &str) -> Result<Option<usize>, String> {
        Ok(opt_i64(a, i).map(|n| n as usize))
    }
}

/// A flag that is never null.
struct Flag;
impl ColumnKind for Flag {
    type Value = bool;
    type Array = BooleanArray;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::Boolean, false)
    }
    fn write<'a>(v: impl Iterator<Item = &'a bool>, _: usize) -> Result<ArrayRef, FormatError> {
        let mut b = BooleanBuilder::new();
        v.for_each(|x| b.append_value(*x));
        Ok(Arc::new(b.finish()))
    }
    fn read(a: Option<&BooleanArray>, i: usize, _: &str) -> Result<bool, String> {
        Ok(a.is_some_and(|a| a.value(i)))
    }
}

/// An optional flag.
struct OptFlag;
impl ColumnKind for OptFlag {
    type Value = Option<bool>;
    type Array = BooleanArray;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::Boolean, true)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<bool>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        let mut b = BooleanBuilder::new();
        v.for_each(|x| b.append_option(*x));
        Ok(Arc::new(b.finish()))
    }
    fn read(a: Option<&BooleanArray>, i: usize, _: &str) -> Result<Option<bool>, String> {
        Ok(a.and_then(|a| (!a.is_null(i)).then(|| a.value(i))))
    }
}

/// A list of strings (never null; an empty list for none).
struct Texts;
impl ColumnKind for Texts {
    type Value = Vec<String>;
    type Array = ListArray;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), false)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Vec<String>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        let mut b = ListBuilder::new(StringBuilder::new());
        for list in v {
            for s in list {
                b.values().append_value(s);
            }
            b.append(true);
        }
        Ok(Arc::new(b.finish()))
    }
    fn read(a: Option<&ListArray>, i: usize, _: &str) -> Result<Vec<String>, String> {
        let Some(a) = a.filter(|a| !a.is_null(i)) else { return Ok(Vec::new()) };
        let v = a.value(i);
        let Some(s) = v.as_any().downcast_ref::<StringArray>() else { return Ok(Vec::new()) };
        Ok((0..s.len()).filter(|&j| !s.is_null(j)).map(|j| s.value(j).to_string()).collect())
    }
}

/// An optional time: microseconds, UTC.
struct Time;
impl ColumnKind for Time {
    type Value = Option<DateTime<Utc>>;
    type Array = TimestampMicrosecondArray;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Option<DateTime<Utc>>>,
        _: usize,
    ) -> Result<ArrayRef, FormatError> {
        Ok(Arc::new(
            v.map(|t| t.map(|t| t.timestamp_micros()))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        ))
    }
    fn read(
        a: Option<&TimestampMicrosecondArray>,
        i: usize,
        _: &str,
    ) -> Result<Option<DateTime<Utc>>, String> {
        Ok(a.and_then(|a| {
            (!a.is_null(i)).then(|| DateTime::from_timestamp_micros(a.value(i))).flatten()
        }))
    }
}

/// The embedding: `dim` i8 values a row ([`crate::quantize`]), never null.
struct Vector;
impl ColumnKind for Vector {
    type Value = Vec<i8>;
    type Array = FixedSizeListArray;
    fn field(name: &str, dim: usize) -> Field {
        Field::new(name, DataType::FixedSizeList(vector_item(), dim as i32), false)
    }
    fn write<'a>(
        v: impl Iterator<Item = &'a Vec<i8>>,
        dim: usize,
    ) -> Result<ArrayRef, FormatError> {
        let v: Vec<&Vec<i8>> = v.collect();
        if dim == 0 {
            // Rows staged before embedding have no vectors: a zero-width list, whose length
            // Arrow takes from its validity buffer.
            return Ok(Arc::new(FixedSizeListArray::try_new(
                vector_item(),
                0,
                Arc::new(Int8Array::from(Vec::<i8>::new())),
                Some(arrow::buffer::NullBuffer::new_valid(v.len())),
            )?));
        }
        let mut b = FixedSizeListBuilder::with_capacity(
            Int8Builder::with_capacity(v.len() * dim),
            dim as i32,
            v.len(),
        )
        .with_field(vector_item());
        for e in v {
            b.values().append_slice(e);
            b.append(true);
        }
        Ok(Arc::new(b.finish()))
    }
    fn read(a: Option<&FixedSizeListArray>, i: usize, name: &str) -> Result<Vec<i8>, String> {
        a.map_or(Ok(Vec::new()), |a| vector_cell(a.value(i), name))
    }
}

/// The items of a vector column (format 8: i8).
fn vector_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Int8, false))
}

/// A second vector, or null for none (an empty `Vec`).
struct OptVector;
impl ColumnKind for OptVector {
    type Value = Vec<i8>;
    type Array = ListArray;
    fn field(name: &str, _: usize) -> Field {
        Field::new(name, DataType::List(vector_item()), true)
    }
    fn write<'a>(v: impl Iterator<Item = &'a Vec<i8>>, _: usize) -> Result<ArrayRef, FormatError> {
        let mut b = ListBuilder::new(Int8Builder::new()).with_field(vector_item());
        for e in v {
            if e.is_empty() {
                b.append_null();
            } else {
                b.values().append_slice(e);
                b.append(true);
            }
        }
        Ok(Arc::new(b.finish()))
    }
    fn read(a: Option<&ListArray>, i: usize, name: &str) -> Result<Vec<i8>, String> {
        match a {
            Some(a) if !a.is_null(i) => vector_cell(a.value(i), name),
            _ => Ok(Vec::new()),
        }
    }
}

// The columns of rows.parquet, in file order: each named once, with its kind (how it is
// declared, written and read) and the `Row` field it holds. The schema, the writer and the
// reader below are all generated from this list, and the reader builds a whole `Row`, so a
// field of `Row` without a column does not compile.
row_columns! {
    "id": Key => id,
    "type": Type => row_type,
    "repo": Key => repo,
    "entity": Key => entity,
    "number": OptInt => number,
    "title": OptText => title,
    "body": Text => body,
    "body_chars": Int => body_chars,
    "truncated": Flag => truncated,
    "url": OptText => url,
    "state": OptText => state,
    "state_reason": OptText => state_reason,
    "draft": OptFlag => draft,
    "labels": Texts => labels,
    "milestone": OptText => milestone,
    "assignees": Texts => assignees,
    "author": OptText => author,
    "committer": OptText => committer,
    "created_at": Time => created_at,
    "updated_at": Time => updated_at,
    "closed_at": Time => closed_at,
    "merged_at": Time => merged_at,
    "base_ref": OptText => base_ref,
    "head_ref": OptText => head_ref,
    "tag": OptText => tag,
    "in_reply_to": OptInt => in_reply_to,
    "path": OptText => path,
    "line_start": OptInt => line_start,
    "line_end": OptInt => line_end,
    "heading_path": Texts => heading_path,
    "chunk_index": Int32 => chunk_index,
    "commit_sha": OptText => commit_sha,
    "files_changed": Texts => files_changed,
    "language": OptText => language,
    "symbol": OptText => symbol,
    "refs": Texts => refs,
    "content_sha256": Text => content_sha256,
    "embed_chars": Count => embed_chars,
    "embedding": Vector => embedding,
    // Null for the rows without a second vector (format 4; absent in older files).
    "title_embedding": OptVector => title_embedding,
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
        a.embedding = vec![90, -90];
        a.title_embedding = vec![40, 120];
        let mut b = Row::new(RowType::Doc, "o/r", "file/README.md", 1);
        b.heading_path = vec!["Intro".into(), "Install".into()];
        b.set_body("run it");
        b.embedding = vec![127, 0];
        write_rows(&path, &[a.clone(), b.clone()], 2).unwrap();
        assert_eq!(read_rows(&path, true).unwrap(), vec![a.clone(), b]);
        let without = read_rows(&path, false).unwrap();
        assert!(without[0].embedding.is_empty() && without[0].title_embedding.is_empty());
        assert_eq!(without[0].files_changed, a.files_changed);
    }

    /// Writes a rows.parquet of one commit row: the four required columns, then the vector
    /// columns given (another format's, or a type no format has).
    fn write_one_row_with_vectors(path: &Path, vector_fields: Vec<Field>, vectors: Vec<ArrayRef>) {
        let mut fields = vec![
            utf8("id", false),
            utf8("type", false),
            utf8("repo", false),
            utf8("entity", false),
        ];
        fields.extend(vector_fields);
        let schema = Arc::new(Schema::new(fields));
        let mut columns: Vec<ArrayRef> = vec![
            strings([Some("commit:x")].into_iter()),
            strings([Some("commit")].into_iter()),
            strings([Some("o/r")].into_iter()),
            strings([Some("commit/x")].into_iter()),
        ];
        columns.extend(vectors);
        let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
        let mut w = zstd_writer(path, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn float32_vectors_of_formats_1_to_7_read_as_usearch_kept_them() {
        use arrow::array::Float32Builder;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let f32_item = || Arc::new(Field::new("item", DataType::Float32, false));
        let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), 2).with_field(f32_item());
        emb.values().append_slice(&[0.6, -0.8]);
        emb.append(true);
        let mut title = ListBuilder::new(Float32Builder::new()).with_field(f32_item());
        title.values().append_slice(&[3.0, 4.0]);
        title.append(true);
        write_one_row_with_vectors(
            &path,
            vec![
                Field::new("embedding", DataType::FixedSizeList(f32_item(), 2), false),
                Field::new("title_embedding", DataType::List(f32_item()), true),
            ],
            vec![Arc::new(emb.finish()), Arc::new(title.finish())],
        );
        let rows = read_rows(&path, true).unwrap();
        // 0.6 × 127 = 76.2 and −0.8 × 127 = −101.6, truncated toward zero; (3, 4) is scaled to
        // unit length first.
        assert_eq!(rows[0].embedding, vec![76, -101]);
        assert_eq!(rows[0].title_embedding, vec![76, 101]);
    }

    #[test]
    fn a_vector_column_of_another_element_type_is_refused_by_name() {
        use arrow::array::Int16Builder;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let i16_item = || Arc::new(Field::new("item", DataType::Int16, false));
        let mut emb = FixedSizeListBuilder::new(Int16Builder::new(), 2).with_field(i16_item());
        emb.values().append_slice(&[300, -300]);
        emb.append(true);
        write_one_row_with_vectors(
            &path,
            vec![Field::new("embedding", DataType::FixedSizeList(i16_item(), 2), false)],
            vec![Arc::new(emb.finish())],
        );
        let err = read_rows(&path, true).unwrap_err().to_string();
        assert!(err.contains("rows.parquet") && err.contains("embedding"), "{err}");
        assert!(err.contains("neither int8 nor float32"), "{err}");
    }

    #[test]
    fn rows_written_a_batch_at_a_time_keep_full_row_groups_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let n = ROW_GROUP_ROWS + 3 * BATCH_ROWS / 2;
        let rows: Vec<Row> = (0..n)
            .map(|i| {
                let mut r = Row::new(RowType::Diff, "o/r", &format!("commit/{i:06}"), 0);
                r.set_body(&format!("diff {i}"));
                r.embedding = vec![(i % 251) as i8, -1, 1];
                r
            })
            .collect();
        write_rows(&path, &rows, 3).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let meta = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().metadata().clone();
        let groups: Vec<i64> = meta.row_groups().iter().map(|g| g.num_rows()).collect();
        assert_eq!(groups, [ROW_GROUP_ROWS as i64, (n - ROW_GROUP_ROWS) as i64]);
        let back = read_rows(&path, true).unwrap();
        assert_eq!(back.len(), n);
        assert!(back.iter().zip(&rows).all(|(a, b)| a.id == b.id && a.embedding == b.embedding));
    }

    /// The column-at-a-time writer gives `ArrowWriter`'s bytes: build segment ids are hashes
    /// of rows.parquet, so a store written before keeps its ids.
    #[test]
    fn rows_written_a_column_at_a_time_are_arrow_writers_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let dim = 384;
        let n = 2 * ROW_GROUP_ROWS + 3 * BATCH_ROWS / 2;
        let rows: Vec<Row> = (0..n)
            .map(|i| {
                let mut r =
                    Row::new(RowType::Diff, "o/r", &format!("commit/{i:06}"), (i % 3) as u32);
                r.set_body(&format!("diff --git a/src/f{}.rs\n+ fn f{i}() {{}}\n", i % 17));
                r.path = (i % 5 != 0).then(|| format!("src/f{}.rs", i % 17));
                r.labels = (0..i % 3).map(|l| format!("label {l}")).collect();
                r.embedding = (0..dim).map(|d| ((i * 31 + d * 7) % 255) as i8).collect();
                if i % 4 == 0 {
                    r.title = Some(format!("title {i}"));
                    r.title_embedding =
                        (0..dim).map(|d| (((i + d) % 200) as i32 - 100) as i8).collect();
                }
                r
            })
            .collect();
        // Both ways, for these rows and for none (a segment without rows).
        let both = |rows: &[Row], name: &str| {
            let ours = dir.path().join(format!("{name}-ours.parquet"));
            write_rows(&ours, rows, dim).unwrap();
            let arrow = dir.path().join(format!("{name}-arrow.parquet"));
            let mut w = zstd_writer(&arrow, row_schema(dim), Some(ROW_GROUP_ROWS)).unwrap();
            for chunk in rows.chunks(BATCH_ROWS) {
                let columns = COLUMNS.iter().map(|column| column(chunk, dim).unwrap()).collect();
                w.write(&RecordBatch::try_new(row_schema(dim), columns).unwrap()).unwrap();
            }
            w.close().unwrap();
            (std::fs::read(&ours).unwrap(), std::fs::read(&arrow).unwrap())
        };
        let (ours, arrow) = both(&rows, "rows");
        assert!(ours.len() > 1 << 20, "{} bytes: too few for several pages", ours.len());
        assert!(ours == arrow, "{} bytes against ArrowWriter's {}", ours.len(), arrow.len());
        let (ours, arrow) = both(&[], "none");
        assert!(
            ours == arrow,
            "no rows: {} bytes against ArrowWriter's {}",
            ours.len(),
            arrow.len()
        );
    }

    #[test]
    fn a_wrong_embedding_length_is_refused_by_name() {
        let mut a = Row::new(RowType::Doc, "o/r", "file/x", 0);
        a.embedding = vec![127];
        let dir = tempfile::tempdir().unwrap();
        let err =
            write_rows(&dir.path().join("rows.parquet"), &[a.clone()], 3).unwrap_err().to_string();
        assert!(err.contains(&a.id) && err.contains("3"), "{err}");
    }
}
