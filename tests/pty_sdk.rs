//! The PTY tools through the official Python MCP SDK (2.x and 1.x) and the
//! `shoal mcp` shim with autostart (`tests/pty_sdk_checks.py`). The venvs
//! come from `make venv`; a missing venv fails with a clear message.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

const CHECKS: &[&str] = &[
    "pty_tools_listed",
    "open_valid",
    "open_failed",
    "open_invalid",
    "send_valid",
    "send_invalid",
    "read_valid",
    "read_unknown",
    "resize_valid",
    "resize_invalid",
    "list_valid",
    "close_valid",
    "close_twice",
    "repl_prompt",
    "repl_42",
    "repl_exit",
    "pty_resources_listed",
    "pty_resource_read",
    "pty_list_resource",
    "pty_subscription_update",
    "pty_unsubscribed_stops",
];

fn check(venv: &str) {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(venv)
        .join("bin/python");
    assert!(
        py.exists(),
        "no Python venv with the MCP SDK at {}: run `make venv` (or `make test`, which creates it)",
        py.display()
    );
    let root = Root::new();
    let sock = root.socket();
    let script = format!("{}/tests/pty_sdk_checks.py", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(&py);
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
    for c in CHECKS {
        assert!(
            stdout.contains(&format!("\"check\": \"{c}\", \"ok\": true")),
            "{c}:\n{stdout}"
        );
    }
}

#[test]
fn pty_tools_python_sdk_2x() {
    check(".venv");
}

#[test]
fn pty_tools_python_sdk_1x() {
    check("target/venv-mcp1");
}
