//! Scratch directories under the system's temporary directory: where a build writes its build
//! segments and serving units before uploading them, and git's attributes file. A scratch
//! directory is removed when its owner is dropped; a build that is killed (SIGKILL, the OOM
//! killer, a runner stopped) drops nothing, so each one is claimed by a lock its process holds,
//! and the next build there removes those whose lock no process holds ([`clear_abandoned`]).
//! Unnamed temporary files (spill.rs, tree.rs, diff.rs) need none of this: the system removes
//! them however the build ends.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A claimed scratch directory's name starts with this.
pub(crate) const PREFIX: &str = "hubdex-scratch-";
/// A scratch directory being made (not yet locked) is named so: [`clear_abandoned`] leaves it
/// alone until it is an hour old.
const CLAIMING: &str = ".hubdex-claiming-";
/// The file in a scratch directory whose lock claims it.
const LOCK: &str = ".lock";
/// A directory being made that is older than this was left by a process killed while making it.
const CLAIMING_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// A scratch directory of this process, removed when dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    path: PathBuf,
    /// Held (locked) while the directory is this process's.
    _lock: File,
}

impl Scratch {
    /// A build's scratch directory, once the scratch directories of builds that were killed
    /// are removed.
    pub(crate) fn for_build() -> io::Result<Scratch> {
        let scratch = Scratch::new()?;
        let removed = clear_abandoned(&std::env::temp_dir(), &scratch);
        if removed > 0 {
            tracing::info!(removed, "removed the scratch directories of builds that were killed");
        }
        Ok(scratch)
    }

    /// A new scratch directory under the system's temporary directory.
    pub(crate) fn new() -> io::Result<Scratch> {
        Scratch::new_in(&std::env::temp_dir())
    }

    /// A new scratch directory in `parent`. It takes its name only once its lock is held, so
    /// no other process finds it unclaimed.
    fn new_in(parent: &Path) -> io::Result<Scratch> {
        let claiming = tempfile::Builder::new().prefix(CLAIMING).tempdir_in(parent)?;
        let lock = File::create(claiming.path().join(LOCK))?;
        lock.lock()?;
        let name = claiming.path().file_name().unwrap_or_default().to_string_lossy();
        let path = parent.join(format!("{PREFIX}{}", &name[CLAIMING.len()..]));
        std::fs::rename(claiming.path(), &path)?;
        // Renamed: nothing is left at the name it was made under.
        let _ = claiming.keep();
        Ok(Scratch { path, _lock: lock })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes the scratch directories in `parent` that no process holds (their build was killed)
/// and directories left being made an hour ago, of the owner of `own` (this process's): another
/// user's are not this process's to judge. How many it removed.
pub(crate) fn clear_abandoned(parent: &Path, own: &Scratch) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else { return 0 };
    let owner = owner_of(own.path());
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        // A symbolic link is not a scratch directory, whatever it is named.
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || path == own.path() || owner_of(&path) != owner {
            continue;
        }
        // Held while the directory is removed, so no other build removes it at once.
        let mut _lock = None;
        let abandoned = if name.starts_with(PREFIX) {
            _lock = abandoned_lock(&path);
            _lock.is_some()
        } else if name.starts_with(CLAIMING) {
            meta.modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > CLAIMING_MAX_AGE)
        } else {
            false
        };
        if abandoned && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The lock of the scratch directory `dir`, taken, when no process held it: its build was
/// killed (the system releases a lock however its process ends).
pub(crate) fn abandoned_lock(dir: &Path) -> Option<File> {
    File::open(dir.join(LOCK)).ok().filter(|lock| lock.try_lock().is_ok())
}

/// The user owning `path`, where the system says (None for both elsewhere: then every
/// directory is taken as this user's).
fn owner_of(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::symlink_metadata(path).ok().map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_scratch_directory_is_removed_when_dropped_and_kept_while_held() {
        let tmp = tempfile::tempdir().unwrap();
        let a = Scratch::new_in(tmp.path()).unwrap();
        std::fs::write(a.path().join("part"), b"rows").unwrap();
        let b = Scratch::new_in(tmp.path()).unwrap();
        assert_ne!(a.path(), b.path());
        assert!(a.path().file_name().unwrap().to_string_lossy().starts_with(PREFIX));
        // Both are held: neither is taken for a killed build's.
        assert_eq!(clear_abandoned(tmp.path(), &b), 0);
        assert!(a.path().join("part").exists());
        let kept = a.path().to_path_buf();
        drop(a);
        assert!(!kept.exists());
        assert_eq!(names(tmp.path()), [b.path().file_name().unwrap().to_string_lossy()]);
    }

    #[test]
    fn a_scratch_directory_no_process_holds_is_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        // What a killed build leaves: its directory and lock file, the lock no longer held.
        let killed = tmp.path().join(format!("{PREFIX}killed"));
        std::fs::create_dir_all(killed.join("local-history.3")).unwrap();
        std::fs::write(killed.join(LOCK), b"").unwrap();
        std::fs::write(killed.join("local-history.3/rows.parquet"), b"half").unwrap();
        // A directory being made (not yet an hour old), others' files, a link named as ours.
        let making = tmp.path().join(format!("{CLAIMING}now"));
        std::fs::create_dir(&making).unwrap();
        // One left being made two hours ago: its process was killed before it took its name.
        let left = tmp.path().join(format!("{CLAIMING}then"));
        std::fs::create_dir(&left).unwrap();
        let then = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        File::open(&left).unwrap().set_modified(then).unwrap();
        std::fs::create_dir(tmp.path().join("other-tool")).unwrap();
        std::fs::write(tmp.path().join(format!("{PREFIX}file")), b"").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join(LOCK), b"").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), tmp.path().join(format!("{PREFIX}link")))
            .unwrap();
        // Held by another open lock of this process: as good as another process's.
        let held = Scratch::new_in(tmp.path()).unwrap();
        let own = Scratch::new_in(tmp.path()).unwrap();
        assert_eq!(clear_abandoned(tmp.path(), &own), 2);
        assert!(!killed.exists() && !left.exists());
        assert!(making.exists() && held.path().exists() && own.path().exists());
        assert!(elsewhere.path().join(LOCK).exists(), "a link is not followed");
        assert_eq!(names(tmp.path()).len(), 6);
    }
}
