//! The tool table: one row per MCP tool (name, title, description,
//! annotations, input and output schemas, when it is listed, whether it acts
//! in the session) and one parse step from a `tools/call` into [`Tool`].
//! `tools/list` ([`tools`]) and dispatch ([`parse_call`]) both read it; the
//! daemon matches on [`Tool`], never on a name.

use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value as Json};

use super::args::*;
use super::outputs::*;
use super::schemas::{argument_error, invalid_arguments};
use super::Caps;
use crate::kernel::PtyRequest;
use crate::rpc::RpcError;

/// A `tools/call`, parsed: the tool and its typed arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Tool {
    Exec(ExecArgs),
    Get(GetArgs),
    Journal(JournalArgs),
    PtyOpen(PtyOpenArgs),
    PtySend(PtySendArgs),
    PtyRead(PtyReadArgs),
    PtyResize(PtyResizeArgs),
    PtyClose(PtyCloseArgs),
    PtyList(PtyListArgs),
    Cancel(CancelArgs),
    Plan(PlanArgs),
    Apply(ApplyArgs),
    CapRequest(CapRequestArgs),
}

impl Tool {
    /// The row of the table this call is for.
    pub fn def(&self) -> &'static ToolDef {
        let i = match self {
            Tool::Exec(_) => 0,
            Tool::Get(_) => 1,
            Tool::Journal(_) => 2,
            Tool::PtyOpen(_) => 3,
            Tool::PtySend(_) => 4,
            Tool::PtyRead(_) => 5,
            Tool::PtyResize(_) => 6,
            Tool::PtyClose(_) => 7,
            Tool::PtyList(_) => 8,
            Tool::Cancel(_) => 9,
            Tool::Plan(_) => 10,
            Tool::Apply(_) => 11,
            Tool::CapRequest(_) => 12,
        };
        &TOOLS[i]
    }

    pub fn name(&self) -> &'static str {
        self.def().name
    }

    /// The `pty.*` kernel request serving a `shoal_pty_*` call.
    pub fn pty_request(&self) -> Option<PtyRequest> {
        Some(match self {
            Tool::PtyOpen(a) => PtyRequest::Open(a.clone().into()),
            Tool::PtySend(a) => PtyRequest::Send(a.clone().into()),
            Tool::PtyRead(a) => PtyRequest::Read(a.clone().into()),
            Tool::PtyResize(a) => PtyRequest::Resize(a.clone().into()),
            Tool::PtyClose(a) => PtyRequest::Close(a.clone().into()),
            Tool::PtyList(_) => PtyRequest::List,
            _ => return None,
        })
    }
}

/// When a tool is listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Always,
    /// The journal runs ([`Caps::journal`]).
    Journal,
}

/// One row of the tool table.
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The annotations as meant (`tools/list` leaves out the spec's defaults).
    annotations: Option<Annotations>,
    /// `execution.taskSupport: "optional"` (task-augmented calls, 2025).
    pub task_support: bool,
    pub needs: Needs,
    /// It acts in the session (refused in a session shared read-only).
    pub acts: bool,
    input: fn() -> Json,
    output: fn() -> Json,
    parse: fn(Json) -> Result<Tool, serde_path_to_error::Error<serde_json::Error>>,
}

#[derive(Clone, Copy)]
struct Annotations {
    read_only: Option<bool>,
    destructive: Option<bool>,
    open_world: bool,
}

impl Annotations {
    /// The annotations as meant.
    fn hints(self) -> Hints {
        Hints {
            read_only_hint: self.read_only,
            destructive_hint: self.destructive,
            open_world_hint: Some(self.open_world),
        }
    }

    /// As advertised: without the spec's defaults (`openWorldHint: true`,
    /// `readOnlyHint: false`, the `destructiveHint` of a read-only tool);
    /// `None` when nothing is left.
    fn advertised(self) -> Option<Hints> {
        let read_only = self.read_only == Some(true);
        let h = Hints {
            read_only_hint: read_only.then_some(true),
            destructive_hint: self.destructive.filter(|_| !read_only),
            open_world_hint: (!self.open_world).then_some(false),
        };
        (h != Hints::default()).then_some(h)
    }
}

/// A `tools/list` entry's `annotations`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Hints {
    #[serde(skip_serializing_if = "Option::is_none")]
    read_only_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    destructive_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    open_world_hint: Option<bool>,
}

/// A `tools/list` entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input_schema: Json,
    output_schema: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Hints>,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<Execution>,
}

/// `execution: {taskSupport: "optional"}` (task-augmented calls, 2025).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Execution {
    task_support: &'static str,
}

/// The `tools/list` result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolsList {
    pub tools: Vec<ToolEntry>,
}

impl ToolDef {
    /// Whether it is listed (and callable) with `caps`.
    pub fn listed(&self, caps: Caps) -> bool {
        match self.needs {
            Needs::Always => true,
            Needs::Journal => caps.journal,
        }
    }

    pub fn input_schema(&self) -> Json {
        (self.input)()
    }

    pub fn output_schema(&self) -> Json {
        (self.output)()
    }

    /// The `tools/list` entry: with the detailed output schema and the
    /// annotations as meant, or `lean` as advertised ([`tools`]).
    fn entry(&self, lean: bool) -> ToolEntry {
        ToolEntry {
            name: self.name,
            title: self.title,
            description: self.description,
            input_schema: self.input_schema(),
            output_schema: if lean {
                json!({"type": "object"})
            } else {
                self.output_schema()
            },
            annotations: self.annotations.and_then(|a| {
                if lean {
                    a.advertised()
                } else {
                    Some(a.hints())
                }
            }),
            execution: self.task_support.then_some(Execution {
                task_support: "optional",
            }),
        }
    }
}

/// An input schema generated from `T`: `type: object` at the top, every
/// subschema inlined (no `$ref`/`$defs`), no `$schema`/`title`, no `format`
/// annotations (`uint64`, …), and an optional member is its type, not
/// `[type, null]` (as the hand-written schemas said).
pub fn input_schema_of<T: JsonSchema>() -> Json {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut v = schema.to_value();
    if let Some(o) = v.as_object_mut() {
        o.remove("title");
        o.remove("description");
        if !o.contains_key("properties") {
            o.insert("properties".into(), json!({}));
        }
    }
    tidy(&mut v);
    v
}

/// Drop `format` annotations, `null` alternatives and `default: null`,
/// recursively.
fn tidy(v: &mut Json) {
    match v {
        Json::Object(o) => {
            if o.get("format").is_some_and(Json::is_string) {
                o.remove("format");
            }
            if o.get("default").is_some_and(Json::is_null) {
                o.remove("default");
            }
            if let Some(Json::Array(values)) = o.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            if let Some(Json::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let t = types.remove(0);
                    o.insert("type".into(), t);
                }
            }
            for (k, sub) in o.iter_mut() {
                if k != "enum" && k != "const" {
                    tidy(sub);
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(tidy),
        _ => {}
    }
}

fn read<T: DeserializeOwned>(
    args: Json,
    wrap: fn(T) -> Tool,
) -> Result<Tool, serde_path_to_error::Error<serde_json::Error>> {
    serde_path_to_error::deserialize(args).map(wrap)
}

const fn pty_ann(read_only: bool) -> Option<Annotations> {
    Some(Annotations {
        read_only: Some(read_only),
        destructive: Some(false),
        open_world: true,
    })
}

/// The tools, in the order `tools/list` gives them.
pub static TOOLS: [ToolDef; 13] = [
    ToolDef {
        name: "shoal_exec",
        title: "Run Shoal source",
        description: "Run Shoal source in the session; returns the typed value (tagged JSON, \
        elided to a ref when large), its rendering and a transcript ref (out:N). Bindings persist.",
        annotations: Some(Annotations {
            read_only: None,
            destructive: None,
            open_world: true,
        }),
        task_support: true,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<ExecArgs>,
        output: exec_output,
        parse: |a| read(a, Tool::Exec),
    },
    ToolDef {
        name: "shoal_get",
        title: "Read a transcript value",
        description: "Read a stored value (out:N) without re-running: its text (head and tail when long), \
        lines [a, b] of it, a path, a slice, or format json for the tagged value.",
        annotations: Some(Annotations {
            read_only: Some(true),
            destructive: None,
            open_world: false,
        }),
        task_support: false,
        needs: Needs::Always,
        acts: false,
        input: input_schema_of::<GetArgs>,
        output: output_of::<GetResult>,
        parse: |a| read(a, Tool::Get),
    },
    ToolDef {
        name: "shoal_journal",
        title: "Query the journal",
        description: "Query the execution journal, newest first: since/until (ns), principal, ok, effects, head, limit.",
        annotations: Some(Annotations {
            read_only: Some(true),
            destructive: None,
            open_world: false,
        }),
        task_support: false,
        needs: Needs::Journal,
        acts: false,
        input: input_schema_of::<JournalArgs>,
        output: output_of::<JournalResult>,
        parse: |a| read(a, Tool::Journal),
    },
    ToolDef {
        name: "shoal_pty_open",
        title: "Open a terminal",
        description: "Start a program on a new PTY (a real terminal: editors, REPLs, TUIs, prompts) in the \
session's cwd and environment; 80x24 unless cols/rows say otherwise. Returns pty_id. Read the screen with \
shoal_pty_read (wait_for avoids polling).",
        annotations: pty_ann(false),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<PtyOpenArgs>,
        output: output_of::<PtyOpened>,
        parse: |a| read(a, Tool::PtyOpen),
    },
    ToolDef {
        name: "shoal_pty_send",
        title: "Type into a terminal",
        description: "Send input to a PTY: a string (verbatim), {key:\"Enter\"} (named keys: Enter, Tab, \
Escape, Backspace, Up/Down/Left/Right, Home, End, PageUp, F1-F12, Ctrl-C, ...), {text}, {bytes} (base64), \
or an array of these, concatenated in order.",
        annotations: pty_ann(false),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<PtySendArgs>,
        output: output_of::<PtySent>,
        parse: |a| read(a, Tool::PtySend),
    },
    ToolDef {
        name: "shoal_pty_read",
        title: "Read a terminal screen",
        description: "The PTY's screen: exactly rows lines, cursor, changed (since the last read), alive, exit. \
wait_for (text, or re:REGEX) returns as soon as the screen matches; stable_ms once it has not changed \
for that long; timeout_ms bounds both (matched says which). scrollback: N adds lines that scrolled off.",
        annotations: pty_ann(true),
        task_support: false,
        needs: Needs::Always,
        acts: false,
        input: input_schema_of::<PtyReadArgs>,
        output: output_of::<PtyScreen>,
        parse: |a| read(a, Tool::PtyRead),
    },
    ToolDef {
        name: "shoal_pty_resize",
        title: "Resize a terminal",
        description: "Resize a PTY (the program gets SIGWINCH and repaints); cols and rows clamped to 1..=1000.",
        annotations: pty_ann(false),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<PtyResizeArgs>,
        output: output_of::<PtyResized>,
        parse: |a| read(a, Tool::PtyResize),
    },
    ToolDef {
        name: "shoal_pty_close",
        title: "Close a terminal",
        description: "Kill the PTY's process group (SIGKILL), reap it and report how it ended.",
        annotations: pty_ann(false),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<PtyCloseArgs>,
        output: output_of::<PtyClosed>,
        parse: |a| read(a, Tool::PtyClose),
    },
    ToolDef {
        name: "shoal_pty_list",
        title: "List terminals",
        description: "The session's PTYs, ascending, without screen contents.",
        annotations: pty_ann(true),
        task_support: false,
        needs: Needs::Always,
        acts: false,
        input: input_schema_of::<PtyListArgs>,
        output: output_of::<PtyList>,
        parse: |a| read(a, Tool::PtyList),
    },
    ToolDef {
        name: "shoal_cancel",
        title: "Cancel a background task",
        description: "Cancel one background task (task:N): SIGINT, SIGTERM after 3 s, SIGKILL after 3 more.",
        annotations: None,
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<CancelArgs>,
        output: output_of::<CancelResult>,
        parse: |a| read(a, Tool::Cancel),
    },
    ToolDef {
        name: "shoal_plan",
        title: "Plan Shoal source",
        description: "Plan source without running it: effects, reversibility, verdict, plan_ref.",
        annotations: Some(Annotations {
            read_only: Some(true),
            destructive: Some(false),
            open_world: true,
        }),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<PlanArgs>,
        output: output_of::<PlanResult>,
        parse: |a| read(a, Tool::Plan),
    },
    ToolDef {
        name: "shoal_apply",
        title: "Apply a plan",
        description: "Run an allowed or approved plan (result as shoal_exec).",
        annotations: Some(Annotations {
            read_only: Some(false),
            destructive: Some(true),
            open_world: true,
        }),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<ApplyArgs>,
        output: output_of::<ApplyResult>,
        parse: |a| read(a, Tool::Apply),
    },
    ToolDef {
        name: "shoal_cap_request",
        title: "Request approval of a plan",
        description: "Request a plan's approval; uncovered_effects await the user (asked in the client when it supports elicitation).",
        annotations: Some(Annotations {
            read_only: Some(false),
            destructive: Some(false),
            open_world: true,
        }),
        task_support: false,
        needs: Needs::Always,
        acts: true,
        input: input_schema_of::<CapRequestArgs>,
        output: cap_request_output,
        parse: |a| read(a, Tool::CapRequest),
    },
];

/// The row of a tool listed with `caps`.
pub fn tool_def(caps: Caps, name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name && t.listed(caps))
}

/// The tools with their detailed output schemas: the shapes every result
/// keeps (the tests validate real results against them).
pub fn tools_detailed(caps: Caps) -> Json {
    super::result_json(entries(caps, false))
}

fn entries(caps: Caps, lean: bool) -> Vec<ToolEntry> {
    TOOLS
        .iter()
        .filter(|t| t.listed(caps))
        .map(|t| t.entry(lean))
        .collect()
}

/// The advertised tools (`tools/list`): only those whose capability exists,
/// lean. Every result is an object (error results the shape
/// `{code, message, data?}`), and that is all `outputSchema` says: the
/// detailed shapes of [`tools_detailed`] would more than double the listing
/// every client reads at start (about 19 KiB instead of 8), for a check no
/// client needs. Annotations that are the spec's defaults
/// (`openWorldHint: true`, `readOnlyHint: false`, `destructiveHint` of a
/// read-only tool) are left out.
pub fn tools(caps: Caps) -> Json {
    super::result_json(entries(caps, true))
}

/// The `tools/list` result.
pub fn tools_list(caps: Caps) -> ToolsList {
    ToolsList {
        tools: entries(caps, true),
    }
}

/// Whether `name` is a tool listed with `caps`.
pub fn is_tool(caps: Caps, name: &str) -> bool {
    tool_def(caps, name).is_some()
}

/// Why a `tools/call` did not parse.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// No such tool is listed: a JSON-RPC error.
    UnknownTool(String),
    /// The arguments do not fit the input schema: the `isError` structured
    /// content `{code:-32602, message, data:{errors:[{path, message}]}}`.
    InvalidArguments(RpcError),
}

/// The members each tool's arguments may have and those they must have (the
/// input schema's `properties` and `required`), in table order.
fn members() -> &'static [(Vec<String>, Vec<String>)] {
    static M: OnceLock<Vec<(Vec<String>, Vec<String>)>> = OnceLock::new();
    M.get_or_init(|| {
        TOOLS
            .iter()
            .map(|t| {
                let schema = t.input_schema();
                let known = schema["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                let required = schema["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_str().map(str::to_string))
                    .collect();
                (known, required)
            })
            .collect()
    })
}

/// A `serde_path_to_error` path as a JSON pointer (`/lines/0`; the
/// arguments themselves are `""`).
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut p = String::new();
    for seg in path.iter() {
        p.push('/');
        match seg {
            Segment::Seq { index } => p.push_str(&index.to_string()),
            Segment::Map { key } | Segment::Enum { variant: key } => p.push_str(&escape(key)),
            Segment::Unknown => p.push('?'),
        }
    }
    p
}

/// One bad argument: where it is in the arguments (for the order), its JSON
/// pointer, its message, and the message's prefix naming its path.
struct Bad {
    at: usize,
    pointer: String,
    message: String,
    named: String,
}

/// The one parse step of a `tools/call`: the tool looked up in the table
/// (listed with `caps`), its `arguments` (absent or `null`: `{}`) read into
/// the tool's typed arguments. An error names its JSON path (`/src`, and
/// `src: ...` in the message). Every bad member is reported, in the order
/// given: unknown and missing members at once, then each member that does not read (it
/// is set aside and the rest read again, at most 20 times).
pub fn parse_call(caps: Caps, name: &str, arguments: Option<Json>) -> Result<Tool, CallError> {
    let Some(i) = TOOLS.iter().position(|t| t.name == name && t.listed(caps)) else {
        return Err(CallError::UnknownTool(name.to_string()));
    };
    let def = &TOOLS[i];
    let args = match arguments {
        None | Some(Json::Null) => serde_json::Map::new(),
        Some(Json::Object(a)) => a,
        Some(_) => {
            return Err(CallError::InvalidArguments(invalid_arguments(
                "tool arguments must be an object".into(),
                vec![argument_error("", "arguments must be an object")],
            )))
        }
    };
    let at = |k: &str| args.keys().position(|x| x == k).unwrap_or(usize::MAX);
    let (known, required) = &members()[i];
    let expected = known
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut bad: Vec<Bad> = Vec::new();
    let mut rest = args.clone();
    for k in args.keys().filter(|k| !known.contains(k)) {
        rest.remove(k);
        bad.push(Bad {
            at: at(k),
            pointer: format!("/{}", escape(k)),
            message: format!("unknown field `{k}`, expected one of {expected}"),
            named: String::new(),
        });
    }
    for k in required.iter().filter(|k| !args.contains_key(*k)) {
        bad.push(Bad {
            at: usize::MAX,
            pointer: String::new(),
            message: format!("missing field `{k}`"),
            named: String::new(),
        });
    }
    for _ in 0..20 {
        let e = match (def.parse)(Json::Object(rest.clone())) {
            Ok(tool) if bad.is_empty() => return Ok(tool),
            Ok(_) => break,
            Err(e) => e,
        };
        let message = e.inner().to_string();
        let member = match e.path().iter().next() {
            Some(serde_path_to_error::Segment::Map { key }) if rest.contains_key(key) => {
                Some(key.clone())
            }
            _ => None,
        };
        // Missing members are reported above (and one set aside is not).
        if member.is_none() && message.starts_with("missing field `") {
            break;
        }
        let named = match e.path().to_string().as_str() {
            "." => String::new(),
            p => format!("{p}: "),
        };
        bad.push(Bad {
            at: member.as_deref().map_or(usize::MAX, at),
            pointer: pointer(e.path()),
            message,
            named,
        });
        let Some(k) = member else { break };
        rest.remove(&k);
    }
    bad.sort_by_key(|b| b.at);
    let first = &bad[0];
    let headline = format!(
        "invalid arguments for {name}: {}{}",
        first.named, first.message
    );
    Err(CallError::InvalidArguments(invalid_arguments(
        headline,
        bad.iter()
            .map(|b| argument_error(&b.pointer, &b.message))
            .collect(),
    )))
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
