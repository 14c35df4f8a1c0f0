//! Session tasks seen from the language (docs/rules.md §7): `cmd &` and
//! `sh { … } &` start a task of the daemon's session through a [`TaskHost`]
//! (the same kind `exec` with `background: true` starts), so it outlives the
//! call; `jobs` lists every task of the session; a task handle's methods
//! reach the session's task by its daemon-wide number (`task(N)` is `task:N`).
//! Without a host (a language session outside the daemon) `cmd &` runs on a
//! thread of this evaluator, as `spawn { }` does.

use std::sync::Arc;

use crate::ast::{Command, Expr, ExprKind, Program, Span, Stmt, StmtKind, WordKind};
use crate::eval::{EResult, Interp, Pos};
use crate::interrupt::Interrupter;
use crate::scope::ScopeRef;
use shoal_base::sync::Locked;
use shoal_value::{Record, SResult, ShoalError, TaskRef, Value};

/// One task as `jobs` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskInfo {
    pub id: u64,
    pub desc: String,
    /// `running`, `cancelling`, `suspended`, `completed`, `failed`, `cancelled`.
    pub state: String,
    pub done: bool,
}

/// A control request on a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskControl {
    Cancel,
    Suspend,
    Resume,
}

/// The session's tasks, as the daemon keeps them. Called on an evaluation
/// thread (never an arbiter); each call may wait for the session's supervisor.
pub trait TaskHost: Send + Sync {
    /// Start `src` as a task of the session, evaluated on `fork` (the
    /// caller's state as it is now; `Session::from` makes it a session). Its
    /// number.
    fn start(&self, src: &str, fork: Forked) -> SResult<u64>;
    /// Every task of the session, however it started.
    fn list(&self) -> SResult<Vec<TaskInfo>>;
    /// One task (`None`: no such task in this session).
    fn info(&self, id: u64) -> SResult<Option<TaskInfo>>;
    /// Wait for the task's end (`intr`: the waiting evaluation's interrupt):
    /// its value, or the error it raised.
    fn wait(&self, id: u64, intr: &Interrupter) -> SResult<Value>;
    fn control(&self, id: u64, c: TaskControl) -> SResult<()>;
}

/// A fork of an evaluation for a task: the evaluator's state and the program
/// it is to run. The session layer above makes it a `Session`.
pub struct Forked {
    pub(crate) interp: Interp,
    pub(crate) prog: Program,
}

/// The host of a session's evaluations.
pub type TaskHostRef = Arc<dyn TaskHost>;

impl Interp {
    /// Start `src` as a session task on a fork of this evaluator (bindings
    /// visible in `scope`, cwd, environment): `None` without a host.
    fn host_task(&mut self, src: &str, body: Expr, scope: &ScopeRef) -> Option<EResult<Value>> {
        let host = self.task_host.clone()?;
        let span = body.span;
        let prog = Program {
            stmts: vec![Stmt {
                kind: StmtKind::Expr(body),
                span,
            }],
        };
        let fork = Forked {
            interp: self.fork(scope),
            prog,
        };
        Some(
            host.start(src, fork)
                .map(|id| Value::Task(Arc::new(TaskRef { id })))
                .map_err(|e| self.lift(e)),
        )
    }

    /// The source text of a span of the program being evaluated, when it
    /// starts with `head` (a function from an earlier exec has spans of a
    /// source this evaluation no longer has).
    fn src_of(&self, span: Span, head: &str) -> Option<String> {
        self.src
            .get(span.start as usize..span.end as usize)
            .filter(|s| s.contains(head))
            .map(|s| s.trim_end_matches('&').trim().to_string())
    }

    /// `cmd args &`.
    pub(crate) fn spawn_command(&mut self, cmd: &Arc<Command>, scope: &ScopeRef) -> EResult<Value> {
        let head = command_name(cmd);
        let desc = self
            .src_of(cmd.span, head.trim_start_matches('^'))
            .unwrap_or_else(|| format!("{head} … &"));
        let mut c = (**cmd).clone();
        c.background = false;
        let c = Arc::new(c);
        let body = Expr {
            kind: ExprKind::Command(c.clone()),
            span: cmd.span,
        };
        if let Some(r) = self.host_task(&desc, body, scope) {
            return r;
        }
        self.start_task(desc, scope, move |it| {
            let g = it.globals.clone();
            it.eval_command(&c, &g, Pos::Value)
        })
    }

    /// `sh { … } &` (an interpreter block or a parenthesised command, in
    /// the background).
    pub(crate) fn spawn_expr(&mut self, e: &Expr, scope: &ScopeRef) -> EResult<Value> {
        let tool = match &e.kind {
            ExprKind::InterpBlock { tool, .. } => tool.as_str(),
            _ => "(",
        };
        let desc = self
            .src_of(e.span, tool)
            .unwrap_or_else(|| format!("{tool} … &"));
        if let Some(r) = self.host_task(&desc, e.clone(), scope) {
            return r;
        }
        let e = e.clone();
        self.start_task(desc, scope, move |it| {
            let g = it.globals.clone();
            it.eval_expr(&e, &g, Pos::Value)
        })
    }

    /// A method of a handle to a session task (not one of this evaluator's
    /// own `spawn` tasks). `None`: the host has no such task either.
    pub(crate) fn host_task_method(&mut self, id: u64, name: &str) -> Option<EResult<Value>> {
        let host = self.task_host.clone()?;
        let info = match host.info(id) {
            Ok(Some(i)) => i,
            Ok(None) => return None,
            Err(e) => return Some(Err(self.lift(e))),
        };
        let control = |c| {
            host.control(id, c)
                .map(|()| Value::Task(Arc::new(TaskRef { id })))
        };
        let r = match name {
            "await" | "wait" => host.wait(id, &self.interrupter.clone()),
            "cancel" => host.control(id, TaskControl::Cancel).map(|()| Value::Null),
            "is_done" => Ok(Value::Bool(info.done)),
            "suspend" => control(TaskControl::Suspend),
            "resume" => control(TaskControl::Resume),
            "is_suspended" => Ok(Value::Bool(info.state == "suspended")),
            "id" => Ok(Value::Int(id as i64)),
            "state" => Ok(Value::str(&info.state)),
            _ => return None,
        };
        Some(r.map_err(|e| self.lift(e)))
    }

    /// `task(N)` (or `task("task:N")`): a handle to the session's task:N.
    pub(crate) fn task_by_number(
        &mut self,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        if let Some((k, _)) = named.first() {
            return Err(ShoalError::arg_error(format!("task: unknown argument `{k}`")).into());
        }
        let id = match pos.as_slice() {
            [Value::Int(n)] if *n > 0 => *n as u64,
            [Value::Str(s)] => match crate::task::parse_ref(s) {
                Some(n) => n,
                None => {
                    return Err(ShoalError::arg_error(format!(
                        "task expects a task number or \"task:N\", got {s:?}"
                    ))
                    .into())
                }
            },
            _ => {
                return Err(ShoalError::arg_error(
                    "task expects one task number (`task(3)`, or \"task:3\")",
                )
                .into())
            }
        };
        let local = self.tasks.locked().has(id);
        let known = local
            || match &self.task_host {
                Some(h) => h.info(id).map_err(|e| self.lift(e))?.is_some(),
                None => false,
            };
        if !known {
            return Err(
                ShoalError::not_found(format!("no task {id} in this session"))
                    .with_hint("`jobs` lists this session's tasks")
                    .into(),
            );
        }
        Ok(Value::Task(Arc::new(TaskRef { id })))
    }

    /// The session's tasks for `jobs` (empty without a host).
    pub(crate) fn host_jobs(&self) -> SResult<Vec<TaskInfo>> {
        match &self.task_host {
            Some(h) => h.list(),
            None => Ok(Vec::new()),
        }
    }
}

/// A `jobs` row (docs/rules.md §7): `{id, desc, state, done, suspended}`.
pub(crate) fn job_row(t: &TaskInfo) -> Arc<Record> {
    let mut r = Record::new();
    r.insert("id".into(), Value::Int(t.id as i64));
    r.insert("desc".into(), Value::str(&t.desc));
    r.insert("state".into(), Value::str(&t.state));
    r.insert("done".into(), Value::Bool(t.done));
    r.insert("suspended".into(), Value::Bool(t.state == "suspended"));
    Arc::new(r)
}

/// A command's head as written, for a task's description when its source
/// text is out of reach.
fn command_name(c: &Command) -> String {
    match &c.head.kind {
        WordKind::Plain(s) | WordKind::Path(s) | WordKind::Glob(s) => s.clone(),
        _ => String::new(),
    }
}
