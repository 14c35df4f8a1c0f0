//! `cargo bench --bench http`: MCP `shoal_exec "6 * 7"` over Streamable HTTP on
//! loopback (one keep-alive connection, a 2025-11-25 session, JSON answers) beside
//! the same call through the `shoal mcp` shim, interleaved call by call in one run
//! (the machine is shared and noisy), each on a session of its own. Prints p50/p99
//! of each and the difference of the medians (target: within 0.15 ms).
//! SHOAL_BENCH_N (default 2000) calls per path.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::BenchDir;

/// One keep-alive HTTP/1.1 connection.
struct Http {
    w: TcpStream,
    r: BufReader<TcpStream>,
    head: String,
}

impl Http {
    fn post(&mut self, session: Option<&str>, body: &str) -> (String, Value) {
        let mut req = self.head.clone();
        if let Some(s) = session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.w.write_all(req.as_bytes()).unwrap();
        let mut len = 0;
        let mut sid = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            let l = line.to_ascii_lowercase();
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if let Some(v) = l.strip_prefix("mcp-session-id:") {
                sid = v.trim().to_string();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut b = vec![0; len];
        self.r.read_exact(&mut b).unwrap();
        (sid, serde_json::from_slice(&b).unwrap())
    }
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

fn main() {
    let n: usize = std::env::var("SHOAL_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let daemon = BenchDir::new("shh")
        .daemon()
        .args(["--http", "127.0.0.1:0"])
        .start();
    let sock = daemon.sock();
    let token = daemon
        .cmd()
        .args(["token", "create", "--local"])
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&token.stdout)
        .lines()
        .last()
        .unwrap()
        .to_string();
    let status = daemon
        .cmd()
        .args(["status", "--json", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    let st: Value = serde_json::from_slice(&status.stdout).unwrap();
    let addr = st["http"]["listen"].as_str().unwrap().to_string();

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "6 * 7"}}})
    .to_string();

    let t = TcpStream::connect(&addr).unwrap();
    t.set_nodelay(true).unwrap();
    let mut http = Http {
        r: BufReader::new(t.try_clone().unwrap()),
        w: t,
        head: format!(
            "POST /mcp?session=hot-http HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        ),
    };
    let (sid, r) = http.post(None, &init.to_string());
    assert!(r["result"]["protocolVersion"].is_string(), "{r}");

    let mut shim = daemon
        .cmd()
        .args(["mcp", "--session", "hot-shim", "--socket"])
        .arg(&sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut shim_in = shim.stdin.take().unwrap();
    let mut shim_out = BufReader::new(shim.stdout.take().unwrap());
    let mut via_shim = |body: &str| -> Value {
        shim_in.write_all(body.as_bytes()).unwrap();
        shim_in.write_all(b"\n").unwrap();
        let mut s = String::new();
        shim_out.read_line(&mut s).unwrap();
        serde_json::from_str(&s).unwrap()
    };
    via_shim(&init.to_string());

    // Warm up both paths.
    for _ in 0..200 {
        let (_, r) = http.post(Some(&sid), &call);
        assert_eq!(r["result"]["content"][0]["text"], "42", "{r}");
        let r = via_shim(&call);
        assert_eq!(r["result"]["content"][0]["text"], "42", "{r}");
    }
    let mut h = Vec::with_capacity(n);
    let mut s = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let (_, r) = http.post(Some(&sid), &call);
        h.push(t0.elapsed());
        assert_eq!(r["result"]["content"][0]["text"], "42");
        let t0 = Instant::now();
        let r = via_shim(&call);
        s.push(t0.elapsed());
        assert_eq!(r["result"]["content"][0]["text"], "42");
    }
    let (h50, h99) = (pct(&mut h, 0.5), pct(&mut h, 0.99));
    let (s50, s99) = (pct(&mut s, 0.5), pct(&mut s, 0.99));
    println!("MCP shoal_exec `6 * 7`, {n} calls each, interleaved");
    println!("  over HTTP (keep-alive)   p50 {h50:.3} ms   p99 {h99:.3} ms");
    println!("  through the shim         p50 {s50:.3} ms   p99 {s99:.3} ms");
    println!("  HTTP - shim (p50)        {:+.3} ms", h50 - s50);
    drop(shim_in);
    let _ = shim.wait();
    drop(daemon);
}
