//! Shoal tasks as MCP sees them: the 2025-11-25 Tasks shapes (the `tasks`
//! capability, `Task` objects, statuses, `tasks/list` pages). Pure mapping from [`shoal_lang::task::TaskRecord`]; one
//! place, so another protocol revision's envelope can reuse it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use shoal_lang::task::{self, TaskRecord, TaskState};

/// Suggested polling interval of `tasks/get`, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 250;
/// Tasks per `tasks/list` page.
pub const PAGE: usize = 50;
/// The `_meta` key that ties a message to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The server's `tasks` capability: list, cancel, task-augmented `tools/call`.
pub fn capability() -> Json {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// MCP status of a task. A requested cancel is final for MCP at once
/// (`cancelled`, never changed after), whatever the work's own end.
pub fn status(r: &TaskRecord) -> &'static str {
    if r.cancel_requested {
        return "cancelled";
    }
    match r.state {
        TaskState::Running | TaskState::Suspended | TaskState::Cancelling => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Cancelled => "cancelled",
    }
}

/// Whether an MCP status is terminal.
pub fn is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

fn iso(ns: i64) -> String {
    jiff::Timestamp::from_nanosecond(ns as i128)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// The MCP `Task` object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTask {
    pub task_id: String,
    pub status: &'static str,
    pub created_at: String,
    pub last_updated_at: String,
    pub ttl: u64,
    pub poll_interval: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
}

/// What a task's MCP status message says, if anything.
pub fn status_message(r: &TaskRecord) -> Option<String> {
    match (r.state, status(r)) {
        (TaskState::Suspended, _) => Some("suspended (SIGSTOP); resume with task.resume".into()),
        (TaskState::Cancelling, _) => {
            Some("cancel requested; its processes are being stopped".into())
        }
        (_, "failed") => r
            .error
            .as_ref()
            .and_then(|e| e["message"].as_str())
            .map(str::to_string),
        (_, "completed") => r.result_ref.map(|n| format!("value stored as out:{n}")),
        _ => None,
    }
}

/// The MCP `Task` object of a record.
pub fn task_object(r: &TaskRecord) -> McpTask {
    McpTask {
        task_id: task::ref_name(r.id),
        status: status(r),
        created_at: iso(r.started_ns),
        last_updated_at: iso(r.finished_ns.unwrap_or(r.started_ns)),
        ttl: r.retain.as_millis() as u64,
        poll_interval: POLL_INTERVAL_MS,
        status_message: status_message(r),
    }
}

/// `_meta` naming the task a result belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelatedMeta {
    #[serde(rename = "io.modelcontextprotocol/related-task")]
    pub related: RelatedTask,
}

/// The task of [`RelatedMeta`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelatedTask {
    #[serde(rename = "taskId")]
    pub task_id: String,
}

/// `_meta` naming the task a result belongs to.
pub fn related_meta(id: u64) -> RelatedMeta {
    RelatedMeta {
        related: RelatedTask {
            task_id: task::ref_name(id),
        },
    }
}

/// The `CreateTaskResult` of a task-augmented `tools/call`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CreateTaskResult {
    pub task: McpTask,
    #[serde(rename = "_meta")]
    pub meta: RelatedMeta,
}

impl CreateTaskResult {
    pub fn of(r: &TaskRecord) -> Self {
        CreateTaskResult {
            task: task_object(r),
            meta: related_meta(r.id),
        }
    }
}

/// A `tasks/list` page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPage {
    pub tasks: Vec<McpTask>,
    /// The last id of this page, when more follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One `tasks/list` page of `records` (ascending ids) after `cursor` (the
/// last id of the previous page). `Err` for a cursor that is not one.
pub fn list_page(records: &[TaskRecord], cursor: Option<&str>) -> Result<TaskPage, String> {
    let after = match cursor {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| format!("invalid cursor {c:?}"))?,
    };
    let mut page: Vec<&TaskRecord> = records.iter().filter(|r| r.id > after).collect();
    page.sort_by_key(|r| r.id);
    let more = page.len() > PAGE;
    page.truncate(PAGE);
    Ok(TaskPage {
        tasks: page.iter().map(|r| task_object(r)).collect(),
        next_cursor: page.last().filter(|_| more).map(|last| last.id.to_string()),
    })
}

/// `tasks/get`, `tasks/result`, `tasks/cancel` (and the Tasks extension's
/// `tasks/get|update|cancel`) params: the task named.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    pub task_id: String,
}

/// `tasks/list` params.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct TasksListParams {
    #[serde(default)]
    pub cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_lang::task::Ending;

    #[test]
    fn statuses_and_objects() {
        let mut r = TaskRecord::new(5, "s", "sleep 1", 1_750_000_000_000_000_000);
        assert_eq!(status(&r), "working");
        let t = task_object(&r);
        assert_eq!(t.task_id, "task:5");
        assert!(t.created_at.starts_with("2025-06-15"));
        assert_eq!(
            serde_json::to_value(CreateTaskResult::of(&r)).unwrap(),
            json!({
                "task": {
                    "taskId": "task:5", "status": "working",
                    "createdAt": "2025-06-15T15:06:40Z", "lastUpdatedAt": "2025-06-15T15:06:40Z",
                    "ttl": r.retain.as_millis() as u64, "pollInterval": POLL_INTERVAL_MS,
                },
                "_meta": {RELATED_TASK: {"taskId": "task:5"}},
            })
        );
        r.finish(Ending::Value { n: 2, ok: true }, 1_750_000_001_000_000_000);
        assert_eq!(task_object(&r).status, "completed");
        assert_eq!(
            serde_json::to_value(task_object(&r)).unwrap()["statusMessage"],
            "value stored as out:2"
        );
        let mut c = TaskRecord::new(6, "s", "sleep 9", 0);
        c.request_cancel();
        assert_eq!(status(&c), "cancelled");
        assert!(is_terminal(status(&c)));
    }

    #[test]
    fn pages() {
        let recs: Vec<TaskRecord> = (1..=120).map(|i| TaskRecord::new(i, "s", "x", 0)).collect();
        let p1 = list_page(&recs, None).unwrap();
        assert_eq!(p1.tasks.len(), PAGE);
        let c = p1.next_cursor.clone().unwrap();
        assert_eq!(serde_json::to_value(&p1).unwrap()["nextCursor"], "50");
        let p3 = list_page(&recs, Some("100")).unwrap();
        assert_eq!(p3.tasks.len(), 20);
        assert!(serde_json::to_value(&p3)
            .unwrap()
            .get("nextCursor")
            .is_none());
        assert_eq!(c, "50");
        assert!(list_page(&recs, Some("x")).is_err());
    }
}
