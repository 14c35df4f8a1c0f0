//! `completion/complete`: what a request asks to complete and the bounded
//! answer. Pure: the caller supplies the candidates (refs, channels, views).

use serde_json::{json, Value as Json};

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
