//! Background work from the language, against the real daemon (kernel and
//! MCP): `cmd &` and `sh { … } &` start a session task that outlives the
//! call, `jobs` lists every task however it started, `shoal_get
//! {"ref":"task:N"}` (kernel `value.get`) reads one, and `task(N)` in
//! source is `task:N`. Waits are on `task.await` or on a file the test
//! creates, never on time.

use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

/// A kernel connection and an MCP connection on the same session `s`.
fn both(d: &Daemon) -> (Conn, Conn) {
    let mut k = d.conn();
    k.attach("s");
    (k, d.mcp_legacy("s"))
}

fn exec(k: &mut Conn, src: &str) -> Value {
    k.ok("exec", json!({"src": src, "position": "value"}))
}

/// A `shoal_*` tool call; the result (asserted not an error).
fn tool(m: &mut Conn, name: &str, args: Value) -> Value {
    let r = m.ok("tools/call", json!({"name": name, "arguments": args}));
    assert_eq!(r["isError"], json!(false), "{name} {args}: {r}");
    r
}

/// What the model reads of a tool result.
fn text(r: &Value) -> String {
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The `task:N` an exec's value is a handle to.
fn task_of(value: &Value) -> String {
    assert_eq!(value["$"], "task", "{value}");
    let id = value["id"].as_u64().expect("task id");
    assert_eq!(value["ref"], json!(format!("task:{id}")), "{value}");
    format!("task:{id}")
}

fn await_task(k: &mut Conn, task: &str) -> Value {
    let rec = k.ok("task.await", json!({"task": task, "timeout_ms": 30000}));
    assert!(
        matches!(
            rec["state"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ),
        "{rec}"
    );
    rec
}

/// A shell loop that ends (printing `finished`) once `go` exists: a task
/// that cannot end before the test lets it.
fn gated(go: &Path) -> String {
    format!(
        "until [ -e {} ]; do sleep 0.02; done; echo finished",
        go.display()
    )
}

#[test]
fn cmd_amp_returns_at_once_and_its_task_outlives_the_call() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (mut k, mut m) = both(&d);
    let go = root.path().join("go-kernel");

    // Kernel: the exec answers with the task while its command still runs.
    let src = format!("sh -c '{}' &", gated(&go));
    let r = exec(&mut k, &src);
    let task = task_of(&r["value"]);
    let render = r["render"].as_str().unwrap();
    assert!(render.contains(&task), "{r}");
    assert!(
        render.contains(&format!("shoal_get {{\"ref\":\"{task}\"}}")),
        "{r}"
    );
    // The call has returned; the task goes on (it was not cancelled with it).
    let rec = k.ok("task.get", json!({"task": task}));
    assert_eq!(rec["state"], "running", "{rec}");
    assert_eq!(rec["src"], json!(src.trim_end_matches(" &")), "{rec}");
    std::fs::write(&go, "").unwrap();
    let rec = await_task(&mut k, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
    let out = rec["result_ref"].as_str().expect("a value ref");
    let v = k.ok("value.get", json!({"ref": out, "format": "render"}));
    assert!(v["render"].as_str().unwrap().contains("finished"), "{v}");

    // `sleep 1 &`, the card's own form: it completes after the call.
    let r = exec(&mut k, "sleep 1 &");
    let task = task_of(&r["value"]);
    let rec = await_task(&mut k, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
    assert_eq!(rec["src"], "sleep 1", "{rec}");

    // MCP: the same, the text naming the task and how to read it.
    let go = root.path().join("go-mcp");
    let r = tool(
        &mut m,
        "shoal_exec",
        json!({"src": format!("sh -c '{}' &", gated(&go))}),
    );
    let task = task_of(&r["structuredContent"]["value"]);
    let t = text(&r);
    assert!(
        t.starts_with(&format!("{task} runs in the background")),
        "{t}"
    );
    assert!(
        t.contains(&format!("shoal_get {{\"ref\":\"{task}\"}}")),
        "{t}"
    );
    let rec = k.ok("task.get", json!({"task": task}));
    assert_eq!(rec["state"], "running", "{rec}");
    std::fs::write(&go, "").unwrap();
    assert_eq!(await_task(&mut k, &task)["state"], "completed");
    let r = tool(&mut m, "shoal_exec", json!({"src": "sleep 1 &"}));
    let task = task_of(&r["structuredContent"]["value"]);
    assert_eq!(await_task(&mut k, &task)["state"], "completed");
}

#[test]
fn sh_block_amp_starts_a_task() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (mut k, mut m) = both(&d);

    // Kernel, statement and value position.
    for position in ["stmt", "value"] {
        let r = k.ok(
            "exec",
            json!({"src": "sh { echo hi; echo warn >&2 } &", "position": position}),
        );
        let task = task_of(&r["value"]);
        let rec = await_task(&mut k, &task);
        assert_eq!(rec["state"], "completed", "{rec}");
        assert_eq!(rec["src"], "sh { echo hi; echo warn >&2 }", "{rec}");
        let v = k.ok(
            "value.get",
            json!({"ref": rec["result_ref"], "path": "out"}),
        );
        assert_eq!(v["value"], json!({"$": "str", "v": "hi"}), "{v}");
    }
    // Bound and awaited in source.
    let r = exec(&mut k, "let t = sh { echo bound } &\nt.await().out");
    assert_eq!(r["value"], json!({"$": "str", "v": "bound"}), "{r}");

    // In a function defined by an earlier exec: the task runs the command
    // as written there, with the call's arguments.
    exec(&mut k, "fn later(x) { sh -c \"echo {x}\" & }");
    let r = exec(&mut k, "later(\"from-fn\").await().out");
    assert_eq!(r["value"], json!({"$": "str", "v": "from-fn"}), "{r}");

    // MCP.
    let r = tool(
        &mut m,
        "shoal_exec",
        json!({"src": "sh { echo via-mcp } &"}),
    );
    let task = task_of(&r["structuredContent"]["value"]);
    let rec = await_task(&mut k, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
    let n = task.trim_start_matches("task:");
    let r = tool(
        &mut m,
        "shoal_exec",
        json!({"src": format!("task({n}).await().out")}),
    );
    assert_eq!(text(&r), "via-mcp", "{r}");
    // A failing block is a failed task; the refusal hint is gone.
    let r = tool(&mut m, "shoal_exec", json!({"src": "sh { exit 3 } &"}));
    let task = task_of(&r["structuredContent"]["value"]);
    assert_eq!(await_task(&mut k, &task)["state"], "failed");
    // `&` anywhere else still teaches.
    let e = k.call("exec", json!({"src": "1 & 2"}));
    let hint = e["error"]["data"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("sh { … } &") && hint.contains("&&"), "{e}");
}

/// `.await()` on a task that does not end ends as soon as the waiting
/// evaluation is cancelled, and the awaited task runs on.
#[test]
fn a_cancelled_wait_leaves_the_awaited_task_running() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut k = d.conn();
    k.attach("s");
    cancel_a_wait(&mut k, &|| {});
    let mut observer = d.conn();
    observer.attach("observer");
    cancel_a_foreground_wait(&mut k, &mut observer, "s");
}

/// Await a long task in the foreground of `k`'s session `session`, cancel
/// the call once `observer` sees the session busy: the exec answers, the
/// session takes the next exec, and the awaited task runs on.
pub(crate) fn cancel_a_foreground_wait(k: &mut Conn, observer: &mut Conn, session: &str) {
    let long = task_of(&exec(k, "sleep 60 &")["value"]);
    let n = long.trim_start_matches("task:");
    let id = 900_001;
    k.send(&json!({"jsonrpc": "2.0", "id": id, "method": "exec",
        "params": {"src": format!("task({n}).await()")}}));
    session_busy(observer, session, true);
    k.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": id}}));
    let r = k.recv();
    assert_eq!(r["id"], json!(id), "{r}");
    assert!(r["error"].to_string().contains("interrupted"), "{r}");
    let r = exec(k, "1 + 1");
    assert_eq!(r["value"], json!({"$": "int", "v": 2}), "{r}");
    let rec = k.ok("task.get", json!({"task": long}));
    assert_eq!(rec["state"], "running", "{rec}");
    k.ok("task.cancel", json!({"task": long}));
    assert_eq!(await_task(k, &long)["state"], "cancelled");
}

/// Start a long task and a task awaiting it; cancel the waiter, and check
/// `settled` while the long task still runs.
pub(crate) fn cancel_a_wait(k: &mut Conn, settled: &dyn Fn()) {
    let long = task_of(&exec(k, "sleep 60 &")["value"]);
    let n = long.trim_start_matches("task:");
    let w = k.ok(
        "exec",
        json!({"src": format!("task({n}).await()"), "background": true}),
    );
    let waiter = w["task"].as_str().unwrap().to_string();
    k.ok("task.cancel", json!({"task": waiter}));
    let rec = await_task(k, &waiter);
    assert_eq!(rec["state"], "cancelled", "{rec}");
    settled();
    let rec = k.ok("task.get", json!({"task": long}));
    assert_eq!(rec["state"], "running", "{rec}");
    k.ok("task.cancel", json!({"task": long}));
    assert_eq!(await_task(k, &long)["state"], "cancelled");
}

#[test]
fn jobs_lists_every_task_of_the_session() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (mut k, mut m) = both(&d);
    let go = root.path().join("go");

    let bg = k.ok(
        "exec",
        json!({"src": format!("sh {{ {} }}", gated(&go)), "background": true}),
    );
    let bg = bg["task"].as_str().unwrap().to_string();
    let amp = task_of(&exec(&mut k, &format!("sh -c '{}' &", gated(&go)))["value"]);
    let block = task_of(&exec(&mut k, &format!("sh {{ {} }} &", gated(&go)))["value"]);
    let spawned = task_of(&exec(&mut k, "spawn { 6 * 7 }")["value"]);

    // Kernel: one row per task, by number, however it started.
    let r = exec(&mut k, "jobs");
    let cols = &r["value"]["cols"];
    let ids: Vec<u64> = cols["id"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["v"].as_u64().unwrap())
        .collect();
    for t in [&bg, &amp, &block, &spawned] {
        let n: u64 = t.trim_start_matches("task:").parse().unwrap();
        assert!(ids.contains(&n), "{t} not in jobs: {r}");
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "{r}");
    let states: Vec<&str> = cols["state"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["v"].as_str().unwrap())
        .collect();
    assert!(
        states.iter().filter(|s| **s == "running").count() >= 3,
        "{r}"
    );

    // MCP: the text names each of them.
    let t = text(&tool(&mut m, "shoal_exec", json!({"src": "jobs"})));
    for src in ["sh -c", "sh {", "spawn { 6 * 7 }"] {
        assert!(t.contains(src), "{src:?} not in jobs text: {t}");
    }
    assert!(t.contains("running"), "{t}");

    // Once they end, jobs says so.
    std::fs::write(&go, "").unwrap();
    for t in [&bg, &amp, &block] {
        assert_eq!(await_task(&mut k, t)["state"], "completed");
    }
    let r = exec(
        &mut k,
        &format!(
            "jobs.where(.id == {}).get(0).state",
            amp.trim_start_matches("task:")
        ),
    );
    assert_eq!(r["value"], json!({"$": "str", "v": "completed"}), "{r}");
}

#[test]
fn shoal_get_reads_a_task() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (mut k, mut m) = both(&d);
    let go = root.path().join("go");

    let src = format!("sh {{ echo partial; echo oops >&2; {} }}", gated(&go));
    let r = tool(&mut m, "shoal_exec", json!({"src": format!("{src} &")}));
    let task = task_of(&r["structuredContent"]["value"]);

    // Running: the state and the output so far.
    let running = eventually(
        "the task's first output",
        std::time::Duration::from_secs(20),
        || {
            let r = tool(&mut m, "shoal_get", json!({"ref": task}));
            text(&r).contains("partial").then_some(r)
        },
    );
    let t = text(&running);
    assert!(t.starts_with(&format!("{task} running")), "{t}");
    assert!(t.contains("--- output so far"), "{t}");
    let sc = &running["structuredContent"];
    assert_eq!(sc["state"], "running", "{sc}");
    assert_eq!(sc["src"], json!(src), "{sc}");
    assert!(
        sc["tail"]["stdout"].as_str().unwrap().contains("partial"),
        "{sc}"
    );
    assert!(sc.get("value").is_none(), "{sc}");
    // The kernel's equivalent.
    let kr = k.ok("value.get", json!({"ref": task}));
    assert_eq!(kr["state"], "running", "{kr}");

    // Ended: state, value and its ref.
    std::fs::write(&go, "").unwrap();
    let rec = await_task(&mut k, &task);
    let out = rec["result_ref"].as_str().unwrap().to_string();
    let r = tool(&mut m, "shoal_get", json!({"ref": task}));
    let t = text(&r);
    assert!(
        t.starts_with(&format!("{task} completed")) && t.contains(&format!("value {out}")),
        "{t}"
    );
    assert!(t.contains("partial\nfinished"), "{t}");
    assert!(t.contains("--- stderr ---\noops"), "{t}");
    assert_eq!(t.matches("--- stderr").count(), 1, "stderr once: {t}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["state"], "completed", "{sc}");
    assert_eq!(sc["result_ref"], json!(out), "{sc}");
    assert_eq!(sc["value"]["$"], "outcome", "{sc}");
    assert_eq!(sc["value"]["status"], 0, "{sc}");
    let kr = k.ok("value.get", json!({"ref": task}));
    assert_eq!(kr["value"]["$"], "outcome", "{kr}");

    // A failed task: its status in the first line.
    let r = tool(
        &mut m,
        "shoal_exec",
        json!({"src": "sh { echo no >&2; exit 4 } &"}),
    );
    let failed = task_of(&r["structuredContent"]["value"]);
    await_task(&mut k, &failed);
    let t = text(&tool(&mut m, "shoal_get", json!({"ref": failed})));
    let first = t.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("{failed} failed · exit status 4")),
        "{t}"
    );
    assert!(t.contains("--- stderr ---\nno"), "{t}");
    assert_eq!(t.matches("--- stderr").count(), 1, "stderr once: {t}");

    // A task started with `background: true` reads the same way.
    let bg = k.ok(
        "exec",
        json!({"src": "sh { echo from-bg }", "background": true}),
    );
    let bg = bg["task"].as_str().unwrap().to_string();
    await_task(&mut k, &bg);
    let t = text(&tool(&mut m, "shoal_get", json!({"ref": bg})));
    assert!(
        t.starts_with(&format!("{bg} completed")) && t.contains("from-bg"),
        "{t}"
    );

    // An unknown task is an error, not an empty read.
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": "task:999999"}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text(&r).contains("unknown task"), "{r}");
}

#[test]
fn one_numbering_for_every_task() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (mut k, mut m) = both(&d);

    // `task(N)` in source names the same task as `task:N` on the wire.
    let r = exec(&mut k, "let t = (sleep 0 &)\nt");
    let task = task_of(&r["value"]);
    let n = task.trim_start_matches("task:");
    let rec = k.ok("task.get", json!({"task": task}));
    assert_eq!(rec["src"], "sleep 0", "{rec}");
    let r = exec(
        &mut k,
        &format!("[t.id, task({n}).id, task(\"{task}\").id]"),
    );
    let ids: Vec<Value> = r["value"]["v"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["v"].clone())
        .collect();
    assert_eq!(ids, vec![json!(n.parse::<u64>().unwrap()); 3], "{r}");

    // A `background: true` task is `task(N)` in source, awaited there.
    let bg = k.ok(
        "exec",
        json!({"src": "sh { echo numbered }", "background": true}),
    );
    let bg = bg["task"].as_str().unwrap().to_string();
    let m_n = bg.trim_start_matches("task:");
    let r = tool(
        &mut m,
        "shoal_exec",
        json!({"src": format!("task({m_n}).await().out")}),
    );
    assert_eq!(text(&r), "numbered", "{r}");
    let r = exec(&mut k, &format!("task({m_n}).state"));
    assert_eq!(r["value"], json!({"$": "str", "v": "completed"}), "{r}");

    // Cancel through the handle; the record says so.
    let r = exec(&mut k, "sleep 30 &");
    let long = task_of(&r["value"]);
    let ln = long.trim_start_matches("task:");
    exec(&mut k, &format!("task({ln}).cancel()"));
    assert_eq!(await_task(&mut k, &long)["state"], "cancelled");

    // Local `spawn` tasks take numbers from the same counter: no two tasks
    // share one.
    let s = task_of(&exec(&mut k, "spawn { 1 }")["value"]);
    assert!(![&task, &bg, &long].contains(&&s), "{s}");
    let r = exec(&mut k, "jobs.map(.id)");
    let all: Vec<u64> = r["value"]["v"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["v"].as_u64().unwrap())
        .collect();
    let mut dedup = all.clone();
    dedup.dedup();
    assert_eq!(all, dedup, "{r}");

    // An unknown number says where to look.
    let e = k.call("exec", json!({"src": "task(999999)"}));
    assert!(e.to_string().contains("`jobs` lists"), "{e}");
}

#[test]
fn a_token_principals_amp_task_stays_confined() {
    let root = Root::new();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "keep\n").unwrap();
    let d = Daemon::with_config(&root, &project_policy("agent:k", &project), &[]);
    let token = create_token(&root, "agent:k");
    let mut k = d.conn();
    let r = k.attach_token("agent", &token);
    assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");

    let keep = outside.join("keep");
    for src in [
        format!("sh {{ rm -f {} }} &", keep.display()),
        format!("sh -c 'rm -f {}' &", keep.display()),
    ] {
        // The task starts (the policy allows the run) and the kernel stops
        // its child: it fails, the file stays.
        let r = k.ok("exec", json!({"src": src, "position": "value"}));
        let task = task_of(&r["value"]);
        let rec = await_task(&mut k, &task);
        assert_eq!(rec["state"], "failed", "{src}: {rec}");
        assert!(
            keep.exists(),
            "{src} deleted a file outside the grant: {rec}"
        );
    }
    // Control: inside its grant the same form works.
    let own = project.join("own");
    let r = k.ok(
        "exec",
        json!({"src": format!("sh {{ touch {} }} &", own.display()), "position": "value"}),
    );
    let task = task_of(&r["value"]);
    assert_eq!(await_task(&mut k, &task)["state"], "completed");
    assert!(
        own.exists(),
        "the confined task could not write its own file"
    );
}
