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
use serde_json::{json, Value as Json};

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
use shoal_proto::elide::Elide;
use shoal_proto::kernel::{self, EventsRequest, KernelRequest};
use shoal_proto::rpc::{self, Answer, RpcError};

/// A request's answer: a typed result, written once into its reply frame.
type Reply = LocalBoxActorFuture<KernelConn, Result<Answer, RpcError>>;

/// A call's future, its typed result answered as is.
async fn answered<T: serde::Serialize + Send + 'static>(
    f: impl std::future::Future<Output = Result<T, RpcError>>,
) -> Result<Answer, RpcError> {
    f.await.map(rpc::answer)
}

/// A result known at once.
fn done<T: serde::Serialize + Send + 'static>(r: Result<T, RpcError>) -> Reply {
    Box::pin(ready(r.map(rpc::answer)))
}

pub struct KernelConn {
    cx: ConnContext,
    tx: Writer,
    reg: Registration,
    attached: Option<Attachment>,
    /// `events.subscribe` subscriptions of this connection, by channel.
    subs: BTreeMap<String, SubId>,
    /// Channels unsubscribed (and not subscribed again): an event of one
    /// still on its way from the bus is not written.
    dropped: std::collections::BTreeSet<String>,
    services: Option<Services>,
    /// Shared with the reader task (see [`KernelConn::start_with`]).
    calls: Calls,
    /// Set by the reader when the client hung up: its calls are abandoned.
    hangup: Arc<peer::Hangup>,
    /// Set as the connection stops: the reader's watch for a hang-up ends.
    ended: Arc<shoal_base::sync::Latch>,
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
            dropped: Default::default(),
            services: None,
            calls: Arc::default(),
            hangup: Arc::default(),
            ended: Arc::default(),
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
        let req = KernelRequest::parse(&method, params, peer::debug_hooks());
        // A hang-up abandons any call; a `cancel` ends a wait at once, while
        // an exec or apply answers its cancel itself once it has stopped.
        let answers_cancel = matches!(
            req,
            Ok(KernelRequest::Exec(_) | KernelRequest::PlanApply(_))
        );
        let fut: Reply = match req {
            _ if cancel.is_cancelled() => Box::pin(ready(Err(peer::session_error(
                crate::sessions::session::cancelled_before_running(),
            )))),
            Err(e) => Box::pin(ready(Err(e))),
            Ok(req) => self.dispatch(req, cancel.clone()),
        };
        drop(entered);
        let hangup = self.hangup.clone();
        let stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> = if answers_cancel {
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
            peer::write_frame(&act.tx, ctx, rpc::respond(&id, res.as_deref()));
        }));
    }

    fn dispatch(&mut self, req: KernelRequest, cancel: Arc<CallCancel>) -> Reply {
        match req {
            KernelRequest::Attach(p) => self.attach(p),
            // Context-free: answered before attaching, by no session.
            KernelRequest::Parse(p) => {
                Box::pin(answered(shoal_proto::syntax::parse_async(p)).into_actor(self))
            }
            KernelRequest::Complete(p) => {
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
                // Off the connection's arbiter: it reads directories (the cwd's,
                // every PATH entry's), which can stall on a slow or hung mount.
                let completed = tokio::task::spawn_blocking(move || {
                    shoal_proto::syntax::complete_method(&p, at.as_ref())
                });
                Box::pin(
                    answered(async move {
                        completed.await.map_err(|e| {
                            RpcError::internal(format!("completion did not finish: {e}"))
                        })
                    })
                    .into_actor(self),
                )
            }
            // The local user (no token, same uid) may watch the bus without a
            // session: `shoal watch --all` must create none.
            KernelRequest::Events(
                e @ (EventsRequest::Read(_)
                | EventsRequest::Subscribe(_)
                | EventsRequest::Unsubscribe(_)),
            ) if self.attached.is_none() && !self.cx.foreign => {
                let local = shoal_policy::runtime().local.clone();
                self.events_method(e, &local)
            }
            // The local user's only (`shoal token revoke` after writing the file).
            KernelRequest::TokensChanged => self.tokens_changed(),
            req => self.dispatch_attached(req, cancel),
        }
    }

    /// `leash.tokens_changed`: the daemon reads the token file again and ends
    /// the work of every token principal left without a valid token. The
    /// local user only, attached or not; a token connection is refused.
    fn tokens_changed(&mut self) -> Reply {
        let token = self.attached.as_ref().is_some_and(|a| a.token.is_some());
        if token || self.cx.foreign {
            return Box::pin(ready(Err(RpcError::new(
                rpc::LEASH_DENIED,
                "leash.tokens_changed: only the local user tells the daemon the token file changed",
            ))));
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.tokens.send(crate::msg::TokensChanged);
        Box::pin(answered(async move { f.await.map_err(crate::msg::mailbox) }).into_actor(self))
    }

    /// A request that needs a session.
    fn dispatch_attached(&mut self, req: KernelRequest, cancel: Arc<CallCancel>) -> Reply {
        use KernelRequest as K;
        let Some(att) = &self.attached else {
            return Box::pin(ready(Err(RpcError::new(
                rpc::NOT_ATTACHED,
                "attach to a session first",
            ))));
        };
        let handle = att.handle.clone();
        let tty = att.tty;
        let default_via = att.via;
        let gate = att.gate.clone();
        if let Err(e) = lc::recheck(att.token.as_deref(), self.cx.foreign, &gate) {
            return Box::pin(ready(Err(e)));
        }
        // In a session shared read-only, only the reading methods are served.
        if !req.reads_only() {
            if let Err(e) = handle.writable(&gate.principal, req.method()) {
                return Box::pin(ready(Err(e)));
            }
        }
        match req {
            K::SessionList => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.list.send(ListSessions {
                    principal: gate.principal.clone(),
                });
                Box::pin(
                    async move {
                        let sessions = f.await.map_err(crate::msg::mailbox)?;
                        Ok(rpc::answer(kernel::SessionList { sessions }))
                    }
                    .into_actor(self),
                )
            }
            K::SessionClose(p) => self.close(p, handle, gate.principal.clone()),
            K::DaemonStatus => {
                self.cx.daemon_stats.enqueue();
                let f = self.cx.daemon.status.send(GetStatus {
                    principal: gate.principal.clone(),
                });
                Box::pin(
                    answered(async move { f.await.map_err(crate::msg::mailbox) }).into_actor(self),
                )
            }
            K::Exec(p) => self.exec(p, handle, gate, tty, cancel),
            K::Explain(p) => Box::pin(answered(lc::explain(handle, gate, p.src)).into_actor(self)),
            K::PlanList => Box::pin(
                async move {
                    let plans = match lc::plan_op(handle, gate, PlanOp::List).await? {
                        shoal_proto::mcp::PlanAnswer::Plans(p) => p,
                        _ => return Err(RpcError::internal("unexpected plan store reply")),
                    };
                    Ok(rpc::answer(kernel::PlanList { plans }))
                }
                .into_actor(self),
            ),
            K::PlanGet(p) => self.plan_op(handle, gate, Ok(PlanOp::Get(p.plan_ref.0))),
            K::PlanApprove(p) => {
                let via = lc::via(p.via, default_via);
                let plan_ref = p.plan_ref.0;
                self.plan_op(handle, gate, Ok(PlanOp::Approve { plan_ref, via }))
            }
            K::PlanDeny(p) => {
                let via = lc::via(p.via, default_via);
                let plan_ref = p.plan_ref.0;
                self.plan_op(handle, gate, Ok(PlanOp::Deny { plan_ref, via }))
            }
            K::CapRequest(p) => {
                let op = lc::cap_request_params(&p.plan_ref.0, p.kinds())
                    .map(|(plan_ref, kinds)| PlanOp::Request { plan_ref, kinds });
                self.plan_op(handle, gate, op)
            }
            K::PlanApply(p) => {
                let budget = Elide::budget_of(p.elide.as_ref());
                Box::pin(
                    answered(lc::apply(handle, gate, p.plan_ref.0, tty, budget, cancel))
                        .into_actor(self),
                )
            }
            K::Task(t) => {
                Box::pin(answered(crate::sessions::task::kernel_method(handle, t)).into_actor(self))
            }
            K::ValueGet(p) => match p.request() {
                Err(e) => Box::pin(ready(Err(e))),
                Ok((reference, req)) => {
                    // The supervisor reads an `out:N` from before a restart back
                    // from the journal itself: one restore path.
                    Box::pin(
                        answered(async move {
                            crate::sessions::exec::get_value(&handle, reference, req, tty).await
                        })
                        .into_actor(self),
                    )
                }
            },
            K::Events(e) => self.events_method(e, &gate.principal),
            K::JournalQuery(q) => self.journal_query(q, gate.principal.clone()),
            K::JournalGet(p) => self.journal_get(p.id, gate.principal.clone()),
            K::BlobGet(p) => self.blob_get(p, gate.principal.clone()),
            K::PtyClaim(p) => self.pty_human(takeover::Human::Claim, &p.pty_id),
            K::PtyRelease(p) => self.pty_human(takeover::Human::Release, &p.pty_id),
            K::PtyWatch(p) => self.pty_human(takeover::Human::Watch, &p.pty_id),
            K::Pty(r) => Box::pin(
                answered(crate::sessions::pty::call_as(
                    &handle,
                    r,
                    Some(gate),
                    Some(self.cx.id),
                ))
                .into_actor(self),
            ),
            K::DebugCrash(p) => match p.actor.filter(|a| a != "session") {
                None => {
                    handle.notify(Crash);
                    done(Ok(kernel::Crashed {
                        crashed: handle.name.clone(),
                    }))
                }
                Some(a) => match ServiceKind::parse(&a) {
                    Some(kind) => {
                        self.cx.daemon_stats.enqueue();
                        self.cx.daemon.crash.do_send(CrashService { kind });
                        done(Ok(kernel::Crashed { crashed: a }))
                    }
                    None => Box::pin(ready(Err(RpcError::invalid_params(format!(
                        "unknown actor {a:?}: session, event_bus, journal_writer or listener"
                    ))))),
                },
            },
            K::Attach(_) | K::Parse(_) | K::Complete(_) | K::TokensChanged => Box::pin(ready(Err(
                RpcError::internal("answered before a session is needed"),
            ))),
        }
    }

    /// `exec`: run, plan, run an approved plan, or start a task.
    fn exec(
        &mut self,
        p: kernel::ExecParams,
        handle: SessionHandle,
        gate: Arc<shoal_policy::Gate>,
        tty: bool,
        cancel: Arc<CallCancel>,
    ) -> Reply {
        let budget = p.budget();
        match p.mode() {
            kernel::ExecMode::Approved => Box::pin(
                answered(lc::exec_approved(
                    handle, gate, p.src, p.plan_ref, tty, budget, cancel,
                ))
                .into_actor(self),
            ),
            kernel::ExecMode::Plan => {
                Box::pin(answered(lc::plan(handle, gate, p.src)).into_actor(self))
            }
            kernel::ExecMode::Run => {
                let position = p.position();
                let opts = crate::sessions::task::TaskOpts::of(Some(p.background()), p.timeout_ms);
                match opts {
                    Some(opts) => Box::pin(
                        answered(crate::sessions::task::exec_as_task(
                            handle,
                            p.src,
                            position,
                            tty,
                            budget,
                            opts,
                            Some(gate),
                        ))
                        .into_actor(self),
                    ),
                    None => {
                        let exec = crate::msg::Exec {
                            src: p.src,
                            position,
                            tty,
                            cancel,
                            gate: Some(gate),
                            check: true,
                            width: p.width.map(|w| w.0),
                            place: None,
                            approved: Vec::new(),
                        };
                        Box::pin(
                            answered(crate::sessions::exec::exec_result(handle, exec, budget))
                                .into_actor(self),
                        )
                    }
                }
            }
        }
    }

    /// A plan store call (`plan.get`, `plan.approve`, `plan.deny`, `cap.request`).
    fn plan_op(
        &mut self,
        handle: SessionHandle,
        gate: Arc<shoal_policy::Gate>,
        op: Result<PlanOp, RpcError>,
    ) -> Reply {
        match op {
            Err(e) => Box::pin(ready(Err(e))),
            Ok(op) => Box::pin(answered(lc::plan_op(handle, gate, op)).into_actor(self)),
        }
    }

    fn attach(&mut self, p: kernel::AttachParams) -> Reply {
        let parsed = (|| -> Result<_, RpcError> {
            let session = p.session.unwrap_or_else(|| "default".to_string());
            if session.is_empty() {
                return Err(RpcError::invalid_params("session must not be empty"));
            }
            let cwd = p.cwd.map(PathBuf::from);
            let env = peer::env_vars(p.env).map_err(RpcError::invalid_params)?;
            let token = p.token;
            let c = p.client.unwrap_or_default();
            let kind = c.kind.unwrap_or_default();
            let tty = c.tty.unwrap_or(false);
            let name = c.name.map(|n| n.chars().take(64).collect::<String>());
            let human = c.human.unwrap_or(false);
            let create = p.create.unwrap_or(true);
            if token.is_some() && self.cx.reserved {
                return Err(crate::conn::reserve_error(self.cx.limits.max_connections));
            }
            let principal = lc::principal(token.as_deref(), self.cx.foreign)?;
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
                token,
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
            Ok(rpc::answer(kernel::Attached {
                session: handle.name.clone(),
                owner: handle.owner().to_string(),
                access: match handle.access {
                    crate::sessions::handle::Access::Full => "full",
                    crate::sessions::handle::Access::Read => "read",
                },
                created: handle.created,
                env_differs: handle.env_differs,
                principal: principal.clone(),
                client: kernel::AttachedClient { kind, tty },
                conn: act.cx.id,
                cwd: kernel::ShownDir {
                    display: handle.start_cwd().display().to_string(),
                },
                env_hash: "local",
                caps: kernel::AttachedCaps {
                    enforced,
                    tier: shoal_policy::tier(),
                    available_tier: shoal_policy::tier(),
                    policy_principal: has_policy.then_some(principal),
                    opaque: opaque.as_str(),
                },
                caps_enforced: enforced,
                channels: kernel::SESSION_CHANNELS,
            }))
        }))
    }

    fn close(
        &mut self,
        p: kernel::CloseParams,
        current: SessionHandle,
        principal: String,
    ) -> Reply {
        let name = p.session.unwrap_or_else(|| current.name.clone());
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
            Ok(rpc::answer(kernel::SessionClosed {
                session: name,
                closed: true,
            }))
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

impl Actor for KernelConn {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.ended.set();
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
        // The client unsubscribed: nothing more of the channel reaches it.
        if self.dropped.contains(&ev.channel) {
            return;
        }
        // Encoded once per event: every kernel subscriber of this publish shares the bytes.
        let frame = ev.frame_with(|ev| {
            shoal_proto::frame::encode(&rpc::Notification {
                jsonrpc: "2.0",
                method: "event",
                params: ev.to_json(),
            })
        });
        peer::write_frame(&self.tx, ctx, frame.to_vec());
    }
}
