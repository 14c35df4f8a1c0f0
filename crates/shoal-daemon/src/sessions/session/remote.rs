//! A session a token principal owns evaluates in a worker process of its
//! own (`shoal worker`, docs/leash.md "Layers"), confined by the kernel as
//! a whole: builtins, methods and every child meet Landlock, seccomp and
//! `no_new_privs` there, never in the daemon. The daemon's side of the
//! session stays here: its thread sends each job over the session's line
//! (a socketpair of its own, read by the session's thread in the worker;
//! a background task's goes over the worker's pair) and settles the
//! evaluation that comes back exactly as a local one (`exec.rs`:
//! `out:N`, the bounded reply, the journal). What the worker asks back
//! (`out:N`, `user.*` events, the session's tasks) is answered from the
//! session's state, never trusting the worker for more than its session.
//!
//! One worker serves every session of its principal (their memory is one
//! budget, `[limits] principal_memory`, in one process). It starts with
//! the first job of the principal's first session and ends when the last
//! of them is gone; one that ended (killed, crashed) is replaced by the
//! next job, with fresh bindings, and the job that was running gets an
//! error that says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::record::PendingJournal;
use super::shared::{LiveState, SessionShared};
use super::{cancelled_before_running, exec};
use crate::msg::{Exec, ExecReply, SessionError};
use crate::worker::proto::{self, ExecJob, LineJob, TaskAnswer, TaskAsk, ToWorker};
use crate::worker::remote::{Answers, Line, Remote};
use crate::worker::tasks as wtasks;
use shoal_base::sync::Locked;
use shoal_lang::eval::TaskHost;

/// A session hosted in its owner's worker: the worker, and the session's
/// line to it (its thread's jobs, one at a time).
#[derive(Debug, Clone)]
pub struct Hosting {
    pub remote: Arc<Remote>,
    pub line: Arc<Mutex<Line>>,
    /// What the worker calls this session: its name and a number of its
    /// own, so a closed session's last notes never reach a newer one of
    /// the same name.
    pub key: String,
}

/// A fork kept in a worker process for a background task, and where: the
/// worker and the session's key there when it was made. The task runs
/// there or not at all (a worker started since, or the session hosted
/// again, holds none of it), and its failing never unhosts the session
/// from a worker other than its own.
#[derive(Debug, Clone)]
pub struct ForkThere {
    fork: u64,
    remote: Weak<Remote>,
    key: String,
}

/// `shared`'s worker: its owner's running one, else a new one (started,
/// confined), hosting the session.
pub fn remote_of(shared: &SessionShared) -> Result<Hosting, SessionError> {
    hosting(shared).map(|(h, _)| h)
}

/// [`remote_of`], and whether the session's earlier worker turned out to
/// be gone here (nothing of this session has said so yet: its bindings
/// went with it).
fn hosting(shared: &SessionShared) -> Result<(Hosting, bool), SessionError> {
    let mut slot = shared.remote.locked();
    if let Some(h) = slot.as_ref().filter(|h| !h.remote.is_gone()) {
        return Ok((h.clone(), false));
    }
    let replaced = slot.take().is_some();
    let unavailable = |m: String| {
        tracing::error!(session = %shared.name, "no worker process: {m}");
        SessionError::Internal(format!(
            "session {}: its worker process is unavailable ({m})",
            shared.name
        ))
    };
    let svc = shared
        .services
        .as_ref()
        .ok_or_else(|| unavailable("this daemon runs no workers".into()))?;
    // A worker that died a moment ago may not be known as gone yet: hosting
    // the session there fails, and then once more in a new one.
    match host_in(shared, svc) {
        Err(e) if e.1 => host_in(shared, svc),
        r => r,
    }
    .map(|h| {
        *slot = Some(h.clone());
        (h, replaced)
    })
    .map_err(|e| unavailable(e.0))
}

/// Host `shared` in its owner's worker (started if need be). The error says
/// whether that worker turned out to be gone.
fn host_in(
    shared: &SessionShared,
    svc: &crate::journal_writer::Services,
) -> Result<Hosting, (String, bool)> {
    let remote = svc
        .workers
        .for_principal(&shared.owner)
        .map_err(|e| (e, false))?;
    let key = format!("{}#{}", shared.name, remote.job());
    let tasks = crate::sessions::supervisor::remote_tasks(
        shared,
        Arc::new(shoal_policy::Gate::for_principal(&shared.owner)),
    );
    // The forks its evaluations make for `cmd &` are kept there, under
    // this key.
    let at = ForkThere {
        fork: 0,
        remote: Arc::downgrade(&remote),
        key: key.clone(),
    };
    let answers = Answers {
        leaf: None,
        lookup: shared.transcript_lookup(),
        bus: Some(svc.bus.clone()),
        tasks: tasks.map(|t| {
            Box::new(move |ask, stop: &shoal_lang::Interrupter| task_answer(&t, &at, ask, stop))
                as crate::worker::remote::TaskAnswerer
        }),
    };
    let open = ToWorker::Open {
        session: key.clone(),
        cwd: shared.cwd.clone(),
        env: shared.env.clone(),
        session_memory: shared.session_memory,
        spill_bytes: shared.spill_bytes,
    };
    let line = remote
        .host(&key, &shared.name, answers, &open)
        .map_err(|e| {
            let gone = e == crate::worker::pair::GONE || remote.is_gone();
            if gone {
                svc.workers.forget(&remote);
            }
            (e, gone)
        })?;
    Ok(Hosting {
        remote,
        line: Arc::new(Mutex::new(line)),
        key,
    })
}

/// The answer to a worker evaluation's `ask` of its session's tasks (the
/// session hosted as `at` says). A wait ends with the task, the session,
/// or `stop` (the worker gave up).
fn task_answer(
    tasks: &crate::sessions::supervisor::RemoteTasks,
    at: &ForkThere,
    ask: TaskAsk,
    stop: &shoal_lang::Interrupter,
) -> TaskAnswer {
    let r = match ask {
        TaskAsk::Start { src, fork } => {
            let fork = ForkThere { fork, ..at.clone() };
            tasks.start_there(&src, fork).map(TaskAnswer::Task)
        }
        TaskAsk::List { id: None } => tasks.list().map(TaskAnswer::Tasks),
        TaskAsk::List { id: Some(id) } => tasks
            .info(id)
            .map(|t| TaskAnswer::Tasks(t.into_iter().collect())),
        TaskAsk::Wait { id } => return wtasks::ended(tasks.wait(id, stop)),
        TaskAsk::Control { id, control } => tasks.control(id, control).map(|()| TaskAnswer::Done),
    };
    r.unwrap_or_else(|e| TaskAnswer::raised(&e))
}

/// Evaluate `job` in `shared`'s worker, on the session's own language
/// state (`fork: None`, the foreground) or on fork `fork` (a background
/// task, in the worker that keeps its fork: `job_slot` gets the worker's
/// number for it), and keep what it leaves as a local evaluation's.
pub(super) fn run_there(
    shared: &SessionShared,
    job: &Exec,
    fork: Option<(&ForkThere, &AtomicU64)>,
) -> (Result<ExecReply, SessionError>, Option<PendingJournal>) {
    let there = match fork {
        None => hosting(shared).map(|(h, replaced)| (h.remote, Some(h.line), h.key, replaced)),
        Some((f, _)) => f
            .remote
            .upgrade()
            .filter(|r| !r.is_gone())
            .map(|r| (r, None, f.key.clone(), false))
            .ok_or_else(|| {
                SessionError::Internal(
                    "the worker process that kept this task's fork has ended".into(),
                )
            }),
    };
    let (remote, line, key, replaced) = match there {
        Ok(t) => t,
        Err(e) => return (Err(e), None),
    };
    shared.ensure_base();
    if let Err(e) = shared.reserve_next() {
        return (Err(e), None);
    }
    let number = remote.job();
    let caller = job.gate.as_ref().map_or_else(
        || shoal_policy::runtime().local.clone(),
        |g| g.principal.clone(),
    );
    let spec = ExecJob {
        session: key.clone(),
        job: number,
        src: job.src.clone(),
        value_position: job.position == shoal_lang::Position::Value,
        tty: job.tty,
        width: job.width.unwrap_or(shared.render_width),
        caller: Some(caller),
        check: job.check,
        place: job.place.clone(),
        approved: job
            .approved
            .iter()
            .map(shoal_policy::Effect::to_json)
            .collect(),
    };
    // The foreground's job goes on the session's line; a task's on the
    // worker's pair (it runs beside the foreground, on a thread of its own).
    let msg = match fork {
        None => Ok(LineJob::Exec(spec)),
        Some((fork, slot)) => {
            slot.store(number, Ordering::SeqCst);
            // The task's record shows its programs' output as it comes.
            if let Some(tail) = shoal_lang::shell::process::thread_tail() {
                remote.watch(number, tail);
            }
            Err(ToWorker::Task {
                fork: fork.fork,
                job: spec,
            })
        }
    };
    let there = remote.clone();
    let interrupt = Arc::new(move || there.interrupt(number));
    if !job.cancel.begin_there(interrupt) {
        return (Err(cancelled_before_running()), None);
    }
    let foreground = fork.is_none();
    if foreground {
        shared.there_job.store(number, Ordering::SeqCst);
    }
    let answer = match (&msg, &line) {
        (Ok(job), Some(line)) => line.locked().ask(job),
        (Ok(_), None) => Err("a foreground job without its line".into()),
        (Err(task), _) => remote.request(task).and_then(|j| {
            serde_json::from_value::<proto::Answer>(j).map_err(|e| format!("not an answer: {e}"))
        }),
    };
    remote.unwatch(number);
    if foreground {
        shared.there_job.store(0, Ordering::SeqCst);
    }
    let proto::Answer {
        outcome,
        live,
        memory,
    } = match answer {
        Ok(a) => a,
        // A task's fork refused by a worker still there (its session was
        // hosted again) is the task's failure alone.
        Err(m) if !foreground && !remote.is_gone() && m != crate::worker::pair::GONE => {
            return (
                Err(SessionError::Internal(format!(
                    "the task could not run in the session's worker process ({m})"
                ))),
                None,
            );
        }
        Err(m) => {
            tracing::warn!(session = %shared.name, pid = remote.pid(), "the worker process ended: {m}");
            forget(shared, &remote, &key);
            return (
                Err(SessionError::Internal(format!(
                    "the session's worker process ended during this exec ({m}); \
                     the next exec starts a new one, without this session's bindings"
                ))),
                None,
            );
        }
    };
    if let Some(m) = memory {
        shared.there_memory.store(m.session, Ordering::Relaxed);
        remote.set_principal_memory(m.principal);
    }
    let done = match outcome {
        Err(e) => return (Err(e.into()), None),
        Ok(proto::Outcome::Done(c)) => c.evaluated(),
        Ok(_) => None,
    };
    let Some(done) = done else {
        return (
            Err(SessionError::Internal(
                "the worker's answer is not an evaluation".into(),
            )),
            None,
        );
    };
    if foreground {
        if let Some(live) = live {
            *shared.live.locked() = Some(LiveState {
                cwd: live.cwd,
                env: live.env,
                names: Arc::from(live.names),
            });
        }
    }
    if let crate::eval::Ran::Panicked(m) = &done.ran {
        tracing::error!(session = %shared.name, "evaluation panicked in the worker: {m}");
    }
    let mut done = done;
    if replaced && foreground {
        if let crate::eval::Ran::Value { warnings, .. }
        | crate::eval::Ran::Raised { warnings, .. } = &mut done.ran
        {
            warnings.insert(0, worker_replaced(&job.src));
        }
    }
    exec::settle(shared, job, done)
}

/// What an exec says when it ran in a new worker because the session's
/// last one had ended (killed, crashed) unnoticed by any exec before it.
fn worker_replaced(src: &str) -> shoal_lang::Warning {
    shoal_lang::Warning {
        code: "worker_replaced",
        message: "the session's worker process had ended: this exec ran in a new one, without the session's earlier bindings, cwd and environment changes".into(),
        span: shoal_base::error::Span::new(0, src.len()),
        hint: "set again what later commands need (`let`, `cd`, `env`)".into(),
    }
}

/// The worker `remote` ended, or the session's line broke (the session
/// hosted there as `key`): the next job hosts the session again (in a new
/// worker if need be). A hosting made since stays.
fn forget(shared: &SessionShared, remote: &Arc<Remote>, key: &str) {
    let mut slot = shared.remote.locked();
    if slot
        .as_ref()
        .is_some_and(|h| Arc::ptr_eq(&h.remote, remote) && h.key == key)
    {
        // A worker still there drops the session's state (its line is
        // out of step); the next job hosts it again.
        if let Some(h) = slot.take().filter(|h| !h.remote.is_gone()) {
            h.remote.release(&h.key);
        }
    }
}

/// Derive the effects of `src` in `shared`'s worker (planning).
pub(super) fn derive_there(
    shared: &SessionShared,
    src: &str,
    gate: Option<&Arc<shoal_policy::Gate>>,
) -> Result<shoal_policy::undo::Derived, SessionError> {
    let Hosting { remote, line, key } = remote_of(shared)?;
    let msg = LineJob::Derive {
        src: src.to_string(),
        caller: gate.map(|g| g.principal.clone()),
    };
    let answer = line.locked().ask(&msg).map_err(|m| {
        forget(shared, &remote, &key);
        SessionError::Internal(format!("the session's worker process ended ({m})"))
    })?;
    match answer.outcome {
        Err(e) => Err(e.into()),
        Ok(proto::Outcome::Derived(d)) => d.derived().ok_or_else(not_a_plan),
        Ok(_) => Err(not_a_plan()),
    }
}

fn not_a_plan() -> SessionError {
    SessionError::Internal("the worker's answer is not a plan".into())
}

/// A fork of `shared`'s language state in its worker for a background
/// task of `src`, past the owner's Leash verdict: where it is kept.
/// Blocking: never on an arbiter.
pub fn fork_there(shared: &SessionShared, src: &str) -> Result<ForkThere, SessionError> {
    let Hosting { remote, key, .. } = remote_of(shared)?;
    let msg = ToWorker::Fork {
        session: key.clone(),
        src: src.to_string(),
    };
    let j = remote
        .request(&msg)
        .map_err(|m| SessionError::Internal(format!("the session's worker process ended ({m})")))?;
    let fork = serde_json::from_value::<proto::Forked>(j)
        .map_err(|e| SessionError::Internal(format!("the worker's answer is not a fork: {e}")))?
        .map_err(SessionError::from)?;
    Ok(ForkThere {
        fork,
        remote: Arc::downgrade(&remote),
        key,
    })
}
