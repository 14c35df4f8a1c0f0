//! The params and results of the MCP methods around the tools: `initialize`,
//! `ping`, `prompts/*`, `completion/complete`. Params are read in one step
//! ([`read_params`]): absent params are `{}`, members the server does not
//! read (`_meta`, `clientInfo.version`, a newer client's capabilities) are
//! let through, and a member of the wrong type is `-32602` naming its path.
//! Results are structs whose fields are in wire order.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::results::ServerInfo;
use super::{INSTRUCTIONS, LANGUAGE_CARD};
use crate::rpc::RpcError;

/// `params` of `method` read into `T` in one step: absent (`null`) params
/// are `{}`; an error is `-32602` `invalid params for METHOD: PATH: ...`
/// with `data.path`.
pub fn read_params<T: DeserializeOwned>(method: &str, params: Json) -> Result<T, RpcError> {
    let params = match params {
        Json::Null => Json::Object(Default::default()),
        p => p,
    };
    not_an_object(method, &params)?;
    crate::kernel::typed_value(method, params)
}

/// MCP params are an object (serde would read a struct from an array too).
fn not_an_object(method: &str, params: &Json) -> Result<(), RpcError> {
    if params.is_object() {
        return Ok(());
    }
    Err(RpcError::invalid_params(format!(
        "invalid params for {method}: params must be an object"
    ))
    .with_data(serde_json::json!({"path": "."})))
}

/// [`read_params`] of params the caller keeps (a `tools/call`'s `_meta`
/// is read again later).
pub fn read_params_ref<T: DeserializeOwned>(method: &str, params: &Json) -> Result<T, RpcError> {
    if params.is_null() {
        return read_params(method, Json::Null);
    }
    not_an_object(method, params)?;
    serde_path_to_error::deserialize(params).map_err(|e| crate::kernel::params_error(method, &e))
}

/// `tools/call` params: the tool, its `arguments` (read by
/// [`super::parse_call`]: a bad argument is an `isError` result, not a
/// JSON-RPC error) and the 2025 task augmentation.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct CallToolParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Json>,
    #[serde(default)]
    pub task: Option<Json>,
}

/// `subscriptions/listen` params: what to stream (`notifications`, an
/// object; its list-changed keys are let through: Shoal never sends them,
/// its lists are fixed or paginated by ref).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ListenParams {
    pub notifications: ListenFilter,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenFilter {
    #[serde(default)]
    pub resource_subscriptions: Option<Vec<String>>,
    /// The Tasks extension's (`proto::mcp_tasks_ext::listen_task_ids`).
    #[serde(default)]
    pub task_ids: Option<Vec<String>>,
}

/// [`ListenParams`] read in one step (`-32602` naming the path).
pub fn listen_params(params: &Json) -> Result<ListenParams, RpcError> {
    read_params_ref("subscriptions/listen", params)
}

/// `initialize` params: what the server reads of them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    #[serde(default)]
    pub protocol_version: Option<String>,
    #[serde(default)]
    pub capabilities: ClientCapabilities,
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
}

/// The client's capabilities the server reads: whether it can be asked
/// (`elicitation`, an object whose members say which modes).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClientCapabilities {
    #[serde(default)]
    pub elicitation: Option<Json>,
}

/// `clientInfo`: its name labels the client's work.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ClientInfo {
    #[serde(default)]
    pub name: Option<String>,
}

/// The `initialize` result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: &'static str,
    pub capabilities: ServerCapabilities,
    pub server_info: ServerInfo,
    pub instructions: &'static str,
}

/// What the server offers.
#[derive(Clone, Debug, Serialize)]
pub struct ServerCapabilities {
    pub tools: ListChanged,
    pub resources: ResourcesCapability,
    pub prompts: ListChanged,
    pub completions: Empty,
    pub tasks: Json,
}

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChanged {
    pub list_changed: bool,
}

#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    pub subscribe: bool,
    pub list_changed: bool,
}

/// `{}`: the `ping` result, an empty capability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}

impl InitializeResult {
    pub fn new(version: &'static str) -> Self {
        InitializeResult {
            protocol_version: version,
            capabilities: ServerCapabilities {
                tools: ListChanged {
                    list_changed: false,
                },
                resources: ResourcesCapability {
                    subscribe: true,
                    list_changed: false,
                },
                prompts: ListChanged {
                    list_changed: false,
                },
                completions: Empty {},
                tasks: crate::mcp_tasks::capability(),
            },
            server_info: ServerInfo::SHOAL,
            instructions: INSTRUCTIONS,
        }
    }
}

/// The one prompt.
const PROMPT: Prompt = Prompt {
    name: "shoal_language",
    title: "The Shoal language card",
    description: "How to use Shoal as an agent: commands vs values, dot-chains, sh { }, outcomes, refs, and the Shoal form of each bash habit.",
};

/// A `prompts/list` entry.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Prompt {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
}

/// The `prompts/list` result.
#[derive(Clone, Debug, Serialize)]
pub struct PromptList {
    pub prompts: Vec<Prompt>,
}

impl PromptList {
    pub fn all() -> Self {
        PromptList {
            prompts: vec![PROMPT],
        }
    }
}

/// `prompts/get` params (`arguments`: the card takes none).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct PromptGetParams {
    pub name: String,
}

/// The `prompts/get` result: the card as one user message.
#[derive(Clone, Debug, Serialize)]
pub struct PromptGetResult {
    pub description: &'static str,
    pub messages: Vec<PromptMessage>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PromptMessage {
    pub role: &'static str,
    pub content: TextContent,
}

/// A `{type: "text", text}` content block.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename = "text")]
pub struct TextContent {
    pub text: &'static str,
}

/// `prompts/get`: the card, or `-32602` naming the prompt asked for.
pub fn prompt_get(p: &PromptGetParams) -> Result<PromptGetResult, RpcError> {
    if p.name != PROMPT.name {
        return Err(RpcError::invalid_params(format!(
            "unknown prompt {:?} (the prompt is shoal_language)",
            p.name
        ))
        .with_data(serde_json::json!({"name": p.name})));
    }
    Ok(PromptGetResult {
        description: PROMPT.title,
        messages: vec![PromptMessage {
            role: "user",
            content: TextContent {
                text: LANGUAGE_CARD,
            },
        }],
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rpc::INVALID_PARAMS;

    #[test]
    fn initialize_reads_what_it_needs_and_lets_the_rest_through() {
        let p: InitializeParams = read_params(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}, "roots": {}},
                   "clientInfo": {"name": "c", "version": "1"}, "_meta": {"x": 1}, "future": true}),
        )
        .unwrap();
        assert_eq!(p.protocol_version.as_deref(), Some("2025-06-18"));
        assert_eq!(p.capabilities.elicitation, Some(json!({})));
        assert_eq!(p.client_info.unwrap().name.as_deref(), Some("c"));
        let p: InitializeParams = read_params("initialize", Json::Null).unwrap();
        assert_eq!(p, InitializeParams::default());
        let e = read_params::<InitializeParams>("initialize", json!({"clientInfo": {"name": 7}}))
            .unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        assert_eq!(e.data.unwrap()["path"], "clientInfo.name");
        assert!(
            e.message
                .starts_with("invalid params for initialize: clientInfo.name: invalid type"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_tool_call_envelope_reads_in_one_step() {
        let params =
            json!({"name": "shoal_exec", "arguments": {"src": 1}, "_meta": {"progressToken": 1}});
        let p: CallToolParams = read_params_ref("tools/call", &params).unwrap();
        assert_eq!(p.name, "shoal_exec");
        assert_eq!(p.arguments, Some(json!({"src": 1})));
        assert_eq!(p.task, None);
        let e = read_params_ref::<CallToolParams>("tools/call", &json!({"name": 3})).unwrap_err();
        assert_eq!(
            e.message,
            "invalid params for tools/call: name: invalid type: integer `3`, expected a string"
        );
        assert_eq!(e.data.unwrap()["path"], "name");
        let e = read_params_ref::<CallToolParams>("tools/call", &Json::Null).unwrap_err();
        assert_eq!(
            e.message,
            "invalid params for tools/call: missing field `name`"
        );
        let e =
            read_params_ref::<CallToolParams>("tools/call", &json!(["shoal_exec"])).unwrap_err();
        assert_eq!(
            e.message,
            "invalid params for tools/call: params must be an object"
        );
        let e =
            read_params::<PromptGetParams>("prompts/get", json!(["shoal_language"])).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
    }

    #[test]
    fn results_keep_their_wire_shape() {
        let v = serde_json::to_value(InitializeResult::new("2025-11-25")).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "protocolVersion",
                "capabilities",
                "serverInfo",
                "instructions"
            ]
        );
        assert_eq!(
            v["capabilities"]["resources"],
            json!({"subscribe": true, "listChanged": false})
        );
        assert_eq!(v["capabilities"]["completions"], json!({}));
        let p = prompt_get(&PromptGetParams {
            name: "shoal_language".into(),
        })
        .unwrap();
        let p = serde_json::to_value(p).unwrap();
        assert_eq!(
            p["messages"][0]["content"],
            json!({"type": "text", "text": LANGUAGE_CARD})
        );
        let e = read_params::<PromptGetParams>("prompts/get", json!({})).unwrap_err();
        assert_eq!(
            e.message,
            "invalid params for prompts/get: missing field `name`"
        );
        let e = prompt_get(&PromptGetParams { name: "x".into() }).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
    }
}
