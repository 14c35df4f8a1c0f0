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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pty::api;
    use crate::pty::{Exit, PtyInfo};

    fn out_validator(name: &str) -> jsonschema::Validator {
        let t = tools().into_iter().find(|t| t["name"] == name).unwrap();
        assert!(jsonschema::meta::is_valid(&t["inputSchema"]));
        assert!(jsonschema::meta::is_valid(&t["outputSchema"]));
        jsonschema::validator_for(&t["outputSchema"]).unwrap()
    }

    #[test]
    fn results_and_errors_validate() {
        let info = PtyInfo {
            id: 3,
            session: "s".into(),
            cmd: "cat".into(),
            pid: 42,
            rows: 10,
            cols: 40,
            alive: true,
            claimed: None,
            watchers: 0,
        };
        let err = json!({"code": -32022, "message": "unknown or closed pty_id", "data": {"pty_id": "pty:9"}});
        let cases = [
            ("shoal_pty_open", api::open_result(&info)),
            ("shoal_pty_send", api::send_result(3, 5)),
            ("shoal_pty_resize", api::resize_result(3, 30, 100)),
            (
                "shoal_pty_close",
                api::close_result(
                    3,
                    Some(Exit {
                        status: None,
                        signal: Some(9),
                    }),
                ),
            ),
            ("shoal_pty_close", api::close_result(3, None)),
            (
                "shoal_pty_list",
                api::list_result(std::slice::from_ref(&info)),
            ),
        ];
        for (tool, ok) in cases {
            let v = out_validator(tool);
            assert!(v.is_valid(&ok), "{tool}: {ok}");
            assert!(v.is_valid(&err), "{tool} error shape");
            assert!(!v.is_valid(&json!({"nothing": 1})), "{tool} rejects junk");
        }
        let mut t = crate::pty::term::Term::new(2, 10, 0);
        t.process(b"hi");
        let r = crate::pty::ReadResult {
            snapshot: t.read(Some(1)),
            alive: false,
            exit: Some(Exit {
                status: Some(0),
                signal: None,
            }),
            matched: Some(true),
        };
        let read = api::read_result(&info, &r);
        assert!(out_validator("shoal_pty_read").is_valid(&read), "{read}");
        assert_eq!(read["exit"], json!({"status": 0, "signal": null}));
    }

    #[test]
    fn arguments_validate() {
        assert!(validate_args("shoal_pty_open", &json!({"cmd": "cat", "cols": 40})).is_ok());
        let e = validate_args("shoal_pty_open", &json!({"cmd": "", "bogus": 1})).unwrap_err();
        assert_eq!(e["code"], json!(-32602));
        assert!(validate_args(
            "shoal_pty_send",
            &json!({"pty_id": "pty:1", "input": ["a", {"key": "Enter"}]})
        )
        .is_ok());
        assert!(validate_args("shoal_pty_send", &json!({"pty_id": "pty:1", "input": 5})).is_err());
        assert!(validate_args("shoal_pty_resize", &json!({"pty_id": "pty:1", "cols": 5})).is_err());
        assert!(validate_args("shoal_pty_list", &json!({})).is_ok());
    }
}
