//! The Leash tools (`shoal_plan`, `shoal_apply`, `shoal_cap_request`):
//! schemas and argument validation. Each output schema also accepts the
//! error shape.

use std::sync::OnceLock;

use serde_json::{json, Value as Json};

use super::mcp::{check_args, output_schema};

fn plan_output() -> Json {
    output_schema(
        json!({
            "plan_ref": {"type": "string"},
            "effects": {"type": "array"},
            "verdict": {"enum": ["allow", "deny", "approval_required"]},
            "expires": {"type": "string"},
        }),
        &["plan_ref", "effects", "verdict", "expires"],
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
            description:
                "Plan source without running it: effects, reversibility, verdict, plan_ref.",
            input: json!({
                "type": "object",
                "properties": {"src": {"type": "string"}},
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
            description: "Run an allowed or approved plan (result as shoal_exec).",
            input: json!({
                "type": "object",
                "properties": {
                    "plan_ref": {"type": "string"},
                    "elide": {"type": "object"},
                },
                "required": ["plan_ref"],
                "additionalProperties": false,
            }),
            output: output_schema(
                json!({"ref": {"type": "string"}, "value": {"type": "object"}}),
                &["ref", "value"],
            ),
            read_only: false,
            destructive: true,
        },
        Def {
            name: "shoal_cap_request",
            title: "Request approval of a plan",
            description: "Request a plan's approval; uncovered_effects await the user (asked in the client when it supports elicitation).",
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
                json!({"grant": {"enum": ["approved", "approval_pending", "denied"]}, "plan_ref": {"type": "string"}}),
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
