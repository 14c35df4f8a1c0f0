//! `make bench`: PTY figures, printed as p50/p99 or rates.
//!
//! - `shoal_pty_read` round trip over MCP (raw frames on the socket) of an
//!   idle 80x24 `cat`;
//! - send → echo visible: `shoal_pty_send` of a fresh token, then
//!   `shoal_pty_read` with `wait_for` that token;
//! - emulator throughput (in-process `Term::process` of plain and SGR text,
//!   64 MiB in 8 KiB chunks), and the same through vt100 alone;
//! - memory per idle 80x24 PTY with 1000 lines of scrollback: the daemon's
//!   RSS growth over 40 such PTYs, and the emulator's own estimate;
//! - an exec's latency on another connection while a PTY prints 100 MB,
//!   beside the same exec without the flood.
//!
//! Sizes: SHOAL_BENCH_N (default 2000) round trips.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shoal_pty::term::{Term, SCROLLBACK_LINES};

#[path = "workloads/cpu.rs"]
mod cpu;
use cpu::thread_cpu;

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::{BenchDaemon, BenchDir};

fn start_daemon() -> BenchDaemon {
    let dir = BenchDir::new("shp");
    let state = dir.path().join("state");
    dir.daemon()
        .arg("--state-dir")
        .arg(state)
        .config("[limits]\nmax_ptys_per_session = 100\n")
        .start()
}

/// The daemon's resident set, in bytes.
fn rss(d: &BenchDaemon) -> u64 {
    d.status_kb("VmRSS:") * 1024
}

struct Mcp {
    w: UnixStream,
    r: BufReader<UnixStream>,
    id: u64,
}

impl Mcp {
    fn open(d: &BenchDaemon) -> Mcp {
        let w = UnixStream::connect(d.sock()).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        let mut m = Mcp { w, r, id: 0 };
        m.call("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}));
        m.w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        m
    }
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}),
        )
        .unwrap();
        b.push(b'\n');
        self.w.write_all(&b).unwrap();
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(self.id) {
                return v["result"].clone();
            }
        }
    }
    fn tool(&mut self, name: &str, args: Value) -> Value {
        let r = self.call("tools/call", json!({"name": name, "arguments": args}));
        assert_eq!(r["isError"], json!(false), "{name}: {r}");
        r["structuredContent"].clone()
    }
}

fn pct(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn flood_text(bytes: usize, sgr: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 256);
    let mut i = 0u64;
    while out.len() < bytes {
        if sgr {
            out.extend_from_slice(
                format!("\x1b[1;3{}m{i:08}\x1b[m some \x1b[4mstyled\x1b[24m output text here for the emulator\r\n", i % 8)
                    .as_bytes(),
            );
        } else {
            out.extend_from_slice(
                format!(
                    "{i:08} flood-line flood-line flood-line flood-line flood-line flood-line\r\n"
                )
                .as_bytes(),
            );
        }
        i += 1;
    }
    out
}

/// MB/s of wall time and of the thread's CPU time (the machine may be
/// shared: the CPU figure is what the emulator itself costs).
fn throughput(sgr: bool, reference: bool) -> (f64, f64) {
    let data = flood_text(64 << 20, sgr);
    let mut t = if reference {
        Term::without_fast_path(24, 80, SCROLLBACK_LINES)
    } else {
        Term::new(24, 80, SCROLLBACK_LINES)
    };
    let (t0, c0) = (Instant::now(), thread_cpu());
    for c in data.chunks(8192) {
        t.process(c);
    }
    let (wall, cpu) = (t0.elapsed(), thread_cpu() - c0);
    let mb = data.len() as f64 / 1e6;
    (mb / wall.as_secs_f64(), mb / cpu.as_secs_f64())
}

fn main() {
    let n: usize = std::env::var("SHOAL_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);

    for (name, sgr) in [("plain", false), ("SGR", true)] {
        let (wall, cpu) = throughput(sgr, false);
        println!(
            "emulator throughput, {name} text: {wall:.1} MB/s wall, {cpu:.1} MB/s of CPU time"
        );
        // The same bytes through vt100 alone (the fast path's reference).
        let (wall, cpu) = throughput(sgr, true);
        println!(
            "  vt100 fed every byte, {name} text: {wall:.1} MB/s wall, {cpu:.1} MB/s of CPU time"
        );
    }
    let mut t = Term::new(24, 80, SCROLLBACK_LINES);
    t.process(&flood_text(2 << 20, false));
    println!(
        "emulator estimate, 80x24 + {} scrollback lines: {:.0} KiB",
        t.scrollback_len(),
        t.approx_bytes() as f64 / 1024.0
    );

    let d = start_daemon();
    let mut m = Mcp::open(&d);
    let o = m.tool("shoal_pty_open", json!({"cmd": "cat"}));
    let id = o["pty_id"].clone();
    for _ in 0..50 {
        m.tool("shoal_pty_read", json!({"pty_id": id}));
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        m.tool("shoal_pty_read", json!({"pty_id": id}));
        v.push(t0.elapsed());
    }
    let (p50, p99) = pct(v);
    println!("shoal_pty_read over MCP:           p50 {p50:.3} ms  p99 {p99:.3} ms");

    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let token = format!("t{i}x");
        let t0 = Instant::now();
        m.tool(
            "shoal_pty_send",
            json!({"pty_id": id, "input": [token, {"key": "Enter"}]}),
        );
        let r = m.tool(
            "shoal_pty_read",
            json!({"pty_id": id, "wait_for": format!("t{i}x"), "timeout_ms": 5000}),
        );
        v.push(t0.elapsed());
        assert_eq!(r["matched"], json!(true));
    }
    let (p50, p99) = pct(v);
    println!("send -> echo visible (wait_for):   p50 {p50:.3} ms  p99 {p99:.3} ms");
    m.tool("shoal_pty_close", json!({"pty_id": id}));

    // Idle PTYs with full scrollback: RSS growth of the daemon.
    let lines = std::env::temp_dir().join(format!("shoal-bench-lines-{}", std::process::id()));
    let body: String = (0..1100)
        .map(|i| {
            format!("{i:05} a line of scrollback text for the memory figure, about 76 bytes\n")
        })
        .collect();
    std::fs::write(&lines, body).unwrap();
    m.tool("shoal_exec", json!({"src": "1"}));
    let before = rss(&d);
    let k = 40;
    let mut ids = Vec::new();
    for _ in 0..k {
        let o = m.tool(
            "shoal_pty_open",
            json!({"cmd": "sh", "args": ["-c", format!("cat {}; exec cat", lines.display())]}),
        );
        ids.push(o["pty_id"].clone());
    }
    for id in &ids {
        let r = m.tool(
            "shoal_pty_read",
            json!({"pty_id": id, "wait_for": "01099", "timeout_ms": 20000, "scrollback": 2000}),
        );
        assert_eq!(r["scrollback"].as_array().unwrap().len(), SCROLLBACK_LINES);
    }
    let after = rss(&d);
    println!(
        "memory per idle 80x24 PTY, {} scrollback lines: {:.0} KiB (daemon RSS over {k} PTYs)",
        SCROLLBACK_LINES,
        after.saturating_sub(before) as f64 / k as f64 / 1024.0
    );
    for id in ids {
        m.tool("shoal_pty_close", json!({"pty_id": id}));
    }
    let _ = std::fs::remove_file(lines);
    flood_beside(&d);
}

/// An exec's latency on another connection while a PTY prints 100 MB, beside
/// the same exec with no flood (before and after it, in this run).
fn flood_beside(d: &BenchDaemon) {
    let file = std::env::temp_dir().join(format!("shoal-bench-flood-{}", std::process::id()));
    std::fs::write(&file, flood_text(100 << 20, false)).unwrap();
    let mut a = Mcp::open(d);
    let mut b = Mcp::open(d);
    let exec = |b: &mut Mcp| {
        let t0 = Instant::now();
        b.tool("shoal_exec", json!({"src": "1 + 1"}));
        t0.elapsed()
    };
    let mut quiet: Vec<Duration> = (0..200).map(|_| exec(&mut b)).collect();
    let o = a.tool(
        "shoal_pty_open",
        json!({"cmd": "cat", "args": [file.to_str().unwrap()]}),
    );
    let id = o["pty_id"].clone();
    let mut during = Vec::new();
    while a.tool("shoal_pty_read", json!({"pty_id": id}))["alive"] != json!(false) {
        during.push(exec(&mut b));
    }
    quiet.extend((0..200).map(|_| exec(&mut b)));
    a.tool("shoal_pty_close", json!({"pty_id": id}));
    let _ = std::fs::remove_file(file);
    let worst = |v: &[Duration]| v.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let (qw, dw) = (worst(&quiet), worst(&during));
    let n = during.len();
    let ((q50, q99), (p50, p99)) = (pct(quiet), pct(during));
    println!(
        "exec beside a 100 MB PTY flood ({n} execs): p50 {p50:.3} ms  p99 {p99:.3} ms  worst {dw:.1} ms; \
         without: p50 {q50:.3} ms  p99 {q99:.3} ms  worst {qw:.1} ms"
    );
}
