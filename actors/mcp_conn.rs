//! McpConn: the MCP-facing actor (contract §2, reference-protocol §5).
//!
//! `initialize` negotiates the protocol version; `tools/call` validates the
//! arguments against the advertised schema, turns the call into typed session
//! messages and folds the reply into a `CallToolResult` (bounded text, a
//! resource link, structured content matching the `outputSchema`). Tool
//! failures are `isError` results; JSON-RPC errors are for broken envelopes,
//! unknown tools and unknown methods (`server/discover` gets `-32601` at once).
//! The session is attached lazily: the shim's `shoal/attach` notification
//! names it, else `default`.

use std::path::PathBuf;

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use super::conn::{self, ConnContext, FrameItem, Writer};
use super::health::Registration;
use super::kernel_conn::exec_params_with_default;
use super::msg::{AttachSession, ClientCount, Exec, SessionError, SessionHandle};
use crate::lang::Position;
use crate::proto::frame::Frame;
use crate::proto::rpc::{self, RpcError};
use crate::proto::{kernel, mcp};

type Reply = LocalBoxActorFuture<McpConn, Result<Json, RpcError>>;

pub struct McpConn {
    cx: ConnContext,
    tx: Writer,
    reg: Registration,
    version: Option<&'static str>,
    want_session: String,
    want_cwd: Option<PathBuf>,
    token: Option<String>,
    attached: Option<SessionHandle>,
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
            token: None,
            attached: None,
        }
    }

    fn notification(&mut self, method: &str, params: Json) {
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
                self.token = p
                    .get("token")
                    .and_then(Json::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string);
            }
            "notifications/initialized" | "notifications/cancelled" => {}
            other => tracing::debug!(conn = self.cx.id, method = other, "ignored notification"),
        }
    }

    fn request(&mut self, id: Json, method: String, params: Json, ctx: &mut Context<Self>) {
        let fut = self.dispatch(&method, params);
        ctx.wait(fut.map(move |res, act, ctx| {
            let frame = rpc::reply(&id, res);
            conn::write(&act.tx, ctx, &frame);
        }));
    }

    fn dispatch(&mut self, method: &str, params: Json) -> Reply {
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
            "tools/list" => Box::pin(ready(Ok(json!({"tools": mcp::tools()})))),
            "tools/call" => self.tools_call(params),
            other => Box::pin(ready(Err(RpcError::method_not_found(other)))),
        }
    }

    fn tools_call(&mut self, params: Json) -> Reply {
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
        if name != "shoal_exec" {
            return Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unknown tool {name:?}"
            )))));
        }
        let args = p.get("arguments").cloned().unwrap_or_else(|| json!({}));
        if let Err(structured) = mcp::validate_args(name, &args) {
            return Box::pin(ready(Ok(mcp::tool_error(structured))));
        }
        let args: Map<String, Json> = args.as_object().cloned().unwrap_or_default();
        let (src, position) = match exec_params_with_default(&args, Position::Value) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Ok(mcp::tool_error_rpc(&e)))),
        };
        Box::pin(self.session().then(move |h, _act, _ctx| {
            let fut = async move {
                let handle = match h {
                    Ok(h) => h,
                    Err(e) => return Ok(mcp::tool_error_rpc(&e)),
                };
                let name = handle.name.clone();
                let r = handle
                    .send(Exec {
                        src,
                        position,
                        tty: false,
                    })
                    .await;
                let r = r.map_err(|_| SessionError::Closed(name)).and_then(|r| r);
                Ok(match r {
                    Ok(x) => {
                        mcp::tool_success(kernel::exec_result(x.n, x.wire, x.render, x.elapsed_ms))
                    }
                    Err(e) => mcp::tool_error_rpc(&conn::session_error(e)),
                })
            };
            fut.into_actor(_act)
        }))
    }

    /// The attached session, attaching on first use.
    fn session(&mut self) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Some(h) = &self.attached {
            if h.addr.connected() {
                return Box::pin(ready(Ok(h.clone())));
            }
        }
        if self.token.is_some() || self.cx.foreign {
            return Box::pin(ready(Err(RpcError::new(
                rpc::AUTH_FAILED,
                "bearer tokens are not available in this daemon yet",
            ))));
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(AttachSession {
            name: self.want_session.clone(),
            cwd: self.want_cwd.clone(),
        });
        Box::pin(f.into_actor(self).map(|r, act, _ctx| {
            let h = r
                .map_err(|e| RpcError::internal(e.to_string()))?
                .map_err(conn::session_error)?;
            if let Some(old) = act.attached.replace(h.clone()) {
                old.notify(ClientCount { delta: -1 });
            }
            h.notify(ClientCount { delta: 1 });
            Ok(h)
        }))
    }
}

impl Actor for McpConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        if let Some(h) = self.attached.take() {
            h.notify(ClientCount { delta: -1 });
        }
        tracing::debug!(conn = self.cx.id, "mcp connection closed");
    }
}

impl StreamHandler<FrameItem> for McpConn {
    fn handle(&mut self, FrameItem(item): FrameItem, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        match item {
            Err(e) => {
                tracing::debug!(conn = self.cx.id, "read error: {e}");
                ctx.stop();
            }
            Ok(Frame::Oversized { len }) => {
                tracing::warn!(conn = self.cx.id, len, "oversized frame refused");
                conn::write(&self.tx, ctx, &rpc::oversized(self.cx.limit, len));
            }
            Ok(Frame::Line(bytes)) => match rpc::classify(&bytes) {
                rpc::Incoming::Invalid { id, error } => {
                    conn::write(&self.tx, ctx, &rpc::error_response(&id, &error))
                }
                rpc::Incoming::Notification { method, params } => {
                    self.notification(&method, params)
                }
                rpc::Incoming::Request { id, method, params } => {
                    self.request(id, method, params, ctx)
                }
            },
        }
    }
}
