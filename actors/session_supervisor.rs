//! SessionSupervisor: one per named session. Owns the session's shared state
//! (transcript, client count), starts its Session actor, watches it and
//! re-creates it when it dies (actix does not restart a panicked actor),
//! counting restarts. Past `max_restarts_per_minute` it gives up and reports
//! the session failed.
//!
//! Reads of the transcript (`value.get`) are answered here directly, so they
//! never wait behind a running evaluation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::Value as Json;

use super::health::{Registration, Registry};
use super::msg::{
    ClientCount, Crash, Exec, ExecReply, GetValue, Interrupt, SessionError, StopSession,
};
use super::session::{panic_message, Session, SessionShared};
use crate::proto::kernel;

pub struct SessionSupervisor {
    pub shared: Arc<SessionShared>,
    pub(super) registry: Arc<Registry>,
    pub(super) reg: Registration,
    /// The session's PTYs (`actors/pty.rs` handles `PtyCall`).
    pub(super) ptys: super::pty::PtyTable,
    child: Option<(Addr<Session>, Arc<super::health::ActorStats>)>,
    /// The session's plans (`actors/plan_store.rs`), started on first use.
    plans: Option<Addr<super::plan_store::PlanStore>>,
    restarts: u64,
    recent: Vec<Instant>,
    max_per_minute: u32,
    failed: bool,
}

impl SessionSupervisor {
    pub fn new(
        shared: Arc<SessionShared>,
        registry: Arc<Registry>,
        reg: Registration,
        max_per_minute: u32,
    ) -> Self {
        SessionSupervisor {
            shared,
            registry,
            reg,
            child: None,
            plans: None,
            restarts: 0,
            recent: Vec::new(),
            max_per_minute,
            failed: false,
            ptys: super::pty::PtyTable::new(
                crate::config::LimitsConfig::default().max_ptys_per_session,
            ),
        }
    }

    /// `[limits] max_ptys_per_session`.
    pub fn with_pty_limit(mut self, max: usize) -> Self {
        self.ptys = super::pty::PtyTable::new(max);
        self
    }

    fn start_child(&mut self) {
        let reg = self
            .registry
            .register("session", self.shared.name.clone(), Some(self.reg.id()));
        reg.stats.set_restarts(self.restarts);
        let stats = reg.stats.clone();
        let addr = Session::new(self.shared.clone(), reg).start();
        self.child = Some((addr, stats));
    }

    /// The live child, re-created if it died.
    fn child(&mut self) -> Result<(Addr<Session>, Arc<super::health::ActorStats>), SessionError> {
        if self.failed {
            return Err(SessionError::Internal(format!(
                "session {} failed: its actor crashed more than {} times in a minute",
                self.shared.name, self.max_per_minute
            )));
        }
        match &self.child {
            Some((addr, stats)) if addr.connected() => Ok((addr.clone(), stats.clone())),
            _ => {
                self.restart();
                self.child
                    .clone()
                    .ok_or_else(|| SessionError::Internal("session actor unavailable".into()))
            }
        }
    }

    fn restart(&mut self) {
        let now = Instant::now();
        self.recent
            .retain(|t| now.duration_since(*t) < Duration::from_secs(60));
        if self.recent.len() as u32 >= self.max_per_minute {
            self.failed = true;
            self.child = None;
            self.reg.stats.set_state("failed");
            self.reg.stats.set_error("restart limit reached");
            tracing::error!(session = %self.shared.name, "session actor keeps crashing; giving up");
            return;
        }
        self.recent.push(now);
        self.restarts += 1;
        self.reg.stats.set_restarts(self.restarts);
        self.reg
            .stats
            .set_error(format!("session actor died; restart #{}", self.restarts));
        tracing::warn!(session = %self.shared.name, restarts = self.restarts, "session actor died; re-creating it");
        self.start_child();
    }

    /// The PlanStore child (re-created if it stopped).
    pub(super) fn plan_store(&mut self) -> Addr<super::plan_store::PlanStore> {
        match &self.plans {
            Some(a) if a.connected() => a.clone(),
            _ => {
                let reg = self.registry.register(
                    "plan_store",
                    self.shared.name.clone(),
                    Some(self.reg.id()),
                );
                let bus = self.shared.services.as_ref().map(|s| s.bus.clone());
                let a = super::plan_store::PlanStore::new(bus, reg).start();
                self.plans = Some(a.clone());
                a
            }
        }
    }

    /// The live Session actor.
    pub(super) fn session_child(&mut self) -> Result<Addr<Session>, SessionError> {
        self.child().map(|(a, s)| {
            s.enqueue();
            a
        })
    }

    fn check(&mut self) {
        let dead = matches!(&self.child, Some((addr, _)) if !addr.connected());
        if dead && !self.failed {
            self.restart();
        }
    }
}

impl Actor for SessionSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(256);
        self.start_child();
        ctx.run_interval(Duration::from_millis(250), |act, _ctx| act.check());
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.shared.interrupt();
        self.ptys.kill_all();
    }
}

impl Handler<Exec> for SessionSupervisor {
    type Result = ResponseFuture<Result<ExecReply, SessionError>>;

    fn handle(&mut self, msg: Exec, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let child = self.child();
        let name = self.shared.name.clone();
        Box::pin(async move {
            let (addr, stats) = child?;
            stats.enqueue();
            addr.send(msg).await.unwrap_or_else(|_| {
                Err(SessionError::Internal(format!(
                    "session {name}: the session actor died during exec; it is being restarted"
                )))
            })
        })
    }
}

impl Handler<GetValue> for SessionSupervisor {
    type Result = ResponseFuture<Result<Json, SessionError>>;

    /// In-memory refs are answered here at once; refs from before a restart
    /// are read back from the journal (on its blocking reader), decoded, and
    /// answered the same way.
    fn handle(&mut self, msg: GetValue, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let unknown = || SessionError::UnknownRef {
            reference: msg.reference.clone(),
        };
        let Some(n) = kernel::parse_ref(&msg.reference) else {
            return Box::pin(std::future::ready(Err(unknown())));
        };
        let width = self.shared.render_width;
        let answer = move |v: &crate::value::Value, req: &kernel::GetRequest, tty: bool| {
            catch_unwind(AssertUnwindSafe(|| {
                kernel::value_get(v, n, req, tty, width)
            }))
            .map_err(|p| {
                SessionError::Internal(format!("value.get panicked: {}", panic_message(&p)))
            })?
            .map_err(SessionError::Rpc)
        };
        if let Some(v) = self.shared.get(n) {
            return Box::pin(std::future::ready(answer(&v, &msg.req, msg.tty)));
        }
        let Some(services) = self.shared.services.clone() else {
            return Box::pin(std::future::ready(Err(unknown())));
        };
        let err = unknown();
        let f = services
            .journal
            .send(super::journal_writer::TranscriptValue {
                session: self.shared.name.clone(),
                n,
            });
        Box::pin(async move {
            match f.await {
                Ok(Ok(Some((wire, _render)))) => {
                    let v = crate::proto::wire::decode(&wire).ok_or_else(|| {
                        SessionError::Internal(format!("stored value of out:{n} does not decode"))
                    })?;
                    answer(&v, &msg.req, msg.tty)
                }
                Ok(Ok(None)) => Err(err),
                Ok(Err(e)) => Err(SessionError::Rpc(
                    crate::proto::rpc::RpcError::new(crate::proto::rpc::UNKNOWN_REF, e.to_string())
                        .with_data(
                            serde_json::json!({"ref": kernel::ref_name(n), "code": "journal"}),
                        ),
                )),
                Err(_) => Err(err),
            }
        })
    }
}

impl Handler<Interrupt> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, _msg: Interrupt, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        // Sets the interrupt flag only: never waits for the worker.
        self.shared.interrupt();
    }
}

impl Handler<ClientCount> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: ClientCount, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.shared.clients.fetch_add(msg.delta, Ordering::Relaxed);
    }
}

impl Handler<Crash> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        if let Ok((addr, stats)) = self.child() {
            stats.enqueue();
            addr.do_send(msg);
        }
    }
}

impl Handler<StopSession> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, _msg: StopSession, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        self.shared.interrupt();
        self.ptys.kill_all();
        // Dropping the child's address lets it stop once idle; its worker
        // thread ends after the (interrupted) evaluation.
        self.child = None;
        ctx.stop();
    }
}
