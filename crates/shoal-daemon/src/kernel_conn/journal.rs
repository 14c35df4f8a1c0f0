//! KernelConn's journal and value-restore calls: `journal.query`, `journal.get`,
//! `blob.get`, and the services lookup they share with the events methods. It
//! only asks the journal actor; it never writes to it.

use actix::prelude::*;
use serde_json::json;

use super::{KernelConn, Reply};
use crate::conn::GetServices;
use crate::journal_writer::{self as jw, Services};
use shoal_proto::kernel::BlobGetParams;
use shoal_proto::rpc::{self, RpcError};

impl KernelConn {
    /// The journal and bus: from the attachment, else asked of the daemon once.
    pub(super) fn with_services<F, Fut, T>(&mut self, f: F) -> Reply
    where
        F: FnOnce(Services) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<T, RpcError>> + 'static,
        T: serde::Serialize + Send + 'static,
    {
        if let Some(s) = self.known_services() {
            return Box::pin(super::answered(f(s)).into_actor(self));
        }
        self.cx.daemon_stats.enqueue();
        let q = self.cx.daemon.services.send(GetServices);
        Box::pin(q.into_actor(self).then(move |r, act, _ctx| {
            let s = r.ok().flatten();
            act.services = s.clone();
            async move {
                match s {
                    Some(s) => f(s).await.map(rpc::answer),
                    None => Err(RpcError::internal("the journal is not running")),
                }
            }
            .into_actor(act)
        }))
    }

    /// `journal.query`.
    pub(super) fn journal_query(
        &mut self,
        query: shoal_journal::Query,
        principal: String,
    ) -> Reply {
        self.with_services(move |s| async move {
            let scope = jw::scope_for(&principal);
            let entries = s
                .journal
                .send(jw::QueryJournal { query, scope })
                .await
                .map_err(crate::msg::mailbox)?
                .map_err(journal_error)?;
            Ok(entries)
        })
    }

    /// `journal.get`: one entry the principal may read.
    pub(super) fn journal_get(&mut self, id: u64, principal: String) -> Reply {
        self.with_services(move |s| async move {
            let e = s
                .journal
                .send(jw::GetEntry { id })
                .await
                .map_err(crate::msg::mailbox)?
                .map_err(journal_error)?
                .filter(|e| {
                    jw::scope_for(&principal) == shoal_journal::Scope::All
                        || e.principal == principal
                })
                .ok_or_else(|| {
                    RpcError::new(rpc::UNKNOWN_REF, format!("no journal entry {id}"))
                        .with_data(json!({"id": id}))
                })?;
            Ok(e)
        })
    }

    /// `blob.get`: bounded like every other read (docs/protocol.md §3): past
    /// `max_bytes` (default the elision budget, at most the hard cap) the value
    /// comes back as a ref. A token principal reads only blobs its own journal
    /// entries reference; any other hash answers as unknown (no existence oracle).
    pub(super) fn blob_get(&mut self, p: BlobGetParams, principal: String) -> Reply {
        let hash = p.hash;
        let max_bytes = p
            .max_bytes
            .map_or(shoal_proto::elide::Budget::default().max_bytes, |n| {
                (n as usize).min(shoal_proto::elide::HARD_CAP)
            });
        self.with_services(move |s| async move {
            let unknown = || {
                RpcError::new(rpc::UNKNOWN_REF, "unknown value hash")
                    .with_data(json!({"hash": hash}))
            };
            let scope = jw::scope_for(&principal);
            let get = jw::GetBlob {
                hash: hash.clone(),
                scope,
            };
            match s.journal.send(get).await {
                Err(e) => Err(crate::msg::mailbox(e)),
                Ok(Ok(Some(bytes))) => {
                    let key = hash.strip_prefix("blake3:").unwrap_or(&hash);
                    Ok(shoal_proto::mcp::bounded_blob_max(
                        jw::blob_read(&hash, &bytes),
                        &format!("shoal://val/{key}"),
                        max_bytes,
                    ))
                }
                Ok(Ok(None)) | Ok(Err(shoal_journal::JournalError::Invalid(_))) => Err(unknown()),
                Ok(Err(e)) => Err(journal_error(e)),
            }
        })
    }
}

fn journal_error(e: shoal_journal::JournalError) -> RpcError {
    match e {
        shoal_journal::JournalError::Invalid(m) => RpcError::invalid_params(m),
        e => RpcError::internal(e.to_string()),
    }
}
