//! The head names the evaluator answers itself (evaluator, session and filesystem builtins):
//! one table that evaluation, effect derivation and did-you-mean hints read. Names only; it
//! runs nothing.

use crate::shell::builtins;

/// Heads handled by the evaluator itself (docs/rules.md §8: evaluator heads).
pub const SPECIAL_HEADS: &[&str] = &[
    "jobs", "exit", "quit", "plan", "apply", "explain", "interact", "assert", "open", "save",
    "reef", "undo", "journal", "history",
];
/// Session heads (docs/rules.md §9: session heads).
pub const SESSION_HEADS: &[&str] = &[
    "cd", "pushd", "popd", "dirs", "j", "jump", "pwd", "run", "source",
];

/// Every head name the evaluator knows (for did-you-mean and bare names, docs/rules.md §4).
pub fn is_builtin_head(name: &str) -> bool {
    SPECIAL_HEADS.contains(&name) || SESSION_HEADS.contains(&name) || builtins::is_fs_builtin(name)
}

pub fn all_heads() -> impl Iterator<Item = &'static str> {
    SPECIAL_HEADS
        .iter()
        .chain(SESSION_HEADS.iter())
        .chain(builtins::FS_BUILTINS.iter())
        .copied()
}
