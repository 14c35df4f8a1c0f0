//! Kernel namespaces for a token principal's children, held by bubblewrap
//! (docs/leash.md, "Layers").
//!
//! Where `bwrap` is on the daemon's `PATH` at start, `shoal-confine` is
//! beside the daemon's binary, and the principal's `namespaces` is not
//! `"off"`, a token principal's child does not run in the daemon's file
//! tree. It runs in namespaces held for the principal's [`Rules`]: a mount
//! namespace that holds only what they grant (the system directories and
//! read grants read-only, write and delete grants read-write, every path
//! cut around the daemon's own directories as the rules already are), a
//! fresh `/dev`, a private `/tmp` when no grant covers it, its own user,
//! IPC and UTS namespaces and, for `hermetic`, a network namespace with
//! only `lo`.
//!
//! Landlock forbids mounting, and the evaluation thread that asks for the
//! spawn is confined already (every process it forks inherits that). So
//! an unconfined thread started at [`init`], the *broker*, does the rest:
//!
//! * it keeps a *holder* per principal's rules ([`holder`]): `bwrap`
//!   running `shoal-confine hold`, started once, whose namespaces each
//!   child joins;
//! * it starts each child: the child joins the holder's namespaces, takes a
//!   mount and a pid namespace of its own, mounts its `/proc` there as its
//!   pid 1, gives up every capability and execs `shoal-confine run FD RULES
//!   PROGRAM ARGV0 ARGS..` (bound read-only at [`CONFINE_AT`],
//!   [`confine_main`]), which applies the principal's Landlock domain and
//!   seccomp filters (and `no_new_privs`) to itself, then forks and execs
//!   the program (the resolved absolute path), waits for it and writes its
//!   raw wait status to descriptor FD ([`Wrapped::status`],
//!   [`exit_status`]);
//! * it signals those children for the confined thread, whose own signals
//!   Landlock keeps inside its domain ([`signal_group`]).
//!
//! Every process of the chain ignores `SIGINT`, `SIGTERM`, `SIGHUP` and
//! `SIGQUIT` but the program (whose dispositions are reset), so an
//! interrupt signalled to the process group reaches the program the way it
//! does unconfined; the `SIGKILL` that follows ends the chain, and the end
//! of the child's pid 1 ends its pid namespace.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::{Deserialize, Serialize};

use super::landlock::{Net, Rules};

mod confine;
mod holder;

pub use confine::confine_main;
pub use holder::hold_main;
use holder::{at_fd3, Holder};

/// Where the shoal binary is bound inside the namespace (a top-level name
/// no grant can cover: grants are cut around `/proc`, so `/` never is one).
pub const CONFINE_AT: &str = "/.shoal-confine";

/// The program beside the daemon's binary that confines and runs a child
/// (`shoal-confine run ..`, [`confine_main`]) and holds the namespaces
/// (`shoal-confine hold`, [`hold_main`]).
pub const CONFINE_PROGRAM: &str = "shoal-confine";

/// Its subcommand that confines and runs.
pub const CONFINE_ARG: &str = "run";

/// Its subcommand that holds a principal's namespaces.
pub const HOLD_ARG: &str = "hold";

/// Holders kept at once (the oldest is ended first); one per principal's
/// rules and stand-in cwd.
const MAX_HOLDERS: usize = 16;

pub use crate::policy::Namespaces as Mode;

/// A wrapped command, what it joins, and where its start is answered.
struct Spawn {
    cmd: Command,
    join: Join,
    reply: mpsc::Sender<(Command, io::Result<Child>)>,
}

/// What the broker does for a confined evaluation thread.
enum Job {
    /// Start a wrapped command in its principal's holder.
    Spawn(Box<Spawn>),
    /// Signal the process group of a child it started (a confined thread
    /// may not: the child is outside its Landlock domain), then answer.
    Signal(i32, i32, mpsc::Sender<bool>),
    /// The child was reaped: its pid may be reused; never signal it again.
    Forget(i32),
    /// End the holders of these rules (their principal's work ended).
    End(Vec<Weak<Rules>>),
}

struct Engine {
    bwrap: Option<PathBuf>,
    /// The size of a holder's private `/tmp` in bytes (`None`: this
    /// bubblewrap has no `--size`, the tmpfs takes the kernel's default).
    tmp_size: Option<u64>,
    broker: Mutex<mpsc::Sender<Job>>,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

impl Engine {
    /// Hand `job` to the broker (`Err` gives it back when the broker is gone).
    fn send(&self, job: Job) -> Result<(), mpsc::SendError<Job>> {
        self.broker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
    }
}

/// At daemon start, on an unconfined thread, before any token runs: find
/// `bwrap` on `PATH` and start the broker thread, which owns the holders.
/// Without `bwrap` every mode but `"require"` falls back to Landlock and
/// seccomp alone. `tmp_size`: the bytes a holder's private `/tmp` may hold
/// (`[limits] token_tmp`), where bubblewrap has `--size` (0.10 and some
/// earlier builds); without it a warning is logged and the tmpfs takes the
/// kernel's default (half of RAM).
pub fn init(exe: PathBuf, tmp_size: u64) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let path = std::env::var("PATH").ok();
    let confine = exe.with_file_name(CONFINE_PROGRAM);
    if !confine.is_file() {
        tracing::warn!(path = %confine.display(), "no shoal-confine beside the daemon: token children run without namespaces");
    }
    let bwrap = shoal_base::lookup::find_program("bwrap", path.as_deref(), &cwd)
        .filter(|_| super::landlock::abi() > 0 && confine.is_file());
    let tmp_size = match &bwrap {
        Some(b) if has_size_option(b) => Some(tmp_size),
        Some(b) => {
            tracing::warn!(bwrap = %b.display(), "this bubblewrap has no --size: a token's private /tmp is not limited by [limits] token_tmp");
            None
        }
        None => None,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    let tool = bwrap.clone();
    let started = std::thread::Builder::new()
        .name("shoal-ns-broker".into())
        .spawn(move || broker(rx, tool, confine));
    if let Err(e) = started {
        tracing::warn!("cannot start the namespace broker: {e}");
        return;
    }
    tracing::info!(bwrap = ?bwrap, tmp_size = ?tmp_size, "namespaces for token children");
    let _ = ENGINE.set(Engine {
        bwrap,
        tmp_size,
        broker: Mutex::new(tx),
    });
}

/// Does `bwrap --help` list `--size` (the size of the next `--tmpfs`)?
fn has_size_option(bwrap: &Path) -> bool {
    std::process::Command::new(bwrap)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .any(|w| w == "--size")
        })
}

/// The broker: starts each wrapped child in its principal's holder
/// (starting the holder first where there is none), one at a time.
fn broker(rx: mpsc::Receiver<Job>, bwrap: Option<PathBuf>, exe: PathBuf) {
    let mut holders: Vec<Holder> = Vec::new();
    // The direct children started here and not yet reaped.
    let mut started: std::collections::BTreeSet<i32> = Default::default();
    let daemon = rustix::process::getpid();
    for job in rx {
        let Spawn {
            mut cmd,
            join,
            reply,
        } = match job {
            Job::Spawn(s) => *s,
            Job::Signal(pid, sig, reply) => {
                let sent = started.contains(&pid)
                    && rustix::process::Pid::from_raw(pid)
                        .zip(rustix::process::Signal::from_named_raw(sig))
                        .is_some_and(|(p, s)| rustix::process::kill_process_group(p, s).is_ok());
                let _ = reply.send(sent);
                continue;
            }
            Job::Forget(pid) => {
                started.remove(&pid);
                continue;
            }
            Job::End(rules) => {
                // Dropping a holder ends its `bwrap` (and with it the namespaces);
                // those of rules nobody holds go too.
                holders.retain(|h| {
                    h.rules.strong_count() > 0 && !rules.iter().any(|r| Weak::ptr_eq(&h.rules, r))
                });
                continue;
            }
        };
        // Holders of rules no principal has any more, and dead ones, go.
        holders
            .retain_mut(|h| h.rules.strong_count() > 0 && matches!(h.bwrap.try_wait(), Ok(None)));
        let found = holders
            .iter()
            .position(|h| Weak::ptr_eq(&h.rules, &join.rules) && h.args == join.args);
        let at = match (found, &bwrap) {
            (Some(i), _) => Ok(i),
            (None, Some(b)) => Holder::start(b, &exe, &join).map(|h| {
                if holders.len() >= MAX_HOLDERS {
                    holders.remove(0);
                }
                holders.push(h);
                holders.len() - 1
            }),
            (None, None) => Err(io::Error::other("bubblewrap is not available")),
        };
        let r = at.and_then(|i| {
            holders[i].enter_at_exec(&mut cmd, &join, daemon);
            cmd.spawn()
        });
        if let Ok(c) = &r {
            started.insert(c.id() as i32);
        }
        let _ = reply.send((cmd, r));
    }
}

/// Is bubblewrap used for token children (found at start)?
pub fn available() -> bool {
    ENGINE.get().is_some_and(|e| e.bwrap.is_some())
}

/// Token principals' rules, each with its principal and mode.
static MODES: Mutex<Vec<(Weak<Rules>, Mode, String)>> = Mutex::new(Vec::new());

/// The mode of `principal`, whose children `rules` confine.
pub fn register(rules: &Arc<Rules>, mode: Mode, principal: &str) {
    let mut m = MODES.lock().unwrap_or_else(|e| e.into_inner());
    m.retain(|(w, _, _)| w.strong_count() > 0);
    m.push((Arc::downgrade(rules), mode, principal.to_string()));
}

fn mode_of(rules: &Arc<Rules>) -> Mode {
    let m = MODES.lock().unwrap_or_else(|e| e.into_inner());
    m.iter()
        .find(|(w, _, _)| w.upgrade().is_some_and(|r| Arc::ptr_eq(&r, rules)))
        .map_or(Mode::Auto, |(_, mode, _)| *mode)
}

/// The token principals whose rules are live (a session or connection holds them).
pub fn principals() -> std::collections::BTreeSet<String> {
    MODES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(w, _, _)| w.strong_count() > 0)
        .map(|(_, _, p)| p.clone())
        .collect()
}

/// End `principal`'s holders (its token is gone: docs/leash.md): their
/// namespaces, and the private `/tmp` they hold, go. A later command of the
/// principal (a new token) starts a new holder.
pub fn end_principal(principal: &str) {
    let rules: Vec<Weak<Rules>> = MODES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(w, _, p)| p == principal && w.strong_count() > 0)
        .map(|(w, _, _)| w.clone())
        .collect();
    if rules.is_empty() {
        return;
    }
    if let Some(engine) = ENGINE.get() {
        let _ = engine.send(Job::End(rules));
    }
}

/// End the holders of rules nobody holds any more (a PTY opened on a
/// connection that has closed since): without this they would wait for the
/// next spawn to be pruned.
pub fn prune() {
    if let Some(engine) = ENGINE.get() {
        let _ = engine.send(Job::End(Vec::new()));
    }
}

/// What a child needs to join its principal's namespaces: which holder
/// (the principal's rules and the holder's `bwrap` arguments), and what it
/// mounts and where it starts on its own.
#[derive(Debug)]
struct Join {
    rules: Weak<Rules>,
    args: Vec<OsString>,
    sealed: bool,
    cwd: CString,
}

/// A child started in namespaces: the read end of its status pipe (and,
/// until the spawn, the write end and what it joins).
#[derive(Debug)]
pub struct Wrapped {
    status_rx: OwnedFd,
    status_tx: Option<OwnedFd>,
    join: Option<Join>,
}

impl Wrapped {
    /// The program's raw wait status, once the child has been reaped
    /// (`None`: it never got that far; use what the child reported).
    pub fn status(&self) -> Option<i32> {
        let mut buf = [0u8; 4];
        // Non-blocking: every holder of the write end is gone once the
        // child is reaped, but a read must never hang the run.
        if let Ok(fl) = rustix::fs::fcntl_getfl(&self.status_rx) {
            let _ = rustix::fs::fcntl_setfl(&self.status_rx, fl | rustix::fs::OFlags::NONBLOCK);
        }
        let mut got = 0;
        while got < 4 {
            match rustix::io::read(&self.status_rx, &mut buf[got..]) {
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        Some(i32::from_le_bytes(buf))
    }
}

/// The command that runs `program` in the namespaces of the current
/// thread's rules (`landlock::current`), or `None` when the child is not
/// put in namespaces (the local user, `"off"`, no bubblewrap under
/// `"auto"`). Errors: `"require"` without bubblewrap; rules that cannot be
/// encoded.
pub fn wrap(
    program: &Path,
    argv0: &OsStr,
    args: &[impl AsRef<OsStr>],
    cwd: &Path,
) -> io::Result<Option<(Command, Wrapped)>> {
    let Some(rules) = super::landlock::current() else {
        return Ok(None);
    };
    if !rules.token {
        return Ok(None);
    }
    let mode = mode_of(&rules);
    match (mode, available()) {
        (Mode::Off, _) | (Mode::Auto, false) => return Ok(None),
        (Mode::Require, false) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "namespaces = \"require\": bubblewrap (bwrap) was not found on the daemon's PATH at start (or shoal-confine beside the daemon); the program is not started",
            ))
        }
        (_, true) => {}
    }
    let program = if program.is_absolute() {
        program.to_path_buf()
    } else {
        cwd.join(program)
    };
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let prepared = prepared(&rules)?;
    let (plan, encoded) = (&prepared.plan, &prepared.encoded);
    let c_cwd = CString::new(cwd.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut cmd = Command::new(CONFINE_AT);
    cmd.arg(CONFINE_ARG).arg("3").arg(encoded);
    cmd.arg(&program).arg(argv0).args(args);
    let (rx, tx) = pipe()?;
    let join = Join {
        rules: Arc::downgrade(&rules),
        args: plan.holder_args(&cwd),
        sealed: plan.sealed,
        cwd: c_cwd,
    };
    Ok(Some((
        cmd,
        Wrapped {
            status_rx: rx,
            status_tx: Some(tx),
            join: Some(join),
        },
    )))
}

/// A principal's [`Plan`] and its inner rules as `shoal-confine` receives
/// them: made once per thread and rules (a confined thread keeps one
/// principal's rules for good), not per spawn (a grant of `/**` is cut
/// into hundreds of paths).
struct Prepared {
    rules: Weak<Rules>,
    plan: Plan,
    encoded: String,
}

thread_local! {
    static PREPARED: std::cell::RefCell<Option<Arc<Prepared>>> = const { std::cell::RefCell::new(None) };
}

fn prepared(rules: &Arc<Rules>) -> io::Result<Arc<Prepared>> {
    let mine = |p: &Arc<Prepared>| p.rules.upgrade().is_some_and(|r| Arc::ptr_eq(&r, rules));
    if let Some(p) = PREPARED.with(|c| c.borrow().as_ref().filter(|p| mine(p)).cloned()) {
        return Ok(p);
    }
    let plan = Plan::of(rules, ENGINE.get().and_then(|e| e.tmp_size));
    let encoded = serde_json::to_string(&Encoded::of(&plan.inner, plan.scratch))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let p = Arc::new(Prepared {
        rules: Arc::downgrade(rules),
        plan,
        encoded,
    });
    PREPARED.with(|c| *c.borrow_mut() = Some(p.clone()));
    Ok(p)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// The signals every process of the tree but the program ignores.
const PASSED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Start `cmd`: on the broker when [`wrap`] wrapped it (`w`), else here.
/// The command comes back either way (it holds the pipes' other ends).
pub fn spawn_either(mut cmd: Command, w: Option<&mut Wrapped>) -> (Command, io::Result<Child>) {
    match w {
        Some(w) => spawn(cmd, w),
        None => {
            let r = cmd.spawn();
            (cmd, r)
        }
    }
}

/// Start `cmd` (from [`wrap`]) on the broker: the status pipe becomes the
/// child's descriptor 3. Gives the command back (its redirect files are
/// the caller's to drop).
pub fn spawn(mut cmd: Command, w: &mut Wrapped) -> (Command, io::Result<Child>) {
    let (Some(tx), Some(join)) = (w.status_tx.take(), w.join.take()) else {
        return (cmd, Err(io::Error::other("spawned twice")));
    };
    at_fd3(&mut cmd, tx.as_raw_fd());
    let Some(engine) = ENGINE.get() else {
        return (cmd, Err(io::Error::other("namespaces are not initialised")));
    };
    let (rtx, rrx) = mpsc::channel();
    let sent = engine.send(Job::Spawn(Box::new(Spawn {
        cmd,
        join,
        reply: rtx,
    })));
    if let Err(mpsc::SendError(Job::Spawn(s))) = sent {
        return (s.cmd, Err(io::Error::other("the namespace broker is gone")));
    }
    let out = match rrx.recv() {
        Ok(x) => x,
        Err(_) => {
            return (
                Command::new("/"),
                Err(io::Error::other("the namespace broker is gone")),
            )
        }
    };
    drop(tx);
    out
}

/// Signal the process group of `pid`, a child started in namespaces and not
/// yet reaped, through the broker (a confined thread's own signal is
/// refused: Landlock scopes its signals to its domain). Whether it was sent.
pub fn signal_group(pid: i32, sig: i32) -> bool {
    let Some(engine) = ENGINE.get() else {
        return false;
    };
    let (tx, rx) = mpsc::channel();
    let sent = engine.send(Job::Signal(pid, sig, tx));
    sent.is_ok() && rx.recv().unwrap_or(false)
}

/// `pid`, a child started in namespaces, was reaped.
pub fn forget(pid: i32) {
    if let Some(engine) = ENGINE.get() {
        let _ = engine.send(Job::Forget(pid));
    }
}

/// Status pipes of PTY children in namespaces, by pid (read at reap).
static PTY: Mutex<BTreeMap<i32, Wrapped>> = Mutex::new(BTreeMap::new());

/// Keep `w` until [`exit_status`] of `pid`.
pub fn remember(pid: i32, w: Wrapped) {
    PTY.lock().unwrap_or_else(|e| e.into_inner()).insert(pid, w);
}

/// The true raw wait status of a reaped child `pid` whose `bwrap` reported
/// `raw` (unchanged for a child not in namespaces); forgets `pid`.
pub fn exit_status(pid: i32, raw: i32) -> i32 {
    let w = PTY.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
    if w.is_some() {
        forget(pid);
    }
    w.and_then(|w| w.status()).unwrap_or(raw)
}

/// What the namespace holds, from the rules.
struct Plan {
    /// The rules the confinement step applies inside (plus `/proc` and the
    /// private `/tmp`).
    inner: Rules,
    /// Mounts: path, writable; parents before children.
    binds: Vec<(PathBuf, bool)>,
    private_tmp: bool,
    /// The private `/tmp`'s size in bytes (`--size`), when limited.
    tmp_size: Option<u64>,
    /// A grant lies inside the private `/tmp`, so `/tmp` itself is not the
    /// child's to write: [`SCRATCH`] is, and `TMPDIR` names it.
    scratch: bool,
    sealed: bool,
}

/// The child's temporary directory when one of its grants lies inside
/// `/tmp` (a directory of the holder's private `/tmp`, on no real disk
/// path).
const SCRATCH: &str = "/tmp/.shoal-tmp";

impl Plan {
    /// `tmp_size`: the bytes the private `/tmp` may hold (`None`: the
    /// kernel's default for a tmpfs).
    fn of(rules: &Rules, tmp_size: Option<u64>) -> Plan {
        let protected = crate::protected::protected();
        // The rules are cut around the daemon's directories already; a root
        // inside or above one is never mounted all the same.
        let safe = |p: &PathBuf| {
            !protected
                .iter()
                .any(|d| p.starts_with(d) || d.starts_with(p))
        };
        let mut all: Vec<(PathBuf, bool)> = Vec::new();
        for p in rules.read.iter().flatten().filter(|p| safe(p)) {
            all.push((p.clone(), false));
        }
        for p in rules.write.iter().chain(&rules.delete).filter(|p| safe(p)) {
            all.push((p.clone(), true));
        }
        all.sort();
        all.dedup();
        // A root under one already mounted as strongly is left out; a
        // writable one under a read-only one is mounted over it.
        let mut binds: Vec<(PathBuf, bool)> = Vec::new();
        for (p, rw) in all {
            let covered = binds
                .iter()
                .rev()
                .find(|(q, _)| p.starts_with(q))
                .is_some_and(|(_, qrw)| *qrw || !rw);
            if !covered {
                binds.push((p, rw));
            }
        }
        let tmp = Path::new("/tmp");
        let private_tmp = !binds.iter().any(|(p, _)| tmp.starts_with(p));
        let mut inner = rules.clone();
        if let Some(read) = &mut inner.read {
            read.push(PathBuf::from("/proc"));
        }
        // The private /tmp is the child's, unless a grant is mounted in it
        // (then a grant of /tmp would widen that grant's rights): a scratch
        // directory beside the grant is then.
        let scratch = private_tmp && binds.iter().any(|(p, _)| p.starts_with(tmp));
        if private_tmp {
            let own = if scratch { Path::new(SCRATCH) } else { tmp };
            inner
                .read
                .iter_mut()
                .for_each(|r| r.push(own.to_path_buf()));
            inner.write.push(own.to_path_buf());
            inner.delete.push(own.to_path_buf());
        }
        Plan {
            inner,
            binds,
            private_tmp,
            tmp_size,
            scratch,
            sealed: rules.net == Net::Sealed,
        }
    }

    /// The holder's `bwrap` arguments (before its own binary and program):
    /// the namespaces and what the mount namespace holds. `cwd` matters only
    /// where no grant shows it: an empty directory then stands in for it.
    fn holder_args(&self, cwd: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |s: &[&OsStr]| a.extend(s.iter().map(|s| s.to_os_string()));
        push(&[
            "--die-with-parent".as_ref(),
            // A user namespace even for a daemon run as root: whatever the
            // children could do as its root, they do there.
            "--unshare-user".as_ref(),
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
            "--unshare-uts".as_ref(),
        ]);
        if self.sealed {
            push(&["--unshare-net".as_ref()]);
        }
        if self.private_tmp {
            // Its files are memory the holder pins until it ends.
            if let Some(size) = self.tmp_size {
                let size = OsString::from(size.to_string());
                push(&["--size".as_ref(), size.as_os_str()]);
            }
            push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        }
        if self.scratch {
            push(&["--dir".as_ref(), SCRATCH.as_ref()]);
        }
        // Each root is resolved again as the holder starts: one the principal turned into
        // a link since its rules were made (a grant below one it may delete in) is not
        // mounted (bubblewrap would follow the link).
        let writable: Vec<PathBuf> = self
            .binds
            .iter()
            .filter(|(_, rw)| *rw)
            .map(|(p, _)| p.clone())
            .collect();
        for (p, rw) in &self.binds {
            // (A root that does not exist is left to `--bind-try`, which skips it.)
            let exists = std::fs::symlink_metadata(p).is_ok();
            if exists && crate::landlock::resolve_grant(p, &writable).as_ref() != Some(p) {
                continue;
            }
            let flag: &OsStr = if *rw {
                "--bind-try".as_ref()
            } else {
                "--ro-bind-try".as_ref()
            };
            push(&[flag, p.as_os_str(), p.as_os_str()]);
        }
        // The system's merged-/usr links (`/bin -> usr/bin`): the rules
        // hold their targets.
        for l in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            let Ok(target) = std::fs::read_link(l) else {
                continue;
            };
            let abs = Path::new("/").join(&target);
            if self.binds.iter().any(|(p, _)| abs.starts_with(p)) {
                push(&["--symlink".as_ref(), target.as_os_str(), l.as_ref()]);
            }
        }
        // A cwd outside every grant: an empty directory stands in for it
        // (relative paths then name nothing), as it does on the tmpfs root.
        let shown = self.binds.iter().any(|(p, _)| cwd.starts_with(p));
        let special = cwd.starts_with("/proc") || cwd.starts_with("/dev");
        if !shown && !special && cwd != Path::new("/") {
            push(&["--dir".as_ref(), cwd.as_os_str()]);
        }
        push(&[
            "--proc".as_ref(),
            "/proc".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
        ]);
        a
    }
}

/// [`Rules`] as the confinement step receives them.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Encoded {
    read: Option<Vec<PathBuf>>,
    write: Vec<PathBuf>,
    delete: Vec<PathBuf>,
    /// `"open"`, `"sealed"` or `"ports"` (with `ports`).
    net: String,
    ports: Vec<u16>,
    token: bool,
    /// `TMPDIR` for the program (the scratch directory), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tmpdir: Option<PathBuf>,
    /// [`Rules::exec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exec: Option<Vec<PathBuf>>,
}

impl Encoded {
    fn of(r: &Rules, scratch: bool) -> Encoded {
        let (net, ports) = match &r.net {
            Net::Open => ("open", Vec::new()),
            Net::Sealed => ("sealed", Vec::new()),
            Net::ConnectPorts(p) => ("ports", p.clone()),
        };
        Encoded {
            read: r.read.clone(),
            write: r.write.clone(),
            delete: r.delete.clone(),
            net: net.into(),
            ports,
            token: r.token,
            tmpdir: scratch.then(|| PathBuf::from(SCRATCH)),
            exec: r.exec.clone(),
        }
    }

    fn rules(self) -> Result<Rules, String> {
        let net = match self.net.as_str() {
            "open" => Net::Open,
            "sealed" => Net::Sealed,
            "ports" => Net::ConnectPorts(self.ports),
            other => return Err(format!("unknown network rule {other:?}")),
        };
        Ok(Rules {
            read: self.read,
            write: self.write,
            delete: self.delete,
            net,
            token: self.token,
            exec: self.exec,
        })
    }
}

#[cfg(test)]
mod tests;
