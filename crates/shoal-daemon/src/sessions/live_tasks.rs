//! The daemon's table of task evaluations still running ([`TaskRegistry`]):
//! each task's cancel and process slot, registered by its evaluation thread
//! for as long as it runs. The daemon creates the one registry at start, hands
//! it to every session (through `SessionShared`) and keeps it for shutdown,
//! which ends the tasks' process groups after the actor system is down. A
//! lock stays here because plain threads (the evaluation threads, the daemon's
//! main thread after the actor system stopped) use it; it never blocks beyond
//! the lock itself, and nothing here waits without a bound.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::msg::CallCancel;
use shoal_base::sync::Locked;

struct LiveTask {
    cancel: Arc<CallCancel>,
    pid: Arc<AtomicU32>,
}

/// Every task whose evaluation thread still runs, across the daemon's
/// sessions. Cheap to clone: the clones share one table.
#[derive(Clone, Default)]
pub struct TaskRegistry(Arc<Mutex<BTreeMap<u64, LiveTask>>>);

impl std::fmt::Debug for TaskRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskRegistry")
            .field("live", &self.live_count())
            .finish()
    }
}

/// A task's place in a [`TaskRegistry`]; its drop (the evaluation thread's
/// end, a panic included) removes it.
pub struct LiveGuard {
    id: u64,
    table: TaskRegistry,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.table.0.locked().remove(&self.id);
    }
}

impl TaskRegistry {
    /// Task `id` runs: its `cancel` and the process group slot `pid`.
    pub fn register(&self, id: u64, cancel: Arc<CallCancel>, pid: Arc<AtomicU32>) -> LiveGuard {
        self.0.locked().insert(id, LiveTask { cancel, pid });
        LiveGuard {
            id,
            table: self.clone(),
        }
    }

    /// Tasks whose evaluation has not ended yet (all sessions).
    pub fn live_count(&self) -> usize {
        self.0.locked().len()
    }

    /// Start the cancel sequence of every running task (daemon shutdown; a
    /// suspended group is continued so it sees the signal).
    pub fn cancel_all(&self) {
        for t in self.0.locked().values() {
            t.cancel.cancel();
            shoal_lang::shell::process::signal_group(t.pid.load(Ordering::SeqCst), libc::SIGCONT);
        }
    }

    /// Daemon shutdown: cancel every task, give their programs `grace` to end
    /// after SIGINT, then SIGKILL the process groups still there and wait (at
    /// most `grace` again) for the evaluation threads to reap them. The number
    /// of tasks still running at the end.
    pub fn end_all(&self, grace: Duration) -> usize {
        let wait = |d: Duration| {
            let deadline = Instant::now() + d;
            loop {
                let n = self.live_count();
                if n == 0 || Instant::now() >= deadline {
                    return n;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        self.cancel_all();
        if wait(grace) == 0 {
            return 0;
        }
        for t in self.0.locked().values() {
            let pid = t.pid.load(Ordering::SeqCst);
            shoal_lang::shell::process::signal_group(pid, libc::SIGKILL);
        }
        wait(grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_counts_its_own_tasks_only() {
        let (a, b) = (TaskRegistry::default(), TaskRegistry::default());
        let g = a.register(1, CallCancel::new(), Arc::default());
        assert_eq!((a.live_count(), b.live_count()), (1, 0));
        assert_eq!(a.end_all(Duration::from_millis(1)), 1);
        drop(g);
        assert_eq!(a.live_count(), 0);
        assert_eq!(a.end_all(Duration::from_secs(1)), 0);
    }
}
