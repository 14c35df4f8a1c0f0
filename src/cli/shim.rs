//! `shoal mcp`: a byte pipe between stdio and the daemon socket.
//!
//! It writes one frame of its own, the `shoal/attach` notification carrying
//! `{session, token, cwd, env}`, then copies bytes both ways. It never prints to
//! stdout itself. Exit 0 when the client closes stdin (after the daemon has
//! answered what was sent); non-zero with one line on stderr when the daemon
//! cannot be reached or drops the connection.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;

pub fn run(socket: Option<PathBuf>, session: Option<String>, token: Option<String>) -> i32 {
    let path = shoal::paths::socket_path(socket.as_deref());
    let stream = match super::client::connect_or_start(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal mcp: cannot reach the daemon: {e}");
            return 1;
        }
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let attach = json!({
        "jsonrpc": "2.0",
        "method": "shoal/attach",
        // The client's environment and directory: a session this creates
        // starts with exactly these (docs/protocol.md §9).
        "params": {
            "session": session,
            "token": token,
            "cwd": cwd,
            "env": super::client::env_json(),
        },
    });
    let mut first = serde_json::to_vec(&attach).unwrap_or_default();
    first.push(b'\n');
    let mut to_daemon = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal mcp: {e}");
            return 1;
        }
    };
    if let Err(e) = to_daemon.write_all(&first) {
        eprintln!("shoal mcp: cannot write to the daemon: {e}");
        return 1;
    }

    let stdin_closed = Arc::new(AtomicBool::new(false));
    let closed = stdin_closed.clone();
    std::thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_daemon.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        closed.store(true, Ordering::SeqCst);
        let _ = to_daemon.shutdown(Shutdown::Write);
    });

    let mut from_daemon = stream;
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from_daemon.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|_| stdout.flush())
                    .is_err()
                {
                    // The client went away.
                    return 0;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("shoal mcp: lost the daemon connection: {e}");
                return 1;
            }
        }
    }
    if stdin_closed.load(Ordering::SeqCst) {
        0
    } else {
        eprintln!("shoal mcp: the daemon closed the connection");
        1
    }
}
