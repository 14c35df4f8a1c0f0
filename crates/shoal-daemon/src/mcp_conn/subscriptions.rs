//! Resource subscriptions multiplexed on one connection: `resources/subscribe` and
//! `resources/unsubscribe` (2025-11-25), `subscriptions/listen` streams (2026-07-28), one
//! event-bus subscription per channel shared by every URI watching it, the per-connection
//! quota, and the `notifications/resources/updated` frames. It never runs a tool.

use actix::fut::{ready, LocalBoxActorFuture};
use actix::prelude::*;
use serde_json::{json, Value as Json};

use crate::event_bus::{BusEvent, Subscribe, Unsubscribe};
use crate::peer::{self};
use crate::sessions::handle::SessionHandle;
use crate::sessions::task;
use shoal_proto::mcp;
use shoal_proto::mcp::notify;
use shoal_proto::mcp_era::{self};
use shoal_proto::mcp_tasks_ext;
use shoal_proto::rpc::{self, RpcError};

use super::{id_key, Listen, McpConn, Reply};

impl McpConn {
    pub(super) fn subscribe(&mut self, params: Json, ctx: &mut Context<Self>) -> Reply {
        let u = match mcp::read_params::<mcp::ResourceUriParams>("resources/subscribe", params) {
            Ok(p) => p.uri,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        if let Some(id) = crate::sessions::pty::watch_uri(&u) {
            return self.subscribe_pty(u, id);
        }
        let channel = match mcp::subscription_channel(&u) {
            Ok(c) => c,
            Err(m) => return Box::pin(ready(Err(RpcError::invalid_params(m)))),
        };
        if task::is_scoped_channel(&channel) {
            // Only this session's tasks and jobs (-32021 otherwise, like task.get).
            let check = self.session().then(move |h, act, _ctx| {
                async move { task::scoped_channel(&h?, &channel).await }.into_actor(act)
            });
            return Box::pin(check.then(move |r, act, ctx| -> Reply {
                match r {
                    Ok(bus_channel) => act.subscribe_channel(u, bus_channel, ctx),
                    Err(e) => Box::pin(ready(Err(e))),
                }
            }));
        }
        self.subscribe_channel(u, channel, ctx)
    }

    /// `resources/subscribe` of an event channel (its URI checked).
    pub(super) fn subscribe_channel(
        &mut self,
        u: String,
        channel: String,
        ctx: &mut Context<Self>,
    ) -> Reply {
        let Some(s) = self.services.clone() else {
            return Box::pin(ready(Err(RpcError::invalid_params(
                "subscriptions need the event bus, which this daemon does not run",
            ))));
        };
        if self.subs.contains_key(&u) {
            return Box::pin(ready(Ok(mcp::result_json(mcp::Empty {}))));
        }
        if let Err(e) = self.subscription_room() {
            return Box::pin(ready(Err(e)));
        }
        // A token hears the events of sessions it may read only.
        let scope = match self.bus_scope() {
            Ok(scope) => scope,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        self.subs.insert(u, channel.clone());
        self.count_subscriptions();
        if self.bus_subs.contains_key(&channel) {
            return Box::pin(ready(Ok(mcp::result_json(mcp::Empty {}))));
        }
        let sub = ctx.address().recipient();
        let f = s.bus.send(Subscribe {
            channel: channel.clone(),
            sub,
            scope,
        });
        Box::pin(f.into_actor(self).map(move |r, act, _ctx| {
            let id = r.map_err(crate::msg::mailbox)?;
            if act.channel_wanted(&channel) && !act.bus_subs.contains_key(&channel) {
                act.bus_subs.insert(channel, id);
            } else if let Some(s) = &act.services {
                // Unsubscribed while the subscription was being set up.
                s.bus.do_send(Unsubscribe { id });
            }
            Ok(mcp::result_json(mcp::Empty {}))
        }))
    }

    /// Publish this connection's subscription count (for `shoal status`).
    pub(super) fn count_subscriptions(&self) {
        self.reg
            .stats
            .set_subscriptions(self.subs.len() + self.pty_subs.len());
    }

    /// `[limits] max_subscriptions_per_connection` over event and PTY
    /// subscriptions together.
    pub(super) fn subscription_room(&self) -> Result<(), RpcError> {
        self.subscription_room_for(1)
    }

    /// Room for `n` more subscribed URIs (`resources/subscribe` and
    /// `subscriptions/listen` count together).
    pub(super) fn subscription_room_for(&self, n: usize) -> Result<(), RpcError> {
        let max = self.cx.limits.max_subscriptions_per_connection;
        let listened: usize = self
            .listens
            .values()
            .map(|l| l.chans.len() + l.n_ptys)
            .sum();
        if self.subs.len() + self.pty_subs.len() + listened + n > max {
            return Err(peer::limit_error(
                "max_subscriptions_per_connection",
                max as u64,
                "too many subscriptions on this connection",
            ));
        }
        Ok(())
    }

    /// `shoal://pty/N`: a screen-update loop on this connection.
    pub(super) fn subscribe_pty(&mut self, u: String, id: u64) -> Reply {
        if self.pty_subs.contains_key(&u) {
            return Box::pin(ready(Ok(mcp::result_json(mcp::Empty {}))));
        }
        if let Err(e) = self.subscription_room() {
            return Box::pin(ready(Err(e)));
        }
        Box::pin(self.session().then(move |h, act, _ctx| {
            let watch = h.map(|h| crate::sessions::pty::watch(&h, id));
            async move { watch?.await }
                .into_actor(act)
                .map(move |r, act, ctx| {
                    let changes = r?;
                    let updates =
                        crate::sessions::pty::updates(act.tx.clone(), u.clone(), changes, None);
                    let handle = ctx.spawn(updates.into_actor(act));
                    if let Some(old) = act.pty_subs.insert(u, handle) {
                        ctx.cancel_future(old);
                    }
                    act.count_subscriptions();
                    Ok(mcp::result_json(mcp::Empty {}))
                })
        }))
    }

    pub(super) fn unsubscribe(&mut self, params: Json, ctx: &mut Context<Self>) -> Reply {
        let u = match mcp::read_params::<mcp::ResourceUriParams>("resources/unsubscribe", params) {
            Ok(p) => p.uri,
            Err(e) => return Box::pin(ready(Err(e))),
        };
        if let Some(h) = self.pty_subs.remove(&u) {
            ctx.cancel_future(h);
        }
        let removed = self.subs.remove(&u);
        self.count_subscriptions();
        if let Some(channel) = removed {
            self.release_channel(&channel);
        }
        Box::pin(ready(Ok(mcp::result_json(mcp::Empty {}))))
    }

    /// Some subscription (legacy or listen) still watches `channel`.
    pub(super) fn channel_wanted(&self, channel: &str) -> bool {
        self.subs.values().any(|c| c == channel)
            || self
                .listens
                .values()
                .any(|l| l.chans.iter().any(|(_, c)| c == channel))
    }

    /// Drop the bus subscription of `channel` once nothing watches it.
    pub(super) fn release_channel(&mut self, channel: &str) {
        if self.channel_wanted(channel) {
            return;
        }
        if let (Some(id), Some(s)) = (self.bus_subs.remove(channel), &self.services) {
            s.bus.do_send(Unsubscribe { id });
        }
    }

    /// `subscriptions/listen` (2026-07-28): one long-lived request whose
    /// stream carries `notifications/resources/updated` for the URIs it
    /// asked for, each frame tagged with the request's id. The first frame
    /// is `notifications/subscriptions/acknowledged` with the honored URIs
    /// (event channels, the journal, PTY screens); the request is answered
    /// only when the stream ends, and a `notifications/cancelled` ends it.
    pub(super) fn listen(
        &mut self,
        id: Json,
        params: &Json,
        env: mcp_era::Envelope,
        ctx: &mut Context<Self>,
    ) {
        // Task and jobs URIs name this session's own only (-32021 otherwise,
        // like task.get); resolved to their bus channels before the stream exists.
        let scoped: Vec<(String, String)> = mcp_era::listen_uris(params)
            .map(|us| {
                us.iter()
                    .filter_map(|u| Some((u.clone(), mcp::subscription_channel(u).ok()?)))
                    .filter(|(_, c)| task::is_scoped_channel(c))
                    .collect()
            })
            .unwrap_or_default();
        if scoped.is_empty() {
            return self.listen_checked(id, params, env, Vec::new(), ctx);
        }
        self.req_session = env.session.clone();
        let session = self.session();
        self.req_session = None;
        let params = params.clone();
        let check = session.then(move |h, act, _ctx| {
            async move {
                let h = h?;
                let mut resolved = Vec::with_capacity(scoped.len());
                for (u, c) in scoped {
                    resolved.push((u, task::scoped_channel(&h, &c).await?));
                }
                Ok::<_, RpcError>(resolved)
            }
            .into_actor(act)
        });
        ctx.wait(check.map(move |r, act, ctx| match r {
            Ok(resolved) => act.listen_checked(id, &params, env, resolved, ctx),
            Err(e) => peer::write(&act.tx, ctx, &rpc::reply(&id, Err(e))),
        }));
    }

    pub(super) fn listen_checked(
        &mut self,
        id: Json,
        params: &Json,
        env: mcp_era::Envelope,
        resolved: Vec<(String, String)>,
        ctx: &mut Context<Self>,
    ) {
        let key = id_key(&id);
        let uris = match mcp_era::listen_uris(params) {
            Ok(u) => u,
            Err(e) => return peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e))),
        };
        let task_ids = match mcp_tasks_ext::listen_task_ids(params) {
            Ok(t) => t,
            Err(e) => return peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e))),
        };
        if self.listens.contains_key(&key) || self.inflight.contains_key(&key) {
            let e = RpcError::new(rpc::INVALID_REQUEST, "request id already in use");
            return peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
        }
        let mut chans: Vec<(String, String)> = Vec::new();
        let mut ptys: Vec<(String, u64)> = Vec::new();
        for u in uris {
            if chans.iter().any(|(x, _)| *x == u) || ptys.iter().any(|(x, _)| *x == u) {
                continue;
            }
            if let Some(n) = crate::sessions::pty::watch_uri(&u) {
                ptys.push((u, n));
            } else if let Ok(ch) = mcp::subscription_channel(&u) {
                // A scoped channel only as `listen` resolved it (its bus name).
                let ch = match resolved.iter().find(|(x, _)| *x == u) {
                    Some((_, bus)) => bus.clone(),
                    None if task::is_scoped_channel(&ch) => continue,
                    None => ch,
                };
                if self.services.is_some() {
                    chans.push((u, ch));
                }
            }
        }
        if let Err(e) = self.subscription_room_for(chans.len() + ptys.len() + task_ids.len()) {
            return peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e)));
        }
        // A token hears the events of sessions it may read only.
        let scope = match self.bus_scope() {
            Ok(scope) => scope,
            Err(e) => return peer::write(&self.tx, ctx, &rpc::reply(&id, Err(e))),
        };
        let mut need: Vec<String> = Vec::new();
        for (_, c) in &chans {
            if !self.bus_subs.contains_key(c) && !self.channel_wanted(c) && !need.contains(c) {
                need.push(c.clone());
            }
        }
        self.listens.insert(
            key.clone(),
            Listen {
                id: id.clone(),
                chans,
                ptys: Vec::new(),
                n_ptys: ptys.len() + task_ids.len(),
                acked: false,
            },
        );
        let bus = self.services.as_ref().map(|s| s.bus.clone());
        let sub = ctx.address().recipient::<BusEvent>();
        self.req_session = env.session;
        let asked_tasks = params
            .get("notifications")
            .and_then(|n| n.get("taskIds"))
            .is_some_and(Json::is_array);
        let session = if ptys.is_empty() && task_ids.is_empty() {
            None
        } else {
            Some(self.session())
        };
        self.req_session = None;
        let setup = async move {
            let mut ids = Vec::new();
            if let Some(bus) = bus {
                for channel in need {
                    if let Ok(id) = bus
                        .send(Subscribe {
                            channel: channel.clone(),
                            sub: sub.clone(),
                            scope: scope.clone(),
                        })
                        .await
                    {
                        ids.push((channel, id));
                    }
                }
            }
            ids
        };
        let watches = move |h: Option<Result<SessionHandle, RpcError>>| async move {
            let mut out = Vec::new();
            let mut tasks = Vec::new();
            if let Some(Ok(h)) = h {
                for (u, n) in ptys {
                    if let Ok(rx) = crate::sessions::pty::watch(&h, n).await {
                        out.push((u, rx));
                    }
                }
                for n in task_ids {
                    if let Some(view) = crate::mcp_conn::tasks::ext_watch(&h, n).await {
                        tasks.push((n, view));
                    }
                }
            }
            (out, tasks)
        };
        let session: LocalBoxActorFuture<Self, Option<Result<SessionHandle, RpcError>>> =
            match session {
                Some(f) => Box::pin(f.map(|h, _act, _ctx| Some(h))),
                None => Box::pin(ready(None)),
            };
        let fut = session.then(move |h, act, _ctx| {
            async move { (setup.await, watches(h).await) }.into_actor(act)
        });
        ctx.spawn(fut.map(move |(ids, (watched, tasks)), act, ctx| {
            let Some(l) = act.listens.get_mut(&key) else {
                // Cancelled while being set up.
                for (channel, sid) in ids {
                    if act.channel_wanted(&channel) && !act.bus_subs.contains_key(&channel) {
                        act.bus_subs.insert(channel, sid);
                    } else if let Some(s) = &act.services {
                        s.bus.do_send(Unsubscribe { id: sid });
                    }
                }
                return;
            };
            let mut honored: Vec<String> = l.chans.iter().map(|(u, _)| u.clone()).collect();
            honored.extend(watched.iter().map(|(u, _)| u.clone()));
            l.acked = true;
            let listen_id = l.id.clone();
            for (channel, sid) in ids {
                match act.bus_subs.entry(channel) {
                    std::collections::hash_map::Entry::Occupied(_) => {
                        // Another subscription got there first: one per channel.
                        if let Some(s) = &act.services {
                            s.bus.do_send(Unsubscribe { id: sid });
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(sid);
                    }
                }
            }
            let mut filter = json!({"resourceSubscriptions": honored});
            if asked_tasks {
                let t: Vec<String> = tasks
                    .iter()
                    .map(|(n, _)| shoal_lang::task::ref_name(*n))
                    .collect();
                filter["taskIds"] = json!(t);
            }
            let ack = notify::Acknowledged {
                notifications: &filter,
                meta: notify::ListenMeta {
                    subscription_id: &listen_id,
                },
            };
            peer::write_frame(&act.tx, ctx, notify::acknowledged(&ack));
            let mut handles = Vec::new();
            for (u, rx) in watched {
                let updates =
                    crate::sessions::pty::updates(act.tx.clone(), u, rx, Some(listen_id.clone()));
                handles.push(ctx.spawn(updates.into_actor(act)));
            }
            for (_, view) in tasks {
                let updates = crate::mcp_conn::tasks::ext_status_updates(
                    act.tx.clone(),
                    view,
                    listen_id.clone(),
                );
                handles.push(ctx.spawn(updates.into_actor(act)));
            }
            if let Some(l) = act.listens.get_mut(&key) {
                l.n_ptys = handles.len();
                l.ptys = handles;
            }
        }));
    }

    /// End a listen stream (the client cancelled it): no answer follows.
    pub(super) fn end_listen(&mut self, key: &str, ctx: &mut Context<Self>) {
        let Some(l) = self.listens.remove(key) else {
            return;
        };
        for h in l.ptys {
            ctx.cancel_future(h);
        }
        for (_, channel) in &l.chans {
            self.release_channel(channel);
        }
    }
}

/// A subscribed channel's event: `notifications/resources/updated` for every
/// URI watching it (`seq` and a small `payload` are shoal additions).
impl Handler<BusEvent> for McpConn {
    type Result = ();

    fn handle(&mut self, ev: BusEvent, ctx: &mut Context<Self>) {
        let uris: Vec<String> = self
            .subs
            .iter()
            .filter(|(_, c)| **c == ev.channel)
            .map(|(u, _)| u.clone())
            .collect();
        let small = serde_json::to_vec(&*ev.payload)
            .map(|b| b.len() <= 8192)
            .unwrap_or(false);
        let listened: Vec<(String, Json)> = self
            .listens
            .values()
            .filter(|l| l.acked)
            .flat_map(|l| {
                l.chans
                    .iter()
                    .filter(|(_, c)| *c == ev.channel)
                    .map(|(u, _)| (u.clone(), l.id.clone()))
            })
            .collect();
        let tagged = uris
            .into_iter()
            .map(|u| (u, None))
            .chain(listened.into_iter().map(|(u, id)| (u, Some(id))));
        let payload = small.then(|| ev.payload.to_json().into_owned());
        for (uri, listen) in tagged {
            let update = notify::ResourceUpdated {
                uri: &uri,
                seq: ev.seq,
                payload: payload.clone(),
                meta: listen.as_ref().map(|id| notify::ListenMeta {
                    subscription_id: id,
                }),
            };
            peer::write_frame(&self.tx, ctx, notify::resource_updated(&update));
        }
    }
}
