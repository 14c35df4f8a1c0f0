//! Globs for command words: the same implementation as glob values
//! (`crate::value::glob`), re-exported where the shell layer looks for it.

pub use crate::value::glob::{expand, expand_checked, is_glob, match_component, match_path};
