//! The daemon's own memory footprint: allocator arenas.
//!
//! - [`limit_arenas`]: glibc gives every thread that allocates an arena of its
//!   own (up to 8 per core), each keeping freed memory for its thread. The
//!   daemon's threads (arbiter, journal writer, one worker per session,
//!   blocking readers) allocate little each; two arenas serve them all.
//!
//! It never drops resident pages to make the resident-set figure look smaller:
//! clean file-backed pages (the binary's code) are shared page cache, and
//! `shoal status`/benchmarks report them as they are.

/// At most this many malloc arenas in the daemon process.
const ARENAS: i32 = 2;

/// Cap glibc's malloc arenas (call before any thread is started).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator tunables; M_ARENA_MAX takes a count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}
