//! Leash: a token principal's children cannot reach the daemon's own
//! socket (which admits its uid as the permissive local principal), on any
//! spawn path (foreground, background task, PTY), while a unix socketpair
//! and loopback TCP keep working for a non-hermetic principal; the daemon
//! passes its children no socket descriptor; a `shoal` client run by such a
//! child fails at once with a clear error instead of starting a daemon; and
//! the local principal is unaffected.

use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

/// Python `code` (single-quote free), then `PY_OK` or `PY_NO` (spelt apart
/// in the source, so only the output contains the words).
fn py(code: &str) -> String {
    format!("python3 -c '{code}' 2>&1 && echo PY\"\"_OK || echo PY\"\"_NO")
}

fn unix_connect(sock: &Path) -> String {
    py(&format!(
        "import socket; socket.socket(socket.AF_UNIX).connect(\"{}\")",
        sock.display()
    ))
}

/// Prints `SOCK_FD` for every socket among descriptors 3..1024 (fstat,
/// no /proc), then `FDS_CHECKED`.
const FD_PROBE: &str = "python3 -c 'import os, stat\nfor d in range(3, 1024):\n    try:\n        m = os.fstat(d).st_mode\n    except OSError:\n        continue\n    if stat.S_ISSOCK(m): print(\"SOCK\" \"_FD\", d)\nprint(\"FDS\" \"_CHECKED\")'";

const SOCKETPAIR: &str =
    "import socket; a, b = socket.socketpair(); a.sendall(b\"x\"); assert b.recv(1) == b\"x\"";

fn tcp_connect(port: u16) -> String {
    py(&format!(
        "import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)"
    ))
}

/// Foreground exec of a shell snippet; the rendered outcome.
fn fg(c: &mut Conn, sh: &str) -> String {
    c.ok("exec", json!({"src": format!("sh {{ {sh} }}")}))
        .to_string()
}

/// The same as a background task; the rendered result.
fn bg(c: &mut Conn, sh: &str) -> String {
    let r = c.ok(
        "exec",
        json!({"src": format!("sh {{ {sh} }}"), "background": true}),
    );
    let task = r["task"].as_str().unwrap().to_string();
    let rec = c.ok("task.await", json!({"task": task, "timeout_ms": 20000}));
    assert_eq!(rec["state"], "completed", "{rec}");
    c.ok(
        "value.get",
        json!({"ref": rec["result_ref"], "format": "render"}),
    )
    .to_string()
}

/// The same on a PTY; the screen once `END` shows.
fn on_pty(c: &mut Conn, sh: &str) -> String {
    c.pty_screen_after(sh, 200, 20).to_string()
}

/// Refused by the kernel: denied, or (in the child's namespaces, where the
/// daemon's files and process are not there at all) not found.
fn refused(out: &str) -> bool {
    out.contains("PY_NO")
        && (out.contains("Permission denied") || out.contains("No such"))
        && !out.contains("PY_OK")
}

#[test]
fn token_principals_cannot_reach_the_daemon_socket() {
    let root = Root::new();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    // agent:wide is granted every path (its grants alone confine nothing);
    // agent:proj may read /usr and the test dir, write only the project.
    let cfg = root.path().join("shoal.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[policy.principal."agent:wide"]
opaque = "allow"
auto_apply = "in-grant"

[policy.principal."agent:wide".fs]
read = ["/**"]
write = ["/**"]
delete = ["/**"]

[policy.principal."agent:proj"]
opaque = "allow"
auto_apply = "in-grant"

[policy.principal."agent:proj".fs]
read = ["/usr/**", "/lib/**", "/lib64/**", "/etc/**", "/bin/**", "/proc/**", "/dev/**", "{r}/**"]
write = ["{p}/**"]
delete = ["{p}/**"]
"#,
            r = root.path().display(),
            p = project.display()
        ),
    )
    .unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sock = root.socket();
    let unix = unix_connect(&sock);
    let pair = py(SOCKETPAIR);
    let tcp = tcp_connect(port);

    let (st, status, err) = run(
        &root,
        &["status", "--json", "--socket", sock.to_str().unwrap()],
        &[],
    );
    assert_eq!(st, 0, "{err}");
    let status: Value = serde_json::from_str(&status).unwrap();
    let abi = status["leash"]["landlock_abi"]
        .as_i64()
        .unwrap_or_else(|| panic!("{status}"));
    for principal in ["agent:wide", "agent:proj"] {
        let mut c = d.conn();
        let r = c.attach_token(principal, &create_token(&root, principal));
        assert_eq!(r["result"]["principal"], json!(principal), "{r}");
        // The daemon's socket: refused at socket(2), on every spawn path.
        let out = fg(&mut c, &unix);
        assert!(refused(&out), "{principal} foreground: {out}");
        assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");
        let out = bg(&mut c, &unix);
        assert!(refused(&out), "{principal} background: {out}");
        let out = on_pty(&mut c, &unix);
        assert!(refused(&out), "{principal} pty: {out}");
        // A socketpair and loopback TCP still work.
        let out = fg(&mut c, &pair);
        assert!(out.contains("PY_OK"), "{principal} socketpair: {out}");
        let out = fg(&mut c, &tcp);
        assert!(out.contains("PY_OK"), "{principal} tcp: {out}");
        let out = on_pty(&mut c, &tcp);
        assert!(out.contains("PY_OK"), "{principal} tcp on a pty: {out}");
        // No descriptor of the daemon's reaches the child.
        // (A token's children see no /proc: every descriptor number is
        // probed with fstat instead.)
        for out in [
            fg(&mut c, FD_PROBE),
            bg(&mut c, FD_PROBE),
            on_pty(&mut c, FD_PROBE),
        ] {
            assert!(out.contains("FDS_CHECKED"), "{out}");
            assert!(!out.contains("SOCK_FD"), "{principal} inherits: {out}");
        }
        // Nor can the child attach to the daemon to borrow its descriptors.
        let mem = py(&format!("open(\"/proc/{}/mem\", \"rb\")", d.pid()));
        let out = fg(&mut c, &mem);
        assert!(refused(&out), "{principal} /proc/PID/mem: {out}");
        // Nor signal it (Landlock signal scoping, ABI 6+; in its own pid
        // namespace the daemon's pid names no process).
        if abi >= 6 {
            let out = fg(&mut c, &py(&format!("import os; os.kill({}, 0)", d.pid())));
            assert!(
                out.contains("PY_NO")
                    && (out.contains("PermissionError") || out.contains("ProcessLookupError"))
                    && !out.contains("PY_OK"),
                "{principal} kill: {out}"
            );
        }
    }

    // A shoal client run by a sandboxed child fails at once and clearly
    // (agent:wide may write the socket dir: it must not start a daemon).
    let mut c = d.conn();
    c.attach_token("shim", &create_token(&root, "agent:wide"));
    let bin = env!("CARGO_BIN_EXE_shoal");
    for args in [
        format!("exec --socket {} \"echo hi\"", sock.display()),
        format!("mcp --socket {}", sock.display()),
    ] {
        let out = fg(&mut c, &format!("{bin} {args} </dev/null 2>&1; echo RC=$?"));
        assert!(
            out.contains("Permission denied") && out.contains("unix sockets"),
            "{args}: {out}"
        );
        assert!(!out.contains("RC=0"), "{args}: {out}");
    }
    assert_eq!(daemons_on(&sock).len(), 1, "no second daemon was started");

    // The local principal is unaffected.
    let mut l = d.conn();
    l.attach("local");
    let out = fg(&mut l, &unix);
    assert!(out.contains("PY_OK"), "local: {out}");
    let out = fg(&mut l, FD_PROBE);
    assert!(
        out.contains("FDS_CHECKED") && !out.contains("SOCK_FD"),
        "local inherits: {out}"
    );
    drop(listener);
}
