//! The cross-encoder reranker: a model directory (model.onnx + tokenizer.json) that reads a
//! (query, passage) pair and gives one relevance logit. Runs on the same ONNX Runtime as the
//! embedder.

use std::path::Path;
use std::sync::Mutex;

use ort::session::Session;
use tokenizers::Tokenizer;

use hubdex_runtime::{EmbedError, model_files, model_inputs, ort_environment};

/// Longest (query, passage) pair the model reads, in tokens.
pub const RERANK_MAX_TOKENS: usize = 512;

/// Pairs scored per model call.
const RERANK_BATCH: usize = 16;

/// A loaded cross-encoder.
pub struct Reranker {
    session: Mutex<Session>,
    tokenizer: Tokenizer,
    token_type_ids: bool,
    name: String,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker").field("name", &self.name).finish()
    }
}

impl Reranker {
    /// Loads the model in `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let (model_path, tokenizer) = model_files(dir, RERANK_MAX_TOKENS)?;
        let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
        let session = Session::builder(ort_environment()?)
            .map_err(ort_err)?
            .commit_from_file(&model_path)
            .map_err(ort_err)?;
        let token_type_ids = session.inputs().iter().any(|i| i.name() == "token_type_ids");
        if session.outputs().is_empty() {
            return Err(EmbedError::Output("the rerank model has no outputs".into()));
        }
        let name = dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        Ok(Reranker { session: Mutex::new(session), tokenizer, token_type_ids, name })
    }

    /// The model directory's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One relevance score per passage for `query`, higher is more relevant.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, EmbedError> {
        let mut out = Vec::with_capacity(passages.len());
        for batch in passages.chunks(RERANK_BATCH) {
            out.extend(self.score_batch(query, batch)?);
        }
        Ok(out)
    }

    fn score_batch(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, EmbedError> {
        let pairs: Vec<(String, String)> =
            passages.iter().map(|p| (query.to_string(), p.to_string())).collect();
        let enc = self
            .tokenizer
            .encode_batch(pairs, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let (n, _, _, inputs) = model_inputs(&enc, self.token_type_ids)?;
        let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
        let mut session =
            self.session.lock().map_err(|_| EmbedError::Ort("session lock poisoned".into()))?;
        let outputs = session.run(inputs).map_err(ort_err)?;
        let (_, value) = outputs
            .iter()
            .next()
            .ok_or_else(|| EmbedError::Output("the rerank model gave no output".into()))?;
        let (shape, data) = value.try_extract_tensor::<f32>().map_err(ort_err)?;
        let dims: Vec<i64> = shape.iter().copied().collect();
        match dims.as_slice() {
            // One logit per pair: [n, 1] or [n].
            [b, 1] | [b] if *b as usize == n => Ok(data[..n].to_vec()),
            other => Err(EmbedError::Output(format!(
                "a rerank model gives one logit per pair; this one gave shape {other:?} for {n} pairs"
            ))),
        }
    }
}
