//! `make bench` (language part): the performance targets of the language
//! issue, measured through the public library API (`Session::exec`, `parse`).
//!
//! - evaluating `range(0, 1_000_000).map(x => x * 2).where(x => x % 3 == 0).len()`
//!   (target p50 ≤ 150 ms);
//! - parsing a 1 MB script (target p50 ≤ 50 ms);
//! - a 10k-row table `.sort_by(.size).first(10)` (target p50 ≤ 20 ms).
//!
//! - the shell layer (`shoal_lang::shell::bench`): `^true` round trip (target p50
//!   ≤ 2 ms), capturing 1 GiB of stdout (≥ 500 MB/s, RSS growth ≤ 64 MB),
//!   1000 sequential `sh { echo hi }` (no zombie, no leaked fd).
//!
//! Each workload runs SHOAL_BENCH_LANG_N times (default 15) after one warm-up
//! and prints p50/p99 in milliseconds.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::time::{Duration, Instant};

#[path = "workloads/shell.rs"]
mod shell_workload;

use shoal_lang::{parse, ParseContext, Position, Session, SessionOptions};

fn runs() -> usize {
    std::env::var("SHOAL_BENCH_LANG_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15)
}

fn report(name: &str, target_ms: f64, (mut samples, mut cpu): (Vec<Duration>, Vec<Duration>)) {
    samples.sort();
    cpu.sort();
    let cpu_p50 = cpu[cpu.len() / 2].as_secs_f64() * 1e3;
    let pick = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e3
    };
    let (p50, p99) = (pick(0.5), pick(0.99));
    let verdict = if p50 <= target_ms {
        "ok"
    } else {
        "OVER TARGET"
    };
    println!(
        "{name:<42} p50 {p50:>8.2} ms  p99 {p99:>8.2} ms  cpu p50 {cpu_p50:>8.2} ms  (target p50 <= {target_ms} ms: {verdict})"
    );
}

fn session() -> Session {
    let dir = std::env::temp_dir();
    Session::new(SessionOptions {
        cwd: dir,
        ..Default::default()
    })
}

/// CPU time of the whole process (user + system). On this shared 2-core
/// machine wall time swings with the load of other processes; CPU time does
/// not, so both are reported.
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn time_exec(s: &mut Session, src: &str, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    s.exec(src, Position::Value).expect("warm-up exec");
    (0..n)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_time());
            s.exec(src, Position::Value).expect("exec");
            (t.elapsed(), cpu_time() - c)
        })
        .unzip()
}

/// About 1 MB of varied, valid Shoal source.
fn one_megabyte_script() -> String {
    let chunk = r#"let items = [1, 2, 3, 4_000, 0x1f, 2.5, 4kb, 250ms, "text {1 + 2}", 'raw']
fn scale(x: int, by: int = 2) { x * by }
let rec = {name: "shoal", tags: ["a", "b"], nested: {deep: [1, 2, 3]}}
let total = items.where(x => x != null).map(.str()).len() + scale(3, by: 4)
if total > 10 { "big" } else if total > 5 { "mid" } else { "small" }
match rec { {name: "shoal", tags} => tags.len(), [a, ...rest] => a, _ => 0 }
for i in 0..10 { if i % 2 == 0 { continue } }
let r = try { 1 / 0 } catch e { e.code }
echo hello world --flag=value -abc ./some/path *.rs
"#;
    let mut s = String::with_capacity(1 << 20);
    while s.len() < 1_000_000 {
        s.push_str(chunk);
    }
    s
}

fn main() {
    let n = runs();
    println!("language benchmarks ({n} runs each, after one warm-up)");

    let mut s = session();
    let src = "range(0, 1_000_000).map(x => x * 2).where(x => x % 3 == 0).len()";
    let v = s.exec(src, Position::Value).expect("eval");
    assert_eq!(shoal_value::render::inline(&v), "333334");
    report(
        "eval range(0,1e6).map.where.len",
        150.0,
        time_exec(&mut s, src, n),
    );

    let script = one_megabyte_script();
    let ctx = ParseContext::default();
    parse(&script, &ctx).expect("the benchmark script parses");
    let samples = (0..n)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_time());
            let p = parse(&script, &ctx).expect("parse");
            let d = (t.elapsed(), cpu_time() - c);
            drop(p);
            d
        })
        .unzip();
    report(
        &format!("parse {} KB script", script.len() / 1000),
        50.0,
        samples,
    );

    let mut s = session();
    let setup = r#"let rows = json.parse(range(0, 10000).map(i => {name: "f{i}", size: (i * 7919) % 10007}).json())"#;
    s.exec(setup, Position::Stmt).expect("setup");
    let v = s.exec("rows.type_name()", Position::Value);
    if let Ok(v) = v {
        println!("  (10k rows are a {})", shoal_value::render::inline(&v));
    }
    report(
        "10k-row table .sort_by(.size).first(10)",
        20.0,
        time_exec(&mut s, "rows.sort_by(.size).first(10)", n),
    );

    println!("shell benchmarks");
    for r in shell_workload::bench_all() {
        println!("{r}");
    }
}
