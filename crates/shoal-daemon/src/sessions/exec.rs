//! The exec round trip both connection actors make (the kernel's `exec`, the MCP
//! `shoal_exec` tool): send [`Exec`] to the session, then elide the stored value under the
//! caller's budget and build the result; and `value.get`'s ([`get_value`]: the supervisor
//! answers a typed [`kernel::ValueView`], encoded here). Below both connections; it never
//! touches a socket.

use std::sync::Arc;

use crate::msg::{CallCancel, Exec, ExecReply, GetValue, SessionError};
use crate::peer;
use crate::sessions::handle::SessionHandle;
use crate::sessions::supervisor::SessionSupervisor;
use shoal_lang::Position;
use shoal_proto::elide::{Budget, ReplyValue};
use shoal_proto::kernel::{self, GetRequest, ValueRead};
use shoal_proto::mcp::{ExecResult, WarningOut};
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
) -> Result<ExecResult<ReplyValue>, RpcError> {
    let exec = Exec {
        src,
        position,
        tty,
        cancel,
        gate,
        check,
        width: None,
        place: None,
        approved: Vec::new(),
    };
    exec_result(handle, exec, budget).await
}

/// Send `exec` to the session, then answer its reply as [`exec_reply_result`]
/// does, the value elided under `budget`.
pub async fn exec_result(
    handle: SessionHandle,
    exec: Exec,
    budget: Budget,
) -> Result<ExecResult<ReplyValue>, RpcError> {
    let x = handle.exec(exec).await.map_err(peer::session_error)?;
    exec_reply_result(x, &budget)
}

/// `{ref, uri, value, render, elapsed_ms, warnings?, journal?}` of an exec's
/// reply, the value elided under `budget`: typed, and its value elided as the
/// connection writes the reply (a value within the budget streams into it; no
/// tree of it is built).
pub fn exec_reply_result(
    mut x: ExecReply,
    budget: &Budget,
) -> Result<ExecResult<ReplyValue>, RpcError> {
    x.render = text_under(&mut x, budget);
    // Elided from the value the session stored as out:n (no second round
    // trip to read it back).
    let uri = kernel::ref_uri(x.n);
    let value = ReplyValue {
        value: std::mem::replace(&mut x.value, shoal_value::Value::Null),
        budget: *budget,
        uri: uri.clone(),
    };
    Ok(typed_result(x, uri, value))
}

/// The typed result of an exec's reply whose value is encoded as `value`.
fn typed_result<V>(x: ExecReply, uri: String, value: V) -> ExecResult<V> {
    ExecResult {
        reference: kernel::ref_name(x.n),
        uri,
        value,
        render: x.render,
        elapsed_ms: kernel::elapsed_ms(x.elapsed_ms),
        warnings: x.warnings.iter().map(WarningOut::from).collect(),
        journal: x.journal,
    }
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
) -> Result<ValueRead, RpcError> {
    // `task:N`: the task's state, output tail and, once it ended, its value.
    if let Some(id) = shoal_lang::task::parse_ref(&reference) {
        let read = crate::sessions::task::task_read(handle, id, &req.elide).await?;
        return Ok(ValueRead::Task(Box::new(read)));
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
        kernel::value_view_result(&view).map(|r| ValueRead::Value(Box::new(r)))
    }))
    .map_err(|p| {
        RpcError::internal(format!(
            "value.get panicked: {}",
            crate::sessions::session::panic_message(&p)
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
        .map_err(peer::session_error)
}
