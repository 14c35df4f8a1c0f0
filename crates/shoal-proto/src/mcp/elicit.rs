//! The MCP shapes of asking the user (elicitation, form mode), as shoal
//! asks for a plan's approval: the `elicitation/create` params it sends,
//! the answer it reads, and the 2026-07-28 multi round-trip (an
//! `InputRequiredResult` carrying the request; the retry's
//! `requestState` and `inputResponses`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// `elicitation/create` params in form mode: a message and the form.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitForm {
    pub mode: &'static str,
    pub message: String,
    pub requested_schema: ApprovalForm,
}

impl ElicitForm {
    /// The form asking whether to run plan `plan_ref`, under `message`.
    pub fn approval(message: String, plan_ref: &str) -> ElicitForm {
        ElicitForm {
            mode: "form",
            message,
            requested_schema: ApprovalForm {
                kind: "object",
                properties: ApprovalFields {
                    approve: BooleanField {
                        kind: "boolean",
                        title: "Approve this plan",
                        description: format!("Run plan {plan_ref} as shown"),
                        default: false,
                    },
                },
                required: ["approve"],
            },
        }
    }
}

/// The form's schema: one required yes/no, `approve`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalForm {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub properties: ApprovalFields,
    pub required: [&'static str; 1],
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalFields {
    pub approve: BooleanField,
}

/// A boolean field of a form (elicitation's primitive schema).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BooleanField {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: &'static str,
    pub description: String,
    pub default: bool,
}

/// What the user did with the form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// An `elicitation/create` result as the client sends it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ElicitAnswer {
    pub action: ElicitAction,
    /// The form's values (with `accept`).
    #[serde(default)]
    pub content: Option<serde_json::Map<String, Json>>,
}

impl ElicitAnswer {
    /// `accept` with `approve: true` (a boolean, nothing else).
    pub fn approves(&self) -> bool {
        self.action == ElicitAction::Accept
            && self
                .content
                .as_ref()
                .and_then(|c| c.get("approve"))
                .is_some_and(|a| a == &Json::Bool(true))
    }
}

/// A 2026-07-28 `InputRequiredResult`: the requests the client is to answer
/// (by key) and the state its retry echoes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequired<P> {
    pub result_type: &'static str,
    pub input_requests: BTreeMap<&'static str, InputRequest<P>>,
    pub request_state: String,
}

impl<P> InputRequired<P> {
    /// One request, `method` with `params`, under `key`.
    pub fn one(key: &'static str, method: &'static str, params: P, state: String) -> Self {
        InputRequired {
            result_type: "input_required",
            input_requests: BTreeMap::from([(key, InputRequest { method, params })]),
            request_state: state,
        }
    }
}

/// One request of an [`InputRequired`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputRequest<P> {
    pub method: &'static str,
    pub params: P,
}

/// A 2026-07-28 retry's members: the state it was given and the answers
/// it brings, by key.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    #[serde(default)]
    pub request_state: Option<String>,
    /// As sent (an answer is read by key; anything else carries none).
    #[serde(default)]
    pub input_responses: Option<Json>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_form_and_the_round_are_the_specifications_shapes() {
        let f = ElicitForm::approval("Run it?".into(), "plan:1");
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"mode": "form", "message": "Run it?", "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve this plan",
                    "description": "Run plan plan:1 as shown", "default": false}},
                "required": ["approve"]}})
        );
        let r = InputRequired::one("k", "elicitation/create", json!({}), "s".into());
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"resultType": "input_required",
                "inputRequests": {"k": {"method": "elicitation/create", "params": {}}},
                "requestState": "s"})
        );
    }

    #[test]
    fn only_an_accept_with_approve_true_approves() {
        let a = |j| serde_json::from_value::<ElicitAnswer>(j);
        assert!(a(json!({"action": "accept", "content": {"approve": true}}))
            .unwrap()
            .approves());
        assert!(
            !a(json!({"action": "accept", "content": {"approve": "true"}}))
                .unwrap()
                .approves()
        );
        assert!(!a(json!({"action": "accept"})).unwrap().approves());
        assert!(
            !a(json!({"action": "decline", "content": {"approve": true}}))
                .unwrap()
                .approves()
        );
        assert!(a(json!({"action": "maybe"})).is_err());
    }
}
