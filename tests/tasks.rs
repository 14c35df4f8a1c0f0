//! Background tasks against the real daemon: creation, timeouts, per-task
//! cancel and suspend checked by pid in /proc, events, limits, lifetime.

mod common;

use std::time::{Duration, Instant};

use common::{eventually, run, Conn, Daemon, Root};
use serde_json::{json, Value};

fn start(c: &mut Conn, src: &str) -> String {
    let r = c.ok("exec", json!({"src": src, "background": true}));
    let task = r["task"].as_str().expect("task ref").to_string();
    let n = task.strip_prefix("task:").unwrap();
    assert_eq!(r["events"], json!(format!("task.{n}")), "{r}");
    task
}

/// The pid of a running task's process, once it has one.
fn pid_of(c: &mut Conn, task: &str) -> u32 {
    eventually("a pid", Duration::from_secs(10), || {
        let r = c.ok("task.get", json!({"task": task}));
        r["pid"].as_u64().map(|p| p as u32)
    })
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

fn await_task(c: &mut Conn, task: &str) -> Value {
    c.ok("task.await", json!({"task": task, "timeout_ms": 20000}))
}

#[test]
fn a_background_task_does_not_block_its_session() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let task = start(&mut c, "sh { sleep 2; echo done }");
    let t0 = Instant::now();
    let r = c.ok("exec", json!({"src": "6 * 7"}));
    let took = t0.elapsed();
    eprintln!("6 * 7 beside a running task answered in {took:?}");
    assert_eq!(r["value"], json!({"$": "int", "v": 42}), "{r}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let rec = c.ok("task.get", json!({"task": task}));
    assert_eq!(rec["state"], "running", "{rec}");
    assert_eq!(rec["src"], "sh { sleep 2; echo done }");
    let rec = await_task(&mut c, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
    assert!(rec["elapsed_ms"].as_u64().unwrap() >= 1900, "{rec}");
    let out = rec["result_ref"].as_str().unwrap().to_string();
    let v = c.ok("value.get", json!({"ref": out, "format": "render"}));
    assert!(v["render"].as_str().unwrap().contains("done"), "{v}");
    // Lifecycle events: started, then {state, ref}.
    let n = task.strip_prefix("task:").unwrap();
    let ev = c.ok("events.read", json!({"channel": format!("task.{n}")}));
    let payloads: Vec<&Value> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["payload"])
        .collect();
    assert_eq!(payloads[0], &json!({"$": "str", "v": "started"}), "{ev}");
    let last = payloads.last().unwrap().to_string();
    assert!(last.contains("completed") && last.contains(&out), "{ev}");
    // The task's bindings do not flow back; the session's flow in.
    c.ok("exec", json!({"src": "let base = 5"}));
    let t = start(&mut c, "let inner = 1\nbase + 1");
    let rec = await_task(&mut c, &t);
    let v = c.ok("value.get", json!({"ref": rec["result_ref"]}));
    assert_eq!(v["value"], json!({"$": "int", "v": 6}), "{v}");
    let r = c.call("exec", json!({"src": "inner"}));
    assert!(r["error"].is_object(), "{r}");
}

#[test]
fn timeout_ms_is_a_wait_budget() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let r = c.ok(
        "exec",
        json!({"src": "sh { sleep 1; echo late }", "timeout_ms": 100}),
    );
    assert_eq!(r["timed_out"], json!(true), "{r}");
    let task = r["task"].as_str().unwrap().to_string();
    let rec = await_task(&mut c, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
    let r = c.ok("exec", json!({"src": "1 + 2", "timeout_ms": 5000}));
    assert_eq!(r["value"], json!({"$": "int", "v": 3}), "{r}");
    assert!(r["ref"].as_str().unwrap().starts_with("out:"), "{r}");
    // Errors of a run that ends in time are this call's errors.
    let r = c.call(
        "exec",
        json!({"src": "error(\"boom\")", "timeout_ms": 5000}),
    );
    assert_eq!(r["error"]["code"], json!(-32002), "{r}");
}

#[test]
fn cancelling_one_task_leaves_the_other_running() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let a = start(&mut c, "sh { sleep 30 }");
    let b = start(&mut c, "sh { sleep 30 }");
    let (pa, pb) = (pid_of(&mut c, &a), pid_of(&mut c, &b));
    assert!(!gone(pa) && !gone(pb));
    let t0 = Instant::now();
    let r = c.ok("task.cancel", json!({"task": a}));
    assert_eq!(r["cancel_requested"], json!(true), "{r}");
    eventually("the cancelled process ends", Duration::from_secs(1), || {
        gone(pa).then_some(())
    });
    eprintln!("cancel to process gone: {:?}", t0.elapsed());
    let rec = await_task(&mut c, &a);
    assert_eq!(rec["state"], "cancelled", "{rec}");
    assert!(!gone(pb), "the other task's process was touched");
    let rec = c.ok("task.get", json!({"task": b}));
    assert_eq!(rec["state"], "running", "{rec}");
    // Cancelling a finished task changes nothing.
    let r = c.ok("task.cancel", json!({"task": a}));
    assert_eq!(r["state"], "cancelled", "{r}");
    c.ok("task.cancel", json!({"task": b}));
    eventually("the second process ends", Duration::from_secs(5), || {
        gone(pb).then_some(())
    });
    let list = c.ok("task.list", json!({}));
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
}

#[test]
fn suspend_stops_the_process_and_resume_continues_it() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let t = start(&mut c, "sh { sleep 30 }");
    let pid = pid_of(&mut c, &t);
    let r = c.ok("task.suspend", json!({"task": t}));
    assert_eq!(r["state"], "suspended", "{r}");
    eventually("state T", Duration::from_secs(5), || {
        (proc_state(pid) == Some('T')).then_some(())
    });
    let r = c.ok("task.resume", json!({"task": t}));
    assert_eq!(r["state"], "running", "{r}");
    eventually("running again", Duration::from_secs(5), || {
        matches!(proc_state(pid), Some('S') | Some('R')).then_some(())
    });
    // Cancel works on a suspended task too.
    c.ok("task.suspend", json!({"task": t}));
    c.ok("task.cancel", json!({"task": t}));
    let rec = await_task(&mut c, &t);
    assert_eq!(rec["state"], "cancelled", "{rec}");
    assert!(gone(pid));
}

#[test]
fn unknown_and_foreign_tasks_are_32021() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("mine");
    let t = start(&mut c, "1");
    for m in [
        "task.get",
        "task.await",
        "task.cancel",
        "task.suspend",
        "task.resume",
    ] {
        let r = c.call(m, json!({"task": "task:999999"}));
        assert_eq!(r["error"]["code"], json!(-32021), "{m}: {r}");
    }
    let mut other = d.conn();
    other.attach("theirs");
    let r = other.call("task.get", json!({"task": t}));
    assert_eq!(r["error"]["code"], json!(-32021), "{r}");
    let r = c.call("exec", json!({"src": "1", "timeout_ms": "soon"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
}

#[test]
fn tasks_survive_their_connection_and_end_with_their_session() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let t = {
        let mut c = d.conn();
        c.attach("s");
        start(&mut c, "sh { sleep 0.3 }; 9")
    };
    let mut c = d.conn();
    c.attach("s");
    let rec = await_task(&mut c, &t);
    assert_eq!(rec["state"], "completed", "{rec}");
    let long = start(&mut c, "sh { sleep 30 }");
    let pid = pid_of(&mut c, &long);
    // `shoal status` lists the task with its state and pid.
    let sock = d.socket.to_str().unwrap().to_string();
    let (_, out, _) = run(&root, &["status", "--json", "--socket", &sock], &[]);
    let st: Value = serde_json::from_str(&out).unwrap();
    let sess = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "s")
        .unwrap();
    assert_eq!(sess["tasks"], json!(1), "{sess}");
    let listed = sess["task_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task"] == json!(long))
        .unwrap();
    assert_eq!(listed["pid"], json!(pid), "{listed}");
    assert_eq!(listed["state"], "running");
    let (_, human, _) = run(&root, &["status", "--socket", &sock], &[]);
    assert!(
        human.contains(&long) && human.contains("running"),
        "{human}"
    );
    c.ok("session.close", json!({"session": "s"}));
    eventually(
        "the task's process ends with its session",
        Duration::from_secs(5),
        || gone(pid).then_some(()),
    );
}

#[test]
fn max_tasks_per_session_is_enforced() {
    let root = Root::new();
    let cfg = root.path().join("t.toml");
    std::fs::write(&cfg, "[limits]\nmax_tasks_per_session = 2\n").unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let mut c = d.conn();
    c.attach("s");
    let a = start(&mut c, "sh { sleep 30 }");
    let b = start(&mut c, "sh { sleep 30 }");
    let r = c.call("exec", json!({"src": "1", "background": true}));
    assert_eq!(r["error"]["code"], json!(-32040), "{r}");
    assert_eq!(
        r["error"]["data"]["limit"],
        json!("max_tasks_per_session"),
        "{r}"
    );
    // Another session has its own allowance.
    let mut o = d.conn();
    o.attach("o");
    start(&mut o, "1");
    for t in [&a, &b] {
        c.ok("task.cancel", json!({"task": t}));
        assert_eq!(await_task(&mut c, t)["state"], "cancelled");
    }
    // Finished tasks do not count.
    start(&mut c, "2");
}

#[test]
fn a_hundred_tasks_across_ten_sessions() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conns: Vec<(Conn, Vec<(String, i64)>)> = (0..10)
        .map(|i| {
            let mut c = d.conn();
            c.attach(&format!("load{i}"));
            (c, Vec::new())
        })
        .collect();
    for k in 0..100i64 {
        let (c, ts) = &mut conns[(k % 10) as usize];
        let t = start(c, &format!("sh {{ echo {k} }}; {k} * 3"));
        ts.push((t, k));
    }
    for (c, ts) in &mut conns {
        for (t, k) in ts.iter() {
            let rec = await_task(c, t);
            assert_eq!(rec["state"], "completed", "{rec}");
            let v = c.ok("value.get", json!({"ref": rec["result_ref"]}));
            assert_eq!(v["value"], json!({"$": "int", "v": k * 3}), "{v}");
        }
    }
    // Twenty long ones, cancelled: no process is left.
    let mut long = Vec::new();
    for k in 0..20usize {
        let (c, _) = &mut conns[k % 10];
        let t = start(c, "sh { sleep 30 }");
        long.push((k % 10, t));
    }
    let mut pids = Vec::new();
    for (i, t) in &long {
        let c = &mut conns[*i].0;
        pids.push(pid_of(c, t));
    }
    for (i, t) in &long {
        conns[*i].0.ok("task.cancel", json!({"task": t}));
    }
    for (i, t) in &long {
        let rec = await_task(&mut conns[*i].0, t);
        assert_eq!(rec["state"], "cancelled", "{rec}");
    }
    for p in pids {
        assert!(gone(p), "pid {p} outlived its cancelled task");
    }
}
