//! The ground floor of Shoal: what every other crate may use and which uses no
//! other Shoal crate. Lock-poison recovery, the state and runtime paths, lines with descriptors over a socket, the
//! allocator's arenas, process homes (cgroups or the subreaper fallback),
//! `PATH` lookup, the language's error value, private spill directories and
//! unit literals.

pub mod count;
pub mod error;
pub mod fdlines;
pub mod lookup;
pub mod paths;
pub mod procmem;
pub mod procs;
pub mod spill_dir;
pub mod sync;
pub mod text;
pub mod units;

/// Whether the fast paths beside general ones run: every one is switched
/// off by `SHOAL_NO_FAST_PATHS=1` in the environment (read once per process),
/// so the whole suite can run on the general paths they are tested against
/// (docs/performance.md).
pub fn fast_paths() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !std::env::var_os("SHOAL_NO_FAST_PATHS").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// Wall clock in ns since the epoch (0 if the clock is before 1970).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos().min(i64::MAX as u128) as i64)
        .unwrap_or(0)
}
