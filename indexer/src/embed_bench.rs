//! `hubdex-index bench-embed`: the embedding workload ci/bench-gpu times on a CPU and a GPU.
//! A fixed corpus — the Markdown of a checkout's README.md and docs/, chunked as the indexer
//! chunks docs, repeated to `n` texts — embedded once after a warm-up batch.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use hubdex_runtime::{Device, Embedder};
use serde::Serialize;

/// What one bench-embed run measured.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedBenchReport {
    /// Where the model ran (`Cpu` or `Cuda`).
    pub device: String,
    /// How many texts were embedded.
    pub chunks: usize,
    /// Seconds the timed pass took.
    pub seconds: f64,
    /// `chunks / seconds`.
    pub chunks_per_s: f64,
}

/// The bench corpus: every chunk of `root`'s README.md and docs/*.md, in path order.
pub fn embed_bench_corpus(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut paths: Vec<PathBuf> = vec![root.join("README.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        paths.extend(entries.filter_map(Result::ok).map(|e| e.path()));
    }
    paths.sort();
    let mut corpus = Vec::new();
    for p in paths.iter().filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md")) {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        corpus.extend(crate::sources::markdown::chunk_markdown(&text).into_iter().map(|c| c.text));
    }
    anyhow::ensure!(
        !corpus.is_empty(),
        "no markdown found under {}: run bench-embed from the repository root",
        root.display()
    );
    Ok(corpus)
}

/// Embeds `n` texts of the corpus under `root` with the model in `model_dir` on `device`: one
/// warm-up batch, then one timed pass.
pub fn embed_bench(
    model_dir: &Path,
    device: Device,
    n: usize,
    root: &Path,
) -> anyhow::Result<EmbedBenchReport> {
    let corpus = embed_bench_corpus(root)?;
    let texts: Vec<&str> = corpus.iter().cycle().take(n).map(String::as_str).collect();
    let embedder = Embedder::load(model_dir, device)?;
    embedder.embed(&texts[..texts.len().min(64)])?;
    let t = Instant::now();
    embedder.embed(&texts)?;
    let seconds = t.elapsed().as_secs_f64();
    Ok(EmbedBenchReport {
        device: format!("{device:?}"),
        chunks: texts.len(),
        seconds,
        chunks_per_s: texts.len() as f64 / seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_this_checkout_s_markdown_and_an_empty_root_is_a_clear_error() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let corpus = embed_bench_corpus(&root).unwrap();
        assert!(corpus.len() > 20, "README.md and docs/ chunk into many texts: {}", corpus.len());
        let empty = tempfile::tempdir().unwrap();
        let err = embed_bench_corpus(empty.path()).unwrap_err().to_string();
        assert!(err.contains("no markdown found"), "{err}");
    }
}
