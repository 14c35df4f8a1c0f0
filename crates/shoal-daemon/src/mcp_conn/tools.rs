//! `tools/call`: the tool name and arguments parsed into a typed [`Tool`] by the tool table
//! (`proto::mcp::parse_call`), each tool turned into typed session, journal, Leash or PTY messages, and the reply folded into a
//! `CallToolResult`. Tool failures become `isError` results here; nothing in this file writes
//! to the connection. A tool that acts (all but reading values, the journal and PTYs) in a
//! session shared with the caller read-only is refused (`-32010`) before it starts.

use std::sync::Arc;

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Value as Json};

use crate::journal_writer::{self as jw, Services};
use crate::sessions::exec::exec_elided;
use crate::sessions::session::CallCancel;
use shoal_proto::elide::Elide;
use shoal_proto::mcp::{
    self, ApplyArgs, CallError, ExecArgs, GetArgs, JournalArgs, McpResult, PlanArgs, Tool,
};
use shoal_proto::rpc::RpcError;

use super::{ConnEra, McpConn, ToolReply};

impl McpConn {
    /// `tools/call`: one parse step ([`mcp::parse_call`]) from the name and
    /// arguments to a [`Tool`], then dispatch on it.
    pub(super) fn tools_call(&mut self, params: Json, cancel: Arc<CallCancel>) -> ToolReply {
        let call: mcp::CallToolParams = match mcp::read_params_ref("tools/call", &params) {
            Ok(c) => c,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let tool = match mcp::parse_call(self.caps(), &call.name, call.arguments) {
            Ok(t) => t,
            Err(CallError::UnknownTool(n)) => return unknown_tool(&n),
            Err(CallError::InvalidArguments(e)) => {
                return Box::pin(ready(Ok(mcp::tool_error(&e).into())))
            }
        };
        let task = call.task;
        if tool.def().acts {
            return self.acting(
                tool.name(),
                |e| Ok(mcp::tool_error(&e).into()),
                move |act| act.tool_run(tool, task, params, cancel),
            );
        }
        self.tool_run(tool, task, params, cancel)
    }

    /// A parsed `tools/call`: its `task` augmentation, and `params` whole
    /// (the elicitation of `shoal_cap_request` reads its `_meta`).
    fn tool_run(
        &mut self,
        tool: Tool,
        task: Option<Json>,
        params: Json,
        cancel: Arc<CallCancel>,
    ) -> ToolReply {
        // A task-augmented call (MCP Tasks 2025): `shoal_exec` only. At
        // 2026-07-28 task creation is the server's call and `task` is ignored.
        let legacy_task = self.era != Some(ConnEra::Modern);
        if let Some(t) = task.filter(|_| legacy_task) {
            return match tool {
                Tool::Exec(args) if t.is_object() => self.tool_exec_task(args),
                other => Box::pin(ready(Err(RpcError::invalid_params(format!(
                    "task-augmented calls are supported by shoal_exec only (got {:?}, task {t})",
                    other.name()
                ))))),
            };
        }
        if let Some(req) = tool.pty_request() {
            return self.tool_pty(req);
        }
        match tool {
            Tool::Cancel(a) => Box::pin(self.session().then(move |h, act, _ctx| {
                async move {
                    match h {
                        Ok(h) => Ok(crate::mcp_conn::tasks::cancel_tool(h, a.into())
                            .await
                            .into()),
                        Err(e) => Ok(mcp::tool_error(&e).into()),
                    }
                }
                .into_actor(act)
            })),
            Tool::Exec(a) => self.tool_exec(a, cancel),
            Tool::CapRequest(a) => self.tool_cap_request(a, &params, cancel),
            Tool::Plan(a) => self.tool_leash(Leash::Plan(a), cancel),
            Tool::Apply(a) => self.tool_leash(Leash::Apply(a), cancel),
            Tool::Get(a) => self.tool_get(a),
            Tool::Journal(a) => self.tool_journal(a),
            Tool::PtyOpen(_)
            | Tool::PtySend(_)
            | Tool::PtyRead(_)
            | Tool::PtyResize(_)
            | Tool::PtyClose(_)
            | Tool::PtyList(_) => Box::pin(ready(Err(RpcError::internal(
                "a PTY tool is served by tool_pty",
            )))),
        }
    }

    /// `tools/call` of `shoal_exec` with `params.task`: a `CreateTaskResult`
    /// now, `notifications/tasks/status` as the task changes.
    pub(super) fn tool_exec_task(&mut self, args: ExecArgs) -> ToolReply {
        let position = args.position();
        let src = args.src;
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move { crate::mcp_conn::tasks::create(h?, src, position, gate).await }
                .into_actor(act)
                .map(|r, act, ctx| {
                    let (created, view) = r?;
                    let updates = crate::mcp_conn::tasks::status_updates(act.tx.clone(), view);
                    ctx.spawn(updates.into_actor(act));
                    Ok(McpResult::Json(created))
                })
        }))
    }

    /// `shoal_exec`.
    pub(super) fn tool_exec(&mut self, args: ExecArgs, cancel: Arc<CallCancel>) -> ToolReply {
        let position = args.position();
        let budget = Elide::budget_of(args.elide.as_ref());
        let opts = crate::sessions::task::TaskOpts::of(args.background, args.timeout_ms);
        let src = args.src;
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
                    Err(e) => return Ok(mcp::tool_error(&e).into()),
                };
                if ext {
                    // Server-directed task creation (Tasks extension).
                    let r = crate::mcp_conn::tasks::ext_exec(
                        handle, src, position, budget, cancel, gate,
                    );
                    return Ok(r.await.unwrap_or_else(|e| mcp::tool_error(&e).into()));
                }
                let r = match opts {
                    Some(o) => mcp::tool_answer(
                        crate::sessions::task::exec_as_task(
                            handle, src, position, false, budget, o, gate,
                        )
                        .await,
                    ),
                    None => mcp::tool_answer(
                        exec_elided(handle, src, position, false, budget, cancel, gate, true).await,
                    ),
                };
                Ok(r.into())
            }
            .into_actor(act)
        }))
    }

    pub(super) fn tool_get(&mut self, args: GetArgs) -> ToolReply {
        // The model reads text: without `format`, the render (`json` asks for the tagged value).
        let (reference, req) = match args.request() {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error(&e).into()))),
        };
        Box::pin(self.session().then(move |h, act, _ctx| {
            async move {
                let handle = match h {
                    Ok(h) => h,
                    Err(e) => return Ok(mcp::tool_error(&e).into()),
                };
                let read = crate::sessions::exec::get_value(&handle, reference, req, false).await;
                Ok(mcp::tool_answer(read).into())
            }
            .into_actor(act)
        }))
    }

    pub(super) fn tool_journal(&mut self, args: JournalArgs) -> ToolReply {
        let query = shoal_journal::Query::from(args);
        let Some(s) = self.services.clone() else {
            return Box::pin(ready(Err(RpcError::internal("the journal is not running"))));
        };
        let principal = match self.principal_now() {
            Ok(p) => p,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error(&e).into()))),
        };
        Box::pin(
            async move {
                let entries = query_journal(&s, query, &principal).await;
                Ok(mcp::tool_answer(entries.map(mcp::journal_result)).into())
            }
            .into_actor(self),
        )
    }

    /// `shoal_plan` and `shoal_apply` (`shoal_cap_request` is `tool_cap_request`: it may ask
    /// the user first).
    fn tool_leash(&mut self, call: Leash, cancel: Arc<CallCancel>) -> ToolReply {
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let r = match (h, gate) {
                    (Err(e), _) => mcp::tool_error(&e),
                    (Ok(_), None) => {
                        mcp::tool_error(&RpcError::internal("attached without a principal"))
                    }
                    (Ok(h), Some(gate)) => match call {
                        Leash::Plan(a) => {
                            mcp::tool_answer(crate::leash_calls::plan(h, gate, a.src).await)
                        }
                        Leash::Apply(a) => {
                            let budget = Elide::budget_of(a.elide.as_ref());
                            mcp::tool_answer(
                                crate::leash_calls::apply(
                                    h, gate, a.plan_ref, false, budget, cancel,
                                )
                                .await,
                            )
                        }
                    },
                };
                Ok(r.into())
            }
            .into_actor(act)
        }))
    }

    /// `shoal_pty_*`: the `pty.*` request of the same name in the session.
    fn tool_pty(&mut self, req: shoal_proto::kernel::PtyRequest) -> ToolReply {
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            let caller = Some(act.cx.id);
            async move {
                let r = match h {
                    Ok(h) => crate::sessions::pty::call_as(&h, req, gate, caller).await,
                    Err(e) => Err(e),
                };
                Ok(mcp::tool_answer(r).into())
            }
            .into_actor(act)
        }))
    }
}

fn unknown_tool(name: &str) -> ToolReply {
    Box::pin(ready(Err(RpcError::invalid_params(format!(
        "unknown tool {name:?}"
    ))
    .with_data(json!({"tool": name})))))
}

/// The Leash tools answered by [`McpConn::tool_leash`].
enum Leash {
    Plan(PlanArgs),
    Apply(ApplyArgs),
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
