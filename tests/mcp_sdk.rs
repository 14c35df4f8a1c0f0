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
    let stdout = run_script(py, "mcp_client.py");
    assert!(
        stdout.contains("\"check\": \"classic\", \"ok\": true"),
        "{stdout}"
    );
}

/// Run `tests/<script> SHOAL_BIN SOCKET WORKDIR` in a fresh root; its stdout.
fn run_script(py: &PathBuf, script: &str) -> String {
    let root = Root::new();
    let sock = root.socket();
    let script = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
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
        .arg(&script)
        .arg(BIN)
        .arg(&sock)
        .arg(root.path())
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
    stdout.into_owned()
}

/// Every advertised tool with valid and invalid arguments, output schemas
/// (the SDK validates), resources, a subscription and unsubscribe, progress,
/// and a cancelled call whose process is gone.
fn surface(py: &PathBuf) {
    let stdout = run_script(py, "mcp_sdk_checks.py");
    for check in [
        "exec_valid",
        "exec_invalid",
        "get_valid",
        "get_invalid",
        "exec_elided",
        "resource_read_out",
        "subscription_update",
        "unsubscribed_stops",
        "progress_notified",
        "cancel_stops_work",
    ] {
        assert!(
            stdout.contains(&format!("\"check\": \"{check}\", \"ok\": true")),
            "{check}:\n{stdout}"
        );
    }
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

#[test]
fn python_sdk_2x_full_surface() {
    surface(&require(".venv"));
}

#[test]
fn python_sdk_1x_full_surface() {
    surface(&require("target/venv-mcp1"));
}
