//! `parallel(thunk, …)`: its thunks on a bounded number of threads (docs/rules.md §9).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::eval::{EResult, Interp};
use shoal_base::sync::Locked;
use shoal_value::{ShoalError, Value};

impl Interp {
    pub(super) fn parallel(
        &mut self,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        let mut settle = false;
        for (k, v) in &named {
            match (k.as_str(), v) {
                ("settle", Value::Bool(b)) => settle = *b,
                ("settle", other) => {
                    return Err(ShoalError::type_error(format!(
                        "parallel: settle must be a bool, found {}",
                        other.type_name()
                    ))
                    .into())
                }
                _ => {
                    return Err(
                        ShoalError::arg_error(format!("parallel: unknown argument `{k}`")).into(),
                    )
                }
            }
        }
        // Thunks may also come as one list.
        let thunks: Vec<Value> = match pos.as_slice() {
            [Value::List(l)] => l.as_ref().clone(),
            _ => pos,
        };
        let results = self.run_thunks(&thunks);
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Ok(v) => out.push(v),
                Err(e) if settle && self.catchable(&e) => out.push(Value::Error(Arc::new(e))),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Value::list(out))
    }

    /// Run `parallel`'s thunks, results in the thunks' order. Each runs with an evaluator
    /// that shares the session's interrupter, tasks and channels; closures reach their
    /// captured scopes (mutex-protected) from any thread. At most [`PARALLEL_PER_CALL`]
    /// threads serve one call, taken from a pool of [`PARALLEL_THREADS`] (the local user's,
    /// or token principals' together); the
    /// caller's thread runs thunks too, so with no thread to spare they run one after the
    /// other and a call never waits for a thread (nor makes one per thunk: a list of
    /// thousands is no fork bomb).
    fn run_thunks(&mut self, thunks: &[Value]) -> Vec<Result<Value, ShoalError>> {
        let slots: Vec<Mutex<Option<Result<Value, ShoalError>>>> =
            thunks.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let work = |interp: &mut Interp| loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(t) = thunks.get(i) else { break };
            let r = interp
                .call_value(t, vec![], vec![])
                .map_err(|c| interp.ctl_to_err(c));
            *slots[i].locked() = Some(r);
        };
        let threads = ThreadPermits::take(thunks.len().saturating_sub(1).min(PARALLEL_PER_CALL));
        let stack = super::task::TASK_STACK;
        std::thread::scope(|sc| {
            for _ in 0..threads.count {
                let mut child = self.child();
                let sandbox = shoal_policy::landlock::current();
                let gate = shoal_policy::run_gate::current();
                let home = shoal_base::procs::current_home();
                let work = &work;
                let started = std::thread::Builder::new()
                    .name("shoal-parallel".into())
                    .stack_size(stack)
                    .spawn_scoped(sc, move || {
                        child.enter_thread(stack);
                        shoal_policy::run_gate::with_gate(gate, || {
                            shoal_policy::landlock::with_rules(sandbox, || {
                                shoal_base::procs::with_home(home, || work(&mut child))
                            })
                        })
                    });
                if started.is_err() {
                    // The caller's thread does the work this one would have.
                    break;
                }
            }
            let mut own = self.child();
            work(&mut own);
        });
        drop(threads);
        slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or_else(|| Err(ShoalError::custom("parallel: a thunk panicked")))
            })
            .collect()
    }
}

/// Threads one `parallel` call may use beside its caller's.
const PARALLEL_PER_CALL: usize = 15;
/// Threads the local user's `parallel` calls may hold at once, and token
/// principals' together: two pools, so tokens cannot leave the local user's
/// calls to run in turn.
const PARALLEL_THREADS: usize = 32;
static PARALLEL_LOCAL: AtomicUsize = AtomicUsize::new(0);
static PARALLEL_TOKENS: AtomicUsize = AtomicUsize::new(0);

/// Threads taken from a `parallel` pool, given back on drop.
struct ThreadPermits {
    count: usize,
    pool: &'static AtomicUsize,
}

impl ThreadPermits {
    /// Up to `want` threads, as many as the caller's pool has left (perhaps
    /// none): a token principal's evaluation (its thread is confined) takes
    /// from the tokens' pool.
    fn take(want: usize) -> ThreadPermits {
        let token = shoal_policy::landlock::current().is_some_and(|r| r.token);
        let pool = if token {
            &PARALLEL_TOKENS
        } else {
            &PARALLEL_LOCAL
        };
        let mut count = 0;
        let _ = pool.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            count = want.min(PARALLEL_THREADS.saturating_sub(used));
            Some(used + count)
        });
        ThreadPermits { count, pool }
    }
}

impl Drop for ThreadPermits {
    fn drop(&mut self) {
        self.pool.fetch_sub(self.count, Ordering::AcqRel);
    }
}
