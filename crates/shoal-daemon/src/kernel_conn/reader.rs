//! KernelConn's reader: the task that reads frames ahead of the actor,
//! classifies them, keeps the table of calls not yet answered (so a `cancel`
//! notification or a hang-up reaches a running or queued call), and the
//! stream handler that hands each item to the actor in order. It never
//! dispatches a method itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use serde_json::Value as Json;

use super::KernelConn;
use crate::conn::ConnContext;
use crate::health::Registration;
use crate::peer::{self, FrameItem, Writer};
use crate::sessions::session::CallCancel;
use shoal_base::sync::Locked;
use shoal_proto::frame::Frame;
use shoal_proto::rpc::{self, RpcError};

/// Frames read ahead of the actor (requests wait here while one runs).
const READ_AHEAD: usize = 64;

/// Requests read but not yet answered, by id: their cancellation handles.
pub(super) type Calls = Arc<Mutex<HashMap<String, Arc<CallCancel>>>>;

pub(super) fn id_key(id: &Json) -> String {
    id.to_string()
}

pub(super) fn lock_calls(c: &Calls) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CallCancel>>> {
    c.locked()
}

/// One frame, classified by the reader task.
pub enum KernelItem {
    ReadError(std::io::Error),
    Oversized {
        len: u64,
    },
    Invalid {
        id: Json,
        error: RpcError,
    },
    Request {
        id: Json,
        method: String,
        params: Json,
        cancel: Arc<CallCancel>,
    },
}

impl Message for KernelItem {
    type Result = ();
}

impl KernelConn {
    /// Start the actor behind a reader task. Requests are answered strictly in
    /// order, so while one runs the actor reads nothing; the reader task keeps
    /// reading meanwhile: a `cancel {id}` notification reaches the call it
    /// names (running or still queued), and a client that hangs up cancels
    /// the calls it was waiting for (docs/protocol.md §10).
    pub fn start_with(
        cx: ConnContext,
        tx: Writer,
        reg: Registration,
        items: impl futures_util::Stream<Item = FrameItem> + 'static,
    ) {
        let calls: Calls = Arc::default();
        let hangup: Arc<peer::Hangup> = Arc::default();
        let ended: Arc<shoal_base::sync::Latch> = Arc::default();
        let rx = spawn_reader(
            items,
            calls.clone(),
            cx.peer.clone(),
            hangup.clone(),
            ended.clone(),
        );
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        KernelConn::create(move |c| {
            c.add_stream(stream);
            let mut k = KernelConn::new(cx, tx, reg);
            k.calls = calls;
            k.hangup = hangup;
            k.ended = ended;
            k
        });
    }
}

fn spawn_reader(
    items: impl futures_util::Stream<Item = FrameItem> + 'static,
    calls: Calls,
    peer: Option<Arc<std::os::fd::OwnedFd>>,
    hangup: Arc<peer::Hangup>,
    ended: Arc<shoal_base::sync::Latch>,
) -> tokio::sync::mpsc::Receiver<KernelItem> {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    actix_rt::spawn(async move {
        let mut items = std::pin::pin!(items);
        while let Some(FrameItem(item)) = items.next().await {
            let out = match item {
                Err(e) => {
                    let _ = tx.send(KernelItem::ReadError(e)).await;
                    break;
                }
                Ok(Frame::Oversized { len }) => KernelItem::Oversized { len },
                Ok(Frame::Line(bytes)) => match rpc::classify(&bytes) {
                    rpc::Incoming::Invalid { id, error } => KernelItem::Invalid { id, error },
                    rpc::Incoming::Notification { method, params } => {
                        // Other notifications are ignored (docs/protocol.md §2).
                        if method == "cancel" {
                            if let Some(id) = params.get("id") {
                                if let Some(c) = lock_calls(&calls).get(&id_key(id)) {
                                    c.cancel();
                                }
                            }
                        }
                        continue;
                    }
                    rpc::Incoming::Request { id, method, params } => {
                        let cancel = CallCancel::new();
                        lock_calls(&calls).insert(id_key(&id), cancel.clone());
                        KernelItem::Request {
                            id,
                            method,
                            params,
                            cancel,
                        }
                    }
                },
            };
            if tx.send(out).await.is_err() {
                break;
            }
        }
        drop(tx);
        // The client stopped sending. A half-close still waits for its answers; a hang-up
        // cancels every call it was waiting for.
        // The watch ends with the connection (`ended`, set as it stops).
        let Some(peer) = peer else { return };
        tokio::select! {
            () = peer::hang_up(peer) => {
                // Set first: a call woken by its cancel then knows nobody waits for it.
                hangup.set();
                for (_, c) in lock_calls(&calls).drain() {
                    c.cancel();
                }
            }
            () = ended.wait() => {}
        }
    });
    rx
}

impl StreamHandler<KernelItem> for KernelConn {
    fn handle(&mut self, item: KernelItem, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        match item {
            KernelItem::ReadError(e) => {
                tracing::debug!(conn = self.cx.id, "read error: {e}");
                ctx.stop();
            }
            KernelItem::Oversized { len } => {
                tracing::warn!(conn = self.cx.id, len, "oversized frame refused");
                peer::write(&self.tx, ctx, &rpc::oversized(self.cx.limit, len));
            }
            KernelItem::Invalid { id, error } => {
                peer::write(&self.tx, ctx, &rpc::error_response(&id, &error));
            }
            KernelItem::Request {
                id,
                method,
                params,
                cancel,
            } => self.request(id, method, params, cancel, ctx),
        }
    }
}
