//! `hubdex.toml`: the one file both binaries are configured by. It is read here, once, into
//! its sections; each binary deserializes its own (the indexer `repos`, `store`, `model`, ...;
//! the server `[oauth]`) and leaves the others alone.

use std::path::Path;

/// A hubdex.toml that cannot be read or is not TOML.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{path}: {detail}")]
    Toml {
        /// The file.
        path: String,
        /// What the parser said, with the line.
        detail: String,
    },
}

/// Reads a hubdex.toml into its top-level sections.
pub fn read_config_file(path: &Path) -> Result<toml::Table, ConfigFileError> {
    let shown = || path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigFileError::Io { path: shown(), source })?;
    toml::from_str(&text)
        .map_err(|e| ConfigFileError::Toml { path: shown(), detail: e.to_string() })
}
