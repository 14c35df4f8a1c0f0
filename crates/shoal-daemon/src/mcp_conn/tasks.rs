//! MCP Tasks (2025-11-25) on an MCP connection: task-augmented `shoal_exec`,
//! `tasks/get|result|list|cancel`, `notifications/tasks/status`, the
//! `shoal_cancel` tool and the `shoal://task/N`, `shoal://task/N/out`,
//! `shoal://jobs` resources. The shapes come from `proto::mcp_tasks`; the
//! tasks themselves are the session supervisor's (reached by message).

use serde_json::{json, Value as Json};
use tokio::sync::watch;

use std::sync::Arc;

use crate::msg::CallCancel;
use crate::peer::Writer;
use crate::sessions::handle::SessionHandle;
use crate::sessions::supervisor::{StartTask, TaskAnswer, TaskOp};
use crate::sessions::task::{self, TaskControl, TaskView};
use shoal_lang::task::TaskRecord;
use shoal_lang::Position;
use shoal_proto::elide::Budget;
use shoal_proto::mcp::{McpResult, ToolResult};
use shoal_proto::rpc::{self, RpcError};
use shoal_proto::{frame, mcp, mcp_tasks, mcp_tasks_ext};

/// MCP names an unknown task with `-32602`.
fn unknown(task: &str) -> RpcError {
    RpcError::invalid_params(format!("unknown task {task:?}")).with_data(json!({"taskId": task}))
}

/// The task `params` name (`taskId`), read in one step.
fn task_id(method: &str, params: Json) -> Result<u64, RpcError> {
    let p: mcp_tasks::TaskIdParams = mcp::read_params(method, params)?;
    shoal_lang::task::parse_ref(&p.task_id).ok_or_else(|| unknown(&p.task_id))
}

async fn record(h: &SessionHandle, id: u64) -> Result<TaskRecord, RpcError> {
    match task::task_call(h, TaskOp::Records(Some(id))).await {
        Ok(TaskAnswer::Records(mut r)) if !r.is_empty() => Ok(r.remove(0)),
        Err(e) if e.code == rpc::UNKNOWN_TASK => Err(unknown(&shoal_lang::task::ref_name(id))),
        Err(e) => Err(e),
        _ => Err(RpcError::internal("unexpected answer for a task record")),
    }
}

/// Start `src` as a task of the session (no terminal): its id and view.
async fn start(
    h: &SessionHandle,
    src: String,
    position: Position,
    gate: Option<Arc<shoal_policy::Gate>>,
) -> Result<(u64, watch::Receiver<TaskView>), RpcError> {
    h.send(StartTask {
        src,
        position,
        tty: false,
        gate,
    })
    .await
    .map_err(|_| RpcError::internal("the session is gone"))?
}

/// A task-augmented `tools/call` of `shoal_exec`: the `CreateTaskResult` and
/// the view whose changes become `notifications/tasks/status`.
pub async fn create(
    h: SessionHandle,
    src: String,
    position: Position,
    gate: Option<Arc<shoal_policy::Gate>>,
) -> Result<(Json, watch::Receiver<TaskView>), RpcError> {
    let (_, view) = start(&h, src, position, gate).await?;
    let created = mcp_tasks::CreateTaskResult::of(&view.borrow().record);
    Ok((rpc::to_result(&created)?, view))
}

/// `notifications/tasks/status` whenever the MCP status of the task changes,
/// until it is terminal or the connection's writer closes.
pub async fn status_updates(tx: Writer, mut view: watch::Receiver<TaskView>) {
    let mut last = mcp_tasks::status(&view.borrow_and_update().record);
    while !mcp_tasks::is_terminal(last) {
        let open = view.changed().await.is_ok();
        let rec = view.borrow_and_update().record.clone();
        let now = mcp_tasks::status(&rec);
        if now != last {
            let f = rpc::Notification {
                jsonrpc: "2.0",
                method: "notifications/tasks/status",
                params: mcp_tasks::task_object(&rec),
            };
            if tx.send(frame::encode(&f)).await.is_err() {
                return;
            }
            last = now;
        }
        if !open {
            return;
        }
    }
}

/// `tasks/get`, `tasks/list`, `tasks/cancel`.
pub async fn method(h: SessionHandle, method: String, params: Json) -> Result<Json, RpcError> {
    match method.as_str() {
        "tasks/list" => {
            let p: mcp_tasks::TasksListParams = mcp::read_params(&method, params)?;
            let TaskAnswer::Records(all) = task::task_call(&h, TaskOp::Records(None)).await? else {
                return Err(RpcError::internal("unexpected answer to tasks/list"));
            };
            rpc::to_result(
                &mcp_tasks::list_page(&all, p.cursor.as_deref())
                    .map_err(RpcError::invalid_params)?,
            )
        }
        "tasks/get" => rpc::to_result(&mcp_tasks::task_object(
            &record(&h, task_id(&method, params)?).await?,
        )),
        "tasks/cancel" => {
            let id = task_id(&method, params)?;
            let rec = record(&h, id).await?;
            if mcp_tasks::is_terminal(mcp_tasks::status(&rec)) {
                return Err(RpcError::invalid_params(format!(
                    "task {} is already {}",
                    shoal_lang::task::ref_name(id),
                    mcp_tasks::status(&rec)
                )));
            }
            task::task_call(&h, TaskOp::Control(id, TaskControl::Cancel)).await?;
            rpc::to_result(&mcp_tasks::task_object(&record(&h, id).await?))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// `tasks/result`: wait for the end, answer the tool result tied to its task.
pub async fn result(h: SessionHandle, params: Json, budget: Budget) -> Result<McpResult, RpcError> {
    let id = task_id("tasks/result", params)?;
    record(&h, id).await?;
    let TaskAnswer::Watch(view) = task::task_call(&h, TaskOp::Watch(id)).await? else {
        return Err(RpcError::internal("unexpected answer to tasks/result"));
    };
    let seen = task::wait_final(view, None).await;
    let r = match seen.reply.as_deref() {
        Some(Ok(x)) => {
            mcp::tool_answer(crate::sessions::exec::exec_reply_result(x.clone(), &budget))
        }
        Some(Err(e)) => mcp::tool_error(&crate::peer::session_error(e.clone())),
        None => mcp::tool_error(&RpcError::internal("the task ended without a result")),
    };
    Ok(r.related(mcp_tasks::related_meta(id)).into())
}

/// The `shoal_cancel` tool: `{task, cancel_requested, state}`.
pub async fn cancel_tool(h: SessionHandle, args: shoal_proto::kernel::TaskParams) -> ToolResult {
    mcp::tool_answer(task::kernel_method(h, shoal_proto::kernel::TaskRequest::Cancel(args)).await)
}

/// `resources/read` of `shoal://task/N`, `shoal://task/N/out`, `shoal://jobs`.
pub async fn read(h: SessionHandle, uri: String, segs: Vec<String>) -> Result<Json, RpcError> {
    if segs.is_empty() {
        let TaskAnswer::List(tasks) = task::task_call(&h, TaskOp::List).await? else {
            return Err(RpcError::internal("unexpected answer for shoal://jobs"));
        };
        let jobs = rpc::to_result(&shoal_proto::kernel::TaskList { tasks })?;
        return Ok(mcp::read_result(&uri, &jobs));
    }
    let id = shoal_lang::task::parse_ref(&format!("task:{}", segs[0])).ok_or_else(|| {
        RpcError::new(rpc::UNKNOWN_TASK, "unknown task ref").with_data(json!({"uri": uri}))
    })?;
    let rec = task::task_record(&h, id).await?;
    match segs.get(1).map(String::as_str) {
        None if segs.len() == 1 => Ok(mcp::read_result(&uri, &rpc::to_result(&rec)?)),
        Some("out") if segs.len() == 2 => {
            let Some(r) = rec.result_ref else {
                return Err(RpcError::new(
                    rpc::UNKNOWN_REF,
                    format!("task:{id} has no value yet (state {:?})", rec.state),
                )
                .with_data(json!({"task": format!("task:{id}"), "state": rec.state})));
            };
            let v = crate::mcp_conn::get_value(&h, r, Default::default()).await?;
            Ok(mcp::read_result(&uri, &v))
        }
        _ => Err(RpcError::invalid_params(format!(
            "unknown task resource {uri}"
        ))),
    }
}

/// The tool result (or error) a terminal task's view holds.
fn ext_outcome(seen: &TaskView, budget: &Budget) -> mcp_tasks_ext::Outcome {
    use mcp_tasks_ext::Outcome;
    if !mcp_tasks::is_terminal(mcp_tasks::status(&seen.record)) {
        return Outcome::None;
    }
    if seen.record.cancel_requested {
        return Outcome::None;
    }
    match seen.reply.as_deref() {
        Some(Ok(x)) => Outcome::Result(Box::new(mcp::tool_answer(
            crate::sessions::exec::exec_reply_result(x.clone(), budget),
        ))),
        Some(Err(e)) => {
            // A tool error ends the task `completed` with the `isError`
            // result the inline call gives; only an internal error stays a
            // JSON-RPC error (`mcp_tasks_ext::status`).
            let e = crate::peer::session_error(e.clone());
            if e.code == shoal_proto::rpc::INTERNAL_ERROR {
                Outcome::Error(e)
            } else {
                Outcome::Result(Box::new(mcp::tool_error(&e)))
            }
        }
        None => Outcome::None,
    }
}

/// A modern `shoal_exec` from a client that declared the Tasks extension:
/// the tool result if the work ends within [`mcp_tasks_ext::TASK_AFTER`],
/// else the task handle (`resultType: "task"`) with the work going on. A
/// call cancelled before the handle is out cancels its task.
pub async fn ext_exec(
    h: SessionHandle,
    src: String,
    position: Position,
    budget: Budget,
    cancel: Arc<CallCancel>,
    gate: Option<Arc<shoal_policy::Gate>>,
) -> Result<McpResult, RpcError> {
    let (id, view) = start(&h, src, position, gate).await?;
    let seen = tokio::select! {
        seen = task::wait_final(view, Some(mcp_tasks_ext::TASK_AFTER)) => seen,
        _ = async {
            if !cancel.is_cancelled() {
                cancel.wake.notified().await;
            }
        } => {
            task::task_call(&h, TaskOp::Control(id, TaskControl::Cancel)).await?;
            return Err(RpcError::internal("the call was cancelled (its task too)"));
        }
    };
    let done = seen.record.state.is_final() && seen.reply.is_some();
    if !done {
        return rpc::to_result(&mcp_tasks_ext::created(&seen.record)).map(McpResult::Json);
    }
    let r = match ext_outcome(&seen, &budget) {
        mcp_tasks_ext::Outcome::Result(r) => *r,
        mcp_tasks_ext::Outcome::Error(e) => mcp::tool_error(&e),
        mcp_tasks_ext::Outcome::None => {
            mcp::tool_error(&RpcError::internal("the task ended without a result"))
        }
    };
    // Answered within the threshold: to the client this was a plain call,
    // so no task of it stays behind (nor a `retain_max` slot).
    task::task_call(&h, TaskOp::Forget(id)).await?;
    Ok(r.into())
}

async fn ext_view(h: &SessionHandle, id: u64) -> Result<TaskView, RpcError> {
    record(h, id).await?;
    let TaskAnswer::Watch(view) = task::task_call(h, TaskOp::Watch(id)).await? else {
        return Err(RpcError::internal("unexpected answer for a task watch"));
    };
    let v = view.borrow().clone();
    Ok(v)
}

/// `tasks/get`, `tasks/update`, `tasks/cancel` of the Tasks extension.
pub async fn ext_method(h: SessionHandle, method: String, params: Json) -> Result<Json, RpcError> {
    let id = task_id(&method, params)?;
    let budget = Budget::default();
    match method.as_str() {
        "tasks/get" => {
            let seen = ext_view(&h, id).await?;
            let outcome = ext_outcome(&seen, &budget);
            rpc::to_result(&mcp_tasks_ext::get_result(&seen.record, outcome))
        }
        "tasks/update" => {
            // Shoal tasks never enter input_required: there is nothing an
            // input response could answer.
            let rec = record(&h, id).await?;
            Err(RpcError::invalid_params(format!(
                "task {} is {}, not input_required: shoal tasks never ask for input",
                shoal_lang::task::ref_name(id),
                mcp_tasks_ext::status(&rec)
            ))
            .with_data(
                json!({"taskId": shoal_lang::task::ref_name(id), "status": mcp_tasks_ext::status(&rec)}),
            ))
        }
        "tasks/cancel" => {
            let rec = record(&h, id).await?;
            if mcp_tasks::is_terminal(mcp_tasks_ext::status(&rec)) {
                return Err(RpcError::invalid_params(format!(
                    "task {} is already {}",
                    shoal_lang::task::ref_name(id),
                    mcp_tasks_ext::status(&rec)
                ))
                .with_data(
                    json!({"taskId": shoal_lang::task::ref_name(id), "status": mcp_tasks_ext::status(&rec)}),
                ));
            }
            task::task_call(&h, TaskOp::Control(id, TaskControl::Cancel)).await?;
            let seen = ext_view(&h, id).await?;
            rpc::to_result(&mcp_tasks_ext::get_result(
                &seen.record,
                mcp_tasks_ext::Outcome::None,
            ))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// A task watch on a `subscriptions/listen` stream.
pub async fn ext_watch(h: &SessionHandle, id: u64) -> Option<watch::Receiver<TaskView>> {
    match task::task_call(h, TaskOp::Watch(id)).await {
        Ok(TaskAnswer::Watch(view)) => Some(view),
        _ => None,
    }
}

/// `notifications/tasks/status` on a listen stream (tagged with its id):
/// the current status at once, then each change until it is terminal.
pub async fn ext_status_updates(
    tx: Writer,
    mut view: watch::Receiver<TaskView>,
    subscription: Json,
) {
    let mut last: Option<&'static str> = None;
    loop {
        let rec = view.borrow_and_update().record.clone();
        let now = mcp_tasks_ext::status(&rec);
        if last != Some(now) {
            let f = rpc::Notification {
                jsonrpc: "2.0",
                method: "notifications/tasks/status",
                params: mcp_tasks_ext::status_params(&rec, &subscription),
            };
            if tx.send(frame::encode(&f)).await.is_err() {
                return;
            }
            last = Some(now);
        }
        if mcp_tasks::is_terminal(now) || view.changed().await.is_err() {
            return;
        }
    }
}
