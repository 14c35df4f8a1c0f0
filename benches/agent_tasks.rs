//! `make bench` (agent tasks): the tasks of `tests/agent_tasks.py` through the
//! official Python MCP SDK and the `shoal mcp` shim against this build, with
//! the text bytes the model reads and the tool calls each takes, beside the
//! suite's figures before the text the model sees was reworked (3b51fdb, the same
//! script: 137,433 bytes, 39 calls; the target is at least 30% fewer bytes).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_shoal");
const BASELINE_BYTES: u64 = 137_433;

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = manifest.join(".venv/bin/python");
    if !py.exists() {
        println!("agent tasks: skipped, no .venv (run `make venv`)");
        return;
    }
    let root = tempfile::Builder::new()
        .prefix("sha")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let dir = root.path();
    let sock = dir.join("s.sock");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let env = |c: &mut Command| {
        c.env("XDG_RUNTIME_DIR", dir)
            .env("XDG_STATE_HOME", dir.join("state"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env_remove("SHOAL_SOCKET")
            .env_remove("SHOAL_TOKEN");
    };
    let mut cmd = Command::new(BIN);
    env(&mut cmd);
    let mut daemon = cmd
        .args(["daemon", "--socket"])
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon");
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut cmd = Command::new(&py);
    env(&mut cmd);
    let out = cmd
        .arg(manifest.join("tests/agent_tasks.py"))
        .arg(BIN)
        .arg(&sock)
        .arg(&work)
        .stdin(Stdio::null())
        .output()
        .expect("run the agent tasks");
    let _ = daemon.kill();
    let _ = daemon.wait();
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
