//! The official Python MCP SDK talks to `shoal mcp` (autostarting the daemon
//! on a private socket). The venvs come from `make venv` (`.venv` with mcp
//! 2.x, `target/venv-mcp1` with mcp 1.x). Without one the test is
//! skipped, its reason printed and counted (a failure under SHOAL_REQUIRE_ALL).

use crate::common::*;

fn drive(venv: &str) {
    assert_checks(&run_sdk_script(venv, "mcp_client.py", &[]), &["classic"]);
}

/// Every advertised tool with valid and invalid arguments, output schemas
/// (the SDK validates), resources, a subscription and unsubscribe, progress,
/// and a cancelled call whose process is gone.
fn surface(venv: &str) {
    run_sdk_checks(
        venv,
        "mcp_sdk_checks.py",
        &[
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
        ],
    );
}

#[test]
fn python_sdk_2x_through_the_shim() {
    if !have_venv("mcp_sdk::python_sdk_2x_through_the_shim", ".venv") {
        return;
    }
    drive(".venv");
}

#[test]
fn python_sdk_1x_through_the_shim() {
    if !have_venv(
        "mcp_sdk::python_sdk_1x_through_the_shim",
        "target/venv-mcp1",
    ) {
        return;
    }
    drive("target/venv-mcp1");
}

#[test]
fn python_sdk_2x_full_surface() {
    if !have_venv("mcp_sdk::python_sdk_2x_full_surface", ".venv") {
        return;
    }
    surface(".venv");
}

#[test]
fn python_sdk_1x_full_surface() {
    if !have_venv("mcp_sdk::python_sdk_1x_full_surface", "target/venv-mcp1") {
        return;
    }
    surface("target/venv-mcp1");
}
