//! `make load`: 100 concurrent MCP clients across 10 sessions for 60 s (mixed
//! `shoal_exec`, `shoal_get`, `shoal_journal`, `resources/read`), on a private
//! daemon over its Unix socket. Prints p50/p99 per tool, the error count
//! (exit 1 unless 0) and the daemon's peak RSS.
//!
//! Knobs: SHOAL_LOAD_SECS (default 60), SHOAL_LOAD_CLIENTS (100),
//! SHOAL_LOAD_SESSIONS (10), SHOAL_LOAD_MAX_CALLS per client (200000).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

#[path = "load/driver.rs"]
mod driver;

use std::time::Duration;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let o = driver::LoadOptions {
        bin: env!("CARGO_BIN_EXE_shoal").into(),
        clients: knob("SHOAL_LOAD_CLIENTS", 100) as usize,
        sessions: knob("SHOAL_LOAD_SESSIONS", 10).max(1) as usize,
        duration: Duration::from_secs(knob("SHOAL_LOAD_SECS", 60)),
        max_calls_per_client: knob("SHOAL_LOAD_MAX_CALLS", 200_000) as usize,
    };
    match driver::run(&o) {
        Ok(r) => {
            println!("{r}");
            if r.errors > 0 {
                std::process::exit(1);
            }
        }
        Err(e) => {
            println!("load test failed to run: {e}");
            std::process::exit(1);
        }
    }
}
