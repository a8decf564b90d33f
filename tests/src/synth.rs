//! What a build-scale measurement needs: a synthetic git history of any length (written with
//! `git fast-import`, so 100k commits take seconds), and a cheap deterministic embedder that
//! stands in for the model where the model would take hours. The embedder is reachable from
//! `hubdex-bench` and the tests only (through `hubdex_indexer::build_with`), never from
//! `hubdex-index`, and its identity says what it is.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use hubdex_formats::{ModelIdentity, sha256_hex};
use hubdex_runtime::{EmbedError, TextEmbedder, Texts, normalised};

/// Words the synthetic code and messages are made of.
const WORDS: &[&str] = &[
    "parse", "index", "cache", "retry", "token", "stream", "buffer", "commit", "search", "merge",
    "vector", "budget", "segment", "thread", "config", "reader", "writer", "error", "query",
    "score", "limit", "window", "batch", "graph", "layer", "queue", "clock", "shard", "store",
    "delta", "path", "tree", "blob", "diff", "hunk", "span", "field", "column", "record", "schema",
];

/// splitmix64: a small deterministic generator (not for anything secret): the same seed, the
/// same history here, the same variations in `hubdex-bench prepare`.
pub struct Mix(pub u64);

impl Mix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Roughly N(0, 1): the sum of four uniforms, centred and scaled.
    pub fn gauss(&mut self) -> f32 {
        let s: f64 = (0..4).map(|_| (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64).sum();
        ((s - 2.0) * (3.0f64).sqrt()) as f32
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len())]
    }
}

/// Source files the history edits (each commit changes one to four of them).
const FILES: usize = 400;

/// Functions per file.
const FUNCTIONS: usize = 12;

fn function(rng: &mut Mix, name: &str) -> String {
    let (a, b, c) = (rng.word(), rng.word(), rng.word());
    format!(
        "/// {a} the {b} before the {c} is read.\npub fn {name}(input: &str) -> usize {{\n    \
         let {a} = input.len();\n    let {b} = {a} * 2;\n    {b} + {}\n}}\n\n",
        rng.below(1000)
    )
}

/// Writes a history of `commits` commits to a new repository at `dir` (which must not
/// exist): each commit changes one to four of `FILES` Rust files (rewriting one function in
/// each), with a subject and a body of generated words, a minute apart. Deterministic in
/// `seed`. Its messages state no edge: [`synthetic_history_with_references`] writes one whose
/// messages do.
pub fn synthetic_history(dir: &Path, commits: usize, seed: u64) -> std::io::Result<()> {
    synthetic_history_with_references(dir, commits, seed, false)
}

/// [`synthetic_history`], and with `references` each commit's subject names its pull request
/// (`… (#N)`, as a squash merge's does) and its body closes an earlier issue (`Fixes #M.`):
/// two edges a commit, as a GitHub project's history has.
pub fn synthetic_history_with_references(
    dir: &Path,
    commits: usize,
    seed: u64,
    references: bool,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let ok = Command::new("git").args(["init", "-q", "-b", "main"]).current_dir(dir).status()?;
    if !ok.success() {
        return Err(std::io::Error::other("git init failed"));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet", "--done"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()?;
    let mut out = std::io::BufWriter::new(child.stdin.take().expect("piped stdin"));
    let mut rng = Mix(seed);
    let mut files: Vec<Vec<String>> = (0..FILES)
        .map(|f| (0..FUNCTIONS).map(|k| function(&mut rng, &format!("f{f}_{k}"))).collect())
        .collect();
    for n in 0..commits {
        let when = 1_500_000_000 + n as i64 * 60;
        let subject = format!(
            "{} {} in the {} {} ({n})",
            capitalised(rng.word()),
            rng.word(),
            rng.word(),
            rng.word()
        );
        let body = (0..20).map(|_| rng.word()).collect::<Vec<_>>().join(" ");
        let message = if references {
            let (pull, issue) = (commits + n + 1, 1 + rng.below(n + 1));
            format!("{subject} (#{pull})\n\n{body}\n\nFixes #{issue}.\n")
        } else {
            format!("{subject}\n\n{body}\n")
        };
        writeln!(out, "commit refs/heads/main")?;
        writeln!(out, "mark :{}", n + 1)?;
        writeln!(out, "author Dev {} <dev{}@example.com> {when} +0000", n % 7, n % 7)?;
        writeln!(out, "committer Dev {} <dev{}@example.com> {when} +0000", n % 7, n % 7)?;
        writeln!(out, "data {}\n{message}", message.len())?;
        if n > 0 {
            writeln!(out, "from :{n}")?;
        }
        let touched = if n == 0 { FILES } else { 1 + rng.below(4) };
        for t in 0..touched {
            let f = if n == 0 { t } else { rng.below(FILES) };
            if n > 0 {
                let k = rng.below(FUNCTIONS);
                files[f][k] = function(&mut rng, &format!("f{f}_{k}"));
            }
            let text = files[f].concat();
            writeln!(out, "M 100644 inline src/m{}/file{f}.rs", f % 20)?;
            writeln!(out, "data {}\n{text}", text.len())?;
        }
        writeln!(out)?;
    }
    writeln!(out, "done")?;
    drop(out);
    if !child.wait()?.success() {
        return Err(std::io::Error::other("git fast-import failed"));
    }
    // fast-import writes objects and the branch, not the index or the work tree: check HEAD
    // out, so a later commit (add_commit) starts from it.
    let ok = Command::new("git").args(["reset", "-q", "--hard"]).current_dir(dir).status()?;
    if !ok.success() {
        return Err(std::io::Error::other("git reset --hard failed"));
    }
    Ok(())
}

/// Adds one commit to a history [`synthetic_history`] wrote: it writes the file `path`
/// (relative to the repository).
pub fn add_commit(dir: &Path, subject: &str, path: &str) -> std::io::Result<()> {
    add_commit_at(dir, subject, path, "2030-01-01T00:00:00Z")
}

/// [`add_commit`] on the current branch with the author date `authored` (git's date formats:
/// `@<seconds> +0000` too): a commit authored long before it was committed, as a rebased pull
/// request's are.
pub fn add_commit_at(dir: &Path, subject: &str, path: &str, authored: &str) -> std::io::Result<()> {
    let file = dir.join(path);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&file, format!("{subject}\n"))?;
    for args in [
        vec!["add", path],
        vec![
            "-c",
            "user.name=Dev",
            "-c",
            "user.email=dev@example.com",
            "commit",
            "-q",
            "-m",
            subject,
        ],
    ] {
        let ok = Command::new("git")
            .args(&args)
            .current_dir(dir)
            .env("GIT_AUTHOR_DATE", authored)
            .env("GIT_COMMITTER_DATE", "2030-01-01T00:00:00Z")
            .status()?;
        if !ok.success() {
            return Err(std::io::Error::other(format!("git {args:?} failed")));
        }
    }
    Ok(())
}

fn capitalised(w: &str) -> String {
    let mut c = w.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// Stands in for the model where only a build's memory and speed outside embedding are
/// measured: each word of a text adds to one of `dim` dimensions (by its hash), and the sum is
/// normalised. Deterministic and fast; its vectors mean nothing to a person. Its identity
/// names it, so a snapshot built with it can never pass for one built with the model.
#[derive(Debug)]
pub struct HashEmbedder {
    identity: ModelIdentity,
}

impl HashEmbedder {
    /// A hash embedder of `dim` dimensions.
    pub fn new(dim: usize) -> Self {
        HashEmbedder {
            identity: ModelIdentity {
                name: "hash-embedder (hubdex-bench only, not a model)".into(),
                dim,
                max_tokens: 256,
                pooling: "hash".into(),
                model_sha256: sha256_hex(format!("hubdex-bench hash embedder v1 {dim}").as_bytes()),
            },
        }
    }
}

impl TextEmbedder for HashEmbedder {
    fn identity(&self) -> &ModelIdentity {
        &self.identity
    }

    fn embed_texts(
        &self,
        texts: &dyn Texts,
        each: &mut dyn FnMut(usize, Vec<f32>),
    ) -> Result<(), EmbedError> {
        let dim = self.identity.dim;
        for i in 0..texts.count() {
            let text = texts.text(i);
            let mut v = vec![0f32; dim];
            for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                let h = word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
                });
                v[(h % dim as u64) as usize] += if h & (1 << 63) != 0 { 1.0 } else { -1.0 };
            }
            each(i, normalised(v));
        }
        Ok(())
    }
}
