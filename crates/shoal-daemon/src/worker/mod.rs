//! A token principal's worker process (docs/leash.md): a process of its own,
//! confined by the kernel as a whole, that evaluates the principal's
//! sessions. `pair.rs` is the socketpair both ends speak over, `proto.rs`
//! what crosses it, `host.rs` the worker's side (`shoal worker`).
//!
//! Status: the worker evaluates execs (an approved plan's place and bound
//! files checked, interrupts honoured) and derives plans, asks the daemon
//! for `out:N`, publishes `user.*` events and sends the session's views when
//! they change (tests/it/worker.rs drives it as the daemon will). The
//! daemon does not start it yet: a token's sessions still evaluate on a
//! confined thread of the daemon until the session actors route to it,
//! with background tasks, namespaces and cgroups crossing too.

mod host;
pub mod pair;
pub mod proto;

pub use host::main;
