//! `events.read` on the bus (docs/rules.md §19): a channel's ring, and for a durable
//! channel a `since` older than the ring served from the journal on a blocking thread. A
//! token's read is scoped like its subscriptions: only events of sessions it may read, and
//! never stored events (they carry no session). It reads only; it never publishes.

use std::sync::Arc;

use actix::prelude::*;

use super::{admits, BusEvent, Channel, EventBus, ReadEvents, DURABLE};

impl Handler<ReadEvents> for EventBus {
    type Result = ResponseFuture<Vec<BusEvent>>;

    fn handle(&mut self, msg: ReadEvents, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.take_inbox();
        let scope = msg.scope.clone();
        let ring: Vec<BusEvent> = self
            .channels
            .get(&msg.channel)
            .map(|c| {
                c.ring
                    .iter()
                    .filter(|e| msg.since.is_none_or(|s| e.seq > s))
                    .filter(|e| admits(scope.as_ref(), e.origin()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let first_in_ring = self
            .channels
            .get(&msg.channel)
            .and_then(|c| c.ring.front().map(|e| e.seq))
            .unwrap_or_else(|| self.channels.get(&msg.channel).map_or(0, Channel::next));
        // Older than the ring (or an empty ring after a restart): the store has it.
        let from_store = match (msg.since, &self.writer) {
            (Some(s), Some(_)) => {
                DURABLE.contains(&msg.channel.as_str()) && s.saturating_add(1) < first_in_ring
            }
            _ => false,
        };
        // Stored events carry no session: a scoped reader (a token) gets the ring's only.
        if !from_store || scope.is_some() {
            return Box::pin(async move { tail(ring, msg.limit) });
        }
        let writer = self.writer.clone();
        let stats = self.reg.stats.clone();
        Box::pin(async move {
            let Some(w) = writer else {
                return tail(ring, msg.limit);
            };
            let channel = msg.channel.clone();
            let since = msg.since;
            let limit = msg.limit.unwrap_or(0);
            let read = tokio::task::spawn_blocking(move || {
                w.sync_visible()?;
                w.store().events_read(&channel, since, limit)
            })
            .await;
            match read {
                Ok(Ok(stored)) => {
                    let mut out: Vec<BusEvent> = stored
                        .into_iter()
                        .filter(|e| e.seq < first_in_ring)
                        .map(|e| {
                            BusEvent::new(
                                msg.channel.clone(),
                                e.seq,
                                e.ts,
                                Arc::new(e.payload.into()),
                            )
                        })
                        .collect();
                    out.extend(ring);
                    tail(out, msg.limit)
                }
                Ok(Err(e)) => {
                    stats.set_error(format!("events.read from the journal: {e}"));
                    tail(ring, msg.limit)
                }
                Err(e) => {
                    stats.set_error(format!("events.read from the journal: {e}"));
                    tail(ring, msg.limit)
                }
            }
        })
    }
}

/// Keep the newest `limit` (None or 0: all).
fn tail(mut v: Vec<BusEvent>, limit: Option<usize>) -> Vec<BusEvent> {
    if let Some(l) = limit.filter(|l| *l > 0) {
        if v.len() > l {
            v.drain(..v.len() - l);
        }
    }
    v
}
