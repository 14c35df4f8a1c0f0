//! `make bench-compare`: what a user waits for and the memory they pay for,
//! of two shoal binaries side by side in one run: "before" is
//! SHOAL_BENCH_BASE (the Makefile builds it from another revision), "after"
//! SHOAL_BENCH_BIN or this build. Without SHOAL_BENCH_BASE the build is
//! compared with itself (the run's noise floor).
//!
//! Latency rows, p50 of round trips, both daemons running, in alternating
//! rounds (SHOAL_BENCH_ROUNDS, default 20; the subject that goes first
//! alternates per row and round, so both see the same machine):
//!
//! - a trivial kernel `exec` (`1 + 1`); its limit is +0.05 ms and 0.15 ms;
//! - the spawn of an external command (kernel `exec` of `^true`);
//! - `ls` and `git status` (a 300-file repository with changes) through MCP
//!   via the `shoal mcp` shim, as an agent runs them;
//! - a 50 MB capture (kernel `exec` of `(sh { head -c … /dev/zero }).stdout.len()`);
//! - a journal query (kernel `journal.query`, the latest 100 entries);
//! - a PTY read (kernel `pty.read` of an idle `cat`).
//!
//! Then the memory figures of `benches/memory.rs` for each binary, one daemon
//! at a time, the median of SHOAL_BENCH_MEM_RUNS (default 5) runs. Both
//! binaries run from fresh copies. A row over +10% (or over the exec's
//! limit) is marked. SHOAL_BENCH_MEM=0 leaves the memory out.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

#[path = "workloads/daemon.rs"]
mod daemon;
#[path = "workloads/memory.rs"]
mod memory;
use daemon::{BenchDaemon, BenchDir, Line};

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Where a row's request goes.
#[derive(Clone, Copy)]
enum Via {
    Kernel,
    Shim,
}

/// How much slower "after" may be before its row is marked.
#[derive(Clone, Copy)]
enum Limit {
    /// At most +10%.
    Ratio,
    /// At most +0.05 ms and under 0.15 ms (the trivial exec's budget).
    TrivialExec,
}

struct Row {
    name: &'static str,
    via: Via,
    method: &'static str,
    params: Value,
    /// Round trips per subject per round.
    per_round: usize,
    limit: Limit,
}

fn tool(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

fn rows() -> Vec<Row> {
    let capture = format!("(sh {{ head -c {} /dev/zero }}).stdout.len()", 50_000_000);
    vec![
        Row {
            name: "trivial exec `1 + 1` (kernel)",
            via: Via::Kernel,
            method: "exec",
            params: json!({"src": "1 + 1"}),
            per_round: 200,
            limit: Limit::TrivialExec,
        },
        Row {
            name: "spawn `^true` (kernel exec)",
            via: Via::Kernel,
            method: "exec",
            params: json!({"src": "^true"}),
            per_round: 20,
            limit: Limit::Ratio,
        },
        Row {
            name: "`ls` (MCP via shoal mcp)",
            via: Via::Shim,
            method: "tools/call",
            params: tool("shoal_exec", json!({"src": "ls"})),
            per_round: 20,
            limit: Limit::Ratio,
        },
        Row {
            name: "`git status` (MCP via shoal mcp)",
            via: Via::Shim,
            method: "tools/call",
            params: tool("shoal_exec", json!({"src": "git status"})),
            per_round: 10,
            limit: Limit::Ratio,
        },
        Row {
            name: "50 MB capture (kernel exec)",
            via: Via::Kernel,
            method: "exec",
            params: json!({"src": capture}),
            per_round: 2,
            limit: Limit::Ratio,
        },
        Row {
            name: "journal.query, latest 100 (kernel)",
            via: Via::Kernel,
            method: "journal.query",
            params: json!({"limit": 100}),
            per_round: 50,
            limit: Limit::Ratio,
        },
        Row {
            name: "pty.read of an idle `cat` (kernel)",
            via: Via::Kernel,
            method: "pty.read",
            // The PTY's id is filled in per subject.
            params: json!({}),
            per_round: 100,
            limit: Limit::Ratio,
        },
    ]
}

/// `shoal mcp` of one binary, initialized, on a session of its own.
struct Shim {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    id: u64,
}

impl Shim {
    fn start(d: &BenchDaemon, cwd: &Path) -> Shim {
        let mut child = d
            .cmd()
            .args(["mcp", "--session", "cmp-mcp", "--socket"])
            .arg(d.sock())
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shoal mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("shim stdout"));
        let mut s = Shim {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let init = s.call(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench-compare", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "initialize: {init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: &Value) {
        let mut b = serde_json::to_vec(v).expect("a frame");
        b.push(b'\n');
        if let Some(w) = self.stdin.as_mut() {
            w.write_all(&b).expect("write to shoal mcp");
        }
    }

    /// One request and its reply (notifications before it are skipped).
    fn call(&mut self, method: &str, params: &Value) -> Value {
        self.id += 1;
        self.send(&rpc(self.id, method, params.clone()));
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read shoal mcp");
            assert!(n > 0, "shoal mcp closed its stdout");
            let v: Value = serde_json::from_str(&line).expect("a JSON frame");
            if v["id"] == json!(self.id) {
                return v;
            }
        }
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// One binary's daemon, its clients and its samples.
struct Subject {
    label: &'static str,
    bin: PathBuf,
    // Dropped in this order: the clients, then the daemon.
    shim: Shim,
    kernel: Line,
    pty: Value,
    /// Held for its drop (stopped and reaped).
    _daemon: BenchDaemon,
    samples: Vec<Vec<f64>>,
}

impl Subject {
    fn start(label: &'static str, bin: PathBuf, repo: &Path, rows: &[Row]) -> Subject {
        let daemon = BenchDir::new("shc").daemon().bin(&bin).start();
        let mut kernel = Line::open(&daemon.sock());
        let r = kernel.call(&rpc(
            0,
            "session.attach",
            json!({"session": "cmp", "cwd": repo}),
        ));
        assert!(r.get("error").is_none(), "{label}: session.attach: {r}");
        let r = kernel.call(&rpc(1, "pty.open", json!({"cmd": "cat"})));
        let pty = r["result"]["pty_id"].clone();
        assert!(pty.is_string(), "{label}: pty.open: {r}");
        let shim = Shim::start(&daemon, repo);
        let mut s = Subject {
            label,
            bin,
            shim,
            kernel,
            pty,
            _daemon: daemon,
            samples: vec![Vec::new(); rows.len()],
        };
        // Every row answers, and warms up.
        for row in rows {
            for _ in 0..3 {
                let r = s.one(row);
                let bad = r.get("error").is_some() || r["result"]["isError"] == json!(true);
                assert!(!bad, "{label}: {}: {r}", row.name);
            }
        }
        s
    }

    fn one(&mut self, row: &Row) -> Value {
        let mut params = row.params.clone();
        if row.method == "pty.read" {
            params["pty_id"] = self.pty.clone();
        }
        match row.via {
            Via::Kernel => self.kernel.call(&rpc(1, row.method, params)),
            Via::Shim => self.shim.call(row.method, &params),
        }
    }

    fn batch(&mut self, i: usize, row: &Row) {
        for _ in 0..row.per_round {
            let t = Instant::now();
            std::hint::black_box(self.one(row));
            self.samples[i].push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
}

fn p50(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A git repository of 300 files in 10 directories, committed, then 5
/// changed and 5 new: what `git status` reads. `None` without git.
fn git_repo(dir: &Path) -> Option<()> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !git(&["init", "-q"]) {
        return None;
    }
    for d in 0..10 {
        let sub = dir.join(format!("dir{d}"));
        std::fs::create_dir_all(&sub).ok()?;
        for f in 0..30 {
            std::fs::write(sub.join(format!("file{f}.txt")), format!("{d} {f}\n")).ok()?;
        }
    }
    if !(git(&["add", "-A"]) && git(&["commit", "-q", "-m", "init"])) {
        return None;
    }
    for f in 0..5 {
        std::fs::write(dir.join(format!("dir0/file{f}.txt")), "changed\n").ok()?;
        std::fs::write(dir.join(format!("new{f}.txt")), "new\n").ok()?;
    }
    Some(())
}

/// The mark of a row: empty, or why it is over its limit.
fn verdict(limit: Limit, before: f64, after: f64) -> String {
    match limit {
        Limit::Ratio if before > 0.0 && after > before * 1.10 => "  <- over +10%".into(),
        Limit::TrivialExec if after - before > 0.05 => "  <- over +0.05 ms".into(),
        Limit::TrivialExec if after > 0.15 => "  <- over 0.15 ms".into(),
        _ => String::new(),
    }
}

fn ratio(before: f64, after: f64) -> String {
    if before > 0.0 {
        format!("{:.2}", after / before)
    } else {
        "n/a".into()
    }
}

/// Per row, the median of each field over the runs.
fn median_rows(runs: Vec<Vec<memory::Row>>) -> Vec<memory::Row> {
    let first = runs[0].clone();
    first
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let field = |f: fn(&memory::Kb) -> f64| {
                p50(&runs.iter().map(|r| f(&r[i].kb)).collect::<Vec<_>>())
            };
            memory::Row {
                kb: memory::Kb {
                    uss: field(|k| k.uss),
                    anon: field(|k| k.anon),
                    pss: field(|k| k.pss),
                },
                ..row
            }
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
    let after_bin = daemon::bin();
    let before_bin = match std::env::var_os("SHOAL_BENCH_BASE").filter(|p| !p.is_empty()) {
        Some(p) => std::fs::canonicalize(&p).unwrap_or_else(|_| PathBuf::from(p)),
        None => {
            println!("note: no SHOAL_BENCH_BASE: comparing this build with itself (noise floor)");
            after_bin.clone()
        }
    };
    for b in [&before_bin, &after_bin] {
        assert!(b.is_file(), "{} is not a file", b.display());
    }
    let base_rev = std::env::var("SHOAL_BENCH_BASE_REV").unwrap_or_default();
    println!("before: {} {base_rev}", before_bin.display());
    println!("after:  {}", after_bin.display());
    // Both run from fresh copies written alike: how a binary's file was
    // written (linker, cp) and what else maps it decide how its code pages
    // sit in the page cache, and so the daemon's resident code.
    let copies = tempfile::Builder::new()
        .prefix("shc-bin")
        .tempdir_in("/tmp")
        .expect("a dir for the binaries");
    let copy = |b: &Path, name: &str| {
        let to = copies.path().join(name);
        std::fs::copy(b, &to).expect("copy a shoal binary");
        to
    };
    let (before_bin, after_bin) = (copy(&before_bin, "before"), copy(&after_bin, "after"));

    let repo = tempfile::Builder::new()
        .prefix("shc-repo")
        .tempdir_in("/tmp")
        .expect("repo dir");
    let mut rows = rows();
    if git_repo(repo.path()).is_none() {
        println!("note: no git: the `git status` row is left out");
        rows.retain(|r| !r.name.contains("git status"));
    }
    let rounds = env_n("SHOAL_BENCH_ROUNDS", 20);
    println!("machine load before: {}", loadavg());
    let mut subjects = [
        Subject::start("before", before_bin, repo.path(), &rows),
        Subject::start("after", after_bin, repo.path(), &rows),
    ];
    for round in 0..rounds {
        for (i, row) in rows.iter().enumerate() {
            let first = (round + i) % 2;
            subjects[first].batch(i, row);
            subjects[1 - first].batch(i, row);
        }
    }
    println!(
        "\n{:<40} {:>12} {:>12} {:>7}   ({rounds} alternating rounds)",
        "p50", "before", "after", "ratio"
    );
    for (i, row) in rows.iter().enumerate() {
        let (b, a) = (p50(&subjects[0].samples[i]), p50(&subjects[1].samples[i]));
        println!(
            "{:<40} {:>9.3} ms {:>9.3} ms {:>7}{}",
            row.name,
            b,
            a,
            ratio(b, a),
            verdict(row.limit, b, a)
        );
    }
    let bins: Vec<PathBuf> = subjects.iter().map(|s| s.bin.clone()).collect();
    let labels: Vec<&str> = subjects.iter().map(|s| s.label).collect();
    drop(subjects);

    if std::env::var("SHOAL_BENCH_MEM").is_ok_and(|v| v == "0") {
        return;
    }
    // Heap growth is lumpy (malloc grows its heaps in steps): the median of
    // SHOAL_BENCH_MEM_RUNS (default 5) runs per binary, alternating.
    let runs = env_n("SHOAL_BENCH_MEM_RUNS", 5).max(1);
    for b in &bins {
        let others = memory::others_running(b);
        if others > 0 {
            println!(
                "note: {others} other processes run {}: they share its code pages",
                b.display()
            );
        }
    }
    let mut all: [Vec<Vec<memory::Row>>; 2] = [Vec::new(), Vec::new()];
    for run in 0..runs {
        for k in [run % 2, 1 - run % 2] {
            all[k].push(memory::rows(&memory::measure(&bins[k])));
        }
    }
    let [before, after] = all.map(median_rows);
    println!(
        "\n{:<40} {:>12} {:>12} {:>7}   (anonymous, then USS and Pss; one daemon at a time; \
         median of {runs} runs)",
        "memory", labels[0], labels[1], "ratio"
    );
    for (b, a) in before.into_iter().zip(after) {
        let over_target = match a.target {
            Some(t) if a.kb.anon > t as f64 => format!("  <- over the {t} kB target"),
            _ => String::new(),
        };
        let lines = [
            (a.name, b.kb.anon, a.kb.anon, over_target),
            ("  USS".into(), b.kb.uss, a.kb.uss, String::new()),
            ("  Pss".into(), b.kb.pss, a.kb.pss, String::new()),
        ];
        for (name, bv, av, note) in lines {
            let mark = if a.steady {
                verdict(Limit::Ratio, bv, av)
            } else {
                String::new()
            };
            println!(
                "{name:<40} {bv:>9.0} kB {av:>9.0} kB {:>7}{mark}{note}",
                ratio(bv, av)
            );
        }
    }
    println!(
        "(the growth after the caches are full moves with malloc's heap steps by several MB \
         between runs: not marked)"
    );
    println!("machine load after: {}", loadavg());
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages (the machine may be shared).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
