//! `vectors.usearch`: the HNSW index over row ordinals.

use std::path::Path;

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::error::FormatError;

/// The quantization vectors.usearch is written with.
pub const VECTOR_SCALAR: &str = "f16";

fn options(dim: usize) -> IndexOptions {
    IndexOptions {
        dimensions: dim,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F16,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 96,
        multi: false,
    }
}

/// Writes an HNSW index of `vectors` (key = position) to `path`.
pub fn write_vector_index(path: &Path, dim: usize, vectors: &[&[f32]]) -> Result<(), FormatError> {
    let err = vector_error(path);
    let index = Index::new(&options(dim)).map_err(&err)?;
    index.reserve(vectors.len().max(1)).map_err(&err)?;
    for (i, v) in vectors.iter().enumerate() {
        index.add(i as u64, v).map_err(&err)?;
    }
    let s = path.to_str().ok_or_else(|| FormatError::Vectors {
        path: path.to_path_buf(),
        detail: "path is not valid UTF-8".into(),
    })?;
    index.save(s).map_err(&err)?;
    Ok(())
}

fn vector_error<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> FormatError + '_ {
    move |e| FormatError::Vectors { path: path.to_path_buf(), detail: e.to_string() }
}

/// A read-only, memory-mapped vector index.
pub struct VectorIndex {
    index: Index,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex").field("size", &self.index.size()).finish()
    }
}

impl VectorIndex {
    /// Opens `path` as a view (mmap), after checking that its header fits the expected
    /// dimension and row count and that the file is long enough for what the header claims.
    pub fn open(path: &Path, dim: usize, rows: u64) -> Result<Self, FormatError> {
        let bad = |detail: String| FormatError::Vectors { path: path.to_path_buf(), detail };
        let s = path.to_str().ok_or_else(|| bad("path is not valid UTF-8".into()))?;
        let file_len = std::fs::metadata(path).map_err(|e| FormatError::io(path, e))?.len();
        let meta = Index::metadata(s).map_err(|e| bad(format!("header: {e}")))?;
        if meta.dimensions as usize != dim {
            return Err(bad(format!(
                "header says {} dimensions, the model has {dim}",
                meta.dimensions
            )));
        }
        if meta.count_present != rows {
            return Err(bad(format!(
                "header says {} vectors, segment has {rows} rows",
                meta.count_present
            )));
        }
        // f16 vectors alone need this many bytes; a header claiming more than the file holds
        // is crafted or cut, and must not reach the native reader.
        let min_bytes = rows.saturating_mul(dim as u64 * 2);
        if file_len < min_bytes {
            return Err(bad(format!(
                "file has {file_len} bytes, too short for {rows} vectors of {dim} dimensions"
            )));
        }
        let index = Index::new(&options(dim)).map_err(|e| bad(e.to_string()))?;
        index.view(s).map_err(|e| bad(format!("view: {e}")))?;
        Ok(VectorIndex { index })
    }

    /// Up to `limit` (ordinal, cosine similarity) pairs, best first, keeping only ordinals
    /// `allow` accepts.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        allow: Option<&(dyn Fn(u64) -> bool + Send + Sync)>,
    ) -> Result<Vec<(u64, f32)>, FormatError> {
        if self.index.size() == 0 {
            return Ok(Vec::new());
        }
        let m = match allow {
            Some(allow) => self.index.filtered_search(query, limit, allow),
            None => self.index.search(query, limit),
        }
        .map_err(|e| FormatError::Vectors { path: Default::default(), detail: e.to_string() })?;
        Ok(m.keys.into_iter().zip(m.distances).map(|(k, d)| (k, 1.0 - d)).collect())
    }
}
