//! `make bench`: what a human watching a session costs its agent. MCP
//! `shoal_exec "6 * 7"` round trips on one session, p50/p99, without and with
//! a live viewer (a kernel connection attached to the same session and
//! subscribed to `session.exec` and `approval`, as `shoal attach` and `shoal
//! watch` are, whose events a thread reads as they come), in alternating
//! rounds on one daemon so both see the same machine. The viewer reads only
//! events: the exec's one `session.exec` event carries everything it prints.
//!
//! A custom harness like `benches/shoal.rs`. Sizes: SHOAL_BENCH_N (default
//! 4000) round trips per side, in rounds of 250.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::{BenchDaemon, Line};

const ROUND: usize = 250;

fn frame(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap();
    b.push(b'\n');
    b
}

/// A viewer: attached to the session, its frames read by a thread that counts
/// events and notes the last subscription state it was answered.
struct Viewer {
    w: UnixStream,
    events: Arc<AtomicU64>,
    /// Subscribe and unsubscribe calls answered.
    answered: Arc<AtomicU64>,
}

impl Viewer {
    fn open(sock: &Path, session: &str) -> Viewer {
        let mut l = Line::open(sock);
        let a = l.call(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "session.attach",
            "params": {"session": session, "create": false,
                       "client": {"kind": "attach", "human": true}}}),
        );
        assert!(a.get("result").is_some(), "{a}");
        let events = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let (ev, sub) = (events.clone(), answered.clone());
        let (w, mut r) = l.into_parts();
        std::thread::spawn(move || {
            let mut s = String::new();
            loop {
                s.clear();
                if r.read_line(&mut s).unwrap_or(0) == 0 {
                    return;
                }
                // Only what the bench needs of a frame (a viewer's own work
                // is its process's, not the daemon's).
                if s.starts_with(r#"{"jsonrpc":"2.0","method":"event""#) {
                    ev.fetch_add(1, Ordering::Relaxed);
                } else if s.contains(r#""subscribed":"#) {
                    sub.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Viewer {
            w,
            events,
            answered,
        }
    }

    /// Wait until the viewer has read `n` exec events.
    fn caught_up(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.events.load(Ordering::Relaxed) < n {
            assert!(
                Instant::now() < deadline,
                "the viewer saw {} events of {n} watched execs",
                self.events.load(Ordering::Relaxed)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Subscribe (or not) to both channels; returns once both are answered.
    fn set(&mut self, on: bool) {
        let method = if on {
            "events.subscribe"
        } else {
            "events.unsubscribe"
        };
        let want = self.answered.load(Ordering::SeqCst) + 2;
        for ch in ["session.exec", "approval"] {
            // From now on: no replay of earlier rounds' events.
            self.w
                .write_all(&frame(&json!({"jsonrpc": "2.0", "id": 2, "method": method,
                    "params": {"channel": ch, "since": 1u64 << 60}})))
                .unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.answered.load(Ordering::SeqCst) < want {
            assert!(
                Instant::now() < deadline,
                "viewer subscription not answered"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn pcts(samples: &[f64]) -> (f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| s[((s.len() as f64 - 1.0) * p).round() as usize];
    (pct(0.5), pct(0.99))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that is not ours skips the run.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"attach".contains(a.as_str()))
    {
        return;
    }
    let n: usize = std::env::var("SHOAL_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let daemon = BenchDaemon::start("sha");
    let sock = daemon.sock();

    let mut agent = Line::open(&sock);
    agent.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
        "params": {"session": "pair"}}));
    agent.call(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}}));
    agent.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = frame(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "6 * 7"}}}));
    let mut reply = String::new();
    agent.call_raw(&call, &mut reply);
    assert!(reply.contains("42"), "{reply}");
    let mut viewer = Viewer::open(&sock, "pair");

    let mut without = Vec::with_capacity(n);
    let mut with = Vec::with_capacity(n);
    for _ in 0..200 {
        agent.call_raw(&call, &mut reply);
    }
    let mut round = 0;
    while without.len() < n || with.len() < n {
        let watched = round % 2 == 1;
        if !watched {
            // Every watched exec reaches the viewer before it unsubscribes.
            viewer.caught_up(with.len() as u64);
        }
        viewer.set(watched);
        let out = if watched { &mut with } else { &mut without };
        for _ in 0..ROUND {
            let t = Instant::now();
            agent.call_raw(&call, &mut reply);
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        round += 1;
    }
    viewer.caught_up(with.len() as u64);
    viewer.set(false);
    let (a50, a99) = pcts(&without);
    let (b50, b99) = pcts(&with);
    println!(
        "{:<44} n={:<5} p50 {a50:>7.3} ms   p99 {a99:>7.3} ms",
        "MCP shoal_exec `6 * 7`, no viewer",
        without.len()
    );
    println!(
        "{:<44} n={:<5} p50 {b50:>7.3} ms   p99 {b99:>7.3} ms",
        "MCP shoal_exec `6 * 7`, a live viewer",
        with.len()
    );
    println!(
        "{:<44} p50 {:+.1}%  ({} events read by the viewer)",
        "viewer's cost to the agent",
        (b50 / a50 - 1.0) * 100.0,
        viewer.events.load(Ordering::Relaxed)
    );
    drop(daemon);
}
