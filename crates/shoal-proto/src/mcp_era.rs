//! The 2026-07-28 ("modern") envelope of the MCP surface (docs/protocol.md §12).
//!
//! One engine serves both eras: `proto::mcp` builds tools, resources and
//! prompts once, and this module only wraps them. A modern request carries its
//! own protocol version and client capabilities in `params._meta`; there is no
//! handshake. [`classify`] reads that envelope, [`finish`] stamps the result
//! (`resultType`, cache hints on cacheable results, the `serverInfo` `_meta`),
//! and [`error`] applies the revision's error rules (resource-not-found is
//! `-32602` with `data.uri`, SEP-2164).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use super::mcp::{self, McpResult, INSTRUCTIONS, VERSIONS};
use super::rpc::{self, RpcError};

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";
/// `-32022`: the request names a modern version this server does not speak.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

pub use crate::mcp::{
    CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY,
};
/// The explicit session handle of a stateless request (docs/protocol.md §12): a
/// `_meta` key, so it never collides with a tool's own arguments.
pub const SESSION_KEY: &str = "shoal/session";

/// Which era a request belongs to.
#[derive(Clone, Debug, PartialEq)]
pub enum Era {
    /// No modern envelope: the 2025 handshake rules.
    Legacy,
    /// A valid 2026-07-28 envelope.
    Modern(Envelope),
}

/// What a modern request says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub version: &'static str,
    /// The extension ids the client declared in its capabilities (the only
    /// part of them the server acts on; the rest is not copied per request).
    pub extensions: Vec<String>,
    /// `_meta["shoal/session"]`, when the request names its session.
    pub session: Option<String>,
}

impl Envelope {
    /// The client declared the MCP extension `id` in this request.
    pub fn has_extension(&self, id: &str) -> bool {
        self.extensions.iter().any(|e| e == id)
    }
}

/// Every version this server speaks, handshake ones first.
pub fn supported_versions() -> Vec<&'static str> {
    VERSIONS.iter().copied().chain([MODERN]).collect()
}

/// The `-32022` error for an unsupported modern version.
pub fn unsupported(requested: &str) -> RpcError {
    RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
        .with_data(json!({"supported": [MODERN], "requested": requested}))
}

/// Read a request's envelope. The version key alone marks a modern request
/// (legacy `_meta` never carries it), so a half-built envelope is refused
/// with `-32602` naming what is missing rather than served as legacy.
pub fn classify(params: &Json) -> Result<Era, RpcError> {
    let Some(meta) = params.get("_meta").and_then(Json::as_object) else {
        return Ok(Era::Legacy);
    };
    classify_members(
        meta.get(PROTOCOL_VERSION_KEY),
        meta.get(CLIENT_CAPABILITIES_KEY),
        meta.get(SESSION_KEY),
    )
}

/// [`classify`] from the three `_meta` members it reads (each `None` when
/// absent; the session also when `null`), however the caller read them.
pub fn classify_members(
    version: Option<&Json>,
    caps: Option<&Json>,
    session: Option<&Json>,
) -> Result<Era, RpcError> {
    let Some(version) = version else {
        return Ok(Era::Legacy);
    };
    let Some(caps) = caps else {
        return Err(RpcError::invalid_params(format!(
            "params._meta is missing the required envelope key {CLIENT_CAPABILITIES_KEY}"
        )));
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::invalid_params(
            "the protocol-version envelope value must be a string",
        ));
    };
    if version != MODERN {
        return Err(unsupported(version));
    }
    if !caps.is_object() {
        return Err(RpcError::invalid_params(format!(
            "{CLIENT_CAPABILITIES_KEY} must be an object"
        )));
    }
    let session = match session {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "_meta[{SESSION_KEY:?}] must be a non-empty session name"
            )))
        }
    };
    let extensions = caps
        .get("extensions")
        .and_then(Json::as_object)
        .map(|e| e.keys().cloned().collect())
        .unwrap_or_default();
    Ok(Era::Modern(Envelope {
        version: MODERN,
        extensions,
        session,
    }))
}

/// Methods of the 2025 era that the stateless revision removed.
pub fn removed_in_modern(method: &str) -> bool {
    matches!(
        method,
        "ping" | "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel"
    )
}

/// The server's capabilities in the modern era: as the handshake's, with
/// `extensions`: the Tasks extension (`proto::mcp_tasks_ext`).
pub fn capabilities() -> Json {
    mcp::result_json(capabilities_typed())
}

fn capabilities_typed() -> ModernCapabilities {
    use super::mcp_tasks_ext as ext;
    ModernCapabilities {
        tools: mcp::ListChanged {
            list_changed: false,
        },
        resources: mcp::ResourcesCapability {
            subscribe: true,
            list_changed: false,
        },
        prompts: mcp::ListChanged {
            list_changed: false,
        },
        completions: mcp::Empty {},
        extensions: BTreeMap::from([(ext::EXTENSION, ext::capability())]),
    }
}

/// What the server offers at 2026-07-28.
#[derive(Clone, Debug, Serialize)]
pub struct ModernCapabilities {
    pub tools: mcp::ListChanged,
    pub resources: mcp::ResourcesCapability,
    pub prompts: mcp::ListChanged,
    pub completions: mcp::Empty,
    pub extensions: BTreeMap<&'static str, Json>,
}

/// The `server/discover` result (before [`finish`] stamps it).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    pub supported_versions: Vec<&'static str>,
    pub capabilities: ModernCapabilities,
    pub instructions: &'static str,
}

/// `server/discover`: both eras' versions, capabilities, instructions.
pub fn discover_result() -> Json {
    finish(
        "server/discover",
        mcp::result_json(DiscoverResult {
            supported_versions: supported_versions(),
            capabilities: capabilities_typed(),
            instructions: INSTRUCTIONS,
        }),
    )
}

/// Results a client may cache; they carry `ttlMs` and `cacheScope` (both
/// required on the 2026 wire). Lists of a session's refs change with every
/// exec, so everything is immediately stale and private.
fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/list"
    )
}

/// Stamp a modern result: `resultType`, cache hints where cacheable, and
/// the server's identity in `_meta`.
pub fn finish(method: &str, result: Json) -> Json {
    stamp_value(cacheable(method), result)
}

fn stamp_value(cacheable: bool, mut result: Json) -> Json {
    let Some(o) = result.as_object_mut() else {
        return result;
    };
    o.entry("resultType").or_insert_with(|| json!("complete"));
    if cacheable {
        o.entry("ttlMs").or_insert_with(|| json!(0));
        o.entry("cacheScope").or_insert_with(|| json!("private"));
    }
    let meta = o.entry("_meta").or_insert_with(|| Json::Object(Map::new()));
    if let Some(m) = meta.as_object_mut() {
        m.entry(SERVER_INFO_KEY).or_insert_with(mcp::server_info);
    }
    result
}

/// How a modern request's answer is stamped, decided before dispatch (the
/// request's method and URI are gone by the time the answer exists).
#[derive(Clone, Debug)]
pub struct Stamp {
    cacheable: bool,
    /// The URI of a `resources/read`, for the revision's not-found rule.
    read_uri: Option<String>,
}

impl Stamp {
    pub fn for_request(method: &str, params: &Json) -> Stamp {
        let read_uri = (method == "resources/read")
            .then(|| params.get("uri").and_then(Json::as_str).map(str::to_string))
            .flatten();
        Stamp {
            cacheable: cacheable(method),
            read_uri,
        }
    }

    /// The reply frame for request `id`, its result stamped: a tool result
    /// in its typed members, a JSON result in its tree.
    pub fn reply_frame(&self, id: &Json, res: Result<McpResult, RpcError>) -> Vec<u8> {
        match res {
            Err(e) => rpc::error_frame(id, &error(self.read_uri.as_deref(), e)),
            Ok(McpResult::Tool(mut t)) => {
                t.stamp();
                rpc::reply_frame(id, Ok(t))
            }
            Ok(McpResult::Json(r)) => rpc::reply_frame(id, Ok(stamp_value(self.cacheable, r))),
        }
    }
}

/// The revision's error rules: an unknown resource (`read_uri`: the URI of
/// a `resources/read`) is `-32602` with `data.uri` (SEP-2164) instead of the
/// kernel's own not-found codes.
pub fn error(read_uri: Option<&str>, e: RpcError) -> RpcError {
    let not_found = matches!(e.code, rpc::UNKNOWN_REF | rpc::UNKNOWN_PTY);
    match read_uri {
        Some(uri) if not_found => {
            let mut data = e.data.clone().unwrap_or_else(|| json!({}));
            if let Some(d) = data.as_object_mut() {
                d.insert("uri".into(), json!(uri));
                d.insert("code".into(), json!(e.code));
            } else {
                data = json!({"uri": uri, "detail": data});
            }
            RpcError::new(
                rpc::INVALID_PARAMS,
                format!("resource not found: {}", e.message),
            )
            .with_data(data)
        }
        _ => e,
    }
}

/// The graceful end of a listen stream (its JSON-RPC result).
pub fn listen_closed(listen_id: &Json) -> Json {
    mcp::result_json(ListenClosed {
        result_type: "complete",
        meta: SubscriptionMeta {
            subscription_id: listen_id,
        },
    })
}

/// The `resourceSubscriptions` a `subscriptions/listen` asks for.
pub fn listen_uris(params: &Json) -> Result<Vec<String>, RpcError> {
    Ok(mcp::listen_params(params)?
        .notifications
        .resource_subscriptions
        .unwrap_or_default())
}

/// The graceful end of a listen stream (its JSON-RPC result).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ListenClosed<'a> {
    result_type: &'static str,
    #[serde(rename = "_meta")]
    meta: SubscriptionMeta<'a>,
}

#[derive(Clone, Debug, Serialize)]
struct SubscriptionMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    subscription_id: &'a Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_params_and_closing_read_and_write_typed() {
        let p = json!({"notifications": {"resourceSubscriptions": ["shoal://journal"], "toolsListChanged": true},
                       "_meta": {PROTOCOL_VERSION_KEY: MODERN}});
        assert_eq!(listen_uris(&p).unwrap(), ["shoal://journal"]);
        assert!(listen_uris(&json!({"notifications": {}}))
            .unwrap()
            .is_empty());
        let e = listen_uris(&json!({})).unwrap_err();
        assert_eq!(
            e.message,
            "invalid params for subscriptions/listen: missing field `notifications`"
        );
        let e = listen_uris(&json!({"notifications": {"resourceSubscriptions": [1]}})).unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        assert_eq!(
            e.data.unwrap()["path"],
            "notifications.resourceSubscriptions[0]"
        );
        assert_eq!(
            listen_closed(&json!("L")),
            json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: "L"}})
        );
        assert_eq!(
            serde_json::to_string(&capabilities()).unwrap(),
            r#"{"tools":{"listChanged":false},"resources":{"subscribe":true,"listChanged":false},"prompts":{"listChanged":false},"completions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
        );
    }

    fn env(v: &str) -> Json {
        json!({"_meta": {PROTOCOL_VERSION_KEY: v, CLIENT_CAPABILITIES_KEY: {}}})
    }

    #[test]
    fn classification() {
        assert_eq!(classify(&json!({})).unwrap(), Era::Legacy);
        assert_eq!(
            classify(&json!({"_meta": {"progressToken": 1}})).unwrap(),
            Era::Legacy
        );
        let Era::Modern(e) = classify(&env(MODERN)).unwrap() else {
            panic!("modern")
        };
        assert_eq!(e.version, MODERN);
        assert_eq!(e.session, None);
        let e = classify(&env("2027-01-01")).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.unwrap()["supported"], json!([MODERN]));
        let e = classify(&json!({"_meta": {PROTOCOL_VERSION_KEY: MODERN}})).unwrap_err();
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        let mut p = env(MODERN);
        p["_meta"][SESSION_KEY] = json!("work");
        let Era::Modern(e) = classify(&p).unwrap() else {
            panic!("modern")
        };
        assert_eq!(e.session.as_deref(), Some("work"));
        p["_meta"][SESSION_KEY] = json!(3);
        assert_eq!(classify(&p).unwrap_err().code, rpc::INVALID_PARAMS);
    }

    #[test]
    fn stamping() {
        let d = discover_result();
        assert_eq!(d["resultType"], "complete");
        assert_eq!(d["ttlMs"], 0);
        assert_eq!(d["cacheScope"], "private");
        assert!(d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN)));
        assert!(d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25")));
        assert_eq!(d["_meta"][SERVER_INFO_KEY]["name"], "shoal");
        let r = finish("tools/call", json!({"content": []}));
        assert_eq!(r["resultType"], "complete");
        assert!(r.get("ttlMs").is_none());
        // The byte-level stamp gives the same result as the value one, for
        // plain and cacheable methods, and leaves a result's own keys alone.
        for (method, result) in [
            ("tools/call", json!({"content": [], "isError": false})),
            ("prompts/list", json!({"prompts": []})),
            ("tools/call", json!({})),
            (
                "tools/call",
                json!({"resultType": "task", "task": {"id": "t"}}),
            ),
            ("resources/read", json!({"contents": [], "_meta": {"x": 1}})),
        ] {
            let f = Stamp::for_request(method, &json!({}))
                .reply_frame(&json!(9), Ok(result.clone().into()));
            let v: Json = serde_json::from_slice(&f).unwrap();
            assert_eq!(v["result"], finish(method, result), "{method}");
            assert_eq!(v["id"], 9);
        }
        // A tool result's typed stamp writes the bytes the tree stamp wrote.
        let tool = crate::mcp::tool_success(crate::kernel::CancelResult {
            task: "task:1".into(),
            cancel_requested: true,
            state: "running".into(),
        });
        let stamp = Stamp::for_request("tools/call", &json!({}));
        let tree: Json = serde_json::to_value(&tool).unwrap();
        assert_eq!(
            stamp.reply_frame(&json!(9), Ok(tool.into())),
            stamp.reply_frame(&json!(9), Ok(tree.into()))
        );
    }

    #[test]
    fn not_found_is_invalid_params() {
        let e = error(
            Some("shoal://out/99"),
            RpcError::new(rpc::UNKNOWN_REF, "unknown ref out:99"),
        );
        assert_eq!(e.code, rpc::INVALID_PARAMS);
        assert_eq!(e.data.unwrap()["uri"], "shoal://out/99");
        let e = error(None, RpcError::new(rpc::UNKNOWN_REF, "x"));
        assert_eq!(e.code, rpc::UNKNOWN_REF);
        let read = Stamp::for_request("resources/read", &json!({"uri": "shoal://out/5"}));
        let f = read.reply_frame(&json!(3), Err(RpcError::new(rpc::UNKNOWN_REF, "gone")));
        let v: Json = serde_json::from_slice(&f).unwrap();
        assert_eq!(v["error"]["code"], rpc::INVALID_PARAMS);
        assert_eq!(v["error"]["data"]["uri"], "shoal://out/5");
    }
}
