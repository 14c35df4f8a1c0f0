//! The handle a connection holds to one session (its supervisor's address, its mailbox
//! counters, the services), and [`AttachSession`], the message to the daemon that returns it.
//! It only sends messages: it never evaluates and never touches a socket.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;

use super::health::ActorStats;
use super::msg::{Exec, ExecReply, SessionError};
use super::session::SessionShared;
use super::session_supervisor::SessionSupervisor;

/// Attach a connection to a named session, creating it if needed.
#[derive(Message)]
#[rtype(result = "Result<SessionHandle, SessionError>")]
pub struct AttachSession {
    pub name: String,
    pub cwd: Option<PathBuf>,
    /// The client's environment (docs/protocol.md §9): a session this attach creates
    /// starts with exactly it; `None` gives [`crate::paths::base_env`].
    pub env: Option<Vec<(String, String)>>,
    /// A session this attach creates loads no adapters (the conformance
    /// harness measures the language without them, docs/rules.md §8).
    pub no_adapters: bool,
    /// The arbiter a session this attach creates runs on: the attaching
    /// connection's, so its execs stay on one thread (`None`: the daemon's).
    pub arbiter: Option<actix::ArbiterHandle>,
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
    /// The session already existed and the attaching client's environment
    /// differs from the one it started with.
    pub env_differs: bool,
    /// The journal and the event bus.
    pub services: Option<super::journal_writer::Services>,
}

impl SessionHandle {
    /// A handle to the session `shared` names, supervised at `addr`. The
    /// daemon sets `created` and `env_differs` as the attach found them.
    pub fn new(
        addr: Addr<SessionSupervisor>,
        stats: Arc<ActorStats>,
        shared: Arc<SessionShared>,
        services: Option<super::journal_writer::Services>,
    ) -> Self {
        SessionHandle {
            name: shared.name.clone(),
            addr,
            stats,
            shared,
            created: false,
            env_differs: false,
            services,
        }
    }

    /// The session's cwd and environment as of its last exec, else the ones it
    /// starts with (`shoal://session/cwd`, `shoal://session/env`).
    pub fn views(&self) -> (PathBuf, Vec<(String, String)>) {
        self.shared.views()
    }

    /// The directory the session started in.
    pub fn start_cwd(&self) -> &std::path::Path {
        &self.shared.cwd
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
    pub fn inject(&self, channel: &str, payload: crate::value::Value) {
        self.shared.inject(channel, payload)
    }

    /// Send an exec: straight to the Session actor while it lives, else through
    /// the supervisor (which answers why there is none). A mailbox error is
    /// the session's answer: its actor died during the exec, or it closed.
    /// Sent now; the future (which holds no part of the handle) awaits the reply.
    pub fn exec(
        &self,
        msg: Exec,
    ) -> impl std::future::Future<Output = Result<ExecReply, SessionError>> + 'static {
        let sent = match self.shared.actor() {
            Some((addr, stats)) => {
                stats.enqueue();
                Ok(addr.send(msg))
            }
            None => Err(self.send(msg)),
        };
        let shared = self.shared.clone();
        async move {
            match sent {
                Ok(direct) => direct.await.unwrap_or_else(|_| {
                    Err(SessionError::Internal(format!(
                        "session {}: the session actor died during exec; it is being restarted",
                        shared.name
                    )))
                }),
                Err(supervised) => supervised
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
