//! McpConn: the MCP-facing actor (docs/protocol.md §2, §12, reference-protocol §5–§6).
//!
//! Two eras on one connection type: `initialize` negotiates a 2025 version
//! and makes the connection legacy; a request carrying the 2026-07-28
//! envelope in `_meta` is served without a handshake and makes it modern
//! (`proto::mcp_era` wraps the same handlers' results and errors). In the
//! modern era a request's session is the one its `_meta["shoal/session"]`
//! names, else the shim's; `subscriptions/listen` replaces
//! `resources/subscribe`.
//!
//! `tools/call` validates the
//! arguments against the advertised schema, turns the call into typed session
//! messages and folds the reply into a `CallToolResult` (bounded text, a
//! resource link, structured content matching the `outputSchema`). Tool
//! failures are `isError` results; JSON-RPC errors are for broken envelopes,
//! unknown tools and unknown methods. `server/discover` is answered at once in
//! either era. The session is attached lazily: the shim's `shoal/attach`
//! notification names it, else `default`.
//!
//! `tools/call` and `resources/read` run concurrently (at most
//! [`MAX_IN_FLIGHT`]; past that the connection stops reading until one
//! finishes), so `notifications/cancelled` can reach an in-flight call: it
//! cancels that call only (dropped from the session's queue, or its running
//! evaluation interrupted) and the call's reply is dropped. A client that
//! hangs up cancels its calls in flight; a half-close still gets answers. A
//! `_meta.progressToken` on `shoal_exec` gets a `notifications/progress`
//! every [`PROGRESS_EVERY`] while it runs. Resource subscriptions are
//! multiplexed on this connection: one event-bus subscription per channel, at
//! most `[limits] max_subscriptions_per_connection` URIs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use super::conn::{self, ConnContext, FrameItem, Writer};
use super::event_bus::{BusEvent, ListChannels, ReadEvents, SubId, Subscribe, Unsubscribe};
use super::exec::exec_elided;
use super::health::Registration;
use super::journal_writer::{self as jw, Services};
use super::msg::{ClientCount, GetServices, GetValue, SessionError};
use super::session::CallCancel;
use super::session_handle::{AttachSession, SessionHandle};
use crate::lang::Position;
use crate::proto::elide::Budget;
use crate::proto::kernel::{self, GetFormat, GetRequest};
use crate::proto::mcp_era::{self, Era};
use crate::proto::mcp_tasks_ext;
use crate::proto::rpc::{self, RpcError};
use crate::proto::{mcp, uri};
use crate::sync::Locked;

type Reply = LocalBoxActorFuture<McpConn, Result<Json, RpcError>>;

/// Concurrent `tools/call` / `resources/read` per connection.
pub const MAX_IN_FLIGHT: usize = 32;
/// Interval of `notifications/progress` for a running `shoal_exec`.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);

struct InFlight {
    cancelled: bool,
    /// The call evaluates in the session (cancellation interrupts it).
    evaluates: bool,
    progress: Option<SpawnHandle>,
    /// This call's own cancellation (never another call's).
    cancel: Arc<CallCancel>,
}

/// The era a connection settled on: `initialize` makes it legacy, a first
/// request with the 2026-07-28 envelope makes it modern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnEra {
    Legacy,
    Modern,
}

/// One `subscriptions/listen` stream (its JSON-RPC id tags every frame).
struct Listen {
    id: Json,
    /// Event and journal URIs with their channels.
    chans: Vec<(String, String)>,
    /// PTY screen loops and task status loops (`taskIds`).
    ptys: Vec<SpawnHandle>,
    /// PTY URIs and task ids asked for (counted against the quota while
    /// being set up).
    n_ptys: usize,
    /// Acknowledged: nothing is delivered on the stream before.
    acked: bool,
}

/// Sessions a connection's stateless requests may name besides the shim's.
pub const MAX_NAMED_SESSIONS: usize = 16;

pub struct McpConn {
    cx: ConnContext,
    tx: Writer,
    reg: Registration,
    version: Option<&'static str>,
    want_session: String,
    want_cwd: Option<PathBuf>,
    /// The client's environment, forwarded by the shim.
    want_env: Option<Vec<(String, String)>>,
    token: Option<String>,
    attached: Option<SessionHandle>,
    /// The principal's policy and sandbox (Leash), set on attach.
    gate: Option<Arc<crate::leash::Gate>>,
    inflight: HashMap<String, InFlight>,
    /// Subscribed URI → its channel.
    subs: HashMap<String, String>,
    /// One event-bus subscription per channel, shared by its URIs.
    bus_subs: HashMap<String, SubId>,
    /// `shoal://pty/N` subscriptions: their update loops.
    pty_subs: HashMap<String, SpawnHandle>,
    services: Option<Services>,
    /// The client hung up: stop once the in-flight calls have answered.
    closing: bool,
    era: Option<ConnEra>,
    /// The session the request being dispatched names (`_meta["shoal/session"]`).
    req_session: Option<String>,
    /// Sessions named by stateless requests (other than `want_session`).
    named: HashMap<String, SessionHandle>,
    /// Open `subscriptions/listen` streams by request id.
    listens: HashMap<String, Listen>,
    /// The request being dispatched declared the Tasks extension (2026).
    req_tasks_ext: bool,
}

fn id_key(id: &Json) -> String {
    id.to_string()
}

impl McpConn {
    pub fn new(cx: ConnContext, tx: Writer, reg: Registration) -> Self {
        McpConn {
            cx,
            tx,
            reg,
            version: None,
            want_session: "default".into(),
            want_cwd: None,
            want_env: None,
            token: None,
            attached: None,
            gate: None,
            inflight: HashMap::new(),
            subs: HashMap::new(),
            bus_subs: HashMap::new(),
            pty_subs: HashMap::new(),
            services: None,
            closing: false,
            era: None,
            req_session: None,
            named: HashMap::new(),
            listens: HashMap::new(),
            req_tasks_ext: false,
        }
    }

    fn caps(&self) -> mcp::Caps {
        let on = self.services.is_some();
        mcp::Caps {
            journal: on,
            events: on,
        }
    }

    fn notification(&mut self, method: &str, params: Json, ctx: &mut Context<Self>) {
        match method {
            "shoal/attach" => {
                let p = params.as_object().cloned().unwrap_or_default();
                if let Some(s) = p
                    .get("session")
                    .and_then(Json::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.want_session = s.to_string();
                }
                // A shim started from a directory that no longer exists still works.
                self.want_cwd = p
                    .get("cwd")
                    .and_then(Json::as_str)
                    .map(PathBuf::from)
                    .filter(|d| d.is_dir());
                match conn::env_param(p.get("env")) {
                    Ok(env) => self.want_env = env,
                    Err(m) => tracing::warn!(conn = self.cx.id, "shoal/attach: {m}; env ignored"),
                }
                self.token = p
                    .get("token")
                    .and_then(Json::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string);
            }
            "notifications/cancelled" => {
                let Some(id) = params.get("requestId") else {
                    return;
                };
                let key = id_key(id);
                if self.listens.contains_key(&key) {
                    self.end_listen(&key, ctx);
                    return;
                }
                let Some(f) = self.inflight.get_mut(&key) else {
                    return;
                };
                f.cancelled = true;
                if let Some(h) = f.progress.take() {
                    ctx.cancel_future(h);
                }
                if f.evaluates {
                    tracing::debug!(conn = self.cx.id, request = %key, "cancelling this call");
                }
                f.cancel.cancel();
            }
            "notifications/initialized" => {}
            other => tracing::debug!(conn = self.cx.id, method = other, "ignored notification"),
        }
    }

    /// Settle the era of a request and serve it in that era's envelope.
    fn request(&mut self, id: Json, method: String, params: Json, ctx: &mut Context<Self>) {
        let era = if method == "initialize" {
            // The handshake belongs to 2025 even when a client stamps the envelope on it.
            if self.era == Some(ConnEra::Modern) {
                let requested = params
                    .get("protocolVersion")
                    .and_then(Json::as_str)
                    .unwrap_or("");
                let e = mcp_era::unsupported(requested);
                conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
                return;
            }
            self.era = Some(ConnEra::Legacy);
            Era::Legacy
        } else {
            match mcp_era::classify(&params) {
                Ok(e) => e,
                Err(e) => {
                    conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
                    return;
                }
            }
        };
        let refuse = match (&era, self.era) {
            (Era::Modern(_), Some(ConnEra::Legacy)) => Some(RpcError::new(
                rpc::INVALID_REQUEST,
                "this connection serves the handshake era (initialize); requests carrying the 2026-07-28 envelope are not accepted on it",
            )),
            (Era::Legacy, Some(ConnEra::Modern)) => Some(RpcError::invalid_params(format!(
                "this connection serves 2026-07-28: params._meta must carry {} and {}",
                mcp_era::PROTOCOL_VERSION_KEY,
                mcp_era::CLIENT_CAPABILITIES_KEY
            ))),
            (Era::Modern(_), _) if mcp_era::removed_in_modern(&method) => {
                Some(RpcError::method_not_found(&method))
            }
            _ => None,
        };
        if let Some(e) = refuse {
            conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
            return;
        }
        match era {
            Era::Legacy => {
                if method == "server/discover" {
                    let r = Ok(mcp_era::discover_result());
                    conn::write(&self.tx, ctx, &rpc::reply(&id, r));
                    return;
                }
                self.request_in(id, method, params, None, ctx)
            }
            Era::Modern(env) => {
                self.era = Some(ConnEra::Modern);
                match method.as_str() {
                    "server/discover" => {
                        let r = Ok(mcp_era::discover_result());
                        conn::write(&self.tx, ctx, &rpc::reply(&id, r));
                    }
                    "subscriptions/listen" => self.listen(id, &params, env, ctx),
                    _ => self.request_in(id, method, params, Some(env), ctx),
                }
            }
        }
    }

    /// Dispatch one request; `modern` wraps its answer in the 2026 envelope.
    fn request_in(
        &mut self,
        id: Json,
        method: String,
        params: Json,
        modern: Option<mcp_era::Envelope>,
        ctx: &mut Context<Self>,
    ) {
        let stamp = modern
            .as_ref()
            .map(|_| mcp_era::Stamp::for_request(&method, &params));
        let reply_frame = move |id: &Json, res: Result<Json, RpcError>| match &stamp {
            None => rpc::reply_frame(id, res, None),
            Some(s) => s.reply_frame(id, res),
        };
        self.req_tasks_ext = modern
            .as_ref()
            .is_some_and(|e| e.has_extension(mcp_tasks_ext::EXTENSION));
        self.req_session = modern.and_then(|e| e.session);
        let session = self
            .req_session
            .clone()
            .or_else(|| self.attached.as_ref().map(|h| h.name.clone()));
        let span = conn::request_span("mcp", self.cx.id, session.as_deref(), &id, &method);
        let _entered = span.clone().entered();
        let concurrent = matches!(
            method.as_str(),
            "tools/call" | "resources/read" | "tasks/result"
        );
        if !concurrent || self.inflight.len() >= MAX_IN_FLIGHT {
            // In order; at the in-flight cap this also stops reading (backpressure).
            let fut = self.dispatch(&method, params, CallCancel::new(), ctx);
            self.req_session = None;
            self.req_tasks_ext = false;
            ctx.wait(fut.map(move |res, act, ctx| {
                let _span = span.entered();
                conn::request_done(&res);
                conn::write_frame(&act.tx, ctx, reply_frame(&id, res));
            }));
            return;
        }
        let key = id_key(&id);
        let evaluates = method == "tools/call"
            && params.get("name").and_then(Json::as_str) == Some("shoal_exec");
        let progress = if evaluates {
            params
                .get("_meta")
                .and_then(|m| m.get("progressToken"))
                .filter(|t| t.is_string() || t.is_number())
                .cloned()
                .map(|token| self.start_progress(token, ctx))
        } else {
            None
        };
        let cancel = CallCancel::new();
        self.inflight.insert(
            key.clone(),
            InFlight {
                cancelled: false,
                evaluates,
                progress,
                cancel: cancel.clone(),
            },
        );
        let fut = self.dispatch(&method, params, cancel, ctx);
        self.req_session = None;
        self.req_tasks_ext = false;
        ctx.spawn(fut.map(move |res, act, ctx| {
            let _span = span.entered();
            conn::request_done(&res);
            let done = act.inflight.remove(&key);
            if let Some(h) = done.as_ref().and_then(|f| f.progress) {
                ctx.cancel_future(h);
            }
            if done.is_some_and(|f| f.cancelled) {
                tracing::debug!(conn = act.cx.id, request = %key, "cancelled request finished; no reply");
            } else {
                conn::write_frame(&act.tx, ctx, reply_frame(&id, res));
            }
            if act.closing && act.inflight.is_empty() {
                ctx.stop();
            }
        }));
    }

    /// Periodic `notifications/progress` (elapsed seconds) until cancelled.
    fn start_progress(&mut self, token: Json, ctx: &mut Context<Self>) -> SpawnHandle {
        let t0 = Instant::now();
        ctx.run_interval(PROGRESS_EVERY, move |act, ctx| {
            let secs = t0.elapsed().as_secs_f64();
            let frame = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": token,
                "progress": (secs * 1000.0).round() / 1000.0,
                "message": format!("running for {secs:.1}s"),
            }});
            conn::write(&act.tx, ctx, &frame);
        })
    }

    fn dispatch(
        &mut self,
        method: &str,
        params: Json,
        cancel: Arc<CallCancel>,
        ctx: &mut Context<Self>,
    ) -> Reply {
        match method {
            "initialize" => {
                let requested = params.get("protocolVersion").and_then(Json::as_str);
                let v = mcp::negotiate(requested);
                self.version = Some(v);
                tracing::debug!(
                    conn = self.cx.id,
                    requested,
                    negotiated = v,
                    "mcp initialize"
                );
                Box::pin(ready(Ok(mcp::initialize_result(v))))
            }
            "ping" => Box::pin(ready(Ok(json!({})))),
            "tools/list" => Box::pin(ready(Ok(json!({"tools": mcp::tools(self.caps())})))),
            "tools/call" => self.tools_call(params, cancel),
            "resources/list" => self.resources_list(params),
            "prompts/list" => Box::pin(ready(Ok(mcp::prompts()))),
            "prompts/get" => Box::pin(ready(mcp::prompt_get(
                params.get("name").and_then(Json::as_str).unwrap_or(""),
            ))),
            "completion/complete" => self.complete(params),
            "resources/templates/list" => Box::pin(ready(Ok(mcp::resource_templates(self.caps())))),
            "resources/read" => self.resources_read(params),
            "resources/subscribe" => self.subscribe(params, ctx),
            "resources/unsubscribe" => self.unsubscribe(params, ctx),
            // The 2026 Tasks extension: get, update, cancel (no list, no result).
            "tasks/get" | "tasks/update" | "tasks/cancel" if self.era == Some(ConnEra::Modern) => {
                let method = method.to_string();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move { super::mcp_tasks::ext_method(h?, method, params).await }
                        .into_actor(act)
                }))
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
                if self.era != Some(ConnEra::Modern) =>
            {
                let method = method.to_string();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let h = h?;
                        super::mcp_tasks::method(h, method, params, Budget::default()).await
                    }
                    .into_actor(act)
                }))
            }
            other => Box::pin(ready(Err(RpcError::method_not_found(other)))),
        }
    }

    fn tools_call(&mut self, params: Json, cancel: Arc<CallCancel>) -> Reply {
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
            return Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unknown tool {name:?}"
            ))
            .with_data(json!({"tool": name})))));
        }
        let args = match p.get("arguments") {
            None | Some(Json::Null) => json!({}),
            Some(a) => a.clone(),
        };
        if !args.is_object() {
            return Box::pin(ready(Ok(mcp::tool_error(mcp::invalid_arguments(
                "tool arguments must be an object".into(),
                vec![mcp::argument_error("", "arguments must be an object")],
            )))));
        }
        if let Err(structured) = mcp::validate_args(name, &args) {
            return Box::pin(ready(Ok(mcp::tool_error(structured))));
        }
        let args: Map<String, Json> = args.as_object().cloned().unwrap_or_default();
        // A task-augmented call (MCP Tasks 2025): `shoal_exec` only. At
        // 2026-07-28 task creation is the server's call and `task` is ignored.
        let legacy_task = self.era != Some(ConnEra::Modern);
        if let Some(t) = p.get("task").filter(|t| legacy_task && !t.is_null()) {
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
                        Ok(h) => Ok(super::mcp_tasks::cancel_tool(h, args).await),
                        Err(e) => Ok(mcp::tool_error_rpc(&e)),
                    }
                }
                .into_actor(act)
            })),
            "shoal_exec" => self.tool_exec(args, cancel),
            n if crate::proto::mcp_leash::is_leash_tool(n) => self.tool_leash(n, args, cancel),
            "shoal_get" => self.tool_get(args),
            "shoal_journal" => self.tool_journal(args),
            n if n.starts_with("shoal_pty_") => self.tool_pty(n, args),
            _ => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unknown tool {name:?}"
            ))))),
        }
    }

    /// `tools/call` of `shoal_exec` with `params.task`: a `CreateTaskResult`
    /// now, `notifications/tasks/status` as the task changes.
    fn tool_exec_task(&mut self, args: Map<String, Json>) -> Reply {
        let (src, position) = match kernel::exec_params(&args, Position::Value) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move { super::mcp_tasks::create(h?, src, position, gate).await }
                .into_actor(act)
                .map(|r, act, ctx| {
                    let (created, view) = r?;
                    let updates = super::mcp_tasks::status_updates(act.tx.clone(), view);
                    ctx.spawn(updates.into_actor(act));
                    Ok(created)
                })
        }))
    }

    fn tool_exec(&mut self, args: Map<String, Json>, cancel: Arc<CallCancel>) -> Reply {
        let parsed = kernel::exec_params(&args, Position::Value).and_then(|(s, p)| {
            let b = Budget::from_json(args.get("elide")).map_err(RpcError::invalid_params)?;
            Ok((s, p, b, super::task::task_opts(&args)?))
        });
        let (src, position, budget, opts) = match parsed {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error_rpc(&e)))),
        };
        // Server-directed task creation only for work that leaves the session's
        // state alone (a task runs on a fork).
        let ext = self.req_tasks_ext
            && opts.is_none()
            && !crate::proto::mcp_tasks_ext::may_change_session(&src);
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let handle = match h {
                    Ok(h) => h,
                    Err(e) => return Ok(mcp::tool_error_rpc(&e)),
                };
                if ext {
                    // Server-directed task creation (Tasks extension).
                    let r = super::mcp_tasks::ext_exec(handle, src, position, budget, cancel, gate);
                    return Ok(r.await.unwrap_or_else(|e| mcp::tool_error_rpc(&e)));
                }
                let r = match opts {
                    Some(o) => {
                        super::task::exec_as_task(handle, src, position, false, budget, o, gate)
                            .await
                    }
                    None => {
                        exec_elided(handle, src, position, false, budget, cancel, gate, true).await
                    }
                };
                Ok(match r {
                    Ok(x) => mcp::tool_success(x),
                    Err(e) => mcp::tool_error_rpc(&e),
                })
            }
            .into_actor(act)
        }))
    }

    fn tool_get(&mut self, args: Map<String, Json>) -> Reply {
        let (reference, req) = match kernel::get_params(&args) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error_rpc(&e)))),
        };
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

    fn tool_journal(&mut self, args: Map<String, Json>) -> Reply {
        let query: crate::journal::Query = match serde_json::from_value(Json::Object(args)) {
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

    /// `shoal_plan`, `shoal_apply`, `shoal_cap_request`.
    fn tool_leash(
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
                            Ok(src) => super::leash_calls::plan(h, gate, src.to_string()).await,
                            Err(e) => Err(e),
                        },
                        "shoal_apply" => {
                            match super::leash_calls::plan_ref_param(&args).and_then(|r| {
                                Budget::from_json(args.get("elide"))
                                    .map(|b| (r, b))
                                    .map_err(RpcError::invalid_params)
                            }) {
                                Ok((r, b)) => {
                                    super::leash_calls::apply(h, gate, r, false, b, cancel).await
                                }
                                Err(e) => Err(e),
                            }
                        }
                        _ => match super::leash_calls::cap_request_params(&args) {
                            Ok((plan_ref, kinds)) => {
                                super::leash_calls::plan_op(
                                    h,
                                    gate,
                                    super::plan_store::PlanOp::Request { plan_ref, kinds },
                                )
                                .await
                            }
                            Err(e) => Err(e),
                        },
                    },
                };
                Ok(r.map_or_else(|e| mcp::tool_error_rpc(&e), mcp::tool_success))
            }
            .into_actor(act)
        }))
    }

    /// `shoal_pty_*`: the `pty.*` request of the same name in the session.
    fn tool_pty(&mut self, tool: &str, args: Map<String, Json>) -> Reply {
        let method = crate::pty::api::tool_method(tool).unwrap_or("pty.list");
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let r = match h {
                    Ok(h) => super::pty::call_as(&h, method, &args, gate).await,
                    Err(e) => Err(e),
                };
                Ok(r.map_or_else(|e| mcp::tool_error_rpc(&e), mcp::tool_success))
            }
            .into_actor(act)
        }))
    }

    fn resources_list(&mut self, params: Json) -> Reply {
        let caps = self.caps();
        let cursor = params
            .get("cursor")
            .and_then(Json::as_str)
            .map(str::to_string);
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let h = h.ok();
                let last = h.as_ref().map(|h| h.shared.last_ref()).unwrap_or(0);
                let mut page = mcp::resources_page(caps, last, cursor.as_deref())?;
                // PTYs and the caller's live plans are listed once, on the first page.
                if cursor.is_none() {
                    let mut extra = super::pty::resource_entries(h.clone()).await;
                    if let (Some(h), Some(g)) = (h, gate) {
                        if let Ok(Json::Array(plans)) = super::leash_calls::plan_op(
                            h,
                            g,
                            super::plan_store::PlanOp::List,
                        )
                        .await
                        {
                            for p in plans {
                                let r = p["plan_ref"].as_str().unwrap_or("");
                                let hex = r.strip_prefix("plan:").unwrap_or(r);
                                extra.push(json!({
                                    "uri": format!("shoal://plan/{hex}"),
                                    "name": r,
                                    "description": format!("plan ({}), {}", p["verdict"].as_str().unwrap_or(""), p["approval"].as_str().unwrap_or("")),
                                    "mimeType": "application/json",
                                }));
                            }
                        }
                    }
                    if let Some(list) = page["resources"].as_array_mut() {
                        list.extend(extra);
                    }
                }
                Ok(page)
            }
            .into_actor(act)
        }))
    }

    /// `completion/complete` of resource-template arguments.
    fn complete(&mut self, params: Json) -> Reply {
        let (target, prefix) = match mcp::complete_request(&params) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        match target {
            mcp::CompleteTarget::OutRef => Box::pin(self.session().map(move |h, _act, _ctx| {
                let last = h?.shared.last_ref();
                // Newest first; a prefix narrows by leading digits.
                let refs = (1..=last).rev().map(|n| n.to_string());
                Ok(mcp::completion_result(refs, &prefix))
            })),
            mcp::CompleteTarget::Channel => {
                let Some(s) = self.services.clone() else {
                    return Box::pin(ready(Ok(mcp::completion_result([], &prefix))));
                };
                Box::pin(
                    async move {
                        let names = s.bus.send(ListChannels).await?;
                        Ok(mcp::completion_result(names, &prefix))
                    }
                    .into_actor(self),
                )
            }
            mcp::CompleteTarget::SessionView => Box::pin(ready(Ok(mcp::completion_result(
                ["cwd".to_string(), "env".to_string()],
                &prefix,
            )))),
            mcp::CompleteTarget::Nothing => {
                Box::pin(ready(Ok(mcp::completion_result([], &prefix))))
            }
        }
    }

    fn resources_read(&mut self, params: Json) -> Reply {
        let Some(u) = params.get("uri").and_then(Json::as_str).map(str::to_string) else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "resources/read requires uri",
            ))));
        };
        let parsed = match uri::parse(&u) {
            Ok(p) => p,
            Err(m) => return Box::pin(ready(Err(RpcError::invalid_params(m)))),
        };
        match (
            parsed.root.as_str(),
            parsed.segs.first().map(String::as_str),
        ) {
            ("out", Some(n)) => {
                let reference = format!("out:{n}");
                let mut req = GetRequest {
                    path: parsed
                        .get("path")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                    slice: parsed.get("slice").and_then(mcp::parse_slice),
                    ..GetRequest::default()
                };
                match parsed.get("format") {
                    None | Some("json") => {}
                    Some("render") => req.format = GetFormat::Render,
                    Some("raw") => req.format = GetFormat::Raw,
                    Some("inline") => req.format = GetFormat::Inline,
                    Some(other) => {
                        return Box::pin(ready(Err(RpcError::invalid_params(format!(
                            "format must be json, render, raw or inline (got {other:?})"
                        )))))
                    }
                }
                if let Some(e) = parsed.get("elide") {
                    if let Ok(j) = serde_json::from_str::<Json>(e) {
                        if let Ok(b) = Budget::from_json(Some(&j)) {
                            req.elide = b;
                        }
                    }
                }
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let handle = h?;
                        let r = get_value(&handle, reference, req).await?;
                        Ok(mcp::read_result(&u, &r))
                    }
                    .into_actor(act)
                }))
            }
            ("docs", Some("language")) => Box::pin(ready(Ok(mcp::card_read_result()))),
            ("task", Some(_)) | ("jobs", None) => {
                let segs = parsed.segs.clone();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move { super::mcp_tasks::read(h?, u, segs).await }.into_actor(act)
                }))
            }
            ("session", Some("cwd")) => Box::pin(self.session().map(move |h, _act, _ctx| {
                let h = h?;
                // The live cwd (after `cd`), else where the session starts.
                let live = h.shared.live.locked().clone();
                let cwd = live.map_or_else(|| h.shared.cwd.clone(), |l| l.cwd);
                Ok(mcp::read_result(
                    &u,
                    &json!({"display": cwd.display().to_string()}),
                ))
            })),
            ("session", Some("env")) => Box::pin(self.session().map(move |h, _act, _ctx| {
                let h = h?;
                // The session's environment as of its last exec (`env.X = …`
                // included); before the first exec, the one it will inherit.
                let live = h.shared.live.locked().clone();
                let pairs: Vec<(String, String)> = match live {
                    Some(l) => l.env,
                    None => h.shared.env.clone(),
                };
                let mut names: Vec<String> = Vec::new();
                let mut env = Map::new();
                for (k, v) in pairs.into_iter().take(4096) {
                    names.push(k.clone());
                    env.insert(k, json!(v));
                }
                names.sort();
                Ok(mcp::read_result(
                    &u,
                    &json!({"granted": true, "names": names, "env": env}),
                ))
            })),
            ("pty", seg) => {
                let seg = seg.map(str::to_string);
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let r = super::pty::read_resource(&h?, seg.as_deref()).await?;
                        Ok(mcp::read_result(&u, &r))
                    }
                    .into_actor(act)
                }))
            }
            ("session", Some(other)) => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unsupported session view: {other}"
            ))))),
            ("plan", Some(r)) => {
                // shoal://plan/HEX (or plan:HEX): the caller's own plan (contract §5).
                let r = if r.starts_with("plan:") {
                    r.to_string()
                } else {
                    format!("plan:{r}")
                };
                Box::pin(self.session().then(move |h, act, _ctx| {
                    let gate = act.gate.clone();
                    async move {
                        let handle = h?;
                        let gate =
                            gate.ok_or_else(|| RpcError::internal("attached without a principal"))?;
                        let j = super::leash_calls::plan_op(
                            handle,
                            gate,
                            super::plan_store::PlanOp::Get(r),
                        )
                        .await?;
                        Ok(mcp::read_result(&u, &j))
                    }
                    .into_actor(act)
                }))
            }
            ("journal", None) | ("val", Some(_)) | ("events", Some(_)) => {
                let Some(s) = self.services.clone() else {
                    return Box::pin(ready(Err(RpcError::invalid_params(format!(
                        "unsupported resource root: {u} (the journal is not running)"
                    )))));
                };
                let principal = match self.principal_now() {
                    Ok(p) => p,
                    Err(e) => return Box::pin(ready(Err(e))),
                };
                Box::pin(
                    async move { read_service(&s, &parsed, &u, &principal).await }.into_actor(self),
                )
            }
            _ => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unsupported resource: {u}"
            ))))),
        }
    }

    fn subscribe(&mut self, params: Json, ctx: &mut Context<Self>) -> Reply {
        let Some(u) = params.get("uri").and_then(Json::as_str).map(str::to_string) else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "resources/subscribe requires uri",
            ))));
        };
        if let Some(id) = super::pty::watch_uri(&u) {
            return self.subscribe_pty(u, id);
        }
        let channel = match mcp::subscription_channel(&u) {
            Ok(c) => c,
            Err(m) => return Box::pin(ready(Err(RpcError::invalid_params(m)))),
        };
        if let Some(n) = super::mcp_tasks::channel_task(&channel) {
            // Only this session's tasks (-32021 otherwise, like task.get).
            let check = self.session().then(move |h, act, _ctx| {
                async move { super::mcp_tasks::check_watch(h?, vec![n]).await }.into_actor(act)
            });
            return Box::pin(check.then(move |r, act, ctx| -> Reply {
                match r {
                    Ok(()) => act.subscribe_channel(u, channel, ctx),
                    Err(e) => Box::pin(ready(Err(e))),
                }
            }));
        }
        self.subscribe_channel(u, channel, ctx)
    }

    /// `resources/subscribe` of an event channel (its URI checked).
    fn subscribe_channel(&mut self, u: String, channel: String, ctx: &mut Context<Self>) -> Reply {
        let Some(s) = self.services.clone() else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "subscriptions need the event bus, which this daemon does not run",
            ))));
        };
        if self.subs.contains_key(&u) {
            return Box::pin(ready(Ok(json!({}))));
        }
        if let Err(e) = self.subscription_room() {
            return Box::pin(ready(Err(e)));
        }
        self.subs.insert(u, channel.clone());
        self.count_subscriptions();
        if self.bus_subs.contains_key(&channel) {
            return Box::pin(ready(Ok(json!({}))));
        }
        let sub = ctx.address().recipient();
        let f = s.bus.send(Subscribe {
            channel: channel.clone(),
            sub,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let id = r?;
            if act.channel_wanted(&channel) && !act.bus_subs.contains_key(&channel) {
                act.bus_subs.insert(channel, id);
            } else if let Some(s) = &act.services {
                // Unsubscribed while the subscription was being set up.
                s.bus.do_send(Unsubscribe { id });
            }
            Ok(json!({}))
        }))
    }

    /// Publish this connection's subscription count (for `shoal status`).
    fn count_subscriptions(&self) {
        self.reg
            .stats
            .set_subscriptions(self.subs.len() + self.pty_subs.len());
    }

    /// `[limits] max_subscriptions_per_connection` over event and PTY
    /// subscriptions together.
    fn subscription_room(&self) -> Result<(), RpcError> {
        self.subscription_room_for(1)
    }

    /// Room for `n` more subscribed URIs (`resources/subscribe` and
    /// `subscriptions/listen` count together).
    fn subscription_room_for(&self, n: usize) -> Result<(), RpcError> {
        let max = self.cx.limits.max_subscriptions_per_connection;
        let listened: usize = self
            .listens
            .values()
            .map(|l| l.chans.len() + l.n_ptys)
            .sum();
        if self.subs.len() + self.pty_subs.len() + listened + n > max {
            return Err(conn::limit_error(
                "max_subscriptions_per_connection",
                max as u64,
                "too many subscriptions on this connection",
            ));
        }
        Ok(())
    }

    /// `shoal://pty/N`: a screen-update loop on this connection.
    fn subscribe_pty(&mut self, u: String, id: u64) -> Reply {
        if self.pty_subs.contains_key(&u) {
            return Box::pin(ready(Ok(json!({}))));
        }
        if let Err(e) = self.subscription_room() {
            return Box::pin(ready(Err(e)));
        }
        Box::pin(self.session().then(move |h, act, _ctx| {
            let watch = h.map(|h| super::pty::watch(&h, id));
            async move { watch?.await }
                .into_actor(act)
                .map(move |r, act, ctx| {
                    let changes = r?;
                    let updates = super::pty::updates(act.tx.clone(), u.clone(), changes, None);
                    let handle = ctx.spawn(updates.into_actor(act));
                    if let Some(old) = act.pty_subs.insert(u, handle) {
                        ctx.cancel_future(old);
                    }
                    act.count_subscriptions();
                    Ok(json!({}))
                })
        }))
    }

    fn unsubscribe(&mut self, params: Json, ctx: &mut Context<Self>) -> Reply {
        let Some(u) = params.get("uri").and_then(Json::as_str) else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "resources/unsubscribe requires uri",
            ))));
        };
        if let Some(h) = self.pty_subs.remove(u) {
            ctx.cancel_future(h);
        }
        let removed = self.subs.remove(u);
        self.count_subscriptions();
        if let Some(channel) = removed {
            self.release_channel(&channel);
        }
        Box::pin(ready(Ok(json!({}))))
    }

    /// Some subscription (legacy or listen) still watches `channel`.
    fn channel_wanted(&self, channel: &str) -> bool {
        self.subs.values().any(|c| c == channel)
            || self
                .listens
                .values()
                .any(|l| l.chans.iter().any(|(_, c)| c == channel))
    }

    /// Drop the bus subscription of `channel` once nothing watches it.
    fn release_channel(&mut self, channel: &str) {
        if self.channel_wanted(channel) {
            return;
        }
        if let (Some(id), Some(s)) = (self.bus_subs.remove(channel), &self.services) {
            s.bus.do_send(Unsubscribe { id });
        }
    }

    /// `subscriptions/listen` (2026-07-28): one long-lived request whose
    /// stream carries `notifications/resources/updated` for the URIs it
    /// asked for, each frame tagged with the request's id. The first frame
    /// is `notifications/subscriptions/acknowledged` with the honored URIs
    /// (event channels, the journal, PTY screens); the request is answered
    /// only when the stream ends, and a `notifications/cancelled` ends it.
    fn listen(&mut self, id: Json, params: &Json, env: mcp_era::Envelope, ctx: &mut Context<Self>) {
        // Task URIs name this session's tasks only (-32021 otherwise, like
        // task.get); checked before the stream exists.
        let named: Vec<u64> = mcp_era::listen_uris(params)
            .map(|us| {
                us.iter()
                    .filter_map(|u| mcp::subscription_channel(u).ok())
                    .filter_map(|c| super::mcp_tasks::channel_task(&c))
                    .collect()
            })
            .unwrap_or_default();
        if named.is_empty() {
            return self.listen_checked(id, params, env, ctx);
        }
        self.req_session = env.session.clone();
        let session = self.session();
        self.req_session = None;
        let params = params.clone();
        let check = session.then(move |h, act, _ctx| {
            async move { super::mcp_tasks::check_watch(h?, named).await }.into_actor(act)
        });
        ctx.wait(check.map(move |r, act, ctx| match r {
            Ok(()) => act.listen_checked(id, &params, env, ctx),
            Err(e) => conn::write(&act.tx, ctx, &rpc::reply(&id, Err(e))),
        }));
    }

    fn listen_checked(
        &mut self,
        id: Json,
        params: &Json,
        env: mcp_era::Envelope,
        ctx: &mut Context<Self>,
    ) {
        let key = id_key(&id);
        let uris = match mcp_era::listen_uris(params) {
            Ok(u) => u,
            Err(e) => return conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e))),
        };
        let task_ids = match mcp_tasks_ext::listen_task_ids(params) {
            Ok(t) => t,
            Err(e) => return conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e))),
        };
        if self.listens.contains_key(&key) || self.inflight.contains_key(&key) {
            let e = RpcError::new(rpc::INVALID_REQUEST, "request id already in use");
            return conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
        }
        let mut chans: Vec<(String, String)> = Vec::new();
        let mut ptys: Vec<(String, u64)> = Vec::new();
        for u in uris {
            if chans.iter().any(|(x, _)| *x == u) || ptys.iter().any(|(x, _)| *x == u) {
                continue;
            }
            if let Some(n) = super::pty::watch_uri(&u) {
                ptys.push((u, n));
            } else if let Ok(ch) = mcp::subscription_channel(&u) {
                if self.services.is_some() {
                    chans.push((u, ch));
                }
            }
        }
        if let Err(e) = self.subscription_room_for(chans.len() + ptys.len() + task_ids.len()) {
            return conn::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
        }
        let mut need: Vec<String> = Vec::new();
        for (_, c) in &chans {
            if !self.bus_subs.contains_key(c) && !self.channel_wanted(c) && !need.contains(c) {
                need.push(c.clone());
            }
        }
        self.listens.insert(
            key.clone(),
            Listen {
                id: id.clone(),
                chans,
                ptys: Vec::new(),
                n_ptys: ptys.len() + task_ids.len(),
                acked: false,
            },
        );
        let bus = self.services.as_ref().map(|s| s.bus.clone());
        let sub = ctx.address().recipient::<BusEvent>();
        self.req_session = env.session;
        let asked_tasks = params
            .get("notifications")
            .and_then(|n| n.get("taskIds"))
            .is_some_and(Json::is_array);
        let session = if ptys.is_empty() && task_ids.is_empty() {
            None
        } else {
            Some(self.session())
        };
        self.req_session = None;
        let setup = async move {
            let mut ids = Vec::new();
            if let Some(bus) = bus {
                for channel in need {
                    if let Ok(id) = bus
                        .send(Subscribe {
                            channel: channel.clone(),
                            sub: sub.clone(),
                        })
                        .await
                    {
                        ids.push((channel, id));
                    }
                }
            }
            ids
        };
        let watches = move |h: Option<Result<SessionHandle, RpcError>>| async move {
            let mut out = Vec::new();
            let mut tasks = Vec::new();
            if let Some(Ok(h)) = h {
                for (u, n) in ptys {
                    if let Ok(rx) = super::pty::watch(&h, n).await {
                        out.push((u, rx));
                    }
                }
                for n in task_ids {
                    if let Some(view) = super::mcp_tasks::ext_watch(&h, n).await {
                        tasks.push((n, view));
                    }
                }
            }
            (out, tasks)
        };
        let session: LocalBoxActorFuture<Self, Option<Result<SessionHandle, RpcError>>> =
            match session {
                Some(f) => Box::pin(f.map(|h, _act, _ctx| Some(h))),
                None => Box::pin(ready(None)),
            };
        let fut = session.then(move |h, act, _ctx| {
            async move { (setup.await, watches(h).await) }.into_actor(act)
        });
        ctx.spawn(fut.map(move |(ids, (watched, tasks)), act, ctx| {
            let Some(l) = act.listens.get_mut(&key) else {
                // Cancelled while being set up.
                for (channel, sid) in ids {
                    if act.channel_wanted(&channel) && !act.bus_subs.contains_key(&channel) {
                        act.bus_subs.insert(channel, sid);
                    } else if let Some(s) = &act.services {
                        s.bus.do_send(Unsubscribe { id: sid });
                    }
                }
                return;
            };
            let mut honored: Vec<String> = l.chans.iter().map(|(u, _)| u.clone()).collect();
            honored.extend(watched.iter().map(|(u, _)| u.clone()));
            l.acked = true;
            let listen_id = l.id.clone();
            for (channel, sid) in ids {
                match act.bus_subs.entry(channel) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        // Another subscription got there first: one per channel.
                        if let Some(s) = &act.services {
                            s.bus.do_send(Unsubscribe { id: sid });
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(sid);
                    }
                }
            }
            let mut filter = json!({"resourceSubscriptions": honored});
            if asked_tasks {
                let t: Vec<String> = tasks
                    .iter()
                    .map(|(n, _)| crate::task::ref_name(*n))
                    .collect();
                filter["taskIds"] = json!(t);
            }
            conn::write(&act.tx, ctx, &mcp_era::acknowledged(&listen_id, &filter));
            let mut handles = Vec::new();
            for (u, rx) in watched {
                let updates = super::pty::updates(act.tx.clone(), u, rx, Some(listen_id.clone()));
                handles.push(ctx.spawn(updates.into_actor(act)));
            }
            for (_, view) in tasks {
                let updates =
                    super::mcp_tasks::ext_status_updates(act.tx.clone(), view, listen_id.clone());
                handles.push(ctx.spawn(updates.into_actor(act)));
            }
            if let Some(l) = act.listens.get_mut(&key) {
                l.n_ptys = handles.len();
                l.ptys = handles;
            }
        }));
    }

    /// End a listen stream (the client cancelled it): no answer follows.
    fn end_listen(&mut self, key: &str, ctx: &mut Context<Self>) {
        let Some(l) = self.listens.remove(key) else {
            return;
        };
        for h in l.ptys {
            ctx.cancel_future(h);
        }
        for (_, channel) in &l.chans {
            self.release_channel(channel);
        }
    }

    /// The caller's principal (journal scoping, docs/protocol.md §6).
    fn principal_now(&self) -> Result<String, RpcError> {
        match &self.gate {
            Some(g) => super::leash_calls::recheck(self.token.as_deref(), self.cx.foreign, g)
                .map(|_| g.principal.clone()),
            None => super::leash_calls::principal(self.token.as_deref(), self.cx.foreign),
        }
    }

    /// Admit this call's principal: the gate is set on first use, and a
    /// revoked token is refused on its next call.
    fn admit(&mut self) -> Result<(), RpcError> {
        if let Some(g) = &self.gate {
            return super::leash_calls::recheck(self.token.as_deref(), self.cx.foreign, g);
        }
        let principal = super::leash_calls::principal(self.token.as_deref(), self.cx.foreign)?;
        self.gate = Some(Arc::new(crate::leash::Gate::for_principal(&principal)));
        Ok(())
    }

    /// The session of the request being dispatched: the one it names
    /// explicitly (`_meta["shoal/session"]`), else the shim's.
    fn session(&mut self) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        match self.req_session.clone() {
            Some(name) if name != self.want_session => self.named_session(name),
            _ => self.default_session(),
        }
    }

    /// A session a stateless request names: attached on first use, kept
    /// for the connection (at most [`MAX_NAMED_SESSIONS`]).
    fn named_session(
        &mut self,
        name: String,
    ) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Some(h) = self.named.get(&name) {
            if h.addr.connected() {
                let h = h.clone();
                return Box::pin(ready(self.admit().map(|_| h)));
            }
        }
        if let Err(e) = self.admit() {
            return Box::pin(ready(Err(e)));
        }
        if !self.named.contains_key(&name) && self.named.len() >= MAX_NAMED_SESSIONS {
            return Box::pin(ready(Err(RpcError::new(
                rpc::RESOURCE_LIMIT,
                format!("at most {MAX_NAMED_SESSIONS} sessions can be named on one connection"),
            )
            .with_data(json!({"code": "resource_limit", "max": MAX_NAMED_SESSIONS})))));
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(AttachSession {
            name: name.clone(),
            cwd: self.want_cwd.clone(),
            env: self.want_env.clone(),
            no_adapters: false,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let h = r?.map_err(conn::session_error)?;
            if let Some(old) = act.named.get(&name) {
                if old.addr.connected() && old.name == h.name {
                    return Ok(old.clone());
                }
            }
            if let Some(old) = act.named.insert(name, h.clone()) {
                old.notify(ClientCount { delta: -1 });
            }
            h.notify(ClientCount { delta: 1 });
            Ok(h)
        }))
    }

    /// The shim's session, attaching on first use.
    fn default_session(&mut self) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Some(h) = &self.attached {
            if h.addr.connected() {
                let h = h.clone();
                return Box::pin(ready(self.admit().map(|_| h)));
            }
        }
        if let Err(e) = self.admit() {
            return Box::pin(ready(Err(e)));
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(AttachSession {
            name: self.want_session.clone(),
            cwd: self.want_cwd.clone(),
            env: self.want_env.clone(),
            no_adapters: false,
        });
        Box::pin(f.into_actor(self).map(|r, act, _ctx| {
            let h = r?.map_err(conn::session_error)?;
            // Concurrent first calls may both attach: keep the first handle.
            if let Some(old) = &act.attached {
                if old.addr.connected() && old.name == h.name {
                    return Ok(old.clone());
                }
            }
            if let Some(old) = act.attached.replace(h.clone()) {
                old.notify(ClientCount { delta: -1 });
            }
            h.notify(ClientCount { delta: 1 });
            Ok(h)
        }))
    }
}

async fn query_journal(
    s: &Services,
    query: crate::journal::Query,
    principal: &str,
) -> Result<Vec<Json>, RpcError> {
    let scope = jw::scope_for(principal);
    let entries = s
        .journal
        .send(jw::QueryJournal { query, scope })
        .await?
        .map_err(|e| match e {
            crate::journal::JournalError::Invalid(m) => RpcError::invalid_params(m),
            e => RpcError::internal(e.to_string()),
        })?;
    entries
        .into_iter()
        .map(|e| serde_json::to_value(e).map_err(|e| RpcError::internal(e.to_string())))
        .collect()
}

/// `resources/read` of `shoal://journal`, `shoal://val/..`, `shoal://events/..`.
async fn read_service(
    s: &Services,
    p: &uri::ParsedUri,
    u: &str,
    principal: &str,
) -> Result<Json, RpcError> {
    match p.root.as_str() {
        "journal" => {
            let q = crate::journal::Query {
                since: p.get("since").and_then(|v| v.parse().ok()),
                until: p.get("until").and_then(|v| v.parse().ok()),
                ok: match p.get("ok") {
                    Some("true") => Some(true),
                    Some("false") => Some(false),
                    _ => None,
                },
                effects: p.get("effects").map(|e| {
                    e.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                }),
                head: p.get("head").map(str::to_string),
                principal: p.get("principal").map(str::to_string),
                limit: p.get("limit").and_then(|v| v.parse().ok()),
            };
            let entries = query_journal(s, q, principal).await?;
            Ok(mcp::read_result(u, &mcp::journal_result(entries)))
        }
        "val" => {
            let hash = p.segs[0].clone();
            // Read errors are the kernel's own (code, message, data), not
            // wrapped in a -32602 string (docs/protocol.md §9).
            let unknown = || {
                RpcError::new(rpc::UNKNOWN_REF, "unknown value hash")
                    .with_data(json!({"hash": hash}))
            };
            let bytes = match s.journal.send(jw::GetBlob { hash: hash.clone() }).await {
                Err(e) => return Err(e.into()),
                Ok(Ok(Some(b))) => b,
                Ok(Ok(None)) | Ok(Err(crate::journal::JournalError::Invalid(_))) => {
                    return Err(unknown())
                }
                Ok(Err(e)) => return Err(RpcError::internal(e.to_string())),
            };
            Ok(mcp::read_result(
                u,
                &mcp::bounded_blob(&jw::blob_json(&hash, &bytes), u),
            ))
        }
        _ => {
            let channel = p.segs[0].clone();
            let events = s
                .bus
                .send(ReadEvents {
                    channel: channel.clone(),
                    since: p.get("since").and_then(|v| v.parse().ok()),
                    limit: p.get("limit").and_then(|v| v.parse().ok()),
                })
                .await?;
            let events: Vec<Json> = events.iter().map(BusEvent::to_json).collect();
            Ok(mcp::read_result(u, &mcp::events_result(&channel, events)))
        }
    }
}

/// `value.get` through the session supervisor.
pub async fn get_value(
    handle: &SessionHandle,
    reference: String,
    req: GetRequest,
) -> Result<Json, RpcError> {
    let name = handle.name.clone();
    handle
        .send(GetValue {
            reference,
            req,
            tty: false,
        })
        .await
        .map_err(|_| SessionError::Closed(name))
        .and_then(|r| r)
        .map_err(conn::session_error)
}

impl Actor for McpConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        // Which capabilities exist decides what is advertised: ask first.
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(GetServices);
        ctx.wait(f.into_actor(self).map(|r, act, _ctx| {
            act.services = r.ok().flatten();
        }));
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Calls still queued or running are abandoned: cancel each (only them).
        for f in self.inflight.values() {
            f.cancel.cancel();
        }
        if let Some(h) = self.attached.take() {
            h.notify(ClientCount { delta: -1 });
        }
        for (_, h) in self.named.drain() {
            h.notify(ClientCount { delta: -1 });
        }
        if let Some(s) = &self.services {
            for (_, id) in self.bus_subs.drain() {
                s.bus.do_send(Unsubscribe { id });
            }
        }
        tracing::debug!(conn = self.cx.id, "mcp connection closed");
    }
}

/// A subscribed channel's event: `notifications/resources/updated` for every
/// URI watching it (`seq` and a small `payload` are shoal additions).
impl Handler<BusEvent> for McpConn {
    type Result = ();

    fn handle(&mut self, ev: BusEvent, ctx: &mut Context<Self>) {
        let uris: Vec<String> = self
            .subs
            .iter()
            .filter(|(_, c)| **c == ev.channel)
            .map(|(u, _)| u.clone())
            .collect();
        let small = serde_json::to_vec(&*ev.payload)
            .map(|b| b.len() <= 8192)
            .unwrap_or(false);
        let listened: Vec<(String, Json)> = self
            .listens
            .values()
            .filter(|l| l.acked)
            .flat_map(|l| {
                l.chans
                    .iter()
                    .filter(|(_, c)| *c == ev.channel)
                    .map(|(u, _)| (u.clone(), l.id.clone()))
            })
            .collect();
        let tagged = uris
            .into_iter()
            .map(|u| (u, None))
            .chain(listened.into_iter().map(|(u, id)| (u, Some(id))));
        for (uri, listen) in tagged {
            let mut params = json!({"uri": uri, "seq": ev.seq});
            if small {
                params["payload"] = (*ev.payload).clone();
            }
            if let Some(id) = listen {
                params["_meta"] = json!({mcp_era::SUBSCRIPTION_ID_KEY: id});
            }
            let frame = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params});
            conn::write(&self.tx, ctx, &frame);
        }
    }
}

impl StreamHandler<FrameItem> for McpConn {
    fn handle(&mut self, FrameItem(item): FrameItem, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        match conn::incoming(&self.cx, &self.tx, ctx, item) {
            Some(rpc::Incoming::Request { id, method, params }) => {
                self.request(id, method, params, ctx)
            }
            Some(rpc::Incoming::Notification { method, params }) => {
                self.notification(&method, params, ctx)
            }
            Some(rpc::Incoming::Invalid { .. }) | None => {}
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        // The client stopped sending: answer what is in flight, then stop. A half-close
        // (the shim after its client closed stdin) waits for the answers; a hang-up (the
        // shim was killed) cancels the calls in flight (docs/protocol.md §10).
        if self.inflight.is_empty() {
            ctx.stop();
            return;
        }
        self.closing = true;
        if let Some(peer) = self.cx.peer.clone() {
            ctx.run_interval(conn::HANGUP_POLL, move |act, _ctx| {
                if conn::hung_up(&peer) {
                    for f in act.inflight.values_mut() {
                        f.cancelled = true;
                        f.cancel.cancel();
                    }
                }
            });
        }
    }
}
