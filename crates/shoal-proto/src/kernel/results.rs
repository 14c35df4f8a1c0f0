//! The kernel methods' results, typed (docs/protocol.md §2): the daemon
//! fills these and writes them with serde, so a member's name, order and
//! presence is decided here once. A member that is `null` on the wire when
//! unknown is an `Option` without `skip_serializing_if`; one left out is
//! marked so.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object"})
}

fn objects(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "object"}})
}

/// `value.get` and `shoal_get`: the ref and the view asked for (one of value, render,
/// inline, raw, raw_base64).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct GetResult {
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub value: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_base64: Option<String>,
    /// `lines: [a, b]` asked for: the lines given (1-based, inclusive)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<[u64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// The whole length of a bounded `raw`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl GetResult {
    /// The ref alone: the view is filled in by the caller.
    pub fn of(reference: String) -> Self {
        GetResult {
            reference,
            value: None,
            render: None,
            inline: None,
            raw: None,
            raw_base64: None,
            lines: None,
            total_lines: None,
            truncated: None,
            n: None,
            hint: None,
        }
    }
}

/// `session.attach`'s `client`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AttachedClient {
    pub kind: String,
    pub tty: bool,
}

/// A directory as shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ShownDir {
    pub display: String,
}

/// `session.attach`'s `caps`: the principal's sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AttachedCaps {
    pub enforced: bool,
    pub tier: &'static str,
    pub available_tier: &'static str,
    /// The principal when a policy names it, else `null`.
    pub policy_principal: Option<String>,
    /// The verdict on an opaque effect.
    pub opaque: &'static str,
}

/// `session.attach`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Attached {
    pub session: String,
    pub owner: String,
    /// `full` or `read`.
    pub access: &'static str,
    pub created: bool,
    pub env_differs: bool,
    pub principal: String,
    pub client: AttachedClient,
    pub conn: u64,
    pub cwd: ShownDir,
    pub env_hash: &'static str,
    pub caps: AttachedCaps,
    pub caps_enforced: bool,
    pub channels: [&'static str; 4],
}

/// The channels every attached client may subscribe to.
pub const SESSION_CHANNELS: [&str; 4] = ["session.transcript", "journal", "approval", "render"];

/// A person at a terminal attached to a session (`shoal attach`, `shoal watch`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HumanRow {
    pub client: String,
    /// RFC 3339.
    pub since: String,
}

/// Who took a PTY over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TakenOver {
    pub by: String,
    pub client: String,
}

/// One PTY of `shoal_pty_list`, `pty.list` and a session's `pty_list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PtyEntry {
    pub pty_id: String,
    pub cmd: String,
    pub pid: i32,
    pub cols: u16,
    pub rows: u16,
    pub alive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_over: Option<TakenOver>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchers: Option<usize>,
}

/// A session as `session.list` and `daemon.status` show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionRow {
    pub name: String,
    pub owner: String,
    pub cwd: String,
    /// Connections attached now.
    pub clients: i64,
    /// The people at a terminal attached to it, oldest first.
    pub humans: Vec<HumanRow>,
    pub busy: bool,
    /// Values in its transcript.
    pub transcript: usize,
    /// Tasks still running (`daemon.status` counts them).
    pub tasks: usize,
    pub ptys: usize,
    /// Bytes its PTYs hold of `[limits] session_memory`.
    pub pty_memory: u64,
    /// Bytes its values hold: what its evaluation threads allocated and did
    /// not free since it started (a token's session counts this and its
    /// `pty_memory` against `[limits] principal_memory`).
    #[serde(default)]
    pub memory: u64,
    /// Processes in its cgroups (fallback: live programs).
    pub procs: usize,
    pub spill_bytes: u64,
    pub ref_waits: u64,
    pub pty_list: Vec<PtyEntry>,
    pub age_ms: u64,
    /// A token principal's access (`daemon.status` of a token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<Cow<'static, str>>,
    /// `daemon.status`: its supervisor's task table, children and restarts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_list: Option<Vec<super::TaskRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<super::ChildRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u64>,
}

/// `session.list`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionRow>,
}

/// `session.close`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SessionClosed {
    pub session: String,
    pub closed: bool,
}

/// `plan.list`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PlanList {
    pub plans: Vec<PlanResult>,
}

/// `leash.tokens_changed`: the token principals that hold no valid token any
/// more and whose work was ended now, and the sessions of theirs that closed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TokensChecked {
    pub ended: Vec<String>,
    pub sessions: Vec<String>,
}

/// `debug.crash`: the actor crashed (a session's name or a service).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Crashed {
    pub crashed: String,
}

/// `events.read`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct EventsRead {
    pub channel: String,
    /// `{channel, seq, ts, payload, ...}` each, oldest first.
    #[schemars(schema_with = "objects")]
    pub events: Vec<Json>,
}

/// `blob.get` (and the `shoal://val/HASH` resource): a stored output by its
/// hash. `value` is the stored JSON (a tagged value, or the text of a
/// render or stream when it parses as JSON: any JSON), `{"$":"bytes"}` for
/// bytes that are not JSON, or a `{"$":"ref"}` past `max_bytes`
/// (`mcp::bounded_blob_max`).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct BlobRead {
    /// The blake3 hex digest, without its `blake3:` prefix.
    pub hash: String,
    #[schemars(schema_with = "any_json")]
    pub value: Json,
}

fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"description": "any JSON"})
}

/// `events.publish`: where the event went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Published {
    pub channel: String,
    pub seq: u64,
    /// ns since the epoch.
    pub ts: i64,
}

/// `events.subscribe`, `events.unsubscribe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Subscription {
    pub channel: String,
    pub subscribed: bool,
}

/// `pty.release`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyReleased {
    pub pty_id: String,
    pub released: bool,
}

/// `pty.watch`: the live screen follows as `pty.screen` notifications.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyWatching {
    pub pty_id: String,
    pub watching: bool,
    pub cols: u16,
    pub rows: u16,
    pub alive: bool,
}

/// `pty.claim`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PtyClaimed {
    pub pty_id: String,
    pub claimed: bool,
    pub cols: u16,
    pub rows: u16,
    pub alive: bool,
}

/// A `pty.screen` notification's params: the screen, or what changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PtyScreenUpdate {
    pub pty_id: String,
    pub seq: u64,
    pub full: bool,
    pub ansi: String,
    pub rows: u16,
    pub cols: u16,
}

/// The last `pty.screen` notification of a watch: the terminal is gone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PtyScreenEnded {
    pub pty_id: String,
    pub ended: bool,
    pub alive: bool,
    pub exit: Json,
}

/// A `complete` answer: the candidates and where the text they replace starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Completions {
    pub candidates: Vec<String>,
    pub start: usize,
}

/// `parse`: the syntax tree.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(bound = "")]
pub struct Parsed<A> {
    pub ast_version: u64,
    /// The program's syntax tree (its own versioned shape, `ast_version`).
    #[schemars(schema_with = "any_object")]
    pub ast: A,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_keeps_its_members_and_their_order() {
        let plan = shoal_policy::plan::Plan {
            plan_ref: "plan:1".into(),
            session: "s".into(),
            principal: "agent:a".into(),
            src: "rm x".into(),
            place: shoal_policy::plan::Place::of(std::path::Path::new("/p"), []),
            effects: vec![],
            undo: shoal_policy::undo::Undo {
                trashed: vec!["/p/x".into()],
                trash_dir: Some("/t".into()),
                ..Default::default()
            },
            verdict: shoal_policy::Verdict::Allow,
            reason: None,
            approval: shoal_policy::plan::Approval::Approved,
            approved_via: Some("policy"),
            created_ns: 0,
            expires_ns: 0,
        };
        let j = serde_json::to_string(&PlanResult::of(&plan)).unwrap();
        assert!(
            j.starts_with(concat!(
                r#"{"plan_ref":"plan:1","effects":[],"verdict":"allow","approval_pending":false,"#,
                r#""approved":true,"approval":"approved","approved_via":"policy","reason":null,"#,
                r#""session":"s","principal":"agent:a","cwd":"/p","expires":"#
            )),
            "{j}"
        );
        assert!(
            j.ends_with(r#""reversibility":"reversible","undo":{"trash":"/t","paths":["/p/x"],"how":"rm moves these into the trash directory; the outcome's `trash` field names each file: mv it back to undo"}}"#),
            "{j}"
        );
        let d = serde_json::to_value(PlanResult::detail(&plan)).unwrap();
        assert_eq!(d["src"], "rm x");
        assert_eq!(d["ast"], Json::Null);
        assert_eq!(d["ast_version"], 2);
    }

    #[test]
    fn reversibility_says_why_or_where_the_files_went() {
        use shoal_policy::undo::Undo;
        let mut undo = Undo::default();
        undo.lose("rm --permanent deletes /p/a for good".into());
        let j = serde_json::to_value(Reversibility::of(&[], &undo)).unwrap();
        assert_eq!(j["reversibility"], "irreversible");
        assert_eq!(j["irreversible"][0], "rm --permanent deletes /p/a for good");
        assert!(j.get("undo").is_none());
        let mut undo = Undo::default();
        undo.trash(&["/p/a".into(), "/p/a".into()]);
        undo.trash_dir = Some("/tmp/shoal-1/trash/7".into());
        let j = serde_json::to_value(Reversibility::of(&[], &undo)).unwrap();
        assert_eq!(j["reversibility"], "reversible");
        assert_eq!(j["undo"]["paths"], serde_json::json!(["/p/a"]));
        assert_eq!(j["undo"]["trash"], "/tmp/shoal-1/trash/7");
        assert!(j.get("irreversible").is_none());
    }

    #[test]
    fn a_policy_principal_is_null_when_none() {
        let caps = AttachedCaps {
            enforced: false,
            tier: "none",
            available_tier: "none",
            policy_principal: None,
            opaque: "allow",
        };
        assert_eq!(
            serde_json::to_value(&caps).unwrap()["policy_principal"],
            Json::Null
        );
    }
}

/// A plan's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    ApprovalRequired,
}

impl Verdict {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::ApprovalRequired => "approval_required",
        }
    }
}

impl From<shoal_policy::Verdict> for Verdict {
    fn from(v: shoal_policy::Verdict) -> Self {
        match v {
            shoal_policy::Verdict::Allow => Verdict::Allow,
            shoal_policy::Verdict::Deny => Verdict::Deny,
            shoal_policy::Verdict::ApprovalRequired => Verdict::ApprovalRequired,
        }
    }
}

/// Effect objects `{kind, ...}` as the planner derives them.
fn effects(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items": {"type": "object", "required": ["kind"]}})
}

/// `plan.get`'s `ast`: always `null` on this wire (the source is there).
fn no_ast(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "null"})
}

/// Where `rm` put the files a plan deletes, and how to get them back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UndoOut {
    pub trash: Option<String>,
    pub paths: Vec<String>,
    pub how: &'static str,
}

/// Whether a program's effects can be undone: `irreversible` (the reasons)
/// or `undo` (where `rm` puts the files) when there is something to say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Reversibility {
    /// reversible or irreversible
    pub reversibility: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub irreversible: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undo: Option<UndoOut>,
}

impl Reversibility {
    pub fn of(effects: &[shoal_policy::Effect], undo: &shoal_policy::undo::Undo) -> Self {
        let why = shoal_policy::undo::irreversible(effects, undo);
        Reversibility {
            reversibility: if why.is_empty() {
                "reversible"
            } else {
                "irreversible"
            },
            irreversible: why,
            undo: (!undo.trashed.is_empty()).then(|| UndoOut {
                trash: undo.trash_dir.clone(),
                paths: undo.trashed.clone(),
                how: shoal_policy::undo::HOW,
            }),
        }
    }
}

/// `explain`: the effects and the verdict; nothing is stored or run.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct Explained {
    #[schemars(schema_with = "effects")]
    pub effects: Json,
    #[serde(flatten)]
    pub reversible: Reversibility,
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub principal: String,
    pub caps_enforced: bool,
}

/// A plan (`exec mode:"plan"`, `shoal_plan`, `plan.list` rows, the
/// standing `plan.approve`/`plan.deny` answer), with its source and times
/// for `plan.get`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PlanResult {
    pub plan_ref: String,
    #[schemars(schema_with = "effects")]
    pub effects: Json,
    pub verdict: Verdict,
    pub approval_pending: bool,
    pub approved: bool,
    pub approval: &'static str,
    /// The channel that approved it (`policy` when the owner's grants did)
    pub approved_via: Option<&'static str>,
    pub reason: Option<String>,
    pub session: String,
    pub principal: String,
    /// The session's cwd when it was planned: it applies only there (and only
    /// while the session's environment is as it was).
    pub cwd: String,
    pub expires: String,
    #[serde(flatten)]
    pub reversible: Reversibility,
    /// `plan.get`: the source, its syntax tree (none on this wire) and when it was made
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<PlanDetail>,
}

/// What `plan.get` adds to a plan.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
pub struct PlanDetail {
    pub src: String,
    /// The files the source names (programs, scripts), bound by content:
    /// the plan does not apply once one changed.
    pub files: Vec<String>,
    #[schemars(schema_with = "no_ast")]
    pub ast: Option<Json>,
    pub ast_version: u64,
    pub created: String,
}

impl PlanResult {
    /// A plan as the wire shows it.
    pub fn of(p: &shoal_policy::plan::Plan) -> Self {
        use shoal_policy::plan::{rfc3339, Approval};
        PlanResult {
            plan_ref: p.plan_ref.clone(),
            effects: p.effects_json(),
            verdict: p.verdict.into(),
            approval_pending: p.approval_pending(),
            approved: p.approval == Approval::Approved,
            approval: p.approval.as_str(),
            approved_via: p.approved_via,
            reason: p.reason.clone(),
            session: p.session.clone(),
            principal: p.principal.clone(),
            cwd: p.place.cwd_text(),
            expires: rfc3339(p.expires_ns),
            reversible: Reversibility::of(&p.effects, &p.undo),
            detail: None,
        }
    }

    /// `plan.get`: the plan with its source.
    pub fn detail(p: &shoal_policy::plan::Plan) -> Self {
        PlanResult {
            detail: Some(PlanDetail {
                src: p.src.clone(),
                files: p.place.file_texts(),
                ast: None,
                ast_version: 2,
                created: shoal_policy::plan::rfc3339(p.created_ns),
            }),
            ..PlanResult::of(p)
        }
    }
}
