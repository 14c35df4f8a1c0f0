//! The Daemon actor, root of the tree: owns the config, the health registry
//! and the map of named sessions (one SessionSupervisor each); it attaches,
//! creates and closes sessions, each owned by the principal whose attach created it
//! (who may reach which is `session_handle::access_of`). Its status answer is `status.rs`, its stop
//! `shutdown.rs`, its supervision of EventBus, JournalWriter and Listener
//! `services.rs`, `shoal daemon`'s entry point `run.rs` (process setup in
//! `setup.rs`). It never evaluates, never waits for a session and never
//! touches a socket.

mod run;
mod services;
mod setup;
mod shutdown;
mod status;
mod tokens;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use crate::config::Config;
use crate::health::{Registration, Registry};
use crate::journal_writer::Services;
use crate::msg::{CloseSession, EndSession, ListSessions, SessionError, StopSession};
use crate::sessions::handle::{access_of, unavailable, Access, AttachSession, SessionHandle};
use crate::sessions::live_tasks::TaskRegistry;
use crate::sessions::session::SessionShared;
use crate::sessions::supervisor::SessionSupervisor;
use shoal_journal as journal;

pub use crate::conn::GetServices;
pub use crate::msg::{CrashService, ServiceKind};
pub use run::run;

/// Command-line options of `shoal daemon`.
#[derive(Debug, Clone, Default)]
pub struct DaemonOptions {
    pub socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// `--http ADDR`: serve MCP over HTTP there (overrides `[http] listen`).
    pub http: Option<String>,
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
    Arc<crate::health::ActorStats>,
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
    /// What restarts the EventBus, JournalWriter and Listener (`services.rs`).
    service_set: services::ServiceSet,
    /// Connections open now (the listener counts them).
    connections: Arc<std::sync::atomic::AtomicUsize>,
    /// Sessions interrupted at shutdown, for `run` to wait on (bounded) before exiting.
    draining: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>>,
    /// Every session's running task evaluations; `run` keeps a clone to end
    /// their process groups after the actor system stopped.
    tasks: TaskRegistry,
    /// Built-in plus user adapters, loaded once, when first needed (a
    /// session or `daemon.status`): an idle daemon holds none of it.
    adapters: Option<Arc<shoal_lang::adapters::Catalog>>,
    /// Each token principal's `[limits] principal_memory` budget, made with its
    /// first session and kept (its sessions come and go).
    principal_memory: BTreeMap<String, &'static shoal_lang::memory::PrincipalBudget>,
    /// The timer of the first expiry among the valid tokens (`tokens.rs`).
    expiry: Option<SpawnHandle>,
    /// The HTTP listener, when one serves (`--http`, `[http] listen`).
    http: Option<crate::http::Served>,
}

impl Daemon {
    /// A daemon over `service_set`: what it starts and restarts its services from
    /// ([`Daemon::start_services`] starts them).
    pub fn new(
        info: DaemonInfo,
        config: Arc<Config>,
        registry: Arc<Registry>,
        reg: Registration,
        service_set: services::ServiceSet,
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
            service_set,
            connections: Arc::default(),
            draining: Arc::default(),
            tasks: TaskRegistry::default(),
            adapters: None,
            principal_memory: BTreeMap::new(),
            expiry: None,
            http: None,
        }
    }

    /// `principal`'s memory budget (a token principal's: the local user has none).
    fn principal_budget(
        &mut self,
        principal: &str,
    ) -> &'static shoal_lang::memory::PrincipalBudget {
        let limit = self.config.limits.principal_memory();
        let b = *self
            .principal_memory
            .entry(principal.to_string())
            .or_insert_with(|| shoal_lang::memory::PrincipalBudget::leak(limit));
        b.set_limit(limit);
        b
    }

    /// The session `principal` means by `name`. A token principal's
    /// sessions are named `NAME@PRINCIPAL` (docs/leash.md, Sessions): a bare
    /// name means its own, unless another principal's session of that name
    /// is shared with it. So a token never takes a name the local user or
    /// another principal will use (`default`, `default@agent:other`).
    fn session_name_for(&self, principal: &str, name: String) -> String {
        if principal == shoal_policy::runtime().local || name.ends_with(&format!("@{principal}")) {
            return name;
        }
        let shared_here = self.sessions.get(&name).is_some_and(|(a, s, _)| {
            a.connected() && access_of(principal, &s.owner, &name).is_some()
        });
        if shared_here {
            return name;
        }
        format!("{name}@{principal}")
    }

    fn adapters(&mut self) -> &Arc<shoal_lang::adapters::Catalog> {
        self.adapters.get_or_insert_with(|| {
            Arc::new(shoal_lang::adapters::Catalog::load(
                shoal_lang::adapters::user_dir().as_deref(),
            ))
        })
    }

    /// Where shutdown leaves the interrupted sessions (see [`run`]).
    pub fn with_draining(mut self, d: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>>) -> Self {
        self.draining = d;
        self
    }

    /// The table every session's tasks are entered in (see [`run`]).
    pub fn with_tasks(mut self, tasks: TaskRegistry) -> Self {
        self.tasks = tasks;
        self
    }

    /// The listener's count of open connections (for `daemon.status`).
    pub fn with_connections(mut self, open: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        self.connections = open;
        self
    }

    /// The HTTP listener it serves (see [`run`]).
    pub fn with_http(mut self, http: Option<crate::http::Served>) -> Self {
        self.http = http;
        self
    }

    pub fn id(&self) -> u64 {
        self.reg.id()
    }
}

impl Actor for Daemon {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(1024);
        self.watch_tokens(ctx);
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
        let mut msg = msg;
        msg.name = self.session_name_for(&msg.principal, msg.name);
        if let Err(m) = validate_session_name(&msg.name) {
            return Err(SessionError::BadRequest(m));
        }
        if let Some((addr, shared, stats)) = self.sessions.get(&msg.name) {
            // Someone else's session: reached only as its owner's rules allow, and a
            // refusal says no more than it would of a session that does not exist.
            let access = access_of(&msg.principal, &shared.owner, &msg.name);
            if access.is_none() || (access == Some(Access::Read) && !addr.connected()) {
                return Err(SessionError::Rpc(unavailable(&msg.principal, &msg.name)));
            }
            if addr.connected() {
                // An existing session keeps its own environment (docs/protocol.md §9).
                let env_differs = msg.env.as_ref().is_some_and(|e| !same_env(e, &shared.env));
                let mut h = SessionHandle::new(
                    addr.clone(),
                    stats.clone(),
                    shared.clone(),
                    self.services.clone(),
                );
                h.env_differs = env_differs;
                h.access = access.unwrap_or(Access::Read);
                return Ok(h);
            }
        }
        if !msg.create {
            return Err(SessionError::Rpc(
                shoal_proto::rpc::RpcError::invalid_params(format!(
                    "no session {:?} (this attach creates none)",
                    msg.name
                ))
                .with_data(serde_json::json!({"session": msg.name, "exists": false})),
            ));
        }
        let live = self
            .sessions
            .values()
            .filter(|(a, _, _)| a.connected())
            .count();
        let max = self.config.limits.max_sessions;
        let per_principal = self.config.limits.max_sessions_per_principal;
        let local = msg.principal == shoal_policy::runtime().local;
        let owned = self
            .sessions
            .values()
            .filter(|(a, s, _)| a.connected() && s.owner == msg.principal)
            .count();
        // The local uid owns the daemon: only the global cap counts for it.
        if !local && owned >= per_principal {
            tracing::warn!(session = %msg.name, principal = %msg.principal, max = per_principal, "refused a new session: max_sessions_per_principal reached");
            return Err(SessionError::Rpc(crate::peer::limit_error(
                "max_sessions_per_principal",
                per_principal as u64,
                "too many sessions of this principal",
            )));
        }
        if live >= max {
            tracing::warn!(session = %msg.name, max, "refused a new session: max_sessions reached");
            return Err(SessionError::Rpc(crate::peer::limit_error(
                "max_sessions",
                max as u64,
                "too many sessions",
            )));
        }
        // The last places are the local user's: tokens together never take them.
        let reserve = self.config.limits.local_sessions();
        if !local && live + reserve >= max {
            tracing::warn!(session = %msg.name, principal = %msg.principal, max, reserve, "refused a new session: the places left of max_sessions are the local user's");
            return Err(SessionError::Rpc(crate::peer::limit_error(
                "max_sessions",
                max as u64,
                &format!("too many sessions (the {reserve} places left are the local user's)"),
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
                .with_limits(&self.config.limits)
                .with_owner(&msg.principal)
                .with_tasks(self.tasks.clone());
        if let Some(env) = msg.env {
            shared = shared.with_env(env);
        }
        if let Some(s) = &self.services {
            // Everything the session publishes is stamped as its own, so a token sees the
            // events of sessions it may read only (`event_bus::Scope`).
            let mut s = s.clone();
            s.bus = s
                .bus
                .stamped(crate::event_bus::Origin::new(&msg.name, &msg.principal));
            shared = shared.with_services(s);
        }
        if !msg.no_adapters {
            shared.adapters = Some(self.adapters().clone());
        }
        if !local {
            shared
                .memory
                .with_principal(self.principal_budget(&msg.principal));
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
        .with_retention(shoal_lang::task::Retention {
            retain: self.config.tasks.retain.0,
            max: self.config.tasks.retain_max,
        });
        // On the attaching connection's arbiter: its execs reach the session actor
        // without crossing arbiters.
        let addr = match &msg.arbiter {
            Some(a) => SessionSupervisor::start_in_arbiter(a, move |_| sup),
            None => sup.start(),
        };
        tracing::info!(session = %msg.name, owner = %msg.principal, cwd = %shared.cwd.display(), "session created");
        self.sessions.insert(
            msg.name.clone(),
            (addr.clone(), shared.clone(), stats.clone()),
        );
        let mut h = SessionHandle::new(addr, stats, shared, self.services.clone());
        h.created = true;
        Ok(h)
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
        let local = msg.principal == shoal_policy::runtime().local;
        match self.sessions.get(&msg.name) {
            // A token learns nothing of a session it may not close: missing and
            // foreign are refused alike.
            None if !local => {
                return Err(SessionError::Rpc(unavailable(&msg.principal, &msg.name)))
            }
            Some((_, shared, _)) => match access_of(&msg.principal, &shared.owner, &msg.name) {
                Some(Access::Full) => {}
                Some(Access::Read) => {
                    return Err(SessionError::Rpc(crate::sessions::handle::read_only(
                        &msg.principal,
                        &msg.name,
                        "session.close",
                    )))
                }
                None => return Err(SessionError::Rpc(unavailable(&msg.principal, &msg.name))),
            },
            None => {}
        }
        if self.remove_session(&msg.name, false) {
            tracing::info!(session = %msg.name, "session closed");
            Ok(())
        } else {
            Err(SessionError::BadRequest(format!(
                "unknown session {:?}",
                msg.name
            )))
        }
    }
}

impl Daemon {
    /// Remove session `name` and stop it (`kill`: its programs killed at once,
    /// [`EndSession`]); whether there was one.
    fn remove_session(&mut self, name: &str, kill: bool) -> bool {
        let Some((addr, _, stats)) = self.sessions.remove(name) else {
            return false;
        };
        stats.enqueue();
        if kill {
            addr.do_send(EndSession);
        } else {
            addr.do_send(StopSession);
        }
        // Its out:N refs die with it: release their journal transcript rows (queued
        // only; the writer thread does the work).
        if let Some(s) = &self.services {
            let op = journal::Op::DropTranscript {
                session: name.to_string(),
            };
            if let Err(e) = s.writer.submit(op, None) {
                tracing::warn!(session = %name, "transcript rows not dropped: {e}");
            }
        }
        true
    }
}

impl Handler<ListSessions> for Daemon {
    type Result = MessageResult<ListSessions>;

    fn handle(&mut self, msg: ListSessions, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(
            self.sessions
                .values()
                .filter(|(_, s, _)| access_of(&msg.principal, &s.owner, &s.name).is_some())
                .map(|(_, s, _)| Daemon::session_row(s))
                .collect(),
        )
    }
}

impl Handler<GetServices> for Daemon {
    type Result = MessageResult<GetServices>;

    fn handle(&mut self, _msg: GetServices, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.services.clone())
    }
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
