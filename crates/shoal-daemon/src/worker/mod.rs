//! A token principal's worker process (docs/leash.md): a process of its own,
//! confined by the kernel as a whole, that evaluates the principal's
//! sessions. `pair.rs` is the socketpair both ends speak over, `proto.rs`
//! what crosses it, `host.rs` the worker's side (`shoal worker`).
//!
//! The daemon starts one per token principal with a session open
//! (`remote.rs`, `launch.rs`); the sessions' side of a job is
//! `sessions/session/remote.rs`. `tasks.rs` is the sessions' tasks as an
//! evaluation in the worker reaches them.

mod host;
mod jobs;
pub mod launch;
pub mod pair;
pub mod proto;
pub mod remote;
pub mod tasks;

pub use host::main;
