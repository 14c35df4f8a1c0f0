//! The daemon over its socket: kernel framing and errors, sessions, socket
//! rules, shutdown, status, config, supervision and socket activation.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

#[test]
fn kernel_framing_errors_keep_the_connection() {
    let root = Root::new();
    std::fs::create_dir_all(root.path().join("config/shoal")).unwrap();
    let cfg = root.path().join("small.toml");
    std::fs::write(&cfg, "[daemon]\nmax_frame_bytes = 4096\n").unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let mut c = d.conn();

    // Malformed JSON: -32700 with id null.
    c.send_raw(b"{not json\n");
    let r = c.recv();
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");
    assert_eq!(r["id"], Value::Null);

    // A notification gets no answer; the next request's answer comes first.
    c.send(&json!({"jsonrpc": "2.0", "method": "exec", "params": {"src": "1"}}));
    // Before attach: -32000.
    let r = c.call("exec", json!({"src": "1"}));
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    assert_eq!(r["error"]["message"], json!("attach to a session first"));

    // Unknown method: -32601 (before and after attach).
    let r = c.call("no.such.method", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");

    // Oversized frame: refused, connection stays.
    let mut big = vec![b'x'; 20_000];
    big.push(b'\n');
    c.send_raw(&big);
    let r = c.recv();
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit of 4096"),
        "{r}"
    );

    // Wrong jsonrpc version: -32600 with the id.
    c.send(&json!({"jsonrpc": "1.0", "id": 9, "method": "session.list"}));
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(9), json!(-32600)),
        "{r}"
    );

    // Still serving: pipelined attach + list in one write, answered in order.
    c.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"session.attach\",\"params\":{}}\n\
          {\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"session.list\"}\n",
    );
    let a = c.recv();
    let b = c.recv();
    assert_eq!(a["id"], json!("a"));
    assert_eq!(a["result"]["session"], json!("default"), "{a}");
    assert_eq!(
        a["result"]["principal"],
        json!(format!("uid:{}", rustix::process::geteuid().as_raw()))
    );
    assert_eq!(b["id"], json!("b"));
    assert_eq!(b["result"]["sessions"][0]["name"], json!("default"), "{b}");
    let r = c.call("no.such.method", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601));
    assert_eq!(r["error"]["data"]["method"], json!("no.such.method"));
}

#[test]
fn sessions_attach_list_close() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let r = c.ok(
        "session.attach",
        json!({"session": "w", "cwd": work, "client": {"kind": "t"}}),
    );
    assert_eq!(r["session"], json!("w"));
    assert_eq!(r["cwd"]["display"], json!(work.display().to_string()));
    assert_eq!(r["created"], json!(true));
    // Without client at all (client is optional).
    let mut c2 = d.conn();
    let r = c2.ok("session.attach", json!({"session": "w"}));
    assert_eq!(r["created"], json!(false));
    let r = c2.ok("session.attach", json!({}));
    assert_eq!(r["session"], json!("default"));

    let list = c.ok("session.list", json!({}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "w"]);
    let w = &list["sessions"][1];
    assert_eq!(w["clients"], json!(1), "{list}");

    let bad = c.call(
        "session.attach",
        json!({"session": "x", "cwd": "/nonexistent/dir"}),
    );
    assert_eq!(bad["error"]["code"], json!(-32602), "{bad}");

    let r = c.ok("session.close", json!({"session": "w"}));
    assert_eq!(r, json!({"session": "w", "closed": true}));
    // This connection was attached to w: attach again first.
    let r = c.call("exec", json!({"src": "1"}));
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    let r = c2.call("session.close", json!({"session": "nope"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let list = c2.ok("session.list", json!({}));
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn exec_results_refs_and_errors() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("e");
    let r = c.ok("exec", json!({"src": "6 * 7"}));
    assert_eq!(r["ref"], json!("out:1"), "{r}");
    assert_eq!(r["uri"], json!("shoal://out/1"));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}));
    assert_eq!(r["render"], json!("42"));
    assert!(r["elapsed_ms"].as_f64().unwrap() >= 0.0);
    let r = c.ok(
        "exec",
        json!({"src": "let x = 'a'\nx + 'b'", "position": "value"}),
    );
    assert_eq!(r["ref"], json!("out:2"));
    assert_eq!(r["value"], json!({"$": "str", "v": "ab"}));

    assert_eq!(
        c.ok("value.get", json!({"ref": "out:1"})),
        json!({"ref": "out:1", "value": {"$": "int", "v": 42}})
    );
    assert_eq!(
        c.ok("value.get", json!({"ref": "out:2", "format": "inline"}))["inline"],
        json!("\"ab\"")
    );
    assert_eq!(
        c.ok("value.get", json!({"ref": "out:1", "format": "render"}))["render"],
        json!("42")
    );
    let r = c.call("value.get", json!({"ref": "out:99"}));
    assert_eq!(r["error"]["code"], json!(-32004), "{r}");

    // Parse error: -32001 with span, nothing stored.
    let r = c.call("exec", json!({"src": "let = "}));
    assert_eq!(r["error"]["code"], json!(-32001), "{r}");
    assert!(r["error"]["data"]["span"]["start"].is_u64(), "{r}");
    // Raised: -32002, data.code, stored as out:3.
    let r = c.call("exec", json!({"src": "1 / 0"}));
    assert_eq!(r["error"]["code"], json!(-32002), "{r}");
    assert_eq!(r["error"]["data"]["code"], json!("div_zero"));
    assert_eq!(r["error"]["data"]["ref"], json!("out:3"));
    let v = c.ok("value.get", json!({"ref": "out:3"}));
    assert_eq!(v["value"]["$"], json!("error"), "{v}");
    assert_eq!(v["value"]["code"], json!("div_zero"));

    // Refs are per session.
    let mut other = d.conn();
    other.attach("other");
    let r = other.ok("exec", json!({"src": "1"}));
    assert_eq!(r["ref"], json!("out:1"));
}

#[test]
fn socket_modes_second_daemon_and_stale_socket() {
    let root = Root::new();
    // A socket dir the daemon creates itself is 0700; the socket is 0600.
    let sock = root.path().join("sub/dir/s.sock");
    let mut d = Daemon::start_with(&root, &sock, &[], &[]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root.path().join("sub/dir")), 0o700);
    assert_eq!(
        std::fs::symlink_metadata(&sock)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // A second daemon on the same socket refuses and exits non-zero.
    let (code, _, err) = run(&root, &["daemon", "--socket", sock.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("another shoal daemon") || err.contains("already listening"),
        "{err}"
    );
    assert!(
        std::os::unix::net::UnixStream::connect(&sock).is_ok(),
        "live listener kept"
    );

    // After a hard kill the socket is stale; the next daemon replaces it.
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    assert!(sock.exists());
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_err());
    let d2 = Daemon::start_with(&root, &sock, &[], &[]);
    let mut c = d2.conn();
    c.attach("default");
    assert!(
        root.log().contains("removing stale socket"),
        "{}",
        root.log()
    );
}

#[test]
fn non_socket_path_is_never_replaced() {
    let root = Root::new();
    let path = root.path().join("file.sock");
    std::fs::write(&path, b"precious").unwrap();
    let (code, _, err) = run(&root, &["daemon", "--socket", path.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

#[test]
fn another_uid_is_refused() {
    if rustix::process::geteuid().as_raw() != 0 {
        // Switching uid needs root; as a normal user the 0600 socket already
        // keeps others out (covered by socket_modes_...).
        return;
    }
    let root = Root::new();
    // Traversable by others, so the foreign client reaches the socket itself.
    let dir = root.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    let sock = dir.join("s.sock");
    let d = Daemon::start_with(&root, &sock, &[], &[]);
    let helper = r#"
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect-error", e.errno); sys.exit(0)
s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"session.attach","params":{}}\n')
s.settimeout(10)
data = b""
try:
    while b"\n" not in data:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
except OSError as e:
    print("recv-error", e.errno, data); sys.exit(0)
print(data.decode().strip())
"#;
    let py = |sock: &std::path::Path| {
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(helper)
            .arg(sock)
            .output()
            .expect("python3");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // With the socket at 0600 the kernel already refuses the other uid.
    assert_eq!(py(&sock), "connect-error 13");
    // Even if the mode is loosened, the peer-credential check refuses it.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let line = py(&sock);
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert_eq!(v["error"]["code"], json!(-32030), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("uid 65534"),
        "{v}"
    );
    assert!(root.log().contains("refused connection from uid 65534"));
    // The daemon keeps serving its own user.
    d.conn().attach("default");

    // A uid allowed by config gets in, but must present a token to attach.
    let cfg = root.path().join("allow.toml");
    std::fs::write(&cfg, "[socket]\nallow_uids = [65534]\n").unwrap();
    let sock2 = dir.join("t.sock");
    let _d2 = Daemon::start_in(
        &root,
        &sock2,
        &root.path().join("state2"),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    std::fs::set_permissions(&sock2, std::fs::Permissions::from_mode(0o666)).unwrap();
    let line = py(&sock2);
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert_eq!(v["id"], json!(1), "{v}");
    assert_eq!(v["error"]["code"], json!(-32030), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("token"),
        "{v}"
    );
}

#[test]
fn sigterm_with_clients_exits_cleanly() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut k = d.conn();
    k.attach("default");
    let mut m = d.conn();
    let r = m.call("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    assert!(r["result"].is_object());
    // The idle connection stays open: the daemon must exit without it.
    let _idle = d.conn();
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(30))
        .expect("the daemon exits while an idle client is still connected");
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(!root.socket().exists(), "socket removed");
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut d.child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(stdout, "", "the daemon never writes to stdout");
    let log = root.log();
    assert!(log.contains("shutting down: received SIGTERM"), "{log}");
    assert!(log.contains("socket removed"), "{log}");
}

#[test]
fn sigint_exits_cleanly() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    d.signal(libc::SIGINT);
    let st = d.wait_timeout(Duration::from_secs(2)).expect("exit");
    assert_eq!(st.code(), Some(0));
    assert!(!root.socket().exists());
    assert!(root.log().contains("received SIGINT"));
}

#[test]
fn status_lists_the_actor_tree() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut k = d.conn();
    k.attach("work");
    let mut m = d.conn();
    m.call("ping", json!({}));
    let sock = d.socket.to_str().unwrap().to_string();

    let (code, out, err) = run(&root, &["status", "--socket", &sock], &[]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "daemon shoal",
        "listener",
        "kernel_conn conn:",
        "mcp_conn conn:",
        "session_supervisor work",
        "session work",
        "MAILBOX",
        "RESTARTS",
        "rss",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let (code, out, _) = run(&root, &["status", "--json", "--socket", &sock], &[]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_str(&out).expect("status --json parses");
    assert_eq!(st["daemon"]["pid"], json!(d.pid()));
    assert_eq!(st["daemon"]["version"], json!(env!("CARGO_PKG_VERSION")));
    assert_eq!(st["daemon"]["socket"], json!(sock));
    assert!(st["rss_bytes"].as_u64().unwrap() > 0);
    let actors = st["actors"].as_array().unwrap();
    let kinds: Vec<&str> = actors.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    for k in [
        "daemon",
        "listener",
        "kernel_conn",
        "mcp_conn",
        "session_supervisor",
        "session",
    ] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    for a in actors {
        for f in [
            "kind",
            "name",
            "state",
            "mailbox",
            "handled",
            "restarts",
            "last_error",
            "age_ms",
        ] {
            assert!(a.get(f).is_some(), "{f} in {a}");
        }
    }
    let work = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "work")
        .unwrap();
    assert_eq!(work["clients"], json!(1));
    // The session's child table is every actor row naming its supervisor.
    let sup = actors
        .iter()
        .find(|a| a["kind"] == "session_supervisor" && a["name"] == "work")
        .unwrap();
    let mut rows: Vec<u64> = actors
        .iter()
        .filter(|a| a["parent"] == sup["id"])
        .filter_map(|a| a["id"].as_u64())
        .collect();
    let mut children: Vec<u64> = work["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["actor"].as_u64())
        .collect();
    rows.sort_unstable();
    children.sort_unstable();
    assert!(!children.is_empty(), "{work}");
    assert_eq!(rows, children, "{work}");

    drop(d);
    let (code, _, err) = run(&root, &["status", "--socket", &sock], &[]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("shoal status: no daemon answers on"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1);
}

#[test]
fn supervisor_recreates_a_crashed_session() {
    let root = Root::new();
    let d = Daemon::start_with(&root, &root.socket(), &[], &[("SHOAL_DEBUG_HOOKS", "1")]);
    let mut c = d.conn();
    c.attach("s");
    c.ok("debug.crash", json!({}));
    let sock = d.socket.to_str().unwrap().to_string();
    let restarts = eventually("a restart", Duration::from_secs(5), || {
        let (_, out, _) = run(&root, &["status", "--json", "--socket", &sock], &[]);
        let st: Value = serde_json::from_str(&out).ok()?;
        let sup = st["actors"]
            .as_array()?
            .iter()
            .find(|a| a["kind"] == "session_supervisor" && a["name"] == "s")?
            .clone();
        let child = st["actors"]
            .as_array()?
            .iter()
            .find(|a| a["kind"] == "session" && a["name"] == "s")?
            .clone();
        (sup["restarts"].as_u64()? >= 1).then_some((sup, child))
    });
    assert_eq!(restarts.1["restarts"], json!(1), "{restarts:?}");
    // The session still answers (the transcript lives in the supervisor).
    let r = c.call("value.get", json!({"ref": "out:1"}));
    assert_eq!(r["error"]["code"], json!(-32004), "{r}");
    // Without the hook the method does not exist.
    let d2 = Daemon::start_in(
        &root,
        &root.path().join("t.sock"),
        &root.path().join("state2"),
        &[],
        &[],
    );
    let mut c2 = d2.conn();
    c2.attach("s");
    assert_eq!(
        c2.call("debug.crash", json!({}))["error"]["code"],
        json!(-32601)
    );
}

#[test]
fn config_check_reports_file_line_column() {
    let root = Root::new();
    let bad = root.path().join("bad.toml");
    std::fs::write(&bad, "[daemon]\nlog_level = \"info\"\nmax_frame_byte = 5\n").unwrap();
    let (code, _, err) = run(&root, &["config", "check", bad.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!(
            "{}:3:1: unknown field `max_frame_byte`",
            bad.display()
        )),
        "{err}"
    );
    let typed = root.path().join("typed.toml");
    std::fs::write(&typed, "[socket]\nallow_uids = \"all\"\n").unwrap();
    let (code, _, err) = run(&root, &["config", "check", typed.to_str().unwrap()], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("typed.toml:2:14:"), "{err}");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/shoal.toml.example");
    let (code, out, err) = run(&root, &["config", "check", example], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.trim_end().ends_with(": ok"));
    // The daemon refuses to start on a bad config.
    let (code, _, err) = run(
        &root,
        &[
            "daemon",
            "--socket",
            root.socket().to_str().unwrap(),
            "--config",
            bad.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains(":3:1:"), "{err}");
}

#[test]
fn socket_activation_uses_the_passed_fd() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let root = Root::new();
    let sock = root.socket();
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let fd = listener.as_raw_fd();
    let script = format!(
        "export LISTEN_PID=$$; exec \"$0\" daemon --socket {} --state-dir {}",
        sock.display(),
        root.state_dir().display()
    );
    let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = root
        .command()
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string())))
        .collect();
    let mut cmd = std::process::Command::new("sh");
    cmd.envs(envs)
        .env("LISTEN_FDS", "1")
        .arg("-c")
        .arg(script)
        .arg(BIN);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the hook runs in the forked child before exec and makes only async-signal-safe
    // calls (fcntl, dup2) on `fd`, the listener this process keeps open until the spawn
    // returns. (libc here: rustix's dup2 wants fd 3 as an open OwnedFd, which it need not be.)
    unsafe {
        cmd.pre_exec(move || {
            let r = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.process_group(0).spawn().unwrap();
    drop(listener);
    let mut c = Conn::open(&sock);
    let r = c.ok("session.attach", json!({}));
    assert_eq!(r["session"], json!("default"));
    let st = c.ok("daemon.status", json!({}));
    assert_eq!(st["daemon"]["socket_activated"], json!(true), "{st}");
    kill_with(child.id() as i32, libc::SIGTERM);
    let status = wait_timeout(&mut child, Duration::from_secs(5)).expect("exit");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn nothing_under_src_names_actix() {
    fn walk(dir: &std::path::Path, bad: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, bad);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                if text.contains("actix") {
                    bad.push(p.display().to_string());
                }
            }
        }
    }
    let mut bad = Vec::new();
    walk(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        &mut bad,
    );
    assert!(bad.is_empty(), "files under src/ mention actix: {bad:?}");
}

#[test]
fn a_busy_session_does_not_stall_the_others() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut a = d.conn();
    a.attach("a");
    let mut b = d.conn();
    b.attach("b");
    // Session a waits for a gate that only this test opens, so b's answer
    // cannot come from a having finished.
    let gate = root.path().join("gate");
    let src = format!(
        "sh {{ until [ -e {} ]; do sleep 0.01; done; echo through }}",
        gate.display()
    );
    a.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "exec", "params": {"src": src}}));
    let busy = session_busy(&mut b, "a", true);
    assert_eq!(busy["name"], json!("a"));
    let r = b.ok("exec", json!({"src": "6 * 7"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}));
    session_busy(&mut b, "a", true);
    std::fs::write(&gate, "").unwrap();
    let slow = a.recv();
    assert_eq!(slow["id"], json!("slow"));
    assert!(slow["result"].to_string().contains("through"), "{slow}");
}

/// The worker threads named `shoal-session-<name>` (thread names are cut to 15 bytes).
fn session_threads(pid: i32, name: &str) -> usize {
    let want = format!("shoal-session-{name}");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim_end() == want)
                })
                .count()
        })
        .unwrap_or(0)
}

/// Execs go straight to the Session actor, which the supervisor knows only
/// weakly: closing the session still ends its actor and worker thread, and a
/// session the debug hook crashed answers again after its restart.
#[test]
fn closing_a_session_ends_its_worker_and_a_crashed_one_comes_back() {
    let root = Root::new();
    let d = Daemon::start_with(&root, &root.socket(), &[], &[("SHOAL_DEBUG_HOOKS", "1")]);
    let mut c = d.conn();
    c.attach("z");
    for i in 0..20 {
        let r = c.ok("exec", json!({"src": format!("{i} * 2")}));
        assert_eq!(r["value"], json!({"$": "int", "v": i * 2}), "{r}");
    }
    assert_eq!(session_threads(d.pid(), "z"), 1);
    let mut c2 = d.conn();
    c2.attach("other");
    let r = c2.ok("session.close", json!({"session": "z"}));
    assert_eq!(r["closed"], json!(true), "{r}");
    eventually(
        "the closed session's worker thread ends",
        Duration::from_secs(10),
        || (session_threads(d.pid(), "z") == 0).then_some(()),
    );
    let r = c.call("exec", json!({"src": "1"}));
    assert!(
        r.get("error").is_some(),
        "a closed session answers no exec: {r}"
    );

    // A crash of the Session actor: the next exec reaches its successor.
    c.attach("y");
    assert_eq!(c.ok("exec", json!({"src": "1 + 1"}))["ref"], json!("out:1"));
    c.ok("debug.crash", json!({"actor": "session"}));
    let r = eventually(
        "the restarted session answers",
        Duration::from_secs(10),
        || {
            let r = c.call("exec", json!({"src": "2 + 2"}));
            r.get("result").cloned()
        },
    );
    assert_eq!(r["value"], json!({"$": "int", "v": 4}), "{r}");
}

/// The context switches of each thread of process `pid`.
fn switches(pid: i32) -> std::collections::HashMap<String, u64> {
    let mut out = std::collections::HashMap::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let tid = t.file_name().to_string_lossy().into_owned();
        out.insert(format!("{tid} {}", comm.trim()), n);
    }
    out
}

/// An idle daemon keeps no timer: once what an exec and a status left has
/// settled, a window of 1.5 s passes in which none of its threads wakes (a
/// periodic tick, even once a second, would wake one in every window; a thread
/// that ended meanwhile, such as a blocking-pool one, is not counted).
#[test]
fn an_idle_daemon_wakes_no_thread() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("idle");
    c.ok("exec", json!({"src": "sh { true }"}));
    c.ok("daemon.status", json!({}));
    let mut last = Vec::new();
    for _ in 0..10 {
        let before = switches(d.pid());
        std::thread::sleep(Duration::from_millis(1500));
        let after = switches(d.pid());
        last = after
            .into_iter()
            .filter(|(t, n)| before.get(t).is_some_and(|b| n > b))
            .collect();
        if last.is_empty() {
            return;
        }
    }
    panic!("no quiet window in 15 s; the last one woke {last:?}");
}
