//! The interrupt flag of one evaluation: set from any thread (Ctrl-C, cancel, a deadline),
//! read by the evaluator between steps and by the capture loop of a running program. A leaf:
//! it imports nothing from the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Interrupts the evaluation running in a session, from any thread. A
/// running program's capture loop waits on [`Interrupter::wake_fd`] beside
/// its pipes, so an interrupt reaches it at once, without a timed wake-up.
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
