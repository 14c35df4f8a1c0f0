//! The only place the CLI writes to stdout (`print_stdout` is denied elsewhere,
//! because stdout is the MCP channel of `shoal mcp`).
#![allow(clippy::print_stdout)]

pub fn line(s: &str) {
    println!("{s}");
}

pub fn text(s: &str) {
    print!("{s}");
}
