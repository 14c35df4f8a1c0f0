//! EventBus: the kernel-global event channels (docs/rules.md §19).
//!
//! Per channel: a ring of the last [`RING`] events and a seq counter from 0. The durable
//! channels (`journal`, `session.transcript`) also go to the journal (an `Op::Event` queued on
//! the writer, never a commit here), so their seqs continue after a restart and `events.read`
//! with a `since` older than the ring is served from the store (on a blocking thread).
//!
//! Subscribers are `Recipient<BusEvent>`s, each with its own bounded queue of [`QUEUE`] events.
//! Delivery is a non-blocking `try_send` into the subscriber's mailbox (no reply awaited, so
//! one publish to many subscribers costs one mailbox push each); a full mailbox leaves the
//! event queued here and retries after a backoff of 1 ms doubling to [`RETRY_MAX`], so
//! publishing never waits on a subscriber and a stalled one never slows the others. A full
//! queue counts further events instead of queueing them; once the queue drains the subscriber
//! gets one marker `{dropped, latest_seq}` before anything newer (docs/rules.md §19).
//!
//! The subscriptions and the seq counters also live in a [`SubscriberBook`] outside the actor
//! (written on subscribe, unsubscribe and prune; a counter is one atomic per publish), so
//! when the daemon restarts a crashed bus the new one keeps every subscription (same ids) and
//! every channel's seq: each subscriber of a channel that had events first gets one marker
//! `{restarted: true, latest_seq}` (what was queued for it or in flight is lost; `events.read`
//! recovers the durable channels from the journal). The rings are not kept.
//!
//! Publishers do not message the bus per event: they put their publishes in the bus's
//! [`Inbox`] through a [`BusHandle`] (a session publishes three events per exec, and a message
//! to the bus's arbiter wakes that thread each time, about 20 µs of every exec on this
//! VM). The bus takes the inbox in order before anything that could see it: every message it
//! handles (a read, a subscribe, a direct [`Publish`]) drains the inbox first. A publish
//! wakes the bus at once (one [`Drain`] in flight at most) when its channel has live
//! subscribers (they hear of events promptly), in immediate durability mode, or when
//! [`WAKE_AT`] publishes wait; otherwise only the first publish after the bus went idle wakes
//! it, and the bus then looks at its inbox every [`TICK`] until a tick finds nothing. So a
//! stream of execs with nobody listening costs the bus one wake-up per tick, and a durable
//! event reaches the journal's queue within a tick. The live view of execs
//! ([`shoal_journal::event::EXEC_CHANNEL`]) never wakes the bus by itself: a watched stream
//! of execs reaches its viewers on the tick, so watching costs the agent no wake-up per
//! exec. At a clean stop the daemon queues what is left for the
//! journal ([`SubscriberBook::settle`]). The inbox holds at most [`MAX_PENDING`] publishes
//! (a bus past its restart limit never takes it): past that the oldest are dropped, and the
//! bus's row in `shoal status` says how many once it takes the inbox again.
//!
//! Every subscriber of one publish holds the same [`BusEvent`]: its payload and the cell in
//! which the first connection to write it leaves the encoded kernel frame, so a fan-out
//! encodes the frame once, not once per subscriber. Encoding stays at the edge (the
//! connection fills the cell); the bus never builds wire bytes.
//!
//! A session's publishes carry their [`Origin`] (the session and its owner, stamped by the
//! session's own [`BusHandle`]); a token principal's subscriptions and reads carry a
//! [`Scope`], and only events of sessions it owns or may read reach it (`scope.rs`). Reads
//! are `read.rs`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value as Json};

use crate::health::{Registration, Supervised};
use crate::msg::Crash;
pub use shoal_journal::event::Payload;
use shoal_journal::{self as journal, JournalWriter as Writer, Op};

mod inbox;
mod read;
mod scope;
pub use inbox::{BusHandle, Drain, Inbox, MAX_PENDING};
pub use scope::{admits, Origin, Scope};
use shoal_base::sync::Locked;

/// Events kept in memory per channel.
pub const RING: usize = 1024;
/// Events queued per subscriber before it starts dropping.
pub const QUEUE: usize = 256;
/// Longest wait before retrying a subscriber whose mailbox was full.
pub const RETRY_MAX: Duration = Duration::from_millis(100);
/// Channels persisted to (and replayed from) the journal.
pub const DURABLE: [&str; 2] = ["journal", "session.transcript"];
/// Publishes waiting in the inbox at which a publisher wakes the bus whatever else holds.
pub const WAKE_AT: usize = 256;
/// How often a bus that has been woken looks at its inbox again (until a look finds it empty).
pub const TICK: Duration = Duration::from_millis(5);

/// One event, as delivered and as returned by `events.read`.
#[derive(Message, Clone, Debug)]
#[rtype(result = "()")]
pub struct BusEvent {
    pub channel: String,
    pub seq: u64,
    /// ns since the epoch.
    pub ts: i64,
    /// Shared: the ring, every subscriber queue and the publisher's answer hold
    /// the same payload (events are published on every exec).
    pub payload: Arc<Payload>,
    /// The encoded kernel `event` notification, filled by the first connection that writes
    /// this event and reused by every other subscriber of the same publish.
    frame: Arc<OnceLock<Vec<u8>>>,
    /// The session it is of (`None`: of no session, or read back from the journal).
    origin: Option<Arc<Origin>>,
}

/// Equal when channel, seq, ts and payload are (whether a frame was encoded yet is not part
/// of the event).
impl PartialEq for BusEvent {
    fn eq(&self, o: &Self) -> bool {
        self.channel == o.channel
            && self.seq == o.seq
            && self.ts == o.ts
            && self.payload == o.payload
    }
}

impl BusEvent {
    pub fn new(channel: String, seq: u64, ts: i64, payload: Arc<Payload>) -> Self {
        BusEvent {
            channel,
            seq,
            ts,
            payload,
            frame: Arc::default(),
            origin: None,
        }
    }

    /// The event as of session `origin`.
    pub fn with_origin(mut self, origin: Option<Arc<Origin>>) -> Self {
        self.origin = origin;
        self
    }

    /// The session the event is of, if known.
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_deref()
    }

    /// This event's frame as `encode` makes it, encoded once however many subscribers write
    /// it.
    pub fn frame_with(&self, encode: impl FnOnce(&BusEvent) -> Vec<u8>) -> &[u8] {
        self.frame.get_or_init(|| encode(self))
    }

    /// The wire shape `{"channel","seq","ts","payload"}`.
    pub fn to_json(&self) -> Json {
        json!({"channel": self.channel, "seq": self.seq, "ts": self.ts, "payload": self.payload.to_json()})
    }
}

/// Publish `payload` on `channel`; answers the event as published (its seq and ts).
#[derive(Message)]
#[rtype(result = "BusEvent")]
pub struct Publish {
    pub channel: String,
    pub payload: Payload,
}

/// [`Publish`] as of session `origin` (a client's `events.publish`: its session's event).
#[derive(Message)]
#[rtype(result = "BusEvent")]
pub struct PublishFrom {
    pub publish: Publish,
    pub origin: Option<Arc<Origin>>,
}

/// Events of `channel` with `seq > since` (the ring when `since` is absent), ascending; `limit`
/// keeps the newest. Unknown channel: empty.
#[derive(Message)]
#[rtype(result = "Vec<BusEvent>")]
pub struct ReadEvents {
    pub channel: String,
    pub since: Option<u64>,
    pub limit: Option<usize>,
    /// The reader's scope (`None`: the local uid, every event).
    pub scope: Option<Scope>,
}

/// A subscription's handle.
pub type SubId = u64;

/// Subscribe to live events of `channel` (no replay).
#[derive(Message)]
#[rtype(result = "SubId")]
pub struct Subscribe {
    pub channel: String,
    pub sub: Recipient<BusEvent>,
    /// The subscriber's scope (`None`: the local uid, every event).
    pub scope: Option<Scope>,
}

/// Subscribe and replay the channel's ring (`seq > since`, everything buffered when `None`)
/// through the subscriber's queue first (kernel `events.subscribe`).
#[derive(Message)]
#[rtype(result = "SubId")]
pub struct SubscribeReplay {
    pub channel: String,
    pub sub: Recipient<BusEvent>,
    pub since: Option<u64>,
    pub scope: Option<Scope>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unsubscribe {
    pub id: SubId,
}

#[derive(Default)]
struct Channel {
    /// The next seq (shared with the [`SubscriberBook`]).
    next: Arc<AtomicU64>,
    ring: VecDeque<BusEvent>,
}

impl Channel {
    fn next(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

/// What outlives one EventBus incarnation: every subscription and each channel's next seq.
/// Owned by the daemon, handed to each bus it starts.
#[derive(Clone, Default)]
pub struct SubscriberBook {
    book: Arc<Mutex<Book>>,
    /// Publishes on their way to the bus (shared by its incarnations, like the book).
    inbox: Arc<Inbox>,
}

#[derive(Default)]
struct Book {
    next_sub: SubId,
    subs: BTreeMap<SubId, (String, Recipient<BusEvent>, Option<Scope>)>,
    seqs: HashMap<String, Arc<AtomicU64>>,
}

impl SubscriberBook {
    /// The handle publishers and subscribers hold: `bus` (its current incarnation) and
    /// this book's inbox. `prompt`: every publish wakes the bus (immediate durability).
    pub fn handle(&self, bus: Supervised<EventBus>, prompt: bool) -> BusHandle {
        BusHandle::new(bus, self.inbox.clone(), prompt)
    }

    /// At a clean stop, after the bus is gone: queue the durable events still in the inbox
    /// on `writer` (seqs from the book's counters), so nothing acknowledged is lost. The
    /// others had no one left to hear them.
    pub fn settle(&self, writer: &Writer) -> usize {
        let (pending, _) = self.inbox.take();
        let mut queued = 0;
        for (p, _) in pending {
            if !DURABLE.contains(&p.channel.as_str()) {
                continue;
            }
            let seq = self.counter(&p.channel, 0).fetch_add(1, Ordering::Relaxed);
            let op = Op::Event {
                channel: p.channel,
                seq,
                ts: journal::now_ns(),
                payload: Arc::new(p.payload),
            };
            match writer.submit(op, None) {
                Ok(_) => queued += 1,
                Err(e) => tracing::warn!("event not persisted at shutdown: {e}"),
            }
        }
        queued
    }

    /// A channel's shared seq counter (created at `start` the first time).
    fn counter(&self, channel: &str, start: u64) -> Arc<AtomicU64> {
        self.book
            .locked()
            .seqs
            .entry(channel.to_string())
            .or_insert_with(|| Arc::new(AtomicU64::new(start)))
            .clone()
    }
}

struct Subscriber {
    channel: String,
    sub: Recipient<BusEvent>,
    scope: Option<Scope>,
    queue: VecDeque<BusEvent>,
    dropped: u64,
    latest_dropped: u64,
    /// Set while its mailbox is full: the wait before the next try (a retry is scheduled).
    backoff: Option<Duration>,
}

impl Subscriber {
    fn new(channel: String, sub: Recipient<BusEvent>, scope: Option<Scope>) -> Self {
        Subscriber {
            channel,
            sub,
            scope,
            queue: VecDeque::new(),
            dropped: 0,
            latest_dropped: 0,
            backoff: None,
        }
    }
}

pub struct EventBus {
    channels: HashMap<String, Channel>,
    subs: BTreeMap<SubId, Subscriber>,
    book: SubscriberBook,
    /// Subscribers taken over from a crashed incarnation (they get the restart marker).
    resumed: Vec<SubId>,
    writer: Option<Arc<Writer>>,
    reg: Registration,
    /// A look at the inbox is scheduled.
    ticking: bool,
}

impl EventBus {
    /// `start_seqs`: the next seq of each durable channel (from `Store::max_seq` + 1).
    pub fn new(
        writer: Option<Arc<Writer>>,
        start_seqs: Vec<(String, u64)>,
        reg: Registration,
    ) -> Self {
        EventBus::with_book(writer, start_seqs, SubscriberBook::default(), reg)
    }

    /// A bus over `book`: the first one (an empty book), or the restart of a crashed one,
    /// which keeps its subscriptions and its seqs (a durable channel's seq is the larger of
    /// the book's and `start_seqs`).
    pub fn with_book(
        writer: Option<Arc<Writer>>,
        start_seqs: Vec<(String, u64)>,
        book: SubscriberBook,
        reg: Registration,
    ) -> Self {
        let mut channels = HashMap::new();
        let (subs, resumed) = {
            let mut b = book.book.locked();
            for (ch, next) in start_seqs {
                let c = b
                    .seqs
                    .entry(ch)
                    .or_insert_with(|| Arc::new(AtomicU64::new(next)));
                c.fetch_max(next, Ordering::Relaxed);
            }
            for (ch, next) in &b.seqs {
                channels.insert(
                    ch.clone(),
                    Channel {
                        next: next.clone(),
                        ring: VecDeque::new(),
                    },
                );
            }
            let subs: BTreeMap<SubId, Subscriber> = b
                .subs
                .iter()
                .map(|(id, (channel, sub, scope))| {
                    let s = Subscriber::new(channel.clone(), sub.clone(), scope.clone());
                    (*id, s)
                })
                .collect();
            let resumed = subs.keys().copied().collect();
            (subs, resumed)
        };
        EventBus {
            channels,
            subs,
            book,
            resumed,
            writer,
            reg,
            ticking: false,
        }
    }

    /// Publish what waits in the inbox, in order; answers how many.
    fn take_inbox(&mut self, ctx: &mut Context<Self>) -> usize {
        let (pending, dropped) = self.book.inbox.take();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "event bus inbox was full: the oldest events were dropped"
            );
            self.reg
                .stats
                .set_error(format!("{dropped} events dropped: the inbox was full"));
        }
        let n = pending.len();
        for (p, origin) in pending {
            self.publish(p.channel, p.payload, origin, ctx);
        }
        n
    }

    /// Look at the inbox again in a [`TICK`] (unless that is already due).
    fn keep_ticking(&mut self, ctx: &mut Context<Self>) {
        if !self.ticking {
            self.ticking = true;
            ctx.run_later(TICK, |act, ctx| act.tick(ctx));
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        self.ticking = false;
        if self.take_inbox(ctx) > 0 || self.book.inbox.disarm_if_empty() {
            self.keep_ticking(ctx);
        }
    }

    /// Tell the inbox which channels have live subscribers (and whether execs are watched).
    fn count_live(&self) {
        let exec = shoal_journal::event::EXEC_CHANNEL;
        let mut live: Vec<String> = Vec::new();
        for s in self.subs.values() {
            if s.channel != exec && !live.contains(&s.channel) {
                live.push(s.channel.clone());
            }
        }
        self.book.inbox.set_live(live);
        self.book
            .inbox
            .set_exec_watched(self.subs.values().any(|s| s.channel == exec));
    }

    /// The next seq of every durable channel of `store` (0 for a fresh store).
    pub fn start_seqs(store: &journal::Store) -> journal::Result<Vec<(String, u64)>> {
        DURABLE
            .iter()
            .map(|ch| Ok((ch.to_string(), store.max_seq(ch)?.map_or(0, |s| s + 1))))
            .collect()
    }

    fn publish(
        &mut self,
        channel: String,
        payload: Payload,
        origin: Option<Arc<Origin>>,
        ctx: &mut Context<Self>,
    ) -> BusEvent {
        let book = &self.book;
        let ch = self
            .channels
            .entry(channel.clone())
            .or_insert_with(|| Channel {
                next: book.counter(&channel, 0),
                ring: VecDeque::new(),
            });
        let seq = ch.next.fetch_add(1, Ordering::Relaxed);
        let ev =
            BusEvent::new(channel, seq, journal::now_ns(), Arc::new(payload)).with_origin(origin);
        if ch.ring.len() >= RING {
            ch.ring.pop_front();
        }
        ch.ring.push_back(ev.clone());
        if DURABLE.contains(&ev.channel.as_str()) {
            if let Some(w) = &self.writer {
                let op = Op::Event {
                    channel: ev.channel.clone(),
                    seq: ev.seq,
                    ts: ev.ts,
                    payload: ev.payload.clone(),
                };
                // Queues only (blocks only if the writer's queue is full: backpressure).
                if let Err(e) = w.submit(op, None) {
                    tracing::warn!(channel = %ev.channel, seq = ev.seq, "event not persisted: {e}");
                    self.reg
                        .stats
                        .set_error(format!("event not persisted: {e}"));
                }
            }
        }
        let ids: Vec<SubId> = self
            .subs
            .iter()
            .filter(|(_, s)| s.channel == ev.channel && admits(s.scope.as_ref(), ev.origin()))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.enqueue(id, ev.clone(), ctx);
        }
        ev
    }

    fn enqueue(&mut self, id: SubId, ev: BusEvent, ctx: &mut Context<Self>) {
        let Some(s) = self.subs.get_mut(&id) else {
            return;
        };
        if s.dropped > 0 || s.queue.len() >= QUEUE {
            s.dropped += 1;
            s.latest_dropped = ev.seq;
        } else {
            s.queue.push_back(ev);
        }
        self.pump(id, ctx);
    }

    /// Deliver subscriber `id`'s queue unless a retry is already scheduled for it; a full
    /// mailbox schedules the first retry.
    fn pump(&mut self, id: SubId, ctx: &mut Context<Self>) {
        if self.subs.get(&id).is_none_or(|s| s.backoff.is_some()) {
            return;
        }
        if self.drain(id) {
            self.schedule_retry(id, Duration::from_millis(1), ctx);
        }
    }

    /// A scheduled retry of a subscriber whose mailbox was full: deliver what fits; if still
    /// full, wait twice as long (at most [`RETRY_MAX`]).
    fn retry(&mut self, id: SubId, ctx: &mut Context<Self>) {
        let Some(waited) = self.subs.get_mut(&id).and_then(|s| s.backoff.take()) else {
            return;
        };
        if self.drain(id) {
            self.schedule_retry(id, (waited * 2).min(RETRY_MAX), ctx);
        }
    }

    fn schedule_retry(&mut self, id: SubId, wait: Duration, ctx: &mut Context<Self>) {
        if let Some(s) = self.subs.get_mut(&id) {
            s.backoff = Some(wait);
            ctx.run_later(wait, move |act, ctx| act.retry(id, ctx));
        }
    }

    /// Move subscriber `id`'s queued events (then its `{dropped}` marker) into its mailbox
    /// until the queue is empty or the mailbox is full. Answers whether it stopped on a full
    /// mailbox. A closed mailbox prunes the subscriber.
    fn drain(&mut self, id: SubId) -> bool {
        let Some(s) = self.subs.get_mut(&id) else {
            return false;
        };
        loop {
            let next = match s.queue.pop_front() {
                Some(ev) => ev,
                None if s.dropped > 0 => {
                    let marker = BusEvent::new(
                        s.channel.clone(),
                        s.latest_dropped,
                        journal::now_ns(),
                        Arc::new(
                            json!({"dropped": s.dropped, "latest_seq": s.latest_dropped}).into(),
                        ),
                    );
                    s.dropped = 0;
                    marker
                }
                None => return false,
            };
            match s.sub.try_send(next) {
                Ok(()) => {}
                Err(SendError::Full(ev)) => {
                    s.queue.push_front(ev);
                    return true;
                }
                Err(SendError::Closed(_)) => {
                    // The subscriber is gone: prune it.
                    self.subs.remove(&id);
                    self.book.book.locked().subs.remove(&id);
                    self.count_live();
                    return false;
                }
            }
        }
    }

    fn subscribe(
        &mut self,
        channel: String,
        sub: Recipient<BusEvent>,
        scope: Option<Scope>,
        replay: Option<Option<u64>>,
        ctx: &mut Context<Self>,
    ) -> SubId {
        // What was published before this subscription is not live for it.
        self.take_inbox(ctx);
        let id = {
            let mut b = self.book.book.locked();
            b.next_sub += 1;
            let id = b.next_sub;
            b.subs
                .insert(id, (channel.clone(), sub.clone(), scope.clone()));
            id
        };
        self.subs
            .insert(id, Subscriber::new(channel.clone(), sub, scope.clone()));
        self.count_live();
        if let Some(since) = replay {
            let events: Vec<BusEvent> = self
                .channels
                .get(&channel)
                .map(|c| {
                    c.ring
                        .iter()
                        .filter(|e| since.is_none_or(|s| e.seq > s))
                        .filter(|e| admits(scope.as_ref(), e.origin()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            for ev in events {
                self.enqueue(id, ev, ctx);
            }
        }
        // Published while the count of live subscriptions was not yet raised: delivered now
        // rather than at the next tick.
        self.take_inbox(ctx);
        id
    }
}

impl Actor for EventBus {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(4096);
        // Taken over from a crashed bus: tell each subscriber of a channel that had
        // events that what was queued for it may be lost.
        for id in std::mem::take(&mut self.resumed) {
            let Some(s) = self.subs.get(&id) else {
                continue;
            };
            let latest = self
                .channels
                .get(&s.channel)
                .and_then(|c| c.next().checked_sub(1));
            if let Some(latest) = latest {
                let marker = BusEvent::new(
                    s.channel.clone(),
                    latest,
                    journal::now_ns(),
                    Arc::new(json!({"restarted": true, "latest_seq": latest}).into()),
                );
                self.enqueue(id, marker, ctx);
            }
        }
        // What a crashed incarnation left in the inbox (its Drain and tick died with it).
        self.count_live();
        self.take_inbox(ctx);
        self.keep_ticking(ctx);
    }
}

impl Handler<Drain> for EventBus {
    type Result = ();

    fn handle(&mut self, _msg: Drain, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.take_inbox(ctx);
        self.keep_ticking(ctx);
    }
}

impl Handler<Crash> for EventBus {
    type Result = ();

    /// The debug hook: panic, for the daemon to restart the bus.
    fn handle(&mut self, _msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        panic!("event bus: crash requested by debug hook");
    }
}

impl Handler<Publish> for EventBus {
    type Result = MessageResult<Publish>;

    fn handle(&mut self, msg: Publish, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.take_inbox(ctx);
        MessageResult(self.publish(msg.channel, msg.payload, None, ctx))
    }
}

impl Handler<PublishFrom> for EventBus {
    type Result = MessageResult<PublishFrom>;

    fn handle(&mut self, msg: PublishFrom, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.take_inbox(ctx);
        let p = msg.publish;
        MessageResult(self.publish(p.channel, p.payload, msg.origin, ctx))
    }
}

/// The names of the channels that have had events, sorted
/// (`completion/complete` of `shoal://events/{channel}`).
#[derive(Message)]
#[rtype(result = "Vec<String>")]
pub struct ListChannels {
    /// The asker's scope: channels named after sessions or tasks are not listed for a token.
    pub scope: Option<Scope>,
}

impl Handler<ListChannels> for EventBus {
    type Result = Vec<String>;

    fn handle(&mut self, msg: ListChannels, ctx: &mut Context<Self>) -> Vec<String> {
        self.reg.stats.handled();
        self.take_inbox(ctx);
        let scope = msg.scope;
        let mut names: Vec<String> = self
            .channels
            .keys()
            .filter(|n| scope.as_ref().is_none_or(|s| s.lists_channel(n)))
            .cloned()
            .collect();
        names.sort();
        names
    }
}

impl Handler<Subscribe> for EventBus {
    type Result = MessageResult<Subscribe>;

    fn handle(&mut self, msg: Subscribe, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.subscribe(msg.channel, msg.sub, msg.scope, None, ctx))
    }
}

impl Handler<SubscribeReplay> for EventBus {
    type Result = MessageResult<SubscribeReplay>;

    fn handle(&mut self, msg: SubscribeReplay, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.subscribe(msg.channel, msg.sub, msg.scope, Some(msg.since), ctx))
    }
}

impl Handler<Unsubscribe> for EventBus {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.subs.remove(&msg.id);
        self.book.book.locked().subs.remove(&msg.id);
        self.count_live();
    }
}

#[cfg(test)]
mod tests;
