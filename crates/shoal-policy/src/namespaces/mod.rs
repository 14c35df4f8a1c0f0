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
//! Landlock forbids mounting, and the process that asks for the spawn may
//! be confined already (a token's worker confines itself whole; every
//! process it forks inherits that). So a process of its own started at
//! [`init`], before any confinement, the *broker* (`shoal-confine broker`,
//! [`broker`]), does the rest, over a socketpair:
//!
//! * it keeps a *holder* per principal ([`holder`]): `bwrap` running
//!   `shoal-confine hold`, started once, whose namespaces each child joins;
//! * it starts each child: the child joins the holder's namespaces, takes a
//!   mount and a pid namespace of its own, mounts its `/proc` there as its
//!   pid 1, gives up every capability and execs `shoal-confine run FD RULES
//!   PROGRAM ARGV0 ARGS..` (bound read-only at [`CONFINE_AT`],
//!   [`confine_main`]), which applies the principal's Landlock domain and
//!   seccomp filters (and `no_new_privs`) to itself, then forks and execs
//!   the program (the resolved absolute path), waits for it and writes its
//!   raw wait status to descriptor FD ([`Brokered::wait`]);
//! * it answers with the child's pid and a pidfd, signals the child's
//!   process group (a confined process's own signals Landlock keeps inside
//!   its domain) and reaps it when asked ([`Brokered`]).
//!
//! Every process of the chain ignores `SIGINT`, `SIGTERM`, `SIGHUP` and
//! `SIGQUIT` but the program (whose dispositions are reset), so an
//! interrupt signalled to the process group reaches the program the way it
//! does unconfined; the `SIGKILL` that follows ends the chain, and the end
//! of the child's pid 1 ends its pid namespace.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::{Deserialize, Serialize};
use shoal_base::sync::Locked;

use super::landlock::{Net, Rules};

mod broker;
mod confine;
mod holder;
mod launch;

pub use broker::{broker_main, BROKER_ARG};
use broker::{HolderArg, HolderSpec, Reply, Request, B};
pub use confine::confine_main;
pub use holder::hold_main;
pub use launch::{launch, remember, signal_group, try_reap, Brokered, Launch, Launched, Stdio};

/// Where the shoal binary is bound inside the namespace (a top-level name
/// no grant can cover: grants are cut around `/proc`, so `/` never is one).
pub const CONFINE_AT: &str = "/.shoal-confine";

/// The program beside the daemon's binary that confines and runs a child
/// (`shoal-confine run ..`, [`confine_main`]), holds the namespaces
/// (`shoal-confine hold`, [`hold_main`]) and brokers (`shoal-confine
/// broker`, [`broker_main`]).
pub const CONFINE_PROGRAM: &str = "shoal-confine";

/// Its subcommand that confines and runs.
pub const CONFINE_ARG: &str = "run";

/// Its subcommand that holds a principal's namespaces.
pub const HOLD_ARG: &str = "hold";

/// Holders kept at once for one principal (its oldest is ended first):
/// one per stand-in cwd.
const MAX_HOLDERS: usize = 16;

pub use crate::policy::Namespaces as Mode;

struct Engine {
    /// The size of a holder's private `/tmp` in bytes (`None`: this
    /// bubblewrap has no `--size`, the tmpfs takes the kernel's default).
    tmp_size: Option<u64>,
    /// `shoal-confine` and `bwrap`.
    confine: PathBuf,
    bwrap: PathBuf,
    /// The broker, started at its first use or at [`start_broker`].
    broker: Mutex<Slot>,
}

enum Slot {
    Unstarted,
    Running(Arc<broker::Client>),
    /// It could not start, or it is gone and may not start again (a
    /// process that confined itself since could start only a broker that
    /// cannot mount).
    Failed,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

impl Engine {
    fn broker(&self) -> Option<Arc<broker::Client>> {
        let mut slot = self.broker.locked();
        if let Slot::Unstarted = *slot {
            *slot = match broker::Client::start(&self.confine, Some(&self.bwrap)) {
                Ok(b) => Slot::Running(Arc::new(b)),
                Err(e) => {
                    tracing::warn!("cannot start the namespace broker: {e}");
                    Slot::Failed
                }
            };
        }
        match &*slot {
            Slot::Running(b) => Some(b.clone()),
            _ => None,
        }
    }

    /// `b` turned out to be gone: reap it; the next request starts a new
    /// one, unless this process confined itself ([`when_broker_gone`]).
    fn lost(&self, b: &Arc<broker::Client>) {
        let mut slot = self.broker.locked();
        if matches!(&*slot, Slot::Running(r) if Arc::ptr_eq(r, b)) {
            b.end();
            let gone = GONE.get();
            *slot = if gone.is_some() {
                Slot::Failed
            } else {
                Slot::Unstarted
            };
            drop(slot);
            tracing::warn!("the namespace broker is gone");
            if let Some(f) = gone {
                f();
            }
        }
    }
}

/// Ask the broker (`Err`: there is none, or it is gone).
fn call(req: &Request, fds: &[BorrowedFd<'_>]) -> io::Result<(Reply, Vec<OwnedFd>)> {
    let engine = ENGINE
        .get()
        .ok_or_else(|| io::Error::other("namespaces are not initialised"))?;
    let broker = engine
        .broker()
        .ok_or_else(|| io::Error::other("the namespace broker is not running"))?;
    let (reply, fds) = broker.call(req, fds).inspect_err(|e| {
        if e.kind() == io::ErrorKind::BrokenPipe {
            engine.lost(&broker);
        }
    })?;
    match reply {
        // A spawn's own failures are system errors.
        Reply::Failed { errno: Some(n), .. } => Err(io::Error::from_raw_os_error(n)),
        Reply::Failed { errno: None, msg } => Err(io::Error::other(msg)),
        r => Ok((r, fds)),
    }
}

/// At start, before anything is confined: find `bwrap` on `PATH` and
/// `shoal-confine` beside `exe`; the broker, which owns the holders, starts
/// at its first use (or [`start_broker`]). Without `bwrap` (or with one
/// older than 0.8, which cannot mount a descriptor) every mode but
/// `"require"` falls back to Landlock and seccomp alone. `tmp_size`: the
/// bytes a holder's private `/tmp` may hold (`[limits] token_tmp`), where
/// bubblewrap has `--size` (0.10 and some earlier builds); without it a
/// warning is logged and the tmpfs takes the kernel's default (half of
/// RAM).
pub fn init(exe: PathBuf, tmp_size: u64) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let path = std::env::var("PATH").ok();
    let confine = exe.with_file_name(CONFINE_PROGRAM);
    if !confine.is_file() {
        tracing::warn!(path = %confine.display(), "no shoal-confine beside the daemon: token children run without namespaces");
    }
    let Some(bwrap) = shoal_base::lookup::find_program("bwrap", path.as_deref(), &cwd)
        .filter(|_| super::landlock::abi() > 0 && confine.is_file())
    else {
        tracing::info!("no bubblewrap: token children run without namespaces");
        return;
    };
    let options = bwrap_options(&bwrap);
    // A holder mounts each grant root from a descriptor opened without following links
    // (`holder::bwrap_args`): a bubblewrap that can mount only by path would follow a
    // link another token swapped in meanwhile.
    if !options.iter().any(|o| o == "--bind-fd") {
        tracing::warn!(bwrap = %bwrap.display(), "this bubblewrap has no --bind-fd (0.8 or later has): token children run without namespaces");
        return;
    }
    let tmp_size = if options.iter().any(|o| o == "--size") {
        Some(tmp_size)
    } else {
        tracing::warn!(bwrap = %bwrap.display(), "this bubblewrap has no --size: a token's private /tmp is not limited by [limits] token_tmp");
        None
    };
    tracing::info!(bwrap = %bwrap.display(), tmp_size = ?tmp_size, "namespaces for token children");
    let _ = ENGINE.set(Engine {
        tmp_size,
        confine,
        bwrap,
        broker: Mutex::new(Slot::Unstarted),
    });
}

/// What the process does when its broker is gone (see [`when_broker_gone`]).
static GONE: OnceLock<fn()> = OnceLock::new();

/// Call `f` when the broker turns out to be gone (killed from outside, or
/// crashed), and start no other: a confined process could start only one
/// that cannot mount (a token's worker ends; the daemon starts a new one,
/// with a new broker, at the principal's next exec). Without it the next
/// request starts a new broker.
pub fn when_broker_gone(f: fn()) {
    let _ = GONE.set(f);
}

/// Start the broker now (a process about to confine itself: it could not
/// later). Without it (no bubblewrap, or it failed to start) namespaces
/// are not [`available`].
pub fn start_broker() {
    if let Some(e) = ENGINE.get() {
        e.broker();
    }
}

/// The options `bwrap --help` lists (`--size`: the size of the next `--tmpfs`;
/// `--bind-fd`: a mount of an open descriptor).
fn bwrap_options(bwrap: &Path) -> Vec<String> {
    std::process::Command::new(bwrap)
        .arg("--help")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter(|w| w.starts_with("--"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Is bubblewrap used for token children (found at start, and its broker
/// not known to have failed to start)?
pub fn available() -> bool {
    ENGINE
        .get()
        .is_some_and(|e| !matches!(*e.broker.locked(), Slot::Failed))
}

/// Has the broker started (so holders may be running)?
fn running() -> bool {
    ENGINE
        .get()
        .is_some_and(|e| matches!(*e.broker.locked(), Slot::Running(_)))
}

/// A token principal's rules, with its mode and the number its holders go by.
struct Registered {
    rules: Weak<Rules>,
    mode: Mode,
    principal: String,
    key: u64,
}

/// Token principals' rules.
static MODES: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The mode of `principal`, whose children `rules` confine. Every rules of
/// one principal (a gate per connection) share its key: its holders.
pub fn register(rules: &Arc<Rules>, mode: Mode, principal: &str) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut m = MODES.locked();
    m.retain(|r| r.rules.strong_count() > 0);
    let key = m
        .iter()
        .find(|r| r.principal == principal)
        .map_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed), |r| r.key);
    m.push(Registered {
        rules: Arc::downgrade(rules),
        mode,
        principal: principal.to_string(),
        key,
    });
}

/// The mode and key of `rules` (unregistered: `"auto"`, key 0).
fn mode_of(rules: &Arc<Rules>) -> (Mode, u64) {
    let m = MODES.locked();
    m.iter()
        .find(|r| r.rules.upgrade().is_some_and(|r| Arc::ptr_eq(&r, rules)))
        .map_or((Mode::Auto, 0), |r| (r.mode, r.key))
}

/// The keys of live rules but those of `except`.
fn live_keys(except: Option<&str>) -> Vec<u64> {
    let m = MODES.locked();
    let mut keys: Vec<u64> = m
        .iter()
        .filter(|r| r.rules.strong_count() > 0 && Some(r.principal.as_str()) != except)
        .map(|r| r.key)
        .collect();
    keys.push(0);
    keys
}

/// The token principals whose rules are live (a session or connection holds them).
pub fn principals() -> std::collections::BTreeSet<String> {
    MODES
        .locked()
        .iter()
        .filter(|r| r.rules.strong_count() > 0)
        .map(|r| r.principal.clone())
        .collect()
}

/// End `principal`'s holders (its token is gone: docs/leash.md): their
/// namespaces, and the private `/tmp` they hold, go. A later command of the
/// principal (a new token) starts a new holder.
pub fn end_principal(principal: &str) {
    if running() {
        let _ = call(
            &Request::Keep {
                live: live_keys(Some(principal)),
            },
            &[],
        );
    }
}

/// End the holders of rules nobody holds any more (a PTY opened on a
/// connection that has closed since): without this they would wait for the
/// next spawn to be pruned.
pub fn prune() {
    if running() {
        let _ = call(
            &Request::Keep {
                live: live_keys(None),
            },
            &[],
        );
    }
}

/// What a child needs to join its principal's namespaces: which holder,
/// and what it mounts and where it starts on its own.
struct Join {
    /// The principal's plan, whose holder spec is made for `cwd`.
    prepared: Arc<Prepared>,
    key: u64,
    cwd: PathBuf,
    /// Where the principal may write, when its children may run only
    /// granted programs: nothing there is executable (not even mapped as
    /// code), or a program or library it wrote would run as its own code.
    noexec: Vec<PathBuf>,
}

/// A program to start in namespaces ([`wrap`], then [`launch`]).
#[derive(Debug)]
pub struct Wrapped {
    /// The arguments of [`CONFINE_AT`].
    args: Vec<OsString>,
    join: Join,
}

/// The wrapped program for `program` in the namespaces of the current
/// thread's rules (`landlock::current`), or `None` when the child is not
/// put in namespaces (the local user, `"off"`, no bubblewrap under
/// `"auto"`). Errors: `"require"` without bubblewrap; rules that cannot be
/// encoded.
pub fn wrap(
    program: &Path,
    argv0: &OsStr,
    args: &[impl AsRef<OsStr>],
    cwd: &Path,
) -> io::Result<Option<Wrapped>> {
    let Some(rules) = super::landlock::current() else {
        return Ok(None);
    };
    if !rules.token {
        return Ok(None);
    }
    let (mode, key) = mode_of(&rules);
    match (mode, available()) {
        (Mode::Off, _) | (Mode::Auto, false) => return Ok(None),
        (Mode::Require, false) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "namespaces = \"require\": bubblewrap (bwrap, 0.8 or later) was not found on the daemon's PATH at start (or shoal-confine beside the daemon); the program is not started",
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
    let encoded = &prepared.encoded;
    let mut a: Vec<OsString> = vec![CONFINE_ARG.into(), "3".into(), encoded.into()];
    a.push(program.into_os_string());
    a.push(argv0.to_os_string());
    a.extend(args.iter().map(|x| x.as_ref().to_os_string()));
    let noexec = match rules.exec {
        Some(_) => prepared.plan.noexec.clone(),
        None => Vec::new(),
    };
    Ok(Some(Wrapped {
        args: a,
        join: Join {
            prepared: prepared.clone(),
            key,
            cwd,
            noexec,
        },
    }))
}

/// A principal's [`Plan`] and its inner rules as `shoal-confine` receives
/// them: made once per thread and rules (a confined thread keeps one
/// principal's rules for good), not per spawn (a grant of `/**` is cut
/// into hundreds of paths).
struct Prepared {
    rules: Weak<Rules>,
    plan: Plan,
    encoded: String,
    /// The holder spec last made, and the cwd it was made for.
    holder: Mutex<Option<(PathBuf, HolderSpec)>>,
}

impl std::fmt::Debug for Join {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Join")
            .field("key", &self.key)
            .field("cwd", &self.cwd)
            .field("noexec", &self.noexec)
            .finish_non_exhaustive()
    }
}

impl Join {
    /// The holder spec for this spawn: the one remembered for its cwd
    /// (`false`: it may only find a running holder), else one made now.
    pub(super) fn holder(&self) -> (HolderSpec, bool) {
        let kept = self.prepared.holder.locked();
        match kept.as_ref() {
            Some((cwd, spec)) if *cwd == self.cwd && spec.key == self.key => (spec.clone(), false),
            _ => {
                drop(kept);
                (self.fresh_holder(), true)
            }
        }
    }

    /// The holder spec made now: each root checked for links as the
    /// holder that starts from it will mount it (and remembered).
    pub(super) fn fresh_holder(&self) -> HolderSpec {
        let plan = &self.prepared.plan;
        let spec = HolderSpec {
            key: self.key,
            args: plan.holder_args(&self.cwd),
            sealed: plan.sealed,
        };
        *self.prepared.holder.locked() = Some((self.cwd.clone(), spec.clone()));
        spec
    }
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
        holder: Mutex::new(None),
    });
    PREPARED.with(|c| *c.borrow_mut() = Some(p.clone()));
    Ok(p)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// The signals every process of the tree but the program ignores.
const PASSED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

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
    /// Where a child limited to its programs may map no file as code
    /// ([`noexec_paths`]).
    noexec: Vec<PathBuf>,
}

/// Where a child limited to its programs may map no file as code, each made
/// a `noexec` mount of its own as the child starts (`holder::own_proc`),
/// parents before children: its private `/tmp`, its write and delete
/// grants, and every directory some token may write in (`Rules::links`,
/// resolved as far as they exist: one made later is covered once it is).
/// Without the last, a file it wrote that another token moved out of its
/// write grant would lie on an executable mount it can read (round 15's
/// E2, round 16's E4). A program in such a directory does not run either:
/// any token could have changed it.
fn noexec_paths(rules: &Rules) -> Vec<PathBuf> {
    let root = Path::new("/");
    let mut v: Vec<PathBuf> = std::iter::once(PathBuf::from("/tmp"))
        .chain(rules.write.iter().chain(&rules.delete).cloned())
        .chain(
            rules
                .links
                .iter()
                .map(|w| crate::run_gate::resolve(root, w, true)),
        )
        .collect();
    v.sort();
    v.dedup();
    v
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
        // writable one under a read-only one is mounted over it, unless a
        // token may write in a directory between the two.
        let mut binds: Vec<(PathBuf, bool)> = Vec::new();
        for (p, rw) in all {
            let Some(i) = binds.iter().rposition(|(q, _)| p.starts_with(q)) else {
                binds.push((p, rw));
                continue;
            };
            let (q, qrw) = &binds[i];
            if *qrw || !rw {
                continue;
            }
            // bubblewrap walks to a mount point through what is mounted above
            // it, following links, and makes the directories (or the file)
            // it does not find. A token that may write there could point that
            // walk anywhere the daemon may write (round 13's B1). So the
            // read-only root is mounted writable instead, and Landlock alone
            // keeps the rest of it read-only.
            let walked_in_writable = p != *q
                && p.parent()
                    .is_some_and(|d| rules.links.iter().any(|w| d.starts_with(w)));
            if walked_in_writable {
                let q = q.clone();
                binds[i].1 = true;
                binds.retain(|(x, _)| *x == q || !x.starts_with(&q));
            } else {
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
            noexec: noexec_paths(rules),
        }
    }

    /// The holder's `bwrap` arguments (before its own binary and program):
    /// the namespaces and what the mount namespace holds. `cwd` matters only
    /// where no grant shows it: an empty directory then stands in for it.
    fn holder_args(&self, cwd: &Path) -> Vec<HolderArg> {
        let mut a: Vec<HolderArg> = Vec::new();
        let push = |a: &mut Vec<HolderArg>, s: &[&OsStr]| {
            a.extend(s.iter().map(|s| HolderArg::Word(B::from(*s))))
        };
        push(
            &mut a,
            &[
                "--die-with-parent".as_ref(),
                // A user namespace even for a daemon run as root: whatever the
                // children could do as its root, they do there.
                "--unshare-user".as_ref(),
                "--unshare-pid".as_ref(),
                "--unshare-ipc".as_ref(),
                "--unshare-uts".as_ref(),
            ],
        );
        if self.sealed {
            push(&mut a, &["--unshare-net".as_ref()]);
        }
        if self.private_tmp {
            // Its files are memory the holder pins until it ends.
            if let Some(size) = self.tmp_size {
                let size = OsString::from(size.to_string());
                push(&mut a, &["--size".as_ref(), size.as_os_str()]);
            }
            push(&mut a, &["--tmpfs".as_ref(), "/tmp".as_ref()]);
        }
        if self.scratch {
            push(&mut a, &["--dir".as_ref(), SCRATCH.as_ref()]);
        }
        // Each root is opened as the holder starts, following no link, and what was
        // opened is mounted: one a token turned into a link since the rules were made
        // (a grant below a directory any token may write in) is not mounted.
        for (p, rw) in &self.binds {
            a.push(HolderArg::Mount {
                path: B::from(p.as_path()),
                rw: *rw,
            });
        }
        // The system's merged-/usr links (`/bin -> usr/bin`): the rules
        // hold their targets.
        for l in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            let Ok(target) = std::fs::read_link(l) else {
                continue;
            };
            let abs = Path::new("/").join(&target);
            if self.binds.iter().any(|(p, _)| abs.starts_with(p)) {
                push(
                    &mut a,
                    &["--symlink".as_ref(), target.as_os_str(), l.as_ref()],
                );
            }
        }
        // A cwd outside every grant: an empty directory stands in for it
        // (relative paths then name nothing), as it does on the tmpfs root.
        let shown = self.binds.iter().any(|(p, _)| cwd.starts_with(p));
        let special = cwd.starts_with("/proc") || cwd.starts_with("/dev");
        if !shown && !special && cwd != Path::new("/") {
            push(&mut a, &["--dir".as_ref(), cwd.as_os_str()]);
        }
        push(
            &mut a,
            &[
                "--proc".as_ref(),
                "/proc".as_ref(),
                "--dev".as_ref(),
                "/dev".as_ref(),
            ],
        );
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
    /// [`Rules::links`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    links: Vec<PathBuf>,
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
            links: r.links.clone(),
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
            links: self.links,
        })
    }
}

#[cfg(test)]
mod tests;
