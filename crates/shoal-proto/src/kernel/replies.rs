//! The replies that the kernel methods and the MCP tools share: an exec's
//! result (or the task it became), an applied plan, a capability request's
//! grant and the PTY calls' answers. The MCP tools' output schemas and the
//! kernel's result schemas are both generated from these.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

use crate::elide::ReplyValue;
use shoal_lang::parse::Warning;

use super::PtyEntry;

fn tagged_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "tagged wire value, e.g. {\"$\":\"int\",\"v\":42}; {\"$\":\"ref\"} when elided"})
}

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

fn journal_state(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"enum": ["degraded"], "description": "present when the journal could not commit lately: the result is not yet durable"})
}

/// A likely bash habit in valid source (it never changes the result).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct WarningOut {
    pub code: String,
    pub message: String,
    #[schemars(schema_with = "any_object")]
    pub span: Span,
    pub hint: String,
}

/// A byte range of the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl From<&Warning> for WarningOut {
    fn from(w: &Warning) -> Self {
        WarningOut {
            code: w.code.to_string(),
            message: w.message.clone(),
            span: Span {
                start: w.span.start,
                end: w.span.end,
            },
            hint: w.hint.clone(),
        }
    }
}

/// An exec's result (`exec`, `shoal_exec`, `shoal_apply`): `value` is the
/// tagged wire value ([`ReplyValue`]: elided and streamed as the reply is
/// written).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ExecResult<V> {
    /// transcript ref, out:N
    #[serde(rename = "ref")]
    pub reference: String,
    pub uri: String,
    #[schemars(schema_with = "tagged_value")]
    pub value: V,
    pub render: String,
    pub elapsed_ms: f64,
    /// Likely bash habits in valid source: absent when there are none
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<WarningOut>,
    /// `degraded` when the journal could not commit lately
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "journal_state")]
    pub journal: Option<&'static str>,
}

/// A `shoal_exec` that became a task: `{task, events, render}`, with
/// `timed_out` when its wait budget ran out.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct TaskStarted {
    pub task: String,
    pub events: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
}

/// `exec` run now or as a task: its result, or the task it became.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ExecAnswer {
    Ran(ExecResult<ReplyValue>),
    Task(TaskStarted),
}

/// `plan.apply`, `shoal_apply` and `exec mode:"approved"`: the exec's
/// result and the plan it ran.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Applied {
    #[serde(flatten)]
    pub result: ExecResult<ReplyValue>,
    pub plan_ref: String,
}

/// A `shoal_cap_request`'s grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    Approved,
    ApprovalPending,
    Denied,
}

/// `shoal_cap_request` and `cap.request`: what the request got, and when
/// it waits for a human, why and how to approve.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct CapRequestResult {
    pub grant: Grant,
    pub plan_ref: String,
    /// `human` when only a person can approve it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforced: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncovered_effects: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granted_effects: Option<Vec<String>>,
    /// The channels a human approves it on
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve_via: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Whether the user was asked in the client, and how it went
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<Elicitation>,
}

impl CapRequestResult {
    /// A grant with nothing said beside it yet.
    pub fn of(grant: Grant, plan_ref: String) -> Self {
        CapRequestResult {
            grant,
            plan_ref,
            awaiting: None,
            enforced: None,
            why: None,
            uncovered_effects: None,
            granted_effects: None,
            approve_via: None,
            expires: None,
            elicitation: None,
        }
    }
}

/// A `shoal_cap_request`'s question to the user (`elicitation/create`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, JsonSchema)]
pub struct Elicitation {
    pub asked: bool,
    /// accept, decline or pending
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// How a PTY's program ended (`null` while it runs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyExit {
    pub status: Option<i32>,
    pub signal: Option<String>,
}

/// `shoal_pty_open`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyOpened {
    pub pty_id: String,
    pub pid: i32,
    pub cmd: String,
    pub cols: u16,
    pub rows: u16,
    pub alive: bool,
}

/// `shoal_pty_send`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtySent {
    pub pty_id: String,
    pub sent: usize,
}

/// The cursor of a screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Cursor {
    pub row: u16,
    pub col: u16,
    pub hidden: bool,
}

/// `shoal_pty_read`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyScreen {
    pub pty_id: String,
    pub cmd: String,
    pub cols: u16,
    pub rows: usize,
    pub cursor: Cursor,
    pub screen: Vec<String>,
    pub changed: bool,
    pub alive: bool,
    pub exit: Option<PtyExit>,
    pub pid: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternate_screen: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<Vec<String>>,
}

/// `shoal_pty_resize`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyResized {
    pub pty_id: String,
    pub cols: u16,
    pub rows: u16,
}

/// `shoal_pty_close`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyClosed {
    pub pty_id: String,
    pub closed: bool,
    pub exit: Option<PtyExit>,
}

/// `shoal_pty_list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyList {
    pub ptys: Vec<PtyEntry>,
}
