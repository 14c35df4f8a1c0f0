//! Spawning external programs (language.md §10.3 step 8, §10.5, §10.6).
//!
//! * Each child runs in its own process group (`setpgid(0, 0)`), so an
//!   interrupt can signal the whole group (SIGINT, then SIGKILL after a grace
//!   period).
//! * stdin is `/dev/null` unless fed bytes (written by a helper thread, EPIPE
//!   ignored) or redirected from a file.
//! * stdout and stderr are drained concurrently by two reader threads. Each
//!   keeps at most [`CAPTURE_LIMIT`] bytes in memory; the rest is read and
//!   discarded (the child never blocks on a full pipe) and counted in
//!   [`ProcResult::stdout_dropped`] / [`ProcResult::stderr_dropped`].
//! * The waiting thread polls `try_wait` with a short back-off and the
//!   interrupt callback; the child is always reaped (no zombies) and every pipe
//!   end is owned by a `std` handle that is dropped (no leaked fds).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// Bytes of stdout (and, separately, of stderr) kept in memory per process.
pub const CAPTURE_LIMIT: usize = 64 << 20;

/// Where the child's stdin comes from.
pub enum StdinSpec {
    Null,
    Bytes(Vec<u8>),
    File(File),
}

/// Where the child's stdout goes.
pub enum StdoutSpec {
    Capture,
    File(File),
}

/// A fully resolved spawn request.
pub struct SpawnSpec {
    /// The executable (absolute or cwd-relative path, already resolved).
    pub program: PathBuf,
    /// `argv[0]` as the child sees it (the name as written).
    pub argv0: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The complete environment of the child.
    pub env: Vec<(OsString, OsString)>,
    pub stdin: StdinSpec,
    pub stdout: StdoutSpec,
    /// Receives the child's pid (= its process group id) while it runs, 0
    /// otherwise, so another thread can signal the group (suspend/resume).
    pub pid_slot: Option<Arc<AtomicU32>>,
}

/// What happened to a finished child.
#[derive(Debug, Default)]
pub struct ProcResult {
    pub status: Option<i64>,
    pub signal: Option<String>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
    pub pid: u32,
    pub dur_ns: i64,
}

/// Why a run did not produce a result.
#[derive(Debug)]
pub enum RunError {
    /// The program could not be started.
    Spawn(io::Error),
    /// The interrupt callback fired; the process group was killed and reaped.
    Interrupted,
}

/// Read everything from `r`, keeping at most `limit` bytes.
fn drain<R: Read>(mut r: R, limit: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                let take = room.min(n);
                kept.extend_from_slice(&buf[..take]);
                dropped += (n - take) as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    (kept, dropped)
}

/// Send `sig` to the process group led by `pid` (no-op for 0).
pub fn signal_group(pid: u32, sig: i32) {
    if pid == 0 {
        return;
    }
    // SAFETY: killpg only sends a signal; the group id is our own child's pid,
    // which leads its own group (process_group(0)).
    unsafe {
        libc::killpg(pid as libc::pid_t, sig);
    }
}

/// Kill the child's process group (SIGINT, grace, SIGKILL) and reap it.
fn kill_and_reap(child: &mut Child) {
    let pid = child.id();
    signal_group(pid, libc::SIGINT);
    // A stopped (suspended) group only sees the signal once continued.
    signal_group(pid, libc::SIGCONT);
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            // The leader is gone; make sure the rest of the group is too.
            signal_group(pid, libc::SIGKILL);
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
    signal_group(pid, libc::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

fn status_parts(st: ExitStatus) -> (Option<i64>, Option<String>) {
    if let Some(code) = st.code() {
        (Some(code as i64), None)
    } else if let Some(sig) = st.signal() {
        (None, Some(signal_name(sig)))
    } else {
        (None, None)
    }
}

/// Run a program to completion. `interrupted` is polled while waiting.
pub fn run(spec: SpawnSpec, interrupted: &dyn Fn() -> bool) -> Result<ProcResult, RunError> {
    let start = Instant::now();
    let mut cmd = Command::new(&spec.program);
    cmd.arg0(&spec.argv0);
    cmd.args(&spec.args);
    cmd.current_dir(&spec.cwd);
    cmd.env_clear();
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    cmd.process_group(0);
    let mut feed: Option<Vec<u8>> = None;
    match spec.stdin {
        StdinSpec::Null => {
            cmd.stdin(Stdio::null());
        }
        StdinSpec::Bytes(b) => {
            cmd.stdin(Stdio::piped());
            feed = Some(b);
        }
        StdinSpec::File(f) => {
            cmd.stdin(Stdio::from(f));
        }
    }
    let capture_stdout = match spec.stdout {
        StdoutSpec::Capture => {
            cmd.stdout(Stdio::piped());
            true
        }
        StdoutSpec::File(f) => {
            cmd.stdout(Stdio::from(f));
            false
        }
    };
    cmd.stderr(Stdio::piped());
    let child = cmd.spawn().map_err(RunError::Spawn)?;
    // `cmd` holds the parent's copies of redirect files; drop them now so the
    // child is the only holder.
    drop(cmd);
    let pid = child.id();
    if let Some(slot) = &spec.pid_slot {
        slot.store(pid, Ordering::SeqCst);
    }
    let slot = spec.pid_slot.clone();
    let result = wait_child(child, pid, feed, capture_stdout, interrupted, start);
    if let Some(slot) = slot {
        slot.store(0, Ordering::SeqCst);
    }
    result
}

fn wait_child(
    mut child: Child,
    pid: u32,
    feed: Option<Vec<u8>>,
    capture_stdout: bool,
    interrupted: &dyn Fn() -> bool,
    start: Instant,
) -> Result<ProcResult, RunError> {
    let writer = match (feed, child.stdin.take()) {
        (Some(bytes), Some(mut stdin)) => Some(thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
            // stdin dropped here: EOF for the child.
        })),
        _ => None,
    };
    let (tx, rx) = mpsc::channel::<(bool, Vec<u8>, u64)>();
    let mut readers = 0;
    if capture_stdout {
        if let Some(out) = child.stdout.take() {
            let tx = tx.clone();
            readers += 1;
            thread::spawn(move || {
                let (b, d) = drain(out, CAPTURE_LIMIT);
                let _ = tx.send((true, b, d));
            });
        }
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        readers += 1;
        thread::spawn(move || {
            let (b, d) = drain(err, CAPTURE_LIMIT);
            let _ = tx.send((false, b, d));
        });
    }
    drop(tx);

    let mut result = ProcResult {
        pid,
        ..Default::default()
    };
    let mut exit: Option<ExitStatus> = None;
    let mut pending = readers;
    let mut backoff = Duration::from_micros(200);
    loop {
        // Collect finished readers without blocking longer than the back-off.
        if pending == 0 {
            thread::sleep(backoff);
        } else {
            match rx.recv_timeout(backoff) {
                Ok((is_out, bytes, dropped)) => {
                    if is_out {
                        result.stdout = bytes;
                        result.stdout_dropped = dropped;
                    } else {
                        result.stderr = bytes;
                        result.stderr_dropped = dropped;
                    }
                    pending -= 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => pending = 0,
            }
        }
        if exit.is_none() {
            match child.try_wait() {
                Ok(Some(st)) => exit = Some(st),
                Ok(None) => {}
                Err(_) => {
                    exit = child.wait().ok();
                    if exit.is_none() {
                        break;
                    }
                }
            }
        }
        if exit.is_some() && pending == 0 {
            break;
        }
        if interrupted() {
            if exit.is_none() {
                kill_and_reap(&mut child);
            } else {
                // Leader gone but descendants still hold the pipes.
                signal_group(pid, libc::SIGKILL);
            }
            if let Some(w) = writer {
                let _ = w.join();
            }
            return Err(RunError::Interrupted);
        }
        backoff = (backoff * 2).min(Duration::from_millis(10));
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    if let Some(st) = exit {
        let (status, signal) = status_parts(st);
        result.status = status;
        result.signal = signal;
    }
    result.dur_ns = start.elapsed().as_nanos().min(i64::MAX as u128) as i64;
    Ok(result)
}

/// `SIGSEGV` for 11, etc.; `SIG<n>` for unknown numbers.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, stdin: StdinSpec) -> ProcResult {
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            argv0: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: std::env::vars_os().collect(),
            stdin,
            stdout: StdoutSpec::Capture,
            pid_slot: None,
        };
        run(spec, &|| false).expect("run")
    }

    #[test]
    fn exit_status_and_output() {
        let r = sh("printf out; printf err 1>&2; exit 3", StdinSpec::Null);
        assert_eq!(r.status, Some(3));
        assert_eq!(r.stdout, b"out");
        assert_eq!(r.stderr, b"err");
        assert!(r.signal.is_none());
        assert!(r.pid > 0);
    }

    fn alive(pid: u32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
    }

    #[test]
    fn closed_pipes_do_not_spin() {
        let start = Instant::now();
        let r = sh("exec >&- 2>&-; sleep 0.3; exit 2", StdinSpec::Null);
        assert_eq!(r.status, Some(2));
        assert!(start.elapsed() >= Duration::from_millis(250));
    }

    #[test]
    fn children_are_reaped() {
        for _ in 0..5 {
            let r = sh("exit 0", StdinSpec::Null);
            assert!(!alive(r.pid), "child {} left behind (zombie)", r.pid);
        }
    }

    #[test]
    fn signal_death() {
        let r = sh("kill -SEGV $$", StdinSpec::Null);
        assert_eq!(r.status, None);
        assert_eq!(r.signal.as_deref(), Some("SIGSEGV"));
    }

    #[test]
    fn stdin_null_and_fed() {
        let r = sh("cat", StdinSpec::Null);
        assert_eq!(r.stdout, b"");
        let r = sh("cat", StdinSpec::Bytes(b"hello".to_vec()));
        assert_eq!(r.stdout, b"hello");
    }

    #[test]
    fn big_output_is_drained() {
        // 8 MiB through the pipe: must not deadlock.
        let r = sh("head -c 8388608 /dev/zero", StdinSpec::Null);
        assert_eq!(r.stdout.len(), 8 << 20);
        assert_eq!(r.stdout_dropped, 0);
    }

    #[test]
    fn drain_is_bounded() {
        let data = vec![7u8; 1000];
        let (kept, dropped) = drain(&data[..], 100);
        assert_eq!(kept.len(), 100);
        assert_eq!(dropped, 900);
    }

    #[test]
    fn interrupt_kills_group() {
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            argv0: "sh".into(),
            args: vec!["-c".into(), "sleep 30 & sleep 30; wait".into()],
            cwd: std::env::temp_dir(),
            env: std::env::vars_os().collect(),
            stdin: StdinSpec::Null,
            stdout: StdoutSpec::Capture,
            pid_slot: None,
        };
        let start = Instant::now();
        let r = run(spec, &|| start.elapsed() > Duration::from_millis(200));
        assert!(matches!(r, Err(RunError::Interrupted)));
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn missing_program() {
        let spec = SpawnSpec {
            program: "/nonexistent/zzz".into(),
            argv0: "zzz".into(),
            args: vec![],
            cwd: std::env::temp_dir(),
            env: vec![],
            stdin: StdinSpec::Null,
            stdout: StdoutSpec::Capture,
            pid_slot: None,
        };
        assert!(matches!(run(spec, &|| false), Err(RunError::Spawn(_))));
    }
}
