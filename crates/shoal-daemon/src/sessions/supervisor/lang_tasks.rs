//! The session's tasks as an evaluation reaches them (`cmd &`, `sh { … } &`,
//! `jobs`, a task handle's methods): the language's [`TaskHost`], served by
//! the supervisor. A task started this way is the same kind `exec` with
//! `background: true` starts (`start_task`, behind the Leash gate and
//! `max_tasks_per_session`): it outlives the call, `task.get` and `jobs` see
//! it, and its number is its `task:N`.
//!
//! The host is called on an evaluation thread (the session's worker, a task's
//! thread), never an arbiter: it sends the supervisor a message and waits for
//! the answer on a oneshot. The supervisor never waits for an evaluation, so
//! the wait ends.

use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::{oneshot, watch};

use super::tasks::{StartTask, TaskAnswer, TaskCall, TaskOp};
use super::SessionSupervisor;
use crate::eval::lang_error;
use crate::msg::{ExecReply, SessionError};
use crate::sessions::session::{SessionShared, TaskLang};
use crate::sessions::task::{TaskControl, TaskView};
use shoal_lang::eval::{TaskHost, TaskHostRef, TaskInfo};
use shoal_lang::task::TaskRecord;
use shoal_lang::{Interrupter, Position, Session as LangSession};
use shoal_proto::rpc::RpcError;
use shoal_value::{ErrorCode, SResult, ShoalError, Value};

enum LangCall {
    Start {
        src: String,
        lang: TaskLang,
        gate: Option<Arc<shoal_policy::Gate>>,
    },
    Task(TaskOp),
    /// Answer once task `id` ended, or once `interrupted` fires.
    Wait {
        id: u64,
        interrupted: oneshot::Receiver<()>,
    },
}

enum LangAnswer {
    Started(u64),
    Task(TaskAnswer),
    Ended(SResult<Value>),
    Interrupted,
}

/// A request from an evaluation, answered on `reply`.
#[derive(Message)]
#[rtype(result = "()")]
struct FromLang {
    call: LangCall,
    reply: oneshot::Sender<Result<LangAnswer, RpcError>>,
}

impl Handler<FromLang> for SessionSupervisor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: FromLang, ctx: &mut Context<Self>) -> Self::Result {
        // Sent with `do_send`, so not counted by a handle.
        self.reg.stats.enqueue();
        let reply = msg.reply;
        match msg.call {
            LangCall::Start { src, lang, gate } => {
                self.reg.stats.handled();
                let start = StartTask {
                    src,
                    position: Position::Value,
                    tty: false,
                    gate,
                };
                let r = self
                    .may_start(start.gate.as_deref())
                    .and_then(|()| self.start_task(start, Some(lang), ctx))
                    .map(|(id, _)| LangAnswer::Started(id));
                let _ = reply.send(r);
                Box::pin(std::future::ready(()))
            }
            LangCall::Task(op) => {
                let f = <Self as Handler<TaskCall>>::handle(self, TaskCall(op), ctx);
                Box::pin(async move {
                    let _ = reply.send(f.await.map(LangAnswer::Task));
                })
            }
            LangCall::Wait {
                id,
                mut interrupted,
            } => {
                let watch =
                    <Self as Handler<TaskCall>>::handle(self, TaskCall(TaskOp::Watch(id)), ctx);
                // Weak: a wait does not keep the supervisor alive.
                let me = ctx.address().downgrade();
                Box::pin(async move {
                    let r = match watch.await {
                        Ok(TaskAnswer::Watch(mut view)) => tokio::select! {
                            end = task_end(id, &mut view, &me) => Ok(LangAnswer::Ended(end)),
                            Ok(()) = &mut interrupted => Ok(LangAnswer::Interrupted),
                        },
                        Ok(_) => Err(RpcError::internal("unexpected answer")),
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(r);
                })
            }
        }
    }
}

/// How task `id`, seen through `view`, ended: awaited on the supervisor's
/// arbiter, so a waiting evaluation holds no timer.
async fn task_end(
    id: u64,
    view: &mut watch::Receiver<TaskView>,
    sup: &actix::WeakAddr<SessionSupervisor>,
) -> SResult<Value> {
    loop {
        {
            let v = view.borrow_and_update();
            if let (true, Some(reply)) = (v.record.state.is_final(), &v.reply) {
                return ended(reply);
            }
        }
        if view.changed().await.is_err() {
            break;
        }
    }
    {
        let v = view.borrow();
        if let (true, Some(reply)) = (v.record.state.is_final(), &v.reply) {
            return ended(reply);
        }
    }
    // The task's actor is gone without a final view: its record says how
    // it ended.
    let records = match sup.upgrade() {
        Some(sup) => match sup.send(TaskCall(TaskOp::Records(Some(id)))).await {
            Ok(Ok(TaskAnswer::Records(r))) => r,
            _ => Vec::new(),
        },
        None => Vec::new(),
    };
    let msg = records
        .first()
        .and_then(|r| r.error.as_ref())
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or("the task ended without a value")
        .to_string();
    Err(ShoalError::custom(msg))
}

/// The task host of an evaluation of `shared` for the caller of `gate`
/// (`None` while the session has no supervisor: unit tests).
pub fn task_host(
    shared: &SessionShared,
    gate: Option<Arc<shoal_policy::Gate>>,
) -> Option<TaskHostRef> {
    let sup = shared.supervisor()?;
    Some(Arc::new(SupervisorTasks { sup, gate }))
}

/// The tasks of `shared` as its worker process's evaluations reach them,
/// each started and judged for `owner` (the session's owner, whoever the
/// worker says asks).
pub fn remote_tasks(
    shared: &SessionShared,
    owner: Arc<shoal_policy::Gate>,
) -> Option<Arc<RemoteTasks>> {
    let sup = shared.supervisor()?;
    Some(Arc::new(SupervisorTasks {
        sup,
        gate: Some(owner),
    }))
}

/// The session's tasks as its worker process reaches them.
pub type RemoteTasks = SupervisorTasks;

impl SupervisorTasks {
    /// Start a task of `src` on `fork`, kept in the session's worker
    /// (judged there by the owner's gate as it was made).
    pub fn start_there(
        &self,
        src: &str,
        fork: crate::sessions::session::ForkThere,
    ) -> SResult<u64> {
        let call = LangCall::Start {
            src: src.to_string(),
            lang: TaskLang::There(fork),
            gate: self.gate.clone(),
        };
        match self.call(call)? {
            LangAnswer::Started(id) => Ok(id),
            _ => Err(ShoalError::custom("unexpected answer")),
        }
    }
}

pub struct SupervisorTasks {
    sup: actix::WeakAddr<SessionSupervisor>,
    /// The caller's principal: it gates every task it starts, and its sandbox
    /// confines the task's children.
    gate: Option<Arc<shoal_policy::Gate>>,
}

fn gone() -> ShoalError {
    ShoalError::custom("the session is closing: its tasks are out of reach")
}

fn info(r: &TaskRecord) -> TaskInfo {
    TaskInfo {
        id: r.id,
        desc: r.src.clone(),
        state: r.state.as_str().to_string(),
        done: r.state.is_final(),
    }
}

/// What `.await()` gives of an ended task: its value, or what it raised.
fn ended(reply: &Result<ExecReply, SessionError>) -> SResult<Value> {
    match reply {
        Ok(x) => Ok(x.value.clone()),
        Err(SessionError::Raised { error, .. }) => Err(error.clone()),
        Err(e) => Err(lang_error(crate::peer::session_error(e.clone()))),
    }
}

impl SupervisorTasks {
    fn call(&self, call: LangCall) -> SResult<LangAnswer> {
        // Waiting here on an arbiter would stop the very supervisor that answers.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(ShoalError::custom(
                "session tasks are not reachable from this evaluation",
            ));
        }
        let addr = self.sup.upgrade().ok_or_else(gone)?;
        let (tx, rx) = oneshot::channel();
        addr.do_send(FromLang { call, reply: tx });
        match rx.blocking_recv() {
            Ok(r) => r.map_err(lang_error),
            Err(_) => Err(gone()),
        }
    }

    fn task(&self, op: TaskOp) -> SResult<TaskAnswer> {
        match self.call(LangCall::Task(op))? {
            LangAnswer::Task(a) => Ok(a),
            _ => Err(ShoalError::custom("unexpected answer")),
        }
    }

    fn records(&self, id: Option<u64>) -> SResult<Vec<TaskRecord>> {
        match self.task(TaskOp::Records(id))? {
            TaskAnswer::Records(r) => Ok(r),
            _ => Err(ShoalError::custom("unexpected answer")),
        }
    }
}

impl TaskHost for SupervisorTasks {
    fn start(&self, src: &str, fork: shoal_lang::eval::Forked) -> SResult<u64> {
        let lang = LangSession::from(fork);
        let call = LangCall::Start {
            src: src.to_string(),
            lang: TaskLang::Here(Box::new(lang)),
            gate: self.gate.clone(),
        };
        match self.call(call)? {
            LangAnswer::Started(id) => Ok(id),
            _ => Err(ShoalError::custom("unexpected answer")),
        }
    }

    fn list(&self) -> SResult<Vec<TaskInfo>> {
        Ok(self.records(None)?.iter().map(info).collect())
    }

    fn info(&self, id: u64) -> SResult<Option<TaskInfo>> {
        match self.records(Some(id)) {
            Ok(r) => Ok(r.first().map(info)),
            Err(e) if e.code == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn wait(&self, id: u64, intr: &Interrupter) -> SResult<Value> {
        let (tx, interrupted) = oneshot::channel();
        let _hook = intr.on_interrupt(move || {
            let _ = tx.send(());
        });
        match self.call(LangCall::Wait { id, interrupted })? {
            LangAnswer::Ended(r) => r,
            LangAnswer::Interrupted => Err(ShoalError::new(
                ErrorCode::Cancelled,
                "evaluation interrupted",
            )),
            _ => Err(ShoalError::custom("unexpected answer")),
        }
    }

    fn control(&self, id: u64, c: shoal_lang::eval::TaskControl) -> SResult<()> {
        use shoal_lang::eval::TaskControl as L;
        let c = match c {
            L::Cancel => TaskControl::Cancel,
            L::Suspend => TaskControl::Suspend,
            L::Resume => TaskControl::Resume,
        };
        self.task(TaskOp::Control(id, c)).map(|_| ())
    }
}
