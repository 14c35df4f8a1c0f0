//! The bus's inbox: how publishes reach the bus without a message each (module doc of
//! `event_bus`), and the [`BusHandle`] publishers hold.

use std::sync::{Arc, Mutex};

use actix::prelude::*;

use super::{EventBus, Payload, Publish, WAKE_AT};
use crate::actors::health::Supervised;
use crate::sync::Locked;

/// Publishes not yet taken by the bus (see the module doc).
#[derive(Default)]
pub struct Inbox {
    state: Mutex<InboxState>,
}

#[derive(Default)]
struct InboxState {
    pending: Vec<Publish>,
    /// The bus will look at the inbox unasked: a [`Drain`] is on its way or a tick is due.
    armed: bool,
    /// A [`Drain`] is on its way.
    wake_sent: bool,
    /// Live subscriptions (any channel), set by the bus.
    live: usize,
}

impl Inbox {
    /// Add `events`; answers whether the publisher must wake the bus (module doc).
    pub(super) fn push(&self, events: impl IntoIterator<Item = Publish>, prompt: bool) -> bool {
        let mut s = self.state.locked();
        let before = s.pending.len();
        s.pending.extend(events);
        if s.pending.len() == before {
            return false;
        }
        let now = prompt || s.live > 0 || s.pending.len() >= WAKE_AT;
        let wake = if now { !s.wake_sent } else { !s.armed };
        if wake {
            s.wake_sent = true;
            s.armed = true;
        }
        wake
    }

    /// Everything waiting, in publish order (a [`Drain`] sent before this is answered).
    pub(super) fn take(&self) -> Vec<Publish> {
        let mut s = self.state.locked();
        s.wake_sent = false;
        std::mem::take(&mut s.pending)
    }

    /// A tick found nothing new: disarm unless a publish came in meanwhile (answers whether
    /// the bus must keep ticking).
    pub(super) fn disarm_if_empty(&self) -> bool {
        let mut s = self.state.locked();
        if s.pending.is_empty() && !s.wake_sent {
            s.armed = false;
            return false;
        }
        true
    }

    pub(super) fn set_live(&self, n: usize) {
        self.state.locked().live = n;
    }
}

/// How publishers reach the bus (and, through `Deref`, how anyone sends it a message): by
/// its inbox, waking it only when the module doc says.
#[derive(Clone)]
pub struct BusHandle {
    bus: Supervised<EventBus>,
    inbox: Arc<Inbox>,
    prompt: bool,
}

impl BusHandle {
    pub(super) fn new(bus: Supervised<EventBus>, inbox: Arc<Inbox>, prompt: bool) -> Self {
        BusHandle { bus, inbox, prompt }
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
        if self.inbox.push(events, self.prompt) {
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

/// Take the inbox now (sent by a publisher that must not wait for a tick).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain;
