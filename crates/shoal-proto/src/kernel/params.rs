//! The params of each kernel method (docs/protocol.md §2), read by
//! [`super::KernelRequest::parse`]. Unknown members are ignored; a check
//! serde cannot make in a type is made where the params are used.

use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value as Json;

use crate::elide::{Budget, Elide};
use crate::rpc::RpcError;
use shoal_lang::Position;

/// `{src}` (`parse`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SrcParams {
    pub src: String,
}

/// `complete`: the source and a byte offset (default: the end).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CompleteParams {
    pub src: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
}

/// Environment variables in the order given (an object of strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvVars(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for EnvVars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EnvVars;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<EnvVars, A::Error> {
                let mut v = Vec::new();
                while let Some((k, s)) = m.next_entry::<String, String>()? {
                    v.push((k, s));
                }
                Ok(EnvVars(v))
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for EnvVars {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl JsonSchema for EnvVars {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EnvVars".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "environment variables, in the order given"
        })
    }
}

impl AttachParams {
    /// An attach to `session` (absent: `default`) by a client of `kind`.
    pub fn client(session: Option<&str>, kind: &str, tty: bool) -> AttachParams {
        AttachParams {
            session: session.map(str::to_string),
            client: Some(ClientParams {
                kind: Some(kind.to_string()),
                tty: Some(tty),
                ..ClientParams::default()
            }),
            ..AttachParams::default()
        }
    }
}

/// `session.attach`'s `client`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human: Option<bool>,
}

/// `session.attach` (and the shim's `shoal/attach`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AttachParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<EnvVars>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientParams>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<bool>,
}

/// `mode` of an `exec`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecMode {
    #[default]
    Run,
    /// Derive and store a plan instead of running.
    Plan,
    /// Run the approved plan of exactly this source (`plan_ref`).
    Approved,
}

/// Where an exec's final statement is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PositionParam {
    Stmt,
    Value,
}

impl From<PositionParam> for Position {
    fn from(p: PositionParam) -> Self {
        match p {
            PositionParam::Stmt => Position::Stmt,
            PositionParam::Value => Position::Value,
        }
    }
}

/// A render width: the caller's terminal columns, 20 to 1000.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Width(pub usize);

impl<'de> Deserialize<'de> for Width {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match u64::deserialize(d) {
            Ok(w @ 20..=1000) => Ok(Width(w as usize)),
            _ => Err(de::Error::custom(
                "width must be an integer from 20 to 1000",
            )),
        }
    }
}

impl Serialize for Width {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0 as u64)
    }
}

impl JsonSchema for Width {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Width".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "minimum": 20, "maximum": 1000})
    }
}

/// `exec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExecParams {
    pub src: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<PositionParam>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ExecMode>,
    /// `mode: "approved"`: the approved plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<Width>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elide: Option<Elide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// The old name of `background`.
    #[serde(default, rename = "async", skip_serializing_if = "Option::is_none")]
    pub is_async: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl ExecParams {
    /// An exec of `src`, everything else as the daemon's defaults.
    pub fn of(src: impl Into<String>) -> ExecParams {
        ExecParams {
            src: src.into(),
            ..ExecParams::default()
        }
    }

    pub fn mode(&self) -> ExecMode {
        self.mode.unwrap_or_default()
    }

    /// The position (`stmt` unless asked otherwise).
    pub fn position(&self) -> Position {
        self.position.map_or(Position::Stmt, Into::into)
    }

    pub fn budget(&self) -> Budget {
        Elide::budget_of(self.elide.as_ref())
    }

    /// `background` or its old name `async`.
    pub fn background(&self) -> bool {
        self.background.unwrap_or(false) || self.is_async.unwrap_or(false)
    }
}

/// `value.get`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GetParams {
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<[u64; 2]>,
    /// Lines a..=b (1-based) of the value's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elide: Option<Elide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

impl GetParams {
    /// `(ref, request)`.
    pub fn request(&self) -> Result<(String, super::GetRequest), RpcError> {
        let size = |n: u64| n.min(usize::MAX as u64) as usize;
        let pair = |p: Option<[u64; 2]>| p.map(|[a, b]| (size(a), size(b)));
        let elide = self.elide.unwrap_or_default();
        let req = super::get_request(
            self.path.clone(),
            pair(self.slice),
            pair(self.lines),
            elide.budget(),
            elide.raw_limit(),
            self.format.as_deref(),
        )?;
        Ok((self.reference.clone(), req))
    }
}

/// `explain` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExplainParams {
    pub src: String,
}

/// `debug.crash` params: the actor to crash (default the session).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CrashParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// `session.close` params: the session (default the attached one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CloseParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// A plan's ref, never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanRef(pub String);

impl<'de> Deserialize<'de> for PlanRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(de::Error::custom("plan_ref must not be empty"));
        }
        Ok(PlanRef(s))
    }
}

impl Serialize for PlanRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl JsonSchema for PlanRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PlanRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "minLength": 1})
    }
}

/// `plan.get` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanRefParams {
    pub plan_ref: PlanRef,
}

/// Who approves or denies: the CLI or an attached client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Cli,
    Attach,
}

/// `plan.approve`, `plan.deny`: the plan and the channel (absent: the
/// connection's own).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DecideParams {
    pub plan_ref: PlanRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

/// `plan.apply`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyParams {
    pub plan_ref: PlanRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elide: Option<Elide>,
}

/// An effect kind asked for: `"fs.write"` or `{"kind": "fs.write"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectKind(pub String);

impl<'de> Deserialize<'de> for EffectKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Obj {
            kind: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Kind(String),
            Obj(Obj),
        }
        match Either::deserialize(d) {
            Ok(Either::Kind(k)) | Ok(Either::Obj(Obj { kind: k })) => Ok(EffectKind(k)),
            Err(_) => Err(de::Error::custom(
                "an effect is a kind (\"fs.write\") or {\"kind\": ...}",
            )),
        }
    }
}

impl Serialize for EffectKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl JsonSchema for EffectKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EffectKind".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"anyOf": [
            {"type": "string"},
            {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
        ]})
    }
}

/// `cap.request`: the plan and the kinds it asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapRequestParams {
    pub plan_ref: PlanRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<EffectKind>>,
}

impl CapRequestParams {
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.effects.iter().flatten().map(|k| k.0.as_str())
    }
}

/// `journal.get`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JournalGetParams {
    pub id: u64,
}

/// `blob.get`: past `max_bytes` (default the elision budget, at most the
/// hard cap) the value comes back as a ref.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BlobGetParams {
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// `events.read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadEventsParams {
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// `events.publish`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PublishParams {
    pub channel: String,
    #[serde(default)]
    pub payload: Json,
}

/// `events.subscribe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubscribeParams {
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
}

/// `events.unsubscribe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChannelParams {
    pub channel: String,
}

/// The `events.*` methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventsRequest {
    Read(ReadEventsParams),
    Publish(PublishParams),
    Subscribe(SubscribeParams),
    Unsubscribe(ChannelParams),
}

impl EventsRequest {
    pub fn method(&self) -> &'static str {
        match self {
            EventsRequest::Read(_) => "events.read",
            EventsRequest::Publish(_) => "events.publish",
            EventsRequest::Subscribe(_) => "events.subscribe",
            EventsRequest::Unsubscribe(_) => "events.unsubscribe",
        }
    }

    /// The channel it names.
    pub fn channel(&self) -> &str {
        match self {
            EventsRequest::Read(p) => &p.channel,
            EventsRequest::Publish(p) => &p.channel,
            EventsRequest::Subscribe(p) => &p.channel,
            EventsRequest::Unsubscribe(p) => &p.channel,
        }
    }

    /// The same request on `channel` (a session-scoped channel resolved).
    pub fn on(mut self, channel: String) -> Self {
        match &mut self {
            EventsRequest::Read(p) => p.channel = channel,
            EventsRequest::Publish(p) => p.channel = channel,
            EventsRequest::Subscribe(p) => p.channel = channel,
            EventsRequest::Unsubscribe(p) => p.channel = channel,
        }
        self
    }
}

/// `{task: "task:N"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TaskParams {
    pub task: String,
}

/// `task.await`: the task and how long to wait at most (no limit when absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AwaitParams {
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// The `task.*` methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskRequest {
    Get(TaskParams),
    List,
    Await(AwaitParams),
    Cancel(TaskParams),
    Suspend(TaskParams),
    Resume(TaskParams),
}

impl TaskRequest {
    pub fn method(&self) -> &'static str {
        match self {
            TaskRequest::Get(_) => "task.get",
            TaskRequest::List => "task.list",
            TaskRequest::Await(_) => "task.await",
            TaskRequest::Cancel(_) => "task.cancel",
            TaskRequest::Suspend(_) => "task.suspend",
            TaskRequest::Resume(_) => "task.resume",
        }
    }
}

/// A PTY as a request names it: `"pty:N"` or its number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtyRef {
    /// As written (`pty:N`, or anything else, which names no PTY).
    Name(String),
    Number(u64),
}

impl fmt::Display for PtyRef {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            PtyRef::Name(s) => f.write_str(s),
            PtyRef::Number(n) => write!(f, "{n}"),
        }
    }
}

impl<'de> Deserialize<'de> for PtyRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PtyRef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pty_id (\"pty:N\")")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<PtyRef, E> {
                Ok(PtyRef::Name(s.to_string()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<PtyRef, E> {
                Ok(PtyRef::Number(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<PtyRef, E> {
                Ok(PtyRef::Name(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<PtyRef, E> {
                Ok(PtyRef::Name(n.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for PtyRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PtyRef::Name(n) => s.serialize_str(n),
            PtyRef::Number(n) => s.serialize_u64(*n),
        }
    }
}

impl JsonSchema for PtyRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PtyRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": ["string", "integer"], "description": "a PTY: \"pty:N\" or N"})
    }
}

/// `{pty_id}`: `pty.close`, `pty.claim`, `pty.release`, `pty.watch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PtyIdParams {
    pub pty_id: PtyRef,
}

/// `pty.open`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PtyOpenParams {
    pub cmd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Columns (default 80), clamped to 1..=1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u64>,
    /// Rows (default 24), clamped to 1..=1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<EnvVars>,
}

/// `pty.send`: keys, text or bytes (docs/rules.md §22).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PtySendParams {
    pub pty_id: PtyRef,
    pub input: Json,
}

/// `pty.read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PtyReadParams {
    pub pty_id: PtyRef,
    /// Text on the screen, or `re:REGEX`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u64>,
}

/// `pty.resize`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PtyResizeParams {
    pub pty_id: PtyRef,
    pub cols: u64,
    pub rows: u64,
}

/// The `pty.*` methods an agent drives (the `shoal_pty_*` tools).
#[derive(Clone, Debug, PartialEq)]
pub enum PtyRequest {
    Open(PtyOpenParams),
    Send(PtySendParams),
    Read(PtyReadParams),
    Resize(PtyResizeParams),
    Close(PtyIdParams),
    List,
}

impl PtyRequest {
    pub fn method(&self) -> &'static str {
        match self {
            PtyRequest::Open(_) => "pty.open",
            PtyRequest::Send(_) => "pty.send",
            PtyRequest::Read(_) => "pty.read",
            PtyRequest::Resize(_) => "pty.resize",
            PtyRequest::Close(_) => "pty.close",
            PtyRequest::List => "pty.list",
        }
    }
}
