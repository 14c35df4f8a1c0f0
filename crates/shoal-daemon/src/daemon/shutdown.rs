//! Stopping the daemon: the `Shutdown` message (interrupt every session and
//! task, stop the actor system) and what [`after_stop`] settles once it has
//! stopped: task process groups ended, interrupted evaluations waited for
//! (bounded), PTYs killed, every acknowledged exec made durable, unused `out:N`
//! reservations given back on a clean stop. Nothing here waits without a bound.

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::Daemon;
use crate::event_bus::SubscriberBook;
use crate::journal_writer::RecordsInFlight;
use crate::msg::{Shutdown, StopSession};
use crate::sessions::live_tasks::TaskRegistry;
use crate::sessions::session::SessionShared;
use shoal_base::sync::Locked;
use shoal_journal as journal;

impl Handler<Shutdown> for Daemon {
    type Result = ();

    fn handle(&mut self, msg: Shutdown, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.reg.stats.set_state("stopping");
        tracing::info!(reason = %msg.reason, sessions = self.sessions.len(), "shutting down: {}", msg.reason);
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
        let mut draining = self.draining.locked();
        // Every task's programs get SIGINT now; `run` ends what is left.
        self.tasks.cancel_all();
        for (_, (addr, shared, stats)) in std::mem::take(&mut self.sessions) {
            shared.interrupt();
            stats.enqueue();
            addr.do_send(StopSession);
            draining.push(shared);
        }
        drop(draining);
        System::current().stop();
    }
}

/// After the actor system stopped: end what is left and make everything
/// acknowledged durable (see the module doc).
pub(super) fn after_stop(
    draining: &std::sync::Mutex<Vec<Arc<SessionShared>>>,
    writer: &journal::JournalWriter,
    book: &SubscriberBook,
    tasks: &TaskRegistry,
    records: &RecordsInFlight,
) {
    // No task's process group outlives the daemon: SIGINT (sent by the
    // Shutdown handler), SIGKILL after the grace.
    let left = tasks.end_all(TASK_STOP_GRACE);
    if left > 0 {
        tracing::warn!(left, "task evaluations still running at exit");
    }
    let drained = wait_for_interrupted(draining, SHUTDOWN_GRACE);
    // No PTY program outlives the daemon.
    shoal_pty::kill_all();
    // What escaped every process group (setsid, double fork) and anything
    // still running: the daemon's whole cgroup tree (docs/processes.md).
    shoal_base::procs::shutdown();
    // Everything acknowledged becomes durable before the process ends: records
    // the session workers still hand over (batched replies go first) included.
    if !records.wait_handed_off(std::time::Duration::from_secs(5)) {
        tracing::warn!("a session worker did not hand over its journal record in time");
    } else {
        // A clean stop: the next start continues right after the last `out:N` used.
        for s in &drained {
            s.release_reservation();
        }
    }
    // Durable events the bus had not taken from its inbox yet.
    let settled = book.settle(writer);
    if settled > 0 {
        tracing::debug!(settled, "events queued for the journal at shutdown");
    }
    if let Err(e) = writer.shutdown() {
        tracing::error!("journal flush at shutdown failed: {e}");
    }
}

/// At shutdown, how long a task's programs have after SIGINT before their
/// process group is killed (and as long again to be reaped).
const TASK_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How long shutdown waits for interrupted evaluations to end (their process groups are
/// signalled and reaped by the worker threads) before the process exits anyway.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The drained sessions come back (their journal state is settled last).
/// Each pass interrupts every session still running an exec (and cancels
/// that exec's call, so one that was about to begin never runs), then waits
/// for the first of them to finish, woken by its worker ([`Busy::end`]).
///
/// [`Busy::end`]: crate::sessions::session::Busy::end
fn wait_for_interrupted(
    draining: &std::sync::Mutex<Vec<Arc<SessionShared>>>,
    grace: std::time::Duration,
) -> Vec<Arc<SessionShared>> {
    let sessions = std::mem::take(&mut *draining.locked());
    let deadline = Instant::now() + grace;
    loop {
        let busy: Vec<&Arc<SessionShared>> = sessions.iter().filter(|s| s.busy.get()).collect();
        let Some(first) = busy.first() else {
            return sessions;
        };
        if Instant::now() >= deadline {
            let names: Vec<&str> = busy.iter().map(|s| s.name.as_str()).collect();
            tracing::warn!(busy = ?names, "sessions still running at exit");
            return sessions;
        }
        for s in &sessions {
            s.interrupt();
            s.busy.cancel();
        }
        first.busy.wait_idle(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::CallCancel;

    /// The wait is woken by the worker's end of its exec: an exec that ends
    /// once cancelled ends a 60 s wait long before its deadline.
    #[test]
    fn the_wait_ends_when_the_interrupted_exec_ends() {
        let shared = Arc::new(SessionShared::new("s".into(), std::env::temp_dir(), 80));
        let call = CallCancel::new();
        shared.busy.start(call.clone());
        let s = shared.clone();
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(call.cancelled());
            s.busy.end();
        });
        let draining = std::sync::Mutex::new(vec![shared]);
        let t0 = Instant::now();
        let back = wait_for_interrupted(&draining, std::time::Duration::from_secs(60));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "woken by the end"
        );
        assert!(!back[0].busy.get());
        worker.join().unwrap();
    }
}
