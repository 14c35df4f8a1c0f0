//! `resources/list`, `resources/read` and `completion/complete`: `shoal://` URIs resolved
//! against the session, the journal and the event bus, scoped to the caller. Read-only: it
//! never subscribes, and never writes to the connection.

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Value as Json};

use crate::event_bus::{BusEvent, ListChannels, ReadEvents, Scope};
use crate::journal_writer::{self as jw, Services};
use shoal_proto::elide::Budget;
use shoal_proto::kernel::{GetFormat, GetRequest};
use shoal_proto::mcp::PlanAnswer;
use shoal_proto::rpc::{self, RpcError};
use shoal_proto::{mcp, uri};

use super::tools::query_journal;
use super::{get_value, McpConn, Reply};

impl McpConn {
    pub(super) fn resources_list(&mut self, params: Json) -> Reply {
        let caps = self.caps();
        let cursor = match mcp::read_params::<mcp::ResourcesListParams>("resources/list", params) {
            Ok(p) => p.cursor,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        Box::pin(self.session().then(move |h, act, _ctx| {
            let gate = act.gate.clone();
            async move {
                let h = h.ok();
                let last = h
                    .as_ref()
                    .map(crate::sessions::handle::SessionHandle::last_ref)
                    .unwrap_or(0);
                let mut page = mcp::resources_page(caps, last, cursor.as_deref())?;
                // PTYs and the caller's live plans are listed once, on the first page.
                if cursor.is_none() {
                    page.resources
                        .extend(crate::sessions::pty::resource_entries(h.clone()).await);
                    if let (Some(h), Some(g)) = (h, gate) {
                        let plans = crate::leash_calls::plan_op(
                            h,
                            g,
                            crate::sessions::plan_store::PlanOp::List,
                        )
                        .await;
                        if let Ok(PlanAnswer::Plans(plans)) = plans {
                            for p in plans {
                                let r = p.plan_ref.as_str();
                                let hex = r.strip_prefix("plan:").unwrap_or(r);
                                page.resources.push(mcp::Resource::json(
                                    format!("shoal://plan/{hex}"),
                                    r,
                                    format!("plan ({}), {}", p.verdict.as_str(), p.approval),
                                ));
                            }
                        }
                    }
                }
                Ok(mcp::result_json(page))
            }
            .into_actor(act)
        }))
    }

    /// `completion/complete` of resource-template arguments.
    pub(super) fn complete(&mut self, params: Json) -> Reply {
        let (target, prefix) = match mcp::complete_request(params) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        match target {
            mcp::CompleteTarget::OutRef => Box::pin(self.session().map(move |h, _act, _ctx| {
                let last = h?.last_ref();
                // Newest first; a prefix narrows by leading digits.
                let refs = (1..=last).rev().map(|n| n.to_string());
                Ok(mcp::completion_result(refs, &prefix))
            })),
            mcp::CompleteTarget::Channel => {
                let Some(s) = self.services.clone() else {
                    return Box::pin(ready(Ok(mcp::completion_result([], &prefix))));
                };
                let scope = match self.bus_scope() {
                    Ok(scope) => scope,
                    Err(e) => return Box::pin(ready(Err(e))),
                };
                Box::pin(
                    async move {
                        let names = s
                            .bus
                            .send(ListChannels { scope })
                            .await
                            .map_err(crate::msg::mailbox)?;
                        Ok(mcp::completion_result(names, &prefix))
                    }
                    .into_actor(self),
                )
            }
            mcp::CompleteTarget::SessionView => Box::pin(ready(Ok(mcp::completion_result(
                ["cwd".to_string(), "env".to_string()],
                &prefix,
            )))),
            mcp::CompleteTarget::Nothing => {
                Box::pin(ready(Ok(mcp::completion_result([], &prefix))))
            }
        }
    }

    pub(super) fn resources_read(&mut self, params: Json) -> Reply {
        let u = match mcp::read_params::<mcp::ResourceUriParams>("resources/read", params) {
            Ok(p) => p.uri,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let parsed = match uri::parse(&u) {
            Ok(p) => p,
            Err(m) => return Box::pin(ready(Err(RpcError::invalid_params(m)))),
        };
        match (
            parsed.root.as_str(),
            parsed.segs.first().map(String::as_str),
        ) {
            ("out", Some(n)) => {
                let reference = format!("out:{n}");
                let mut req = GetRequest {
                    path: parsed
                        .get("path")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                    slice: parsed.get("slice").and_then(mcp::parse_slice),
                    ..GetRequest::default()
                };
                match parsed.get("format") {
                    None | Some("json") => {}
                    Some("render") => req.format = GetFormat::Render,
                    Some("raw") => req.format = GetFormat::Raw,
                    Some("inline") => req.format = GetFormat::Inline,
                    Some(other) => {
                        return Box::pin(ready(Err(RpcError::invalid_params(format!(
                            "format must be json, render, raw or inline (got {other:?})"
                        )))))
                    }
                }
                if let Some(e) = parsed.get("elide") {
                    if let Ok(j) = serde_json::from_str::<Json>(e) {
                        if let Ok(b) = Budget::from_json(Some(&j)) {
                            req.elide = b;
                        }
                    }
                }
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let handle = h?;
                        let r = get_value(&handle, reference, req).await?;
                        Ok(mcp::read_result(&u, &r))
                    }
                    .into_actor(act)
                }))
            }
            ("docs", Some("language")) => Box::pin(ready(Ok(mcp::card_read_result()))),
            ("task", Some(_)) | ("jobs", None) => {
                let segs = parsed.segs.clone();
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move { crate::mcp_conn::tasks::read(h?, u, segs).await }.into_actor(act)
                }))
            }
            ("session", Some("cwd")) => Box::pin(self.session().map(move |h, _act, _ctx| {
                let h = h?;
                // The live cwd (after `cd`), else where the session starts.
                let (cwd, _) = h.views();
                Ok(mcp::read_result(
                    &u,
                    &mcp::result_json(mcp::SessionCwd {
                        display: cwd.display().to_string(),
                    }),
                ))
            })),
            ("session", Some("env")) => Box::pin(self.session().map(move |h, act, _ctx| {
                let h = h?;
                // The session's environment as of its last exec (`env.X = …`
                // included); before the first exec, the one it will inherit.
                // A token principal sees only what its env_read grants
                // (docs/rules.md §21).
                let view = act
                    .gate
                    .as_deref()
                    .and_then(shoal_lang::env_view::EnvView::for_gate);
                let (_, pairs) = h.views();
                let pairs = shoal_lang::env_view::visible(view.as_deref(), pairs);
                Ok(mcp::read_result(
                    &u,
                    &mcp::result_json(mcp::SessionEnv::of(pairs)),
                ))
            })),
            ("pty", seg) => {
                let seg = seg.map(str::to_string);
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let r = crate::sessions::pty::read_resource(&h?, seg.as_deref()).await?;
                        Ok(mcp::read_result(&u, &rpc::to_result(&r)?))
                    }
                    .into_actor(act)
                }))
            }
            ("session", Some(other)) => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unsupported session view: {other}"
            ))))),
            ("plan", Some(r)) => {
                // shoal://plan/HEX (or plan:HEX): the caller's own plan (docs/rules.md §21).
                let r = if r.starts_with("plan:") {
                    r.to_string()
                } else {
                    format!("plan:{r}")
                };
                Box::pin(self.session().then(move |h, act, _ctx| {
                    let gate = act.gate.clone();
                    async move {
                        let handle = h?;
                        let gate =
                            gate.ok_or_else(|| RpcError::internal("attached without a principal"))?;
                        let plan = crate::leash_calls::plan_op(
                            handle,
                            gate,
                            crate::sessions::plan_store::PlanOp::Get(r),
                        )
                        .await?;
                        Ok(mcp::read_result(&u, &rpc::to_result(&plan)?))
                    }
                    .into_actor(act)
                }))
            }
            ("journal", None) | ("val", Some(_)) | ("events", Some(_)) => {
                let Some(s) = self.services.clone() else {
                    return Box::pin(ready(Err(RpcError::invalid_params(format!(
                        "unsupported resource root: {u} (the journal is not running)"
                    )))));
                };
                let principal = match self.principal_now() {
                    Ok(p) => p,
                    Err(e) => return Box::pin(ready(Err(e))),
                };
                let scoped = parsed.root == "events"
                    && parsed
                        .segs
                        .first()
                        .is_some_and(|c| crate::sessions::task::is_scoped_channel(c));
                if !scoped {
                    return Box::pin(
                        async move { read_service(&s, &parsed, &u, &principal).await }
                            .into_actor(self),
                    );
                }
                // `task.N` and `jobs`: this session's own only (-32021 otherwise).
                Box::pin(self.session().then(move |h, act, _ctx| {
                    async move {
                        let mut parsed = parsed;
                        parsed.segs[0] =
                            crate::sessions::task::scoped_channel(&h?, &parsed.segs[0]).await?;
                        read_service(&s, &parsed, &u, &principal).await
                    }
                    .into_actor(act)
                }))
            }
            _ => Box::pin(ready(Err(RpcError::invalid_params(format!(
                "unsupported resource: {u}"
            ))))),
        }
    }
}

/// `resources/read` of `shoal://journal`, `shoal://val/..`, `shoal://events/..`.
pub(super) async fn read_service(
    s: &Services,
    p: &uri::ParsedUri,
    u: &str,
    principal: &str,
) -> Result<Json, RpcError> {
    match p.root.as_str() {
        "journal" => {
            let q = shoal_journal::Query {
                since: p.get("since").and_then(|v| v.parse().ok()),
                until: p.get("until").and_then(|v| v.parse().ok()),
                ok: match p.get("ok") {
                    Some("true") => Some(true),
                    Some("false") => Some(false),
                    _ => None,
                },
                effects: p.get("effects").map(|e| {
                    e.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                }),
                head: p.get("head").map(str::to_string),
                principal: p.get("principal").map(str::to_string),
                session: p.get("session").map(str::to_string),
                limit: p.get("limit").and_then(|v| v.parse().ok()),
            };
            let entries = query_journal(s, q, principal).await?;
            Ok(mcp::read_result(
                u,
                &mcp::result_json(mcp::journal_result(entries)),
            ))
        }
        "val" => {
            let hash = p.segs[0].clone();
            // Read errors are the kernel's own (code, message, data), not
            // wrapped in a -32602 string (docs/protocol.md §9). A token reads only
            // blobs its own entries reference; another's answers like an unknown hash.
            let unknown = || {
                RpcError::new(rpc::UNKNOWN_REF, "unknown value hash")
                    .with_data(json!({"hash": hash}))
            };
            let get = jw::GetBlob {
                hash: hash.clone(),
                scope: jw::scope_for(principal),
            };
            let bytes = match s.journal.send(get).await {
                Err(e) => return Err(crate::msg::mailbox(e)),
                Ok(Ok(Some(b))) => b,
                Ok(Ok(None)) | Ok(Err(shoal_journal::JournalError::Invalid(_))) => {
                    return Err(unknown())
                }
                Ok(Err(e)) => return Err(RpcError::internal(e.to_string())),
            };
            Ok(mcp::read_result(
                u,
                &mcp::result_json(mcp::bounded_blob(jw::blob_read(&hash, &bytes), u)),
            ))
        }
        _ => {
            let channel = p.segs[0].clone();
            let events = s
                .bus
                .send(ReadEvents {
                    channel: channel.clone(),
                    since: p.get("since").and_then(|v| v.parse().ok()),
                    limit: p.get("limit").and_then(|v| v.parse().ok()),
                    // A token reads the events of sessions it may read only.
                    scope: Scope::for_principal(principal),
                })
                .await
                .map_err(crate::msg::mailbox)?;
            let events: Vec<Json> = events.iter().map(BusEvent::to_json).collect();
            Ok(mcp::read_result(
                u,
                &mcp::result_json(mcp::events_result(&channel, events)),
            ))
        }
    }
}
