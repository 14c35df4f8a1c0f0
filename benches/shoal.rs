//! `make bench`: end-to-end latency of the daemon, printed as p50/p99.
//!
//! - the hot path, side by side in one run: the floor (an
//!   unknown-method round trip) beside kernel `exec "null"`, kernel
//!   `exec "6 * 7"`, MCP `shoal_exec "6 * 7"` on the socket and through the
//!   `shoal mcp` shim (each path on a session of its own, created by its
//!   connection, so no call crosses threads to reach its session); idle RSS, RSS after 10,000 and 20,000 execs; execs/s
//!   with 1, 4 and 16 concurrent clients on distinct sessions. With
//!   SHOAL_BENCH_BEFORE=<path of an older shoal binary> the same figures are
//!   taken for it too, in alternating rounds (the machine is shared and noisy);
//! - shim cold start (no daemon; autostart) to the first `initialize` reply;
//! - MCP surface: `tools/list` size (advertised, and the full
//!   13-tool list with the reference schemas), eliding a 1,000,000-item list
//!   in-process, MCP `shoal_get` of a 10-item slice of it;
//! - MCP eras: a stateless 2026-07-28 `tools/call` of `6 * 7`
//!   beside the same call on a 2025 handshake connection, interleaved, and
//!   the stateless/legacy ratio (SHOAL_BENCH_ONLY=era runs only this).
//!
//! A custom harness (criterion's statistics add little to process-level
//! round trips). Sizes: SHOAL_BENCH_N (default 2000) round trips,
//! SHOAL_BENCH_COLD (default 15) cold starts; SHOAL_BENCH_ONLY=hot stops
//! after the hot path.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "workloads/journal.rs"]
mod journal_workload;

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::{BenchDaemon, BenchDir, Line, BIN};

fn start_daemon() -> BenchDaemon {
    BenchDaemon::start("shb")
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

fn rss_kb(d: &BenchDaemon) -> u64 {
    d.status_kb("VmRSS:")
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

/// The journal library over 100,000 entries (SHOAL_BENCH_JOURNAL_N): batched append
/// throughput and `journal.query` p50s.
fn journal_bench() {
    let n = env_n("SHOAL_BENCH_JOURNAL_N", 100_000);
    match journal_workload::bench_journal(n) {
        Ok(r) => println!("{r}"),
        Err(e) => println!("journal bench failed: {e}"),
    }
}

/// The 13 MCP tools (docs/rules.md §18) with their exact input schemas, a
/// one-line description each and an output schema like ours: what
/// `tools/list` would weigh once every capability exists.
fn reference_tools() -> Value {
    let inputs: Value = serde_json::from_str(r#"{"shoal_exec":{"type":"object","properties":{"src":{"type":"string"},"mode":{"enum":["run","plan"]},"position":{"enum":["stmt","value"]},"background":{"type":"boolean"},"timeout_ms":{"type":"integer","minimum":1},"elide":{"type":"object","properties":{"max_bytes":{"type":"integer"},"max_rows":{"type":"integer"},"max_items":{"type":"integer"}}}},"required":["src"],"additionalProperties":false},
 "shoal_plan":{"type":"object","properties":{"src":{"type":"string"}},"required":["src"],"additionalProperties":false},
 "shoal_apply":{"type":"object","properties":{"plan_ref":{"type":"string"}},"required":["plan_ref"],"additionalProperties":false},
 "shoal_get":{"type":"object","properties":{"ref":{"type":"string"},"path":{"type":"string"},"slice":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},"elide":{"type":"object","properties":{"max_bytes":{"type":"integer"},"max_rows":{"type":"integer"},"max_items":{"type":"integer"}}}},"required":["ref"],"additionalProperties":false},
 "shoal_journal":{"type":"object","properties":{"since":{"type":"integer"},"until":{"type":"integer"},"principal":{"type":"string"},"ok":{"type":"boolean"},"effects":{"type":"array","items":{"type":"string"}},"head":{"type":"string"},"limit":{"type":"integer","minimum":1}},"additionalProperties":false},
 "shoal_cancel":{"type":"object","properties":{"task":{"type":"string"}},"required":["task"],"additionalProperties":false},
 "shoal_cap_request":{"type":"object","properties":{"plan_ref":{"type":"string"},"effects":{"type":"array"}},"required":["plan_ref"],"additionalProperties":false},
 "shoal_pty_open":{"type":"object","properties":{"cmd":{"type":"string","description":"program to run"},"args":{"type":"array","items":{"type":"string"}},"cols":{"type":"integer","minimum":1,"maximum":1000},"rows":{"type":"integer","minimum":1,"maximum":1000},"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["cmd"],"additionalProperties":false},
 "shoal_pty_send":{"type":"object","properties":{"pty_id":{"type":"string"},"input":{"description":"string | {key|text|bytes} | array of those"}},"required":["pty_id","input"],"additionalProperties":false},
 "shoal_pty_read":{"type":"object","properties":{"pty_id":{"type":"string"}},"required":["pty_id"],"additionalProperties":false},
 "shoal_pty_resize":{"type":"object","properties":{"pty_id":{"type":"string"},"cols":{"type":"integer","minimum":1,"maximum":1000},"rows":{"type":"integer","minimum":1,"maximum":1000}},"required":["pty_id","cols","rows"],"additionalProperties":false},
 "shoal_pty_close":{"type":"object","properties":{"pty_id":{"type":"string"}},"required":["pty_id"],"additionalProperties":false},
 "shoal_pty_list":{"type":"object","properties":{},"additionalProperties":false}}"#).unwrap();
    let ours = shoal_proto::mcp::tools(shoal_proto::mcp::Caps {
        journal: true,
        events: true,
    });
    let tools: Vec<Value> = inputs
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, input)| {
            match ours.as_array().unwrap().iter().find(|t| t["name"] == json!(name)) {
                Some(t) => t.clone(),
                None => json!({
                    "name": name,
                    "title": name.trim_start_matches("shoal_").replace('_', " "),
                    "description": "Drive this capability of the Shoal session; see the output schema for the result shape returned.",
                    "inputSchema": input,
                    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}, "ref": {"type": "string"}, "state": {"type": "string"}}},
                }),
            }
        })
        .collect();
    json!({"tools": tools})
}

/// The MCP surface's budgets: `tools/list` ≤ 8 KB; eliding 1,000,000 items ≤ 100 ms;
/// `shoal_get` of a 10-item slice of them p50 ≤ 1 ms.
fn mcp_bench(m: &mut Line, n: usize) {
    let list = m.call(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}));
    let tools = &list["result"]["tools"];
    println!(
        "{:<40} {} bytes for {} advertised tools (budget 8192)",
        "MCP tools/list size",
        serde_json::to_vec(&list["result"]).unwrap().len(),
        tools.as_array().map_or(0, Vec::len)
    );
    let full = reference_tools();
    println!(
        "{:<40} {} bytes for all {} tools (reference schemas)",
        "MCP tools/list size, full surface",
        serde_json::to_vec(&full).unwrap().len(),
        full["tools"].as_array().unwrap().len()
    );

    let big = shoal_value::Value::list((0..1_000_000).map(shoal_value::Value::Int).collect());
    let budget = shoal_proto::elide::Budget::default();
    report(
        "elide a 1,000,000-item list (in-process)",
        timed(50, || {
            std::hint::black_box(shoal_proto::elide::elide(&big, &budget, "shoal://out/1"));
        }),
        "ms",
    );
    let t = Instant::now();
    let r = m.call(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "range(0, 1000000).collect()"}}}));
    println!(
        "{:<40} {:.1} ms (evaluation + journal + elision)",
        "MCP shoal_exec of a 1,000,000-item list",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["value"]["n"], json!(1_000_000), "{r}");
    let get = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "shoal_get", "arguments": {"ref": sc["ref"], "slice": [500_000, 500_010], "format": "json"}}});
    let probe = m.call(&get);
    assert_eq!(
        probe["result"]["structuredContent"]["value"]["v"]
            .as_array()
            .map(Vec::len),
        Some(10),
        "{probe}"
    );
    report(
        "MCP shoal_get 10-item slice of 1,000,000",
        timed(n, || drop(m.call(&get))),
        "ms",
    );
}

/// MCP 2026-07-28 vs the 2025 handshake on one daemon: a stateless
/// `tools/call` of `6 * 7` (envelope in `_meta`, no initialize) against the
/// same call on an initialized connection, interleaved call by call so both
/// see the same machine; the p50/p99 ratio modern/legacy. The timed calls
/// send pre-encoded frames and do not decode the replies (both are checked
/// once before), so the ratio is the server's and the socket's, not the
/// bench client's JSON work on the longer modern frames.
fn mcp_era_bench(sock: &Path, n: usize) {
    // Connections are spread over the daemon's arbiters round robin: opened
    // in the order legacy, modern, modern, legacy, each era has one connection
    // on each of two neighbouring arbiters, and the calls alternate between
    // the pairs, so where a connection landed weighs on both eras alike.
    let mut legacy = Line::open(sock);
    legacy.call(&init_frame());
    let mut modern = Line::open(sock);
    let mut modern2 = Line::open(sock);
    let mut legacy2 = Line::open(sock);
    legacy2.call(&init_frame());
    let args = json!({"name": "shoal_exec", "arguments": {"src": "6 * 7"}});
    let old = rpc(2, "tools/call", args.clone());
    let mut p = args;
    p["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    });
    let new = rpc(2, "tools/call", p);
    let r = modern.call(&new);
    assert_eq!(r["result"]["resultType"], json!("complete"), "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["value"]["v"],
        json!(42),
        "{r}"
    );
    let r = legacy.call(&old);
    assert_eq!(
        r["result"]["structuredContent"]["value"]["v"],
        json!(42),
        "{r}"
    );
    let frame = |v: &Value| {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        b
    };
    let (old, new) = (frame(&old), frame(&new));
    let mut reply = String::new();
    for _ in 0..n.min(200) {
        legacy.call_raw(&old, &mut reply);
        modern.call_raw(&new, &mut reply);
        legacy2.call_raw(&old, &mut reply);
        modern2.call_raw(&new, &mut reply);
    }
    let (mut ls, mut ms) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        // Alternate which era goes first so neither always follows the other.
        let mut one = |line: &mut Line, f: &[u8], out: &mut Vec<f64>| {
            let t = Instant::now();
            line.call_raw(f, &mut reply);
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        };
        let (l, m) = if (i / 2) % 2 == 0 {
            (&mut legacy, &mut modern)
        } else {
            (&mut legacy2, &mut modern2)
        };
        if i % 2 == 0 {
            one(l, &old, &mut ls);
            one(m, &new, &mut ms);
        } else {
            one(m, &new, &mut ms);
            one(l, &old, &mut ls);
        }
    }
    let (l50, l99) = pcts(&ls);
    let (m50, m99) = pcts(&ms);
    report("MCP tools/call 6 * 7, 2025-11-25 (legacy)", ls, "ms");
    report("MCP tools/call 6 * 7, 2026-07-28 (stateless)", ms, "ms");
    println!(
        "{:<40} p50 {:.3}   p99 {:.3}",
        "MCP stateless/legacy ratio",
        m50 / l50,
        m99 / l99
    );
}

/// One daemon of the side-by-side hot-path run ("after": this build;
/// "before": SHOAL_BENCH_BEFORE).
struct Subject {
    label: &'static str,
    daemon: BenchDaemon,
    kernel: Line,
    mcp: Line,
    shim: Child,
    shim_in: std::process::ChildStdin,
    shim_out: BufReader<std::process::ChildStdout>,
    idle_rss_kb: u64,
    /// Idle RssAnon and RssFile (kB).
    idle_split_kb: (u64, u64),
    samples: Vec<Vec<f64>>,
}

const HOT_PATHS: [&str; 5] = [
    "floor: unknown-method round trip",
    "kernel exec `null`",
    "kernel exec `6 * 7`",
    "MCP shoal_exec `6 * 7` (socket)",
    "MCP shoal_exec `6 * 7` (via shim)",
];

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn init_frame() -> Value {
    rpc(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}}),
    )
}

impl Subject {
    fn start(label: &'static str, bin: PathBuf) -> Subject {
        let daemon = BenchDir::new("shb").daemon().bin(&bin).start();
        std::thread::sleep(Duration::from_millis(300));
        let idle_rss_kb = rss_kb(&daemon);
        let idle_split_kb = (daemon.status_kb("RssAnon:"), daemon.status_kb("RssFile:"));
        let mut kernel = Line::open(&daemon.sock());
        kernel.call(&rpc(0, "session.attach", json!({"session": "hot"})));
        let mut mcp = Line::open(&daemon.sock());
        mcp.call(&init_frame());
        // The shim's own session: a session runs on the arbiter of the connection that
        // created it, and `default` was created by the socket MCP connection, on the
        // other arbiter. Shared, every shim call would also pay two cross-thread hops,
        // which is not the shim's cost.
        let mut shim = daemon
            .cmd()
            .args(["mcp", "--session", "hot-shim", "--socket"])
            .arg(daemon.sock())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let shim_in = shim.stdin.take().unwrap();
        let shim_out = BufReader::new(shim.stdout.take().unwrap());
        let mut s = Subject {
            label,
            daemon,
            kernel,
            mcp,
            shim,
            shim_in,
            shim_out,
            idle_rss_kb,
            idle_split_kb,
            samples: vec![Vec::new(); HOT_PATHS.len()],
        };
        s.via_shim(&init_frame());
        for (i, r) in s.probe().into_iter().enumerate() {
            if r.get("error").is_some() && i != 0 {
                println!("note: {label}: {} answers an error: {r}", HOT_PATHS[i]);
            }
        }
        s
    }

    fn via_shim(&mut self, v: &Value) -> Value {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.shim_in.write_all(&b).unwrap();
        let mut s = String::new();
        self.shim_out.read_line(&mut s).unwrap();
        serde_json::from_str(&s).unwrap()
    }

    fn frames() -> [Value; 5] {
        let call = rpc(
            2,
            "tools/call",
            json!({"name": "shoal_exec", "arguments": {"src": "6 * 7"}}),
        );
        [
            rpc(1, "bench.no_such_method", json!({})),
            rpc(1, "exec", json!({"src": "null"})),
            rpc(1, "exec", json!({"src": "6 * 7"})),
            call.clone(),
            call,
        ]
    }

    fn one(&mut self, i: usize, f: &Value) -> Value {
        match i {
            0..=2 => self.kernel.call(f),
            3 => self.mcp.call(f),
            _ => self.via_shim(f),
        }
    }

    fn probe(&mut self) -> Vec<Value> {
        let frames = Subject::frames();
        (0..frames.len()).map(|i| self.one(i, &frames[i])).collect()
    }

    /// One round: `n` timed round trips of each path, after a short warm-up.
    fn round(&mut self, n: usize) {
        let frames = Subject::frames();
        for (i, f) in frames.iter().enumerate() {
            for _ in 0..n.min(50) {
                self.one(i, f);
            }
            for _ in 0..n {
                let t = Instant::now();
                std::hint::black_box(self.one(i, f));
                self.samples[i].push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }

    fn execs(&mut self, n: usize) {
        let f = rpc(1, "exec", json!({"src": "6 * 7"}));
        for _ in 0..n {
            self.kernel.call(&f);
        }
    }

    /// Execs per second with `clients` connections, each on its own session,
    /// each running `6 * 7` back to back for `dur`.
    fn throughput(&self, clients: usize, dur: Duration) -> f64 {
        let sock = self.daemon.sock();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients));
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let sock = sock.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let mut l = Line::open(&sock);
                    l.call(&rpc(
                        0,
                        "session.attach",
                        json!({"session": format!("tp{c}")}),
                    ));
                    let f = rpc(1, "exec", json!({"src": "6 * 7"}));
                    l.call(&f);
                    barrier.wait();
                    let t = Instant::now();
                    let mut k = 0u64;
                    while t.elapsed() < dur {
                        l.call(&f);
                        k += 1;
                    }
                    k as f64 / t.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    }

    fn stop(mut self) {
        drop(self.shim_in);
        let _ = self.shim.wait();
        drop(self.daemon);
    }
}

fn pcts(samples: &[f64]) -> (f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| s[((s.len() as f64 - 1.0) * p).round() as usize];
    (pct(0.5), pct(0.99))
}

/// The hot path side by side: every figure for this build, and for the
/// SHOAL_BENCH_BEFORE binary when given, in alternating rounds.
fn hot_path_bench(n: usize) {
    let mut subjects = vec![Subject::start("after", PathBuf::from(BIN))];
    if let Some(before) = std::env::var_os("SHOAL_BENCH_BEFORE").map(PathBuf::from) {
        if before.is_file() {
            subjects.insert(0, Subject::start("before", before));
        } else {
            println!(
                "note: SHOAL_BENCH_BEFORE={} is not a file",
                before.display()
            );
        }
    }
    let rounds = 10;
    println!("machine load before the hot path: {}", loadavg());
    for _ in 0..rounds {
        for s in subjects.iter_mut() {
            s.round(n.div_ceil(rounds));
        }
    }
    println!("hot path (round trips: p50 / p99; {rounds} alternating rounds)");
    for (i, name) in HOT_PATHS.iter().enumerate() {
        let cells: Vec<String> = subjects
            .iter()
            .map(|s| {
                let (p50, p99) = pcts(&s.samples[i]);
                format!("{}: p50 {p50:>7.3} ms  p99 {p99:>7.3} ms", s.label)
            })
            .collect();
        println!("  {name:<36} {}", cells.join("   |   "));
    }
    for s in &subjects {
        let floor = pcts(&s.samples[0]).0;
        let k = pcts(&s.samples[2]).0;
        let shim = pcts(&s.samples[4]).0;
        println!(
            "  {:<6} kernel exec `6 * 7` = {:.1}x the floor; the shim's MCP call adds {:.3} ms over it",
            s.label,
            k / floor,
            shim - k
        );
    }
    // Memory: idle, then after 10,000 and 20,000 execs (it must settle).
    let mut after10k = Vec::new();
    for s in subjects.iter_mut() {
        s.execs(10_000);
        after10k.push(rss_kb(&s.daemon));
    }
    for (j, s) in subjects.iter_mut().enumerate() {
        s.execs(10_000);
        println!(
            "  {:<6} daemon RSS: idle {:.1} MB (anon {:.1}, file {:.1}), after 10,000 execs {:.1} MB, after 20,000 {:.1} MB",
            s.label,
            s.idle_rss_kb as f64 / 1024.0,
            s.idle_split_kb.0 as f64 / 1024.0,
            s.idle_split_kb.1 as f64 / 1024.0,
            after10k[j] as f64 / 1024.0,
            rss_kb(&s.daemon) as f64 / 1024.0
        );
    }
    // Throughput, alternating per client count.
    for clients in [1, 4, 16] {
        let cells: Vec<String> = subjects
            .iter()
            .map(|s| {
                let r = (0..2)
                    .map(|_| s.throughput(clients, Duration::from_millis(700)))
                    .fold(0.0, f64::max);
                format!("{}: {r:>8.0} execs/s", s.label)
            })
            .collect();
        println!(
            "  throughput, {clients:>2} clients (distinct sessions)   {}",
            cells.join("   |   ")
        );
    }
    println!("machine load after the hot path: {}", loadavg());
    for s in subjects {
        s.stop();
    }
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages (the machine is shared).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n = env_n("SHOAL_BENCH_N", 2000);
    if std::env::var("SHOAL_BENCH_ONLY").is_ok_and(|v| v == "era") {
        let daemon = start_daemon();
        mcp_era_bench(&daemon.sock(), n);
        drop(daemon);
        return;
    }
    hot_path_bench(n);
    if std::env::var("SHOAL_BENCH_ONLY").is_ok_and(|v| v == "hot") {
        return;
    }
    journal_bench();
    let cold = env_n("SHOAL_BENCH_COLD", 15);
    let daemon = start_daemon();

    let exec = json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "6 * 7"}});
    let mut k = Line::open(&daemon.sock());
    k.call(&json!({"jsonrpc": "2.0", "id": 0, "method": "session.attach", "params": {"session": "bench"}}));
    for _ in 0..n {
        k.call(&exec);
    }
    // What the journal added to those execs, measured inside the session (batched mode).
    let st = k.call(&json!({"jsonrpc": "2.0", "id": 3, "method": "daemon.status", "params": {}}));
    println!(
        "{:<40} p50 {} µs   p99 {} µs   (in-daemon, last 1024 execs)",
        "journal overhead per exec (batched)",
        st["result"]["journal"]["exec_overhead_p50_us"],
        st["result"]["journal"]["exec_overhead_p99_us"]
    );

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
    let mut m = Line::open(&daemon.sock());
    m.call(&init);

    mcp_bench(&mut m, n);
    mcp_era_bench(&daemon.sock(), n);

    println!(
        "{:<40} {:.1} MB",
        "daemon RSS after the round trips",
        rss_kb(&daemon) as f64 / 1024.0
    );
    drop(daemon);

    let mut samples = Vec::new();
    for _ in 0..cold {
        let r = BenchDir::new("shb");
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
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while r.sock().exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    report("shim cold start to initialize reply", samples, "ms");
}
