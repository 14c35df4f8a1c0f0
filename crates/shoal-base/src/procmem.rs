//! The daemon's own footprint: allocator arenas, background threads.
//!
//! - [`limit_arenas`]: glibc gives every thread that allocates an arena of its
//!   own (up to 8 per core), each keeping freed memory for its thread. The
//!   daemon's threads (arbiter, journal writer, one worker per session,
//!   blocking readers) allocate little each; two arenas serve them all.
//! - [`background_thread`]: threads whose work nobody waits on (journal
//!   commits, terminal emulation) yield the CPU to the request path.
//! - [`give_back_free_memory`]: after a large owner of heap memory is freed
//!   (a closed PTY's emulator), glibc's malloc keeps the freed pages in its
//!   arenas; `malloc_trim(0)` returns every whole free page to the OS.
//!
//! It never drops resident pages that are in use to make the resident-set figure look smaller:
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

/// Mark the calling thread as background work: SCHED_BATCH (per thread on
/// Linux), so a wakeup of the request path (arbiter, session worker)
/// preempts it, while it keeps its fair share of the CPU on a busy machine
/// (a positive nice starves it there). A failure leaves the normal policy.
pub fn background_thread() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler on the calling thread (pid 0) with a
        // valid parameter block.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
}

/// Return the allocator's free pages to the OS (glibc's `malloc_trim(0)`,
/// which walks every arena; a no-op with another libc). Costs a walk of the
/// free lists: call it after freeing something large, not on a hot path.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own
    // arenas; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}
