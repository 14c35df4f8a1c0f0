//! Emulator throughput on its own (for profiling): `cargo run --release -p
//! shoal-term --example flood [plain|sgr] [MiB] [scrollback lines] [ref|fast]
//! [chunk bytes]` (`ref`: vt100 fed every byte, no fast path; chunks of
//! 8 KiB unless given).

#![allow(clippy::print_stdout)] // the figure is its output

use std::time::{Duration, Instant};

use shoal_term::{Term, SCROLLBACK_LINES};

/// CPU time of this thread (`/proc/thread-self/schedstat`, nanoseconds).
fn thread_cpu() -> Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let sgr = args.next().as_deref() == Some("sgr");
    let mib: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(64);
    let keep: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SCROLLBACK_LINES);
    let reference = args.next().as_deref() == Some("ref");
    let chunk: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8192)
        .max(1);
    let mut data = Vec::with_capacity((mib << 20) + 256);
    let mut i = 0u64;
    while data.len() < mib << 20 {
        let line = if sgr {
            format!("\x1b[1;3{}m{i:08}\x1b[m some \x1b[4mstyled\x1b[24m output text here for the emulator\r\n", i % 8)
        } else {
            format!("{i:08} flood-line flood-line flood-line flood-line flood-line flood-line\r\n")
        };
        data.extend_from_slice(line.as_bytes());
        i += 1;
    }
    let mut t = if reference {
        Term::without_fast_path(24, 80, keep)
    } else {
        Term::new(24, 80, keep)
    };
    let (t0, c0) = (Instant::now(), thread_cpu());
    for c in data.chunks(chunk) {
        t.process(c);
    }
    let (wall, cpu) = (
        t0.elapsed().as_secs_f64(),
        (thread_cpu() - c0).as_secs_f64(),
    );
    let mb = data.len() as f64 / 1e6;
    println!(
        "{:.1} MB/s wall, {:.1} MB/s of CPU time",
        mb / wall,
        mb / cpu
    );
}
