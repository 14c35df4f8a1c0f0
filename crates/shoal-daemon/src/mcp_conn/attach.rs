//! How an MCP connection reaches its sessions: the caller's principal (admitted on first
//! use, re-checked on every call), the shim's session (a token principal that names none
//! gets its own, `default@NAME`, never the local user's `default`), the sessions stateless
//! requests name, and the event-bus scope of the principal. Whether the principal may reach
//! a session at all is the daemon's answer to the attach (`session_handle::access_of`). It
//! never evaluates and never writes to the connection.

use std::sync::Arc;

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::json;

use super::{McpConn, MAX_NAMED_SESSIONS};
use crate::event_bus::Scope;
use crate::peer;
use crate::sessions::handle::{AttachSession, SessionHandle};
use shoal_proto::rpc::{self, RpcError};

/// The session a token principal's shim attaches to when it names none.
pub fn token_default_session(principal: &str) -> String {
    format!("default@{principal}")
}

impl McpConn {
    /// The caller's principal (journal scoping, docs/protocol.md §6).
    pub(super) fn principal_now(&self) -> Result<String, RpcError> {
        match &self.gate {
            Some(g) => crate::leash_calls::recheck(self.token.as_deref(), self.cx.foreign, g)
                .map(|_| g.principal.clone()),
            None => crate::leash_calls::principal(self.token.as_deref(), self.cx.foreign),
        }
    }

    /// Admit this call's principal: the gate is set on first use, and a
    /// revoked token is refused on its next call.
    pub(super) fn admit(&mut self) -> Result<(), RpcError> {
        if let Some(g) = &self.gate {
            return crate::leash_calls::recheck(self.token.as_deref(), self.cx.foreign, g);
        }
        let principal = crate::leash_calls::principal(self.token.as_deref(), self.cx.foreign)?;
        let gate = Arc::new(shoal_policy::Gate::for_principal(&principal));
        if !self.session_named && !gate.is_local() && self.attached.is_none() {
            self.want_session = token_default_session(&principal);
        }
        self.gate = Some(gate);
        Ok(())
    }

    /// What of the event bus this connection's principal may see (`None`: all of it, the
    /// local uid). Admits the principal first.
    pub(super) fn bus_scope(&mut self) -> Result<Option<Scope>, RpcError> {
        self.admit()?;
        Ok(self
            .gate
            .as_ref()
            .and_then(|g| Scope::for_principal(&g.principal)))
    }

    /// The admitted principal's name (empty before admission).
    fn principal_name(&self) -> String {
        self.gate
            .as_ref()
            .map(|g| g.principal.clone())
            .unwrap_or_default()
    }

    /// The session of the request being dispatched: the one it names
    /// explicitly (`_meta["shoal/session"]`), else the shim's.
    pub(super) fn session(&mut self) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Err(e) = self.admit() {
            return Box::pin(ready(Err(e)));
        }
        match self.req_session.clone() {
            Some(name) if name != self.want_session => self.named_session(name),
            _ => self.default_session(),
        }
    }

    /// A session a stateless request names: attached on first use, kept
    /// for the connection (at most [`MAX_NAMED_SESSIONS`]).
    fn named_session(
        &mut self,
        name: String,
    ) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Some(h) = self.named.get(&name) {
            if h.addr.connected() {
                return Box::pin(ready(Ok(h.clone())));
            }
        }
        if !self.named.contains_key(&name) && self.named.len() >= MAX_NAMED_SESSIONS {
            return Box::pin(ready(Err(RpcError::new(
                rpc::RESOURCE_LIMIT,
                format!("at most {MAX_NAMED_SESSIONS} sessions can be named on one connection"),
            )
            .with_data(json!({"code": "resource_limit", "max": MAX_NAMED_SESSIONS})))));
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.attach.send(AttachSession {
            name: name.clone(),
            principal: self.principal_name(),
            cwd: self.want_cwd.clone(),
            env: self.want_env.clone(),
            no_adapters: false,
            arbiter: Some(actix::Arbiter::current()),
            create: true,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let h = r
                .map_err(crate::msg::mailbox)?
                .map_err(peer::session_error)?;
            if let Some(old) = act.named.get(&name) {
                if old.addr.connected() && old.name == h.name {
                    return Ok(old.clone());
                }
            }
            if let Some(old) = act.named.insert(name, h.clone()) {
                old.count_client(-1);
            }
            h.count_client(1);
            Ok(h)
        }))
    }

    /// The shim's session, attaching on first use.
    fn default_session(&mut self) -> LocalBoxActorFuture<Self, Result<SessionHandle, RpcError>> {
        if let Some(h) = &self.attached {
            if h.addr.connected() {
                return Box::pin(ready(Ok(h.clone())));
            }
        }
        self.cx.daemon_stats.enqueue();
        let f = self.cx.daemon.attach.send(AttachSession {
            name: self.want_session.clone(),
            principal: self.principal_name(),
            cwd: self.want_cwd.clone(),
            env: self.want_env.clone(),
            no_adapters: false,
            arbiter: Some(actix::Arbiter::current()),
            create: true,
        });
        Box::pin(f.into_actor(self).map(|r, act, _ctx| {
            let h = r
                .map_err(crate::msg::mailbox)?
                .map_err(peer::session_error)?;
            // Concurrent first calls may both attach: keep the first handle.
            if let Some(old) = &act.attached {
                if old.addr.connected() && old.name == h.name {
                    return Ok(old.clone());
                }
            }
            if let Some(old) = act.attached.replace(h.clone()) {
                old.count_client(-1);
            }
            h.count_client(1);
            Ok(h)
        }))
    }
}

impl McpConn {
    /// The request's session as already attached on this connection, if it is.
    fn cached_session(&self) -> Option<&SessionHandle> {
        let h = match &self.req_session {
            Some(name) if *name != self.want_session => self.named.get(name),
            _ => self.attached.as_ref(),
        };
        h.filter(|h| h.addr.connected())
    }

    /// Run `then` only if this principal may act in the request's session (a session
    /// shared with it read-only answers `refused(-32010)` instead). Failing to reach the
    /// session at all is left to `then`'s own path, which reports it as it always has.
    pub(super) fn acting<T: 'static>(
        &mut self,
        what: &str,
        refused: impl FnOnce(RpcError) -> T + 'static,
        then: impl FnOnce(&mut Self) -> LocalBoxActorFuture<Self, T> + 'static,
    ) -> LocalBoxActorFuture<Self, T> {
        if self.admit().is_ok() {
            if let Some(h) = self.cached_session() {
                return match h.writable(&self.principal_name(), what) {
                    Ok(()) => then(self),
                    Err(e) => Box::pin(ready(refused(e))),
                };
            }
        }
        // Attach first; the request's own session selection is restored for `then`.
        let (req, ext, what) = (
            self.req_session.clone(),
            self.req_tasks_ext,
            what.to_string(),
        );
        Box::pin(self.session().then(move |h, act, _ctx| {
            let who = act.principal_name();
            match h.map(|h| h.writable(&who, &what)) {
                Ok(Err(e)) => Box::pin(ready(refused(e))),
                _ => {
                    let (saved, saved_ext) = (act.req_session.take(), act.req_tasks_ext);
                    act.req_session = req;
                    act.req_tasks_ext = ext;
                    let f = then(act);
                    act.req_session = saved;
                    act.req_tasks_ext = saved_ext;
                    f
                }
            }
        }))
    }
}

impl McpConn {
    /// A `tasks/*` request in `h`: reading task records is open to a reader of the
    /// session; cancelling or updating a task is its owner's.
    pub(super) fn task_access(
        &self,
        h: SessionHandle,
        method: &str,
    ) -> Result<SessionHandle, RpcError> {
        if !matches!(method, "tasks/get" | "tasks/list" | "tasks/result") {
            h.writable(&self.principal_name(), method)?;
        }
        Ok(h)
    }
}
