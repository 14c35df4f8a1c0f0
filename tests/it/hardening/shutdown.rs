//! SIGTERM always exits 0 and removes the socket: with busy sessions, with a
//! session's child stopped (SIGSTOP; it does not outlive the daemon), and
//! with the state dir full (the final flush fails).

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::common::*;

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
    kill_with(pid, libc::SIGSTOP);
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
