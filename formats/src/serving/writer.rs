//! The serving index written a row at a time, in parts when its heap fills.

use std::path::Path;

use tantivy::{Index, TantivyDocument};

use crate::error::FormatError;
use crate::filter::author_keys;
use crate::read_dir::ReadDirectory;
use crate::row::Row;

use super::{Analyzers, ServingIndexWriter, WRITER_HEAP_BYTES, micros};

/// Writes the serving index of `rows` (ordinal = position) into `dir`.
pub(crate) fn write_serving_index<'a>(
    dir: &Path,
    rows: impl Iterator<Item = &'a Row>,
    an: &Analyzers,
) -> Result<(), FormatError> {
    let mut w = ServingIndexWriter::create(dir, an)?;
    for row in rows {
        w.add(row)?;
    }
    w.finish()?;
    Ok(())
}

/// Where a serving index being written keeps its parts until `finish` merges them.
pub(super) const PARTS_DIR: &str = ".parts";

/// A part is saved when its heap is within this of full (tantivy's `IndexWriter` margin).
const PART_MARGIN_BYTES: usize = 1_000_000;

impl ServingIndexWriter {
    /// A new, empty serving index in `dir`.
    pub(crate) fn create(dir: &Path, an: &Analyzers) -> Result<Self, FormatError> {
        Self::with_heap(dir, an, WRITER_HEAP_BYTES)
    }

    /// [`ServingIndexWriter::create`] with a writer heap of `heap` bytes (at least tantivy's 15
    /// MB): a part is written each time the heap fills.
    pub(crate) fn with_heap(dir: &Path, an: &Analyzers, heap: usize) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(|e| FormatError::io(dir, e))?;
        let (schema, f) = super::schema::schema(an);
        // Not tantivy's index sorting: the rows come in ordinal order already, and sorting at
        // each flush and in the final merge held up to twice the writer's heap more at the
        // peak (docs/performance.md); the parts are merged in the order
        // they were written instead, and `finish` checks the result.
        Ok(ServingIndexWriter {
            schema,
            part: None,
            parts: 0,
            heap,
            f,
            dir: dir.to_path_buf(),
            n: 0,
        })
    }

    fn tv(&self) -> impl Fn(tantivy::TantivyError) -> FormatError + use<> {
        let path = self.dir.clone();
        move |source| FormatError::Tantivy { path: path.clone(), source }
    }

    /// The part being written, started in `.parts/<n>` when there is none.
    fn part(
        &mut self,
    ) -> Result<&mut tantivy::indexer::SingleSegmentIndexWriter<TantivyDocument>, FormatError> {
        if self.part.is_none() {
            let dir = self.dir.join(PARTS_DIR).join(self.parts.to_string());
            std::fs::create_dir_all(&dir).map_err(|e| FormatError::io(&dir, e))?;
            let tv = |source| FormatError::Tantivy { path: dir.clone(), source };
            let directory = tantivy::directory::MmapDirectory::open(&dir)
                .map_err(|e| tv(tantivy::TantivyError::from(e)))?;
            let writer = Index::builder()
                .schema(self.schema.clone())
                .tokenizers(crate::text::analyzers())
                .single_segment_index_writer(directory, self.heap)
                .map_err(tv)?;
            self.part = Some(writer);
        }
        Ok(self.part.as_mut().expect("a part was just started"))
    }

    /// Saves the part being written, if any.
    fn close_part(&mut self) -> Result<(), FormatError> {
        if let Some(part) = self.part.take() {
            // Not kept open: `finish` reads the parts again, through `ReadDirectory`.
            part.finalize().map_err(self.tv())?;
            self.parts += 1;
        }
        Ok(())
    }

    /// Adds the next row (its ordinal is the number of rows added before it).
    pub(crate) fn add(&mut self, row: &Row) -> Result<(), FormatError> {
        let tv = self.tv();
        let f = &self.f;
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.ord, self.n);
        doc.add_text(f.id, &row.id);
        doc.add_text(f.row_type, row.kind().as_str());
        doc.add_text(f.repo, &row.repo);
        doc.add_text(f.entity, &row.entity);
        if let Some(s) = &row.state {
            doc.add_text(f.state, s);
        }
        for l in &row.labels {
            doc.add_text(f.labels, l.to_ascii_lowercase());
        }
        if let Some(m) = &row.milestone {
            doc.add_text(f.milestone, m.to_ascii_lowercase());
        }
        for a in &row.assignees {
            doc.add_text(f.assignees, a.to_ascii_lowercase());
        }
        if let Some(a) = &row.author {
            for k in author_keys(a) {
                doc.add_text(f.author, k.to_ascii_lowercase());
            }
        }
        for p in row.path.iter().chain(&row.files_changed) {
            doc.add_text(f.paths, p);
        }
        if let Some(t) = row.updated_at {
            doc.add_date(f.updated_at, micros(t));
        }
        if let Some(t) = row.created_at {
            doc.add_date(f.created_at, micros(t));
        }
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
        let json = serde_json::to_vec(row).map_err(|e| FormatError::json(&row.id, e))?;
        doc.add_bytes(f.row, &json);
        let heap = self.heap;
        let part = self.part()?;
        part.add_document(doc).map_err(tv)?;
        // As tantivy's IndexWriter does: the part is saved once its heap is within a margin
        // of full.
        if part.mem_usage() >= heap.saturating_sub(PART_MARGIN_BYTES) {
            self.close_part()?;
        }
        self.n += 1;
        Ok(())
    }

    /// Saves the last part, makes the parts one tantivy segment in `dir` and checks that doc id
    /// = ordinal. Returns how many parts were written (0 for no rows).
    pub(crate) fn finish(mut self) -> Result<usize, FormatError> {
        self.close_part()?;
        let ServingIndexWriter { schema, parts, dir, n, .. } = self;
        let dir = dir.as_path();
        let tv = |source| FormatError::Tantivy { path: dir.to_path_buf(), source };
        let parts_dir = dir.join(PARTS_DIR);
        let index = match parts {
            0 => Index::builder().schema(schema).create_in_dir(dir).map_err(tv)?,
            1 => {
                // The only part is the index: its files move up.
                let part = parts_dir.join("0");
                let entries = std::fs::read_dir(&part).map_err(|e| FormatError::io(&part, e))?;
                for entry in entries {
                    let entry = entry.map_err(|e| FormatError::io(&part, e))?;
                    let to = dir.join(entry.file_name());
                    std::fs::rename(entry.path(), &to).map_err(|e| FormatError::io(&to, e))?;
                }
                Index::open_in_dir(dir).map_err(tv)?
            }
            _ => {
                // Each part read through a directory that reads, not maps, its files: mapped,
                // every page the merge touches stays resident until it ends.
                let mut opened = Vec::with_capacity(parts);
                let mut segments = Vec::new();
                for i in 0..parts {
                    let part = parts_dir.join(i.to_string());
                    let tv = |source| FormatError::Tantivy { path: part.clone(), source };
                    let mut index = Index::open(ReadDirectory::new(&part)).map_err(tv)?;
                    index.set_tokenizers(crate::text::analyzers());
                    segments.extend(index.searchable_segments().map_err(tv)?);
                    opened.push(index);
                }
                let settings = opened[0].settings().clone();
                let alive = vec![None; segments.len()];
                let directory = tantivy::directory::MmapDirectory::open(dir)
                    .map_err(|e| tv(tantivy::TantivyError::from(e)))?;
                let index = tantivy::indexer::merge_filtered_segments(
                    &segments, settings, alive, directory,
                )
                .map_err(tv)?;
                drop(segments);
                drop(opened);
                index
            }
        };
        if parts_dir.exists() {
            std::fs::remove_dir_all(&parts_dir).map_err(|e| FormatError::io(&parts_dir, e))?;
        }
        // The doc id must be the ordinal: check it once here rather than trust it on every read.
        let reader = index.reader().map_err(tv)?;
        let searcher = reader.searcher();
        let bad = |detail: String| FormatError::Schema { what: dir.display().to_string(), detail };
        if searcher.num_docs() != n || searcher.segment_readers().len() > 1 {
            return Err(bad(format!(
                "index holds {} docs in {} segments, expected {n} in one",
                searcher.num_docs(),
                searcher.segment_readers().len()
            )));
        }
        if let Some(seg) = searcher.segment_readers().first() {
            let ords = seg.fast_fields().u64("ord").map_err(tv)?;
            if let Some(doc) = (0..seg.max_doc()).find(|&d| ords.first(d) != Some(d as u64)) {
                return Err(bad(format!(
                    "doc {doc} is not ordinal {doc}: the index is not sorted"
                )));
            }
        }
        Ok(parts)
    }
}
