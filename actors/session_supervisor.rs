//! SessionSupervisor: one per named session. Owns the session's shared state
//! (transcript, client count) and a child table: the Session actor and one
//! Task actor per background task (a new kind of child is one more
//! [`ChildKind`] variant). Every child holds an [`ExitNotice`] whose drop (the
//! actor stopped or panicked) tells the supervisor by message; a dead Session
//! is re-created from the persisted state and the restart counted. Past
//! `max_restarts_per_minute` it gives up and reports the session failed.
//! Tasks are not re-run (their effects may have happened): a task whose
//! actor died unfinished is recorded `failed`.
//!
//! Reads of the transcript (`value.get`) are answered here directly, so they
//! never wait behind a running evaluation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::Value as Json;

use super::health::{Registration, Registry};
use super::msg::{
    ClientCount, Crash, Exec, ExecReply, GetValue, Interrupt, SessionError, StopSession,
};
use super::session::{panic_message, CallCancel, JobSpec, Session, SessionShared};
use super::task::{Control, Task, TaskControl, TaskView};
use crate::lang::Position;
use crate::proto::kernel;
use crate::proto::rpc::{self, RpcError};
use crate::task::{self as tasks, Entry, TaskTable};

/// Which child of the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChildKind {
    Session,
    PlanStore,
    Task(u64),
}

impl ChildKind {
    pub fn label(&self) -> String {
        match self {
            ChildKind::Session => "session".into(),
            ChildKind::PlanStore => "plan_store".into(),
            ChildKind::Task(n) => tasks::ref_name(*n),
        }
    }
}

/// A child actor stopped (normally or by a panic).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ChildExited {
    pub kind: ChildKind,
    /// Which incarnation (a restarted child has a new one).
    pub generation: u64,
}

/// Held by a child; dropping it (the actor's end, a panic included) sends
/// [`ChildExited`] to the supervisor. No polling.
pub struct ExitNotice {
    to: Recipient<ChildExited>,
    kind: ChildKind,
    generation: u64,
}

impl Drop for ExitNotice {
    fn drop(&mut self) {
        self.to.do_send(ChildExited {
            kind: self.kind,
            generation: self.generation,
        });
    }
}

enum ChildAddr {
    Session(Addr<Session>),
    PlanStore(Addr<super::plan_store::PlanStore>),
    Task(Addr<Task>),
}

struct ChildSlot {
    addr: ChildAddr,
    stats: Arc<super::health::ActorStats>,
    generation: u64,
}

/// A task the supervisor started: its live view and process slot.
struct TaskEntry {
    view: tokio::sync::watch::Receiver<TaskView>,
    pid: Arc<std::sync::atomic::AtomicU32>,
    cancel: Arc<CallCancel>,
}

impl Entry for TaskEntry {
    fn record(&self) -> tasks::TaskRecord {
        let mut r = self.view.borrow().record.clone();
        if !r.state.is_final() && r.pid == 0 {
            r.pid = self.pid.load(Ordering::SeqCst);
        }
        r
    }

    fn progress(&self) -> (tasks::TaskState, Option<Instant>) {
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
    pub gate: Option<Arc<crate::leash::Gate>>,
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
}

#[derive(Message)]
#[rtype(result = "Result<TaskAnswer, RpcError>")]
pub struct TaskCall(pub TaskOp);

pub enum TaskAnswer {
    Record(Json),
    Records(Vec<tasks::TaskRecord>),
    List(Vec<Json>),
    Watch(tokio::sync::watch::Receiver<TaskView>),
    /// The control request was carried out (the caller reads the record again).
    Done,
    /// Internal: forwarded to the task actor.
    Forward(Addr<Task>, TaskControl),
}

/// The child table as `shoal status` shows it: `[{child, kind, state, age_ms,
/// restarts, pid?}]` plus the task records.
#[derive(Message)]
#[rtype(result = "Json")]
pub struct ListChildren;

pub fn unknown_task(r: &str) -> RpcError {
    RpcError::new(rpc::UNKNOWN_TASK, "unknown task ref").with_data(serde_json::json!({"task": r}))
}

pub struct SessionSupervisor {
    pub shared: Arc<SessionShared>,
    pub(super) registry: Arc<Registry>,
    pub(super) reg: Registration,
    /// The session's PTYs (`actors/pty.rs` handles `PtyCall`).
    pub(super) ptys: super::pty::PtyTable,
    children: std::collections::BTreeMap<ChildKind, ChildSlot>,
    tasks: TaskTable<TaskEntry>,
    max_tasks: usize,
    retention: tasks::Retention,
    generation: u64,
    /// The session's plans (`actors/plan_store.rs`), started on first use
    /// (their child-table slot is [`ChildKind::PlanStore`]).
    restarts: u64,
    recent: Vec<Instant>,
    max_per_minute: u32,
    failed: bool,
    stopping: bool,
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
            retention: tasks::Retention::default(),
            generation: 0,
            restarts: 0,
            recent: Vec::new(),
            max_per_minute,
            failed: false,
            stopping: false,
            ptys: super::pty::PtyTable::new(
                crate::config::LimitsConfig::default().max_ptys_per_session,
            ),
        }
    }

    /// `[limits] max_ptys_per_session`.
    pub fn with_pty_limit(mut self, max: usize) -> Self {
        self.ptys = super::pty::PtyTable::new(max);
        self
    }

    /// `[limits] max_tasks_per_session`.
    pub fn with_task_limit(mut self, max: usize) -> Self {
        self.max_tasks = max;
        self
    }

    /// `[tasks] retain` and `retain_max`.
    pub fn with_retention(mut self, r: tasks::Retention) -> Self {
        self.retention = r;
        self
    }

    /// Drop the finished records past their retention.
    fn prune_tasks(&mut self) {
        self.tasks
            .prune(Instant::now(), self.retention.retain, self.retention.max);
    }

    fn notice(&mut self, kind: ChildKind, ctx: &mut Context<Self>) -> ExitNotice {
        self.generation += 1;
        ExitNotice {
            to: ctx.address().recipient(),
            kind,
            generation: self.generation,
        }
    }

    fn start_child(&mut self, ctx: &mut Context<Self>) {
        let reg = self
            .registry
            .register("session", self.shared.name.clone(), Some(self.reg.id()));
        reg.stats.set_restarts(self.restarts);
        let stats = reg.stats.clone();
        let exit = self.notice(ChildKind::Session, ctx);
        let generation = exit.generation;
        let addr = Session::new(self.shared.clone(), reg)
            .with_exit_notice(exit)
            .start();
        self.children.insert(
            ChildKind::Session,
            ChildSlot {
                addr: ChildAddr::Session(addr),
                stats,
                generation,
            },
        );
    }

    /// The live Session child.
    fn child(&mut self) -> Result<(Addr<Session>, Arc<super::health::ActorStats>), SessionError> {
        if self.failed {
            return Err(SessionError::Internal(format!(
                "session {} failed: its actor crashed more than {} times in a minute",
                self.shared.name, self.max_per_minute
            )));
        }
        match self.children.get(&ChildKind::Session) {
            Some(ChildSlot {
                addr: ChildAddr::Session(a),
                stats,
                ..
            }) => Ok((a.clone(), stats.clone())),
            _ => Err(SessionError::Internal("session actor unavailable".into())),
        }
    }

    /// The Session child died: re-create it (counted), or give up.
    fn restart(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        self.recent
            .retain(|t| now.duration_since(*t) < Duration::from_secs(60));
        if self.recent.len() as u32 >= self.max_per_minute {
            self.failed = true;
            self.children.remove(&ChildKind::Session);
            self.reg.stats.set_state("failed");
            self.reg.stats.set_error("restart limit reached");
            tracing::error!(session = %self.shared.name, "session actor keeps crashing; giving up");
            return;
        }
        self.recent.push(now);
        self.restarts += 1;
        self.reg.stats.set_restarts(self.restarts);
        self.reg
            .stats
            .set_error(format!("session actor died; restart #{}", self.restarts));
        tracing::warn!(session = %self.shared.name, restarts = self.restarts, "session actor died; re-creating it");
        self.start_child(ctx);
    }

    /// The PlanStore child, started on first use (and again after it died).
    pub(super) fn plan_store(
        &mut self,
        ctx: &mut Context<Self>,
    ) -> super::health::Counted<super::plan_store::PlanStore> {
        if let Some(ChildSlot {
            addr: ChildAddr::PlanStore(a),
            stats,
            ..
        }) = self.children.get(&ChildKind::PlanStore)
        {
            return super::health::Counted::new(a.clone(), stats.clone());
        }
        let reg =
            self.registry
                .register("plan_store", self.shared.name.clone(), Some(self.reg.id()));
        let stats = reg.stats.clone();
        let exit = self.notice(ChildKind::PlanStore, ctx);
        let generation = exit.generation;
        let bus = self.shared.services.as_ref().map(|s| s.bus.clone());
        let a = super::plan_store::PlanStore::new(bus, reg)
            .with_exit_notice(exit)
            .start();
        self.children.insert(
            ChildKind::PlanStore,
            ChildSlot {
                addr: ChildAddr::PlanStore(a.clone()),
                stats: stats.clone(),
                generation,
            },
        );
        super::health::Counted::new(a, stats)
    }

    /// The live Session actor.
    pub(super) fn session_child(&mut self) -> Result<Addr<Session>, SessionError> {
        self.child().map(|(a, s)| {
            s.enqueue();
            a
        })
    }

    /// Start a task on a fork of the session's state. The one place a
    /// background task is spawned (the policy gate belongs here).
    fn start_task(
        &mut self,
        msg: StartTask,
        ctx: &mut Context<Self>,
    ) -> Result<(u64, tokio::sync::watch::Receiver<TaskView>), RpcError> {
        if self.failed {
            return Err(super::conn::session_error(
                self.child()
                    .err()
                    .unwrap_or_else(|| SessionError::Internal("session failed".into())),
            ));
        }
        self.prune_tasks();
        if self.tasks.live() >= self.max_tasks {
            return Err(super::conn::limit_error(
                "max_tasks_per_session",
                self.max_tasks as u64,
                "running background tasks in this session",
            ));
        }
        let lang = self
            .shared
            .fork_lang()
            .map_err(super::conn::session_error)?;
        // The Leash gate: refused before any task exists.
        if let Some(g) = &msg.gate {
            super::session::check_gate(g, &lang, &msg.src).map_err(super::conn::session_error)?;
        }
        let id = tasks::next_id();
        let kind = ChildKind::Task(id);
        let reg = self
            .registry
            .register("task", tasks::ref_name(id), Some(self.reg.id()));
        let stats = reg.stats.clone();
        let exit = self.notice(kind, ctx);
        let generation = exit.generation;
        let spec = JobSpec {
            src: msg.src,
            position: msg.position,
            tty: msg.tty,
            cancel: CallCancel::new(),
            gate: msg.gate,
            // Checked above; the sandbox still applies.
            check: false,
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
            TaskOp::Get(id) => Ok(TaskAnswer::Record(entry(&self.tasks, id)?.0.to_json())),
            TaskOp::List => Ok(TaskAnswer::List(
                self.tasks.values().map(|e| e.record().to_json()).collect(),
            )),
            TaskOp::Watch(id) => Ok(TaskAnswer::Watch(entry(&self.tasks, id)?.1)),
            TaskOp::Records(Some(id)) => Ok(TaskAnswer::Records(vec![entry(&self.tasks, id)?.0])),
            TaskOp::Records(None) => Ok(TaskAnswer::Records(
                self.tasks.values().map(|e| e.record()).collect(),
            )),
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
                    _ => Ok(TaskAnswer::Record(rec.to_json())),
                }
            }
        }
    }

    fn children_json(&self) -> Json {
        let children: Vec<Json> = self
            .children
            .iter()
            .map(|(k, c)| {
                serde_json::json!({
                    "child": k.label(),
                    "actor": c.stats.id,
                    "state": c.stats.state(),
                    "age_ms": c.stats.started.elapsed().as_millis() as u64,
                    "restarts": if *k == ChildKind::Session { self.restarts } else { 0 },
                })
            })
            .collect();
        let tasks: Vec<Json> = self.tasks.values().map(|e| e.record().to_json()).collect();
        serde_json::json!({
            "session": self.shared.name,
            "failed": self.failed,
            "restarts": self.restarts,
            "children": children,
            "tasks": tasks,
        })
    }
}

impl Actor for SessionSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(256);
        self.start_child(ctx);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.shared.interrupt();
        self.ptys.kill_all();
        self.stop_tasks();
    }
}

impl SessionSupervisor {
    /// End every running task (session close, daemon stop): each gets the
    /// cancel sequence on its own process group.
    fn stop_tasks(&mut self) {
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

impl Handler<ChildExited> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: ChildExited, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        let current = self
            .children
            .get(&msg.kind)
            .is_some_and(|c| c.generation == msg.generation);
        if !current {
            return;
        }
        self.children.remove(&msg.kind);
        match msg.kind {
            ChildKind::Session => {
                if !self.failed && !self.stopping {
                    self.restart(ctx);
                }
            }
            // Plans live in memory: a new PlanStore starts on next use.
            ChildKind::PlanStore => {
                tracing::warn!(session = %self.shared.name, "plan store stopped");
            }
            ChildKind::Task(id) => {
                let unfinished = self
                    .tasks
                    .get(id)
                    .is_some_and(|e| !e.record().state.is_final());
                if unfinished {
                    tracing::error!(session = %self.shared.name, task = id, "task actor died unfinished");
                }
            }
        }
    }
}

impl Handler<StartTask> for SessionSupervisor {
    type Result = Result<(u64, tokio::sync::watch::Receiver<TaskView>), RpcError>;

    fn handle(&mut self, msg: StartTask, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.start_task(msg, ctx)
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
                    let id_err = |_| RpcError::internal("the task actor is gone");
                    addr.send(Control(c)).await.map_err(id_err)??;
                    Ok(TaskAnswer::Done)
                }
                r => r,
            }
        })
    }
}

impl Handler<ListChildren> for SessionSupervisor {
    type Result = MessageResult<ListChildren>;

    fn handle(&mut self, _msg: ListChildren, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.children_json())
    }
}

impl Handler<Exec> for SessionSupervisor {
    type Result = ResponseFuture<Result<ExecReply, SessionError>>;

    fn handle(&mut self, msg: Exec, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let child = self.child();
        let name = self.shared.name.clone();
        Box::pin(async move {
            let (addr, stats) = child?;
            stats.enqueue();
            addr.send(msg).await.unwrap_or_else(|_| {
                Err(SessionError::Internal(format!(
                    "session {name}: the session actor died during exec; it is being restarted"
                )))
            })
        })
    }
}

impl Handler<GetValue> for SessionSupervisor {
    type Result = ResponseFuture<Result<Json, SessionError>>;

    /// In-memory refs are answered here at once; refs from before a restart
    /// are read back from the journal (on its blocking reader), decoded, and
    /// answered the same way.
    fn handle(&mut self, msg: GetValue, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let unknown = || SessionError::UnknownRef {
            reference: msg.reference.clone(),
        };
        let Some(n) = kernel::parse_ref(&msg.reference) else {
            return Box::pin(std::future::ready(Err(unknown())));
        };
        let width = self.shared.render_width;
        let answer = move |v: &crate::value::Value, req: &kernel::GetRequest, tty: bool| {
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
        let err = unknown();
        let f = services
            .journal
            .send(super::journal_writer::TranscriptValue {
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

impl Handler<ClientCount> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: ClientCount, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.shared.clients.fetch_add(msg.delta, Ordering::Relaxed);
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
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn start(registry: &Arc<Registry>, name: &str) -> (Addr<SessionSupervisor>, u64) {
        let reg = registry.register("session_supervisor", name, None);
        let id = reg.id();
        let shared = Arc::new(SessionShared::new(name.into(), std::env::temp_dir(), 80));
        (
            SessionSupervisor::new(shared, registry.clone(), reg, 3).start(),
            id,
        )
    }

    async fn table(a: &Addr<SessionSupervisor>) -> Json {
        a.send(ListChildren).await.unwrap()
    }

    /// The session child's actor id, once the table has one.
    async fn session_actor(a: &Addr<SessionSupervisor>) -> Option<u64> {
        table(a).await["children"]
            .as_array()?
            .iter()
            .find(|c| c["child"] == "session")?["actor"]
            .as_u64()
    }

    #[test]
    fn a_panicking_session_is_restarted_by_message_and_counted() {
        let sys = System::new();
        sys.block_on(async {
            let registry = Arc::new(Registry::default());
            let (a, a_id) = start(&registry, "a");
            let (b, _) = start(&registry, "b");
            let a_first = session_actor(&a).await.unwrap();
            let b_first = session_actor(&b).await.unwrap();
            a.do_send(Crash);
            // The supervisor has no timer: only the child's exit notice
            // can make it restart.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let t = table(&a).await;
                if t["restarts"] == 1 && session_actor(&a).await.is_some_and(|x| x != a_first) {
                    break;
                }
                assert!(Instant::now() < deadline, "no restart: {t}");
                actix_rt::time::sleep(Duration::from_millis(5)).await;
            }
            // The other session is untouched.
            assert_eq!(session_actor(&b).await, Some(b_first));
            assert_eq!(table(&b).await["restarts"], 0);
            // The child table is what status shows: the registry rows whose
            // parent is this supervisor.
            let rows: Vec<u64> = registry
                .snapshot()
                .iter()
                .filter(|r| r["parent"] == a_id)
                .filter_map(|r| r["id"].as_u64())
                .collect();
            let children: Vec<u64> = table(&a).await["children"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["actor"].as_u64())
                .collect();
            assert_eq!(rows, children);
            let restarted = registry
                .snapshot()
                .into_iter()
                .find(|r| r["id"] == children[0])
                .unwrap();
            assert_eq!(restarted["restarts"], 1);
        });
    }

    #[test]
    fn a_task_is_a_child_and_cancels_alone() {
        let sys = System::new();
        sys.block_on(async {
            let registry = Arc::new(Registry::default());
            let (a, a_id) = start(&registry, "t");
            let mut ids = Vec::new();
            for _ in 0..2 {
                let (id, _) = a
                    .send(StartTask {
                        src: "sh { sleep 30 }".into(),
                        position: Position::Value,
                        tty: false,
                        gate: None,
                    })
                    .await
                    .unwrap()
                    .unwrap();
                ids.push(id);
            }
            let t = table(&a).await;
            let labels: Vec<&str> = t["children"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["child"].as_str())
                .collect();
            assert!(labels.contains(&tasks::ref_name(ids[0]).as_str()), "{t}");
            assert_eq!(
                registry
                    .snapshot()
                    .iter()
                    .filter(|r| r["parent"] == a_id && r["kind"] == "task")
                    .count(),
                2
            );
            let Ok(TaskAnswer::Done) = a
                .send(TaskCall(TaskOp::Control(ids[0], TaskControl::Cancel)))
                .await
                .unwrap()
            else {
                panic!("cancel not carried out");
            };
            let Ok(TaskAnswer::Watch(view)) =
                a.send(TaskCall(TaskOp::Watch(ids[0]))).await.unwrap()
            else {
                panic!("no view");
            };
            let v = super::super::task::wait_final(view, Some(Duration::from_secs(10))).await;
            assert_eq!(v.record.state, tasks::TaskState::Cancelled);
            let Ok(TaskAnswer::Record(other)) =
                a.send(TaskCall(TaskOp::Get(ids[1]))).await.unwrap()
            else {
                panic!("no record");
            };
            assert_eq!(other["state"], "running", "{other}");
            // Leave no process behind.
            a.send(TaskCall(TaskOp::Control(ids[1], TaskControl::Cancel)))
                .await
                .unwrap()
                .unwrap();
            let Ok(TaskAnswer::Watch(view)) =
                a.send(TaskCall(TaskOp::Watch(ids[1]))).await.unwrap()
            else {
                panic!("no view");
            };
            let v = super::super::task::wait_final(view, Some(Duration::from_secs(10))).await;
            assert_eq!(v.record.state, tasks::TaskState::Cancelled);
            a.do_send(StopSession);
        });
    }
}
