//! `make bench`: background tasks and the event bus, end to end over the
//! kernel protocol of one release daemon on a temp socket, printed as p50/p99.
//!
//! - creation to the `started` event: `exec {background: true}` sent, until
//!   the task's `task.N` `started` event arrives on the same connection
//!   (subscribed beforehand: task numbers are a daemon-wide counter, so the
//!   next one is known), for a cheap value (`1`) and for `sh { sleep 5 }`
//!   (cancelled after each sample). Target p50 ≤ 1 ms;
//! - cancel of a running `sh { sleep 30 }` (its pid seen in `task.get`) from
//!   sending `task.cancel` to the final `{state: "cancelled"}` event. Target
//!   p50 ≤ 50 ms;
//! - one event to 100 subscribers: 100 kernel connections subscribed to
//!   `user.fan`, from sending `events.publish` until the last of them has
//!   read it (one thread waits on all sockets). Then again with one subscriber
//!   whose socket is never read (stalled until the bus drops for it, which is
//!   checked by its `{dropped}` marker) beside 99 readers. Target ≤ 1 ms for
//!   both.
//!
//! Sizes: SHOAL_BENCH_TASKS_N (default 200) creations per variant,
//! SHOAL_BENCH_CANCEL_N (default 50) cancels, SHOAL_BENCH_FAN_N (default 300)
//! fan-out rounds per phase.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::BenchDaemon;

/// A kernel connection: requests answered in order, `event` notifications
/// kept aside until asked for.
struct Line {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
    events: VecDeque<(Instant, Value)>,
}

impl Line {
    fn open(p: &Path) -> Line {
        let w = UnixStream::connect(p).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Line {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
            next: 0,
            events: VecDeque::new(),
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}),
        )
        .unwrap();
        b.push(b'\n');
        self.w.write_all(&b).unwrap();
        self.next
    }

    /// The next frame and when it was read.
    fn frame(&mut self) -> (Instant, Value) {
        let mut s = String::new();
        let n = self.r.read_line(&mut s).expect("read a frame");
        assert!(n > 0, "the daemon closed the connection");
        (Instant::now(), serde_json::from_str(&s).unwrap())
    }

    /// The response to request `id`; notifications read meanwhile are kept.
    fn response(&mut self, id: u64) -> Value {
        loop {
            let (at, v) = self.frame();
            if v["method"] == "event" {
                self.events.push_back((at, v["params"].clone()));
            } else {
                assert_eq!(v["id"], json!(id), "out of order: {v}");
                return v;
            }
        }
    }

    fn ok(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let r = self.response(id);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// The first event of `channel` satisfying `pred` (earlier ones of it
    /// are dropped), with the time it was read.
    fn event(&mut self, channel: &str, pred: impl Fn(&Value) -> bool) -> Instant {
        loop {
            let (at, ev) = match self.events.pop_front() {
                Some(e) => e,
                None => {
                    let (at, v) = self.frame();
                    assert_eq!(v["method"], "event", "unexpected frame {v}");
                    (at, v["params"].clone())
                }
            };
            if ev["channel"] == channel && pred(&ev["payload"]) {
                return at;
            }
        }
    }
}

fn report(name: &str, mut samples: Vec<f64>, unit: &str) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<44} n={:<5} p50 {:>9.3} {unit}   p99 {:>9.3} {unit}",
        samples.len(),
        pct(0.50),
        pct(0.99)
    );
}

fn env_n(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn task_number(r: &Value) -> u64 {
    r["task"]
        .as_str()
        .and_then(|t| t.strip_prefix("task:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no task in {r}"))
}

fn is_started(p: &Value) -> bool {
    *p == json!({"$": "str", "v": "started"})
}

/// The final `{state, ref}` event payload with this state.
fn is_final(state: &'static str) -> impl Fn(&Value) -> bool {
    move |p| p["$"] == "record" && p["v"]["state"]["v"] == state
}

/// The state of a task once it is final.
fn await_final(c: &mut Line, n: u64) -> String {
    let r = c.ok(
        "task.await",
        json!({"task": format!("task:{n}"), "timeout_ms": 20000}),
    );
    r["state"].as_str().unwrap_or_default().to_string()
}

/// Starts one background task of `src` and answers the time from sending the
/// exec to reading its `started` event, and its number. `next` is the task
/// number the daemon will give it.
fn start_timed(c: &mut Line, src: &str, next: u64) -> (f64, u64) {
    let channel = format!("task.{next}");
    let t0 = Instant::now();
    let id = c.send("exec", json!({"src": src, "background": true}));
    let r = c.response(id);
    assert_eq!(task_number(&r["result"]), next, "task numbers skipped: {r}");
    // A task's channel exists once the task does; subscribing replays its
    // ring, so a `started` that came first is not missed.
    c.ok("events.subscribe", json!({"channel": channel}));
    let at = c.event(&channel, is_started);
    c.ok("events.unsubscribe", json!({"channel": channel}));
    (ms(at - t0), next)
}

/// Creation to `started`, `n` samples after a short warm-up. `running`:
/// the work is long, so each task is cancelled after its sample.
fn creation(c: &mut Line, next: &mut u64, name: &str, src: &str, running: bool, n: usize) {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let (t, task) = start_timed(c, src, *next);
        *next += 1;
        if running {
            c.ok("task.cancel", json!({"task": format!("task:{task}")}));
            assert_eq!(await_final(c, task), "cancelled");
        } else {
            assert_eq!(await_final(c, task), "completed");
        }
        if i >= 20 {
            samples.push(t);
        }
    }
    report(name, samples, "ms");
}

/// `task.cancel` of a running `sleep` until its final `cancelled` event.
fn cancel(c: &mut Line, next: &mut u64, n: usize) {
    let mut samples = Vec::with_capacity(n);
    let mut gone = Vec::with_capacity(n);
    for i in 0..n + 5 {
        let task = *next;
        *next += 1;
        let channel = format!("task.{task}");
        start_timed(c, "sh { sleep 30 }", task);
        c.ok("events.subscribe", json!({"channel": channel}));
        // Running its program: the pid is in the record.
        let deadline = Instant::now() + Duration::from_secs(10);
        let pid = loop {
            let r = c.ok("task.get", json!({"task": format!("task:{task}")}));
            if let Some(p) = r["pid"].as_u64().filter(|p| *p > 0) {
                break p;
            }
            assert!(Instant::now() < deadline, "task {task} never ran sleep");
            std::thread::sleep(Duration::from_millis(1));
        };
        let t0 = Instant::now();
        c.ok("task.cancel", json!({"task": format!("task:{task}")}));
        let at = c.event(&channel, is_final("cancelled"));
        let proc_gone = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
        });
        c.ok("events.unsubscribe", json!({"channel": channel}));
        assert_eq!(await_final(c, task), "cancelled");
        if i >= 5 {
            samples.push(ms(at - t0));
            gone.push(proc_gone);
        }
    }
    report("cancel a running sleep to `cancelled` event", samples, "ms");
    println!(
        "{:<44} {}/{} cancelled sleeps already gone from /proc at the event",
        "",
        gone.iter().filter(|g| **g).count(),
        gone.len()
    );
}

/// A subscriber, read on a single-threaded tokio runtime so that one thread
/// waits on all of them at once (epoll), not 100 threads.
struct Sub {
    r: tokio::io::BufReader<tokio::net::UnixStream>,
}

impl Sub {
    /// Attached and subscribed to `user.fan`; call inside the runtime.
    fn open(p: &Path, i: usize) -> Sub {
        let mut l = Line::open(p);
        l.ok(
            "session.attach",
            json!({"session": "fan", "client": {"kind": "bench", "tty": false}}),
        );
        l.ok("events.subscribe", json!({"channel": "user.fan"}));
        assert!(l.events.is_empty(), "subscriber {i} got a replay");
        let s = l.w;
        s.set_nonblocking(true).unwrap();
        Sub {
            r: tokio::io::BufReader::new(tokio::net::UnixStream::from_std(s).unwrap()),
        }
    }

    /// Reads until the `user.fan` event whose payload is `tag`; when it read it.
    async fn until(&mut self, tag: &str) -> Instant {
        use tokio::io::AsyncBufReadExt;
        loop {
            let mut line = String::new();
            let n = self.r.read_line(&mut line).await.expect("read an event");
            assert!(n > 0, "a subscriber's connection closed");
            let at = Instant::now();
            let v: Value = serde_json::from_str(&line).unwrap();
            let p = &v["params"]["payload"];
            if v["method"] == "event" && (p.as_str() == Some(tag) || p["v"].as_str() == Some(tag)) {
                return at;
            }
        }
    }
}

/// Publishes `tag` on `user.fan` and waits until every one of `subs` has
/// read it. Answers the time from the send to the last read.
fn publish_to_all(
    rt: &tokio::runtime::Runtime,
    publ: &mut Line,
    subs: &mut [Sub],
    tag: &str,
) -> f64 {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let t0 = Instant::now();
    let id = publ.send(
        "events.publish",
        json!({"channel": "user.fan", "payload": tag}),
    );
    let last = rt.block_on(async {
        let mut waits: FuturesUnordered<_> = subs.iter_mut().map(|s| s.until(tag)).collect();
        let mut last = t0;
        let all = async {
            while let Some(at) = waits.next().await {
                last = last.max(at);
            }
        };
        tokio::time::timeout(Duration::from_secs(30), all)
            .await
            .unwrap_or_else(|_| panic!("not every subscriber got {tag} in 30 s"));
        last
    });
    let r = publ.response(id);
    assert!(r.get("error").is_none(), "{r}");
    ms(last - t0)
}

/// `rounds` publishes of a small event after a warm-up.
fn fan_rounds(
    rt: &tokio::runtime::Runtime,
    publ: &mut Line,
    subs: &mut [Sub],
    phase: &str,
    rounds: usize,
) -> Vec<f64> {
    (0..rounds + 20)
        .map(|i| publish_to_all(rt, publ, subs, &format!("{phase}-{i}")))
        .skip(20)
        .collect()
}

fn fan_out(sock: &Path, rounds: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let mut publ = Line::open(sock);
    publ.ok(
        "session.attach",
        json!({"session": "publisher", "client": {"kind": "bench", "tty": false}}),
    );
    let mut subs: Vec<Sub> = (0..100).map(|i| Sub::open(sock, i)).collect();
    let s = fan_rounds(&rt, &mut publ, &mut subs, "all", rounds);
    report("one event to 100 subscribers (last read)", s, "ms");

    // One subscriber stops reading: its socket, its connection's writer
    // queue and then its bus queue fill while the 99 others read on.
    subs.pop();
    let mut stalled = Line::open(sock);
    stalled.ok(
        "session.attach",
        json!({"session": "fan", "client": {"kind": "bench", "tty": false}}),
    );
    stalled.ok("events.subscribe", json!({"channel": "user.fan"}));
    let pad = "x".repeat(1024);
    for k in 0..1500 {
        publish_to_all(&rt, &mut publ, &mut subs, &format!("fill-{k}-{pad}"));
    }
    let s = fan_rounds(&rt, &mut publ, &mut subs, "stalled", rounds);
    report("one event to 99 readers beside a stalled one", s, "ms");

    // The stalled one was really stalled: once read, its stream carries the
    // bus's `{dropped}` marker.
    stalled
        .w
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let dropped = loop {
        let (_, v) = stalled.frame();
        if let Some(d) = v["params"]["payload"]["dropped"].as_u64() {
            break d;
        }
    };
    println!(
        "{:<44} the stalled subscriber lost {dropped} events (bus queue full), the readers none",
        ""
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let daemon = BenchDaemon::start("shtb");
    let sock = daemon.sock();
    let mut c = Line::open(&sock);
    c.ok(
        "session.attach",
        json!({"session": "bench", "client": {"kind": "bench", "tty": false}}),
    );
    let first = c.ok("exec", json!({"src": "0", "background": true}));
    let mut next = task_number(&first);
    assert_eq!(await_final(&mut c, next), "completed");
    next += 1;

    let n = env_n("SHOAL_BENCH_TASKS_N", 200);
    creation(
        &mut c,
        &mut next,
        "task creation to `started` event (`1`)",
        "1",
        false,
        n,
    );
    creation(
        &mut c,
        &mut next,
        "task creation to `started` (`sh { sleep 5 }`)",
        "sh { sleep 5 }",
        true,
        n,
    );
    cancel(&mut c, &mut next, env_n("SHOAL_BENCH_CANCEL_N", 50));
    let listed = c.ok("task.list", json!({}));
    let live = listed
        .as_array()
        .map_or(0, |l| l.iter().filter(|t| t["state"] == "running").count());
    assert_eq!(live, 0, "a task is still running: {listed}");
    fan_out(&sock, env_n("SHOAL_BENCH_FAN_N", 300));
    drop(c);
    drop(daemon);
}
