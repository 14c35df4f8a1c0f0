//! Daemon hardening (docs/protocol.md §10): session names, lock files,
//! unattached connections, quotas, per-call cancellation, disconnects,
//! descriptor exhaustion, journal faults, durable `out:N` numbering and
//! SIGTERM. Faults are real: tmpfs mounts, prlimit, SIGKILL. This file holds
//! the helpers the groups share; each group is its own file. Tests never
//! leave a daemon, a mount or a stopped process behind.

mod attach;
mod calls;
mod hangups;
mod journal_faults;
mod limits;
mod shutdown;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
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

fn ref_n(r: &Value) -> u64 {
    r["ref"].as_str().unwrap_or_else(|| panic!("{r}"))[4..]
        .parse()
        .unwrap()
}
