//! The Daemon actor (root of the tree) and `shoal daemon`'s entry point.
//!
//! The actor owns the config, the health registry and the map of named
//! sessions (one SessionSupervisor each); it answers `daemon.status` and
//! drives shutdown. [`run`] sets up logging, the socket (or the one systemd
//! passed), signals and the actix System, and tears the socket down at exit.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use serde_json::{json, Value as Json};

use super::event_bus::EventBus;
use super::health::{rss_bytes, Registration, Registry};
use super::journal_writer::{JournalWriter, Services};
use super::listener::{self, Listener};
use super::msg::{
    CloseSession, GetServices, GetStatus, ListSessions, SessionError, Shutdown, StopSession,
};
use super::session::SessionShared;
use super::session_handle::{AttachSession, SessionHandle};
use super::session_supervisor::SessionSupervisor;
use crate::config::{self, Config};
use crate::journal;
use crate::paths;
use crate::sync::Locked;

/// Command-line options of `shoal daemon`.
#[derive(Debug, Clone, Default)]
pub struct DaemonOptions {
    pub socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

/// Facts about this daemon shown by `shoal status`.
#[derive(Debug, Clone)]
pub struct DaemonInfo {
    pub pid: u32,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub config: Option<PathBuf>,
    pub log_dir: PathBuf,
    pub socket_activated: bool,
    pub started: Instant,
    pub started_unix_ms: u64,
}

/// A named session as the daemon holds it.
type SessionEntry = (
    Addr<SessionSupervisor>,
    Arc<SessionShared>,
    Arc<super::health::ActorStats>,
);

pub struct Daemon {
    info: DaemonInfo,
    config: Arc<Config>,
    registry: Arc<Registry>,
    reg: Registration,
    sessions: BTreeMap<String, SessionEntry>,
    default_cwd: PathBuf,
    stopping: bool,
    services: Option<Services>,
    /// Connections open now (the listener counts them).
    connections: Arc<std::sync::atomic::AtomicUsize>,
    /// Sessions interrupted at shutdown, for `run` to wait on (bounded) before exiting.
    draining: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>>,
    /// Built-in plus user adapters, loaded once, when first needed (a
    /// session or `daemon.status`): an idle daemon holds none of it.
    adapters: Option<Arc<crate::adapters::Catalog>>,
}

impl Daemon {
    pub fn new(
        info: DaemonInfo,
        config: Arc<Config>,
        registry: Arc<Registry>,
        reg: Registration,
    ) -> Self {
        let default_cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Daemon {
            info,
            config,
            registry,
            reg,
            sessions: BTreeMap::new(),
            default_cwd,
            stopping: false,
            services: None,
            connections: Arc::default(),
            draining: Arc::default(),
            adapters: None,
        }
    }

    fn adapters(&mut self) -> &Arc<crate::adapters::Catalog> {
        self.adapters.get_or_insert_with(|| {
            Arc::new(crate::adapters::Catalog::load(
                crate::adapters::user_dir().as_deref(),
            ))
        })
    }

    /// Where shutdown leaves the interrupted sessions (see [`run`]).
    pub fn with_draining(mut self, d: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>>) -> Self {
        self.draining = d;
        self
    }

    /// The listener's count of open connections (for `daemon.status`).
    pub fn with_connections(mut self, open: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        self.connections = open;
        self
    }

    /// Each `[limits]` quota with its current use, where the daemon can count it. Per-session
    /// and per-connection quotas show the busiest session or connection.
    fn limits_json(&self) -> Json {
        let l = &self.config.limits;
        let live = self
            .sessions
            .values()
            .filter(|(a, _, _)| a.connected())
            .count();
        let spill_used = self
            .sessions
            .values()
            .map(|(_, s, _)| spill_used(s))
            .max()
            .unwrap_or(0);
        let ptys_used = self
            .sessions
            .keys()
            .map(|name| crate::pty::open_in_session(name).len())
            .max()
            .unwrap_or(0);
        json!({
            "sessions": {"used": live, "max": l.max_sessions, "key": "max_sessions"},
            "connections": {
                "used": self.connections.load(std::sync::atomic::Ordering::Relaxed),
                "max": l.max_connections,
                "key": "max_connections",
            },
            "subscriptions_per_connection": {
                "used": self.registry.max_subscriptions(),
                "max": l.max_subscriptions_per_connection,
                "key": "max_subscriptions_per_connection",
            },
            // `used` (the busiest session's live tasks) is filled in from the
            // session tables.
            "tasks_per_session": {"used": 0, "max": l.max_tasks_per_session, "key": "max_tasks_per_session"},
            "ptys_per_session": {
                "used": ptys_used,
                "max": l.max_ptys_per_session,
                "key": "max_ptys_per_session",
            },
            "session_memory": {"max": l.session_memory, "key": "session_memory"},
            "spill_bytes": {"used": spill_used, "max": l.spill_bytes, "key": "spill_bytes"},
        })
    }

    /// The journal and event bus every session and connection uses.
    pub fn with_services(mut self, services: Services) -> Self {
        self.services = Some(services);
        self
    }

    pub fn id(&self) -> u64 {
        self.reg.id()
    }

    fn session_json(shared: &SessionShared) -> Json {
        let ptys = crate::pty::open_in_session(&shared.name);
        json!({
            "name": shared.name,
            "cwd": shared.cwd.display().to_string(),
            "clients": shared.clients.load(std::sync::atomic::Ordering::Relaxed),
            "busy": shared.busy.load(std::sync::atomic::Ordering::Relaxed),
            "transcript": shared.transcript_len(),
            "tasks": 0,
            "ptys": ptys.len(),
            "spill_bytes": spill_used(shared),
            "pty_list": ptys.iter().map(crate::pty::api::list_entry).collect::<Vec<_>>(),
            "age_ms": shared.created.elapsed().as_millis() as u64,
        })
    }
}

impl Actor for Daemon {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1024);
    }
}

impl Handler<AttachSession> for Daemon {
    type Result = Result<SessionHandle, SessionError>;

    fn handle(&mut self, msg: AttachSession, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        if self.stopping {
            return Err(SessionError::Internal("the daemon is shutting down".into()));
        }
        if let Err(m) = validate_session_name(&msg.name) {
            return Err(SessionError::BadRequest(m));
        }
        if let Some((addr, shared, stats)) = self.sessions.get(&msg.name) {
            if addr.connected() {
                // An existing session keeps its own environment (docs/protocol.md §9).
                let env_differs = msg.env.as_ref().is_some_and(|e| !same_env(e, &shared.env));
                return Ok(SessionHandle {
                    name: msg.name,
                    addr: addr.clone(),
                    stats: stats.clone(),
                    shared: shared.clone(),
                    created: false,
                    env_differs,
                    services: self.services.clone(),
                });
            }
        }
        let live = self
            .sessions
            .values()
            .filter(|(a, _, _)| a.connected())
            .count();
        let max = self.config.limits.max_sessions;
        if live >= max {
            tracing::warn!(session = %msg.name, max, "refused a new session: max_sessions reached");
            return Err(SessionError::Rpc(super::conn::limit_error(
                "max_sessions",
                max as u64,
                "too many sessions",
            )));
        }
        let cwd = match msg.cwd {
            Some(c) if c.is_dir() => c,
            Some(c) => {
                return Err(SessionError::BadRequest(format!(
                    "cwd {} is not a directory",
                    c.display()
                )))
            }
            None => self.default_cwd.clone(),
        };
        let mut shared =
            SessionShared::new(msg.name.clone(), cwd, self.config.session.render_width)
                .with_resident_values(self.config.session.resident_values)
                .with_limits(&self.config.limits);
        if let Some(env) = msg.env {
            shared = shared.with_env(env);
        }
        if let Some(s) = &self.services {
            shared = shared.with_services(s.clone());
        }
        if !msg.no_adapters {
            shared.adapters = Some(self.adapters().clone());
        }
        let shared = Arc::new(shared);
        let reg =
            self.registry
                .register("session_supervisor", msg.name.clone(), Some(self.reg.id()));
        let stats = reg.stats.clone();
        let sup = SessionSupervisor::new(
            shared.clone(),
            self.registry.clone(),
            reg,
            self.config.session.max_restarts_per_minute,
        )
        .with_pty_limit(self.config.limits.max_ptys_per_session)
        .with_task_limit(self.config.limits.max_tasks_per_session)
        .with_retention(crate::task::Retention {
            retain: self.config.tasks.retain.0,
            max: self.config.tasks.retain_max,
        });
        let addr = sup.start();
        tracing::info!(session = %msg.name, cwd = %shared.cwd.display(), "session created");
        self.sessions.insert(
            msg.name.clone(),
            (addr.clone(), shared.clone(), stats.clone()),
        );
        Ok(SessionHandle {
            name: msg.name,
            addr,
            stats,
            shared,
            created: true,
            env_differs: false,
            services: self.services.clone(),
        })
    }
}

/// The same variables with the same values, in any order.
fn same_env(a: &[(String, String)], b: &[(String, String)]) -> bool {
    let mut a: Vec<_> = a.iter().collect();
    let mut b: Vec<_> = b.iter().collect();
    a.sort();
    b.sort();
    a == b
}

impl Handler<CloseSession> for Daemon {
    type Result = Result<(), SessionError>;

    fn handle(&mut self, msg: CloseSession, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        match self.sessions.remove(&msg.name) {
            Some((addr, _, stats)) => {
                stats.enqueue();
                addr.do_send(StopSession);
                // Its out:N refs die with it: release their journal transcript rows (queued
                // only; the writer thread does the work).
                if let Some(s) = &self.services {
                    let op = journal::Op::DropTranscript {
                        session: msg.name.clone(),
                    };
                    if let Err(e) = s.writer.submit(op, None) {
                        tracing::warn!(session = %msg.name, "transcript rows not dropped: {e}");
                    }
                }
                tracing::info!(session = %msg.name, "session closed");
                Ok(())
            }
            None => Err(SessionError::BadRequest(format!(
                "unknown session {:?}",
                msg.name
            ))),
        }
    }
}

impl Handler<ListSessions> for Daemon {
    type Result = MessageResult<ListSessions>;

    fn handle(&mut self, _msg: ListSessions, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(
            self.sessions
                .values()
                .map(|(_, s, _)| Daemon::session_json(s))
                .collect(),
        )
    }
}

impl Handler<GetStatus> for Daemon {
    type Result = ResponseFuture<Json>;

    fn handle(&mut self, _msg: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let adapters = self.adapters().clone();
        let i = &self.info;
        // Each supervisor's child table (tasks with state, age, pid); a
        // supervisor that does not answer in time shows without it.
        let tables: Vec<_> = self
            .sessions
            .values()
            .map(|(addr, _, stats)| {
                stats.enqueue();
                addr.send(super::session_supervisor::ListChildren)
            })
            .collect();
        let mut status = json!({
            "daemon": {
                "pid": i.pid,
                "version": env!("CARGO_PKG_VERSION"),
                "uptime_ms": i.started.elapsed().as_millis() as u64,
                "started_unix_ms": i.started_unix_ms,
                "socket": i.socket.display().to_string(),
                "socket_activated": i.socket_activated,
                "state_dir": i.state_dir.display().to_string(),
                "config": i.config.as_ref().map(|p| p.display().to_string()),
                "log_dir": i.log_dir.display().to_string(),
            },
            "actors": self.registry.snapshot(),
            "sessions": self.sessions.values().map(|(_, s, _)| Daemon::session_json(s)).collect::<Vec<_>>(),
            "journal": self.services.as_ref().map(Services::status_json),
            "limits": self.limits_json(),
            "adapters": {"count": adapters.len(), "warnings": adapters.warnings},
            "leash": crate::leash::status_json(),
            "rss_bytes": rss_bytes(),
        });
        Box::pin(async move {
            let mut busiest = 0;
            for (i, t) in tables.into_iter().enumerate() {
                let table = tokio::time::timeout(std::time::Duration::from_millis(500), t)
                    .await
                    .ok()
                    .and_then(Result::ok);
                if let (Some(table), Some(s)) = (table, status["sessions"].get_mut(i)) {
                    let live = table["tasks"].as_array().map_or(0, |t| {
                        t.iter()
                            .filter(|r| {
                                !matches!(
                                    r["state"].as_str(),
                                    Some("completed" | "failed" | "cancelled")
                                )
                            })
                            .count()
                    });
                    s["tasks"] = json!(live);
                    busiest = busiest.max(live);
                    s["task_list"] = table["tasks"].clone();
                    s["children"] = table["children"].clone();
                    s["restarts"] = table["restarts"].clone();
                }
            }
            status["limits"]["tasks_per_session"]["used"] = json!(busiest);
            status
        })
    }
}

impl Handler<GetServices> for Daemon {
    type Result = MessageResult<GetServices>;

    fn handle(&mut self, _msg: GetServices, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.services.clone())
    }
}

impl Handler<Shutdown> for Daemon {
    type Result = ();

    fn handle(&mut self, msg: Shutdown, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.reg.stats.set_state("stopping");
        tracing::info!(reason = %msg.reason, sessions = self.sessions.len(), "shutting down: {}", msg.reason);
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
        let mut draining = self.draining.locked();
        // Every task's programs get SIGINT now; `run` ends what is left.
        super::task::cancel_all();
        for (_, (addr, shared, stats)) in std::mem::take(&mut self.sessions) {
            shared.interrupt();
            stats.enqueue();
            addr.do_send(StopSession);
            draining.push(shared);
        }
        drop(draining);
        System::current().stop();
    }
}

/// Bytes in a session's spill files now (0 before its first exec).
fn spill_used(shared: &SessionShared) -> u64 {
    shared.spill.locked().as_ref().map_or(0, |q| q.used())
}

/// Longest session name, in bytes (docs/protocol.md §10).
pub const MAX_SESSION_NAME: usize = 256;

/// Session names are non-empty, at most [`MAX_SESSION_NAME`] bytes, with no
/// NUL or other control characters (they name threads, log fields, journal
/// keys and status rows).
pub fn validate_session_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("session must not be empty".into());
    }
    if name.len() > MAX_SESSION_NAME {
        return Err(format!(
            "session name is {} bytes; at most {MAX_SESSION_NAME} are allowed",
            name.len()
        ));
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!(
            "session name contains the control character U+{:04X}",
            c as u32
        ));
    }
    Ok(())
}

/// `shoal daemon`: returns the process exit code.
pub fn run(opts: DaemonOptions) -> i32 {
    // Socket activation first, before any thread exists.
    let activated = take_listen_fd();

    let (config_path, required) = paths::config_file(opts.config.as_deref());
    let loaded = match config::load(&config_path, required) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("shoal daemon: {e}");
            return 1;
        }
    };
    let config = Arc::new(loaded.config);
    let socket = paths::socket_path(opts.socket.as_deref());
    let state_dir = paths::state_dir(opts.state_dir.as_deref());
    let log_dir = paths::log_dir(&state_dir);
    if let Err(e) = create_private_dir(&state_dir).and_then(|_| create_private_dir(&log_dir)) {
        eprintln!(
            "shoal daemon: cannot create state dir {}: {e}",
            state_dir.display()
        );
        return 1;
    }
    let _guard = match init_logging(&log_dir, &config) {
        Ok(g) => g,
        Err(e) => {
            eprintln!(
                "shoal daemon: cannot set up logging in {}: {e}",
                log_dir.display()
            );
            return 1;
        }
    };
    install_panic_hook();

    // Handlers go in before the socket exists: a client that sees the socket
    // may signal at once, and the default action would skip the cleanup.
    let sys = System::new();
    let signals = sys.block_on(async { register_signals() });

    let socket_activated = activated.is_some();
    let (std_listener, bound) = match activated {
        Some(l) => (l, None),
        None => match listener::prepare_socket(&socket) {
            Ok((l, bound)) => (l, Some(bound)),
            Err(e) => {
                tracing::error!("cannot listen on {}: {e}", socket.display());
                eprintln!("shoal daemon: {e}");
                return 1;
            }
        },
    };
    tracing::info!(
        pid = std::process::id(),
        socket = %socket.display(),
        state_dir = %state_dir.display(),
        config = ?loaded.path,
        socket_activated,
        "daemon starting (version {})",
        env!("CARGO_PKG_VERSION")
    );

    crate::leash::install(&config.policy, config.plans.ttl.0, Some(state_dir.clone()));

    // The journal: a corrupt or foreign file stops the start, untouched.
    let journal_path = state_dir.join("journal.redb");
    let opened = open_journal(&journal_path, &config);
    let (writer, start_seqs) = match opened {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("cannot open the journal {}: {e}", journal_path.display());
            eprintln!("shoal daemon: cannot open the journal: {e}");
            if let Some(b) = bound {
                b.remove();
            }
            return 1;
        }
    };
    let shutdown_writer = writer.clone();

    let info = DaemonInfo {
        pid: std::process::id(),
        socket: socket.clone(),
        state_dir,
        config: loaded.path,
        log_dir,
        socket_activated,
        started: Instant::now(),
        started_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    };

    let draining: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>> = Arc::default();
    let draining_run = draining.clone();
    let started = sys.block_on(async move {
        let registry = Arc::new(Registry::default());
        let dreg = registry.register("daemon", "shoal", None);
        let daemon_stats = dreg.stats.clone();
        let signal_stats = dreg.stats.clone();
        let daemon_id = dreg.id();
        let breg = registry.register("event_bus", "events", Some(daemon_id));
        let bus_stats = breg.stats.clone();
        let bus = EventBus::new(Some(writer.clone()), start_seqs, breg).start();
        let bus = super::health::Counted::new(bus, bus_stats);
        let jreg = registry.register("journal_writer", "journal", Some(daemon_id));
        let services = JournalWriter::start_services(writer, bus, jreg);
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let daemon = Daemon::new(info, config.clone(), registry.clone(), dreg)
            .with_services(services)
            .with_connections(open.clone())
            .with_draining(draining_run)
            .start();
        let tokio_listener = match std_listener
            .set_nonblocking(true)
            .and_then(|_| tokio::net::UnixListener::from_std(std_listener))
        {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot register the listener: {e}");
                return false;
            }
        };
        let lreg = registry.register("listener", socket.display().to_string(), Some(daemon_id));
        Listener::new(
            tokio_listener,
            daemon.clone(),
            daemon_stats,
            config,
            registry,
            lreg,
            open,
        )
        .start();
        spawn_signal_handlers(daemon, signal_stats, signals);
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        tracing::info!(socket = %socket.display(), "daemon ready");
        eprintln!("shoal daemon: ready {}", socket.display());
        true
    });
    let code = if !started {
        1
    } else {
        match sys.run() {
            Ok(()) => 0,
            Err(e) => {
                tracing::error!("actor system failed: {e}");
                1
            }
        }
    };
    if let Some(b) = bound {
        b.remove();
    }
    // No task's process group outlives the daemon: SIGINT (sent by the
    // Shutdown handler), SIGKILL after the grace.
    let left = super::task::end_all(TASK_STOP_GRACE);
    if left > 0 {
        tracing::warn!(left, "task evaluations still running at exit");
    }
    let drained = wait_for_interrupted(&draining, SHUTDOWN_GRACE);
    // No PTY program outlives the daemon.
    crate::pty::kill_all();
    // Everything acknowledged becomes durable before the process ends: records
    // the session workers still hand over (batched replies go first) included.
    if !super::session::wait_records_handed_off(std::time::Duration::from_secs(5)) {
        tracing::warn!("a session worker did not hand over its journal record in time");
    } else {
        // A clean stop: the next start continues right after the last `out:N` used.
        for s in &drained {
            s.release_reservation();
        }
    }
    if let Err(e) = shutdown_writer.shutdown() {
        tracing::error!("journal flush at shutdown failed: {e}");
    }
    tracing::info!(code, "daemon stopped");
    code
}

/// At shutdown, how long a task's programs have after SIGINT before their
/// process group is killed (and as long again to be reaped).
const TASK_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How long shutdown waits for interrupted evaluations to end (their process groups are
/// signalled and reaped by the worker threads) before the process exits anyway.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The drained sessions come back (their journal state is settled last).
fn wait_for_interrupted(
    draining: &std::sync::Mutex<Vec<Arc<SessionShared>>>,
    grace: std::time::Duration,
) -> Vec<Arc<SessionShared>> {
    let sessions = std::mem::take(&mut *draining.locked());
    let deadline = Instant::now() + grace;
    loop {
        let busy: Vec<&str> = sessions
            .iter()
            .filter(|s| s.busy.load(std::sync::atomic::Ordering::Relaxed))
            .map(|s| s.name.as_str())
            .collect();
        if busy.is_empty() {
            return sessions;
        }
        if Instant::now() >= deadline {
            tracing::warn!(?busy, "sessions still running at exit");
            return sessions;
        }
        for s in &sessions {
            s.interrupt();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

type OpenedJournal = (Arc<journal::JournalWriter>, Vec<(String, u64)>);

/// Open `<state>/journal.redb` and start its writer thread.
fn open_journal(path: &std::path::Path, config: &Config) -> journal::Result<OpenedJournal> {
    let j = &config.journal;
    let store = Arc::new(journal::Store::open(
        path,
        journal::StoreOptions {
            retention: journal::Retention {
                max_entries: j.max_entries,
                max_bytes: j.max_bytes,
                ..Default::default()
            },
            ..Default::default()
        },
    )?);
    let start_seqs = EventBus::start_seqs(&store)?;
    let writer = journal::JournalWriter::start(
        store,
        journal::WriterConfig {
            durability: match j.durability {
                config::JournalDurability::Immediate => journal::Durability::Immediate,
                config::JournalDurability::Batched => journal::Durability::Batched,
            },
            flush_ms: j.flush_ms,
            ..Default::default()
        },
    )?;
    Ok((Arc::new(writer), start_seqs))
}

type Signals = Vec<(actix_rt::signal::unix::Signal, &'static str)>;

fn register_signals() -> Signals {
    use actix_rt::signal::unix::{signal, SignalKind};
    let mut out = Vec::new();
    for (kind, name) in [
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::interrupt(), "SIGINT"),
    ] {
        match signal(kind) {
            Ok(s) => out.push((s, name)),
            Err(e) => tracing::error!("cannot install the {name} handler: {e}"),
        }
    }
    out
}

fn spawn_signal_handlers(
    daemon: Addr<Daemon>,
    stats: Arc<super::health::ActorStats>,
    signals: Signals,
) {
    for (mut s, name) in signals {
        let daemon = daemon.clone();
        let stats = stats.clone();
        actix_rt::spawn(async move {
            if s.recv().await.is_some() {
                tracing::info!("received {name}");
                stats.enqueue();
                daemon.do_send(Shutdown {
                    reason: format!("received {name}"),
                });
            }
        });
    }
}

/// The first `LISTEN_FDS` socket, when systemd passed one to this pid.
fn take_listen_fd() -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let fd = sd_notify::listen_fds().ok()?.next()?;
    // SAFETY: systemd passed this fd to our pid (LISTEN_PID checked by
    // sd_notify) and nothing else in the process owns it.
    Some(unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) })
}

fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn init_logging(
    log_dir: &std::path::Path,
    config: &Config,
) -> Result<tracing_appender::non_blocking::WorkerGuard, String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let appender = tracing_appender::rolling::RollingFileAppender::builder()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("shoal")
        .filename_suffix("log")
        .max_log_files(config.daemon.log_keep_days)
        .build(log_dir)
        .map_err(|e| e.to_string())?;
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(8192)
        .finish(appender);
    let filter = std::env::var("SHOAL_LOG")
        .ok()
        .filter(|s| !s.is_empty())
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(&config.daemon.log_level));
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false),
        )
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(guard)
}

fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        tracing::error!(thread, "panic: {info}");
        prev(info);
    }));
}
