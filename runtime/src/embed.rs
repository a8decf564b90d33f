//! The text → vector model contract: tokenise, run the ONNX model, mean-pool over the
//! attention mask, L2-normalise. Used by the indexer (documents) and the server (queries).

use std::path::Path;
use std::sync::Mutex;

use ort::session::Session;
use tokenizers::Tokenizer;

use crate::error::EmbedError;
use crate::model::{model_files, model_inputs, ort_environment};
use hubdex_formats::ModelIdentity;

/// Tokens the model sees per text; longer texts are cut.
pub const MAX_TOKENS: usize = 256;

/// Texts run through the model at once.
pub const BATCH_SIZE: usize = 32;

/// Tokens one batch may hold on the CPU (its texts × its longest text's tokens, as padded): a
/// batch of long texts is smaller than [`BATCH_SIZE`] (two texts of 256 tokens, sixteen of
/// 32), so ONNX Runtime's buffers for the largest batches stay small (on 1,024 texts: peak
/// RSS 935 → 283 MiB, faster for less padding, the same vector bytes). On CUDA batches stay
/// [`BATCH_SIZE`] texts: small batches cost a GPU throughput.
pub const BATCH_TOKENS: usize = 512;

/// The tokens a text is taken to have when batches are formed before tokenising: a byte in
/// three plus the two special tokens, at most [`MAX_TOKENS`] (WordPiece over English and code
/// gives about one token per three to four bytes, so this rarely underestimates).
fn estimated_tokens(bytes: usize) -> usize {
    (bytes / 3 + 2).min(MAX_TOKENS)
}

/// Where inference runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    #[default]
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// ONNX Runtime's CUDA execution provider (a GPU runner).
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

/// What a build embeds its rows with: [`Embedder`] (the model) everywhere, or a cheap stand-in
/// that only `hubdex-bench` builds with, to measure a build's memory at sizes the model would
/// take hours over (it never reaches `hubdex-index`).
pub trait TextEmbedder: Send + Sync {
    /// Which model this is (its identity goes into every segment it embeds).
    fn identity(&self) -> &ModelIdentity;

    /// Embeds texts, handing each vector to `each` with the text's index as soon as its batch
    /// is done (in no particular order), so a caller keeps what it needs of a vector and
    /// nothing holds all of them as float32. A text is asked for when its batch runs.
    fn embed_texts(
        &self,
        texts: &dyn Texts,
        each: &mut dyn FnMut(usize, Vec<f32>),
    ) -> Result<(), EmbedError>;
}

/// Texts to embed, made a batch at a time: an embedder asks every text's length up front (what
/// its batches are formed by) and a text itself only when its batch runs, so a caller need not
/// hold them all (a build segment's would be a second copy of its rows' texts).
pub trait Texts {
    /// How many texts there are.
    fn count(&self) -> usize;
    /// The length in bytes of text `i`: of what [`Texts::text`] gives for it.
    fn len_of(&self, i: usize) -> usize;
    /// Text `i`.
    fn text(&self, i: usize) -> std::borrow::Cow<'_, str>;
}

impl Texts for &[&str] {
    fn count(&self) -> usize {
        self.len()
    }
    fn len_of(&self, i: usize) -> usize {
        self[i].len()
    }
    fn text(&self, i: usize) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(self[i])
    }
}

impl TextEmbedder for Embedder {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn embed_texts(
        &self,
        texts: &dyn Texts,
        each: &mut dyn FnMut(usize, Vec<f32>),
    ) -> Result<(), EmbedError> {
        self.embed_from(texts, each)
    }
}

/// A loaded embedding model. Cheap to share: inference runs on a small pool of sessions
/// (ONNX Runtime runs one inference at a time per session), so concurrent queries do not wait
/// on one lock.
pub struct Embedder {
    sessions: Vec<Mutex<Session>>,
    /// [`BATCH_TOKENS`], unless a measurement changes it.
    batch_tokens: usize,
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

/// How an [`Embedder`]'s ONNX Runtime sessions are built. [`Embedder::load`] (batch
/// embedding) and [`Embedder::load_pooled`] (a server's queries) choose; `hubdex-bench
/// embedder-memory` measures what each choice costs. None of them changes a vector's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// Sessions in the pool; each runs one inference at a time.
    pub sessions: usize,
    /// Whether a session's idle threads spin (batch embedding) or sleep (sessions that share
    /// the cores with each other and with search).
    pub spin: bool,
    /// ONNX Runtime's CPU memory arena: buffers freed by a run are kept for the next one.
    pub arena: bool,
    /// Weights rearranged for the CPU kernels ("pre-packed") when the session is built.
    pub prepacking: bool,
    /// The pool's sessions share one pre-packed copy of the weights.
    pub share_prepacked: bool,
    /// ONNX Runtime's constant folding. The int8 model stores its weights as int8 and scales
    /// them to float32 in the graph (Cast, Mul): folding does that once, at load, and keeps
    /// the float32 weights (4 bytes a weight) for the session's life.
    pub fold_constants: bool,
}

impl SessionOptions {
    /// Batch embedding: one session on every core, spinning between batches.
    pub const BATCH: SessionOptions = SessionOptions {
        sessions: 1,
        spin: true,
        arena: true,
        prepacking: true,
        share_prepacked: false,
        fold_constants: true,
    };

    /// A server's query sessions: `sessions` sharing the cores, none spinning.
    pub fn queries(sessions: usize) -> SessionOptions {
        SessionOptions { sessions: sessions.max(1), spin: false, ..SessionOptions::BATCH }
    }
}

impl Embedder {
    /// Loads `dir/model.onnx` and `dir/tokenizer.json` on `device`, with one session using
    /// every core: what batch embedding wants.
    pub fn load(dir: &Path, device: Device) -> Result<Self, EmbedError> {
        Self::load_with(dir, device, SessionOptions::BATCH)
    }

    /// Loads the model with `sessions` sessions sharing the cores, none spinning between runs:
    /// what a server answering concurrent queries wants (one query's embedding gains little
    /// from more threads, and search needs the cores a spinning pool would hold).
    pub fn load_pooled(dir: &Path, device: Device, sessions: usize) -> Result<Self, EmbedError> {
        Self::load_with(dir, device, SessionOptions::queries(sessions))
    }

    /// Loads the model with sessions built as `options` says.
    pub fn load_with(
        dir: &Path,
        device: Device,
        options: SessionOptions,
    ) -> Result<Self, EmbedError> {
        let (model_path, tokenizer) = model_files(dir, MAX_TOKENS)?;
        let (model_sha256, _) = hubdex_formats::sha256_file(&model_path)
            .map_err(|source| EmbedError::Io { path: model_path.clone(), source })?;

        let env = ort_environment()?;
        let ort_err = |e: ort::Error| EmbedError::Ort(e.to_string());
        let pool = options.sessions.max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let prepacked = options.share_prepacked.then(ort::session::builder::PrepackedWeights::new);
        let mut sessions = Vec::with_capacity(pool);
        for _ in 0..pool {
            let mut builder = Session::builder(env).map_err(ort_err)?;
            if device == Device::Cuda {
                builder = builder
                    .with_execution_providers([ort::ep::CUDA::default().build().error_on_failure()])
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            } else if !options.arena {
                builder = builder
                    .with_execution_providers([ort::ep::CPU::default()
                        .with_arena_allocator(false)
                        .build()
                        .error_on_failure()])
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            // No memory pattern: ORT plans and keeps an allocation pattern per input shape it
            // sees, and every batch has its own padded length, so the patterns grow without
            // bound. Off, the vectors are the same bytes at the same chunks/s.
            builder = builder
                .with_intra_threads((cores / pool).max(1))
                .map_err(|e| EmbedError::Ort(e.to_string()))?
                .with_memory_pattern(false)
                .map_err(|e| EmbedError::Ort(e.to_string()))?;
            if !options.spin {
                // Sessions that share the cores with each other (and with search) must not
                // spin between runs: a spinning pool steals the core another query needs.
                builder = builder
                    .with_intra_op_spinning(false)
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            if !options.prepacking {
                builder =
                    builder.with_prepacking(false).map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            if !options.fold_constants {
                builder = builder
                    .with_disabled_optimizers("ConstantFolding")
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            if let Some(weights) = &prepacked {
                builder = builder
                    .with_prepacked_weights(weights)
                    .map_err(|e| EmbedError::Ort(e.to_string()))?;
            }
            // From the file, not from bytes read here: a copy of the model held while the
            // session is built raised a server's start peak above its steady state.
            let session = builder.commit_from_file(&model_path).map_err(|e| {
                EmbedError::BadModel { path: model_path.clone(), detail: e.to_string() }
            })?;
            sessions.push(Mutex::new(session));
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
            batch_tokens: if device == Device::Cuda { usize::MAX } else { BATCH_TOKENS },
            tokenizer,
            identity: ModelIdentity {
                name,
                dim: 0,
                max_tokens: MAX_TOKENS,
                pooling: "mean".into(),
                model_sha256,
            },
            token_type_ids,
            output,
        };
        embedder.identity.dim = embedder.embed_batch(&["dimension probe"])?[0].len();
        Ok(embedder)
    }

    /// The identity of the model in `dir` (what [`Embedder::load`] would report): `known` when
    /// its `model.onnx` is that model's (the same sha256: a snapshot's model), else from the
    /// lightest session that can say it (no arena, no pre-packing, no constant folding; one
    /// probe for the dimension). For a stage that only cuts for the model, where a full
    /// session would hold more than the crawl itself.
    pub fn identity_of(
        dir: &Path,
        known: Option<&ModelIdentity>,
    ) -> Result<ModelIdentity, EmbedError> {
        let (model_path, _) = model_files(dir, MAX_TOKENS)?;
        let (model_sha256, _) = hubdex_formats::sha256_file(&model_path)
            .map_err(|source| EmbedError::Io { path: model_path.clone(), source })?;
        if let Some(known) = known.filter(|k| k.model_sha256 == model_sha256) {
            return Ok(known.clone());
        }
        let light = SessionOptions {
            sessions: 1,
            spin: false,
            arena: false,
            prepacking: false,
            share_prepacked: false,
            fold_constants: false,
        };
        Ok(Self::load_with(dir, Device::Cpu, light)?.identity)
    }

    /// Which model this is.
    pub fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    /// Sets the tokens one batch may hold (`usize::MAX`: batches of [`BATCH_SIZE`] texts
    /// whatever their length, with no [`BATCH_TOKENS`] cap): `hubdex-bench embed` measures both.
    pub fn set_batch_tokens(&mut self, tokens: usize) {
        self.batch_tokens = tokens.max(1);
    }

    /// Embeds texts: sorted by length into batches so padding stays small, at most
    /// [`BATCH_SIZE`] texts and about [`BATCH_TOKENS`] tokens a batch; results in input order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = vec![Vec::new(); texts.len()];
        self.embed_each(texts, &mut |i, v| out[i] = v)?;
        Ok(out)
    }

    /// [`Self::embed`], handing each vector to `each` with its text's index as its batch ends
    /// (batches go shortest texts first): the caller keeps what it wants of each.
    pub fn embed_each(
        &self,
        texts: &[&str],
        each: &mut dyn FnMut(usize, Vec<f32>),
    ) -> Result<(), EmbedError> {
        self.embed_from(&texts, each)
    }

    /// [`Self::embed_each`] over texts made a batch at a time ([`Texts`]): the same batches, so
    /// the same vectors, as over the texts all made first.
    pub fn embed_from(
        &self,
        texts: &dyn Texts,
        each: &mut dyn FnMut(usize, Vec<f32>),
    ) -> Result<(), EmbedError> {
        let mut order: Vec<usize> = (0..texts.count()).collect();
        order.sort_by_key(|&i| texts.len_of(i));
        let mut start = 0;
        while start < order.len() {
            // Sorted by length: the text a batch adds last is its longest.
            let mut end = start + 1;
            while end < order.len()
                && end - start < BATCH_SIZE
                && (end - start + 1).saturating_mul(estimated_tokens(texts.len_of(order[end])))
                    <= self.batch_tokens
            {
                end += 1;
            }
            let chunk = &order[start..end];
            let made: Vec<std::borrow::Cow<'_, str>> =
                chunk.iter().map(|&i| texts.text(i)).collect();
            let batch: Vec<&str> = made.iter().map(|t| t.as_ref()).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                each(i, v);
            }
            start = end;
        }
        Ok(())
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

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 1e-12 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}
