//! The Shoal language: syntax tree, parser, evaluator and the session that
//! hosts an evaluation (scope, cwd, environment). Pure library code: no actors,
//! no sockets. Processes are spawned by the evaluator on the calling thread.

pub mod ast;
pub mod env_view;
pub mod eval;
pub use crate::value::memory;
pub mod parse;
pub mod quick;
pub mod scope;
pub mod session;

pub use eval::BusSink;
pub use parse::{parse, parse_with_warnings, ParseContext, ParseError, Warning};
pub use session::{ChannelInjector, ExecError, Interrupter, Position, Session, SessionOptions};
