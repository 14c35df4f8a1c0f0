//! Typed tool results: the structs a tool's structured content is written
//! from, and the detailed output schemas generated from them
//! ([`output_schema_of`]). A result whose shape depends on the request (a
//! `shoal_get` view, a plan's effects, a PTY screen) keeps its varying
//! members as JSON values and says so in its schema.

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::{json, Value as Json};

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

pub use crate::kernel::{
    Applied, CapRequestResult, Cursor, Elicitation, ExecAnswer, ExecResult, Grant, PtyClosed,
    PtyExit, PtyList, PtyOpened, PtyResized, PtyScreen, PtySent, Span, TaskStarted, WarningOut,
};

pub use crate::kernel::GetResult;

/// `shoal_journal`: entries newest first.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct JournalResult {
    pub entries: Vec<serde_json::Map<String, Json>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
}

pub use crate::kernel::CancelResult;

pub use crate::kernel::{PlanResult, Verdict};

/// What a plan call answers: a plan, the plans (`plan.list`'s rows), or a
/// `cap.request` grant.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PlanAnswer {
    Plan(Box<PlanResult>),
    Plans(Vec<PlanResult>),
    Grant(Box<CapRequestResult>),
}

/// `shoal_apply` (the result of the exec it runs).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct ApplyResult {
    #[serde(rename = "ref")]
    pub reference: String,
    #[schemars(schema_with = "any_object")]
    pub value: Json,
}

/// A `shoal_cap_request` the user answered in the client.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct CapDecided {
    pub grant: Grant,
    pub plan_ref: String,
    pub enforced: bool,
    pub elicitation: Elicitation,
    /// Why it was denied
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub expires: Option<String>,
    /// Empty when denied
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncovered_effects: Option<Vec<String>>,
}

pub use crate::kernel::{PtyEntry, TakenOver};

/// What a `pty.*` request answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PtyAnswer {
    Opened(PtyOpened),
    Sent(PtySent),
    Screen(Box<PtyScreen>),
    Resized(PtyResized),
    Closed(PtyClosed),
    List(PtyList),
}

/// The schema of a result struct: inlined, without `$schema`, `title` or
/// `format` annotations.
fn schema_of<T: JsonSchema>() -> Json {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    settings.contract = schemars::generate::Contract::Serialize;
    let mut v = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    strip(&mut v);
    v
}

fn strip(v: &mut Json) {
    match v {
        Json::Object(o) => {
            if o.get("format").is_some_and(Json::is_string) {
                o.remove("format");
            }
            if o.get("title").is_some_and(Json::is_string) {
                o.remove("title");
            }
            for (k, sub) in o.iter_mut() {
                if k != "enum" && k != "const" && k != "properties" {
                    strip(sub);
                }
            }
            if let Some(Json::Object(props)) = o.get_mut("properties") {
                props.values_mut().for_each(strip);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// A tool's detailed `outputSchema` generated from its success shapes: the
/// members of all of them, and `anyOf` the required members of one of them
/// or the error shape `{code, message, data?}` that every `isError` result
/// carries (docs/protocol.md §9: clients validate errors against it too).
pub fn output_schema_of(shapes: &[Json]) -> Json {
    let mut props = serde_json::Map::new();
    let mut any = Vec::new();
    for s in shapes {
        if let Some(p) = s.get("properties").and_then(Json::as_object) {
            for (k, v) in p {
                props.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        any.push(json!({"required": s.get("required").cloned().unwrap_or(json!([]))}));
    }
    props.insert(
        "code".into(),
        json!({"type": "integer", "description": "error results only: the JSON-RPC error code"}),
    );
    props.insert(
        "message".into(),
        json!({"type": "string", "description": "error results only: what went wrong"}),
    );
    props.insert(
        "data".into(),
        json!({"type": "object", "description": "error results only: details (hint, span, errors, ref)"}),
    );
    any.insert(1, json!({"required": ["code", "message"]}));
    json!({"type": "object", "properties": props, "anyOf": any})
}

/// The output schema of a tool whose results are `T`.
pub fn output_of<T: JsonSchema>() -> Json {
    output_schema_of(&[schema_of::<T>()])
}

/// `shoal_cap_request`: the request's grant, or the user's answer.
pub fn cap_request_output() -> Json {
    output_schema_of(&[schema_of::<CapRequestResult>(), schema_of::<CapDecided>()])
}

/// `shoal_exec`: a value, or a task handle.
pub fn exec_output() -> Json {
    output_schema_of(&[schema_of::<ExecResult<Json>>(), schema_of::<TaskStarted>()])
}

/// A typed value as JSON, where the answer is still a tree (resource reads,
/// the kernel's PTY claims; a result struct always encodes: its keys are strings).
pub fn result_json<T: Serialize>(v: T) -> Json {
    serde_json::to_value(v).unwrap_or(Json::Null)
}
