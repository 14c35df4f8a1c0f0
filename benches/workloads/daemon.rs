//! A real `shoal daemon` for a bench, in a private temp dir under /tmp:
//! `BenchDir` is the dir (the socket, the XDG dirs, `shoal` commands run with
//! them), `BenchDaemon` the daemon started in it, stopped and reaped on drop.
//!
//! Include it as `#[path = "workloads/daemon.rs"] mod daemon;`.

// Each bench is its own crate and uses a part of this.
#![allow(dead_code)]

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The shoal binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_shoal");

/// The shoal binary the benches run: SHOAL_BENCH_BIN when set (another
/// build, e.g. `make bench-compare`'s), else this build's; absolute.
pub fn bin() -> PathBuf {
    let p = std::env::var_os("SHOAL_BENCH_BIN")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(BIN), PathBuf::from);
    std::fs::canonicalize(&p).unwrap_or(p)
}

/// A private temp dir (`/tmp/<prefix>…`) with `run`, `state` and `config`
/// for the daemon's and its clients' XDG dirs, and `s.sock` for its socket.
pub struct BenchDir(tempfile::TempDir);

impl BenchDir {
    pub fn new(prefix: &str) -> BenchDir {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/tmp")
            .expect("bench temp dir");
        for d in ["run", "state", "config"] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir.path().join(d))
                .expect("bench XDG dir");
        }
        BenchDir(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn sock(&self) -> PathBuf {
        self.path().join("s.sock")
    }

    /// `shoal` ([`bin`]) with this dir's environment.
    pub fn cmd(&self) -> Command {
        self.cmd_bin(&bin())
    }

    /// `bin` (a shoal binary, or a client that runs one) with this dir's environment: the XDG dirs
    /// here, and none of the caller's SHOAL_SOCKET, SHOAL_TOKEN or
    /// SHOAL_NO_AUTOSTART.
    pub fn cmd_bin(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
        let p = self.path();
        c.env("XDG_RUNTIME_DIR", p.join("run"))
            .env("XDG_STATE_HOME", p.join("state"))
            .env("XDG_CONFIG_HOME", p.join("config"))
            .env_remove("SHOAL_NO_AUTOSTART")
            .env_remove("SHOAL_SOCKET")
            .env_remove("SHOAL_TOKEN");
        c
    }

    /// A daemon to start in this dir.
    pub fn daemon(self) -> DaemonBuilder {
        DaemonBuilder {
            dir: self,
            bin: bin(),
            args: Vec::new(),
            env: Vec::new(),
            config: None,
        }
    }
}

/// What `shoal daemon --socket <dir>/s.sock` is started with beyond that.
pub struct DaemonBuilder {
    dir: BenchDir,
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    config: Option<String>,
}

impl DaemonBuilder {
    /// Another shoal binary (an older build to compare with).
    pub fn bin(mut self, bin: &Path) -> DaemonBuilder {
        self.bin = bin.to_path_buf();
        self
    }

    /// One more argument after `daemon --socket <sock>`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> DaemonBuilder {
        self.args.push(arg.into());
        self
    }

    /// More arguments after `daemon --socket <sock>`.
    pub fn args<I, S>(mut self, args: I) -> DaemonBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> DaemonBuilder {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Config text, written to `<dir>/bench.toml` and passed as `--config`.
    pub fn config(mut self, text: impl Into<String>) -> DaemonBuilder {
        self.config = Some(text.into());
        self
    }

    /// Start it and wait (20 s at most) until its socket accepts.
    pub fn start(self) -> BenchDaemon {
        let sock = self.dir.sock();
        let mut c = self.dir.cmd_bin(&self.bin);
        c.arg("daemon").arg("--socket").arg(&sock);
        if let Some(text) = &self.config {
            let cfg = self.dir.path().join("bench.toml");
            std::fs::write(&cfg, text).expect("bench config");
            c.arg("--config").arg(cfg);
        }
        c.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = c.spawn().expect("start shoal daemon");
        let d = BenchDaemon {
            child,
            dir: self.dir,
            bin: self.bin,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < deadline, "daemon did not start");
            std::thread::sleep(Duration::from_millis(2));
        }
        d
    }
}

/// A running daemon; on drop SIGTERM (its tasks' process groups end with
/// it), SIGKILL if it has not exited in 10 s, and reaped.
pub struct BenchDaemon {
    child: Child,
    dir: BenchDir,
    bin: PathBuf,
}

impl BenchDaemon {
    /// `shoal daemon --socket …` ([`bin`]) in a new `BenchDir`.
    pub fn start(prefix: &str) -> BenchDaemon {
        BenchDir::new(prefix).daemon().start()
    }

    pub fn sock(&self) -> PathBuf {
        self.dir.sock()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &BenchDir {
        &self.dir
    }

    /// The daemon's own binary with its dir's environment (a client of it).
    pub fn cmd(&self) -> Command {
        self.dir.cmd_bin(&self.bin)
    }

    /// A `kB` field of /proc/PID/status (`VmRSS:`, `RssAnon:`, `RssFile:`).
    pub fn status_kb(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for BenchDaemon {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One newline-delimited JSON-RPC connection to the daemon's socket: whole
/// frames out, reply lines in.
pub struct Line {
    w: UnixStream,
    r: std::io::BufReader<UnixStream>,
}

impl Line {
    pub fn open(p: &Path) -> Line {
        let w = UnixStream::connect(p).unwrap();
        Line {
            r: std::io::BufReader::new(w.try_clone().unwrap()),
            w,
        }
    }

    /// The writing and the reading half, for a reader on a thread of its own.
    pub fn into_parts(self) -> (UnixStream, std::io::BufReader<UnixStream>) {
        (self.w, self.r)
    }

    /// Send one frame (no reply read).
    pub fn send(&mut self, v: &serde_json::Value) {
        use std::io::Write;
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.w.write_all(&b).unwrap();
    }

    /// Send one frame and decode the next line.
    pub fn call(&mut self, v: &serde_json::Value) -> serde_json::Value {
        use std::io::BufRead;
        self.send(v);
        let mut s = String::new();
        self.r.read_line(&mut s).unwrap();
        serde_json::from_str(&s).unwrap()
    }

    /// One pre-encoded frame (newline included) and its reply line, not
    /// decoded: what the server and the socket cost, without the client's
    /// own JSON work.
    pub fn call_raw(&mut self, frame: &[u8], reply: &mut String) {
        use std::io::{BufRead, Write};
        self.w.write_all(frame).unwrap();
        reply.clear();
        self.r.read_line(reply).unwrap();
        assert!(reply.ends_with('\n'), "a whole reply line");
    }
}
