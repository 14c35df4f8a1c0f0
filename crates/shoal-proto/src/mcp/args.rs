//! The typed arguments of the MCP tools. Each struct is the one definition
//! of its tool's input: the advertised `inputSchema` is generated from it
//! (`schemars`), and a call's `arguments` are read into it in one step
//! ([`super::table::parse_call`]), an error naming its JSON path. What the
//! schema says beyond types (a minimum, a pattern, a non-empty string) the
//! struct enforces itself, with the `deserialize_with` readers at the end.

use std::collections::BTreeMap;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value as Json;

use crate::elide::Elide;
use crate::kernel;

// `mode` of `shoal_exec` (`plan` joins when plans exist).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecMode {
    Run,
}

// Where the final statement of `shoal_exec` is evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PositionArg {
    Stmt,
    Value,
}

impl From<PositionArg> for shoal_lang::Position {
    fn from(p: PositionArg) -> Self {
        match p {
            PositionArg::Stmt => shoal_lang::Position::Stmt,
            PositionArg::Value => shoal_lang::Position::Value,
        }
    }
}

/// `shoal_exec`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// Shoal source to run
    pub src: String,
    #[serde(default)]
    pub mode: Option<ExecMode>,
    /// run as a task: {task, events} at once
    #[serde(default)]
    pub background: Option<bool>,
    /// wait budget; past it {task, events, timed_out}, still running
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// value (default): a failing final command yields its outcome; stmt: it raises
    #[serde(default)]
    pub position: Option<PositionArg>,
    #[serde(default)]
    pub elide: Option<Elide>,
}

impl ExecArgs {
    /// The evaluation position (value unless asked otherwise).
    pub fn position(&self) -> shoal_lang::Position {
        self.position
            .map_or(shoal_lang::Position::Value, Into::into)
    }
}

// `format` of `shoal_get`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GetFormatArg {
    Json,
    Render,
    Raw,
    Inline,
}

impl GetFormatArg {
    pub fn as_str(self) -> &'static str {
        match self {
            GetFormatArg::Json => "json",
            GetFormatArg::Render => "render",
            GetFormatArg::Raw => "raw",
            GetFormatArg::Inline => "inline",
        }
    }
}

fn slice_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2})
}

fn lines_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2, "maxItems": 2,
        "description": "[a, b]: lines a..b (1-based, inclusive) of the text"})
}

/// `shoal_get`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// out:N or shoal://out/N; task:N reads a task
    #[serde(rename = "ref")]
    pub reference: String,
    /// .field, [n], [a..b], e.g. rows[3].name
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "slice_schema")]
    pub slice: Option<[u64; 2]>,
    #[serde(default)]
    #[schemars(schema_with = "lines_schema")]
    pub lines: Option<[LineNo; 2]>,
    #[serde(default)]
    pub elide: Option<Elide>,
    /// default render (text); json: the tagged value
    #[serde(default)]
    pub format: Option<GetFormatArg>,
}

/// `shoal_journal`: the filters of `journal.query`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalArgs {
    #[serde(default)]
    pub since: Option<i64>,
    #[serde(default)]
    pub until: Option<i64>,
    #[serde(default)]
    pub principal: Option<String>,
    #[serde(default)]
    pub ok: Option<bool>,
    #[serde(default)]
    pub effects: Option<Vec<String>>,
    #[serde(default)]
    pub head: Option<String>,
    #[serde(default, deserialize_with = "at_least_one")]
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

impl From<JournalArgs> for shoal_journal::Query {
    fn from(a: JournalArgs) -> Self {
        shoal_journal::Query {
            since: a.since,
            until: a.until,
            principal: a.principal,
            ok: a.ok,
            effects: a.effects,
            head: a.head,
            session: None,
            limit: a.limit.map(|n| n.min(usize::MAX as u64) as usize),
        }
    }
}

/// `shoal_cancel`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    #[serde(deserialize_with = "task_ref")]
    #[schemars(regex(pattern = "^task:[0-9]+$"))]
    pub task: String,
}

/// `shoal_plan`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    pub src: String,
}

/// `shoal_apply`.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyArgs {
    pub plan_ref: String,
    #[serde(default)]
    pub elide: Option<Elide>,
}

/// `shoal_cap_request`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapRequestArgs {
    pub plan_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<String>>,
}

/// A PTY of this session, `pty:N`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(transparent)]
#[schemars(description = "a PTY of this session, pty:N")]
pub struct PtyId(pub String);

/// `shoal_pty_open`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtyOpenArgs {
    /// program, found on the session's PATH
    #[serde(deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub cmd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// columns (default 80), clamped to 1..=1000
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u64>,
    /// rows (default 24), clamped to 1..=1000
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// overrides of the session environment
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

fn input_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"}],
        "description": "string | {key} | {text} | {bytes} | array of them"})
}

/// `shoal_pty_send`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtySendArgs {
    pub pty_id: PtyId,
    #[serde(deserialize_with = "send_input")]
    #[schemars(schema_with = "input_schema")]
    pub input: Json,
}

/// `shoal_pty_read`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtyReadArgs {
    pub pty_id: PtyId,
    /// text on the screen, or re:REGEX
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "non_empty_opt"
    )]
    #[schemars(length(min = 1))]
    pub wait_for: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ms: Option<u64>,
    /// default 10000, at most 300000
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<u64>,
}

/// `shoal_pty_resize`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtyResizeArgs {
    pub pty_id: PtyId,
    /// columns, clamped to 1..=1000
    pub cols: u64,
    /// rows, clamped to 1..=1000
    pub rows: u64,
}

/// `shoal_pty_close`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtyCloseArgs {
    pub pty_id: PtyId,
}

/// `shoal_pty_list`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PtyListArgs {}

impl From<PtyId> for kernel::PtyRef {
    fn from(id: PtyId) -> Self {
        kernel::PtyRef::Name(id.0)
    }
}

impl From<PtyOpenArgs> for kernel::PtyOpenParams {
    fn from(a: PtyOpenArgs) -> Self {
        kernel::PtyOpenParams {
            cmd: a.cmd,
            args: a.args,
            cols: a.cols,
            rows: a.rows,
            env: a.env.map(|e| kernel::EnvVars(e.into_iter().collect())),
        }
    }
}

impl From<PtySendArgs> for kernel::PtySendParams {
    fn from(a: PtySendArgs) -> Self {
        kernel::PtySendParams {
            pty_id: a.pty_id.into(),
            input: a.input,
        }
    }
}

impl From<PtyReadArgs> for kernel::PtyReadParams {
    fn from(a: PtyReadArgs) -> Self {
        kernel::PtyReadParams {
            pty_id: a.pty_id.into(),
            wait_for: a.wait_for,
            stable_ms: a.stable_ms,
            timeout_ms: a.timeout_ms,
            scrollback: a.scrollback,
        }
    }
}

impl From<PtyResizeArgs> for kernel::PtyResizeParams {
    fn from(a: PtyResizeArgs) -> Self {
        kernel::PtyResizeParams {
            pty_id: a.pty_id.into(),
            cols: a.cols,
            rows: a.rows,
        }
    }
}

impl From<PtyCloseArgs> for kernel::PtyIdParams {
    fn from(a: PtyCloseArgs) -> Self {
        kernel::PtyIdParams {
            pty_id: a.pty_id.into(),
        }
    }
}

impl From<CancelArgs> for kernel::TaskParams {
    fn from(a: CancelArgs) -> Self {
        kernel::TaskParams { task: a.task }
    }
}

impl GetArgs {
    /// The `value.get` request of a `shoal_get`: the render unless `format`
    /// asks for another (a model reads text).
    pub fn request(&self) -> Result<(String, crate::kernel::GetRequest), crate::rpc::RpcError> {
        let size = |n: u64| n.min(usize::MAX as u64) as usize;
        let pair = |p: Option<[u64; 2]>| p.map(|[a, b]| (size(a), size(b)));
        let lines = self.lines.map(|[a, b]| [a.0, b.0]);
        let elide = self.elide.unwrap_or_default();
        let format = self.format.unwrap_or(GetFormatArg::Render);
        let req = crate::kernel::get_request(
            self.path.clone(),
            pair(self.slice),
            pair(lines),
            elide.budget(),
            elide.raw_limit(),
            Some(format.as_str()),
        )?;
        Ok((self.reference.clone(), req))
    }
}

/// A line number of `shoal_get`'s `lines`: 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct LineNo(pub u64);

impl<'de> Deserialize<'de> for LineNo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        if n == 0 {
            return Err(D::Error::invalid_value(
                Unexpected::Unsigned(0),
                &"a line number from 1",
            ));
        }
        Ok(LineNo(n))
    }
}

/// An optional count of at least 1 (`limit`).
fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = Option::<u64>::deserialize(d)?;
    if n == Some(0) {
        return Err(D::Error::invalid_value(
            Unexpected::Unsigned(0),
            &"an integer of at least 1",
        ));
    }
    Ok(n)
}

/// `task:N`.
fn task_ref<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    let digits = s.strip_prefix("task:").unwrap_or_default();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(D::Error::invalid_value(Unexpected::Str(&s), &"task:N"));
    }
    Ok(s)
}

fn non_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Err(D::Error::invalid_length(0, &"a non-empty string"));
    }
    Ok(s)
}

fn non_empty_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(s) if s.is_empty() => Err(D::Error::invalid_length(0, &"a non-empty string")),
        s => Ok(s),
    }
}

/// `shoal_pty_send`'s `input`: a string, an object or an array (the PTY
/// reads what is inside, naming the index of a bad item).
fn send_input<'de, D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
    let v = Json::deserialize(d)?;
    let unexpected = match &v {
        Json::String(_) | Json::Object(_) | Json::Array(_) => return Ok(v),
        Json::Null => Unexpected::Unit,
        Json::Bool(b) => Unexpected::Bool(*b),
        Json::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            (_, _, f) => Unexpected::Float(f.unwrap_or(f64::NAN)),
        },
    };
    Err(D::Error::invalid_type(
        unexpected,
        &"a string, {key}, {text}, {bytes} or an array of them",
    ))
}
