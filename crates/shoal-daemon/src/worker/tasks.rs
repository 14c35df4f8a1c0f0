//! The session's background tasks as an evaluation in the worker reaches
//! them (`cmd &`, `jobs`, a task handle's methods). The daemon's supervisor
//! keeps the task table, so every call but the fork crosses the pair: the
//! fork is made and judged here (the owner's Leash verdict on it), kept
//! under a key, and the daemon's task later asks for it to be run
//! ([`super::proto::ToWorker::Task`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::pair::Pair;
use super::proto::{FromWorker, TaskAnswer, TaskAsk};
use shoal_base::sync::Locked;
use shoal_lang::eval::{Forked, TaskControl, TaskHost, TaskInfo};
use shoal_lang::{Interrupter, Session as LangSession};
use shoal_proto::wire;
use shoal_value::{ErrorCode, SResult, ShoalError, Value};

/// Forks made for tasks the daemon has yet to run, by key.
#[derive(Default)]
pub(super) struct Forks {
    next: AtomicU64,
    kept: Mutex<HashMap<u64, LangSession>>,
}

impl Forks {
    pub(super) fn keep(&self, lang: LangSession) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.kept.locked().insert(key, lang);
        key
    }

    pub(super) fn take(&self, key: u64) -> Option<LangSession> {
        self.kept.locked().remove(&key)
    }
}

/// One hosted session's task host.
pub(super) struct WorkerTasks {
    pub(super) pair: Arc<Pair>,
    pub(super) session: String,
    pub(super) forks: Arc<Forks>,
    /// The session owner's gate: every task it starts is judged by it.
    pub(super) gate: Arc<shoal_policy::Gate>,
}

impl WorkerTasks {
    fn ask(&self, ask: TaskAsk, intr: Option<&Interrupter>) -> SResult<TaskAnswer> {
        let q = FromWorker::Tasks {
            session: self.session.clone(),
            ask,
        };
        let body = serde_json::to_value(q).map_err(|e| ShoalError::custom(e.to_string()))?;
        let r = match intr {
            Some(i) => self.pair.request_until(body, i),
            None => self.pair.request(body),
        };
        let j = r.map_err(|m| match intr {
            Some(i) if i.is_interrupted() => {
                ShoalError::new(ErrorCode::Cancelled, "evaluation interrupted")
            }
            _ => ShoalError::custom(format!("the session's tasks are out of reach: {m}")),
        })?;
        match serde_json::from_value(j) {
            Ok(TaskAnswer::Raised(e)) => Err(match &wire::decode(&e) {
                Some(Value::Error(e)) => ShoalError::clone(e),
                _ => ShoalError::custom("the session's tasks raised an error that does not cross"),
            }),
            Ok(a) => Ok(a),
            Err(e) => Err(ShoalError::custom(format!(
                "the session's tasks answered out of step: {e}"
            ))),
        }
    }

    fn infos(&self, id: Option<u64>) -> SResult<Vec<TaskInfo>> {
        match self.ask(TaskAsk::List { id }, None)? {
            TaskAnswer::Tasks(t) => Ok(t),
            a => Err(ShoalError::custom(format!(
                "a task list that is not one: {a:?}"
            ))),
        }
    }
}

impl TaskHost for WorkerTasks {
    fn start(&self, src: &str, fork: Forked) -> SResult<u64> {
        let lang = LangSession::from(fork);
        // Refused before any task exists, as the daemon refuses its own.
        crate::eval::check_gate(&self.gate, &lang, src)
            .map_err(|e| crate::eval::lang_error(crate::peer::session_error(e)))?;
        let fork = self.forks.keep(lang);
        let r = self.ask(
            TaskAsk::Start {
                src: src.to_string(),
                fork,
            },
            None,
        );
        let id = r.and_then(|a| match a {
            TaskAnswer::Task(id) => Ok(id),
            a => Err(ShoalError::custom(format!("not a task: {a:?}"))),
        });
        if id.is_err() {
            self.forks.take(fork);
        }
        id
    }

    fn list(&self) -> SResult<Vec<TaskInfo>> {
        self.infos(None)
    }

    fn info(&self, id: u64) -> SResult<Option<TaskInfo>> {
        Ok(self.infos(Some(id))?.into_iter().next())
    }

    fn wait(&self, id: u64, intr: &Interrupter) -> SResult<Value> {
        match self.ask(TaskAsk::Wait { id }, Some(intr))? {
            TaskAnswer::Value(v) => wire::decode(&v),
            _ => None,
        }
        .ok_or_else(|| ShoalError::custom(format!("task:{id} ended with no value that crosses")))
    }

    fn control(&self, id: u64, control: TaskControl) -> SResult<()> {
        self.ask(TaskAsk::Control { id, control }, None).map(|_| ())
    }
}

/// The daemon's answer to an ended task's wait: its value, or what it raised.
pub fn ended(r: SResult<Value>) -> TaskAnswer {
    match r {
        Ok(v) => TaskAnswer::Value(wire::encode(&v)),
        Err(e) => TaskAnswer::raised(&e),
    }
}
