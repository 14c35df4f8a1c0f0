//! The supervisor's background tasks: starting one on a fork of the
//! session's state (the one place a task is spawned, behind the Leash gate and
//! `max_tasks_per_session`), the per-session task table with retention, and
//! the `task.*` requests on it. It never waits for a task's evaluation (a
//! control request is forwarded to the Task actor) and never re-runs one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::children::{ChildAddr, ChildKind, ChildSlot};
use super::SessionSupervisor;
use crate::msg::Exec;
use crate::msg::{CallOrigin, SessionError};
use crate::sessions::session::{CallCancel, TaskLang};
use crate::sessions::task::{Control, Task, TaskControl, TaskView};
use shoal_lang::task::{self as tasks, Entry, TaskTable};
use shoal_lang::Position;
use shoal_proto::kernel::TaskRow;
use shoal_proto::rpc::{self, RpcError};

/// A task the supervisor started: its live view and process slot.
pub(super) struct TaskEntry {
    pub(super) view: tokio::sync::watch::Receiver<TaskView>,
    pub(super) pid: Arc<std::sync::atomic::AtomicU32>,
    pub(super) cancel: Arc<CallCancel>,
    /// Its final record when the task's actor died before the evaluation
    /// ended (a panic): `failed`, and it no longer counts as running.
    pub(super) died: std::sync::OnceLock<tasks::TaskRecord>,
}

impl TaskEntry {
    /// The task's actor is gone: record the task failed unless it had
    /// finished. Whether it was unfinished.
    pub(super) fn mark_died(&self) -> bool {
        let mut r = self.view.borrow().record.clone();
        if r.state.is_final() {
            return false;
        }
        let error = RpcError::internal("the task's actor died before its evaluation ended");
        r.finish(
            tasks::Ending::Error {
                n: None,
                error: error.to_json(),
            },
            shoal_journal::now_ns(),
        );
        self.died.set(r).is_ok()
    }
}

impl Entry for TaskEntry {
    fn record(&self) -> tasks::TaskRecord {
        if let Some(r) = self.died.get() {
            return r.clone();
        }
        let mut r = self.view.borrow().record.clone();
        if !r.state.is_final() && r.pid == 0 {
            r.pid = self.pid.load(Ordering::SeqCst);
        }
        r
    }

    fn progress(&self) -> (tasks::TaskState, Option<Instant>) {
        if let Some(r) = self.died.get() {
            return (r.state, r.finished);
        }
        let v = self.view.borrow();
        (v.record.state, v.record.finished)
    }
}

/// Start a background task (`exec` with `background` or `timeout_ms`).
#[derive(Message)]
#[rtype(result = "Result<(u64, tokio::sync::watch::Receiver<TaskView>), RpcError>")]
pub struct StartTask {
    pub src: String,
    pub position: Position,
    pub tty: bool,
    /// The caller's principal: its verdict gates the start, its sandbox
    /// confines the task's children.
    pub gate: Option<Arc<shoal_policy::Gate>>,
}

/// A `task.*` request on this session's tasks.
#[derive(Debug, Clone)]
pub enum TaskOp {
    Get(u64),
    List,
    Control(u64, TaskControl),
    /// The view to wait on (`task.await`, MCP `tasks/result`).
    Watch(u64),
    /// The records themselves: one task's, or all (`None`).
    Records(Option<u64>),
    /// Drop a finished task's record: its call answered inline, so it never
    /// was a task to anyone (the Tasks extension's threshold).
    Forget(u64),
}

#[derive(Message)]
#[rtype(result = "Result<TaskAnswer, RpcError>")]
pub struct TaskCall(pub TaskOp);

pub enum TaskAnswer {
    Record(Box<TaskRow>),
    Records(Vec<tasks::TaskRecord>),
    List(Vec<TaskRow>),
    Watch(tokio::sync::watch::Receiver<TaskView>),
    /// The control request was carried out (the caller reads the record again).
    Done,
    /// Internal: forwarded to the task actor.
    Forward(Addr<Task>, TaskControl),
}

pub fn unknown_task(r: &str) -> RpcError {
    RpcError::new(rpc::UNKNOWN_TASK, "unknown task ref").with_data(serde_json::json!({"task": r}))
}
impl SessionSupervisor {
    fn prune_tasks(&mut self) {
        self.tasks
            .prune(Instant::now(), self.retention.retain, self.retention.max);
    }
    /// Why no task may start now (the session failed, or runs its most).
    fn may_add(&mut self) -> Result<(), RpcError> {
        if self.failed {
            return Err(crate::peer::session_error(
                self.child()
                    .err()
                    .unwrap_or_else(|| SessionError::Internal("session failed".into())),
            ));
        }
        self.prune_tasks();
        if self.tasks.live() >= self.max_tasks {
            return Err(crate::peer::limit_error(
                "max_tasks_per_session",
                self.max_tasks as u64,
                "running background tasks in this session",
            ));
        }
        Ok(())
    }

    /// Start a task of `msg` on `lang` (a fork of the evaluation that asked
    /// for it: `cmd &`; one kept in the session's worker), else on a fork
    /// of the session's last exec.
    pub(super) fn start_task(
        &mut self,
        msg: StartTask,
        lang: Option<TaskLang>,
        ctx: &mut Context<Self>,
    ) -> Result<(u64, tokio::sync::watch::Receiver<TaskView>), RpcError> {
        self.may_add()?;
        let lang = match lang {
            Some(l) => l,
            None if self.shared.evaluates_there() => {
                return Err(RpcError::internal(
                    "a task of this session starts on a fork in its worker process",
                ))
            }
            None => TaskLang::Here(Box::new(
                self.shared
                    .fork_lang()
                    .map_err(crate::peer::session_error)?,
            )),
        };
        // The Leash gate: refused before any task exists (a fork in the
        // worker was judged there as it was made).
        if let (Some(g), TaskLang::Here(l)) = (&msg.gate, &lang) {
            crate::sessions::session::check_gate(g, l, &msg.src)
                .map_err(crate::peer::session_error)?;
        }
        let id = tasks::next_id();
        let kind = ChildKind::Task(id);
        let reg = self
            .registry
            .register("task", tasks::ref_name(id), Some(self.reg.id()));
        let stats = reg.stats.clone();
        let exit = self.notice(kind, ctx);
        let generation = exit.generation;
        let spec = Exec {
            src: msg.src,
            position: msg.position,
            tty: msg.tty,
            cancel: {
                let c = CallCancel::new();
                c.set_origin(CallOrigin {
                    conn: 0,
                    request: tasks::ref_name(id),
                    client: Some("task".into()),
                });
                c
            },
            gate: msg.gate,
            // Checked above; the sandbox still applies.
            check: false,
            width: None,
            place: None,
            approved: Vec::new(),
        };
        let start = Task::prepare(
            id,
            self.shared.clone(),
            lang,
            spec,
            reg,
            exit,
            self.retention.retain,
        );
        let view = start.view.clone();
        let addr = start.task.start();
        self.children.insert(
            kind,
            ChildSlot {
                addr: ChildAddr::Task(addr),
                stats,
                generation,
            },
        );
        self.tasks.insert(
            id,
            TaskEntry {
                view: start.view,
                pid: start.pid,
                cancel: start.cancel,
                died: std::sync::OnceLock::new(),
            },
        );
        Ok((id, view))
    }

    fn task_call(&mut self, op: TaskOp) -> Result<TaskAnswer, RpcError> {
        if matches!(op, TaskOp::List | TaskOp::Records(None)) {
            self.prune_tasks();
        }
        let entry = |t: &TaskTable<TaskEntry>, id: u64| {
            t.get(id)
                .ok_or_else(|| unknown_task(&tasks::ref_name(id)))
                .map(|e| (e.record(), e.view.clone()))
        };
        match op {
            TaskOp::Get(id) => Ok(TaskAnswer::Record(Box::new(TaskRow::of(
                &entry(&self.tasks, id)?.0,
            )))),
            TaskOp::List => Ok(TaskAnswer::List(
                self.tasks
                    .values()
                    .map(|e| TaskRow::of(&e.record()))
                    .collect(),
            )),
            TaskOp::Watch(id) => Ok(TaskAnswer::Watch(entry(&self.tasks, id)?.1)),
            TaskOp::Records(Some(id)) => Ok(TaskAnswer::Records(vec![entry(&self.tasks, id)?.0])),
            TaskOp::Records(None) => Ok(TaskAnswer::Records(
                self.tasks.values().map(|e| e.record()).collect(),
            )),
            TaskOp::Forget(id) => {
                if entry(&self.tasks, id)?.0.state.is_final() {
                    self.tasks.remove(id);
                }
                Ok(TaskAnswer::Done)
            }
            TaskOp::Control(id, c) => {
                let (rec, _) = entry(&self.tasks, id)?;
                match self.children.get(&ChildKind::Task(id)) {
                    Some(ChildSlot {
                        addr: ChildAddr::Task(a),
                        stats,
                        ..
                    }) if !rec.state.is_final() => {
                        stats.enqueue();
                        Ok(TaskAnswer::Forward(a.clone(), c))
                    }
                    _ => Ok(TaskAnswer::Record(Box::new(TaskRow::of(&rec)))),
                }
            }
        }
    }

    /// End every running task (session close, daemon stop): each gets the
    /// cancel sequence on its own process group.
    pub(super) fn stop_tasks(&mut self) {
        // Directly first (no message needed: the actor system may be
        // stopping), then through each actor (it continues a suspended group).
        for e in self.tasks.values() {
            e.cancel.cancel();
        }
        for (k, c) in &self.children {
            if let (ChildKind::Task(_), ChildAddr::Task(a)) = (k, &c.addr) {
                a.do_send(Control(TaskControl::Cancel));
            }
        }
    }
}

impl SessionSupervisor {
    /// Only the owner (or the local uid) starts work here, whichever path sent it.
    pub(super) fn may_start(&self, gate: Option<&shoal_policy::Gate>) -> Result<(), RpcError> {
        if let Some(g) = gate {
            let (owner, name) = (&self.shared.owner, &self.shared.name);
            let access = crate::sessions::handle::access_of(&g.principal, owner, name);
            if access != Some(crate::sessions::handle::Access::Full) {
                return Err(crate::sessions::handle::read_only(
                    &g.principal,
                    name,
                    "starting a task",
                ));
            }
        }
        Ok(())
    }
}

impl Handler<StartTask> for SessionSupervisor {
    type Result =
        ResponseActFuture<Self, Result<(u64, tokio::sync::watch::Receiver<TaskView>), RpcError>>;

    fn handle(&mut self, msg: StartTask, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let checked = self
            .may_start(msg.gate.as_deref())
            .and_then(|()| self.may_add());
        if checked.is_err() || !self.shared.evaluates_there() {
            let r = checked.and_then(|()| self.start_task(msg, None, ctx));
            return Box::pin(actix::fut::ready(r));
        }
        // In the worker: a fork of the session's state there, judged by its
        // owner's gate, made off this arbiter.
        let (shared, src) = (self.shared.clone(), msg.src.clone());
        let fork = tokio::task::spawn_blocking(move || {
            crate::sessions::session::fork_there(&shared, &src)
        });
        Box::pin(fork.into_actor(self).map(move |r, act, ctx| {
            let fork = r
                .map_err(|e| RpcError::internal(format!("the task's fork failed: {e}")))?
                .map_err(crate::peer::session_error)?;
            act.start_task(msg, Some(TaskLang::There(fork)), ctx)
        }))
    }
}

impl Handler<TaskCall> for SessionSupervisor {
    type Result = ResponseFuture<Result<TaskAnswer, RpcError>>;

    fn handle(&mut self, msg: TaskCall, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let r = self.task_call(msg.0);
        Box::pin(async move {
            match r {
                Ok(TaskAnswer::Forward(addr, c)) => {
                    // An actor gone meanwhile ended with its task: there is
                    // nothing left to control, and its record says how it ended.
                    if let Ok(r) = addr.send(Control(c)).await {
                        r?;
                    }
                    Ok(TaskAnswer::Done)
                }
                r => r,
            }
        })
    }
}
