//! JSON-RPC 2.0 envelopes and the error codes of docs/rules.md §14.
//!
//! Incoming frames are classified into requests, notifications and invalid
//! frames here, so both connection actors answer malformed input identically.

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

pub const PARSE_ERROR_RPC: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const NOT_ATTACHED: i64 = -32000;
pub const PARSE_ERROR: i64 = -32001;
pub const RAISED: i64 = -32002;
pub const UNKNOWN_REF: i64 = -32004;
pub const BAD_PATH_OR_SLICE: i64 = -32005;
pub const LEASH_DENIED: i64 = -32010;
pub const APPROVAL_REQUIRED: i64 = -32011;
pub const UNKNOWN_PLAN: i64 = -32012;
pub const TASK_CONTROL_UNAVAILABLE: i64 = -32020;
pub const UNKNOWN_TASK: i64 = -32021;
pub const UNKNOWN_PTY: i64 = -32022;
pub const PTY_SPAWN_FAILED: i64 = -32023;
/// A PTY a human has taken over (`pty.claim`) refuses another caller's input.
pub const PTY_TAKEN_OVER: i64 = -32024;
pub const AUTH_FAILED: i64 = -32030;
/// A `[limits]` quota was reached (language code `resource_limit`); the
/// message and `data.limit` name the key.
pub const RESOURCE_LIMIT: i64 = -32040;

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// [`RpcError::with_data`] of a typed `data` (plain data: it always
    /// encodes).
    pub fn with_data_of<T: Serialize>(self, data: &T) -> Self {
        self.with_data(serde_json::to_value(data).unwrap_or_default())
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }
    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(METHOD_NOT_FOUND, "method not found").with_data(json!({ "method": method }))
    }
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What one frame turned out to be.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// No `id`: never answered.
    Notification { method: String, params: Value },
    /// Answer with this error (id echoed when it could be read, else null).
    Invalid { id: Value, error: RpcError },
}

/// A well-formed request read in place: its `params` are still the frame's
/// bytes (`None`: absent or `null`), for a caller that reads only what it
/// needs of them.
#[derive(Debug)]
pub struct RawRequest<'a> {
    pub id: Value,
    pub method: String,
    pub params: Option<&'a RawValue>,
}

/// The envelope members of a frame, read without building a map: `id` and
/// `method` as values (present, even when `null`), `params` as raw bytes,
/// `result`/`error` only checked. Any other member sends the frame to the
/// whole-value parse (serde's own skipping is laxer than a value parse).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Head<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Value>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present_checked")]
    result: Option<Checked>,
    #[serde(default, deserialize_with = "present_checked")]
    error: Option<Checked>,
}

/// A member that is there, `null` included (serde's `Option` reads `null` as
/// absent).
pub fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn present_checked<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Checked>, D::Error> {
    Checked::deserialize(d).map(Some)
}

/// Any JSON value, read and dropped. Unlike serde's `IgnoredAny` it takes
/// exactly what a [`Value`] parse takes (strings decoded, numbers in range,
/// the nesting limit), without allocating: a frame read in place is refused
/// where the whole-value parse would refuse it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
        Checked::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// The bytes hold a JSON object (a derived struct would also take an array).
pub fn is_object_text(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// A frame classified by [`classify_request`].
#[derive(Debug)]
pub enum Classified<'a> {
    /// A well-formed request, its params raw.
    Raw(RawRequest<'a>),
    /// Anything else, as [`classify`] answers it.
    Other(Incoming),
}

/// Classify a frame, a request left with its params raw. Everything that is
/// not a well-formed request (and any frame the in-place read does not take:
/// duplicate or unknown members, another spelling of `"2.0"`) is classified
/// by [`classify_value`] on the whole parsed frame, so both paths answer alike
/// (`generated_tests.rs`); `SHOAL_NO_FAST_PATHS=1` classifies every frame so.
pub fn classify_request(bytes: &[u8]) -> Classified<'_> {
    if !shoal_base::fast_paths() {
        return Classified::Other(classify_whole(bytes));
    }
    read_in_place(bytes)
}

/// The in-place read of [`classify_request`] (whatever the switch says: the
/// tests hold it to the whole parse).
fn read_in_place(bytes: &[u8]) -> Classified<'_> {
    let head = match is_object_text(bytes).then(|| serde_json::from_slice::<Head>(bytes)) {
        Some(Ok(h)) if h.jsonrpc.is_some_and(|v| v.get() == "\"2.0\"") => h,
        _ => return Classified::Other(classify_whole(bytes)),
    };
    let params = head.params;
    if params.is_some_and(|p| may_be_deep(p.get())) {
        // Parsed on their own, params would get the whole nesting budget the
        // frame's parse shares with the envelope: let that parse decide.
        return Classified::Other(classify_whole(bytes));
    }
    let method = match (head.id, head.method) {
        (Some(id), Some(Value::String(method))) => {
            return Classified::Raw(RawRequest { id, method, params })
        }
        (None, Some(Value::String(method))) => method,
        // A response or junk without id: nothing to answer.
        (Some(_), None) if head.result.is_some() || head.error.is_some() => String::new(),
        (None, _) => String::new(),
        // Raw params are not parsed yet: one that does not parse makes the frame a
        // parse error, as the whole parse says.
        (Some(_), _) if params_value(params).is_none() => {
            return Classified::Other(classify_whole(bytes))
        }
        (Some(id), _) => {
            return Classified::Other(Incoming::Invalid {
                id,
                error: RpcError::new(INVALID_REQUEST, "invalid request: method must be a string"),
            })
        }
    };
    match params_value(params) {
        Some(params) => Classified::Other(Incoming::Notification { method, params }),
        None => Classified::Other(classify_whole(bytes)),
    }
}

/// Opening brackets from which raw params go to the whole-frame parse (far
/// below serde_json's nesting limit of 128, far above any real request).
const DEEP_PARAMS: usize = 100;

fn may_be_deep(raw: &str) -> bool {
    raw.len() >= DEEP_PARAMS
        && raw.bytes().filter(|&b| b == b'[' || b == b'{').count() >= DEEP_PARAMS
}

/// Raw params as a value (`None` when they do not parse as one: too deep, a
/// number out of range; the whole frame's parse then says why).
pub fn params_value(params: Option<&RawValue>) -> Option<Value> {
    match params {
        None => Some(Value::Null),
        Some(p) => serde_json::from_str(p.get()).ok(),
    }
}

/// Classify a frame's bytes.
pub fn classify(bytes: &[u8]) -> Incoming {
    incoming(bytes, classify_request(bytes))
}

/// What `classified` (of `bytes`) answers as a whole.
fn incoming<'a>(bytes: &'a [u8], classified: Classified<'a>) -> Incoming {
    match classified {
        Classified::Raw(r) => match params_value(r.params) {
            Some(params) => Incoming::Request {
                id: r.id,
                method: r.method,
                params,
            },
            None => classify_whole(bytes),
        },
        Classified::Other(other) => other,
    }
}

/// Classify a frame by parsing it whole into a value: the reference the
/// in-place read of [`classify`] answers like.
pub fn classify_whole(bytes: &[u8]) -> Incoming {
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(PARSE_ERROR_RPC, "parse error")
                    .with_data(json!({ "detail": e.to_string() })),
            }
        }
    };
    classify_value(v)
}

pub fn classify_value(v: Value) -> Incoming {
    let Value::Object(mut o) = v else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                INVALID_REQUEST,
                "invalid request: a frame must be a JSON object",
            ),
        };
    };
    let id = o.remove("id");
    let method = o.remove("method");
    let params = o.remove("params").unwrap_or(Value::Null);
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return match id {
            None => Incoming::Notification {
                method: String::new(),
                params,
            },
            Some(id) => Incoming::Invalid {
                id,
                error: RpcError::new(INVALID_REQUEST, "invalid JSON-RPC version"),
            },
        };
    }
    match (id, method) {
        (None, Some(Value::String(method))) => Incoming::Notification { method, params },
        // A response or junk without id: nothing to answer.
        (None, _) => Incoming::Notification {
            method: String::new(),
            params,
        },
        // A response (to a request this side sent): never answered; a
        // connection that sent requests takes it with [`response_of`] first.
        (Some(_), None) if o.contains_key("result") || o.contains_key("error") => {
            Incoming::Notification {
                method: String::new(),
                params,
            }
        }
        (Some(id), Some(Value::String(method))) => Incoming::Request { id, method, params },
        (Some(id), _) => Incoming::Invalid {
            id,
            error: RpcError::new(INVALID_REQUEST, "invalid request: method must be a string"),
        },
    }
}

/// A JSON-RPC response frame (an `id`, no `method`, a `result` or an
/// `error`): its id and outcome. `None` for anything else.
pub fn response_of(bytes: &[u8]) -> Option<(Value, Result<Value, RpcError>)> {
    let Ok(Value::Object(mut o)) = serde_json::from_slice::<Value>(bytes) else {
        return None;
    };
    if o.contains_key("method") || o.get("jsonrpc") != Some(&json!("2.0")) {
        return None;
    }
    let id = o.remove("id")?;
    if let Some(r) = o.remove("result") {
        return Some((id, Ok(r)));
    }
    let e = o.remove("error")?;
    let code = e
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or(INTERNAL_ERROR);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error without a message");
    let mut err = RpcError::new(code, message);
    if let Some(d) = e.get("data") {
        err = err.with_data(d.clone());
    }
    Some((id, Err(err)))
}

pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

pub fn reply(id: &Value, r: Result<Value, RpcError>) -> Value {
    match r {
        Ok(v) => response(id, v),
        Err(e) => error_response(id, &e),
    }
}

/// A JSON-RPC success response, typed: `{jsonrpc, id, result}`.
#[derive(Serialize)]
struct Success<'a, R: Serialize + ?Sized> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a R,
}

/// A JSON-RPC error response, typed: `{jsonrpc, id, error}`.
#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

/// The frame (compact JSON and `\n`) of a success response to `id`.
pub fn result_frame<R: Serialize + ?Sized>(id: &Value, result: &R) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let reply = Success {
        jsonrpc: "2.0",
        id,
        result,
    };
    if let Err(e) = serde_json::to_writer(&mut out, &reply) {
        return error_frame(id, &RpcError::internal(format!("encoding the result: {e}")));
    }
    out.push(b'\n');
    out
}

/// The frame of an error response to `id`.
pub fn error_frame(id: &Value, error: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let reply = Failure {
        jsonrpc: "2.0",
        id,
        error,
    };
    // An error's members are strings, numbers and JSON values: it always encodes.
    let _ = serde_json::to_writer(&mut out, &reply);
    out.push(b'\n');
    out
}

/// A result ready to be answered: written once, by serde, straight into its
/// response frame (no JSON tree of it is built on the way). Every
/// `Serialize` result is one, a JSON value included.
pub trait Respond: Send {
    /// The frame of the success response to `id` carrying this result.
    fn frame(&self, id: &Value) -> Vec<u8>;
}

impl<T: Serialize + Send> Respond for T {
    fn frame(&self, id: &Value) -> Vec<u8> {
        result_frame(id, self)
    }
}

/// A typed result whose type the caller need not name.
pub type Answer = Box<dyn Respond>;

/// `result` as an [`Answer`].
pub fn answer<T: Serialize + Send + 'static>(result: T) -> Answer {
    Box::new(result)
}

/// The reply frame for request `id`: the result's frame, or the error's.
pub fn respond<R: Respond + ?Sized>(id: &Value, r: Result<&R, &RpcError>) -> Vec<u8> {
    match r {
        Ok(v) => v.frame(id),
        Err(e) => error_frame(id, e),
    }
}

/// [`respond`] with an owned result: the same frame as
/// `frame::encode(&reply(id, r))` without building the wrapper object.
pub fn reply_frame<T: Serialize + Send>(id: &Value, r: Result<T, RpcError>) -> Vec<u8> {
    respond(id, r.as_ref())
}

/// The frame-limit refusal (id unknown: the frame was never read whole).
pub fn oversized(limit: usize, len: u64) -> Value {
    error_response(
        &Value::Null,
        &RpcError::new(
            INVALID_REQUEST,
            format!("frame of {len} bytes exceeds the limit of {limit} bytes"),
        )
        .with_data(json!({ "limit": limit })),
    )
}

/// A JSON-RPC request with typed params, as a client writes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request<'a, P> {
    pub jsonrpc: &'a str,
    pub id: u64,
    pub method: &'a str,
    pub params: P,
}

/// The frame (compact JSON and `\n`) of request `id`: `method` with `params`.
pub fn request_frame<P: Serialize>(
    id: u64,
    method: &str,
    params: P,
) -> serde_json::Result<Vec<u8>> {
    let mut out = serde_json::to_vec(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })?;
    out.push(b'\n');
    Ok(out)
}

/// A JSON-RPC notification with typed params.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Notification<'a, P> {
    pub jsonrpc: &'a str,
    pub method: &'a str,
    pub params: P,
}

/// A typed result as the JSON of a reply (`-32603` if it cannot be written,
/// which a result of plain data never is).
pub fn to_result<T: Serialize + ?Sized>(r: &T) -> Result<Value, RpcError> {
    serde_json::to_value(r).map_err(|e| RpcError::internal(e.to_string()))
}

/// The error a refused run answers (`None` when the verdict allows it):
/// `-32010` for deny, `-32011` when approval is required.
pub fn refusal(
    principal: &str,
    d: &shoal_policy::Decision,
    effects: &[shoal_policy::Effect],
) -> Option<RpcError> {
    use shoal_policy::{Effect, Verdict};
    let reason = d.reason.as_deref().unwrap_or("not granted");
    let (code, message) = match d.verdict {
        Verdict::Allow => return None,
        Verdict::Deny => (LEASH_DENIED, format!("policy denies this: {reason}")),
        Verdict::ApprovalRequired => (
            APPROVAL_REQUIRED,
            format!(
                "approval required: {reason}; plan it with shoal_plan (on the kernel socket: exec in plan mode), ask for approval with shoal_cap_request, then apply the plan with shoal_apply once a human approved it"
            ),
        ),
    };
    let data = serde_json::json!({
        "principal": principal,
        "verdict": d.verdict.as_str(),
        "reason": d.reason,
        "effects": effects.iter().map(Effect::to_json).collect::<Vec<_>>(),
    });
    Some(RpcError::new(code, message).with_data(data))
}

/// [`classify`] by the in-place read, whatever the switch says (tests).
#[cfg(test)]
fn in_place(bytes: &[u8]) -> Incoming {
    incoming(bytes, read_in_place(bytes))
}

#[cfg(test)]
mod generated_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_frame_matches_the_encoded_reply() {
        let ids = [json!(7), json!("a\"b"), Value::Null];
        let results = [
            json!({"x": [1, {"y": "z"}]}),
            json!({}),
            json!([1]),
            json!("s"),
        ];
        for id in &ids {
            for r in &results {
                let want = crate::frame::encode(&reply(id, Ok(r.clone())));
                assert_eq!(reply_frame(id, Ok(r.clone())), want);
            }
            let e = RpcError::invalid_params("bad");
            let want = crate::frame::encode(&reply(id, Err(e.clone())));
            assert_eq!(reply_frame::<Value>(id, Err(e)), want);
        }
    }

    #[test]
    fn a_typed_answer_is_the_frame_of_its_json() {
        #[derive(Serialize)]
        struct Row {
            name: &'static str,
            n: Option<u64>,
        }
        let id = json!(3);
        let typed: Answer = answer(Row { name: "a", n: None });
        let want = crate::frame::encode(&reply(&id, Ok(json!({"name": "a", "n": null}))));
        assert_eq!(respond(&id, Ok(&*typed)), want);
        assert_eq!(
            String::from_utf8(want).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"name\":\"a\",\"n\":null}}\n"
        );
        let e = RpcError::internal("x");
        assert_eq!(
            respond::<dyn Respond>(&id, Err(&e)),
            crate::frame::encode(&reply(&id, Err(e.clone())))
        );
    }

    /// The in-place read classifies every frame as the whole-value parse does.
    #[test]
    fn in_place_read_agrees_with_the_whole_parse() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let mut frames: Vec<String> = [
            r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#,
            r#"  {"jsonrpc":"2.0","id":7,"method":"x","params":{"a":[1,{"b":null}]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{"k":1}}"#,
            r#"{"jsonrpc":"2.0","method":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null,"result":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1e400}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","extra":"\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","method":"y"}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":2,"method":"x"}"#,
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x\u00e9"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e400}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":5}"#,
            r#"{"jsonrpc":"2.0","id":1.5e3,"method":"x"} "#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x""#,
            r#"[]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
            r#""s""#,
            r#"{}"#,
            r#"{not json"#,
            // No method, params out of range: a parse error, as a whole.
            r#"{"params":{"a":1e400},"jsonrpc":"2.0","id":1}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        frames.push(deep);
        // Around serde_json's nesting limit: params parsed on their own get
        // one level more than inside the frame; the answer must not change.
        for n in [98, 99, 100, 101, 125, 126, 127, 128, 129] {
            frames.push(format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{}1{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            ));
            frames.push(format!(
                r#"{{"jsonrpc":"2.0","method":"n","params":{}1{}}}"#,
                "{\"a\":".repeat(n),
                "}".repeat(n)
            ));
        }
        for f in &frames {
            let b = f.as_bytes();
            assert_eq!(in_place(b), classify_whole(b), "{f}");
        }
        let bad_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"extra\":\"\xff\"}";
        assert_eq!(in_place(bad_utf8), classify_whole(bad_utf8));
        let Classified::Raw(r) =
            read_in_place(br#"{"jsonrpc":"2.0","id":3,"method":"m","params":{"a":1}}"#)
        else {
            panic!("a request")
        };
        assert_eq!((r.id, r.method.as_str()), (json!(3), "m"));
        assert_eq!(r.params.map(RawValue::get), Some(r#"{"a":1}"#));
    }

    #[test]
    fn classification_table() {
        let cases: Vec<(&str, &str)> = vec![
            ("{not json", "invalid -32700 null"),
            ("[1,2]", "invalid -32600 null"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#, "request 7 x"),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
                "request null x",
            ),
            (r#"{"jsonrpc":"2.0","method":"n"}"#, "notification n"),
            (
                r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#,
                "invalid -32600 3",
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
                "invalid -32600 \"a\"",
            ),
            // A response is never answered.
            (
                r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#,
                "notification ",
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}"#,
                "notification ",
            ),
            (r#"{"jsonrpc":"2.0","id":2}"#, "invalid -32600 2"),
        ];
        for (frame, want) in cases {
            let got = match classify(frame.as_bytes()) {
                Incoming::Request { id, method, .. } => format!("request {id} {method}"),
                Incoming::Notification { method, .. } => format!("notification {method}"),
                Incoming::Invalid { id, error } => format!("invalid {} {id}", error.code),
            };
            assert_eq!(got, want, "{frame}");
        }
        let (id, r) = response_of(br#"{"jsonrpc":"2.0","id":"s1","result":{"a":1}}"#).unwrap();
        assert_eq!((id, r), (json!("s1"), Ok(json!({"a": 1}))));
        let (_, r) =
            response_of(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#).unwrap();
        assert_eq!(r.unwrap_err().code, -1);
        assert!(response_of(br#"{"jsonrpc":"2.0","id":3,"method":"x"}"#).is_none());
        assert!(response_of(br#"{"jsonrpc":"2.0","id":3}"#).is_none());
    }
}
