//! The MCP surface (docs/protocol.md §2), pure: this
//! file holds version negotiation, the handshake, the capabilities ([`Caps`])
//! and the language card as prompt and resource. The tool table (every tool,
//! its schemas, when it is listed, the parse of a call into [`Tool`]) is
//! `table.rs`, the typed arguments `args.rs`, the typed results and their
//! output schemas `outputs.rs`, the argument-error shape `schemas.rs`; `CallToolResult` folding is
//! `results.rs`, resource listing, reading and subscription URIs are
//! `resources.rs`, `completion/complete` is `completion.rs`, the params
//! and results of `initialize`, `ping` and `prompts/*` `methods.rs`, what the server sends unasked
//! `notify.rs`. Nothing here does
//! I/O, holds state or knows of actors.

/// The `_meta` keys of the 2026-07-28 envelope (`mcp_era.rs`), here so the Tasks extension
/// reads them without naming the era module.
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

mod args;
mod completion;
pub mod elicit;
mod journal_text;
mod methods;
pub mod notify;
mod outputs;
mod plan_text;
mod pty_text;
mod resources;
mod results;
#[cfg(test)]
mod results_tests;
mod schemas;
mod table;

use serde_json::Value as Json;

pub use args::*;
pub use completion::{
    complete_request, completion_result, CompleteArgument, CompleteParams, CompleteRef,
    CompleteResult, CompleteTarget, Completion,
};
pub use methods::{
    listen_params, prompt_get, read_params, read_params_ref, CallToolParams, ClientCapabilities,
    ClientInfo, Empty, InitializeParams, InitializeResult, ListChanged, ListenFilter, ListenParams,
    Prompt, PromptGetParams, PromptGetResult, PromptList, PromptMessage, ResourcesCapability,
    ServerCapabilities, TextContent,
};
pub use outputs::*;
pub use resources::{
    bounded_blob, bounded_blob_max, events_result, journal_result, parse_slice, read_contents,
    read_result, resource_templates, resources_page, subscription_channel, ReadResult, Resource,
    ResourceTemplate, ResourceTemplates, ResourceUriParams, ResourcesListParams, ResourcesPage,
    SessionCwd, SessionEnv, TextResource, RESOURCES_PAGE,
};
pub use results::{
    tool_answer, tool_error, tool_result, tool_success, CallToolResult, Content, Link, McpResult,
    ResultMeta, ServerInfo, ToolOutput, ToolResult,
};
pub use schemas::{argument_error, invalid_arguments};
pub use table::{
    input_schema_of, is_tool, parse_call, tool_def, tools, tools_detailed, tools_list, CallError,
    Needs, Tool, ToolDef, ToolEntry, ToolsList, TOOLS,
};

pub const VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
pub const NEWEST: &str = "2025-11-25";

/// Methods that make a first frame an MCP connection (docs/protocol.md §1).
pub fn is_mcp_method(method: &str) -> bool {
    matches!(
        method,
        "initialize" | "ping" | "server/discover" | "shoal/attach"
    ) || [
        "tools/",
        "resources/",
        "notifications/",
        "prompts/",
        "completion/",
        "logging/",
        "subscriptions/",
    ]
    .iter()
    .any(|p| method.starts_with(p))
}

/// Echo the client's version when supported, else the newest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| VERSIONS.iter().find(|v| **v == r).copied())
        .unwrap_or(NEWEST)
}

/// The language card for agents (docs/protocol.md §9): the `shoal_language`
/// prompt and the `shoal://docs/language` resource. Every example in it runs
/// in `tests/it/language_card.rs`.
pub const LANGUAGE_CARD: &str = include_str!("../../../../docs/language.md");

/// The URI of the language card.
pub const CARD_URI: &str = "shoal://docs/language";

/// The server's `instructions`: the essentials in a few lines.
pub const INSTRUCTIONS: &str = "Shoal is a structured shell: every command or expression returns a typed value \
(int, str, list, record, table, outcome), stored as a ref out:N in a named session whose bindings persist. \
Run source with shoal_exec: `ls`, `cat f.txt`, `(ls .).where(.size > 1kb).map(.name)`, `let x = 6 * 7`. \
It is not bash: no pipes `|` (chain methods), `{env.HOME}` not `$HOME` in strings, `sh { ... }` runs real bash. \
A failing command gives an outcome (.ok, .status, .stdout, .stderr); position:\"stmt\" makes it an error. \
Adapters type git, ps, df and friends; `^git log -5` runs a tool as written, untyped. \
Large values come back elided as {\"$\":\"ref\"}: read parts with shoal_get (path, slice, lines) or resources/read. \
Long text shows head and tail; its \"… lines A–B of N elided\" line names the shoal_get call for the rest. \
Errors carry a hint. Read the prompt shoal_language (or resource shoal://docs/language) for the full card.";

/// Who the server is: the handshake's `serverInfo`, and the 2026-07-28
/// `_meta` stamp on every result.
pub fn server_info() -> Json {
    result_json(ServerInfo::SHOAL)
}

pub fn initialize_result(version: &'static str) -> Json {
    result_json(InitializeResult::new(version))
}

/// `prompts/list`.
pub fn prompts() -> Json {
    result_json(PromptList::all())
}

/// `resources/read` of the language card.
pub fn card_read_result() -> Json {
    result_json(ReadResult::one(
        CARD_URI,
        "text/markdown",
        LANGUAGE_CARD,
        None,
    ))
}

/// What the daemon can do right now (tools and resources follow it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// `journal.query` / `blob.get` exist.
    pub journal: bool,
    /// The event bus exists (`shoal://events/*`, subscriptions).
    pub events: bool,
}
#[cfg(test)]
mod tests;
