//! KernelConn's event-bus methods: `events.read`, `events.publish`,
//! `events.subscribe`, `events.unsubscribe`, with session-scoped channels
//! (`task.N`, `jobs`) resolved through `actors::task::scoped_channel` first.
//! A token principal reads and hears only the events of sessions it may read
//! (`event_bus::Scope`); what a client publishes is its session's event.
//! It never names a bus channel of another session and never evaluates.

use actix::fut::ready;
use actix::prelude::*;
use serde_json::{json, Value as Json};

use super::{KernelConn, Reply};
use crate::event_bus::{
    BusEvent, Origin, Publish, PublishFrom, ReadEvents, Scope, SubscribeReplay, Unsubscribe,
};
use crate::peer;
use shoal_proto::kernel::{self, EventsRequest};
use shoal_proto::rpc::{self, Answer, RpcError};

impl KernelConn {
    /// `events.read`, `events.publish`, `events.subscribe`, `events.unsubscribe`.
    /// A session-scoped channel (`task.N`, `jobs`) is first resolved to the bus
    /// channel this session may use ([`crate::sessions::task::scoped_channel`]).
    pub(super) fn events_method(&mut self, req: EventsRequest, principal: &str) -> Reply {
        let scope = Scope::for_principal(principal);
        let channel = req.channel().to_string();
        let Some(att) = &self.attached else {
            return self.events_on(req, scope);
        };
        if !crate::sessions::task::is_scoped_channel(&channel)
            || matches!(req, EventsRequest::Publish(_))
        {
            return self.events_on(req, scope);
        }
        if let EventsRequest::Unsubscribe(_) = req {
            // Only this connection's own subscriptions can be dropped: no check.
            if channel == crate::sessions::task::JOBS_CHANNEL {
                let own = crate::sessions::task::jobs_channel(&att.handle.name);
                return self.events_on(req.on(own), scope);
            }
            return self.events_on(req, scope);
        }
        let h = att.handle.clone();
        let resolve = async move { crate::sessions::task::scoped_channel(&h, &channel).await };
        Box::pin(resolve.into_actor(self).then(move |r, act, _ctx| -> Reply {
            match r {
                Ok(bus) => act.events_on(req.on(bus), scope),
                Err(e) => Box::pin(ready(Err(e))),
            }
        }))
    }

    /// The events methods on a channel already scoped.
    fn events_on(&mut self, req: EventsRequest, scope: Option<Scope>) -> Reply {
        match req {
            EventsRequest::Read(p) => {
                let (channel, since) = (p.channel, p.since);
                let limit = p.limit.map(|n| n as usize);
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
                    Ok(kernel::EventsRead {
                        channel,
                        events: events.iter().map(BusEvent::to_json).collect(),
                    })
                })
            }
            EventsRequest::Publish(p) => {
                let (channel, payload) = (p.channel, p.payload);
                if !channel.starts_with("user.") {
                    return Box::pin(ready(Err(RpcError::invalid_params(
                        "only user.* channels may be published to",
                    )
                    .with_data(json!({"channel": channel})))));
                }
                let len = match crate::event_bus::checked_json_len(&payload) {
                    Ok(len) => len,
                    Err(why) => return Box::pin(ready(Err(RpcError::new(
                        rpc::RESOURCE_LIMIT,
                        format!("{why}: publish a path or a ref to large data instead"),
                    )
                    .with_data(
                        json!({"channel": channel, "max_bytes": crate::event_bus::MAX_EVENT_BYTES}),
                    )))),
                };
                // The publishing client's session sees the event on its own
                // `channel(...)` too (the language side of the bus).
                let origin = self.attached.as_ref().map(|att| {
                    att.handle
                        .inject(&channel, shoal_value::json::from_json(&payload), len);
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
                    Ok(kernel::Published {
                        channel: ev.channel.clone(),
                        seq: ev.seq,
                        ts: ev.ts,
                    })
                })
            }
            EventsRequest::Subscribe(p) => {
                let (channel, since) = (p.channel, p.since);
                self.dropped.remove(&channel);
                if self.subs.contains_key(&channel) {
                    return Box::pin(ready(subscription(channel, true)));
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
                        subscription(channel, true)
                    })
                }))
            }
            EventsRequest::Unsubscribe(p) => {
                let channel = p.channel;
                let removed = self.subs.remove(&channel);
                if removed.is_some() {
                    self.dropped.insert(channel.clone());
                }
                self.reg.stats.set_subscriptions(self.subs.len());
                if let Some(id) = removed {
                    if let Some(s) = self.known_services() {
                        s.bus.do_send(Unsubscribe { id });
                    }
                }
                Box::pin(ready(subscription(channel, false)))
            }
        }
    }
}

fn subscription(channel: String, subscribed: bool) -> Result<Answer, RpcError> {
    Ok(rpc::answer(kernel::Subscription {
        channel,
        subscribed,
    }))
}
