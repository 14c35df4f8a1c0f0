//! The interrupt flag of one evaluation: set from any thread (Ctrl-C, cancel, a deadline),
//! read by the evaluator between steps and by the capture loop of a running program. A leaf:
//! it imports nothing from the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Interrupts the evaluation running in a session, from any thread.
#[derive(Clone, Debug, Default)]
pub struct Interrupter {
    flag: Arc<AtomicBool>,
}

impl Interrupter {
    pub fn interrupt(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }
    pub fn is_interrupted(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
    pub fn reset(&self) {
        self.flag.store(false, Ordering::SeqCst);
    }
}
