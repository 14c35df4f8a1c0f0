//! The integration tests, one binary: each module starts the real `shoal`
//! binary (private XDG dirs, a temp socket) and talks to it as a client does,
//! or checks the tree itself (`tidy`, `messages`, `readme`).
//!
//! Two tiers (Makefile): `make test` runs all but the slow modules (the SDK
//! and Inspector clients, loads, floods, kill rounds: see `SLOW` there) and
//! needs only the Rust toolchain, `python3` and `git`; `make test-all` runs
//! everything, and is what `.ci/run` runs. A test whose tool is missing is
//! skipped with its reason (`common::have_tools`).

mod common;

mod adapters;
mod agent_tasks;
mod attach;
mod background;
mod bash_habits;
mod big_output;
mod cli_docs;
mod clients;
mod daemon;
mod fuzz_regressions;
mod hardening;
mod hardval;
mod hotpath;
mod http;
mod http_client;
mod http_sdk;
mod journal;
mod kernel_schema;
mod language_card;
mod leash;
mod leash_approvals;
mod leash_broker;
mod leash_confine;
mod leash_elicit;
mod leash_escape;
mod leash_namespaces;
mod leash_runtime;
mod leash_sessions;
mod load;
mod mcp;
mod mcp_language;
mod mcp_modern;
mod mcp_modern_tasks;
mod mcp_sdk;
mod mcp_surface;
mod messages;
mod model_hints;
mod model_text;
mod node_clients;
mod processes;
mod pty;
mod pty_memory;
mod pty_sdk;
mod readme;
mod redteam;
mod render_tty;
mod request_span;
mod service_restart;
mod takeover;
mod task_scoping;
mod tasks;
mod tasks_sdk;
mod tidy;
mod transcript_memory;
mod user_channels;
mod wire_snapshots;
mod worker;
mod worker_sessions;
