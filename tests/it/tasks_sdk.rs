//! MCP Tasks through the official Python MCP SDK 2.x and its typed models
//! (`tests/tasks_sdk_checks.py`), via the `shoal mcp` shim with autostart.
//! The venv comes from `make venv`; without it the test is skipped, with its reason.

use crate::common::*;

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
    if !have_venv("tasks_sdk::mcp_tasks_python_sdk_2x", ".venv") {
        return;
    }
    run_sdk_checks(".venv", "tasks_sdk_checks.py", CHECKS);
}
