//! Globs for command words: the same implementation as glob values
//! (`shoal_policy::glob`), re-exported where the shell layer looks for it.

pub use shoal_policy::glob::{expand, is_glob, match_component, match_path};
pub use shoal_policy::run_gate::expand_checked;
