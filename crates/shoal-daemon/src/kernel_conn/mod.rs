//! KernelConn: one kernel JSON-RPC connection (docs/protocol.md §2,
//! docs/rules.md §18). Frames in, typed messages out, frames back.
//!
//! Requests are handled strictly in order (each waits in the actor context),
//! so pipelined `session.attach` + `exec` behave as if sent one by one and
//! replies keep request order. Notifications are ignored; malformed frames get
//! `-32700` and the connection stays.
//!
//! This file owns the actor, method dispatch, attach and close; the events,
//! journal and reader parts are beside it. It never evaluates and never
//! touches a session's state: it reaches a session only through its
//! `SessionHandle`.

mod events;
mod journal;
mod reader;
mod takeover;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use crate::conn::ConnContext;
use crate::event_bus::{BusEvent, SubId, Unsubscribe};
use crate::health::Registration;
use crate::journal_writer::Services;
use crate::leash_calls as lc;
use crate::msg::{CallOrigin, CloseSession, Crash, GetStatus, ListSessions};
use crate::msg::{CrashService, ServiceKind};
use crate::peer::{self, Writer};
use crate::sessions::handle::{AttachSession, SessionHandle};
use crate::sessions::plan_store::PlanOp;
use crate::sessions::session::CallCancel;
pub use reader::KernelItem;
use reader::{id_key, lock_calls, Calls};
use shoal_lang::Position;
use shoal_proto::kernel;
use shoal_proto::rpc::{self, RpcError};

type Reply = LocalBoxActorFuture<KernelConn, Result<Json, RpcError>>;

/// The kernel methods besides `pty.*` ([`shoal_pty::api::METHODS`]).
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
    /// Set by the reader when the client hung up: its calls are abandoned.
    hangup: Arc<peer::Hangup>,
    /// PTYs this connection has taken over (`pty.claim`), released when
    /// dropped: on `pty.release`, a hang-up or the close.
    claims: BTreeMap<u64, shoal_pty::claim::ClaimGuard>,
    /// PTYs whose live screen this connection watches (`pty.watch`).
    watches: BTreeMap<u64, takeover::Watch>,
}

struct Attachment {
    handle: SessionHandle,
    tty: bool,
    /// The principal's policy and sandbox (Leash).
    gate: Arc<shoal_policy::Gate>,
    /// The bearer token, re-checked before every call (a revoke holds at once).
    token: Option<String>,
    /// The approval channel of this client's `plan.approve|deny`: the CLI
    /// (client kind `cli`) or another attached client.
    via: shoal_policy::policy::ApproveVia,
    /// The client kind it attached as (`attach`, `cli`, ...).
    client: String,
    /// How a live view names this client (`attach`, `cli`, `kind: name`).
    label: Arc<str>,
    /// A person at a terminal (`client.human`: `shoal attach`, `shoal watch`),
    /// listed under the session's `humans` while attached.
    human: bool,
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
            hangup: Arc::default(),
            claims: BTreeMap::new(),
            watches: BTreeMap::new(),
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
        let span = peer::request_span("kernel", self.cx.id, session.as_deref(), &id, &method);
        cancel.set_origin(CallOrigin {
            conn: self.cx.id,
            request: id.to_string(),
            client: self.attached.as_ref().map(|a| a.label.clone()),
        });
        let entered = span.clone().entered();
        let fut: Reply = if cancel.is_cancelled() {
            Box::pin(ready(Err(peer::session_error(
                crate::sessions::session::cancelled_before_running(),
            ))))
        } else {
            self.dispatch(&method, params, cancel.clone())
        };
        drop(entered);
        // A hang-up abandons any call; a `cancel` ends a wait at once, while
        // an exec or apply answers its cancel itself once it has stopped.
        let hangup = self.hangup.clone();
        let stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> =
            if matches!(method.as_str(), "exec" | "plan.apply") {
                Box::pin(async move { hangup.wait().await })
            } else {
                let cancel = cancel.clone();
                Box::pin(async move { cancel.cancelled().await })
            };
        let fut =
            peer::unless(fut, stop).map(|res, act: &mut Self, ctx: &mut Context<Self>| match res {
                Some(res) => Some(res),
                None if act.hangup.is_set() => {
                    ctx.stop();
                    None
                }
                None => Some(Err(RpcError::new(rpc::RAISED, "cancelled while it waited")
                    .with_data(json!({"code": "cancelled"})))),
            });
        ctx.wait(fut.map(move |res, act, ctx| {
            let Some(res) = res else {
                lock_calls(&act.calls).remove(&id_key(&id));
                return;
            };
            let _span = span.entered();
            peer::request_done(&res);
            lock_calls(&act.calls).remove(&id_key(&id));
            if let Err(e) = &res {
                if e.code == rpc::INTERNAL_ERROR {
                    act.reg.stats.set_error(format!("{method}: {}", e.message));
                }
            }
            peer::write_frame(&act.tx, ctx, rpc::reply_frame(&id, res));
        }));
    }

    fn dispatch(&mut self, method: &str, params: Json, cancel: Arc<CallCancel>) -> Reply {
        let known = METHODS.contains(&method)
            || shoal_pty::api::METHODS.contains(&method)
            || shoal_pty::api::HUMAN_METHODS.contains(&method);
        if !known || (method == "debug.crash" && !peer::debug_hooks()) {
            return Box::pin(ready(Err(RpcError::method_not_found(method))));
        }
        let p = match rpc::params_object(&params) {
            Ok(p) => p.clone(),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        match method {
            "session.attach" => return self.attach(p),
            // Context-free: answered before attaching, by no session.
            "parse" => return Box::pin(shoal_proto::syntax::parse_async(&p).into_actor(self)),
            "complete" => {
                // Paths and commands only for the local user: a token's
                // completions would list what its policy may not let it read.
                let at = self
                    .attached
                    .as_ref()
                    .filter(|a| a.token.is_none() && !self.cx.foreign)
                    .map(|a| {
                        let (cwd, env) = a.handle.views();
                        let path = env.into_iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
                        let names = a.handle.names();
                        shoal_proto::syntax::Where { cwd, path, names }
                    });
                return Box::pin(ready(shoal_proto::syntax::complete_method(&p, at.as_ref())));
            }
            // The local user (no token, same uid) may watch the bus without a
            // session: `shoal watch --all` must create none.
            "events.subscribe" | "events.unsubscribe" | "events.read"
                if self.attached.is_none() && !self.cx.foreign =>
            {
                let local = shoal_policy::runtime().local.clone();
                return self.events_method(method, p, &local);
            }
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
        let via = match lc::via_param(&p, att.via) {
            Ok(v) => v,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let gate = att.gate.clone();
        if let Err(e) = lc::recheck(att.token.as_deref(), self.cx.foreign, &gate) {
            return Box::pin(ready(Err(e)));
        }
        // In a session shared read-only, only the reading methods are served.
        if !reads_only(method) {
            if let Err(e) = handle.writable(&gate.principal, method) {
                return Box::pin(ready(Err(e)));
            }
        }
        match method {
            "session.list" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.list.send(ListSessions {
                    principal: gate.principal.clone(),
                });
                Box::pin(
                    async move {
                        f.await
                            .map(|s| json!({"sessions": s}))
                            .map_err(crate::msg::mailbox)
                    }
                    .into_actor(self),
                )
            }
            "session.close" => self.close(p, handle, gate.principal.clone()),
            "daemon.status" => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.status.send(GetStatus {
                    principal: gate.principal.clone(),
                });
                Box::pin(async move { f.await.map_err(crate::msg::mailbox) }.into_actor(self))
            }
            "exec" if p.get("mode").and_then(Json::as_str) == Some("approved") => {
                match shoal_proto::elide::Budget::from_json(p.get("elide"))
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
            "explain" => match kernel::typed_params::<kernel::ExplainParams>(method, &p) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok(x) => Box::pin(lc::explain(handle, gate, x.src).into_actor(self)),
            },
            "plan.get" | "plan.list" | "plan.approve" | "plan.deny" | "cap.request" => {
                let op = match method {
                    "plan.list" => Ok(PlanOp::List),
                    "plan.get" => plan_ref(method, &p).map(PlanOp::Get),
                    "plan.approve" => {
                        plan_ref(method, &p).map(|plan_ref| PlanOp::Approve { plan_ref, via })
                    }
                    "plan.deny" => {
                        plan_ref(method, &p).map(|plan_ref| PlanOp::Deny { plan_ref, via })
                    }
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
                let b = shoal_proto::elide::Budget::from_json(p.get("elide"))
                    .map_err(RpcError::invalid_params)?;
                Ok((r, b))
            }) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((r, budget)) => {
                    Box::pin(lc::apply(handle, gate, r, tty, budget, cancel).into_actor(self))
                }
            },
            "exec" => match kernel::exec_params(&p, Position::Stmt).and_then(|(s, pos)| {
                let width = kernel::width_param(&p)?;
                let b = shoal_proto::elide::Budget::from_json(p.get("elide"))
                    .map_err(RpcError::invalid_params)?;
                Ok((s, pos, width, b, crate::sessions::task::task_opts(&p)?))
            }) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((src, position, _, budget, Some(opts))) => Box::pin(
                    crate::sessions::task::exec_as_task(
                        handle,
                        src,
                        position,
                        tty,
                        budget,
                        opts,
                        Some(gate),
                    )
                    .into_actor(self),
                ),
                Ok((src, position, width, budget, None)) => {
                    let exec = crate::msg::Exec {
                        src,
                        position,
                        tty,
                        cancel,
                        gate: Some(gate),
                        check: true,
                        width,
                    };
                    Box::pin(
                        crate::sessions::exec::exec_json(handle, exec, budget).into_actor(self),
                    )
                }
            },
            m if m.starts_with("task.") => Box::pin(
                crate::sessions::task::kernel_method(handle, m.to_string(), p).into_actor(self),
            ),
            "value.get" => match kernel::get_params(&p) {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((reference, req)) => {
                    // The supervisor reads an `out:N` from before a restart back
                    // from the journal itself: one restore path.
                    let handle = handle.clone();
                    Box::pin(
                        async move {
                            crate::sessions::exec::get_value(&handle, reference, req, tty).await
                        }
                        .into_actor(self),
                    )
                }
            },
            "events.read" | "events.publish" | "events.subscribe" | "events.unsubscribe" => {
                self.events_method(method, p, &gate.principal)
            }
            "journal.query" | "journal.get" | "blob.get" => {
                self.journal_method(method, p, gate.principal.clone())
            }
            "pty.claim" | "pty.release" | "pty.watch" => self.pty_human(method, p),
            m if m.starts_with("pty.") => Box::pin(
                crate::sessions::pty::call_as(&handle, m, &p, Some(gate), Some(self.cx.id))
                    .into_actor(self),
            ),
            "debug.crash" => match kernel::typed_params::<kernel::CrashParams>(method, &p)
                .map(|c| c.actor.filter(|a| a != "session"))
            {
                Err(e) => Box::pin(ready(Err(e))),
                Ok(None) => {
                    handle.notify(Crash);
                    Box::pin(ready(Ok(json!({"crashed": handle.name}))))
                }
                Ok(Some(a)) => match ServiceKind::parse(&a) {
                    Some(kind) => {
                        self.cx.daemon_stats.enqueue();
                        self.cx.daemon.crash.do_send(CrashService { kind });
                        Box::pin(ready(Ok(json!({"crashed": a}))))
                    }
                    None => Box::pin(ready(Err(RpcError::invalid_params(format!(
                        "unknown actor {a:?}: session, event_bus, journal_writer or listener"
                    ))))),
                },
            },
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
            let env = peer::env_param(p.get("env")).map_err(RpcError::invalid_params)?;
            let token = rpc::opt_str(&p, "token")?;
            let (kind, tty, name, human) = match p.get("client") {
                None | Some(Json::Null) => (String::new(), false, None, false),
                Some(Json::Object(c)) => (
                    rpc::opt_str(c, "kind")?.unwrap_or("").to_string(),
                    rpc::opt_bool(c, "tty")?.unwrap_or(false),
                    rpc::opt_str(c, "name")?.map(|n| n.chars().take(64).collect::<String>()),
                    rpc::opt_bool(c, "human")?.unwrap_or(false),
                ),
                Some(_) => return Err(RpcError::invalid_params("client must be an object")),
            };
            let create = rpc::opt_bool(&p, "create")?.unwrap_or(true);
            if token.is_some() && self.cx.reserved {
                return Err(crate::conn::reserve_error(self.cx.limits.max_connections));
            }
            let principal = lc::principal(token, self.cx.foreign)?;
            // Only the local user's own terminals count as the humans of a session.
            let human = human && token.is_none();
            let label: Arc<str> = match (kind.as_str(), name) {
                ("", None) => "kernel".into(),
                ("", Some(n)) => n.into(),
                (k, None) => k.into(),
                (k, Some(n)) => format!("{k}: {n}").into(),
            };
            Ok((
                session,
                cwd,
                env,
                (kind, tty, label, human),
                create,
                principal,
                token.map(str::to_string),
            ))
        })();
        let (session, cwd, env, (kind, tty, label, human), create, principal, token) = match parsed
        {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.attach.send(AttachSession {
            name: session,
            principal: principal.clone(),
            cwd,
            env,
            no_adapters: kind == "conformance",
            arbiter: Some(actix::Arbiter::current()),
            create,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let handle = r
                .map_err(crate::msg::mailbox)?
                .map_err(peer::session_error)?;
            let gate = Arc::new(shoal_policy::Gate::for_principal(&principal));
            let enforced = gate.caps_enforced();
            let opaque = gate.decide(&[shoal_policy::Effect::Opaque]).verdict;
            let has_policy = gate.policy.get(&principal).is_some();
            let via = if kind == "cli" {
                shoal_policy::policy::ApproveVia::Cli
            } else {
                shoal_policy::policy::ApproveVia::Attach
            };
            act.set_attachment(Some(Attachment {
                handle: handle.clone(),
                tty,
                gate,
                token,
                via,
                client: kind.clone(),
                label,
                human,
            }));
            tracing::debug!(conn = act.cx.id, session = %handle.name, client = %kind, "attached");
            Ok(json!({
                "session": handle.name,
                "owner": handle.owner(),
                "access": match handle.access {
                    crate::sessions::handle::Access::Full => "full",
                    crate::sessions::handle::Access::Read => "read",
                },
                "created": handle.created,
                "env_differs": handle.env_differs,
                "principal": principal,
                "client": {"kind": kind, "tty": tty},
                "conn": act.cx.id,
                "cwd": {"display": handle.start_cwd().display().to_string()},
                "env_hash": "local",
                "caps": {
                    "enforced": enforced,
                    "tier": shoal_policy::tier(),
                    "available_tier": shoal_policy::tier(),
                    "policy_principal": has_policy.then_some(&principal),
                    "opaque": opaque.as_str(),
                },
                "caps_enforced": enforced,
                "channels": ["session.transcript", "journal", "approval", "render"],
            }))
        }))
    }

    fn close(&mut self, p: Map<String, Json>, current: SessionHandle, principal: String) -> Reply {
        let name = match kernel::typed_params::<kernel::CloseParams>("session.close", &p) {
            Ok(c) => c.session.unwrap_or_else(|| current.name.clone()),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.close.send(CloseSession {
            name: name.clone(),
            principal,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            r.map_err(crate::msg::mailbox)?
                .map_err(peer::session_error)?;
            if act.attached.as_ref().is_some_and(|a| a.handle.name == name) {
                act.attached = None;
            }
            Ok(json!({"session": name, "closed": true}))
        }))
    }
}

impl KernelConn {
    fn known_services(&self) -> Option<Services> {
        self.services.clone().or_else(|| {
            self.attached
                .as_ref()
                .and_then(|a| a.handle.services.clone())
        })
    }

    fn set_attachment(&mut self, next: Option<Attachment>) {
        if let Some(old) = self.attached.take() {
            old.handle.count_client(-1);
            if old.human {
                old.handle.humans().leave(self.cx.id);
            }
        }
        if let Some(new) = &next {
            new.handle.count_client(1);
            if new.human {
                new.handle.humans().join(self.cx.id, &new.label);
            }
        }
        self.attached = next;
    }
}

/// The methods a principal may call in a session shared with it read-only
/// (`session.close` names its session and is decided by the daemon).
fn reads_only(method: &str) -> bool {
    matches!(
        method,
        "session.list"
            | "session.close"
            | "daemon.status"
            | "value.get"
            | "journal.query"
            | "journal.get"
            | "blob.get"
            | "events.read"
            | "events.subscribe"
            | "events.unsubscribe"
            | "task.get"
            | "task.list"
            | "task.await"
            | "pty.read"
            | "pty.list"
            | "pty.watch"
            | "pty.release"
    )
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
        // A human who hung up gives the PTYs back at once.
        self.claims.clear();
        self.watches.clear();
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
            shoal_proto::frame::encode(
                &json!({"jsonrpc": "2.0", "method": "event", "params": ev.to_json()}),
            )
        });
        peer::write_frame(&self.tx, ctx, frame.to_vec());
    }
}

/// A plan method's `plan_ref` (typed params; an empty ref is refused as before).
fn plan_ref(method: &str, p: &Map<String, Json>) -> Result<String, RpcError> {
    let r = kernel::typed_params::<kernel::PlanRefParams>(method, p)?.plan_ref;
    if r.is_empty() {
        return Err(RpcError::invalid_params("plan_ref must not be empty"));
    }
    Ok(r)
}
