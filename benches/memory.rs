//! `make bench` (memory part): what a user pays for in memory, of the release
//! daemon (SHOAL_BENCH_BIN to measure another build), from
//! `/proc/PID/smaps_rollup`: anonymous memory (what only swap can free: the
//! heap, arenas, stacks, relocated data), private memory (USS,
//! `Private_Clean + Private_Dirty`: that and the binary's code pages, which
//! are page cache) and `Pss`, with targets for the anonymous memory
//! (`workloads/memory.rs` says why),
//!
//! - of the idle daemon (target: at most 4 MB);
//! - per session: 20 sessions, each created by a kernel connection of its own
//!   with one exec, the growth divided by 20 (target: at most 1 MB);
//! - per idle PTY: 20 `cat`s on 80x24 terminals, divided by 20 (target: at
//!   most 300 KB);
//! - per 10,000 transcript entries: 10,000 execs of `1 + 1` in one session
//!   (which also fill bounded caches: the journal's 8 MB redb page cache, the
//!   event bus's rings of recent events), then 10,000 more.
//!
//! Each figure is taken on a daemon of its own, after a warm-up unit, once
//! the figures stop moving (`workloads/memory.rs`). Then where the idle
//! daemon's memory and that with 21 sessions is: the binary's own pages,
//! shared libraries, the main heap, the other anonymous mappings (malloc
//! arenas, thread stacks).
//! `make bench-compare` prints the same figures beside another revision's.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

#[path = "workloads/daemon.rs"]
mod daemon;
#[path = "workloads/memory.rs"]
mod memory;

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let bin = daemon::bin();
    println!("daemon memory of {}", bin.display());
    let others = memory::others_running(&bin);
    if others > 0 {
        println!(
            "note: {others} other processes run this binary: they share its code pages, \
             so the figures below are lower than for a daemon alone"
        );
    }
    let f = memory::measure(&bin);
    println!(
        "  {:<40} {:>9} {:>9} {:>9} {:>9}   target (anon)",
        "figure, kB", "anon", "USS", "file", "Pss"
    );
    for memory::Row {
        name,
        kb: k,
        target,
        ..
    } in memory::rows(&f)
    {
        let verdict = match target {
            Some(t) if k.anon <= t as f64 => format!("<= {t}: ok"),
            Some(t) => format!("<= {t}: OVER TARGET"),
            None => String::new(),
        };
        println!(
            "  {name:<40} {:>9.0} {:>9.0} {:>9.0} {:>9.0}   {verdict}",
            k.anon,
            k.uss,
            k.uss - k.anon,
            k.pss
        );
    }
    println!(
        "  (anon: anonymous memory, only swap frees it: the heap, malloc arenas, stacks, \
         relocated data; USS: Private_Clean + Private_Dirty, anon and file; file: pages of \
         files only the daemon maps, its binary's code and read-only data, page cache the \
         kernel reclaims and any other process of the binary shares)"
    );
    println!(
        "where the idle daemon's memory is ({} threads; Rss {} kB, anonymous {} kB):",
        f.idle_threads, f.idle.rss, f.idle.anonymous
    );
    print!("{}", f.idle_breakdown);
    println!(
        "with {} sessions ({} threads):",
        memory::SESSIONS + 1,
        f.sessions_threads
    );
    print!("{}", f.sessions_breakdown);
    println!("after {} execs in one session:", 2 * memory::EXECS);
    print!("{}", f.entries_breakdown);
}
