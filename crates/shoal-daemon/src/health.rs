//! Health bookkeeping shared by every actor: kind, name, state, mailbox depth,
//! handled count, restarts, last error and age (docs/protocol.md §7).
//!
//! Each actor registers an [`ActorStats`] in the daemon's [`Registry`] when it
//! starts and keeps the returned [`Registration`]; dropping it (the actor
//! stopped or panicked) removes the row. Counters are atomics, so `shoal
//! status` reads them without messaging the actors: a stuck actor still shows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use actix::prelude::*;
use shoal_proto::kernel::ActorRow;

use shoal_base::sync::{Locked, RwLocked};

#[derive(Debug)]
pub struct ActorStats {
    pub id: u64,
    pub kind: &'static str,
    pub name: String,
    pub parent: Option<u64>,
    pub started: Instant,
    enqueued: AtomicU64,
    handled: AtomicU64,
    restarts: AtomicU64,
    /// Subscriptions a connection holds (0 for other actors).
    subscriptions: AtomicU64,
    last_error: Mutex<Option<String>>,
    state: Mutex<&'static str>,
}

impl ActorStats {
    /// A message was queued for this actor.
    pub fn enqueue(&self) {
        self.enqueued.fetch_add(1, Ordering::Relaxed);
    }
    /// A message (or frame) was handled.
    pub fn handled(&self) {
        self.handled.fetch_add(1, Ordering::Relaxed);
    }
    /// Handled without having been counted by `enqueue` (stream items).
    pub fn handled_item(&self) {
        self.enqueue();
        self.handled();
    }
    pub fn set_restarts(&self, n: u64) {
        self.restarts.store(n, Ordering::Relaxed);
    }
    /// A connection's subscription count changed (`shoal status` shows the busiest).
    pub fn set_subscriptions(&self, n: usize) {
        self.subscriptions.store(n as u64, Ordering::Relaxed);
    }
    pub fn set_error(&self, e: impl Into<String>) {
        *self.last_error.locked() = Some(e.into());
    }
    pub fn set_state(&self, s: &'static str) {
        *self.state.locked() = s;
    }
    pub fn state(&self) -> &'static str {
        *self.state.locked()
    }
    pub fn mailbox(&self) -> u64 {
        self.enqueued
            .load(Ordering::Relaxed)
            .saturating_sub(self.handled.load(Ordering::Relaxed))
    }
    pub fn row(&self) -> ActorRow {
        ActorRow {
            id: self.id,
            kind: self.kind.into(),
            name: self.name.clone(),
            parent: self.parent,
            state: self.state().into(),
            mailbox: self.mailbox(),
            handled: self.handled.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            last_error: self.last_error.locked().clone(),
            age_ms: self.started.elapsed().as_millis() as u64,
        }
    }
}

/// An actor's address that counts what it queues: every `send`/`do_send` through it adds to
/// the actor's mailbox depth, and the actor's handlers count it off with
/// [`ActorStats::handled`]. What services share (the journal, the event bus) is one of these,
/// so their depth in `shoal status` is real.
pub struct Counted<A: Actor> {
    addr: Addr<A>,
    stats: Arc<ActorStats>,
}

impl<A: Actor> Clone for Counted<A> {
    fn clone(&self) -> Self {
        Counted {
            addr: self.addr.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<A: Actor> Counted<A> {
    pub fn new(addr: Addr<A>, stats: Arc<ActorStats>) -> Self {
        Counted { addr, stats }
    }

    /// Send and await the reply, counted.
    pub fn send<M>(&self, msg: M) -> actix::dev::Request<A, M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        self.stats.enqueue();
        self.addr.send(msg)
    }

    /// Fire and forget, counted.
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        self.stats.enqueue();
        self.addr.do_send(msg)
    }

    /// The bare address (for what must not count, e.g. `connected()`).
    pub fn addr(&self) -> &Addr<A> {
        &self.addr
    }
}

/// The address of an actor its supervisor restarts (the daemon's EventBus and JournalWriter):
/// every clone reads one shared cell, which the supervisor swaps for the new incarnation, so
/// a holder follows the restart without knowing of it. A send costs one uncontended read
/// lock (held only while the message is queued, never across an await); a message sent to a dead
/// incarnation before the swap is lost like any in-flight message.
pub struct Supervised<A: Actor> {
    cell: Arc<RwLock<Counted<A>>>,
}

impl<A: Actor> Clone for Supervised<A> {
    fn clone(&self) -> Self {
        Supervised {
            cell: self.cell.clone(),
        }
    }
}

impl<A: Actor> Supervised<A> {
    pub fn new(first: Counted<A>) -> Self {
        Supervised {
            cell: Arc::new(RwLock::new(first)),
        }
    }

    /// The current incarnation.
    pub fn current(&self) -> Counted<A> {
        self.cell.read_locked().clone()
    }

    /// Point every clone at a new incarnation (the supervisor's restart).
    pub fn replace(&self, next: Counted<A>) {
        *self.cell.write_locked() = next;
    }

    /// Send to the current incarnation and await the reply, counted.
    pub fn send<M>(&self, msg: M) -> actix::dev::Request<A, M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        // Sent under the read guard (no clone); the guard ends with this statement.
        self.cell.read_locked().send(msg)
    }

    /// Fire and forget to the current incarnation, counted.
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        self.cell.read_locked().do_send(msg)
    }
}

/// A supervisor's restart accounting for one child: restarts so far, and at most
/// `max_per_minute` of them in any minute (past it the supervisor gives up).
#[derive(Debug)]
pub struct RestartBudget {
    max_per_minute: u32,
    recent: Vec<Instant>,
    restarts: u64,
}

impl RestartBudget {
    pub fn new(max_per_minute: u32) -> Self {
        RestartBudget {
            max_per_minute,
            recent: Vec::new(),
            restarts: 0,
        }
    }

    /// Take one restart: `false` (nothing counted) once the last minute already had
    /// `max_per_minute` of them.
    pub fn take(&mut self) -> bool {
        let now = Instant::now();
        self.recent
            .retain(|t| now.duration_since(*t) < Duration::from_secs(60));
        if self.recent.len() as u32 >= self.max_per_minute {
            return false;
        }
        self.recent.push(now);
        self.restarts += 1;
        true
    }

    /// Restarts so far.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    pub fn max_per_minute(&self) -> u32 {
        self.max_per_minute
    }
}

/// Every live actor's stats, by id (ids grow with start order).
#[derive(Debug, Default)]
pub struct Registry {
    next: AtomicU64,
    actors: Mutex<BTreeMap<u64, Arc<ActorStats>>>,
}

impl Registry {
    pub fn register(
        self: &Arc<Self>,
        kind: &'static str,
        name: impl Into<String>,
        parent: Option<u64>,
    ) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let stats = Arc::new(ActorStats {
            id,
            kind,
            name: name.into(),
            parent,
            started: Instant::now(),
            enqueued: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
            last_error: Mutex::new(None),
            state: Mutex::new("running"),
        });
        self.lock().insert(id, stats.clone());
        Registration {
            registry: self.clone(),
            stats,
            exit: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ActorStats>>> {
        self.actors.locked()
    }

    /// The most subscriptions any one live actor (connection) holds.
    pub fn max_subscriptions(&self) -> u64 {
        self.lock()
            .values()
            .map(|s| s.subscriptions.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    pub fn snapshot(&self) -> Vec<ActorRow> {
        self.lock().values().map(|s| s.row()).collect()
    }
}

/// What a [`Registration`] runs when it drops: tells a supervisor its child ended.
type ExitHook = Box<dyn FnOnce() + Send>;

/// Keeps an actor's row in the registry; dropping it removes the row. The actor owns it, so
/// its drop is the actor's end, a panic included: a supervisor that set [`Self::on_exit`]
/// learns of the death by the message the hook sends, without polling.
pub struct Registration {
    registry: Arc<Registry>,
    pub stats: Arc<ActorStats>,
    exit: Option<ExitHook>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("stats", &self.stats)
            .field("exit_hook", &self.exit.is_some())
            .finish()
    }
}

impl Registration {
    pub fn id(&self) -> u64 {
        self.stats.id
    }

    /// Run `f` when this registration drops (after its row is removed).
    pub fn on_exit(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.exit = Some(Box::new(f));
        self
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.stats.id);
        if let Some(f) = self.exit.take() {
            f();
        }
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/status`).
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_count_and_drop() {
        let reg = Arc::new(Registry::default());
        let a = reg.register("daemon", "shoal", None);
        let b = reg.register("listener", "sock", Some(a.id()));
        b.stats.enqueue();
        b.stats.enqueue();
        b.stats.handled();
        let snap = reg.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[1].mailbox, 1);
        assert_eq!(snap[1].parent, Some(a.id()));
        drop(b);
        assert_eq!(reg.snapshot().len(), 1);
        assert!(rss_bytes().unwrap() > 0);
    }

    #[test]
    fn an_exit_hook_runs_once_the_row_is_gone() {
        let reg = Arc::new(Registry::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let r2 = reg.clone();
        let b = reg
            .register("event_bus", "events", None)
            .on_exit(move || tx.send(r2.snapshot().len()).unwrap());
        assert!(rx.try_recv().is_err());
        drop(b);
        assert_eq!(rx.try_recv(), Ok(0));
    }

    #[test]
    fn a_restart_budget_allows_max_per_minute() {
        let mut b = RestartBudget::new(2);
        assert!(b.take());
        assert!(b.take());
        assert!(!b.take());
        assert_eq!(b.restarts(), 2);
        assert_eq!(b.max_per_minute(), 2);
    }
}
