//! `shoal worker`: the process a token principal's sessions evaluate in.
//!
//! The daemon starts it with one end of a socketpair as its stdin and sends
//! [`Init`]. Before it reads anything else, and before it starts a second
//! thread, the worker confines the whole process to the principal's rules
//! (Landlock, seccomp, `no_new_privs`, no capabilities; see
//! `shoal_policy::confine`), so its evaluation, its builtins and every
//! child it starts meet the kernel. Then it answers [`Ready`] and hosts the
//! sessions the daemon opens, each on an evaluation thread of its own that
//! owns the language session. `out:N` lookups and `user.*` events go back to
//! the daemon; the daemon keeps the transcript, the journal and the replies.
//! When the pair closes the worker interrupts what runs and exits.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use serde_json::{json, Value as Json};

use super::jobs::{Jobs, Running};
use super::pair::{Incoming, Pair};
use super::proto::{
    self, Answer, ExecJob, Failed, FromWorker, Init, LineJob, Outcome, Ready, ToWorker,
};
use super::tasks::{Forks, WorkerTasks};
use crate::eval::{self, EvalJob, LangSetup};
use crate::msg::CallCancel;
use shoal_base::sync::Locked;
use shoal_lang::{ChannelInjector, Session as LangSession, SessionOptions};
use shoal_proto::wire;

/// What a session opens with (its line aside).
struct Opening {
    cwd: std::path::PathBuf,
    env: Vec<(String, String)>,
    session_memory: u64,
    spill_bytes: u64,
    /// The `cgroup.procs` of the leaf the daemon made for its programs.
    procs: Option<Arc<OwnedFd>>,
}

/// One hosted session: what the pair's reader reaches of it (its jobs come
/// on its own line, to its evaluation thread).
struct Hosted {
    injector: Arc<Mutex<Option<ChannelInjector>>>,
    /// What its language session starts from.
    setup: LangSetup,
    /// A fork of its language session as of its last exec, which tasks
    /// start from without waiting for the session's thread.
    seed: Arc<Mutex<Option<LangSession>>>,
    tasks: Arc<WorkerTasks>,
    /// Its memory budget (a share of the principal's).
    memory: &'static shoal_lang::memory::MemBudget,
    /// The `cgroup.procs` its programs join (none without cgroups).
    procs: Option<Arc<OwnedFd>>,
}

/// What a hosted session's thread shares with the pair's reader.
struct Line<'a> {
    injector: &'a Mutex<Option<ChannelInjector>>,
    seed: &'a Mutex<Option<LangSession>>,
    tasks: &'a Arc<WorkerTasks>,
    memory: &'static shoal_lang::memory::MemBudget,
}

/// The worker's state, shared by the pair's reader and the evaluation threads.
struct Worker {
    principal: String,
    sessions: Mutex<HashMap<String, Hosted>>,
    /// The jobs running or queued, by the daemon's number.
    jobs: Jobs,
    /// Forks kept for tasks the daemon is to run.
    forks: Arc<Forks>,
    /// Interrupts that came (on the pair) before their job (on its line),
    /// newest last; a few at most.
    early: Mutex<std::collections::VecDeque<u64>>,
    /// Each caller's gate, made once.
    gates: Mutex<HashMap<String, Arc<shoal_policy::Gate>>>,
    budget: &'static shoal_lang::memory::PrincipalBudget,
    /// The user's adapters, read before the worker confined itself.
    adapters: Arc<shoal_lang::adapters::Catalog>,
}

/// Run the worker on the pair at stdin; the process's exit code.
pub fn main() -> i32 {
    let stream = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("shoal worker: no pair on stdin: {e}");
            return 2;
        }
    };
    // The pair stays this process's own: no program it starts inherits it
    // as its stdin (it could speak to the daemon as the worker).
    let detached = std::fs::File::open("/dev/null")
        .and_then(|null| rustix::stdio::dup2_stdin(&null).map_err(std::io::Error::from));
    if let Err(e) = detached {
        eprintln!("shoal worker: cannot detach stdin from the pair: {e}");
        return 2;
    }
    let init = match read_init(&stream) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("shoal worker: {e}");
            return 2;
        }
    };
    let worker = match confine(&init) {
        Ok(w) => Arc::new(w),
        Err(e) => {
            // Not confined: say why, and evaluate nothing.
            let _ = send_line(&stream, &json!({"error": e}));
            eprintln!("shoal worker: {e}");
            return 3;
        }
    };
    if send_line(
        &stream,
        &json!({"ready": Ready {
            pid: std::process::id()
        }}),
    )
    .is_err()
    {
        return 0;
    }
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    let w = worker.clone();
    let started = Pair::start(
        stream,
        "shoal-worker-pair",
        move |pair, incoming| match incoming {
            Incoming::Request { id, body, fds } => w.request(pair, id, body, fds),
            Incoming::Note(body) => w.note(body),
            // The worker answers each of the daemon's requests at once.
            Incoming::Abandoned { .. } => {}
            Incoming::Closed => {
                let _ = closed_tx.send(());
            }
        },
    );
    if let Err(e) = started {
        eprintln!("shoal worker: cannot read the pair: {e}");
        return 2;
    }
    let _ = closed_rx.recv();
    // The daemon is gone or closed the pair: interrupt what runs, and go
    // once it ended (its programs get the whole cancel sequence) or after
    // [`LAST_WAIT`].
    for r in worker.jobs.locked().values() {
        r.cancel.cancel();
    }
    worker.jobs.wait_empty(LAST_WAIT);
    0
}

/// How long a worker whose daemon went waits for its interrupted jobs
/// (the cancel sequence ends a program within 6 s).
const LAST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The first line of the pair: [`Init`].
fn read_init(stream: &UnixStream) -> Result<Init, String> {
    // One byte at a time: nothing past the first line may be buffered here.
    let mut line = Vec::new();
    let mut r = BufReader::with_capacity(1, stream);
    r.read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read the init frame: {e}"))?;
    serde_json::from_slice(&line).map_err(|e| format!("bad init frame: {e}"))
}

fn send_line(mut stream: &UnixStream, v: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v)?;
    line.push(b'\n');
    stream.write_all(&line)
}

/// `v` as a pair reply's body.
fn json_of(v: &impl serde::Serialize) -> Result<Json, String> {
    serde_json::to_value(v).map_err(|e| format!("an answer that does not encode: {e}"))
}

/// Install the daemon's policy and confine this process (its only thread
/// so far) to `init.principal`'s rules.
fn confine(init: &Init) -> Result<Worker, String> {
    let config = if init.config.is_empty() {
        crate::config::Config::default()
    } else {
        let from = std::path::Path::new("(the daemon's config)");
        crate::config::parse(&init.config, from).map_err(|e| e.to_string())?
    };
    shoal_policy::confine::protect(init.protected.clone());
    shoal_policy::install(
        &config.policy,
        config.plans.ttl.0,
        Some(init.state_dir.clone()),
    );
    shoal_lang::shell::trash::set_token_cap(config.limits.token_trash);
    if init.principal == shoal_policy::runtime().local {
        return Err("a worker evaluates for a token principal, not the local user".into());
    }
    let adapters = Arc::new(shoal_lang::adapters::Catalog::load(
        shoal_lang::adapters::user_dir().as_deref(),
    ));
    let gate = shoal_policy::Gate::for_principal(&init.principal);
    let rules = gate
        .sandbox
        .as_deref()
        .ok_or_else(|| format!("principal {} has no sandbox", init.principal))?;
    // Landlock forbids mounting, so the process that starts children in
    // the principal's namespaces (the broker) starts now, before the
    // confinement; this process keeps no unconfined thread.
    let mode = shoal_policy::runtime()
        .policy
        .get(&init.principal)
        .map_or(shoal_policy::namespaces::Mode::Auto, |p| p.namespaces);
    if mode != shoal_policy::namespaces::Mode::Off {
        match std::env::current_exe() {
            Ok(exe) => {
                shoal_policy::namespaces::init(exe, config.limits.token_tmp);
                shoal_policy::namespaces::start_broker();
                shoal_policy::namespaces::when_broker_gone(|| {
                    tracing::error!("the namespace broker is gone: this worker ends (the daemon starts a new one)");
                    std::process::exit(1);
                });
            }
            Err(e) => tracing::warn!("no namespaces for this worker's children: {e}"),
        }
    }
    shoal_policy::confine::confine_thread(&init.principal, rules)?;
    let budget = shoal_lang::memory::PrincipalBudget::leak(config.limits.principal_memory());
    let mut gates = HashMap::new();
    gates.insert(init.principal.clone(), Arc::new(gate));
    Ok(Worker {
        principal: init.principal.clone(),
        sessions: Mutex::new(HashMap::new()),
        jobs: Jobs::default(),
        forks: Arc::default(),
        early: Mutex::default(),
        gates: Mutex::new(gates),
        budget,
        adapters,
    })
}

impl Worker {
    fn gate(&self, caller: Option<&str>) -> Arc<shoal_policy::Gate> {
        let who = caller.unwrap_or(&self.principal).to_string();
        self.gates
            .locked()
            .entry(who.clone())
            .or_insert_with(|| Arc::new(shoal_policy::Gate::for_principal(&who)))
            .clone()
    }

    fn request(self: &Arc<Self>, pair: &Arc<Pair>, id: u64, body: Json, fds: Vec<OwnedFd>) {
        let msg: ToWorker = match serde_json::from_value(body) {
            Ok(m) => m,
            Err(e) => return pair.reply(id, Err(format!("not a worker request: {e}"))),
        };
        match msg {
            ToWorker::Open {
                session,
                cwd,
                env,
                session_memory,
                spill_bytes,
            } => {
                // Its line, then the cgroup leaf its programs join (none
                // without cgroups).
                let mut fds = fds.into_iter();
                let r = match fds.next() {
                    Some(line) => {
                        let o = Opening {
                            cwd,
                            env,
                            session_memory,
                            spill_bytes,
                            procs: fds.next().map(Arc::new),
                        };
                        self.open(pair, &session, o, UnixStream::from(line))
                    }
                    None => Err("a session opens with its line".into()),
                };
                pair.reply(id, r.map(|()| Json::Null));
            }
            ToWorker::Fork { session, src } => {
                let (me, pair) = (self.clone(), pair.clone());
                // Forking and judging may read files: off the pair's reader.
                std::thread::spawn(move || pair.reply(id, json_of(&me.fork(&session, &src))));
            }
            ToWorker::Task { fork, job } => self.task(pair, id, fork, job),
            ToWorker::Signal { job, signal } => {
                let pid = self.signal(job, signal);
                pair.reply(id, json_of(&proto::Signalled { pid }));
            }
            note @ (ToWorker::Interrupt { .. }
            | ToWorker::Inject { .. }
            | ToWorker::Close { .. }) => {
                self.apply_note(note);
                pair.reply(id, Ok(Json::Null));
            }
        }
    }

    fn note(&self, body: Json) {
        match serde_json::from_value(body) {
            Ok(msg) => self.apply_note(msg),
            Err(e) => tracing::warn!("not a worker note: {e}"),
        }
    }

    /// An interrupt, a `user.*` event or a session's close, sent as a
    /// note or a request.
    fn apply_note(&self, msg: ToWorker) {
        match msg {
            ToWorker::Interrupt { job } => match self.jobs.locked().get(&job) {
                Some(r) => r.cancel.cancel(),
                None => {
                    let mut early = self.early.locked();
                    if early.len() >= 16 {
                        early.pop_front();
                    }
                    early.push_back(job);
                }
            },
            ToWorker::Inject {
                session,
                channel,
                value,
            } => {
                let Some(v) = wire::decode(&value) else {
                    return;
                };
                let injector = self
                    .sessions
                    .locked()
                    .get(&session)
                    .map(|h| h.injector.clone());
                if let Some(inj) = injector.as_ref().and_then(|i| i.locked().clone()) {
                    let bytes = wire::encoded_len(&v);
                    inj.inject(&channel, v, bytes);
                }
            }
            ToWorker::Signal { job, signal } => {
                self.signal(job, signal);
            }
            ToWorker::Close { session } => {
                // Dropping the line ends the session's thread after its
                // job, which is interrupted with its tasks; what it holds
                // is no longer its principal's.
                if let Some(h) = self.sessions.locked().remove(&session) {
                    h.memory.part();
                }
                for r in self.jobs.locked().values() {
                    if r.session == session {
                        r.cancel.cancel();
                    }
                }
            }
            other => tracing::warn!("a worker note that is a request: {other:?}"),
        }
    }

    /// Start hosting `session`: its evaluation thread, idle until a job.
    fn open(
        self: &Arc<Self>,
        pair: &Arc<Pair>,
        session: &str,
        o: Opening,
        line: UnixStream,
    ) -> Result<(), String> {
        // Opened again (its line was lost): the old one goes.
        if let Some(old) = self.sessions.locked().remove(session) {
            old.memory.part();
        }
        let Opening {
            cwd,
            env,
            session_memory,
            spill_bytes,
            procs,
        } = o;
        let injector = Arc::new(Mutex::new(None));
        let memory =
            shoal_lang::memory::MemBudget::leak(session_memory).with_principal(self.budget);
        let pair_l = pair.clone();
        let name = session.to_string();
        let lookup: shoal_lang::eval::TranscriptLookup = Arc::new(move |n: u64| {
            let q = FromWorker::Lookup {
                session: name.clone(),
                n,
            };
            let v = pair_l.request(serde_json::to_value(q).map_err(|e| e.to_string())?)?;
            wire::decode(&v).ok_or_else(|| format!("out:{n} did not decode"))
        });
        let pair_b = pair.clone();
        let name = session.to_string();
        let bus: shoal_lang::BusSink = Arc::new(move |channel: &str, v: &shoal_value::Value| {
            // Refused here as the daemon would (it drops a larger one).
            if let Some(why) = crate::event_bus::oversized(wire::encoded_len(v)) {
                return Err(why);
            }
            let note = FromWorker::Publish {
                session: name.clone(),
                channel: channel.to_string(),
                value: wire::encode(v),
            };
            if let Ok(j) = serde_json::to_value(note) {
                pair_b.note(j);
            }
            Ok(())
        });
        let setup = LangSetup {
            opts: SessionOptions {
                cwd,
                env: Vec::new(),
                config: Default::default(),
                memory_limit: session_memory,
                memory: Some(memory),
                spill_limit: spill_bytes,
                adapters: Some(self.adapters.clone()),
            },
            env,
            lookup,
            bus: Some(bus),
        };
        let hosted = Hosted {
            injector,
            setup,
            seed: Arc::default(),
            memory,
            procs,
            tasks: Arc::new(WorkerTasks {
                pair: pair.clone(),
                session: session.to_string(),
                forks: self.forks.clone(),
                gate: self.gate(None),
            }),
        };
        let (me, name) = (self.clone(), session.to_string());
        let (setup, inj, seed, tasks) = (
            hosted.setup.clone(),
            hosted.injector.clone(),
            hosted.seed.clone(),
            hosted.tasks.clone(),
        );
        shoal_lang::session::spawn_eval_thread(format!("shoal-worker-{session}"), move |stack| {
            let hosted = Line {
                injector: &inj,
                seed: &seed,
                tasks: &tasks,
                memory,
            };
            me.serve(&name, setup, line, hosted, stack)
        })
        .map_err(|e| format!("cannot start the session's thread: {e}"))?;
        self.sessions.locked().insert(session.to_string(), hosted);
        Ok(())
    }

    /// A hosted session's evaluation thread: the jobs its line brings, in
    /// order, each answered on the line; it ends when the daemon closes it.
    fn serve(
        &self,
        session: &str,
        setup: LangSetup,
        line: UnixStream,
        hosted: Line<'_>,
        stack: usize,
    ) {
        let injector = hosted.injector;
        // Its spill files and trash go to the principal's private directory
        // (per thread, as on the daemon's confined threads).
        match shoal_policy::confine::private_dir(&self.principal) {
            Ok(dir) => shoal_base::spill_dir::set_thread_private_base(Some(dir)),
            Err(e) => tracing::warn!("no private directory for {}: {e}", self.principal),
        }
        let mut lang: Option<LangSession> = None;
        // The views last sent to the daemon.
        let mut sent: Option<proto::Live> = None;
        let mut jobs = match line.try_clone() {
            Ok(l) => std::io::BufReader::new(l),
            Err(e) => return tracing::error!("session {session}: no line: {e}"),
        };
        let answer = |v: &Answer| {
            if send_line(&line, v).is_err() {
                tracing::warn!("session {session}: its line is gone");
            }
        };
        let mut frame = String::new();
        loop {
            frame.clear();
            match std::io::BufRead::read_line(&mut jobs, &mut frame) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let work = match serde_json::from_str::<LineJob>(&frame) {
                Ok(w) => w,
                Err(e) => {
                    let e = Failed::Internal(format!("not a job for a session's line: {e}"));
                    answer(&Answer::of(Err(e)));
                    continue;
                }
            };
            if let LineJob::Exec(job) = &work {
                self.enter(job, None);
            }
            // The language session, made on first use and again after a
            // panic (whose half-mutated state is never resumed).
            if lang.is_none() {
                match eval::new_lang(setup.clone()) {
                    Ok(l) => {
                        *injector.locked() = Some(l.channel_injector());
                        lang = Some(l);
                    }
                    Err(m) => {
                        let e = crate::msg::SessionError::Internal(format!(
                            "session {session}: language session unavailable: {m}"
                        ));
                        if let LineJob::Exec(job) = &work {
                            self.jobs.remove(&job.job);
                        }
                        answer(&Answer::of(Err((&e).into())));
                        continue;
                    }
                }
            }
            let Some(l) = lang.as_mut() else { continue };
            let job = match work {
                LineJob::Exec(job) => job,
                LineJob::Derive { src, caller } => {
                    answer(&Answer::of(self.derive(l, &src, caller.as_deref())));
                    continue;
                }
            };
            let cancel = self.cancel_of(job.job);
            let r = self.run(l, &job, &cancel, stack, hosted.tasks);
            cancel.finish();
            self.jobs.remove(&job.job);
            let live = lang.as_ref().and_then(|l| changed_views(l, &mut sent));
            // Tasks started after this reply see this exec's bindings: the
            // seed is refreshed under the lock taken before it.
            let mut seed = hosted.seed.locked();
            let outcome = match r {
                Ok(done) => {
                    if matches!(done.ran, eval::Ran::Panicked(_)) {
                        // Never resume state a panic may have half-mutated.
                        lang = None;
                    }
                    Ok(Outcome::Done((&done).into()))
                }
                Err(e) => Err((&e).into()),
            };
            answer(&Answer {
                outcome,
                live,
                // What the session and its principal hold now, for `shoal status`.
                memory: Some(proto::Memory {
                    session: hosted.memory.resident(),
                    principal: self.budget.used(),
                }),
            });
            *seed = lang.as_ref().map(LangSession::fork);
        }
    }

    /// A plan's derivation for `caller`: its file probes pass the caller's
    /// run-time gate (even a file's existence is a read of it).
    fn derive(
        &self,
        lang: &LangSession,
        src: &str,
        caller: Option<&str>,
    ) -> Result<Outcome, Failed> {
        match eval::derive(lang, Some(&self.gate(caller)), src) {
            Ok(d) => Ok(Outcome::Derived((&d).into())),
            Err(e) => Err((&e).into()),
        }
    }

    /// Send `signal` (0: none) to the program job `job` runs: its pid (0:
    /// none runs).
    fn signal(&self, job: u64, signal: i32) -> u32 {
        let pid = self
            .jobs
            .locked()
            .get(&job)
            .and_then(|r| r.pid.as_ref())
            .map_or(0, |p| p.load(Ordering::SeqCst));
        shoal_lang::shell::process::signal_group(pid, signal);
        pid
    }

    /// Where `session`'s programs go: the cgroup leaf the daemon made for
    /// them, if any.
    fn home(&self, session: &str) -> shoal_base::procs::Home {
        use shoal_base::procs::{Home, Owner};
        let procs = self
            .sessions
            .locked()
            .get(session)
            .and_then(|h| h.procs.clone());
        match procs {
            Some(p) => Home::delegated(session, Owner::Exec, p),
            None => Home::new(session, Owner::Exec),
        }
    }

    /// Job `job` is queued (`pid`: its program's pid slot, for a task).
    fn enter(&self, job: &ExecJob, pid: Option<Arc<AtomicU32>>) {
        let r = Running {
            session: job.session.clone(),
            cancel: CallCancel::new(),
            pid,
        };
        let mut early = self.early.locked();
        if let Some(i) = early.iter().position(|j| *j == job.job) {
            early.remove(i);
            r.cancel.cancel();
        }
        drop(early);
        self.jobs.locked().insert(job.job, r);
    }

    fn cancel_of(&self, job: u64) -> Arc<CallCancel> {
        let c = self.jobs.locked().get(&job).map(|r| r.cancel.clone());
        c.unwrap_or_default()
    }

    /// A fork of `session`'s language state for a task of `src`, judged by
    /// the owner's gate and kept: its key.
    fn fork(&self, session: &str, src: &str) -> proto::Forked {
        let (seed, setup) = match self.sessions.locked().get(session) {
            Some(h) => (h.seed.clone(), h.setup.clone()),
            None => {
                return Err(Failed::Internal(format!(
                    "session {session} is not open here"
                )))
            }
        };
        let forked = seed.locked().as_ref().map(LangSession::fork);
        let lang = match forked.map_or_else(|| eval::new_lang(setup), Ok) {
            Ok(l) => l,
            Err(m) => {
                let e = crate::msg::SessionError::Internal(format!(
                    "language session unavailable: {m}"
                ));
                return Err((&e).into());
            }
        };
        if let Err(e) = crate::eval::check_gate(&self.gate(None), &lang, src) {
            return Err((&e).into());
        }
        Ok(self.forks.keep(lang))
    }

    /// Run a background task's job on fork `fork`, on a thread of its own.
    fn task(self: &Arc<Self>, pair: &Arc<Pair>, id: u64, fork: u64, job: ExecJob) {
        let hosted = self
            .sessions
            .locked()
            .get(&job.session)
            .map(|h| h.tasks.clone());
        let (Some(tasks), Some(mut lang)) = (hosted, self.forks.take(fork)) else {
            let e = format!("session {} has no fork {fork} here", job.session);
            return pair.reply(id, Err(e));
        };
        self.enter(&job, Some(lang.child_pid_slot()));
        let (me, pair_t) = (self.clone(), pair.clone());
        let number = job.job;
        let spawned =
            shoal_lang::session::spawn_eval_thread(format!("shoal-task-{number}"), move |stack| {
                // Its programs' output goes to the daemon as it comes (the
                // task's record shows its tail while it runs).
                let pair_o = pair_t.clone();
                let tail = shoal_value::output::OutputTail::forwarding(move |stderr, bytes| {
                    use base64::Engine;
                    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                    let note = FromWorker::Output {
                        job: number,
                        stderr,
                        data,
                    };
                    if let Ok(j) = serde_json::to_value(note) {
                        pair_o.note(j);
                    }
                });
                shoal_lang::shell::process::set_thread_tail(Some(tail));
                let cancel = me.cancel_of(job.job);
                let r = me.run(&mut lang, &job, &cancel, stack, &tasks);
                cancel.finish();
                me.jobs.remove(&job.job);
                let outcome = match r {
                    Ok(done) => Ok(Outcome::Done((&done).into())),
                    Err(e) => Err((&e).into()),
                };
                pair_t.reply(id, json_of(&Answer::of(outcome)));
            });
        if let Err(e) = spawned {
            self.jobs.remove(&number);
            pair.reply(id, Err(format!("cannot start the task's thread: {e}")));
        }
    }

    fn run(
        &self,
        lang: &mut LangSession,
        job: &ExecJob,
        cancel: &CallCancel,
        stack: usize,
        tasks: &Arc<WorkerTasks>,
    ) -> Result<eval::Evaluated, crate::msg::SessionError> {
        let mut gate = self.gate(job.caller.as_deref());
        if !job.approved.is_empty() {
            // An approved plan's apply: its gate lets the plan's effects through.
            let effects = job
                .approved
                .iter()
                .map(shoal_policy::Effect::from_json)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    crate::msg::SessionError::Internal("an approved effect that is not one".into())
                })?;
            gate = Arc::new(gate.applying(&effects));
        }
        // An approved plan runs only where it was made, on the files it named.
        if let Some(plan) = &job.place {
            eval::still_in_place(plan, lang, Some(&gate), &job.src)
                .map_err(crate::msg::SessionError::Rpc)?;
        }
        let prepared = eval::prepare(lang, &job.src, job.position())?;
        let spec = EvalJob {
            tty: job.tty,
            width: job.width,
            gate: Some(gate),
            check: job.check,
            cancel,
            tasks: Some(tasks.clone()),
            home: Some(self.home(&job.session)),
        };
        eval::evaluate(lang, &spec, prepared, stack)
    }
}

/// The session's views when they differ from those last `sent` (most execs
/// change none of them).
fn changed_views(lang: &LangSession, sent: &mut Option<proto::Live>) -> Option<proto::Live> {
    let same = sent.as_ref().is_some_and(|s| {
        s.cwd == lang.cwd() && lang.env_is(&s.env) && s.names.len() == lang.name_count()
    });
    if same {
        return None;
    }
    let now = proto::Live {
        cwd: lang.cwd(),
        env: lang.env(),
        names: lang.all_names(),
    };
    *sent = Some(now.clone());
    Some(now)
}
