//! Folding results into MCP `CallToolResult`s: bounded text for a model to
//! read (renders, warnings, error messages with hints, argument errors,
//! stderr), a resource link to the stored value, the structured content as
//! given. Pure: it never validates arguments and never reads a value.

use serde_json::{json, Map, Value as Json};

use super::super::bound::{bound_text, MAX_TEXT};
use super::super::rpc::RpcError;
use super::super::uri;

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
    link_item(uri.to_string(), name.to_string())
}

/// `{type: resource_link, uri, name, mimeType}`, built from owned strings.
fn link_item(uri: String, name: String) -> Json {
    let mut o = Map::with_capacity(4);
    o.insert("type".into(), Json::String("resource_link".into()));
    o.insert("uri".into(), Json::String(uri));
    o.insert("name".into(), Json::String(name));
    o.insert("mimeType".into(), Json::String("application/json".into()));
    Json::Object(o)
}

/// `{type: text, text}`.
fn text_item(text: String) -> Json {
    let mut o = Map::with_capacity(2);
    o.insert("type".into(), Json::String("text".into()));
    o.insert("text".into(), Json::String(text));
    Json::Object(o)
}

/// The text and the resource link (`uri`, `name`) of a successful result.
fn success_parts(structured: &Json) -> (String, Option<(String, String)>) {
    let uri = link_uri(structured);
    let text = match ["render", "inline", "raw"]
        .iter()
        .find_map(|k| structured.get(*k).and_then(Json::as_str))
    {
        Some(r) => bound_text(r, MAX_TEXT, uri.as_deref()),
        None => bound_text(
            &serde_json::to_string_pretty(structured).unwrap_or_default(),
            MAX_TEXT,
            uri.as_deref(),
        ),
    };
    let text = text + &warning_lines(structured);
    let link = uri.map(|uri| {
        let name = match structured.get("ref").and_then(Json::as_str) {
            Some(r) => r.to_string(),
            None => uri.clone(),
        };
        (uri, name)
    });
    (text, link)
}

/// A successful tool result: bounded text, a resource link, structured content.
/// Built by moving `structured` in (the `json!` macro would copy it whole).
pub fn tool_success(structured: Json) -> Json {
    let (text, link) = success_parts(&structured);
    let mut content = Vec::with_capacity(2);
    content.push(text_item(text));
    if let Some((uri, name)) = link {
        content.push(link_item(uri, name));
    }
    let mut o = Map::with_capacity(3);
    o.insert("content".into(), Json::Array(content));
    o.insert("structuredContent".into(), structured);
    o.insert("isError".into(), Json::Bool(false));
    Json::Object(o)
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
        .filter(|_| error.get("code") == Some(&json!(super::super::rpc::RAISED)));
    let text = bound_text(&error_text(&error), MAX_TEXT, uri.as_deref());
    let mut content = vec![json!({"type": "text", "text": text})];
    if let Some(u) = &uri {
        let name = error["data"]["ref"].as_str().unwrap_or(u);
        content.push(resource_link(u, name));
    }
    json!({"content": content, "structuredContent": error, "isError": true})
}

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
        // The end of stderr is where the error is: its last lines, as an
        // outcome's text shows them.
        let bytes = shoal_value::output::OutputBytes::from(stderr);
        if let Some(section) = shoal_value::shown::stderr_section(&bytes) {
            out.push('\n');
            out.push_str(&section);
        }
    }
    out
}

pub fn tool_error_rpc(e: &RpcError) -> Json {
    tool_error(e.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The result as the `json!` form built it before (key order included).
    fn reference(structured: Json) -> Json {
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
            content.push(json!({"type": "resource_link", "uri": uri, "name": name, "mimeType": "application/json"}));
        }
        json!({"content": content, "structuredContent": structured, "isError": false})
    }

    #[test]
    fn error_text_shows_the_end_of_stderr() {
        let stderr: String = (1..=30).map(|i| format!("e{i}\n")).collect();
        let text = error_text(
            &json!({"code": -32002, "message": "`make` exited with status 2",
            "data": {"code": "cmd_failed", "status": 2, "stderr": stderr}}),
        );
        let want: Vec<String> = (11..=30).map(|i| format!("e{i}")).collect();
        assert_eq!(
            text,
            format!(
                "error [cmd_failed, -32002]: `make` exited with status 2\nstatus: 2\n\
                 --- stderr (last 20 of 30 lines) ---\n{}",
                want.join("\n")
            )
        );
    }

    #[test]
    fn tool_success_is_the_json_form() {
        for s in [
            json!({"ref": "out:3", "uri": "shoal://out/3", "value": {"t": "int", "v": 42}, "render": "42", "elapsed_ms": 0.1}),
            json!({"ref": "out:4", "value": {"uri": "shoal://out/4"}, "render": "x",
                   "warnings": [{"code": "w", "message": "m", "hint": "h"}]}),
            json!({"value": [1, 2]}),
            json!({"inline": "i"}),
        ] {
            let (got, want) = (tool_success(s.clone()), reference(s.clone()));
            assert_eq!(got, want);
            assert_eq!(got.to_string(), want.to_string());
        }
    }
}
