//! What a connection is, as the listener hands it to KernelConn or McpConn: its peer, its
//! place in `max_connections`, its limits, and [`DaemonRef`], the requests it may send the
//! Daemon. A connection names the Daemon's messages, never the Daemon actor, so the
//! connection actors sit below it (docs/protocol.md §1).

use std::io;
use std::sync::Arc;

use actix::prelude::*;
use shoal_proto::rpc;

use crate::health::{ActorStats, Registry};
use crate::journal_writer::Services;
use crate::msg::{CloseSession, CrashService, GetStatus, ListSessions};
pub(crate) use crate::peer::limit_error;
use crate::peer::{write, Writer};
use crate::sessions::handle::AttachSession;
use shoal_proto::frame::Frame;

/// The journal and event bus (for connections that are not attached).
#[derive(Message)]
#[rtype(result = "Option<Services>")]
pub struct GetServices;

/// The Daemon as a connection sees it: one recipient per request it may make.
#[derive(Clone)]
pub struct DaemonRef {
    pub attach: Recipient<AttachSession>,
    pub close: Recipient<CloseSession>,
    pub list: Recipient<ListSessions>,
    pub status: Recipient<GetStatus>,
    pub services: Recipient<GetServices>,
    pub crash: Recipient<CrashService>,
    pub tokens: Recipient<crate::msg::TokensChanged>,
}

/// What the listener knows about an accepted connection.
#[derive(Clone)]
pub struct ConnContext {
    pub id: u64,
    pub uid: u32,
    pub pid: Option<i32>,
    /// Another uid allowed by config: must present a token.
    pub foreign: bool,
    pub daemon: DaemonRef,
    pub daemon_stats: Arc<ActorStats>,
    pub registry: Arc<Registry>,
    pub parent: u64,
    pub limit: usize,
    /// `[limits]` (subscriptions per connection, ...).
    pub limits: Arc<crate::config::LimitsConfig>,
    /// Holds this connection's place in `max_connections` until every clone is gone.
    pub slot: Arc<ConnSlot>,
    /// A duplicate of the socket, to tell a hang-up from a half-close.
    pub peer: Option<Arc<std::os::fd::OwnedFd>>,
    /// Taken from the local user's reserve past `max_connections`: the kernel
    /// protocol without a token only (`shoal status`, `session.attach`).
    pub reserved: bool,
}

/// Places past `max_connections` kept for the local user's kernel clients,
/// so `shoal status` and `session.attach` get in while the ordinary places
/// are taken.
pub const RESERVED_FOR_LOCAL: usize = 2;

/// The refusal of a reserved place to what it is not for.
pub fn reserve_error(max: usize) -> rpc::RpcError {
    limit_error(
        "max_connections",
        max as u64,
        "too many open connections (the places left are the local user's, for the kernel protocol without a token)",
    )
}

/// One open connection, counted against `[limits] max_connections`.
#[derive(Debug)]
pub struct ConnSlot {
    open: Arc<std::sync::atomic::AtomicUsize>,
}

impl ConnSlot {
    /// Take a slot, unless `max` are open already.
    pub fn take(open: &Arc<std::sync::atomic::AtomicUsize>, max: usize) -> Option<ConnSlot> {
        use std::sync::atomic::Ordering;
        open.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()?;
        Some(ConnSlot { open: open.clone() })
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What both protocols do with an incoming frame before dispatching it: a read
/// error stops the connection, an oversized frame and malformed JSON get their
/// error replies (the connection stays). `Some` is a notification or request
/// for the caller to dispatch.
pub fn incoming<A>(
    cx: &ConnContext,
    tx: &Writer,
    ctx: &mut Context<A>,
    item: io::Result<Frame>,
) -> Option<rpc::Incoming>
where
    A: Actor<Context = Context<A>>,
{
    match item {
        Err(e) => {
            tracing::debug!(conn = cx.id, "read error: {e}");
            ctx.stop();
            None
        }
        Ok(Frame::Oversized { len }) => {
            tracing::warn!(conn = cx.id, len, "oversized frame refused");
            write(tx, ctx, &rpc::oversized(cx.limit, len));
            None
        }
        Ok(Frame::Line(bytes)) => match rpc::classify(&bytes) {
            rpc::Incoming::Invalid { id, error } => {
                write(tx, ctx, &rpc::error_response(&id, &error));
                None
            }
            other => Some(other),
        },
    }
}
