//! The exec round trip both connection actors make (the kernel's `exec`, the MCP
//! `shoal_exec` tool): send [`Exec`] to the session, then elide the stored value under the
//! caller's budget and build the result; and `value.get`'s ([`get_value`]: the supervisor
//! answers a typed [`kernel::ValueView`], encoded here). Below both connections; it never
//! touches a socket.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use super::conn;
use super::msg::{CallCancel, Exec, ExecReply, GetValue, SessionError};
use super::session_handle::SessionHandle;
use super::session_supervisor::SessionSupervisor;
use shoal_lang::Position;
use shoal_proto::elide::Budget;
use shoal_proto::kernel::{self, GetRequest};
use shoal_proto::rpc::RpcError;

/// Run `src`, then answer `{ref, uri, value, render, elapsed_ms}` with the
/// value elided under `budget`. With `gate` and `check`, the caller's verdict gates the
/// run; the gate's sandbox confines its children either way.
#[allow(clippy::too_many_arguments)]
pub async fn exec_elided(
    handle: SessionHandle,
    src: String,
    position: Position,
    tty: bool,
    budget: Budget,
    cancel: Arc<CallCancel>,
    gate: Option<Arc<shoal_policy::Gate>>,
    check: bool,
) -> Result<Json, RpcError> {
    let exec = Exec {
        src,
        position,
        tty,
        cancel,
        gate,
        check,
        width: None,
    };
    exec_json(handle, exec, budget).await
}

/// Send `exec` to the session, then answer its reply as [`exec_reply_json`]
/// does, the value elided under `budget`.
pub async fn exec_json(
    handle: SessionHandle,
    exec: Exec,
    budget: Budget,
) -> Result<Json, RpcError> {
    let x = handle.exec(exec).await.map_err(conn::session_error)?;
    exec_reply_json(x, &budget)
}

/// What [`exec_reply_json`] answers, written straight to JSON bytes (the
/// same members in the same order; a value within the budget is streamed
/// without a JSON tree). Parses to exactly the same value.
pub fn exec_reply_bytes(mut x: ExecReply, budget: &Budget) -> Result<Vec<u8>, RpcError> {
    x.render = text_under(&mut x, budget);
    let mut out = Vec::with_capacity(128 + x.render.len());
    let uri = kernel::ref_uri(x.n);
    out.extend_from_slice(br#"{"ref":"#);
    let _ = serde_json::to_writer(&mut out, &kernel::ref_name(x.n));
    out.extend_from_slice(br#","uri":"#);
    let _ = serde_json::to_writer(&mut out, &uri);
    out.extend_from_slice(br#","value":"#);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shoal_proto::elide::elide_into(&x.value, budget, &uri, &mut out)
    }))
    .map_err(|p| {
        RpcError::internal(format!(
            "encoding panicked: {}",
            super::session::panic_message(&p)
        ))
    })?;
    out.extend_from_slice(br#","render":"#);
    let _ = serde_json::to_writer(&mut out, &x.render);
    out.extend_from_slice(br#","elapsed_ms":"#);
    let _ = serde_json::to_writer(&mut out, &Json::from(kernel::elapsed_ms(x.elapsed_ms)));
    if !x.warnings.is_empty() {
        out.extend_from_slice(br#","warnings":"#);
        let _ = serde_json::to_writer(&mut out, &kernel::warnings_json(&x.warnings));
    }
    if let Some(j) = x.journal {
        out.extend_from_slice(br#","journal":"#);
        let _ = serde_json::to_writer(&mut out, j);
    }
    out.push(b'}');
    Ok(out)
}

/// `{ref, uri, value, render, elapsed_ms}` of an exec's reply, the value
/// elided under `budget`.
pub fn exec_reply_json(mut x: ExecReply, budget: &Budget) -> Result<Json, RpcError> {
    x.render = text_under(&mut x, budget);
    // Elide once, here, from the value the session stored as out:n (no
    // second round trip to read it back).
    let uri = kernel::ref_uri(x.n);
    let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shoal_proto::elide::elide(&x.value, budget, &uri)
    }))
    .map_err(|p| {
        RpcError::internal(format!(
            "encoding panicked: {}",
            super::session::panic_message(&p)
        ))
    })?;
    let mut r = kernel::with_warnings(
        kernel::exec_result(x.n, value, x.render, x.elapsed_ms),
        &x.warnings,
    );
    if let (Some(j), Some(o)) = (x.journal, r.as_object_mut()) {
        o.insert("journal".into(), json!(j));
    }
    Ok(r)
}

/// The render of an exec's reply under the call's `elide.max_bytes` (head plus
/// tail of the whole text, within it); without one, as the session cut it.
fn text_under(x: &mut ExecReply, budget: &Budget) -> String {
    let Some(limit) = budget.max_text else {
        return std::mem::take(&mut x.render);
    };
    if x.full.is_none() && x.render.len() <= limit {
        return std::mem::take(&mut x.render);
    }
    let reference = kernel::ref_name(x.n);
    let at = shoal_proto::bound::LinesRef {
        reference: &reference,
        path: None,
    };
    match &x.full {
        Some(full) => shoal_proto::bound::head_tail(full, limit, at),
        None => shoal_proto::bound::head_tail(&x.render, limit, at),
    }
}

/// `value.get` through the session supervisor (an `out:N` from before a restart is read
/// back from the journal there), then its view encoded: the one `value.get` path of both
/// connections.
pub async fn get_value(
    handle: &SessionHandle,
    reference: String,
    req: GetRequest,
    tty: bool,
) -> Result<Json, RpcError> {
    // `task:N`: the task's state, output tail and, once it ended, its value.
    if let Some(id) = shoal_lang::task::parse_ref(&reference) {
        return super::task::task_read(handle, id, &req.elide).await;
    }
    let view = ask(
        handle,
        GetValue {
            reference,
            req,
            tty,
        },
    )
    .await?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        kernel::value_view_json(&view)
    }))
    .map_err(|p| {
        RpcError::internal(format!(
            "value.get panicked: {}",
            super::session::panic_message(&p)
        ))
    })?
}

/// Send a request the session answers with `Result<T, SessionError>` and await it: a
/// session gone meanwhile is [`SessionError::Closed`], and either failure becomes its wire
/// error.
async fn ask<M, T>(handle: &SessionHandle, msg: M) -> Result<T, RpcError>
where
    M: actix::Message<Result = Result<T, SessionError>> + Send + 'static,
    T: Send + 'static,
    SessionSupervisor: actix::Handler<M>,
{
    let name = handle.name.clone();
    handle
        .send(msg)
        .await
        .map_err(|_| SessionError::Closed(name))
        .and_then(|r| r)
        .map_err(conn::session_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_value::{Record, Value};

    fn reply(n: u64, value: Value) -> ExecReply {
        ExecReply {
            n,
            value,
            render: "a \"render\"\n\u{1b}[1m".into(),
            full: None,
            elapsed_ms: 1.234_567_8,
            journal: None,
            warnings: Vec::new(),
        }
    }

    /// The kernel's bytes parse to exactly the tree the other callers build,
    /// members in the same order, whatever the value and the budget.
    #[test]
    fn exec_reply_bytes_parse_to_exec_reply_json() {
        let mut rec = Record::new();
        rec.insert("k \"q\"".into(), Value::Float(0.5));
        rec.insert("n".into(), Value::Null);
        let mut deep = Value::Int(1);
        for _ in 0..100 {
            deep = Value::list(vec![deep]);
        }
        let values = [
            Value::Int(42),
            Value::Null,
            Value::Bool(true),
            Value::Float(0.0),
            Value::str("line\nand \"quotes\" \u{7}"),
            Value::record(rec),
            Value::list((0..10).map(Value::Int).collect()),
            Value::list((0..5000).map(Value::Int).collect()),
            Value::str("x".repeat(100_000)),
            deep,
        ];
        let budgets = [
            Budget::default(),
            Budget {
                max_bytes: 16,
                ..Budget::default()
            },
        ];
        for (i, v) in values.iter().enumerate() {
            for b in &budgets {
                let mut x = reply(i as u64 + 1, v.clone());
                if i % 3 == 0 {
                    x.journal = Some("degraded");
                }
                if i % 4 == 1 {
                    x.warnings.push(shoal_lang::Warning {
                        code: "dollar_in_string",
                        message: "a \"$\"".into(),
                        span: Default::default(),
                        hint: "use {x}".into(),
                    });
                }
                let bytes = exec_reply_bytes(x.clone(), b).unwrap();
                let tree = exec_reply_json(x, b).unwrap();
                let parsed: Json = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(parsed, tree, "value {i}");
                // Same member order, same text.
                assert_eq!(
                    String::from_utf8(bytes).unwrap(),
                    serde_json::to_string(&tree).unwrap(),
                    "value {i}"
                );
            }
        }
    }
}
