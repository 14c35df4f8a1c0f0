//! A background task as the kernel protocol shows it (docs/protocol.md §4):
//! the record `task.get`, `task.list` and `daemon.status` answer, and the
//! `task:N` read of `value.get`/`shoal_get`.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use shoal_lang::task::{self, TaskRecord};

fn object_or_null(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": ["object", "null"]})
}

fn tagged_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "tagged wire value, elided under the budget"})
}

/// A task's record: what `task.get` answers. `pid` is `null` when no
/// process runs it; `tail` (the last bytes of its output) is there only
/// while it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskRow {
    pub task: String,
    pub session: String,
    pub state: Cow<'static, str>,
    pub src: String,
    pub started_ns: i64,
    pub finished_ns: Option<i64>,
    pub elapsed_ms: u64,
    /// `out:N` of its value once it ended with one.
    pub result_ref: Option<String>,
    /// The error it ended with (`{code, message, ...}`), else `null`.
    #[schemars(schema_with = "object_or_null")]
    pub error: Option<Json>,
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<TaskTail>,
}

/// The last bytes a running task's programs wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskTail {
    pub stdout: String,
    pub stderr: String,
}

impl TaskRow {
    pub fn of(r: &TaskRecord) -> Self {
        TaskRow {
            task: task::ref_name(r.id),
            session: r.session.clone(),
            state: Cow::Borrowed(r.state.as_str()),
            src: r.src.clone(),
            started_ns: r.started_ns,
            finished_ns: r.finished_ns,
            elapsed_ms: r.elapsed_ms(),
            result_ref: r.result_ref.map(|n| format!("out:{n}")),
            error: r.error.clone(),
            pid: (r.pid != 0).then_some(r.pid),
            tail: r.tail.as_ref().filter(|_| !r.state.is_final()).map(|t| {
                let (stdout, stderr) = t.snapshot();
                TaskTail { stdout, stderr }
            }),
        }
    }

    /// Whether the task has ended.
    pub fn is_final(&self) -> bool {
        matches!(self.state.as_ref(), "completed" | "failed" | "cancelled")
    }
}

/// What a `task.*` method answers: a record, the records (`task.list`), or
/// `task.cancel`'s `{task, cancel_requested, state}`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum TaskResult {
    Record(Box<TaskRow>),
    List(Vec<TaskRow>),
    Cancel(CancelResult),
}

/// `task.cancel` and `shoal_cancel`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct CancelResult {
    pub task: String,
    pub cancel_requested: bool,
    pub state: String,
}

/// What `value.get` answers: a stored value's view, or a task's read.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ValueRead {
    Value(Box<super::GetResult>),
    Task(Box<TaskRead>),
}

/// A session's tasks (`shoal://jobs`).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TaskList {
    pub tasks: Vec<TaskRow>,
}

/// `value.get`/`shoal_get` of `task:N`: the record, its value once it ended
/// with one (elided), its ref and URI, and the text a model reads.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TaskRead {
    #[serde(flatten)]
    pub record: TaskRow,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "tagged_value")]
    pub value: Option<Json>,
    #[serde(rename = "ref")]
    pub reference: String,
    pub uri: String,
    pub render: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shoal_lang::task::Ending;

    #[test]
    fn a_running_record_has_a_pid_and_no_result() {
        let mut r = TaskRecord::new(3, "s", "sleep 5", 1);
        r.pid = 42;
        let mut row = TaskRow::of(&r);
        row.elapsed_ms = 0;
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            serde_json::to_string(&json!({
                "task": "task:3", "session": "s", "state": "running", "src": "sleep 5",
                "started_ns": 1, "finished_ns": null, "elapsed_ms": 0, "result_ref": null,
                "error": null, "pid": 42,
            }))
            .unwrap()
        );
        assert!(!row.is_final());
    }

    #[test]
    fn a_read_of_an_ended_task_carries_its_value_and_ref() {
        let mut r = TaskRecord::new(4, "s", "1 + 1", 1);
        r.finish(Ending::Value { n: 7, ok: true }, 2);
        let mut record = TaskRow::of(&r);
        record.elapsed_ms = 0;
        assert!(record.is_final());
        let read = TaskRead {
            record,
            value: Some(json!({"$": "int", "v": 2})),
            reference: "task:4".into(),
            uri: "shoal://task/4".into(),
            render: "task:4 completed".into(),
        };
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            serde_json::to_string(&json!({
                "task": "task:4", "session": "s", "state": "completed", "src": "1 + 1",
                "started_ns": 1, "finished_ns": 2, "elapsed_ms": 0, "result_ref": "out:7",
                "error": null, "pid": null, "value": {"$": "int", "v": 2},
                "ref": "task:4", "uri": "shoal://task/4", "render": "task:4 completed",
            }))
            .unwrap()
        );
    }

    #[test]
    fn a_cancel_and_a_list_answer_their_own_shapes() {
        let cancel = TaskResult::Cancel(CancelResult {
            task: "task:2".into(),
            cancel_requested: true,
            state: "cancelling".into(),
        });
        assert_eq!(
            serde_json::to_value(&cancel).unwrap(),
            json!({"task": "task:2", "cancel_requested": true, "state": "cancelling"})
        );
        let mut row = TaskRow::of(&TaskRecord::new(2, "s", "x", 3));
        row.elapsed_ms = 0;
        let one = json!({
            "task": "task:2", "session": "s", "state": "running", "src": "x",
            "started_ns": 3, "finished_ns": null, "elapsed_ms": 0, "result_ref": null,
            "error": null, "pid": null,
        });
        assert_eq!(
            serde_json::to_value(TaskResult::List(vec![row.clone()])).unwrap(),
            json!([one.clone()])
        );
        assert_eq!(
            serde_json::to_value(TaskList {
                tasks: vec![row.clone()]
            })
            .unwrap(),
            json!({"tasks": [one.clone()]})
        );
        let read = ValueRead::Task(Box::new(TaskRead {
            record: row,
            value: None,
            reference: "task:2".into(),
            uri: "shoal://task/2".into(),
            render: "task:2 running".into(),
        }));
        let mut want = one;
        want["ref"] = json!("task:2");
        want["uri"] = json!("shoal://task/2");
        want["render"] = json!("task:2 running");
        assert_eq!(serde_json::to_value(&read).unwrap(), want);
        let view = ValueRead::Value(Box::new(super::super::GetResult {
            render: Some("2".into()),
            ..super::super::GetResult::of("out:1".into())
        }));
        assert_eq!(
            serde_json::to_value(&view).unwrap(),
            json!({"ref": "out:1", "render": "2"})
        );
    }
}
