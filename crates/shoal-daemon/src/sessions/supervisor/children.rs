//! The supervisor's child table: which children a session has
//! ([`ChildKind`]), how each tells the supervisor it ended ([`ExitNotice`]:
//! its drop sends [`ChildExited`], a panic included, so nothing polls), the
//! restart of a dead Session from the persisted state, counted, up to
//! `max_restarts_per_minute` (past it the session is failed and says so), and
//! the table as `shoal status` shows it ([`ListChildren`]). It never re-runs a
//! task (its effects may have happened) and never evaluates.

use std::sync::Arc;

use actix::prelude::*;
use shoal_proto::kernel::{ChildRow, ChildTable, TaskRow};

use super::SessionSupervisor;
use crate::health::{ActorStats, Counted};
use crate::msg::SessionError;
use crate::sessions::plan_store::PlanStore;
use crate::sessions::session::Session;
use crate::sessions::task::Task;
use shoal_lang::task::{self as tasks, Entry};

/// Which child of the supervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChildKind {
    Session,
    PlanStore,
    Task(u64),
}

impl ChildKind {
    pub fn label(&self) -> String {
        match self {
            ChildKind::Session => "session".into(),
            ChildKind::PlanStore => "plan_store".into(),
            ChildKind::Task(n) => tasks::ref_name(*n),
        }
    }
}

/// A child actor stopped (normally or by a panic).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ChildExited {
    pub kind: ChildKind,
    /// Which incarnation (a restarted child has a new one).
    pub generation: u64,
}

/// Held by a child; dropping it (the actor's end, a panic included) sends
/// [`ChildExited`] to the supervisor. No polling.
pub struct ExitNotice {
    to: Recipient<ChildExited>,
    /// The supervisor's stats: the notice is counted in its mailbox depth.
    stats: Arc<ActorStats>,
    kind: ChildKind,
    pub(super) generation: u64,
}

impl Drop for ExitNotice {
    fn drop(&mut self) {
        self.stats.enqueue();
        self.to.do_send(ChildExited {
            kind: self.kind,
            generation: self.generation,
        });
    }
}

pub(super) enum ChildAddr {
    Session(Addr<Session>),
    PlanStore(Addr<PlanStore>),
    Task(Addr<Task>),
}

pub(super) struct ChildSlot {
    pub(super) addr: ChildAddr,
    pub(super) stats: Arc<ActorStats>,
    pub(super) generation: u64,
}

/// The child table as `shoal status` shows it: `{session, failed, restarts,
/// children: [{child, actor, state, age_ms, restarts}], tasks: [record]}`.
/// `children` are exactly the actors whose status row names this supervisor
/// as parent: the Session, the PlanStore, each Task and each PTY.
#[derive(Message)]
#[rtype(result = "ChildTable")]
pub struct ListChildren;
impl SessionSupervisor {
    pub(super) fn notice(&mut self, kind: ChildKind, ctx: &mut Context<Self>) -> ExitNotice {
        self.generation += 1;
        ExitNotice {
            to: ctx.address().recipient(),
            stats: self.reg.stats.clone(),
            kind,
            generation: self.generation,
        }
    }

    pub(super) fn start_child(&mut self, ctx: &mut Context<Self>) {
        let reg = self
            .registry
            .register("session", self.shared.name.clone(), Some(self.reg.id()));
        reg.stats.set_restarts(self.budget.restarts());
        let stats = reg.stats.clone();
        let exit = self.notice(ChildKind::Session, ctx);
        let generation = exit.generation;
        let session = Session::new(self.shared.clone(), reg).with_exit_notice(exit);
        let line = session.line();
        let addr = session.start();
        self.shared.set_actor(Some((&addr, line)));
        self.children.insert(
            ChildKind::Session,
            ChildSlot {
                addr: ChildAddr::Session(addr),
                stats,
                generation,
            },
        );
    }

    /// The live Session child.
    pub(super) fn child(&mut self) -> Result<(Addr<Session>, Arc<ActorStats>), SessionError> {
        if self.failed {
            return Err(SessionError::Internal(format!(
                "session {} failed: its actor crashed more than {} times in a minute",
                self.shared.name,
                self.budget.max_per_minute()
            )));
        }
        match self.children.get(&ChildKind::Session) {
            Some(ChildSlot {
                addr: ChildAddr::Session(a),
                stats,
                ..
            }) => Ok((a.clone(), stats.clone())),
            _ => Err(SessionError::Internal("session actor unavailable".into())),
        }
    }

    /// The Session child died: re-create it (counted), or give up.
    fn restart(&mut self, ctx: &mut Context<Self>) {
        if !self.budget.take() {
            self.failed = true;
            self.children.remove(&ChildKind::Session);
            self.shared.set_actor(None);
            self.reg.stats.set_state("failed");
            self.reg.stats.set_error("restart limit reached");
            tracing::error!(session = %self.shared.name, "session actor keeps crashing; giving up");
            return;
        }
        let restarts = self.budget.restarts();
        self.reg.stats.set_restarts(restarts);
        self.reg
            .stats
            .set_error(format!("session actor died; restart #{restarts}"));
        tracing::warn!(session = %self.shared.name, restarts, "session actor died; re-creating it");
        self.start_child(ctx);
    }

    /// The PlanStore child, started on first use (and again after it died).
    pub(crate) fn plan_store(&mut self, ctx: &mut Context<Self>) -> Counted<PlanStore> {
        if let Some(ChildSlot {
            addr: ChildAddr::PlanStore(a),
            stats,
            ..
        }) = self.children.get(&ChildKind::PlanStore)
        {
            return Counted::new(a.clone(), stats.clone());
        }
        let reg =
            self.registry
                .register("plan_store", self.shared.name.clone(), Some(self.reg.id()));
        let stats = reg.stats.clone();
        let exit = self.notice(ChildKind::PlanStore, ctx);
        let generation = exit.generation;
        let bus = self.shared.services.as_ref().map(|s| s.bus.clone());
        let a = PlanStore::new(bus, reg).with_exit_notice(exit).start();
        self.children.insert(
            ChildKind::PlanStore,
            ChildSlot {
                addr: ChildAddr::PlanStore(a.clone()),
                stats: stats.clone(),
                generation,
            },
        );
        Counted::new(a, stats)
    }

    /// The live Session actor.
    pub(crate) fn session_child(&mut self) -> Result<Addr<Session>, SessionError> {
        self.child().map(|(a, s)| {
            s.enqueue();
            a
        })
    }

    /// Start a task on a fork of the session's state. The one place a
    /// background task is spawned (the policy gate belongs here).
    fn children_table(&self) -> ChildTable {
        let mut children: Vec<ChildRow> = self
            .children
            .iter()
            .map(|(k, c)| ChildRow {
                child: k.label(),
                actor: c.stats.id,
                state: c.stats.state().into(),
                age_ms: c.stats.started.elapsed().as_millis() as u64,
                restarts: if *k == ChildKind::Session {
                    self.budget.restarts()
                } else {
                    0
                },
            })
            .collect();
        // The PTYs (their table is `sessions/pty.rs`'s): their rows in the registry.
        let me = self.reg.id();
        children.extend(
            self.registry
                .snapshot()
                .into_iter()
                .filter(|r| r.parent == Some(me) && r.kind == "pty")
                .map(|r| ChildRow {
                    child: r.name,
                    actor: r.id,
                    state: r.state,
                    age_ms: r.age_ms,
                    restarts: 0,
                }),
        );
        ChildTable {
            session: self.shared.name.clone(),
            failed: self.failed,
            restarts: self.budget.restarts(),
            children,
            tasks: self
                .tasks
                .values()
                .map(|e| TaskRow::of(&e.record()))
                .collect(),
        }
    }
}

impl Handler<ChildExited> for SessionSupervisor {
    type Result = ();

    fn handle(&mut self, msg: ChildExited, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        let current = self
            .children
            .get(&msg.kind)
            .is_some_and(|c| c.generation == msg.generation);
        if !current {
            return;
        }
        self.children.remove(&msg.kind);
        match msg.kind {
            ChildKind::Session => {
                if !self.failed && !self.stopping {
                    self.restart(ctx);
                }
            }
            // Plans live in memory: a new PlanStore starts on next use.
            ChildKind::PlanStore => {
                tracing::warn!(session = %self.shared.name, "plan store stopped");
            }
            // Never re-run (its effects may have happened): recorded failed.
            ChildKind::Task(id) => {
                if let Some(e) = self.tasks.get(id) {
                    if e.mark_died() {
                        tracing::error!(session = %self.shared.name, task = id, "task actor died unfinished");
                    }
                }
            }
        }
    }
}

impl Handler<ListChildren> for SessionSupervisor {
    type Result = MessageResult<ListChildren>;

    fn handle(&mut self, _msg: ListChildren, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.children_table())
    }
}
