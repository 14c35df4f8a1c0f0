//! The worker's table of jobs running or queued ([`Jobs`]), and the wait at
//! its exit for them to end, woken by each job's removal.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use crate::msg::CallCancel;
use shoal_base::sync::Locked;

/// A job running or queued: what an interrupt or a signal reaches.
pub(super) struct Running {
    pub(super) session: String,
    pub(super) cancel: Arc<CallCancel>,
    /// Its running program's pid (0: none), for a task's suspend.
    pub(super) pid: Option<Arc<AtomicU32>>,
}

/// The worker's jobs, with the wake of a wait for them to end.
#[derive(Default)]
pub(super) struct Jobs {
    table: Mutex<HashMap<u64, Running>>,
    /// Notified when a job is removed.
    removed: shoal_base::sync::Changes,
}

impl Jobs {
    pub(super) fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Running>> {
        self.table.locked()
    }

    /// Job `job` ended (or never started).
    pub(super) fn remove(&self, job: &u64) {
        self.table.locked().remove(job);
        self.removed.notify();
    }

    /// Wait, at most `within`, until no job is left (woken by each
    /// removal); whether none is.
    pub(super) fn wait_empty(&self, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        self.removed
            .wait_until(deadline, || self.table.locked().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exit's wait is woken by the job's end: a job that ends once
    /// cancelled ends a 60 s wait long before its deadline.
    #[test]
    fn the_exit_wait_ends_when_the_last_job_is_removed() {
        let jobs = Arc::new(Jobs::default());
        let cancel = CallCancel::new();
        let running = Running {
            session: "s".into(),
            cancel: cancel.clone(),
            pid: None,
        };
        jobs.locked().insert(7, running);
        let (j, c) = (jobs.clone(), cancel.clone());
        let job = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(c.cancelled());
            j.remove(&7);
        });
        cancel.cancel();
        let t0 = std::time::Instant::now();
        assert!(jobs.wait_empty(std::time::Duration::from_secs(60)));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "woken by the removal"
        );
        job.join().unwrap();
    }
}
