//! KernelConn's event-bus methods: `events.read`, `events.publish`,
//! `events.subscribe`, `events.unsubscribe`, with session-scoped channels
//! (`task.N`, `jobs`) resolved through `actors::task::scoped_channel` first.
//! A token principal reads and hears only the events of sessions it may read
//! (`event_bus::Scope`); what a client publishes is its session's event.
//! It never names a bus channel of another session and never evaluates.

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Map, Value as Json};

use super::{KernelConn, Reply};
use crate::event_bus::{
    BusEvent, Origin, Publish, PublishFrom, ReadEvents, Scope, SubscribeReplay, Unsubscribe,
};
use crate::peer;
use shoal_proto::rpc::{self, RpcError};

impl KernelConn {
    /// `events.read`, `events.publish`, `events.subscribe`, `events.unsubscribe`.
    /// A session-scoped channel (`task.N`, `jobs`) is first resolved to the bus
    /// channel this session may use ([`crate::sessions::task::scoped_channel`]).
    pub(super) fn events_method(
        &mut self,
        method: &str,
        mut p: Map<String, Json>,
        principal: &str,
    ) -> Reply {
        let scope = Scope::for_principal(principal);
        let named = p.get("channel").and_then(Json::as_str).map(str::to_string);
        let (Some(channel), Some(att)) = (named, &self.attached) else {
            return self.events_on(method, p, scope);
        };
        if !crate::sessions::task::is_scoped_channel(&channel) || method == "events.publish" {
            return self.events_on(method, p, scope);
        }
        if method == "events.unsubscribe" {
            // Only this connection's own subscriptions can be dropped: no check.
            if channel == crate::sessions::task::JOBS_CHANNEL {
                let own = crate::sessions::task::jobs_channel(&att.handle.name);
                p.insert("channel".into(), json!(own));
            }
            return self.events_on(method, p, scope);
        }
        let h = att.handle.clone();
        let method = method.to_string();
        let resolve = async move { crate::sessions::task::scoped_channel(&h, &channel).await };
        Box::pin(resolve.into_actor(self).then(move |r, act, _ctx| -> Reply {
            match r {
                Ok(bus) => {
                    p.insert("channel".into(), json!(bus));
                    act.events_on(&method, p, scope)
                }
                Err(e) => Box::pin(ready(Err(e))),
            }
        }))
    }

    /// The events methods on a channel already scoped.
    fn events_on(&mut self, method: &str, p: Map<String, Json>, scope: Option<Scope>) -> Reply {
        let channel = match rpc::req_str(&p, "channel") {
            Ok(c) => c.to_string(),
            Err(e) => return Box::pin(ready(Err(e))),
        };
        let since = match p.get("since") {
            None | Some(Json::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "since must be a non-negative integer",
                    ))))
                }
            },
        };
        match method {
            "events.read" => {
                let limit = match p.get("limit") {
                    None | Some(Json::Null) => None,
                    Some(v) => match v.as_u64() {
                        Some(n) => Some(n as usize),
                        None => {
                            return Box::pin(ready(Err(RpcError::invalid_params(
                                "limit must be a non-negative integer",
                            ))))
                        }
                    },
                };
                self.with_services(move |s| async move {
                    let events = s
                        .bus
                        .send(ReadEvents {
                            channel: channel.clone(),
                            since,
                            limit,
                            scope,
                        })
                        .await
                        .map_err(crate::msg::mailbox)?;
                    Ok(json!({
                        "channel": channel,
                        "events": events.iter().map(BusEvent::to_json).collect::<Vec<_>>(),
                    }))
                })
            }
            "events.publish" => {
                if !channel.starts_with("user.") {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "only user.* channels may be published to",
                    )
                    .with_data(json!({"channel": channel})))));
                }
                let payload = p.get("payload").cloned().unwrap_or(Json::Null);
                // The publishing client's session sees the event on its own
                // `channel(...)` too (the language side of the bus).
                let origin = self.attached.as_ref().map(|att| {
                    att.handle
                        .inject(&channel, shoal_value::json::from_json(&payload));
                    Origin::new(&att.handle.name, att.handle.owner())
                });
                self.with_services(move |s| async move {
                    let publish = Publish {
                        channel,
                        payload: payload.into(),
                    };
                    let ev = s
                        .bus
                        .send(PublishFrom { publish, origin })
                        .await
                        .map_err(crate::msg::mailbox)?;
                    Ok(json!({"channel": ev.channel, "seq": ev.seq, "ts": ev.ts}))
                })
            }
            "events.subscribe" => {
                if self.subs.contains_key(&channel) {
                    return Box::pin(ready(Ok(json!({"channel": channel, "subscribed": true}))));
                }
                let max = self.cx.limits.max_subscriptions_per_connection;
                if self.subs.len() >= max {
                    return Box::pin(ready(Err(peer::limit_error(
                        "max_subscriptions_per_connection",
                        max as u64,
                        "too many subscriptions on this connection",
                    ))));
                }
                let svc = self.with_services(|_| async { Ok(Json::Null) });
                Box::pin(svc.then(move |r, act, ctx| {
                    let bus = act.known_services();
                    let sub = ctx.address().recipient();
                    async move {
                        r?;
                        let bus = bus
                            .ok_or_else(|| RpcError::internal("the event bus is not running"))?
                            .bus;
                        let id = bus
                            .send(SubscribeReplay {
                                channel: channel.clone(),
                                sub,
                                since,
                                scope,
                            })
                            .await
                            .map_err(crate::msg::mailbox)?;
                        Ok((channel, id, bus))
                    }
                    .into_actor(act)
                    .map(|r: Result<_, RpcError>, act, _ctx| {
                        let (channel, id, bus) = r?;
                        if let Some(old) = act.subs.insert(channel.clone(), id) {
                            bus.do_send(Unsubscribe { id: old });
                        }
                        act.reg.stats.set_subscriptions(act.subs.len());
                        Ok(json!({"channel": channel, "subscribed": true}))
                    })
                }))
            }
            _ => {
                let removed = self.subs.remove(&channel);
                self.reg.stats.set_subscriptions(self.subs.len());
                if let Some(id) = removed {
                    if let Some(s) = self.known_services() {
                        s.bus.do_send(Unsubscribe { id });
                    }
                }
                Box::pin(ready(Ok(json!({"channel": channel, "subscribed": false}))))
            }
        }
    }
}
