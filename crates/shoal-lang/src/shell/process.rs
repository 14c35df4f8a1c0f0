//! Spawning external programs (docs/rules.md §8).
//!
//! * Each child runs in its own process group (`setpgid(0, 0)`), so an
//!   interrupt can signal the whole group (SIGINT, SIGTERM after 3 s, SIGKILL
//!   after 3 more), grandchildren included.
//! * stdin is `/dev/null` unless fed bytes (written by a helper thread, EPIPE
//!   ignored) or redirected from a file.
//! * stdout and stderr are drained by the calling thread with `poll(2)` on
//!   both pipes, a pidfd of the child and the interrupter's eventfd (no
//!   reader threads, no sleeps, no timed wake-up: an interrupt wakes it). Each
//!   stream goes into an [`OutputSink`]: up to [`MEM_LIMIT`] bytes stay in
//!   memory, past that the whole stream is written to a spill file and the
//!   outcome reads it from there (see [`shoal_value::output`]). Nothing is
//!   discarded unless the spill file cannot be written; then the count is in
//!   [`ProcResult::stdout_dropped`] / [`ProcResult::stderr_dropped`].
//! * The child is always reaped (no zombies) and every pipe end is owned by a
//!   `std` handle that is dropped (no leaked fds).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::Signal;
use shoal_base::sync::Locked;
use shoal_value::output::{OutputSink, OutputTail, SpillQuota, MEM_LIMIT};
use shoal_value::OutputBytes;

use super::child::{Pipes, Proc, Started};
use crate::interrupt::Interrupter;

/// Bytes of stdout (and, separately, of stderr) kept in memory per process
/// before the stream spills to a file.
pub const CAPTURE_LIMIT: usize = MEM_LIMIT;

/// Size of the read buffer (reused across runs).
const READ_BUF: usize = 1 << 20;

/// Without a pidfd (Linux before 5.3), how often at most a waiting run
/// looks whether the child exited.
const NO_PIDFD_POLL: Duration = Duration::from_millis(10);

/// Where the child's stdin comes from.
pub enum StdinSpec {
    Null,
    /// Written by a helper thread (a spilled value streams from its file).
    Bytes(OutputBytes),
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
    /// The session's spill allowance (`[limits] spill_bytes`); `None`:
    /// unlimited. Past it a captured stream is closed for the child.
    pub spill_quota: Option<Arc<SpillQuota>>,
}

/// What happened to a finished child.
#[derive(Debug, Default)]
pub struct ProcResult {
    pub status: Option<i64>,
    pub signal: Option<String>,
    pub stdout: OutputBytes,
    pub stderr: OutputBytes,
    /// Bytes that could not be stored (only when a spill file failed).
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
    /// Captured output was cut at the spill quota.
    pub truncated: bool,
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
    /// Leash refused the binary (nothing was started).
    Denied(shoal_value::ShoalError),
}

thread_local! {
    /// The tail that programs run by this thread feed (a background task's
    /// evaluation thread sets one; other threads have none).
    static TAIL: std::cell::RefCell<Option<Arc<OutputTail>>> = const { std::cell::RefCell::new(None) };
}

/// Let the programs this thread runs from now on copy the last bytes of
/// their captured stdout and stderr into `tail` (`None`: stop). Programs
/// run by other threads (parallel thunks) are not covered.
pub fn set_thread_tail(tail: Option<Arc<OutputTail>>) {
    TAIL.with(|t| *t.borrow_mut() = tail);
}

/// The tail this thread's programs write (a background task's).
pub fn thread_tail() -> Option<Arc<OutputTail>> {
    TAIL.with(|t| t.borrow().clone())
}

/// Read buffers, reused across runs (each run takes one and gives it back).
static BUFS: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

fn take_buf() -> Box<[u8]> {
    let pooled = BUFS.locked().pop();
    pooled.unwrap_or_else(|| vec![0u8; READ_BUF].into_boxed_slice())
}

fn give_buf(b: Box<[u8]>) {
    let mut g = BUFS.locked();
    if g.len() < 4 {
        g.push(b);
    }
}

/// Send `sig` to the process group led by `pid` (no-op for 0).
pub fn signal_group(pid: u32, sig: i32) {
    if pid == 0 {
        return;
    }
    // The group id is our own child's pid, which leads its own group
    // (process_group(0)).
    let (Some(group), Some(sig)) = (
        rustix::process::Pid::from_raw(pid as i32),
        Signal::from_named_raw(sig),
    ) else {
        return;
    };
    if let Err(rustix::io::Errno::PERM) = rustix::process::kill_process_group(group, sig) {
        // A token principal's child in namespaces is outside this confined
        // thread's Landlock domain: the broker that started it signals it.
        shoal_policy::namespaces::signal_group(pid as i32, sig.as_raw());
    }
}

/// Wait until the child has exited (without reaping it) for at most `d`.
/// Returns whether it exited. Without a pidfd, waits `d` and says no.
fn wait_exit_for(pidfd: Option<&OwnedFd>, d: Duration) -> bool {
    match pidfd {
        Some(fd) => {
            let mut fds = [PollFd::new(fd, PollFlags::IN)];
            let timeout = Timespec::try_from(d).ok();
            matches!(rustix::event::poll(&mut fds, timeout.as_ref()), Ok(n) if n > 0)
        }
        None => {
            thread::sleep(d);
            false
        }
    }
}

/// After SIGINT, how long the group has before SIGTERM; after SIGTERM,
/// before SIGKILL (docs/protocol.md §4).
pub const CANCEL_GRACE: Duration = Duration::from_secs(3);

/// End the child's process group: SIGINT, SIGTERM after [`CANCEL_GRACE`],
/// SIGKILL after as long again; then reap it. A stopped (suspended) group is
/// continued so it sees the signals.
fn kill_and_reap(child: &mut Proc, pidfd: Option<&OwnedFd>) {
    let pid = child.id();
    let mut exited = false;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        signal_group(pid, sig);
        signal_group(pid, libc::SIGCONT);
        exited = match pidfd {
            // The leader stays a zombie (its pid, and so the group id,
            // reserved) until we reap it below, so no later signal can hit a
            // reused group.
            Some(fd) => wait_exit_for(Some(fd), CANCEL_GRACE),
            None => wait_exit_polling(child, CANCEL_GRACE),
        };
        if exited {
            break;
        }
    }
    // The leader is gone (or never listened): make sure the whole group is.
    signal_group(pid, libc::SIGKILL);
    if !exited && pidfd.is_none() {
        child.kill();
    }
    let _ = child.wait();
}

/// Without a pidfd: poll `try_wait` for at most `d` (the leader is not
/// reaped before the deadline only if it is still running).
fn wait_exit_polling(child: &mut Proc, d: Duration) -> bool {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    false
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

/// Run a program to completion; `intr` ends it (its eventfd wakes the wait).
pub fn run(spec: SpawnSpec, intr: &Interrupter) -> Result<ProcResult, RunError> {
    // Leash: a gated principal starts only binaries its policy grants (by
    // identity), or unclassified ones where opaque effects are allowed.
    shoal_policy::run_gate::spawn(&spec.program).map_err(RunError::Denied)?;
    let start = Instant::now();
    // Leash: a token principal's child in kernel namespaces (bubblewrap),
    // confined inside them and started by the namespace broker; `None`:
    // started and confined here.
    let ns = shoal_policy::namespaces::wrap(&spec.program, &spec.argv0, &spec.args, &spec.cwd)
        .map_err(RunError::Spawn)?;
    let env: Vec<(OsString, OsString)> = spec
        .env
        .into_iter()
        .filter(|(k, _)| shoal_policy::landlock::passes_env(&k.to_string_lossy()))
        .collect();
    // The program's home (docs/processes.md): the child joins its cgroup
    // first, before any confinement could forbid the write.
    let join = shoal_base::procs::prepare(None, false);
    let mut feed: Option<OutputBytes> = None;
    let capture_stdout = matches!(spec.stdout, StdoutSpec::Capture);
    let started = match ns {
        Some(w) => {
            use shoal_policy::namespaces::{launch, Launch, Stdio as Io};
            let child_join = join.child();
            let launched = child_join.procs().and_then(|procs| {
                let stdin = match spec.stdin {
                    StdinSpec::Null => Io::Null,
                    StdinSpec::Bytes(b) => {
                        feed = Some(b);
                        Io::Piped
                    }
                    StdinSpec::File(f) => Io::Fd(f.into()),
                };
                let stdout = match spec.stdout {
                    StdoutSpec::Capture => Io::Piped,
                    StdoutSpec::File(f) => Io::Fd(f.into()),
                };
                let l = Launch {
                    env,
                    cwd: &spec.cwd,
                    stdin,
                    stdout,
                    stderr: Io::Piped,
                    pty: false,
                    procs,
                };
                launch(w, l)
            });
            launched.map(|l| Started {
                pipes: Pipes::of_fds(l.stdin, l.stdout, l.stderr),
                child: Proc::Brokered(l.child),
            })
        }
        None => {
            let mut cmd = Command::new(&spec.program);
            cmd.arg0(&spec.argv0);
            cmd.args(&spec.args);
            cmd.current_dir(&spec.cwd);
            cmd.env_clear();
            cmd.envs(env);
            cmd.process_group(0);
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
            match spec.stdout {
                StdoutSpec::Capture => cmd.stdout(Stdio::piped()),
                StdoutSpec::File(f) => cmd.stdout(Stdio::from(f)),
            };
            cmd.stderr(Stdio::piped());
            let child_join = join.child();
            // SAFETY: apply writes to an open descriptor and calls prctl; it
            // allocates nothing.
            unsafe {
                cmd.pre_exec(move || child_join.apply());
            }
            // Leash: the principal's filesystem grants, enforced by Landlock.
            match shoal_policy::landlock::prepare(None, &spec.program) {
                Ok(Some(rs)) => {
                    let mut confine = rs.confine();
                    // SAFETY: apply makes a few syscalls and allocates nothing.
                    unsafe {
                        cmd.pre_exec(move || confine.apply());
                    }
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            }
            .and_then(|()| cmd.spawn())
            .map(|mut c| Started {
                pipes: Pipes::of_child(&mut c),
                child: Proc::Own(c),
            })
            // `cmd` holds the parent's copies of redirect files; they close
            // here so the child is the only holder.
        }
    };
    let started = match started {
        Ok(x) => x,
        Err(e) => {
            join.abandon();
            return Err(RunError::Spawn(e));
        }
    };
    let pid = started.child.id();
    // Removes the program's cgroup once it is reaped and nothing is left in it.
    let tracked = join.started(pid as i32);
    if let Some(slot) = &spec.pid_slot {
        slot.store(pid, Ordering::SeqCst);
    }
    let slot = spec.pid_slot.clone();
    let result = wait_child(
        started,
        &tracked,
        feed,
        capture_stdout,
        spec.spill_quota,
        intr,
        start,
    );
    if let Some(slot) = slot {
        slot.store(0, Ordering::SeqCst);
    }
    result
}

/// One captured pipe.
struct Stream {
    pipe: Option<Box<dyn ReadFd>>,
    sink: OutputSink,
    /// Bytes read so far (to grow the pipe buffer of big streams once).
    seen: u64,
    grown: bool,
    /// Where the last bytes also go (`true`: this is stderr).
    tail: Option<(Arc<OutputTail>, bool)>,
}

pub(super) trait ReadFd: Read + AsFd + Send {}
impl<T: Read + AsFd + Send> ReadFd for T {}

impl Stream {
    fn new(pipe: Option<Box<dyn ReadFd>>, quota: Option<Arc<SpillQuota>>) -> Stream {
        Stream {
            pipe,
            sink: OutputSink::default().with_quota(quota),
            seen: 0,
            grown: false,
            tail: None,
        }
    }

    fn with_tail(mut self, tail: Option<Arc<OutputTail>>, stderr: bool) -> Stream {
        self.tail = tail.map(|t| (t, stderr));
        self
    }

    /// One `read` (the pipe is readable or hung up). Past the spill quota
    /// the pipe is closed: the child's next write fails (EPIPE / SIGPIPE).
    fn pump(&mut self, buf: &mut [u8]) {
        self.pump_once(buf);
        if self.sink.is_truncated() {
            self.pipe = None;
        }
    }

    fn pump_once(&mut self, buf: &mut [u8]) {
        let Some(p) = self.pipe.as_mut() else { return };
        // A tailed stream is read through user space (the tail sees it).
        let spliced = match &self.tail {
            None => self.sink.splice_from(p.as_fd(), READ_BUF),
            Some(_) => None,
        };
        if let Some(r) = spliced {
            match r {
                Ok(0) => self.pipe = None,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.pipe = None,
            }
            return;
        }
        match p.read(buf) {
            Ok(0) => self.pipe = None,
            Ok(n) => {
                self.sink.push(&buf[..n]);
                if let Some((t, stderr)) = &self.tail {
                    t.push(*stderr, &buf[..n]);
                }
                self.seen += n as u64;
                if !self.grown && self.seen > (256 << 10) {
                    self.grown = true;
                    // A bigger pipe buffer means fewer, larger reads for big
                    // outputs. Best effort (limited by pipe-max-size).
                    let _ = rustix::pipe::fcntl_setpipe_size(&*p, READ_BUF);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => self.pipe = None,
        }
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.pipe.as_ref().map(|p| p.as_fd())
    }
}

fn wait_child(
    started: Started,
    tracked: &shoal_base::procs::Tracked,
    feed: Option<OutputBytes>,
    capture_stdout: bool,
    quota: Option<Arc<SpillQuota>>,
    intr: &Interrupter,
    start: Instant,
) -> Result<ProcResult, RunError> {
    let Started { mut child, pipes } = started;
    let writer = match (feed, pipes.stdin) {
        (Some(bytes), Some(mut stdin)) => Some(thread::spawn(move || {
            let _ = bytes.write_to(&mut stdin);
            // stdin dropped here: EOF for the child.
        })),
        _ => None,
    };
    let out_pipe = pipes.stdout.filter(|_| capture_stdout);
    let err_pipe = pipes.stderr;
    let tail = thread_tail();
    let mut out = Stream::new(out_pipe, quota.clone()).with_tail(tail.clone(), false);
    let mut err = Stream::new(err_pipe, quota).with_tail(tail, true);
    let pid = child.id();
    let pidfd = child.pidfd();
    let mut buf = take_buf();
    let mut exit: Option<ExitStatus> = None;
    let mut backoff = Duration::from_micros(100);
    // Taken before the flag is first looked at: an interrupt after that look
    // makes it readable, so the wait below ends at once.
    let wake = intr.wake_fd();
    let interrupted_run = loop {
        if intr.is_interrupted() {
            break true;
        }
        if exit.is_some() && out.pipe.is_none() && err.pipe.is_none() {
            break false;
        }
        let watch_exit = exit.is_none() && pidfd.is_some();
        // Without a pidfd the exit is found by polling try_wait with a
        // back-off; otherwise nothing but an event ends the wait.
        let timeout = (exit.is_none() && pidfd.is_none()).then(|| {
            backoff = (backoff * 2).min(NO_PIDFD_POLL);
            Timespec::try_from(backoff).unwrap_or(Timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            })
        });
        let (out_ready, err_ready, exited, woken) = {
            // Slots: stdout, stderr, pidfd, the interrupter's eventfd, each
            // while it is watched; unused slots repeat a watched one.
            let mut fds: [Option<PollFd<'_>>; 4] = [
                out.fd()
                    .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
                err.fd()
                    .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
                pidfd
                    .as_ref()
                    .filter(|_| watch_exit)
                    .map(|fd| PollFd::new(fd, PollFlags::IN)),
                wake.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
            ];
            let mut at = [usize::MAX; 4];
            let mut packed: Vec<PollFd<'_>> = Vec::with_capacity(4);
            for (i, slot) in fds.iter_mut().enumerate() {
                if let Some(p) = slot.take() {
                    at[i] = packed.len();
                    packed.push(p);
                }
            }
            let n = rustix::event::poll(&mut packed, timeout.as_ref()).unwrap_or_default();
            let ready =
                |i: usize| n > 0 && at[i] != usize::MAX && !packed[at[i]].revents().is_empty();
            (ready(0), ready(1), ready(2), ready(3))
        };
        if out_ready {
            out.pump(&mut buf);
        }
        if err_ready {
            err.pump(&mut buf);
        }
        if woken && !intr.is_interrupted() {
            // A wake-up left from an interrupt that was since reset.
            intr.drain();
        }
        let check_exit = exit.is_none() && (!watch_exit || exited);
        if check_exit {
            match child.try_wait() {
                Ok(Some(st)) => exit = Some(st),
                Ok(None) => {}
                Err(_) => {
                    // Cannot wait (should not happen): stop watching.
                    exit = Some(ExitStatus::from_raw(0xff00));
                }
            }
        }
    };
    give_buf(buf);
    if interrupted_run {
        if exit.is_none() {
            kill_and_reap(&mut child, pidfd.as_ref());
        } else {
            // Leader gone but descendants still hold the pipes.
            signal_group(pid, libc::SIGKILL);
        }
        // What left the process group (setsid, double fork) is still in the
        // program's cgroup.
        tracked.kill();
        drop(out);
        drop(err);
        if let Some(w) = writer {
            let _ = w.join();
        }
        return Err(RunError::Interrupted);
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    let mut result = ProcResult {
        pid,
        ..Default::default()
    };
    if let Some(st) = exit {
        let (status, signal) = status_parts(st);
        result.status = status;
        result.signal = signal;
    }
    result.truncated = out.sink.is_truncated() || err.sink.is_truncated();
    (result.stdout, result.stdout_dropped) = out.sink.finish();
    (result.stderr, result.stderr_dropped) = err.sink.finish();
    result.dur_ns = start.elapsed().as_nanos().min(i64::MAX as u128) as i64;
    Ok(result)
}

pub use shoal_base::procs::signal_name;

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c script`, output captured.
    fn sh_spec(script: &str, stdin: StdinSpec) -> SpawnSpec {
        SpawnSpec {
            program: "/bin/sh".into(),
            argv0: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: std::env::vars_os().collect(),
            stdin,
            stdout: StdoutSpec::Capture,
            pid_slot: None,
            spill_quota: None,
        }
    }

    fn sh(script: &str, stdin: StdinSpec) -> ProcResult {
        run(sh_spec(script, stdin), &Interrupter::default()).expect("run")
    }

    #[test]
    fn exit_status_and_output() {
        let r = sh("printf out; printf err 1>&2; exit 3", StdinSpec::Null);
        assert_eq!(r.status, Some(3));
        assert_eq!(&r.stdout[..], b"out");
        assert_eq!(&r.stderr[..], b"err");
        assert!(r.signal.is_none());
        assert!(r.pid > 0);
    }

    fn alive(pid: u32) -> bool {
        rustix::process::Pid::from_raw(pid as i32)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
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
        assert_eq!(&r.stdout[..], b"");
        let r = sh("cat", StdinSpec::Bytes(OutputBytes::from(&b"hello"[..])));
        assert_eq!(&r.stdout[..], b"hello");
    }

    #[test]
    fn big_output_is_drained() {
        // 8 MiB through the pipe: must not deadlock; fits in memory.
        let r = sh("head -c 8388608 /dev/zero", StdinSpec::Null);
        assert_eq!(r.stdout.len(), 8 << 20);
        assert!(!r.stdout.is_spilled());
        assert_eq!(r.stdout_dropped, 0);
    }

    #[test]
    fn huge_output_spills_both_streams() {
        // 20 MiB on each stream at once: both spill, nothing is lost.
        let r = sh(
            "head -c 20971520 /dev/zero & head -c 20971520 /dev/zero 1>&2; wait",
            StdinSpec::Null,
        );
        assert_eq!(r.status, Some(0));
        for (b, d) in [(&r.stdout, r.stdout_dropped), (&r.stderr, r.stderr_dropped)] {
            assert_eq!(b.len(), 20 << 20);
            assert!(b.is_spilled());
            assert_eq!(d, 0);
            let mut n = 0usize;
            let mut rd = b.reader();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = rd.read(&mut buf).expect("read spill");
                if k == 0 {
                    break;
                }
                assert!(buf[..k].iter().all(|&x| x == 0));
                n += k;
            }
            assert_eq!(n, 20 << 20);
        }
        let p = r.stdout.spill_path().expect("spilled").to_path_buf();
        drop(r);
        assert!(!p.exists());
    }

    #[test]
    fn fed_spilled_bytes_stream_to_stdin() {
        let big = sh("head -c 20971520 /dev/zero", StdinSpec::Null);
        assert!(big.stdout.is_spilled());
        let r = sh("wc -c", StdinSpec::Bytes(big.stdout.clone()));
        assert_eq!(String::from_utf8_lossy(&r.stdout).trim(), "20971520");
    }

    /// Run `script` (its stdout a pipe) and interrupt it once it printed
    /// its first line: an event, not a delay.
    fn run_interrupted_when_ready(script: &str) -> (Result<ProcResult, RunError>, Instant) {
        let (ready, w) = std::io::pipe().expect("pipe");
        let mut spec = sh_spec(script, StdinSpec::Null);
        spec.stdout = StdoutSpec::File(File::from(OwnedFd::from(w)));
        let intr = Interrupter::default();
        let remote = intr.clone();
        let waiter = thread::spawn(move || {
            let mut line = String::new();
            let _ = io::BufRead::read_line(&mut io::BufReader::new(ready), &mut line);
            remote.interrupt();
            Instant::now()
        });
        let r = run(spec, &intr);
        let asked = waiter.join().expect("waiter");
        (r, asked)
    }

    #[test]
    fn cancel_escalates_to_sigterm_after_the_grace() {
        // The program ignores SIGINT: SIGTERM, 3 s later, ends it.
        let (r, asked) = run_interrupted_when_ready("trap '' INT; echo ready; exec sleep 30");
        assert!(matches!(r, Err(RunError::Interrupted)));
        let took = asked.elapsed();
        assert!(
            took >= CANCEL_GRACE,
            "SIGTERM came before the grace: {took:?}"
        );
        assert!(took < CANCEL_GRACE * 2, "SIGTERM did not end it: {took:?}");
    }

    #[test]
    fn interrupt_kills_group() {
        let (r, asked) = run_interrupted_when_ready("echo ready; sleep 30 & sleep 30; wait");
        assert!(matches!(r, Err(RunError::Interrupted)));
        assert!(asked.elapsed() < Duration::from_secs(5));
    }

    /// An interrupt that was reset leaves no wake-up behind: the next run
    /// waits for its program, not in a busy loop, and completes.
    #[test]
    fn a_reset_interrupt_does_not_end_the_next_run() {
        let intr = Interrupter::default();
        let _ = intr.wake_fd();
        intr.interrupt();
        intr.reset();
        intr.interrupt();
        intr.reset();
        let r = run(sh_spec("echo done", StdinSpec::Null), &intr).expect("run");
        assert_eq!(&r.stdout[..], b"done\n");
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
            spill_quota: None,
        };
        assert!(matches!(
            run(spec, &Interrupter::default()),
            Err(RunError::Spawn(_))
        ));
    }
}
