//! `completion/complete`: what a request asks to complete and the bounded
//! answer. Pure: the caller supplies the candidates (refs, channels, views).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::super::rpc::RpcError;

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

/// `completion/complete` params.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct CompleteParams {
    #[serde(rename = "ref")]
    pub reference: CompleteRef,
    pub argument: CompleteArgument,
}

/// What is completed: a resource template's argument or a prompt's.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "type")]
pub enum CompleteRef {
    #[serde(rename = "ref/resource")]
    Resource {
        #[serde(default)]
        uri: String,
    },
    #[serde(rename = "ref/prompt")]
    Prompt {
        #[serde(default)]
        name: String,
    },
}

/// The argument and what is typed of it so far.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct CompleteArgument {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

impl CompleteParams {
    /// The target and the typed prefix.
    pub fn target(&self) -> CompleteTarget {
        match &self.reference {
            CompleteRef::Resource { uri } => {
                match (
                    uri.split('{').next().unwrap_or(""),
                    self.argument.name.as_str(),
                ) {
                    ("shoal://out/", "n") => CompleteTarget::OutRef,
                    ("shoal://events/", "channel") => CompleteTarget::Channel,
                    ("shoal://session/", "view") => CompleteTarget::SessionView,
                    _ => CompleteTarget::Nothing,
                }
            }
            CompleteRef::Prompt { .. } => CompleteTarget::Nothing,
        }
    }
}

/// Parse `completion/complete` params (one step, `-32602` naming the path
/// of what is wrong) into the target and the typed prefix.
pub fn complete_request(params: Json) -> Result<(CompleteTarget, String), RpcError> {
    let p: CompleteParams = super::methods::read_params("completion/complete", params)?;
    Ok((p.target(), p.argument.value))
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
    super::result_json(CompleteResult {
        completion: Completion {
            values,
            total,
            has_more: total > COMPLETION_MAX,
        },
    })
}

/// The `completion/complete` result.
#[derive(Clone, Debug, Serialize)]
pub struct CompleteResult {
    pub completion: Completion,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub values: Vec<String>,
    pub total: usize,
    pub has_more: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_request_reads_in_one_step() {
        let (t, prefix) = complete_request(json!({
            "ref": {"type": "ref/resource", "uri": "shoal://out/{n}"},
            "argument": {"name": "n", "value": "2"}, "context": {"arguments": {}}}))
        .unwrap();
        assert_eq!((t, prefix.as_str()), (CompleteTarget::OutRef, "2"));
        let (t, _) = complete_request(json!({
            "ref": {"type": "ref/prompt", "name": "shoal_language"},
            "argument": {"name": "x", "value": ""}}))
        .unwrap();
        assert_eq!(t, CompleteTarget::Nothing);
        let e = complete_request(json!({"ref": {"type": "ref/tool"}, "argument": {}})).unwrap_err();
        assert_eq!(e.code, crate::rpc::INVALID_PARAMS);
        assert!(
            e.message.contains("ref.type: unknown variant `ref/tool`"),
            "{}",
            e.message
        );
        let e = complete_request(json!({"ref": {"type": "ref/prompt"}, "argument": {"value": 3}}))
            .unwrap_err();
        assert_eq!(e.data.unwrap()["path"], "argument.value");
        let e = complete_request(Json::Null).unwrap_err();
        assert!(e.message.ends_with("missing field `ref`"), "{}", e.message);
        assert_eq!(
            completion_result(["a1".into(), "b".into(), "a2".into()], "a"),
            json!({"completion": {"values": ["a1", "a2"], "total": 2, "hasMore": false}})
        );
    }
}
