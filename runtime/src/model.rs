//! What the embedder and the reranker share: where the runtime, models and caches live, the one
//! ONNX Runtime environment, a model directory's files (model.onnx + a tokenizer that pads per
//! batch and truncates), the ONNX inputs of a tokenized batch, and resolving a model spec (a
//! directory or a Hugging Face repo id) to a directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::value::Tensor;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::error::EmbedError;

/// The runtime library's file name in a release archive and in the cache.
pub const RUNTIME_LIBRARY: &str =
    if cfg!(target_os = "macos") { "libonnxruntime.dylib" } else { "libonnxruntime.so" };

/// The default model's directory name, in a release archive and in the cache.
pub const DEFAULT_MODEL_NAME: &str = "all-MiniLM-L6-v2-int8";

/// The release archive this binary runs from, if it is one: the directory above `bin/` (or the
/// binary's own directory) that holds `rel`. The binary's path is canonicalised first: run
/// through a symlink on PATH (macOS gives the link's path), it still finds its archive.
pub fn bundled(rel: &str) -> Option<PathBuf> {
    archive_roots().into_iter().map(|root| root.join(rel)).find(|p| p.exists())
}

/// Where a release archive would hold this binary's `lib/` and `models/`: the directory above
/// the binary's, then the binary's own.
fn archive_roots() -> Vec<PathBuf> {
    let Ok(exe) = std::env::current_exe() else { return Vec::new() };
    let exe = exe.canonicalize().unwrap_or(exe);
    let Some(bin) = exe.parent() else { return Vec::new() };
    [bin.parent(), Some(bin)].into_iter().flatten().map(Path::to_path_buf).collect()
}

/// Every place `rel` is looked for, in order, for an error to name: the release archive beside
/// this binary, the environment variable `var` (or that it is unset), then `cache`.
fn looked_at(rel: &str, var: &str, cache: &Path) -> String {
    let mut places: Vec<String> =
        archive_roots().iter().take(1).map(|root| root.join(rel).display().to_string()).collect();
    places.push(match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => format!("${var} = {}", PathBuf::from(v).display()),
        None => format!("${var} (unset)"),
    });
    places.push(cache.display().to_string());
    places.join(", ")
}

/// The ONNX Runtime library: the release archive's `lib/libonnxruntime.so` beside this
/// binary, else $ORT_DYLIB_PATH, else where `ci/setup` puts it in the cache.
pub fn runtime_library_path() -> PathBuf {
    if let Some(p) = bundled(&format!("lib/{RUNTIME_LIBRARY}")) {
        return p;
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return PathBuf::from(p);
    }
    cache_dir().join("onnxruntime").join(RUNTIME_LIBRARY)
}

/// The model both binaries use when `--model` says nothing, as the string `--model` takes:
/// the release archive's `models/all-MiniLM-L6-v2-int8` beside this binary, else
/// $HUBDEX_MODEL_DIR, else [`default_model_dir`].
pub fn default_model() -> String {
    bundled(&format!("models/{DEFAULT_MODEL_NAME}"))
        .map(|p| p.display().to_string())
        .or_else(|| std::env::var("HUBDEX_MODEL_DIR").ok().filter(|m| !m.is_empty()))
        .unwrap_or_else(|| default_model_dir().display().to_string())
}

/// The default model found in none of the places [`default_model`] looks, each named.
fn no_default_model() -> EmbedError {
    let rel = format!("models/{DEFAULT_MODEL_NAME}");
    EmbedError::NoModel { looked_at: looked_at(&rel, "HUBDEX_MODEL_DIR", &default_model_dir()) }
}

/// Where `ci/setup` installs the default model (all-MiniLM-L6-v2, int8 ONNX).
pub fn default_model_dir() -> PathBuf {
    cache_dir().join("models").join(DEFAULT_MODEL_NAME)
}

/// When the first argument is `--version` or `-V`: prints [`version_report`], then on stderr
/// each thing that keeps the binary from working, and gives the exit code (failure when there
/// is one). `None` for any other command line. Both binaries call it before parsing their
/// arguments; the commit is read at compile time in each binary, so a new commit relinks only
/// the binaries.
pub fn print_version_if_asked(
    binary: &str,
    version: &str,
    commit: Option<&str>,
) -> Option<std::process::ExitCode> {
    if !std::env::args().nth(1).is_some_and(|a| a == "--version" || a == "-V") {
        return None;
    }
    let report = version_report(binary, version, commit);
    print!("{}", report.text);
    for problem in &report.problems {
        eprintln!("{binary}: {problem}");
    }
    Some(if report.problems.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// What `--version` found.
#[derive(Debug, Clone)]
pub struct VersionReport {
    /// The lines it prints: the binary's version and commit, the runtime and the model.
    pub text: String,
    /// What keeps the binary from embedding: a runtime library that cannot be loaded, a model
    /// directory without its files. Empty when both are usable.
    pub problems: Vec<String>,
}

/// What `--version` prints: the binary's version and commit, the ONNX Runtime it finds (its
/// version and path, or why it cannot load it) and the default model (its directory and the
/// sha256 of its model.onnx, or what is missing). `commit` is the commit the binary was built
/// from (`$HUBDEX_GIT_COMMIT` at build time; `ci/package` sets it).
pub fn version_report(binary: &str, version: &str, commit: Option<&str>) -> VersionReport {
    let commit = commit.filter(|c| !c.is_empty()).unwrap_or("unknown (a development build)");
    let mut problems = Vec::new();
    let runtime = runtime_library_path();
    let runtime_line = match ort_environment() {
        Ok(_) => {
            // The library's build info names its commit; its version is the VERSION file
            // ci/setup writes beside it (and ci/package copies into lib/).
            let info = ort::info();
            let build = info
                .split(',')
                .find_map(|part| part.trim().strip_prefix("git-commit-id="))
                .unwrap_or("unknown");
            let version = runtime
                .parent()
                .and_then(|d| std::fs::read_to_string(d.join("VERSION")).ok())
                .map_or_else(|| "version unknown".to_string(), |v| v.trim().to_string());
            format!("{version} (build {build}, {})", runtime.display())
        }
        Err(e) => {
            problems.push(format!("the ONNX Runtime library cannot be used: {e}"));
            format!("not loaded: {e}")
        }
    };
    let model = default_model();
    let dir = Path::new(&model);
    let model_line = match hubdex_formats::sha256_file(&dir.join("model.onnx")) {
        Ok((sha256, _)) => format!(
            "{} (sha256 {sha256}, {model})",
            dir.file_name().map_or(model.clone(), |n| n.to_string_lossy().into()),
        ),
        Err(e) => format!("none: {model}/model.onnx: {e}"),
    };
    let mut model_usable = dir.is_dir();
    if !model_usable {
        problems.push(format!("the model cannot be used: {}", no_default_model()));
    } else {
        for file in ["model.onnx", "tokenizer.json"] {
            let path = dir.join(file);
            if let Err(e) = std::fs::File::open(&path) {
                problems.push(format!("the model cannot be used: {}: {e}", path.display()));
                model_usable = false;
            }
        }
    }
    if model_usable && let Err(e) = crate::sums::verify_sums(dir, &verified_dir()) {
        problems.push(format!("the model cannot be used: {e}"));
    }
    let text = format!(
        "{binary} {version}\ncommit: {commit}\nonnx runtime: {runtime_line}\nmodel: {model_line}\n"
    );
    VersionReport { text, problems }
}

/// Where what passed [`crate::verify_sums`] is remembered: the cache's `verified/`.
fn verified_dir() -> PathBuf {
    cache_dir().join("verified")
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
            let rel = format!("lib/{RUNTIME_LIBRARY}");
            let cache = cache_dir().join("onnxruntime").join(RUNTIME_LIBRARY);
            return Err(format!(
                "no such file (looked at {})",
                looked_at(&rel, "ORT_DYLIB_PATH", &cache)
            ));
        }
        check_library_file(&path)?;
        if let Some(dir) = path.parent() {
            crate::sums::verify_sums(dir, &verified_dir()).map_err(|e| e.to_string())?;
        }
        ort::init_from(&path)
            .map_err(|e| e.to_string())?
            .with_name("hubdex")
            // ORT_DISABLE_TELEMETRY (crate::restart) keeps the client from starting at all.
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())
    });
    env.as_ref().map_err(|detail| EmbedError::Runtime { path, detail: detail.clone() })
}

/// Whether `path` is a whole shared library: an ELF or Mach-O file with all its loadable
/// segments within it (a universal Mach-O: all its architectures). The dynamic loader maps
/// a truncated library and the process dies of SIGBUS when it touches the missing pages; this
/// turns that into an error naming the file. Reads the headers, not the whole library.
fn check_library_file(path: &Path) -> Result<(), String> {
    use object::read::macho::{FatArch, MachOFatFile32, MachOFatFile64};
    use object::{FileKind, Object as _, ObjectSegment as _, ReadCache};
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let data = &ReadCache::new(file);
    let damaged = |e: object::Error| format!("not a shared library ({e}): damaged or truncated?");
    let within = |what: &str, offset: u64, size: u64| {
        if offset.saturating_add(size) > len {
            return Err(format!(
                "truncated: {what} ends at byte {}, the file has {len} bytes",
                offset.saturating_add(size)
            ));
        }
        Ok(())
    };
    // A universal file: every architecture it lists must lie within it.
    fn arches_within<A: FatArch>(
        arches: &[A],
        within: impl Fn(&str, u64, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        arches.iter().try_for_each(|a| {
            let (offset, size) = a.file_range();
            within("an architecture", offset, size)
        })
    }
    match FileKind::parse(data).map_err(damaged)? {
        FileKind::MachOFat32 => {
            arches_within(MachOFatFile32::parse(data).map_err(damaged)?.arches(), within)
        }
        FileKind::MachOFat64 => {
            arches_within(MachOFatFile64::parse(data).map_err(damaged)?.arches(), within)
        }
        _ => {
            let object = object::File::parse(data).map_err(damaged)?;
            let mut segments = 0;
            for segment in object.segments() {
                let (start, size) = segment.file_range();
                within("a segment", start, size)?;
                segments += 1;
            }
            match segments {
                0 => Err("no loadable segments: damaged or truncated?".to_string()),
                _ => Ok(()),
            }
        }
    }
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
    crate::sums::verify_sums(dir, &verified_dir())?;
    let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
        .map_err(|e| EmbedError::Tokenizer(format!("{}: {e}", tokenizer_path.display())))?;
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
    if spec == default_model() {
        return Err(no_default_model());
    }
    Err(EmbedError::MissingModelFile { dir: local.to_path_buf(), file: "model.onnx" })
}

#[cfg(test)]
mod tests {
    use super::check_library_file;

    /// The test binary itself is a whole ELF (or Mach-O) file; cut short, or not a library at
    /// all, it is refused with a reason.
    #[test]
    fn a_cut_or_foreign_library_file_is_refused_with_a_reason() {
        let exe = std::env::current_exe().unwrap();
        check_library_file(&exe).unwrap();

        let dir = tempfile::tempdir().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let cut = dir.path().join("cut.so");
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let err = check_library_file(&cut).unwrap_err();
        assert!(err.contains("truncated") || err.contains("damaged"), "{err}");

        let text = dir.path().join("text.so");
        std::fs::write(&text, "not a library\n").unwrap();
        assert!(check_library_file(&text).unwrap_err().contains("not a shared library"));
        assert!(check_library_file(&dir.path().join("absent.so")).is_err());
    }
}
