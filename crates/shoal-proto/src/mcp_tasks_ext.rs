//! The MCP Tasks extension of the 2026-07-28 revision
//! (`io.modelcontextprotocol/tasks`, SEP-2663) as shapes of shoal tasks.
//!
//! Task creation is server-directed: a modern `tools/call` of `shoal_exec`
//! from a client that declared the extension in its request capabilities
//! runs as a shoal task; if it has not ended after [`TASK_AFTER`], the call
//! answers with a task handle (`resultType: "task"`, the `Task` fields flat
//! in the result) and the work goes on. `tasks/get` polls (the handle and
//! every poll carry `pollIntervalMs`), and once the task is terminal its
//! answer carries the tool result (`result`) or the error (`error`).
//! `tasks/update` delivers input responses, which shoal tasks never ask
//! for; `tasks/cancel` maps onto a shoal task cancel. There is no
//! `tasks/list` or `tasks/result` in this revision. Status pushes
//! (`notifications/tasks/status`) ride `subscriptions/listen` with the
//! `taskIds` filter key. Pure mapping; the actors do the work.

use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::mcp::ToolResult;
use super::mcp_tasks::{self, POLL_INTERVAL_MS};
use super::rpc::RpcError;
use shoal_lang::task::{self, TaskRecord};

/// The extension's identifier (capabilities `extensions` key).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// How long a modern `shoal_exec` runs inline before the call answers with a
/// task handle instead (the work continues as a shoal task).
pub const TASK_AFTER: Duration = Duration::from_secs(1);
/// Whether `src` may change the session's own state: bindings (`let`, `var`,
/// `fn`, `alias`, `use`, assignments, `env.X = ...`) or the directory (`cd` and
/// its kin). A server-directed task runs on a fork whose state never flows
/// back, so such a source runs in the foreground as a plain call instead.
/// Conservative: anything unparsable, and any `cd`-like word anywhere, counts.
pub fn may_change_session(src: &str) -> bool {
    let Ok(prog) = shoal_lang::parse::parse(src, &Default::default()) else {
        return true;
    };
    let Ok(tree) = serde_json::to_value(&prog) else {
        return true;
    };
    const BINDS: [&str; 5] = ["Let", "Assign", "Fn", "Alias", "Use"];
    const DIR: [&str; 6] = ["cd", "pushd", "popd", "j", "jump", "source"];
    let mut stack = vec![&tree];
    while let Some(v) = stack.pop() {
        match v {
            Json::Object(m) => {
                if m.keys().any(|k| BINDS.contains(&k.as_str())) {
                    return true;
                }
                stack.extend(m.values());
            }
            Json::Array(a) => stack.extend(a),
            Json::String(s) if DIR.contains(&s.as_str()) => return true,
            _ => {}
        }
    }
    false
}

/// Task ids one `subscriptions/listen` may watch.
pub const MAX_LISTEN_TASKS: usize = 64;

/// The server's settings for the extension in `capabilities.extensions`.
pub fn capability() -> Json {
    json!({})
}

/// The extension's `Task` fields (no `resultType`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtTask {
    pub task_id: String,
    pub status: &'static str,
    pub created_at: String,
    pub last_updated_at: String,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
}

/// The extension's `Task` fields of a record.
pub fn task_fields(r: &TaskRecord) -> ExtTask {
    let legacy = mcp_tasks::task_object(r);
    ExtTask {
        task_id: legacy.task_id,
        status: status(r),
        created_at: legacy.created_at,
        last_updated_at: legacy.last_updated_at,
        ttl_ms: r.retain.as_millis() as u64,
        poll_interval_ms: POLL_INTERVAL_MS,
        status_message: legacy.status_message,
    }
}

/// The extension's status of a shoal task. A program that raised ended its
/// call with a tool error, an `isError` result like the one the same call
/// answers inline, so its task is `completed`; `failed` is kept for what
/// would have been a JSON-RPC error (SEP-2663), here an internal one (the
/// task's evaluation died).
pub fn status(r: &TaskRecord) -> &'static str {
    match mcp_tasks::status(r) {
        "failed" if !is_internal(r.error.as_ref()) => "completed",
        s => s,
    }
}

/// Whether a task's error is an internal one (a JSON-RPC error, not a tool
/// error).
pub fn is_internal(error: Option<&Json>) -> bool {
    error.is_none_or(|e| e["code"] == json!(super::rpc::INTERNAL_ERROR))
}

/// The task handle a `tools/call` answers with (`CreateTaskResult`): the
/// task's fields flat, `resultType: "task"` and the related task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Created {
    #[serde(flatten)]
    pub task: ExtTask,
    #[serde(rename = "resultType")]
    pub result_type: &'static str,
    #[serde(rename = "_meta")]
    pub meta: mcp_tasks::RelatedMeta,
}

/// The task handle of `r`.
pub fn created(r: &TaskRecord) -> Created {
    Created {
        task: task_fields(r),
        result_type: "task",
        meta: mcp_tasks::related_meta(r.id),
    }
}

/// What a terminal task ended with, for a `tasks/get` answer.
pub enum Outcome {
    /// Still running (or cancelled: nothing to report).
    None,
    /// The `CallToolResult` of the call.
    Result(Box<ToolResult>),
    /// The JSON-RPC error of the call.
    Error(RpcError),
}

/// The `tasks/get` (and `tasks/cancel`) answer: the task, with its outcome
/// once terminal (`result` or `error`).
#[derive(Clone, Debug, Serialize)]
pub struct TaskGot {
    #[serde(flatten)]
    pub task: ExtTask,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<ToolResult>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

/// The `tasks/get` (and `tasks/cancel`) answer of `r`.
pub fn get_result(r: &TaskRecord, outcome: Outcome) -> TaskGot {
    let (result, error) = match outcome {
        Outcome::None => (None, None),
        Outcome::Result(x) => (Some(x), None),
        Outcome::Error(e) => (None, Some(e)),
    };
    TaskGot {
        task: task_fields(r),
        result,
        error,
    }
}

/// The params of a `notifications/tasks/status` push on a listen stream:
/// the task's fields and the subscription they answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusParams {
    #[serde(flatten)]
    pub task: ExtTask,
    #[serde(rename = "_meta")]
    pub meta: SubscriptionMeta,
}

/// `_meta` naming the listen stream a notification belongs to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubscriptionMeta {
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    pub subscription: Json,
}

/// The params of a `notifications/tasks/status` push of `r`.
pub fn status_params(r: &TaskRecord, subscription: &Json) -> StatusParams {
    StatusParams {
        task: task_fields(r),
        meta: SubscriptionMeta {
            subscription: subscription.clone(),
        },
    }
}

/// The `taskIds` a `subscriptions/listen` filter asks for, as shoal task
/// numbers; ids that name no shoal task are not honored (left out).
pub fn listen_task_ids(params: &Json) -> Result<Vec<u64>, RpcError> {
    let Some(ids) = crate::mcp::listen_params(params)?.notifications.task_ids else {
        return Ok(Vec::new());
    };
    if ids.len() > MAX_LISTEN_TASKS {
        return Err(RpcError::invalid_params(format!(
            "taskIds lists {} tasks; at most {MAX_LISTEN_TASKS} per listen",
            ids.len()
        )));
    }
    let mut out = Vec::new();
    for s in &ids {
        if let Some(n) = task::parse_ref(s) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_lang::task::Ending;

    #[test]
    fn state_changing_sources_stay_in_the_foreground() {
        for src in [
            "let x = 1",
            "var y = 2",
            "fn f() { 1 }",
            "alias l = ls -la",
            "cd /tmp",
            "for i in [1, 2] { cd /tmp }",
            "env.FOO = \"1\"",
            "if true { let z = 3 }",
            "(",
        ] {
            assert!(may_change_session(src), "{src}");
        }
        for src in [
            "6 * 7",
            "sh { sleep 2; echo done }",
            "ls",
            "range(0, 3).collect()",
        ] {
            assert!(!may_change_session(src), "{src}");
        }
    }

    #[test]
    fn handle_and_poll_shapes() {
        let mut r = TaskRecord::new(3, "s", "sleep 2", 1_750_000_000_000_000_000);
        let c = created(&r);
        let ttl = r.retain.as_millis() as u64;
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            serde_json::to_string(&json!({
                "taskId": "task:3", "status": "working",
                "createdAt": "2025-06-15T15:06:40Z", "lastUpdatedAt": "2025-06-15T15:06:40Z",
                "ttlMs": ttl, "pollIntervalMs": POLL_INTERVAL_MS,
                "resultType": "task",
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "task:3"}},
            }))
            .unwrap()
        );
        r.finish(Ending::Value { n: 1, ok: true }, 1_750_000_002_000_000_000);
        let done = crate::mcp::tool_success(crate::kernel::CancelResult {
            task: "task:3".into(),
            cancel_requested: false,
            state: "completed".into(),
        });
        let g = serde_json::to_value(get_result(&r, Outcome::Result(Box::new(done)))).unwrap();
        assert_eq!(
            g,
            json!({
                "taskId": "task:3", "status": "completed",
                "createdAt": "2025-06-15T15:06:40Z", "lastUpdatedAt": "2025-06-15T15:06:42Z",
                "ttlMs": ttl, "pollIntervalMs": POLL_INTERVAL_MS,
                "statusMessage": "value stored as out:1",
                "result": {
                    "content": [{"type": "text", "text": "{\n  \"task\": \"task:3\",\n  \"cancel_requested\": false,\n  \"state\": \"completed\"\n}"}],
                    "structuredContent": {"task": "task:3", "cancel_requested": false, "state": "completed"},
                    "isError": false,
                },
            })
        );
        let e =
            serde_json::to_value(get_result(&r, Outcome::Error(RpcError::internal("x")))).unwrap();
        assert_eq!(
            e["error"],
            json!({"code": crate::rpc::INTERNAL_ERROR, "message": "x"})
        );
        let n = serde_json::to_value(status_params(&r, &json!(7))).unwrap();
        assert_eq!(n["_meta"], json!({crate::mcp::SUBSCRIPTION_ID_KEY: 7}));
        assert_eq!(n["taskId"], "task:3");
    }

    #[test]
    fn listen_filter() {
        let p = json!({"notifications": {"taskIds": ["task:4", "task:4", "nope", "task:9"]}});
        assert_eq!(listen_task_ids(&p).unwrap(), vec![4, 9]);
        assert!(listen_task_ids(&json!({"notifications": {}}))
            .unwrap()
            .is_empty());
        let e = listen_task_ids(&json!({"notifications": {"taskIds": "task:1"}})).unwrap_err();
        assert_eq!(e.data.unwrap()["path"], "notifications.taskIds");
        let e = listen_task_ids(&json!({"notifications": {"taskIds": ["task:1", 2]}})).unwrap_err();
        assert_eq!(e.data.unwrap()["path"], "notifications.taskIds[1]");
        let many: Vec<String> = (0..=MAX_LISTEN_TASKS)
            .map(|i| format!("task:{i}"))
            .collect();
        assert!(listen_task_ids(&json!({"notifications": {"taskIds": many}})).is_err());
    }
}
