//! Plain text helpers shared by every layer.

/// An effect kind in the snake form kinds are compared in: agents may
/// write `fs.write` or `fs_write`. Which kinds exist is the policy's
/// vocabulary (`shoal_policy::effect::KINDS`); this is only the spelling.
pub fn effect_kind_snake(k: &str) -> String {
    k.replace('.', "_")
}

/// 1-based line and column (in characters) of byte offset `at`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..text.floor_char_boundary(at)];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}
