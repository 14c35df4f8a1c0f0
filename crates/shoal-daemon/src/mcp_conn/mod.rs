//! McpConn: the MCP-facing actor (docs/protocol.md §2, §12, docs/rules.md §18).
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
//!
//! This file holds the actor, the request path and dispatch; `tools`, `resources` and
//! `subscriptions` hold those method families.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::Value as Json;

use crate::conn::GetServices;
use crate::conn::{self, ConnContext};
use crate::event_bus::{SubId, Unsubscribe};
use crate::health::Registration;
use crate::journal_writer::Services;
use crate::msg::CallOrigin;
use crate::peer::{self, FrameItem, Writer};
use crate::sessions::handle::SessionHandle;
use crate::sessions::session::CallCancel;
use shoal_proto::elide::Budget;
use shoal_proto::frame::Frame;
use shoal_proto::kernel::GetRequest;
use shoal_proto::mcp::notify;
use shoal_proto::mcp::{self, McpResult};
use shoal_proto::mcp_era::{self, Era};
use shoal_proto::mcp_tasks_ext;
use shoal_proto::rpc::{self, RpcError};

mod attach;
mod elicit;
mod resources;
mod subscriptions;
pub mod tasks;
mod tools;

type Reply = LocalBoxActorFuture<McpConn, Result<Json, RpcError>>;
/// What a request answers: a tool result (`tools/call`, `tasks/result`) carried
/// typed to the reply frame, or a JSON result.
type ToolReply = LocalBoxActorFuture<McpConn, Result<McpResult, RpcError>>;

/// A JSON-answered method's future as a [`ToolReply`].
fn json_reply(r: Reply) -> ToolReply {
    Box::pin(r.map(|r, _act, _ctx| r.map(McpResult::Json)))
}

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
    /// The shim named the session (else a token principal gets its own default).
    session_named: bool,
    want_cwd: Option<PathBuf>,
    /// The client's environment, forwarded by the shim.
    want_env: Option<Vec<(String, String)>>,
    token: Option<String>,
    /// A `shoal/attach` was taken: the connection's principal is named for good.
    attach_seen: bool,
    attached: Option<SessionHandle>,
    /// The principal's policy and sandbox (Leash), set on attach.
    gate: Option<Arc<shoal_policy::Gate>>,
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
    /// Leash approvals asked of the user (`elicitation/create`).
    elicit: elicit::Elicit,
    /// How a live view names this client (`mcp: NAME` once initialized).
    client_label: Arc<str>,
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
            session_named: false,
            want_cwd: None,
            want_env: None,
            token: None,
            attach_seen: false,
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
            elicit: Default::default(),
            client_label: Arc::from("mcp"),
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
                // The shim's (or the HTTP bridge's) one attach names the connection's
                // principal. Once named, or once a call has admitted a principal, it
                // stays: a later attach would trade the token for another, or for
                // none (the local uid the socket's peer is).
                if self.attach_seen || self.gate.is_some() {
                    tracing::warn!(conn = self.cx.id, "shoal/attach after the first, ignored");
                    return;
                }
                self.attach_seen = true;
                let p = params.as_object().cloned().unwrap_or_default();
                if let Some(s) = p
                    .get("session")
                    .and_then(Json::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.want_session = s.to_string();
                    self.session_named = true;
                }
                // A shim started from a directory that no longer exists still works.
                self.want_cwd = p
                    .get("cwd")
                    .and_then(Json::as_str)
                    .map(PathBuf::from)
                    .filter(|d| d.is_dir());
                let env = match p.get("env").filter(|v| !v.is_null()) {
                    None => Ok(None),
                    Some(v) => serde_json::from_value(v.clone())
                        .map(Some)
                        .map_err(|e| format!("env: {e}")),
                };
                match env.and_then(peer::env_vars) {
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
                peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
                return;
            }
            self.era = Some(ConnEra::Legacy);
            Ok(Era::Legacy)
        } else {
            mcp_era::classify(&params)
        };
        self.serve(id, method, params, era, ctx)
    }

    /// A frame read in place: served from its params parsed whole (or
    /// classified whole when they do not parse on their own).
    fn raw_request(&mut self, req: rpc::RawRequest<'_>, bytes: &[u8], ctx: &mut Context<Self>) {
        match rpc::params_value(req.params) {
            Some(params) => self.request(req.id, req.method, params, ctx),
            None => self.incoming(rpc::classify(bytes), ctx),
        }
    }

    /// A classified frame (what the in-place read left to the whole parse).
    fn incoming(&mut self, incoming: rpc::Incoming, ctx: &mut Context<Self>) {
        match incoming {
            rpc::Incoming::Request { id, method, params } => self.request(id, method, params, ctx),
            rpc::Incoming::Notification { method, params } => {
                self.notification(&method, params, ctx)
            }
            rpc::Incoming::Invalid { id, error } => {
                peer::write(&self.tx, ctx, &rpc::error_response(&id, &error))
            }
        }
    }

    /// Serve a request in the era its envelope settled (or refuse it).
    fn serve(
        &mut self,
        id: Json,
        method: String,
        params: Json,
        era: Result<Era, RpcError>,
        ctx: &mut Context<Self>,
    ) {
        let era = match era {
            Ok(e) => e,
            Err(e) => {
                peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
                return;
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
            peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
            return;
        }
        match era {
            Era::Legacy => {
                if method == "server/discover" {
                    let r = Ok(mcp_era::discover_result());
                    peer::write(&self.tx, ctx, &rpc::reply(&id, r));
                    return;
                }
                self.request_in(id, method, params, None, ctx)
            }
            Era::Modern(env) => {
                self.era = Some(ConnEra::Modern);
                match method.as_str() {
                    "server/discover" => {
                        let r = Ok(mcp_era::discover_result());
                        peer::write(&self.tx, ctx, &rpc::reply(&id, r));
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
        let reply_frame = move |id: &Json, answer: Result<McpResult, RpcError>| match stamp.as_ref()
        {
            Some(s) => s.reply_frame(id, answer),
            None => rpc::reply_frame(id, answer),
        };
        self.req_tasks_ext = modern
            .as_ref()
            .is_some_and(|e| e.has_extension(mcp_tasks_ext::EXTENSION));
        self.req_session = modern.and_then(|e| e.session);
        let session = self
            .req_session
            .clone()
            .or_else(|| self.attached.as_ref().map(|h| h.name.clone()));
        let span = peer::request_span("mcp", self.cx.id, session.as_deref(), &id, &method);
        let _entered = span.clone().entered();
        let key = id_key(&id);
        let origin = CallOrigin {
            conn: self.cx.id,
            request: key.clone(),
            client: Some(self.client_label.clone()),
        };
        let concurrent = matches!(
            method.as_str(),
            "tools/call" | "resources/read" | "tasks/result"
        );
        if !concurrent || self.inflight.len() >= MAX_IN_FLIGHT {
            // In order; at the in-flight cap this also stops reading (backpressure).
            let cancel = CallCancel::new();
            cancel.set_origin(origin);
            let fut = self.dispatch(&method, params, cancel, ctx);
            self.req_session = None;
            self.req_tasks_ext = false;
            ctx.wait(fut.map(move |answer, act, ctx| {
                let _span = span.entered();
                peer::request_done(&answer);
                peer::write_frame(&act.tx, ctx, reply_frame(&id, answer));
            }));
            return;
        }
        let evaluates = method == "tools/call"
            && params.get("name").and_then(Json::as_str) == Some(mcp::TOOLS[0].name);
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| evaluates && (t.is_string() || t.is_number()))
            .cloned();
        let progress = token.map(|token| self.start_progress(token, ctx));
        let cancel = CallCancel::new();
        cancel.set_origin(origin);
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
        ctx.spawn(fut.map(move |answer, act, ctx| {
            let _span = span.entered();
            peer::request_done(&answer);
            let done = act.inflight.remove(&key);
            if let Some(h) = done.as_ref().and_then(|f| f.progress) {
                ctx.cancel_future(h);
            }
            if done.is_some_and(|f| f.cancelled) {
                tracing::debug!(conn = act.cx.id, request = %key, "cancelled request finished; no reply");
            } else {
                peer::write_frame(&act.tx, ctx, reply_frame(&id, answer));
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
            let progress = notify::Progress {
                progress_token: &token,
                progress: (secs * 1000.0).round() / 1000.0,
                message: format!("running for {secs:.1}s"),
            };
            peer::write_frame(&act.tx, ctx, notify::progress(&progress));
        })
    }

    fn dispatch(
        &mut self,
        method: &str,
        params: Json,
        cancel: Arc<CallCancel>,
        ctx: &mut Context<Self>,
    ) -> ToolReply {
        match method {
            "tools/call" => self.tools_call(params, cancel),
            "tasks/result" if self.era != Some(ConnEra::Modern) => {
                Box::pin(self.session().then(move |h, act, _ctx| {
                    let h = h.and_then(|h| act.task_access(h, "tasks/result"));
                    async move {
                            crate::mcp_conn::tasks::result(h?, params, Budget::default()).await
                        }
                        .into_actor(act)
                }))
            }
            _ => json_reply(self.dispatch_json(method, params, ctx)),
        }
    }

    /// The methods whose handlers answer JSON.
    fn dispatch_json(&mut self, method: &str, params: Json, ctx: &mut Context<Self>) -> Reply {
        match method {
            "initialize" => {
                let p: mcp::InitializeParams = match mcp::read_params(method, params) {
                    Ok(p) => p,
                    Err(e) => return Box::pin(ready(Err(e))),
                };
                let requested = p.protocol_version.as_deref();
                let v = mcp::negotiate(requested);
                self.version = Some(v);
                tracing::debug!(
                    conn = self.cx.id,
                    requested,
                    negotiated = v,
                    "mcp initialize"
                );
                self.elicit_initialized(&p);
                Box::pin(ready(Ok(mcp::initialize_result(v))))
            }
            "ping" => Box::pin(ready(Ok(mcp::result_json(mcp::Empty {})))),
            "tools/list" => Box::pin(ready(Ok(mcp::result_json(mcp::tools_list(self.caps()))))),
            "resources/list" => self.resources_list(params),
            "prompts/list" => Box::pin(ready(Ok(mcp::prompts()))),
            "prompts/get" => Box::pin(ready(
                mcp::read_params(method, params)
                    .and_then(|p| mcp::prompt_get(&p))
                    .map(mcp::result_json),
            )),
            "completion/complete" => self.complete(params),
            "resources/templates/list" => Box::pin(ready(Ok(mcp::resource_templates(self.caps())))),
            "resources/read" => self.resources_read(params),
            "resources/subscribe" => self.subscribe(params, ctx),
            "resources/unsubscribe" => self.unsubscribe(params, ctx),
            // The 2026 Tasks extension: get, update, cancel (no list, no result).
            "tasks/get" | "tasks/update" | "tasks/cancel" if self.era == Some(ConnEra::Modern) => {
                let method = method.to_string();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    let h = h.and_then(|h| act.task_access(h, &method));
                    async move { crate::mcp_conn::tasks::ext_method(h?, method, params).await }
                        .into_actor(act)
                }))
            }
            "tasks/get" | "tasks/list" | "tasks/cancel" if self.era != Some(ConnEra::Modern) => {
                let method = method.to_string();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    let h = h.and_then(|h| act.task_access(h, &method));
                    async move { crate::mcp_conn::tasks::method(h?, method, params).await }
                        .into_actor(act)
                }))
            }
            other => Box::pin(ready(Err(RpcError::method_not_found(other)))),
        }
    }
}

/// `value.get` through the session supervisor (MCP never keeps ANSI escapes).
pub async fn get_value(
    handle: &SessionHandle,
    reference: String,
    req: GetRequest,
) -> Result<Json, RpcError> {
    let read = crate::sessions::exec::get_value(handle, reference, req, false).await?;
    rpc::to_result(&read)
}

impl Actor for McpConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
        // Which capabilities exist decides what is advertised: ask first.
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.services.send(GetServices);
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
            h.count_client(-1);
        }
        for (_, h) in self.named.drain() {
            h.count_client(-1);
        }
        if let Some(s) = &self.services {
            for (_, id) in self.bus_subs.drain() {
                s.bus.do_send(Unsubscribe { id });
            }
        }
        tracing::debug!(conn = self.cx.id, "mcp connection closed");
    }
}

impl StreamHandler<FrameItem> for McpConn {
    fn handle(&mut self, FrameItem(item): FrameItem, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        if self.elicit.take_response(&item) {
            return;
        }
        match &item {
            Ok(Frame::Line(bytes)) => match rpc::classify_request(bytes) {
                rpc::Classified::Raw(req) => self.raw_request(req, bytes, ctx),
                rpc::Classified::Other(other) => self.incoming(other, ctx),
            },
            // Read errors and oversized frames: as on every connection.
            _ => {
                conn::incoming(&self.cx, &self.tx, ctx, item);
            }
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        // The client stopped sending: answer what is in flight, then stop. A half-close
        // (the shim after its client closed stdin) waits for the answers; a hang-up (the
        // shim was killed) cancels the calls in flight (docs/protocol.md §10).
        self.elicit.abandon();
        if self.inflight.is_empty() {
            ctx.stop();
            return;
        }
        self.closing = true;
        if let Some(peer) = self.cx.peer.clone() {
            ctx.spawn(actix::fut::wrap_future(peer::hang_up(peer)).map(
                |(), act: &mut Self, ctx| {
                    for f in act.inflight.values_mut() {
                        f.cancelled = true;
                        f.cancel.cancel();
                    }
                    // Nobody reads the answers: the calls' futures go with the actor,
                    // waits (a PTY `wait_for`, a task result) included, and so does its place.
                    ctx.stop();
                },
            ));
        }
    }
}
