//! The advertised MCP tools: input schemas, output schemas (each also admits
//! the error shape `{code, message, data?}`), which tools exist for the
//! daemon's [`Caps`], and argument validation with the jsonschema crate into
//! the one argument-error shape [`invalid_arguments`]. Pure: it never runs a
//! tool and never folds a result.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use super::super::rpc::INVALID_PARAMS;
use super::Caps;

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
pub fn get_input_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "out:N or shoal://out/N; task:N reads a task"},
            "path": {"type": "string", "description": ".field, [n], [a..b], e.g. rows[3].name"},
            "slice": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2},
            "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2, "description": "[a, b]: lines a..b (1-based, inclusive) of the text"},
            "elide": elide_schema(),
            "format": {"enum": ["json", "render", "raw", "inline"], "description": "default render (text); json: the tagged value"},
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

/// The advertised tools (`tools/list`): only those whose capability exists,
/// lean. Every result is an object (error results the shape
/// `{code, message, data?}`), and that is all `outputSchema` says: the
/// detailed shapes of [`tools_detailed`] would double the listing every
/// client reads at start, for a check no client needs. Annotations that are
/// the spec's defaults (`openWorldHint: true`, `readOnlyHint: false`,
/// `destructiveHint` of a read-only tool) are left out.
pub fn tools(caps: Caps) -> Json {
    let mut t = tools_detailed(caps);
    for tool in t.as_array_mut().into_iter().flatten() {
        advertise(tool);
    }
    t
}

fn advertise(tool: &mut Json) {
    let Some(o) = tool.as_object_mut() else {
        return;
    };
    o.insert("outputSchema".into(), json!({"type": "object"}));
    let empty = match o.get_mut("annotations").and_then(Json::as_object_mut) {
        Some(a) => {
            let read_only = a.get("readOnlyHint") == Some(&json!(true));
            if a.get("openWorldHint") == Some(&json!(true)) {
                a.remove("openWorldHint");
            }
            if !read_only {
                a.remove("readOnlyHint");
            } else {
                a.remove("destructiveHint");
            }
            a.is_empty()
        }
        None => false,
    };
    if empty {
        o.remove("annotations");
    }
}

/// The tools with their detailed output schemas: the shapes every result
/// keeps (the tests validate real results against them).
pub fn tools_detailed(caps: Caps) -> Json {
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
            "description": "Read a stored value (out:N) without re-running: its text (head and tail when long), \
        lines [a, b] of it, a path, a slice, or format json for the tagged value.",
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
    t.extend(super::super::mcp_pty::tools());
    t.extend(super::super::mcp_tasks::tools());
    t.extend(super::super::mcp_leash::tools());
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
        t if t.starts_with("shoal_pty_") => return super::super::mcp_pty::validate_args(t, args),
        "shoal_cancel" => return super::super::mcp_tasks::validate_args(tool, args),
        t if super::super::mcp_leash::is_leash_tool(t) => {
            return super::super::mcp_leash::validate_args(t, args)
        }
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
