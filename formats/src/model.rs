//! What the embedder and the reranker share: where the runtime, models and caches live, the one
//! ONNX Runtime environment, a model directory's files (model.onnx + a tokenizer that pads per
//! batch and truncates), the ONNX inputs of a tokenized batch, and resolving a model spec (a
//! directory or a Hugging Face repo id) to a directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::value::Tensor;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::error::EmbedError;

/// The ONNX Runtime library: $ORT_DYLIB_PATH, else where `ci/setup` puts it.
pub fn runtime_library_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return PathBuf::from(p);
    }
    cache_dir().join("onnxruntime").join("libonnxruntime.so")
}

/// The model both binaries use when `--model` and `$HUBDEX_MODEL_DIR` say nothing, as the
/// string `--model` takes.
pub fn default_model() -> String {
    default_model_dir().display().to_string()
}

/// Where `ci/setup` installs the default model (all-MiniLM-L6-v2, int8 ONNX).
pub fn default_model_dir() -> PathBuf {
    cache_dir().join("models").join("all-MiniLM-L6-v2-int8")
}

/// `~/.cache/hubdex` (or $HUBDEX_CACHE): the runtime, models and cached segments live here.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("HUBDEX_CACHE") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("hubdex")
}

static ENVIRONMENT: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();

/// The process's one ONNX Runtime environment, loaded from [`runtime_library_path`] on first
/// use; every model session (the embedder, the server's reranker) is built on it.
pub fn ort_environment() -> Result<&'static ort::environment::Environment, EmbedError> {
    let path = runtime_library_path();
    let env = ENVIRONMENT.get_or_init(|| {
        if !path.exists() {
            return Err("no such file".to_string());
        }
        ort::init_from(&path)
            .map_err(|e| e.to_string())?
            .with_name("hubdex")
            .build()
            .map_err(|e| e.to_string())
    });
    env.as_ref().map_err(|detail| EmbedError::Runtime { path, detail: detail.clone() })
}

/// A model directory's `model.onnx` path and its tokenizer, set to pad per batch (the shipped
/// tokenizers pad every text to a fixed length) and to truncate at `max_tokens`.
pub fn model_files(dir: &Path, max_tokens: usize) -> Result<(PathBuf, Tokenizer), EmbedError> {
    let model_path = dir.join("model.onnx");
    let tokenizer_path = dir.join("tokenizer.json");
    for (p, file) in [(&model_path, "model.onnx"), (&tokenizer_path, "tokenizer.json")] {
        if !p.is_file() {
            return Err(EmbedError::MissingModelFile { dir: dir.to_path_buf(), file });
        }
    }
    let mut tokenizer =
        Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    tokenizer.with_padding(None::<PaddingParams>);
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
        .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
    Ok((model_path, tokenizer))
}

/// The ONNX inputs of a tokenized batch, padded to its longest member: (batch size, sequence
/// length, attention mask, named inputs). `token_type_ids` only when the model takes them.
#[allow(clippy::type_complexity)]
pub fn model_inputs(
    enc: &[tokenizers::Encoding],
    token_type_ids: bool,
) -> Result<(usize, usize, Vec<i64>, Vec<(&'static str, ort::value::DynValue)>), EmbedError> {
    let n = enc.len();
    let seq = enc.iter().map(|e| e.get_ids().len()).max().unwrap_or(0).max(1);
    let mut ids = vec![0i64; n * seq];
    let mut mask = vec![0i64; n * seq];
    let mut types = vec![0i64; n * seq];
    for (b, e) in enc.iter().enumerate() {
        for (t, ((&id, &m), &ty)) in
            e.get_ids().iter().zip(e.get_attention_mask()).zip(e.get_type_ids()).enumerate()
        {
            ids[b * seq + t] = id as i64;
            mask[b * seq + t] = m as i64;
            types[b * seq + t] = ty as i64;
        }
    }
    let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
    let shape = [n, seq];
    let mut inputs = vec![
        ("input_ids", Tensor::from_array((shape, ids)).map_err(ort_err)?.into_dyn()),
        ("attention_mask", Tensor::from_array((shape, mask.clone())).map_err(ort_err)?.into_dyn()),
    ];
    if token_type_ids {
        inputs.push((
            "token_type_ids",
            Tensor::from_array((shape, types)).map_err(ort_err)?.into_dyn(),
        ));
    }
    Ok((n, seq, mask, inputs))
}

/// Where the model lives: a local directory, or a Hugging Face repo id fetched into the cache.
pub fn resolve_model_dir(spec: &str) -> Result<PathBuf, EmbedError> {
    let local = Path::new(spec);
    if local.is_dir() {
        return Ok(local.to_path_buf());
    }
    if let Some(repo) = spec
        .strip_prefix("hf:")
        .or_else(|| (spec.matches('/').count() == 1 && !local.exists()).then_some(spec))
    {
        return crate::hf::download(repo, &cache_dir().join("models"));
    }
    Err(EmbedError::MissingModelFile { dir: local.to_path_buf(), file: "model.onnx" })
}
