//! The terminal emulator of one PTY: a `vt100` parser plus a bounded
//! plain-text scrollback (`crates/shoal-term`, optimised even in debug
//! builds: vt100's generic parser is instantiated there).

pub use shoal_term::*;
