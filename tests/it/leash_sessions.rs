//! Sessions have an owner (docs/rules.md §21): against a real daemon, through the kernel
//! socket and MCP, a token principal cannot attach to, read, drive, define in, close or
//! crowd out the local user's sessions, hears only its own sessions' events, reads (and
//! only reads) what its policy `sessions` shares, while the local uid reaches everything.
//! Each refusal is judged by its outcome (values, files, later answers), with the same
//! operation working for the owner as the control. It never touches another test's root.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

const AGENT: &str = "agent:own";

fn code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {r}"))
}

/// A daemon whose config gives `AGENT` a working policy that shares `shared-*`.
fn start(extra: &str) -> (Root, Daemon) {
    let root = Root::new();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{extra}
[policy.principal."{AGENT}"]
opaque = "allow"
auto_apply = "in-grant"
proc_spawn = ["*"]
sessions = ["shared-*"]

[policy.principal."{AGENT}".fs]
read = ["/**"]
write = ["/tmp/**"]
delete = ["/tmp/**"]
"#
        ),
    )
    .unwrap();
    let d = restart(&root);
    (root, d)
}

/// The daemon of `root` with its config (again, after a stop).
fn restart(root: &Root) -> Daemon {
    let cfg = root.path().join("shoal.toml");
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    )
}

/// A kernel connection attached to `session` with `token`; the attach result.
fn token_conn(d: &Daemon, session: &str, token: &str) -> (Conn, Value) {
    let mut c = d.conn();
    let r = c.attach_token(session, token);
    assert!(r.get("error").is_none(), "token attach to {session}: {r}");
    (c, r["result"].clone())
}

/// The error message with the session name taken out.
fn words(r: &Value, name: &str) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {r}"))
        .replace(name, "NAME")
}

#[test]
fn a_token_cannot_reach_the_local_users_session() {
    let (root, d) = start("");
    let t = create_token(&root, AGENT);
    let mut user = d.conn();
    user.attach("mine");
    user.ok(
        "exec",
        json!({"src": "let secret = \"user-secret-1\"\nsecret"}),
    );

    // Attach by the user's name: the token's own session of that name, `mine@agent:own`
    // (a token's sessions are named NAME@PRINCIPAL), never the user's.
    let mut a = d.conn();
    let r = a.attach_token("mine", &t);
    assert_eq!(
        r["result"]["session"],
        json!(format!("mine@{AGENT}")),
        "{r}"
    );
    assert_eq!(r["result"]["created"], json!(true), "{r}");
    let got = a.call("exec", json!({"src": "secret"}));
    assert!(!got.to_string().contains("user-secret-1"), "{got}");
    let (mut own, att) = token_conn(&d, "agent-own", &t);
    assert_eq!(att["owner"], json!(AGENT), "{att}");
    assert_eq!(att["access"], json!("full"));
    // Close: -32010, worded exactly as a refusal to close a session that does not exist.
    let missing = own.call("session.close", json!({"session": "no-such-session"}));
    assert_eq!(code(&missing), -32010, "{missing}");
    let foreign = own.call("session.close", json!({"session": "mine"}));
    assert_eq!(code(&foreign), -32010, "{foreign}");
    assert_eq!(words(&foreign, "mine"), words(&missing, "no-such-session"));

    // Not listed to the token; listed (with its owner) to the user.
    let l = own.ok("session.list", json!({}));
    let names: Vec<&str> = l["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![format!("agent-own@{AGENT}"), format!("mine@{AGENT}")],
        "{l}"
    );
    let st = own.ok("daemon.status", json!({}));
    assert!(!st.to_string().contains("\"mine\""), "{st}");
    let st = user.ok("daemon.status", json!({}));
    let row = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!(format!("agent-own@{AGENT}")))
        .cloned()
        .unwrap_or_else(|| panic!("{st}"));
    assert_eq!(row["owner"], json!(AGENT));

    // Its own session's out:1 is its own value, never the user's.
    own.ok("exec", json!({"src": "\"agent-value\""}));
    let v = own.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "agent-value"}), "{v}");

    // The user's session survived and still answers its owner.
    let v = user.ok("exec", json!({"src": "secret"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "user-secret-1"}), "{v}");
    let r = user.ok("session.close", json!({"session": "mine"}));
    assert_eq!(r["closed"], json!(true));

    // The local uid attaches to the token's session, reads it and works in it.
    let mut u2 = d.conn();
    let att = u2.attach(&format!("agent-own@{AGENT}"));
    assert_eq!(att["created"], json!(false), "{att}");
    assert_eq!(att["access"], json!("full"));
    let v = u2.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "agent-value"}), "{v}");
    let v = u2.ok("exec", json!({"src": "1 + 1"}));
    assert_eq!(v["value"], json!({"$": "int", "v": 2}));
}

#[test]
fn a_token_cannot_fill_max_sessions() {
    let (root, d) = start("[limits]\nmax_sessions = 8\nmax_sessions_per_principal = 3\n");
    let t = create_token(&root, AGENT);
    let mut a = d.conn();
    for i in 0..3 {
        let r = a.attach_token(&format!("agent-{i}"), &t);
        assert_eq!(r["result"]["created"], json!(true), "{r}");
    }
    let r = a.attach_token("agent-3", &t);
    assert_eq!(code(&r), -32040, "{r}");
    assert_eq!(
        r["error"]["data"]["limit"],
        json!("max_sessions_per_principal"),
        "{r}"
    );
    // Its existing sessions still take it back; the local user still creates sessions.
    let r = a.attach_token("agent-1", &t);
    assert_eq!(r["result"]["created"], json!(false), "{r}");
    let mut u = d.conn();
    for i in 0..4 {
        let r = u.attach(&format!("user-{i}"));
        assert_eq!(r["created"], json!(true), "{r}");
    }
    let st = u.ok("daemon.status", json!({}));
    assert_eq!(
        st["limits"]["sessions_per_principal"],
        json!({"used": 3, "max": 3, "key": "max_sessions_per_principal"}),
        "{st}"
    );
}

#[test]
fn a_shared_session_is_read_only_for_its_reader() {
    let (root, d) = start("");
    let t = create_token(&root, AGENT);
    let dir = tempfile::Builder::new()
        .prefix("shs")
        .tempdir_in("/tmp")
        .unwrap();
    let file: PathBuf = dir.path().join("typed");
    let mut user = d.conn();
    user.attach("shared-1");
    user.ok("exec", json!({"src": "\"shared-value\""}));
    let pty = user.ok(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", format!("cat > {}", file.display())]}),
    );
    let id = pty["pty_id"].clone();

    let (mut r, att) = token_conn(&d, "shared-1", &t);
    assert_eq!(att["access"], json!("read"), "{att}");
    assert_eq!(att["created"], json!(false));
    // Reads work.
    let v = r.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "shared-value"}), "{v}");
    let l = r.ok("pty.list", json!({}));
    assert_eq!(l["ptys"][0]["pty_id"], id, "{l}");
    r.ok("pty.read", json!({"pty_id": id}));
    r.ok("task.list", json!({}));
    // Acting does not.
    for (m, p) in [
        ("exec", json!({"src": "fn greet() { \"evil\" }"})),
        ("exec", json!({"src": "\"x\"", "mode": "plan"})),
        ("exec", json!({"src": "sleep 1", "background": true})),
        ("explain", json!({"src": "\"x\""})),
        ("pty.send", json!({"pty_id": id, "input": "evil\n"})),
        ("pty.resize", json!({"pty_id": id, "rows": 5, "cols": 5})),
        ("pty.close", json!({"pty_id": id})),
        ("pty.open", json!({"cmd": "true"})),
        ("events.publish", json!({"channel": "user.x", "payload": 1})),
        ("session.close", json!({"session": "shared-1"})),
        ("session.close", json!({})),
    ] {
        let e = r.call(m, p.clone());
        assert_eq!(code(&e), -32010, "{m} {p}: {e}");
    }
    // Outcome: nothing the reader sent reached the program, nothing it defined exists,
    // the PTY and the session are alive for their owner.
    user.ok("pty.send", json!({"pty_id": id, "input": "good\n"}));
    eventually("the owner's input on disk", Duration::from_secs(10), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|s| s.contains("good"))
    });
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "good\n");
    let g = user.call("exec", json!({"src": "greet()"}));
    assert!(g.get("error").is_some(), "greet was defined: {g}");
    let v = user.ok("exec", json!({"src": "\"still-here\""}));
    assert_eq!(v["value"], json!({"$": "str", "v": "still-here"}));
    user.ok("pty.close", json!({"pty_id": id}));
    // A session not matching the grant stays out of reach: the name gives the token
    // its own session (`private-1@agent:own`), not the user's.
    user.attach("private-1");
    user.ok("exec", json!({"src": "\"private-value\""}));
    let mut p = d.conn();
    let e = p.attach_token("private-1", &t);
    assert_eq!(
        e["result"]["session"],
        json!(format!("private-1@{AGENT}")),
        "{e}"
    );
    let v = p.call("value.get", json!({"ref": "out:1"}));
    assert!(!v.to_string().contains("private-value"), "{v}");
}

/// Read `event` notifications on `c` until `done` says all wanted ones came; every one seen.
fn events_until(c: &mut Conn, mut done: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    while !done(&seen) {
        let f = c.recv();
        if f["method"] == json!("event") {
            seen.push(f["params"].clone());
        }
    }
    seen
}

#[test]
fn a_token_hears_only_its_own_sessions_events() {
    let (root, d) = start("");
    let t = create_token(&root, AGENT);
    let (mut w, _) = token_conn(&d, "agent-w", &t);
    for ch in ["render", "journal", "session.transcript"] {
        w.ok("events.subscribe", json!({"channel": ch}));
    }
    let mut local_w = d.conn();
    local_w.attach("watch");
    local_w.ok("events.subscribe", json!({"channel": "render"}));

    // The user's exec first, the token's own after it: had the user's events reached the
    // token, they would have come before its own.
    let mut user = d.conn();
    user.attach("default");
    user.ok("exec", json!({"src": "\"user-secret-2\""}));
    let (mut a, _) = token_conn(&d, "agent-w", &t);
    a.ok("exec", json!({"src": "\"agent-mark\""}));

    let has = |seen: &[Value], ch: &str| seen.iter().any(|e| e["channel"] == json!(ch));
    let seen = events_until(&mut w, |s| {
        has(s, "render") && has(s, "journal") && has(s, "session.transcript")
    });
    let text = serde_json::to_string(&seen).unwrap();
    assert!(!text.contains("user-secret-2"), "{text}");
    assert!(text.contains("agent-mark"), "{text}");
    assert_eq!(seen.len(), 3, "only its own exec's three events: {text}");

    // events.read of the tail: likewise; the local uid reads (and hears) everything.
    let r = a.ok("events.read", json!({"channel": "render"}));
    let text = r.to_string();
    assert!(
        text.contains("agent-mark") && !text.contains("user-secret-2"),
        "{r}"
    );
    let r = user.ok("events.read", json!({"channel": "render"}));
    let text = r.to_string();
    assert!(
        text.contains("agent-mark") && text.contains("user-secret-2"),
        "{r}"
    );
    let seen = events_until(&mut local_w, |s| s.len() >= 2);
    let text = serde_json::to_string(&seen).unwrap();
    assert!(
        text.contains("user-secret-2") && text.contains("agent-mark"),
        "{text}"
    );
}

/// An MCP connection of `token` whose shim names `session` (`None`: none).
fn mcp_token(d: &Daemon, session: Option<&str>, token: &str) -> Conn {
    let mut m = d.conn();
    m.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
        "params": {"session": session, "token": token}}));
    m.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}),
    );
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    m
}

fn tool(m: &mut Conn, name: &str, args: Value) -> Value {
    m.ok("tools/call", json!({"name": name, "arguments": args}))
}

#[test]
fn mcp_tokens_reach_only_their_own_sessions() {
    let (root, d) = start("");
    let t = create_token(&root, AGENT);
    let mut user = d.conn();
    user.attach("default");
    user.ok(
        "exec",
        json!({"src": "env.SHOAL_SECRET = \"env-secret-3\"\n\"out-secret-3\""}),
    );

    // Naming the user's session: the token gets its own of that name
    // (`default@agent:own`); nothing of the user's leaks, nothing it defines reaches it.
    let mut m = mcp_token(&d, Some("default"), &t);
    for uri in ["shoal://session/env", "shoal://out/1"] {
        let r = m.call("resources/read", json!({"uri": uri}));
        assert!(!r.to_string().contains("secret-3"), "{uri}: {r}");
    }
    for (name, args) in [
        ("shoal_get", json!({"ref": "out:1"})),
        ("shoal_exec", json!({"src": "fn ls() { \"evil\" }"})),
        ("shoal_pty_list", json!({})),
    ] {
        let r = m.call("tools/call", json!({"name": name, "arguments": args}));
        assert!(!r.to_string().contains("secret-3"), "{name}: {r}");
    }
    // The 2026-07-28 per-request selection is held to the same rule.
    let mut modern = d.conn();
    modern.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"token": t}}));
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "shoal/session": "default",
    });
    let r = modern.call(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": "out:1"}, "_meta": meta}),
    );
    assert!(!r.to_string().contains("secret-3"), "{r}");

    // Naming none: its own default session, not the user's.
    let mut own = mcp_token(&d, None, &t);
    let r = tool(&mut own, "shoal_exec", json!({"src": "\"agent-mcp\""}));
    assert_eq!(r["isError"], json!(false), "{r}");
    // (The same session as the one named `default` above: its value is the latest.)
    let latest = r["structuredContent"]["ref"].clone();
    let r = tool(&mut own, "shoal_get", json!({"ref": latest}));
    assert!(r.to_string().contains("agent-mcp"), "{r}");
    let r = own.ok("resources/read", json!({"uri": "shoal://session/env"}));
    assert!(!r.to_string().contains("env-secret-3"), "{r}");
    let r = own.ok("resources/read", json!({"uri": "shoal://events/render"}));
    assert!(!r.to_string().contains("out-secret-3"), "{r}");

    // The user's session is as it was: nothing defined in it, its value in place.
    let v = user.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "out-secret-3"}), "{v}");
    let l = user.call("exec", json!({"src": "ls()"}));
    assert!(!l.to_string().contains("evil"), "{l}");
    let s = user.ok("session.list", json!({}));
    let mine = s["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!(format!("default@{AGENT}")))
        .cloned()
        .unwrap_or_else(|| panic!("{s}"));
    assert_eq!(mine["owner"], json!(AGENT));
}

#[test]
fn a_token_never_reads_values_from_before_its_session_existed() {
    let (root, mut d) = start("");
    let t = create_token(&root, AGENT);
    let mut user = d.conn();
    for name in ["before-a", "before-b"] {
        user.attach(name);
        user.ok("exec", json!({"src": format!("\"{name}-secret\"")}));
    }
    drop(user);
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("daemon exit");
    assert!(st.success(), "{st:?}");
    let d = restart(&root);
    // The user's value survives the restart (the control) ...
    let mut user = d.conn();
    user.attach("before-a");
    let v = user.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(
        v["value"],
        json!({"$": "str", "v": "before-a-secret"}),
        "{v}"
    );
    // ... but a token that takes the free name gets nothing from before.
    let (mut a, att) = token_conn(&d, "before-b", &t);
    assert_eq!(att["created"], json!(true), "{att}");
    let r = a.call("value.get", json!({"ref": "out:1"}));
    assert_eq!(code(&r), -32004, "{r}");
    assert!(!r.to_string().contains("before-b-secret"), "{r}");
    // Its own values (numbered after the old ones) it reads.
    let x = a.ok("exec", json!({"src": "\"own\""}));
    let own = a.ok("value.get", json!({"ref": x["ref"]}));
    assert_eq!(own["value"], json!({"$": "str", "v": "own"}), "{own}");
}
