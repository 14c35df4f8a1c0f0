//! The Session actor: owns one named session's evaluation worker thread and
//! nothing else. Evaluation blocks (it spawns and waits on processes), so every
//! job goes to the worker (`worker.rs`) over a channel. An exec's caller sends
//! it there itself, on the [`WorkerLine`] the supervisor publishes while the
//! actor lives, and awaits the reply on its own thread: a hop through this
//! actor's mailbox would add two thread wake-ups to every exec an agent waits
//! for, and the actor has no state an exec needs. The actor's lifetime is the
//! worker's: a new actor starts a new worker and line; the old worker ends
//! after its job once the old line is dropped.
//!
//! The language session is the worker thread's own; a panic in the language
//! is caught there, reported as an error, and the (possibly half-mutated)
//! language state is dropped rather than resumed. The transcript lives in
//! [`SessionShared`] (`shared.rs`, `transcript.rs`), owned by the supervisor,
//! so it survives a restart of this actor. One evaluation is `exec.rs`; what
//! it leaves for the journal is `record.rs`.

mod exec;
mod record;
mod remote;
mod shared;
mod transcript;
mod worker;

use std::sync::{mpsc, Arc};

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::health::Registration;
use crate::msg::{Crash, Exec, ExecReply, SessionError};

pub use exec::{check_gate, run_task};
pub use remote::{fork_there, ForkThere};
pub use shared::{Busy, ForkSeed, Humans, LiveState, SessionShared};
pub use transcript::Transcript;
pub use worker::confine_for;
use worker::{worker, Job, Work};

pub use crate::eval::{cancelled_before_running, panic_message};
pub use crate::msg::CallCancel;

/// Where a background task evaluates: on a fork of the language session
/// here, or on a fork kept in the session's worker process (`remote.rs`).
pub enum TaskLang {
    Here(Box<shoal_lang::Session>),
    There(remote::ForkThere),
}

/// The journal cannot make this exec durable: `-32603` with `data.journal: "unavailable"`.
pub fn journal_unavailable(error: &str) -> SessionError {
    SessionError::Rpc(
        shoal_proto::rpc::RpcError::internal(format!(
            "the journal is unavailable ({error}); the result was not recorded"
        ))
        .with_data(serde_json::json!({"journal": "unavailable", "error": error})),
    )
}

pub struct Session {
    shared: Arc<SessionShared>,
    jobs: mpsc::Sender<Work>,
    /// Taken by the worker thread as the actor starts.
    rx: Option<mpsc::Receiver<Work>>,
    reg: Registration,
    /// Tells the supervisor when this actor ends (a panic included).
    _exit: Option<crate::sessions::supervisor::ExitNotice>,
}

impl Session {
    pub fn new(shared: Arc<SessionShared>, reg: Registration) -> Self {
        let (jobs, rx) = mpsc::channel::<Work>();
        Session {
            shared,
            jobs,
            rx: Some(rx),
            reg,
            _exit: None,
        }
    }

    pub fn with_exit_notice(mut self, exit: crate::sessions::supervisor::ExitNotice) -> Self {
        self._exit = Some(exit);
        self
    }

    /// The way in to this actor's worker (valid before the actor starts).
    pub fn line(&self) -> WorkerLine {
        WorkerLine {
            jobs: self.jobs.clone(),
            stats: self.reg.stats.clone(),
        }
    }
}

/// The way in to a live Session actor's worker thread: where an exec's caller
/// sends its job. Holding one keeps the worker's queue open; the supervisor
/// drops its copy when the actor ends.
#[derive(Clone, Debug)]
pub struct WorkerLine {
    jobs: mpsc::Sender<Work>,
    stats: Arc<crate::health::ActorStats>,
}

impl Actor for Session {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        let Some(rx) = self.rx.take() else {
            return;
        };
        let shared = self.shared.clone();
        // The worker evaluates on its own (large) stack: no thread per exec.
        let spawned = shoal_lang::session::spawn_eval_thread(
            format!("shoal-session-{}", self.shared.name),
            move |stack| worker(shared, rx, stack),
        );
        if let Err(e) = spawned {
            tracing::error!(session = %self.shared.name, "cannot start worker thread: {e}");
            self.reg
                .stats
                .set_error(format!("cannot start worker thread: {e}"));
            ctx.stop();
        }
        self.reg.stats.set_state("idle");
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.shared.interrupt();
        tracing::info!(session = %self.shared.name, "session actor stopped");
    }
}

impl Session {
    /// Hand `work` to the worker.
    fn hand_off(&self, work: Work) -> bool {
        self.jobs.send(work).is_ok()
    }
}

/// Send `msg` to the worker behind `line` now; the future awaits its reply on
/// the calling thread. The exec's bus events are published as the reply is
/// taken, so they keep the order of execs. A cancel answers a queued job at
/// once and keeps interrupting a running one until it ends.
pub fn exec_on(
    line: WorkerLine,
    shared: Arc<SessionShared>,
    msg: Exec,
) -> impl std::future::Future<Output = Result<ExecReply, SessionError>> + 'static {
    let (reply, rx) = oneshot::channel();
    let cancel = msg.cancel.clone();
    let job = Job { spec: msg, reply };
    line.stats.enqueue();
    let sent = line.jobs.send(Work::Exec(job)).is_ok();
    async move {
        let r = exec_reply(sent, rx, &cancel, &shared).await;
        line.stats.handled();
        if let Err(SessionError::Internal(m)) = &r {
            line.stats.set_error(m.clone());
        }
        r
    }
}

/// The worker's reply to a job sent (or not: `sent`) on its line.
async fn exec_reply(
    sent: bool,
    mut rx: oneshot::Receiver<worker::JobReply>,
    cancel: &CallCancel,
    shared: &SessionShared,
) -> Result<ExecReply, SessionError> {
    let name = &shared.name;
    if !sent {
        return Err(SessionError::Internal(format!(
            "session {name}: worker thread is gone"
        )));
    }
    let r = tokio::select! {
        r = &mut rx => r,
        _ = cancel.wake.notified() => {
            // Queued: answer now; the worker skips the job when it gets there.
            if cancel.is_queued() {
                return Err(cancelled_before_running());
            }
            // Running: interrupted (the cancel fired its stop), it ends and answers.
            (&mut rx).await
        }
    };
    match r {
        Ok((r, events)) => {
            // In reply order, so events keep the order of execs. A kernel
            // connection writes them after the reply (it takes no message
            // while a request is in flight).
            if let Some(svc) = &shared.services {
                svc.bus.publish_all(events);
            }
            r
        }
        Err(_) => Err(SessionError::Internal(format!(
            "session {name}: worker thread ended during exec"
        ))),
    }
}

impl Handler<crate::msg::DerivePlan> for Session {
    type Result = ResponseFuture<Result<shoal_policy::undo::Derived, SessionError>>;

    fn handle(&mut self, msg: crate::msg::DerivePlan, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let (reply, rx) = oneshot::channel();
        let sent = self.hand_off(Work::Derive {
            src: msg.src,
            gate: msg.gate,
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
