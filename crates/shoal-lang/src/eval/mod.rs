//! The tree-walking evaluator.
//!
//! [`Interp`] holds everything an evaluation needs (cwd, environment, the
//! global scope, the directory stack, tasks). Lexical scopes are passed
//! explicitly through the `eval_*` functions. Non-error control flow
//! (`return`, `break`, `continue`, `exit`) travels in [`Ctl`] next to errors.
//!
//! Files: `stmt.rs` (statements, blocks, loops, assignment), `expr.rs`
//! (expressions, fields, methods, indexing), `call.rs` (calls, argument
//! binding, special call forms), `pattern.rs` (match patterns), `command.rs`
//! (commands, builtins, externals, feed, scripts), `task.rs` (background
//! tasks, channels).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

use crate::ast::Program;
use crate::interrupt::Interrupter;
use crate::scope::{Scope, ScopeRef};
use shoal_value::{ErrorCode, Host, Record, SResult, ShoalError, Value};

mod adapted;
mod args;
mod call;
mod changes;
mod closure_cmd;
mod command;
mod dirs;
mod expr;
mod external;
mod file_streams;
mod parallel;
mod pattern;
mod reef;
mod scripts;
mod session_tasks;
mod stmt;
mod task;
mod terminal;

#[cfg(test)]
mod tests;

pub use args::argv_string;
pub use session_tasks::{Forked, TaskControl, TaskHost, TaskHostRef, TaskInfo};
pub use task::Tasks;

/// Maximum nesting of calls (docs/rules.md §4).
pub const MAX_DEPTH: usize = 10_000;

/// Stack size of the threads evaluation runs on. Debug builds use far
/// bigger frames (about 60 KiB of native stack per language-level call), so
/// they get more room to reach the 10,000-call limit. The memory is only
/// reserved; pages are committed as the stack actually grows.
pub const EVAL_STACK: usize = if cfg!(debug_assertions) {
    1 << 30
} else {
    512 << 20
};

/// Non-local exits: errors and control flow.
#[derive(Debug)]
pub enum Ctl {
    /// Boxed: an `EResult` travels through every `eval_expr` return, and a
    /// full error inline would make each of those results several times larger.
    Err(Box<ShoalError>),
    Return(Value),
    Break,
    Continue,
    /// `exit` / `quit`: stop the program; its result is `null`.
    Exit,
}

impl From<ShoalError> for Ctl {
    fn from(e: ShoalError) -> Ctl {
        Ctl::Err(Box::new(e))
    }
}

pub type EResult<T> = Result<T, Ctl>;

/// Statement position (a failed external raises `cmd_failed`) or value
/// position (the failed outcome is the value). docs/rules.md §8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    Stmt,
    Value,
}

/// Receiver of non-final top-level statement values (docs/rules.md §1).
/// Where `user.*` channel events go beyond the session (docs/rules.md §10:
/// `user.*` channels are the language's side of the daemon's event bus).
/// Called on the emitting thread with the channel name and the payload;
/// `Err`: the bus refused it (why, for the emitter to raise).
pub type BusSink = Arc<dyn Fn(&str, &Value) -> Result<(), String> + Send + Sync>;

/// Reads the session's transcript: `out:N` in source (`Err`: why there is
/// no such value, for the error message).
pub type TranscriptLookup = Arc<dyn Fn(u64) -> Result<Value, String> + Send + Sync>;

pub(crate) use task::channel_inject;

pub type StatementSink = Box<dyn FnMut(&Value) + Send>;

/// Named channels of a session (docs/rules.md §10).
pub type Channels = Arc<Mutex<IndexMap<String, task::Channel>>>;

/// The evaluator state of one session (or one script / background task).
pub struct Interp {
    pub cwd: PathBuf,
    pub env: IndexMap<String, String>,
    pub config: Record,
    pub globals: ScopeRef,
    pub interrupter: Interrupter,
    pub oldpwd: Option<PathBuf>,
    /// Directory stack; the top is the last element.
    pub dir_stack: Vec<PathBuf>,
    /// Current call nesting.
    pub depth: usize,
    /// > 0 while evaluating a function or lambda body.
    pub fn_depth: usize,
    pub exit_requested: bool,
    pub tasks: Arc<Mutex<Tasks>>,
    pub channels: Channels,
    /// The source text being executed (for the spelling of long flags).
    pub src: Arc<str>,
    /// Address near the base of the native stack of the evaluating thread.
    stack_base: usize,
    /// Native stack bytes evaluation may use before `recursion_limit`.
    stack_budget: usize,
    /// The most native stack bytes a checked frame used since `enter_thread`.
    stack_peak: std::cell::Cell<usize>,
    /// Aliases being expanded (guards `alias ls = ls -a`).
    alias_guard: Vec<String>,
    /// Tool constraints pushed by `with reef: {…}`, innermost last.
    pub reef_stack: Vec<Vec<(String, String)>>,
    /// Pid (= process group) of the external program running now, or 0.
    pub child_pid: Arc<std::sync::atomic::AtomicU32>,
    /// Directories entered this session: (path, visits, last visit tick).
    pub(crate) visited: Vec<(PathBuf, u32, u64)>,
    pub(crate) visit_tick: u64,
    /// Receives the values of non-final top-level statements.
    pub sink: Option<StatementSink>,
    /// Receives every event emitted on a `user.*` channel (the daemon
    /// publishes it on its event bus).
    pub bus_sink: Option<BusSink>,
    /// The transcript `out:N` reads (`None`: no daemon session).
    pub transcript: Option<TranscriptLookup>,
    /// Span of the command or interpreter block being evaluated (an
    /// outcome's `span`).
    pub(crate) cmd_span: Option<crate::ast::Span>,
    /// Call-frame scopes that no closure captured, kept for reuse.
    pub(crate) scope_pool: Vec<ScopeRef>,
    /// The session's memory budget (`[limits] session_memory`); threads that
    /// evaluate for this session attach to it in [`Interp::enter_thread`].
    pub memory: Option<&'static crate::memory::MemBudget>,
    /// The session's spill allowance (`[limits] spill_bytes`).
    pub spill: Option<Arc<shoal_value::output::SpillQuota>>,
    /// Adapters for command heads (docs/rules.md §8).
    pub adapters: Option<Arc<crate::adapters::Catalog>>,
    /// What the running principal may read of `env` (`None`: all of it);
    /// set for each exec from its gate (docs/rules.md §21).
    pub env_view: Option<Arc<crate::env_view::EnvView>>,
    /// Names this session's evaluations set themselves (`env.X = …`,
    /// `with env:`): children get them whatever the view.
    pub env_own: std::collections::BTreeSet<String>,
    /// The daemon session's tasks (`cmd &`, `jobs`, task handles); `None`
    /// outside the daemon. Set for each exec from its caller.
    pub task_host: Option<TaskHostRef>,
    /// Whether the int-operator and simple-call fast paths run
    /// ([`shoal_base::fast_paths`]; a test sets it to compare both paths).
    pub(crate) fast_paths: bool,
}

fn stack_addr() -> usize {
    let x = 0u8;
    std::hint::black_box(&x) as *const u8 as usize
}

impl Interp {
    pub fn new(cwd: PathBuf, env: IndexMap<String, String>, config: Record) -> Interp {
        Interp {
            cwd,
            env,
            config,
            globals: Scope::root(),
            interrupter: Interrupter::default(),
            oldpwd: None,
            dir_stack: Vec::new(),
            depth: 0,
            fn_depth: 0,
            exit_requested: false,
            tasks: Arc::new(Mutex::new(Tasks::default())),
            channels: Arc::new(Mutex::new(IndexMap::new())),
            src: Arc::from(""),
            stack_base: 0,
            stack_budget: 0,
            stack_peak: std::cell::Cell::new(0),
            alias_guard: Vec::new(),
            reef_stack: Vec::new(),
            sink: None,
            bus_sink: None,
            transcript: None,
            cmd_span: None,
            child_pid: Arc::default(),
            visited: Vec::new(),
            visit_tick: 0,
            scope_pool: Vec::new(),
            memory: None,
            spill: None,
            adapters: None,
            env_view: None,
            env_own: std::collections::BTreeSet::new(),
            task_host: None,
            fast_paths: shoal_base::fast_paths(),
        }
    }

    /// A fresh evaluator sharing session-wide resources (scripts, modules):
    /// same cwd/env/config/tasks/channels/interrupter, empty scope.
    pub fn child(&self) -> Interp {
        let mut c = Interp::new(self.cwd.clone(), self.env.clone(), self.config.clone());
        c.interrupter = self.interrupter.clone();
        c.tasks = self.tasks.clone();
        c.channels = self.channels.clone();
        c.stack_base = self.stack_base;
        c.stack_budget = self.stack_budget;
        c.depth = self.depth;
        c.reef_stack = self.reef_stack.clone();
        c.bus_sink = self.bus_sink.clone();
        c.transcript = self.transcript.clone();
        c.memory = self.memory;
        c.spill = self.spill.clone();
        c.adapters = self.adapters.clone();
        c.env_view = self.env_view.clone();
        c.env_own = self.env_own.clone();
        c.task_host = self.task_host.clone();
        c.fast_paths = self.fast_paths;
        c
    }

    /// Declare that evaluation runs on the current thread, whose stack has
    /// `stack_size` bytes (0: unknown, no native guard).
    pub fn enter_thread(&mut self, stack_size: usize) {
        if let Some(b) = self.memory {
            crate::memory::attach(b);
        }
        self.stack_base = stack_addr();
        // Keep a generous margin for value methods, rendering and the
        // process machinery that run below the last checked frame.
        self.stack_budget = stack_size.saturating_sub(stack_size / 8 + (4 << 20));
        self.stack_peak.set(0);
    }

    /// The most native stack bytes evaluation used since [`enter_thread`](Self::enter_thread).
    pub fn stack_peak(&self) -> usize {
        self.stack_peak.get()
    }

    /// `Err(recursion_limit)` when the native stack is nearly exhausted.
    pub(crate) fn check_stack(&self) -> SResult<()> {
        if self.stack_budget == 0 {
            return Ok(());
        }
        let used = self.stack_base.saturating_sub(stack_addr());
        if used > self.stack_peak.get() {
            self.stack_peak.set(used);
        }
        if used > self.stack_budget {
            return Err(ShoalError::new(
                ErrorCode::RecursionLimit,
                format!(
                    "maximum recursion depth exceeded (native stack: {used} bytes at depth {})",
                    self.depth
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn interrupted(&self) -> bool {
        self.interrupter.is_interrupted()
    }

    pub(crate) fn cancelled() -> ShoalError {
        ShoalError::new(ErrorCode::Cancelled, "evaluation interrupted")
    }

    pub(crate) fn check_cancel(&self) -> SResult<()> {
        if self.interrupted() {
            return Err(Interp::cancelled());
        }
        // The cheap memory checkpoint: one relaxed load.
        match self.memory {
            Some(b) => b.check(),
            None => Ok(()),
        }
    }

    /// Convert a control-flow exit into an error for contexts that only
    /// carry errors (value-method callbacks, task results).
    pub(crate) fn ctl_to_err(&mut self, c: Ctl) -> ShoalError {
        match c {
            Ctl::Err(e) => *e,
            Ctl::Exit => {
                self.exit_requested = true;
                ShoalError::custom("exit")
            }
            Ctl::Break => ShoalError::custom("`break` outside a loop"),
            Ctl::Continue => ShoalError::custom("`continue` outside a loop"),
            Ctl::Return(_) => ShoalError::custom("`return` outside a function"),
        }
    }

    /// An error coming back from value code: if `exit` was requested inside
    /// a callback, keep unwinding as `exit`.
    pub(crate) fn lift(&self, e: ShoalError) -> Ctl {
        if self.exit_requested {
            Ctl::Exit
        } else {
            Ctl::Err(Box::new(e))
        }
    }

    /// Evaluate a whole program at the top level of the global scope.
    /// Non-final statements are in statement position; the final one in
    /// `final_pos`. Returns the program result (docs/rules.md §1).
    pub fn run_program(&mut self, prog: &Program, final_pos: Pos) -> Result<Value, ShoalError> {
        let scope = self.globals.clone();
        match self.eval_stmts_top(&prog.stmts, &scope, final_pos) {
            Ok(v) => Ok(v),
            Err(Ctl::Exit) => Ok(Value::Null),
            Err(c) => {
                let e = self.ctl_to_err(c);
                if self.exit_requested {
                    return Ok(Value::Null);
                }
                Err(e)
            }
        }
    }

    /// Top-level statements: like a block but in the given scope, with the
    /// exit check between statements.
    pub(crate) fn eval_stmts_top(
        &mut self,
        stmts: &[crate::ast::Stmt],
        scope: &ScopeRef,
        final_pos: Pos,
    ) -> EResult<Value> {
        let mut last = Value::Null;
        let n = stmts.len();
        for (i, st) in stmts.iter().enumerate() {
            let pos = if i + 1 == n { final_pos } else { Pos::Stmt };
            last = self.eval_stmt(st, scope, pos)?;
            if self.exit_requested {
                return Err(Ctl::Exit);
            }
            if i + 1 < n {
                if let Some(sink) = self.sink.as_mut() {
                    sink(&last);
                }
            }
        }
        Ok(last)
    }

    /// Names value-bound at the top level (for `ParseContext`).
    pub fn value_bound_names(&self) -> Vec<String> {
        self.globals
            .local_bindings()
            .into_iter()
            .filter(|(_, b)| b.value_bound)
            .map(|(k, _)| k)
            .collect()
    }

    /// The environment as the running principal may read it.
    pub(crate) fn env_pairs(&self) -> Vec<(String, String)> {
        match &self.env_view {
            Some(v) => v.readable(&self.env),
            None => self
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// `env.NAME` as the running principal may read it (a hidden name
    /// reads as unset).
    pub(crate) fn env_get(&self, name: &str) -> Option<&String> {
        match &self.env_view {
            Some(v) if !v.allows(name) => None,
            _ => self.env.get(name),
        }
    }

    /// The environment a child program starts with (before its command's
    /// own assignments).
    pub(crate) fn child_env(&self) -> std::borrow::Cow<'_, IndexMap<String, String>> {
        match &self.env_view {
            Some(v) => std::borrow::Cow::Owned(v.child_env(&self.env, &self.env_own)),
            None => std::borrow::Cow::Borrowed(&self.env),
        }
    }

    /// Resolve a user path against the cwd (`~` expanded).
    pub(crate) fn resolve_path(&self, p: &Path) -> PathBuf {
        let s = p.to_string_lossy();
        if s == "~" || s.starts_with("~/") {
            let home = self.env.get("HOME").cloned().unwrap_or_else(|| "/".into());
            return PathBuf::from(format!("{home}{}", &s[1..]));
        }
        self.cwd.join(p)
    }
}

impl Host for Interp {
    fn call(&mut self, f: &Value, args: Vec<Value>) -> SResult<Value> {
        match self.call_value(f, args, Vec::new()) {
            Ok(v) => Ok(v),
            Err(c) => Err(self.ctl_to_err(c)),
        }
    }
    fn call1(&mut self, f: &Value, arg: Value) -> SResult<Value> {
        let r = match f {
            Value::Closure(c) => self.call_closure1(&crate::scope::closure(c), arg),
            _ => self.call_value(f, vec![arg], Vec::new()),
        };
        r.map_err(|c| self.ctl_to_err(c))
    }
    fn cwd(&self) -> &Path {
        &self.cwd
    }
    fn env_vars(&self) -> Vec<(String, String)> {
        self.env_pairs()
    }
    fn config(&self) -> Record {
        self.config.clone()
    }
    fn check_interrupt(&self) -> SResult<()> {
        self.check_cancel()
    }
}
