//! A release archive's `SHA256SUMS` files (in `lib/` and in the model's directory): every file
//! one lists is checked against its sum before the runtime or the model is loaded, so a
//! damaged download or a flipped bit is an error naming the file instead of wrong vectors in a
//! new store. A file is hashed again only when it changed: what was verified is remembered in
//! the cache (`verified/`) by each file's size, modification time and inode.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::EmbedError;
use hubdex_formats::check_name;
use hubdex_formats::file_stamp;
use hubdex_formats::sha256_file;

/// The file that lists a directory's sums, as `sha256sum` writes it.
pub const SHA256SUMS: &str = "SHA256SUMS";

/// Checks every file `dir/SHA256SUMS` lists against its sum; a directory without one (a model
/// or runtime installed by `ci/setup`, which checks its own downloads) passes. What passed is
/// remembered under `remembered_dir` (the cache's `verified/`), so the next start hashes
/// nothing unless a file changed; a directory that cannot be written only costs the hashing
/// again.
pub fn verify_sums(dir: &Path, remembered_dir: &Path) -> Result<(), EmbedError> {
    let sums_path = dir.join(SHA256SUMS);
    let listed = match std::fs::read_to_string(&sums_path) {
        Ok(text) => parse_sums(&sums_path, &text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EmbedError::Io { path: sums_path, source: e }),
    };
    let stamps = stamps_of(dir, &listed)?;
    let remembered = remembered_path(remembered_dir, dir);
    if std::fs::read_to_string(&remembered).is_ok_and(|text| text == stamps) {
        return Ok(());
    }
    for (name, expected) in &listed {
        let path = dir.join(name);
        let (actual, _) =
            sha256_file(&path).map_err(|source| EmbedError::Io { path: path.clone(), source })?;
        if &actual != expected {
            return Err(EmbedError::Damaged { path, expected: expected.clone(), actual });
        }
    }
    // The files may have changed while they were hashed: remember only stamps taken before
    // hashing that still hold after it.
    if stamps_of(dir, &listed).is_ok_and(|now| now == stamps) {
        remember(&remembered, &stamps);
    }
    Ok(())
}

/// `(file name, sha256)` per line of a SHA256SUMS file (`<64 hex>  <name>`, `*` before the name
/// in binary mode). A name must be a plain file name: the list cannot reach outside `dir`.
fn parse_sums(path: &Path, text: &str) -> Result<Vec<(String, String)>, EmbedError> {
    let bad = |line: usize, why: &str| EmbedError::BadSums {
        path: path.to_path_buf(),
        detail: format!("line {line}: {why}"),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let (sum, name) = line.split_once(' ').ok_or_else(|| bad(i + 1, "no file name"))?;
        let name = name.trim_start_matches(' ').trim_start_matches('*');
        if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(i + 1, "not a sha256 (64 hex digits)"));
        }
        check_name("a file SHA256SUMS lists", name).map_err(|e| bad(i + 1, &e.to_string()))?;
        out.push((name.to_string(), sum.to_ascii_lowercase()));
    }
    if out.is_empty() {
        return Err(bad(0, "it lists no file"));
    }
    Ok(out)
}

/// One line per listed file: its name, expected sum and stamp (size, mtime, inode).
fn stamps_of(dir: &Path, listed: &[(String, String)]) -> Result<String, EmbedError> {
    let mut out = String::new();
    for (name, sum) in listed {
        let path = dir.join(name);
        let stamp = file_stamp(&path).map_err(|source| EmbedError::Io { path, source })?;
        out.push_str(&format!("{name}\t{sum}\t{stamp}\n"));
    }
    Ok(out)
}

/// Where what passed in `dir` is remembered: one file per directory, named by the sha256 of its
/// canonical path.
fn remembered_path(remembered_dir: &Path, dir: &Path) -> PathBuf {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let key = hex::encode(Sha256::digest(canonical.as_os_str().as_encoded_bytes()));
    remembered_dir.join(key)
}

/// Writes the stamps next to their final name and renames them over it: a reader sees the old
/// list or the new one, never half of one.
fn remember(path: &Path, stamps: &str) {
    let Some(parent) = path.parent() else { return };
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::create_dir_all(parent)
        .and_then(|()| std::fs::write(&tmp, stamps))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(path = %path.display(), error = %e, "verified sums not remembered");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &[u8])], sums: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        std::fs::write(dir.path().join(SHA256SUMS), sums).unwrap();
        dir
    }

    fn sum(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// A file whose bytes differ from its listed sum is refused, naming the file and both sums;
    /// the same bytes pass, and a directory without SHA256SUMS passes.
    #[test]
    fn a_changed_byte_is_refused_naming_the_file() {
        let cache = tempfile::tempdir().unwrap();
        let verify = |dir: &Path| verify_sums(dir, cache.path());
        let good =
            dir_with(&[("model.onnx", b"weights")], &format!("{}  model.onnx\n", sum(b"weights")));
        verify(good.path()).unwrap();
        // Remembered: one list of stamps for the directory.
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);
        verify(good.path()).unwrap();
        let bad =
            dir_with(&[("model.onnx", b"weightz")], &format!("{}  model.onnx\n", sum(b"weights")));
        let err = verify(bad.path()).unwrap_err().to_string();
        assert!(err.contains("model.onnx") && err.contains(&sum(b"weights")), "{err}");
        // The file changed after it passed: hashed again, and refused.
        std::fs::write(good.path().join("model.onnx"), b"weightZ").unwrap();
        assert!(verify(good.path()).is_err());
        verify(tempfile::tempdir().unwrap().path()).unwrap();
    }

    /// A list that names a path outside its directory, or holds no sum, is refused.
    #[test]
    fn a_list_reaching_outside_its_directory_is_refused() {
        for sums in [
            format!("{}  ../model.onnx\n", sum(b"x")),
            "zz  model.onnx\n".to_string(),
            "\n".to_string(),
        ] {
            let dir = dir_with(&[], &sums);
            let cache = tempfile::tempdir().unwrap();
            let err = verify_sums(dir.path(), cache.path()).unwrap_err().to_string();
            assert!(err.contains(SHA256SUMS), "{sums:?}: {err}");
        }
    }
}
