//! The hot MCP request, `tools/call` of `shoal_exec`, read in place.
//!
//! [`exec_call`] reads the raw params of a `tools/call` into a typed shape:
//! the tool name, the arguments (the only part that becomes a map) and the
//! few `_meta` members the connection acts on (the 2026-07-28 envelope's
//! version, capabilities and session, the progress token). Everything else
//! in `_meta`, `clientInfo` above all, is checked and dropped without being
//! built. Whatever this shape does not take (another tool, a `task`, an
//! unknown member, a duplicate key, a non-object) returns `None`, and the
//! caller serves the request from its params parsed whole, so both paths
//! answer every frame alike.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value as Json};

use super::mcp_era::{self, Era};
use super::rpc::{self, Checked, RpcError};

/// The tool served by the typed path.
pub const EXEC_TOOL: &str = "shoal_exec";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallWire<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(default)]
    arguments: Option<Map<String, Json>>,
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    task: Option<&'a RawValue>,
}

/// The `_meta` members of a call that the connection reads.
#[derive(Deserialize, Debug, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        deserialize_with = "rpc::present"
    )]
    version: Option<Json>,
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        deserialize_with = "rpc::present"
    )]
    capabilities: Option<Json>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    _client_info: Option<Checked>,
    #[serde(rename = "shoal/session", default)]
    session: Option<Json>,
    #[serde(rename = "progressToken", default)]
    progress_token: Option<Json>,
}

impl Meta {
    /// The request's era, as [`mcp_era::classify`] decides it.
    pub fn era(&self) -> Result<Era, RpcError> {
        mcp_era::classify_members(
            self.version.as_ref(),
            self.capabilities.as_ref(),
            self.session.as_ref(),
        )
    }

    /// A progress token the call asked for (a string or a number).
    pub fn progress_token(&self) -> Option<Json> {
        self.progress_token
            .as_ref()
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
    }
}

/// A `tools/call` of `shoal_exec` without `task`.
#[derive(Debug, PartialEq)]
pub struct ExecCall {
    /// The arguments (`{}` when absent or `null`).
    pub args: Map<String, Json>,
    pub meta: Meta,
}

/// The params of a `tools/call`, when they are a plain `shoal_exec` call
/// this shape takes whole; `None` sends the request down the general path.
pub fn exec_call(params: Option<&RawValue>) -> Option<ExecCall> {
    let raw = params?.get();
    if !rpc::is_object_text(raw.as_bytes()) {
        return None;
    }
    let wire: CallWire = serde_json::from_str(raw).ok()?;
    if wire.name != EXEC_TOOL || wire.task.is_some_and(|t| t.get() != "null") {
        return None;
    }
    let meta = match wire.meta {
        None => Meta::default(),
        Some(m) if rpc::is_object_text(m.get().as_bytes()) => serde_json::from_str(m.get()).ok()?,
        Some(_) => return None,
    };
    Some(ExecCall {
        args: wire.arguments.unwrap_or_default(),
        meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(v: &Json) -> Option<ExecCall> {
        let s = v.to_string();
        let raw: &RawValue = serde_json::from_str(&s).unwrap();
        exec_call(Some(raw))
    }

    /// The typed path agrees with the general one wherever it takes a call.
    fn same_era(params: &Json) {
        let c = call(params).expect("typed");
        assert_eq!(c.meta.era(), mcp_era::classify(params), "{params}");
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        assert_eq!(c.meta.progress_token(), token, "{params}");
        let args = match params.get("arguments") {
            None | Some(Json::Null) => json!({}),
            Some(a) => a.clone(),
        };
        assert_eq!(Json::Object(c.args), args);
    }

    #[test]
    fn takes_plain_exec_calls() {
        let env = |m: Json| json!({"name": "shoal_exec", "arguments": {"src": "1"}, "_meta": m});
        same_era(&json!({"name": "shoal_exec", "arguments": {"src": "6 * 7"}}));
        same_era(&json!({"name": "shoal_exec"}));
        same_era(&json!({"name": "shoal_exec", "arguments": null, "task": null}));
        same_era(&env(json!({"progressToken": "p1"})));
        same_era(&env(json!({"progressToken": {"x": 1}})));
        same_era(&env(json!({
            mcp_era::PROTOCOL_VERSION_KEY: mcp_era::MODERN,
            mcp_era::CLIENT_CAPABILITIES_KEY: {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            mcp_era::SESSION_KEY: "work",
            "progressToken": 7,
        })));
        // Envelope errors are the general path's.
        same_era(&env(
            json!({mcp_era::PROTOCOL_VERSION_KEY: mcp_era::MODERN}),
        ));
        same_era(&env(json!({
            mcp_era::PROTOCOL_VERSION_KEY: "2027-01-01",
            mcp_era::CLIENT_CAPABILITIES_KEY: {},
        })));
        same_era(&env(json!({
            mcp_era::PROTOCOL_VERSION_KEY: 5,
            mcp_era::CLIENT_CAPABILITIES_KEY: null,
        })));
        same_era(&env(json!({
            mcp_era::PROTOCOL_VERSION_KEY: mcp_era::MODERN,
            mcp_era::CLIENT_CAPABILITIES_KEY: [],
            mcp_era::SESSION_KEY: "",
        })));
        same_era(&env(json!({mcp_era::SESSION_KEY: 3})));
        same_era(&env(Json::Null));
    }

    #[test]
    fn leaves_the_rest_to_the_general_path() {
        for p in [
            json!({"name": "shoal_get", "arguments": {"ref": "out:1"}}),
            json!({"name": "shoal_exec", "arguments": {"src": "1"}, "task": {}}),
            json!({"name": "shoal_exec", "arguments": [1]}),
            json!({"name": "shoal_exec", "arguments": "x"}),
            json!({"name": 5}),
            json!({"arguments": {"src": "1"}}),
            json!({"name": "shoal_exec", "other": 1}),
            json!({"name": "shoal_exec", "_meta": {"other": 1}}),
            json!({"name": "shoal_exec", "_meta": [1]}),
            json!({"name": "shoal_exec", "_meta": 1}),
            json!(["shoal_exec"]),
            json!("shoal_exec"),
        ] {
            assert!(call(&p).is_none(), "{p}");
        }
        assert!(exec_call(None).is_none());
        // What a value parse refuses is refused here too (never skipped).
        for text in [
            r#"{"name":"shoal_exec","name":"shoal_exec"}"#,
            r#"{"name":"shoal_exec","_meta":{"io.modelcontextprotocol/clientInfo":{"n":"\ud800"}}}"#,
            r#"{"name":"shoal_exec","_meta":{"io.modelcontextprotocol/clientInfo":{"n":1e400}}}"#,
            r#"{"name":"shoal\u005fexec"}"#,
        ] {
            let raw: Result<&RawValue, _> = serde_json::from_str(text);
            if let Ok(raw) = raw {
                assert!(exec_call(Some(raw)).is_none(), "{text}");
            }
        }
    }
}
