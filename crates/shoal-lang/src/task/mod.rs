//! Background tasks as data: states, records, the per-session table with its
//! retention, and the rules that decide a task's final state (docs/protocol.md §4).
//!
//! Pure: no threads, no signals, no actors. The Task actor
//! (`actors/task.rs`) drives a record through its states; this module says
//! which transitions exist and how a record reads on the wire.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

/// Finished records are kept this long by default (`tasks.retain`).
pub const RETAIN: Duration = Duration::from_secs(3600);
/// At most this many finished records per session are kept by default
/// (`tasks.retain_max`).
pub const RETAIN_MAX: usize = 1000;

/// How long finished records stay (`[tasks]` in shoal.toml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub retain: Duration,
    pub max: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            retain: RETAIN,
            max: RETAIN_MAX,
        }
    }
}

/// `task:N` numbers are daemon-wide, from 1.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A fresh task number.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed) + 1
}

/// `"task:7"` → 7.
pub fn parse_ref(s: &str) -> Option<u64> {
    s.strip_prefix("task:")?.parse().ok().filter(|n| *n > 0)
}

pub fn ref_name(id: u64) -> String {
    format!("task:{id}")
}

/// What a model reads of a task it just started (`cmd &`, `background:
/// true`): its `task:N` and how to read it.
pub fn started_text(id: u64) -> String {
    let r = ref_name(id);
    format!(
        "{r} runs in the background (task({id}) in source)\n\
         shoal_get {{\"ref\":\"{r}\"}} reads its state, output and value; `jobs` lists every task"
    )
}

/// The event channel of a task (the bare number: `task.7`).
pub fn channel(id: u64) -> String {
    format!("task.{id}")
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Running,
    /// Cancel requested; the signal sequence is under way.
    Cancelling,
    /// Its process group is stopped (SIGSTOP).
    Suspended,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "running",
            TaskState::Cancelling => "cancelling",
            TaskState::Suspended => "suspended",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

/// How the task's evaluation ended.
#[derive(Clone, Debug)]
pub enum Ending {
    /// A value was stored as `out:n`; `ok` is false for a failed outcome.
    Value { n: u64, ok: bool },
    /// The evaluation raised (stored as `out:n` when `n` is set) or the
    /// request failed; `error` is the full JSON-RPC error object.
    Error { n: Option<u64>, error: Json },
}

/// The final state of a task (docs/protocol.md §4): a cancel that was requested and cut
/// the work short ends `cancelled`; a raised error or failed outcome otherwise ends
/// `failed`.
pub fn final_state(cancel_requested: bool, ending: &Ending) -> TaskState {
    match ending {
        Ending::Value { ok: true, .. } => TaskState::Completed,
        _ if cancel_requested => TaskState::Cancelled,
        _ => TaskState::Failed,
    }
}

/// One task's record.
#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub id: u64,
    pub session: String,
    pub state: TaskState,
    pub src: String,
    pub started_ns: i64,
    pub finished_ns: Option<i64>,
    pub started: Instant,
    pub finished: Option<Instant>,
    pub result_ref: Option<u64>,
    pub error: Option<Json>,
    /// The process group the task runs now (0: none).
    pub pid: u32,
    pub cancel_requested: bool,
    /// The last bytes its programs wrote, while it runs.
    pub tail: Option<Arc<shoal_value::output::OutputTail>>,
    /// How long the record stays once finished (`tasks.retain`; MCP `ttl`).
    pub retain: Duration,
}

impl TaskRecord {
    pub fn new(id: u64, session: &str, src: &str, now_ns: i64) -> TaskRecord {
        TaskRecord {
            id,
            session: session.to_string(),
            state: TaskState::Running,
            src: src.to_string(),
            started_ns: now_ns,
            finished_ns: None,
            started: Instant::now(),
            finished: None,
            result_ref: None,
            error: None,
            pid: 0,
            cancel_requested: false,
            tail: None,
            retain: RETAIN,
        }
    }

    pub fn elapsed_ms(&self) -> u64 {
        let end = self.finished.unwrap_or_else(Instant::now);
        end.duration_since(self.started).as_millis() as u64
    }

    /// Ask for a cancel: `running`/`suspended` become `cancelling`. `false`
    /// when the task had already ended (nothing changes).
    pub fn request_cancel(&mut self) -> bool {
        if self.state.is_final() {
            return false;
        }
        self.cancel_requested = true;
        self.state = TaskState::Cancelling;
        true
    }

    /// Record the end of the evaluation.
    pub fn finish(&mut self, ending: Ending, now_ns: i64) {
        self.state = final_state(self.cancel_requested, &ending);
        self.finished_ns = Some(now_ns);
        self.finished = Some(Instant::now());
        self.pid = 0;
        self.tail = None;
        match ending {
            Ending::Value { n, .. } => self.result_ref = Some(n),
            Ending::Error { n, error } => {
                self.result_ref = n;
                self.error = Some(error);
            }
        }
    }

    /// The final `task.N` event payload: `{state, ref}`.
    pub fn end_event(&self) -> Json {
        json!({
            "state": self.state.as_str(),
            "ref": self.result_ref.map(|n| format!("out:{n}")),
        })
    }
}

/// A session's tasks: the running ones and the finished ones still retained.
#[derive(Debug, Default)]
pub struct TaskTable<T> {
    entries: BTreeMap<u64, T>,
}

/// What the table needs to know of an entry.
pub trait Entry {
    fn record(&self) -> TaskRecord;
    /// The state and finish time alone: what counting and pruning need, read
    /// without copying the whole record (they run on every task start).
    fn progress(&self) -> (TaskState, Option<Instant>) {
        let r = self.record();
        (r.state, r.finished)
    }
}

impl<T: Entry> TaskTable<T> {
    pub fn new() -> Self {
        TaskTable {
            entries: BTreeMap::new(),
        }
    }

    pub fn insert(&mut self, id: u64, t: T) {
        self.entries.insert(id, t);
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        self.entries.get(&id)
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.values()
    }

    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.entries.remove(&id)
    }

    /// Tasks not yet in a final state.
    pub fn live(&self) -> usize {
        self.entries
            .values()
            .filter(|t| !t.progress().0.is_final())
            .count()
    }

    /// Drop finished records past `retain` or past `max` of them (oldest first).
    pub fn prune(&mut self, now: Instant, retain: Duration, max: usize) {
        // Oldest finished first (ids are not in finishing order).
        let mut finished: Vec<(u64, Instant)> = self
            .entries
            .iter()
            .filter_map(|(id, t)| t.progress().1.map(|f| (*id, f)))
            .collect();
        finished.sort_by_key(|(id, f)| (*f, *id));
        let excess = finished.len().saturating_sub(max);
        for (i, (id, f)) in finished.iter().enumerate() {
            if i < excess || now.duration_since(*f) > retain {
                self.entries.remove(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Entry for TaskRecord {
        fn record(&self) -> TaskRecord {
            self.clone()
        }
    }

    #[test]
    fn refs_and_channels() {
        assert_eq!(parse_ref("task:12"), Some(12));
        assert_eq!(parse_ref("task:0"), None);
        assert_eq!(parse_ref("out:1"), None);
        assert_eq!(channel(7), "task.7");
        let a = next_id();
        assert!(next_id() > a);
    }

    #[test]
    fn final_states() {
        let ok = Ending::Value { n: 1, ok: true };
        let bad = Ending::Value { n: 1, ok: false };
        let err = Ending::Error {
            n: None,
            error: json!({"code": -32002}),
        };
        assert_eq!(final_state(false, &ok), TaskState::Completed);
        assert_eq!(final_state(true, &ok), TaskState::Completed);
        assert_eq!(final_state(false, &bad), TaskState::Failed);
        assert_eq!(final_state(true, &bad), TaskState::Cancelled);
        assert_eq!(final_state(false, &err), TaskState::Failed);
        assert_eq!(final_state(true, &err), TaskState::Cancelled);
    }

    #[test]
    fn cancel_then_finish() {
        let mut r = TaskRecord::new(3, "s", "sleep 5", 1);
        assert!(r.request_cancel());
        assert_eq!(r.state, TaskState::Cancelling);
        r.finish(
            Ending::Error {
                n: Some(4),
                error: json!({"code": -32002, "message": "cancelled"}),
            },
            2,
        );
        assert_eq!(r.state, TaskState::Cancelled);
        assert!(!r.request_cancel());
        assert_eq!(r.result_ref, Some(4));
        assert_eq!(r.end_event()["state"], "cancelled");
    }

    #[test]
    fn retention_keeps_running_and_newest() {
        let mut t = TaskTable::new();
        for id in 1..=5 {
            let mut r = TaskRecord::new(id, "s", "x", 0);
            if id != 3 {
                r.finish(Ending::Value { n: id, ok: true }, 1);
            }
            t.insert(id, r);
        }
        t.prune(Instant::now(), RETAIN, 2);
        let ids: Vec<u64> = t.values().map(|r| r.id).collect();
        assert_eq!(ids, vec![3, 4, 5]);
        t.prune(Instant::now() + RETAIN * 2, RETAIN, 10);
        let ids: Vec<u64> = t.values().map(|r| r.id).collect();
        assert_eq!(ids, vec![3]);
        assert_eq!(t.live(), 1);
    }
}
