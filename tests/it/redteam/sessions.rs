//! Attacks on sessions the token does not own and on the daemon's global event channels:
//! attaching to the local user's session to read its bindings, transcript values and
//! environment, typing into its PTY, redefining its commands, closing it, filling the
//! daemon's session slots; reading the user's commands and outputs from `render`,
//! `journal` and `session.transcript`; and the agreed read-only `sessions` grant.

use std::time::Instant;

use super::*;

/// agent:rt as in the evaluator attacks; at most 24 sessions in all.
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let keys =
        "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true\nenv_read = [\"HOME\"]";
    "[limits]\nmax_sessions = 24\n".to_string() + &principal("agent:rt", keys, &pj, &pj, &pj)
}

/// The `out:N` ref of an exec reply.
fn out_ref(r: &Value) -> String {
    r["result"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("no ref: {r}"))
        .to_string()
}

/// A kernel call; the response and every notification that came before it.
fn call_collect(c: &mut Conn, method: &str, params: Value) -> Vec<Value> {
    c.send(&json!({"jsonrpc": "2.0", "id": "rt-collect", "method": method, "params": params}));
    let mut frames = Vec::new();
    loop {
        let f = c.recv();
        let done = f["id"] == json!("rt-collect");
        frames.push(f);
        if done {
            return frames;
        }
    }
}

#[test]
fn other_principals_sessions_and_channels_are_out_of_reach() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    let (m_bind, m_out, m_pty, m_env) = (marker("B"), marker("O"), marker("P"), marker("E"));
    let env = json!({"HOME": a.root.path().display().to_string(), "PATH": "/usr/bin:/bin",
        "RT_SECRET": m_env});
    // The local user's session: a binding, an output, its environment, a shell on a PTY.
    let mut home = a.kernel(None, "home", Some(env));
    home.exec(&format!("let secret_binding = \"{m_bind}\""));
    let r = home.exec(&format!("echo {m_out}"));
    let echo_ref = out_ref(&r);
    let pty = home
        .conn
        .ok("pty.open", json!({"cmd": "sh", "cols": 200, "rows": 20}));
    let pty_id = pty["pty_id"].clone();
    home.conn.ok(
        "pty.send",
        json!({"pty_id": pty_id, "input": [format!("echo {m_pty}"), {"key": "Enter"}]}),
    );
    let r = home.conn.ok(
        "pty.read",
        json!({"pty_id": pty_id, "wait_for": m_pty, "timeout_ms": 10000}),
    );
    assert_eq!(r["matched"], json!(true), "{r}");

    // The controls: the owner reads all of it.
    let r = home.exec("secret_binding");
    rep.control(
        "9 the owner reads its binding",
        leaks(&r, &m_bind),
        &r.to_string(),
    );
    let r = home.conn.call("value.get", json!({"ref": echo_ref}));
    rep.control(
        "9 the owner reads its out:N",
        leaks(&r, &m_out),
        &r.to_string(),
    );
    let mut hm = mcp_conn(&a.d, "home", None, &a.proj, None, false);
    let r = hm.call("resources/read", json!({"uri": "shoal://session/env"}));
    rep.control(
        "9 the owner reads its env resource",
        leaks(&r, &m_env),
        &r.to_string(),
    );

    // 9 (kernel): attach to "home" and use it.
    let tok = create_token(&a.root, "agent:rt");
    let mut t = a.d.conn();
    let att = t.attach_token("home", &tok);
    let r = t.call("exec", json!({"src": "secret_binding"}));
    rep.judge(
        "9 read another principal's binding [kernel]",
        leaks(&r, &m_bind).then(|| clip(&r.to_string())),
    );
    let r = t.call("value.get", json!({"ref": echo_ref}));
    rep.judge(
        "9 value.get of another principal's out:N [kernel]",
        leaks(&r, &m_out).then(|| clip(&r.to_string())),
    );
    let r = t.call("exec", json!({"src": "let e9 = env\ne9"}));
    rep.judge(
        "9 read another principal's session env [kernel]",
        leaks(&r, &m_env).then(|| clip(&r.to_string())),
    );
    let r = t.call("pty.read", json!({"pty_id": pty_id, "timeout_ms": 0}));
    rep.judge(
        "9 pty.read of another principal's PTY [kernel]",
        leaks(&r, &m_pty).then(|| clip(&r.to_string())),
    );
    let r = t.call("task.list", json!({}));
    rep.judge(
        "9 attach result and task list carry nothing of the user's",
        (leaks(&r, &m_out) || leaks(&att, &m_env)).then(|| clip(&r.to_string())),
    );
    let planted = a.out("pty9");
    let _ = std::fs::remove_file(&planted);
    t.call(
        "pty.send",
        json!({"pty_id": pty_id, "input": [format!("touch {}", planted.display()), {"key": "Enter"}]}),
    );
    let fenced = a.out("pty9-control");
    let _ = std::fs::remove_file(&fenced);
    home.conn.ok(
        "pty.send",
        json!({"pty_id": pty_id, "input": [format!("touch {}", fenced.display()), {"key": "Enter"}]}),
    );
    eventually(
        "the user's own PTY input runs",
        Duration::from_secs(10),
        || fenced.exists().then_some(()),
    );
    rep.judge(
        "9 pty.send into another principal's PTY [kernel]",
        planted
            .exists()
            .then(|| "the typed command ran".to_string()),
    );
    // (Naming "home" gave the token a session of its own, `home@agent:rt`: what it
    // runs there must not land in the user's.)
    let m_intr = marker("I");
    t.call(
        "exec",
        json!({"src": format!("let intruder9 = \"{m_intr}\"")}),
    );
    let r = home.exec("intruder9");
    rep.judge(
        "9 exec in another principal's session [kernel]",
        (leaks(&r, &m_intr) || att["result"]["session"] == json!("home"))
            .then(|| clip(&r.to_string())),
    );
    t.call(
        "exec",
        json!({"src": "fn ls() { \"pwned9\" }\nlet secret_binding = \"clobbered9\""}),
    );
    let r = home.exec("ls");
    rep.judge(
        "9 redefine ls in another principal's session [kernel]",
        leaks(&r, "pwned9").then(|| clip(&r.to_string())),
    );
    let r = home.exec("secret_binding");
    rep.judge(
        "9 overwrite a binding in another principal's session [kernel]",
        (!leaks(&r, &m_bind)).then(|| clip(&r.to_string())),
    );

    // 9 (MCP): the same session through the MCP surface.
    let mut m = mcp_conn(&a.d, "home", Some(&tok), &a.proj, None, false);
    let r = m.call("resources/read", json!({"uri": "shoal://session/env"}));
    rep.judge(
        "9 shoal://session/env of another principal's session [mcp]",
        leaks(&r, &m_env).then(|| clip(&r.to_string())),
    );
    let r = m.call(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "secret_binding"}}),
    );
    rep.judge(
        "9 shoal_exec reading another principal's binding [mcp]",
        leaks(&r, &m_bind).then(|| clip(&r.to_string())),
    );
    let r = m.call(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": echo_ref}}),
    );
    rep.judge(
        "9 shoal_get of another principal's out:N [mcp]",
        leaks(&r, &m_out).then(|| clip(&r.to_string())),
    );
    let uri = format!("shoal://out/{}", echo_ref.trim_start_matches("out:"));
    let r = m.call("resources/read", json!({"uri": uri}));
    rep.judge(
        "9 resources/read of another principal's out:N [mcp]",
        leaks(&r, &m_out).then(|| clip(&r.to_string())),
    );
    let r = m.call(
        "tools/call",
        json!({"name": "shoal_pty_read", "arguments": {"pty_id": pty_id, "timeout_ms": 0}}),
    );
    rep.judge(
        "9 shoal_pty_read of another principal's PTY [mcp]",
        leaks(&r, &m_pty).then(|| clip(&r.to_string())),
    );
    // 15: global channels, read and subscribed from the token's own session.
    let mut own = a.kernel(Some("agent:rt"), "own", None);
    let mut own_m = a.mcp(Some("agent:rt"), "own-mcp", None);
    let channels = ["render", "journal", "session.transcript"];
    // Subscribed on a connection of its own (its events interleave with the replies).
    let mut sub = a.kernel(Some("agent:rt"), "own-sub", None);
    let mut frames = Vec::new();
    for ch in channels {
        frames.extend(call_collect(
            &mut sub.conn,
            "events.subscribe",
            json!({"channel": ch}),
        ));
    }
    // The user runs a program named by a marker that prints it: its head reaches `journal`
    // and `session.transcript`, its output `render`.
    let m_live = marker("L");
    let bin = a.root.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let prog = bin.join(&m_live);
    std::fs::write(&prog, format!("#!/bin/sh\necho {m_live}\n")).expect("program");
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let r = home.exec(&prog.display().to_string());
    assert!(leaks(&r, &m_live), "the user's program runs: {r}");
    for ch in channels {
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let r = home.conn.call("events.read", json!({"channel": ch}));
            if leaks(&r, &m_live) || Instant::now() > deadline {
                break leaks(&r, &m_live);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        rep.control(
            &format!("15 the local user sees its own output on {ch}"),
            seen,
            "not in events.read",
        );
        let r = own.conn.call("events.read", json!({"channel": ch}));
        let got = leaks(&r, &m_out) || leaks(&r, &m_live);
        rep.judge(
            &format!("15 events.read {ch} [kernel]"),
            got.then(|| clip(&r.to_string())),
        );
        let r = own_m.conn.call(
            "resources/read",
            json!({"uri": format!("shoal://events/{ch}")}),
        );
        let got = leaks(&r, &m_out) || leaks(&r, &m_live);
        rep.judge(
            &format!("15 resources/read shoal://events/{ch} [mcp]"),
            got.then(|| clip(&r.to_string())),
        );
    }
    frames.extend(call_collect(&mut sub.conn, "daemon.status", json!({})));
    let got = frames.iter().any(|f| leaks(f, &m_live));
    rep.judge(
        "15 events.subscribe to render/journal/transcript [kernel]",
        got.then(|| clip(&json!(frames).to_string())),
    );
    let r = own.conn.call("journal.query", json!({"limit": 100}));
    rep.judge(
        "15 journal.query [kernel]",
        (leaks(&r, &m_out) || leaks(&r, &m_live)).then(|| clip(&r.to_string())),
    );
    let r = own_m
        .conn
        .call("resources/read", json!({"uri": "shoal://journal"}));
    rep.judge(
        "15 resources/read shoal://journal [mcp]",
        (leaks(&r, &m_out) || leaks(&r, &m_live)).then(|| clip(&r.to_string())),
    );

    // 9: close the user's session; then fill the daemon's session slots.
    t.call("session.close", json!({"session": "home"}));
    let r = home.exec("secret_binding");
    rep.judge(
        "9 session.close of another principal's session [kernel]",
        (!leaks(&r, &m_bind)).then(|| clip(&r.to_string())),
    );
    let mut flood = a.d.conn();
    for i in 0..24 {
        flood.attach_token(&format!("flood-{i}"), &tok);
    }
    let mut after = a.d.conn();
    let r = after.call(
        "session.attach",
        json!({"session": "after-flood", "client": {"kind": "redteam", "tty": false}}),
    );
    rep.judge(
        "9 a token fills max_sessions (the local user cannot attach)",
        r.get("error").map(|_| clip(&r.to_string())),
    );
    rep.finish("sessions and channels");
}

/// The agreed `sessions = [...]` grant: a token may attach to a matching session of another
/// principal read-only; every write is refused (judged on disk) and a session outside the
/// grant stays out of reach.
#[test]
fn shared_sessions_are_read_only() {
    let a = Arena::start(
        |proj, _| {
            let pj = Arena::proj_grant(proj);
            principal(
                "agent:reader",
                "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true\nsessions = [\"shared-*\"]",
                &pj,
                &pj,
                &pj,
            )
        },
        &[],
    );
    let mut rep = Report::default();
    let (m_shared, m_private) = (marker("H"), marker("V"));
    let mut owner = a.kernel(None, "shared-1", None);
    let r = owner.exec(&format!("echo {m_shared}"));
    let shared_ref = out_ref(&r);
    let mut private = a.kernel(None, "private", None);
    let r = private.exec(&format!("echo {m_private}"));
    let private_ref = out_ref(&r);
    let tok = create_token(&a.root, "agent:reader");
    let mut t = a.d.conn();
    let r = t.attach_token("shared-1", &tok);
    assert!(
        r.get("error").is_none(),
        "a granted session attaches read-only: {r}"
    );
    let r = t.call("value.get", json!({"ref": shared_ref}));
    assert!(leaks(&r, &m_shared), "a read-only attach reads values: {r}");
    let inside = a.p("shared-write");
    t.call(
        "exec",
        json!({"src": format!("touch {}", inside.display())}),
    );
    rep.judge(
        "9 exec in a read-only shared session",
        inside.exists().then(|| "it ran".to_string()),
    );
    let r = t.call(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", format!("touch {}", a.p("shared-pty").display())]}),
    );
    rep.judge(
        "9 pty.open in a read-only shared session",
        r.get("result").map(|_| clip(&r.to_string())),
    );
    t.call("session.close", json!({"session": "shared-1"}));
    let r = owner.exec("1 + 1");
    rep.judge(
        "9 session.close of a read-only shared session",
        r.get("error").map(|_| clip(&r.to_string())),
    );
    let mut u = a.d.conn();
    let r = u.attach_token("private", &tok);
    let got = r["result"]["session"] == json!("private");
    let v = u.call("value.get", json!({"ref": private_ref}));
    rep.judge(
        "9 attach to a session outside the sessions grant",
        (got || leaks(&v, &m_private)).then(|| clip(&r.to_string())),
    );
    rep.finish("shared sessions");
}

/// Squatting names: a token that creates `default` before the local user, or
/// `default@agent:rt2` (the default of another token's `shoal mcp`), gets
/// sessions of its own (`NAME@agent:rt`); the user's `default` stays the
/// user's and the other token's default stays reachable to it.
#[test]
fn a_token_cannot_take_another_principals_session_names() {
    let a = Arena::start(
        |proj, root| {
            let pj = Arena::proj_grant(proj);
            config(proj, root)
                + &principal(
                    "agent:rt2",
                    "opaque = \"deny\"\nauto_apply = \"in-grant\"",
                    &pj,
                    &pj,
                    &pj,
                )
        },
        &[],
    );
    let mut rep = Report::default();
    let m = marker("Q");
    // The squatter comes first, and plants a command and a binding.
    let mut sq = a.kernel(Some("agent:rt"), "default", None);
    sq.exec(&format!("fn ls() {{ \"{m}\" }}\nlet left9 = \"{m}\""));
    let mut sq2 = a.kernel(Some("agent:rt"), "default@agent:rt2", None);
    sq2.exec(&format!("let left9 = \"{m}\""));
    // The user arrives at `default`, keeps a secret there and lists its files.
    let mut user = a.kernel(None, "default", None);
    let m_user = marker("U");
    user.exec(&format!("let user_secret = \"{m_user}\""));
    let r = user.exec("ls");
    rep.judge(
        "E2 the token's fn ls answers the user's ls in `default`",
        leaks(&r, &m).then(|| clip(&r.to_string())),
    );
    let r = user.exec("left9");
    rep.judge(
        "E2 the user's `default` holds the token's binding",
        leaks(&r, &m).then(|| clip(&r.to_string())),
    );
    let r = sq.exec("user_secret");
    rep.judge(
        "E2 the token reads the user's binding in `default`",
        leaks(&r, &m_user).then(|| clip(&r.to_string())),
    );
    // The other token's default is its own.
    let mut other = a.kernel(Some("agent:rt2"), "default@agent:rt2", None);
    let r = other.exec("left9");
    rep.judge(
        "E2 another token's default session was taken",
        leaks(&r, &m).then(|| clip(&r.to_string())),
    );
    rep.control(
        "E2 the other token works in its default session",
        other.exec("40 + 2").to_string().contains("42"),
        "",
    );
    // A principal named with `@` would make `default@agent:rt` of `agent:x` the
    // default of `agent:x@agent:rt`: no token is made for such a name.
    let (st, out, _) = run(&a.root, &["token", "create", "agent:x@agent:rt"], &[]);
    rep.judge(
        "S1 a token for a principal whose name holds '@'",
        (st == 0).then(|| clip(&out)),
    );
    rep.finish("session names");
}
