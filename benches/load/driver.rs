//! The load test: N concurrent MCP clients across M sessions on one
//! daemon, each looping over a mix of `shoal_exec`, `shoal_get`,
//! `shoal_journal` and `resources/read`, for a fixed time and at most a fixed
//! number of calls per client. Loopback (a Unix socket) only.
//!
//! Shared by `benches/load.rs` (`make load`, 60 s) and `tests/it/load.rs` (the
//! 10 s CI version). Reports p50/p99 per tool, the error count and the
//! daemon's peak RSS (`VmHWM`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub bin: PathBuf,
    pub clients: usize,
    pub sessions: usize,
    pub duration: Duration,
    /// Upper bound on calls per client (the test is bounded in count as well as time).
    pub max_calls_per_client: usize,
}

#[derive(Debug, Default)]
pub struct ToolStats {
    pub calls: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Default)]
pub struct LoadReport {
    pub clients: usize,
    pub sessions: usize,
    pub elapsed: Duration,
    pub per_tool: BTreeMap<&'static str, ToolStats>,
    pub errors: usize,
    /// First few errors, for the report.
    pub error_samples: Vec<String>,
    pub peak_rss_bytes: u64,
    pub daemon_threads: u64,
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: usize = self.per_tool.values().map(|t| t.calls).sum();
        writeln!(
            f,
            "load: {} MCP clients over {} sessions, {:.1} s, {} calls ({:.0}/s)",
            self.clients,
            self.sessions,
            self.elapsed.as_secs_f64(),
            total,
            total as f64 / self.elapsed.as_secs_f64().max(1e-9)
        )?;
        for (tool, t) in &self.per_tool {
            writeln!(
                f,
                "  {tool:<16} {:>7} calls  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
                t.calls, t.p50_ms, t.p99_ms, t.max_ms
            )?;
        }
        writeln!(f, "  errors           {}", self.errors)?;
        for e in &self.error_samples {
            writeln!(f, "    {e}")?;
        }
        writeln!(
            f,
            "  peak RSS         {:.1} MB (daemon VmHWM), {} daemon threads at the end",
            self.peak_rss_bytes as f64 / 1e6,
            self.daemon_threads
        )
    }
}

const TOOLS: [&str; 4] = ["shoal_exec", "shoal_get", "shoal_journal", "resources/read"];

struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
}

impl Client {
    fn open(sock: &Path, session: &str) -> std::io::Result<Client> {
        let w = UnixStream::connect(sock)?;
        w.set_read_timeout(Some(Duration::from_secs(60)))?;
        let r = BufReader::new(w.try_clone()?);
        let mut c = Client { w, r, next: 0 };
        c.send(
            &json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": session}}),
        )?;
        c.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "load", "version": "0"}}),
        )?;
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(c)
    }

    fn send(&mut self, v: &Value) -> std::io::Result<()> {
        let mut b = serde_json::to_vec(v)?;
        b.push(b'\n');
        self.w.write_all(&b)
    }

    fn call(&mut self, method: &str, params: Value) -> std::io::Result<Value> {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other("connection closed"));
            }
            let v: Value = serde_json::from_str(&line).map_err(std::io::Error::other)?;
            if v.get("id") == Some(&json!(id)) {
                return Ok(v);
            }
        }
    }
}

/// A reply that is an error: JSON-RPC error or a tool result with `isError`.
fn failure(v: &Value) -> Option<String> {
    if let Some(e) = v.get("error") {
        return Some(e.to_string());
    }
    if v["result"]["isError"] == json!(true) {
        return Some(v["result"]["structuredContent"].to_string());
    }
    None
}

struct Sample {
    tool: usize,
    ms: f64,
}

fn client_loop(
    sock: &Path,
    i: usize,
    sessions: usize,
    deadline: Instant,
    max_calls: usize,
) -> (Vec<Sample>, Vec<String>) {
    let mut samples = Vec::new();
    let mut errors = Vec::new();
    let session = format!("load{}", i % sessions);
    let mut c = match Client::open(sock, &session) {
        Ok(c) => c,
        Err(e) => return (samples, vec![format!("client {i}: connect: {e}")]),
    };
    let mut last_ref: Option<String> = None;
    let mut k = 0usize;
    while Instant::now() < deadline && k < max_calls {
        let tool = (i + k) % TOOLS.len();
        k += 1;
        let (method, params) = match (tool, &last_ref) {
            (1, Some(r)) => (
                "tools/call",
                json!({"name": "shoal_get", "arguments": {"ref": r}}),
            ),
            (2, _) => (
                "tools/call",
                json!({"name": "shoal_journal", "arguments": {"limit": 5}}),
            ),
            (3, Some(r)) => (
                "resources/read",
                json!({"uri": format!("shoal://out/{}", &r[4..])}),
            ),
            _ => (
                "tools/call",
                json!({"name": "shoal_exec", "arguments": {
                    "src": format!("range(0, 50).map(x => x * {k}).sum() + {i}")}}),
            ),
        };
        // Without a ref yet, the get/read slots run an exec instead.
        let tool = if method == "tools/call" && params["name"] == json!("shoal_exec") {
            0
        } else {
            tool
        };
        let t0 = Instant::now();
        match c.call(method, params) {
            Ok(v) => {
                samples.push(Sample {
                    tool,
                    ms: t0.elapsed().as_secs_f64() * 1000.0,
                });
                if let Some(e) = failure(&v) {
                    errors.push(format!("client {i} {}: {e}", TOOLS[tool]));
                } else if tool == 0 {
                    last_ref = v["result"]["structuredContent"]["ref"]
                        .as_str()
                        .map(str::to_string);
                }
            }
            Err(e) => {
                errors.push(format!("client {i} {}: {e}", TOOLS[tool]));
                break;
            }
        }
    }
    (samples, errors)
}

fn proc_field(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

struct Daemon {
    child: Child,
    _root: tempfile::TempDir,
    sock: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(bin: &Path, clients: usize) -> std::io::Result<Daemon> {
    let root = tempfile::Builder::new().prefix("shl").tempdir_in("/tmp")?;
    let p = root.path();
    for sub in ["run", "state", "config"] {
        std::fs::create_dir_all(p.join(sub))?;
    }
    let cfg = p.join("load.toml");
    std::fs::write(
        &cfg,
        format!(
            "[limits]\nmax_connections = {}\nmax_sessions = 64\n",
            clients + 16
        ),
    )?;
    let sock = p.join("s.sock");
    let child = Command::new(bin)
        .arg("daemon")
        .arg("--socket")
        .arg(&sock)
        .arg("--config")
        .arg(&cfg)
        .env("XDG_RUNTIME_DIR", p.join("run"))
        .env("XDG_STATE_HOME", p.join("state"))
        .env("XDG_CONFIG_HOME", p.join("config"))
        .env("HOME", p)
        .env_remove("SHOAL_SOCKET")
        .env_remove("LISTEN_FDS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let d = Daemon {
        child,
        _root: root,
        sock,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&d.sock).is_err() {
        if Instant::now() > deadline {
            return Err(std::io::Error::other("the daemon did not come up"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(d)
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Start a private daemon, run the load, stop the daemon, report.
pub fn run(o: &LoadOptions) -> std::io::Result<LoadReport> {
    let d = start_daemon(&o.bin, o.clients)?;
    let pid = d.child.id();
    let start = Arc::new(Barrier::new(o.clients + 1));
    let mut handles = Vec::new();
    for i in 0..o.clients {
        let sock = d.sock.clone();
        let (sessions, max_calls, dur) = (o.sessions, o.max_calls_per_client, o.duration);
        let start = start.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .stack_size(256 << 10)
                .spawn(move || {
                    start.wait();
                    client_loop(&sock, i, sessions, Instant::now() + dur, max_calls)
                })?,
        );
    }
    start.wait();
    let t0 = Instant::now();
    let mut lat: Vec<Vec<f64>> = vec![Vec::new(); TOOLS.len()];
    let mut report = LoadReport {
        clients: o.clients,
        sessions: o.sessions,
        ..LoadReport::default()
    };
    for h in handles {
        let (samples, errors) = h
            .join()
            .unwrap_or_else(|_| (Vec::new(), vec!["a client thread panicked".into()]));
        for s in samples {
            lat[s.tool].push(s.ms);
        }
        report.errors += errors.len();
        for e in errors {
            if report.error_samples.len() < 5 {
                report.error_samples.push(e);
            }
        }
    }
    report.elapsed = t0.elapsed();
    report.peak_rss_bytes = proc_field(pid, "VmHWM:") * 1024;
    report.daemon_threads = proc_field(pid, "Threads:");
    for (i, tool) in TOOLS.iter().enumerate() {
        let v = &mut lat[i];
        v.sort_by(|a, b| a.total_cmp(b));
        report.per_tool.insert(
            tool,
            ToolStats {
                calls: v.len(),
                p50_ms: pct(v, 0.5),
                p99_ms: pct(v, 0.99),
                max_ms: v.last().copied().unwrap_or(0.0),
            },
        );
    }
    drop(d);
    Ok(report)
}
