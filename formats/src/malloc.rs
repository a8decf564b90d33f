//! glibc's malloc, told to give freed memory back.
//!
//! By default glibc raises its mmap threshold each time a large mmapped block is freed (up to
//! 32 MiB), and its trim threshold with it: after ONNX Runtime builds a session (and frees the
//! model's protobuf and the buffers it folded the weights through), later blocks of that size
//! come from the heap and stay there when freed. Measured on the query embedder
//! (`hubdex-bench embedder-memory`, docs/performance.md, "The query embedder's memory"): the
//! session held 154 MiB of anonymous memory, 60 of it freed and kept; with the thresholds fixed
//! at glibc's own defaults it holds 94 MiB, with the same vectors and the same latency.
//!
//! The thresholds are read from the environment once, when the process starts, and the
//! workspace has no `unsafe` to call `mallopt`: so a process started without
//! `MALLOC_TRIM_THRESHOLD_` starts itself again, at once, with it set (same pid, arguments and
//! open files). Where that cannot be done it carries on as it is.

/// The variable glibc reads; setting it also fixes the mmap threshold (no dynamic threshold).
pub const MALLOC_TRIM_THRESHOLD: &str = "MALLOC_TRIM_THRESHOLD_";

/// glibc's default trim threshold (128 KiB), made fixed.
const TRIM_BYTES: &str = "131072";

/// Restarts this process with fixed malloc thresholds unless the environment already sets
/// them. Call it early in `main`: after logging is set up (a failed restart is logged at debug
/// level) and before any thread starts. Returns only where the process is not restarted:
/// already set, not glibc, or the restart failed (then the process carries on).
pub fn restart_with_fixed_malloc_thresholds() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt as _;
        if std::env::var_os(MALLOC_TRIM_THRESHOLD).is_some() {
            return;
        }
        let Ok(exe) = std::env::current_exe() else { return };
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
        // exec returns only on failure.
        let err = std::process::Command::new(&exe)
            .arg0(arg0)
            .args(args)
            .env(MALLOC_TRIM_THRESHOLD, TRIM_BYTES)
            .exec();
        tracing::debug!(exe = %exe.display(), "could not restart with fixed malloc thresholds: {err}");
    }
}
