//! The six `shoal_pty_*` MCP tools: input and output schemas, argument
//! validation. Every output schema accepts the tool's success shape or the
//! error shape `{code, message, data?, hint?}` of an `isError` result, so
//! clients that validate error results too (the TypeScript SDK) accept both.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

const PTY_ID: &str = "a PTY of this session, pty:N";

fn pty_id() -> Json {
    json!({"type": "string", "description": PTY_ID})
}

fn input(properties: Json, required: &[&str]) -> Json {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// The success shape or the `isError` shape (one definition for every tool).
fn output(properties: Json, required: &[&str]) -> Json {
    super::mcp::output_schema(properties, required)
}

fn exit_schema() -> Json {
    json!({"anyOf": [{"type": "null"}, {"type": "object", "properties": {
        "status": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "signal": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}]})
}

fn list_entry() -> Json {
    json!({"type": "object", "properties": {
        "pty_id": {"type": "string"}, "cmd": {"type": "string"}, "pid": {"type": "integer"},
        "cols": {"type": "integer"}, "rows": {"type": "integer"}, "alive": {"type": "boolean"},
        "taken_over": {"type": "object"}, "watchers": {"type": "integer"},
    }, "required": ["pty_id", "cmd", "pid", "cols", "rows", "alive"]})
}

struct Tool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: Json,
    output: Json,
    read_only: bool,
}

fn defs() -> Vec<Tool> {
    let dim = |what: &str| json!({"type": "integer", "minimum": 0, "description": format!("{what}, clamped to 1..=1000")});
    vec![
        Tool {
            name: "shoal_pty_open",
            title: "Open a terminal",
            description: "Start a program on a new PTY (a real terminal: editors, REPLs, TUIs, prompts) in the \
session's cwd and environment; 80x24 unless cols/rows say otherwise. Returns pty_id. Read the screen with \
shoal_pty_read (wait_for avoids polling).",
            input: input(
                json!({
                    "cmd": {"type": "string", "minLength": 1, "description": "program, found on the session's PATH"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "cols": dim("columns (default 80)"),
                    "rows": dim("rows (default 24)"),
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "overrides of the session environment"},
                }),
                &["cmd"],
            ),
            output: output(
                json!({
                    "pty_id": {"type": "string"}, "pid": {"type": "integer"}, "cmd": {"type": "string"},
                    "cols": {"type": "integer"}, "rows": {"type": "integer"}, "alive": {"type": "boolean"},
                }),
                &["pty_id", "pid", "cmd", "cols", "rows", "alive"],
            ),
            read_only: false,
        },
        Tool {
            name: "shoal_pty_send",
            title: "Type into a terminal",
            description: "Send input to a PTY: a string (verbatim), {key:\"Enter\"} (named keys: Enter, Tab, \
Escape, Backspace, Up/Down/Left/Right, Home, End, PageUp, F1-F12, Ctrl-C, ...), {text}, {bytes} (base64), \
or an array of these, concatenated in order.",
            input: input(
                json!({
                    "pty_id": pty_id(),
                    "input": {"anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"}], "description": "string | {key} | {text} | {bytes} | array of them"},
                }),
                &["pty_id", "input"],
            ),
            output: output(
                json!({"pty_id": {"type": "string"}, "sent": {"type": "integer"}}),
                &["pty_id", "sent"],
            ),
            read_only: false,
        },
        Tool {
            name: "shoal_pty_read",
            title: "Read a terminal screen",
            description: "The PTY's screen: exactly rows lines, cursor, changed (since the last read), alive, exit. \
wait_for (text, or re:REGEX) returns as soon as the screen matches; stable_ms once it has not changed \
for that long; timeout_ms bounds both (matched says which). scrollback: N adds lines that scrolled off.",
            input: input(
                json!({
                    "pty_id": pty_id(),
                    "wait_for": {"type": "string", "minLength": 1, "description": "text on the screen, or re:REGEX"},
                    "stable_ms": {"type": "integer", "minimum": 0},
                    "timeout_ms": {"type": "integer", "minimum": 0, "description": "default 10000, at most 300000"},
                    "scrollback": {"type": "integer", "minimum": 0},
                }),
                &["pty_id"],
            ),
            output: output(
                json!({
                    "pty_id": {"type": "string"}, "cmd": {"type": "string"},
                    "cols": {"type": "integer"}, "rows": {"type": "integer"},
                    "cursor": {"type": "object", "properties": {
                        "row": {"type": "integer"}, "col": {"type": "integer"}, "hidden": {"type": "boolean"}},
                        "required": ["row", "col", "hidden"]},
                    "screen": {"type": "array", "items": {"type": "string"}},
                    "changed": {"type": "boolean"}, "alive": {"type": "boolean"},
                    "exit": exit_schema(), "pid": {"type": "integer"},
                    "matched": {"type": "boolean"},
                    "scrollback": {"type": "array", "items": {"type": "string"}},
                    "alternate_screen": {"type": "boolean"},
                }),
                &["pty_id", "cmd", "cols", "rows", "cursor", "screen", "changed", "alive", "exit", "pid"],
            ),
            read_only: true,
        },
        Tool {
            name: "shoal_pty_resize",
            title: "Resize a terminal",
            description: "Resize a PTY (the program gets SIGWINCH and repaints); cols and rows clamped to 1..=1000.",
            input: input(
                json!({"pty_id": pty_id(), "cols": dim("columns"), "rows": dim("rows")}),
                &["pty_id", "cols", "rows"],
            ),
            output: output(
                json!({"pty_id": {"type": "string"}, "cols": {"type": "integer"}, "rows": {"type": "integer"}}),
                &["pty_id", "cols", "rows"],
            ),
            read_only: false,
        },
        Tool {
            name: "shoal_pty_close",
            title: "Close a terminal",
            description: "Kill the PTY's process group (SIGKILL), reap it and report how it ended.",
            input: input(json!({"pty_id": pty_id()}), &["pty_id"]),
            output: output(
                json!({"pty_id": {"type": "string"}, "closed": {"type": "boolean"}, "exit": exit_schema()}),
                &["pty_id", "closed", "exit"],
            ),
            read_only: false,
        },
        Tool {
            name: "shoal_pty_list",
            title: "List terminals",
            description: "The session's PTYs, ascending, without screen contents.",
            input: input(json!({}), &[]),
            output: output(
                json!({"ptys": {"type": "array", "items": list_entry()}}),
                &["ptys"],
            ),
            read_only: true,
        },
    ]
}

/// The tool entries for `tools/list`.
pub fn tools() -> Vec<Json> {
    defs()
        .into_iter()
        .map(|t| {
            json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": t.input,
                "outputSchema": t.output,
                "annotations": {"readOnlyHint": t.read_only, "destructiveHint": false, "openWorldHint": true},
            })
        })
        .collect()
}

fn validators() -> &'static Vec<(&'static str, jsonschema::Validator)> {
    static V: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    V.get_or_init(|| {
        defs()
            .into_iter()
            .map(|t| {
                (
                    t.name,
                    jsonschema::validator_for(&t.input).expect("pty tool schema compiles"),
                )
            })
            .collect()
    })
}

/// Validate `shoal_pty_*` arguments; `Err` is the isError structured content
/// `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn validate_args(tool: &str, args: &Json) -> Result<(), Json> {
    let Some((_, v)) = validators().iter().find(|(n, _)| *n == tool) else {
        return Ok(());
    };
    super::mcp::check_args(v, tool, args)
}

/// `resources/templates/list` entry of a PTY screen.
pub fn template() -> Json {
    json!({"uriTemplate": "shoal://pty/{id}", "name": "pty-screen",
        "description": "A PTY screen, as shoal_pty_read (subscribable: updates at most every 50 ms)",
        "mimeType": "application/json"})
}
