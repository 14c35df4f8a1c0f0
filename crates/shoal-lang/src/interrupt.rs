//! The interrupt flag of one evaluation: set from any thread (Ctrl-C, cancel, a deadline),
//! read by the evaluator between steps and by the capture loop of a running program. A leaf:
//! it imports nothing from the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// Interrupts the evaluation running in a session, from any thread. A
/// running program's capture loop waits on [`Interrupter::wake_fd`] beside
/// its pipes, and a wait on anything else (a task's end, the other end of a
/// worker's pair) registers [`Interrupter::on_interrupt`]: an interrupt
/// reaches either at once, without a timed wake-up.
#[derive(Clone, Debug, Default)]
pub struct Interrupter {
    inner: Arc<InterruptInner>,
}

#[derive(Debug, Default)]
struct InterruptInner {
    flag: AtomicBool,
    /// An eventfd made readable by [`Interrupter::interrupt`]; created by
    /// the first wait on it (`None`: the kernel refused one).
    wake: std::sync::OnceLock<Option<std::os::fd::OwnedFd>>,
    /// What [`Interrupter::on_interrupt`] registered and has not yet run.
    hooks: Mutex<Hooks>,
    /// How often [`Interrupter::sleep_until`] woke (a test tells a wait
    /// woken by its deadline or hook from one that polls).
    #[cfg(test)]
    wakes: std::sync::atomic::AtomicU32,
}

type Hook = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Hooks {
    next: u64,
    waiting: Vec<(u64, Hook)>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

impl InterruptInner {
    fn hooks(&self) -> MutexGuard<'_, Hooks> {
        // A hook runs outside the lock, so a panic in one poisons nothing
        // that matters.
        self.hooks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A registration of [`Interrupter::on_interrupt`]: dropping it takes the
/// hook back if it has not run.
#[must_use = "dropping the registration takes the hook back"]
#[derive(Debug)]
pub struct OnInterrupt {
    inner: Arc<InterruptInner>,
    id: Option<u64>,
}

impl Drop for OnInterrupt {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.inner.hooks().waiting.retain(|(h, _)| *h != id);
        }
    }
}

impl Interrupter {
    pub fn interrupt(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        // After the flag: a waiter that made the eventfd after this looked
        // for it checks the flag before it waits.
        if let Some(Some(fd)) = self.inner.wake.get() {
            // A full counter is harmless: the eventfd is readable anyway.
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
        // Also after the flag: a hook registered later sees it and runs at
        // once (both sides look under the lock).
        let fire = std::mem::take(&mut self.inner.hooks().waiting);
        for (_, hook) in fire {
            hook();
        }
    }
    /// Run `hook` once, on the thread that interrupts this evaluation, or
    /// here and now if it is interrupted already. The hook must not block:
    /// it wakes a waiter (sends on a channel) and returns.
    pub fn on_interrupt(&self, hook: impl FnOnce() + Send + 'static) -> OnInterrupt {
        let mut hooks = self.inner.hooks();
        if self.is_interrupted() {
            drop(hooks);
            hook();
            return OnInterrupt {
                inner: self.inner.clone(),
                id: None,
            };
        }
        let id = hooks.next;
        hooks.next += 1;
        hooks.waiting.push((id, Box::new(hook)));
        OnInterrupt {
            inner: self.inner.clone(),
            id: Some(id),
        }
    }
    /// Block until `deadline` or until this is interrupted, whichever comes
    /// first; true when interrupted. The interrupt's hook wakes the wait:
    /// nothing wakes it in between to look at the flag.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        let woken = Arc::new((Mutex::new(false), Condvar::new()));
        let hook = woken.clone();
        let _hook = self.on_interrupt(move || {
            // Set under the lock: the waiter looks at it under the lock
            // before it waits, so the notification cannot fall between.
            *hook.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
            hook.1.notify_all();
        });
        let (lock, cond) = &*woken;
        let mut interrupted = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if *interrupted {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            interrupted = match cond.wait_timeout(interrupted, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
            #[cfg(test)]
            self.inner.wakes.fetch_add(1, Ordering::SeqCst);
        }
    }
    #[cfg(test)]
    pub(crate) fn wakes(&self) -> u32 {
        self.inner.wakes.load(Ordering::SeqCst)
    }
    pub fn is_interrupted(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }
    pub fn reset(&self) {
        self.inner.flag.store(false, Ordering::SeqCst);
        self.drain();
    }
    /// Clear the eventfd's counter (a wake-up the flag no longer backs).
    pub fn drain(&self) {
        if let Some(Some(fd)) = self.inner.wake.get() {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(fd, &mut counter);
        }
    }
    /// The eventfd that becomes readable on [`Interrupter::interrupt`]
    /// (non-blocking, close-on-exec). Check [`Interrupter::is_interrupted`]
    /// after taking it and before waiting on it.
    pub fn wake_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.inner
            .wake
            .get_or_init(|| {
                rustix::event::eventfd(
                    0,
                    rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
                )
                .ok()
            })
            .as_ref()
            .map(|fd| fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_hook_runs_once_on_interrupt_and_at_once_when_interrupted_already() {
        let i = Interrupter::default();
        let (tx, rx) = mpsc::channel();
        let t = tx.clone();
        let _kept = i.on_interrupt(move || t.send("first").unwrap());
        let t = tx.clone();
        drop(i.on_interrupt(move || t.send("taken back").unwrap()));
        assert!(rx.try_recv().is_err());
        let other = i.clone();
        std::thread::spawn(move || other.interrupt())
            .join()
            .unwrap();
        assert_eq!(rx.try_recv(), Ok("first"));
        // A second interrupt runs nothing again.
        i.interrupt();
        assert!(rx.try_recv().is_err());
        let t = tx.clone();
        let _late = i.on_interrupt(move || t.send("late").unwrap());
        assert_eq!(rx.try_recv(), Ok("late"));
        // After a reset, hooks wait for the next interrupt.
        i.reset();
        let _next = i.on_interrupt(move || tx.send("next").unwrap());
        assert!(rx.try_recv().is_err());
        i.interrupt();
        assert_eq!(rx.try_recv(), Ok("next"));
    }

    #[test]
    fn a_sleep_ends_on_its_interrupt_and_otherwise_wakes_only_at_its_deadline() {
        let far = Instant::now() + std::time::Duration::from_secs(3600);
        let i = Interrupter::default();
        let sleeper = i.clone();
        let t = std::thread::spawn(move || sleeper.sleep_until(far));
        i.interrupt();
        assert!(t.join().unwrap());
        assert!(i.wakes() <= 1, "woke {} times", i.wakes());
        // Not interrupted: one wait to the deadline, not one per period
        // (a wait polling every 20 ms wakes about ten times here).
        let i = Interrupter::default();
        assert!(!i.sleep_until(Instant::now() + std::time::Duration::from_millis(200)));
        assert!((1..=2).contains(&i.wakes()), "woke {} times", i.wakes());
        // Interrupted already: no wait at all.
        let before = i.wakes();
        i.interrupt();
        assert!(i.sleep_until(far));
        assert_eq!(i.wakes(), before);
    }
}
