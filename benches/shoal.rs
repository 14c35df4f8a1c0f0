//! `make bench`: end-to-end latency of the daemon, printed as p50/p99.
//!
//! - kernel `exec 6 * 7` round trip on one attached connection;
//! - MCP `tools/call shoal_exec 6 * 7` round trip, on the socket and through the `shoal mcp` shim;
//! - shim cold start (no daemon; autostart) to the first `initialize` reply;
//! - idle daemon RSS.
//!
//! A custom harness (criterion's statistics add little to process-level
//! round trips). Sizes: SHOAL_BENCH_N (default 2000) round trips,
//! SHOAL_BENCH_COLD (default 15) cold starts.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_shoal");

struct Root(tempfile::TempDir);

impl Root {
    fn new() -> Root {
        Root(
            tempfile::Builder::new()
                .prefix("shb")
                .tempdir_in("/tmp")
                .unwrap(),
        )
    }
    fn sock(&self) -> PathBuf {
        self.0.path().join("s.sock")
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        let p = self.0.path();
        c.env("XDG_RUNTIME_DIR", p.join("run"))
            .env("XDG_STATE_HOME", p.join("state"))
            .env("XDG_CONFIG_HOME", p.join("config"))
            .env_remove("SHOAL_NO_AUTOSTART")
            .env_remove("SHOAL_SOCKET");
        c
    }
}

struct Line {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Line {
    fn open(p: &Path) -> Line {
        let w = UnixStream::connect(p).unwrap();
        Line {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
        }
    }
    fn call(&mut self, v: &Value) -> Value {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.w.write_all(&b).unwrap();
        let mut s = String::new();
        self.r.read_line(&mut s).unwrap();
        serde_json::from_str(&s).unwrap()
    }
}

fn start_daemon(root: &Root) -> Child {
    let child = root
        .cmd()
        .arg("daemon")
        .arg("--socket")
        .arg(root.sock())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(root.sock()).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

fn report(name: &str, mut samples: Vec<f64>, unit: &str) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<40} n={:<5} p50 {:>9.3} {unit}   p99 {:>9.3} {unit}",
        samples.len(),
        pct(0.50),
        pct(0.99)
    );
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn timed(n: usize, mut f: impl FnMut()) -> Vec<f64> {
    for _ in 0..n.min(200) {
        f();
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

fn env_n(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n = env_n("SHOAL_BENCH_N", 2000);
    let cold = env_n("SHOAL_BENCH_COLD", 15);
    let root = Root::new();
    let mut daemon = start_daemon(&root);
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "{:<40} {:.1} MB",
        "idle daemon RSS",
        rss_kb(daemon.id()) as f64 / 1024.0
    );

    let exec = json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "6 * 7"}});
    let mut k = Line::open(&root.sock());
    k.call(&json!({"jsonrpc": "2.0", "id": 0, "method": "session.attach", "params": {"session": "bench"}}));
    let probe = k.call(&exec);
    if probe.get("error").is_some() {
        println!(
            "note: exec fails ({}); timing the error path",
            probe["error"]["message"]
        );
    }
    report(
        "kernel exec `6 * 7` round trip",
        timed(n, || drop(k.call(&exec))),
        "ms",
    );

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "shoal_exec", "arguments": {"src": "6 * 7"}}});
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
    let mut m = Line::open(&root.sock());
    m.call(&init);
    report(
        "MCP tools/call round trip (socket)",
        timed(n, || drop(m.call(&call))),
        "ms",
    );

    let mut shim = root
        .cmd()
        .args(["mcp", "--socket"])
        .arg(root.sock())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut sin = shim.stdin.take().unwrap();
    let mut sout = BufReader::new(shim.stdout.take().unwrap());
    let mut via_shim = |v: &Value| {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        sin.write_all(&b).unwrap();
        let mut s = String::new();
        sout.read_line(&mut s).unwrap();
    };
    via_shim(&init);
    report(
        "MCP tools/call round trip (via shim)",
        timed(n, || via_shim(&call)),
        "ms",
    );
    drop(sin);
    let _ = shim.wait();
    println!(
        "{:<40} {:.1} MB",
        "daemon RSS after the round trips",
        rss_kb(daemon.id()) as f64 / 1024.0
    );
    let _ = daemon.kill();
    let _ = daemon.wait();

    let mut samples = Vec::new();
    for _ in 0..cold {
        let r = Root::new();
        let t = Instant::now();
        let mut shim = r
            .cmd()
            .args(["mcp", "--socket"])
            .arg(r.sock())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut sin = shim.stdin.take().unwrap();
        let mut b = serde_json::to_vec(&init).unwrap();
        b.push(b'\n');
        sin.write_all(&b).unwrap();
        let mut s = String::new();
        BufReader::new(shim.stdout.take().unwrap())
            .read_line(&mut s)
            .unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
        drop(sin);
        let _ = shim.wait();
        // Stop the autostarted daemon through its own status (pid), not by name.
        let mut c = Line::open(&r.sock());
        c.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "session.attach", "params": {}}));
        let st = c.call(&json!({"jsonrpc": "2.0", "id": 2, "method": "daemon.status"}));
        if let Some(pid) = st["result"]["daemon"]["pid"].as_i64() {
            // SAFETY: kill(2) on the daemon this loop started.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while r.sock().exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    report("shim cold start to initialize reply", samples, "ms");
}
