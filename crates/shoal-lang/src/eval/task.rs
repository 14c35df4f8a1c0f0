//! Background tasks (`spawn`, `cmd &`, `jobs`) and channels (docs/rules.md
//! §7, §10); the timer and file streams are in `file_streams.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::session_tasks::{job_row, TaskInfo};
use crate::ast::Block;
use crate::eval::{Channels, EResult, Interp, Pos};
use crate::interrupt::Interrupter;
use crate::scope::ScopeRef;
use shoal_base::sync::Locked;
use shoal_value::{ErrorCode, Record, SResult, ShoalError, StreamVal, TaskRef, Value};

/// Stack size of background task threads.
pub(crate) const TASK_STACK: usize = 64 << 20;
/// Events retained per channel.
const CHANNEL_RING: usize = 1024;
/// Bytes of events published from outside the session that one of its
/// channels keeps (the session's own emits are counted by its memory budget).
const INJECTED_BYTES: usize = 256 << 10;
/// A session with this many channels makes no new one for an event from
/// outside (the event stays on the daemon's bus).
const INJECTED_CHANNELS: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    shoal_base::sync::Locked::locked(m)
}

struct TaskState {
    result: Mutex<Option<SResult<Value>>>,
    done: AtomicBool,
    suspended: AtomicBool,
    /// The task's running external program (process group), or 0.
    child_pid: Arc<std::sync::atomic::AtomicU32>,
    cond: Condvar,
    interrupter: Interrupter,
}

struct TaskEntry {
    id: u64,
    desc: String,
    state: Arc<TaskState>,
}

/// The task table of a session: the tasks this evaluator runs on its own
/// threads (`spawn`, `on`; `cmd &` without a task host).
#[derive(Default)]
pub struct Tasks {
    entries: Vec<TaskEntry>,
}

impl Tasks {
    /// Whether `id` is one of these tasks.
    pub(crate) fn has(&self, id: u64) -> bool {
        self.entries.iter().any(|e| e.id == id)
    }

    /// Interrupt every running task (session teardown).
    pub fn cancel_all(&self) {
        for e in &self.entries {
            e.state.interrupter.interrupt();
        }
    }
}

/// A named channel (docs/rules.md §10).
#[derive(Clone)]
pub struct Channel {
    inner: Arc<ChanInner>,
}

struct ChanInner {
    state: Mutex<ChanState>,
    cond: Condvar,
}

#[derive(Default)]
struct ChanState {
    next_seq: u64,
    ring: VecDeque<(u64, Value, Value)>,
    /// Beside `ring`: the bytes each event counts (0: the session's own).
    sizes: VecDeque<usize>,
    /// The sum of `sizes`.
    injected: usize,
}

fn channel_of(channels: &Channels, name: &str) -> Channel {
    lock(channels)
        .entry(name.to_string())
        .or_insert_with(|| Channel {
            inner: Arc::new(ChanInner {
                state: Mutex::new(ChanState::default()),
                cond: Condvar::new(),
            }),
        })
        .clone()
}

/// Append an event to a session channel and wake its waiters (no bus sink).
pub(crate) fn channel_push(channels: &Channels, name: &str, v: Value) {
    push_to(&channel_of(channels, name), v, 0);
}

/// [`channel_push`] of an event published from outside the session, `bytes`
/// long: kept within [`INJECTED_BYTES`] a channel, and into a new channel
/// only while the session has fewer than [`INJECTED_CHANNELS`].
pub(crate) fn channel_inject(channels: &Channels, name: &str, v: Value, bytes: usize) {
    let ch = {
        let map = lock(channels);
        match map.get(name) {
            Some(ch) => ch.clone(),
            None if map.len() >= INJECTED_CHANNELS => return,
            None => {
                drop(map);
                channel_of(channels, name)
            }
        }
    };
    push_to(&ch, v, bytes);
}

fn push_to(ch: &Channel, v: Value, bytes: usize) {
    let mut st = ch.inner.state.locked();
    let seq = st.next_seq;
    st.next_seq += 1;
    st.ring.push_back((seq, v, now_dt()));
    st.sizes.push_back(bytes);
    st.injected += bytes;
    while st.ring.len() > CHANNEL_RING || (st.injected > INJECTED_BYTES && st.ring.len() > 1) {
        st.ring.pop_front();
        let gone = st.sizes.pop_front().unwrap_or(0);
        st.injected -= gone;
    }
    ch.inner.cond.notify_all();
}

/// Wake the waiters on `ch` when `intr` is interrupted (they look at the
/// flag under the channel's lock, then wait on its condition).
fn wake_on_interrupt(intr: &Interrupter, ch: &Channel) -> crate::interrupt::OnInterrupt {
    let inner = ch.inner.clone();
    intr.on_interrupt(move || {
        drop(inner.state.locked());
        inner.cond.notify_all();
    })
}

pub(super) fn now_dt() -> Value {
    Value::DateTime(Arc::new(jiff::Zoned::now()))
}

/// What a task handle answers.
const TASK_METHODS: &[&str] = &[
    "await",
    "wait",
    "cancel",
    "is_done",
    "suspend",
    "resume",
    "is_suspended",
    "id",
    "state",
];

fn unknown_method(name: &str) -> crate::eval::Ctl {
    ShoalError::field_missing(format!("unknown method `.{name}` on task"))
        .with_hint("tasks have .await() .wait() .cancel() .is_done() .state .suspend() .resume()")
        .into()
}

/// A local task's state, in the session tasks' words.
fn local_state(st: &TaskState) -> &'static str {
    let done = st.done.load(Ordering::SeqCst);
    if !done && st.suspended.load(Ordering::SeqCst) {
        "suspended"
    } else if !done {
        "running"
    } else {
        match st.result.locked().as_ref() {
            Some(Ok(_)) => "completed",
            Some(Err(err)) if err.code == ErrorCode::Cancelled => "cancelled",
            _ => "failed",
        }
    }
}

impl Interp {
    /// A copy of this evaluator for a background task: own interrupter,
    /// snapshot of the visible bindings.
    pub(crate) fn fork(&self, scope: &ScopeRef) -> Interp {
        let mut c = self.child();
        c.interrupter = Interrupter::default();
        for (k, b) in scope.visible_bindings() {
            c.globals.define(&k, b.value, b.mutable, b.value_bound);
        }
        c.dir_stack = self.dir_stack.clone();
        c.oldpwd = self.oldpwd.clone();
        c.src = self.src.clone();
        c.depth = 0;
        c
    }

    pub(crate) fn start_task<F>(
        &mut self,
        desc: String,
        scope: &ScopeRef,
        body: F,
    ) -> EResult<Value>
    where
        F: FnOnce(&mut Interp) -> EResult<Value> + Send + 'static,
    {
        let mut child = self.fork(scope);
        let state = Arc::new(TaskState {
            result: Mutex::new(None),
            done: AtomicBool::new(false),
            suspended: AtomicBool::new(false),
            child_pid: child.child_pid.clone(),
            cond: Condvar::new(),
            interrupter: child.interrupter.clone(),
        });
        // One numbering with the session's tasks (`task(N)` is `task:N`).
        let id = crate::task::next_id();
        {
            let mut t = self.tasks.locked();
            t.entries.push(TaskEntry {
                id,
                desc,
                state: state.clone(),
            });
        }
        let st = state.clone();
        // Leash: the task's children stay confined like the spawner's.
        let sandbox = shoal_policy::landlock::current();
        let gate = shoal_policy::run_gate::current();
        let home = shoal_base::procs::current_home();
        let spawned = std::thread::Builder::new()
            .name(format!("shoal-task-{id}"))
            .stack_size(TASK_STACK)
            .spawn(move || {
                child.enter_thread(TASK_STACK);
                let r = match shoal_policy::run_gate::with_gate(gate, || {
                    shoal_policy::landlock::with_rules(sandbox, || {
                        shoal_base::procs::with_home(home, || body(&mut child))
                    })
                }) {
                    Ok(v) => Ok(v),
                    Err(c) => Err(child.ctl_to_err(c)),
                };
                *st.result.locked() = Some(r);
                st.done.store(true, Ordering::SeqCst);
                st.cond.notify_all();
            });
        if let Err(e) = spawned {
            *state.result.locked() =
                Some(Err(ShoalError::custom(format!("cannot start task: {e}"))));
            state.done.store(true, Ordering::SeqCst);
        }
        Ok(Value::Task(Arc::new(TaskRef { id })))
    }

    /// `spawn { body }`.
    pub(crate) fn spawn_block(&mut self, body: &Block, scope: &ScopeRef) -> EResult<Value> {
        let b = body.clone();
        let desc = self
            .src
            .get(b.span.start as usize..b.span.end as usize)
            .unwrap_or("spawn")
            .to_string();
        self.start_task(format!("spawn {desc}"), scope, move |it| {
            let g = it.globals.clone();
            it.eval_block(&b, &g, Pos::Value)
        })
    }

    fn task_state(&self, id: u64) -> Option<(Arc<TaskState>, String)> {
        self.tasks
            .locked()
            .entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| (e.state.clone(), e.desc.clone()))
    }

    /// Methods and fields of task handles (docs/rules.md §7).
    pub(crate) fn task_method(&mut self, id: u64, name: &str, _args: &[Value]) -> EResult<Value> {
        let Some((st, _)) = self.task_state(id) else {
            if let Some(r) = self.host_task_method(id, name) {
                return r;
            }
            if self.task_host.is_some() && !TASK_METHODS.contains(&name) {
                return Err(unknown_method(name));
            }
            return Err(
                ShoalError::not_found(format!("no task {id} in this session"))
                    .with_hint("`jobs` lists this session's tasks")
                    .into(),
            );
        };
        match name {
            "await" | "wait" => {
                let woken = st.clone();
                let _hook = self.interrupter.on_interrupt(move || {
                    // Under the lock: the waiter looks at the flag under it.
                    drop(woken.result.locked());
                    woken.cond.notify_all();
                });
                let mut g = st.result.locked();
                loop {
                    if let Some(r) = g.as_ref() {
                        return match r {
                            Ok(v) => Ok(v.clone()),
                            Err(e) => Err(e.clone().into()),
                        };
                    }
                    if self.interrupted() {
                        return Err(Interp::cancelled().into());
                    }
                    g = shoal_base::sync::wait_locked(&st.cond, g);
                }
            }
            "cancel" => {
                st.interrupter.interrupt();
                st.suspended.store(false, Ordering::SeqCst);
                Ok(Value::Null)
            }
            "is_done" => Ok(Value::Bool(st.done.load(Ordering::SeqCst))),
            "suspend" | "resume" => {
                let stop = name == "suspend";
                if !st.done.load(Ordering::SeqCst) {
                    let pid = st.child_pid.load(Ordering::SeqCst);
                    crate::shell::process::signal_group(
                        pid,
                        if stop { libc::SIGSTOP } else { libc::SIGCONT },
                    );
                    st.suspended.store(stop, Ordering::SeqCst);
                }
                Ok(Value::Task(Arc::new(TaskRef { id })))
            }
            "is_suspended" => Ok(Value::Bool(
                st.suspended.load(Ordering::SeqCst) && !st.done.load(Ordering::SeqCst),
            )),
            "id" => Ok(Value::Int(id as i64)),
            "state" => Ok(Value::str(local_state(&st))),
            _ => Err(unknown_method(name)),
        }
    }

    /// `jobs` (docs/rules.md §7): every task of the session (through the task host)
    /// and this evaluator's own, by number.
    pub(crate) fn jobs_table(&self) -> EResult<Value> {
        let mut rows: Vec<TaskInfo> = self.host_jobs().map_err(|e| self.lift(e))?;
        for e in &self.tasks.locked().entries {
            rows.push(TaskInfo {
                id: e.id,
                desc: e.desc.clone(),
                state: local_state(&e.state).to_string(),
                done: e.state.done.load(Ordering::SeqCst),
            });
        }
        rows.sort_by_key(|t| t.id);
        Ok(Value::Table(Arc::new(rows.iter().map(job_row).collect())))
    }

    // ----- channels --------------------------------------------------------

    fn channel(&self, name: &str) -> Channel {
        channel_of(&self.channels, name)
    }

    /// Emit `v` on channel `name`: published on the daemon's bus first for a
    /// `user.*` channel (an error if the bus refuses it: nothing is emitted).
    pub(crate) fn channel_emit(&self, name: &str, v: Value) -> SResult<()> {
        if name.starts_with("user.") {
            if let Some(sink) = &self.bus_sink {
                sink(name, &v).map_err(|m| {
                    ShoalError::new(ErrorCode::ResourceLimit, m)
                        .with_hint("emit a path or an out:N ref of a large value instead")
                })?;
            }
        }
        channel_push(&self.channels, name, v);
        Ok(())
    }

    /// Methods of `{channel: name}` records. `None`: not a channel method.
    pub(crate) fn channel_method(
        &mut self,
        name: &str,
        method: &str,
        pos: &[Value],
        named: &[(String, Value)],
    ) -> EResult<Option<Value>> {
        match method {
            "emit" => {
                let [v] = pos else {
                    return Err(ShoalError::arg_error("emit expects one payload").into());
                };
                self.channel_emit(name, v.clone())?;
                Ok(Some(Value::Null))
            }
            "latest" => {
                let ch = self.channel(name);
                let st = ch.inner.state.locked();
                Ok(Some(
                    st.ring
                        .back()
                        .map(|(_, v, _)| v.clone())
                        .unwrap_or(Value::Null),
                ))
            }
            "events" => {
                let mut since: Option<u64> = None;
                for (k, v) in named {
                    match (k.as_str(), v) {
                        ("since", Value::Int(n)) => since = Some((*n).max(-1) as u64),
                        ("since", other) => {
                            return Err(ShoalError::type_error(format!(
                                "events: since must be an int, found {}",
                                other.type_name()
                            ))
                            .into())
                        }
                        _ => {
                            return Err(ShoalError::arg_error(format!(
                                "events: unknown argument `{k}`"
                            ))
                            .into())
                        }
                    }
                }
                Ok(Some(self.events_stream(
                    name,
                    since.map(|s| s + 1).unwrap_or(0),
                    true,
                )))
            }
            "take" => {
                let mut timeout: Option<Duration> = None;
                for (k, v) in named {
                    match (k.as_str(), v) {
                        ("timeout", Value::Duration(d)) => {
                            timeout = Some(Duration::from_nanos((*d).max(0) as u64))
                        }
                        _ => {
                            return Err(ShoalError::arg_error(format!(
                                "take: unknown argument `{k}`"
                            ))
                            .into())
                        }
                    }
                }
                let ch = self.channel(name);
                let deadline = timeout.map(|t| Instant::now() + t);
                let _hook = wake_on_interrupt(&self.interrupter, &ch);
                let mut st = ch.inner.state.locked();
                let want = st.next_seq;
                loop {
                    if let Some((_, v, _)) = st.ring.iter().find(|(s, _, _)| *s >= want) {
                        return Ok(Some(v.clone()));
                    }
                    if self.interrupted() {
                        return Err(Interp::cancelled().into());
                    }
                    st = match deadline {
                        Some(d) => {
                            let now = Instant::now();
                            if now >= d {
                                return Err(ShoalError::new(
                                    ErrorCode::Timeout,
                                    format!("no event on channel `{name}` in time"),
                                )
                                .into());
                            }
                            shoal_base::sync::wait_timeout_locked(&ch.inner.cond, st, d - now)
                        }
                        None => shoal_base::sync::wait_locked(&ch.inner.cond, st),
                    };
                }
            }
            _ => Ok(None),
        }
    }

    /// An unbounded stream of `{channel, seq, ts, payload}` from `from_seq`
    /// (replaying the ring when `replay`), then live.
    fn events_stream(&self, name: &str, from_seq: u64, replay: bool) -> Value {
        let ch = self.channel(name);
        let intr = self.interrupter.clone();
        let chname = name.to_string();
        let mut next = if replay {
            from_seq
        } else {
            ch.inner.state.locked().next_seq
        };
        let iter = std::iter::from_fn(move || {
            let _hook = wake_on_interrupt(&intr, &ch);
            let mut st = ch.inner.state.locked();
            loop {
                if let Some((seq, v, ts)) = st.ring.iter().find(|(s, _, _)| *s >= next).cloned() {
                    next = seq + 1;
                    let mut r = Record::new();
                    r.insert("channel".into(), Value::str(&chname));
                    r.insert("seq".into(), Value::Int(seq as i64));
                    r.insert("ts".into(), ts);
                    r.insert("payload".into(), v);
                    return Some(Ok(Value::record(r)));
                }
                if intr.is_interrupted() {
                    return Some(Err(Interp::cancelled()));
                }
                st = shoal_base::sync::wait_locked(&ch.inner.cond, st);
            }
        });
        stream("event", false, iter)
    }

    /// `on(channel, handler)`: a background task calling `handler` for each
    /// future event's payload.
    pub(crate) fn on_channel(
        &mut self,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        if let Some((k, _)) = named.first() {
            return Err(ShoalError::arg_error(format!("on: unknown argument `{k}`")).into());
        }
        let (name, handler) = match pos.as_slice() {
            [Value::Record(r), h] if r.len() == 1 => match r.get("channel") {
                Some(Value::Str(s)) => (s.to_string(), h.clone()),
                _ => return Err(ShoalError::type_error("on expects a channel").into()),
            },
            [Value::Str(s), h] => (s.to_string(), h.clone()),
            _ => return Err(ShoalError::arg_error("on expects a channel and a handler").into()),
        };
        let scope = self.globals.clone();
        let start = self.channel(&name).inner.state.locked().next_seq;
        self.start_task(format!("on {name}"), &scope, move |it| {
            let events = it.events_stream(&name, start, true);
            let Value::Stream(s) = &events else {
                return Ok(Value::Null);
            };
            let src = s.source.locked().take();
            if let Some(src) = src {
                for ev in src {
                    let ev = ev?;
                    let payload = match &ev {
                        Value::Record(r) => r.get("payload").cloned().unwrap_or(Value::Null),
                        _ => Value::Null,
                    };
                    it.call_value(&handler, vec![payload], vec![])?;
                }
            }
            Ok(Value::Null)
        })
    }

    /// Evaluator-level stream intercept: `stream.into(channel)`.
    pub(crate) fn stream_into(&mut self, s: &StreamVal, target: &Value) -> EResult<Value> {
        let name = match target {
            Value::Record(r) if r.len() == 1 => match r.get("channel") {
                Some(Value::Str(n)) => n.to_string(),
                _ => return Err(ShoalError::type_error("into expects a channel").into()),
            },
            other => {
                return Err(ShoalError::type_error(format!(
                    "into expects a channel, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        if !s.bounded {
            return Err(ShoalError::new(
                ErrorCode::StreamUnbounded,
                "cannot drain an unbounded stream into a channel",
            )
            .with_hint("bound it first, e.g. `.take(n)`")
            .into());
        }
        let src = s.source.locked().take();
        let Some(src) = src else {
            return Err(
                ShoalError::new(ErrorCode::StreamConsumed, "stream already consumed").into(),
            );
        };
        for item in src {
            self.check_cancel()?;
            let v = item.map_err(|e| self.lift(e))?;
            self.channel_emit(&name, v)?;
        }
        Ok(Value::Null)
    }
}

pub(super) fn stream<I>(label: &str, bounded: bool, iter: I) -> Value
where
    I: Iterator<Item = SResult<Value>> + Send + 'static,
{
    Value::Stream(Arc::new(StreamVal::new(label, bounded, Box::new(iter))))
}
