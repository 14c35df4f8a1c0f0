//! The only place the CLI writes to stdout (`print_stdout` is denied elsewhere,
//! because stdout is the MCP channel of `shoal mcp`).
#![allow(clippy::print_stdout)]

pub fn line(s: &str) {
    println!("{s}");
}

pub fn text(s: &str) {
    print!("{s}");
}

/// Bytes for the terminal itself (`shoal attach --pty` paints a PTY's
/// screen), written and flushed at once.
pub fn raw(bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}
