//! MCP Tasks through the official Python MCP SDK 2.x and its typed models
//! (`tests/tasks_sdk_checks.py`), via the `shoal mcp` shim with autostart.
//! The venv comes from `make venv`; a missing venv fails with a clear message.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

const CHECKS: &[&str] = &[
    "tasks_capability",
    "task_support_optional",
    "create_task_result",
    "tasks_get_polled",
    "tasks_result",
    "tasks_cancel",
    "status_notifications",
    "tasks_list",
    "cancelled_stays",
    "background_tool",
    "shoal_cancel",
    "timeout_tool",
    "task_resource",
    "task_out_resource",
    "jobs_resource",
];

#[test]
fn mcp_tasks_python_sdk_2x() {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        py.exists(),
        "no Python venv with the MCP SDK at {}: run `make venv` (or `make test`, which creates it)",
        py.display()
    );
    let root = Root::new();
    let sock = root.socket();
    let script = format!("{}/tests/tasks_sdk_checks.py", env!("CARGO_MANIFEST_DIR"));
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
