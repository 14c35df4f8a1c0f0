//! The daemon's table of task evaluations still running ([`TaskRegistry`]):
//! each task's cancel and process slot, registered by its evaluation thread
//! for as long as it runs. The daemon creates the one registry at start, hands
//! it to every session (through `SessionShared`) and keeps it for shutdown,
//! which ends the tasks' process groups after the actor system is down. A
//! lock stays here because plain threads (the evaluation threads, the daemon's
//! main thread after the actor system stopped) use it; it never blocks beyond
//! the lock itself, and nothing here waits without a bound; shutdown's wait for
//! the tasks to end is woken by each task's unregistering, not by a timer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::msg::CallCancel;
use shoal_base::sync::{Changes, Locked};

struct LiveTask {
    cancel: Arc<CallCancel>,
    pid: Arc<AtomicU32>,
}

/// Every task whose evaluation thread still runs, across the daemon's
/// sessions. Cheap to clone: the clones share one table.
#[derive(Clone, Default)]
pub struct TaskRegistry(Arc<Table>);

#[derive(Default)]
struct Table {
    tasks: Mutex<BTreeMap<u64, LiveTask>>,
    /// Notified when a task unregisters ([`TaskRegistry::end_all`] waits on it).
    ended: Changes,
}

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
        self.table.0.tasks.locked().remove(&self.id);
        self.table.0.ended.notify();
    }
}

impl TaskRegistry {
    /// Task `id` runs: its `cancel` and the process group slot `pid`.
    pub fn register(&self, id: u64, cancel: Arc<CallCancel>, pid: Arc<AtomicU32>) -> LiveGuard {
        self.0.tasks.locked().insert(id, LiveTask { cancel, pid });
        LiveGuard {
            id,
            table: self.clone(),
        }
    }

    /// Tasks whose evaluation has not ended yet (all sessions).
    pub fn live_count(&self) -> usize {
        self.0.tasks.locked().len()
    }

    /// Start the cancel sequence of every running task (daemon shutdown; a
    /// suspended group is continued so it sees the signal).
    pub fn cancel_all(&self) {
        for t in self.0.tasks.locked().values() {
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
            self.0
                .ended
                .wait_until(Instant::now() + d, || self.live_count() == 0);
            self.live_count()
        };
        self.cancel_all();
        if wait(grace) == 0 {
            return 0;
        }
        for t in self.0.tasks.locked().values() {
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

    /// The wait is woken by the task's end: a task that ends once cancelled
    /// ends `end_all` long before its 60 s grace.
    #[test]
    fn end_all_returns_when_the_last_task_unregisters() {
        let reg = TaskRegistry::default();
        let cancel = CallCancel::new();
        let guard = reg.register(1, cancel.clone(), Arc::default());
        let task = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(cancel.cancelled());
            drop(guard);
        });
        let t0 = Instant::now();
        assert_eq!(reg.end_all(Duration::from_secs(60)), 0);
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "woken by the unregistering"
        );
        task.join().unwrap();
    }
}
