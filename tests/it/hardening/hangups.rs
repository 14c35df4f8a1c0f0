//! Every wait ends with its caller: a client that hangs up while
//! it waits (`task.await`, a PTY `wait_for`, an MCP tool call) or while it is
//! not reading its event stream frees its place in `max_connections` at
//! once; a subscriber that stops reading is dropped after a bounded queue
//! and `[limits] write_stall_ms`; and the local user always reaches
//! `daemon.status` and `session.attach` through a reserved place.

use std::io::Read;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::common::*;

const FOUR: &str = "[limits]\nmax_connections = 4\n";

/// Connections in use, as `daemon.status` counts them (asked on `c`, so at least 1).
fn connections_used(c: &mut Conn) -> u64 {
    c.ok("daemon.status", json!({}))["limits"]["connections"]["used"]
        .as_u64()
        .unwrap()
}

/// Wait until `daemon.status` on `c` counts `n` connections.
fn wait_connections(c: &mut Conn, n: u64) {
    eventually(
        &format!("{n} connections in use"),
        Duration::from_secs(10),
        || (connections_used(c) == n).then_some(()),
    );
}

// Six clients each await an endless task and hang up, under max_connections = 4:
// every place comes back, and a seventh client is served.
#[test]
fn task_await_then_hang_up_frees_the_place() {
    let root = Root::new();
    let d = start_with_config(&root, FOUR);
    let mut probe = d.conn();
    probe.attach("w");
    let t = probe.ok("exec", json!({"src": "sleep 1000", "background": true}));
    let task = t["task"].as_str().unwrap().to_string();
    for i in 0..6 {
        let mut c = d.conn();
        c.attach("w");
        c.send(
            &json!({"jsonrpc": "2.0", "id": 99, "method": "task.await", "params": {"task": task}}),
        );
        // The await is being served (the task is still running) before the hang-up.
        wait_connections(&mut probe, 2);
        drop(c);
        wait_connections(&mut probe, 1);
        let _ = i;
    }
    let mut late = d.conn();
    late.attach("w");
    assert_eq!(
        late.ok("exec", json!({"src": "6 * 7"}))["value"]["v"],
        json!(42)
    );
    probe.ok("task.cancel", json!({"task": task}));
}

// A PTY read waiting for text that never comes ends with its hang-up.
#[test]
fn pty_wait_for_then_hang_up_frees_the_place() {
    let root = Root::new();
    let d = start_with_config(&root, FOUR);
    let mut probe = d.conn();
    probe.attach("p");
    let o = probe.ok("pty.open", json!({"cmd": "cat"}));
    let id = o["pty_id"].clone();
    for _ in 0..5 {
        let mut c = d.conn();
        c.attach("p");
        c.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "pty.read",
            "params": {"pty_id": id, "wait_for": "never-printed", "timeout_ms": 600000}}));
        wait_connections(&mut probe, 2);
        drop(c);
        wait_connections(&mut probe, 1);
    }
    probe.ok("pty.close", json!({"pty_id": id}));
}

// An MCP tools/call that waits (shoal_pty_read wait_for) ends with its hang-up.
#[test]
fn mcp_call_then_hang_up_frees_the_place() {
    let root = Root::new();
    let d = start_with_config(&root, FOUR);
    let mut probe = d.conn();
    probe.attach("m");
    let o = probe.ok("pty.open", json!({"cmd": "cat"}));
    let id = o["pty_id"].clone();
    for _ in 0..5 {
        let mut m = mcp(&d, "m");
        m.send(
            &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "shoal_pty_read",
            "arguments": {"pty_id": id, "wait_for": "never-printed", "timeout_ms": 600000}}}),
        );
        wait_connections(&mut probe, 2);
        drop(m);
        wait_connections(&mut probe, 1);
    }
    probe.ok("pty.close", json!({"pty_id": id}));
}

/// Publish `n` events of about 4 KiB on `channel` from `c`.
fn flood(c: &mut Conn, channel: &str, n: usize) {
    let pad = "x".repeat(4096);
    for i in 0..n {
        c.ok(
            "events.publish",
            json!({"channel": channel, "payload": {"i": i, "pad": pad}}),
        );
    }
}

// Subscribers that stop reading, then hang up, are all released.
#[test]
fn stuck_subscribers_that_hang_up_are_released() {
    let root = Root::new();
    // A long stall limit: only the hang-up can free these places.
    let d = start_with_config(
        &root,
        "[limits]\nmax_connections = 8\nwrite_stall_ms = 600000\n",
    );
    let mut probe = d.conn();
    probe.attach("s");
    let mut subs = Vec::new();
    for _ in 0..6 {
        let mut s = d.conn();
        s.attach("s");
        s.ok("events.subscribe", json!({"channel": "user.flood"}));
        subs.push(s);
    }
    // Far more than the socket buffers and the write queue hold: every subscriber is stuck.
    flood(&mut probe, "user.flood", 600);
    assert_eq!(connections_used(&mut probe), 7);
    drop(subs);
    wait_connections(&mut probe, 1);
    // Room for seven more.
    let more: Vec<Conn> = (0..7)
        .map(|_| {
            let mut c = d.conn();
            c.attach("s");
            c
        })
        .collect();
    assert_eq!(connections_used(&mut probe), 8);
    drop(more);
}

// A subscriber that stops reading (and keeps its socket open) is dropped after the
// write queue fills and `write_stall_ms` passes; the others keep their events.
#[test]
fn a_subscriber_that_stops_reading_is_dropped() {
    let root = Root::new();
    let d = start_with_config(&root, "[limits]\nwrite_stall_ms = 200\n");
    let mut probe = d.conn();
    probe.attach("s");
    let mut stuck = d.conn();
    stuck.attach("s");
    stuck.ok("events.subscribe", json!({"channel": "user.flood"}));
    flood(&mut probe, "user.flood", 600);
    wait_connections(&mut probe, 1);
    // The daemon closed it: after what it had written, the stream ends.
    stuck
        .stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut sink = Vec::new();
    stuck.stream.read_to_end(&mut sink).unwrap();
    assert!(root.log().contains("stopped reading"), "{}", root.log());
}

// With every ordinary place taken, the local user still gets `daemon.status`
// (what `shoal status` asks) and `session.attach`.
#[test]
fn the_local_user_has_a_reserved_place() {
    let root = Root::new();
    let d = start_with_config(&root, "[limits]\nmax_connections = 2\n");
    let held: Vec<Conn> = (0..2)
        .map(|_| {
            let mut c = d.conn();
            c.attach("h");
            c
        })
        .collect();
    let sock = root.socket();
    let (code, out, err) = run(&root, &["status", "--socket", sock.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("connections"), "{out}");
    let mut r = d.conn();
    r.attach("h");
    // `shoal status` has hung up; its place is free once the daemon reads the hang-up.
    wait_connections(&mut r, 3);
    // The reserve serves the local user only: a token is refused there.
    let token = create_token(&root, "agent");
    let mut t = d.conn();
    let e = t.call("session.attach", json!({"session": "t", "token": token}));
    assert_eq!(err_code(&e), -32040, "{e}");
    assert_eq!(e["error"]["data"]["limit"], json!("max_connections"), "{e}");
    drop(held);
}

// A `cancel` notification ends a wait at once with a cancelled error; the task runs on.
#[test]
fn cancel_ends_a_task_await() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let t = c.ok("exec", json!({"src": "sleep 1000", "background": true}));
    let task = t["task"].as_str().unwrap().to_string();
    c.send(&json!({"jsonrpc": "2.0", "id": 41, "method": "task.await", "params": {"task": task}}));
    c.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": 41}}));
    let r = recv_id(&mut c, 41);
    assert_eq!(r["error"]["data"]["code"], json!("cancelled"), "{r}");
    let rec = c.ok("task.get", json!({"task": task}));
    assert_eq!(rec["state"], json!("running"), "{rec}");
    c.ok("task.cancel", json!({"task": task}));
}
