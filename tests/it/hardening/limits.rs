//! Quotas under load: `max_sessions`, `max_connections`,
//! `max_subscriptions_per_connection` enforced with `-32040` naming the key,
//! their use shown by `shoal status`, and the accept loop backing off when
//! descriptors run out (prlimit). Each test starts its own daemon.

use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::common::*;

// Row 12: max_sessions, max_connections, max_subscriptions_per_connection are enforced with
// -32040 naming the key, and status shows their use.
#[test]
fn quotas_are_enforced_and_shown() {
    let root = Root::new();
    let d = start_with_config(
        &root,
        "[limits]\nmax_sessions = 2\nmax_connections = 4\nmax_subscriptions_per_connection = 2\n",
    );
    let mut c = d.conn();
    c.attach("a");
    let mut c2 = d.conn();
    c2.attach("b");
    let mut c3 = d.conn();
    let r = c3.call("session.attach", json!({"session": "c"}));
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("max_sessions"), "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_sessions"));
    // An existing session still attaches.
    c3.attach("a");

    for (i, ch) in ["user.x", "user.y"].iter().enumerate() {
        let r = c.ok("events.subscribe", json!({"channel": ch}));
        assert_eq!(r["subscribed"], json!(true), "{i}");
    }
    let r = c.call("events.subscribe", json!({"channel": "user.z"}));
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(
        r["error"]["data"]["limit"],
        json!("max_subscriptions_per_connection")
    );
    // MCP resources/subscribe has the same quota.
    let mut m = mcp(&d, "a");
    for u in ["shoal://events/user.p", "shoal://events/user.q"] {
        assert!(m
            .call("resources/subscribe", json!({"uri": u}))
            .get("error")
            .is_none());
    }
    let r = m.call(
        "resources/subscribe",
        json!({"uri": "shoal://events/user.r"}),
    );
    assert_eq!(err_code(&r), -32040, "{r}");

    // c, c2, c3, m are 4 connections: the next is refused with the key named.
    let st = c.ok("daemon.status", json!({}));
    assert_eq!(st["limits"]["connections"]["used"], json!(4), "{st}");
    assert_eq!(st["limits"]["connections"]["max"], json!(4));
    assert_eq!(st["limits"]["sessions"]["used"], json!(2));
    assert_eq!(st["limits"]["sessions"]["max"], json!(2));
    // Past them, the local user's two reserved places: for the kernel protocol, not MCP.
    let mut c5 = d.conn();
    c5.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}));
    let r = c5.recv();
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("max_connections"));
    drop(c5);
    let mut r1 = d.conn();
    r1.attach("a");
    let mut r2 = d.conn();
    r2.attach("a");
    assert_eq!(
        r2.ok("daemon.status", json!({}))["limits"]["connections"]["used"],
        json!(6)
    );
    let mut c7 = d.conn();
    let r = c7.recv();
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("max_connections"));
    drop((c7, r1, r2));
    // Closing one frees its place.
    drop(m);
    let mut c6 = eventually("a free connection", Duration::from_secs(10), || {
        let mut c6 = d.conn();
        c6.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "session.attach", "params": {"session": "a"}}));
        let r = c6.recv();
        r.get("result").is_some().then_some(c6)
    });
    c6.ok("exec", json!({"src": "1"}));

    // Closing a session frees a session slot.
    c.ok("session.close", json!({"session": "b"}));
    c.attach("c");
}

fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

// Row 4: out of descriptors (prlimit), the accept loop backs off (no spinning, few log
// lines) and recovers when descriptors free up.
#[test]
fn accept_backs_off_when_descriptors_run_out() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let st = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", d.pid()))
        .arg("--nofile=48:48")
        .status()
        .unwrap();
    assert!(st.success());
    let mut held = Vec::new();
    for _ in 0..60 {
        held.push(std::os::unix::net::UnixStream::connect(&d.socket).unwrap());
    }
    // Let the daemon hit EMFILE, then measure.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = cpu_ticks(d.pid());
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(d.pid()) - t0;
    let hz = 100.0; // USER_HZ
    let share = used as f64 / hz / w0.elapsed().as_secs_f64();
    assert!(share < 0.25, "the accept loop spins: {share:.2} of a core");
    drop(held);
    let mut c = eventually(
        "a connection after recovery",
        Duration::from_secs(20),
        || {
            let mut c = Conn::open(&d.socket);
            c.stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "session.attach", "params": {}}));
            let mut line = String::new();
            use std::io::BufRead;
            let mut r = std::io::BufReader::new(c.stream.try_clone().unwrap());
            r.read_line(&mut line).ok()?;
            line.contains("\"result\"").then_some(c)
        },
    );
    let _ = &mut c;
    let log = root.log();
    let lines = log.matches("accept failed").count();
    assert!(lines <= 3, "{lines} accept-failure lines");
    assert!(log.contains("backing off"), "{log}");
}

// `shoal status` (human and --json) shows each limit's use and the journal's health.
#[test]
fn status_shows_limit_use_and_journal_health() {
    let root = Root::new();
    let d = start_with_config(
        &root,
        "[limits]\nmax_sessions = 8\nmax_ptys_per_session = 3\n",
    );
    let mut c = d.conn();
    c.attach("spilly");
    // 12 MB of captured output: over the in-memory limit, so it is spilled (and kept while
    // the value is held as out:1).
    let r = c.ok("exec", json!({"src": "sh { head -c 12000000 /dev/zero }"}));
    assert!(r["ref"].is_string(), "{r}");
    for ch in ["user.a", "user.b", "user.c"] {
        c.ok("events.subscribe", json!({"channel": ch}));
    }
    let p = c.ok("pty.open", json!({"cmd": "sleep", "args": ["30"]}));
    assert!(p["pty_id"].is_string() || p["pty_id"].is_number(), "{p}");
    let (code, out, err) = run(
        &root,
        &["status", "--json", "--socket", d.socket.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    let l = &st["limits"];
    assert_eq!(l["sessions"]["max"], json!(8), "{l}");
    assert!(l["sessions"]["used"].as_u64().unwrap() >= 1, "{l}");
    assert!(l["connections"]["used"].as_u64().unwrap() >= 1, "{l}");
    assert_eq!(l["subscriptions_per_connection"]["used"], json!(3), "{l}");
    assert_eq!(l["ptys_per_session"]["used"], json!(1), "{l}");
    assert_eq!(l["ptys_per_session"]["max"], json!(3), "{l}");
    let spill = l["spill_bytes"]["used"].as_u64().unwrap();
    assert!(spill >= 4_000_000, "{l}");
    assert_eq!(l["spill_bytes"]["max"], json!(4u64 << 30), "{l}");
    let sess = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!("spilly"))
        .unwrap_or_else(|| panic!("{st}"));
    assert_eq!(sess["spill_bytes"].as_u64(), Some(spill), "{sess}");
    assert_eq!(st["journal"]["health"], json!("ok"), "{st}");

    let (code, text, _) = run(
        &root,
        &["status", "--socket", d.socket.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0);
    for want in [
        "subscriptions per connection 3/64",
        "ptys per session 1/3",
        "/4.0 GiB",
        "spill per session",
        "health   ok",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    assert!(text.contains("sessions ") && text.contains("/8"), "{text}");
    c.ok("pty.close", json!({"pty_id": p["pty_id"]}));
}
