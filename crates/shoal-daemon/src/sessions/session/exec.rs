//! One evaluation, foreground or a background task's: the Leash gate on
//! the derived effects, the run under the caller's sandbox, the value stored
//! as `out:N`, its bounded render and the [`PendingJournal`] it leaves. Runs on
//! an evaluation thread only (never an arbiter); it never encodes a reply.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use super::record::{PendingJournal, PendingRan};
use super::shared::{LiveState, SessionShared};
use super::worker::publish;
use super::{cancelled_before_running, journal_unavailable, panic_message};
use crate::msg::{Exec, ExecReply, SessionError};
use shoal_base::sync::Locked;
use shoal_lang::session::Prepared;
use shoal_lang::{ExecError, Session as LangSession, SessionOptions};
use shoal_proto::{bound, kernel, wire};
use shoal_value::memory::Detached;
use shoal_value::render::Layout;
use shoal_value::{shown, Value};

/// A language session for `shared` (its cwd, environment, limits, adapters
/// and the bus bridge of `user.*` channels).
pub(super) fn new_lang(shared: &SessionShared) -> Result<LangSession, SessionError> {
    let opts = SessionOptions {
        cwd: shared.cwd.clone(),
        env: Vec::new(),
        config: Default::default(),
        memory_limit: shared.session_memory,
        memory: Some(shared.memory),
        spill_limit: shared.spill_bytes,
        adapters: shared.adapters.clone(),
    };
    catch_unwind(AssertUnwindSafe(|| {
        let mut s = LangSession::new(opts);
        s.replace_env(shared.env.clone());
        s.set_transcript(Some(shared.transcript_lookup()));
        if let Some(svc) = &shared.services {
            // `user.*` channels are the language's side of the event bus:
            // what the session emits there is published for every client.
            let bus = svc.bus.clone();
            s.set_bus_sink(Some(Arc::new(move |channel: &str, v: &Value| {
                // Freed by the bus and its readers, not the session's to hold.
                let _outside = Detached::new();
                bus.publish(channel, wire::encode(v));
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

/// The Leash gate of a run (docs/rules.md §21): derive the effects and refuse
/// unless the principal's verdict is `allow`. A parse error passes through
/// (the exec reports it as usual).
fn gate_run(
    gate: &shoal_policy::Gate,
    session: &LangSession,
    src: &str,
    check: bool,
) -> Result<Vec<serde_json::Value>, SessionError> {
    let derived = match catch_unwind(AssertUnwindSafe(|| {
        shoal_policy::run_gate::with_gate(gate.run.clone(), || session.derive_plan(src))
    })) {
        Ok(Ok(d)) => d,
        Ok(Err(_)) => return Ok(Vec::new()),
        Err(p) => {
            return Err(SessionError::Internal(format!(
                "planning panicked: {}",
                panic_message(&p)
            )))
        }
    };
    if check {
        let d = gate.decide_derived(&derived);
        if let Some(e) = shoal_proto::rpc::refusal(&gate.principal, &d, &derived.effects) {
            return Err(SessionError::Rpc(e));
        }
    }
    gate_effects(gate, &derived.effects, false)
}

/// The Leash verdict on derived `effects` (`check`: enforce it), and the
/// effects as the journal records them.
fn gate_effects(
    gate: &shoal_policy::Gate,
    effects: &[shoal_policy::Effect],
    check: bool,
) -> Result<Vec<serde_json::Value>, SessionError> {
    if check {
        let d = gate.decide(effects);
        if let Some(e) = shoal_proto::rpc::refusal(&gate.principal, &d, effects) {
            return Err(SessionError::Rpc(e));
        }
    }
    Ok(effects.iter().map(shoal_policy::Effect::to_json).collect())
}

/// The Leash verdict for running `src` in `lang` (a background task's start).
pub fn check_gate(
    gate: &shoal_policy::Gate,
    lang: &LangSession,
    src: &str,
) -> Result<(), SessionError> {
    gate_run(gate, lang, src, true).map(|_| ())
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
/// `spawn_eval_thread`), on its own fork `lang`: stored as `out:N`, journaled.
pub fn run_task(
    shared: &SessionShared,
    lang: LangSession,
    spec: &Exec,
    stack: usize,
) -> Result<ExecReply, SessionError> {
    let _span = spec.cancel.origin().span(&shared.name).entered();
    let mut lang = Some(lang);
    let (mut result, journal) = run_job(shared, &mut lang, spec, stack, false);
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

/// Evaluate `job` in `lang`. The foreground (`foreground`: the session's
/// worker) creates the language session on first use and updates the
/// session's views; a task's fork leaves them alone.
pub(super) fn run_job(
    shared: &SessionShared,
    lang: &mut Option<LangSession>,
    job: &Exec,
    stack: usize,
    foreground: bool,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    if foreground {
        if let Err(e) = ensure_lang(shared, lang) {
            return (Err(e), None);
        }
    }
    let prepared = match prepare(lang, job) {
        Ok(p) => p,
        Err(e) => return (Err(e), None),
    };
    finish_job(shared, lang, job, prepared, stack, foreground)
}

/// Parse `job` for `lang` (one parse serves the gate and the evaluation; a
/// parse error is the exec's own answer, reported like any other result).
fn prepare(
    lang: &mut Option<LangSession>,
    job: &Exec,
) -> Result<Result<Prepared, ExecError>, SessionError> {
    let Some(session) = lang.as_mut() else {
        return Err(SessionError::Internal(
            "language session unavailable".into(),
        ));
    };
    catch_unwind(AssertUnwindSafe(|| {
        session.prepare_exec(&job.src, job.position)
    }))
    .map_err(|p| SessionError::Internal(format!("parsing panicked: {}", panic_message(&p))))
}

/// The rest of an evaluation: the gate, the run (on a `stack`-byte thread), the value stored
/// as `out:N`, its render and the journal record it leaves.
fn finish_job(
    shared: &SessionShared,
    lang: &mut Option<LangSession>,
    job: &Exec,
    prepared: Result<Prepared, ExecError>,
    stack: usize,
    foreground: bool,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    let Some(session) = lang.as_mut() else {
        return (
            Err(SessionError::Internal(
                "language session unavailable".into(),
            )),
            None,
        );
    };
    let mut effects = Vec::new();
    if let (Some(gate), Ok(p)) = (&job.gate, &prepared) {
        // The deriver's file probes pass the caller's run-time gate.
        let derived = match catch_unwind(AssertUnwindSafe(|| {
            shoal_policy::run_gate::with_gate(gate.run.clone(), || session.derived_of(p))
        })) {
            Ok(e) => e,
            Err(p) => {
                let m = panic_message(&p);
                return (
                    Err(SessionError::Internal(format!("planning panicked: {m}"))),
                    None,
                );
            }
        };
        if job.check {
            let d = gate.decide_derived(&derived);
            if let Some(e) = shoal_proto::rpc::refusal(&gate.principal, &d, &derived.effects) {
                return (Err(SessionError::Rpc(e)), None);
            }
        }
        match gate_effects(gate, &derived.effects, false) {
            Ok(e) => effects = e,
            Err(e) => return (Err(e), None),
        }
    }
    // The caller's view of the environment (docs/rules.md §21), for this run.
    session.set_env_view(
        job.gate
            .as_deref()
            .and_then(shoal_lang::env_view::EnvView::for_gate),
    );
    // `cmd &`, `jobs` and task handles reach the session's tasks, for this caller.
    session.set_task_host(crate::sessions::supervisor::task_host(
        shared,
        job.gate.clone(),
    ));
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
    let ts = shoal_journal::now_ns();
    let t0 = Instant::now();
    let sandbox = job.gate.as_ref().and_then(|g| g.sandbox.clone());
    // The run-time Leash gate: every effect site checks it while this runs
    // (a thread-local).
    let run_gate = job.gate.as_ref().and_then(|g| g.run.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        shoal_policy::run_gate::with_gate(run_gate, || {
            shoal_policy::landlock::with_rules(sandbox, || {
                // Its programs belong to the session's foreground, or to the
                // task whose thread this is (docs/processes.md).
                let home = if foreground {
                    Some(shoal_base::procs::Home::new(
                        &shared.name,
                        shoal_base::procs::Owner::Exec,
                    ))
                } else {
                    shoal_base::procs::current_home()
                };
                shoal_base::procs::with_home(home, || {
                    prepared.and_then(|p| session.exec_prepared_here(p, stack))
                })
            })
        })
    }));
    let elapsed = t0.elapsed();
    let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
    let cwd = session.cwd();
    if foreground {
        // Most execs change neither: compare rather than copy the environment.
        let mut live = shared.live.locked();
        let names = session.name_count();
        let same = live
            .as_ref()
            .is_some_and(|l| l.cwd == cwd && session.env_is(&l.env) && l.names.len() == names);
        if !same {
            let names = match live.as_ref() {
                Some(l) if l.names.len() == names => l.names.clone(),
                _ => Arc::from(session.all_names()),
            };
            *live = Some(LiveState {
                cwd: cwd.clone(),
                env: session.env(),
                names,
            });
        }
    }
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
    match outcome {
        Err(p) => {
            // Never resume state a panic may have half-mutated.
            *lang = None;
            let m = panic_message(&p);
            let origin = job.cancel.origin();
            tracing::error!(
                session = %shared.name,
                conn = origin.conn,
                id = %origin.request,
                "evaluation panicked: {m}"
            );
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
            let _outside = Detached::new();
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
            // A terminal gets its width; text for a model or a pipe none
            // (docs/rules.md §12).
            let width = job.width.unwrap_or(shared.render_width);
            let layout = if job.tty {
                Layout::terminal(width)
            } else {
                Layout::text(width)
            };
            // The render, the reply and the journal record are the daemon's, freed on
            // other threads: made outside the session's memory budget.
            let rendered = {
                let _outside = Detached::new();
                catch_unwind(AssertUnwindSafe(|| match &value {
                    // `cmd &`: how to read the task it started.
                    Value::Task(t) => shown::Shown {
                        body: shoal_lang::task::started_text(t.id),
                        ..shown::Shown::default()
                    },
                    v => kernel::value_shown(v, layout),
                }))
            };
            let n = shared.push(value.clone());
            let _outside = Detached::new();
            let shown = match rendered {
                Ok(r) => r,
                Err(p) => {
                    tracing::warn!(session = %shared.name, "render panicked: {}", panic_message(&p));
                    shown::Shown::default()
                }
            };
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
                    elapsed_ms,
                    journal: None,
                    warnings: session.take_warnings(),
                }),
                j,
            )
        }
    }
}
