//! The Shoal language: syntax tree, parser, evaluator and the session that
//! hosts an evaluation (scope, cwd, environment); the shell builtins and
//! external processes it runs (`shell`), the adapters that type their output
//! (`adapters`), background tasks (`task`) and the derivation of a program's
//! effects for Leash (`derive`). Pure library code: no actors, no sockets.
//! Processes are spawned by the evaluator on the calling thread.

pub mod adapters;
pub mod ast;
pub mod bound;
pub mod derive;
pub mod env_view;
pub mod eval;
pub mod heads;
pub mod interrupt;
pub use shoal_value::memory;
pub mod parse;
pub mod scope;
pub mod session;
pub mod shell;
pub mod task;

pub use eval::BusSink;
pub use parse::{parse, parse_with_warnings, ParseContext, ParseError, Warning};
pub use session::{ChannelInjector, ExecError, Interrupter, Position, Session, SessionOptions};
