//! The cancellation handle of one call, shared by the connection that issued it and the
//! session that runs it. A plain synchronised value: it sends no messages and never blocks
//! beyond its own short lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::lang::Interrupter;
use crate::sync::Locked;

/// The cancellation handle of one call (one [`Exec`](super::msg::Exec)), shared by the
/// connection that issued it and the session that runs it. Cancelling a call
/// that is still queued means it never runs (its reply comes at once);
/// cancelling the running call interrupts that evaluation and nothing else.
#[derive(Debug, Default)]
pub struct CallCancel {
    state: Mutex<CallState>,
    cancelled: AtomicBool,
    /// Wakes the reply future of a cancelled call.
    pub(super) wake: tokio::sync::Notify,
}

#[derive(Debug, Default)]
enum CallState {
    #[default]
    Queued,
    Running(Interrupter),
    Finished,
}

impl CallCancel {
    pub fn new() -> Arc<CallCancel> {
        Arc::new(CallCancel::default())
    }

    /// Cancel this call (idempotent).
    pub fn cancel(&self) {
        let g = self.state.locked();
        self.cancelled.store(true, Ordering::SeqCst);
        if let CallState::Running(i) = &*g {
            i.interrupt();
        }
        drop(g);
        self.wake.notify_one();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Still waiting in the session's queue.
    pub(super) fn is_queued(&self) -> bool {
        matches!(*self.state.locked(), CallState::Queued)
    }

    /// The worker starts this call: `false` when it was cancelled first.
    pub(super) fn begin(&self, i: Option<&Interrupter>) -> bool {
        let mut g = self.state.locked();
        if self.is_cancelled() {
            *g = CallState::Finished;
            return false;
        }
        *g = match i {
            Some(i) => CallState::Running(i.clone()),
            None => CallState::Finished,
        };
        true
    }

    /// Interrupt again while the cancelled call still runs (an evaluation
    /// that was just starting may have cleared the first interrupt).
    pub(super) fn reassert(&self) {
        if !self.is_cancelled() {
            return;
        }
        if let CallState::Running(i) = &*self.state.locked() {
            i.interrupt();
        }
    }

    pub(super) fn finish(&self) {
        *self.state.locked() = CallState::Finished;
    }
}
