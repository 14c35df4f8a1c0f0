//! Kernel namespaces for a token principal's children, by bubblewrap
//! (docs/leash.md, "Layers").
//!
//! Where `bwrap` is on the daemon's `PATH` at start (and the principal's
//! `namespaces` is not `"off"`), a token principal's child does not run in
//! the daemon's file tree: the daemon starts `bwrap` with a private mount
//! namespace that holds only what the principal's [`Rules`] grant (the
//! system directories and read grants read-only, write and delete grants
//! read-write, every path cut around the daemon's own directories as the
//! rules already are), a private `/proc` in a new pid namespace, a fresh
//! `/dev`, a private `/tmp` when no grant covers it, new IPC and UTS
//! namespaces and, for `hermetic`, a network namespace with only `lo`.
//!
//! Landlock forbids mounting, so the child cannot be confined before
//! `bwrap` runs; and the evaluation thread that asks for the spawn is
//! confined already (every process it forks inherits that). So:
//!
//! * the spawn itself is made by the *broker*, a thread the daemon starts
//!   unconfined at start ([`init`]); it only runs the fixed `bwrap` command
//!   built here from the rules of the asking thread;
//! * `bwrap` runs the shoal binary itself, bound read-only at
//!   [`CONFINE_AT`], as `shoal __confine FD RULES PROGRAM ARGV0 ARGS..`
//!   ([`confine_main`]): inside the namespaces it applies the principal's
//!   Landlock domain and seccomp filters (and `no_new_privs`) to itself,
//!   then forks and execs the program (the resolved absolute path), waits
//!   for it and writes its raw wait status to descriptor FD. `bwrap`
//!   reports a signal death as `128 + n`; the daemon reads the true status
//!   from that pipe instead ([`Wrapped::status`], [`exit_status`]).
//!
//! Every process of the tree ignores `SIGINT`, `SIGTERM`, `SIGHUP` and
//! `SIGQUIT` but the program (whose dispositions are reset), so an
//! interrupt signalled to the process group reaches the program the way it
//! does unconfined, and the `SIGKILL` that follows ends `bwrap`, whose
//! death kills the pid namespace (`--die-with-parent`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::{Deserialize, Serialize};

use super::landlock::{Net, Rules};

/// Where the shoal binary is bound inside the namespace (a top-level name
/// no grant can cover: grants are cut around `/proc`, so `/` never is one).
pub const CONFINE_AT: &str = "/.shoal-confine";

/// The hidden subcommand of the shoal binary that confines and runs.
pub const CONFINE_ARG: &str = "__confine";

pub use crate::policy::Namespaces as Mode;

type Job = (Command, mpsc::Sender<(Command, io::Result<Child>)>);

struct Engine {
    bwrap: Option<PathBuf>,
    exe: PathBuf,
    broker: Mutex<mpsc::Sender<Job>>,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// At daemon start, on an unconfined thread, before any token runs: find
/// `bwrap` on `PATH` and start the broker thread. Without it every mode
/// but `"require"` falls back to Landlock and seccomp alone.
pub fn init(exe: PathBuf) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let path = std::env::var("PATH").ok();
    let bwrap = shoal_base::lookup::find_program("bwrap", path.as_deref(), &cwd)
        .filter(|_| super::landlock::abi() > 0);
    let (tx, rx) = mpsc::channel::<Job>();
    let started = std::thread::Builder::new()
        .name("shoal-ns-broker".into())
        .spawn(move || {
            for (mut cmd, reply) in rx {
                let r = cmd.spawn();
                let _ = reply.send((cmd, r));
            }
        });
    if let Err(e) = started {
        tracing::warn!("cannot start the namespace broker: {e}");
        return;
    }
    tracing::info!(bwrap = ?bwrap, "namespaces for token children");
    let _ = ENGINE.set(Engine {
        bwrap,
        exe,
        broker: Mutex::new(tx),
    });
}

/// Is bubblewrap used for token children (found at start)?
pub fn available() -> bool {
    ENGINE.get().is_some_and(|e| e.bwrap.is_some())
}

/// Principals' modes other than the default, by their rules.
static MODES: Mutex<Vec<(Weak<Rules>, Mode)>> = Mutex::new(Vec::new());

/// The mode of the principal whose children `rules` confine.
pub fn register(rules: &Arc<Rules>, mode: Mode) {
    let mut m = MODES.lock().unwrap_or_else(|e| e.into_inner());
    m.retain(|(w, _)| w.strong_count() > 0);
    if mode != Mode::Auto {
        m.push((Arc::downgrade(rules), mode));
    }
}

fn mode_of(rules: &Arc<Rules>) -> Mode {
    let m = MODES.lock().unwrap_or_else(|e| e.into_inner());
    m.iter()
        .find(|(w, _)| w.upgrade().is_some_and(|r| Arc::ptr_eq(&r, rules)))
        .map_or(Mode::Auto, |(_, mode)| *mode)
}

/// A child started in namespaces: the read end of its status pipe (and
/// the write end until the spawn).
#[derive(Debug)]
pub struct Wrapped {
    status_rx: OwnedFd,
    status_tx: Option<OwnedFd>,
}

impl Wrapped {
    /// The program's raw wait status, once the child has been reaped
    /// (`None`: it never got that far; use what `bwrap` reported).
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

/// The `bwrap` command that runs `program` for the current thread's rules
/// (`landlock::current`), or `None` when the child is not put in
/// namespaces (the local user, `"off"`, no bubblewrap under `"auto"`).
/// Errors: `"require"` without bubblewrap; rules that cannot be encoded.
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
    let engine = ENGINE.get();
    let bwrap = engine.and_then(|e| e.bwrap.as_ref().map(|b| (e, b)));
    let (engine, bwrap) = match (mode, bwrap) {
        (Mode::Off, _) | (Mode::Auto, None) => return Ok(None),
        (Mode::Require, None) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "namespaces = \"require\": bubblewrap (bwrap) was not found on the daemon's PATH at start; the program is not started",
            ))
        }
        (_, Some(x)) => x,
    };
    let program = if program.is_absolute() {
        program.to_path_buf()
    } else {
        cwd.join(program)
    };
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let plan = Plan::of(&rules);
    let encoded = serde_json::to_string(&Encoded::of(&plan.inner))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut cmd = Command::new(bwrap);
    cmd.args(plan.bwrap_args(&engine.exe, &cwd));
    cmd.arg(CONFINE_AT).arg(CONFINE_ARG).arg("3").arg(encoded);
    cmd.arg(&program).arg(argv0).args(args);
    let (rx, tx) = pipe()?;
    Ok(Some((
        cmd,
        Wrapped {
            status_rx: rx,
            status_tx: Some(tx),
        },
    )))
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
    let Some(tx) = w.status_tx.take() else {
        return (cmd, Err(io::Error::other("spawned twice")));
    };
    let fd = tx.as_raw_fd();
    // SAFETY: dup2, fcntl and signal are async-signal-safe; nothing is
    // allocated.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                let fl = libc::fcntl(3, libc::F_GETFD);
                if fl < 0 || libc::fcntl(3, libc::F_SETFD, fl & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) < 0 {
                return Err(io::Error::last_os_error());
            }
            for s in PASSED {
                libc::signal(s, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let Some(engine) = ENGINE.get() else {
        return (cmd, Err(io::Error::other("namespaces are not initialised")));
    };
    let (rtx, rrx) = mpsc::channel();
    let sent = engine
        .broker
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, rtx));
    if let Err(mpsc::SendError((cmd, _))) = sent {
        return (cmd, Err(io::Error::other("the namespace broker is gone")));
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
    sealed: bool,
}

impl Plan {
    fn of(rules: &Rules) -> Plan {
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
        // (then a grant of /tmp would widen that grant's rights).
        if private_tmp && !binds.iter().any(|(p, _)| p.starts_with(tmp)) {
            inner
                .read
                .iter_mut()
                .for_each(|r| r.push(tmp.to_path_buf()));
            inner.write.push(tmp.to_path_buf());
            inner.delete.push(tmp.to_path_buf());
        }
        Plan {
            inner,
            binds,
            private_tmp,
            sealed: rules.net == Net::Sealed,
        }
    }

    fn bwrap_args(&self, exe: &Path, cwd: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |s: &[&OsStr]| a.extend(s.iter().map(|s| s.to_os_string()));
        push(&[
            "--die-with-parent".as_ref(),
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
            "--unshare-uts".as_ref(),
        ]);
        if self.sealed {
            push(&["--unshare-net".as_ref()]);
        }
        if self.private_tmp {
            push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        }
        for (p, rw) in &self.binds {
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
            "--ro-bind".as_ref(),
            exe.as_os_str(),
            CONFINE_AT.as_ref(),
            "--chdir".as_ref(),
            cwd.as_os_str(),
            "--".as_ref(),
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
}

impl Encoded {
    fn of(r: &Rules) -> Encoded {
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
        })
    }
}

/// `shoal __confine FD RULES PROGRAM ARGV0 ARGS..` inside the namespace:
/// apply the rules to this process, fork, exec the program in the child,
/// write its raw wait status to FD and exit the way a shell reports it.
/// `args` starts after `__confine`.
pub fn confine_main(args: Vec<OsString>) -> i32 {
    match confine_run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shoal: cannot start the program in its sandbox: {e}");
            126
        }
    }
}

fn confine_run(args: Vec<OsString>) -> Result<i32, String> {
    let mut it = args.into_iter();
    let (Some(fd), Some(rules), Some(program), Some(argv0)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return Err("usage: shoal __confine FD RULES PROGRAM ARGV0 [ARGS..]".into());
    };
    let fd: RawFd = fd
        .to_str()
        .and_then(|s| s.parse().ok())
        .ok_or("bad status descriptor")?;
    let encoded: Encoded = serde_json::from_slice(rules.as_bytes()).map_err(|e| e.to_string())?;
    let rules = encoded.rules()?;
    let rs = rules.ruleset().map_err(|e| e.to_string())?;
    rs.confine().apply().map_err(|e| e.to_string())?;
    // SAFETY: `fd` is the status pipe `bwrap` left open for this process and
    // named on its command line; nothing else in this process owns it.
    let status = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(&status, rustix::io::FdFlags::CLOEXEC).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&program);
    cmd.arg0(argv0);
    cmd.args(it);
    // SAFETY: between fork and exec the child only resets the dispositions
    // of a few signals (`signal` is async-signal-safe) and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            for s in PASSED {
                libc::signal(s, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let st = match cmd.spawn() {
        Ok(mut child) => {
            use std::os::unix::process::ExitStatusExt;
            child.wait().map_err(|e| e.to_string())?.into_raw()
        }
        Err(e) => {
            eprintln!("shoal: {}: {e}", Path::new(&program).display());
            // As a shell reports it: 127 not found, 126 not runnable.
            (if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            }) << 8
        }
    };
    let _ = rustix::io::write(&status, &st.to_le_bytes());
    Ok(if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(read: &[&str], write: &[&str], net: Net) -> Rules {
        Rules {
            read: Some(read.iter().map(PathBuf::from).collect()),
            write: write.iter().map(PathBuf::from).collect(),
            delete: Vec::new(),
            net,
            token: true,
        }
    }

    #[test]
    fn the_plan_mounts_grants_once_parents_first() {
        let r = rules(
            &["/usr", "/usr/lib", "/srv/p", "/srv/p/out/x"],
            &["/srv/p/out"],
            Net::Sealed,
        );
        let p = Plan::of(&r);
        assert_eq!(
            p.binds,
            vec![
                (PathBuf::from("/srv/p"), false),
                (PathBuf::from("/srv/p/out"), true),
                (PathBuf::from("/usr"), false),
            ]
        );
        assert!(p.private_tmp && p.sealed);
        let inner = p.inner.read.as_ref().unwrap();
        assert!(inner.contains(&PathBuf::from("/proc")) && inner.contains(&PathBuf::from("/tmp")));
        assert!(p.inner.write.contains(&PathBuf::from("/tmp")));
        let args = p.bwrap_args(Path::new("/x/shoal"), Path::new("/srv/p"));
        let s: Vec<String> = args.iter().map(|a| a.to_string_lossy().into()).collect();
        let w = s
            .windows(3)
            .any(|w| w == ["--bind-try", "/srv/p/out", "/srv/p/out"]);
        assert!(w, "{s:?}");
        assert!(s.contains(&"--unshare-net".to_string()));
        assert!(s
            .windows(3)
            .any(|w| w == ["--ro-bind", "/x/shoal", CONFINE_AT]));
        assert_eq!(s.last().map(String::as_str), Some("--"));
        // A root above a protected directory (`/` holds `/proc`) is never
        // mounted; no network namespace unless sealed.
        let p = Plan::of(&rules(&["/", "/usr"], &[], Net::Open));
        assert_eq!(p.binds, vec![(PathBuf::from("/usr"), false)]);
        assert!(!p.sealed);
    }

    #[test]
    fn rules_round_trip() {
        for net in [Net::Open, Net::Sealed, Net::ConnectPorts(vec![22, 443])] {
            let r = rules(&["/usr"], &["/srv"], net);
            let s = serde_json::to_string(&Encoded::of(&r)).unwrap();
            let back: Encoded = serde_json::from_str(&s).unwrap();
            assert_eq!(back.rules().unwrap(), r);
        }
    }

    #[test]
    fn modes_parse_and_default_to_auto() {
        #[derive(Deserialize)]
        struct T {
            #[serde(default)]
            m: Mode,
        }
        let t: T = serde_json::from_str("{\"m\":\"require\"}").unwrap();
        assert_eq!(t.m, Mode::Require);
        let t: T = serde_json::from_str("{}").unwrap();
        assert_eq!(t.m, Mode::Auto);
        let r = Arc::new(rules(&[], &[], Net::Open));
        assert_eq!(mode_of(&r), Mode::Auto);
        register(&r, Mode::Off);
        assert_eq!(mode_of(&r), Mode::Off);
        let other = Arc::new(rules(&[], &[], Net::Open));
        assert_eq!(mode_of(&other), Mode::Auto);
    }
}
