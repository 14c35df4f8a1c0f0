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

use serde::de::{Deserializer, Error as _, MapAccess, Visitor};
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
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
    #[serde(default, borrow)]
    task: Option<&'a RawValue>,
}

/// The `_meta` members of a call that the connection reads.
#[derive(Debug, Default, PartialEq)]
pub struct Meta {
    /// Present (`null` included) or absent.
    version: Option<Json>,
    capabilities: Option<Json>,
    /// `null` reads as absent.
    session: Option<Json>,
    progress_token: Option<Json>,
}

/// `_meta` is read as a map only (a derived struct would also take an
/// array) in the same pass as the call; a member it does not know or a
/// duplicate fails the read, and the call takes the general path.
impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MetaVisitor)
    }
}

struct MetaVisitor;

impl<'de> Visitor<'de> for MetaVisitor {
    type Value = Meta;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a _meta object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Meta, A::Error> {
        let mut m = Meta::default();
        let mut client_info = false;
        while let Some(key) = map.next_key::<MetaKey>()? {
            let slot = match key {
                MetaKey::Version => &mut m.version,
                MetaKey::Capabilities => &mut m.capabilities,
                MetaKey::Session => &mut m.session,
                MetaKey::ProgressToken => &mut m.progress_token,
                MetaKey::ClientInfo if !client_info => {
                    client_info = true;
                    map.next_value::<Checked>()?;
                    continue;
                }
                MetaKey::ClientInfo => return Err(A::Error::custom("duplicate _meta member")),
            };
            if slot.is_some() {
                return Err(A::Error::custom("duplicate _meta member"));
            }
            *slot = Some(map.next_value::<Json>()?);
        }
        if m.session.as_ref().is_some_and(Json::is_null) {
            m.session = None;
        }
        Ok(m)
    }
}

const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";

/// A `_meta` member name this read knows (matched without allocating).
enum MetaKey {
    Version,
    Capabilities,
    Session,
    ProgressToken,
    ClientInfo,
}

impl<'de> Deserialize<'de> for MetaKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_identifier(MetaKeyVisitor)
    }
}

struct MetaKeyVisitor;

impl<'de> Visitor<'de> for MetaKeyVisitor {
    type Value = MetaKey;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a _meta member name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<MetaKey, E> {
        Ok(match key {
            mcp_era::PROTOCOL_VERSION_KEY => MetaKey::Version,
            mcp_era::CLIENT_CAPABILITIES_KEY => MetaKey::Capabilities,
            mcp_era::SESSION_KEY => MetaKey::Session,
            "progressToken" => MetaKey::ProgressToken,
            CLIENT_INFO_KEY => MetaKey::ClientInfo,
            other => return Err(E::custom(format_args!("_meta member {other:?}"))),
        })
    }
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
    Some(ExecCall {
        args: wire.arguments.unwrap_or_default(),
        meta: wire.meta.unwrap_or_default(),
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
            json!({"name": "shoal_exec", "_meta": {mcp_era::SESSION_KEY: "a", "x": 1}}),
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
            r#"{"name":"shoal_exec","_meta":{"progressToken":1,"progressToken":2}}"#,
            r#"{"name":"shoal_exec","_meta":{"io.modelcontextprotocol/clientInfo":{},"io.modelcontextprotocol/clientInfo":{}}}"#,
        ] {
            let raw: Result<&RawValue, _> = serde_json::from_str(text);
            if let Ok(raw) = raw {
                assert!(exec_call(Some(raw)).is_none(), "{text}");
            }
        }
    }
}
