//! The MCP surface (docs/protocol.md §2, reference-protocol §5): version negotiation,
//! the advertised tools with input and output schemas, argument validation
//! with the jsonschema crate, and folding kernel results into `CallToolResult`s.
//!
//! Only tools whose capability exists are advertised.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use super::bound::{bound_text, MAX_TEXT};
use super::rpc::{RpcError, INVALID_PARAMS};
use super::uri;

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
/// in `tests/language_card.rs`.
pub const LANGUAGE_CARD: &str = include_str!("../../docs/language.md");

/// The URI of the language card.
pub const CARD_URI: &str = "shoal://docs/language";

/// The server's `instructions`: the essentials in a few lines.
pub const INSTRUCTIONS: &str = "Shoal is a structured shell: every command or expression returns a typed value \
(int, str, list, record, table, outcome), stored as a ref out:N in a named session whose bindings persist. \
Run source with shoal_exec: `ls`, `cat f.txt`, `(ls .).where(.size > 1kb).map(.name)`, `let x = 6 * 7`. \
It is not bash: no pipes `|` (chain methods), `{env.HOME}` not `$HOME` in strings, `sh { ... }` runs real bash. \
A failing command gives an outcome (.ok, .status, .stdout, .stderr); position:\"stmt\" makes it an error. \
Large values come back elided as {\"$\":\"ref\"}: read parts with shoal_get (path, slice) or resources/read. \
Errors carry a hint. Read the prompt shoal_language (or resource shoal://docs/language) for the full card.";

/// Who the server is: the handshake's `serverInfo`, and the 2026-07-28
/// `_meta` stamp on every result.
pub fn server_info() -> Json {
    json!({"name": "shoal", "title": "Shoal", "version": env!("CARGO_PKG_VERSION")})
}

pub fn initialize_result(version: &str) -> Json {
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": false},
            "resources": {"subscribe": true, "listChanged": false},
            "prompts": {"listChanged": false},
            "completions": {},
            "tasks": super::mcp_tasks::capability(),
        },
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// `prompts/list`.
pub fn prompts() -> Json {
    json!({"prompts": [{
        "name": "shoal_language",
        "title": "The Shoal language card",
        "description": "How to use Shoal as an agent: commands vs values, dot-chains, sh { }, outcomes, refs, and the Shoal form of each bash habit.",
    }]})
}

/// `prompts/get`: the card as one user message.
pub fn prompt_get(name: &str) -> Result<Json, RpcError> {
    if name != "shoal_language" {
        return Err(RpcError::invalid_params(format!(
            "unknown prompt {name:?} (the prompt is shoal_language)"
        ))
        .with_data(json!({"name": name})));
    }
    Ok(json!({
        "description": "The Shoal language card",
        "messages": [{"role": "user", "content": {"type": "text", "text": LANGUAGE_CARD}}],
    }))
}

/// `resources/read` of the language card.
pub fn card_read_result() -> Json {
    json!({"contents": [{"uri": CARD_URI, "mimeType": "text/markdown", "text": LANGUAGE_CARD}]})
}

/// What the daemon can do right now (tools and resources follow it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// `journal.query` / `blob.get` exist.
    pub journal: bool,
    /// The event bus exists (`shoal://events/*`, subscriptions).
    pub events: bool,
}

fn elide_schema() -> Json {
    json!({"type": "object", "properties": {
        "max_bytes": {"type": "integer", "minimum": 0}, "max_rows": {"type": "integer", "minimum": 0},
        "max_items": {"type": "integer", "minimum": 0}}})
}

pub fn exec_input_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "src": {"type": "string", "description": "Shoal source to run"},
            // `plan` joins when plans exist.
            "mode": {"enum": ["run"]},
            "background": {"type": "boolean", "description": "run as a task: {task, events} at once"},
            "timeout_ms": {"type": "integer", "minimum": 0, "description": "wait budget; past it {task, events, timed_out}, still running"},
            "position": {"enum": ["stmt", "value"], "description": "value (default): a failing final command yields its outcome; stmt: it raises"},
            "elide": elide_schema(),
        },
        "required": ["src"],
        "additionalProperties": false,
    })
}

/// A tool's `outputSchema`: its success shape (`properties`, `required`)
/// or the error shape `{code, message, data?}` that every `isError` result
/// carries (docs/protocol.md §9: clients validate errors against it too).
pub fn output_schema(properties: Json, required: &[&str]) -> Json {
    let mut props = properties;
    if let Some(p) = props.as_object_mut() {
        p.insert(
            "code".into(),
            json!({"type": "integer", "description": "error results only: the JSON-RPC error code"}),
        );
        p.insert(
            "message".into(),
            json!({"type": "string", "description": "error results only: what went wrong"}),
        );
        p.insert(
            "data".into(),
            json!({"type": "object", "description": "error results only: details (hint, span, errors, ref)"}),
        );
    }
    json!({
        "type": "object",
        "properties": props,
        "anyOf": [{"required": required}, {"required": ["code", "message"]}],
    })
}

pub fn exec_output_schema() -> Json {
    let mut s = output_schema(
        json!({
            "ref": {"type": "string", "description": "transcript ref, out:N"},
            "uri": {"type": "string"},
            "value": {"type": "object", "description": "tagged wire value, e.g. {\"$\":\"int\",\"v\":42}; {\"$\":\"ref\"} when elided"},
            "render": {"type": "string"},
            "elapsed_ms": {"type": "number"},
            "journal": {"enum": ["degraded"], "description": "present when the journal could not commit lately: the result is not yet durable"},
            "warnings": warnings_schema(),
            "task": {"type": "string"},
            "events": {"type": "string"},
            "timed_out": {"type": "boolean"},
        }),
        &["ref", "uri", "value", "render", "elapsed_ms"],
    );
    if let Some(any) = s.get_mut("anyOf").and_then(Json::as_array_mut) {
        any.push(json!({"required": ["task", "events"]}));
    }
    s
}

/// Likely bash habits in valid source: `[{code, message, span, hint}]`,
/// absent when there are none; they never change the result.
fn warnings_schema() -> Json {
    json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "span": {"type": "object"},
                "hint": {"type": "string"},
            },
            "required": ["code", "message", "span", "hint"],
        },
    })
}

/// One text line per warning of an exec result (`warning[code]: message (hint)`).
fn warning_lines(structured: &Json) -> String {
    let mut out = String::new();
    for w in structured
        .get("warnings")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let field = |k: &str| w.get(k).and_then(Json::as_str).unwrap_or("");
        out.push_str(&format!(
            "\nwarning[{}]: {} (hint: {})",
            field("code"),
            field("message"),
            field("hint")
        ));
    }
    out
}

pub fn get_input_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "out:N or shoal://out/N"},
            "path": {"type": "string", "description": ".field, [n], [a..b], e.g. rows[3].name"},
            "slice": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
            "elide": elide_schema(),
            "format": {"enum": ["json", "render", "raw", "inline"]},
        },
        "required": ["ref"],
        "additionalProperties": false,
    })
}

pub fn get_output_schema() -> Json {
    output_schema(
        json!({
            "ref": {"type": "string"},
            "value": {"type": "object"},
            "render": {"type": "string"},
            "inline": {"type": "string"},
            "raw": {"type": "string"},
            "raw_base64": {"type": "string"},
            "truncated": {"type": "boolean"},
            "n": {"type": "integer"},
        }),
        &["ref"],
    )
}

pub fn journal_input_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "since": {"type": "integer"}, "until": {"type": "integer"},
            "principal": {"type": "string"}, "ok": {"type": "boolean"},
            "effects": {"type": "array", "items": {"type": "string"}},
            "head": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
        },
        "additionalProperties": false,
    })
}

pub fn journal_output_schema() -> Json {
    output_schema(
        json!({
            "entries": {"type": "array", "items": {"type": "object"}},
            "truncated": {"type": "boolean"},
            "more": {"type": "integer"},
        }),
        &["entries"],
    )
}

/// The advertised tools: only those whose capability exists.
pub fn tools(caps: Caps) -> Json {
    let mut t = vec![
        json!({
            "name": "shoal_exec",
            "title": "Run Shoal source",
            "description": "Run Shoal source in the session; returns the typed value (tagged JSON, \
        elided to a ref when large), its rendering and a transcript ref (out:N). Bindings persist.",
            "inputSchema": exec_input_schema(),
            "outputSchema": exec_output_schema(),
            "annotations": {"openWorldHint": true},
            "execution": {"taskSupport": "optional"},
        }),
        json!({
            "name": "shoal_get",
            "title": "Read a transcript value",
            "description": "Query or slice a stored value (out:N) without re-running: path, slice, elide, format.",
            "inputSchema": get_input_schema(),
            "outputSchema": get_output_schema(),
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }),
    ];
    if caps.journal {
        t.push(json!({
            "name": "shoal_journal",
            "title": "Query the journal",
            "description": "Query the execution journal, newest first: since/until (ns), principal, ok, effects, head, limit.",
            "inputSchema": journal_input_schema(),
            "outputSchema": journal_output_schema(),
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }));
    }
    t.extend(super::mcp_pty::tools());
    t.extend(super::mcp_tasks::tools());
    t.extend(super::mcp_leash::tools());
    Json::Array(t)
}

/// Whether `name` is one of the tools [`tools`] advertises for `caps`, without
/// building the list (it is asked on every `tools/call`).
pub fn is_tool(caps: Caps, name: &str) -> bool {
    static NAMES: OnceLock<[Vec<String>; 4]> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        [(false, false), (false, true), (true, false), (true, true)].map(|(journal, events)| {
            tools(Caps { journal, events })
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(|t| t["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        })
    });
    names[(caps.journal as usize) << 1 | caps.events as usize]
        .iter()
        .any(|n| n == name)
}

struct Validators {
    exec: jsonschema::Validator,
    get: jsonschema::Validator,
    journal: jsonschema::Validator,
}

fn validators() -> &'static Validators {
    static V: OnceLock<Validators> = OnceLock::new();
    V.get_or_init(|| Validators {
        exec: jsonschema::validator_for(&exec_input_schema()).expect("exec schema compiles"),
        get: jsonschema::validator_for(&get_input_schema()).expect("get schema compiles"),
        journal: jsonschema::validator_for(&journal_input_schema())
            .expect("journal schema compiles"),
    })
}

/// Validate tool arguments; `Err` is the isError structuredContent
/// `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn validate_args(tool: &str, args: &Json) -> Result<(), Json> {
    let v = match tool {
        "shoal_exec" => &validators().exec,
        "shoal_get" => &validators().get,
        "shoal_journal" => &validators().journal,
        t if t.starts_with("shoal_pty_") => return super::mcp_pty::validate_args(t, args),
        "shoal_cancel" => return super::mcp_tasks::validate_args(tool, args),
        t if super::mcp_leash::is_leash_tool(t) => return super::mcp_leash::validate_args(t, args),
        _ => return Ok(()),
    };
    check_args(v, tool, args)
}

/// Run one tool's argument validator; `Err` is the isError structured
/// content `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn check_args(v: &jsonschema::Validator, tool: &str, args: &Json) -> Result<(), Json> {
    // Valid arguments (the common case) take the short path: no error list.
    if v.is_valid(args) {
        return Ok(());
    }
    let errors: Vec<Json> = v
        .iter_errors(args)
        .take(20)
        .map(|e| argument_error(&e.instance_path().to_string(), &e.to_string()))
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let first = errors[0]["message"]
        .as_str()
        .unwrap_or("invalid")
        .to_string();
    Err(invalid_arguments(
        format!("invalid arguments for {tool}: {first}"),
        errors,
    ))
}

/// The one shape of a tool's argument error (the structured content of its `isError`
/// result): `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn invalid_arguments(message: String, errors: Vec<Json>) -> Json {
    json!({"code": INVALID_PARAMS, "message": message, "data": {"errors": errors}})
}

/// One entry of [`invalid_arguments`]'s `errors`.
pub fn argument_error(path: &str, message: &str) -> Json {
    json!({"path": path, "message": message})
}

/// The addressable URI of a result, in order: `uri`, `value.uri` (elided),
/// `ref` converted.
fn link_uri(structured: &Json) -> Option<String> {
    if let Some(u) = structured.get("uri").and_then(Json::as_str) {
        return Some(u.to_string());
    }
    if let Some(u) = structured
        .get("value")
        .and_then(|v| v.get("uri"))
        .and_then(Json::as_str)
    {
        return Some(u.to_string());
    }
    structured
        .get("ref")
        .and_then(Json::as_str)
        .and_then(uri::ref_to_uri)
}

fn resource_link(uri: &str, name: &str) -> Json {
    json!({"type": "resource_link", "uri": uri, "name": name, "mimeType": "application/json"})
}

/// A successful tool result: bounded text, a resource link, structured content.
pub fn tool_success(structured: Json) -> Json {
    let uri = link_uri(&structured);
    let text = match ["render", "inline", "raw"]
        .iter()
        .find_map(|k| structured.get(*k).and_then(Json::as_str))
    {
        Some(r) => bound_text(r, MAX_TEXT, uri.as_deref()),
        None => bound_text(
            &serde_json::to_string_pretty(&structured).unwrap_or_default(),
            MAX_TEXT,
            uri.as_deref(),
        ),
    };
    let text = text + &warning_lines(&structured);
    let mut content = vec![json!({"type": "text", "text": text})];
    if let Some(uri) = &uri {
        let name = structured.get("ref").and_then(Json::as_str).unwrap_or(uri);
        content.push(resource_link(uri, name));
    }
    json!({"content": content, "structuredContent": structured, "isError": false})
}

/// A failed tool result carrying an error object `{code, message, data?}`;
/// linked when the error was stored (`data.uri` / `data.ref`).
pub fn tool_error(error: Json) -> Json {
    let uri = error
        .get("data")
        .and_then(|d| {
            d.get("uri")
                .and_then(Json::as_str)
                .map(str::to_string)
                .or_else(|| {
                    d.get("ref")
                        .and_then(Json::as_str)
                        .filter(|r| r.starts_with("out:"))
                        .and_then(uri::ref_to_uri)
                })
        })
        .filter(|_| error.get("code") == Some(&json!(super::rpc::RAISED)));
    let text = bound_text(&error_text(&error), MAX_TEXT, uri.as_deref());
    let mut content = vec![json!({"type": "text", "text": text})];
    if let Some(u) = &uri {
        let name = error["data"]["ref"].as_str().unwrap_or(u);
        content.push(resource_link(u, name));
    }
    json!({"content": content, "structuredContent": error, "isError": true})
}

/// Stderr shown in an error's text at most (the whole of it is in the value).
const ERROR_STDERR_TEXT: usize = 2048;

/// The text of an error result, for a model to read: the message with its
/// codes, the hint, argument errors, a failed command's status and stderr.
fn error_text(error: &Json) -> String {
    let data = error.get("data");
    let field = |k: &str| data.and_then(|d| d.get(k));
    let message = error["message"].as_str().unwrap_or("error");
    let rpc_code = error["code"].as_i64().unwrap_or(0);
    let mut out = match field("code").and_then(Json::as_str) {
        Some(lang) => format!("error [{lang}, {rpc_code}]: {message}"),
        None => format!("error [{rpc_code}]: {message}"),
    };
    if let Some(hint) = field("hint").and_then(Json::as_str) {
        out.push_str("\nhint: ");
        out.push_str(hint);
    }
    for e in field("errors")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let path = e["path"]
            .as_str()
            .filter(|p| !p.is_empty())
            .unwrap_or("(arguments)");
        out.push_str(&format!(
            "\n  {path}: {}",
            e["message"].as_str().unwrap_or("")
        ));
    }
    if let Some(status) = field("status").filter(|s| !s.is_null()) {
        out.push_str(&format!("\nstatus: {status}"));
    }
    if let Some(stderr) = field("stderr")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
    {
        out.push_str("\nstderr:\n");
        out.push_str(&bound_text(stderr, ERROR_STDERR_TEXT, None));
    }
    out
}

pub fn tool_error_rpc(e: &RpcError) -> Json {
    tool_error(e.to_json())
}

/// Transcript refs per `resources/list` page.
pub const RESOURCES_PAGE: u64 = 100;

/// A `resources/list` page (docs/protocol.md §9): `cursor` is `None` for the first
/// page, which starts with the fixed roots; refs go newest first, from
/// `last_ref` down, [`RESOURCES_PAGE`] at a time, and `nextCursor` names the
/// next ref below the page, so refs created meanwhile never shift a page.
pub fn resources_page(caps: Caps, last_ref: u64, cursor: Option<&str>) -> Result<Json, RpcError> {
    let (fixed, top) = match cursor {
        None => (true, last_ref),
        Some(c) => {
            let n = c
                .strip_prefix("out<=")
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|n| *n <= last_ref)
                .ok_or_else(|| {
                    RpcError::invalid_params(format!("invalid cursor {c:?}"))
                        .with_data(json!({"cursor": c}))
                })?;
            (false, n)
        }
    };
    let bottom = top.saturating_sub(RESOURCES_PAGE - 1).max(1);
    let refs: Vec<u64> = if top == 0 {
        Vec::new()
    } else {
        (bottom..=top).rev().collect()
    };
    let mut r = resources(caps, fixed, &refs);
    if bottom > 1 && top > 0 {
        r["nextCursor"] = json!(format!("out<={}", bottom - 1));
    }
    Ok(r)
}

/// `resources/list` entries: the fixed roots (when `fixed`) plus `out_refs`.
fn resources(caps: Caps, fixed: bool, out_refs: &[u64]) -> Json {
    let r = |uri: &str, name: &str, desc: &str| json!({"uri": uri, "name": name, "description": desc, "mimeType": "application/json"});
    let mut v = Vec::new();
    if fixed {
        v.push(json!({"uri": CARD_URI, "name": "language", "title": "The Shoal language card",
            "description": "How to use Shoal as an agent (also the prompt shoal_language)", "mimeType": "text/markdown"}));
    }
    if fixed && caps.journal {
        v.push(r(
            "shoal://journal",
            "journal",
            "The execution journal, newest first (subscribable)",
        ));
    }
    if fixed {
        v.push(r(
            "shoal://session/cwd",
            "cwd",
            "The session's working directory",
        ));
        v.push(r(
            "shoal://session/env",
            "env",
            "The session's environment variables",
        ));
    }
    for n in out_refs {
        v.push(r(
            &super::kernel::ref_uri(*n),
            &super::kernel::ref_name(*n),
            "A transcript value",
        ));
    }
    json!({"resources": v})
}

/// What a `completion/complete` request asks to complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompleteTarget {
    /// `n` of `shoal://out/{n}`: transcript ref numbers.
    OutRef,
    /// `channel` of `shoal://events/{channel}`.
    Channel,
    /// `view` of `shoal://session/{view}`.
    SessionView,
    /// Arguments with no known values (`hash`, prompt arguments).
    Nothing,
}

/// Parse `completion/complete` params into the target and the typed prefix.
pub fn complete_request(params: &Json) -> Result<(CompleteTarget, String), RpcError> {
    let r = params
        .get("ref")
        .ok_or_else(|| RpcError::invalid_params("completion/complete requires ref"))?;
    let arg = params
        .get("argument")
        .ok_or_else(|| RpcError::invalid_params("completion/complete requires argument"))?;
    let name = arg.get("name").and_then(Json::as_str).unwrap_or("");
    let value = arg
        .get("value")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let target = match r.get("type").and_then(Json::as_str) {
        Some("ref/resource") => {
            let tpl = r.get("uri").and_then(Json::as_str).unwrap_or("");
            match (tpl.split('{').next().unwrap_or(""), name) {
                ("shoal://out/", "n") => CompleteTarget::OutRef,
                ("shoal://events/", "channel") => CompleteTarget::Channel,
                ("shoal://session/", "view") => CompleteTarget::SessionView,
                _ => CompleteTarget::Nothing,
            }
        }
        Some("ref/prompt") => CompleteTarget::Nothing,
        other => {
            return Err(RpcError::invalid_params(format!(
                "ref.type must be ref/resource or ref/prompt (got {other:?})"
            )))
        }
    };
    Ok((target, value))
}

/// Values a completion returns at most (the MCP limit).
const COMPLETION_MAX: usize = 100;

/// A `completion/complete` result: the candidates that start with `prefix`,
/// in the order given, at most [`COMPLETION_MAX`].
pub fn completion_result(candidates: impl IntoIterator<Item = String>, prefix: &str) -> Json {
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    let total = matching.len();
    let values: Vec<String> = matching.into_iter().take(COMPLETION_MAX).collect();
    json!({"completion": {"values": values, "total": total, "hasMore": total > COMPLETION_MAX}})
}

/// `resources/templates/list`.
pub fn resource_templates(caps: Caps) -> Json {
    let t = |tpl: &str, name: &str, desc: &str| json!({"uriTemplate": tpl, "name": name, "description": desc, "mimeType": "application/json"});
    let mut v = vec![
        t(
            "shoal://out/{n}{?path,slice,format}",
            "transcript-value",
            "A transcript value; slice=A..B",
        ),
        t(
            "shoal://session/{view}",
            "session-view",
            "Session views: cwd, env",
        ),
        super::mcp_pty::template(),
        t(
            "shoal://task/{n}",
            "task",
            "A background task's record (state, src, elapsed_ms, result_ref); subscribable",
        ),
        t(
            "shoal://task/{n}/out",
            "task-output",
            "A finished background task's value",
        ),
    ];
    if caps.journal {
        v.push(t(
            "shoal://val/{hash}",
            "content-value",
            "A content-addressed journal output",
        ));
        v.push(t(
            "shoal://journal{?since,until,head,principal,ok,effects,limit}",
            "journal",
            "Journal entries, newest first",
        ));
    }
    if caps.events {
        v.push(t(
            "shoal://events/{channel}{?since,limit}",
            "events",
            "Events of a channel (subscribable)",
        ));
    }
    json!({"resourceTemplates": v})
}

/// A `resources/read` result (reference §6.4): `render`/`raw`/`inline`
/// strings as `text/plain`, else pretty JSON of `payload`, bounded.
pub fn read_result(uri: &str, result: &Json) -> Json {
    for k in ["render", "raw", "inline"] {
        if let Some(s) = result.get(k).and_then(Json::as_str) {
            return json!({
                "contents": [{"uri": uri, "mimeType": "text/plain", "text": bound_text(s, MAX_TEXT, Some(uri))}],
                "structuredContent": result,
            });
        }
    }
    let payload = result.get("value").unwrap_or(result);
    let text = bound_text(
        &serde_json::to_string_pretty(payload).unwrap_or_default(),
        MAX_TEXT,
        Some(uri),
    );
    json!({
        "contents": [{"uri": uri, "mimeType": "application/json", "text": text}],
        "structuredContent": payload,
    })
}

/// The channel a subscribable URI watches (docs/protocol.md §2): `shoal://events/{ch}`
/// → `ch`, `shoal://journal` → `journal`.
pub fn subscription_channel(u: &str) -> Result<String, String> {
    let p = uri::parse(u)?;
    match (p.root.as_str(), p.segs.first()) {
        ("events", Some(ch)) => Ok(ch.clone()),
        ("journal", None) => Ok("journal".into()),
        ("jobs", None) => Ok("jobs".into()),
        ("task", Some(n)) if n.parse::<u64>().is_ok_and(|n| n > 0) && p.segs.len() <= 2 => {
            Ok(format!("task.{n}"))
        }
        _ => Err(format!(
            "only shoal://events/{{channel}}, shoal://journal, shoal://jobs and shoal://task/{{n}} are subscribable (got {u})"
        )),
    }
}

/// Keep the leading items of `items` whose encodings fit in the hard cap;
/// `(kept, dropped)`.
fn cap_items(items: Vec<Json>) -> (Vec<Json>, usize) {
    let mut used = 64;
    let total = items.len();
    let mut kept = Vec::new();
    for it in items {
        used += serde_json::to_vec(&it).map(|b| b.len()).unwrap_or(0) + 1;
        if used > super::elide::HARD_CAP {
            break;
        }
        kept.push(it);
    }
    let dropped = total - kept.len();
    (kept, dropped)
}

/// `shoal_journal` / `shoal://journal`: `{entries}`, bounded to the hard cap
/// (`truncated`, `more` when entries were left off: narrow with `limit`/`until`).
pub fn journal_result(entries: Vec<Json>) -> Json {
    let (kept, dropped) = cap_items(entries);
    let mut r = json!({"entries": kept});
    if dropped > 0 {
        r["truncated"] = json!(true);
        r["more"] = json!(dropped);
    }
    r
}

/// `shoal://events/{ch}`: `{channel, events}`, bounded like the journal.
pub fn events_result(channel: &str, events: Vec<Json>) -> Json {
    let (kept, dropped) = cap_items(events);
    let mut r = json!({"channel": channel, "events": kept});
    if dropped > 0 {
        r["truncated"] = json!(true);
        r["more"] = json!(dropped);
    }
    r
}

/// A `blob.get` result bounded to the default byte budget: a stored value
/// over it becomes an elided `{"$":"ref"}` with a text head.
pub fn bounded_blob(blob: &Json, uri: &str) -> Json {
    bounded_blob_max(blob, uri, super::elide::Budget::default().max_bytes)
}

/// [`bounded_blob`] with an explicit budget (`blob.get`'s `max_bytes`).
pub fn bounded_blob_max(blob: &Json, uri: &str, max_bytes: usize) -> Json {
    let len = serde_json::to_vec(blob).map(|b| b.len()).unwrap_or(0);
    if len <= max_bytes {
        return blob.clone();
    }
    let v = &blob["value"];
    let of = v.get("$").and_then(Json::as_str).unwrap_or("json");
    let head = serde_json::to_string_pretty(v).unwrap_or_default();
    let head: Vec<&str> = head.lines().take(10).collect();
    json!({"hash": blob["hash"], "value": {
        "$": "ref", "uri": uri, "of": of, "n": len, "preview": {"$": "null"},
        "render_head": bound_text(&head.join("\n"), 2048, Some(uri)),
    }})
}

/// Parse `A..B` (`slice=` of an out URI).
pub fn parse_slice(s: &str) -> Option<(usize, usize)> {
    let (a, b) = s.split_once("..")?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
