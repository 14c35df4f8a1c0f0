//! Journal faults for real: a full state dir (tmpfs) in both durability
//! modes is never silent and recovers by itself, and `out:N` numbers are
//! never handed out twice across SIGKILL and SIGTERM restarts.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::common::*;

// Row 5, immediate: with the state dir full an exec answers -32603 data.journal "unavailable",
// status shows the writer degraded with its error, and it recovers by itself once space
// returns; after a restart every acknowledged ref answers its own value.
#[test]
fn a_full_disk_is_never_silent_immediate() {
    if !have_root("hardening::journal_faults::a_full_disk_is_never_silent_immediate") {
        return;
    }
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
    if !have_root("hardening::journal_faults::a_full_disk_is_never_silent_batched") {
        return;
    }
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
