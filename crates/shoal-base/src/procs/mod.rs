//! Processes belong to the daemon, dead or alive (docs/processes.md).
//!
//! Every program the daemon starts has a home: its session and its owner
//! (the foreground exec, task N or PTY N), set on the evaluating thread with
//! [`with_home`] (or passed explicitly for a PTY). Where a cgroup v2 tree is
//! writable, each program runs in its own leaf cgroup
//! `<own cgroup>/shoal-<daemon pid>/s-<session hex>/<owner>/<n>`, joined by the
//! child itself between fork and exec (it writes `0` to a `cgroup.procs`
//! descriptor opened before the fork), so `setsid` and double forks cannot
//! leave it. Killing an owner, a session or the daemon's tree is one write
//! to `cgroup.kill`. The tree is named in `<state dir>/processes`; a daemon
//! that finds a dead daemon's record kills what it names ([`record`]).
//!
//! Without a writable cgroup2 (or with `SHOAL_NO_CGROUP=1`) the daemon is a
//! child subreaper, its programs get `PR_SET_PDEATHSIG(SIGKILL)` and their
//! process groups are recorded with their leaders' start times ([`fallback`]).

pub mod cgroup;
mod close;
mod fallback;
pub mod record;
mod signal;

pub use signal::signal_name;

use std::cell::RefCell;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::sync::Locked;

/// Who started a program, within its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The session's foreground evaluation.
    Exec,
    Task(u64),
    Pty(u64),
    /// The worker process a token principal's session evaluates in
    /// (its programs stay in its cgroup).
    Worker,
}

impl Owner {
    fn dir_name(&self) -> String {
        match self {
            Owner::Exec => "exec".into(),
            Owner::Task(n) => format!("task-{n}"),
            Owner::Pty(n) => format!("pty-{n}"),
            Owner::Worker => "worker".into(),
        }
    }
}

/// A program's home: its session and its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    pub session: Arc<str>,
    pub owner: Owner,
    /// A process that keeps no cgroup tree of its own (a token's worker):
    /// the `cgroup.procs` of the leaf the daemon made for the session,
    /// which each program joins.
    delegated: Option<Delegated>,
}

/// A `cgroup.procs` descriptor handed to a process by the daemon.
#[derive(Clone, Debug)]
struct Delegated(Arc<OwnedFd>);

impl PartialEq for Delegated {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Delegated {}

impl Home {
    pub fn new(session: &str, owner: Owner) -> Home {
        Home {
            session: session.into(),
            owner,
            delegated: None,
        }
    }

    /// A home whose programs join the leaf behind `procs` (opened by the
    /// daemon: [`delegate`]), in a process that runs no tree of its own.
    pub fn delegated(session: &str, owner: Owner, procs: Arc<OwnedFd>) -> Home {
        Home {
            delegated: Some(Delegated(procs)),
            ..Home::new(session, owner)
        }
    }
}

/// A leaf for `home`'s programs started by another process (a token's
/// worker), which it is handed: its `cgroup.procs`, open for writing.
/// `None` without cgroups, or when the session is closed. The leaf stays
/// until the session's tree goes, or [`Delegation::kill`].
pub fn delegate(home: Home) -> Option<Delegation> {
    let join = prepare(Some(home), true);
    if join.refused {
        return None;
    }
    let procs = join.procs.as_ref().and_then(|fd| fd.try_clone().ok())?;
    Some(Delegation {
        procs,
        leaf: join.leaf.clone()?,
    })
}

/// A leaf handed to another process ([`delegate`]).
#[derive(Debug)]
pub struct Delegation {
    /// Its `cgroup.procs`, open for writing: what the other process gets.
    pub procs: OwnedFd,
    leaf: PathBuf,
}

impl Delegation {
    /// Kill everything in the leaf (the process it was handed to is gone,
    /// and what it started with it).
    pub fn kill(&self) {
        if cgroup::populated(&self.leaf) {
            let _ = cgroup::kill(&self.leaf);
        }
    }
}

thread_local! {
    static HOME: RefCell<Option<Home>> = const { RefCell::new(None) };
}

/// Run `f` with `home` owning every program this thread starts.
pub fn with_home<T>(home: Option<Home>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Home>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            HOME.with(|c| *c.borrow_mut() = prev);
        }
    }
    let prev = HOME.with(|c| std::mem::replace(&mut *c.borrow_mut(), home));
    let _reset = Reset(prev);
    f()
}

/// The home of this thread's programs (a thread it starts copies it).
pub fn current_home() -> Option<Home> {
    HOME.with(|c| c.borrow().clone())
}

enum Mode {
    Cgroup { base: PathBuf },
    Fallback,
}

struct Manager {
    mode: Mode,
    record: PathBuf,
    /// Live programs per session (leaders not yet reaped) and spawns
    /// prepared and not yet started or abandoned; a session's close waits on
    /// their changes.
    counts: close::Counts,
    /// Sessions closed and not opened again: a spawn for one of them is refused
    /// (one in flight at the close would make its directory again, unkilled).
    closed: Mutex<std::collections::HashSet<Arc<str>>>,
    /// How many sessions of each name have opened: a close of an older one
    /// must not close a newer one's (its supervisor may stop after the next
    /// one of the name started).
    opened: Mutex<std::collections::HashMap<Arc<str>, u64>>,
}

/// One spawn in flight for a session, counted until the [`Join`] is used up.
#[derive(Default)]
struct InFlight(Option<Arc<str>>);

impl InFlight {
    fn new(m: &Manager, session: &Arc<str>) -> InFlight {
        m.counts.in_flight(session, true);
        InFlight(Some(session.clone()))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let (Some(m), Some(session)) = (manager(), self.0.take()) else {
            return;
        };
        m.counts.in_flight(&session, false);
    }
}

/// PTY children not yet reaped, each with its cgroup (docs/processes.md):
/// the PTY layer adds and reaps them; the subreaper fallback leaves them to it.
static PTY_CHILDREN: Mutex<std::collections::BTreeMap<i32, Tracked>> =
    Mutex::new(std::collections::BTreeMap::new());

/// The table of PTY children not yet reaped, locked.
pub fn pty_children() -> std::sync::MutexGuard<'static, std::collections::BTreeMap<i32, Tracked>> {
    PTY_CHILDREN.locked()
}

static MANAGER: OnceLock<Manager> = OnceLock::new();
static NEXT_LEAF: AtomicU64 = AtomicU64::new(1);
static CLOSED: AtomicU64 = AtomicU64::new(1);

fn manager() -> Option<&'static Manager> {
    MANAGER.get()
}

/// The session's directory name: `s-` and the name in hex (long names: a hash).
fn session_dir_name(session: &str) -> String {
    let b = session.as_bytes();
    if b.len() <= 100 {
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!("s-{hex}")
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        session.hash(&mut h);
        format!("s-h{:016x}", h.finish())
    }
}

/// What the daemon uses: `"cgroup"`, `"fallback"` or `"none"` (not started).
pub fn mode_name() -> &'static str {
    match manager().map(|m| &m.mode) {
        Some(Mode::Cgroup { .. }) => "cgroup",
        Some(Mode::Fallback) => "fallback",
        None => "none",
    }
}

/// Daemon start: kill what a dead daemon of `state_dir` left, pick the cgroup
/// tree (or the fallback) and record it.
pub fn init(state_dir: &Path) {
    let record = state_dir.join("processes");
    record::recover(&record);
    let no_cgroup = std::env::var_os("SHOAL_NO_CGROUP").is_some_and(|v| v == "1");
    let mode = if no_cgroup {
        tracing::info!("processes: SHOAL_NO_CGROUP=1, using the subreaper fallback");
        Mode::Fallback
    } else {
        match make_base() {
            Ok(base) => Mode::Cgroup { base },
            Err(why) => {
                tracing::warn!(
                    "processes: no writable cgroup2 ({why}); using the subreaper fallback"
                );
                Mode::Fallback
            }
        }
    };
    if let Mode::Fallback = mode {
        fallback::start();
    }
    if let Mode::Cgroup { base } = &mode {
        tracing::info!(cgroup = %base.display(), "processes: one cgroup per program");
        start_leaf_helper();
    }
    let m = Manager {
        mode,
        record,
        counts: close::Counts::default(),
        closed: Mutex::new(Default::default()),
        opened: Mutex::new(Default::default()),
    };
    let _ = MANAGER.set(m);
    save_record();
}

fn make_base() -> Result<PathBuf, String> {
    let own = cgroup::own_cgroup().ok_or("no cgroup2 mount or no 0:: line in /proc/self/cgroup")?;
    sweep_dead_siblings(&own);
    let base = own.join(format!("shoal-{}", std::process::id()));
    match fs::create_dir(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("mkdir {}: {e}", base.display())),
    }
    if !cgroup::is_cgroup(&base) {
        let _ = fs::remove_dir(&base);
        return Err(format!("{} has no cgroup.kill", base.display()));
    }
    Ok(base)
}

/// Remove the empty trees of dead daemons beside ours (a daemon of another
/// state dir that was SIGKILLed and never restarted). Only empty cgroups go:
/// processes are killed only from a record of our own state dir.
fn sweep_dead_siblings(own: &Path) {
    let Ok(rd) = fs::read_dir(own) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("shoal-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let dir = e.path();
        if record::start_time(pid).is_none() && !cgroup::populated(&dir) {
            let _ = cgroup::remove_tree(&dir);
        }
    }
}

/// Serializes [`save_record`]: what is read and what is renamed into place
/// stay in step (a later snapshot is never replaced by an earlier one).
static SAVING: Mutex<()> = Mutex::new(());

fn save_record() {
    let Some(m) = manager() else { return };
    let _one = SAVING.locked();
    let me = std::process::id() as i32;
    let rec = record::Record {
        daemon: (me, record::start_time(me).unwrap_or(0)),
        cgroup: match &m.mode {
            Mode::Cgroup { base } => Some(base.clone()),
            Mode::Fallback => None,
        },
        groups: fallback::groups(),
    };
    if let Err(e) = rec.save(&m.record) {
        tracing::warn!("cannot write {}: {e}", m.record.display());
    }
}

fn session_path(base: &Path, session: &str) -> PathBuf {
    base.join(session_dir_name(session))
}

/// Prepared before a fork: what the child does to join its home.
#[derive(Default)]
pub struct Join {
    /// Fallback: keeps the orphan reaper away until the child is tracked.
    _spawning: Option<std::sync::RwLockReadGuard<'static, ()>>,
    procs: Option<Arc<OwnedFd>>,
    leaf: Option<PathBuf>,
    home: Option<Home>,
    pdeathsig: bool,
    refused: bool,
    _in_flight: InFlight,
}

/// The child's half of a [`Join`]: cloned in the parent before the fork;
/// in the child it only writes and calls prctl (no allocation).
#[derive(Clone, Debug)]
pub struct ChildJoin {
    procs: Option<Arc<OwnedFd>>,
    pdeathsig: bool,
    /// Its session was closed: the program must not start.
    refused: bool,
}

impl ChildJoin {
    /// In the child, between fork and exec (before any confinement): join
    /// the leaf cgroup; ask for SIGKILL when the spawning thread dies. A
    /// program whose session was closed, or that cannot join the leaf made
    /// for it (the session's cgroups went with its close), does not start:
    /// it would run where no kill reaches it. Without cgroups there is no
    /// leaf to join.
    /// For a child another process starts (a namespace broker's): the
    /// `cgroup.procs` it must join first, or why it must not start.
    pub fn procs(&self) -> io::Result<Option<BorrowedFd<'_>>> {
        if self.refused {
            return Err(io::Error::from_raw_os_error(libc_esrch()));
        }
        Ok(self.procs.as_ref().map(|fd| fd.as_fd()))
    }

    pub fn apply(&self) -> io::Result<()> {
        if self.refused {
            return Err(io::Error::from_raw_os_error(libc_esrch()));
        }
        if let Some(fd) = &self.procs {
            rustix::io::write(fd.as_fd(), b"0")?;
        }
        if self.pdeathsig {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        }
        Ok(())
    }
}

/// Prepare a spawn for `home` (`None`: this thread's home). `pty`: the program
/// is started by a short-lived thread, so no parent-death signal.
pub fn prepare(home: Option<Home>, pty: bool) -> Join {
    let home = home.or_else(current_home);
    let Some(m) = manager() else {
        // A process without a tree (a token's worker): the leaf the daemon
        // made for the program's session, if it was handed one.
        let procs = home.as_ref().and_then(|h| h.delegated.clone());
        return Join {
            pdeathsig: procs.is_some() && !pty,
            procs: procs.map(|d| d.0),
            ..Join::default()
        };
    };
    let mut j = Join {
        pdeathsig: !pty,
        home: home.clone(),
        ..Join::default()
    };
    if let Mode::Fallback = m.mode {
        j._spawning = Some(fallback::SPAWNING.read().unwrap_or_else(|e| e.into_inner()));
    }
    if let Some(h) = &home {
        // Checked and counted under one lock order (closed, then in flight),
        // so a close sees every spawn that got past this point.
        let closed = m.closed.locked();
        if closed.contains(&h.session) {
            j.refused = true;
            return j;
        }
        j._in_flight = InFlight::new(m, &h.session);
    }
    let Mode::Cgroup { base } = &m.mode else {
        return j;
    };
    let n = NEXT_LEAF.fetch_add(1, Ordering::Relaxed);
    let leaf = match &home {
        Some(h) => session_path(base, &h.session).join(h.owner.dir_name()),
        // A program no session owns still dies with the daemon's tree.
        None => base.join("unowned"),
    }
    .join(n.to_string());
    // A thread confined for a token principal (Landlock) may neither make the
    // leaf nor open it: an unconfined helper does, and the descriptor serves
    // the child all the same (docs/processes.md).
    let made = make_leaf(&leaf).or_else(|_| on_helper(&leaf));
    match made {
        Ok(fd) => {
            j.procs = Some(Arc::new(fd));
            j.leaf = Some(leaf);
        }
        Err(e) => {
            tracing::warn!(cgroup = %leaf.display(), "cannot create the program's cgroup: {e}");
        }
    }
    j
}

/// Make the leaf `leaf` and open its `cgroup.procs` for the child to write.
fn make_leaf(leaf: &Path) -> io::Result<OwnedFd> {
    // A concurrent removal of an empty parent can race the mkdir: retry.
    let mut made = fs::create_dir_all(leaf);
    for _ in 0..3 {
        if made.is_ok() {
            break;
        }
        made = fs::create_dir_all(leaf);
    }
    made?;
    match fs::OpenOptions::new()
        .write(true)
        .open(leaf.join("cgroup.procs"))
    {
        Ok(f) => Ok(OwnedFd::from(f)),
        Err(e) => {
            let _ = fs::remove_dir(leaf);
            Err(e)
        }
    }
}

/// What the leaf helper does for a confined thread.
enum LeafJob {
    Make(PathBuf, std::sync::mpsc::Sender<io::Result<OwnedFd>>),
    /// Remove an empty leaf (and, `true`, its owner's directory when empty).
    Remove(PathBuf, bool),
}

static LEAF_HELPER: OnceLock<std::sync::mpsc::Sender<LeafJob>> = OnceLock::new();

/// At start, on the daemon's unconfined thread: the thread that makes and
/// removes leaves for threads that may not.
fn start_leaf_helper() {
    let (tx, rx) = std::sync::mpsc::channel::<LeafJob>();
    let spawned = std::thread::Builder::new()
        .name("shoal-cgroups".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            for job in rx {
                match job {
                    LeafJob::Make(leaf, reply) => {
                        let _ = reply.send(make_leaf(&leaf));
                    }
                    LeafJob::Remove(leaf, parent) => remove_leaf(&leaf, parent),
                }
            }
        });
    match spawned {
        Ok(_) => {
            let _ = LEAF_HELPER.set(tx);
        }
        Err(e) => tracing::warn!("cannot start the cgroup helper: {e}"),
    }
}

fn on_helper(leaf: &Path) -> io::Result<OwnedFd> {
    let helper = LEAF_HELPER
        .get()
        .ok_or_else(|| io::Error::other("no cgroup helper"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    helper
        .send(LeafJob::Make(leaf.to_path_buf(), tx))
        .map_err(|_| io::Error::other("the cgroup helper is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the cgroup helper is gone"))?
}

/// Remove `leaf` when empty (and its parent, `parent`, when that is empty too).
fn remove_leaf(leaf: &Path, parent: bool) {
    if !cgroup::populated(leaf) && fs::remove_dir(leaf).is_ok() && parent {
        if let Some(p) = leaf.parent() {
            let _ = fs::remove_dir(p);
        }
    }
}

impl Join {
    pub fn child(&self) -> ChildJoin {
        ChildJoin {
            procs: self.procs.clone(),
            pdeathsig: self.pdeathsig,
            refused: self.refused,
        }
    }

    /// Move the started child `pid` into its leaf from the parent (for a
    /// child that must not start anything before the parent has done so;
    /// the hook of [`Join::child`] is the way for every other).
    pub fn adopt(&self, pid: i32) -> io::Result<()> {
        if self.refused {
            return Err(io::Error::from_raw_os_error(libc_esrch()));
        }
        match &self.procs {
            Some(fd) => rustix::io::write(fd.as_fd(), pid.to_string().as_bytes())
                .map(|_| ())
                .map_err(io::Error::from),
            None => Ok(()),
        }
    }

    /// The spawn failed: remove the leaf again.
    pub fn abandon(self) {
        if let Some(l) = &self.leaf {
            let _ = fs::remove_dir(l);
        }
    }

    /// The child `pid` (its own group leader) started.
    pub fn started(self, pid: i32) -> Tracked {
        if let Some(m) = manager() {
            if let Some(h) = &self.home {
                m.counts.live(&h.session, true);
            }
            if let Mode::Fallback = m.mode {
                let session = self
                    .home
                    .as_ref()
                    .map_or_else(|| "".into(), |h| h.session.clone());
                fallback::track(pid, session);
                save_record();
            }
        }
        Tracked {
            pid,
            leaf: self.leaf,
            home: self.home,
        }
    }
}

/// A started program; dropping it (after the leader was reaped) removes its
/// leaf when nothing is left in it.
#[derive(Debug)]
pub struct Tracked {
    pid: i32,
    leaf: Option<PathBuf>,
    home: Option<Home>,
}

impl Tracked {
    /// SIGKILL everything in the program's cgroup (setsid and double-forked
    /// descendants included). Without a cgroup: nothing (the caller signals
    /// the process group).
    pub fn kill(&self) {
        if let Some(l) = &self.leaf {
            if cgroup::populated(l) {
                let _ = cgroup::kill(l);
            }
        }
    }
}

impl Tracked {
    /// Wait (bounded) until nothing is left in the program's cgroup, then
    /// drop it (which removes the cgroup).
    pub fn remove_when_empty(self, within: Duration) {
        if let Some(l) = &self.leaf {
            cgroup::wait_empty(l, within);
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(m) = manager() {
            if let Some(h) = &self.home {
                m.counts.live(&h.session, false);
            }
            if let Mode::Fallback = m.mode {
                fallback::untrack(self.pid);
                save_record();
            }
        }
        if let Some(l) = &self.leaf {
            // A task's or PTY's directory goes too once it is empty (the
            // foreground's stays for its next program).
            let parent = !self.home.as_ref().is_some_and(|h| h.owner == Owner::Exec);
            remove_leaf(l, parent);
            // A confined thread may not remove it: the helper does.
            if l.exists() {
                if let Some(h) = LEAF_HELPER.get() {
                    let _ = h.send(LeafJob::Remove(l.clone(), parent));
                }
            }
        }
    }
}

/// Kill everything `home`'s owner started (task cancel, PTY close) and
/// remove its cgroups. Without a cgroup: the owner's tracked groups.
pub fn kill_owner(home: &Home) {
    let Some(m) = manager() else { return };
    match &m.mode {
        Mode::Cgroup { base } => {
            let dir = session_path(base, &home.session).join(home.owner.dir_name());
            cgroup::kill_tree(&dir, Duration::from_secs(2));
        }
        Mode::Fallback => {}
    }
}

/// How many processes `session` has (its cgroup subtree; in the fallback,
/// its live tracked programs).
pub fn count(session: &str) -> usize {
    let Some(m) = manager() else { return 0 };
    match &m.mode {
        Mode::Cgroup { base } => {
            let dir = session_path(base, session);
            if dir.exists() {
                cgroup::pids(&dir).len()
            } else {
                0
            }
        }
        Mode::Fallback => m.counts.live_of(session),
    }
}

/// Session close: once the session's programs had their polite signals
/// (bounded by `grace`), kill what is left of its tree and remove it. Runs on
/// a thread of its own; the session's directory is renamed first so a new
/// session of the same name starts in a fresh one.
/// A session of this name starts (again): its programs may start. Its
/// generation, for its [`close_session`].
pub fn open_session(session: &str) -> u64 {
    let Some(m) = manager() else { return 0 };
    let mut opened = m.opened.locked();
    let n = opened.entry(session.into()).or_default();
    *n += 1;
    m.closed.locked().remove(session);
    *n
}

/// Close the session `generation` of [`open_session`] names; a newer
/// session of the name keeps its programs and its tree.
pub fn close_session(session: &str, generation: u64, grace: Duration) {
    let Some(m) = manager() else { return };
    let session: Arc<str> = session.into();
    {
        let opened = m.opened.locked();
        if opened.get(&session).is_some_and(|n| *n != generation) {
            tracing::debug!(session = %session, "closed after a newer session of its name opened: its tree stays");
            return;
        }
        m.closed.locked().insert(session.clone());
    }
    let closing = match &m.mode {
        Mode::Cgroup { base } => {
            let dir = session_path(base, &session);
            if !dir.exists() {
                None
            } else {
                let to = base.join(format!("closed-{}", CLOSED.fetch_add(1, Ordering::Relaxed)));
                match fs::rename(&dir, &to) {
                    Ok(()) => Some(to),
                    Err(e) => {
                        tracing::debug!("cannot rename {}: {e}", dir.display());
                        Some(dir)
                    }
                }
            }
        }
        Mode::Fallback => None,
    };
    let spawned = std::thread::Builder::new()
        .name("shoal-close".into())
        .spawn(move || close::run(m, session, closing, grace));
    if let Err(e) = spawned {
        tracing::warn!("cannot start the session-close thread: {e}");
    }
}

/// Clean daemon stop (after the polite signals): kill everything the daemon
/// started, remove its tree and its record.
pub fn shutdown() {
    let Some(m) = manager() else { return };
    let killed = match &m.mode {
        Mode::Cgroup { base } => cgroup::kill_tree(base, Duration::from_secs(3)),
        Mode::Fallback => fallback::kill_all(),
    };
    if killed > 0 {
        tracing::info!(killed, "stopping: processes still running were killed");
    }
    let _ = fs::remove_file(&m.record);
}

/// `ESRCH`: the program's session is gone.
const fn libc_esrch() -> i32 {
    rustix::io::Errno::SRCH.raw_os_error()
}
