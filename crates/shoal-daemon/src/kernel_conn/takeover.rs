//! KernelConn's methods for a human beside the agent (docs/protocol.md §8):
//! `pty.claim` (type alone into a PTY), `pty.release`, and `pty.watch` (its
//! live screen as `pty.screen` notifications). Only the local user, without
//! a token, may call them.
//!
//! The connection holds what it claimed and watches: a release drops the
//! claim, a hang-up or close drops everything (the reader stops the actor;
//! the guards go with it). A watch streams from a task of its own, so a
//! request waiting on this connection never delays the screen. It never
//! evaluates and never touches the emulator: the PTY's I/O thread makes
//! the screen's updates.

use std::sync::{Arc, Weak};

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Value as Json};
use tokio::sync::broadcast::error::RecvError;

use super::{KernelConn, Reply};
use crate::peer::Writer;
use shoal_proto::frame;
use shoal_proto::kernel::{self, PtyRef};
use shoal_proto::rpc::{self, RpcError};
use shoal_pty::api;
use shoal_pty::claim::{self, Claim};
use shoal_pty::stream::Update;
use shoal_pty::PtyHandle;

/// What a human asks of a PTY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Human {
    Claim,
    Release,
    Watch,
}

impl Human {
    fn method(self) -> &'static str {
        match self {
            Human::Claim => "pty.claim",
            Human::Release => "pty.release",
            Human::Watch => "pty.watch",
        }
    }
}

/// A watch's notification task, ended with its owner.
pub(super) struct Watch(tokio::task::JoinHandle<()>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl KernelConn {
    /// `pty.claim`, `pty.release`, `pty.watch`.
    pub(super) fn pty_human(&mut self, call: Human, pty: &PtyRef) -> Reply {
        let method = call.method();
        let id = match api::pty_id(pty) {
            Ok(id) => id,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let Some(att) = &self.attached else {
            return Box::pin(ready(Err(RpcError::new(
                rpc::NOT_ATTACHED,
                "attach to a session first",
            ))));
        };
        if att.token.is_some() || att.gate.principal != shoal_policy::runtime().local {
            return Box::pin(ready(Err(RpcError::new(
                rpc::LEASH_DENIED,
                format!("{method}: only the local user takes over or watches a PTY, never a token principal"),
            )
            .with_data(json!({"principal": att.gate.principal})))));
        }
        if call == Human::Release {
            let held = self.claims.remove(&id).is_some();
            return super::done(Ok(kernel::PtyReleased {
                pty_id: shoal_pty::id_name(id),
                released: held,
            }));
        }
        let client = if att.client.is_empty() {
            "attach".to_string()
        } else {
            att.client.clone()
        };
        let get = crate::sessions::pty::get(&att.handle, id);
        let conn = self.cx.id;
        let tx = self.tx.clone();
        let watch = call == Human::Watch;
        Box::pin(get.into_actor(self).map(move |h, act, _ctx| {
            let h = h?;
            if watch {
                act.watches
                    .insert(id, Watch(actix_rt::spawn(stream(tx, h.clone()))));
                let info = h.info();
                return Ok(rpc::answer(kernel::PtyWatching {
                    pty_id: shoal_pty::id_name(id),
                    watching: true,
                    cols: info.cols,
                    rows: info.rows,
                    alive: info.alive,
                }));
            }
            let guard = h
                .claims()
                .claim(Claim { conn, client })
                .map_err(|c| claim::claimed_by_other(id, &c))?;
            act.claims.insert(id, guard);
            tracing::info!(conn, pty = %shoal_pty::id_name(id), "a human took over the pty");
            Ok(rpc::answer(api::claim_result(&h.info(), true)))
        }))
    }
}

fn notification<P: serde::Serialize>(params: P) -> Vec<u8> {
    frame::encode(&rpc::Notification {
        jsonrpc: "2.0",
        method: "pty.screen",
        params,
    })
}

/// Stream PTY `h`'s live screen: the whole screen, then each update; the
/// whole screen again after falling behind; a last `ended` notification
/// when the program's terminal is gone. Holds the PTY weakly (a close
/// frees it).
async fn stream(tx: Writer, h: Arc<PtyHandle>) {
    let id = h.id;
    let weak: Weak<PtyHandle> = Arc::downgrade(&h);
    let mut watching = h.watch();
    drop(h);
    loop {
        let Some(((first, mut rx), _guard)) = watching.await else {
            break;
        };
        if send(&tx, id, &first).await.is_err() {
            return;
        }
        let lagged = loop {
            match rx.recv().await {
                Ok(u) => {
                    if send(&tx, id, &u).await.is_err() {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) => break true,
                Err(RecvError::Closed) => break false,
            }
        };
        match weak.upgrade() {
            Some(h) if lagged => watching = h.watch(),
            _ => break,
        }
    }
    let (alive, exit) = match weak.upgrade() {
        Some(h) => (h.alive(), api::exit_json(h.exit())),
        None => (false, Json::Null),
    };
    let params = kernel::PtyScreenEnded {
        pty_id: shoal_pty::id_name(id),
        ended: true,
        alive,
        exit,
    };
    let _ = tx.send_within_stall(notification(params)).await;
}

async fn send(tx: &Writer, id: u64, u: &Update) -> Result<(), ()> {
    tx.send_within_stall(notification(api::screen_update(id, u)))
        .await
        .map_err(|_| ())
}
