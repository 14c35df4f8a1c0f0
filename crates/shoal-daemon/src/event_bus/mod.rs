//! EventBus: the kernel-global event channels (docs/rules.md §19).
//!
//! Per channel: a ring of the last [`RING`] events and a seq counter from 0. The durable
//! channels (`journal`, `session.transcript`) also go to the journal (an `Op::Event` queued on
//! the writer, never a commit here), so their seqs continue after a restart and `events.read`
//! with a `since` older than the ring is served from the store (on a blocking thread).
//!
//! Each channel fans out through a `tokio::sync::broadcast` channel of [`QUEUE`] events.
//! Every subscriber (a `Recipient<BusEvent>`) has its own forwarding task on the bus's
//! arbiter: it takes each event from its broadcast receiver as it comes into a backlog, and
//! puts the backlog's oldest in the subscriber's mailbox (without waiting while the mailbox
//! has room; while it is full, the task awaits that event's delivery). So publishing never
//! waits on a subscriber and a stalled one never slows the others: it falls behind in its
//! backlog, which keeps at most [`QUEUE`] events and [`LAG_BYTES`] (and every backlog
//! together [`LAG_BUS_BYTES`]) by dropping its oldest; the subscriber then gets one marker
//! `{dropped: n, latest_seq}` (seq = the latest dropped) before anything newer
//! (docs/rules.md §19; `backlog.rs`). A subscriber whose mailbox is closed (its connection
//! ended) is pruned.
//!
//! The subscriptions and the seq counters also live in a [`SubscriberBook`] outside the actor
//! (written on subscribe, unsubscribe and prune; a counter is one atomic per publish), so
//! when the daemon restarts a crashed bus the new one keeps every subscription (same ids) and
//! every channel's seq: each subscriber of a channel that had events first gets one marker
//! `{restarted: true, latest_seq}` (what was queued for it or in flight is lost; `events.read`
//! recovers the durable channels from the journal). The rings are not kept.
//!
//! Publishers do not message the bus per event: they put their publishes in the bus's
//! [`Inbox`] through a [`BusHandle`], and the first publish since the bus last took the
//! inbox wakes it with one [`Drain`] (a session publishes three events per exec: one
//! wake-up, not three). The bus takes the inbox in order before anything that could see it:
//! every message it handles (a read, a subscribe, a direct [`Publish`]) drains the inbox
//! first. Nothing polls. At a clean stop the daemon queues what is left for the journal
//! ([`SubscriberBook::settle`]). The inbox holds at most [`MAX_PENDING`] publishes (a bus past
//! its restart limit never takes it): past that the oldest are dropped, and the bus's row in
//! `shoal status` says how many once it takes the inbox again.
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

use actix::prelude::*;
use serde_json::{json, Value as Json};
use tokio::sync::broadcast;

use crate::health::{Registration, Supervised};
use crate::msg::Crash;
pub use shoal_journal::event::Payload;
use shoal_journal::{self as journal, JournalWriter as Writer, Op};

mod backlog;
mod inbox;
mod read;
mod scope;
pub use backlog::{Lag, LAG_BUS_BYTES, LAG_BYTES};
pub use inbox::{BusHandle, Drain, Inbox, MAX_PENDING};
pub use scope::{admits, Origin, Scope};
use shoal_base::sync::Locked;

/// Events kept in memory per channel.
pub const RING: usize = 1024;
/// Bytes (of payload JSON) kept in memory per channel: fewer events when
/// they are large, never less than the newest.
pub const RING_BYTES: usize = 256 << 10;
/// Bytes every channel's ring together may hold (each channel counted
/// [`CHANNEL_BYTES`] more). Past it, the channel published to longest ago
/// loses its ring, and goes if nobody subscribes to it.
pub const BUS_BYTES: usize = 32 << 20;
/// What a channel costs beside its events.
pub const CHANNEL_BYTES: usize = 1024;
/// The largest payload a client may publish on a `user.*` channel (kernel
/// `events.publish`, `channel(...).emit` in the language).
pub const MAX_EVENT_BYTES: usize = 64 << 10;

/// The bytes of a `user.*` payload given as JSON, or why it is refused.
pub fn checked_json_len(payload: &Json) -> Result<usize, String> {
    let mut n = shoal_base::count::ByteCount::default();
    let _ = serde_json::to_writer(&mut n, payload);
    oversized(n.0).map_or(Ok(n.0), Err)
}

/// Why a `user.*` payload of `len` bytes is refused (`None`: it is not).
pub fn oversized(len: usize) -> Option<String> {
    (len > MAX_EVENT_BYTES).then(|| {
        format!(
            "an event carries at most {} KiB of JSON; this one is {len} bytes",
            MAX_EVENT_BYTES >> 10
        )
    })
}
/// Events a subscriber may fall behind (the broadcast capacity) before it starts dropping.
pub const QUEUE: usize = 256;
/// Channels persisted to (and replayed from) the journal.
pub const DURABLE: [&str; 2] = ["journal", "session.transcript"];

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
    /// What it counts against its ring's bytes.
    bytes: usize,
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
            bytes: 0,
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

struct Channel {
    /// The next seq (shared with the [`SubscriberBook`]).
    next: Arc<AtomicU64>,
    ring: VecDeque<BusEvent>,
    /// The bytes of the events in `ring`.
    bytes: usize,
    /// When it was last published to (the bus's count of publishes).
    last: u64,
    /// The live fan-out: one receiver per subscriber of the channel (made
    /// by the first subscription).
    live: Option<broadcast::Sender<BusEvent>>,
}

impl Channel {
    fn new(next: Arc<AtomicU64>) -> Self {
        Channel {
            next,
            ring: VecDeque::new(),
            bytes: 0,
            last: 0,
            live: None,
        }
    }

    fn next(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    fn subscribed(&self) -> bool {
        self.live.as_ref().is_some_and(|l| l.receiver_count() > 0)
    }

    /// Drop the oldest event: its bytes.
    fn pop(&mut self) -> usize {
        let bytes = self.ring.pop_front().map_or(0, |e| e.bytes);
        self.bytes -= bytes;
        bytes
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
    /// The next seq of every channel the bus let go: a channel made again
    /// starts there, so no seq is given twice on one name.
    floor: u64,
}

impl SubscriberBook {
    /// The handle publishers and subscribers hold: `bus` (its current incarnation) and
    /// this book's inbox.
    pub fn handle(&self, bus: Supervised<EventBus>) -> BusHandle {
        BusHandle::new(bus, self.inbox.clone())
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

    /// A channel's shared seq counter (created at `start`, or past every
    /// seq of a channel let go, the first time).
    fn counter(&self, channel: &str, start: u64) -> Arc<AtomicU64> {
        let mut b = self.book.locked();
        let start = start.max(b.floor);
        b.seqs
            .entry(channel.to_string())
            .or_insert_with(|| Arc::new(AtomicU64::new(start)))
            .clone()
    }

    /// Forget `channel`'s counter (the bus let the channel go).
    fn forget(&self, channel: &str) {
        let mut b = self.book.locked();
        if let Some(c) = b.seqs.remove(channel) {
            b.floor = b.floor.max(c.load(Ordering::Relaxed));
        }
    }
}

/// A live subscription: its channel and the task forwarding its events.
struct Subscriber {
    channel: String,
    task: SpawnHandle,
}

pub struct EventBus {
    channels: HashMap<String, Channel>,
    subs: BTreeMap<SubId, Subscriber>,
    book: SubscriberBook,
    /// Subscribers taken over from a crashed incarnation (they get the restart marker).
    resumed: Vec<(SubId, String, Recipient<BusEvent>, Option<Scope>)>,
    writer: Option<Arc<Writer>>,
    reg: Registration,
    /// The bytes every channel holds (events and [`CHANNEL_BYTES`] each).
    held: usize,
    /// Publishes so far (a channel's `last`).
    published: u64,
    /// What the subscriptions' waiting events hold together (`backlog.rs`).
    lag: Lag,
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
                channels.insert(ch.clone(), Channel::new(next.clone()));
            }
            let resumed = b
                .subs
                .iter()
                .map(|(id, (channel, sub, scope))| {
                    (*id, channel.clone(), sub.clone(), scope.clone())
                })
                .collect();
            (BTreeMap::new(), resumed)
        };
        let held = channels.len() * CHANNEL_BYTES;
        EventBus {
            channels,
            subs,
            book,
            resumed,
            writer,
            reg,
            held,
            published: 0,
            lag: Lag::default(),
        }
    }

    /// Publish what waits in the inbox, in order.
    fn take_inbox(&mut self) {
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
        for (p, origin) in pending {
            self.publish(p.channel, p.payload, origin);
        }
    }

    /// Tell the inbox whether anyone watches the live view of execs.
    fn count_live(&self) {
        let exec = shoal_journal::event::EXEC_CHANNEL;
        self.book
            .inbox
            .set_exec_watched(self.subs.values().any(|s| s.channel == exec));
    }

    /// Channel `name`, created (its seq from the book) if it is new.
    fn channel(&mut self, name: &str) -> &mut Channel {
        if !self.channels.contains_key(name) {
            self.held += CHANNEL_BYTES;
        }
        let book = &self.book;
        self.channels
            .entry(name.to_string())
            .or_insert_with(|| Channel::new(book.counter(name, 0)))
    }

    /// Keep what the channels hold within [`BUS_BYTES`]: the channel
    /// published to longest ago (never `keep`, the one just published to)
    /// loses its ring, and goes with its counter if nobody subscribes to it
    /// and it is not durable.
    fn trim(&mut self, keep: &str) {
        while self.held > BUS_BYTES {
            let oldest = self
                .channels
                .iter()
                .filter(|(name, c)| {
                    name.as_str() != keep
                        && (!c.ring.is_empty()
                            || !(c.subscribed() || DURABLE.contains(&name.as_str())))
                })
                .min_by_key(|(_, c)| c.last)
                .map(|(name, _)| name.clone());
            let Some(name) = oldest else {
                return;
            };
            let Some(c) = self.channels.get_mut(&name) else {
                return;
            };
            while !c.ring.is_empty() {
                self.held -= c.pop();
            }
            c.ring = VecDeque::new();
            if !(c.subscribed() || DURABLE.contains(&name.as_str())) {
                self.channels.remove(&name);
                self.book.forget(&name);
                self.held -= CHANNEL_BYTES;
            }
        }
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
    ) -> BusEvent {
        self.published += 1;
        let published = self.published;
        let bytes = payload.approx_bytes();
        let ch = self.channel(&channel);
        let seq = ch.next.fetch_add(1, Ordering::Relaxed);
        let mut ev =
            BusEvent::new(channel, seq, journal::now_ns(), Arc::new(payload)).with_origin(origin);
        ev.bytes = bytes;
        ch.ring.push_back(ev.clone());
        ch.bytes += bytes;
        ch.last = published;
        let mut freed = 0;
        while ch.ring.len() > 1 && (ch.ring.len() > RING || ch.bytes > RING_BYTES) {
            freed += ch.pop();
        }
        // No receiver: nobody listens, nothing to do.
        if let Some(live) = &ch.live {
            let _ = live.send(ev.clone());
        }
        self.held = self.held + bytes - freed;
        self.trim(&ev.channel);
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
        ev
    }

    /// Start forwarding channel `channel`'s live events to `sub` as subscription `id`,
    /// `first` before them. From here on every publish reaches it (or is counted as dropped).
    fn forward(
        &mut self,
        id: SubId,
        channel: String,
        sub: Recipient<BusEvent>,
        scope: Option<Scope>,
        first: Vec<BusEvent>,
        ctx: &mut Context<Self>,
    ) {
        let rx = self
            .channel(&channel)
            .live
            .get_or_insert_with(|| broadcast::channel(QUEUE).0)
            .subscribe();
        let lag = self.lag.clone();
        let task = ctx.spawn(
            backlog::deliver(rx, sub, scope, first, lag)
                .into_actor(self)
                .map(move |(), act, _ctx| {
                    // The subscriber is gone: prune it.
                    act.subs.remove(&id);
                    act.book.book.locked().subs.remove(&id);
                    act.count_live();
                }),
        );
        self.subs.insert(id, Subscriber { channel, task });
        self.count_live();
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
        self.take_inbox();
        let id = {
            let mut b = self.book.book.locked();
            b.next_sub += 1;
            let id = b.next_sub;
            b.subs
                .insert(id, (channel.clone(), sub.clone(), scope.clone()));
            id
        };
        let first: Vec<BusEvent> = match replay {
            None => Vec::new(),
            Some(since) => self
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
                .unwrap_or_default(),
        };
        self.forward(id, channel, sub, scope, first, ctx);
        id
    }
}

impl Actor for EventBus {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(4096);
        // Taken over from a crashed bus: tell each subscriber of a channel that had
        // events that what was on its way to it may be lost.
        for (id, channel, sub, scope) in std::mem::take(&mut self.resumed) {
            let latest = self
                .channels
                .get(&channel)
                .and_then(|c| c.next().checked_sub(1));
            let first = latest
                .map(|latest| {
                    BusEvent::new(
                        channel.clone(),
                        latest,
                        journal::now_ns(),
                        Arc::new(json!({"restarted": true, "latest_seq": latest}).into()),
                    )
                })
                .into_iter()
                .collect();
            self.forward(id, channel, sub, scope, first, ctx);
        }
        // What a crashed incarnation left in the inbox (its Drain died with it), published
        // after the subscriptions are taken over, so they hear it.
        self.count_live();
        self.take_inbox();
    }
}

impl Handler<Drain> for EventBus {
    type Result = ();

    fn handle(&mut self, _msg: Drain, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.take_inbox();
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

    fn handle(&mut self, msg: Publish, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.take_inbox();
        MessageResult(self.publish(msg.channel, msg.payload, None))
    }
}

impl Handler<PublishFrom> for EventBus {
    type Result = MessageResult<PublishFrom>;

    fn handle(&mut self, msg: PublishFrom, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.take_inbox();
        let p = msg.publish;
        MessageResult(self.publish(p.channel, p.payload, msg.origin))
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

    fn handle(&mut self, msg: ListChannels, _ctx: &mut Context<Self>) -> Vec<String> {
        self.reg.stats.handled();
        self.take_inbox();
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

    fn handle(&mut self, msg: Unsubscribe, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        if let Some(s) = self.subs.remove(&msg.id) {
            ctx.cancel_future(s.task);
        }
        self.book.book.locked().subs.remove(&msg.id);
        self.count_live();
    }
}

#[cfg(test)]
mod tests;
