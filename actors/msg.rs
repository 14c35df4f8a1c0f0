//! Typed messages between actors, with named fields. Commands are imperative
//! (`Exec`, `CloseSession`); nothing here is `Serialize`: the connection
//! actors convert to and from the wire.

use std::path::PathBuf;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value as Json;

use super::health::ActorStats;
use super::session::SessionShared;
use super::session_supervisor::SessionSupervisor;
use crate::lang::{ParseError, Position};
use crate::value::ShoalError;

/// Why a session request failed (converted to a JSON-RPC error at the edge).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    #[error("parse error: {}", .0.msg)]
    Parse(ParseError),
    /// Raised by the evaluation; the error value is stored as `out:<n>`.
    #[error("raised: {}", .error.msg)]
    Raised {
        error: ShoalError,
        n: u64,
        /// Likely bash habits in the source (they did not cause the error).
        warnings: Box<[crate::lang::Warning]>,
    },
    #[error("unknown value ref")]
    UnknownRef { reference: String },
    #[error("{0}")]
    BadRequest(String),
    #[error("session {0} is closed")]
    Closed(String),
    #[error("{0}")]
    Internal(String),
    /// A request-level failure with its JSON-RPC code (e.g. `-32005`).
    #[error("{}", .0.message)]
    Rpc(crate::proto::rpc::RpcError),
}

/// Attach a connection to a named session, creating it if needed.
#[derive(Message)]
#[rtype(result = "Result<SessionHandle, SessionError>")]
pub struct AttachSession {
    pub name: String,
    pub cwd: Option<PathBuf>,
    /// The client's environment (contract §9): a session this attach creates
    /// starts with exactly it; `None` gives [`crate::paths::base_env`].
    pub env: Option<Vec<(String, String)>>,
    /// A session this attach creates loads no adapters (the conformance
    /// harness measures the language without them, language.md §10.3).
    pub no_adapters: bool,
}

/// What a connection holds once attached.
#[derive(Clone)]
pub struct SessionHandle {
    pub name: String,
    pub addr: Addr<SessionSupervisor>,
    pub stats: Arc<ActorStats>,
    pub shared: Arc<SessionShared>,
    pub created: bool,
    /// The session already existed and the attaching client's environment
    /// differs from the one it started with.
    pub env_differs: bool,
    /// The journal and the event bus.
    pub services: Option<super::journal_writer::Services>,
}

impl SessionHandle {
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

/// End a session: interrupt its evaluation, drop its in-memory state.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct CloseSession {
    pub name: String,
}

#[derive(Message)]
#[rtype(result = "Vec<Json>")]
pub struct ListSessions;

/// The journal and event bus (for connections that are not attached).
#[derive(Message)]
#[rtype(result = "Option<super::journal_writer::Services>")]
pub struct GetServices;

/// The data behind `shoal status` / `daemon.status`.
#[derive(Message)]
#[rtype(result = "Json")]
pub struct GetStatus;

/// Stop the daemon cleanly.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown {
    pub reason: String,
}

/// Run source in the session.
#[derive(Message)]
#[rtype(result = "Result<ExecReply, SessionError>")]
pub struct Exec {
    pub src: String,
    pub position: Position,
    /// Keep ANSI escapes in the render.
    pub tty: bool,
    /// This call's own cancellation (contract §10): cancelling it never
    /// touches another call of the session.
    pub cancel: Arc<super::session::CallCancel>,
    /// The caller's principal (Leash): its sandbox confines the children,
    /// and with `check` its verdict gates the run.
    pub gate: Option<Arc<crate::leash::Gate>>,
    /// Refuse unless the verdict allows (false for an approved plan's apply).
    pub check: bool,
}

/// Derive the effects of a source in the session (planning; nothing runs).
#[derive(Message)]
#[rtype(result = "Result<Vec<crate::leash::Effect>, SessionError>")]
pub struct DerivePlan {
    pub src: String,
}

#[derive(Debug, Clone)]
pub struct ExecReply {
    pub n: u64,
    /// The value stored as `out:n` (cheap `Arc` clones): the connection
    /// elides it under the caller's budget at the edge.
    pub value: crate::value::Value,
    pub render: String,
    pub elapsed_ms: f64,
    /// `Some("degraded")` when the journal could not commit lately (batched mode: the
    /// result is acknowledged, its durability is not yet).
    pub journal: Option<&'static str>,
    /// Likely bash habits in the source; they never change the result.
    pub warnings: Vec<crate::lang::Warning>,
}

/// Read a transcript value (`value.get`: path, slice, elision, format).
#[derive(Message)]
#[rtype(result = "Result<Json, SessionError>")]
pub struct GetValue {
    pub reference: String,
    pub req: crate::proto::kernel::GetRequest,
    pub tty: bool,
}

/// Interrupt whatever the session is running (operator paths; a client's cancel
/// goes through its call's own [`super::session::CallCancel`]).
/// Answered from the actor thread without waiting for the worker.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Interrupt;

/// A connection attached (+1) or left (-1).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ClientCount {
    pub delta: i64,
}

/// Stop the session (supervisor and child).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopSession;

/// Debug hook (`SHOAL_DEBUG_HOOKS`): make the session actor panic, to exercise supervision.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Crash;

/// A `pty.*` request for the session's PTY table (answered by the
/// SessionSupervisor; all but open and list are forwarded to the Pty actor).
#[derive(Message)]
#[rtype(result = "Result<Json, crate::proto::rpc::RpcError>")]
pub struct PtyCall {
    pub op: crate::pty::api::PtyOp,
    /// The caller's principal (Leash): an open is gated by its verdict and
    /// the child confined by its sandbox.
    pub gate: Option<Arc<crate::leash::Gate>>,
}

/// Watch a PTY of the session: a counter that ticks on every screen change
/// (the `shoal://pty/N` subscription).
#[derive(Message)]
#[rtype(result = "Result<tokio::sync::watch::Receiver<u64>, crate::proto::rpc::RpcError>")]
pub struct PtyWatch {
    pub id: u64,
}
