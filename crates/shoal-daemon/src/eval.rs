//! One evaluation, apart from the session's bookkeeping (in the daemon's
//! session thread, or in a token principal's worker process): the language
//! session's start, the Leash gate on the derived effects, the run under the
//! caller's sandbox and the value's render. What it needs from the session
//! comes in as values ([`LangSetup`], [`EvalJob`]) and what it leaves goes out
//! as one ([`Evaluated`]); nothing here reads or writes [`SessionShared`]
//! (tidy checks it), so the same code can evaluate wherever the language
//! session lives. Numbering the value as `out:N`, the reply's text and the
//! journal record are the session's (`exec.rs`).
//!
//! [`SessionShared`]: crate::sessions::session::SessionShared

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::msg::{CallCancel, SessionError};
use shoal_lang::eval::TaskHostRef;
use shoal_lang::eval::{BusSink, TranscriptLookup};
use shoal_lang::session::Prepared;
use shoal_lang::{ExecError, Session as LangSession, SessionOptions, Warning};
use shoal_proto::kernel;
use shoal_value::memory::Detached;
use shoal_value::render::Layout;
use shoal_value::{shown, ShoalError, Value};

/// What a language session starts from.
#[derive(Clone)]
pub struct LangSetup {
    pub opts: SessionOptions,
    /// Its environment (the creating client's).
    pub env: Vec<(String, String)>,
    /// What `out:N` in source reads.
    pub lookup: TranscriptLookup,
    /// Where its `user.*` channel events go (`None`: nowhere).
    pub bus: Option<BusSink>,
}

/// A language session made from `setup`.
pub fn new_lang(setup: LangSetup) -> Result<LangSession, String> {
    catch_unwind(AssertUnwindSafe(move || {
        let mut s = LangSession::new(setup.opts);
        s.replace_env(setup.env);
        s.set_transcript(Some(setup.lookup));
        s.set_bus_sink(setup.bus);
        s
    }))
    .map_err(|p| panic_message(&p))
}

/// One evaluation's request, as the session hands it over.
pub struct EvalJob<'a> {
    /// Keep ANSI escapes in the render.
    pub tty: bool,
    /// The render's width.
    pub width: usize,
    /// The caller's principal: its run-time gate, sandbox and view of the
    /// environment (`None`: the local uid, unchecked).
    pub gate: Option<Arc<shoal_policy::Gate>>,
    /// Refuse unless the gate's verdict on the derived effects allows.
    pub check: bool,
    pub cancel: &'a CallCancel,
    /// Where `cmd &`, `jobs` and task handles reach the session's tasks.
    pub tasks: Option<TaskHostRef>,
    /// Whose programs its children are (docs/processes.md).
    pub home: Option<shoal_base::procs::Home>,
}

/// What an evaluation leaves.
pub struct Evaluated {
    /// The derived effects as the journal records them (none without a gate).
    pub effects: Vec<serde_json::Value>,
    /// The cwd it ended in.
    pub cwd: PathBuf,
    /// When it started (ns since the epoch) and how long it ran.
    pub ts: i64,
    pub elapsed: Duration,
    pub ran: Ran,
}

/// How an evaluation ended.
pub enum Ran {
    /// The language panicked: its state must not be used again.
    Panicked(String),
    Parse(shoal_lang::ParseError),
    Raised {
        error: ShoalError,
        warnings: Vec<Warning>,
    },
    Value {
        value: Value,
        /// Its render's parts, before the `out:N` reference is known.
        shown: shown::Shown,
        warnings: Vec<Warning>,
    },
}

/// Parse `src` for `lang` (one parse serves the gate and the evaluation; a
/// parse error is the exec's own answer, reported like any other result).
pub fn prepare(
    lang: &mut LangSession,
    src: &str,
    position: shoal_lang::Position,
) -> Result<Result<Prepared, ExecError>, SessionError> {
    catch_unwind(AssertUnwindSafe(|| lang.prepare_exec(src, position)))
        .map_err(|p| SessionError::Internal(format!("parsing panicked: {}", panic_message(&p))))
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

/// The Leash verdict for running `src` in `lang` (a background task's start):
/// derive the effects and refuse unless the principal's verdict is `allow`.
/// A parse error passes (the run reports it as usual).
pub fn check_gate(
    gate: &shoal_policy::Gate,
    lang: &LangSession,
    src: &str,
) -> Result<(), SessionError> {
    let derived = match derive(lang, Some(gate), src) {
        Ok(d) => d,
        Err(SessionError::Parse(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let d = gate.decide_derived(&derived);
    if let Some(e) = shoal_proto::rpc::refusal(&gate.principal, &d, &derived.effects) {
        return Err(SessionError::Rpc(e));
    }
    Ok(())
}

/// Derive the effects of `src` in `lang` (planning: nothing runs); the
/// deriver's file probes pass `gate`'s run-time checks (even a file's
/// existence is a read of it).
pub fn derive(
    lang: &LangSession,
    gate: Option<&shoal_policy::Gate>,
    src: &str,
) -> Result<shoal_policy::undo::Derived, SessionError> {
    catch_unwind(AssertUnwindSafe(|| {
        shoal_policy::run_gate::with_gate(gate.and_then(|g| g.run.clone()), || {
            lang.derive_plan(src)
        })
    }))
    .map_err(|p| SessionError::Internal(format!("planning panicked: {}", panic_message(&p))))
    .and_then(|r| r.map_err(SessionError::Parse))
}

/// `plan` (an approved plan's place) against the session now: the same
/// cwd and environment, and the same content in every file its source
/// `src` names, looked at as the plan's deriver looked (the caller's
/// run-time gate without the plan's approval).
pub fn still_in_place(
    plan: &shoal_policy::plan::Place,
    lang: &LangSession,
    gate: Option<&shoal_policy::Gate>,
    src: &str,
) -> Result<(), shoal_proto::rpc::RpcError> {
    use shoal_proto::rpc::{RpcError, APPROVAL_REQUIRED};
    let planning = gate
        .and_then(|g| g.run.as_ref())
        .map(|r| Arc::new(r.applying(&[])));
    let here = shoal_policy::run_gate::with_gate(planning, || lang.place_for(src));
    if let Some(why) = plan.moved(&here) {
        return Err(
            RpcError::new(APPROVAL_REQUIRED, why).with_data(serde_json::json!({"moved": true}))
        );
    }
    if let Some(f) = plan.changed(&here) {
        return Err(
            RpcError::new(APPROVAL_REQUIRED, shoal_policy::place::changed_why(&f))
                .with_data(serde_json::json!({"changed": f.to_string_lossy()})),
        );
    }
    Ok(())
}

/// Evaluate `prepared` in `lang` for `job`, on a `stack`-byte thread. An
/// error means it did not run (refused by the gate, cancelled first, or the
/// deriver panicked).
pub fn evaluate(
    lang: &mut LangSession,
    job: &EvalJob<'_>,
    prepared: Result<Prepared, ExecError>,
    stack: usize,
) -> Result<Evaluated, SessionError> {
    let mut effects = Vec::new();
    if let (Some(gate), Ok(p)) = (&job.gate, &prepared) {
        // The deriver's file probes pass the caller's run-time gate.
        let derived = catch_unwind(AssertUnwindSafe(|| {
            shoal_policy::run_gate::with_gate(gate.run.clone(), || lang.derived_of(p))
        }))
        .map_err(|p| SessionError::Internal(format!("planning panicked: {}", panic_message(&p))))?;
        if job.check {
            let d = gate.decide_derived(&derived);
            if let Some(e) = shoal_proto::rpc::refusal(&gate.principal, &d, &derived.effects) {
                return Err(SessionError::Rpc(e));
            }
        }
        effects = gate_effects(gate, &derived.effects, false)?;
    }
    // The caller's view of the environment (docs/rules.md §21), for this run.
    lang.set_env_view(
        job.gate
            .as_deref()
            .and_then(shoal_lang::env_view::EnvView::for_gate),
    );
    lang.set_task_host(job.tasks.clone());
    let interrupter = lang.interrupter();
    interrupter.reset();
    // From here a cancel of this call interrupts it (and only it).
    if !job.cancel.begin(Some(&interrupter)) {
        return Err(cancelled_before_running());
    }
    let ts = shoal_journal::now_ns();
    let t0 = Instant::now();
    let sandbox = job.gate.as_ref().and_then(|g| g.sandbox.clone());
    // The run-time Leash gate: every effect site checks it while this runs
    // (a thread-local).
    let run_gate = job.gate.as_ref().and_then(|g| g.run.clone());
    let home = job.home.clone();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        shoal_policy::run_gate::with_gate(run_gate, || {
            shoal_policy::landlock::with_rules(sandbox, || {
                shoal_base::procs::with_home(home, || {
                    prepared.and_then(|p| lang.exec_prepared_here(p, stack))
                })
            })
        })
    }));
    let elapsed = t0.elapsed();
    let ran = match outcome {
        Err(p) => Ran::Panicked(panic_message(&p)),
        Ok(Err(ExecError::Parse(e))) => Ran::Parse(e),
        Ok(Err(ExecError::Raised(error))) => Ran::Raised {
            error,
            warnings: lang.take_warnings(),
        },
        Ok(Ok(value)) => {
            // A terminal gets its width; text for a model or a pipe none
            // (docs/rules.md §12).
            let layout = if job.tty {
                Layout::terminal(job.width)
            } else {
                Layout::text(job.width)
            };
            // The render is the daemon's, freed on other threads: made
            // outside the session's memory budget.
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
            let shown = rendered.unwrap_or_else(|p| {
                tracing::warn!("render panicked: {}", panic_message(&p));
                shown::Shown::default()
            });
            Ran::Value {
                value,
                shown,
                warnings: lang.take_warnings(),
            }
        }
    };
    Ok(Evaluated {
        effects,
        cwd: lang.cwd(),
        ts,
        elapsed,
        ran,
    })
}

/// The reply to a call cancelled before it ran.
pub fn cancelled_before_running() -> SessionError {
    SessionError::Rpc(
        shoal_proto::rpc::RpcError::new(
            shoal_proto::rpc::RAISED,
            "cancelled before it ran (removed from the session's queue)",
        )
        .with_data(serde_json::json!({"code": "cancelled", "ran": false})),
    )
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

/// A wire error as the language raises it (a task host's answer).
pub fn lang_error(e: shoal_proto::rpc::RpcError) -> ShoalError {
    let code = match e.code {
        shoal_proto::rpc::LEASH_DENIED => shoal_value::ErrorCode::Permission,
        shoal_proto::rpc::UNKNOWN_TASK => shoal_value::ErrorCode::NotFound,
        _ if e.message.contains("max_tasks_per_session") => shoal_value::ErrorCode::ResourceLimit,
        _ => shoal_value::ErrorCode::Custom,
    };
    let mut err = ShoalError::new(code, e.message.clone());
    if let Some(h) = e
        .data
        .as_ref()
        .and_then(|d| d.get("hint"))
        .and_then(|h| h.as_str())
    {
        err = err.with_hint(h);
    }
    err
}
