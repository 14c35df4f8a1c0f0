//! Background tasks against the real daemon: creation, timeouts, per-task
//! cancel and suspend checked by pid in /proc, events, limits, lifetime.

use std::time::{Duration, Instant};

use crate::common::{eventually, run, Conn, Daemon, Root};
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
    eventually("a pid", Duration::from_secs(30), || {
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
    // The task waits for a gate only this test opens: the session's answer
    // below cannot come from the task having ended.
    let gate = root.path().join("gate");
    let src = format!(
        "sh {{ until [ -e {} ]; do sleep 0.01; done; echo done }}",
        gate.display()
    );
    let task = start(&mut c, &src);
    let r = c.ok("exec", json!({"src": "6 * 7"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}), "{r}");
    let rec = c.ok("task.get", json!({"task": task}));
    assert_eq!(rec["state"], "running", "{rec}");
    assert_eq!(rec["src"], json!(src));
    std::fs::write(&gate, "").unwrap();
    let rec = await_task(&mut c, &task);
    assert_eq!(rec["state"], "completed", "{rec}");
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
    eventually("state T", Duration::from_secs(20), || {
        (proc_state(pid) == Some('T')).then_some(())
    });
    let r = c.ok("task.resume", json!({"task": t}));
    assert_eq!(r["state"], "running", "{r}");
    eventually("running again", Duration::from_secs(20), || {
        matches!(proc_state(pid), Some('S') | Some('R')).then_some(())
    });
    // Cancel works on a suspended task too.
    c.ok("task.suspend", json!({"task": t}));
    eventually("stopped again", Duration::from_secs(20), || {
        (proc_state(pid) == Some('T')).then_some(())
    });
    c.ok("task.cancel", json!({"task": t}));
    let rec = await_task(&mut c, &t);
    assert_eq!(rec["state"], "cancelled", "{rec}");
    eventually("the process gone", Duration::from_secs(20), || {
        gone(pid).then_some(())
    });
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

/// Every process whose process group is `pgid` (the task's group).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        // state ppid pgrp ...
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() > 2 && f[2] == pgid.to_string() && !matches!(f[0], "Z" | "X") {
            out.push(pid);
        }
    }
    out
}

fn daemon_with(root: &Root, toml: &str) -> Daemon {
    let cfg = root.path().join("t.toml");
    std::fs::write(&cfg, toml).unwrap();
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    )
}

#[test]
fn tasks_retain_max_keeps_the_newest_finished_records() {
    let root = Root::new();
    let d = daemon_with(&root, "[tasks]\nretain = \"2h\"\nretain_max = 2\n");
    let mut c = d.conn();
    c.attach("r");
    let long = start(&mut c, "sh { sleep 30 }");
    let mut done = Vec::new();
    for k in 0..4 {
        let t = start(&mut c, &format!("{k} + 1"));
        assert_eq!(await_task(&mut c, &t)["state"], "completed");
        done.push(t);
    }
    let list = c.ok("task.list", json!({}));
    let mut listed: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["task"].as_str())
        .collect();
    listed.sort();
    let mut want = vec![long.as_str(), done[2].as_str(), done[3].as_str()];
    want.sort();
    assert_eq!(
        listed, want,
        "the running task and the two newest finished: {list}"
    );
    let r = c.call("task.get", json!({"task": done[0]}));
    assert_eq!(r["error"]["code"], json!(-32021), "{r}");
    // MCP clients are told the configured retention.
    let mut m = d.mcp_legacy("r");
    let t = m.ok("tasks/get", json!({"taskId": done[3]}));
    assert_eq!(t["ttl"], json!(7_200_000), "{t}");
    c.ok("task.cancel", json!({"task": long}));
    assert_eq!(await_task(&mut c, &long)["state"], "cancelled");
}

#[test]
fn a_bad_tasks_retain_refuses_to_start_naming_the_key() {
    let root = Root::new();
    for (toml, want) in [
        (
            "[tasks]\nretain = \"soon\"\n",
            ":2:10: tasks.retain: \"soon\" is not a duration",
        ),
        ("[tasks]\nretain = \"0s\"\n", ":2:10: tasks.retain:"),
        (
            "[tasks]\nretain_max = 0\n",
            ":2:14: tasks.retain_max must be between 1 and 1000000",
        ),
    ] {
        let cfg = root.path().join("bad.toml");
        std::fs::write(&cfg, toml).unwrap();
        let (code, _, err) = run(
            &root,
            &[
                "daemon",
                "--socket",
                root.socket().to_str().unwrap(),
                "--config",
                cfg.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(code, 1, "{toml}: {err}");
        assert!(err.contains(want), "{toml}: {err}");
        assert!(!root.socket().exists());
    }
}

#[test]
fn a_running_task_shows_the_tail_of_its_output() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("tl");
    let t = start(&mut c, "sh { echo hi; echo warn >&2; sleep 5 }");
    let rec = eventually("hi in the tail", Duration::from_secs(10), || {
        let r = c.ok("task.get", json!({"task": t}));
        let out = r["tail"]["stdout"].as_str().unwrap_or("");
        let err = r["tail"]["stderr"].as_str().unwrap_or("");
        (out.contains("hi") && err.contains("warn")).then_some(r)
    });
    assert_eq!(rec["state"], "running", "{rec}");
    assert_eq!(rec["tail"]["stdout"], "hi\n", "{rec}");
    let list = c.ok("task.list", json!({}));
    assert_eq!(list[0]["tail"]["stdout"], "hi\n", "{list}");
    // The same record through MCP: shoal://task/N.
    let n = t.strip_prefix("task:").unwrap();
    let mut m = d.conn();
    let r = m.ok(
        "resources/read",
        modern(json!({"uri": format!("shoal://task/{n}")}), "tl"),
    );
    let text = r["contents"][0]["text"].as_str().unwrap();
    let read: Value = serde_json::from_str(text).unwrap();
    assert_eq!(read["tail"]["stdout"], "hi\n", "{read}");
    // A bounded tail: a task writing far more keeps only the last bytes.
    let big = start(&mut c, "sh { seq 1 100000; sleep 5 }");
    let rec = eventually(
        "the end of seq in the tail",
        Duration::from_secs(10),
        || {
            let r = c.ok("task.get", json!({"task": big}));
            r["tail"]["stdout"]
                .as_str()
                .is_some_and(|s| s.ends_with("100000\n"))
                .then_some(r)
        },
    );
    let tail = rec["tail"]["stdout"].as_str().unwrap();
    assert!(tail.len() <= 4096 && tail.len() > 4000, "{}", tail.len());
    for x in [&t, &big] {
        c.ok("task.cancel", json!({"task": x}));
        let rec = await_task(&mut c, x);
        assert_eq!(rec["state"], "cancelled");
        assert!(rec.get("tail").is_none(), "no tail once finished: {rec}");
    }
    // The value still has all of it.
    let done = start(&mut c, "sh { seq 1 100000 }");
    let rec = await_task(&mut c, &done);
    let v = c.ok(
        "value.get",
        json!({"ref": rec["result_ref"], "path": "stdout"}),
    );
    // seq 1 100000 writes 588895 bytes.
    assert_eq!(v["value"]["n"], json!(588895), "{}", &v.to_string()[..200]);
}

#[test]
fn status_shows_the_busiest_sessions_live_tasks() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("a");
    let mut b = d.conn();
    b.attach("b");
    let ts = [
        start(&mut a, "sh { sleep 30 }"),
        start(&mut a, "sh { sleep 30 }"),
        start(&mut a, "sh { sleep 30 }"),
    ];
    let tb = start(&mut b, "sh { sleep 30 }");
    let sock = d.socket.to_str().unwrap().to_string();
    let status = || {
        let (code, out, err) = run(&root, &["status", "--json", "--socket", &sock], &[]);
        assert_eq!(code, 0, "{err}");
        let st: Value = serde_json::from_str(&out).unwrap();
        st["limits"]["tasks_per_session"].clone()
    };
    let l = status();
    assert_eq!(l["used"], json!(3), "{l}");
    let (_, human, _) = run(&root, &["status", "--socket", &sock], &[]);
    assert!(human.contains("tasks per session 3/64"), "{human}");
    assert_eq!(l["max"], json!(64), "{l}");
    assert_eq!(l["key"], "max_tasks_per_session");
    for t in &ts {
        a.ok("task.cancel", json!({"task": t}));
        await_task(&mut a, t);
    }
    assert_eq!(status()["used"], json!(1));
    b.ok("task.cancel", json!({"task": tb}));
    await_task(&mut b, &tb);
    assert_eq!(status()["used"], json!(0));
}

/// A task whose programs ignore SIGINT and SIGTERM: its group, once running.
fn stubborn(c: &mut Conn) -> (String, u32) {
    let t = start(c, "sh { trap '' INT TERM; sleep 100; echo never }");
    let pid = pid_of(c, &t);
    eventually("sh and its sleep", Duration::from_secs(10), || {
        (group_members(pid).len() >= 2).then_some(())
    });
    (t, pid)
}

#[test]
fn closing_a_session_ends_even_a_stubborn_task() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("st");
    let (_, pid) = stubborn(&mut c);
    let (_, plain) = {
        let t = start(&mut c, "sh { sleep 100 }");
        let p = pid_of(&mut c, &t);
        (t, p)
    };
    let t0 = Instant::now();
    c.ok("session.close", json!({"session": "st"}));
    eventually(
        "the plain task's group ends",
        Duration::from_secs(20),
        || group_members(plain).is_empty().then_some(()),
    );
    // SIGINT and SIGTERM are ignored: SIGKILL, 6 s after the close.
    eventually(
        "the stubborn task's group ends",
        Duration::from_secs(40),
        || group_members(pid).is_empty().then_some(()),
    );
    eprintln!(
        "session.close to the stubborn group gone: {:?}",
        t0.elapsed()
    );
    // The daemon is fine.
    let mut o = d.conn();
    o.attach("next");
    assert_eq!(
        o.ok("exec", json!({"src": "1 + 1"}))["value"]["v"],
        json!(2)
    );
}

#[test]
fn sigterm_to_the_daemon_ends_every_tasks_process_group() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut groups = Vec::new();
    let mut conns = Vec::new();
    for s in ["x", "y"] {
        let mut c = d.conn();
        c.attach(s);
        groups.push(stubborn(&mut c).1);
        let t = start(&mut c, "sh { sleep 100 }");
        groups.push(pid_of(&mut c, &t));
        let t = start(&mut c, "sh { sleep 100 }");
        let p = pid_of(&mut c, &t);
        c.ok("task.suspend", json!({"task": t}));
        groups.push(p);
        conns.push(c);
    }
    let t0 = Instant::now();
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("the daemon exits");
    eprintln!("SIGTERM to exit with stubborn tasks: {:?}", t0.elapsed());
    assert!(st.success(), "{st}");
    assert!(!root.socket().exists(), "the socket is removed");
    for g in groups {
        let left = group_members(g);
        assert!(left.is_empty(), "group {g} outlived the daemon: {left:?}");
    }
}

/// `params` in the 2026-07-28 envelope naming `session`.
fn modern(mut params: Value, session: &str) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "shoal/session": session,
    });
    params
}

#[test]
fn task_resources_of_another_session_are_32021() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut k = d.conn();
    k.attach("mine");
    let t = start(&mut k, "sh { sleep 30 }");
    let n = t.strip_prefix("task:").unwrap().to_string();
    let uris = [
        format!("shoal://task/{n}"),
        format!("shoal://task/{n}/out"),
        format!("shoal://events/task.{n}"),
    ];
    let mut m = d.conn();
    // The other session: refused everywhere.
    for u in &uris[..2] {
        let r = m.call("resources/read", modern(json!({"uri": u}), "theirs"));
        assert_eq!(r["error"]["code"], json!(-32021), "read {u}: {r}");
    }
    // resources/subscribe (2025 MCP, a shim attached to the other session).
    let mut lg = d.mcp_legacy("theirs");
    for u in [&uris[0], &uris[2]] {
        let r = lg.call("resources/subscribe", json!({"uri": u}));
        assert_eq!(r["error"]["code"], json!(-32021), "subscribe {u}: {r}");
    }
    m.send(&json!({"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
        "params": modern(json!({"notifications": {"resourceSubscriptions": [uris[0]]}}), "theirs")}));
    let r = m.recv();
    assert_eq!(r["id"], "L1", "{r}");
    assert_eq!(r["error"]["code"], json!(-32021), "listen: {r}");
    // Its own session: allowed.
    let r = m.ok("resources/read", modern(json!({"uri": uris[0]}), "mine"));
    assert!(
        r["contents"][0]["text"].as_str().unwrap().contains(&t),
        "{r}"
    );
    let mut own = d.mcp_legacy("mine");
    own.ok("resources/subscribe", json!({"uri": uris[0]}));
    m.send(
        &json!({"jsonrpc": "2.0", "id": "L2", "method": "subscriptions/listen",
        "params": modern(json!({"notifications": {"resourceSubscriptions": [uris[0]]}}), "mine")}),
    );
    let ack = m.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // Both hear the task end.
    k.ok("task.cancel", json!({"task": t}));
    for c in [&mut own, &mut m] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "no update for {}", uris[0]);
            let f = c.recv();
            if f["method"] == "notifications/resources/updated" && f["params"]["uri"] == uris[0] {
                break;
            }
        }
    }
}
