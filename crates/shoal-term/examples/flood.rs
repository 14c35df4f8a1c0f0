//! Emulator throughput on its own (for profiling): `cargo run --release -p
//! shoal-term --example flood [plain|sgr] [MiB] [scrollback lines]`.

#![allow(clippy::print_stdout)] // the figure is its output

use std::time::Instant;

use shoal_term::{Term, SCROLLBACK_LINES};

fn main() {
    let mut args = std::env::args().skip(1);
    let sgr = args.next().as_deref() == Some("sgr");
    let mib: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(64);
    let keep: usize = args
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SCROLLBACK_LINES);
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
    let mut t = Term::new(24, 80, keep);
    let t0 = Instant::now();
    for c in data.chunks(8192) {
        t.process(c);
    }
    let s = t0.elapsed().as_secs_f64();
    println!("{:.1} MB/s", data.len() as f64 / s / 1e6);
}
