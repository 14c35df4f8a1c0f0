//! A log line written on the session's worker thread (off the connection's request span)
//! names its call: the worker enters an `exec` span with the connection id, the session and
//! the request id, so the daemon's log leads from an evaluation or journal hand-off line to
//! the request, over both protocols.

use std::time::Duration;

use crate::common::*;
use serde_json::json;

#[test]
fn worker_log_lines_carry_the_request_id() {
    let root = Root::new();
    let d = Daemon::start_with(&root, &root.socket(), &[], &[("SHOAL_LOG", "shoal=debug")]);
    let mut c = d.conn();
    c.attach("spanned");
    c.send(
        &json!({"jsonrpc": "2.0", "id": "req-4242", "method": "exec",
        "params": {"src": "6 * 7"}}),
    );
    let r = c.recv();
    assert_eq!(r["id"], json!("req-4242"), "{r}");
    assert_eq!(r["result"]["value"]["v"], json!(42), "{r}");

    // The same over MCP, with a numeric id.
    let mut m = d.mcp_legacy("spanned");
    m.send(
        &json!({"jsonrpc": "2.0", "id": 777123, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "1 + 1"}}}),
    );
    let r = m.recv();
    assert_eq!(r["id"], json!(777123), "{r}");

    let root = &root;
    let line = |what: &'static str, id: &'static str| {
        move || {
            root.log()
                .lines()
                .find(|l| l.contains(what) && l.contains(id))
                .map(str::to_string)
        }
    };
    let k = eventually(
        "the kernel exec's worker line",
        Duration::from_secs(10),
        line("exec evaluated", "\"req-4242\""),
    );
    assert!(k.contains("exec{"), "{k}");
    assert!(k.contains("session=\"spanned\""), "{k}");
    assert!(k.contains("conn="), "{k}");
    let j = eventually(
        "the journal hand-off line",
        Duration::from_secs(10),
        line("handed to the journal", "\"req-4242\""),
    );
    assert!(j.contains("session=\"spanned\""), "{j}");
    let m = eventually(
        "the MCP exec's worker line",
        Duration::from_secs(10),
        line("exec evaluated", "id=777123"),
    );
    assert!(m.contains("session=\"spanned\""), "{m}");
}
