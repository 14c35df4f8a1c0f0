//! The Session actor: owns one named session's evaluation worker thread.
//!
//! Evaluation blocks (it spawns and waits on processes), so it never runs on
//! an arbiter: the actor hands jobs to its own worker thread over a channel and
//! awaits the reply. The language session lives on that thread; a panic in the
//! language is caught there, reported as an error, and the (possibly
//! half-mutated) language state is dropped rather than resumed. The transcript
//! lives in [`SessionShared`], owned by the supervisor, so it survives a
//! restart of this actor.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;

use super::event_bus::Publish;
use super::health::Registration;
use super::journal_writer::{self, ExecRecord, Ran, Services};
use super::msg::{Crash, Exec, ExecReply, SessionError};
use crate::journal::reserve::RefReservation;
use crate::lang::{
    ChannelInjector, ExecError, Interrupter, Position, Session as LangSession, SessionOptions,
};
use crate::proto::{bound, kernel, wire};
use crate::sync::Locked;
use crate::value::{ShoalError, Value};

/// State of a named session that outlives its Session actor.
#[derive(Debug)]
pub struct SessionShared {
    pub name: String,
    pub cwd: PathBuf,
    /// The environment the session started with (the creating client's).
    pub env: Vec<(String, String)>,
    pub created: Instant,
    pub render_width: usize,
    /// `out:N` is `transcript[N-1-base]`.
    pub transcript: Mutex<Transcript>,
    /// `out:N` numbers up to `base` were used before this session object existed (journal
    /// transcript rows from before a restart); set on the worker thread before the first exec.
    pub base: OnceLock<u64>,
    /// Which `out:N` numbers are durably reserved in the journal.
    reserved: RefReservation,
    /// The journal and event bus (absent in unit tests).
    pub services: Option<Services>,
    pub clients: AtomicI64,
    pub busy: AtomicBool,
    pub interrupter: Mutex<Option<Interrupter>>,
    /// Delivers `user.*` events published by clients into the language's channels.
    pub injector: Mutex<Option<ChannelInjector>>,
    /// The language session's cwd and environment after its last exec
    /// (`shoal://session/cwd`, `shoal://session/env`); `None` before the first.
    pub live: Mutex<Option<LiveState>>,
    /// `[limits] session_memory` and `spill_bytes` (0: the defaults).
    pub session_memory: u64,
    pub spill_bytes: u64,
    /// The language session's spill allowance, for `shoal status` (set by the worker).
    pub spill: Mutex<Option<Arc<crate::value::output::SpillQuota>>>,
    /// Adapters of the language session (`None`: commands run as written).
    pub adapters: Option<Arc<crate::adapters::Catalog>>,
    /// A fork of the language session as of its last exec: background tasks
    /// start from a copy of it without waiting for the worker (contract §4).
    pub fork_seed: Mutex<Option<ForkSeed>>,
}

/// The language state a background task starts from.
pub struct ForkSeed(LangSession);

impl std::fmt::Debug for ForkSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForkSeed")
    }
}

/// What a session's views show: its cwd and environment as of the last exec.
#[derive(Debug, Clone)]
pub struct LiveState {
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}

/// The values behind a session's `out:N` refs. With a journal, memory is
/// bounded: past `session.resident_values` values or [`RESIDENT_WEIGHT_MAX`] weight
/// units the oldest values leave memory (their slot stays, `None`) and are
/// read back from the journal's content store on demand. Without a journal
/// every value stays resident.
#[derive(Debug)]
pub struct Transcript {
    items: Vec<Option<Value>>,
    /// Values kept in memory at most (`session.resident_values`).
    max_resident: usize,
    /// Index of the oldest value still in memory.
    oldest: usize,
    resident: usize,
    weight: u64,
}

/// About 32 bytes a unit: ~128 MB of values per session.
const RESIDENT_WEIGHT_MAX: u64 = 4 << 20;

/// Whether `v` encodes to at most about `limit` bytes: a walk that gives up as
/// soon as the count passes it (so it costs at most ~`limit / 16` steps).
fn encodes_small(v: &Value, limit: usize) -> bool {
    let mut left = limit as i64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        left -= 16;
        match v {
            Value::Str(s) => left -= s.len() as i64,
            Value::Path(p) => left -= p.as_os_str().len() as i64,
            Value::Bytes(b) => left -= b.len() as i64,
            Value::Outcome(o) => left -= (o.stdout.len() + o.stderr.len()) as i64,
            Value::Error(e) => {
                left -= (e.msg.len() + e.stderr.as_ref().map_or(0, |b| b.len())) as i64
            }
            Value::List(l) => {
                left -= 16 * l.len() as i64;
                if left >= 0 {
                    stack.extend(l.iter());
                }
            }
            Value::Record(r) => {
                left -= 16 * r.len() as i64;
                if left >= 0 {
                    for (k, v) in r.iter() {
                        left -= k.len() as i64;
                        stack.push(v);
                    }
                }
            }
            Value::Table(t) => {
                left -= 16 * t.len() as i64;
                if left >= 0 {
                    for r in t.iter() {
                        left -= 16 * r.len() as i64;
                        if left < 0 {
                            break;
                        }
                        for (k, v) in r.iter() {
                            left -= k.len() as i64;
                            stack.push(v);
                        }
                    }
                }
            }
            _ => {}
        }
        if left < 0 {
            return false;
        }
    }
    true
}

/// A cheap, top-level estimate of a value's memory in ~32-byte units.
fn weight(v: &Value) -> u64 {
    let n = match v {
        Value::List(l) => l.len() as u64,
        Value::Table(t) => t.len() as u64 * t.first().map_or(1, |r| r.len().max(1)) as u64,
        Value::Record(r) => r.len() as u64,
        Value::Str(s) => s.len() as u64 / 32,
        Value::Bytes(b) => b.len() as u64 / 32,
        Value::Outcome(o) => (o.stdout.len() + o.stderr.len()) as u64 / 32,
        _ => 0,
    };
    1 + n
}

impl Transcript {
    pub fn new(max_resident: usize) -> Transcript {
        Transcript {
            items: Vec::new(),
            max_resident: max_resident.max(1),
            oldest: 0,
            resident: 0,
            weight: 0,
        }
    }

    fn push(&mut self, v: Value, can_evict: bool) {
        self.weight += weight(&v);
        self.resident += 1;
        self.items.push(Some(v));
        if !can_evict {
            return;
        }
        // Keep at least the newest value resident.
        while (self.resident > self.max_resident || self.weight > RESIDENT_WEIGHT_MAX)
            && self.oldest + 1 < self.items.len()
        {
            if let Some(old) = self.items[self.oldest].take() {
                self.weight = self.weight.saturating_sub(weight(&old));
                self.resident -= 1;
            }
            self.oldest += 1;
        }
    }
}

impl SessionShared {
    pub fn new(name: String, cwd: PathBuf, render_width: usize) -> Self {
        SessionShared {
            name,
            cwd,
            env: crate::paths::base_env(),
            created: Instant::now(),
            render_width,
            transcript: Mutex::new(Transcript::new(4096)),
            base: OnceLock::new(),
            reserved: RefReservation::default(),
            services: None,
            clients: AtomicI64::new(0),
            busy: AtomicBool::new(false),
            interrupter: Mutex::new(None),
            injector: Mutex::new(None),
            adapters: None,
            live: Mutex::new(None),
            fork_seed: Mutex::new(None),
            session_memory: 0,
            spill_bytes: 0,
            spill: Mutex::new(None),
        }
    }

    /// Apply the `[limits]` a language session enforces itself.
    pub fn with_limits(mut self, l: &crate::config::LimitsConfig) -> Self {
        self.session_memory = l.session_memory;
        self.spill_bytes = l.spill_bytes;
        self
    }

    /// Keep at most `n` transcript values in memory (older ones come from the journal).
    pub fn with_resident_values(self, n: usize) -> Self {
        *self.transcript.locked() = Transcript::new(n);
        self
    }

    /// Start with exactly `env` (the creating client's environment).
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// Journal the session's execs and publish their events.
    pub fn with_services(mut self, services: Services) -> Self {
        self.services = Some(services);
        self
    }

    fn base(&self) -> u64 {
        self.base.get().copied().unwrap_or(0)
    }

    /// Continue `out:N` after the journal's last transcript row of this session (blocking
    /// read: worker thread only).
    fn ensure_base(&self) {
        if self.base.get().is_some() {
            return;
        }
        // Continue past the last stored row and past every number reserved (handed out
        // possibly, but lost with a crash before its row was committed).
        let last = self.services.as_ref().map_or(Ok(0), |s| {
            s.writer.sync_visible().and_then(|_| {
                let store = s.writer.store();
                let row = store.transcript_last(&self.name)?.unwrap_or(0);
                Ok(row.max(store.refs_reserved(&self.name)?))
            })
        });
        let last = last.unwrap_or_else(|e| {
            tracing::warn!(session = %self.name, "cannot read the journal's transcript: {e}");
            0
        });
        self.reserved.start_at(last);
        let _ = self.base.set(last);
    }

    /// Make sure the next `out:N` is durably reserved before it is handed out
    /// (worker thread only; see [`RefReservation`]).
    fn reserve_next(&self) -> Result<(), SessionError> {
        let next = self.peek_next();
        self.reserve_upto(next)
    }

    /// Reserve durably every number up to at least `next`.
    fn reserve_upto(&self, next: u64) -> Result<(), SessionError> {
        let Some(svc) = &self.services else {
            return Ok(());
        };
        self.reserved
            .ensure(&svc.writer, &self.name, next)
            .map_err(|e| {
                tracing::error!(session = %self.name, "cannot reserve out:N numbers: {e}");
                journal_unavailable(&e.to_string())
            })
    }

    /// At a clean shutdown (no exec running any more), give back the reserved `out:N`
    /// numbers that were never handed out, durably, so the next start continues right
    /// after the last one used instead of a whole block later.
    pub fn release_reservation(&self) {
        let Some(svc) = &self.services else {
            return;
        };
        if self.base.get().is_none() || self.busy.load(Ordering::Relaxed) {
            return;
        }
        let used = self.peek_next() - 1;
        if let Err(e) = self.reserved.release(&svc.writer, &self.name, used) {
            tracing::warn!(session = %self.name, "cannot release out:N numbers: {e}");
        }
    }

    /// The `n` the next [`push`](Self::push) will return.
    pub fn peek_next(&self) -> u64 {
        let t = self.transcript.locked();
        self.base() + t.items.len() as u64 + 1
    }

    /// Whether the journal is configured `immediate` (the reply waits for the commit).
    /// The journal's last commit failed (batched results then say `journal: "degraded"`).
    pub fn journal_degraded(&self) -> bool {
        self.services
            .as_ref()
            .is_some_and(|s| s.writer.is_degraded())
    }

    pub fn immediate_durability(&self) -> bool {
        self.services
            .as_ref()
            .is_some_and(|s| s.writer.config().durability == crate::journal::Durability::Immediate)
    }

    pub fn push(&self, v: Value) -> u64 {
        let n = {
            let mut t = self.transcript.locked();
            t.push(v, self.services.is_some());
            self.base() + t.items.len() as u64
        };
        // Tasks and the worker push concurrently: a number may pass the
        // reserved block between `reserve_next` and here; reserve it now.
        let behind = !self.reserved.covers(n);
        if behind {
            if let Err(e) = self.reserve_upto(n) {
                tracing::error!(session = %self.name, "out:{n} handed out unreserved: {e:?}");
            }
        }
        n
    }

    /// A copy of the language state for a background task: from the last
    /// exec's seed, or a fresh language session before the first exec.
    pub fn fork_lang(&self) -> Result<LangSession, SessionError> {
        if let Some(seed) = self.fork_seed.locked().as_ref() {
            return Ok(seed.0.fork());
        }
        new_lang(self)
    }

    /// `out:n` if this session object holds it in memory (older ones: the journal).
    pub fn get(&self, n: u64) -> Option<Value> {
        let t = self.transcript.locked();
        n.checked_sub(1 + self.base())
            .and_then(|i| t.items.get(i as usize))
            .and_then(Option::clone)
    }

    /// The newest `out:N` number (0 when there is none).
    pub fn last_ref(&self) -> u64 {
        self.base() + self.transcript_len() as u64
    }

    pub fn transcript_len(&self) -> usize {
        self.transcript.locked().items.len()
    }

    /// Interrupt the running evaluation, if any.
    pub fn interrupt(&self) {
        if let Some(i) = self.interrupter.locked().as_ref() {
            i.interrupt();
        }
    }
}

pub use super::call_cancel::CallCancel;

/// The journal cannot make this exec durable: `-32603` with `data.journal: "unavailable"`.
pub fn journal_unavailable(error: &str) -> SessionError {
    SessionError::Rpc(
        crate::proto::rpc::RpcError::internal(format!(
            "the journal is unavailable ({error}); the result was not recorded"
        ))
        .with_data(serde_json::json!({"journal": "unavailable", "error": error})),
    )
}

/// How often a cancelled, still running call is interrupted again.
const CANCEL_REASSERT: std::time::Duration = std::time::Duration::from_millis(100);

/// The reply to a call cancelled before it ran.
pub fn cancelled_before_running() -> SessionError {
    SessionError::Rpc(
        crate::proto::rpc::RpcError::new(
            crate::proto::rpc::RAISED,
            "cancelled before it ran (removed from the session's queue)",
        )
        .with_data(serde_json::json!({"code": "cancelled", "ran": false})),
    )
}

/// What the worker answers: the result, and the exec's bus events when its
/// journal record was handed off before the reply (the arbiter publishes them
/// as it takes the reply: no second wake-up of its thread).
type JobReply = (Result<ExecReply, SessionError>, Vec<Publish>);

struct Job {
    spec: JobSpec,
    reply: oneshot::Sender<JobReply>,
}

/// What one evaluation runs (a foreground exec or a background task).
pub struct JobSpec {
    pub src: String,
    pub position: Position,
    pub tty: bool,
    pub cancel: Arc<CallCancel>,
    /// The caller's principal: its verdict gates the run (when `check`) and
    /// its sandbox confines the children.
    pub gate: Option<Arc<crate::leash::Gate>>,
    pub check: bool,
}

/// What the worker thread is asked to do.
enum Work {
    Exec(Job),
    /// Derive the effects of a source (planning; nothing runs).
    Derive {
        src: String,
        reply: oneshot::Sender<Result<Vec<crate::leash::Effect>, SessionError>>,
    },
}

pub struct Session {
    shared: Arc<SessionShared>,
    jobs: Option<mpsc::Sender<Work>>,
    reg: Registration,
    /// Tells the supervisor when this actor ends (a panic included).
    _exit: Option<super::session_supervisor::ExitNotice>,
}

impl Session {
    pub fn new(shared: Arc<SessionShared>, reg: Registration) -> Self {
        Session {
            shared,
            jobs: None,
            reg,
            _exit: None,
        }
    }

    pub fn with_exit_notice(mut self, exit: super::session_supervisor::ExitNotice) -> Self {
        self._exit = Some(exit);
        self
    }
}

impl Actor for Session {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        let (tx, rx) = mpsc::channel::<Work>();
        let shared = self.shared.clone();
        // The worker evaluates on its own (large) stack: no thread per exec.
        let spawned = crate::lang::session::spawn_eval_thread(
            format!("shoal-session-{}", self.shared.name),
            move |stack| worker(shared, rx, stack),
        );
        match spawned {
            Ok(_) => self.jobs = Some(tx),
            Err(e) => {
                tracing::error!(session = %self.shared.name, "cannot start worker thread: {e}");
                self.reg
                    .stats
                    .set_error(format!("cannot start worker thread: {e}"));
                ctx.stop();
            }
        }
        self.reg.stats.set_state("idle");
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.shared.interrupt();
        tracing::info!(session = %self.shared.name, "session actor stopped");
    }
}

impl Handler<Exec> for Session {
    type Result = ResponseFuture<Result<ExecReply, SessionError>>;

    fn handle(&mut self, msg: Exec, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let (reply, rx) = oneshot::channel();
        let cancel = msg.cancel;
        let job = Job {
            spec: JobSpec {
                src: msg.src,
                position: msg.position,
                tty: msg.tty,
                cancel: cancel.clone(),
                gate: msg.gate,
                check: msg.check,
            },
            reply,
        };
        let sent = self
            .jobs
            .as_ref()
            .map(|tx| tx.send(Work::Exec(job)).is_ok())
            .unwrap_or(false);
        let stats = self.reg.stats.clone();
        let name = self.shared.name.clone();
        let bus = self.shared.services.as_ref().map(|s| s.bus.clone());
        Box::pin(async move {
            if !sent {
                stats.set_error("worker thread is gone");
                return Err(SessionError::Internal(format!(
                    "session {name}: worker thread is gone"
                )));
            }
            let mut rx = rx;
            let r = tokio::select! {
                r = &mut rx => r,
                _ = cancel.wake.notified() => {
                    // Queued: answer now; the worker skips the job when it gets there.
                    if cancel.is_queued() {
                        return Err(cancelled_before_running());
                    }
                    // Running: keep the interrupt asserted until it ends.
                    let mut tick = tokio::time::interval(CANCEL_REASSERT);
                    loop {
                        tokio::select! {
                            r = &mut rx => break r,
                            _ = tick.tick() => cancel.reassert(),
                        }
                    }
                }
            };
            let r = match r {
                Ok((r, events)) => {
                    // In reply order, so events keep the order of execs. A
                    // kernel connection writes them after the reply (it takes
                    // no message while a request is in flight).
                    if let Some(bus) = &bus {
                        for e in events {
                            bus.do_send(e);
                        }
                    }
                    r
                }
                Err(_) => Err(SessionError::Internal(format!(
                    "session {name}: worker thread ended during exec"
                ))),
            };
            if let Err(SessionError::Internal(m)) = &r {
                stats.set_error(m.clone());
            }
            r
        })
    }
}

impl Handler<super::msg::DerivePlan> for Session {
    type Result = ResponseFuture<Result<Vec<crate::leash::Effect>, SessionError>>;

    fn handle(&mut self, msg: super::msg::DerivePlan, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let (reply, rx) = oneshot::channel();
        let sent = self
            .jobs
            .as_ref()
            .map(|tx| {
                tx.send(Work::Derive {
                    src: msg.src,
                    reply,
                })
                .is_ok()
            })
            .unwrap_or(false);
        let name = self.shared.name.clone();
        Box::pin(async move {
            if !sent {
                return Err(SessionError::Internal(format!(
                    "session {name}: worker thread is gone"
                )));
            }
            rx.await.unwrap_or_else(|_| {
                Err(SessionError::Internal(format!(
                    "session {name}: worker thread ended while planning"
                )))
            })
        })
    }
}

impl Handler<Crash> for Session {
    type Result = ();

    fn handle(&mut self, _msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        panic!(
            "session {}: crash requested by debug hook",
            self.shared.name
        );
    }
}

/// The worker thread: owns the language session, runs jobs in order.
fn worker(shared: Arc<SessionShared>, rx: mpsc::Receiver<Work>, stack: usize) {
    let mut lang: Option<LangSession> = None;
    while let Ok(work) = rx.recv() {
        let job = match work {
            Work::Exec(job) => job,
            Work::Derive { src, reply } => {
                let r = match ensure_lang(&shared, &mut lang) {
                    Err(e) => Err(e),
                    Ok(session) => catch_unwind(AssertUnwindSafe(|| session.derive_effects(&src)))
                        .map_err(|p| {
                            SessionError::Internal(format!(
                                "planning panicked: {}",
                                panic_message(&p)
                            ))
                        })
                        .and_then(|r| r.map_err(SessionError::Parse)),
                };
                let _ = reply.send(r);
                continue;
            }
        };
        if job.spec.cancel.is_cancelled() {
            job.spec.cancel.finish();
            let _ = job
                .reply
                .send((Err(cancelled_before_running()), Vec::new()));
            continue;
        }
        shared.busy.store(true, Ordering::Relaxed);
        let (result, journal) = run_job(&shared, &mut lang, &job.spec, stack, true);
        job.spec.cancel.finish();
        // The state background tasks fork from is refreshed after the reply,
        // under the seed's lock taken now: a task started right after the
        // reply waits for the refresh and sees this exec's bindings, and the
        // reply does not wait for the copy.
        let mut seed = lang.is_some().then(|| shared.fork_seed.locked());
        let mut result = result;
        let mut events = Vec::new();
        // With immediate durability the reply waits for the commit (docs/protocol.md §6).
        // With batched durability the client does not wait for the journal: a
        // small record (the common case) is handed to the writer before the
        // reply (it only queues), a large one after it (its encoding would
        // delay the reply). Either way on this thread, so entries keep the
        // order of execs.
        let (before, after) = match journal {
            Some(j) if shared.immediate_durability() || j.is_small() => (Some(j), None),
            j => (None, j),
        };
        if let Some(j) = before {
            if let Err(e) = j.record(&shared, &mut events) {
                if shared.immediate_durability() {
                    // Not durable, so not acknowledged as a success (docs/protocol.md §10).
                    result = Err(journal_unavailable(&e));
                }
            }
        }
        if !shared.immediate_durability() {
            if let Ok(r) = &mut result {
                if shared.journal_degraded() {
                    r.journal = Some("degraded");
                }
            }
        }
        // Acknowledged but not yet handed to the journal writer: the daemon's
        // shutdown waits for it (see `wait_records_handed_off`).
        let guard = after.as_ref().map(|_| RecordInFlight::begin());
        if let Err((_, events)) = job.reply.send((result, events)) {
            // The caller is gone: publish what it would have.
            publish(&shared, events);
        }
        if let (Some(seed), Some(l)) = (seed.as_mut(), &lang) {
            **seed = Some(ForkSeed(l.fork()));
        }
        drop(seed);
        if let Some(j) = after {
            let mut events = Vec::new();
            let _ = j.record(&shared, &mut events);
            publish(&shared, events);
        }
        drop(guard);
        shared.busy.store(false, Ordering::Relaxed);
    }
    tracing::debug!(session = %shared.name, "worker thread ends");
}

/// Publish events from the worker thread.
fn publish(shared: &SessionShared, events: Vec<Publish>) {
    if let Some(svc) = &shared.services {
        for e in events {
            svc.bus.do_send(e);
        }
    }
}

/// Execs acknowledged (batched durability) whose journal record the worker
/// has not yet handed to the journal writer.
static RECORDS_IN_FLIGHT: (Mutex<usize>, std::sync::Condvar) =
    (Mutex::new(0), std::sync::Condvar::new());

struct RecordInFlight;

impl RecordInFlight {
    fn begin() -> RecordInFlight {
        *RECORDS_IN_FLIGHT.0.locked() += 1;
        RecordInFlight
    }
}

impl Drop for RecordInFlight {
    fn drop(&mut self) {
        let mut n = RECORDS_IN_FLIGHT.0.locked();
        *n = n.saturating_sub(1);
        if *n == 0 {
            RECORDS_IN_FLIGHT.1.notify_all();
        }
    }
}

/// Wait (at most `limit`) until every acknowledged exec's journal record has
/// been handed to the journal writer: the daemon calls it before its final
/// flush, so a batched exec acknowledged just before shutdown is durable.
/// `false` when the limit passed first.
pub fn wait_records_handed_off(limit: std::time::Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut n = RECORDS_IN_FLIGHT.0.locked();
    while *n > 0 {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        n = RECORDS_IN_FLIGHT
            .1
            .wait_timeout(n, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    true
}

/// Items of a list or table rendered for the reply and the journal; past it
/// the render says how many more there are.
const RENDER_MAX_ITEMS: usize = 2000;

/// What one exec leaves for the journal, recorded after or before the reply.
struct PendingJournal {
    n: u64,
    principal: Option<String>,
    effects: Vec<serde_json::Value>,
    src: String,
    cwd: PathBuf,
    ts: i64,
    dur_ns: i64,
    ran: PendingRan,
}

enum PendingRan {
    Value {
        value: Value,
        render: String,
        bounded: String,
    },
    Raised(ShoalError),
}

/// Records of values (and renders) encoding to at most about this many bytes
/// are handed to the journal before the reply (batched durability).
const SMALL_RECORD: usize = 8 << 10;

impl PendingJournal {
    /// Cheap to encode: recorded before the reply.
    fn is_small(&self) -> bool {
        match &self.ran {
            PendingRan::Value { value, render, .. } => {
                render.len() <= SMALL_RECORD && encodes_small(value, SMALL_RECORD)
            }
            PendingRan::Raised(e) => {
                e.msg.len() + e.stderr.as_ref().map_or(0, |b| b.len()) <= SMALL_RECORD
            }
        }
    }

    /// Journal the exec (its events go to `events`); the error is the reason
    /// it is not durable.
    fn record(self, shared: &SessionShared, events: &mut Vec<Publish>) -> Result<(), String> {
        let Some(svc) = &shared.services else {
            return Ok(());
        };
        // The stored value is the full tagged encoding (refs survive restarts).
        let wire;
        let ran = match &self.ran {
            PendingRan::Value {
                value,
                render,
                bounded,
            } => {
                wire = match catch_unwind(AssertUnwindSafe(|| wire::encode_to_vec(value))) {
                    Ok(w) => w,
                    Err(p) => {
                        let m = format!("encoding panicked: {}", panic_message(&p));
                        tracing::error!(session = %shared.name, "{m}");
                        return Err(m);
                    }
                };
                Ran::Value {
                    value,
                    wire: &wire,
                    render,
                    bounded,
                }
            }
            PendingRan::Raised(e) => Ran::Raised { error: e },
        };
        let rec = ExecRecord {
            session: &shared.name,
            principal: &self
                .principal
                .clone()
                .unwrap_or_else(journal_writer::local_principal),
            cwd: &self.cwd,
            src: &self.src,
            ts: self.ts,
            dur_ns: self.dur_ns,
            n: self.n,
            ran,
            effects: self.effects,
        };
        match journal_writer::record_exec(svc, rec, events) {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::debug!(session = %shared.name, "exec not journaled: {e}");
                Err(e.to_string())
            }
        }
    }
}

/// A language session for `shared` (its cwd, environment, limits, adapters
/// and the bus bridge of `user.*` channels).
fn new_lang(shared: &SessionShared) -> Result<LangSession, SessionError> {
    let opts = SessionOptions {
        cwd: shared.cwd.clone(),
        env: Vec::new(),
        config: Default::default(),
        memory_limit: shared.session_memory,
        spill_limit: shared.spill_bytes,
        adapters: shared.adapters.clone(),
    };
    catch_unwind(AssertUnwindSafe(|| {
        let mut s = LangSession::new(opts);
        s.replace_env(shared.env.clone());
        if let Some(svc) = &shared.services {
            // `user.*` channels are the language's side of the event bus:
            // what the session emits there is published for every client.
            let bus = svc.bus.clone();
            s.set_bus_sink(Some(Arc::new(move |channel: &str, v: &Value| {
                bus.do_send(Publish {
                    channel: channel.to_string(),
                    payload: wire::encode(v),
                });
            })));
        }
        s
    }))
    .map_err(|p| {
        let m = panic_message(&p);
        tracing::error!(session = %shared.name, "language session failed to start: {m}");
        SessionError::Internal(format!("language session unavailable: {m}"))
    })
}

/// The Leash gate of a run (docs/protocol.md §5): derive the effects and refuse
/// unless the principal's verdict is `allow`. A parse error passes through
/// (the exec reports it as usual).
fn gate_run(
    gate: &crate::leash::Gate,
    session: &LangSession,
    src: &str,
    check: bool,
) -> Result<Vec<serde_json::Value>, SessionError> {
    let effects = match catch_unwind(AssertUnwindSafe(|| session.derive_effects(src))) {
        Ok(Ok(e)) => e,
        Ok(Err(_)) => return Ok(Vec::new()),
        Err(p) => {
            return Err(SessionError::Internal(format!(
                "planning panicked: {}",
                panic_message(&p)
            )))
        }
    };
    gate_effects(gate, &effects, check)
}

/// The Leash verdict on derived `effects` (`check`: enforce it), and the
/// effects as the journal records them.
fn gate_effects(
    gate: &crate::leash::Gate,
    effects: &[crate::leash::Effect],
    check: bool,
) -> Result<Vec<serde_json::Value>, SessionError> {
    if check {
        let d = gate.decide(effects);
        if let Some(e) = crate::leash::refusal(&gate.principal, &d, effects) {
            return Err(SessionError::Rpc(e));
        }
    }
    Ok(effects.iter().map(crate::leash::Effect::to_json).collect())
}

/// The Leash verdict for running `src` in `lang` (a background task's start).
pub fn check_gate(
    gate: &crate::leash::Gate,
    lang: &LangSession,
    src: &str,
) -> Result<(), SessionError> {
    gate_run(gate, lang, src, true).map(|_| ())
}

/// The worker's language session, started on first use (with the session's
/// views: channel injector, interrupter, spill allowance).
fn ensure_lang<'a>(
    shared: &SessionShared,
    lang: &'a mut Option<LangSession>,
) -> Result<&'a mut LangSession, SessionError> {
    if lang.is_none() {
        let s = new_lang(shared)?;
        *shared.injector.locked() = Some(s.channel_injector());
        *shared.interrupter.locked() = Some(s.interrupter());
        *shared.spill.locked() = s.spill_quota();
        *lang = Some(s);
    }
    lang.as_mut()
        .ok_or_else(|| SessionError::Internal("language session unavailable".into()))
}

/// Run one background task's evaluation on the calling thread (started by
/// `spawn_eval_thread`), on its own fork `lang`: stored as `out:N`, journaled.
pub fn run_task(
    shared: &SessionShared,
    lang: LangSession,
    spec: &JobSpec,
    stack: usize,
) -> Result<ExecReply, SessionError> {
    let mut lang = Some(lang);
    let (mut result, journal) = run_job(shared, &mut lang, spec, stack, false);
    spec.cancel.finish();
    if let Some(j) = journal {
        let mut events = Vec::new();
        if let Err(e) = j.record(shared, &mut events) {
            if shared.immediate_durability() {
                result = Err(journal_unavailable(&e));
            }
        }
        publish(shared, events);
    }
    if let Ok(r) = &mut result {
        if shared.journal_degraded() {
            r.journal = Some("degraded");
        }
    }
    result
}

/// Evaluate `job` in `lang`. The foreground (`foreground`: the session's
/// worker) creates the language session on first use and updates the
/// session's views; a task's fork leaves them alone.
fn run_job(
    shared: &SessionShared,
    lang: &mut Option<LangSession>,
    job: &JobSpec,
    stack: usize,
    foreground: bool,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    if foreground {
        if let Err(e) = ensure_lang(shared, lang) {
            return (Err(e), None);
        }
    }
    let Some(session) = lang.as_mut() else {
        return (
            Err(SessionError::Internal(
                "language session unavailable".into(),
            )),
            None,
        );
    };
    // One parse serves the gate and the evaluation; a parse error is the
    // exec's own answer (reported below, like any other result).
    let prepared = match catch_unwind(AssertUnwindSafe(|| {
        session.prepare_exec(&job.src, job.position)
    })) {
        Ok(p) => p,
        Err(p) => {
            return (
                Err(SessionError::Internal(format!(
                    "parsing panicked: {}",
                    panic_message(&p)
                ))),
                None,
            )
        }
    };
    let mut effects = Vec::new();
    if let (Some(gate), Ok(p)) = (&job.gate, &prepared) {
        let derived = match catch_unwind(AssertUnwindSafe(|| session.effects_of(p))) {
            Ok(e) => e,
            Err(p) => {
                let m = panic_message(&p);
                return (
                    Err(SessionError::Internal(format!("planning panicked: {m}"))),
                    None,
                );
            }
        };
        match gate_effects(gate, &derived, job.check) {
            Ok(e) => effects = e,
            Err(e) => return (Err(e), None),
        }
    }
    let interrupter = session.interrupter();
    interrupter.reset();
    // From here a cancel of this call interrupts it (and only it).
    let started = job.cancel.begin(Some(&interrupter));
    if !started {
        return (Err(cancelled_before_running()), None);
    }
    shared.ensure_base();
    if let Err(e) = shared.reserve_next() {
        return (Err(e), None);
    }
    let ts = crate::journal::now_ns();
    let t0 = Instant::now();
    let sandbox = job.gate.as_ref().and_then(|g| g.sandbox.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        crate::leash::landlock::with_rules(sandbox, || {
            prepared.and_then(|p| session.exec_prepared_here(p, stack))
        })
    }));
    let elapsed = t0.elapsed();
    let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
    let cwd = session.cwd();
    if foreground {
        // Most execs change neither: compare rather than copy the environment.
        let mut live = shared.live.locked();
        let same = live
            .as_ref()
            .is_some_and(|l| l.cwd == cwd && session.env_is(&l.env));
        if !same {
            *live = Some(LiveState {
                cwd: cwd.clone(),
                env: session.env(),
            });
        }
    }
    let pending = |n: u64, ran: PendingRan| {
        shared.services.as_ref().map(|_| PendingJournal {
            n,
            principal: job.gate.as_ref().map(|g| g.principal.clone()),
            effects: effects.clone(),
            src: job.src.clone(),
            cwd: cwd.clone(),
            ts,
            dur_ns: elapsed.as_nanos().min(i64::MAX as u128) as i64,
            ran,
        })
    };
    match outcome {
        Err(p) => {
            // Never resume state a panic may have half-mutated.
            *lang = None;
            let m = panic_message(&p);
            tracing::error!(session = %shared.name, "evaluation panicked: {m}");
            (
                Err(SessionError::Internal(format!(
                    "evaluation panicked ({m}); the session's bindings were reset"
                ))),
                None,
            )
        }
        Ok(Err(ExecError::Parse(e))) => (Err(SessionError::Parse(e)), None),
        Ok(Err(ExecError::Raised(e))) => {
            let n = shared.push(Value::Error(Arc::new(e.clone())));
            let j = pending(n, PendingRan::Raised(e.clone()));
            let warnings = session.take_warnings().into_boxed_slice();
            (
                Err(SessionError::Raised {
                    error: e,
                    n,
                    warnings,
                }),
                j,
            )
        }
        Ok(Ok(value)) => {
            // The reply carries the value itself; the connection elides it under
            // the caller's budget (wire encoding happens at the edges).
            let rendered = catch_unwind(AssertUnwindSafe(|| {
                crate::value::render::block_limited(&value, shared.render_width, RENDER_MAX_ITEMS)
            }));
            let n = shared.push(value.clone());
            let render = match rendered {
                Ok(r) => r,
                Err(p) => {
                    tracing::warn!(session = %shared.name, "render panicked: {}", panic_message(&p));
                    String::new()
                }
            };
            let bounded = bound::bound_render(&render, job.tty, Some(&kernel::ref_uri(n)));
            let j = pending(
                n,
                PendingRan::Value {
                    value: value.clone(),
                    render,
                    bounded: bounded.clone(),
                },
            );
            (
                Ok(ExecReply {
                    n,
                    value,
                    render: bounded,
                    elapsed_ms,
                    journal: None,
                    warnings: session.take_warnings(),
                }),
                j,
            )
        }
    }
}

pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
