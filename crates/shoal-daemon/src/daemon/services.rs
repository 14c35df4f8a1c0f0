//! The daemon as supervisor of its three services: EventBus, JournalWriter and Listener.
//! Each incarnation's [`Registration`] carries an exit hook, so its end (a panic included)
//! arrives here as [`ServiceExited`]; the daemon starts a new one from what outlives it
//! (the bus's [`SubscriberBook`] and seq counters, the journal writer thread and its store
//! cache, a dup of the listening socket), swaps it into the [`Supervised`] cell every holder
//! reads, and counts the restart (shown on the new row, `restarts`). Past
//! `[daemon] max_restarts_per_minute` it stops restarting: a failed bus stays a `failed` row
//! in `shoal status` (events are off, everything else serves); a failed Listener or
//! JournalWriter stops the daemon with an error line and exit code 1, since it cannot accept
//! or journal without them. Nothing here waits or touches a session.

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use actix::prelude::*;
use shoal_proto::kernel::{ServiceRow, ServiceRows};

use super::Daemon;
use crate::event_bus::{EventBus, SubscriberBook};
use crate::health::{Counted, Registration, RestartBudget, Supervised};
use crate::journal_writer::{JournalWriter, RecordsInFlight, Services, StoreCache};
use crate::listener::Listener;
use crate::msg::{Crash, Shutdown};
use crate::msg::{CrashService, ServiceKind};
use shoal_journal as journal;

/// A service incarnation ended (its registration dropped).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ServiceExited {
    pub kind: ServiceKind,
    pub generation: u64,
}

struct Slot {
    generation: u64,
    budget: RestartBudget,
    /// Past the restart limit: the row `shoal status` keeps showing as `failed`.
    failed: Option<Registration>,
}

/// What the daemon keeps to restart its services.
pub struct ServiceSet {
    writer: Arc<journal::JournalWriter>,
    /// The count of acknowledged records not yet handed to `writer` (shutdown waits on it).
    records: Arc<RecordsInFlight>,
    book: SubscriberBook,
    /// The listening socket; each Listener incarnation accepts on a dup of it.
    listen: StdUnixListener,
    listener: Option<Counted<Listener>>,
    max_per_minute: u32,
    slots: BTreeMap<ServiceKind, Slot>,
    /// The process exit code `run` returns (1 once a vital service failed for good).
    exit_code: Arc<AtomicI32>,
}

impl ServiceSet {
    pub fn new(
        writer: Arc<journal::JournalWriter>,
        records: Arc<RecordsInFlight>,
        book: SubscriberBook,
        listen: StdUnixListener,
        max_per_minute: u32,
        exit_code: Arc<AtomicI32>,
    ) -> Self {
        ServiceSet {
            writer,
            records,
            book,
            listen,
            listener: None,
            max_per_minute,
            slots: BTreeMap::new(),
            exit_code,
        }
    }

    /// `{service: {restarts, failed}}` for `daemon.status`.
    pub fn status(&self) -> ServiceRows {
        ServiceRows(
            self.slots
                .iter()
                .map(|(k, s)| {
                    (
                        k.label().into(),
                        ServiceRow {
                            restarts: s.budget.restarts(),
                            failed: s.failed.is_some(),
                        },
                    )
                })
                .collect(),
        )
    }
}

/// A tokio listener on a dup of `listen` (the dup shares the socket; dropping it with a
/// dead incarnation leaves the socket open).
fn accept_on(listen: &StdUnixListener) -> std::io::Result<tokio::net::UnixListener> {
    let dup = listen.try_clone()?;
    dup.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(dup)
}

impl Daemon {
    fn slot(&mut self, kind: ServiceKind) -> &mut Slot {
        let max = self.svc().max_per_minute;
        self.svc_mut().slots.entry(kind).or_insert_with(|| Slot {
            generation: 0,
            budget: RestartBudget::new(max),
            failed: None,
        })
    }

    fn svc(&self) -> &ServiceSet {
        &self.service_set
    }

    fn svc_mut(&mut self) -> &mut ServiceSet {
        &mut self.service_set
    }

    /// Register the next incarnation of `kind`, its end reported to this daemon.
    fn register_service(
        &mut self,
        kind: ServiceKind,
        name: String,
        ctx: &mut Context<Self>,
    ) -> Registration {
        let slot = self.slot(kind);
        slot.generation += 1;
        let generation = slot.generation;
        let restarts = slot.budget.restarts();
        let me = ctx.address();
        let stats = self.reg.stats.clone();
        let reg = self
            .registry
            .register(kind.label(), name, Some(self.reg.id()))
            .on_exit(move || {
                stats.enqueue();
                me.do_send(ServiceExited { kind, generation });
            });
        reg.stats.set_restarts(restarts);
        if restarts > 0 {
            reg.stats
                .set_error(format!("restarted after a crash (restart #{restarts})"));
        }
        reg
    }

    fn start_bus(
        &mut self,
        start_seqs: Vec<(String, u64)>,
        ctx: &mut Context<Self>,
    ) -> Counted<EventBus> {
        let reg = self.register_service(ServiceKind::EventBus, "events".into(), ctx);
        let stats = reg.stats.clone();
        let svc = self.svc();
        let addr = EventBus::with_book(Some(svc.writer.clone()), start_seqs, svc.book.clone(), reg)
            .start();
        Counted::new(addr, stats)
    }

    fn start_journal(
        &mut self,
        ctx: &mut Context<Self>,
        cache: StoreCache,
    ) -> Counted<JournalWriter> {
        let reg = self.register_service(ServiceKind::JournalWriter, "journal".into(), ctx);
        let stats = reg.stats.clone();
        let addr = JournalWriter::new(self.svc().writer.clone(), cache, reg).start();
        Counted::new(addr, stats)
    }

    fn start_listener(&mut self, l: tokio::net::UnixListener, ctx: &mut Context<Self>) {
        let name = self.info.socket.display().to_string();
        let reg = self.register_service(ServiceKind::Listener, name, ctx);
        let stats = reg.stats.clone();
        let me = ctx.address();
        let daemon = crate::conn::DaemonRef {
            attach: me.clone().recipient(),
            close: me.clone().recipient(),
            list: me.clone().recipient(),
            status: me.clone().recipient(),
            services: me.clone().recipient(),
            crash: me.clone().recipient(),
            tokens: me.recipient(),
        };
        let addr = Listener::new(
            l,
            daemon,
            self.reg.stats.clone(),
            self.config.clone(),
            self.registry.clone(),
            reg,
            self.connections.clone(),
        )
        .start();
        self.svc_mut().listener = Some(Counted::new(addr, stats));
    }

    /// Start the three services (from `started`): the bus at `start_seqs`, the journal
    /// actor, the accept loop on `first`.
    pub(super) fn start_services(
        &mut self,
        start_seqs: Vec<(String, u64)>,
        first: tokio::net::UnixListener,
        ctx: &mut Context<Self>,
    ) {
        let bus = self.start_bus(start_seqs, ctx);
        let cache = JournalWriter::store_cache(&self.svc().writer);
        let journal = self.start_journal(ctx, cache.clone());
        let bus = self.svc().book.handle(Supervised::new(bus));
        self.services = Some(Services::new(
            Supervised::new(journal),
            bus,
            self.svc().writer.clone(),
            cache,
            self.svc().records.clone(),
        ));
        self.start_listener(first, ctx);
    }

    fn restart(&mut self, kind: ServiceKind, ctx: &mut Context<Self>) -> Result<(), String> {
        match kind {
            ServiceKind::EventBus => {
                // Seqs come from the book; the store's are only a floor for a fresh book.
                let bus = self.start_bus(Vec::new(), ctx);
                if let Some(s) = &self.services {
                    s.bus.replace(bus);
                }
            }
            ServiceKind::JournalWriter => {
                let Some(cache) = self.services.as_ref().map(Services::store_cache) else {
                    return Err("no journal services".into());
                };
                let journal = self.start_journal(ctx, cache);
                if let Some(s) = &self.services {
                    s.journal.replace(journal);
                }
            }
            ServiceKind::Listener => {
                let l = accept_on(&self.svc().listen)
                    .map_err(|e| format!("cannot re-arm the listening socket: {e}"))?;
                self.start_listener(l, ctx);
            }
        }
        Ok(())
    }

    /// A service cannot go on: the bus is left off, the others stop the daemon.
    fn give_up(&mut self, kind: ServiceKind, why: &str, ctx: &mut Context<Self>) {
        match kind {
            ServiceKind::EventBus => {
                tracing::error!(
                    service = kind.label(),
                    "{why}; the daemon stops restarting it: events are off"
                );
                let reg = self
                    .registry
                    .register(kind.label(), "events", Some(self.reg.id()));
                reg.stats.set_state("failed");
                reg.stats.set_error(format!("{why}; not restarted"));
                let restarts = self.slot(kind).budget.restarts();
                reg.stats.set_restarts(restarts);
                self.slot(kind).failed = Some(reg);
            }
            ServiceKind::JournalWriter | ServiceKind::Listener => {
                tracing::error!(
                    service = kind.label(),
                    "{why}; the daemon cannot serve without it and stops"
                );
                self.svc().exit_code.store(1, Ordering::Relaxed);
                let reg = self
                    .registry
                    .register(kind.label(), kind.label(), Some(self.reg.id()));
                reg.stats.set_state("failed");
                reg.stats.set_error(why.to_string());
                self.slot(kind).failed = Some(reg);
                self.reg.stats.enqueue();
                ctx.notify(Shutdown {
                    reason: format!("the {} failed: {why}", kind.label()),
                });
            }
        }
    }
}

impl Handler<ServiceExited> for Daemon {
    type Result = ();

    fn handle(&mut self, msg: ServiceExited, ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        let kind = msg.kind;
        if self.stopping || self.slot(kind).generation != msg.generation {
            return;
        }
        let slot = self.slot(kind);
        if !slot.budget.take() {
            let why = format!(
                "the {} crashed more than {} times in a minute",
                kind.label(),
                slot.budget.max_per_minute()
            );
            self.give_up(kind, &why, ctx);
            return;
        }
        let restarts = slot.budget.restarts();
        tracing::warn!(
            service = kind.label(),
            restarts,
            "{} died; restarting it",
            kind.label()
        );
        if let Err(e) = self.restart(kind, ctx) {
            self.give_up(kind, &e, ctx);
        }
    }
}

impl Handler<CrashService> for Daemon {
    type Result = ();

    fn handle(&mut self, msg: CrashService, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        match msg.kind {
            ServiceKind::EventBus => {
                if let Some(s) = &self.services {
                    s.bus.do_send(Crash);
                }
            }
            ServiceKind::JournalWriter => {
                if let Some(s) = &self.services {
                    s.journal.do_send(Crash);
                }
            }
            ServiceKind::Listener => {
                if let Some(l) = &self.service_set.listener {
                    l.do_send(Crash);
                }
            }
        }
    }
}
