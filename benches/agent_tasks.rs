//! `make bench` (agent tasks): the tasks of `tests/agent_tasks.py` through the
//! official Python MCP SDK and the `shoal mcp` shim against this build, with
//! the text bytes the model reads and the tool calls each takes, beside the
//! suite's figures before the text the model sees was reworked (3b51fdb, the same
//! script: 137,433 bytes, 39 calls; the target is at least 30% fewer bytes).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::path::PathBuf;
use std::process::Stdio;

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::{BenchDaemon, BIN};

const BASELINE_BYTES: u64 = 137_433;

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = manifest.join(".venv/bin/python");
    if !py.exists() {
        println!("agent tasks: skipped, no .venv (run `make venv`)");
        return;
    }
    let daemon = BenchDaemon::start("sha");
    let sock = daemon.sock();
    let work = daemon.dir().path().join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let out = daemon
        .dir()
        .cmd_bin(&py)
        .arg(manifest.join("tests/agent_tasks.py"))
        .arg(BIN)
        .arg(&sock)
        .arg(&work)
        .stdin(Stdio::null())
        .output()
        .expect("run the agent tasks");
    drop(daemon);
    println!("agent tasks (Python SDK over shoal mcp; text bytes the model reads, tool calls):");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(name) = v["check"].as_str() {
            println!(
                "  {name:<32} {:>7} B {:>3} calls {}",
                v["bytes"],
                v["calls"],
                if v["ok"] == true { "ok" } else { "FAILED" }
            );
        } else if v.get("total").is_some() {
            let bytes = v["bytes"].as_u64().unwrap_or(0);
            let fell = 100.0 * (1.0 - bytes as f64 / BASELINE_BYTES as f64);
            println!(
                "  total: {}/{} tasks answered, {bytes} B ({fell:.0}% fewer than the {BASELINE_BYTES} B before; target ≥ 30%) {}, {} calls",
                v["passed"],
                v["total"],
                if fell >= 30.0 { "MET" } else { "MISSED" },
                v["calls"]
            );
        }
    }
}
