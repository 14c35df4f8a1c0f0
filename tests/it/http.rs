//! MCP over Streamable HTTP (docs/http.md): a real daemon with `--http 127.0.0.1:0`,
//! plain HTTP clients (ureq, and raw TCP for event streams). Auth, Origin and Host,
//! bounded bodies, both eras, event streams and their resumption, a vanished client,
//! and 100 concurrent clients.

use std::io::Write;
use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::http_client::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// An `initialize` POST with these headers.
fn post_init(agent: &ureq::Agent, url: &str, headers: &[(&str, &str)]) -> Answer {
    request(agent, "POST", url, headers, Some(INIT))
}

/// A kernel connection (session `probe`) that has seen `session` busy.
fn busy_probe(s: &Served, session: &str) -> Conn {
    let mut k = s.d.conn();
    k.attach("probe");
    session_busy(&mut k, session, true);
    k
}

/// `sh { sleep 60 }` called as request `id` in `c`'s session (the daemon's
/// `default`) from another thread, whose result is the answer; returned once
/// that session runs it, with the probe that saw it busy.
fn sleep_in_session(s: &Served, c: &Client, id: &str) -> (JoinHandle<Answer>, Conn) {
    let (url, token, session) = (c.url.clone(), c.token.clone(), c.session.clone());
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": "sh { sleep 60 }"}}});
    let call = std::thread::spawn(move || {
        let auth = format!("Bearer {token}");
        request(
            &ureq::agent(),
            "POST",
            &url,
            &[("Authorization", &auth), ("Mcp-Session-Id", &session)],
            Some(&body.to_string()),
        )
    });
    (call, busy_probe(s, "default"))
}

#[test]
fn tokens_are_required_and_checked() {
    let s = serve("");
    let agent = ureq::agent();
    let a = post_init(&agent, &s.url, &[]);
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(a.header("www-authenticate").unwrap().starts_with("Bearer"));
    let a = post_init(&agent, &s.url, &[("Authorization", "Bearer not-a-token")]);
    assert_eq!(a.status, 401);
    assert!(a
        .header("www-authenticate")
        .unwrap()
        .contains("invalid_token"));
    // A token of another principal works until it is revoked.
    let other = create_token(&s.root, "agent:http");
    let auth = format!("Bearer {other}");
    let a = post_init(&agent, &s.url, &[("Authorization", &auth)]);
    assert_eq!(a.status, 200, "{}", a.body);
    let (code, _, err) = run(&s.root, &["token", "revoke", &other], &[]);
    assert_eq!(code, 0, "{err}");
    let a = post_init(&agent, &s.url, &[("Authorization", &auth)]);
    assert_eq!(a.status, 401, "{}", a.body);
    // GET and DELETE are checked too.
    let a = request(
        &agent,
        "GET",
        &s.url,
        &[("Accept", "text/event-stream")],
        None,
    );
    assert_eq!(a.status, 401);
    let a = request(&agent, "DELETE", &s.url, &[], None);
    assert_eq!(a.status, 401);
}

#[test]
fn origin_host_size_and_json_are_checked() {
    let s = serve("[daemon]\nmax_frame_bytes = 4096\n");
    let agent = ureq::agent();
    let auth = format!("Bearer {}", s.token);
    let post = |h: &[(&str, &str)], body: &str| {
        let mut all = vec![("Authorization", auth.as_str())];
        all.extend_from_slice(h);
        request(&agent, "POST", &s.url, &all, Some(body))
    };
    let a = post(&[("Origin", "http://evil.example.com")], INIT);
    assert_eq!(a.status, 403, "{}", a.body);
    let a = post(&[("Origin", "null")], INIT);
    assert_eq!(a.status, 403);
    let a = post(&[("Host", "evil.example.com")], INIT);
    assert_eq!(a.status, 403, "{}", a.body);
    // A rebinding page is refused before its token is even looked at.
    let a = post_init(&agent, &s.url, &[("Host", "evil.example.com:7417")]);
    assert_eq!(a.status, 403);
    let port = s.addr.rsplit(':').next().unwrap();
    let origin = format!("http://localhost:{port}");
    let a = post(
        &[("Origin", &origin), ("Host", &format!("localhost:{port}"))],
        INIT,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let a = post(&[], &big);
    assert_eq!(a.status, 413, "{}", a.body);
    let a = post(&[], "{not json");
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32700, "{}", a.body);
    let a = post(&[], r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    assert_eq!(a.status, 400, "no session and no 2026 envelope: {}", a.body);
    let a = request(
        &agent,
        "POST",
        &s.url,
        &[("Authorization", &auth), ("Mcp-Session-Id", "nope")],
        Some(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#),
    );
    assert_eq!(a.status, 404);
}

#[test]
fn a_session_execs_reads_and_ends() {
    let s = serve("");
    let mut c = Client::new(&s);
    let r = c.exec("6 * 7");
    assert_eq!(r["content"][0]["text"], "42", "{r}");
    assert_eq!(r["isError"], false);
    let r = c.exec("1 / 0");
    assert_eq!(r["isError"], true, "{r}");
    assert!(r["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("div_zero"));
    let r = c.ok("resources/read", json!({"uri": "shoal://out/1"}));
    assert!(
        r["contents"][0]["text"].as_str().unwrap().contains("42"),
        "{r}"
    );
    let bad = request(
        &c.agent,
        "POST",
        &s.url,
        &[
            ("Authorization", &format!("Bearer {}", s.token)),
            ("Mcp-Session-Id", &c.session),
            ("MCP-Protocol-Version", "1999-01-01"),
        ],
        Some(r#"{"jsonrpc":"2.0","id":"v","method":"ping"}"#),
    );
    assert_eq!(
        bad.status, 400,
        "an unknown MCP-Protocol-Version: {}",
        bad.body
    );
    let tools = c.ok("tools/list", json!({}));
    assert!(tools["tools"].as_array().unwrap().len() > 3);
    // The same session over the socket: the shim's default is shared.
    let mut k = s.d.conn();
    k.attach("default");
    let v = k.ok("exec", json!({"src": "out:1"}));
    assert_eq!(v["render"], "42", "{v}");
    let st = status(&s);
    assert_eq!(st["http"]["sessions"], 1, "{st}");
    let sock = s.root.socket();
    let (code, table, err) = run(
        &s.root,
        &["status", "--socket", sock.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains(&format!("  http       {} · connections", s.url))
            && table.contains("sessions 1"),
        "{table}"
    );
    let auth = format!("Bearer {}", s.token);
    let h = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", c.session.as_str()),
    ];
    let a = request(&c.agent, "DELETE", &s.url, &h, None);
    assert_eq!(a.status, 200);
    let a = c.post_raw(&json!({"jsonrpc": "2.0", "id": 99, "method": "ping"}));
    assert_eq!(a.status, 404, "{}", a.body);
    eventually(
        "the session's connection closes",
        Duration::from_secs(20),
        || {
            let st = status(&s);
            (st["http"]["sessions"] == 0 && st["limits"]["connections"]["used"].as_u64() == Some(2))
                .then_some(())
        },
    );
}

#[test]
fn stateless_requests_need_no_session() {
    let s = serve("");
    let agent = ureq::agent();
    let auth = format!("Bearer {}", s.token);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "shoal/session": "stateless"});
    let call = |id: u64, method: &str, mut params: Value| {
        params["_meta"] = meta.clone();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        request(
            &agent,
            "POST",
            &s.url,
            &[
                ("Authorization", &auth),
                ("Accept", "application/json, text/event-stream"),
            ],
            Some(&body.to_string()),
        )
    };
    let a = call(1, "server/discover", json!({}));
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.header("mcp-session-id").is_none());
    assert!(
        a.json()["result"]["supportedVersions"]
            .to_string()
            .contains("2026-07-28"),
        "{}",
        a.body
    );
    let a = call(
        2,
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "let x = 6"}}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let a = call(
        3,
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "x * 7"}}),
    );
    assert_eq!(a.json()["result"]["content"][0]["text"], "42", "{}", a.body);
    assert_eq!(a.json()["result"]["resultType"], "complete");
}

#[test]
fn progress_comes_as_an_event_stream_before_the_result() {
    let s = serve("");
    let c = Client::new(&s);
    let a = c.post_raw(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "shoal_exec", "arguments": {"src": "sh { sleep 1.2 }; 6 * 7"},
        "_meta": {"progressToken": "p1"}}}),
    );
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type"),
        Some("text/event-stream"),
        "{}",
        a.body
    );
    let ev = a.events();
    assert_eq!(ev[0]["method"], "notifications/progress", "{}", a.body);
    assert_eq!(ev[0]["params"]["progressToken"], "p1");
    let last = ev.last().unwrap();
    assert_eq!(last["id"], 5);
    assert_eq!(last["result"]["content"][0]["text"], "42", "{last}");
    assert!(a.body.contains("\nid: "), "events carry ids: {}", a.body);
}

#[test]
fn subscriptions_notify_on_the_get_stream_and_resume() {
    let s = serve("[http]\nkeepalive_ms = 100\n");
    let mut c = Client::new(&s);
    let mut g = Stream::open(&s, &c.session, None);
    assert_eq!(g.status, 200);
    c.ok(
        "resources/subscribe",
        json!({"uri": "shoal://events/user.http"}),
    );
    c.exec(r#"channel("user.http").emit(1)"#);
    let (id1, n) = g.next();
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["uri"], "shoal://events/user.http");
    // A second reader of the same stream is refused while the first reads it.
    let other = Stream::open(&s, &c.session, None);
    assert_eq!(other.status, 409);
    drop(other);
    // The client goes away; an event arrives meanwhile; it comes back with Last-Event-ID.
    drop(g);
    eventually("the stream is let go", Duration::from_secs(20), || {
        (status(&s)["http"]["streams"] == 0).then_some(())
    });
    c.exec(r#"channel("user.http").emit(2)"#);
    let mut g = Stream::open(&s, &c.session, Some(&id1));
    assert_eq!(g.status, 200);
    let (_, n) = g.next();
    assert_eq!(
        n["method"], "notifications/resources/updated",
        "the missed event: {n}"
    );
}

#[test]
fn a_vanished_stream_frees_its_place() {
    let s = serve("[http]\nkeepalive_ms = 100\n");
    let c = Client::new(&s);
    let g = Stream::open(&s, &c.session, None);
    assert_eq!(g.status, 200);
    assert_eq!(status(&s)["http"]["streams"], 1);
    drop(g);
    eventually(
        "the stream's place is free",
        Duration::from_secs(20),
        || (status(&s)["http"]["streams"] == 0).then_some(()),
    );
    let g = Stream::open(&s, &c.session, None);
    assert_eq!(g.status, 200, "a new reader is taken");
}

#[test]
fn tasks_and_cancellation() {
    let s = serve("");
    let mut c = Client::new(&s);
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "sh { sleep 0.3 }; 6 * 7"}, "task": {"ttl": 60000}}),
    );
    let task = r["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    eventually("the task completes", Duration::from_secs(30), || {
        let g = c.ok("tasks/get", json!({"taskId": task}));
        (g["status"] == "completed").then_some(())
    });
    let r = c.ok("tasks/result", json!({"taskId": task}));
    assert_eq!(r["content"][0]["text"], "42", "{r}");
    // A long call, cancelled by its id from another request.
    let (long, _k) = sleep_in_session(&s, &c, "long");
    let a = c.post_raw(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "long", "reason": "test"}}),
    );
    assert_eq!(a.status, 202);
    let a = long.join().unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    let v = a.json();
    assert!(
        v.to_string().contains("cancel"),
        "the call answers as cancelled: {v}"
    );
}

#[test]
fn a_hundred_concurrent_clients() {
    let s = serve("");
    let url = s.url.clone();
    let threads: Vec<_> = (0..100)
        .map(|i| {
            let (url, token) = (url.clone(), s.token.clone());
            let served = (url, token);
            std::thread::spawn(move || {
                let agent = ureq::AgentBuilder::new()
                    .timeout(Duration::from_secs(120))
                    .build();
                let auth = format!("Bearer {}", served.1);
                let mut errors = 0;
                for n in 0..20 {
                    let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                        "name": "shoal_exec", "arguments": {"src": format!("{i} * 100 + {n}")},
                        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                  "io.modelcontextprotocol/clientCapabilities": {},
                                  "shoal/session": format!("load{}", i % 10)}}});
                    let a = request(
                        &agent,
                        "POST",
                        &served.0,
                        &[("Authorization", &auth)],
                        Some(&body.to_string()),
                    );
                    let want = (i * 100 + n).to_string();
                    if a.status != 200 || a.json()["result"]["content"][0]["text"] != json!(want) {
                        errors += 1;
                    }
                }
                errors
            })
        })
        .collect();
    let errors: i32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(errors, 0);
    assert!(status(&s)["http"]["requests"].as_u64().unwrap() >= 2000);
}

#[test]
fn only_loopback_is_served() {
    let root = Root::new();
    let out = root
        .command()
        .args(["daemon", "--socket"])
        .arg(root.socket())
        .args(["--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TLS"), "{err}");
    let cfg = root.path().join("shoal.toml");
    std::fs::write(&cfg, "[http]\nlisten = \"192.0.2.1:7417\"\n").unwrap();
    let (code, out, err) = run(&root, &["config", "check", cfg.to_str().unwrap()], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("loopback"), "{err}");
}

#[test]
fn sessions_count_against_max_connections() {
    let s = serve("[limits]\nmax_connections = 1\n");
    // The set-up's own kernel connection gives its place back once the daemon
    // has seen it hang up.
    let mut first = eventually(
        "the set-up's place is free",
        Duration::from_secs(20),
        || Client::try_with(&s, &s.token, json!({})).ok(),
    );
    assert_eq!(first.exec("6 * 7")["content"][0]["text"], "42");
    let agent = ureq::agent();
    let auth = format!("Bearer {}", s.token);
    let a = post_init(&agent, &s.url, &[("Authorization", &auth)]);
    assert!(a.header("mcp-session-id").is_none(), "{}", a.body);
    assert_eq!(a.json()["error"]["code"], -32040, "{}", a.body);
    assert!(a.body.contains("max_connections"), "{}", a.body);
    // Ending the first session frees its place.
    let h = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", first.session.as_str()),
    ];
    assert_eq!(request(&agent, "DELETE", &s.url, &h, None).status, 200);
    eventually("a place is free again", Duration::from_secs(20), || {
        let a = post_init(&agent, &s.url, &[("Authorization", &auth)]);
        a.header("mcp-session-id").is_some().then_some(())
    });
}

#[test]
fn elicitation_asks_the_client_on_the_requests_stream() {
    let s = serve(
        "[policy.principal.\"agent:r\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\napprove_via = [\"elicitation\", \"cli\"]\nfs.read = [\"/**\"]\n",
    );
    let token = create_token(&s.root, "agent:r");
    let mut c = Client::with(&s, &token, json!({"elicitation": {}}));
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_plan", "arguments": {"src": "sh { echo approved }"}}),
    );
    // A token principal's own default session and policy, as through the shim.
    assert_eq!(r["structuredContent"]["principal"], "agent:r", "{r}");
    assert_eq!(r["structuredContent"]["session"], "default@agent:r", "{r}");
    let plan = r["structuredContent"]["plan_ref"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let mut stream = Stream::post(
        &s,
        &c,
        &json!({"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
            "params": {"name": "shoal_cap_request", "arguments": {"plan_ref": plan}}}),
    );
    assert_eq!(stream.status, 200);
    let (_, e) = stream.next();
    assert_eq!(e["method"], "elicitation/create", "{e}");
    assert!(
        e["params"]["message"].as_str().unwrap().contains(&plan),
        "{e}"
    );
    let a = c.post_raw(&json!({"jsonrpc": "2.0", "id": e["id"],
        "result": {"action": "accept", "content": {"approve": true}}}));
    assert_eq!(a.status, 202, "{}", a.body);
    let (_, r) = stream.next();
    assert_eq!(r["id"], "ask", "{r}");
    assert_eq!(r["result"]["structuredContent"]["grant"], "approved", "{r}");
}

#[test]
fn a_stateless_client_that_goes_away_cancels_its_call() {
    let s = serve("");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "shoal_exec", "arguments": {"src": "sh { sleep 60 }"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "shoal/session": "gone"}}})
    .to_string();
    let mut t = TcpStream::connect(&s.addr).unwrap();
    write!(
        t,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        s.token,
        body.len()
    )
    .unwrap();
    let mut k = busy_probe(&s, "gone");
    drop(t);
    session_busy(&mut k, "gone", false);
    eventually("the connection is let go", Duration::from_secs(20), || {
        (status(&s)["http"]["connections"] == 0).then_some(())
    });
}

#[test]
fn delete_ends_what_the_session_still_runs() {
    let s = serve("");
    let c = Client::new(&s);
    let (waiting, mut k) = sleep_in_session(&s, &c, "w");
    let auth = format!("Bearer {}", s.token);
    let h = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", c.session.as_str()),
    ];
    assert_eq!(request(&c.agent, "DELETE", &s.url, &h, None).status, 200);
    session_busy(&mut k, "default", false);
    let a = waiting.join().unwrap();
    assert_eq!(
        a.status, 500,
        "the waiting request learns its session ended: {}",
        a.body
    );
}

/// One principal's HTTP clients hold at most `connections_per_principal`
/// daemon connections: a new session ends its least recently used one, a
/// stateless request past it is refused, another principal is not touched,
/// and a revoked token's sessions end at once.
#[test]
fn a_principals_connections_are_bounded_and_end_with_its_token() {
    let s = serve("[http]\nconnections_per_principal = 3\n");
    let mut local = Client::new(&s);
    let other = create_token(&s.root, "agent:h");
    let auth = format!("Bearer {other}");
    let agent = ureq::agent();
    let sessions: Vec<String> = (0..5)
        .map(|_| {
            let a = post_init(&agent, &s.url, &[("Authorization", &auth)]);
            assert_eq!(a.status, 200, "{}", a.body);
            a.header("mcp-session-id").unwrap().to_string()
        })
        .collect();
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let status_of = |sid: &str| {
        let h = [("Authorization", auth.as_str()), ("Mcp-Session-Id", sid)];
        request(&agent, "POST", &s.url, &h, Some(list)).status
    };
    let got: Vec<u16> = sessions.iter().map(|sid| status_of(sid)).collect();
    assert_eq!(got, [404, 404, 200, 200, 200], "the two oldest ended");
    // Its stateless requests find no room; the local user's session works.
    let stateless = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let a = request(
        &agent,
        "POST",
        &s.url,
        &[("Authorization", &auth)],
        Some(&stateless.to_string()),
    );
    assert_eq!(a.status, 429, "{}", a.body);
    assert_eq!(a.json()["error"]["code"], -32040, "{}", a.body);
    assert!(a.body.contains("connections_per_principal"), "{}", a.body);
    assert_eq!(local.exec("6 * 7")["content"][0]["text"], "42");
    // Revoked: its sessions end and give their connections back.
    let mut k = s.d.conn();
    k.attach("probe");
    let held = |k: &mut Conn| k.ok("daemon.status", json!({}))["http"]["sessions"].clone();
    assert_eq!(held(&mut k), json!(4));
    let socket = s.root.socket();
    let (code, _, err) = run(
        &s.root,
        &[
            "token",
            "revoke",
            &other,
            "--socket",
            socket.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(held(&mut k), json!(1));

    // Many initializes at the same moment cannot all pass the check: the
    // principal ends with at most its cap of sessions.
    let burst = create_token(&s.root, "agent:burst");
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (url, auth) = (s.url.clone(), format!("Bearer {burst}"));
            std::thread::spawn(move || {
                post_init(&ureq::agent(), &url, &[("Authorization", &auth)]).status
            })
        })
        .collect();
    for t in threads {
        let status = t.join().unwrap();
        assert!(status == 200 || status == 429, "{status}");
    }
    let sessions = held(&mut k).as_u64().unwrap();
    assert!(
        sessions <= 1 + 3,
        "{sessions} sessions: the cap is 3 (and the local one)"
    );
}
