//! MCP 2026-07-28 beside the 2025 handshake (docs/protocol.md §12): raw frames on the
//! daemon socket for the envelope rules, and the Python SDK 2.x `Client`
//! through the shim in both eras (`tests/mcp_era_checks.py`, the legacy
//! suite's checks parametrized by era).

use crate::common::*;
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";

/// `params` with the modern envelope in `_meta` (plus `extra` meta keys).
fn env(mut params: Value, extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    if let (Some(m), Some(x)) = (meta.as_object_mut(), extra.as_object()) {
        for (k, v) in x {
            m.insert(k.clone(), v.clone());
        }
    }
    params["_meta"] = meta;
    params
}

/// The next frame that is not a notification of `skip`.
fn recv_skipping(c: &mut Conn, skip: &str) -> Value {
    loop {
        let f = c.recv();
        if f["method"] != json!(skip) {
            return f;
        }
    }
}

#[test]
fn discover_and_stateless_requests() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let r = c.ok("server/discover", env(json!({}), json!({})));
    let versions = r["supportedVersions"].as_array().unwrap();
    for v in ["2025-03-26", "2025-06-18", "2025-11-25", MODERN] {
        assert!(versions.contains(&json!(v)), "{v}: {r}");
    }
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["cacheScope"], "private");
    assert!(r["ttlMs"].is_u64());
    assert!(r["capabilities"]["tools"].is_object());
    assert!(r["capabilities"]["extensions"].is_object());
    assert!(r["instructions"].as_str().unwrap().contains("shoal_exec"));
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "shoal"
    );

    // No initialize: every request carries its own envelope.
    let tools = c.ok("tools/list", env(json!({}), json!({})));
    assert_eq!(tools["resultType"], "complete");
    assert_eq!(tools["tools"][0]["name"], "shoal_exec");
    assert!(tools["ttlMs"].is_u64());
    let r = c.ok(
        "tools/call",
        env(
            json!({"name": "shoal_exec", "arguments": {"src": "6 * 7"}}),
            json!({}),
        ),
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(
        r["structuredContent"]["value"],
        json!({"$": "int", "v": 42})
    );
    assert!(
        r.get("ttlMs").is_none(),
        "tool results are not cacheable: {r}"
    );
    // The same engine in both eras: the legacy tool list is the modern one.
    let mut legacy = d.conn();
    let lt = legacy.ok("tools/list", json!({}));
    assert_eq!(lt["tools"], tools["tools"]);
    assert!(lt.get("resultType").is_none());

    // Removed methods, unknown methods.
    assert_eq!(
        c.call("ping", env(json!({}), json!({})))["error"]["code"],
        -32601
    );
    assert_eq!(
        c.call(
            "resources/subscribe",
            env(json!({"uri": "shoal://journal"}), json!({}))
        )["error"]["code"],
        -32601
    );
    assert_eq!(
        c.call("nope/nope", env(json!({}), json!({})))["error"]["code"],
        -32601
    );
    // Unknown resource: -32602 with data.uri (the legacy era keeps -32004).
    let r = c.call(
        "resources/read",
        env(json!({"uri": "shoal://out/999"}), json!({})),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["uri"], "shoal://out/999");
    let r = legacy.call("resources/read", json!({"uri": "shoal://out/999"}));
    assert_eq!(r["error"]["code"], -32004, "{r}");
}

#[test]
fn envelope_errors_and_era_lock() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    // A modern version we do not speak: -32022 naming what we do.
    let mut p = env(json!({}), json!({}));
    p["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = c.call("tools/list", p);
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["supported"], json!([MODERN]));
    assert_eq!(r["error"]["data"]["requested"], "2099-01-01");
    // A half-built envelope: -32602 naming the missing key.
    let r = c.call(
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("clientCapabilities"));
    // A bad session name in the envelope.
    let r = c.call("tools/list", env(json!({}), json!({"shoal/session": 7})));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Once modern, the connection stays modern: initialize is -32022,
    // a bare request is -32602.
    c.ok("tools/list", env(json!({}), json!({})));
    let r = c.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["supported"], json!([MODERN]));
    assert_eq!(c.call("tools/list", json!({}))["error"]["code"], -32602);

    // Once the handshake ran, the connection stays legacy.
    let mut l = d.conn();
    let r = l.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(r["protocolVersion"], "2025-11-25");
    assert_eq!(l.ok("ping", json!({})), json!({}));
    let r = l.call("tools/list", env(json!({}), json!({})));
    assert_eq!(r["error"]["code"], -32600, "{r}");
}

#[test]
fn sessions_are_named_explicitly() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let exec = |c: &mut Conn, src: &str, session: Option<&str>| {
        let extra = session.map_or(json!({}), |s| json!({"shoal/session": s}));
        c.ok(
            "tools/call",
            env(
                json!({"name": "shoal_exec", "arguments": {"src": src}}),
                extra,
            ),
        )
    };
    let mut a = d.conn();
    exec(&mut a, "let here = \"a\"", Some("alpha"));
    // Another connection naming the same session sees its bindings: the
    // session is the request's, not the connection's.
    let mut b = d.conn();
    let r = exec(&mut b, "here", Some("alpha"));
    assert_eq!(
        r["structuredContent"]["value"],
        json!({"$": "str", "v": "a"}),
        "{r}"
    );
    let r = exec(&mut b, "here", None);
    assert_eq!(r["isError"], true, "the default session has no `here`: {r}");
    let mut k = d.conn();
    k.attach("probe");
    let sessions = k.ok("session.list", json!({}));
    let text = sessions.to_string();
    assert!(text.contains("alpha"), "{text}");
}

#[test]
fn listen_streams_journal_and_events() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.send(&json!({"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen", "params": env(json!({
        "notifications": {"resourceSubscriptions": ["shoal://journal", "shoal://events/user.raw", "shoal://nowhere/x"],
                          "toolsListChanged": true}
    }), json!({}))}));
    let ack = c.recv();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "L1"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["shoal://journal", "shoal://events/user.raw"]}),
        "only what is honored"
    );
    // An exec lands in the journal: a tagged update on the stream.
    c.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": env(
        json!({"name": "shoal_exec", "arguments": {"src": "1 + 1"}}), json!({}))}),
    );
    let mut got_reply = false;
    let mut got_update = false;
    while !(got_reply && got_update) {
        let f = c.recv();
        if f["id"] == json!(7) {
            assert_eq!(f["result"]["resultType"], "complete");
            got_reply = true;
        } else if f["method"] == "notifications/resources/updated" {
            assert_eq!(f["params"]["uri"], "shoal://journal", "{f}");
            assert_eq!(
                f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
                "L1"
            );
            got_update = true;
        }
    }
    // Events published by a kernel client reach the stream.
    let mut k = d.conn();
    k.attach("pub");
    k.ok(
        "events.publish",
        json!({"channel": "user.raw", "payload": {"n": 1}}),
    );
    let f = c.recv();
    assert_eq!(f["params"]["uri"], "shoal://events/user.raw", "{f}");
    // Cancelling the listen request ends the stream: nothing more arrives
    // and no answer to L1 is sent.
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L1"}}));
    // The connections run on different threads: once a request sent after the
    // cancellation is answered, the cancellation has been taken.
    let r = c.ok("tools/list", env(json!({}), json!({})));
    assert!(r["tools"].is_array(), "{r}");
    k.ok(
        "events.publish",
        json!({"channel": "user.raw", "payload": {"n": 2}}),
    );
    let r = c.ok("tools/list", env(json!({}), json!({})));
    assert!(
        r["tools"].is_array(),
        "the next frame is this answer, no update"
    );
    // A bad filter is refused, naming what is wrong.
    let r = c.call("subscriptions/listen", env(json!({}), json!({})));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["path"], ".", "{r}");
    let r = c.call(
        "subscriptions/listen",
        env(
            json!({"notifications": {"resourceSubscriptions": ["shoal://journal", 7]}}),
            json!({}),
        ),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        r["error"]["data"]["path"], "notifications.resourceSubscriptions[1]",
        "{r}"
    );
}

#[test]
fn listen_streams_pty_screens() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let call = |c: &mut Conn, name: &str, args: Value| {
        c.ok(
            "tools/call",
            env(
                json!({"name": name, "arguments": args}),
                json!({"shoal/session": "ptys"}),
            ),
        )
    };
    let r = call(&mut c, "shoal_pty_open", json!({"cmd": "cat"}));
    let id = r["structuredContent"]["pty_id"].clone();
    let uri = format!(
        "shoal://pty/{}",
        id.as_str().unwrap_or_else(|| panic!("pty open: {r}"))
    );
    c.send(
        &json!({"jsonrpc": "2.0", "id": "P", "method": "subscriptions/listen", "params": env(json!({
        "notifications": {"resourceSubscriptions": [uri]}}), json!({"shoal/session": "ptys"}))}),
    );
    let ack = c.recv();
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "{ack}"
    );
    c.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": env(
        json!({"name": "shoal_pty_send", "arguments": {"pty_id": id, "input": "hello\n"}}), json!({"shoal/session": "ptys"}))}));
    // The send's answer and a tagged screen update, in either order.
    let (mut replied, mut update) = (false, None);
    while !replied || update.is_none() {
        let f = c.recv();
        if f["id"] == json!(9) {
            replied = true;
        } else if f["method"] == "notifications/resources/updated" {
            update = Some(f);
        }
    }
    let f = update.unwrap();
    assert_eq!(f["params"]["uri"], json!(uri));
    assert_eq!(
        f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "P"
    );
    // Cancel the stream, then close the PTY: its answer is the next frame
    // but for updates that were already on their way.
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "P"}}));
    c.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": env(
        json!({"name": "shoal_pty_close", "arguments": {"pty_id": id}}), json!({"shoal/session": "ptys"}))}));
    let r = recv_skipping(&mut c, "notifications/resources/updated");
    assert_eq!(r["id"], json!(10), "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
}

/// `tests/mcp_era_checks.py` through the shim in `mode`; its stdout.
fn era_suite(mode: &str) -> String {
    run_sdk_script(".venv", "mcp_era_checks.py", &[mode])
}

/// The checks the legacy suite (`tests/it/mcp_sdk.rs`) asserts, in both eras.
const LEGACY_CHECKS: [&str; 10] = [
    "exec_valid",
    "exec_invalid",
    "get_valid",
    "get_invalid",
    "exec_elided",
    "resource_read_out",
    "subscription_update",
    "unsubscribed_stops",
    "progress_notified",
    "cancel_stops_work",
];

fn assert_checks(stdout: &str, extra: &[&str]) {
    for check in LEGACY_CHECKS.iter().chain(extra) {
        assert!(
            stdout.contains(&format!("\"check\": \"{check}\", \"ok\": true")),
            "{check}:\n{stdout}"
        );
    }
}

#[test]
fn python_sdk_auto_settles_on_2026() {
    if !have_venv("mcp_modern::python_sdk_auto_settles_on_2026", ".venv") {
        return;
    }
    let out = era_suite("auto");
    assert!(out.contains(&format!("\"version\": \"{MODERN}\"")), "{out}");
    assert_checks(
        &out,
        &[
            "era",
            "resource_not_found",
            "explicit_session",
            "listen_acknowledged",
        ],
    );
}

#[test]
fn python_sdk_pinned_to_2025_11_25() {
    if !have_venv("mcp_modern::python_sdk_pinned_to_2025_11_25", ".venv") {
        return;
    }
    let out = era_suite("legacy");
    assert!(out.contains("\"version\": \"2025-11-25\""), "{out}");
    assert_checks(&out, &["era", "resource_not_found"]);
}
