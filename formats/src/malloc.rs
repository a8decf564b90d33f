//! glibc's malloc, told to give freed memory back.
//!
//! By default glibc raises its mmap threshold each time a large mmapped block is freed (up to
//! 32 MiB), and its trim threshold with it: after ONNX Runtime builds a session (and frees the
//! model's protobuf and the buffers it folded the weights through), later blocks of that size
//! come from the heap and stay there when freed (`hubdex-bench embedder-memory` measures the
//! query embedder's session both ways: 154 MiB against 94).
//!
//! The indexer also caps glibc's arenas at two ([`Arenas::Two`]). Each thread that allocates
//! while another holds an arena gets one of its own (up to 8 per core), and small blocks freed
//! in an arena stay with it: a build's serving merges run one after another on fresh threads,
//! and without the cap what each left behind added up. The server keeps glibc's default: its
//! queries run on many threads at once.
//!
//! The settings are read from the environment once, when the process starts: so a process
//! started without `MALLOC_TRIM_THRESHOLD_` starts itself again, at once, with it set (and
//! `MALLOC_ARENA_MAX` where asked and not set; same pid, arguments and open files:
//! `hubdex_runtime::restart_with_fixed_environment`). Where that cannot be done it carries on as it
//! is.
//!
//! Even so glibc gives freed memory back only from the top of a heap: many small blocks freed
//! below one still in use stay resident. [`give_back_freed`] (`malloc_trim`, the workspace's one
//! `unsafe` call) hands those pages back where a phase of the indexer has just ended: before
//! the publish, before each build segment is embedded and written, and after each serving merge, so
//! a unit's vector graph is not built on top of what the history's pass or the last merge's text
//! index left (docs/performance.md); and after each batch of rows a merge reads, whose blocks would
//! otherwise fault in the holes of that heap again and stay (docs/performance.md).

/// The variable glibc reads; setting it also fixes the mmap threshold (no dynamic threshold).
pub const MALLOC_TRIM_THRESHOLD: &str = "MALLOC_TRIM_THRESHOLD_";

/// glibc's default trim threshold (128 KiB), made fixed.
pub const TRIM_BYTES: &str = "131072";

/// The variable glibc reads for the most arenas it makes.
pub const MALLOC_ARENA_MAX: &str = "MALLOC_ARENA_MAX";

/// How many malloc arenas a restarted process may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arenas {
    /// glibc's default (8 per core): for many threads allocating at once (the server).
    Default,
    /// Two (unless the environment says otherwise): for a process whose long phases run on a
    /// thread or two (the indexer).
    Two,
}

/// Gives the system back the pages glibc holds free in its arenas (`malloc_trim(0)`): what the
/// phase that just ended freed below blocks still in use. Whether anything was given back;
/// false off glibc, whose allocators give memory back themselves or have no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn give_back_freed() -> bool {
    // SAFETY: malloc_trim takes no pointers and changes only glibc's own free lists, locking
    // each arena while it walks it: any thread may call it at any time.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Gives the system back the pages the allocator holds free: nothing to do off glibc.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back_freed() -> bool {
    false
}
