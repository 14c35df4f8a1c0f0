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
use crate::lang::Position;
use crate::proto::elide::Budget;
use crate::proto::kernel::{self, GetRequest};
use crate::proto::rpc::RpcError;

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
    gate: Option<Arc<crate::leash::Gate>>,
    check: bool,
) -> Result<Json, RpcError> {
    let x = ask(
        &handle,
        Exec {
            src,
            position,
            tty,
            cancel,
            gate,
            check,
        },
    )
    .await?;
    exec_reply_json(x, &budget)
}

/// `{ref, uri, value, render, elapsed_ms}` of an exec's reply, the value
/// elided under `budget`.
pub fn exec_reply_json(x: ExecReply, budget: &Budget) -> Result<Json, RpcError> {
    // Elide once, here, from the value the session stored as out:n (no
    // second round trip to read it back).
    let uri = kernel::ref_uri(x.n);
    let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::proto::elide::elide(&x.value, budget, &uri)
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

/// `value.get` through the session supervisor (an `out:N` from before a restart is read
/// back from the journal there), then its view encoded: the one `value.get` path of both
/// connections.
pub async fn get_value(
    handle: &SessionHandle,
    reference: String,
    req: GetRequest,
    tty: bool,
) -> Result<Json, RpcError> {
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
    })
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
