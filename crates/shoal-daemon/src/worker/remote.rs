//! The daemon's handle on its worker processes (`shoal worker`, one per
//! token principal with a session open): starting one, the requests and
//! notes the daemon sends it, and the answers to what it asks back, each
//! for the hosted session it names and never for another. The sessions'
//! side (a job's round trip, settling what comes back) is
//! `sessions/session/remote.rs`; the registry is the daemon's
//! ([`crate::journal_writer::Services`] carries it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value as Json;

use super::launch;
use super::pair::{Incoming, Pair};
use super::proto::{Answer, FromWorker, LineJob, TaskAnswer, TaskAsk, ToWorker};
use shoal_base::sync::Locked;
use shoal_lang::Interrupter;
use shoal_proto::wire;

/// The largest `out:N` a token's session reads back into its worker, in
/// wire bytes.
pub const MAX_LOOKUP: u64 = 64 << 20;

/// The daemon's running workers, by principal: each lives while a session
/// (or a running task) of its principal holds it.
#[derive(Debug, Default)]
pub struct Workers {
    running: Mutex<Vec<(String, Weak<Remote>)>>,
}

/// A token principal's worker process, as the daemon holds it.
pub struct Remote {
    pair: Arc<Pair>,
    pid: u32,
    next_job: AtomicU64,
    tracked: Arc<shoal_base::procs::Tracked>,
    /// What answers each hosted session's requests.
    hosted: Hosted,
    /// What its principal's sessions hold there, as of the last exec.
    principal_memory: AtomicU64,
    /// The tails of its running tasks, by job.
    tails: Tails,
}

type Tails = Arc<Mutex<HashMap<u64, Arc<shoal_value::output::OutputTail>>>>;

/// A hosted session's answers to its worker: `out:N`, its `user.*`
/// events, its tasks.
pub struct Answers {
    pub lookup: shoal_lang::eval::TranscriptLookup,
    pub bus: Option<crate::event_bus::BusHandle>,
    /// What an evaluation there asks of the session's tasks (the session's
    /// owner asking, whoever the worker says asks); a wait ends when the
    /// interrupter given is interrupted (the worker gave up on it).
    pub tasks: Option<TaskAnswerer>,
    /// The cgroup leaf its programs join: killed if the worker dies with
    /// the session still open (what it started goes with it).
    pub leaf: Option<shoal_base::procs::Delegation>,
}

type Hosted = Arc<Mutex<HashMap<String, Arc<Answers>>>>;

/// A worker's request being answered: its interrupter is registered under its
/// id (for the worker's abandonment) until the answer is sent, whichever way.
struct Answering {
    working: Arc<Mutex<HashMap<u64, Interrupter>>>,
    id: u64,
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.working.locked().remove(&self.id);
    }
}

/// What answers a hosted session's task asks (see [`Answers::tasks`]).
pub type TaskAnswerer = Box<dyn Fn(TaskAsk, &Interrupter) -> TaskAnswer + Send + Sync>;

impl Workers {
    /// `principal`'s running worker, else a new one (started, confined).
    pub fn for_principal(&self, principal: &str) -> Result<Arc<Remote>, String> {
        let mut running = self.running.locked();
        running.retain(|(_, w)| w.upgrade().is_some_and(|r| !r.pair.is_gone()));
        if let Some(r) = running
            .iter()
            .find(|(p, _)| p == principal)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(r);
        }
        let hosted: Hosted = Arc::default();
        let tails: Tails = Arc::default();
        // Its programs' cgroup: a name no session has (control characters
        // are refused in session names).
        let home = shoal_base::procs::Home::new(
            &format!("\u{1}worker {principal}"),
            shoal_base::procs::Owner::Worker,
        );
        let answer = answerer(hosted.clone(), tails.clone());
        let started = launch::start(principal, home, answer)?;
        let remote = Arc::new(Remote {
            pair: started.pair,
            pid: started.pid,
            next_job: AtomicU64::new(0),
            tracked: started.tracked,
            hosted,
            principal_memory: AtomicU64::new(0),
            tails,
        });
        tracing::info!(principal, pid = remote.pid, "worker process started");
        running.push((principal.to_string(), Arc::downgrade(&remote)));
        Ok(remote)
    }

    /// `remote` turned out to be gone (its pair failed before its reader
    /// saw the end): the principal's next job starts a new worker.
    pub fn forget(&self, remote: &Arc<Remote>) {
        remote.pair.close();
        self.running
            .locked()
            .retain(|(_, w)| w.upgrade().is_some_and(|r| !Arc::ptr_eq(&r, remote)));
    }

    fn of(&self, which: impl Fn(&String) -> bool) -> Vec<Arc<Remote>> {
        self.running
            .locked()
            .iter()
            .filter(|(p, _)| which(p))
            .filter_map(|(_, w)| w.upgrade())
            .collect()
    }

    /// What `principal`'s sessions hold in its worker (0: it has none).
    pub fn principal_memory(&self, principal: &str) -> u64 {
        self.of(|p| p == principal)
            .iter()
            .map(|r| r.principal_memory.load(Ordering::Relaxed))
            .sum()
    }

    /// End the workers of the principals `gone` names (their last token
    /// is gone) and everything they run, at once: their cgroups are killed
    /// (`setsid` children included) and their pairs closed.
    pub fn end(&self, gone: impl Fn(&String) -> bool) {
        for r in self.of(gone) {
            tracing::info!(
                pid = r.pid,
                "worker ended: its principal holds no valid token"
            );
            r.tracked.kill();
            r.pair.close();
        }
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("pid", &self.pid).finish()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Closing the pair interrupts what runs there and ends the worker
        // (its reaper kills what it leaves).
        self.pair.close();
    }
}

impl Remote {
    /// The worker's pid (`shoal status`, tests).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The worker is gone (killed, crashed, ended): the next job needs another.
    pub fn is_gone(&self) -> bool {
        self.pair.is_gone()
    }

    /// Host a session: what answers its requests, then its opening with
    /// its line (the socket its jobs and their answers go over, one at a
    /// time, with no thread between the two ends): the daemon's end.
    /// `key` is what the worker calls the session (`open` names it so);
    /// `session` its name, whose cgroup tree its programs join.
    pub fn host(
        &self,
        key: &str,
        session: &str,
        mut answers: Answers,
        open: &ToWorker,
    ) -> Result<Line, String> {
        use std::os::fd::AsFd;
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| format!("no line: {e}"))?;
        // Its programs go to a leaf of the session's own cgroup tree, so
        // closing the session ends them (`setsid` ones included).
        let home = shoal_base::procs::Home::new(session, shoal_base::procs::Owner::Worker);
        let leaf = shoal_base::procs::delegate(home);
        let mut fds = vec![theirs.as_fd()];
        fds.extend(leaf.as_ref().map(|l| l.procs.as_fd()));
        let body = serde_json::to_value(open).map_err(|e| e.to_string())?;
        self.pair.request_with_fds(body, &fds)?;
        // Nothing of the session runs before its first job on the line, so
        // nothing asks for it before this.
        answers.leaf = leaf;
        self.hosted
            .locked()
            .insert(key.to_string(), Arc::new(answers));
        Line::new(ours)
    }

    /// Send request `msg` and wait for its answer.
    pub fn request(&self, msg: &ToWorker) -> Result<Json, String> {
        let body = serde_json::to_value(msg).map_err(|e| e.to_string())?;
        self.pair.request(body)
    }

    /// Send note `msg` (no answer).
    pub fn note(&self, msg: &ToWorker) {
        note(&self.pair, msg);
    }

    /// What the principal's sessions hold there, from an exec's answer.
    pub fn set_principal_memory(&self, bytes: u64) {
        self.principal_memory.store(bytes, Ordering::Relaxed);
    }

    /// Keep job `job`'s output in `tail` while it runs (until
    /// [`Remote::unwatch`]).
    pub fn watch(&self, job: u64, tail: Arc<shoal_value::output::OutputTail>) {
        self.tails.locked().insert(job, tail);
    }

    pub fn unwatch(&self, job: u64) {
        self.tails.locked().remove(&job);
    }

    /// A job number (what an interrupt or a signal names).
    pub fn job(&self) -> u64 {
        self.next_job.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// `session` is gone: the worker drops its state (and interrupts what
    /// it still runs).
    pub fn release(&self, session: &str) {
        self.hosted.locked().remove(session);
        note(
            &self.pair,
            &ToWorker::Close {
                session: session.to_string(),
            },
        );
    }

    /// Deliver a `user.*` event to the session's channel readers there.
    pub fn inject(&self, session: &str, channel: &str, value: &shoal_value::Value) {
        let msg = ToWorker::Inject {
            session: session.to_string(),
            channel: channel.to_string(),
            value: wire::encode(value),
        };
        note(&self.pair, &msg);
    }

    /// Interrupt job `job` (0: none).
    pub fn interrupt(&self, job: u64) {
        if job != 0 {
            note(&self.pair, &ToWorker::Interrupt { job });
        }
    }

    /// Send `signal` to the program job `job` runs, without waiting.
    pub fn signal_note(&self, job: u64, signal: i32) {
        note(&self.pair, &ToWorker::Signal { job, signal });
    }

    /// Send `signal` to the program job `job` runs (0: only ask which):
    /// its pid (0: none runs, or the worker did not answer within a
    /// second). Blocking: never on an arbiter.
    pub fn signal(&self, job: u64, signal: i32) -> u32 {
        let body = serde_json::to_value(ToWorker::Signal { job, signal }).unwrap_or_default();
        self.pair
            .request_within(body, Duration::from_secs(1))
            .ok()
            .and_then(|j| serde_json::from_value::<super::proto::Signalled>(j).ok())
            .map_or(0, |s| s.pid)
    }
}

/// The daemon's end of a session's line.
#[derive(Debug)]
pub struct Line {
    out: std::os::unix::net::UnixStream,
    answers: std::io::BufReader<std::os::unix::net::UnixStream>,
    frame: String,
}

impl Line {
    fn new(ours: std::os::unix::net::UnixStream) -> Result<Line, String> {
        let answers = ours.try_clone().map_err(|e| format!("no line: {e}"))?;
        Ok(Line {
            out: ours,
            answers: std::io::BufReader::new(answers),
            frame: String::new(),
        })
    }

    /// Send job `msg` and wait for its answer (an error: the worker is gone,
    /// or answered out of step).
    pub fn ask(&mut self, msg: &LineJob) -> Result<Answer, String> {
        use std::io::{BufRead, Read, Write};
        let mut bytes = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        let gone = |_| super::pair::GONE.to_string();
        self.out.write_all(&bytes).map_err(gone)?;
        self.frame.clear();
        let limit = super::pair::MAX_FRAME as u64;
        match (&mut self.answers).take(limit).read_line(&mut self.frame) {
            Ok(0) => Err(super::pair::GONE.into()),
            // Cut: the line is out of step from here; the session is
            // hosted again with a new one.
            Ok(_) if !self.frame.ends_with('\n') => Err(format!(
                "an answer over {limit} bytes ({})",
                super::pair::GONE
            )),
            Ok(_) => serde_json::from_str(&self.frame).map_err(|e| format!("not an answer: {e}")),
            Err(e) => Err(gone(e)),
        }
    }
}

fn note(pair: &Pair, msg: &ToWorker) {
    if let Ok(j) = serde_json::to_value(msg) {
        pair.note(j);
    }
}

/// What answers the worker's requests, each for the session it names:
/// `out:N`, `user.*` events, tasks (as the session's owner starts them).
/// Holds no reference to a session's state itself.
fn answerer(hosted: Hosted, tails: Tails) -> impl FnMut(&Arc<Pair>, Incoming) + Send + 'static {
    let reading = Arc::new(Mutex::new(()));
    // The requests being answered, each with what stops its answer when
    // the worker gives up on it.
    let working: Arc<Mutex<HashMap<u64, Interrupter>>> = Arc::default();
    move |pair, incoming| match incoming {
        Incoming::Note(body) if body.get("op").and_then(Json::as_str) == Some("output") => {
            if let Ok(FromWorker::Output { job, stderr, data }) = serde_json::from_value(body) {
                use base64::Engine;
                let tail = tails.locked().get(&job).cloned();
                let bytes = base64::engine::general_purpose::STANDARD.decode(data);
                if let (Some(t), Ok(b)) = (tail, bytes) {
                    t.push(stderr, &b);
                }
            }
        }
        Incoming::Note(body) => match serde_json::from_value::<FromWorker>(body) {
            Ok(FromWorker::Publish {
                session,
                channel,
                value,
            }) if channel.starts_with("user.") => {
                if let Err(why) = crate::event_bus::checked_json_len(&value) {
                    tracing::warn!("a worker's event refused: {why}");
                    return;
                }
                let bus = hosted.locked().get(&session).and_then(|a| a.bus.clone());
                if let Some(bus) = bus {
                    bus.publish(&channel, value);
                }
            }
            _ => tracing::warn!("a worker note refused"),
        },
        Incoming::Abandoned { id } => {
            if let Some(stop) = working.locked().remove(&id) {
                stop.interrupt();
            }
        }
        Incoming::Request { id, body, .. } => {
            let (pair, hosted, reading) = (pair.clone(), hosted.clone(), reading.clone());
            // Registered here, on the reader: the request's abandonment is
            // read after it.
            let stop = Interrupter::default();
            working.locked().insert(id, stop.clone());
            let answering = Answering {
                working: working.clone(),
                id,
            };
            let gone = pair.clone();
            // Answers may read the journal or wait for a task: off the reader.
            let spawned = std::thread::Builder::new()
                .name("shoal-answer".into())
                .spawn(move || {
                    let _answering = answering;
                    let of = |s: &str| {
                        hosted
                            .locked()
                            .get(s)
                            .cloned()
                            .ok_or_else(|| format!("session {s} is not hosted there"))
                    };
                    let r = match serde_json::from_value::<FromWorker>(body) {
                        Ok(FromWorker::Lookup { session, n }) => {
                            // One at a time, bounded, written as it encodes: a
                            // token's lookups cannot multiply its values here.
                            let _one = reading.locked();
                            match of(&session).and_then(|a| (a.lookup)(n)) {
                                Ok(v) if wire::encoded_len(&v) as u64 > MAX_LOOKUP => Err(format!(
                                "out:{n} is {} bytes in wire form; a token's session reads back \
                                 at most {MAX_LOOKUP} (take a part of it where it was made, or \
                                 read it with shoal_get and a path)",
                                wire::encoded_len(&v)
                            )),
                                Ok(v) => return pair.answer(id, Ok(wire::Wire::new(&v))),
                                Err(e) => Err(e),
                            }
                        }
                        Ok(FromWorker::Tasks { session, ask }) => of(&session).and_then(|a| {
                            a.tasks
                                .as_ref()
                                .ok_or_else(|| "this session has no tasks".to_string())
                                .and_then(|t| {
                                    serde_json::to_value(t(ask, &stop)).map_err(|e| {
                                        format!("a task answer that does not encode: {e}")
                                    })
                                })
                        }),
                        Ok(FromWorker::Publish { .. } | FromWorker::Output { .. }) => {
                            Err("a note sent as a request".into())
                        }
                        Err(e) => Err(format!("not a worker request: {e}")),
                    };
                    pair.reply(id, r);
                });
            if let Err(e) = spawned {
                // The closure (and its registration) is dropped with the error.
                tracing::warn!("cannot answer a worker's request: {e}");
                gone.reply(id, Err(format!("the daemon cannot answer now: {e}")));
            }
        }
        Incoming::Closed => {
            // The worker is gone: the programs of the sessions it still
            // hosted (`setsid` ones included) go with it.
            for a in hosted.locked().values() {
                if let Some(l) = &a.leaf {
                    l.kill();
                }
            }
        }
    }
}
