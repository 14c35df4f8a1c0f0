//! KernelConn: one kernel JSON-RPC connection (docs/protocol.md §2,
//! reference-protocol §1.3–§2). Frames in, typed messages out, frames back.
//!
//! Requests are handled strictly in order (each waits in the actor context),
//! so pipelined `session.attach` + `exec` behave as if sent one by one and
//! replies keep request order. Notifications are ignored; malformed frames get
//! `-32700` and the connection stays.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use super::conn::{self, ConnContext, FrameItem, Writer};
use super::event_bus::{BusEvent, Publish, ReadEvents, SubId, SubscribeReplay, Unsubscribe};
use super::health::Registration;
use super::journal_writer::{self as jw, Services};
use super::leash_calls as lc;
use super::msg::{
    ClientCount, CloseSession, Crash, GetServices, GetStatus, GetValue, ListSessions, SessionError,
};
use super::plan_store::PlanOp;
use super::session::CallCancel;
use super::session_handle::{AttachSession, SessionHandle};
use crate::lang::Position;
use crate::proto::frame::Frame;
use crate::proto::kernel;
use crate::proto::rpc::{self, RpcError};
use crate::sync::Locked;

type Reply = LocalBoxActorFuture<KernelConn, Result<Json, RpcError>>;

const METHODS: &[&str] = &[
    "session.attach",
    "parse",
    "complete",
    "session.list",
    "session.close",
    "exec",
    "value.get",
    "daemon.status",
    "debug.crash",
    "journal.query",
    "journal.get",
    "blob.get",
    "events.read",
    "events.publish",
    "events.subscribe",
    "events.unsubscribe",
    "pty.open",
    "pty.send",
    "pty.read",
    "pty.resize",
    "pty.close",
    "pty.list",
    "task.get",
    "task.list",
    "task.await",
    "task.cancel",
    "task.suspend",
    "task.resume",
    "explain",
    "plan.get",
    "plan.list",
    "plan.apply",
    "plan.approve",
    "plan.deny",
    "cap.request",
];

pub struct KernelConn {
    cx: ConnContext,
    tx: Writer,
    reg: Registration,
    attached: Option<Attachment>,
    /// `events.subscribe` subscriptions of this connection, by channel.
    subs: BTreeMap<String, SubId>,
    services: Option<Services>,
    /// Shared with the reader task (see [`KernelConn::start_with`]).
    calls: Calls,
}

struct Attachment {
    handle: SessionHandle,
    tty: bool,
    /// The principal's policy and sandbox (Leash).
    gate: Arc<crate::leash::Gate>,
    /// The bearer token, re-checked before every call (a revoke holds at once).
    token: Option<String>,
}

impl KernelConn {
    pub fn new(cx: ConnContext, tx: Writer, reg: Registration) -> Self {
        KernelConn {
            cx,
            tx,
            reg,
            attached: None,
            subs: BTreeMap::new(),
            services: None,
            calls: Arc::default(),
        }
    }

    fn request(
        &mut self,
        id: Json,
        method: String,
        params: Json,
        cancel: Arc<CallCancel>,
        ctx: &mut Context<Self>,
    ) {
        let session = self.attached.as_ref().map(|a| a.handle.name.clone());
        let span = conn::request_span("kernel", self.cx.id, session.as_deref(), &id, &method);
        let entered = span.clone().entered();
        let fut = if cancel.is_cancelled() {
            Box::pin(ready(Err(conn::session_error(
                super::session::cancelled_before_running(),
            ))))
        } else {
            self.dispatch(&method, params, cancel)
        };
        drop(entered);
        ctx.wait(fut.map(move |res, act, ctx| {
            let _span = span.entered();
            conn::request_done(&res);
            lock_calls(&act.calls).remove(&id_key(&id));
            if let Err(e) = &res {
                if e.code == rpc::INTERNAL_ERROR {
                    act.reg.stats.set_error(format!("{method}: {}", e.message));
                }
            }
            conn::write_frame(&act.tx, ctx, rpc::reply_frame(&id, res, None));
        }));
    }

    fn dispatch(&mut self, method: &str, params: Json, cancel: Arc<CallCancel>) -> Reply {
        if !METHODS.contains(&method) || (method == "debug.crash" && !conn::debug_hooks()) {
            return Box::pin(ready(Err(RpcError::method_not_found(method))));
        }
        let p = match rpc::params_object(&params) {
            Ok(p) => p.clone(),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        match method {
            "session.attach" => return self.attach(p),
            // Context-free: answered before attaching, by no session.
            "parse" => return Box::pin(crate::proto::syntax::parse_async(&p).into_actor(self)),
            "complete" => return Box::pin(ready(crate::proto::syntax::complete_method(&p))),
            _ => {}
        }
        let Some(att) = &self.attached else {
            return Box::pin(ready(Err(RpcError::new(
                rpc::NOT_ATTACHED,
                "attach to a session first",
            ))));
        };
        let handle = att.handle.clone();
        let tty = att.tty;
        let gate = att.gate.clone();
        if let Err(e) = lc::recheck(att.token.as_deref(), self.cx.foreign, &gate) {
            return Box::pin(ready(Err(e)));
        }
        match method {
            "session.list" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.send(ListSessions);
                Box::pin(
                    async move {
                        f.await
                            .map(|s| json!({"sessions": s}))
                            .map_err(RpcError::from)
                    }
                    .into_actor(self),
                )
            }
            "session.close" => self.close(p, handle),
            "daemon.status" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.send(GetStatus);
                Box::pin(async move { f.await.map_err(RpcError::from) }.into_actor(self))
            }
            "exec" if p.get("mode").and_then(Json::as_str) == Some("approved") => {
                match crate::proto::elide::Budget::from_json(p.get("elide"))
                    .map_err(RpcError::invalid_params)
                {
                    Err(e) => Box::pin(ready(Err(e))),
                    Ok(budget) => {
                        Box::pin(
                            async move {
                                lc::exec_approved(handle, gate, &p, tty, budget, cancel).await
                            }
                            .into_actor(self),
                        )
                    }
                }
            }
            "exec" if is_plan_mode(&p) => match kernel::exec_params(&p, Position::Stmt) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((src, _)) => Box::pin(lc::plan(handle, gate, src).into_actor(self)),
            },
            "explain" => match rpc::req_str(&p, "src") {
                Err(e) => Box::pin(ready(Err(e))),
                Ok(src) => Box::pin(lc::explain(handle, gate, src.to_string()).into_actor(self)),
            },
            "plan.get" | "plan.list" | "plan.approve" | "plan.deny" | "cap.request" => {
                let op = match method {
                    "plan.list" => Ok(PlanOp::List),
                    "plan.get" => lc::plan_ref_param(&p).map(PlanOp::Get),
                    "plan.approve" => lc::plan_ref_param(&p).map(PlanOp::Approve),
                    "plan.deny" => lc::plan_ref_param(&p).map(PlanOp::Deny),
                    _ => lc::cap_request_params(&p)
                        .map(|(plan_ref, kinds)| PlanOp::Request { plan_ref, kinds }),
                };
                let is_list = method == "plan.list";
                match op {
                    Err(e) => Box::pin(ready(Err(e))),
                    Ok(op) => Box::pin(
                        async move {
                            let r = lc::plan_op(handle, gate, op).await?;
                            Ok(if is_list { json!({"plans": r}) } else { r })
                        }
                        .into_actor(self),
                    ),
                }
            }
            "plan.apply" => match lc::plan_ref_param(&p).and_then(|r| {
                let b = crate::proto::elide::Budget::from_json(p.get("elide"))
                    .map_err(RpcError::invalid_params)?;
                Ok((r, b))
            }) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((r, budget)) => {
                    Box::pin(lc::apply(handle, gate, r, tty, budget, cancel).into_actor(self))
                }
            },
            "exec" => match kernel::exec_params(&p, Position::Stmt).and_then(|(s, pos)| {
                let b = crate::proto::elide::Budget::from_json(p.get("elide"))
                    .map_err(RpcError::invalid_params)?;
                Ok((s, pos, b, super::task::task_opts(&p)?))
            }) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((src, position, budget, Some(opts))) => Box::pin(
                    super::task::exec_as_task(handle, src, position, tty, budget, opts, Some(gate))
                        .into_actor(self),
                ),
                Ok((src, position, budget, None)) => Box::pin(
                    super::exec::exec_elided(
                        handle,
                        src,
                        position,
                        tty,
                        budget,
                        cancel,
                        Some(gate),
                        true,
                    )
                    .into_actor(self),
                ),
            },
            m if m.starts_with("task.") => {
                Box::pin(super::task::kernel_method(handle, m.to_string(), p).into_actor(self))
            }
            "value.get" => match kernel::get_params(&p) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((reference, req)) => {
                    let (reference_copy, req_copy) = (reference.clone(), req.clone());
                    let f = handle.send(GetValue {
                        reference,
                        req,
                        tty,
                    });
                    let name = handle.name.clone();
                    let restore = restore_from_journal(&handle, reference_copy, req_copy, tty);
                    Box::pin(
                        async move {
                            match f
                                .await
                                .map_err(|_| SessionError::Closed(name))
                                .and_then(|r| r)
                            {
                                Err(SessionError::UnknownRef { reference }) => restore
                                    .await
                                    .unwrap_or(Err(SessionError::UnknownRef { reference })),
                                r => r,
                            }
                            .map_err(conn::session_error)
                        }
                        .into_actor(self),
                    )
                }
            },
            "events.read" | "events.publish" | "events.subscribe" | "events.unsubscribe" => {
                self.events_method(method, p)
            }
            "journal.query" | "journal.get" | "blob.get" => {
                self.journal_method(method, p, gate.principal.clone())
            }
            m if m.starts_with("pty.") => {
                Box::pin(super::pty::call_as(&handle, m, &p, Some(gate)).into_actor(self))
            }
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
            let env = conn::env_param(p.get("env")).map_err(RpcError::invalid_params)?;
            let token = rpc::opt_str(&p, "token")?;
            let (kind, tty) = match p.get("client") {
                None | Some(Json::Null) => (String::new(), false),
                Some(Json::Object(c)) => (
                    rpc::opt_str(c, "kind")?.unwrap_or("").to_string(),
                    rpc::opt_bool(c, "tty")?.unwrap_or(false),
                ),
                Some(_) => return Err(RpcError::invalid_params("client must be an object")),
            };
            let principal = lc::principal(token, self.cx.foreign)?;
            Ok((
                session,
                cwd,
                env,
                kind,
                tty,
                principal,
                token.map(str::to_string),
            ))
        })();
        let (session, cwd, env, kind, tty, principal, token) = match parsed {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.send(AttachSession {
            name: session,
            cwd,
            env,
            no_adapters: kind == "conformance",
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let handle = r?.map_err(conn::session_error)?;
            let gate = Arc::new(crate::leash::Gate::for_principal(&principal));
            let enforced = gate.caps_enforced();
            let opaque = gate.decide(&[crate::leash::Effect::Opaque]).verdict;
            let has_policy = gate.policy.get(&principal).is_some();
            act.set_attachment(Some(Attachment {
                handle: handle.clone(),
                tty,
                gate,
                token,
            }));
            tracing::debug!(conn = act.cx.id, session = %handle.name, client = %kind, "attached");
            Ok(json!({
                "session": handle.name,
                "created": handle.created,
                "env_differs": handle.env_differs,
                "principal": principal,
                "client": {"kind": kind, "tty": tty},
                "cwd": {"display": handle.shared.cwd.display().to_string()},
                "env_hash": "local",
                "caps": {
                    "enforced": enforced,
                    "tier": crate::leash::tier(),
                    "available_tier": crate::leash::tier(),
                    "policy_principal": has_policy.then_some(&principal),
                    "opaque": opaque.as_str(),
                },
                "caps_enforced": enforced,
                "channels": ["session.transcript", "journal", "approval", "render"],
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
            r?.map_err(conn::session_error)?;
            if act.attached.as_ref().is_some_and(|a| a.handle.name == name) {
                act.attached = None;
            }
            Ok(json!({"session": name, "closed": true}))
        }))
    }

    /// The journal and bus: from the attachment, else asked of the daemon once.
    fn with_services<F, Fut>(&mut self, f: F) -> Reply
    where
        F: FnOnce(Services) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<Json, RpcError>> + 'static,
    {
        if let Some(s) = self.known_services() {
            return Box::pin(f(s).into_actor(self));
        }
        self.cx.daemon_stats.enqueue();
        let q = self.cx.daemon.send(GetServices);
        Box::pin(q.into_actor(self).then(move |r, act, _ctx| {
            let s = r.ok().flatten();
            act.services = s.clone();
            async move {
                match s {
                    Some(s) => f(s).await,
                    None => Err(RpcError::internal("the journal is not running")),
                }
            }
            .into_actor(act)
        }))
    }

    /// `journal.query`, `journal.get`, `blob.get`.
    fn journal_method(&mut self, method: &str, p: Map<String, Json>, principal: String) -> Reply {
        match method {
            "journal.query" => {
                let query: crate::journal::Query = match serde_json::from_value(Json::Object(p)) {
                    Ok(q) => q,
                    Err(e) => {
                        return Box::pin(ready(Err(RpcError::invalid_params(format!(
                            "invalid journal.query params: {e}"
                        )))))
                    }
                };
                self.with_services(move |s| async move {
                    let scope = jw::scope_for(&principal);
                    let entries = s
                        .journal
                        .send(jw::QueryJournal { query, scope })
                        .await?
                        .map_err(journal_error)?;
                    serde_json::to_value(entries).map_err(|e| RpcError::internal(e.to_string()))
                })
            }
            "journal.get" => {
                let Some(id) = p.get("id").and_then(Json::as_u64) else {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "journal.get requires an integer id",
                    ))));
                };
                self.with_services(move |s| async move {
                    let e = s
                        .journal
                        .send(jw::GetEntry { id })
                        .await?
                        .map_err(journal_error)?
                        .filter(|e| {
                            jw::scope_for(&principal) == crate::journal::Scope::All
                                || e.principal == principal
                        })
                        .ok_or_else(|| {
                            RpcError::new(rpc::UNKNOWN_REF, format!("no journal entry {id}"))
                                .with_data(json!({"id": id}))
                        })?;
                    serde_json::to_value(e).map_err(|e| RpcError::internal(e.to_string()))
                })
            }
            _ => {
                let Some(hash) = p.get("hash").and_then(Json::as_str).map(str::to_string) else {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "blob.get requires a hash",
                    ))));
                };
                // Bounded like every other read (docs/protocol.md §3): past `max_bytes` (default the
                // elision budget, at most the hard cap) the value comes back as a ref.
                let max_bytes = match p.get("max_bytes") {
                    None | Some(Json::Null) => crate::proto::elide::Budget::default().max_bytes,
                    Some(v) => match v.as_u64() {
                        Some(n) => (n as usize).min(crate::proto::elide::HARD_CAP),
                        None => {
                            return Box::pin(ready(Err(RpcError::invalid_params(
                                "max_bytes must be a non-negative integer",
                            ))))
                        }
                    },
                };
                self.with_services(move |s| async move {
                    let unknown = || {
                        RpcError::new(rpc::UNKNOWN_REF, "unknown value hash")
                            .with_data(json!({"hash": hash}))
                    };
                    match s.journal.send(jw::GetBlob { hash: hash.clone() }).await {
                        Err(e) => Err(e.into()),
                        Ok(Ok(Some(bytes))) => {
                            let key = hash.strip_prefix("blake3:").unwrap_or(&hash);
                            Ok(crate::proto::mcp::bounded_blob_max(
                                &jw::blob_json(&hash, &bytes),
                                &format!("shoal://val/{key}"),
                                max_bytes,
                            ))
                        }
                        Ok(Ok(None)) | Ok(Err(crate::journal::JournalError::Invalid(_))) => {
                            Err(unknown())
                        }
                        Ok(Err(e)) => Err(journal_error(e)),
                    }
                })
            }
        }
    }

    /// `events.read`, `events.publish`, `events.subscribe`, `events.unsubscribe`.
    /// A session-scoped channel (`task.N`, `jobs`) is first resolved to the bus
    /// channel this session may use ([`crate::actors::task::scoped_channel`]).
    fn events_method(&mut self, method: &str, mut p: Map<String, Json>) -> Reply {
        let named = p.get("channel").and_then(Json::as_str).map(str::to_string);
        let (Some(channel), Some(att)) = (named, &self.attached) else {
            return self.events_on(method, p);
        };
        if !crate::actors::task::is_scoped_channel(&channel) || method == "events.publish" {
            return self.events_on(method, p);
        }
        if method == "events.unsubscribe" {
            // Only this connection's own subscriptions can be dropped: no check.
            if channel == crate::actors::task::JOBS_CHANNEL {
                let own = crate::actors::task::jobs_channel(&att.handle.name);
                p.insert("channel".into(), json!(own));
            }
            return self.events_on(method, p);
        }
        let h = att.handle.clone();
        let method = method.to_string();
        let resolve = async move { crate::actors::task::scoped_channel(&h, &channel).await };
        Box::pin(resolve.into_actor(self).then(move |r, act, _ctx| -> Reply {
            match r {
                Ok(bus) => {
                    p.insert("channel".into(), json!(bus));
                    act.events_on(&method, p)
                }
                Err(e) => Box::pin(ready(Err(e))),
            }
        }))
    }

    /// The events methods on a channel already scoped.
    fn events_on(&mut self, method: &str, p: Map<String, Json>) -> Reply {
        let channel = match rpc::req_str(&p, "channel") {
            Ok(c) => c.to_string(),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let since = match p.get("since") {
            None | Some(Json::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "since must be a non-negative integer",
                    ))))
                }
            },
        };
        match method {
            "events.read" => {
                let limit = match p.get("limit") {
                    None | Some(Json::Null) => None,
                    Some(v) => match v.as_u64() {
                        Some(n) => Some(n as usize),
                        None => {
                            return Box::pin(ready(Err(RpcError::invalid_params(
                                "limit must be a non-negative integer",
                            ))))
                        }
                    },
                };
                self.with_services(move |s| async move {
                    let events = s
                        .bus
                        .send(ReadEvents {
                            channel: channel.clone(),
                            since,
                            limit,
                        })
                        .await?;
                    Ok(json!({
                        "channel": channel,
                        "events": events.iter().map(BusEvent::to_json).collect::<Vec<_>>(),
                    }))
                })
            }
            "events.publish" => {
                if !channel.starts_with("user.") {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "only user.* channels may be published to",
                    )
                    .with_data(json!({"channel": channel})))));
                }
                let payload = p.get("payload").cloned().unwrap_or(Json::Null);
                // The publishing client's session sees the event on its own
                // `channel(...)` too (the language side of the bus).
                if let Some(att) = &self.attached {
                    if let Some(inj) = att.handle.shared.injector.locked().as_ref() {
                        inj.inject(&channel, crate::value::json::from_json(&payload));
                    }
                }
                self.with_services(move |s| async move {
                    let ev = s.bus.send(Publish { channel, payload }).await?;
                    Ok(json!({"channel": ev.channel, "seq": ev.seq, "ts": ev.ts}))
                })
            }
            "events.subscribe" => {
                if self.subs.contains_key(&channel) {
                    return Box::pin(ready(Ok(json!({"channel": channel, "subscribed": true}))));
                }
                let max = self.cx.limits.max_subscriptions_per_connection;
                if self.subs.len() >= max {
                    return Box::pin(ready(Err(conn::limit_error(
                        "max_subscriptions_per_connection",
                        max as u64,
                        "too many subscriptions on this connection",
                    ))));
                }
                let svc = self.with_services(|_| async { Ok(Json::Null) });
                Box::pin(svc.then(move |r, act, ctx| {
                    let bus = act.known_services();
                    let sub = ctx.address().recipient();
                    async move {
                        r?;
                        let bus = bus
                            .ok_or_else(|| RpcError::internal("the event bus is not running"))?
                            .bus;
                        let id = bus
                            .send(SubscribeReplay {
                                channel: channel.clone(),
                                sub,
                                since,
                            })
                            .await?;
                        Ok((channel, id, bus))
                    }
                    .into_actor(act)
                    .map(|r: Result<_, RpcError>, act, _ctx| {
                        let (channel, id, bus) = r?;
                        if let Some(old) = act.subs.insert(channel.clone(), id) {
                            bus.do_send(Unsubscribe { id: old });
                        }
                        act.reg.stats.set_subscriptions(act.subs.len());
                        Ok(json!({"channel": channel, "subscribed": true}))
                    })
                }))
            }
            _ => {
                let removed = self.subs.remove(&channel);
                self.reg.stats.set_subscriptions(self.subs.len());
                if let Some(id) = removed {
                    if let Some(s) = self.known_services() {
                        s.bus.do_send(Unsubscribe { id });
                    }
                }
                Box::pin(ready(Ok(json!({"channel": channel, "subscribed": false}))))
            }
        }
    }

    fn known_services(&self) -> Option<Services> {
        self.services.clone().or_else(|| {
            self.attached
                .as_ref()
                .and_then(|a| a.handle.services.clone())
        })
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

/// `mode: "plan"`: derive and store a plan instead of running.
pub fn is_plan_mode(p: &Map<String, Json>) -> bool {
    p.get("mode").and_then(Json::as_str) == Some("plan")
}

impl Actor for KernelConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Nobody will read the answers of calls still queued or running.
        for (_, c) in lock_calls(&self.calls).drain() {
            c.cancel();
        }
        if let Some(s) = self.known_services() {
            for (_, id) in std::mem::take(&mut self.subs) {
                s.bus.do_send(Unsubscribe { id });
            }
        }
        self.set_attachment(None);
        tracing::debug!(conn = self.cx.id, "kernel connection closed");
    }
}

/// A subscribed event: an `event` notification on this connection.
impl Handler<BusEvent> for KernelConn {
    type Result = ();

    fn handle(&mut self, ev: BusEvent, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        // Encoded once per event: every kernel subscriber of this publish shares the bytes.
        let frame = ev.frame_with(|ev| {
            crate::proto::frame::encode(
                &json!({"jsonrpc": "2.0", "method": "event", "params": ev.to_json()}),
            )
        });
        conn::write_frame(&self.tx, ctx, frame.to_vec());
    }
}

fn journal_error(e: crate::journal::JournalError) -> RpcError {
    match e {
        crate::journal::JournalError::Invalid(m) => RpcError::invalid_params(m),
        e => RpcError::internal(e.to_string()),
    }
}

/// `value.get` of an `out:N` this session object does not hold (from before a daemon
/// restart): the value persisted in the journal, with paths, slices and elision applied when
/// it can be rebuilt, else its stored JSON.
pub fn restore_from_journal(
    handle: &SessionHandle,
    reference: String,
    req: kernel::GetRequest,
    tty: bool,
) -> impl std::future::Future<Output = Option<Result<Json, SessionError>>> + 'static {
    let services = handle.services.clone();
    let session = handle.name.clone();
    let width = handle.shared.render_width;
    async move {
        let n = kernel::parse_ref(&reference)?;
        let s = services?;
        let got = s
            .journal
            .send(jw::TranscriptValue { session, n })
            .await
            .ok()?;
        kernel::restored_value_get(n, got, &req, tty, width).map(|r| r.map_err(SessionError::Rpc))
    }
}

/// Frames read ahead of the actor (requests wait here while one runs).
const READ_AHEAD: usize = 64;

/// Requests read but not yet answered, by id: their cancellation handles.
type Calls = Arc<Mutex<HashMap<String, Arc<CallCancel>>>>;

fn id_key(id: &Json) -> String {
    id.to_string()
}

fn lock_calls(c: &Calls) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CallCancel>>> {
    c.locked()
}

/// One frame, classified by the reader task.
pub enum KernelItem {
    ReadError(std::io::Error),
    Oversized {
        len: u64,
    },
    Invalid {
        id: Json,
        error: RpcError,
    },
    Request {
        id: Json,
        method: String,
        params: Json,
        cancel: Arc<CallCancel>,
    },
}

impl Message for KernelItem {
    type Result = ();
}

impl KernelConn {
    /// Start the actor behind a reader task. Requests are answered strictly in
    /// order, so while one runs the actor reads nothing; the reader task keeps
    /// reading meanwhile: a `cancel {id}` notification reaches the call it
    /// names (running or still queued), and a client that hangs up cancels
    /// the calls it was waiting for (docs/protocol.md §10).
    pub fn start_with(
        cx: ConnContext,
        tx: Writer,
        reg: Registration,
        items: impl futures_util::Stream<Item = FrameItem> + 'static,
    ) {
        let calls: Calls = Arc::default();
        let rx = spawn_reader(items, calls.clone(), cx.peer.clone());
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        KernelConn::create(move |c| {
            c.add_stream(stream);
            let mut k = KernelConn::new(cx, tx, reg);
            k.calls = calls;
            k
        });
    }
}

fn spawn_reader(
    items: impl futures_util::Stream<Item = FrameItem> + 'static,
    calls: Calls,
    peer: Option<Arc<std::os::fd::OwnedFd>>,
) -> tokio::sync::mpsc::Receiver<KernelItem> {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    actix_rt::spawn(async move {
        let mut items = std::pin::pin!(items);
        while let Some(FrameItem(item)) = items.next().await {
            let out = match item {
                Err(e) => {
                    let _ = tx.send(KernelItem::ReadError(e)).await;
                    break;
                }
                Ok(Frame::Oversized { len }) => KernelItem::Oversized { len },
                Ok(Frame::Line(bytes)) => match rpc::classify(&bytes) {
                    rpc::Incoming::Invalid { id, error } => KernelItem::Invalid { id, error },
                    rpc::Incoming::Notification { method, params } => {
                        // Other notifications are ignored (docs/protocol.md §2).
                        if method == "cancel" {
                            if let Some(id) = params.get("id") {
                                if let Some(c) = lock_calls(&calls).get(&id_key(id)) {
                                    c.cancel();
                                }
                            }
                        }
                        continue;
                    }
                    rpc::Incoming::Request { id, method, params } => {
                        let cancel = CallCancel::new();
                        lock_calls(&calls).insert(id_key(&id), cancel.clone());
                        KernelItem::Request {
                            id,
                            method,
                            params,
                            cancel,
                        }
                    }
                },
            };
            if tx.send(out).await.is_err() {
                break;
            }
        }
        drop(tx);
        // The client stopped sending. A half-close still waits for its answers; a hang-up
        // cancels every call it was waiting for.
        let Some(peer) = peer else { return };
        let mut tick = tokio::time::interval(conn::HANGUP_POLL);
        loop {
            tick.tick().await;
            if lock_calls(&calls).is_empty() {
                return;
            }
            if conn::hung_up(&peer) {
                for (_, c) in lock_calls(&calls).drain() {
                    c.cancel();
                }
                return;
            }
        }
    });
    rx
}

impl StreamHandler<KernelItem> for KernelConn {
    fn handle(&mut self, item: KernelItem, ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        match item {
            KernelItem::ReadError(e) => {
                tracing::debug!(conn = self.cx.id, "read error: {e}");
                ctx.stop();
            }
            KernelItem::Oversized { len } => {
                tracing::warn!(conn = self.cx.id, len, "oversized frame refused");
                conn::write(&self.tx, ctx, &rpc::oversized(self.cx.limit, len));
            }
            KernelItem::Invalid { id, error } => {
                conn::write(&self.tx, ctx, &rpc::error_response(&id, &error));
            }
            KernelItem::Request {
                id,
                method,
                params,
                cancel,
            } => self.request(id, method, params, cancel, ctx),
        }
    }
}
