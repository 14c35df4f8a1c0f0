//! Processes belong to the daemon, dead or alive (docs/processes.md), against
//! the real daemon: a `setsid` child is gone after `pty.close`,
//! `task.cancel`, `session.close` and a clean stop; after a SIGKILL of the
//! daemon, the next daemon on the same state dir kills what the dead one left
//! (cgroup mode and the `SHOAL_NO_CGROUP=1` fallback); `daemon.status` counts
//! each session's processes. Every program is a `sleep` whose duration is a
//! marker unique to the test, found in /proc; a guard kills leftovers.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// A unique `sleep` duration: `sleep <marker>` runs ~1000 s and is found by
/// its command line. Dropping it kills every process still carrying it.
struct Marker(String);

static NEXT: AtomicU32 = AtomicU32::new(1);

impl Marker {
    fn new() -> Marker {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Marker(format!("1000.{}{:03}", std::process::id(), n))
    }

    /// `sleep <marker>`.
    fn sleep(&self) -> String {
        format!("sleep {}", self.0)
    }

    /// Pids whose command line is `sleep <marker>` (zombies do not count).
    fn pids(&self) -> Vec<i32> {
        let want = format!("sleep\0{}\0", self.0);
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            if cmd.ends_with(want.as_bytes()) && cmd.starts_with(b"sleep") {
                out.push(pid);
            }
        }
        out
    }

    fn wait_running(&self) {
        eventually(
            &format!("{} to run", self.sleep()),
            Duration::from_secs(10),
            || (!self.pids().is_empty()).then_some(()),
        );
    }

    fn wait_gone(&self, after: &str) {
        eventually(
            &format!("{} to be gone after {after}", self.sleep()),
            Duration::from_secs(15),
            || self.pids().is_empty().then_some(()),
        );
    }
}

impl Drop for Marker {
    fn drop(&mut self) {
        for p in self.pids() {
            kill_pid(p);
        }
    }
}

fn exec(c: &mut Conn, src: &str) -> Value {
    c.ok("exec", json!({"src": src, "position": "value"}))
}

/// `sh { setsid sleep <a> & sleep <b> } &`: a task whose program started a
/// child in a new session; the task's id.
fn setsid_task(c: &mut Conn, a: &Marker, b: &Marker) -> String {
    let r = exec(
        c,
        &format!("sh {{ setsid {} & {} }} &", a.sleep(), b.sleep()),
    );
    let id = r["value"]["id"].as_u64().expect("a task handle");
    format!("task:{id}")
}

/// The session row of `daemon.status`.
fn session_row(c: &mut Conn, name: &str) -> Option<Value> {
    let st = c.ok("daemon.status", json!({}));
    st["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

fn procs(c: &mut Conn, name: &str) -> u64 {
    session_row(c, name)
        .and_then(|r| r["procs"].as_u64())
        .unwrap_or_else(|| panic!("no procs in the status row of {name}"))
}

#[test]
fn a_setsid_child_is_gone_after_pty_close() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("p");
    let (a, b) = (Marker::new(), Marker::new());
    let script = format!("setsid {} & exec {}", a.sleep(), b.sleep());
    let o = c.ok("pty.open", json!({"cmd": "sh", "args": ["-c", script]}));
    a.wait_running();
    b.wait_running();
    c.ok("pty.close", json!({"pty_id": o["pty_id"]}));
    b.wait_gone("pty.close");
    a.wait_gone("pty.close");
}

#[test]
fn a_setsid_child_is_gone_after_task_cancel() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("t");
    let (a, b) = (Marker::new(), Marker::new());
    let task = setsid_task(&mut c, &a, &b);
    a.wait_running();
    b.wait_running();
    c.ok("task.cancel", json!({"task": task}));
    b.wait_gone("task.cancel");
    a.wait_gone("task.cancel");
}

#[test]
fn task_cancel_ends_what_an_earlier_program_of_the_task_left() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("t2");
    let (a, b) = (Marker::new(), Marker::new());
    // The first program exits at once, leaving a `setsid` child; the second runs on.
    let src = format!(
        "sh {{ setsid {} >/dev/null 2>&1 & }}\nsh {{ exec {} }}",
        a.sleep(),
        b.sleep()
    );
    let r = c.ok("exec", json!({"src": src, "background": true}));
    let task = r["task"].as_str().expect("task ref").to_string();
    a.wait_running();
    b.wait_running();
    c.ok("task.cancel", json!({"task": task}));
    b.wait_gone("task.cancel");
    a.wait_gone("task.cancel");
}

#[test]
fn a_setsid_child_is_gone_after_a_cancelled_foreground_exec() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("fg");
    let (a, b) = (Marker::new(), Marker::new());
    let src = format!(
        "sh {{ setsid {} >/dev/null 2>&1 & {} }}",
        a.sleep(),
        b.sleep()
    );
    c.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "exec", "params": {"src": src}}));
    a.wait_running();
    b.wait_running();
    // The session stays open (another client is attached); a hang-up
    // cancels the connection's foreground call.
    let mut keep = d.conn();
    keep.attach("fg");
    drop(c);
    b.wait_gone("a cancelled exec");
    a.wait_gone("a cancelled exec");
    assert!(session_row(&mut keep, "fg").is_some());
}

#[test]
fn a_setsid_child_is_gone_after_session_close() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("w");
    let a = Marker::new();
    // The foreground program ends at once; what it left keeps running (and
    // counting) until the session closes.
    exec(
        &mut c,
        &format!("sh {{ setsid {} >/dev/null 2>&1 & }}", a.sleep()),
    );
    a.wait_running();
    let mut other = d.conn();
    other.attach("other");
    other.ok("session.close", json!({"session": "w"}));
    a.wait_gone("session.close");
}

#[test]
fn a_setsid_child_is_gone_after_a_clean_stop() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("s");
    let (a, b, fg) = (Marker::new(), Marker::new(), Marker::new());
    exec(
        &mut c,
        &format!("sh {{ setsid {} >/dev/null 2>&1 & }}", fg.sleep()),
    );
    setsid_task(&mut c, &a, &b);
    for m in [&a, &b, &fg] {
        m.wait_running();
    }
    d.signal(libc::SIGTERM);
    assert!(
        d.wait_timeout(Duration::from_secs(30)).is_some(),
        "daemon did not stop"
    );
    for m in [&a, &b, &fg] {
        m.wait_gone("a clean stop");
    }
    assert!(!root.state_dir().join("processes").exists());
}

#[test]
fn status_counts_a_sessions_processes() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("st");
    assert_eq!(procs(&mut c, "st"), 0);
    let a = Marker::new();
    let r = exec(&mut c, &format!("sh {{ exec {} }} &", a.sleep()));
    let task = format!("task:{}", r["value"]["id"].as_u64().expect("task"));
    a.wait_running();
    eventually("procs 1", Duration::from_secs(10), || {
        (procs(&mut c, "st") == 1).then_some(())
    });
    let (code, out, _) = run(
        &root,
        &["status", "--socket", d.socket.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0);
    assert!(out.contains("PROCS"), "{out}");
    c.ok("task.cancel", json!({"task": task}));
    a.wait_gone("task.cancel");
    eventually("procs 0", Duration::from_secs(10), || {
        (procs(&mut c, "st") == 0).then_some(())
    });
}

/// A background task, a foreground exec (on another connection, still
/// running) and a PTY program that ignores SIGHUP; SIGKILL the daemon; a new
/// daemon on the same state dir kills every one of them.
fn restart_after_sigkill(env: &[(&str, &str)]) {
    let root = Root::new();
    let socket = root.socket();
    let mut d = Daemon::start_with(&root, &socket, &[], env);
    let mut c = d.conn();
    c.attach("k");
    let (bg, bg_escaped, fg, pty) = (Marker::new(), Marker::new(), Marker::new(), Marker::new());
    setsid_task(&mut c, &bg_escaped, &bg);
    let mut f = d.conn();
    f.attach("k2");
    f.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "exec",
        "params": {"src": format!("sh {{ {} }}", fg.sleep())}}));
    let script = format!("trap '' HUP; {}; echo done", pty.sleep());
    c.ok("pty.open", json!({"cmd": "sh", "args": ["-c", script]}));
    for m in [&bg, &bg_escaped, &fg, &pty] {
        m.wait_running();
    }
    let record = root.state_dir().join("processes");
    if !env.is_empty() {
        // The fallback records each program's group just after it started:
        // the task's, the exec's and the PTY's.
        eventually("three recorded groups", Duration::from_secs(10), || {
            let text = std::fs::read_to_string(&record).unwrap_or_default();
            (text.matches("\ngroup ").count() >= 3).then_some(())
        });
    }
    let before = std::fs::read_to_string(&record).unwrap_or_default();
    d.signal(libc::SIGKILL);
    assert!(d.wait_timeout(Duration::from_secs(10)).is_some());
    drop(c);
    drop(f);
    let d2 = Daemon::start_with(&root, &socket, &[], env);
    for m in [&bg, &fg, &pty] {
        m.wait_gone("a restart after SIGKILL");
    }
    assert!(before.contains(&format!("daemon {} ", d.pid())), "{before}");
    // The dead daemon's record was consumed; the new one names itself.
    let me = format!("daemon {} ", d2.pid());
    eventually("the new daemon's record", Duration::from_secs(10), || {
        let after = std::fs::read_to_string(&record).unwrap_or_default();
        after.contains(&me).then_some(())
    });
    eventually("the log of the recovery", Duration::from_secs(10), || {
        let log = root.log();
        log.contains("killed processes a previous daemon left behind")
            .then_some(())
    });
    if env.is_empty() {
        // The cgroup catches what left its process group too.
        bg_escaped.wait_gone("a restart after SIGKILL");
    }
}

#[test]
fn a_restart_after_sigkill_leaves_no_process_behind() {
    restart_after_sigkill(&[]);
}

#[test]
fn the_fallback_kills_recorded_groups_after_a_restart() {
    restart_after_sigkill(&[("SHOAL_NO_CGROUP", "1")]);
}

#[test]
fn the_fallback_ends_setsid_children_at_a_clean_stop() {
    let root = Root::new();
    let mut d = Daemon::start_with(&root, &root.socket(), &[], &[("SHOAL_NO_CGROUP", "1")]);
    let mut c = d.conn();
    c.attach("f");
    let a = Marker::new();
    // Its parent exits: the orphan is re-parented to the daemon (a subreaper).
    exec(
        &mut c,
        &format!("sh {{ setsid {} >/dev/null 2>&1 & }}", a.sleep()),
    );
    a.wait_running();
    d.signal(libc::SIGTERM);
    assert!(d.wait_timeout(Duration::from_secs(30)).is_some());
    a.wait_gone("a clean stop (fallback)");
}
