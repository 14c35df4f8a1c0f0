//! The session's worker thread: owns the language session, runs jobs in
//! order, answers each caller and hands the exec's journal record over before
//! or after the reply. It never touches an actor's state and never runs on an
//! arbiter.

use std::sync::{mpsc, Arc};

use tokio::sync::oneshot;

use super::exec::{ensure_lang, run_job};
use super::shared::{ForkSeed, SessionShared};
use super::{cancelled_before_running, journal_unavailable};
use crate::event_bus::Publish;
use crate::msg::{Exec, ExecReply, SessionError};
use shoal_base::sync::Locked;
use shoal_lang::Session as LangSession;

/// What the worker answers: the result, and the exec's bus events when its
/// journal record was handed off before the reply (the arbiter publishes them
/// as it takes the reply: no second wake-up of its thread).
pub(super) type JobReply = (Result<ExecReply, SessionError>, Vec<Publish>);

pub(super) struct Job {
    pub(super) spec: Exec,
    pub(super) reply: oneshot::Sender<JobReply>,
}

/// What the worker thread is asked to do.
pub(super) enum Work {
    Exec(Job),
    /// Derive the effects of a source (planning; nothing runs).
    Derive {
        src: String,
        /// The caller's principal (as an exec's `gate`).
        gate: Option<Arc<shoal_policy::Gate>>,
        reply: oneshot::Sender<Result<shoal_policy::undo::Derived, SessionError>>,
    },
}

/// The worker thread: owns the language session, runs jobs in order.
pub(super) fn worker(shared: Arc<SessionShared>, rx: mpsc::Receiver<Work>, stack: usize) {
    let mut state: Option<LangSession> = None;
    while let Ok(work) = rx.recv() {
        let lang = &mut state;
        let job = match work {
            Work::Exec(job) => job,
            Work::Derive { src, gate, reply } => {
                // Planning runs under the confinement an exec of this caller
                // would, and its file probes pass the caller's run-time gate
                // (even a file's existence is a read of it).
                if shared.evaluates_there() {
                    let r = super::remote::derive_there(&shared, &src, gate.as_ref());
                    let _ = reply.send(r);
                    continue;
                }
                let r = match confine_for(&shared, gate.as_ref())
                    .and_then(|()| ensure_lang(&shared, lang))
                {
                    Err(e) => Err(e),
                    Ok(session) => crate::eval::derive(session, gate.as_deref(), &src),
                };
                let _ = reply.send(r);
                continue;
            }
        };
        // This exec's call, for every line logged while it runs here.
        let _span = job.spec.cancel.origin().span(&shared.name).entered();
        if job.spec.cancel.is_cancelled() {
            job.spec.cancel.finish();
            let _ = job
                .reply
                .send((Err(cancelled_before_running()), Vec::new()));
            continue;
        }
        // A token-owned session evaluates in its worker process; this
        // thread only settles what comes back (never confined, never
        // evaluating).
        let there = shared.evaluates_there();
        let confined = if there {
            Ok(())
        } else {
            confine_for(&shared, job.spec.gate.as_ref())
        };
        if let Err(e) = confined {
            job.spec.cancel.finish();
            let _ = job.reply.send((Err(e), Vec::new()));
            continue;
        }
        shared.busy.start(job.spec.cancel.clone());
        let (result, journal) = if there {
            super::remote::run_there(&shared, &job.spec, None)
        } else {
            run_job(&shared, lang, &job.spec, stack, true)
        };
        // The reply and the journal record are freed on other threads: they do
        // not count against the session's memory (the fork seed, kept here, does).
        let outside = shoal_value::memory::Detached::new();
        job.spec.cancel.finish();
        tracing::debug!(ok = result.is_ok(), "exec evaluated");
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
            tracing::debug!("exec handed to the journal before the reply");
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
        // shutdown waits for it (see `RecordsInFlight`).
        let guard = after
            .as_ref()
            .and(shared.services.as_ref())
            .map(|s| s.records.begin());
        if let Err((_, events)) = job.reply.send((result, events)) {
            // The caller is gone: publish what it would have.
            publish(&shared, events);
        }
        drop(outside);
        if let (Some(seed), Some(l)) = (seed.as_mut(), &*lang) {
            **seed = Some(ForkSeed(l.fork()));
        }
        drop(seed);
        let _outside = shoal_value::memory::Detached::new();
        if let Some(j) = after {
            tracing::debug!("exec handed to the journal after the reply");
            let mut events = Vec::new();
            let _ = j.record(&shared, &mut events);
            publish(&shared, events);
        }
        drop(guard);
        shared.busy.end();
    }
    tracing::debug!(session = %shared.name, "worker thread ends");
}

/// Before a job: confine the calling (evaluation) thread, for good
/// (`leash::confine`), when the session or the caller is a token principal.
///
/// A session a token owns runs every job under its owner's sandbox, whoever
/// calls and whether or not the call names a principal: the local uid
/// attached to it runs the owner's closures and aliases, which must not
/// gain the local uid's reach. Elsewhere a token caller's own sandbox
/// applies. Only a local-uid job in a local-uid session runs as the thread
/// is. An error means the job must not run.
pub fn confine_for(
    shared: &SessionShared,
    gate: Option<&Arc<shoal_policy::Gate>>,
) -> Result<(), SessionError> {
    let Some(gate) = shared.confining_gate(gate.cloned()) else {
        return Ok(());
    };
    if gate.is_local() {
        return Ok(());
    }
    let denied = |m: String| {
        SessionError::Rpc(shoal_proto::rpc::RpcError::new(
            shoal_proto::rpc::LEASH_DENIED,
            m,
        ))
    };
    let rules = gate
        .sandbox
        .as_deref()
        .ok_or_else(|| denied(format!("principal {} has no sandbox", gate.principal)))?;
    shoal_policy::confine::confine_thread(&gate.principal, rules).map_err(denied)
}

/// Publish events from the worker thread.
pub(super) fn publish(shared: &SessionShared, events: Vec<Publish>) {
    if let Some(svc) = &shared.services {
        svc.bus.publish_all(events);
    }
}
