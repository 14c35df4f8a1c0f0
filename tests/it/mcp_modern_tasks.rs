//! The MCP Tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`,
//! docs/protocol.md §12) against the real daemon, in raw frames: server-directed
//! task creation for a long `shoal_exec`, `tasks/get` polling to the result,
//! `tasks/cancel` (the process checked gone in /proc), `tasks/update`, and
//! `notifications/tasks/status` on a `subscriptions/listen` stream.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";
const SUB: &str = "io.modelcontextprotocol/subscriptionId";

/// `params` with the modern envelope naming `session`; `tasks` declares the
/// extension in the request's client capabilities.
fn env(mut params: Value, session: &str, tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {EXT: {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "shoal/session": session,
    });
    params
}

fn exec(c: &mut Conn, session: &str, src: &str, tasks: bool) -> Value {
    c.ok(
        "tools/call",
        env(
            json!({"name": "shoal_exec", "arguments": {"src": src}}),
            session,
            tasks,
        ),
    )
}

fn get(c: &mut Conn, session: &str, task: &str) -> Value {
    c.ok("tasks/get", env(json!({"taskId": task}), session, true))
}

/// `/proc/<pid>/stat` state letter, `None` once the process is gone.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.trim_start().chars().next()
}

fn gone(pid: u32) -> bool {
    matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

/// The next `notifications/tasks/status` on a listen stream.
fn next_status(c: &mut Conn) -> Value {
    loop {
        let f = c.recv();
        if f["method"] == "notifications/tasks/status" {
            return f["params"].clone();
        }
    }
}

#[test]
fn a_long_exec_returns_a_task_polled_to_its_result() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let r = c.ok("server/discover", env(json!({}), "mt", false));
    assert!(
        r["capabilities"]["extensions"][EXT].is_object(),
        "the tasks extension is advertised: {r}"
    );

    // Quick work answers inline even when the client could take a task.
    let r = exec(&mut c, "mt", "6 * 7", true);
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(
        r["structuredContent"]["value"],
        json!({"$": "int", "v": 42})
    );

    // Work that binds names runs in the session itself (a task would run on a
    // fork and lose them), even when the client could take a task.
    let r = exec(&mut c, "mt", "var keep = 5", true);
    assert_eq!(r["resultType"], "complete", "{r}");
    let r = exec(&mut c, "mt", "keep + 1", true);
    assert_eq!(
        r["structuredContent"]["value"],
        json!({"$": "int", "v": 6}),
        "{r}"
    );

    // Long work: a task handle, the work going on.
    let h = exec(&mut c, "mt", "sh { sleep 2; echo done }", true);
    assert_eq!(h["resultType"], "task", "{h}");
    assert_eq!(h["status"], "working", "{h}");
    assert!(h.get("result").is_none() && h.get("task").is_none(), "{h}");
    let poll = h["pollIntervalMs"].as_u64().expect("pollIntervalMs");
    assert!(h["ttlMs"].is_u64(), "{h}");
    assert!(h["createdAt"].is_string(), "{h}");
    let task = h["taskId"].as_str().unwrap().to_string();

    // A listen stream on another connection follows the task's status.
    let mut l = d.conn();
    l.send(&json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
        "params": env(json!({"notifications": {"taskIds": [task, "task:999999", "bogus"]}}), "mt", true)}));
    let ack = l.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUB], "L");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task]),
        "only the task that exists is honored: {ack}"
    );
    let first = next_status(&mut l);
    assert_eq!(first["taskId"], json!(task));
    assert_eq!(first["_meta"][SUB], "L");

    // Poll at the suggested interval until terminal (deadline-bounded).
    let t0 = Instant::now();
    let mut polls = 0;
    let done = loop {
        let g = get(&mut c, "mt", &task);
        assert_eq!(g["resultType"], "complete", "{g}");
        assert_eq!(g["taskId"], json!(task));
        assert!(g["pollIntervalMs"].is_u64(), "{g}");
        polls += 1;
        if g["status"] != "working" {
            break g;
        }
        assert!(g.get("result").is_none(), "no result while working: {g}");
        assert!(t0.elapsed() < Duration::from_secs(20), "task never ended");
        std::thread::sleep(Duration::from_millis(poll));
    };
    eprintln!("task ended after {polls} polls, {:?}", t0.elapsed());
    assert!(polls > 1, "the handle came before the work ended");
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_ne!(result["isError"], true, "{done}");
    assert!(result["content"].is_array(), "a CallToolResult: {done}");
    assert!(result.to_string().contains("done"), "{done}");

    // The stream saw the end, tagged with the listen's id.
    let mut last = first;
    while last["status"] == "working" {
        last = next_status(&mut l);
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["_meta"][SUB], "L");

    // tasks/update: shoal tasks never ask for input.
    let r = c.call(
        "tasks/update",
        env(json!({"taskId": task, "inputResponses": {}}), "mt", true),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The 2025 methods are not part of the 2026 extension.
    for m in ["tasks/list", "tasks/result"] {
        let r = c.call(m, env(json!({"taskId": task}), "mt", true));
        assert_eq!(r["error"]["code"], -32601, "{m}: {r}");
    }
    // Unknown tasks are -32602.
    let r = c.call("tasks/get", env(json!({"taskId": "task:9999"}), "mt", true));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A taskId that is not a string: -32602 naming it.
    let r = c.call("tasks/get", env(json!({"taskId": 9999}), "mt", true));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["path"], "taskId", "{r}");

    // A client that did not declare the extension waits for its result.
    let r = exec(&mut c, "mt", "sh { sleep 1.3; echo inline }", false);
    assert_eq!(r["resultType"], "complete", "{r}");
    assert!(r.to_string().contains("inline"), "{r}");

    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}}));
}

#[test]
fn a_task_is_cancelled_and_its_process_ends() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let h = exec(&mut c, "mc", "sh { sleep 30 }", true);
    assert_eq!(h["resultType"], "task", "{h}");
    let task = h["taskId"].as_str().unwrap().to_string();

    // The task's process, seen from a kernel client of the same session.
    let mut k = d.conn();
    k.attach("mc");
    let pid = eventually("a pid", Duration::from_secs(10), || {
        let r = k.ok("task.get", json!({"task": task}));
        r["pid"].as_u64().map(|p| p as u32)
    });
    assert!(!gone(pid), "the process runs");

    let r = c.ok("tasks/cancel", env(json!({"taskId": task}), "mc", true));
    assert_eq!(r["taskId"], json!(task));
    assert_eq!(r["status"], "cancelled", "{r}");
    eventually(
        "the cancelled process ends",
        Duration::from_secs(10),
        || gone(pid).then_some(()),
    );
    let g = get(&mut c, "mc", &task);
    assert_eq!(g["status"], "cancelled", "{g}");
    assert!(g.get("result").is_none() && g.get("error").is_none(), "{g}");
    // Cancelling a terminal task is refused.
    let r = c.call("tasks/cancel", env(json!({"taskId": task}), "mc", true));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // A call cancelled before its handle is out cancels its task too.
    c.send(
        &json!({"jsonrpc": "2.0", "id": "X", "method": "tools/call", "params": env(
        json!({"name": "shoal_exec", "arguments": {"src": "sh { sleep 30 }"}}), "mc", true)}),
    );
    let (task2, pid2) = eventually("the second task's pid", Duration::from_secs(10), || {
        let list = k.ok("task.list", json!({}));
        list.as_array()?
            .iter()
            .find(|r| r["task"] != json!(task))
            .and_then(|r| Some((r["task"].as_str()?.to_string(), r["pid"].as_u64()? as u32)))
    });
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "X"}}));
    eventually("the call's process ends", Duration::from_secs(10), || {
        gone(pid2).then_some(())
    });
    let rec = k.ok("task.get", json!({"task": task2}));
    assert!(
        rec["state"] == "cancelling" || rec["state"] == "cancelled",
        "{rec}"
    );
    // No answer to the cancelled call: the next frame answers this request.
    let r = c.ok("tools/list", env(json!({}), "mc", true));
    assert!(r["tools"].is_array(), "{r}");
    // A 2025 `task` parameter is not how 2026 creates tasks: ignored.
    let r = exec_with(&mut c, "mc", json!({"src": "1 + 2"}), json!({"ttl": 1000}));
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["structuredContent"]["value"], json!({"$": "int", "v": 3}));
}

fn exec_with(c: &mut Conn, session: &str, args: Value, task: Value) -> Value {
    c.ok(
        "tools/call",
        env(
            json!({"name": "shoal_exec", "arguments": args, "task": task}),
            session,
            true,
        ),
    )
}

/// `tests/tasks_ext_checks.py`: the Python SDK 2.x `Client` with a
/// `ClientExtension` that claims `resultType: "task"`, through the shim.
#[test]
fn python_sdk_resolves_a_task_handle() {
    if !have_venv(
        "mcp_modern_tasks::python_sdk_resolves_a_task_handle",
        ".venv",
    ) {
        return;
    }
    let stdout = run_sdk_script(".venv", "tasks_ext_checks.py", &[]);
    for check in [
        "advertised",
        "short_inline",
        "long_became_task",
        "polled_to_result",
        "cancelled",
        "cancelled_stays",
    ] {
        assert!(
            stdout.contains(&format!("\"check\": \"{check}\", \"ok\": true")),
            "{check}:\n{stdout}"
        );
    }
}

/// A tool error has one shape whether the call answers inline or through a
/// task: the task ends `completed` with the same `isError` result, not
/// `failed` with a JSON-RPC error (SEP-2663 keeps `failed` for those).
#[test]
fn a_tool_error_in_a_task_is_a_completed_is_error_result() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let stmt =
        |src: &str| json!({"name": "shoal_exec", "arguments": {"src": src, "position": "stmt"}});
    // Inline: the failure is an isError result.
    let inline = c.ok("tools/call", env(stmt("sh { exit 3 }"), "te", true));
    assert_eq!(inline["resultType"], "complete", "{inline}");
    assert_eq!(inline["isError"], true, "{inline}");
    // ... and, answered within the threshold, it left no task behind.
    let ok = c.ok("tools/call", env(stmt("6 * 7"), "te", true));
    assert_eq!(ok["resultType"], "complete", "{ok}");
    let mut k = d.conn();
    k.attach("te");
    let list = k.ok("task.list", json!({}));
    assert_eq!(list.to_string().matches("task:").count(), 0, "{list}");

    // The same failure after the threshold: a task.
    let h = c.ok(
        "tools/call",
        env(stmt("sh { sleep 1.5; exit 3 }"), "te", true),
    );
    assert_eq!(h["resultType"], "task", "{h}");
    let task = h["taskId"].as_str().unwrap().to_string();
    let mut l = d.conn();
    l.send(
        &json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
        "params": env(json!({"notifications": {"taskIds": [task]}}), "te", true)}),
    );
    let ack = l.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // The stream's statuses up to the end: never `failed`.
    let mut last = next_status(&mut l);
    while last["status"] == "working" {
        last = next_status(&mut l);
    }
    assert_eq!(last["status"], "completed", "{last}");
    let done = get(&mut c, "te", &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done.get("error").is_none(), "no JSON-RPC error: {done}");
    let result = &done["result"];
    assert_eq!(result["isError"], true, "{done}");
    assert_eq!(
        result["structuredContent"]["code"], inline["structuredContent"]["code"],
        "the same error shape as inline: {done} vs {inline}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("exit"), "{text}");
}
