//! Leash approvals asked of the user in the MCP client (docs/rules.md §21),
//! through the official Python SDK 2.x: `elicitation/create` as a
//! server-to-client request in the handshake era and as an input_required
//! round at 2026-07-28; accept, decline, cancel, a client error, and a
//! client without the capability (tests/leash_elicit_checks.py).

use crate::common::*;

/// The checks of tests/leash_elicit_checks.py that every transport passes
/// (tests/it/http_sdk.rs runs them over HTTP).
pub const ELICIT_CHECKS: [&str; 8] = [
    "legacy_accept",
    "legacy_decline",
    "legacy_cancel",
    "legacy_error",
    "legacy_no_capability",
    "auto_accept",
    "auto_decline",
    "auto_no_capability",
];

#[test]
fn cap_request_asks_the_user_through_elicitation() {
    if !have_venv(
        "leash_elicit::cap_request_asks_the_user_through_elicitation",
        ".venv",
    ) {
        return;
    }
    run_sdk_checks(
        ".venv",
        "leash_elicit_checks.py",
        &[ELICIT_CHECKS.as_slice(), &["journal_records_decisions"]].concat(),
    );
}

use serde_json::{json, Value};

/// An MCP connection on the daemon socket for token `tok` that declared
/// form elicitation at initialize.
fn mcp(d: &Daemon, session: &str, tok: &str) -> Conn {
    let mut c = d.conn();
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
        "params": {"session": session, "token": tok}}));
    let r = c.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw-test", "version": "1"}}),
    );
    assert_eq!(r["protocolVersion"], json!("2025-11-25"), "{r}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c
}

fn plan(c: &mut Conn, src: &str) -> String {
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_plan", "arguments": {"src": src}}),
    );
    r["structuredContent"]["plan_ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

/// Send `shoal_cap_request` (request id `id`) and read the elicitation it
/// causes.
fn ask(c: &mut Conn, id: u64, plan_ref: &str) -> Value {
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "shoal_cap_request", "arguments": {"plan_ref": plan_ref}}}));
    let e = c.recv();
    assert_eq!(e["method"], json!("elicitation/create"), "{e}");
    assert!(e["id"].is_string(), "{e}");
    assert!(
        e["params"]["message"].as_str().unwrap().contains(plan_ref),
        "{e}"
    );
    e
}

fn approval(root: &Root, plan_ref: &str) -> String {
    let sock = root.socket();
    let (st, out, err) = run(
        root,
        &["plan", "show", plan_ref, "--socket", sock.to_str().unwrap()],
        &[],
    );
    assert_eq!(st, 0, "{err}");
    out
}

/// The wait for the user ends with the call's own cancellation (the client
/// is told with `notifications/cancelled` for the elicitation) and with a
/// hang-up; both leave the plan pending. A late or stray response is never
/// answered, and a response to the open request settles only its own call.
#[test]
fn elicitation_wait_ends_with_cancel_and_hangup() {
    let root = Root::new();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(
        &cfg,
        "[policy.principal.\"agent:r\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\napprove_via = [\"elicitation\", \"cli\"]\nfs.read = [\"/**\"]\n",
    )
    .unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let tok = create_token(&root, "agent:r");

    let mut c = mcp(&d, "raw", &tok);
    let pr = plan(&mut c, "sh { echo one }");
    let e = ask(&mut c, 7, &pr);
    // The caller cancels its call: the elicitation is withdrawn, no reply.
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "user moved on"}}),
    );
    let n = c.recv();
    assert_eq!(n["method"], json!("notifications/cancelled"), "{n}");
    assert_eq!(n["params"]["requestId"], e["id"], "{n}");
    // The answer arrives late: ignored, never answered; the next frame is
    // the ping's reply.
    c.send(&json!({"jsonrpc": "2.0", "id": e["id"], "result": {"action": "accept", "content": {"approve": true}}}));
    c.send(&json!({"jsonrpc": "2.0", "id": "stray", "result": {}}));
    let p = c.call("ping", json!({}));
    assert_eq!(p["result"], json!({}), "{p}");
    assert!(
        approval(&root, &pr).contains("approval: pending"),
        "{}",
        approval(&root, &pr)
    );

    // Asked again and answered: only that request's call settles.
    let e = ask(&mut c, 8, &pr);
    c.send(&json!({"jsonrpc": "2.0", "id": e["id"], "result": {"action": "accept", "content": {"approve": true}}}));
    let r = c.recv();
    assert_eq!(r["id"], json!(8), "{r}");
    let g = &r["result"]["structuredContent"];
    assert_eq!(g["grant"], json!("approved"), "{r}");
    assert_eq!(
        g["elicitation"]["via"],
        json!("MCP elicitation/create via raw-test")
    );

    // A hang-up while the user is being asked: the plan stays pending and
    // the daemon serves on.
    let pr2 = plan(&mut c, "sh { echo two }");
    ask(&mut c, 9, &pr2);
    drop(c);
    let mut k = d.conn();
    k.attach("other");
    assert_eq!(
        k.ok("exec", json!({"src": "1 + 1"}))["value"],
        json!({"$": "int", "v": 2})
    );
    assert!(
        approval(&root, &pr2).contains("approval: pending"),
        "{}",
        approval(&root, &pr2)
    );
}

/// The TypeScript SDK 1.x answers `elicitation/create` (accept, decline);
/// Node and the SDK come from `make node`.
#[test]
fn typescript_sdk_answers_the_elicitation() {
    if !have_node("leash_elicit::typescript_sdk_answers_the_elicitation") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node");
    let node = dir.join("node_modules/node/bin/node");
    assert!(
        node.exists(),
        "no Node.js under {}: run `make node` (or `make test`, which installs it)",
        dir.display()
    );
    let root = Root::new();
    let sock = root.socket();
    let out = std::process::Command::new(&node)
        .arg(dir.join("ts_elicit.mjs"))
        .arg(BIN)
        .arg(&sock)
        .arg(root.path())
        .current_dir(&dir)
        .env("HOME", root.path())
        .output()
        .expect("run node");
    for p in daemons_on(&sock) {
        kill_pid(p);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "TypeScript client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for check in ["ts_accept", "ts_decline"] {
        assert!(
            stdout.contains(&format!("\"check\":\"{check}\",\"ok\":true")),
            "{check} missing:\n{stdout}"
        );
    }
}
