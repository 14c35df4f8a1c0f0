//! The Leash tools (`shoal_plan`, `shoal_apply`, `shoal_cap_request`):
//! schemas and argument validation. Each output schema also accepts the
//! error shape.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use super::mcp::{check_args, output_schema};

fn plan_output() -> Json {
    output_schema(
        json!({
            "plan_ref": {"type": "string", "description": "plan:<16 hex>, bound to this session and principal"},
            "effects": {"type": "array", "items": {"type": "object"}, "description": "[{kind, ...}] as reference §7.1"},
            "reversibility": {"enum": ["reversible", "irreversible"]},
            "verdict": {"enum": ["allow", "deny", "approval_required"]},
            "approval_pending": {"type": "boolean"},
            "approved": {"type": "boolean"},
            "approval": {"enum": ["pending", "approved", "denied"]},
            "reason": {"type": ["string", "null"]},
            "session": {"type": "string"},
            "principal": {"type": "string"},
            "expires": {"type": "string", "description": "RFC 3339; the plan answers -32012 after it"},
        }),
        &[
            "plan_ref",
            "effects",
            "reversibility",
            "verdict",
            "approval_pending",
            "expires",
        ],
    )
}

struct Def {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: Json,
    output: Json,
    read_only: bool,
    destructive: bool,
}

fn defs() -> Vec<Def> {
    vec![
        Def {
            name: "shoal_plan",
            title: "Plan Shoal source",
            description: "Derive the effects of Shoal source without running it, check them \
against this principal's policy and store the plan: returns plan_ref, effects, reversibility, \
verdict (allow | deny | approval_required) and expires. Apply it with shoal_apply.",
            input: json!({
                "type": "object",
                "properties": {"src": {"type": "string", "description": "Shoal source"}},
                "required": ["src"],
                "additionalProperties": false,
            }),
            output: plan_output(),
            read_only: true,
            destructive: false,
        },
        Def {
            name: "shoal_apply",
            title: "Apply a plan",
            description: "Run a stored plan of this session and principal once it is allowed or \
approved; the result is that of shoal_exec. -32011 while approval is pending, -32012 when \
unknown or expired.",
            input: json!({
                "type": "object",
                "properties": {
                    "plan_ref": {"type": "string"},
                    "elide": {"type": "object"},
                },
                "required": ["plan_ref"],
                "additionalProperties": false,
            }),
            output: super::mcp::exec_output_schema(),
            read_only: false,
            destructive: true,
        },
        Def {
            name: "shoal_cap_request",
            title: "Request approval of a plan",
            description: "Ask for a plan's approval. Effects this principal's policy grants are \
approved; the rest wait for the user (shoal plan approve, or an elicitation in the client), and \
uncovered_effects lists them. effects (kinds, e.g. \"fs.write\") narrows the request; empty \
requests all.",
            input: json!({
                "type": "object",
                "properties": {
                    "plan_ref": {"type": "string"},
                    "effects": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["plan_ref"],
                "additionalProperties": false,
            }),
            output: output_schema(
                json!({
                    "grant": {"enum": ["approved", "approval_pending"]},
                    "plan_ref": {"type": "string"},
                    "why": {"type": "string"},
                    "uncovered_effects": {"type": "array", "items": {"type": "string"}},
                    "granted_effects": {"type": "array", "items": {"type": "string"}},
                    "enforced": {"type": "boolean"},
                    "expires": {"type": "string"},
                }),
                &["grant", "plan_ref"],
            ),
            read_only: false,
            destructive: false,
        },
    ]
}

pub fn tools() -> Vec<Json> {
    defs()
        .into_iter()
        .map(|t| {
            json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": t.input,
                "outputSchema": t.output,
                "annotations": {"readOnlyHint": t.read_only, "destructiveHint": t.destructive, "openWorldHint": true},
            })
        })
        .collect()
}

fn validators() -> &'static Vec<(&'static str, jsonschema::Validator)> {
    static V: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    V.get_or_init(|| {
        defs()
            .into_iter()
            .map(|t| {
                (
                    t.name,
                    jsonschema::validator_for(&t.input).expect("leash tool schema compiles"),
                )
            })
            .collect()
    })
}

pub fn is_leash_tool(name: &str) -> bool {
    matches!(name, "shoal_plan" | "shoal_apply" | "shoal_cap_request")
}

/// Validate a Leash tool's arguments (the isError structured content on failure).
pub fn validate_args(tool: &str, args: &Json) -> Result<(), Json> {
    match validators().iter().find(|(n, _)| *n == tool) {
        Some((_, v)) => check_args(v, tool, args),
        None => Ok(()),
    }
}
