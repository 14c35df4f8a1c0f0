//! Task: one background task of a session (docs/protocol.md §4), a child in its
//! SessionSupervisor's table.
//!
//! The actor owns the task's record (published through a `watch` channel, so
//! `task.get`/`task.await` and status read it without messaging), its own
//! cancellation and its process slot. The evaluation runs on a thread of its
//! own over a fork of the session's language state, so neither the session
//! nor another task waits for it. It never blocks its arbiter: the thread
//! reports the end by a oneshot the actor awaits.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::{oneshot, watch};

use crate::event_bus::{BusHandle, Publish};
use crate::health::Registration;
use crate::msg::Exec;
use crate::msg::{ExecReply, SessionError};
use crate::sessions::session::TaskLang;
use crate::sessions::session::{CallCancel, SessionShared};
use crate::sessions::supervisor::ExitNotice;
use shoal_lang::task::{self, Ending, TaskRecord, TaskState};
use shoal_proto::kernel::{TaskRead, TaskRequest, TaskResult, TaskRow};
use shoal_proto::mcp::{CancelResult, ExecAnswer, TaskStarted};
use shoal_proto::rpc::{self, RpcError};
use shoal_proto::wire;
use shoal_value::Value;

/// What watchers of a task see: its record and, once it ended, its reply.
#[derive(Clone)]
pub struct TaskView {
    pub record: TaskRecord,
    pub reply: Option<Arc<Result<ExecReply, SessionError>>>,
}

pub struct Task {
    id: u64,
    shared: Arc<SessionShared>,
    work: Option<(TaskLang, Exec)>,
    cancel: Arc<CallCancel>,
    pid: Arc<AtomicU32>,
    /// Its job's number in the session's worker process (0: it evaluates
    /// here, or has not started there).
    there: Arc<AtomicU64>,
    /// The process group stopped by `task.suspend` (0: none).
    stopped_pid: u32,
    tx: watch::Sender<TaskView>,
    bus: Option<BusHandle>,
    reg: Registration,
    _exit: ExitNotice,
}

/// What the supervisor keeps of a task it started.
pub struct TaskStart {
    pub task: Task,
    pub view: watch::Receiver<TaskView>,
    pub pid: Arc<AtomicU32>,
    pub cancel: Arc<CallCancel>,
}

impl Task {
    /// A task `id` of `shared` running `src` on `lang` (a fork), its record
    /// kept `retain` once finished.
    pub fn prepare(
        id: u64,
        shared: Arc<SessionShared>,
        lang: TaskLang,
        spec: Exec,
        reg: Registration,
        exit: ExitNotice,
        retain: Duration,
    ) -> TaskStart {
        let mut record = TaskRecord::new(id, &shared.name, &spec.src, shoal_journal::now_ns());
        record.tail = Some(shoal_value::output::OutputTail::new());
        record.retain = retain;
        let (tx, view) = watch::channel(TaskView {
            record,
            reply: None,
        });
        let pid = match &lang {
            TaskLang::Here(l) => l.child_pid_slot(),
            // Its program runs in the worker, which signals it.
            TaskLang::There(_) => Arc::default(),
        };
        let bus = shared.services.as_ref().map(|s| s.bus.clone());
        let cancel = spec.cancel.clone();
        TaskStart {
            task: Task {
                id,
                cancel: spec.cancel.clone(),
                shared,
                work: Some((lang, spec)),
                pid: pid.clone(),
                there: Arc::default(),
                stopped_pid: 0,
                tx,
                bus,
                reg,
                _exit: exit,
            },
            view,
            pid,
            cancel,
        }
    }

    fn publish(&self, payload: Value) {
        if let Some(bus) = &self.bus {
            // `shoal://jobs` watchers of this session hear of every change
            // of its tasks (and of no other session's).
            bus.publish_all([
                Publish {
                    channel: task::channel(self.id),
                    payload: wire::encode(&payload).into(),
                },
                Publish {
                    channel: jobs_channel(&self.shared.name),
                    payload: wire::encode(&Value::str(task::ref_name(self.id))).into(),
                },
            ]);
        }
    }

    fn finish(&mut self, r: Result<ExecReply, SessionError>) {
        let ending = match &r {
            Ok(reply) => Ending::Value {
                n: reply.n,
                ok: !matches!(&reply.value, Value::Outcome(o) if !o.ok),
            },
            Err(e) => Ending::Error {
                n: match e {
                    SessionError::Raised { n, .. } => Some(*n),
                    _ => None,
                },
                error: crate::peer::session_error(e.clone()).to_json(),
            },
        };
        self.tx.send_modify(|v| {
            v.record.finish(ending, shoal_journal::now_ns());
            v.reply = Some(Arc::new(r));
        });
        let rec = self.tx.borrow().record.clone();
        self.reg.stats.set_state(rec.state.as_str());
        let mut m = shoal_value::Record::new();
        m.insert("state".into(), Value::str(rec.state.as_str()));
        m.insert(
            "ref".into(),
            rec.result_ref
                .map_or(Value::Null, |n| Value::str(format!("out:{n}"))),
        );
        self.publish(Value::record(m));
    }

    fn set_state(&mut self, s: TaskState) {
        self.tx.send_modify(|v| v.record.state = s);
        self.reg.stats.set_state(s.as_str());
        self.publish(Value::str(s.as_str()));
    }
}

/// The name a caller uses for its own session's jobs channel (`shoal://jobs`,
/// `events.subscribe {channel: "jobs"}`).
pub const JOBS_CHANNEL: &str = "jobs";

/// The bus channel on which every change of `session`'s tasks is announced:
/// `jobs.<session>` (session names hold no control characters; any other
/// character, `.` included, is fine: the check is by equality).
pub fn jobs_channel(session: &str) -> String {
    format!("{JOBS_CHANNEL}.{session}")
}

/// A channel scoped to one session: `task.*` and `jobs`/`jobs.*`. Others
/// (`user.*`, `session.transcript`, ...) are daemon-wide and need no session.
pub fn is_scoped_channel(channel: &str) -> bool {
    channel.starts_with("task.") || channel == JOBS_CHANNEL || channel.starts_with("jobs.")
}

/// The bus channel a caller attached to `h` may use for the `channel` it
/// names (docs/protocol.md §4: tasks are scoped to their session):
/// - `task.N`: only if N is a task of this session, else `-32021` like `task.get`;
/// - `jobs`: this session's own `jobs.<session>`; naming that directly is fine,
///   another session's jobs channel is refused (`-32021`);
/// - any other channel: unchanged.
///
/// Every path that reads or subscribes to a caller-named channel goes through here.
pub async fn scoped_channel(
    h: &crate::sessions::handle::SessionHandle,
    channel: &str,
) -> Result<String, RpcError> {
    if let Some(rest) = channel.strip_prefix("task.") {
        let unknown = || {
            RpcError::new(rpc::UNKNOWN_TASK, format!("unknown task {channel:?}"))
                .with_data(serde_json::json!({"channel": channel}))
        };
        let id: u64 = rest.parse().ok().filter(|n| *n > 0).ok_or_else(unknown)?;
        task_record(h, id).await?;
        return Ok(task::channel(id));
    }
    let own = jobs_channel(&h.name);
    if channel == JOBS_CHANNEL || channel == own {
        return Ok(own);
    }
    if channel.starts_with("jobs.") {
        return Err(RpcError::new(
            rpc::UNKNOWN_TASK,
            format!("{channel:?} is not this session's jobs channel (use \"jobs\")"),
        )
        .with_data(serde_json::json!({"channel": channel, "session": h.name})));
    }
    Ok(channel.to_string())
}

impl Actor for Task {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        let Some((lang, spec)) = self.work.take() else {
            return;
        };
        self.publish(Value::str("started"));
        let (done_tx, done_rx) = oneshot::channel();
        let shared = self.shared.clone();
        let tail = self.tx.borrow().record.tail.clone();
        let live = shared
            .tasks
            .register(self.id, self.cancel.clone(), self.pid.clone());
        let home =
            shoal_base::procs::Home::new(&shared.name, shoal_base::procs::Owner::Task(self.id));
        let cancel = self.cancel.clone();
        let there = self.there.clone();
        let spawned = shoal_lang::session::spawn_eval_thread(
            format!("shoal-task-{}", self.id),
            move |stack| {
                let _live = live;
                shoal_lang::shell::process::set_thread_tail(tail);
                let r = shoal_base::procs::with_home(Some(home.clone()), || {
                    // Evaluating here, the thread is confined as the
                    // caller's (or the owner's) sandbox says; relaying to
                    // the session's worker, it evaluates nothing.
                    let confined = match &lang {
                        TaskLang::Here(_) => {
                            crate::sessions::session::confine_for(&shared, spec.gate.as_ref())
                        }
                        TaskLang::There(_) => Ok(()),
                    };
                    confined.and_then(|()| {
                        crate::sessions::session::run_task(&shared, lang, &spec, stack, &there)
                    })
                });
                shoal_lang::shell::process::set_thread_tail(None);
                // A cancelled task's programs got the polite signals; what
                // escaped their process groups ends with its cgroups.
                if cancel.is_cancelled() {
                    shoal_base::procs::kill_owner(&home);
                }
                let _ = done_tx.send(r);
            },
        );
        if let Err(e) = spawned {
            self.finish(Err(SessionError::Internal(format!(
                "cannot start the task's thread: {e}"
            ))));
            ctx.stop();
            return;
        }
        ctx.spawn(done_rx.into_actor(self).map(|r, act, ctx| {
            let r = r.unwrap_or_else(|_| {
                Err(SessionError::Internal(
                    "the task's thread ended without a result".into(),
                ))
            });
            act.finish(r);
            ctx.stop();
        }));
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Stopped before the evaluation ended (session closed, daemon
        // stopping): the processes get the cancel sequence.
        if !self.tx.borrow().record.state.is_final() {
            self.cancel.cancel();
            if self.stopped_pid != 0 {
                self.signal(self.stopped_pid, libc::SIGCONT);
            }
        }
    }
}

impl Task {
    /// Signal the task's program `pid` without waiting: here, or (a task in
    /// the session's worker) a note the worker acts on.
    fn signal(&self, pid: u32, sig: i32) {
        match self.there.load(Ordering::SeqCst) {
            0 => shoal_lang::shell::process::signal_group(pid, sig),
            job => {
                if let Some(r) = self.shared.remote_now() {
                    r.signal_note(job, sig);
                }
            }
        }
    }

    /// Stop the task's running program: its pid (0: none runs).
    fn suspend(&mut self, pid: u32) {
        self.stopped_pid = pid;
        self.tx.send_modify(|v| v.record.pid = pid);
        self.set_state(TaskState::Suspended);
    }
}

/// A control request for one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskControl {
    Cancel,
    Suspend,
    Resume,
}

#[derive(Message)]
#[rtype(result = "Result<(), RpcError>")]
pub struct Control(pub TaskControl);

impl Handler<Control> for Task {
    type Result = ResponseActFuture<Self, Result<(), RpcError>>;

    fn handle(&mut self, msg: Control, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let state = self.tx.borrow().record.state;
        fn done(r: Result<(), RpcError>) -> ResponseActFuture<Task, Result<(), RpcError>> {
            Box::pin(actix::fut::ready(r))
        }
        if state.is_final() {
            return done(Ok(()));
        }
        let id = self.id;
        let nothing = move || {
            RpcError::new(
                rpc::TASK_CONTROL_UNAVAILABLE,
                "the task runs no external program right now: nothing to suspend",
            )
            .with_data(serde_json::json!({"task": task::ref_name(id)}))
        };
        match msg.0 {
            TaskControl::Cancel => {
                self.tx.send_modify(|v| {
                    v.record.request_cancel();
                });
                self.reg.stats.set_state("cancelling");
                // SIGINT, SIGTERM after 3 s, SIGKILL after 3 more: the
                // process layer does it once the interrupt is seen.
                self.cancel.cancel();
                if self.stopped_pid != 0 {
                    self.signal(self.stopped_pid, libc::SIGCONT);
                    self.stopped_pid = 0;
                }
                done(Ok(()))
            }
            TaskControl::Suspend if state == TaskState::Suspended => done(Ok(())),
            TaskControl::Suspend if state != TaskState::Running => done(Err(nothing())),
            TaskControl::Suspend => {
                let job = self.there.load(Ordering::SeqCst);
                let remote = self.shared.remote_now().filter(|_| job != 0);
                let Some(remote) = remote else {
                    let pid = self.pid.load(Ordering::SeqCst);
                    if pid == 0 {
                        return done(Err(nothing()));
                    }
                    shoal_lang::shell::process::signal_group(pid, libc::SIGSTOP);
                    self.suspend(pid);
                    return done(Ok(()));
                };
                // In the worker, which finds the program: off this arbiter.
                let stop = tokio::task::spawn_blocking(move || remote.signal(job, libc::SIGSTOP));
                Box::pin(
                    stop.into_actor(self)
                        .map(move |pid, act, _ctx| match pid.unwrap_or(0) {
                            0 => Err(nothing()),
                            pid => {
                                act.suspend(pid);
                                Ok(())
                            }
                        }),
                )
            }
            TaskControl::Resume => {
                if state == TaskState::Suspended {
                    self.signal(self.stopped_pid, libc::SIGCONT);
                    self.stopped_pid = 0;
                    self.set_state(TaskState::Running);
                }
                done(Ok(()))
            }
        }
    }
}

/// `exec` with `background` (alias `async`) or `timeout_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskOpts {
    pub background: bool,
    pub timeout_ms: Option<u64>,
}

impl TaskOpts {
    /// The options of `background` and `timeout_ms` (`None`: an ordinary foreground exec).
    pub fn of(background: Option<bool>, timeout_ms: Option<u64>) -> Option<TaskOpts> {
        let background = background.unwrap_or(false);
        (background || timeout_ms.is_some()).then_some(TaskOpts {
            background,
            timeout_ms,
        })
    }
}

/// `{task, events, render}` of a task just started.
pub fn task_created(id: u64) -> TaskStarted {
    TaskStarted {
        task: task::ref_name(id),
        events: task::channel(id),
        render: Some(task::started_text(id)),
        timed_out: None,
    }
}

/// Wait until the task's record is final, at most `limit` (`None`: no limit).
/// The view as last seen.
pub async fn wait_final(mut view: watch::Receiver<TaskView>, limit: Option<Duration>) -> TaskView {
    let done = |v: &TaskView| v.record.state.is_final() && v.reply.is_some();
    let wait = view.wait_for(done);
    let seen = match limit {
        Some(d) => tokio::time::timeout(d, wait)
            .await
            .ok()
            .and_then(|r| r.ok())
            .map(|v| v.clone()),
        None => wait.await.ok().map(|v| v.clone()),
    };
    seen.unwrap_or_else(|| view.borrow().clone())
}

/// The task a `task:N` names (`-32021` for none).
pub fn task_param(r: &str) -> Result<u64, RpcError> {
    task::parse_ref(r).ok_or_else(|| crate::sessions::supervisor::unknown_task(r))
}

/// Run `src` as a task: `{task, events}` at once with `background`; with a
/// `timeout_ms` only, the inline result if it ends in time, else `{task,
/// events, timed_out: true}` with the work still running (never killed).
pub async fn exec_as_task(
    handle: crate::sessions::handle::SessionHandle,
    src: String,
    position: shoal_lang::Position,
    tty: bool,
    budget: shoal_proto::elide::Budget,
    opts: TaskOpts,
    gate: Option<std::sync::Arc<shoal_policy::Gate>>,
) -> Result<ExecAnswer, RpcError> {
    let (id, view) = handle
        .send(crate::sessions::supervisor::StartTask {
            src,
            position,
            tty,
            gate,
        })
        .await
        .map_err(|_| crate::peer::session_error(SessionError::Closed(handle.name.clone())))??;
    let limit = match (opts.background, opts.timeout_ms) {
        (false, Some(ms)) if ms > 0 => Duration::from_millis(ms),
        _ => return Ok(ExecAnswer::Task(task_created(id))),
    };
    let seen = wait_final(view, Some(limit)).await;
    match seen.reply.as_deref() {
        Some(Ok(x)) => {
            crate::sessions::exec::exec_reply_result(x.clone(), &budget).map(ExecAnswer::Ran)
        }
        Some(Err(e)) => Err(crate::peer::session_error(e.clone())),
        None => Ok(ExecAnswer::Task(TaskStarted {
            timed_out: Some(true),
            ..task_created(id)
        })),
    }
}

/// Ask the supervisor about its tasks.
pub async fn task_call(
    handle: &crate::sessions::handle::SessionHandle,
    op: crate::sessions::supervisor::TaskOp,
) -> Result<crate::sessions::supervisor::TaskAnswer, RpcError> {
    handle
        .send(crate::sessions::supervisor::TaskCall(op))
        .await
        .map_err(|_| crate::peer::session_error(SessionError::Closed(handle.name.clone())))?
}

/// One task's record.
pub async fn task_record(
    handle: &crate::sessions::handle::SessionHandle,
    id: u64,
) -> Result<TaskRow, RpcError> {
    use crate::sessions::supervisor::{TaskAnswer, TaskOp};
    match task_call(handle, TaskOp::Get(id)).await? {
        TaskAnswer::Record(r) => Ok(*r),
        _ => Err(RpcError::internal("unexpected answer to task.get")),
    }
}

/// `task.get`, `task.list`, `task.await`, `task.cancel`, `task.suspend`,
/// `task.resume` (`-32021` for an unknown or other-session task).
pub async fn kernel_method(
    handle: crate::sessions::handle::SessionHandle,
    req: TaskRequest,
) -> Result<TaskResult, RpcError> {
    use crate::sessions::supervisor::{TaskAnswer, TaskOp};
    let (task, control) = match req {
        TaskRequest::List => {
            return match task_call(&handle, TaskOp::List).await? {
                TaskAnswer::List(l) => Ok(TaskResult::List(l)),
                _ => Err(RpcError::internal("unexpected answer to task.list")),
            }
        }
        TaskRequest::Get(p) => {
            return task_record(&handle, task_param(&p.task)?)
                .await
                .map(|r| TaskResult::Record(Box::new(r)))
        }
        TaskRequest::Await(p) => {
            let id = task_param(&p.task)?;
            let limit = p.timeout_ms.map(Duration::from_millis);
            let TaskAnswer::Watch(view) = task_call(&handle, TaskOp::Watch(id)).await? else {
                return Err(RpcError::internal("unexpected answer to task.await"));
            };
            let _ = wait_final(view, limit).await;
            return task_record(&handle, id)
                .await
                .map(|r| TaskResult::Record(Box::new(r)));
        }
        TaskRequest::Cancel(p) => (p.task, TaskControl::Cancel),
        TaskRequest::Suspend(p) => (p.task, TaskControl::Suspend),
        TaskRequest::Resume(p) => (p.task, TaskControl::Resume),
    };
    let id = task_param(&task)?;
    task_call(&handle, TaskOp::Control(id, control)).await?;
    let rec = task_record(&handle, id).await?;
    if control == TaskControl::Cancel {
        return Ok(TaskResult::Cancel(CancelResult {
            task: task::ref_name(id),
            cancel_requested: true,
            state: rec.state.to_string(),
        }));
    }
    Ok(TaskResult::Record(Box::new(rec)))
}

/// `shoal_get {"ref": "task:N"}` / `value.get` of a task ref: the task's
/// record (state, `src`, `elapsed_ms`, `tail` while it runs), and once it
/// ended its value (`value`, elided under `budget`; `result_ref`) or error.
/// `render` is the text a model reads: a status line, then the output so far
/// or the value's render.
pub async fn task_read(
    handle: &crate::sessions::handle::SessionHandle,
    id: u64,
    budget: &shoal_proto::elide::Budget,
) -> Result<TaskRead, RpcError> {
    use crate::sessions::supervisor::{TaskAnswer, TaskOp};
    let TaskAnswer::Watch(view) = task_call(handle, TaskOp::Watch(id)).await? else {
        return Err(RpcError::internal("unexpected answer to a task read"));
    };
    let record = task_record(handle, id).await?;
    let reply = view.borrow().reply.clone();
    let reply = reply.as_deref().filter(|_| record.is_final());
    let status = match reply {
        Some(Ok(ExecReply {
            value: Value::Outcome(o),
            ..
        })) => shoal_value::shown::status_line(o),
        _ => None,
    };
    let mut text = read_status_line(&record, status);
    let mut value = None;
    if let Some(reply) = reply {
        match reply {
            Ok(x) => {
                let uri = shoal_proto::kernel::ref_uri(x.n);
                value = Some(
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        shoal_proto::elide::elide(&x.value, budget, &uri)
                    }))
                    .map_err(|_| RpcError::internal("encoding the task's value panicked"))?,
                );
                // The render says the status and ends with the stderr
                // section, as an exec's text does.
                if !x.render.is_empty() {
                    text.push('\n');
                    text.push_str(&x.render);
                }
            }
            Err(e) => {
                let e = crate::peer::session_error(e.clone());
                text.push('\n');
                text.push_str(&e.message);
            }
        }
    } else if let Some(t) = &record.tail {
        for (s, title) in [(&t.stdout, "output so far"), (&t.stderr, "stderr so far")] {
            if !s.is_empty() {
                text.push_str(&format!("\n--- {title} (last bytes) ---\n{}", s.trim_end()));
            }
        }
    }
    Ok(TaskRead {
        record,
        value,
        reference: task::ref_name(id),
        uri: format!("shoal://task/{id}"),
        render: text,
    })
}

/// `task:3 running · 2.1 s · sleep 30`, `task:4 failed · exit status 2 ·
/// …` (and the value's ref once it ended).
fn read_status_line(rec: &TaskRow, status: Option<String>) -> String {
    let ms = rec.elapsed_ms;
    let mut line = format!(
        "{} {}{} · {}.{} s · {}",
        rec.task,
        rec.state,
        status.map(|s| format!(" · {s}")).unwrap_or_default(),
        ms / 1000,
        (ms % 1000) / 100,
        shoal_proto::bound::bound_text(&rec.src, 96, None)
            .lines()
            .next()
            .unwrap_or(""),
    );
    if let Some(r) = &rec.result_ref {
        line.push_str(&format!(" · value {r}"));
    }
    line
}
