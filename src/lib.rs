//! Shoal: the core library (language, values, protocol helpers) plus the actor shell.
#[path = "../actors/mod.rs"]
pub mod actors;
pub mod adapters;
pub mod config;
pub mod journal;
pub mod lang;
pub mod leash;
pub mod paths;
pub mod procmem;
pub mod procs;
pub mod proto;
pub mod pty;
pub mod shell;
pub mod sync;
pub mod task;
pub mod value;
