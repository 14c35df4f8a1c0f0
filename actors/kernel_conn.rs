//! KernelConn: one kernel JSON-RPC connection (contract §2,
//! reference-protocol §1.3–§2). Frames in, typed messages out, frames back.
//!
//! Requests are handled strictly in order (each waits in the actor context),
//! so pipelined `session.attach` + `exec` behave as if sent one by one and
//! replies keep request order. Notifications are ignored; malformed frames get
//! `-32700` and the connection stays.

use std::path::PathBuf;

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use super::conn::{self, ConnContext, FrameItem, Writer};
use super::health::Registration;
use super::msg::{
    AttachSession, ClientCount, CloseSession, Crash, Exec, GetStatus, GetValue, ListSessions,
    SessionError, SessionHandle, ValueFormat,
};
use crate::lang::Position;
use crate::paths;
use crate::proto::frame::Frame;
use crate::proto::kernel;
use crate::proto::rpc::{self, RpcError};

type Reply = LocalBoxActorFuture<KernelConn, Result<Json, RpcError>>;

const METHODS: &[&str] = &[
    "session.attach",
    "session.list",
    "session.close",
    "exec",
    "value.get",
    "daemon.status",
    "debug.crash",
];

pub struct KernelConn {
    cx: ConnContext,
    tx: Writer,
    reg: Registration,
    attached: Option<Attachment>,
}

struct Attachment {
    handle: SessionHandle,
    tty: bool,
}

impl KernelConn {
    pub fn new(cx: ConnContext, tx: Writer, reg: Registration) -> Self {
        KernelConn {
            cx,
            tx,
            reg,
            attached: None,
        }
    }

    fn request(&mut self, id: Json, method: String, params: Json, ctx: &mut Context<Self>) {
        let fut = self.dispatch(&method, params);
        ctx.wait(fut.map(move |res, act, ctx| {
            if let Err(e) = &res {
                if e.code == rpc::INTERNAL_ERROR {
                    act.reg.stats.set_error(format!("{method}: {}", e.message));
                }
            }
            let frame = rpc::reply(&id, res);
            conn::write(&act.tx, ctx, &frame);
        }));
    }

    fn dispatch(&mut self, method: &str, params: Json) -> Reply {
        if !METHODS.contains(&method) || (method == "debug.crash" && !conn::debug_hooks()) {
            return Box::pin(ready(Err(RpcError::method_not_found(method))));
        }
        let p = match rpc::params_object(&params) {
            Ok(p) => p.clone(),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        if method == "session.attach" {
            return self.attach(p);
        }
        let Some(att) = &self.attached else {
            return Box::pin(ready(Err(RpcError::new(
                rpc::NOT_ATTACHED,
                "attach to a session first",
            ))));
        };
        let handle = att.handle.clone();
        let tty = att.tty;
        match method {
            "session.list" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.send(ListSessions);
                Box::pin(
                    async move {
                        f.await
                            .map(|s| json!({"sessions": s}))
                            .map_err(|e| RpcError::internal(e.to_string()))
                    }
                    .into_actor(self),
                )
            }
            "session.close" => self.close(p, handle),
            "daemon.status" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.send(GetStatus);
                Box::pin(
                    async move { f.await.map_err(|e| RpcError::internal(e.to_string())) }
                        .into_actor(self),
                )
            }
            "exec" => match exec_params(&p) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((src, position)) => {
                    let f = handle.send(Exec { src, position, tty });
                    let name = handle.name.clone();
                    Box::pin(
                        async move {
                            let r = f
                                .await
                                .map_err(|_| SessionError::Closed(name))
                                .and_then(|r| r);
                            r.map(|x| kernel::exec_result(x.n, x.wire, x.render, x.elapsed_ms))
                                .map_err(conn::session_error)
                        }
                        .into_actor(self),
                    )
                }
            },
            "value.get" => match value_get_params(&p) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((reference, format)) => {
                    let f = handle.send(GetValue {
                        reference,
                        format,
                        tty,
                    });
                    let name = handle.name.clone();
                    Box::pin(
                        async move {
                            f.await
                                .map_err(|_| SessionError::Closed(name))
                                .and_then(|r| r)
                                .map_err(conn::session_error)
                        }
                        .into_actor(self),
                    )
                }
            },
            "debug.crash" => {
                handle.notify(Crash);
                Box::pin(ready(Ok(json!({"crashed": handle.name}))))
            }
            _ => Box::pin(ready(Err(RpcError::method_not_found(method)))),
        }
    }

    fn attach(&mut self, p: Map<String, Json>) -> Reply {
        let parsed = (|| -> Result<_, RpcError> {
            let session = rpc::opt_str(&p, "session")?
                .unwrap_or("default")
                .to_string();
            if session.is_empty() {
                return Err(RpcError::invalid_params("session must not be empty"));
            }
            let cwd = rpc::opt_str(&p, "cwd")?.map(PathBuf::from);
            let token = rpc::opt_str(&p, "token")?;
            let (kind, tty) = match p.get("client") {
                None | Some(Json::Null) => (String::new(), false),
                Some(Json::Object(c)) => (
                    rpc::opt_str(c, "kind")?.unwrap_or("").to_string(),
                    rpc::opt_bool(c, "tty")?.unwrap_or(false),
                ),
                Some(_) => return Err(RpcError::invalid_params("client must be an object")),
            };
            if token.is_some() || self.cx.foreign {
                return Err(RpcError::new(
                    rpc::AUTH_FAILED,
                    "bearer tokens are not available in this daemon yet",
                ));
            }
            Ok((session, cwd, kind, tty))
        })();
        let (session, cwd, kind, tty) = match parsed {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(AttachSession { name: session, cwd });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let handle = r
                .map_err(|e| RpcError::internal(e.to_string()))?
                .map_err(conn::session_error)?;
            act.set_attachment(Some(Attachment {
                handle: handle.clone(),
                tty,
            }));
            tracing::debug!(conn = act.cx.id, session = %handle.name, client = %kind, "attached");
            Ok(json!({
                "session": handle.name,
                "created": handle.created,
                "principal": format!("uid:{}", paths::euid()),
                "client": {"kind": kind, "tty": tty},
                "cwd": {"display": handle.shared.cwd.display().to_string()},
                "env_hash": "local",
                "caps_enforced": false,
                "channels": [],
            }))
        }))
    }

    fn close(&mut self, p: Map<String, Json>, current: SessionHandle) -> Reply {
        let name = match rpc::opt_str(&p, "session") {
            Ok(n) => n
                .map(str::to_string)
                .unwrap_or_else(|| current.name.clone()),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(CloseSession { name: name.clone() });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            r.map_err(|e| RpcError::internal(e.to_string()))?
                .map_err(conn::session_error)?;
            if act.attached.as_ref().is_some_and(|a| a.handle.name == name) {
                act.attached = None;
            }
            Ok(json!({"session": name, "closed": true}))
        }))
    }

    fn set_attachment(&mut self, next: Option<Attachment>) {
        if let Some(old) = self.attached.take() {
            old.handle.notify(ClientCount { delta: -1 });
        }
        if let Some(new) = &next {
            new.handle.notify(ClientCount { delta: 1 });
        }
        self.attached = next;
    }
}

/// `exec` params: `src`, `position` (default stmt), `mode` (run only for now).
pub fn exec_params(p: &Map<String, Json>) -> Result<(String, Position), RpcError> {
    exec_params_with_default(p, Position::Stmt)
}

pub fn exec_params_with_default(
    p: &Map<String, Json>,
    default: Position,
) -> Result<(String, Position), RpcError> {
    let src = rpc::req_str(p, "src")?.to_string();
    let position = match rpc::opt_str(p, "position")? {
        None => default,
        Some("value") => Position::Value,
        Some("stmt") => Position::Stmt,
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "position must be stmt or value (got {other:?})"
            )))
        }
    };
    match rpc::opt_str(p, "mode")? {
        None | Some("run") => {}
        Some("plan") => {
            return Err(RpcError::invalid_params(
                "mode \"plan\" is not available in this daemon yet",
            ))
        }
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "mode must be run or plan (got {other:?})"
            )))
        }
    }
    if rpc::opt_bool(p, "background")?.unwrap_or(false)
        || rpc::opt_bool(p, "async")?.unwrap_or(false)
    {
        return Err(RpcError::invalid_params(
            "background tasks are not available in this daemon yet",
        ));
    }
    if p.get("timeout_ms").is_some_and(|v| !v.is_null()) {
        return Err(RpcError::invalid_params(
            "timeout_ms is not available in this daemon yet",
        ));
    }
    Ok((src, position))
}

fn value_get_params(p: &Map<String, Json>) -> Result<(String, ValueFormat), RpcError> {
    let reference = rpc::req_str(p, "ref")?.to_string();
    let format = match rpc::opt_str(p, "format")? {
        None | Some("json") => ValueFormat::Json,
        Some("render") => ValueFormat::Render,
        Some("inline") => ValueFormat::Inline,
        Some("raw") => ValueFormat::Raw,
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "format must be json, render, raw or inline (got {other:?})"
            )))
        }
    };
    let has = |k: &str| p.get(k).is_some_and(|v| !v.is_null() && v != "");
    if has("path") || has("slice") {
        return Err(RpcError::new(
            rpc::BAD_PATH_OR_SLICE,
            "paths and slices are not available in this daemon yet",
        )
        .with_data(json!({"ref": reference})));
    }
    Ok((reference, format))
}

impl Actor for KernelConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.set_attachment(None);
        tracing::debug!(conn = self.cx.id, "kernel connection closed");
    }
}

impl StreamHandler<FrameItem> for KernelConn {
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
                rpc::Incoming::Notification { .. } => {}
                rpc::Incoming::Request { id, method, params } => {
                    self.request(id, method, params, ctx)
                }
            },
        }
    }
}
