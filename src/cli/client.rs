//! A small synchronous kernel-protocol client, plus the "connect or start the
//! daemon" algorithm shared by `shoal mcp` and `shoal exec`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use shoal_proto::kernel::{EnvVars, KernelRequest};

pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next: u64,
    /// `event` notifications read while waiting for a reply, oldest first.
    events: std::collections::VecDeque<Value>,
}

/// A JSON-RPC error object as received.
pub struct RemoteError(pub Value);

impl Client {
    pub fn new(stream: UnixStream) -> io::Result<Client> {
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client {
            writer: stream,
            reader,
            next: 0,
            events: Default::default(),
        })
    }

    /// The id the next [`Client::call`] will use.
    pub fn next_id(&self) -> u64 {
        self.next + 1
    }

    /// A second handle on the socket, for a `cancel` notification written
    /// while a call waits (a line of its own).
    pub fn try_clone_writer(&self) -> io::Result<UnixStream> {
        self.writer.try_clone()
    }

    /// The next `event` notification's params (`{channel, seq, ts, payload}`),
    /// waiting for it; replies to no call are skipped.
    pub fn next_event(&mut self) -> io::Result<Value> {
        if let Some(e) = self.events.pop_front() {
            return Ok(e);
        }
        loop {
            let v = self.read_frame()?;
            if v.get("method").and_then(Value::as_str) == Some("event") {
                return Ok(v.get("params").cloned().unwrap_or(Value::Null));
            }
        }
    }

    fn read_frame(&mut self) -> io::Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            ));
        }
        serde_json::from_str(&line).map_err(io::Error::other)
    }

    /// Send `req` and wait for its reply (`event`s read meanwhile are kept).
    pub fn call(&mut self, req: &KernelRequest) -> io::Result<Result<Value, RemoteError>> {
        self.next += 1;
        let id = self.next;
        let frame = shoal_proto::rpc::request_frame(id, req.method(), req.params())?;
        self.writer.write_all(&frame)?;
        loop {
            let v = self.read_frame()?;
            if v.get("id").and_then(Value::as_u64) != Some(id) {
                if v.get("method").and_then(Value::as_str) == Some("event") {
                    self.events
                        .push_back(v.get("params").cloned().unwrap_or(Value::Null));
                }
                continue;
            }
            if let Some(e) = v.get("error") {
                return Ok(Err(RemoteError(e.clone())));
            }
            return Ok(Ok(v.get("result").cloned().unwrap_or(Value::Null)));
        }
    }
}

/// Connect to a running daemon; never starts one.
pub fn connect(path: &Path) -> io::Result<UnixStream> {
    UnixStream::connect(path)
}

/// Connect, starting the daemon detached when nothing listens (unless
/// `SHOAL_NO_AUTOSTART` is non-empty). Racing callers serialise on a lock file
/// beside the socket, so exactly one of them starts a daemon.
pub fn connect_or_start(path: &Path) -> Result<UnixStream, String> {
    match UnixStream::connect(path) {
        Ok(s) => return Ok(s),
        // No daemon this process could start would be reachable either.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return Err(format!(
                "cannot connect to {}: {e}; no daemon is started (programs shoal runs for a token principal may not open unix sockets)",
                path.display()
            ))
        }
        Err(_) => {}
    }
    if std::env::var_os("SHOAL_NO_AUTOSTART").is_some_and(|v| !v.is_empty()) {
        return Err(format!(
            "no daemon is listening on {} (autostart disabled by SHOAL_NO_AUTOSTART)",
            path.display()
        ));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create socket dir {}: {e}", dir.display()))?;
    }
    let lock_path = shoal_base::paths::start_lock(path);
    let lock = shoal_base::paths::open_lock_file(&lock_path)?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if let Ok(s) = UnixStream::connect(path) {
        return Ok(s);
    }
    let mut child = spawn_daemon(path)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pause = Duration::from_micros(500);
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return Ok(s),
            Err(e) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "the daemon exited at start ({status}); run `shoal daemon --socket {}` to see why",
                        path.display()
                    ));
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "the daemon did not come up on {} within 10 s: {e}",
                        path.display()
                    ));
                }
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(4));
    }
}

fn spawn_daemon(socket: &Path) -> Result<std::process::Child, String> {
    use std::os::unix::process::CommandExt;
    let exe: PathBuf =
        std::env::current_exe().map_err(|e| format!("cannot find the shoal executable: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("daemon")
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()
                .map(|_| ())
                .map_err(io::Error::from)
        });
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))
}

/// This process's environment as the `env` object of an attach: a session
/// the attach creates starts with exactly it (docs/protocol.md §9).
pub fn client_env() -> EnvVars {
    let mut vars = shoal_base::paths::client_env();
    vars.sort_unstable();
    EnvVars(vars)
}
