//! A language session: scope, cwd, environment, and `exec` of source text.
//! The public interface below is what the daemon uses.

use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::eval::{BusSink, Channels, Interp, Pos, StatementSink, EVAL_STACK};
use crate::memory::MemBudget;
use crate::parse::{parse_with_warnings, ParseContext, ParseError, Warning};
use shoal_base::sync::Locked;
use shoal_value::{Record, ShoalError, Value};

/// Whether the final statement is evaluated in statement position (a failing
/// command raises `cmd_failed`) or value position (it yields the outcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    Stmt,
    Value,
}

#[derive(Clone, Debug)]
pub enum ExecError {
    Parse(ParseError),
    Raised(ShoalError),
}

/// A parsed exec: its program and the names the parse saw bound.
pub struct Prepared {
    prog: crate::ast::Program,
    pos: Pos,
    bound: std::collections::HashSet<String>,
}

#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub cwd: PathBuf,
    /// Initial environment; the process environment when empty.
    pub env: Vec<(String, String)>,
    pub config: Record,
    /// `[limits] session_memory` in bytes: what one exec may allocate
    /// (0: the default, 1 GiB).
    pub memory_limit: u64,
    /// The budget to count against (the session's, shared with its PTYs);
    /// `None`: a new one of `memory_limit`.
    pub memory: Option<&'static MemBudget>,
    /// `[limits] spill_bytes`: captured output this session may spill to
    /// disk (0: the default, 4 GiB).
    pub spill_limit: u64,
    /// Adapters for command heads (`None`: every external runs as written).
    pub adapters: Option<Arc<crate::adapters::Catalog>>,
}

pub use crate::interrupt::Interrupter;

/// Delivers events into a session's channels from another thread.
#[derive(Clone)]
pub struct ChannelInjector {
    channels: Channels,
}

impl ChannelInjector {
    /// Emit `v`, an event `bytes` long published from outside, on `channel`
    /// inside the session (not echoed to the bus sink); how much of this a
    /// session keeps is bounded.
    pub fn inject(&self, channel: &str, v: Value, bytes: usize) {
        crate::eval::channel_inject(&self.channels, channel, v, bytes);
    }
}

impl std::fmt::Debug for ChannelInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelInjector")
    }
}

/// One evaluation session. `Send`: the daemon runs it on a worker thread.
///
/// `exec` runs the program on a dedicated thread with a large stack
/// ([`EVAL_STACK`]) so deep (but legal) recursion cannot overflow the
/// caller's stack; calls nest at most 10,000 deep (`recursion_limit`).
/// `exec_here` evaluates on a thread [`spawn_eval_thread`] started.
pub struct Session {
    interp: Interp,
    /// The likely bash habits of the last `exec`'s source.
    warnings: Vec<Warning>,
    /// The program a session task runs (`cmd &`: the command as parsed
    /// where it was written), in place of parsing the source it is given.
    preset: Option<crate::ast::Program>,
}

impl Session {
    pub fn new(opts: SessionOptions) -> Session {
        let cwd = if opts.cwd.as_os_str().is_empty() {
            std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
        } else {
            opts.cwd
        };
        let env: IndexMap<String, String> = if opts.env.is_empty() {
            std::env::vars().collect()
        } else {
            opts.env.into_iter().collect()
        };
        let mut interp = Interp::new(cwd, env, opts.config);
        interp.memory = Some(
            opts.memory
                .unwrap_or_else(|| MemBudget::leak(opts.memory_limit)),
        );
        interp.spill = Some(shoal_value::output::SpillQuota::new(opts.spill_limit));
        interp.adapters = opts.adapters;
        interp
            .env
            .insert("PWD".into(), interp.cwd.to_string_lossy().into_owned());
        Session {
            interp,
            warnings: Vec::new(),
            preset: None,
        }
    }

    /// Parse and evaluate `src` on a fresh thread with a large stack (see
    /// [`spawn_eval_thread`]). The interrupt flag is cleared when an exec
    /// starts; an interrupt raised during the exec stops it with
    /// `ErrorCode::Cancelled`. A long-lived caller that runs many execs
    /// should own an evaluation thread and call [`exec_here`](Self::exec_here).
    pub fn exec(&mut self, src: &str, position: Position) -> Result<Value, ExecError> {
        let (prog, pos, _) = self.prepare(src, position)?;
        let mut result = None;
        // A big stack first; a modest one if the system refuses it.
        for stack in EVAL_STACKS {
            let interp = &mut self.interp;
            let prog = &prog;
            let home = shoal_base::procs::current_home();
            let outcome = std::thread::scope(|s| {
                let handle = std::thread::Builder::new()
                    .name("shoal-eval".into())
                    .stack_size(stack)
                    .spawn_scoped(s, move || {
                        interp.enter_thread(stack);
                        interp.depth = 0;
                        interp.fn_depth = 0;
                        shoal_base::procs::with_home(home, || interp.run_program(prog, pos))
                    });
                match handle {
                    Ok(h) => match h.join() {
                        Ok(r) => Some(r),
                        // Let the host see the panic (the daemon resets the
                        // session rather than resume half-mutated state).
                        Err(payload) => std::panic::resume_unwind(payload),
                    },
                    Err(_) => None,
                }
            });
            if outcome.is_some() {
                result = outcome;
                break;
            }
        }
        let result = result.unwrap_or_else(|| {
            Err(ShoalError::custom(
                "internal error: cannot start the evaluation thread",
            ))
        });
        self.interp.exit_requested = false;
        result.map_err(ExecError::Raised)
    }

    /// The warnings of the last `exec` (likely bash habits in valid Shoal;
    /// they never change its result). Empty after a parse error.
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    /// Like [`exec`](Self::exec), but evaluates on the calling thread, which
    /// must have been started by [`spawn_eval_thread`] (whose closure is told
    /// `stack_size`) and call this near the top of its stack: the native
    /// stack guard measures from here, so deep recursion still ends in
    /// `recursion_limit`. Stack pages a deep evaluation committed are given
    /// back afterwards, so one deep exec does not stay resident.
    pub fn exec_here(
        &mut self,
        src: &str,
        position: Position,
        stack_size: usize,
    ) -> Result<Value, ExecError> {
        let prepared = self.prepare_exec(src, position)?;
        self.exec_prepared_here(prepared, stack_size)
    }

    /// Parse `src` for [`exec_prepared_here`](Self::exec_prepared_here), so
    /// a gated exec parses once for both its effects and its evaluation.
    /// Resets the per-exec state (interrupter, memory budget, warnings).
    pub fn prepare_exec(&mut self, src: &str, position: Position) -> Result<Prepared, ExecError> {
        let (prog, pos, ctx) = self.prepare(src, position)?;
        Ok(Prepared {
            prog,
            pos,
            bound: ctx.bound,
        })
    }

    /// The effects a prepared exec would have (Leash).
    pub fn effects_of(&self, p: &Prepared) -> Vec<shoal_policy::Effect> {
        self.effects_in(&p.prog, &p.bound).effects
    }

    /// The effects of a prepared exec and what of them can be undone.
    pub fn derived_of(&self, p: &Prepared) -> shoal_policy::undo::Derived {
        self.effects_in(&p.prog, &p.bound)
    }

    fn effects_in(
        &self,
        prog: &crate::ast::Program,
        bound: &std::collections::HashSet<String>,
    ) -> shoal_policy::undo::Derived {
        let env = |n: &str| self.interp.env.get(n).cloned();
        let cx = crate::derive::Context {
            cwd: &self.interp.cwd,
            env: &env,
            adapters: self.interp.adapters.as_deref(),
            bound,
        };
        crate::derive::derive_full(prog, &cx)
    }

    /// Evaluate a prepared exec, as [`exec_here`](Self::exec_here) does.
    pub fn exec_prepared_here(
        &mut self,
        prepared: Prepared,
        stack_size: usize,
    ) -> Result<Value, ExecError> {
        let Prepared { prog, pos, .. } = prepared;
        let interp = &mut self.interp;
        interp.enter_thread(stack_size);
        interp.depth = 0;
        interp.fn_depth = 0;
        let result = interp.run_program(&prog, pos);
        if interp.stack_peak() > STACK_TRIM_ABOVE {
            release_stack_below_here();
        }
        drop(prog);
        self.interp.exit_requested = false;
        result.map_err(ExecError::Raised)
    }

    /// What the parser knows of this session: its top-level names.
    fn parse_context(&self) -> ParseContext {
        ParseContext {
            value_bound: self.interp.value_bound_names().into_iter().collect(),
            bound: self.interp.globals.local_names().into_iter().collect(),
        }
    }

    fn prepare(
        &mut self,
        src: &str,
        position: Position,
    ) -> Result<(crate::ast::Program, Pos, ParseContext), ExecError> {
        self.interp.interrupter.reset();
        self.interp.exit_requested = false;
        self.warnings.clear();
        if let Some(b) = self.interp.memory {
            b.reset();
        }
        let ctx = self.parse_context();
        let pos = match position {
            Position::Stmt => Pos::Stmt,
            Position::Value => Pos::Value,
        };
        if let Some(prog) = self.preset.take() {
            // Its spans are those of the source it was parsed from.
            return Ok((prog, pos, ctx));
        }
        let (prog, warnings) = parse_with_warnings(src, &ctx).map_err(ExecError::Parse)?;
        self.warnings = warnings;
        self.interp.src = Arc::from(src);
        Ok((prog, pos, ctx))
    }

    pub fn interrupter(&self) -> Interrupter {
        self.interp.interrupter.clone()
    }

    /// A copy of this session for a background task (like `cmd &` in a POSIX
    /// shell): its own interrupter and process slot, a snapshot of the
    /// top-level bindings, cwd and environment; nothing flows back.
    pub fn fork(&self) -> Session {
        let globals = self.interp.globals.clone();
        let mut interp = self.interp.fork(&globals);
        interp.sink = None;
        Session {
            interp,
            warnings: Vec::new(),
            preset: None,
        }
    }

    /// A session over `interp` (a fork of an evaluator, for a session task)
    /// whose next exec runs `prog` (already parsed: the source it is given
    /// names it only).
    pub(crate) fn from_interp(mut interp: Interp, prog: crate::ast::Program) -> Session {
        interp.sink = None;
        Session {
            interp,
            warnings: Vec::new(),
            preset: Some(prog),
        }
    }

    /// Where `cmd &`, `jobs` and task handles reach the session's tasks
    /// (the daemon sets it for each exec, with the caller's gate).
    /// Run this session's evaluations on the general paths only (`false`),
    /// as `SHOAL_NO_FAST_PATHS=1` does for the whole process.
    #[cfg(test)]
    pub(crate) fn set_fast_paths(&mut self, on: bool) {
        self.interp.fast_paths = on;
    }

    pub fn set_task_host(&mut self, host: Option<crate::eval::TaskHostRef>) {
        self.interp.task_host = host;
    }

    /// The pid (= process group) of the external program this session runs
    /// now, 0 when none: read from any thread.
    pub fn child_pid_slot(&self) -> Arc<std::sync::atomic::AtomicU32> {
        self.interp.child_pid.clone()
    }

    /// What the next evaluations may read of the environment and pass to
    /// their children (`None`: all of it; docs/rules.md §21).
    pub fn set_env_view(&mut self, view: Option<std::sync::Arc<crate::env_view::EnvView>>) {
        self.interp.env_view = view;
    }

    /// Replace the whole environment with `env` (`PWD` follows the cwd).
    pub fn replace_env(&mut self, env: Vec<(String, String)>) {
        self.interp.env = env.into_iter().collect();
        self.interp
            .env
            .insert("PWD".into(), self.interp.cwd.to_string_lossy().into_owned());
    }

    /// The spill allowance of this session's captured output.
    pub fn spill_quota(&self) -> Option<Arc<shoal_value::output::SpillQuota>> {
        self.interp.spill.clone()
    }

    pub fn cwd(&self) -> PathBuf {
        self.interp.cwd.clone()
    }

    /// Set (or with `None` remove) a session environment variable.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        match value {
            Some(v) => {
                self.interp.env.insert(name.to_string(), v.to_string());
            }
            None => {
                self.interp.env.shift_remove(name);
            }
        }
    }

    /// The session environment.
    pub fn env(&self) -> Vec<(String, String)> {
        self.interp
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Whether the session environment is exactly `env` (in order), without
    /// copying it.
    pub fn env_is(&self, env: &[(String, String)]) -> bool {
        self.interp.env.len() == env.len()
            && self
                .interp
                .env
                .iter()
                .zip(env)
                .all(|((k, v), (k2, v2))| k == k2 && v == v2)
    }

    /// The effects `src` would have if run now (Leash planning): parsed as
    /// an exec would parse it, derived without executing anything.
    pub fn derive_effects(&self, src: &str) -> Result<Vec<shoal_policy::Effect>, ParseError> {
        let ctx = self.parse_context();
        if let Some(prog) = &self.preset {
            return Ok(self.effects_in(prog, &ctx.bound).effects);
        }
        let prog = crate::parse::parse(src, &ctx)?;
        Ok(self.effects_in(&prog, &ctx.bound).effects)
    }

    /// The effects of `src` and what of them can be undone (a plan).
    pub fn derive_plan(&self, src: &str) -> Result<shoal_policy::undo::Derived, ParseError> {
        let ctx = self.parse_context();
        let prog = crate::parse::parse(src, &ctx)?;
        let mut d = self.effects_in(&prog, &ctx.bound);
        d.place = Some(self.place_for(src));
        Ok(d)
    }

    /// [`place`](Self::place) bound to the files `src` names (the programs
    /// and scripts it may run, [`crate::bound`]) as they are now. Run on a
    /// thread confined and gated as the caller (it reads only what the
    /// caller may).
    pub fn place_for(&self, src: &str) -> shoal_policy::plan::Place {
        let env = |k: &str| self.interp.env.get(k).cloned();
        let resolve = |w: &str| match self.interp.resolve_tool(w) {
            crate::shell::reef::Resolution::Ambient(p) => p,
            crate::shell::reef::Resolution::Reef { path, .. } => Some(path),
            crate::shell::reef::Resolution::Unresolved { .. } => None,
        };
        let (files, truncated) = crate::bound::named_files(src, &self.interp.cwd, &env, &resolve);
        let mut place = self.place().with_files(files);
        place.unbound |= truncated;
        place
    }

    /// Where the session is now: its cwd and a digest of its environment (an
    /// approved plan applies only where it was made).
    pub fn place(&self) -> shoal_policy::plan::Place {
        shoal_policy::plan::Place::of(
            &self.interp.cwd,
            self.interp
                .env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }

    /// Names value-bound at the top level by earlier execs (`let`/`var`).
    pub fn bound_names(&self) -> Vec<String> {
        self.interp.value_bound_names()
    }

    /// Every top-level binding name (values, functions, aliases), for
    /// completion.
    pub fn all_names(&self) -> Vec<String> {
        self.interp.globals.local_names()
    }

    /// How many top-level names are bound (it changes exactly when
    /// [`Session::all_names`] does).
    pub fn name_count(&self) -> usize {
        self.interp.globals.local_count()
    }

    /// Bind a value at the top level (e.g. REPL `it`), value-bound.
    pub fn bind(&mut self, name: &str, value: Value) {
        self.interp.globals.define(name, value, false, true);
    }

    /// Interrupt every background task of the session (session close).
    pub fn cancel_tasks(&self) {
        match self.interp.tasks.lock() {
            Ok(t) => t.cancel_all(),
            Err(p) => p.into_inner().cancel_all(),
        }
    }

    /// The `session.reef` view: `{"active_scope": string|null, "bindings":
    /// [{"tool", "version", "provider", "scope", "constrained"}]}` (no
    /// subprocess, no provider calls).
    pub fn reef_snapshot(&self) -> serde_json::Value {
        self.interp.reef_snapshot()
    }

    /// Receive the values of non-final top-level statements (docs/rules.md
    /// §1, the statement sink), e.g. to print them in a CLI. Called on the
    /// evaluation thread.
    pub fn set_sink(&mut self, sink: Option<StatementSink>) {
        self.interp.sink = sink;
    }

    /// Send every `user.*` channel event this session emits (also from its
    /// background tasks started afterwards) to `sink`.
    pub fn set_bus_sink(&mut self, sink: Option<BusSink>) {
        self.interp.bus_sink = sink;
    }

    /// Let source read the session's transcript as `out:N` (also from its
    /// background tasks started afterwards).
    pub fn set_transcript(&mut self, lookup: Option<crate::eval::TranscriptLookup>) {
        self.interp.transcript = lookup;
    }

    /// A handle that delivers events into this session's channels from any
    /// thread (events published to `user.*` by other clients).
    pub fn channel_injector(&self) -> ChannelInjector {
        ChannelInjector {
            channels: self.interp.channels.clone(),
        }
    }
}

/// Evaluation stacks to try, biggest first ([`EVAL_STACK`], then 64 MiB when
/// the system refuses to reserve that much).
const EVAL_STACKS: [usize; 2] = [EVAL_STACK, 64 << 20];

/// After an exec that used more native stack than this, the stack pages
/// below the caller's frame are returned to the system.
const STACK_TRIM_ABOVE: usize = 4 << 20;

/// Start a thread for evaluation with a large stack ([`EVAL_STACK`], or 64 MiB
/// if the system refuses that); `f` is told the stack size it runs on, for
/// [`Session::exec_here`]. The memory is only reserved: pages are committed
/// as the stack grows.
pub fn spawn_eval_thread<F, T>(name: String, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce(usize) -> T + Send + 'static,
    T: Send + 'static,
{
    // A refused spawn drops its closure, so the closure travels in a slot
    // the next attempt can take it from.
    let slot = Arc::new(std::sync::Mutex::new(Some(f)));
    let mut last = None;
    for stack in EVAL_STACKS {
        let slot2 = slot.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .stack_size(stack)
            .spawn(move || {
                let f = slot2
                    .locked()
                    .take()
                    .expect("the evaluation closure runs once");
                drop(slot2);
                f(stack)
            });
        match spawned {
            Ok(h) => return Ok(h),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("cannot start the evaluation thread")))
}

/// Give back (`MADV_DONTNEED`) the committed pages of this thread's stack
/// below the current frame, keeping a margin for the frames still to come.
fn release_stack_below_here() {
    const MARGIN: usize = 256 << 10;
    let here = {
        let x = 0u8;
        std::hint::black_box(&x) as *const u8 as usize
    };
    let mut low: *mut libc::c_void = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread; it is
    // destroyed once read. `low`/`size` are plain out-parameters.
    let ok = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return;
        }
        let r = libc::pthread_attr_getstack(&attr, &mut low, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        r == 0
    };
    let low = low as usize;
    if !ok || low == 0 || here <= low || here > low + size {
        return;
    }
    let page = 4096usize;
    let start = (low + page - 1) & !(page - 1);
    let end = here.saturating_sub(MARGIN) & !(page - 1);
    if end <= start {
        return;
    }
    // SAFETY: [start, end) lies inside this thread's own stack mapping
    // (bounds from pthread_attr_getstack, the guard excluded) and below the
    // live frames by MARGIN; no live data is there, and anonymous pages read
    // back as zero if the stack grows into them again.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

impl Drop for Session {
    /// Background tasks (and their process groups) end with the session.
    fn drop(&mut self) {
        self.cancel_tasks();
    }
}

impl From<crate::eval::Forked> for Session {
    fn from(f: crate::eval::Forked) -> Session {
        Session::from_interp(f.interp, f.prog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn session_is_send() {
        assert_send::<Session>();
    }

    /// Events from outside keep a bounded part of a session: large ones
    /// shorten their channel's ring, and a session with many channels makes
    /// no new one for them.
    #[test]
    fn injected_events_are_bounded() {
        let mut s = Session::new(SessionOptions::default());
        let inj = s.channel_injector();
        let big = Value::str("x".repeat(60_000));
        for _ in 0..100 {
            inj.inject("user.big", big.clone(), 60_000);
        }
        let n = |s: &mut Session, src: &str| match s.exec(src, Position::Value) {
            Ok(Value::Int(n)) => n,
            other => panic!("{src}: {other:?}"),
        };
        // 100 events of 60,000 bytes: the oldest the channel keeps is one of
        // the last four.
        let oldest = n(&mut s, "channel(\"user.big\").events().take(1).first().seq");
        assert!((96..=99).contains(&oldest), "{oldest}");
        for i in 0..200 {
            inj.inject(&format!("user.c{i}"), Value::Int(i), 8);
        }
        assert_eq!(n(&mut s, "channel(\"user.c1\").latest()"), 1);
        assert!(matches!(
            s.exec("channel(\"user.c150\").latest()", Position::Value),
            Ok(Value::Null)
        ));
    }
}
