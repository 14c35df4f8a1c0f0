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

/// Wall clock in ns since the epoch (0 if the clock is before 1970).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos().min(i64::MAX as u128) as i64)
        .unwrap_or(0)
}
