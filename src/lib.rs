//! Shoal: the core library (language, values, protocol helpers) plus the actor shell.
pub mod lang;
pub mod value;
