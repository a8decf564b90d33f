#![warn(missing_docs)]
//! hubdex-runtime: what both binaries run on besides the on-disk contract. The embedding model
//! (ONNX Runtime sessions, the tokenizer, batching), finding and verifying the model and the
//! runtime library (a release archive's, `$HUBDEX_MODEL_DIR`, the cache, Hugging Face), the
//! process's restart with a fixed environment (malloc thresholds, no telemetry), the command
//! line's shared parsing and `--version`, and reading `hubdex.toml`.

mod cli;
mod config_file;
mod embed;
mod error;
mod hf;
mod model;
mod restart;
mod sums;

pub use cli::{parse_args, run_to_exit};
pub use config_file::{ConfigFileError, read_config_file};
pub use embed::{
    BATCH_SIZE, BATCH_TOKENS, Device, Embedder, MAX_TOKENS, SessionOptions, TextEmbedder, Texts,
    normalised,
};
pub use error::EmbedError;
pub use model::{
    DEFAULT_MODEL_NAME, RUNTIME_LIBRARY, VersionReport, bundled, cache_dir, default_model,
    default_model_dir, model_files, model_inputs, ort_environment, print_version_if_asked,
    resolve_model_dir, runtime_library_path, version_report,
};
pub use restart::{ORT_DISABLE_TELEMETRY, restart_with_fixed_environment};
pub use sums::{SHA256SUMS, verify_sums};
