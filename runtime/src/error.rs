//! The runtime's one error: loading or running a model.

use std::path::PathBuf;

/// Loading or running the embedding model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model directory lacks a file it needs.
    #[error(
        "model directory {dir}: {file} is missing (a model directory holds model.onnx and tokenizer.json)"
    )]
    MissingModelFile {
        /// The model directory.
        dir: PathBuf,
        /// The file it lacks.
        file: &'static str,
    },
    /// No `--model` was given and the default model is in none of the places looked at.
    #[error(
        "no model: looked at {looked_at} (a release archive holds it in models/; from source, run ./ci/setup, set HUBDEX_MODEL_DIR or pass --model)"
    )]
    NoModel {
        /// The places looked at, in order.
        looked_at: String,
    },
    /// The ONNX Runtime library could not be found or loaded.
    #[error(
        "ONNX Runtime library {path}: {detail} (a release archive holds it in lib/; from source, run ./ci/setup or set ORT_DYLIB_PATH to libonnxruntime.so)"
    )]
    Runtime {
        /// Where the library was looked for.
        path: PathBuf,
        /// What loading it said.
        detail: String,
    },
    /// A file differs from the sum its directory's SHA256SUMS lists.
    #[error(
        "{path} is damaged: its sha256 is {actual}, the SHA256SUMS beside it says {expected} (unpack the release archive again)"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The sum SHA256SUMS lists.
        expected: String,
        /// The file's sum.
        actual: String,
    },
    /// A SHA256SUMS file cannot be read as one.
    #[error("{path}: not a SHA256SUMS list: {detail}")]
    BadSums {
        /// The SHA256SUMS file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// model.onnx is there but ONNX Runtime cannot load it (damaged, or not an ONNX model).
    #[error("model {path} cannot be loaded: {detail} (damaged or not an ONNX model?)")]
    BadModel {
        /// The model file.
        path: PathBuf,
        /// What ONNX Runtime said.
        detail: String,
    },
    /// The tokenizer failed to load or encode.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// ONNX Runtime failed to build a session or run the model.
    #[error("onnx runtime: {0}")]
    Ort(String),
    /// The model's output is not shaped as the model contract says.
    #[error("model output: {0}")]
    Output(String),
    /// The model could not be downloaded.
    #[error("downloading model {repo}: {detail}")]
    Download {
        /// The Hugging Face repository.
        repo: String,
        /// What went wrong.
        detail: String,
    },
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}
