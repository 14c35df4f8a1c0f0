//! The handle a connection holds to one session (its supervisor's address, its mailbox
//! counters, the services, what its principal may do there), [`AttachSession`], the message
//! to the daemon that returns it, and the ownership rules (docs/rules.md §21): a session
//! belongs to the principal whose attach created it; the owner and the local uid use it
//! fully, a principal whose policy `sessions` shares it reads it, nobody else reaches it.
//! It only sends messages: it never evaluates and never touches a socket.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;

use crate::health::ActorStats;
use crate::msg::{Exec, ExecReply, SessionError};
use crate::sessions::session::SessionShared;
use crate::sessions::supervisor::SessionSupervisor;
use shoal_proto::rpc::{self, RpcError};

/// What an attached principal may do in a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The owner, or the local uid: everything.
    Full,
    /// Shared by the reader's policy `sessions`: values, transcript, events,
    /// `pty.read`/`pty.list`, task records and awaits; nothing that acts.
    Read,
}

/// What `principal` may do in session `name` owned by `owner` (`None`: nothing,
/// not even learn that it exists).
pub fn access_of(principal: &str, owner: &str, name: &str) -> Option<Access> {
    let rt = shoal_policy::runtime();
    if principal == owner || principal == rt.local {
        return Some(Access::Full);
    }
    rt.policy
        .get(principal)
        .is_some_and(|p| p.shares_session(name))
        .then_some(Access::Read)
}

/// The refusal of a session a principal may not reach: `-32010`, the same words whether
/// the session exists or not.
pub fn unavailable(principal: &str, name: &str) -> RpcError {
    RpcError::new(
        rpc::LEASH_DENIED,
        format!("session {name:?} is not available to principal {principal:?}"),
    )
    .with_data(serde_json::json!({"principal": principal, "session": name}))
}

/// The refusal of an act in a session shared read-only: `-32010`.
pub fn read_only(principal: &str, name: &str, what: &str) -> RpcError {
    RpcError::new(
        rpc::LEASH_DENIED,
        format!(
            "session {name:?} is shared with principal {principal:?} read-only: {what} is refused (only its owner may act in it)"
        ),
    )
    .with_data(serde_json::json!({"principal": principal, "session": name, "access": "read"}))
}

/// Attach a connection to a named session, creating it if needed.
#[derive(Message)]
#[rtype(result = "Result<SessionHandle, SessionError>")]
pub struct AttachSession {
    pub name: String,
    /// Who attaches: a session this attach creates is theirs; an existing one
    /// answers only as [`access_of`] allows.
    pub principal: String,
    pub cwd: Option<PathBuf>,
    /// The client's environment (docs/protocol.md §9): a session this attach creates
    /// starts with exactly it; `None` gives [`shoal_base::paths::base_env`].
    pub env: Option<Vec<(String, String)>>,
    /// A session this attach creates loads no adapters (the conformance
    /// harness measures the language without them, docs/rules.md §8).
    pub no_adapters: bool,
    /// The arbiter a session this attach creates runs on: the attaching
    /// connection's, so its execs stay on one thread (`None`: the daemon's).
    pub arbiter: Option<actix::ArbiterHandle>,
    /// Create the session when it does not exist (`false`: `shoal watch`,
    /// which must create none, is refused instead).
    pub create: bool,
}

/// What a connection holds once attached.
#[derive(Clone)]
pub struct SessionHandle {
    pub name: String,
    pub addr: Addr<SessionSupervisor>,
    pub stats: Arc<ActorStats>,
    /// Private: a connection reads the session's views through the methods
    /// below (copies, the lock held only inside them), never its mutexes.
    shared: Arc<SessionShared>,
    pub created: bool,
    /// What the attached principal may do here (the daemon decides at attach).
    pub access: Access,
    /// The session already existed and the attaching client's environment
    /// differs from the one it started with.
    pub env_differs: bool,
    /// The journal and the event bus.
    pub services: Option<crate::journal_writer::Services>,
}

impl SessionHandle {
    /// A handle to the session `shared` names, supervised at `addr`. The
    /// daemon sets `created` and `env_differs` as the attach found them.
    pub fn new(
        addr: Addr<SessionSupervisor>,
        stats: Arc<ActorStats>,
        shared: Arc<SessionShared>,
        services: Option<crate::journal_writer::Services>,
    ) -> Self {
        SessionHandle {
            name: shared.name.clone(),
            addr,
            stats,
            shared,
            created: false,
            access: Access::Full,
            env_differs: false,
            services,
        }
    }

    /// The principal that owns the session.
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Refuse `what` unless the attached principal may act here (`principal` names it).
    pub fn writable(&self, principal: &str, what: &str) -> Result<(), RpcError> {
        match self.access {
            Access::Full => Ok(()),
            Access::Read => Err(read_only(principal, &self.name, what)),
        }
    }

    /// The session's cwd and environment as of its last exec, else the ones it
    /// starts with (`shoal://session/cwd`, `shoal://session/env`).
    pub fn views(&self) -> (PathBuf, Vec<(String, String)>) {
        self.shared.views()
    }

    /// The session's top-level names after its last exec.
    pub fn names(&self) -> Arc<[String]> {
        self.shared.names()
    }

    /// The directory the session started in.
    pub fn start_cwd(&self) -> &std::path::Path {
        &self.shared.cwd
    }

    /// The people attached to the session.
    pub fn humans(&self) -> &crate::sessions::session::Humans {
        &self.shared.humans
    }

    /// The render width of the session's values.
    pub fn render_width(&self) -> usize {
        self.shared.render_width
    }

    /// The newest `out:N` of the session (0: none yet).
    pub fn last_ref(&self) -> u64 {
        self.shared.last_ref()
    }

    /// Deliver a client's `user.*` event to the language's `channel(...)` readers.
    pub fn inject(&self, channel: &str, payload: shoal_value::Value, bytes: usize) {
        self.shared.inject(channel, payload, bytes)
    }

    /// Send an exec: straight to the session's worker on its line while the
    /// Session actor lives, else through the supervisor (which answers why
    /// there is none). A mailbox error means the session closed.
    /// Sent now; the future (which holds no part of the handle) awaits the reply.
    pub fn exec(
        &self,
        msg: Exec,
    ) -> impl std::future::Future<Output = Result<ExecReply, SessionError>> + 'static {
        // A principal that may only read the session never reaches its evaluation.
        let sent = match self.access {
            Access::Read => {
                let who = msg.gate.as_ref().map_or("", |g| g.principal.as_str());
                Err(read_only(who, &self.name, "exec"))
            }
            Access::Full => Ok(match self.shared.worker_line() {
                Some(line) => Ok(crate::sessions::session::exec_on(
                    line,
                    self.shared.clone(),
                    msg,
                )),
                None => Err(self.send(msg)),
            }),
        };
        let shared = self.shared.clone();
        async move {
            match sent {
                Err(refused) => Err(SessionError::Rpc(refused)),
                Ok(Ok(direct)) => direct.await,
                Ok(Err(supervised)) => supervised
                    .await
                    .map_err(|_| SessionError::Closed(shared.name.clone()))
                    .and_then(|r| r),
            }
        }
    }

    /// Send with mailbox accounting.
    pub fn send<M>(&self, msg: M) -> actix::dev::Request<SessionSupervisor, M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        SessionSupervisor: Handler<M>,
    {
        self.stats.enqueue();
        self.addr.send(msg)
    }

    /// A connection attached (+1) or left (-1): counted at once, whichever
    /// thread the session runs on, so what the attach answered is what
    /// `session.list` says next.
    pub fn count_client(&self, delta: i64) {
        self.shared
            .clients
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }

    /// Fire-and-forget with mailbox accounting (low-rate signals only).
    pub fn notify<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        SessionSupervisor: Handler<M>,
    {
        self.stats.enqueue();
        self.addr.do_send(msg)
    }
}
