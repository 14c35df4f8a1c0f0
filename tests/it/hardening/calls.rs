//! A call's own lifetime: cancelling one call never touches another of the
//! session, and a connection that goes away cancels its foreground work (a
//! half-closed one still gets its answer). Each test starts its own daemon.

use std::net::Shutdown;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::common::*;

// Row 7: cancelling a call queued behind another in the same session removes only it; the
// running call is untouched. Cancelling the running call stops only that one.
#[test]
fn cancellation_belongs_to_its_call() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("shared");
    // The running call waits for a gate only this test opens: the queued
    // call's cancel is answered while it still runs.
    let gate = root.path().join("gate");
    let src = format!(
        "sh {{ until [ -e {} ]; do sleep 0.01; done; echo done }}",
        gate.display()
    );
    a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "exec",
        "params": {"src": src, "position": "value"}}));
    wait_busy(&d, "shared");
    let mut b = d.conn();
    b.attach("shared");
    b.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "exec", "params": {"src": "6 * 7"}}));
    b.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": 7}}));
    let r = b.recv();
    assert_eq!(r["id"], json!(7));
    assert_eq!(r["error"]["data"]["code"], json!("cancelled"), "{r}");
    std::fs::write(&gate, "").unwrap();
    let r = a.recv();
    assert_eq!(r["id"], json!(1));
    let out = r["result"]["value"].to_string();
    assert!(out.contains("done"), "the running call was touched: {r}");

    // The same through MCP: a queued call's notifications/cancelled leaves the running one.
    a.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "exec",
        "params": {"src": "sh { sleep 2; echo again }", "position": "value"}}));
    wait_busy(&d, "shared");
    let mut m = mcp(&d, "shared");
    m.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "7 * 7"}}}));
    m.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
    );
    let r = a.recv();
    assert!(r["result"]["value"].to_string().contains("again"), "{r}");

    // Cancelling the running call stops it (a pure language loop: the interrupter).
    a.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "exec", "params": {"src": "while true { }"}}),
    );
    wait_busy(&d, "shared");
    a.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": 3}}));
    let r = a.recv();
    assert_eq!(r["id"], json!(3));
    assert!(r.get("error").is_some(), "{r}");
    assert_eq!(
        a.ok("exec", json!({"src": "1 + 1"}))["value"],
        json!({"$": "int", "v": 2})
    );
    // A cancel naming nothing (or an answered call) is ignored.
    a.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": 3}}));
    a.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {}}));
    assert_eq!(
        a.ok("exec", json!({"src": "2 + 2"}))["value"],
        json!({"$": "int", "v": 4})
    );
}

// Row 8: a foreground call whose connection closes is cancelled (kernel and MCP); a
// half-closed connection still gets its answer.
#[test]
fn a_disconnect_cancels_foreground_work() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("loop");
    a.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "while true { }"}}),
    );
    wait_busy(&d, "loop");
    drop(a);
    let mut b = d.conn();
    b.attach("loop");
    b.stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    assert_eq!(
        b.ok("exec", json!({"src": "1 + 1"}))["value"],
        json!({"$": "int", "v": 2})
    );

    let marker = root.path().join("mcp-marker");
    let mut m = mcp(&d, "loop");
    m.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "shoal_exec",
        "arguments": {"src": format!("sh {{ sleep 1000; touch {} }}", marker.display())}}}),
    );
    wait_busy(&d, "loop");
    drop(m);
    assert_eq!(
        b.ok("exec", json!({"src": "3"}))["value"],
        json!({"$": "int", "v": 3})
    );
    // `sleep 1000` ends only by the hang-up's cancel.
    session_busy(&mut b, "loop", false);
    assert!(!marker.exists());

    // Half-close: the request is still answered.
    let mut h = d.conn();
    h.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "session.attach", "params": {"session": "loop"}}));
    h.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "exec", "params": {"src": "sh { sleep 0.3 }; 5"}}));
    h.stream.shutdown(Shutdown::Write).unwrap();
    assert!(h.recv().get("result").is_some());
    let r = h.recv();
    assert_eq!(r["result"]["value"], json!({"$": "int", "v": 5}), "{r}");
}

// A client that half-closed (it sends nothing more but waits for its answers) and then
// hangs up completely cancels what it was waiting for, on both protocols: the hang-up
// is seen while the call runs, after the end of its requests.
#[test]
fn a_hang_up_after_a_half_close_cancels_the_call() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut b = d.conn();
    b.attach("observer");
    for (i, kernel) in [true, false].into_iter().enumerate() {
        let session = format!("half{i}");
        let marker = root.path().join(format!("marker{i}"));
        let src = format!("sh {{ sleep 1000; touch {} }}", marker.display());
        let c = if kernel {
            let mut c = d.conn();
            c.attach(&session);
            c.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "exec", "params": {"src": src}}));
            c
        } else {
            let mut m = mcp(&d, &session);
            m.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "shoal_exec", "arguments": {"src": src}}}));
            m
        };
        wait_busy(&d, &session);
        c.stream.shutdown(Shutdown::Write).unwrap();
        // Still running: a half-close waits for the answer.
        session_busy(&mut b, &session, true);
        drop(c);
        // `sleep 1000` ends only by the hang-up's cancel.
        session_busy(&mut b, &session, false);
        assert!(!marker.exists());
    }
}
