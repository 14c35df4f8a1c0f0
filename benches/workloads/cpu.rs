//! CPU time of the calling thread, for bench figures that a shared machine's
//! load does not move (wall time is printed beside it).

use std::time::Duration;

/// The first field of `/proc/thread-self/schedstat`: nanoseconds on the CPU.
pub fn thread_cpu() -> Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}
