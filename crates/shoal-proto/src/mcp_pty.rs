//! PTYs as MCP resources: the `shoal://pty/{id}` template. The six
//! `shoal_pty_*` tools are rows of the tool table (`mcp::TOOLS`).

/// The `resources/templates/list` entry of a PTY screen: URI template,
/// name, description (a JSON resource).
pub const TEMPLATE: (&str, &str, &str) = (
    "shoal://pty/{id}",
    "pty-screen",
    "A PTY screen, as shoal_pty_read (subscribable: updates at most every 50 ms)",
);
