//! The environment both binaries run in, fixed once at start: a process whose environment
//! lacks a setting starts itself again, at once, with it set (same pid, arguments and open
//! files), before any thread or library reads it. The settings:
//!
//! - glibc's malloc thresholds, and its arenas where asked ([`hubdex_formats::give_back_freed`]'s module);
//! - `ORT_DISABLE_TELEMETRY=1`: the ONNX Runtime library of the `onnxruntime` wheel carries
//!   Microsoft's telemetry client, which writes a device id and an event database under
//!   `~/.cache/Microsoft/DeveloperTools/.onnxruntime/` as its environment is created and later
//!   looks up its collector's host to send them. The runtime reads this variable as it loads;
//!   the environment is also built with telemetry off through its API
//!   ([`crate::ort_environment`]), which alone does not stop the device id being written.

use hubdex_formats::Arenas;

/// The variable ONNX Runtime reads to leave its telemetry client off.
pub const ORT_DISABLE_TELEMETRY: &str = "ORT_DISABLE_TELEMETRY";

/// Restarts this process with its environment fixed (malloc thresholds and `arenas`, ONNX
/// Runtime's telemetry off) unless the environment already has every setting. Call it early in
/// `main`: after logging is set up (a failed restart is logged at debug level) and before any
/// thread starts. Returns only where the process is not restarted: already set, not Linux,
/// or the restart failed (then the process carries on, with telemetry still off through the
/// runtime's API).
pub fn restart_with_fixed_environment(arenas: Arenas) {
    #[cfg(target_os = "linux")]
    {
        use hubdex_formats::{MALLOC_ARENA_MAX, MALLOC_TRIM_THRESHOLD, TRIM_BYTES};
        use std::os::unix::process::CommandExt as _;
        let glibc = cfg!(target_env = "gnu");
        let malloc_unset = glibc && std::env::var_os(MALLOC_TRIM_THRESHOLD).is_none();
        let telemetry_unset =
            std::env::var_os(ORT_DISABLE_TELEMETRY).is_none_or(|v| v.as_encoded_bytes() != b"1");
        if !malloc_unset && !telemetry_unset {
            return;
        }
        let Ok(exe) = std::env::current_exe() else { return };
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
        // exec returns only on failure.
        let mut restart = std::process::Command::new(&exe);
        restart.arg0(arg0).args(args).env(ORT_DISABLE_TELEMETRY, "1");
        if malloc_unset {
            restart.env(MALLOC_TRIM_THRESHOLD, TRIM_BYTES);
            if arenas == Arenas::Two && std::env::var_os(MALLOC_ARENA_MAX).is_none() {
                restart.env(MALLOC_ARENA_MAX, "2");
            }
        }
        let err = restart.exec();
        tracing::debug!(exe = %exe.display(), "could not restart with a fixed environment: {err}");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = arenas;
}
