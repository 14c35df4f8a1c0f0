//! Helpers for integration tests: a real daemon on a short temp socket with
//! private XDG dirs, raw line-framed clients, and polling with deadlines.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_shoal");

/// A private root under /tmp (short, for sun_path) with XDG dirs inside.
pub struct Root {
    pub dir: tempfile::TempDir,
}

impl Root {
    pub fn new() -> Root {
        let dir = tempfile::Builder::new()
            .prefix("sh")
            .tempdir_in("/tmp")
            .expect("temp dir");
        for sub in ["run", "state", "config", "data"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Root { dir }
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn socket(&self) -> PathBuf {
        self.path().join("s.sock")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state/shoal")
    }
    /// A command with this root's private environment.
    pub fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("XDG_RUNTIME_DIR", self.path().join("run"))
            .env("XDG_STATE_HOME", self.path().join("state"))
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("HOME", self.path())
            .env_remove("SHOAL_SOCKET")
            .env_remove("SHOAL_SESSION")
            .env_remove("SHOAL_TOKEN")
            .env_remove("SHOAL_NO_AUTOSTART")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            // `make test`'s recursion variables would make a `make` run in a
            // session print "Entering directory" lines.
            .env_remove("MAKELEVEL")
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS");
        c
    }
    /// Concatenated daemon log files.
    pub fn log(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.state_dir().join("logs")) {
            for e in rd.flatten() {
                out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }
}

/// A daemon process; killed (by pid) when dropped.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start(root: &Root) -> Daemon {
        Daemon::start_with(root, &root.socket(), &[], &[])
    }

    pub fn start_with(root: &Root, socket: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::start_in(root, socket, &root.state_dir(), args, env)
    }

    /// A daemon whose config file (`shoal.toml` in the root) is `config`.
    pub fn with_config(root: &Root, config: &str, env: &[(&str, &str)]) -> Daemon {
        let cfg = root.path().join("shoal.toml");
        std::fs::write(&cfg, config).expect("write shoal.toml");
        let cfg = cfg.to_str().expect("utf-8 path");
        Daemon::start_with(root, &root.socket(), &["--config", cfg], env)
    }

    /// A daemon with its own state dir (a second daemon beside the first: the journal in a
    /// state dir is locked by the daemon that opened it).
    pub fn start_in(
        root: &Root,
        socket: &Path,
        state_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        let mut cmd = root.command();
        cmd.arg("daemon")
            .arg("--socket")
            .arg(socket)
            .arg("--state-dir")
            .arg(state_dir)
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        // The daemon's stderr (empty unless it fails to start) goes to a file
        // of the test's root, so that a start failure says why.
        static STARTS: AtomicU64 = AtomicU64::new(0);
        let stderr_path = root.path().join(format!(
            "daemon-{}.stderr",
            STARTS.fetch_add(1, Ordering::Relaxed)
        ));
        let stderr = std::fs::File::create(&stderr_path).expect("daemon stderr file");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0);
        let child = cmd.spawn().expect("spawn daemon");
        let mut d = Daemon {
            child,
            socket: socket.to_path_buf(),
        };
        d.wait_ready(&stderr_path, state_dir);
        d
    }

    fn wait_ready(&mut self, stderr: &Path, state_dir: &Path) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                let mut log = String::new();
                if let Ok(rd) = std::fs::read_dir(state_dir.join("logs")) {
                    for e in rd.flatten() {
                        log.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                    }
                }
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                panic!(
                    "daemon exited early: {st}\nstderr: {}\nlog (newest first):\n{tail}",
                    std::fs::read_to_string(stderr).unwrap_or_default()
                );
            }
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "daemon socket did not come up");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        kill_with(self.pid(), sig);
    }

    /// Wait for exit with a deadline; None if still running.
    pub fn wait_timeout(&mut self, d: Duration) -> Option<std::process::ExitStatus> {
        wait_timeout(&mut self.child, d)
    }

    pub fn conn(&self) -> Conn {
        Conn::open(&self.socket)
    }

    /// A 2025-11-25 MCP connection attached to `session`, as a shim makes it.
    pub fn mcp_legacy(&self, session: &str) -> Conn {
        let mut c = self.conn();
        c.send(
            &json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": session}}),
        );
        c.ok(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}),
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn wait_timeout(child: &mut Child, d: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + d;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Poll `f` until it returns Some, with a deadline.
/// Wait (at most 5 s) until `daemon.status`, asked on `c`, shows session `name` with
/// `busy` as given; its row then.
pub fn session_busy(c: &mut Conn, name: &str, busy: bool) -> Value {
    eventually(
        &format!("session {name} busy: {busy}"),
        Duration::from_secs(20),
        || {
            let st = c.ok("daemon.status", json!({}));
            st["sessions"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == name && s["busy"] == json!(busy))
                .cloned()
        },
    )
}

pub fn eventually<T>(what: &str, d: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + d;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A raw line-framed connection.
pub struct Conn {
    pub stream: UnixStream,
    reader: BufReader<UnixStream>,
    next: u64,
}

impl Conn {
    pub fn open(path: &Path) -> Conn {
        let stream = UnixStream::connect(path).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Conn {
            stream,
            reader,
            next: 100,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn send(&mut self, v: &Value) {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.send_raw(&b);
    }

    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("read");
        assert!(n > 0, "connection closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line:?}: {e}"))
    }

    /// The next frame within `d` (`None`: none came), read through the same
    /// buffer as [`Conn::recv`], so a frame that arrived with an earlier one
    /// is not missed.
    pub fn recv_within(&mut self, d: Duration) -> Option<Value> {
        self.stream.set_read_timeout(Some(d)).expect("timeout");
        let mut line = String::new();
        let got = match self.reader.read_line(&mut line) {
            Ok(n) if n > 0 => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line:?}: {e}")),
            ),
            Ok(_) => None,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("read: {e}"),
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        got
    }

    /// Request and its response (responses arrive in request order).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let r = self.recv();
        assert_eq!(r["id"], json!(id), "response id: {r}");
        r
    }

    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    pub fn attach(&mut self, session: &str) -> Value {
        self.ok(
            "session.attach",
            json!({"session": session, "client": {"kind": "test", "tty": false}}),
        )
    }
}

impl Conn {
    /// `session.attach` with a principal's token; the whole response (errors included).
    pub fn attach_token(&mut self, session: &str, token: &str) -> Value {
        self.call(
            "session.attach",
            json!({"session": session, "token": token, "client": {"kind": "test", "tty": false}}),
        )
    }

    /// Run `sh -c CMD; echo END` on a PTY of `cols` x `rows`, wait for `END`
    /// and close it; the screen read then.
    pub fn pty_screen_after(&mut self, cmd: &str, cols: u32, rows: u32) -> Value {
        let cmd = format!("{cmd}; echo END; sleep 30");
        let p = self.ok(
            "pty.open",
            json!({"cmd": "sh", "args": ["-c", cmd], "cols": cols, "rows": rows}),
        );
        let id = p["pty_id"].clone();
        let r = self.ok(
            "pty.read",
            json!({"pty_id": id, "wait_for": "END", "timeout_ms": 10000}),
        );
        assert_eq!(r["matched"], json!(true), "{r}");
        self.ok("pty.close", json!({"pty_id": id}));
        r["screen"].clone()
    }
}

/// A token for `principal` (`shoal token create`).
pub fn create_token(root: &Root, principal: &str) -> String {
    let (st, out, err) = run(root, &["token", "create", principal], &[]);
    assert_eq!(st, 0, "{err}");
    out.lines().last().unwrap().to_string()
}

/// Run `shoal` with args in a root's env; (status, stdout, stderr).
pub fn run(root: &Root, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = root.command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().expect("run shoal");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Pids of the processes whose command line (arguments joined by spaces)
/// contains `needle` (a zombie's is empty).
pub fn pids_running(needle: &str) -> Vec<i32> {
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

/// Pids of live `shoal daemon` processes whose command line names `socket`.
pub fn daemons_on(socket: &Path) -> Vec<i32> {
    let want = socket.to_string_lossy().to_string();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.ends_with("shoal"))
            && args.iter().any(|a| a == "daemon")
            && args.contains(&want)
        {
            // Skip zombies.
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            if !stat.contains(") Z ") {
                pids.push(pid);
            }
        }
    }
    pids
}

pub fn kill_pid(pid: i32) {
    kill_with(pid, libc::SIGKILL);
}

/// Send `sig` (a `libc::SIG*` number) to `pid`, a process this test started; one already
/// gone is no error.
pub fn kill_with(pid: i32, sig: i32) {
    use rustix::process::{kill_process, Pid, Signal};
    let pid = Pid::from_raw(pid).expect("a positive pid");
    let sig = Signal::from_named_raw(sig).expect("a named signal");
    let _ = kill_process(pid, sig);
}

/// Run `tests/<script> SHOAL_BIN SOCKET WORKDIR [extra...]` with the Python of the venv
/// `venv` in a fresh root (the script starts `shoal mcp` itself); assert it exits 0, end the
/// daemons it started, and return its stdout. A missing venv fails with a clear message.
pub fn run_sdk_script(venv: &str, script: &str, extra: &[&str]) -> String {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(venv)
        .join("bin/python");
    assert!(
        py.exists(),
        "no Python venv with the MCP SDK at {}: run `make venv` (or `make test`, which creates it)",
        py.display()
    );
    let root = Root::new();
    let sock = root.socket();
    let script = format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(&py);
    let envs: Vec<_> = root
        .command()
        .get_envs()
        .map(|(k, v)| (k.to_os_string(), v.map(|v| v.to_os_string())))
        .collect();
    for (k, v) in envs {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .arg(&script)
        .arg(BIN)
        .arg(&sock)
        .arg(root.path())
        .args(extra)
        .output()
        .expect("run python");
    for p in daemons_on(&sock) {
        kill_pid(p);
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python MCP client {script} {extra:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// Assert that every name in `checks` printed `"ok": true` in a check script's `stdout`.
pub fn assert_checks(stdout: &str, checks: &[&str]) {
    for c in checks {
        assert!(
            stdout.contains(&format!("\"check\": \"{c}\", \"ok\": true")),
            "{c}:\n{stdout}"
        );
    }
}

/// [`run_sdk_script`] then [`assert_checks`].
pub fn run_sdk_checks(venv: &str, script: &str, checks: &[&str]) {
    assert_checks(&run_sdk_script(venv, script, &[]), checks);
}

/// The policy of a token principal `name` that may run anything and read
/// every path but write and delete only under `project` (what stops it
/// outside is then the run-time check and the kernel, not the verdict).
pub fn project_policy(name: &str, project: &Path) -> String {
    format!(
        r#"
[policy.principal."{name}"]
opaque = "allow"
auto_apply = "in-grant"
env_read = ["*"]

[policy.principal."{name}".fs]
read = ["/**"]
write = ["{p}/**"]
delete = ["{p}/**"]
"#,
        p = project.display()
    )
}

/// Whether every tool in `tools` is on `PATH`. When one is missing the test
/// is skipped: its name and reason go to stderr and to
/// `target/tmp/skipped-tests` (where `make test` counts and prints them),
/// unless `SHOAL_REQUIRE_ALL` is set (`.ci/run` sets it), when a missing
/// tool fails the test instead.
pub fn have_tools(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !on_path(t)).collect();
    if missing.is_empty() {
        return true;
    }
    skip(test, &format!("not on PATH: {}", missing.join(" ")));
    false
}

/// Whether `path` (relative to the project root) exists; otherwise the test is
/// skipped as [`have_tools`] says, with `how` naming what makes it.
pub fn have_file(test: &str, path: &str, how: &str) -> bool {
    if Path::new(env!("CARGO_MANIFEST_DIR")).join(path).exists() {
        return true;
    }
    skip(test, &format!("no {path} ({how})"));
    false
}

fn skip(test: &str, why: &str) {
    assert!(
        std::env::var_os("SHOAL_REQUIRE_ALL").is_none(),
        "{test}: {why}, and SHOAL_REQUIRE_ALL is set"
    );
    eprintln!("skipped {test}: {why}");
    let list = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = writeln!(f, "{test}: {why}");
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Whether the Python venv `venv` (`.venv`: MCP SDK 2.x, `target/venv-mcp1`:
/// 1.x) exists; otherwise the test is skipped as [`have_tools`] says.
pub fn have_venv(test: &str, venv: &str) -> bool {
    have_file(test, &format!("{venv}/bin/python"), "make venv")
}

/// Whether `make node` installed Node 22, the TypeScript SDK and the
/// Inspector; otherwise the test is skipped as [`have_tools`] says.
pub fn have_node(test: &str) -> bool {
    have_file(test, "tests/node/node_modules/.ok", "make node")
}

/// Whether the test runs as root (mounting a tmpfs needs it); otherwise the
/// test is skipped as [`have_tools`] says.
pub fn have_root(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    skip(test, "needs root (mounts a tmpfs)");
    false
}
