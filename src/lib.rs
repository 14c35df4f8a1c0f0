//! Shoal: the core library (language, values, protocol helpers) plus the actor shell.
pub mod journal;
pub mod lang;
pub mod shell;
pub mod value;
pub mod config;
pub mod paths;
pub mod proto;
#[path = "../actors/mod.rs"]
pub mod actors;
