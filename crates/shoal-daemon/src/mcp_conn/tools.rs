//! `tools/call`: the tool name and arguments checked against the advertised schemas, each
//! tool turned into typed session, journal, Leash or PTY messages, and the reply folded into a
//! `CallToolResult`. Tool failures become `isError` results here; nothing in this file writes
//! to the connection. A tool that acts (all but reading values, the journal and PTYs) in a
//! session shared with the caller read-only is refused (`-32010`) before it starts.

use std::sync::Arc;

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use crate::journal_writer::{self as jw, Services};
use crate::sessions::exec::exec_elided;
use crate::sessions::session::CallCancel;
use shoal_lang::Position;
use shoal_proto::elide::Budget;
use shoal_proto::kernel;
use shoal_proto::mcp;
use shoal_proto::mcp_call;
use shoal_proto::rpc::{self, RpcError};

use super::{get_value, Answer, AnswerFut, ConnEra, McpConn, Reply};

impl McpConn {
    pub(super) fn tools_call(&mut self, params: Json, cancel: Arc<CallCancel>) -> Reply {
        let Some(p) = params.as_object() else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "tools/call params must be an object",
            ))));
        };
        let Some(name) = p.get("name").and_then(Json::as_str) else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "tools/call requires name",
            ))));
        };
        if !mcp::is_tool(self.caps(), name) {
            return unknown_tool(name);
        }
        let args = match p.get("arguments") {
            None | Some(Json::Null) => Map::new(),
            Some(Json::Object(a)) => a.clone(),
            Some(_) => {
                return Box::pin(ready(Ok(mcp::tool_error(mcp::invalid_arguments(
                    "tool arguments must be an object".into(),
                    vec![mcp::argument_error("", "arguments must be an object")],
                )))))
            }
        };
        let args = match checked_args(name, args) {
            Ok(a) => a,
            Err(r) => return r,
        };
        if super::attach::tool_acts(name) {
            let name = name.to_string();
            let what = name.clone();
            return self.acting(
                &what,
                |e| Ok(mcp::tool_error_rpc(&e)),
                move |act| act.tool_run(&name, args, params, cancel),
            );
        }
        self.tool_run(name, args, params.clone(), cancel)
    }

    /// A checked `tools/call` (`params` whole, for the task and elicitation fields).
    fn tool_run(
        &mut self,
        name: &str,
        args: Map<String, Json>,
        params: Json,
        cancel: Arc<CallCancel>,
    ) -> Reply {
        // A task-augmented call (MCP Tasks 2025): `shoal_exec` only. At
        // 2026-07-28 task creation is the server's call and `task` is ignored.
        let legacy_task = self.era != Some(ConnEra::Modern);
        if let Some(t) = params.get("task").filter(|t| legacy_task && !t.is_null()) {
            if !t.is_object() || name != "shoal_exec" {
                return Box::pin(ready(Err(RpcError::invalid_params(format!(
                    "task-augmented calls are supported by shoal_exec only (got {name:?}, task {t})"
                )))));
            }
            return self.tool_exec_task(args);
        }
        match name {
            "shoal_cancel" => Box::pin(self.session().then(move |h, act, _ctx| {
                async move {
                    match h {
                        Ok(h) => Ok(crate::mcp_conn::tasks::cancel_tool(h, args).await),
                        Err(e) => Ok(mcp::tool_error_rpc(&e)),
                    }
                }
                .into_actor(act)
            })),
            "shoal_exec" => Box::pin(
                self.tool_exec(args, cancel)
                    .map(|a, _act, _ctx| a.into_result()),
            ),
            "shoal_cap_request" => self.tool_cap_request(args, &params, cancel),
            n if shoal_proto::mcp_leash::is_leash_tool(n) => self.tool_leash(n, args, cancel),
            "shoal_get" => self.tool_get(args),
            "shoal_journal" => self.tool_journal(args),
            n if n.starts_with("shoal_pty_") => self.tool_pty(n, args),
            _ => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unknown tool {name:?}"
            ))))),
        }
    }

    /// The typed `tools/call` of `shoal_exec` (`proto::mcp_call`): what
    /// [`Self::tools_call`] does for that tool without a `task`.
    pub(super) fn exec_call(
        &mut self,
        args: Map<String, Json>,
        cancel: Arc<CallCancel>,
    ) -> AnswerFut {
        if !mcp::is_tool(self.caps(), mcp_call::EXEC_TOOL) {
            return Box::pin(unknown_tool(mcp_call::EXEC_TOOL).map(|r, _, _| Answer::Value(r)));
        }
        match checked_args(mcp_call::EXEC_TOOL, args) {
            Ok(args) => self.acting(
                mcp_call::EXEC_TOOL,
                |e| Answer::Value(Ok(mcp::tool_error_rpc(&e))),
                move |act| act.tool_exec(args, cancel),
            ),
            Err(r) => Box::pin(r.map(|r, _, _| Answer::Value(r))),
        }
    }

    /// `tools/call` of `shoal_exec` with `params.task`: a `CreateTaskResult`
    /// now, `notifications/tasks/status` as the task changes.
    pub(super) fn tool_exec_task(&mut self, args: Map<String, Json>) -> Reply {
        let (src, position) = match kernel::exec_params(&args, Position::Value) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move { crate::mcp_conn::tasks::create(h?, src, position, gate).await }
                .into_actor(act)
                .map(|r, act, ctx| {
                    let (created, view) = r?;
                    let updates = crate::mcp_conn::tasks::status_updates(act.tx.clone(), view);
                    ctx.spawn(updates.into_actor(act));
                    Ok(created)
                })
        }))
    }

    /// `shoal_exec`: a success is answered with its structured content (the
    /// reply frame folds it into the `CallToolResult`).
    pub(super) fn tool_exec(
        &mut self,
        args: Map<String, Json>,
        cancel: Arc<CallCancel>,
    ) -> AnswerFut {
        let parsed = kernel::exec_params(&args, Position::Value).and_then(|(s, p)| {
            let b = Budget::from_json(args.get("elide")).map_err(RpcError::invalid_params)?;
            Ok((s, p, b, crate::sessions::task::task_opts(&args)?))
        });
        let (src, position, budget, opts) = match parsed {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Answer::Value(Ok(mcp::tool_error_rpc(&e))))),
        };
        // Server-directed task creation only for work that leaves the session's
        // state alone (a task runs on a fork).
        let ext = self.req_tasks_ext
            && opts.is_none()
            && !shoal_proto::mcp_tasks_ext::may_change_session(&src);
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let handle = match h {
                    Ok(h) => h,
                    Err(e) => return Answer::Value(Ok(mcp::tool_error_rpc(&e))),
                };
                if ext {
                    // Server-directed task creation (Tasks extension).
                    let r = crate::mcp_conn::tasks::ext_exec(
                        handle, src, position, budget, cancel, gate,
                    );
                    return Answer::Value(Ok(r.await.unwrap_or_else(|e| mcp::tool_error_rpc(&e))));
                }
                let r = match opts {
                    Some(o) => {
                        crate::sessions::task::exec_as_task(
                            handle, src, position, false, budget, o, gate,
                        )
                        .await
                    }
                    None => {
                        exec_elided(handle, src, position, false, budget, cancel, gate, true).await
                    }
                };
                match r {
                    Ok(x) => Answer::Success(x),
                    Err(e) => Answer::Value(Ok(mcp::tool_error_rpc(&e))),
                }
            }
            .into_actor(act)
        }))
    }

    pub(super) fn tool_get(&mut self, args: Map<String, Json>) -> Reply {
        let (reference, mut req) = match kernel::get_params(&args) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error_rpc(&e)))),
        };
        // The model reads text: without `format`, the render (`json` asks for the tagged value).
        if args.get("format").is_none_or(Json::is_null) {
            req.format = kernel::GetFormat::Render;
        }
        Box::pin(self.session().then(move |h, act, _ctx| {
            async move {
                let handle = match h {
                    Ok(h) => h,
                    Err(e) => return Ok(mcp::tool_error_rpc(&e)),
                };
                Ok(match get_value(&handle, reference, req).await {
                    Ok(x) => mcp::tool_success(x),
                    Err(e) => mcp::tool_error_rpc(&e),
                })
            }
            .into_actor(act)
        }))
    }

    pub(super) fn tool_journal(&mut self, args: Map<String, Json>) -> Reply {
        let query: shoal_journal::Query = match serde_json::from_value(Json::Object(args)) {
            Ok(q) => q,
            Err(e) => {
                return Box::pin(ready(Ok(mcp::tool_error(mcp::invalid_arguments(
                    format!("invalid shoal_journal arguments: {e}"),
                    vec![mcp::argument_error("", &e.to_string())],
                )))))
            }
        };
        let Some(s) = self.services.clone() else {
            return Box::pin(ready(Err(RpcError::internal("the journal is not running"))));
        };
        let principal = match self.principal_now() {
            Ok(p) => p,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error_rpc(&e)))),
        };
        Box::pin(
            async move {
                Ok(match query_journal(&s, query, &principal).await {
                    Ok(entries) => mcp::tool_success(mcp::journal_result(entries)),
                    Err(e) => mcp::tool_error_rpc(&e),
                })
            }
            .into_actor(self),
        )
    }

    /// `shoal_plan` and `shoal_apply` (`shoal_cap_request` is `tool_cap_request`: it may ask
    /// the user first).
    pub(super) fn tool_leash(
        &mut self,
        tool: &str,
        args: Map<String, Json>,
        cancel: Arc<CallCancel>,
    ) -> Reply {
        let tool = tool.to_string();
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let r = match (h, gate) {
                    (Err(e), _) => Err(e),
                    (Ok(_), None) => Err(RpcError::internal("attached without a principal")),
                    (Ok(h), Some(gate)) => match tool.as_str() {
                        "shoal_plan" => match rpc::req_str(&args, "src") {
                            Ok(src) => crate::leash_calls::plan(h, gate, src.to_string()).await,
                            Err(e) => Err(e),
                        },
                        "shoal_apply" => {
                            match crate::leash_calls::plan_ref_param(&args).and_then(|r| {
                                Budget::from_json(args.get("elide"))
                                    .map(|b| (r, b))
                                    .map_err(RpcError::invalid_params)
                            }) {
                                Ok((r, b)) => {
                                    crate::leash_calls::apply(h, gate, r, false, b, cancel).await
                                }
                                Err(e) => Err(e),
                            }
                        }
                        other => Err(RpcError::internal(format!(
                            "{other} is not answered here (shoal_cap_request has its own path)"
                        ))),
                    },
                };
                Ok(r.map_or_else(|e| mcp::tool_error_rpc(&e), mcp::tool_success))
            }
            .into_actor(act)
        }))
    }

    /// `shoal_pty_*`: the `pty.*` request of the same name in the session.
    pub(super) fn tool_pty(&mut self, tool: &str, args: Map<String, Json>) -> Reply {
        let method = shoal_pty::api::tool_method(tool).unwrap_or("pty.list");
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            let caller = Some(act.cx.id);
            async move {
                let r = match h {
                    Ok(h) => crate::sessions::pty::call_as(&h, method, &args, gate, caller).await,
                    Err(e) => Err(e),
                };
                Ok(r.map_or_else(|e| mcp::tool_error_rpc(&e), mcp::tool_success))
            }
            .into_actor(act)
        }))
    }
}

fn unknown_tool(name: &str) -> Reply {
    Box::pin(ready(Err(RpcError::invalid_params(format!(
        "unknown tool {name:?}"
    ))
    .with_data(json!({"tool": name})))))
}

/// The arguments checked against the tool's schema; `Err` is the `isError`
/// result to answer.
fn checked_args(tool: &str, args: Map<String, Json>) -> Result<Map<String, Json>, Reply> {
    let args = Json::Object(args);
    if let Err(structured) = mcp::validate_args(tool, &args) {
        return Err(Box::pin(ready(Ok(mcp::tool_error(structured)))));
    }
    match args {
        Json::Object(a) => Ok(a),
        _ => unreachable!("built as an object above"),
    }
}

pub(super) async fn query_journal(
    s: &Services,
    query: shoal_journal::Query,
    principal: &str,
) -> Result<Vec<Json>, RpcError> {
    let scope = jw::scope_for(principal);
    let entries = s
        .journal
        .send(jw::QueryJournal { query, scope })
        .await
        .map_err(crate::msg::mailbox)?
        .map_err(|e| match e {
            shoal_journal::JournalError::Invalid(m) => RpcError::invalid_params(m),
            e => RpcError::internal(e.to_string()),
        })?;
    entries
        .into_iter()
        .map(|e| serde_json::to_value(e).map_err(|e| RpcError::internal(e.to_string())))
        .collect()
}
