//! A subscription's forwarding task and its backlog: the events taken from the channel's
//! broadcast and not yet in the subscriber's mailbox.
//!
//! The task takes events from its broadcast receiver as soon as they are published (so the
//! broadcast never holds more than one turn of the bus's publishes for it) into its
//! [`Backlog`], while it puts the oldest of the backlog into the subscriber's mailbox, waiting
//! for room when the mailbox is full. A subscriber that stops reading (its connection's
//! client does not read its socket) therefore costs its backlog, and the backlog is bounded
//! in events ([`QUEUE`]), in bytes ([`LAG_BYTES`]) and, across every subscription, by the
//! bus's [`Lag`] budget: past a bound the oldest waiting events are dropped, and the
//! subscriber gets one `{dropped, latest_seq}` marker before the next event it is given
//! (docs/rules.md §19). A subscriber always keeps its newest event, so one that stops
//! reading cannot make another, which keeps up, lose anything.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use serde_json::json;
use tokio::sync::{broadcast, Notify};

use super::{admits, BusEvent, Scope, QUEUE};
use shoal_journal as journal;

/// Bytes of events one subscription may have waiting before its oldest are dropped (as
/// much as one channel's ring holds).
pub const LAG_BYTES: usize = super::RING_BYTES;
/// Bytes of waiting events every subscription together may hold.
pub const LAG_BUS_BYTES: usize = 32 << 20;

/// What every subscription's waiting events hold together, against a limit.
#[derive(Clone, Debug)]
pub struct Lag {
    held: Arc<AtomicUsize>,
    /// The most `held` has been (what tests check the bound on).
    peak: Arc<AtomicUsize>,
    limit: usize,
}

impl Default for Lag {
    fn default() -> Self {
        Lag::with_limit(LAG_BUS_BYTES)
    }
}

impl Lag {
    pub fn with_limit(limit: usize) -> Self {
        Lag {
            held: Arc::default(),
            peak: Arc::default(),
            limit,
        }
    }

    /// Bytes of waiting events now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The most bytes of waiting events there have been.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn take(&self, n: usize) {
        let now = self.held.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn give(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }

    fn over(&self) -> bool {
        self.held() > self.limit
    }
}

/// What an event counts against the bounds: its payload's bytes, and something for the
/// event itself.
fn cost(ev: &BusEvent) -> usize {
    ev.bytes + 64
}

/// One subscription's waiting events, oldest first, and what it lost.
pub struct Backlog {
    events: VecDeque<BusEvent>,
    bytes: usize,
    lag: Lag,
    /// Events lost since the last one given out.
    dropped: u64,
    /// The seq of the newest lost event.
    latest_dropped: u64,
    /// The broadcast lost events before the next one taken: they were newer than all
    /// that wait, so the next event taken names the latest lost.
    lost_ahead: bool,
}

impl Backlog {
    pub fn new(lag: Lag) -> Self {
        Backlog {
            events: VecDeque::new(),
            bytes: 0,
            lag,
            dropped: 0,
            latest_dropped: 0,
            lost_ahead: false,
        }
    }

    /// Take `ev` as the newest; drop the oldest while a bound is passed (never `ev`).
    pub fn push(&mut self, ev: BusEvent) {
        if self.lost_ahead {
            self.lost_ahead = false;
            self.latest_dropped = ev.seq.saturating_sub(1);
        }
        let n = cost(&ev);
        self.lag.take(n);
        self.bytes += n;
        self.events.push_back(ev);
        while self.events.len() > 1
            && (self.events.len() > QUEUE || self.bytes > LAG_BYTES || self.lag.over())
        {
            self.drop_oldest();
        }
    }

    /// The broadcast skipped `n` events (the task fell behind it): they are newer than
    /// every waiting event, so those go too, and the marker comes before what is taken next.
    pub fn lost(&mut self, n: u64) {
        while !self.events.is_empty() {
            self.drop_oldest();
        }
        self.dropped += n;
        self.lost_ahead = true;
    }

    fn drop_oldest(&mut self) {
        if let Some(ev) = self.events.pop_front() {
            self.release(&ev);
            self.dropped += 1;
            self.latest_dropped = ev.seq;
        }
    }

    fn release(&mut self, ev: &BusEvent) {
        let n = cost(ev);
        self.bytes -= n;
        self.lag.give(n);
    }

    /// The next event to give the subscriber: the marker of what was lost, if anything
    /// was, else the oldest waiting event.
    pub fn pop(&mut self) -> Option<BusEvent> {
        if self.dropped > 0 && !self.lost_ahead {
            let front = self.events.front()?;
            let latest = self.latest_dropped;
            let marker = BusEvent::new(
                front.channel.clone(),
                latest,
                journal::now_ns(),
                Arc::new(json!({"dropped": self.dropped, "latest_seq": latest}).into()),
            );
            self.dropped = 0;
            return Some(marker);
        }
        let ev = self.events.pop_front()?;
        self.release(&ev);
        Some(ev)
    }

    /// Events waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.events.len()
    }
}

impl Drop for Backlog {
    fn drop(&mut self) {
        self.lag.give(self.bytes);
    }
}

/// Move the events of `rx` that `scope` admits into `sub`'s mailbox, `first` before them,
/// until the subscriber is gone (or the bus: the sender dropped), through a [`Backlog`].
pub async fn deliver(
    mut rx: broadcast::Receiver<BusEvent>,
    sub: Recipient<BusEvent>,
    scope: Option<Scope>,
    first: Vec<BusEvent>,
    lag: Lag,
) {
    let backlog = RefCell::new(Backlog::new(lag));
    let waiting = Notify::new();
    // Both halves run in this one task, so neither is ever cancelled half way (an event
    // handed to the mailbox is never handed again) and the backlog's borrows never meet:
    // none is held across an await.
    let take = async {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    if admits(scope.as_ref(), ev.origin()) {
                        backlog.borrow_mut().push(ev);
                        waiting.notify_one();
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => backlog.borrow_mut().lost(n),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    };
    let give = async {
        for ev in first {
            if !put(&sub, ev).await {
                return;
            }
        }
        loop {
            let next = backlog.borrow_mut().pop();
            match next {
                Some(ev) => {
                    if !put(&sub, ev).await {
                        return;
                    }
                }
                None => waiting.notified().await,
            }
        }
    };
    tokio::select! {
        () = take => {}
        () = give => {}
    }
}

/// Put `ev` in `sub`'s mailbox: at once while it has room, else once it is delivered.
/// Answers whether the subscriber is still there.
async fn put(sub: &Recipient<BusEvent>, ev: BusEvent) -> bool {
    match sub.try_send(ev) {
        Ok(()) => true,
        Err(SendError::Full(ev)) => sub.send(ev).await.is_ok(),
        Err(SendError::Closed(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, bytes: usize) -> BusEvent {
        let mut e = BusEvent::new("user.t".into(), seq, 0, Arc::new(json!(seq).into()));
        e.bytes = bytes;
        e
    }

    fn seqs(b: &mut Backlog) -> Vec<(u64, Option<u64>)> {
        std::iter::from_fn(|| b.pop())
            .map(|e| {
                let p = e.payload.to_json().into_owned();
                (e.seq, p.get("dropped").and_then(|d| d.as_u64()))
            })
            .collect()
    }

    #[test]
    fn a_backlog_keeps_its_newest_bytes_and_marks_what_it_dropped() {
        let lag = Lag::default();
        let mut b = Backlog::new(lag.clone());
        let big = LAG_BYTES / 4;
        for seq in 0..10 {
            b.push(ev(seq, big));
        }
        assert!(b.len() < 4, "{}", b.len());
        assert!(lag.held() <= LAG_BYTES, "{}", lag.held());
        let got = seqs(&mut b);
        let kept = got.len() as u64 - 1;
        // One marker naming the newest dropped, then the newest, in order.
        assert_eq!(got[0], (9 - kept, Some(10 - kept)), "{got:?}");
        let rest: Vec<u64> = got[1..].iter().map(|(s, _)| *s).collect();
        assert_eq!(rest, (10 - kept..10).collect::<Vec<_>>());
        assert_eq!(lag.held(), 0, "given back");
    }

    #[test]
    fn a_backlog_keeps_at_most_queue_events() {
        let mut b = Backlog::new(Lag::default());
        for seq in 0..(QUEUE as u64 + 50) {
            b.push(ev(seq, 10));
        }
        assert_eq!(b.len(), QUEUE);
        assert_eq!(b.pop().map(|e| e.seq), Some(49), "the marker");
    }

    #[test]
    fn the_budget_binds_every_backlog_together_and_each_keeps_its_newest() {
        let lag = Lag::with_limit(10_000);
        let mut stalled = Backlog::new(lag.clone());
        for seq in 0..100 {
            stalled.push(ev(seq, 1_000));
        }
        assert!(lag.held() <= 10_000, "{}", lag.held());
        // Another subscriber, over the budget the stalled one holds, still keeps its event.
        let mut other = Backlog::new(lag.clone());
        for seq in 0..3 {
            other.push(ev(seq, 1_000));
        }
        assert_eq!(other.len(), 1);
        assert_eq!(seqs(&mut other), vec![(1, Some(2)), (2, None)]);
        drop(stalled);
        drop(other);
        assert_eq!(lag.held(), 0);
    }

    #[test]
    fn events_the_broadcast_skipped_are_marked_before_the_next_taken() {
        let mut b = Backlog::new(Lag::default());
        b.push(ev(0, 10));
        b.push(ev(1, 10));
        b.lost(5);
        assert_eq!(
            b.pop().map(|e| e.seq),
            None,
            "nothing to give until the next event"
        );
        b.push(ev(7, 10));
        // 0 and 1 waited, 2..=6 were skipped: 7 lost, the latest 6.
        assert_eq!(seqs(&mut b), vec![(6, Some(7)), (7, None)]);
    }
}
