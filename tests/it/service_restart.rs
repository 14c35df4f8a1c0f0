//! The daemon supervises its EventBus, JournalWriter and Listener: a panic injected into each
//! (the `debug.crash` hook) is restarted and counted in `shoal status --json`, and the daemon
//! keeps serving (an exec journals and reads back, a subscriber gets new events, a new
//! connection is accepted); past `[daemon] max_restarts_per_minute` the bus stays off and
//! shows failed, and a Listener or JournalWriter that keeps crashing stops the daemon with
//! exit code 1 (what was acknowledged stays durable).

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

const HOOKS: &[(&str, &str)] = &[("SHOAL_DEBUG_HOOKS", "1")];

fn status(root: &Root, d: &Daemon) -> Option<Value> {
    let sock = d.socket.to_str().unwrap().to_string();
    let (_, out, _) = run(root, &["status", "--json", "--socket", &sock], &[]);
    serde_json::from_str(&out).ok()
}

/// The live row of a service actor, once its restart count is `n`.
fn restarted(root: &Root, d: &Daemon, kind: &str, n: u64) -> Value {
    eventually(
        &format!("{kind} restart #{n}"),
        Duration::from_secs(10),
        || {
            let st = status(root, d)?;
            let row = st["actors"]
                .as_array()?
                .iter()
                .find(|a| a["kind"] == kind && a["restarts"] == n && a["state"] != "failed")?
                .clone();
            (st["services"][kind]["restarts"] == n).then_some(row)
        },
    )
}

/// A daemon allowing one restart a minute, and a connection attached to `s`.
fn limited_daemon(root: &Root) -> (Daemon, Conn) {
    let cfg = root.path().join("config/shoal.toml");
    std::fs::write(&cfg, "[daemon]\nmax_restarts_per_minute = 1\n").unwrap();
    let cfg_s = cfg.to_str().unwrap().to_string();
    let d = Daemon::start_with(root, &root.socket(), &["--config", &cfg_s], HOOKS);
    let mut c = d.conn();
    c.attach("s");
    (d, c)
}

/// Crash `kind` once, wait for its restart, and crash it again (past a limit of one).
fn crash_twice(root: &Root, d: &Daemon, c: &mut Conn, kind: &str) {
    c.ok("debug.crash", json!({"actor": kind}));
    restarted(root, d, kind, 1);
    c.ok("debug.crash", json!({"actor": kind}));
}

/// Past the limit a vital service stops the daemon: exit code 1, the reason logged, the
/// socket removed.
fn stops_for_good(root: &Root, d: &mut Daemon, c: &mut Conn, kind: &str) {
    crash_twice(root, d, c, kind);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("the daemon stops");
    assert_eq!(st.code(), Some(1), "{st}");
    let log = root.log();
    for line in [
        format!("the {kind} crashed more than 1 times in a minute"),
        "the daemon cannot serve without it and stops".to_string(),
    ] {
        assert!(log.contains(&line), "{line}: {log}");
    }
    assert!(!d.socket.exists(), "the socket is removed at exit");
}

/// The next `event` notification on a connection that makes no calls.
fn next_event(c: &mut Conn) -> Value {
    loop {
        let f = c.recv();
        if f.get("method") == Some(&json!("event")) {
            return f["params"].clone();
        }
    }
}

#[test]
fn each_service_is_restarted_and_the_daemon_keeps_serving() {
    let root = Root::new();
    let d = Daemon::start_with(&root, &root.socket(), &[], HOOKS);
    let mut c = d.conn();
    c.attach("s");
    let mut sub = d.conn();
    sub.attach("s");
    let r = sub.ok("events.subscribe", json!({"channel": "journal"}));
    assert_eq!(r["subscribed"], json!(true));
    c.ok("exec", json!({"src": "1 + 1"}));
    let first = next_event(&mut sub);
    let seq0 = first["seq"].as_u64().unwrap();

    // The bus: the subscriber keeps its subscription and learns of the restart.
    let before = restarted(&root, &d, "event_bus", 0)["id"].clone();
    c.ok("debug.crash", json!({"actor": "event_bus"}));
    let row = restarted(&root, &d, "event_bus", 1);
    assert_ne!(row["id"], before, "a new incarnation: {row}");
    let marker = next_event(&mut sub);
    assert_eq!(marker["channel"], json!("journal"), "{marker}");
    assert_eq!(marker["payload"]["restarted"], json!(true), "{marker}");
    assert_eq!(marker["payload"]["latest_seq"], json!(seq0), "{marker}");
    c.ok("exec", json!({"src": "2 + 2"}));
    let ev = next_event(&mut sub);
    assert_eq!(ev["seq"], json!(seq0 + 1), "seqs go on: {ev}");
    assert_eq!(ev["payload"]["v"]["ok"]["v"], json!(true), "{ev}");
    // A new subscriber is served by the new bus: its ring replay holds only what was
    // published since the restart, then the live events.
    let mut sub2 = d.conn();
    sub2.attach("s");
    sub2.ok("events.subscribe", json!({"channel": "journal"}));
    c.ok("exec", json!({"src": "3 + 3"}));
    assert_eq!(next_event(&mut sub2)["seq"], json!(seq0 + 1));
    assert_eq!(next_event(&mut sub2)["seq"], json!(seq0 + 2));

    // The journal actor: an exec journals and is read back through the new one.
    c.ok("debug.crash", json!({"actor": "journal_writer"}));
    restarted(&root, &d, "journal_writer", 1);
    c.ok("exec", json!({"src": "40 + 2"}));
    let es = c.ok("journal.query", json!({"limit": 1}));
    assert_eq!(es[0]["src"], json!("40 + 2"), "{es}");

    // The listener: open connections go on, new ones are accepted.
    c.ok("debug.crash", json!({"actor": "listener"}));
    restarted(&root, &d, "listener", 1);
    let mut fresh = d.conn();
    fresh.attach("s");
    assert_eq!(
        fresh.ok("exec", json!({"src": "5 * 5"}))["value"]["v"],
        json!(25)
    );
    assert_eq!(
        c.ok("exec", json!({"src": "6 * 6"}))["value"]["v"],
        json!(36)
    );

    // The log says what happened.
    let log = root.log();
    for kind in ["event_bus", "journal_writer", "listener"] {
        assert!(
            log.contains(&format!("{kind} died; restarting it")),
            "{kind} restart not logged"
        );
    }
    // An unknown actor is a parameter error.
    let r = c.call("debug.crash", json!({"actor": "nope"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
}

#[test]
fn past_the_limit_the_bus_stays_off_and_a_failing_listener_stops_the_daemon() {
    let root = Root::new();
    let (mut d, mut c) = limited_daemon(&root);

    crash_twice(&root, &d, &mut c, "event_bus");
    let failed = eventually("the bus given up", Duration::from_secs(10), || {
        let st = status(&root, &d)?;
        (st["services"]["event_bus"]["failed"] == json!(true)).then_some(st)
    });
    let row = failed["actors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "event_bus")
        .cloned()
        .unwrap();
    assert_eq!(row["state"], json!("failed"), "{row}");
    assert_eq!(row["restarts"], json!(1), "{row}");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("not restarted"),
        "{row}"
    );
    // The human status shows it too.
    let sock = d.socket.to_str().unwrap().to_string();
    let (_, human, _) = run(&root, &["status", "--socket", &sock], &[]);
    assert!(human.contains("failed"), "{human}");
    // Everything but events still serves.
    assert_eq!(
        c.ok("exec", json!({"src": "1 + 1"}))["value"]["v"],
        json!(2)
    );
    assert!(root.log().contains("the daemon stops restarting it"));

    // The listener: one restart, then the daemon stops (it cannot accept without it).
    stops_for_good(&root, &mut d, &mut c, "listener");
}

#[test]
fn a_journal_actor_that_keeps_crashing_stops_the_daemon() {
    let root = Root::new();
    let (mut d, mut c) = limited_daemon(&root);
    c.ok("exec", json!({"src": "1 + 1"}));
    stops_for_good(&root, &mut d, &mut c, "journal_writer");
    // What was acknowledged is durable: a new daemon reads it back.
    let d2 = Daemon::start(&root);
    let mut c2 = d2.conn();
    c2.attach("s");
    let es = c2.ok("journal.query", json!({"limit": 1}));
    assert_eq!(es[0]["src"], json!("1 + 1"), "{es}");
}
