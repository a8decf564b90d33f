//! Fetching a model from the Hugging Face hub into the local cache.
//!
//! This is the real download path; the machines hubdex is tested on cannot reach the hub, so
//! tests and CI use a local model directory instead.

use std::path::{Path, PathBuf};

use object_store::ObjectStoreExt as _;
use object_store::path::Path as ObjectPath;

use crate::error::EmbedError;

/// Files a model directory needs, and where the hub keeps them.
const FILES: [(&str, &[&str]); 2] =
    [("model.onnx", &["onnx/model.onnx", "model.onnx"]), ("tokenizer.json", &["tokenizer.json"])];

/// Downloads `repo` (owner/name, optionally `@revision`) into `models` (the cache's
/// `models/`).
pub(crate) fn download(repo: &str, models: &Path) -> Result<PathBuf, EmbedError> {
    let (name, revision) = repo.split_once('@').unwrap_or((repo, "main"));
    let dir = models.join(name.replace('/', "--")).join(revision);
    if FILES.iter().all(|(f, _)| dir.join(f).is_file()) {
        return Ok(dir);
    }
    let fail = |detail: String| EmbedError::Download { repo: repo.to_string(), detail };
    std::fs::create_dir_all(&dir).map_err(|source| EmbedError::Io { path: dir.clone(), source })?;
    let base = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| "https://huggingface.co".into());
    let url = format!("{base}/{name}/resolve/{revision}");
    hubdex_formats::install_tls_provider();
    let store = object_store::http::HttpBuilder::new()
        .with_url(&url)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    // Runs on its own thread so it works from sync and async callers alike.
    let dir2 = dir.clone();
    std::thread::spawn(move || -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            for (file, candidates) in FILES {
                let mut last = String::new();
                let mut done = false;
                for c in candidates {
                    match store.get(&ObjectPath::from(*c)).await {
                        Ok(got) => {
                            let bytes = got.bytes().await.map_err(|e| e.to_string())?;
                            let tmp = dir2.join(format!("{file}.part"));
                            std::fs::write(&tmp, &bytes).map_err(|e| e.to_string())?;
                            std::fs::rename(&tmp, dir2.join(file)).map_err(|e| e.to_string())?;
                            done = true;
                            break;
                        }
                        Err(e) => last = format!("{url}/{c}: {e}"),
                    }
                }
                if !done {
                    return Err(last);
                }
            }
            Ok(())
        })
    })
    .join()
    .map_err(|_| fail("download thread panicked".into()))?
    .map_err(fail)?;
    Ok(dir)
}
