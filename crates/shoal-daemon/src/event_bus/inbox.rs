//! The bus's inbox: how publishes reach the bus without a message each (module doc of
//! `event_bus`), and the [`BusHandle`] publishers hold.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::{EventBus, Origin, Payload, Publish};

/// Publishes the inbox holds at most: past it the oldest are dropped (and counted), so a
/// bus that is gone for good (past its restart limit) cannot make publishers grow it
/// without bound.
pub const MAX_PENDING: usize = 16 * 1024;
use crate::health::Supervised;
use shoal_base::sync::Locked;

/// A publish with the session it is of (`None`: of no session).
pub type Stamped = (Publish, Option<Arc<Origin>>);

/// Publishes not yet taken by the bus (see the module doc).
#[derive(Default)]
pub struct Inbox {
    state: Mutex<InboxState>,
    /// Someone subscribes to [`shoal_journal::event::EXEC_CHANNEL`]: execs then
    /// publish their live view (read without the lock, on every exec).
    exec_watched: AtomicBool,
}

#[derive(Default)]
struct InboxState {
    pending: VecDeque<Stamped>,
    /// A [`Drain`] is on its way: the bus takes the inbox before anything else sees it.
    wake_sent: bool,
    /// Publishes dropped for [`MAX_PENDING`] since the bus last took the inbox.
    dropped: u64,
}

impl Inbox {
    /// Add `events`; answers whether the publisher must wake the bus: the first publish
    /// since the bus last took the inbox does (one [`Drain`] in flight at most).
    pub(super) fn push(&self, events: impl IntoIterator<Item = Stamped>) -> bool {
        let mut s = self.state.locked();
        let before = s.pending.len();
        s.pending.extend(events);
        if s.pending.len() == before {
            return false;
        }
        if s.pending.len() > MAX_PENDING {
            let over = s.pending.len() - MAX_PENDING;
            s.pending.drain(..over);
            s.dropped += over as u64;
        }
        !std::mem::replace(&mut s.wake_sent, true)
    }

    /// Everything waiting, in publish order (a [`Drain`] sent before this is answered),
    /// and how many publishes were dropped before it for [`MAX_PENDING`].
    pub(super) fn take(&self) -> (VecDeque<Stamped>, u64) {
        let mut s = self.state.locked();
        s.wake_sent = false;
        (
            std::mem::take(&mut s.pending),
            std::mem::take(&mut s.dropped),
        )
    }

    pub(super) fn set_exec_watched(&self, watched: bool) {
        self.exec_watched.store(watched, Ordering::Relaxed);
    }
}

/// How publishers reach the bus (and, through `Deref`, how anyone sends it a message): by
/// its inbox, waking it only when the module doc says.
#[derive(Clone)]
pub struct BusHandle {
    bus: Supervised<EventBus>,
    inbox: Arc<Inbox>,
    /// The session every publish through this handle is of (a session's own handle).
    origin: Option<Arc<Origin>>,
}

impl BusHandle {
    pub(super) fn new(bus: Supervised<EventBus>, inbox: Arc<Inbox>) -> Self {
        BusHandle {
            bus,
            inbox,
            origin: None,
        }
    }

    /// This handle for session `origin`: what is published through it is that session's
    /// (a token principal sees it only if it may read the session, `scope.rs`).
    pub fn stamped(&self, origin: Arc<Origin>) -> BusHandle {
        BusHandle {
            origin: Some(origin),
            ..self.clone()
        }
    }

    /// Does anyone subscribe to the live view of execs
    /// ([`shoal_journal::event::EXEC_CHANNEL`])? One atomic load.
    pub fn exec_watched(&self) -> bool {
        self.inbox.exec_watched.load(Ordering::Relaxed)
    }

    /// The session this handle publishes for, if any.
    pub fn origin(&self) -> Option<&Arc<Origin>> {
        self.origin.as_ref()
    }

    /// Publish `payload` on `channel`.
    pub fn publish(&self, channel: impl Into<String>, payload: impl Into<Payload>) {
        self.publish_all([Publish {
            channel: channel.into(),
            payload: payload.into(),
        }]);
    }

    /// Publish `events` in order.
    pub fn publish_all(&self, events: impl IntoIterator<Item = Publish>) {
        let origin = &self.origin;
        let stamped = events.into_iter().map(|p| (p, origin.clone()));
        if self.inbox.push(stamped) {
            self.bus.do_send(Drain);
        }
    }
}

impl std::ops::Deref for BusHandle {
    type Target = Supervised<EventBus>;

    fn deref(&self) -> &Supervised<EventBus> {
        &self.bus
    }
}

/// Take the inbox now (sent by the first publish since the bus last took it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain;
