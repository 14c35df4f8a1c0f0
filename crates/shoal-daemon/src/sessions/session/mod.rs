//! The Session actor: owns one named session's evaluation worker thread and
//! nothing else. Evaluation blocks (it spawns and waits on processes), so the
//! actor hands jobs to the worker (`worker.rs`) over a channel and awaits the
//! reply. The one exception is a quick program (`shoal_lang::quick`: scalar
//! arithmetic, bounded by its source) while the worker is idle: the actor
//! answers it itself, on its arbiter, which saves the two thread wake-ups of
//! the hand-off (about 30 µs on a virtual machine) and can neither block nor
//! spawn (docs/rules.md §1).
//!
//! The language session lives in the worker's [`Lane`]; a panic in the language
//! is caught there, reported as an error, and the (possibly half-mutated)
//! language state is dropped rather than resumed. The transcript lives in
//! [`SessionShared`] (`shared.rs`, `transcript.rs`), owned by the supervisor,
//! so it survives a restart of this actor. One evaluation is `exec.rs`; what
//! it leaves for the journal is `record.rs`.

mod exec;
mod record;
mod shared;
mod transcript;
mod worker;

use std::sync::{mpsc, Arc};

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::health::Registration;
use crate::msg::{Crash, Exec, ExecReply, SessionError};

pub use exec::{check_gate, run_task, JobSpec};
pub use record::wait_records_handed_off;
pub use shared::{ForkSeed, Humans, LiveState, SessionShared};
pub use transcript::Transcript;
pub use worker::confine_for;
use worker::{publish, worker, Job, Lane, Work};

pub use crate::msg::CallCancel;

/// The journal cannot make this exec durable: `-32603` with `data.journal: "unavailable"`.
pub fn journal_unavailable(error: &str) -> SessionError {
    SessionError::Rpc(
        shoal_proto::rpc::RpcError::internal(format!(
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
        shoal_proto::rpc::RpcError::new(
            shoal_proto::rpc::RAISED,
            "cancelled before it ran (removed from the session's queue)",
        )
        .with_data(serde_json::json!({"code": "cancelled", "ran": false})),
    )
}

pub struct Session {
    shared: Arc<SessionShared>,
    /// The language state and queue depth shared with the worker.
    lane: Arc<Lane>,
    jobs: Option<mpsc::Sender<Work>>,
    reg: Registration,
    /// Tells the supervisor when this actor ends (a panic included).
    _exit: Option<crate::sessions::supervisor::ExitNotice>,
}

impl Session {
    pub fn new(shared: Arc<SessionShared>, reg: Registration) -> Self {
        Session {
            shared,
            lane: Arc::default(),
            jobs: None,
            reg,
            _exit: None,
        }
    }

    pub fn with_exit_notice(mut self, exit: crate::sessions::supervisor::ExitNotice) -> Self {
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
        let lane = self.lane.clone();
        // The worker evaluates on its own (large) stack: no thread per exec.
        let spawned = shoal_lang::session::spawn_eval_thread(
            format!("shoal-session-{}", self.shared.name),
            move |stack| worker(shared, lane, rx, stack),
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

impl Session {
    /// Hand `work` to the worker (counted in the lane until it finishes).
    fn hand_off(&self, work: Work) -> bool {
        let Some(tx) = &self.jobs else {
            return false;
        };
        self.lane
            .queued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let sent = tx.send(work).is_ok();
        if !sent {
            self.lane
                .queued
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        sent
    }

    /// Answer `msg` here if it is quick and nothing would wait: the worker
    /// idle (so execs keep their order), the language session started, the
    /// journal taking the record without blocking. `None`: hand it off.
    ///
    /// A token principal's quick program is answered here too, unconfined:
    /// a quick program calls, opens and spawns nothing (`lang::quick`), so
    /// the kernel would have nothing to refuse it, and its gate still
    /// decides in `finish_job`. Everything else it runs meets the confined
    /// worker (`confine_for`).
    fn try_quick(&self, msg: &Exec) -> Option<Result<ExecReply, SessionError>> {
        if !shoal_lang::quick::may_be_quick(&msg.src)
            || msg.cancel.is_cancelled()
            || self.lane.queued.load(std::sync::atomic::Ordering::SeqCst) != 0
            || self.shared.immediate_durability()
            || !self.shared.answers_without_waiting()
        {
            return None;
        }
        let mut lang = self.lane.lang.try_lock().ok()?;
        lang.as_ref()?;
        let spec = JobSpec {
            src: msg.src.clone(),
            position: msg.position,
            tty: msg.tty,
            cancel: msg.cancel.clone(),
            gate: msg.gate.clone(),
            check: msg.check,
            width: msg.width,
        };
        // The call's span, for debug lines: nothing here logs at a lower level
        // but a panic, whose error line names the call itself (formatting the
        // span's fields costs about as much as the evaluation).
        let _span = tracing::enabled!(tracing::Level::DEBUG)
            .then(|| spec.cancel.origin().span(&self.shared.name).entered());
        let (mut result, journal) = exec::run_quick(&self.shared, &mut lang, &spec)?;
        drop(lang);
        spec.cancel.finish();
        tracing::debug!(ok = result.is_ok(), "quick exec evaluated");
        self.shared
            .quick_execs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A quick record is small: handed to the journal before the reply, as
        // the worker does with small records.
        let mut events = Vec::new();
        if let Some(j) = journal {
            tracing::debug!("exec handed to the journal before the reply");
            let _ = j.record(&self.shared, &mut events);
        }
        if let Ok(r) = &mut result {
            if self.shared.journal_degraded() {
                r.journal = Some("degraded");
            }
        }
        // A quick program binds nothing, so the state tasks fork from stays
        // current: no refresh.
        publish(&self.shared, events);
        Some(result)
    }
}

impl Handler<Exec> for Session {
    type Result = ResponseFuture<Result<ExecReply, SessionError>>;

    fn handle(&mut self, msg: Exec, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        if let Some(r) = self.try_quick(&msg) {
            if let Err(SessionError::Internal(m)) = &r {
                self.reg.stats.set_error(m.clone());
            }
            return Box::pin(std::future::ready(r));
        }
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
                width: msg.width,
            },
            reply,
        };
        let sent = self.hand_off(Work::Exec(job));
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
                        bus.publish_all(events);
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

impl Handler<crate::msg::DerivePlan> for Session {
    type Result = ResponseFuture<Result<shoal_policy::undo::Derived, SessionError>>;

    fn handle(&mut self, msg: crate::msg::DerivePlan, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let (reply, rx) = oneshot::channel();
        let sent = self.hand_off(Work::Derive {
            src: msg.src,
            reply,
        });
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

pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
