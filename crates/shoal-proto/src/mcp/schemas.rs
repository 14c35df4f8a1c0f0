//! The one argument-error shape of a tool call ([`invalid_arguments`]). The
//! tools' input schemas are generated from their argument structs
//! (`args.rs`), their output schemas from their result structs
//! (`outputs.rs`).

use serde_json::{json, Value as Json};

use super::super::rpc::RpcError;

/// The one shape of a tool's argument error (the structured content of its `isError`
/// result): `{code:-32602, message, data:{errors:[{path, message}]}}`.
pub fn invalid_arguments(message: String, errors: Vec<Json>) -> RpcError {
    RpcError::invalid_params(message).with_data(json!({"errors": errors}))
}

/// One entry of [`invalid_arguments`]'s `errors`.
pub fn argument_error(path: &str, message: &str) -> Json {
    json!({"path": path, "message": message})
}
