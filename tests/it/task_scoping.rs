//! Task events are scoped to their session: `task.N` and the jobs channel of
//! another session are refused (`-32021`) on every kernel and MCP path, and a
//! jobs watcher hears of its own session's tasks only.

use std::time::{Duration, Instant};

use crate::common::{Conn, Daemon, Root};
use serde_json::{json, Value};

fn start(c: &mut Conn, src: &str) -> String {
    let r = c.ok("exec", json!({"src": src, "background": true}));
    r["task"].as_str().expect("task ref").to_string()
}

/// Frames until one satisfies `done` (deadline-bounded); the frames before it.
fn until(c: &mut Conn, what: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "never saw {what}; saw {seen:?}");
        let f = c.recv();
        if done(&f) {
            return seen;
        }
        seen.push(f);
    }
}

fn is_event(f: &Value, channel: &str) -> bool {
    f["method"] == "event" && f["params"]["channel"] == channel
}

fn is_update(f: &Value, uri: &str) -> bool {
    f["method"] == "notifications/resources/updated" && f["params"]["uri"] == uri
}

#[test]
fn another_sessions_task_events_are_32021_on_kernel_and_mcp() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("alpha");
    let t = start(&mut a, "sh { sleep 30 }");
    let n = t.strip_prefix("task:").unwrap().to_string();
    let ch = format!("task.{n}");

    let mut b = d.conn();
    b.attach("beta");
    for m in ["events.read", "events.subscribe"] {
        for c in [ch.as_str(), "jobs.alpha", "task.x"] {
            let r = b.call(m, json!({"channel": c}));
            assert_eq!(r["error"]["code"], json!(-32021), "{m} {c}: {r}");
        }
    }
    let mut mb = d.mcp_legacy("beta");
    for u in [
        format!("shoal://events/{ch}"),
        "shoal://events/jobs.alpha".to_string(),
    ] {
        let r = mb.call("resources/read", json!({"uri": u}));
        assert_eq!(r["error"]["code"], json!(-32021), "read {u}: {r}");
        let r = mb.call("resources/subscribe", json!({"uri": u}));
        assert_eq!(r["error"]["code"], json!(-32021), "subscribe {u}: {r}");
    }

    // The owner may: kernel and MCP.
    let r = a.ok("events.read", json!({"channel": ch}));
    assert_eq!(r["channel"], json!(ch), "{r}");
    let mut aw = d.conn();
    aw.attach("alpha");
    let r = aw.ok("events.subscribe", json!({"channel": ch}));
    assert_eq!(r["subscribed"], json!(true), "{r}");
    let mut ma = d.mcp_legacy("alpha");
    let r = ma.ok(
        "resources/read",
        json!({"uri": format!("shoal://events/{ch}")}),
    );
    assert!(r["contents"][0]["text"].is_string(), "{r}");
    ma.ok("resources/subscribe", json!({"uri": "shoal://jobs"}));
    a.ok("task.cancel", json!({"task": t}));
    until(&mut ma, "alpha's jobs update", |f| {
        is_update(f, "shoal://jobs")
    });
}

#[test]
fn a_jobs_watcher_hears_of_its_own_sessions_tasks_only() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("alpha");
    let mut b = d.conn();
    b.attach("beta");

    // Beta watches its jobs (kernel and MCP) and a barrier channel.
    let r = b.ok("events.subscribe", json!({"channel": "jobs"}));
    assert_eq!(r["channel"], json!("jobs.beta"), "{r}");
    b.ok("events.subscribe", json!({"channel": "user.barrier"}));
    let mut mb = d.mcp_legacy("beta");
    mb.ok("resources/subscribe", json!({"uri": "shoal://jobs"}));
    mb.ok(
        "resources/subscribe",
        json!({"uri": "shoal://events/user.barrier"}),
    );
    // Alpha's task starts and ends; its jobs events are published.
    let t = start(&mut a, "6 * 7");
    let n = t.strip_prefix("task:").unwrap();
    let r = a.ok("task.await", json!({"task": t, "timeout_ms": 20000}));
    assert_eq!(r["state"], json!("completed"), "{r}");
    // The final task.N event is published just before the last jobs event,
    // so once the bus shows it, a barrier publish is ordered after every
    // alpha jobs event.
    crate::common::eventually("alpha's final event", Duration::from_secs(20), || {
        let r = a.ok("events.read", json!({"channel": format!("task.{n}")}));
        let last = r["events"].as_array()?.last()?.clone();
        last["payload"].to_string().contains("state").then_some(())
    });
    // Every alpha jobs event is on the bus before the barrier.
    let r = a.ok("events.read", json!({"channel": "jobs"}));
    assert_eq!(r["channel"], json!("jobs.alpha"), "{r}");
    assert!(!r["events"].as_array().unwrap().is_empty(), "{r}");
    a.ok(
        "events.publish",
        json!({"channel": "user.barrier", "payload": 1}),
    );

    // Beta's watchers heard nothing before the barrier.
    let seen = until(&mut b, "the barrier (kernel)", |f| {
        is_event(f, "user.barrier")
    });
    assert!(seen.is_empty(), "beta's kernel heard: {seen:?}");
    let seen = until(&mut mb, "the barrier (MCP)", |f| {
        is_update(f, "shoal://events/user.barrier")
    });
    assert!(seen.is_empty(), "beta's MCP heard: {seen:?}");
    let r = b.ok("events.read", json!({"channel": "jobs"}));
    assert_eq!(r["events"], json!([]), "{r}");

    // Beta's own task: both watchers hear of it.
    let mut bt = d.conn();
    bt.attach("beta");
    let tb = start(&mut bt, "6 * 7");
    until(&mut b, "beta's jobs event", |f| {
        is_event(f, "jobs.beta") && f["params"]["payload"].to_string().contains(&tb)
    });
    until(&mut mb, "beta's jobs update", |f| {
        is_update(f, "shoal://jobs")
    });
    let r = b.ok("events.unsubscribe", json!({"channel": "jobs"}));
    assert_eq!(r["subscribed"], json!(false), "{r}");
}

#[test]
fn a_listen_stream_on_jobs_is_scoped_too() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = d.conn();
    let listen = |session: &str, uri: &str| {
        json!({"notifications": {"resourceSubscriptions": [uri]},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                "shoal/session": session,
        }})
    };
    m.send(
        &json!({"jsonrpc": "2.0", "id": "L0", "method": "subscriptions/listen",
        "params": listen("beta", "shoal://events/jobs.alpha")}),
    );
    let r = m.recv();
    assert_eq!(r["id"], "L0", "{r}");
    assert_eq!(r["error"]["code"], json!(-32021), "{r}");

    m.send(
        &json!({"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
        "params": listen("beta", "shoal://jobs")}),
    );
    let ack = m.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let mut a = d.conn();
    a.attach("alpha");
    let ta = start(&mut a, "6 * 7");
    a.ok("task.await", json!({"task": ta, "timeout_ms": 20000}));
    let mut b = d.conn();
    b.attach("beta");
    let tb = start(&mut b, "6 * 7");
    b.ok("task.await", json!({"task": tb, "timeout_ms": 20000}));
    // Beta's stream hears beta's task (and, checked by the bus history, alpha's
    // task published nothing on beta's jobs channel).
    until(&mut m, "beta's jobs update", |f| {
        is_update(f, "shoal://jobs")
    });
    let r = b.ok("events.read", json!({"channel": "jobs"}));
    for e in r["events"].as_array().unwrap() {
        assert!(e["payload"].to_string().contains(&tb), "{r}");
    }
}
