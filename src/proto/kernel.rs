//! Result and error shapes of the kernel methods that evaluate (`exec`,
//! `value.get`), shared by the kernel and MCP connections.

use serde_json::{json, Value as Json};

use super::rpc::{RpcError, PARSE_ERROR, RAISED};
use crate::lang::ParseError;
use crate::value::ShoalError;

pub fn ref_name(n: u64) -> String {
    format!("out:{n}")
}

pub fn ref_uri(n: u64) -> String {
    format!("shoal://out/{n}")
}

/// Parse `out:N` or `shoal://out/N`.
pub fn parse_ref(s: &str) -> Option<u64> {
    let n = s
        .strip_prefix("out:")
        .or_else(|| s.strip_prefix("shoal://out/"))?;
    n.parse().ok().filter(|&n| n > 0)
}

/// `{ref, uri, value, render, elapsed_ms}`.
pub fn exec_result(n: u64, value: Json, render: String, elapsed_ms: f64) -> Json {
    json!({
        "ref": ref_name(n),
        "uri": ref_uri(n),
        "value": value,
        "render": render,
        "elapsed_ms": (elapsed_ms * 1000.0).round() / 1000.0,
    })
}

/// `-32001` with `{span, hint}`.
pub fn parse_error(e: &ParseError) -> RpcError {
    RpcError::new(PARSE_ERROR, e.msg.clone())
        .with_data(json!({"span": {"start": e.span.start, "end": e.span.end}, "hint": e.hint}))
}

/// `-32002` with `{code, span, hint, status, stderr, ref, uri}`; the error is stored as `out:N`.
pub fn raised(e: &ShoalError, n: u64) -> RpcError {
    RpcError::new(RAISED, e.msg.clone()).with_data(json!({
        "code": e.code.as_str(),
        "span": e.span.map(|s| json!({"start": s.start, "end": s.end})),
        "hint": e.hint,
        "status": e.status,
        "stderr": e.stderr.as_ref().map(|s| String::from_utf8_lossy(s).into_owned()),
        "ref": ref_name(n),
        "uri": ref_uri(n),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs() {
        assert_eq!(parse_ref("out:12"), Some(12));
        assert_eq!(parse_ref("shoal://out/3"), Some(3));
        assert_eq!(parse_ref("out:0"), None);
        assert_eq!(parse_ref("task:1"), None);
    }
}
