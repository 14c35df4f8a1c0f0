//! `make bench` (adapters part), through the public library API:
//!
//! - adapter lookup + argument building per command (target ≤ 20 µs);
//! - parser throughput for `lines`, `cols` and `json` (target ≥ 50 MB/s);
//! - `git status` on a repository of 10,000 files: the time beyond git's
//!   own (target ≤ 10 ms), the p50 over runs of each exec's wall time minus
//!   its git process's duration; beside it the same for `^git` with the
//!   same pinned arguments (the session's share) and the parse alone.

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_lang::adapters::{self, parse, Catalog};
use shoal_lang::{Position, Session, SessionOptions};
use shoal_value::Value;

#[path = "workloads/cpu.rs"]
mod cpu;
use cpu::thread_cpu;

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "OVER TARGET"
    }
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn lookup_and_build(c: &Catalog) {
    let cmds: Vec<(&str, Vec<String>)> = [
        ("git", "status -b"),
        ("git", "log --limit=20 -5"),
        ("git", "stash list"),
        ("docker", "ps -a"),
        ("kubectl", "get pods -n default"),
        ("tar", "-czf out.tgz src docs"),
        ("ps", "-e"),
    ]
    .iter()
    .map(|(h, a)| (*h, a.split_whitespace().map(str::to_string).collect()))
    .collect();
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        for (h, a) in &cmds {
            let (ad, f) = c.resolve(h, a).expect("adapted");
            std::hint::black_box(adapters::build(ad, f, a).expect("builds"));
        }
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / (n * cmds.len()) as f64;
    println!(
        "{:<44} {per:>8.2} µs per command      (target <= 20 µs: {})",
        "adapter lookup + argument building",
        verdict(per <= 20.0)
    );
}

fn throughput(name: &str, spec: &parse::OutputSpec, bytes: &[u8]) {
    throughput_with(name, spec, bytes, true)
}

/// `fast: false` is the JSON path through a `serde_json` tree (the path
/// before the direct visitor, kept for failures): a before/after figure.
fn throughput_with(name: &str, spec: &parse::OutputSpec, bytes: &[u8], fast: bool) {
    let (mut samples, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        let (t, c) = (Instant::now(), thread_cpu());
        let v = parse::parse_with(spec, bytes, fast).expect("parses");
        samples.push(t.elapsed());
        cpu.push(thread_cpu().saturating_sub(c));
        drop(v);
    }
    let mb = bytes.len() as f64 / 1e6;
    let mbs = mb / p50(samples).as_secs_f64();
    let cpu_mbs = mb / p50(cpu).as_secs_f64();
    println!(
        "{:<44} {mbs:>8.1} MB/s ({} MB; {cpu_mbs:.1} MB/s of CPU time)   (target >= 50 MB/s: {})",
        name,
        bytes.len() / 1_000_000,
        verdict(mbs >= 50.0)
    );
}

fn spec(c: &Catalog, head: &str, words: &str) -> parse::OutputSpec {
    let w: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    let (_, f) = c.resolve(head, &w).expect("adapted");
    f.output.clone().expect("typed")
}

fn parsers(c: &Catalog) {
    let mut lines = Vec::new();
    let mut i = 0;
    while lines.len() < 20_000_000 {
        lines.extend_from_slice(
            format!("src/module_{i}/file_{i}.rs: some text on this line\n").as_bytes(),
        );
        i += 1;
    }
    throughput(
        "parse lines (git branch)",
        &spec(c, "git", "branch"),
        &lines,
    );
    let mut patch = Vec::new();
    let mut i = 0;
    while patch.len() < 20_000_000 {
        patch.extend_from_slice(
            format!(
                "diff --git a/src/m{i}.rs b/src/m{i}.rs\nindex 1..2 100644\n--- a/src/m{i}.rs\n+++ b/src/m{i}.rs\n\
                 @@ -1,4 +1,4 @@\n context line\n-old text on this line\n+new text on this line\n context\n context\n"
            )
            .as_bytes(),
        );
        i += 1;
    }
    throughput("parse patch (git diff)", &spec(c, "git", "diff"), &patch);
    let mut cols = b"PID PPID USER CPU MEM COMMAND\n".to_vec();
    let mut i = 0;
    while cols.len() < 20_000_000 {
        cols.extend_from_slice(
            format!(
                "{:>7} {:>7} user{} {}.{} 0.{} some-command-{i}\n",
                i,
                i / 2,
                i % 7,
                i % 100,
                i % 10,
                i % 10
            )
            .as_bytes(),
        );
        i += 1;
    }
    throughput("parse cols (ps)", &spec(c, "ps", ""), &cols);
    let mut json = b"[".to_vec();
    let mut i = 0;
    while json.len() < 20_000_000 {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(
            format!(r#"{{"name":"package-{i}","version":"1.{i}.0"}}"#).as_bytes(),
        );
        i += 1;
    }
    json.push(b']');
    throughput(
        "parse json table<{name, version}> (pip list)",
        &spec(c, "pip", "list"),
        &json,
    );
    throughput("parse json value (jq)", &spec(c, "jq", "."), &json);
    throughput_with(
        "  the same through a serde_json tree",
        &spec(c, "jq", "."),
        &json,
        false,
    );
    throughput_with(
        "  pip list through a serde_json tree",
        &spec(c, "pip", "list"),
        &json,
        false,
    );
}

fn git_status_10k() {
    let d = tempfile::Builder::new()
        .prefix("shab")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let script = "git init -q -b main && git config user.email b@example.com && git config user.name B \
        && mkdir -p a && for i in $(seq 1 5000); do echo $i > a/f$i.txt; done && git add a && git commit -q -m base \
        && for i in $(seq 1 2500); do echo x >> a/f$i.txt; done && for i in $(seq 1 5000); do echo $i > a/u$i.txt; done";
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(d.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("sh");
    assert!(st.success());
    let mut s = Session::new(SessionOptions {
        cwd: d.path().to_path_buf(),
        adapters: Some(Arc::new(Catalog::builtin())),
        ..Default::default()
    });
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain=v2"])
        .current_dir(d.path())
        .output()
        .expect("git");
    // Untracked files sit beside tracked ones, so git lists each of them
    // (an untracked directory would be one entry).
    let entries = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty() && l[0] != b'#')
        .count();
    assert_eq!(entries, 7_500, "2,500 modified and 5,000 untracked files");
    // One exec: its wall time and its git process's own time (the outcome's
    // duration: spawn to reap, output captured). What is left is everything
    // beyond git: the session, adapter lookup and argv, reading the output,
    // parsing and typing it. The value is dropped after the clock stops
    // (freeing it is not parsing) and checked to be what it claims.
    let run = |s: &mut Session, src: &str, typed: bool| -> Duration {
        let t = Instant::now();
        let v = s.exec(src, Position::Value).expect("runs");
        let wall = t.elapsed();
        let Value::Outcome(o) = &v else {
            panic!("`{src}` gives an outcome");
        };
        let rows = match &o.out {
            Some(Value::Table(rows)) => Some(rows.len()),
            _ => None,
        };
        assert_eq!(rows, typed.then_some(entries), "`{src}`: typed rows");
        let git = Duration::from_nanos(u64::try_from(o.dur_ns).expect("a duration"));
        drop(v);
        wall.saturating_sub(git)
    };
    let raw_src = "^git status --porcelain=v2";
    run(&mut s, raw_src, false);
    run(&mut s, "git status", true);
    let (mut raw, mut adapted) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        raw.push(run(&mut s, raw_src, false));
        adapted.push(run(&mut s, "git status", true));
    }
    let (r, a) = (
        p50(raw).as_secs_f64() * 1e3,
        p50(adapted).as_secs_f64() * 1e3,
    );
    let c = Catalog::builtin();
    let spec = spec(&c, "git", "status");
    let mut parse_only = Vec::new();
    for _ in 0..15 {
        let t = Instant::now();
        let v = parse::parse(&spec, &out.stdout).expect("parses");
        parse_only.push(t.elapsed());
        drop(v);
    }
    let p = p50(parse_only).as_secs_f64() * 1e3;
    println!(
        "{:<44} {a:>8.2} ms beyond git (`^git` {r:.2} ms beyond git; parse alone {p:.2} ms of {} KB)  (target <= 10 ms: {})",
        "git status, 10,000 files (7,500 entries)",
        out.stdout.len() / 1000,
        verdict(a <= 10.0)
    );
}

fn main() {
    println!("adapter benchmarks");
    let c = Catalog::builtin();
    lookup_and_build(&c);
    parsers(&c);
    git_status_10k();
}
