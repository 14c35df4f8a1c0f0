//! `make bench`: a human's keystroke in a PTY they took over (`shoal attach
//! --pty`), printed as p50/p99.
//!
//! The human's kernel connection claims and watches a PTY running `cat` on
//! a raw terminal (`stty raw -echo`: the program itself echoes each byte, so
//! what comes back has been through the program). One round: `pty.send` of
//! one byte, as `shoal attach --pty` forwards a key, until the `pty.screen`
//! notification that paints its echo arrives on the same connection. That is
//! keystroke → daemon → program → emulator → the human's screen update. The
//! same round trip for the agent's way (`pty.send`, then `pty.read` waiting
//! for the byte) on the same PTY once released, in the same run.
//!
//! Like `benches/pty.rs` it reports percentiles of a round trip through a
//! real daemon rather than criterion's estimates. Rounds: SHOAL_BENCH_N
//! (default 1000).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::{BenchDaemon, BenchDir};

fn start_daemon() -> BenchDaemon {
    let dir = BenchDir::new("sht");
    let state = dir.path().join("state");
    dir.daemon().arg("--state-dir").arg(state).start()
}

/// A kernel connection that writes requests without waiting and reads
/// frames in order.
struct Kernel {
    w: UnixStream,
    r: BufReader<UnixStream>,
    id: u64,
    /// Notifications that came while a reply was awaited.
    notes: std::collections::VecDeque<Value>,
}

impl Kernel {
    fn open(d: &BenchDaemon, kind: &str) -> Kernel {
        let w = UnixStream::connect(d.sock()).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        let mut k = Kernel {
            w,
            r,
            id: 0,
            notes: Default::default(),
        };
        k.call(
            "session.attach",
            json!({"session": "bench", "client": {"kind": kind, "tty": true}}),
        );
        k
    }
    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.id += 1;
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}),
        )
        .unwrap();
        b.push(b'\n');
        self.w.write_all(&b).unwrap();
        self.id
    }
    fn frame(&mut self) -> Value {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let v = self.frame();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            if v["method"] == "pty.screen" {
                self.notes.push_back(v["params"].clone());
            }
        }
    }
    /// The next `pty.screen` notification (replies are skipped).
    fn screen(&mut self) -> Value {
        if let Some(n) = self.notes.pop_front() {
            return n;
        }
        loop {
            let v = self.frame();
            if v["method"] == "pty.screen" {
                return v["params"].clone();
            }
        }
    }
}

fn pct(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

fn main() {
    let n: usize = std::env::var("SHOAL_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let d = start_daemon();
    let mut agent = Kernel::open(&d, "bench");
    let p = agent.call(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", "stty raw -echo; echo ready; exec cat"]}),
    );
    let id = p["pty_id"].clone();
    agent.call(
        "pty.read",
        json!({"pty_id": id, "wait_for": "ready", "timeout_ms": 10000}),
    );

    let mut human = Kernel::open(&d, "attach");
    human.call("pty.claim", json!({"pty_id": id}));
    human.call("pty.watch", json!({"pty_id": id}));
    let first = human.screen();
    assert_eq!(first["full"], json!(true));
    let keys = b"abcdefghijklmnopqrstuvwxyz";
    let mut took = Vec::with_capacity(n);
    for i in 0..n + 50 {
        let k = (keys[i % keys.len()] as char).to_string();
        let t = Instant::now();
        human.send("pty.send", json!({"pty_id": id, "input": {"text": k}}));
        // Each key changes the screen once: the next update is its echo.
        let u = human.screen();
        let dt = t.elapsed();
        assert!(u["ansi"].as_str().unwrap().contains(&k), "{u}");
        if i >= 50 {
            took.push(dt);
        }
    }
    let (p50, p99) = pct(took);
    println!("takeover: keystroke → program → human's screen update ({n} rounds): p50 {p50:.3} ms, p99 {p99:.3} ms");

    human.call("pty.release", json!({"pty_id": id}));
    drop(human);
    // The agent's way on the same PTY: send, then a read waiting for it.
    let mut took = Vec::with_capacity(n);
    for i in 0..n + 50 {
        let k = format!("{}", i % 10);
        let marker = format!("<{k}{i}>");
        let t = Instant::now();
        agent.call("pty.send", json!({"pty_id": id, "input": marker}));
        let r = agent.call(
            "pty.read",
            json!({"pty_id": id, "wait_for": marker, "timeout_ms": 10000}),
        );
        let dt = t.elapsed();
        assert_eq!(r["matched"], json!(true), "{r}");
        if i >= 50 {
            took.push(dt);
        }
        if i % 8 == 7 {
            // A marker never wraps (a wait matches the screen's rows).
            agent.call("pty.send", json!({"pty_id": id, "input": "\r\n"}));
        }
    }
    let (p50, p99) = pct(took);
    println!("takeover: the agent's pty.send + pty.read wait_for, same PTY ({n} rounds): p50 {p50:.3} ms, p99 {p99:.3} ms");
    agent.call("pty.close", json!({"pty_id": id}));
}
