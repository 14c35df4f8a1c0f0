//! Daemon hardening (docs/protocol.md §10): session names, lock files,
//! unattached connections, quotas, per-call cancellation, disconnects,
//! descriptor exhaustion, journal faults, durable `out:N` numbering and
//! SIGTERM. Faults are real: tmpfs mounts, prlimit, SIGKILL.

mod common;

use std::io::Write;
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn config(root: &Root, name: &str, body: &str) -> PathBuf {
    let p = root.path().join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn start_with_config(root: &Root, body: &str) -> Daemon {
    let cfg = config(root, "hard.toml", body);
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    )
}

fn err_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error: {r}"))
}

/// Wait until `session` reports busy in `daemon.status`.
fn wait_busy(d: &Daemon, session: &str) {
    let mut c = d.conn();
    c.attach("status-probe");
    eventually("session busy", Duration::from_secs(10), || {
        let st = c.ok("daemon.status", json!({}));
        st["sessions"]
            .as_array()?
            .iter()
            .any(|s| s["name"] == json!(session) && s["busy"] == json!(true))
            .then_some(())
    });
}

/// A raw MCP connection (the shim's `shoal/attach`, then `initialize`).
fn mcp(d: &Daemon, session: &str) -> Conn {
    let mut c = d.conn();
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": session}}));
    c.ok(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c
}

/// Read frames until the response with `id` (notifications are skipped).
#[allow(dead_code)]
fn recv_id(c: &mut Conn, id: u64) -> Value {
    loop {
        let f = c.recv();
        if f.get("id") == Some(&json!(id)) {
            return f;
        }
    }
}

// Row 3: names with NUL, control characters or over 256 bytes are -32602, at once, for the
// kernel and for the shim's `shoal/attach`; the daemon goes on.
#[test]
fn session_names_are_validated() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    for bad in ["a\u{0}b", "tab\there", "bell\u{7}", &"x".repeat(257)] {
        let r = c.call("session.attach", json!({"session": bad}));
        assert_eq!(err_code(&r), -32602, "{bad:?}: {r}");
    }
    let long = "y".repeat(256);
    assert_eq!(c.attach(&long)["session"], json!(long));
    assert_eq!(
        c.ok("exec", json!({"src": "6 * 7"}))["value"],
        json!({"$": "int", "v": 42})
    );

    let mut m = mcp(&d, "a\u{0}b");
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1"}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert_eq!(r["structuredContent"]["code"], json!(-32602), "{r}");

    // No crash loop: nothing restarted, no panic logged.
    let st = c.ok("daemon.status", json!({}));
    let restarts: u64 = st["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["restarts"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(restarts, 0, "{st}");
    assert!(!root.log().contains("panic"), "{}", root.log());
}

// Row 10: a planted symlink at the daemon's lock or the shim's start lock is refused and its
// target never created.
#[test]
fn lock_files_do_not_follow_symlinks() {
    let root = Root::new();
    let socket = root.socket();
    let victim = root.path().join("victim");
    let lock = PathBuf::from(format!("{}.lock", socket.display()));
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = root
        .command()
        .args(["daemon", "--socket", socket.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!victim.exists(), "the daemon created the link's target");
    std::fs::remove_file(&lock).unwrap();

    let start = PathBuf::from(format!("{}.start.lock", socket.display()));
    std::os::unix::fs::symlink(&victim, &start).unwrap();
    let (code, _, err) = run(&root, &["mcp", "--socket", socket.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!victim.exists(), "the shim created the link's target");
    assert!(daemons_on(&socket).is_empty());
}

// Row 11: before attaching only session.attach (parse, complete) answer; blob.get is bounded.
#[test]
fn unattached_connections_can_only_attach() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    for (m, p) in [
        ("journal.query", json!({})),
        ("journal.get", json!({"id": 1})),
        ("blob.get", json!({"hash": "00".repeat(32)})),
        ("events.read", json!({"channel": "journal"})),
        ("value.get", json!({"ref": "out:1"})),
        ("exec", json!({"src": "1"})),
    ] {
        let r = c.call(m, p);
        assert_eq!(err_code(&r), -32000, "{m}: {r}");
    }
    c.attach("big");
    c.ok("exec", json!({"src": "range(0, 50000).map(x => x * 3)"}));
    // Batched mode records after the reply: wait for the entry.
    let es = eventually("the entry", Duration::from_secs(10), || {
        let es = c.ok("journal.query", json!({"limit": 1}));
        (!es.as_array()?.is_empty()).then_some(es)
    });
    let out = es[0]["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("{es}"))
        .iter()
        .find(|o| o["kind"] == json!("value"))
        .unwrap_or_else(|| panic!("{}", es[0]))
        .clone();
    assert!(out["len"].as_u64().unwrap() > 100_000, "{out}");
    let hash = out["hash"].as_str().unwrap();
    let b = c.ok("blob.get", json!({"hash": hash}));
    assert_eq!(b["value"]["$"], json!("ref"), "unbounded blob.get");
    assert_eq!(b["value"]["uri"], json!(format!("shoal://val/{hash}")));
    assert!(b.to_string().len() < 16_384, "{}", b.to_string().len());
    let b = c.ok(
        "blob.get",
        json!({"hash": hash, "max_bytes": 100_000_000u64}),
    );
    assert!(b.to_string().len() < 70_000 + 4096);
    // A small blob still comes back whole.
    c.ok("exec", json!({"src": "3"}));
    let es = eventually("the entry", Duration::from_secs(10), || {
        let es = c.ok("journal.query", json!({"limit": 1}));
        (es[0]["src"] == json!("3")).then_some(es)
    });
    let h = es[0]["outputs"][0]["hash"].as_str().unwrap().to_string();
    assert_eq!(
        c.ok("blob.get", json!({"hash": h}))["value"],
        json!({"$": "int", "v": 3})
    );
}

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
    let mut c5 = d.conn();
    let r = c5.recv();
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("max_connections"));
    drop(c5);
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

// Row 7: cancelling a call queued behind another in the same session removes only it; the
// running call is untouched. Cancelling the running call stops only that one.
#[test]
fn cancellation_belongs_to_its_call() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("shared");
    a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "exec",
        "params": {"src": "sh { sleep 2; echo done }", "position": "value"}}));
    wait_busy(&d, "shared");
    let mut b = d.conn();
    b.attach("shared");
    b.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "exec", "params": {"src": "6 * 7"}}));
    b.send(&json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": 7}}));
    let t0 = Instant::now();
    let r = b.recv();
    assert_eq!(r["id"], json!(7));
    assert_eq!(r["error"]["data"]["code"], json!("cancelled"), "{r}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
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
        "arguments": {"src": format!("sh {{ sleep 30; touch {} }}", marker.display())}}}),
    );
    wait_busy(&d, "loop");
    drop(m);
    let t0 = Instant::now();
    assert_eq!(
        b.ok("exec", json!({"src": "3"}))["value"],
        json!({"$": "int", "v": 3})
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
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

// SIGTERM exits 0 and removes the socket whatever the sessions hold.
#[test]
fn sigterm_exits_zero_with_busy_sessions() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("spin");
    a.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "while true { }"}}),
    );
    let mut b = d.conn();
    b.attach("sleep");
    b.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "sh { sleep 61.25 }"}}),
    );
    wait_busy(&d, "spin");
    wait_busy(&d, "sleep");
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(15))
        .expect("daemon did not exit");
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(!d.socket.exists());
    // The session's process was terminated, not orphaned.
    let orphans: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("sleep 61.25"))
        .collect();
    assert!(orphans.is_empty(), "{orphans:?}");
    let _ = a.stream.write_all(b"\n");
}

/// A tmpfs mounted for a test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(
            st.success(),
            "mount tmpfs on {} (this test needs root)",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }

    /// Fill the file system completely; returns the filler to free it later.
    fn fill(&self) -> PathBuf {
        let p = self.0.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let block = vec![0x5au8; 64 * 1024];
        loop {
            if f.write_all(&block).is_err() {
                break;
            }
        }
        let small = [0x5au8; 512];
        while f.write_all(&small).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

fn journal_status(c: &mut Conn) -> Value {
    c.ok("daemon.status", json!({}))["journal"].clone()
}

/// A value hard to compress, so committing it needs real space.
const BIG: &str = "range(0, 40000).map(x => (x * 7919 + 13) % 1000003)";

// Row 5, immediate: with the state dir full an exec answers -32603 data.journal "unavailable",
// status shows the writer degraded with its error, and it recovers by itself once space
// returns; after a restart every acknowledged ref answers its own value.
#[test]
fn a_full_disk_is_never_silent_immediate() {
    let root = Root::new();
    let cfg = config(&root, "imm.toml", "[journal]\ndurability = \"immediate\"\n");
    let fs = Tmpfs::mount(&root.state_dir(), "3m");
    let args = ["--config", cfg.to_str().unwrap()];
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("disk");
    let mut acked: Vec<(String, i64)> = Vec::new();
    for i in 1..=3 {
        let r = c.ok("exec", json!({"src": format!("{i} * 100")}));
        acked.push((r["ref"].as_str().unwrap().to_string(), i * 100));
    }
    let filler = fs.fill();
    let r = c.call("exec", json!({"src": BIG}));
    assert_eq!(err_code(&r), -32603, "{r}");
    assert_eq!(r["error"]["data"]["journal"], json!("unavailable"), "{r}");
    let j = journal_status(&mut c);
    assert_eq!(j["health"], json!("degraded"), "{j}");
    assert!(
        j["last_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{j}"
    );
    let text = run(
        &root,
        &["status", "--socket", d.socket.to_str().unwrap()],
        &[],
    )
    .1;
    assert!(text.contains("DEGRADED"), "{text}");

    std::fs::remove_file(&filler).unwrap();
    // Recovers by itself (reopen + retry): an exec succeeds again and status is ok.
    let r = eventually("the journal to recover", Duration::from_secs(20), || {
        let r = c.call("exec", json!({"src": "4 * 100"}));
        r.get("result").cloned()
    });
    acked.push((r["ref"].as_str().unwrap().to_string(), 400));
    let r = c.ok("exec", json!({"src": BIG}));
    assert!(r["ref"].is_string());
    eventually("health ok", Duration::from_secs(10), || {
        (journal_status(&mut c)["health"] == json!("ok")).then_some(())
    });
    let logged = root.log().matches("journal commit failed").count()
        + root.log().matches("journal reopen failed").count();
    assert!(logged <= 4, "failure lines are not rate-limited: {logged}");

    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_timeout(Duration::from_secs(15)).unwrap().code(),
        Some(0)
    );
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("disk");
    for (reference, v) in &acked {
        let r = c.ok("value.get", json!({"ref": reference}));
        assert_eq!(r["value"], json!({"$": "int", "v": v}), "{reference}");
    }
    drop(c);
    drop(d);
    drop(fs);
}

// Row 5, batched: results carry journal "degraded" while commits fail, acknowledged entries
// are kept and committed once space returns.
#[test]
fn a_full_disk_is_never_silent_batched() {
    let root = Root::new();
    let cfg = config(
        &root,
        "bat.toml",
        "[journal]\ndurability = \"batched\"\nflush_ms = 20\n",
    );
    let fs = Tmpfs::mount(&root.state_dir(), "3m");
    let args = ["--config", cfg.to_str().unwrap()];
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("disk");
    c.ok("exec", json!({"src": "1"}));
    let filler = fs.fill();
    c.ok("exec", json!({"src": BIG}));
    let mut acked: Vec<(String, i64)> = Vec::new();
    let mut i = 0;
    eventually("a degraded result", Duration::from_secs(20), || {
        i += 1;
        let r = c.call("exec", json!({"src": format!("{i} + 5000")}));
        let res = r.get("result")?;
        acked.push((res["ref"].as_str()?.to_string(), i + 5000));
        (res["journal"] == json!("degraded")).then_some(())
    });
    let j = journal_status(&mut c);
    assert_eq!(j["health"], json!("degraded"), "{j}");
    assert!(j["last_error"].is_string(), "{j}");
    let marker = "77777 + 1";
    let r = c.ok("exec", json!({"src": marker}));
    assert_eq!(r["journal"], json!("degraded"), "{r}");
    acked.push((r["ref"].as_str().unwrap().to_string(), 77778));

    std::fs::remove_file(&filler).unwrap();
    eventually("health ok", Duration::from_secs(20), || {
        (journal_status(&mut c)["health"] == json!("ok")).then_some(())
    });
    let r = c.ok("exec", json!({"src": "2"}));
    assert!(r.get("journal").is_none(), "{r}");
    // The entry acknowledged while degraded was kept and committed.
    let es = c.ok("journal.query", json!({"head": "77777"}));
    assert_eq!(es.as_array().map(Vec::len), Some(1), "{es}");

    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_timeout(Duration::from_secs(15)).unwrap().code(),
        Some(0)
    );
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("disk");
    for (reference, v) in &acked {
        let r = c.call("value.get", json!({"ref": reference}));
        match r.get("result") {
            Some(res) => assert_eq!(res["value"], json!({"$": "int", "v": v}), "{reference}"),
            None => assert_eq!(err_code(&r), -32004, "{reference}: {r}"),
        }
    }
    drop(c);
    drop(d);
    drop(fs);
}

// Row 6: after SIGKILL (batched, nothing committed but the reservation), numbering continues
// past every number handed out; an old ref answers its own value or -32004, never another.
#[test]
fn refs_are_never_handed_out_twice() {
    let root = Root::new();
    let cfg = config(
        &root,
        "b.toml",
        "[journal]\ndurability = \"batched\"\nflush_ms = 60000\n",
    );
    let args = ["--config", cfg.to_str().unwrap()];
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("crash");
    let mut held = Vec::new();
    for i in 1..=10i64 {
        let r = c.ok("exec", json!({"src": format!("{i} * 10 + 1")}));
        held.push((r["ref"].as_str().unwrap().to_string(), i * 10 + 1));
    }
    d.signal(libc::SIGKILL);
    drop(c);
    drop(d);
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("crash");
    let r = c.ok("exec", json!({"src": "999"}));
    let n: u64 = r["ref"].as_str().unwrap()[4..].parse().unwrap();
    assert!(n > 10, "out:{n} was handed out before the crash");
    for (reference, v) in &held {
        let r = c.call("value.get", json!({"ref": reference}));
        match r.get("result") {
            Some(res) => assert_eq!(res["value"], json!({"$": "int", "v": v}), "{reference}"),
            None => assert_eq!(err_code(&r), -32004, "{reference}: {r}"),
        }
    }
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

// Row 11 (the rest): `parse` and `complete` are context-free and answer before attaching.
#[test]
fn parse_and_complete_answer_before_attach() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let r = c.ok("parse", json!({"src": "let x = [1, 2]\nx.len() + 1"}));
    assert_eq!(r["ast_version"], json!(2), "{r}");
    assert_eq!(r["ast"]["stmts"].as_array().map(Vec::len), Some(2), "{r}");
    let r = c.call("parse", json!({"src": "let = 1"}));
    assert_eq!(err_code(&r), -32001, "{r}");
    let span = &r["error"]["data"]["span"];
    assert!(
        span["start"].as_u64().unwrap() <= span["end"].as_u64().unwrap(),
        "{r}"
    );
    assert!(r["error"]["data"].get("hint").is_some(), "{r}");
    assert_eq!(err_code(&c.call("parse", json!({}))), -32602);
    let r = c.ok(
        "complete",
        json!({"src": "let total = 1\nfn tally() { 2 }\nta", "cursor": 1000}),
    );
    assert_eq!(r["candidates"], json!(["tally"]), "{r}");
    let r = c.ok("complete", json!({"src": "wh"}));
    assert_eq!(r["candidates"], json!(["while"]), "{r}");
    // Not on a character boundary: an answer, not a dropped connection.
    let r = c.ok("complete", json!({"src": "é", "cursor": 1}));
    assert!(r["candidates"].as_array().unwrap().len() > 10, "{r}");
    // A tree too deep to return is refused, and the connection goes on.
    let deep = format!("{}1{}", "[".repeat(250), "]".repeat(250));
    let chain = vec!["1"; 999].join(" + ");
    let src = format!("{}{chain}{}", "(".repeat(200), ")".repeat(200));
    for s in [deep, src] {
        let r = c.call("parse", json!({ "src": s }));
        if r.get("error").is_some() {
            assert!([-32602, -32001].contains(&err_code(&r)), "{r}");
        }
    }
    // Everything else still needs an attachment.
    assert_eq!(err_code(&c.call("exec", json!({"src": "1"}))), -32000);
    c.attach("p");
    assert_eq!(
        c.ok("exec", json!({"src": "6 * 7"}))["value"],
        json!({"$": "int", "v": 42})
    );
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

fn ref_n(r: &Value) -> u64 {
    r["ref"].as_str().unwrap_or_else(|| panic!("{r}"))[4..]
        .parse()
        .unwrap()
}

// `out:N` after restarts: a clean stop (SIGTERM) gives back the unused reservation, so the
// numbering goes on right after the last number; a SIGKILL still skips past every number
// possibly handed out, and an old ref answers its own value or -32004.
#[test]
fn out_numbering_after_sigterm_and_sigkill() {
    let root = Root::new();
    let cfg = config(&root, "b.toml", "[journal]\ndurability = \"batched\"\n");
    let args = ["--config", cfg.to_str().unwrap()];
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("num");
    for i in 1..=3u64 {
        assert_eq!(ref_n(&c.ok("exec", json!({"src": format!("{i}")}))), i);
    }
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_timeout(Duration::from_secs(15)).unwrap().code(),
        Some(0)
    );
    drop(c);
    drop(d);
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("num");
    assert_eq!(
        ref_n(&c.ok("exec", json!({"src": "40"}))),
        4,
        "a clean stop skipped numbers"
    );
    assert_eq!(
        c.ok("value.get", json!({"ref": "out:2"}))["value"],
        json!({"$": "int", "v": 2})
    );
    // Twice in a row (a restart with no exec keeps the mark where it was).
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_timeout(Duration::from_secs(15)).unwrap().code(),
        Some(0)
    );
    drop(c);
    drop(d);
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    d.signal(libc::SIGTERM);
    assert_eq!(
        d.wait_timeout(Duration::from_secs(15)).unwrap().code(),
        Some(0)
    );
    drop(d);
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("num");
    assert_eq!(ref_n(&c.ok("exec", json!({"src": "50"}))), 5);
    let held = ref_n(&c.ok("exec", json!({"src": "60"})));
    assert_eq!(held, 6);
    d.signal(libc::SIGKILL);
    drop(c);
    drop(d);
    let d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("num");
    let n = ref_n(&c.ok("exec", json!({"src": "70"})));
    assert!(
        n > held,
        "out:{n} may have been handed out before the crash"
    );
    let r = c.call("value.get", json!({"ref": "out:6"}));
    match r.get("result") {
        Some(res) => assert_eq!(res["value"], json!({"$": "int", "v": 60}), "{r}"),
        None => assert_eq!(err_code(&r), -32004, "{r}"),
    }
}

fn pids_running(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(needle)
                .then_some(pid)
        })
        .collect()
}

// SIGTERM exits 0 and removes the socket while a session's child is stopped (SIGSTOP); the
// child does not outlive the daemon.
#[test]
fn sigterm_exits_zero_with_a_stopped_child() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("stopped");
    a.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "sh { sleep 62.75 }"}}),
    );
    let pid = eventually("the child", Duration::from_secs(10), || {
        pids_running("sleep 62.75").first().copied()
    });
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    eventually("the child stopped", Duration::from_secs(10), || {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        st.rsplit(')')
            .next()?
            .trim_start()
            .starts_with('T')
            .then_some(())
    });
    d.signal(libc::SIGTERM);
    let st = d.wait_timeout(Duration::from_secs(20));
    let left = pids_running("sleep 62.75");
    for p in &left {
        kill_pid(*p);
    }
    let st = st.expect("daemon did not exit");
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(!d.socket.exists());
    assert!(
        left.is_empty(),
        "the stopped child outlived the daemon: {left:?}"
    );
}

// SIGTERM exits 0 and removes the socket while the state dir is full (the final flush fails).
#[test]
fn sigterm_exits_zero_with_a_full_disk() {
    let root = Root::new();
    let cfg = config(
        &root,
        "full.toml",
        "[journal]\ndurability = \"batched\"\nflush_ms = 20\n",
    );
    let fs = Tmpfs::mount(&root.state_dir(), "3m");
    let args = ["--config", cfg.to_str().unwrap()];
    let mut d = Daemon::start_with(&root, &root.socket(), &args, &[]);
    let mut c = d.conn();
    c.attach("full");
    c.ok("exec", json!({"src": "1"}));
    let _filler = fs.fill();
    let mut i = 0;
    eventually("a degraded result", Duration::from_secs(20), || {
        i += 1;
        let r = c.call("exec", json!({"src": format!("{BIG}.len() + {i}")}));
        (r.get("result")?["journal"] == json!("degraded")).then_some(())
    });
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("daemon did not exit");
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(!d.socket.exists());
    drop(c);
    drop(d);
    drop(fs);
}
