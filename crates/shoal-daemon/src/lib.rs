//! The actor shell of the daemon: every piece of mutable, long-lived state is
//! an actor here, one per file. Only this tree names actix; `src/` is the core.
//!
//! ```text
//! Daemon (root: config, health registry, session map, shutdown; restarts the
//! │        Listener, JournalWriter and EventBus: `daemon/services.rs`)
//! ├── Listener              accepts, checks peer uid, sniffs the first frame
//! │   ├── KernelConn        kernel JSON-RPC
//! │   └── McpConn           MCP
//! ├── SessionSupervisor(n)  one per named session; re-creates a dead Session
//! │   ├── Session           owns the evaluation worker thread (a token's
//! │   │                     session: the thread that talks to its worker)
//! │   ├── Task(n)           one per background task, on a fork of the session
//! │   ├── PlanStore         the session's plans (Leash)
//! │   └── Pty(n)            one per PTY; its I/O thread feeds the emulator
//! ├── http (actix-web)    MCP over Streamable HTTP, through the socket as McpConns
//! ├── JournalWriter         owns the journal's group-commit writer thread
//! └── EventBus              channels, rings, a broadcast per channel
//!
//! shoal worker (a process per token principal: `worker/`) evaluates that
//! principal's sessions under its sandbox, over a socketpair.
//! ```
//!
//! Invariants: no handler blocks its arbiter (evaluation runs on the session's
//! worker thread, journal reads on blocking threads); serialization happens
//! only in the connection actors; the journal writer is the only redb writer.

pub mod config;
pub mod conn;
pub mod daemon;
pub mod eval;
pub mod event_bus;
pub mod health;
pub mod http;
pub mod journal_writer;
pub mod kernel_conn;
pub mod leash_calls;
pub mod listener;
pub mod mcp_conn;
pub mod msg;
pub mod peer;
pub mod sessions;
pub mod worker;
