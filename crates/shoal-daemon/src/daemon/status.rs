//! `daemon.status` / `shoal status`: the daemon's facts, every actor's row,
//! each session with its owner and child table, the journal's health and each
//! `[limits]` quota with its use. A token principal is shown only the sessions
//! it may reach and its own quota, none of the daemon's internals. It reads counters and asks supervisors with
//! a deadline: it never waits on a stuck one and never changes anything.

use actix::prelude::*;

use super::Daemon;
use crate::health::rss_bytes;
use crate::journal_writer::Services;
use crate::msg::GetStatus;
use crate::sessions::session::SessionShared;
use shoal_base::sync::Locked;
use shoal_proto::kernel::{
    AdaptersStatus, DaemonFacts, DaemonStatus, LeashPrincipal, LeashStatus, Limits, LocalStatus,
    Quota, SessionRow, TokenDaemonFacts, TokenStatus,
};

impl Daemon {
    /// Each `[limits]` quota with its current use, where the daemon can count it. Per-session
    /// and per-connection quotas show the busiest session or connection.
    fn limits(&self) -> Limits {
        let l = &self.config.limits;
        let live = self
            .sessions
            .values()
            .filter(|(a, _, _)| a.connected())
            .count();
        let spill_used = self
            .sessions
            .values()
            .map(|(_, s, _)| spill_used(s))
            .max()
            .unwrap_or(0);
        let ptys_used = self
            .sessions
            .values()
            .map(|(_, s, _)| s.ptys.list().len())
            .max()
            .unwrap_or(0);
        let n = |v: usize| v as u64;
        Limits {
            sessions: Some(Quota::used(n(live), n(l.max_sessions), "max_sessions")),
            // The busiest token principal's sessions (the local uid has no such cap).
            sessions_per_principal: Some(Quota::used(
                n(self.busiest_owner()),
                n(l.max_sessions_per_principal),
                "max_sessions_per_principal",
            )),
            connections: Some(Quota::used(
                n(self.connections.load(std::sync::atomic::Ordering::Relaxed)),
                n(l.max_connections),
                "max_connections",
            )),
            subscriptions_per_connection: Some(Quota::used(
                self.registry.max_subscriptions(),
                n(l.max_subscriptions_per_connection),
                "max_subscriptions_per_connection",
            )),
            // `used` (the busiest session's live tasks) is filled in from the
            // session tables.
            tasks_per_session: Some(Quota::used(
                0,
                n(l.max_tasks_per_session),
                "max_tasks_per_session",
            )),
            ptys_per_session: Some(Quota::used(
                n(ptys_used),
                n(l.max_ptys_per_session),
                "max_ptys_per_session",
            )),
            session_memory: Some(Quota {
                used: None,
                max: l.session_memory,
                key: "session_memory".into(),
            }),
            spill_bytes: Some(Quota::used(spill_used, l.spill_bytes, "spill_bytes")),
            principal_memory: Some(Quota::used(
                self.principal_memory
                    .iter()
                    .map(|(p, b)| b.used() + self.memory_there(p))
                    .max()
                    .unwrap_or(0),
                l.principal_memory(),
                "principal_memory",
            )),
        }
    }
    /// Live sessions of the token principal that owns the most.
    fn busiest_owner(&self) -> usize {
        let local = &shoal_policy::runtime().local;
        let mut per: std::collections::HashMap<&str, usize> = Default::default();
        for (a, s, _) in self.sessions.values() {
            if a.connected() && &s.owner != local {
                *per.entry(s.owner.as_str()).or_default() += 1;
            }
        }
        per.into_values().max().unwrap_or(0)
    }

    pub(super) fn session_row(shared: &SessionShared) -> SessionRow {
        let ptys = shared.ptys.list();
        SessionRow {
            name: shared.name.clone(),
            owner: shared.owner.clone(),
            cwd: shared.cwd.display().to_string(),
            clients: shared.clients.load(std::sync::atomic::Ordering::Relaxed),
            humans: shared.humans.rows(),
            busy: shared.busy.get(),
            transcript: shared.transcript_len(),
            tasks: 0,
            ptys: ptys.len(),
            pty_memory: shared.memory.held(),
            memory: shared.value_memory(),
            procs: shoal_base::procs::count(&shared.name),
            spill_bytes: spill_used(shared),
            ref_waits: shared.ref_waits(),
            pty_list: ptys.iter().map(shoal_pty::api::list_entry).collect(),
            age_ms: shared.created.elapsed().as_millis() as u64,
            access: None,
            task_list: None,
            children: None,
            restarts: None,
        }
    }
}

impl Handler<GetStatus> for Daemon {
    type Result = ResponseFuture<DaemonStatus>;

    fn handle(&mut self, msg: GetStatus, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        if msg.principal != shoal_policy::runtime().local {
            let status = DaemonStatus::Token(Box::new(self.token_status(&msg.principal)));
            return Box::pin(async move { status });
        }
        let adapters = self.adapters().clone();
        let i = &self.info;
        // Each supervisor's child table (tasks with state, age, pid); a
        // supervisor that does not answer in time shows without it.
        let tables: Vec<_> = self
            .sessions
            .values()
            .map(|(addr, _, stats)| {
                stats.enqueue();
                addr.send(crate::sessions::supervisor::ListChildren)
            })
            .collect();
        // The journal's store counters, read again if they moved.
        let services = self.services.clone();
        let refresh = services
            .as_ref()
            .map(|s| s.journal.send(crate::journal_writer::RefreshStats));
        let mut status = LocalStatus {
            daemon: DaemonFacts {
                pid: i.pid,
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_ms: i.started.elapsed().as_millis() as u64,
                started_unix_ms: i.started_unix_ms,
                socket: i.socket.display().to_string(),
                socket_activated: i.socket_activated,
                state_dir: i.state_dir.display().to_string(),
                config: i.config.as_ref().map(|p| p.display().to_string()),
                log_dir: i.log_dir.display().to_string(),
            },
            actors: self.registry.snapshot(),
            sessions: self
                .sessions
                .values()
                .map(|(_, s, _)| Daemon::session_row(s))
                .collect(),
            journal: self.services.as_ref().map(Services::status),
            services: self.service_set.status(),
            limits: self.limits(),
            adapters: AdaptersStatus {
                count: adapters.len(),
                warnings: adapters.warnings.clone(),
            },
            leash: leash_status(),
            rss_bytes: rss_bytes(),
            http: self.http.as_ref().map(crate::http::Served::status),
        };
        Box::pin(async move {
            if let (Some(refresh), Some(s)) = (refresh, services) {
                let wait = std::time::Duration::from_millis(500);
                if let Ok(Ok(())) = tokio::time::timeout(wait, refresh).await {
                    status.journal = Some(s.status());
                }
            }
            let mut busiest = 0;
            for (i, t) in tables.into_iter().enumerate() {
                let table = tokio::time::timeout(std::time::Duration::from_millis(500), t)
                    .await
                    .ok()
                    .and_then(Result::ok);
                if let (Some(table), Some(s)) = (table, status.sessions.get_mut(i)) {
                    let live = table.tasks.iter().filter(|t| !t.is_final()).count();
                    s.tasks = live;
                    busiest = busiest.max(live);
                    s.task_list = Some(table.tasks);
                    s.children = Some(table.children);
                    s.restarts = Some(table.restarts);
                }
            }
            if let Some(q) = status.limits.tasks_per_session.as_mut() {
                q.used = Some(busiest as u64);
            }
            DaemonStatus::Local(Box::new(status))
        })
    }
}

/// The `leash` section: the sandbox tier and, per configured principal,
/// whether its grants are OS-enforced.
fn leash_status() -> LeashStatus {
    use shoal_policy::{Effect, Gate};
    let rt = shoal_policy::runtime();
    let principals = rt
        .policy
        .principals
        .iter()
        .map(|(name, p)| {
            let g = Gate::for_principal(name);
            LeashPrincipal {
                name: name.clone(),
                caps_enforced: g.caps_enforced(),
                hermetic: p.hermetic,
                net: g.net_confinement().into(),
                opaque: g.decide(&[Effect::Opaque]).verdict.as_str().into(),
                auto_apply: format!("{:?}", p.auto_apply).to_lowercase(),
            }
        })
        .collect();
    LeashStatus {
        tier: shoal_policy::tier().into(),
        landlock_abi: shoal_policy::landlock::abi(),
        plan_ttl_s: rt.plan_ttl.as_secs(),
        tokens: rt.tokens.as_ref().map(|t| t.path().display().to_string()),
        principals,
    }
}

impl Daemon {
    /// What a token principal's `daemon.status` shows: the version, the sessions it may
    /// reach (with its access to each) and the session quotas as they apply to it.
    fn token_status(&self, principal: &str) -> TokenStatus {
        let mut owned = 0;
        let sessions: Vec<SessionRow> = self
            .sessions
            .values()
            .filter_map(|(a, s, _)| {
                let access = crate::sessions::handle::access_of(principal, &s.owner, &s.name)?;
                if a.connected() && s.owner == principal {
                    owned += 1;
                }
                let mut row = Daemon::session_row(s);
                row.access = Some(
                    match access {
                        crate::sessions::handle::Access::Full => "full",
                        crate::sessions::handle::Access::Read => "read",
                    }
                    .into(),
                );
                Some(row)
            })
            .collect();
        let l = &self.config.limits;
        TokenStatus {
            daemon: TokenDaemonFacts {
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_ms: self.info.started.elapsed().as_millis() as u64,
            },
            principal: principal.to_string(),
            sessions,
            limits: Limits {
                sessions_per_principal: Some(Quota::used(
                    owned,
                    l.max_sessions_per_principal as u64,
                    "max_sessions_per_principal",
                )),
                principal_memory: Some(Quota::used(
                    self.principal_memory.get(principal).map_or(0, |b| b.used())
                        + self.memory_there(principal),
                    l.principal_memory(),
                    "principal_memory",
                )),
                ..Default::default()
            },
        }
    }
}

/// Bytes in a session's spill files now (0 before its first exec).
impl Daemon {
    /// What `principal`'s sessions hold in its worker process.
    fn memory_there(&self, principal: &str) -> u64 {
        self.services
            .as_ref()
            .map_or(0, |s| s.workers.principal_memory(principal))
    }
}

fn spill_used(shared: &SessionShared) -> u64 {
    shared.spill.locked().as_ref().map_or(0, |q| q.used())
}
