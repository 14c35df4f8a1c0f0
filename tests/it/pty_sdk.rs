//! The PTY tools through the official Python MCP SDK (2.x and 1.x) and the
//! `shoal mcp` shim with autostart (`tests/pty_sdk_checks.py`). The venvs
//! come from `make venv`; without one the test is skipped, with its reason.

use crate::common::*;

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
    run_sdk_checks(venv, "pty_sdk_checks.py", CHECKS);
}

#[test]
fn pty_tools_python_sdk_2x() {
    if !have_venv("pty_sdk::pty_tools_python_sdk_2x", ".venv") {
        return;
    }
    check(".venv");
}

#[test]
fn pty_tools_python_sdk_1x() {
    if !have_venv("pty_sdk::pty_tools_python_sdk_1x", "target/venv-mcp1") {
        return;
    }
    check("target/venv-mcp1");
}
