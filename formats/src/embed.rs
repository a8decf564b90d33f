//! The text → vector model contract: tokenise, run the ONNX model, mean-pool over the
//! attention mask, L2-normalise. Used by the indexer (documents) and the server (queries).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::session::Session;
use ort::value::Tensor;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use crate::error::EmbedError;
use crate::manifest::ModelIdentity;
use crate::row::sha256_hex;

/// Tokens the model sees per text; longer texts are cut.
pub const MAX_TOKENS: usize = 256;

/// Texts run through the model at once.
pub const BATCH_SIZE: usize = 32;

/// Where inference runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    #[default]
    Cpu,
    Cuda,
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda),
            _ => Err(format!("unknown device {s:?}; allowed: cpu, cuda")),
        }
    }
}

/// The ONNX Runtime library: $ORT_DYLIB_PATH, else where `ci/setup` puts it.
pub fn runtime_library_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return PathBuf::from(p);
    }
    cache_dir().join("onnxruntime").join("libonnxruntime.so")
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

pub(crate) fn environment() -> Result<&'static ort::environment::Environment, EmbedError> {
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

/// A loaded embedding model. Cheap to share: inference runs on a small pool of sessions
/// (ONNX Runtime runs one inference at a time per session), so concurrent queries do not wait
/// on one lock.
pub struct Embedder {
    sessions: Vec<Mutex<Session>>,
    tokenizer: Tokenizer,
    identity: ModelIdentity,
    token_type_ids: bool,
    output: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("identity", &self.identity).finish()
    }
}

impl Embedder {
    /// Loads `dir/model.onnx` and `dir/tokenizer.json` on `device`, with one session using
    /// every core: what batch embedding wants.
    pub fn load(dir: &Path, device: Device) -> Result<Self, EmbedError> {
        Self::load_pooled(dir, device, 1)
    }

    /// Loads the model with `sessions` sessions sharing the cores: what a server answering
    /// concurrent queries wants (one query's embedding gains little from more threads).
    pub fn load_pooled(dir: &Path, device: Device, sessions: usize) -> Result<Self, EmbedError> {
        let model_path = dir.join("model.onnx");
        let tokenizer_path = dir.join("tokenizer.json");
        for (p, file) in [(&model_path, "model.onnx"), (&tokenizer_path, "tokenizer.json")] {
            if !p.is_file() {
                return Err(EmbedError::MissingModelFile { dir: dir.to_path_buf(), file });
            }
        }
        let model_bytes = std::fs::read(&model_path)
            .map_err(|source| EmbedError::Io { path: model_path.clone(), source })?;
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        // The shipped tokenizer pads every text to a fixed length; pad per batch instead.
        tokenizer.with_padding(None::<PaddingParams>);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;

        let env = environment()?;
        let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
        let pool = sessions.max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut sessions = Vec::with_capacity(pool);
        for _ in 0..pool {
            let mut builder = Session::builder(env).map_err(ort_err)?;
            if device == Device::Cuda {
                builder = builder
                    .with_execution_providers([ort::ep::CUDA::default().build().error_on_failure()])
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            builder = builder
                .with_intra_threads((cores / pool).max(1))
                .map_err(|e| EmbedError::Ort(e.to_string()))?;
            if pool > 1 {
                // Sessions that share the cores with each other (and with search) must not
                // spin between runs: a spinning pool steals the core another query needs.
                builder = builder
                    .with_intra_op_spinning(false)
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            sessions.push(Mutex::new(builder.commit_from_memory(&model_bytes).map_err(ort_err)?));
        }
        let session =
            sessions[0].lock().map_err(|_| EmbedError::Ort("session lock poisoned".into()))?;

        let token_type_ids = session.inputs().iter().any(|i| i.name() == "token_type_ids");
        let output = session
            .outputs()
            .iter()
            .map(|o| o.name().to_string())
            .find(|n| n == "last_hidden_state")
            .or_else(|| session.outputs().first().map(|o| o.name().to_string()))
            .ok_or_else(|| EmbedError::Output("the model has no outputs".into()))?;
        drop(session);
        let name = dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let mut embedder = Embedder {
            sessions,
            tokenizer,
            identity: ModelIdentity {
                name,
                dim: 0,
                max_tokens: MAX_TOKENS,
                pooling: "mean".into(),
                model_sha256: sha256_hex(&model_bytes),
            },
            token_type_ids,
            output,
        };
        embedder.identity.dim = embedder.embed_batch(&["dimension probe"])?[0].len();
        Ok(embedder)
    }

    /// Which model this is.
    pub fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    /// Embeds texts: sorted by length into batches so padding stays small, results in input
    /// order. `progress` is called with the number of texts finished after each batch.
    pub fn embed(
        &self,
        texts: &[&str],
        mut progress: impl FnMut(usize),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
            progress(chunk.len());
        }
        Ok(out)
    }

    /// A free session of the pool, or the first one to come free.
    fn session(&self) -> Result<std::sync::MutexGuard<'_, Session>, EmbedError> {
        for s in &self.sessions {
            if let Ok(guard) = s.try_lock() {
                return Ok(guard);
            }
        }
        // All busy: wait on one, spread by thread so waiters do not pile onto the first.
        let tid = std::thread::current().id();
        let i = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            tid.hash(&mut h);
            h.finish() as usize % self.sessions.len()
        };
        self.sessions[i].lock().map_err(|_| EmbedError::Ort("session lock poisoned".into()))
    }

    /// Embeds one query.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed_batch(&[text])?.remove(0))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let (n, seq, mask, inputs) = model_inputs(&enc, self.token_type_ids)?;
        let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
        let mut session = self.session()?;
        let outputs = session.run(inputs).map_err(ort_err)?;
        let value = outputs
            .get(&self.output)
            .ok_or_else(|| EmbedError::Output(format!("no output named {}", self.output)))?;
        let (out_shape, data) = value.try_extract_tensor::<f32>().map_err(ort_err)?;
        let dims: Vec<i64> = out_shape.iter().copied().collect();
        match dims.as_slice() {
            [b, s, d] if *b as usize == n && *s as usize == seq => {
                let d = *d as usize;
                Ok((0..n)
                    .map(|b| {
                        mean_pool(
                            &data[b * seq * d..(b + 1) * seq * d],
                            &mask[b * seq..(b + 1) * seq],
                            d,
                        )
                    })
                    .collect())
            }
            [b, d] if *b as usize == n => {
                let d = *d as usize;
                Ok((0..n).map(|b| normalised(data[b * d..(b + 1) * d].to_vec())).collect())
            }
            other => Err(EmbedError::Output(format!(
                "unexpected output shape {other:?} for {n} texts of {seq} tokens"
            ))),
        }
    }
}

fn mean_pool(hidden: &[f32], mask: &[i64], dim: usize) -> Vec<f32> {
    let mut sum = vec![0f32; dim];
    let mut count = 0f32;
    for (t, &m) in mask.iter().enumerate() {
        if m != 0 {
            for (s, h) in sum.iter_mut().zip(&hidden[t * dim..(t + 1) * dim]) {
                *s += h;
            }
            count += 1.0;
        }
    }
    let count = count.max(1e-9);
    normalised(sum.into_iter().map(|s| s / count).collect())
}

/// The ONNX inputs of a tokenized batch, padded to its longest member: (batch size, sequence
/// length, attention mask, named inputs). `token_type_ids` only when the model takes them.
#[allow(clippy::type_complexity)]
pub(crate) fn model_inputs(
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

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
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
        return crate::hf::download(repo);
    }
    Err(EmbedError::MissingModelFile { dir: local.to_path_buf(), file: "model.onnx" })
}
