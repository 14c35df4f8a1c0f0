//! Typed messages between actors, with named fields, and the one plain value they carry
//! between a connection and a session ([`CallCancel`]). Commands are imperative (`Exec`,
//! `CloseSession`); nothing here is `Serialize`: the connection actors convert to and from
//! the wire. A leaf: it imports no other actor module (the handle to a session and the
//! message that returns it live in `session_handle.rs`, messages that carry an actor's own
//! types live beside that actor).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use actix::prelude::*;

use shoal_base::sync::Locked;
use shoal_lang::{Interrupter, ParseError, Position};
use shoal_value::ShoalError;

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
        warnings: Box<[shoal_lang::Warning]>,
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
    Rpc(shoal_proto::rpc::RpcError),
}

/// End a session: interrupt its evaluation, drop its in-memory state.
#[derive(Message)]
#[rtype(result = "Result<(), SessionError>")]
pub struct CloseSession {
    pub name: String,
    /// Who asks: only the session's owner or the local uid may close it.
    pub principal: String,
}

/// The sessions `principal` may see (all of them for the local uid).
#[derive(Message)]
#[rtype(result = "Vec<shoal_proto::kernel::SessionRow>")]
pub struct ListSessions {
    pub principal: String,
}

/// The data behind `shoal status` / `daemon.status`, as `principal` may see it
/// (a token principal: its own and shared sessions, no daemon internals).
#[derive(Message)]
#[rtype(result = "shoal_proto::kernel::DaemonStatus")]
pub struct GetStatus {
    pub principal: String,
}

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
    /// This call's own cancellation (docs/protocol.md §10): cancelling it never
    /// touches another call of the session. It also names the call ([`CallOrigin`]:
    /// connection and request id), for the span the session's worker enters.
    pub cancel: Arc<CallCancel>,
    /// The caller's principal (Leash): its sandbox confines the children,
    /// and with `check` its verdict gates the run.
    pub gate: Option<Arc<shoal_policy::Gate>>,
    /// Refuse unless the verdict allows (false for an approved plan's apply).
    pub check: bool,
    /// The caller's terminal width for the render (`None`: the session's
    /// `render_width`).
    pub width: Option<usize>,
    /// An approved plan's apply: refuse unless the session's cwd and
    /// environment are still where the plan was made.
    pub place: Option<shoal_policy::plan::Place>,
    /// An approved plan's effects, which its `gate` lets through (empty:
    /// not an approved plan's apply); a worker process builds the gate
    /// again from them.
    pub approved: Vec<shoal_policy::Effect>,
}

/// Derive the effects of a source in the session (planning; nothing runs).
#[derive(Message)]
#[rtype(result = "Result<shoal_policy::undo::Derived, SessionError>")]
pub struct DerivePlan {
    pub src: String,
    /// The caller's principal: the deriver runs confined as an exec of this
    /// caller in this session would, and looks only at files it may read.
    pub gate: Option<Arc<shoal_policy::Gate>>,
}

#[derive(Debug, Clone)]
pub struct ExecReply {
    pub n: u64,
    /// The value stored as `out:n` (cheap `Arc` clones): the connection
    /// elides it under the caller's budget at the edge.
    pub value: shoal_value::Value,
    /// The render as the caller sees it: head plus tail within
    /// [`shoal_proto::bound::TEXT_BUDGET`].
    pub render: String,
    /// The whole text `render` was cut from (only when cut): an
    /// `elide.max_bytes` of the call cuts it again.
    pub full: Option<std::sync::Arc<str>>,
    pub elapsed_ms: f64,
    /// `Some("degraded")` when the journal could not commit lately (batched mode: the
    /// result is acknowledged, its durability is not yet).
    pub journal: Option<&'static str>,
    /// Likely bash habits in the source; they never change the result.
    pub warnings: Vec<shoal_lang::Warning>,
}

/// Read a transcript value (`value.get`: path and slice selected, elision and format
/// facts carried; the connection encodes the view).
#[derive(Message)]
#[rtype(result = "Result<shoal_proto::kernel::ValueView, SessionError>")]
pub struct GetValue {
    pub reference: String,
    pub req: shoal_proto::kernel::GetRequest,
    pub tty: bool,
}

/// Interrupt whatever the session is running (operator paths; a client's cancel
/// goes through its call's own [`CallCancel`]).
/// Answered from the actor thread without waiting for the worker.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Interrupt;

/// Stop the session (supervisor and child).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopSession;

/// Stop the session and kill its programs at once, without the close grace:
/// its owner no longer holds a valid token (docs/leash.md, Tokens).
#[derive(Message)]
#[rtype(result = "()")]
pub struct EndSession;

/// The token file may have changed (`leash.tokens_changed`, a re-read on a
/// token's call, a token's expiry): end the work of every token principal
/// that holds no valid token any more; the answer names them.
#[derive(Message)]
#[rtype(result = "shoal_proto::kernel::TokensChecked")]
pub struct TokensChanged;

/// Debug hook (`SHOAL_DEBUG_HOOKS`): make the session actor panic, to exercise supervision.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Crash;

/// A `pty.*` request for the session's PTY table (answered by the
/// SessionSupervisor; all but open and list are forwarded to the Pty actor).
#[derive(Message)]
#[rtype(result = "Result<shoal_proto::mcp::PtyAnswer, shoal_proto::rpc::RpcError>")]
pub struct PtyCall {
    pub op: shoal_pty::api::PtyOp,
    /// The caller's principal (Leash): an open is gated by its verdict and
    /// the child confined by its sandbox.
    pub gate: Option<Arc<shoal_policy::Gate>>,
    /// The calling connection: while a human has taken the PTY over, only
    /// the claimant's connection may type, resize or close (`None`: no
    /// connection, never the claimant).
    pub caller: Option<u64>,
}

/// One PTY of the session, for a human's takeover and live view
/// (`pty.claim`, `pty.watch`).
#[derive(Message)]
#[rtype(result = "Result<Arc<shoal_pty::PtyHandle>, shoal_proto::rpc::RpcError>")]
pub struct PtyGet {
    pub id: u64,
}

/// Watch a PTY of the session: a counter that ticks on every screen change
/// (the `shoal://pty/N` subscription).
#[derive(Message)]
#[rtype(result = "Result<tokio::sync::watch::Receiver<u64>, shoal_proto::rpc::RpcError>")]
pub struct PtyWatch {
    pub id: u64,
}

/// A request whose target actor is gone or whose mailbox is closed: `-32603` at the edge.
/// The only conversion of an actor-system error.
pub fn mailbox(e: MailboxError) -> shoal_proto::rpc::RpcError {
    shoal_proto::rpc::RpcError::internal(e.to_string())
}

/// The cancellation handle of one call (one [`Exec`]), shared by the
/// connection that issued it and the session that runs it. Cancelling a call
/// that is still queued means it never runs (its reply comes at once);
/// cancelling the running call interrupts that evaluation and nothing else.
#[derive(Debug, Default)]
pub struct CallCancel {
    state: Mutex<CallState>,
    cancelled: AtomicBool,
    /// Which call this is (set once by the connection that issued it).
    origin: OnceLock<CallOrigin>,
    /// Wakes the reply future of a cancelled call.
    pub(super) wake: tokio::sync::Notify,
    /// Set by [`CallCancel::cancel`]: what [`CallCancel::cancelled`] waits for.
    ended: shoal_base::sync::Latch,
}

#[derive(Debug, Default)]
enum CallState {
    #[default]
    Queued,
    Running(Stop),
    Finished,
}

/// How a running call is interrupted: the language session's interrupter
/// when it evaluates in this process, else a note to the worker process
/// that evaluates it.
#[derive(Clone)]
enum Stop {
    Here(Interrupter),
    There(Arc<dyn Fn() + Send + Sync>),
}

impl Stop {
    fn fire(&self) {
        match self {
            Stop::Here(i) => i.interrupt(),
            Stop::There(f) => f(),
        }
    }
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::Here(_) => "Here",
            Stop::There(_) => "There",
        })
    }
}

/// Which call an evaluation serves: the connection and the request id (a background task's
/// evaluation names its task instead). The session's worker enters [`CallOrigin::span`]
/// for the whole exec, so a log line from evaluation or the journal hand-off, on a thread
/// where the connection's request span is not entered, still leads to its call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallOrigin {
    /// The connection's id (0: none, a task).
    pub conn: u64,
    /// The request id as the client sent it (JSON text), or `task.N`.
    pub request: String,
    /// Who the client is, as a live view names it (`mcp: claude-code`, `cli`,
    /// `attach`); `None`: not named.
    pub client: Option<Arc<str>>,
}

impl CallOrigin {
    pub fn span(&self, session: &str) -> tracing::Span {
        tracing::info_span!("exec", conn = self.conn, session, id = %self.request)
    }
}

impl CallCancel {
    pub fn new() -> Arc<CallCancel> {
        Arc::new(CallCancel::default())
    }

    /// Name the call (the connection does, as it reads the request); later calls are no-ops.
    pub fn set_origin(&self, origin: CallOrigin) {
        let _ = self.origin.set(origin);
    }

    /// The connection and client name of the call (no copy of the request id).
    pub fn caller(&self) -> (u64, Option<Arc<str>>) {
        self.origin
            .get()
            .map_or((0, None), |o| (o.conn, o.client.clone()))
    }

    /// The call's origin (the default when nobody named it).
    pub fn origin(&self) -> CallOrigin {
        self.origin.get().cloned().unwrap_or_default()
    }

    /// Cancel this call (idempotent).
    pub fn cancel(&self) {
        let g = self.state.locked();
        self.cancelled.store(true, Ordering::SeqCst);
        if let CallState::Running(stop) = &*g {
            stop.fire();
        }
        drop(g);
        self.wake.notify_one();
        self.ended.set();
    }

    /// Resolves once the call is cancelled (at once if it is already).
    pub async fn cancelled(&self) {
        self.ended.wait().await
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Still waiting in the session's queue.
    pub(super) fn is_queued(&self) -> bool {
        matches!(*self.state.locked(), CallState::Queued)
    }

    /// The worker starts this call: `false` when it was cancelled first.
    pub(super) fn begin(&self, i: Option<&Interrupter>) -> bool {
        self.begin_with(i.map(|i| Stop::Here(i.clone())))
    }

    /// The call starts in a worker process: a cancel runs `interrupt`
    /// (which asks the worker to interrupt it). `false`: cancelled first.
    pub(crate) fn begin_there(&self, interrupt: Arc<dyn Fn() + Send + Sync>) -> bool {
        self.begin_with(Some(Stop::There(interrupt)))
    }

    fn begin_with(&self, stop: Option<Stop>) -> bool {
        let mut g = self.state.locked();
        if self.is_cancelled() {
            *g = CallState::Finished;
            return false;
        }
        *g = match stop {
            Some(s) => CallState::Running(s),
            None => CallState::Finished,
        };
        true
    }

    pub(super) fn finish(&self) {
        *self.state.locked() = CallState::Finished;
    }
}

/// One of the daemon's supervised services.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServiceKind {
    EventBus,
    JournalWriter,
    Listener,
}

impl ServiceKind {
    pub fn label(self) -> &'static str {
        match self {
            ServiceKind::EventBus => "event_bus",
            ServiceKind::JournalWriter => "journal_writer",
            ServiceKind::Listener => "listener",
        }
    }

    /// The `actor` of `debug.crash`.
    pub fn parse(s: &str) -> Option<ServiceKind> {
        [
            ServiceKind::EventBus,
            ServiceKind::JournalWriter,
            ServiceKind::Listener,
        ]
        .into_iter()
        .find(|k| k.label() == s)
    }
}

/// Debug hook (`SHOAL_DEBUG_HOOKS`): make a service actor panic.
#[derive(Message)]
#[rtype(result = "()")]
pub struct CrashService {
    pub kind: ServiceKind,
}
