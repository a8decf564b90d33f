//! A read-only tantivy [`Directory`] that reads its files with positioned reads instead of
//! mapping them: what the serving index's writer merges its parts through.
//!
//! A merge of tantivy segments reads each input once, front to back, but through
//! [`tantivy::directory::MmapDirectory`] every page it touches stays mapped into the process until
//! the merge ends: the parts' doc stores (most of their bytes) and postings add their whole size to
//! the merge's resident set (docs/performance.md). Read here, a range lives as long as tantivy
//! holds it: a term's postings until the next term, a doc store's data while it is copied.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::HasLen;
use tantivy::directory::error::{DeleteError, OpenReadError, OpenWriteError};
use tantivy::directory::{Directory, FileHandle, OwnedBytes, WatchCallback, WatchHandle, WritePtr};

/// A directory of a finished index, opened to be read once (a merge's input).
#[derive(Debug, Clone)]
pub(crate) struct ReadDirectory {
    root: PathBuf,
}

impl ReadDirectory {
    /// The index directory at `root`.
    pub(crate) fn new(root: &Path) -> Self {
        ReadDirectory { root: root.to_path_buf() }
    }
}

/// One file, read a range at a time.
#[derive(Debug)]
struct ReadFile {
    file: File,
    len: usize,
}

impl HasLen for ReadFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for ReadFile {
    fn read_bytes(&self, range: Range<usize>) -> std::io::Result<OwnedBytes> {
        if range.start > range.end || range.end > self.len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("range {range:?} is outside a file of {} bytes", self.len),
            ));
        }
        let mut bytes = vec![0u8; range.len()];
        self.file.read_exact_at(&mut bytes, range.start as u64)?;
        Ok(OwnedBytes::new(bytes))
    }
}

/// What a write to this directory gets.
fn read_only(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("{} is opened read-only", path.display()),
    )
}

impl Directory for ReadDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let full = self.root.join(path);
        let file = File::open(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OpenReadError::FileDoesNotExist(path.to_path_buf()),
            _ => OpenReadError::wrap_io_error(e, full.clone()),
        })?;
        let len = file.metadata().map_err(|e| OpenReadError::wrap_io_error(e, full.clone()))?.len();
        Ok(Arc::new(ReadFile { file, len: len as usize }))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: Arc::new(read_only(&self.root.join(path))),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        let full = self.root.join(path);
        full.try_exists().map_err(|e| OpenReadError::wrap_io_error(e, full.clone()))
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: Arc::new(read_only(&self.root.join(path))),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        let full = self.root.join(path);
        std::fs::read(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OpenReadError::FileDoesNotExist(path.to_path_buf()),
            _ => OpenReadError::wrap_io_error(e, full.clone()),
        })
    }

    fn atomic_write(&self, path: &Path, _data: &[u8]) -> std::io::Result<()> {
        Err(read_only(&self.root.join(path)))
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn watch(&self, _watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ranges_and_refuses_writes_and_ranges_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"0123456789").unwrap();
        let d = ReadDirectory::new(dir.path());
        let h = d.get_file_handle(Path::new("a")).unwrap();
        assert_eq!(h.len(), 10);
        assert_eq!(h.read_bytes(2..5).unwrap().as_slice(), b"234");
        assert_eq!(h.read_bytes(10..10).unwrap().as_slice(), b"");
        assert!(h.read_bytes(8..11).is_err());
        assert!(matches!(
            d.get_file_handle(Path::new("missing")),
            Err(OpenReadError::FileDoesNotExist(_))
        ));
        assert!(d.exists(Path::new("a")).unwrap());
        assert!(!d.exists(Path::new("b")).unwrap());
        assert!(d.open_write(Path::new("b")).is_err());
        assert!(d.atomic_write(Path::new("a"), b"x").is_err());
        assert!(d.delete(Path::new("a")).is_err());
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"0123456789");
    }
}
