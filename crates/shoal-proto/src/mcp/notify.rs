//! What the server sends an MCP client unasked, typed, each shape in one place: a
//! resource's change, a call's progress, the end of a request the server made, the
//! first frame of a `subscriptions/listen` stream, and the server's own requests.
//! Each function returns the frame as bytes for the connection's writer.

use serde::Serialize;
use serde_json::Value as Json;

use crate::frame;
use crate::rpc::Notification;

/// `_meta` of a frame on a `subscriptions/listen` stream: which stream it is
/// on (the key is [`super::SUBSCRIPTION_ID_KEY`]).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ListenMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    pub subscription_id: &'a Json,
}

/// `notifications/resources/updated`.
#[derive(Clone, Debug, Serialize)]
pub struct ResourceUpdated<'a> {
    pub uri: &'a str,
    /// Counts the resource's updates on this subscription.
    pub seq: u64,
    /// The event itself, when it is small enough to send along.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Json>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<ListenMeta<'a>>,
}

pub fn resource_updated(p: &ResourceUpdated<'_>) -> Vec<u8> {
    notification("notifications/resources/updated", p)
}

/// `notifications/progress` of a running call.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress<'a> {
    pub progress_token: &'a Json,
    pub progress: f64,
    pub message: String,
}

pub fn progress(p: &Progress<'_>) -> Vec<u8> {
    notification("notifications/progress", p)
}

/// `notifications/cancelled`: the server gave up request `request_id` it
/// made of the client.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancelled<'a> {
    pub request_id: &'a Json,
    pub reason: &'a str,
}

pub fn cancelled(p: &Cancelled<'_>) -> Vec<u8> {
    notification("notifications/cancelled", p)
}

/// `notifications/subscriptions/acknowledged`: the first frame of a listen
/// stream, the subset of what it asked for that is honored.
#[derive(Clone, Debug, Serialize)]
pub struct Acknowledged<'a> {
    pub notifications: &'a Json,
    #[serde(rename = "_meta")]
    pub meta: ListenMeta<'a>,
}

pub fn acknowledged(p: &Acknowledged<'_>) -> Vec<u8> {
    notification("notifications/subscriptions/acknowledged", p)
}

/// A request the server makes of the client (`elicitation/create`).
#[derive(Clone, Debug, Serialize)]
struct Request<'a, P> {
    jsonrpc: &'static str,
    id: &'a Json,
    method: &'a str,
    params: P,
}

pub fn request<P: Serialize>(id: &Json, method: &str, params: P) -> Vec<u8> {
    frame::encode(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

fn notification<P: Serialize>(method: &str, params: P) -> Vec<u8> {
    frame::encode(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(bytes: Vec<u8>) -> Json {
        assert_eq!(bytes.last(), Some(&b'\n'));
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn each_frame_has_its_protocol_shape() {
        let listen = json!("l-1");
        let meta = Some(ListenMeta {
            subscription_id: &listen,
        });
        let f = parsed(resource_updated(&ResourceUpdated {
            uri: "shoal://events/user.x",
            seq: 3,
            payload: Some(json!({"n": 1})),
            meta,
        }));
        assert_eq!(
            f,
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {
                "uri": "shoal://events/user.x", "seq": 3, "payload": {"n": 1},
                "_meta": {super::super::SUBSCRIPTION_ID_KEY: "l-1"}}})
        );
        let f = parsed(resource_updated(&ResourceUpdated {
            uri: "shoal://pty/1/screen",
            seq: 0,
            payload: None,
            meta: None,
        }));
        assert_eq!(
            f["params"],
            json!({"uri": "shoal://pty/1/screen", "seq": 0})
        );
        let token = json!(7);
        let f = parsed(progress(&Progress {
            progress_token: &token,
            progress: 1.5,
            message: "running for 1.5s".into(),
        }));
        assert_eq!(
            f,
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": 7, "progress": 1.5, "message": "running for 1.5s"}})
        );
        let id = json!("shoal-elicit-1");
        let f = parsed(cancelled(&Cancelled {
            request_id: &id,
            reason: "timed out",
        }));
        assert_eq!(
            f["params"],
            json!({"requestId": "shoal-elicit-1", "reason": "timed out"})
        );
        let honored = json!({"resourceSubscriptions": ["shoal://a"]});
        let f = parsed(acknowledged(&Acknowledged {
            notifications: &honored,
            meta: ListenMeta {
                subscription_id: &listen,
            },
        }));
        assert_eq!(
            f,
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": honored,
                    "_meta": {super::super::SUBSCRIPTION_ID_KEY: "l-1"}}})
        );
        let f = parsed(request(&id, "elicitation/create", json!({"message": "m"})));
        assert_eq!(
            f,
            json!({"jsonrpc": "2.0", "id": "shoal-elicit-1", "method": "elicitation/create",
                "params": {"message": "m"}})
        );
    }
}
