//! The official Python MCP SDK talks to `shoal mcp` (autostarting the daemon
//! on a private socket). The venvs come from `make venv` (`.venv` with mcp
//! 2.x, `target/venv-mcp1` with mcp 1.x). A missing venv fails the test with
//! a clear message: nothing is skipped silently.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn python(venv: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(venv)
        .join("bin/python")
}

fn drive(py: &PathBuf) {
    let root = Root::new();
    let sock = root.socket();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");
    let mut cmd = Command::new(py);
    let envs: Vec<_> = root
        .command()
        .get_envs()
        .map(|(k, v)| (k.to_os_string(), v.map(|v| v.to_os_string())))
        .collect();
    for (k, v) in envs {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .arg(script)
        .arg(BIN)
        .arg(&sock)
        .output()
        .expect("run python");
    for p in daemons_on(&sock) {
        kill_pid(p);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python MCP client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("\"check\": \"classic\", \"ok\": true"),
        "{stdout}"
    );
}

fn require(venv: &str) -> PathBuf {
    let py = python(venv);
    assert!(
        py.exists(),
        "no Python venv with the MCP SDK at {}: run `make venv` (or `make test`, which creates it)",
        py.display()
    );
    py
}

#[test]
fn python_sdk_2x_through_the_shim() {
    drive(&require(".venv"));
}

#[test]
fn python_sdk_1x_through_the_shim() {
    drive(&require("target/venv-mcp1"));
}
