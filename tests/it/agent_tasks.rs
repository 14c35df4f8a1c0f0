//! Agent tasks through the official Python MCP SDK (2.x) and the `shoal mcp`
//! shim (`tests/agent_tasks.py`): orient in a repository, search, read and
//! page, edit and verify with `git diff`, run a background job, drive a REPL
//! and an editor on a PTY, and the usual mistakes, each judged by the text
//! the model sees. `make bench` reports the bytes and calls of each.

use crate::common::*;

const TASKS: &[&str] = &[
    "orient_ls",
    "orient_status_clean",
    "orient_log_oneline",
    "orient_log_typed",
    "search_grep",
    "read_file",
    "read_head_tail_agree",
    "read_big_file_paged",
    "big_output_max_bytes",
    "get_default_render",
    "edit_and_diff",
    "diff_stat_raw",
    "log_patch",
    "write_file",
    "brace_in_string_hint",
    "fail_make",
    "fail_checkout",
    "fail_grep_no_match",
    "fail_script_exit",
    "success_stderr",
    "background_job",
    "rm_trash_path",
    "plan_permanent_is_irreversible",
    "unknown_method_hint",
    "bare_number_ref_hint",
    "pipe_hint",
    "pty_python_repl",
    "pty_vim_edit",
];

#[test]
fn agent_tasks_read_what_they_need() {
    if !have_venv("agent_tasks::agent_tasks_read_what_they_need", ".venv") {
        return;
    }
    let out = run_sdk_script(".venv", "agent_tasks.py", &[]);
    assert_checks(&out, TASKS);
}
