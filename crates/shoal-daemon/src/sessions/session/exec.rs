//! One evaluation as the session keeps it, foreground or a background
//! task's: the language session made from the session's state, the
//! evaluation itself (`eval.rs`), then the value stored as `out:N`, its
//! bounded render and the [`PendingJournal`] it leaves. Runs on an
//! evaluation thread only (never an arbiter); it never encodes a reply.

use std::sync::Arc;

use super::journal_unavailable;
use super::record::{PendingJournal, PendingRan};
use super::shared::{LiveState, SessionShared};
use super::worker::publish;
use crate::eval::{self, EvalJob, Evaluated, LangSetup, Ran};
use crate::msg::{Exec, ExecReply, SessionError};
use shoal_base::sync::Locked;
use shoal_lang::{Session as LangSession, SessionOptions};
use shoal_proto::{bound, kernel, wire};
use shoal_value::memory::Detached;
use shoal_value::Value;

pub use eval::check_gate;

/// What a language session of `shared` starts from: its cwd, environment,
/// limits, adapters, `out:N` and the bus bridge of `user.*` channels.
pub(super) fn lang_setup(shared: &SessionShared) -> LangSetup {
    let opts = SessionOptions {
        cwd: shared.cwd.clone(),
        env: Vec::new(),
        config: Default::default(),
        memory_limit: shared.session_memory,
        memory: Some(shared.memory),
        spill_limit: shared.spill_bytes,
        adapters: shared.adapters.clone(),
    };
    // `user.*` channels are the language's side of the event bus: what the
    // session emits there is published for every client.
    let bus = shared.services.as_ref().map(|svc| {
        let bus = svc.bus.clone();
        Arc::new(move |channel: &str, v: &Value| {
            // Freed by the bus and its readers, not the session's to hold.
            let _outside = Detached::new();
            if let Some(why) = crate::event_bus::oversized(wire::encoded_len(v)) {
                return Err(why);
            }
            bus.publish(channel, wire::encode(v));
            Ok(())
        }) as shoal_lang::BusSink
    });
    LangSetup {
        opts,
        env: shared.env.clone(),
        lookup: shared.transcript_lookup(),
        bus,
    }
}

/// A language session for `shared`.
pub(super) fn new_lang(shared: &SessionShared) -> Result<LangSession, SessionError> {
    eval::new_lang(lang_setup(shared)).map_err(|m| {
        tracing::error!(session = %shared.name, "language session failed to start: {m}");
        SessionError::Internal(format!("language session unavailable: {m}"))
    })
}

/// The worker's language session, started on first use (with the session's
/// views: channel injector, interrupter, spill allowance).
pub(super) fn ensure_lang<'a>(
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
/// `spawn_eval_thread`), on its own fork `lang` (one in the session's
/// worker: `job_slot` gets its number there): stored as `out:N`, journaled.
pub fn run_task(
    shared: &SessionShared,
    lang: super::TaskLang,
    spec: &Exec,
    stack: usize,
    job_slot: &std::sync::atomic::AtomicU64,
) -> Result<ExecReply, SessionError> {
    let _span = spec.cancel.origin().span(&shared.name).entered();
    let (mut result, journal) = match lang {
        super::TaskLang::Here(l) => run_job(shared, &mut Some(*l), spec, stack, false),
        super::TaskLang::There(fork) => {
            super::remote::run_there(shared, spec, Some((&fork, job_slot)))
        }
    };
    spec.cancel.finish();
    tracing::debug!(ok = result.is_ok(), "task evaluated");
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

/// Evaluate `job` in `lang` and keep what it leaves. The foreground
/// (`foreground`: the session's worker) creates the language session on
/// first use and updates the session's views; a task's fork leaves them
/// alone.
pub(super) fn run_job(
    shared: &SessionShared,
    lang: &mut Option<LangSession>,
    job: &Exec,
    stack: usize,
    foreground: bool,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    let session = if foreground {
        ensure_lang(shared, lang)
    } else {
        lang.as_mut()
            .ok_or_else(|| SessionError::Internal("language session unavailable".into()))
    };
    let session = match session {
        Ok(s) => s,
        Err(e) => return (Err(e), None),
    };
    // An approved plan runs only where it was made, and only on the files
    // it named as they were (checked here, on the worker, so nothing queued
    // before it can move the session or rewrite a script in between).
    if let Some(plan) = job.place.as_ref() {
        if let Err(e) = eval::still_in_place(plan, session, job.gate.as_deref(), &job.src) {
            return (Err(SessionError::Rpc(e)), None);
        }
    }
    let prepared = match eval::prepare(session, &job.src, job.position) {
        Ok(p) => p,
        Err(e) => return (Err(e), None),
    };
    shared.ensure_base();
    if let Err(e) = shared.reserve_next() {
        return (Err(e), None);
    }
    // Its programs belong to the session's foreground, or to the task whose
    // thread this is (docs/processes.md).
    let home = if foreground {
        Some(shoal_base::procs::Home::new(
            &shared.name,
            shoal_base::procs::Owner::Exec,
        ))
    } else {
        shoal_base::procs::current_home()
    };
    let spec = EvalJob {
        tty: job.tty,
        width: job.width.unwrap_or(shared.render_width),
        gate: job.gate.clone(),
        check: job.check,
        cancel: &job.cancel,
        tasks: crate::sessions::supervisor::task_host(shared, job.gate.clone()),
        home,
    };
    let done = match eval::evaluate(session, &spec, prepared, stack) {
        Ok(d) => d,
        Err(e) => return (Err(e), None),
    };
    if foreground {
        update_live(shared, session, &done);
    }
    if let Ran::Panicked(m) = &done.ran {
        // Never resume state a panic may have half-mutated.
        *lang = None;
        let origin = job.cancel.origin();
        tracing::error!(
            session = %shared.name,
            conn = origin.conn,
            id = %origin.request,
            "evaluation panicked: {m}"
        );
    }
    settle(shared, job, done)
}

/// The session's views after a foreground exec. Most execs change neither
/// cwd nor environment: compare rather than copy.
fn update_live(shared: &SessionShared, session: &LangSession, done: &Evaluated) {
    let mut live = shared.live.locked();
    let names = session.name_count();
    let same = live
        .as_ref()
        .is_some_and(|l| l.cwd == done.cwd && session.env_is(&l.env) && l.names.len() == names);
    if !same {
        let names = match live.as_ref() {
            Some(l) if l.names.len() == names => l.names.clone(),
            _ => Arc::from(session.all_names()),
        };
        *live = Some(LiveState {
            cwd: done.cwd.clone(),
            env: session.env(),
            names,
        });
    }
}

/// What the session keeps of an evaluation: the value as `out:N`, the
/// reply's bounded text, the journal record.
pub(super) fn settle(
    shared: &SessionShared,
    job: &Exec,
    done: Evaluated,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    let Evaluated {
        effects,
        cwd,
        ts,
        elapsed,
        ran,
    } = done;
    let pending = |n: u64, ran: PendingRan| {
        shared.services.as_ref().map(|_| PendingJournal {
            n,
            principal: job.gate.as_ref().map(|g| g.principal.clone()),
            by: job.cancel.caller(),
            effects: effects.clone(),
            src: job.src.clone(),
            cwd: cwd.clone(),
            ts,
            dur_ns: elapsed.as_nanos().min(i64::MAX as u128) as i64,
            ran,
        })
    };
    match ran {
        Ran::Panicked(m) => (
            Err(SessionError::Internal(format!(
                "evaluation panicked ({m}); the session's bindings were reset"
            ))),
            None,
        ),
        Ran::Parse(mut e) => {
            // Where, in words a reader counts by (the span stays in bytes).
            let (line, column) = shoal_base::text::line_col(&job.src, e.span.start as usize);
            e.msg = format!("{} (line {line}, column {column})", e.msg);
            (Err(SessionError::Parse(e)), None)
        }
        Ran::Raised { error, warnings } => {
            let n = shared.push(Value::Error(Arc::new(error.clone())));
            let _outside = Detached::new();
            let j = pending(n, PendingRan::Raised(error.clone()));
            (
                Err(SessionError::Raised {
                    error,
                    n,
                    warnings: warnings.into_boxed_slice(),
                }),
                j,
            )
        }
        Ran::Value {
            value,
            shown,
            warnings,
        } => {
            let n = shared.push(value.clone());
            // The reply and the journal record are the daemon's, freed on
            // other threads: made outside the session's memory budget.
            let _outside = Detached::new();
            // Head plus tail within the default text budget (the status
            // line leads the head, the stderr section ends the tail); the
            // whole text rides along when cut, for a caller's own
            // `elide.max_bytes`.
            let reference = kernel::ref_name(n);
            let render = shown.text(&reference);
            let text = bound::text_for(&render, job.tty);
            let at = bound::LinesRef {
                reference: &reference,
                path: None,
            };
            let bounded = bound::head_tail(&text, bound::TEXT_BUDGET, at);
            let full = (bounded.len() < text.len()).then(|| Arc::<str>::from(&*text));
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
                    full,
                    elapsed_ms: elapsed.as_secs_f64() * 1000.0,
                    journal: None,
                    warnings,
                }),
                j,
            )
        }
    }
}
