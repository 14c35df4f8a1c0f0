//! [`JournalWriter`]: the group-commit writer, the only writer of the store. It owns one OS
//! thread fed by a bounded `std::sync::mpsc::sync_channel` (a full queue blocks the submitter:
//! backpressure, never unbounded memory). Hashing, compression and redb commits all happen on
//! that thread, never on the caller's.
//!
//! Durability (`journal.durability`):
//! - `Immediate`: an op is acknowledged (its [`Done`] runs, [`JournalWriter::submit_wait`]
//!   returns) only after the commit that contains it returned (fsync'd). Ops that queue up while
//!   a commit runs share the next commit (group commit).
//! - `Batched`: an op is acknowledged as soon as it is queued; ops are committed durably by
//!   `flush_ms` after the oldest unflushed acknowledgement (the commit starts early by its own
//!   recent duration, at most half of `flush_ms`, so it ends near the deadline, fsync included),
//!   or when `max_batch` ops are pending. A crash loses at most the window: `flush_ms`, or,
//!   when commits take longer than half of it, about twice the commit time (an op acknowledged
//!   just after a commit began waits for that commit and its own). [`WriterStats`] reports the
//!   window each durable commit kept (`last_window_us`, `worst_window_us`). redb recovers to
//!   the last commit.
//!
//! In batched mode an op does not wake the writer thread: it goes into a shared inbox that the
//! thread drains when it wakes anyway (its flush deadline, a control message, `max_batch` ops
//! waiting). Only the first op after the thread went idle, or a full batch, wakes it (the `armed`
//! flag): a steady stream of execs costs the writer one wake-up per `flush_ms`, not one per op.
//! The inbox holds at most `queue` ops; past that a submitter waits for the thread to drain it
//! (backpressure, as the bounded channel gives in immediate mode).
//!
//! Entry ids are allocated at submit time (under the submit lock, so queue order = id order),
//! which is what lets batched mode acknowledge with an id before the commit.
//! [`JournalWriter::flush`] and shutdown (explicit or on drop) commit everything durably.
//! [`JournalWriter::query`] gives read-your-writes: if acknowledged ops are still pending it first
//! asks for a visibility commit (`Durability::None`: visible to readers, made durable by the
//! next timed commit).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod settings;

pub use settings::{Durability, WriterConfig, WriterStats};

use super::store::{Op, Store};
use super::{now_ns, Entry, EntryId, JournalError, Query, Result, Scope};
use shoal_base::sync::Locked;

/// Batched mode: capacity of the writer thread's channel, which carries wake-ups, flushes and
/// shutdown only (a sender past it waits for the thread to take one).
pub(super) const CONTROL_QUEUE: usize = 64;

/// Acknowledgement callback: the op's result (`Some(id)` for `Append`/`Record`). Runs on the
/// writer thread after the commit (immediate mode) or on the submitter's thread right away
/// (batched mode); keep it short (send on a channel) and never call back into the writer from
/// it (in immediate mode that would wait on the writer thread itself).
pub type Done = Box<dyn FnOnce(Result<Option<EntryId>>) + Send + 'static>;
/// Flush callback.
pub type FlushDone = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// What [`JournalWriter::submit`] returns at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The id allocated for `Append`/`Record`.
    pub entry_id: Option<EntryId>,
}

enum Msg {
    Op(Box<Op>, Option<Done>),
    /// Batched mode: ops wait in the inbox ([`Shared::inbox`]).
    Wake,
    Flush(bool, FlushDone),
    Shutdown,
    Crash,
}

struct Submitter {
    tx: SyncSender<Msg>,
    next_id: EntryId,
}

struct Shared {
    stats: Mutex<WriterStats>,
    queued: AtomicU64,
    degraded: std::sync::atomic::AtomicBool,
    /// Batched mode: acknowledged ops not yet taken by the writer thread, in id order.
    inbox: Mutex<Inbox>,
    /// Signalled when the writer thread drained the inbox (a full inbox's submitter waits).
    drained: Condvar,
    /// The writer thread will drain the inbox without being told (it has a deadline, or a
    /// wake-up is on its way). Cleared by the thread just before it sleeps with no deadline.
    armed: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Inbox {
    ops: Vec<Op>,
    /// When the oldest op in `ops` was acknowledged.
    since: Option<Instant>,
    /// The writer thread's oldest acknowledged op not yet durable (taken from the inbox,
    /// possibly inside a commit that has not returned), published for [`JournalWriter::stats`].
    taken_since: Option<Instant>,
}

impl Inbox {
    /// The oldest acknowledgement a crash now would lose.
    fn at_risk_since(&self) -> Option<Instant> {
        match (self.since, self.taken_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The writer handle (`Send + Sync`; share it by reference or `Arc`).
pub struct JournalWriter {
    store: Arc<Store>,
    cfg: WriterConfig,
    sub: Mutex<Option<Submitter>>,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl JournalWriter {
    /// Start the writer thread for `store` (one writer per store).
    pub fn start(store: Arc<Store>, cfg: WriterConfig) -> Result<JournalWriter> {
        if store
            .writer_attached
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(JournalError::Invalid(
                "a journal writer is already running for this store".into(),
            ));
        }
        let next_id = store.next_id()?;
        // `sync_channel(n)` allocates and touches all its n slots at once (~40 bytes each).
        // In batched mode ops wait in the inbox and the channel carries control messages only.
        let capacity = match cfg.durability {
            Durability::Immediate => cfg.queue.max(1),
            Durability::Batched => cfg.queue.clamp(1, CONTROL_QUEUE),
        };
        let (tx, rx) = mpsc::sync_channel(capacity);
        let shared = Arc::new(Shared {
            stats: Mutex::new(WriterStats {
                durability: cfg.durability,
                ..WriterStats::default()
            }),
            queued: AtomicU64::new(0),
            degraded: std::sync::atomic::AtomicBool::new(false),
            inbox: Mutex::new(Inbox::default()),
            drained: Condvar::new(),
            armed: std::sync::atomic::AtomicBool::new(false),
        });
        let mut w = Worker {
            store: store.clone(),
            cfg,
            shared: shared.clone(),
            pending: Vec::new(),
            oldest_ack: None,
            undurable_since: None,
            retry: None,
            needs_reopen: false,
            last_log: None,
            commit_time: Duration::ZERO,
        };
        let thread = std::thread::Builder::new()
            .name("shoal-journal".into())
            .spawn(move || {
                // Commits are background work in batched mode; in immediate mode the
                // writer still gets its fair share, and an idle request path all of it.
                shoal_base::procmem::background_thread();
                w.run(rx)
            })
            .map_err(|e| JournalError::Storage(format!("cannot start writer thread: {e}")))?;
        Ok(JournalWriter {
            store,
            cfg,
            sub: Mutex::new(Some(Submitter { tx, next_id })),
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The store, for reads (`query`, `blob_get`, `transcript_get`, `events_read`, ...).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn config(&self) -> WriterConfig {
        self.cfg
    }

    /// Queue one op. Allocates the entry id of `Append`/`Record` (when `id` is `None`) and
    /// returns it at once; `done` runs when the op is acknowledged per the durability mode.
    /// Blocks only while the queue is full.
    pub fn submit(&self, mut op: Op, mut done: Option<Done>) -> Result<Submitted> {
        let entry_id;
        {
            let mut g = self.sub.locked();
            let sub = g.as_mut().ok_or(JournalError::WriterGone)?;
            entry_id = match &mut op {
                Op::Append { id, .. } | Op::Record { id, .. } => {
                    let v = *id.get_or_insert(sub.next_id);
                    sub.next_id = sub.next_id.max(v + 1);
                    Some(v)
                }
                _ => None,
            };
            self.shared.queued.fetch_add(1, Ordering::SeqCst);
            match self.cfg.durability {
                Durability::Immediate => {
                    if sub.tx.send(Msg::Op(Box::new(op), done.take())).is_err() {
                        self.shared.queued.fetch_sub(1, Ordering::SeqCst);
                        return Err(JournalError::WriterGone);
                    }
                }
                Durability::Batched => {
                    if let Err(e) = self.put_in_inbox(&sub.tx, op) {
                        self.shared.queued.fetch_sub(1, Ordering::SeqCst);
                        return Err(e);
                    }
                }
            }
            self.shared.stats.locked().submitted += 1;
            drop(g);
            // Batched: acknowledged once queued (immediate mode took `done` along).
            if let Some(d) = done {
                d(Ok(entry_id));
            }
        }
        Ok(Submitted { entry_id })
    }

    /// Whether `n` more ops would be queued without waiting (batched durability and room in
    /// the inbox); a thread that must not block checks this first.
    pub fn has_room(&self, n: usize) -> bool {
        self.cfg.durability == Durability::Batched
            && self.shared.inbox.locked().ops.len() + n <= self.cfg.queue.max(1)
    }

    /// Batched mode: add `op` to the inbox (waiting while it is full), and wake the writer
    /// thread only when it is idle or a batch is complete. Called under the submit lock.
    fn put_in_inbox(&self, tx: &SyncSender<Msg>, op: Op) -> Result<()> {
        let gone = |r: std::result::Result<(), TrySendError<Msg>>| match r {
            Err(TrySendError::Disconnected(_)) => Err(JournalError::WriterGone),
            _ => Ok(()),
        };
        let cap = self.cfg.queue.max(1);
        let mut inbox = self.shared.inbox.locked();
        while inbox.ops.len() >= cap {
            // The thread was woken when the batch filled; a thread that died never drains.
            gone(tx.try_send(Msg::Wake))?;
            inbox = self
                .shared
                .drained
                .wait_timeout(inbox, Duration::from_millis(50))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        inbox.since.get_or_insert_with(Instant::now);
        inbox.ops.push(op);
        let n = inbox.ops.len();
        drop(inbox);
        let full = n >= self.cfg.max_batch.max(1).min(cap);
        // SeqCst pairs with the thread's clear-then-look in `Worker::idle`: either it sees
        // this op in the inbox, or this sees `armed` false and wakes it.
        if full || !self.shared.armed.swap(true, Ordering::SeqCst) {
            // A full channel already holds a message the thread will wake for.
            gone(tx.try_send(Msg::Wake))?;
            self.shared.stats.locked().wakes += 1;
        }
        Ok(())
    }

    /// Queue one op and block until it is acknowledged (immediately in batched mode).
    pub fn submit_wait(&self, op: Op) -> Result<Option<EntryId>> {
        if self.cfg.durability == Durability::Batched {
            // Acknowledged once queued: nothing to wait for.
            return self.submit(op, None).map(|s| s.entry_id);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(
            op,
            Some(Box::new(move |r| {
                let _ = tx.send(r);
            })),
        )?;
        rx.recv().map_err(|_| JournalError::WriterGone)?
    }

    /// Commit everything submitted so far durably; `done` runs on the writer thread afterwards.
    pub fn flush_with(&self, done: FlushDone) -> Result<()> {
        self.send_ctl(Msg::Flush(true, done))
    }

    /// Blocking [`Self::flush_with`].
    pub fn flush(&self) -> Result<()> {
        self.ctl_wait(true)
    }

    /// Make everything submitted so far visible to readers (not necessarily durable yet).
    pub fn sync_visible(&self) -> Result<()> {
        if self.shared.queued.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        self.ctl_wait(false)
    }

    fn ctl_wait(&self, durable: bool) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        self.send_ctl(Msg::Flush(
            durable,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        ))?;
        rx.recv().map_err(|_| JournalError::WriterGone)?
    }

    fn send_ctl(&self, m: Msg) -> Result<()> {
        // Sent outside the submit lock: a full channel (batched mode keeps it small) then
        // holds up this caller only, never the submitters.
        let tx = {
            let g = self.sub.locked();
            g.as_ref().ok_or(JournalError::WriterGone)?.tx.clone()
        };
        tx.send(m).map_err(|_| JournalError::WriterGone)
    }

    /// Read-your-writes query: acknowledged entries are always included.
    pub fn query(&self, q: &Query, scope: &Scope) -> Result<Vec<Entry>> {
        self.sync_visible()?;
        self.store.query(q, scope)
    }

    /// The last commit failed and the writer is retrying (cheap; see [`WriterStats`]).
    pub fn is_degraded(&self) -> bool {
        self.shared.degraded.load(Ordering::SeqCst)
    }

    pub fn stats(&self) -> WriterStats {
        let at_risk = self.shared.inbox.locked().at_risk_since();
        let mut s = self.shared.stats.locked().clone();
        s.queued = self.shared.queued.load(Ordering::SeqCst);
        s.at_risk_us = at_risk.map_or(0, |t| t.elapsed().as_micros().min(u64::MAX as u128) as u64);
        s
    }

    /// Commit everything durably and stop the thread. Also done on drop.
    pub fn shutdown(&self) -> Result<()> {
        self.stop(Msg::Shutdown)
    }

    /// Test aid: stop the thread *without* committing what is pending, as a crash would.
    #[doc(hidden)]
    pub fn simulate_crash(&self) {
        let _ = self.stop(Msg::Crash);
    }

    fn stop(&self, m: Msg) -> Result<()> {
        let sub = self.sub.locked().take();
        if let Some(sub) = sub {
            let _ = sub.tx.send(m);
        }
        let t = self.thread.locked().take();
        if let Some(t) = t {
            if t.join().is_err() {
                return Err(JournalError::Storage(
                    "journal writer thread panicked".into(),
                ));
            }
        }
        self.store.writer_attached.store(false, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for JournalWriter {
    fn drop(&mut self) {
        let _ = self.stop(Msg::Shutdown);
    }
}

struct Worker {
    store: Arc<Store>,
    cfg: WriterConfig,
    shared: Arc<Shared>,
    pending: Vec<(Op, Option<Done>)>,
    /// Batched: when the oldest acknowledged-but-not-durable op was queued.
    oldest_ack: Option<Instant>,
    /// A visibility commit happened; a durable commit is due by this time + flush_ms.
    undurable_since: Option<Instant>,
    /// Degraded: when to try again, and the pause after that.
    retry: Option<(Instant, Duration)>,
    /// A failed commit poisons redb's open database: reopen before the next try.
    needs_reopen: bool,
    /// Failure log lines are rate-limited.
    last_log: Option<Instant>,
    /// Recent durable commits' duration (moving average): batched commits start this much
    /// before their deadline.
    commit_time: Duration,
}

/// First pause after a failed commit; doubles up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);
/// At most one failure log line per this interval.
const FAIL_LOG_EVERY: Duration = Duration::from_secs(10);

impl Worker {
    fn run(&mut self, rx: mpsc::Receiver<Msg>) {
        let flush = Duration::from_millis(self.cfg.flush_ms);
        let mut inbox: VecDeque<Msg> = VecDeque::new();
        loop {
            self.take_inbox();
            if inbox.is_empty() && self.retry.is_none() && self.due().is_none() {
                self.idle();
            }
            let msg = if let Some(m) = inbox.pop_front() {
                m
            } else {
                // Degraded: the next try comes from the retry schedule, not flush_ms.
                let wake = match self.retry {
                    Some((at, _)) => Some(at),
                    None => self.deadline(flush),
                };
                match wake {
                    None => match rx.recv() {
                        Ok(m) => m,
                        Err(_) => Msg::Shutdown,
                    },
                    Some(at) => {
                        let wait = at.saturating_duration_since(Instant::now());
                        match rx.recv_timeout(wait) {
                            Ok(m) => m,
                            Err(RecvTimeoutError::Timeout) => {
                                self.take_inbox();
                                let _ = self.commit(true);
                                continue;
                            }
                            Err(RecvTimeoutError::Disconnected) => Msg::Shutdown,
                        }
                    }
                }
            };
            // Whatever the message, the inbox's ops came before it.
            self.take_inbox();
            match msg {
                Msg::Wake => self.batched_due(flush),
                Msg::Op(op, done) => {
                    self.pending.push((*op, done));
                    match self.cfg.durability {
                        Durability::Immediate => {
                            // group commit: take whatever queued up meanwhile
                            while self.pending.len() < self.cfg.max_batch.max(1) {
                                match rx.try_recv() {
                                    Ok(Msg::Op(op, done)) => self.pending.push((*op, done)),
                                    Ok(other) => {
                                        inbox.push_back(other);
                                        break;
                                    }
                                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                                }
                            }
                            let _ = self.commit(true);
                        }
                        Durability::Batched => {
                            self.oldest_ack.get_or_insert_with(Instant::now);
                            self.publish_due();
                            self.batched_due(flush);
                        }
                    }
                }
                Msg::Flush(durable, done) => {
                    let r = self.commit(durable);
                    done(r);
                }
                Msg::Shutdown => {
                    let _ = self.commit(true);
                    return;
                }
                Msg::Crash => return,
            }
        }
    }

    /// Batched: commit when the deadline passed or a batch is complete (under a steady stream
    /// the thread may never time out), and bound what piles up while degraded.
    fn batched_due(&mut self, flush: Duration) {
        let now = Instant::now();
        let late = match self.retry {
            Some((at, _)) => at <= now,
            None => {
                self.deadline(flush).is_some_and(|t| t <= now)
                    || self.pending.len() >= self.cfg.max_batch.max(1)
            }
        };
        if late {
            let _ = self.commit(true);
        }
        self.bound_pending();
    }

    /// Move the inbox's ops (batched mode) to `pending`, oldest acknowledgement kept.
    fn take_inbox(&mut self) {
        let mut inbox = self.shared.inbox.locked();
        if inbox.ops.is_empty() {
            return;
        }
        let since = inbox.since.take();
        self.pending
            .extend(inbox.ops.drain(..).map(|op| (op, None)));
        if let Some(t) = since {
            self.oldest_ack = Some(self.oldest_ack.map_or(t, |o| o.min(t)));
        }
        // Published under the same lock, so `stats` never sees the ops in neither place.
        inbox.taken_since = self.due();
        drop(inbox);
        self.shared.drained.notify_all();
    }

    /// Publish [`Worker::due`] after it changed outside [`Worker::take_inbox`].
    fn publish_due(&self) {
        self.shared.inbox.locked().taken_since = self.due();
    }

    /// About to sleep with nothing due: from now on a submitter must wake the thread. Clear
    /// `armed` first, then look again (see [`JournalWriter::put_in_inbox`]).
    fn idle(&mut self) {
        self.shared.armed.store(false, Ordering::SeqCst);
        self.take_inbox();
        if !self.pending.is_empty() {
            self.shared.armed.store(true, Ordering::SeqCst);
        }
    }

    /// When the next durable commit should start: `flush` after the oldest not-yet-durable
    /// acknowledgement, less the time a commit takes lately (at most half of `flush`).
    fn deadline(&self, flush: Duration) -> Option<Instant> {
        let lead = self.commit_time.min(flush / 2);
        self.due().map(|t| t + flush - lead)
    }

    /// A durable commit that began at `t0` ended now; `due` was the oldest acknowledgement
    /// it made durable.
    fn durable_done(&mut self, t0: Instant, due: Option<Instant>) {
        let took = t0.elapsed();
        self.commit_time = (self.commit_time * 3 + took) / 4;
        if let Some(due) = due {
            let w = due.elapsed().as_micros().min(u64::MAX as u128) as u64;
            let mut s = self.shared.stats.locked();
            s.last_window_us = w;
            s.worst_window_us = s.worst_window_us.max(w);
        }
    }

    /// When the oldest not-yet-durable acknowledgement happened.
    fn due(&self) -> Option<Instant> {
        match (self.oldest_ack, self.undurable_since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Batched mode keeps acknowledged ops while degraded; past the queue size the oldest go
    /// (counted in `dropped_ops`), so a long outage cannot take all memory.
    fn bound_pending(&mut self) {
        let cap = self.cfg.queue.max(1);
        if self.retry.is_some() && self.pending.len() > cap {
            let n = self.pending.len() - cap;
            self.pending.drain(..n);
            let mut s = self.shared.stats.locked();
            s.dropped_ops += n as u64;
            drop(s);
            self.shared.queued.fetch_sub(n as u64, Ordering::SeqCst);
        }
    }

    /// Log a failure at most once per [`FAIL_LOG_EVERY`].
    fn log_failure(&mut self, what: &str, e: &JournalError, ops: u64) {
        if self.last_log.is_none_or(|t| t.elapsed() >= FAIL_LOG_EVERY) {
            tracing::error!(error = %e, ops, "journal {what} failed; retrying with backoff");
            self.last_log = Some(Instant::now());
        }
    }

    /// A failure: degraded, retry later (the pause doubles up to [`RETRY_MAX`]).
    fn failed(&mut self, e: &JournalError) {
        let mut s = self.shared.stats.locked();
        s.last_error = Some(e.to_string());
        if !s.degraded {
            s.degraded = true;
            s.degraded_since = now_ns();
        }
        drop(s);
        self.shared.degraded.store(true, Ordering::SeqCst);
        let pause = self
            .retry
            .map_or(RETRY_MIN, |(_, p)| (p * 2).min(RETRY_MAX));
        self.retry = Some((Instant::now() + pause, pause));
        self.needs_reopen = true;
    }

    fn healthy(&mut self) {
        if self.retry.take().is_some() {
            tracing::info!("journal commits succeed again");
            self.last_log = None;
        }
        let mut s = self.shared.stats.locked();
        s.degraded = false;
        s.degraded_since = 0;
        self.shared.degraded.store(false, Ordering::SeqCst);
    }

    /// After a failure, close and open the store again before the next try.
    fn reopen_if_needed(&mut self) -> Result<()> {
        if !self.needs_reopen {
            return Ok(());
        }
        self.store.reopen()?;
        self.needs_reopen = false;
        self.shared.stats.locked().reopens += 1;
        tracing::info!("journal store reopened");
        Ok(())
    }

    /// Commit pending ops (durably or just visibly) and acknowledge them. On failure,
    /// immediate mode answers the ops with the error (they were never acknowledged); batched
    /// mode keeps them (they were) and tries again on the retry schedule.
    fn commit(&mut self, durable: bool) -> Result<()> {
        let r = self.commit_pending(durable);
        self.publish_due();
        r
    }

    /// [`Worker::commit`] before the oldest unflushed acknowledgement is published again.
    fn commit_pending(&mut self, durable: bool) -> Result<()> {
        if let Err(e) = self.reopen_if_needed() {
            let n = self.pending.len() as u64;
            self.log_failure("reopen", &e, n);
            self.failed(&e);
            if self.cfg.durability == Durability::Immediate {
                self.fail_pending(&e);
            }
            return Err(e);
        }
        if self.pending.is_empty() {
            if durable && self.undurable_since.is_some() {
                let (t0, due) = (Instant::now(), self.due());
                let r = self.store.sync();
                match &r {
                    Ok(()) => {
                        self.durable_done(t0, due);
                        self.undurable_since = None;
                        self.healthy();
                    }
                    Err(e) => {
                        self.log_failure("sync", e, 0);
                        self.failed(e);
                    }
                }
                return r;
            }
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let n = batch.len() as u64;
        let keep = self.cfg.durability == Durability::Batched;
        let (ops, dones): (Vec<Op>, Vec<Option<Done>>) = batch.into_iter().unzip();
        let retained = keep.then(|| ops.clone());
        let t0 = Instant::now();
        let due = self.due();
        let durability = if durable {
            redb::Durability::Immediate
        } else {
            redb::Durability::None
        };
        let res = self.store.apply(ops, durability);
        let us = t0.elapsed().as_micros().min(u64::MAX as u128) as u64;
        match res {
            Ok(results) => {
                self.shared.queued.fetch_sub(n, Ordering::SeqCst);
                {
                    let mut s = self.shared.stats.locked();
                    s.commits += 1;
                    s.committed_ops += n;
                    s.last_commit_us = us;
                    s.last_commit_ops = n;
                    s.last_commit_at = now_ns();
                    for r in &results {
                        if let Err(e) = r {
                            s.failed_ops += 1;
                            s.last_error = Some(e.to_string());
                            tracing::warn!(error = %e, "journal op rejected");
                        }
                    }
                }
                self.healthy();
                for (d, r) in dones.into_iter().zip(results) {
                    if let Some(d) = d {
                        d(r);
                    }
                }
                if durable {
                    if keep {
                        self.durable_done(t0, due);
                    }
                    self.undurable_since = None;
                } else {
                    let since = self.oldest_ack.unwrap_or_else(Instant::now);
                    self.undurable_since =
                        Some(self.undurable_since.map_or(since, |u| u.min(since)));
                }
                self.oldest_ack = None;
                Ok(())
            }
            Err(e) => {
                {
                    let mut s = self.shared.stats.locked();
                    s.failed_commits += 1;
                }
                self.log_failure("commit", &e, n);
                self.failed(&e);
                match retained {
                    // Acknowledged already: keep them (in order, ahead of newer ops).
                    Some(ops) => {
                        let mut back: Vec<(Op, Option<Done>)> =
                            ops.into_iter().zip(dones).collect();
                        back.append(&mut self.pending);
                        self.pending = back;
                        self.bound_pending();
                    }
                    None => {
                        self.shared.queued.fetch_sub(n, Ordering::SeqCst);
                        self.shared.stats.locked().failed_ops += n;
                        for d in dones.into_iter().flatten() {
                            d(Err(e.clone()));
                        }
                        self.oldest_ack = None;
                    }
                }
                Err(e)
            }
        }
    }

    /// Immediate mode: answer every pending op with `e` (none was acknowledged).
    fn fail_pending(&mut self, e: &JournalError) {
        let batch = std::mem::take(&mut self.pending);
        let n = batch.len() as u64;
        self.shared.queued.fetch_sub(n, Ordering::SeqCst);
        self.shared.stats.locked().failed_ops += n;
        for (_, d) in batch {
            if let Some(d) = d {
                d(Err(e.clone()));
            }
        }
    }
}
