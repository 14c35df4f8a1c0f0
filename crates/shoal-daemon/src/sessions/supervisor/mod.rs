//! SessionSupervisor: one per named session. Owns the session's shared state
//! (transcript, client count) and its child table (`children.rs`: the Session
//! actor, the PlanStore, one Task actor per background task in `tasks.rs`, the
//! PTYs in `sessions/pty.rs`). This file holds the actor itself and the requests
//! it forwards to its Session child or answers directly.
//!
//! Reads of the transcript (`value.get`) are answered here directly, so they
//! never wait behind a running evaluation; nothing here evaluates, blocks its
//! arbiter or encodes a reply for the wire.

mod children;
mod lang_tasks;
mod tasks;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use actix::prelude::*;

use crate::health::{Registration, Registry, RestartBudget};
use crate::msg::{
    Crash, EndSession, Exec, ExecReply, GetValue, Interrupt, SessionError, StopSession,
};
use crate::sessions::session::{panic_message, SessionShared};
use shoal_lang::task::{self as task_table, TaskTable};
use shoal_proto::kernel;

pub use crate::eval::lang_error;
use children::ChildSlot;
pub use children::{ChildExited, ChildKind, ExitNotice, ListChildren};
pub use lang_tasks::{remote_tasks, task_host, RemoteTasks};
use tasks::TaskEntry;
pub use tasks::{unknown_task, StartTask, TaskAnswer, TaskCall, TaskOp};

pub struct SessionSupervisor {
    pub shared: Arc<SessionShared>,
    pub(super) registry: Arc<Registry>,
    pub(super) reg: Registration,
    /// The session's PTYs (`sessions/pty.rs` handles `PtyCall`).
    pub(super) ptys: crate::sessions::pty::PtyTable,
    children: std::collections::BTreeMap<ChildKind, ChildSlot>,
    tasks: TaskTable<TaskEntry>,
    max_tasks: usize,
    retention: task_table::Retention,
    /// The incarnation counter behind every [`ExitNotice`].
    generation: u64,
    /// Restarts of the Session child (at most `max_restarts_per_minute` a minute).
    budget: RestartBudget,
    failed: bool,
    stopping: bool,
    /// Ended ([`EndSession`]): its programs are killed at once, not after
    /// [`CLOSE_GRACE`].
    ended: bool,
    /// Which session of its name this is, for the process layer.
    procs_generation: u64,
}

impl SessionSupervisor {
    pub fn new(
        shared: Arc<SessionShared>,
        registry: Arc<Registry>,
        reg: Registration,
        max_per_minute: u32,
    ) -> Self {
        SessionSupervisor {
            shared,
            registry,
            reg,
            children: Default::default(),
            tasks: TaskTable::new(),
            max_tasks: crate::config::LimitsConfig::default().max_tasks_per_session,
            retention: task_table::Retention::default(),
            generation: 0,
            budget: RestartBudget::new(max_per_minute),
            failed: false,
            stopping: false,
            ended: false,
            procs_generation: 0,
            ptys: crate::sessions::pty::PtyTable::new(
                crate::config::LimitsConfig::default().max_ptys_per_session,
            ),
        }
    }

    /// `[limits] max_ptys_per_session`.
    pub fn with_pty_limit(mut self, max: usize) -> Self {
        self.ptys = crate::sessions::pty::PtyTable::new(max);
        self
    }

    /// `[limits] max_tasks_per_session`.
    pub fn with_task_limit(mut self, max: usize) -> Self {
        self.max_tasks = max;
        self
    }

    /// `[tasks] retain` and `retain_max`.
    pub fn with_retention(mut self, r: task_table::Retention) -> Self {
        self.retention = r;
        self
    }
}

/// How long a closed session's programs have for the cancel sequence (SIGINT,
/// SIGTERM, SIGKILL of their groups) before its cgroups are killed.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(7);

impl Actor for SessionSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(256);
        // A session of an earlier one's name: its programs may start again.
        self.procs_generation = shoal_base::procs::open_session(&self.shared.name);
        self.shared.set_supervisor(ctx.address().downgrade());
        self.start_child(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.shared.set_actor(None);
        self.shared.interrupt();
        self.ptys.kill_all();
        self.stop_tasks();
        // After the polite signals (interrupt, task cancel), whatever is
        // left in the session's cgroups is killed (docs/processes.md); an
        // ended session's at once.
        let grace = if self.ended {
            std::time::Duration::ZERO
        } else {
            CLOSE_GRACE
        };
        shoal_base::procs::close_session(&self.shared.name, self.procs_generation, grace);
        // What it holds is no longer its principal's (`[limits] principal_memory`).
        self.shared.memory.part();
    }
}

impl Handler<Exec> for SessionSupervisor {
    type Result = ResponseFuture<Result<ExecReply, SessionError>>;

    /// An exec that found no live worker line (the handle's own path): the
    /// reason there is none, or, if a new Session started meanwhile, its line.
    fn handle(&mut self, msg: Exec, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        if let Err(e) = self.child() {
            return Box::pin(std::future::ready(Err(e)));
        }
        match self.shared.worker_line() {
            Some(line) => Box::pin(crate::sessions::session::exec_on(
                line,
                self.shared.clone(),
                msg,
            )),
            None => {
                let name = self.shared.name.clone();
                Box::pin(std::future::ready(Err(SessionError::Internal(format!(
                    "session {name}: the session actor died; it is being restarted"
                )))))
            }
        }
    }
}

impl Handler<GetValue> for SessionSupervisor {
    type Result = ResponseFuture<Result<kernel::ValueView, SessionError>>;

    /// In-memory refs are answered here at once; refs from before a restart
    /// are read back from the journal (on its blocking reader), decoded, and
    /// answered the same way. The answer is the selected value and its format facts: the
    /// connection encodes it.
    fn handle(&mut self, msg: GetValue, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let unknown = || SessionError::UnknownRef {
            reference: msg.reference.clone(),
        };
        let Some(n) = kernel::parse_ref(&msg.reference) else {
            return Box::pin(std::future::ready(Err(unknown())));
        };
        let width = self.shared.render_width;
        let answer = move |v: &shoal_value::Value, req: &kernel::GetRequest, tty: bool| {
            catch_unwind(AssertUnwindSafe(|| {
                kernel::value_get(v, n, req, tty, width)
            }))
            .map_err(|p| {
                SessionError::Internal(format!("value.get panicked: {}", panic_message(&p)))
            })?
            .map_err(SessionError::Rpc)
        };
        if let Some(v) = self.shared.get(n) {
            return Box::pin(std::future::ready(answer(&v, &msg.req, msg.tty)));
        }
        let Some(services) = self.shared.services.clone() else {
            return Box::pin(std::future::ready(Err(unknown())));
        };
        // A token's session never reads back values from before it existed: they may be
        // another principal's, of a session of the same name before a restart.
        let before = self.shared.base.get().is_none_or(|b| n <= *b);
        if !self.shared.owner_is_local && before {
            return Box::pin(std::future::ready(Err(unknown())));
        }
        let err = unknown();
        let f = services
            .journal
            .send(crate::journal_writer::TranscriptValue {
                session: self.shared.name.clone(),
                n,
            });
        let (req, tty) = (msg.req, msg.tty);
        Box::pin(async move {
            match f.await {
                Ok(got) => kernel::restored_value_get(n, got, &req, tty, width)
                    .map(|r| r.map_err(SessionError::Rpc))
                    .unwrap_or(Err(err)),
                Err(_) => Err(err),
            }
        })
    }
}

impl Handler<Interrupt> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, _msg: Interrupt, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        // Sets the interrupt flag only: never waits for the worker.
        self.shared.interrupt();
    }
}

impl Handler<Crash> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        if let Ok((addr, stats)) = self.child() {
            stats.enqueue();
            addr.do_send(msg);
        }
    }
}

impl Handler<StopSession> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, _msg: StopSession, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.shared.interrupt();
        self.ptys.kill_all();
        self.stopping = true;
        self.stop_tasks();
        // Dropping the children's addresses lets them stop once idle; the
        // worker thread ends after the (interrupted) evaluation.
        self.children.remove(&ChildKind::Session);
        self.shared.set_actor(None);
        ctx.stop();
    }
}

impl Handler<EndSession> for SessionSupervisor {
    type Result = ();

    /// Its owner's last token is gone: stop as [`StopSession`] does, with no
    /// grace for its programs.
    fn handle(&mut self, _msg: EndSession, ctx: &mut Context<Self>) {
        self.ended = true;
        <Self as Handler<StopSession>>::handle(self, StopSession, ctx);
    }
}

#[cfg(test)]
mod tests;
