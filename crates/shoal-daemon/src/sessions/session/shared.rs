//! The state of a named session that outlives its Session actor: the
//! transcript and `out:N` numbering (durably reserved in the journal), the
//! session's views (cwd, environment, client count, busy flag), the handles the
//! worker publishes (interrupter, channel injector, spill allowance) and the
//! fork seed background tasks start from. The supervisor owns it; it never
//! evaluates and never blocks an arbiter (the journal reads in `ensure_base`
//! run on the worker thread only). What the supervisor alone uses lives in the
//! supervisor actor; each lock left here says in one line who uses it without
//! a message (the worker thread, a task's evaluation thread, a connection).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::exec::new_lang;
use super::journal_unavailable;
use super::transcript::Transcript;
use crate::journal_writer::Services;
use crate::msg::SessionError;
use shoal_base::sync::Locked;
use shoal_journal::reserve::RefReservation;
use shoal_lang::{ChannelInjector, Interrupter, Session as LangSession};
use shoal_value::Value;

/// State of a named session that outlives its Session actor.
#[derive(Debug)]
pub struct SessionShared {
    pub name: String,
    /// The principal whose attach created the session: it (and the local uid)
    /// may use it fully, others only as their policy's `sessions` shares it.
    pub owner: String,
    /// The owner is the local uid (no confinement of the session's worker);
    /// `false`: a token principal, whose sandbox the worker is to run under.
    pub owner_is_local: bool,
    pub cwd: PathBuf,
    /// The environment the session started with (the creating client's).
    pub env: Vec<(String, String)>,
    pub created: Instant,
    pub render_width: usize,
    /// `out:N` is `transcript[N-1-base]`.
    /// Locked: the worker and task threads push and read it mid-evaluation.
    pub transcript: Arc<Mutex<Transcript>>,
    /// `out:N` numbers up to `base` were used before this session object existed (journal
    /// transcript rows from before a restart); set on the worker thread before the first exec.
    pub base: Arc<OnceLock<u64>>,
    /// Which `out:N` numbers are durably reserved in the journal.
    reserved: RefReservation,
    /// The journal and event bus (absent in unit tests).
    pub services: Option<Services>,
    pub clients: AtomicI64,
    /// The people attached (`shoal attach`, `shoal watch`), for `daemon.status`.
    pub humans: Humans,
    /// The exec the session's worker runs, if any (shutdown waits for it).
    pub busy: Busy,
    /// Locked: the worker thread sets it with each new language session; shutdown
    /// reads it after the actor system stopped.
    pub interrupter: Mutex<Option<Interrupter>>,
    /// Delivers `user.*` events published by clients into the language's channels.
    /// Locked: the worker thread sets it with each new language session.
    pub injector: Mutex<Option<ChannelInjector>>,
    /// The language session's cwd and environment after its last exec
    /// (`shoal://session/cwd`, `shoal://session/env`); `None` before the first.
    /// Locked: the worker thread writes it after each exec; connections read it
    /// without a message.
    pub live: Mutex<Option<LiveState>>,
    /// `[limits] session_memory` and `spill_bytes` (0: the defaults).
    pub session_memory: u64,
    pub spill_bytes: u64,
    /// The session's memory budget: its language session evaluates
    /// against it and its PTYs hold their bounds in it (docs/protocol.md §8).
    pub memory: &'static shoal_lang::memory::MemBudget,
    /// The language session's spill allowance, for `shoal status`.
    /// Locked: the worker thread sets it with each new language session.
    pub spill: Mutex<Option<Arc<shoal_value::output::SpillQuota>>>,
    /// Adapters of the language session (`None`: commands run as written).
    pub adapters: Option<Arc<shoal_lang::adapters::Catalog>>,
    /// A fork of the language session as of its last exec: background tasks
    /// start from a copy of it without waiting for the worker.
    /// Locked: the worker thread holds it from its reply to the refresh, so a
    /// task started meanwhile sees that exec's bindings.
    pub fork_seed: Mutex<Option<ForkSeed>>,
    /// The daemon's running task evaluations: each of this session's tasks
    /// enters it from its evaluation thread (shutdown ends what is left).
    pub tasks: crate::sessions::live_tasks::TaskRegistry,
    /// This session's open PTYs, for the status rows (the supervisor's PTY table
    /// holds the PTYs themselves).
    pub ptys: shoal_pty::OpenPtys,
    /// The live Session actor and its counters, set by the supervisor as it
    /// starts one: a connection sends its execs there directly (one hop, not
    /// two). Weak, so the supervisor dropping its children's addresses still
    /// stops them; a dead one sends through the supervisor, which answers why
    /// there is none.
    /// Locked: every connection's exec reads it on its own arbiter (no hop through the
    /// supervisor); the supervisor writes it.
    actor: Mutex<Option<(actix::WeakAddr<super::Session>, super::WorkerLine)>>,
    /// The supervisor (set once, as it starts): where an evaluation's `cmd &`
    /// and `jobs` reach the session's tasks, read on evaluation threads. Weak:
    /// the session's state never keeps its supervisor alive.
    supervisor: OnceLock<actix::WeakAddr<crate::sessions::supervisor::SessionSupervisor>>,
    /// The worker process a token-owned session evaluates in (`remote.rs`),
    /// started with its first job.
    /// Locked: the session's thread and its tasks' threads start or reach it.
    pub(super) remote: Mutex<Option<super::remote::Hosting>>,
    /// The foreground job running in the worker (0: none): what
    /// interrupting the session reaches there.
    pub(super) there_job: std::sync::atomic::AtomicU64,
    /// What its language session holds in the worker, as of its last exec.
    pub(super) there_memory: std::sync::atomic::AtomicU64,
}

impl Drop for SessionShared {
    fn drop(&mut self) {
        // Its state in the worker goes with it.
        if let Some(h) = self.remote.get_mut().ok().and_then(Option::take) {
            h.remote.release(&h.key);
        }
    }
}

/// `out:n` of `session` read back from the journal.
fn stored_value(w: &shoal_journal::JournalWriter, session: &str, n: u64) -> Result<Value, String> {
    let gone = || format!("out:{n} is not in the journal");
    let fail = |e: shoal_journal::JournalError| format!("out:{n}: {e}");
    w.sync_visible().map_err(fail)?;
    let store = w.store();
    let row = store
        .transcript_get(session, n)
        .map_err(fail)?
        .ok_or_else(gone)?;
    let vref = row.value.ok_or_else(gone)?;
    if !vref.stored {
        return Err(format!(
            "out:{n} ({} bytes) exceeded the journal's size cap and was not kept",
            vref.len
        ));
    }
    let bytes = store.blob_get(&vref.hash).map_err(fail)?.ok_or_else(gone)?;
    serde_json::from_slice(&bytes)
        .ok()
        .and_then(|j| shoal_proto::wire::decode(&j))
        .ok_or_else(|| format!("out:{n} was stored in a form that does not decode"))
}

/// The language state a background task starts from.
pub struct ForkSeed(pub(super) LangSession);

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
    /// The session's top-level names (for an attached human's completion),
    /// taken again only when their count changed.
    pub names: Arc<[String]>,
}

/// The people attached to a session: `(connection, client, since)` each.
/// Locked: kernel connections join and leave on their own arbiters, and the
/// Daemon's status rows read it synchronously (no supervisor round trip).
#[derive(Debug, Default)]
pub struct Humans(Mutex<Vec<(u64, Arc<str>, i64)>>);

impl Humans {
    pub fn join(&self, conn: u64, client: &Arc<str>) {
        let since = shoal_journal::now_ns();
        self.0.locked().push((conn, client.clone(), since));
    }

    pub fn leave(&self, conn: u64) {
        self.0.locked().retain(|(c, _, _)| *c != conn);
    }

    /// Who is here, oldest first.
    pub fn rows(&self) -> Vec<shoal_proto::kernel::HumanRow> {
        let list = self.0.locked();
        list.iter()
            .map(|(_, client, since)| shoal_proto::kernel::HumanRow {
                client: client.to_string(),
                since: shoal_policy::plan::rfc3339(*since),
            })
            .collect()
    }
}

impl SessionShared {
    pub fn new(name: String, cwd: PathBuf, render_width: usize) -> Self {
        let local = shoal_policy::runtime().local.clone();
        SessionShared {
            name,
            owner: local,
            owner_is_local: true,
            cwd,
            env: shoal_base::paths::base_env(),
            created: Instant::now(),
            render_width,
            transcript: Arc::new(Mutex::new(Transcript::new(4096))),
            base: Arc::default(),
            reserved: RefReservation::default(),
            services: None,
            clients: AtomicI64::new(0),
            humans: Humans::default(),
            busy: Busy::default(),
            interrupter: Mutex::new(None),
            injector: Mutex::new(None),
            adapters: None,
            live: Mutex::new(None),
            fork_seed: Mutex::new(None),
            session_memory: 0,
            spill_bytes: 0,
            memory: shoal_lang::memory::MemBudget::leak(0),
            spill: Mutex::new(None),
            actor: Mutex::new(None),
            remote: Mutex::new(None),
            there_job: Default::default(),
            there_memory: Default::default(),
            supervisor: OnceLock::new(),
            tasks: Default::default(),
            ptys: Default::default(),
        }
    }

    /// Whose sandbox a caller's work in this session runs under: in a
    /// session a token owns, the owner's, whoever calls (the local uid
    /// attached to it must not lend the owner's programs its reach);
    /// elsewhere the caller's own.
    pub fn confining_gate(
        &self,
        caller: Option<Arc<shoal_policy::Gate>>,
    ) -> Option<Arc<shoal_policy::Gate>> {
        match caller {
            Some(g) if self.owner_is_local || g.principal == self.owner => Some(g),
            None if self.owner_is_local => None,
            _ => Some(Arc::new(shoal_policy::Gate::for_principal(&self.owner))),
        }
    }

    /// The line to the live Session actor's worker, where execs go directly.
    pub fn worker_line(&self) -> Option<super::WorkerLine> {
        let a = self.actor.locked();
        let (weak, line) = a.as_ref()?;
        weak.upgrade().filter(actix::Addr::connected)?;
        Some(line.clone())
    }

    /// The supervisor started a new Session actor (`None`: there is none any
    /// more; the old worker's line is dropped here).
    pub fn set_actor(&self, a: Option<(&actix::Addr<super::Session>, super::WorkerLine)>) {
        *self.actor.locked() = a.map(|(addr, line)| (addr.downgrade(), line));
    }

    /// The supervisor, while it lives.
    pub fn supervisor(
        &self,
    ) -> Option<actix::WeakAddr<crate::sessions::supervisor::SessionSupervisor>> {
        self.supervisor.get().cloned()
    }

    /// The supervisor started (a session has one supervisor: a second is ignored).
    pub fn set_supervisor(
        &self,
        a: actix::WeakAddr<crate::sessions::supervisor::SessionSupervisor>,
    ) {
        let _ = self.supervisor.set(a);
    }

    /// Apply the `[limits]` a language session enforces itself.
    pub fn with_limits(mut self, l: &crate::config::LimitsConfig) -> Self {
        self.session_memory = l.session_memory;
        self.spill_bytes = l.spill_bytes;
        self.memory.set_limit(l.session_memory);
        self
    }

    /// Keep at most `n` transcript values in memory (older ones come from the journal).
    pub fn with_resident_values(self, n: usize) -> Self {
        *self.transcript.locked() = Transcript::new(n);
        self
    }

    /// Owned by `principal` (the default: the local uid).
    pub fn with_owner(mut self, principal: &str) -> Self {
        self.owner_is_local = principal == shoal_policy::runtime().local;
        self.owner = principal.to_string();
        self
    }

    /// Start with exactly `env` (the creating client's environment).
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// Enter the session's tasks in the daemon's `tasks` (the default: a table of its own).
    pub fn with_tasks(mut self, tasks: crate::sessions::live_tasks::TaskRegistry) -> Self {
        self.tasks = tasks;
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
    pub(super) fn ensure_base(&self) {
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
    pub(super) fn reserve_next(&self) -> Result<(), SessionError> {
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
        if self.base.get().is_none() || self.busy.get() {
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
            .is_some_and(|s| s.writer.config().durability == shoal_journal::Durability::Immediate)
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
        } else if let Some(svc) = &self.services {
            // Ask for the next block ahead of need.
            self.reserved.ahead(&svc.writer, &self.name, n);
        }
        n
    }

    /// Times handing out an `out:N` waited for the journal (`daemon.status`).
    pub fn ref_waits(&self) -> u64 {
        self.reserved.waits()
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

    /// What `out:N` in source reads: the values this session holds in memory,
    /// older ones read back from the journal (blocking: never on an arbiter;
    /// a token's session reads none from before it existed, as `shoal_get`).
    pub fn transcript_lookup(&self) -> shoal_lang::eval::TranscriptLookup {
        let (transcript, base) = (self.transcript.clone(), self.base.clone());
        let writer = self.services.as_ref().map(|s| s.writer.clone());
        let (name, local) = (self.name.clone(), self.owner_is_local);
        Arc::new(move |n: u64| {
            let base = base.get().copied().unwrap_or(0);
            let (held, last) = {
                let t = transcript.locked();
                let held = n
                    .checked_sub(1 + base)
                    .and_then(|i| t.items.get(i as usize))
                    .cloned();
                (held, base + t.items.len() as u64)
            };
            match (held, &writer) {
                (Some(Some(v)), _) => Ok(v),
                (_, Some(w)) if n <= last && (local || n > base) => stored_value(w, &name, n),
                _ if n > last => Err(format!(
                    "no out:{n} in this session yet (the last is out:{last})"
                )),
                _ => Err(format!("out:{n} is not available here")),
            }
        })
    }

    /// The newest `out:N` number (0 when there is none).
    pub fn last_ref(&self) -> u64 {
        self.base() + self.transcript_len() as u64
    }

    pub fn transcript_len(&self) -> usize {
        self.transcript.locked().items.len()
    }

    /// The session's cwd and environment as of its last exec, else the ones it
    /// starts with (`shoal://session/cwd`, `shoal://session/env`): a copy, so
    /// a caller never holds the lock.
    pub fn views(&self) -> (PathBuf, Vec<(String, String)>) {
        match self.live_state() {
            Some(l) => (l.cwd, l.env),
            None => (self.cwd.clone(), self.env.clone()),
        }
    }

    /// The session's top-level names after the last exec (empty before the first).
    pub fn names(&self) -> Arc<[String]> {
        self.live
            .locked()
            .as_ref()
            .map_or_else(|| Arc::from(Vec::new()), |l| l.names.clone())
    }

    /// The cwd and environment after the last exec (`None` before the first):
    /// a copy, so a caller never holds the lock.
    pub fn live_state(&self) -> Option<LiveState> {
        self.live.locked().clone()
    }

    /// Deliver a `user.*` event to the language's `channel(...)` readers (none
    /// before the first exec started the language session).
    /// `bytes`: the event's size, for the bound on what a session keeps of them.
    pub fn inject(&self, channel: &str, payload: Value, bytes: usize) {
        if let Some(h) = self.remote.locked().as_ref() {
            h.remote.inject(&h.key, channel, &payload);
        }
        if let Some(inj) = self.injector.locked().as_ref() {
            inj.inject(channel, payload, bytes);
        }
    }

    /// Interrupt the running evaluation, if any.
    pub fn interrupt(&self) {
        if let Some(i) = self.interrupter.locked().as_ref() {
            i.interrupt();
        }
        if let Some(h) = self.remote.locked().as_ref() {
            h.remote.interrupt(self.there_job.load(Ordering::SeqCst));
        }
    }

    /// The session evaluates in a worker process (its owner is a token
    /// principal: docs/leash.md), not on a thread of the daemon.
    pub fn evaluates_there(&self) -> bool {
        !self.owner_is_local
    }

    /// The pid of the session's worker process, while it has one.
    pub fn worker_pid(&self) -> Option<u32> {
        self.remote.locked().as_ref().map(|h| h.remote.pid())
    }

    /// Bytes its values hold: here, or in its worker as of its last exec.
    pub fn value_memory(&self) -> u64 {
        self.memory.resident() + self.there_memory.load(Ordering::Relaxed)
    }

    /// The session's worker process as it is now (none started here).
    pub fn remote_now(&self) -> Option<Arc<crate::worker::remote::Remote>> {
        self.remote.locked().as_ref().map(|h| h.remote.clone())
    }
}

/// Whether a session's worker runs an exec, and that exec's call: shutdown
/// cancels it (a call not begun yet never runs, so no interrupt is lost to
/// its start) and waits, woken by [`Busy::end`], for the worker to be done.
#[derive(Debug, Default)]
pub struct Busy {
    running: Mutex<Option<Arc<crate::msg::CallCancel>>>,
    changed: shoal_base::sync::Changes,
}

impl Busy {
    pub fn get(&self) -> bool {
        self.running.locked().is_some()
    }

    /// The worker starts `call`.
    pub fn start(&self, call: Arc<crate::msg::CallCancel>) {
        *self.running.locked() = Some(call);
        self.changed.notify();
    }

    /// The worker is done with its exec.
    pub fn end(&self) {
        *self.running.locked() = None;
        self.changed.notify();
    }

    /// Cancel the running exec's call, if one runs.
    pub fn cancel(&self) {
        let call = self.running.locked().clone();
        if let Some(c) = call {
            c.cancel();
        }
    }

    /// Wait until no exec runs or `deadline` passes; whether none runs.
    pub fn wait_idle(&self, deadline: Instant) -> bool {
        self.changed.wait_until(deadline, || !self.get())
    }
}
