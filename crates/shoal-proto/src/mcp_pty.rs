//! PTYs as MCP resources: the `shoal://pty/{id}` template. The six
//! `shoal_pty_*` tools are rows of the tool table (`mcp::TOOLS`).

use serde_json::{json, Value as Json};

/// `resources/templates/list` entry of a PTY screen.
pub fn template() -> Json {
    json!({"uriTemplate": "shoal://pty/{id}", "name": "pty-screen",
        "description": "A PTY screen, as shoal_pty_read (subscribable: updates at most every 50 ms)",
        "mimeType": "application/json"})
}
