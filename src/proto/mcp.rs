//! The MCP surface (contract §2, reference-protocol §5): version negotiation,
//! the advertised tools with input and output schemas, argument validation
//! with the jsonschema crate, and folding kernel results into `CallToolResult`s.
//!
//! Only tools whose capability exists are advertised.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use super::bound::bound_render;
use super::rpc::{RpcError, INVALID_PARAMS};

pub const VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
pub const NEWEST: &str = "2025-11-25";

/// Methods that make a first frame an MCP connection (contract §1).
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

pub fn initialize_result(version: &str) -> Json {
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "shoal", "title": "Shoal", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Shoal is a structured shell. Run Shoal source with shoal_exec; \
    results are typed values stored as refs (out:N) in a named session whose bindings persist between calls.",
    })
}

fn elide_schema() -> Json {
    json!({"type": "object", "properties": {
        "max_bytes": {"type": "integer"}, "max_rows": {"type": "integer"}, "max_items": {"type": "integer"}}})
}

pub fn exec_input_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "src": {"type": "string", "description": "Shoal source to run"},
            "mode": {"enum": ["run", "plan"]},
            "position": {"enum": ["stmt", "value"], "description": "value (default): a failing final command yields its outcome; stmt: it raises"},
            "background": {"type": "boolean"},
            "timeout_ms": {"type": "integer", "minimum": 1},
            "elide": elide_schema(),
        },
        "required": ["src"],
        "additionalProperties": false,
    })
}

pub fn exec_output_schema() -> Json {
    json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "transcript ref, out:N"},
            "uri": {"type": "string"},
            "value": {"type": "object", "description": "tagged wire value, e.g. {\"$\":\"int\",\"v\":42}"},
            "render": {"type": "string"},
            "elapsed_ms": {"type": "number"},
        },
        "required": ["ref", "uri", "value", "render", "elapsed_ms"],
    })
}

pub fn tools() -> Json {
    json!([{
        "name": "shoal_exec",
        "title": "Run Shoal source",
        "description": "Run Shoal source in the session and return the typed value (tagged JSON), \
    its rendering and a transcript ref (out:N) for later retrieval. Bindings persist across calls.",
        "inputSchema": exec_input_schema(),
        "outputSchema": exec_output_schema(),
        "annotations": {"openWorldHint": true},
    }])
}

struct Validators {
    exec: jsonschema::Validator,
}

fn validators() -> &'static Validators {
    static V: OnceLock<Validators> = OnceLock::new();
    V.get_or_init(|| Validators {
        exec: jsonschema::validator_for(&exec_input_schema())
            .expect("shoal_exec input schema compiles"),
    })
}

/// Validate tool arguments; `Err` is the isError structuredContent
/// `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn validate_args(tool: &str, args: &Json) -> Result<(), Json> {
    let v = match tool {
        "shoal_exec" => &validators().exec,
        _ => return Ok(()),
    };
    let errors: Vec<Json> = v
        .iter_errors(args)
        .map(|e| json!({"path": e.instance_path().to_string(), "message": e.to_string()}))
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let first = errors[0]["message"]
        .as_str()
        .unwrap_or("invalid")
        .to_string();
    Err(json!({
        "code": INVALID_PARAMS,
        "message": format!("invalid arguments for {tool}: {first}"),
        "data": {"errors": errors},
    }))
}

/// A successful tool result: bounded text, a resource link, structured content.
pub fn tool_success(structured: Json) -> Json {
    let uri = structured
        .get("uri")
        .and_then(Json::as_str)
        .map(str::to_string);
    let text = match structured.get("render").and_then(Json::as_str) {
        Some(r) => bound_render(r, false, uri.as_deref()),
        None => bound_render(
            &serde_json::to_string_pretty(&structured).unwrap_or_default(),
            false,
            uri.as_deref(),
        ),
    };
    let mut content = vec![json!({"type": "text", "text": text})];
    if let Some(uri) = &uri {
        let name = structured.get("ref").and_then(Json::as_str).unwrap_or(uri);
        content.push(json!({"type": "resource_link", "uri": uri, "name": name, "mimeType": "application/json"}));
    }
    json!({"content": content, "structuredContent": structured, "isError": false})
}

/// A failed tool result carrying an error object `{code, message, data?}`.
pub fn tool_error(error: Json) -> Json {
    let text = bound_render(
        &serde_json::to_string_pretty(&error).unwrap_or_default(),
        false,
        None,
    );
    json!({"content": [{"type": "text", "text": text}], "structuredContent": error, "isError": true})
}

pub fn tool_error_rpc(e: &RpcError) -> Json {
    tool_error(e.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2024-11-05")), NEWEST);
        assert_eq!(negotiate(Some("2026-07-28")), NEWEST);
        assert_eq!(negotiate(None), NEWEST);
    }

    #[test]
    fn schemas_are_valid_and_validate() {
        for t in tools().as_array().unwrap() {
            assert!(
                jsonschema::meta::is_valid(&t["inputSchema"]),
                "{}",
                t["name"]
            );
            assert!(
                jsonschema::meta::is_valid(&t["outputSchema"]),
                "{}",
                t["name"]
            );
        }
        assert!(validate_args("shoal_exec", &json!({"src": "1"})).is_ok());
        let e = validate_args("shoal_exec", &json!({"src": 5, "bogus": true})).unwrap_err();
        assert_eq!(e["code"], json!(-32602));
        let errs = e["data"]["errors"].as_array().unwrap();
        assert_eq!(errs.len(), 2, "{e}");
        assert!(errs.iter().any(|x| x["path"] == json!("/src")));
        let out = super::super::kernel::exec_result(1, json!({"$":"int","v":42}), "42".into(), 0.5);
        let ov = jsonschema::validator_for(&exec_output_schema()).unwrap();
        assert!(ov.is_valid(&out));
    }

    #[test]
    fn first_frame_methods() {
        for m in [
            "initialize",
            "ping",
            "server/discover",
            "tools/list",
            "notifications/initialized",
            "shoal/attach",
        ] {
            assert!(is_mcp_method(m), "{m}");
        }
        for m in ["session.attach", "exec", "daemon.status", "tools"] {
            assert!(!is_mcp_method(m), "{m}");
        }
    }
}
