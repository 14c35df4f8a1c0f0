//! Lock-poison recovery, once for the crate. A thread that panics while holding a lock leaves
//! the data as it was at the panic; every holder in this crate keeps its data consistent at
//! each step (no multi-step invariants across a panic point), so the next holder takes the lock
//! as it is instead of propagating the panic. Never blocks beyond the lock itself.

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::time::Duration;

/// Take a lock, recovering it if a previous holder panicked.
pub trait Locked<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
    /// The data through an exclusive borrow (no locking needed), poisoned or not.
    fn locked_mut(&mut self) -> &mut T;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
    fn locked_mut(&mut self) -> &mut T {
        self.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Wait on `cond` for at most `d`, recovering the lock if a holder panicked meanwhile.
pub fn wait_timeout_locked<'a, T>(
    cond: &Condvar,
    guard: MutexGuard<'a, T>,
    d: Duration,
) -> MutexGuard<'a, T> {
    match cond.wait_timeout(guard, d) {
        Ok((g, _)) => g,
        Err(p) => p.into_inner().0,
    }
}

/// Wait on `cond` until notified, recovering the lock if a holder panicked meanwhile.
pub fn wait_locked<'a, T>(cond: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cond.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Read and write an `RwLock`, recovering it if a previous writer panicked.
pub trait RwLocked<T: ?Sized> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
    /// The data through an exclusive borrow (no locking needed), poisoned or not.
    fn locked_mut(&mut self) -> &mut T;
}

impl<T: ?Sized> RwLocked<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
    fn locked_mut(&mut self) -> &mut T {
        self.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A flag set once, which async code can wait for (a hang-up, a cancel).
#[derive(Debug, Default)]
pub struct Latch {
    set: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Latch {
    pub fn set(&self) {
        self.set.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.set.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves once the latch is set (at once if it is already).
    pub async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            // Registered before the check, so a set in between still wakes us.
            n.as_mut().enable();
            if self.is_set() {
                return;
            }
            n.await;
        }
    }
}

/// Changes to some state kept elsewhere (a table behind its own lock), which
/// a plain thread can wait for with a deadline instead of re-checking on a
/// timer: whoever changes the state calls [`Changes::notify`] after the
/// change, and [`Changes::wait_until`] checks its condition again at each.
#[derive(Debug, Default)]
pub struct Changes {
    seen: Mutex<u64>,
    cond: Condvar,
}

impl Changes {
    /// The state changed: wake every waiter to check it again.
    pub fn notify(&self) {
        *self.seen.locked() += 1;
        self.cond.notify_all();
    }

    /// Wait until `done()` holds or `deadline` passes; whether it held.
    /// `done` runs without this lock held, so it may take the state's locks.
    pub fn wait_until(&self, deadline: std::time::Instant, mut done: impl FnMut() -> bool) -> bool {
        loop {
            // Read before the check: a change made during it still wakes us.
            let at = *self.seen.locked();
            if done() {
                return true;
            }
            let mut g = self.seen.locked();
            while *g == at {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    drop(g);
                    return done();
                }
                g = wait_timeout_locked(&self.cond, g, left);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_wait_for_changes_ends_at_the_change_not_the_deadline() {
        let (c, flag) = (
            Arc::new(Changes::default()),
            Arc::new(AtomicBool::new(false)),
        );
        let (c2, f2) = (c.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            f2.store(true, Ordering::SeqCst);
            c2.notify();
        });
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(60);
        assert!(c.wait_until(deadline, || flag.load(Ordering::SeqCst)));
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "woken by the change"
        );
        t.join().unwrap();
        // Nothing changes: the deadline ends it, and the condition is false.
        let t1 = Instant::now() + Duration::from_millis(1);
        assert!(!c.wait_until(t1, || false));
    }
}
