//! PTYs as MCP resources: the `shoal://pty/{id}` template. The six
//! `shoal_pty_*` tools are rows of the tool table (`mcp::TOOLS`).

use crate::mcp::ResourceTemplate;

/// `resources/templates/list` entry of a PTY screen.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::json(
        "shoal://pty/{id}",
        "pty-screen",
        "A PTY screen, as shoal_pty_read (subscribable: updates at most every 50 ms)",
    )
}
