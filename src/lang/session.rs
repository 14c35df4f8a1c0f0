//! A language session: scope, cwd, environment, and `exec` of source text.
//! OWNER: evaluator helper. The public interface below is what the daemon uses.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::lang::parse::ParseError;
use crate::value::{Record, ShoalError, Value};

/// Whether the final statement is evaluated in statement position (a failing
/// command raises `cmd_failed`) or value position (it yields the outcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    Stmt,
    Value,
}

#[derive(Clone, Debug)]
pub enum ExecError {
    Parse(ParseError),
    Raised(ShoalError),
}

#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub cwd: PathBuf,
    /// Initial environment; the process environment when empty.
    pub env: Vec<(String, String)>,
    pub config: Record,
}

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

pub struct Session {}

impl Session {
    pub fn new(opts: SessionOptions) -> Session {
        let _ = opts;
        todo!("session")
    }
    pub fn exec(&mut self, src: &str, position: Position) -> Result<Value, ExecError> {
        let _ = (src, position);
        todo!("exec")
    }
    pub fn interrupter(&self) -> Interrupter {
        todo!()
    }
    pub fn cwd(&self) -> PathBuf {
        todo!()
    }
}
