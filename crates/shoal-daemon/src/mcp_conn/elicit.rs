//! `shoal_cap_request` asking the user in the MCP client (docs/rules.md §21): when
//! the caller's policy leaves effects to a human and the client declared the
//! elicitation capability (form mode), the user is asked with a form naming
//! the plan, its source and the pending effects.
//!
//! - 2025 handshake era: a server-to-client `elicitation/create` request on
//!   this connection. Ids come from this connection's own space
//!   (`shoal-elicit-N`); the client's response is routed back by id to the
//!   waiting call. The wait is bounded by [`ELICIT_TIMEOUT`] and ends early
//!   when the call is cancelled, the client hangs up or half-closes (then
//!   the client is told with `notifications/cancelled`).
//! - 2026-07-28: server-initiated requests are not allowed; the call answers
//!   an `InputRequiredResult` (multi round-trip requests) carrying the same
//!   `elicitation/create`, and the client's retry brings the answer with the
//!   `requestState` it was given (single use, bound to the plan and this
//!   connection, expiring after [`ELICIT_TIMEOUT`]).
//!
//! The answer: `accept` with `approve: true` approves the plan as
//! `shoal plan approve` does; `decline` (or `accept` without `approve`)
//! denies it as `shoal plan deny` does, since the user said no; `cancel`,
//! an error, a timeout or a hang-up leave it pending for `shoal plan
//! approve|deny`. Either decision is an `approval` event and a `journal`
//! record naming the user and the client. A client without the capability
//! gets the pending result as before.
//!
//! The client that asks is the agent's own, so its answer counts as a
//! human's only when the plan owner's policy says so: `approve_via` must
//! list `elicitation` (a token principal's default is the CLI alone).
//! Otherwise nobody is asked and the pending result says how to approve
//! (`shoal plan approve REF`); the plan store refuses such an answer too.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::fut::ready;
use actix::prelude::*;
use serde::Serialize;
use serde_json::{json, Value as Json};
use tokio::sync::oneshot;

use super::{ConnEra, McpConn, ToolReply};
use crate::leash_calls;
use crate::sessions::handle::SessionHandle;
use crate::sessions::plan_store::PlanOp;
use crate::sessions::session::CallCancel;
use shoal_policy::policy::ApproveVia;
use shoal_policy::Gate;
use shoal_proto::frame::Frame;
use shoal_proto::kernel::PlanResult;
use shoal_proto::mcp::elicit;
use shoal_proto::mcp::notify;
use shoal_proto::mcp::{
    self, CapDecided, CapRequestResult, Elicitation, Grant, InitializeParams, McpResult, PlanAnswer,
};
use shoal_proto::mcp_era;
use shoal_proto::rpc::{self, RpcError};

/// How long the user has to answer.
pub const ELICIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Elicitations one connection may have outstanding (requests in flight,
/// or 2026 rounds issued and not yet answered).
pub const MAX_OUTSTANDING: usize = 16;
/// The key of the approval in an `InputRequiredResult`.
const INPUT_KEY: &str = "shoal_approval";
/// Source shown to the user, at most (bytes).
const MAX_SRC: usize = 2000;

type Answer = Result<Json, RpcError>;

/// A connection's elicitation state.
#[derive(Default)]
pub(super) struct Elicit {
    /// `initialize` declared `capabilities.elicitation` with form mode.
    form: bool,
    /// `clientInfo.name` from `initialize` (for the record).
    client: Option<String>,
    next: u64,
    /// Our requests awaiting the client's response, by id key.
    waiting: HashMap<String, oneshot::Sender<Answer>>,
    /// 2026 rounds issued: `requestState` → (plan_ref, when).
    rounds: HashMap<String, (String, Instant)>,
}

/// Does a capabilities object offer form elicitation? (`{}` is form only,
/// as before 2025-11-25 named the modes.)
fn offers_form(caps: Option<&Json>) -> bool {
    offers_form_mode(caps.and_then(|c| c.get("elicitation")))
}

/// Whether a client's `elicitation` capability offers forms (`{}` is forms).
fn offers_form_mode(elicitation: Option<&Json>) -> bool {
    match elicitation {
        Some(Json::Object(o)) => o.is_empty() || o.contains_key("form"),
        _ => false,
    }
}

impl Elicit {
    /// `initialize` params: what the client declared.
    pub(super) fn initialized(&mut self, params: &InitializeParams) {
        self.form = offers_form_mode(params.capabilities.elicitation.as_ref());
        self.client = params
            .client_info
            .as_ref()
            .and_then(|c| c.name.as_deref())
            .map(|s| s.chars().take(64).collect());
    }

    /// A frame that answers one of our requests goes to its waiter (`true`:
    /// consumed). Frames are only parsed twice while a request is out.
    pub(super) fn take_response(&mut self, item: &io::Result<Frame>) -> bool {
        if self.waiting.is_empty() {
            return false;
        }
        let Ok(Frame::Line(bytes)) = item else {
            return false;
        };
        let Some((id, answer)) = rpc::response_of(bytes) else {
            return false;
        };
        match self.waiting.remove(&id.to_string()) {
            Some(tx) => {
                let _ = tx.send(answer);
                true
            }
            // A late answer (timed out, cancelled): never replied to.
            None => true,
        }
    }

    /// The client stopped sending: no answer can come any more.
    pub(super) fn abandon(&mut self) {
        self.waiting.clear();
    }

    fn outstanding(&mut self) -> usize {
        let now = Instant::now();
        self.rounds
            .retain(|_, (_, at)| now.duration_since(*at) < ELICIT_TIMEOUT);
        self.waiting.len() + self.rounds.len()
    }

    fn via(&self, modern_client: Option<&str>) -> String {
        let client = modern_client
            .or(self.client.as_deref())
            .unwrap_or("an MCP client");
        format!("MCP elicitation/create via {client}")
    }
}

/// A 2026 retry: the `requestState` it echoes and the answer it carries.
struct Retry {
    state: String,
    answer: Option<Json>,
}

fn retry_of(params: &Json) -> Option<Retry> {
    let r = serde_json::from_value::<elicit::Retry>(params.clone()).ok()?;
    Some(Retry {
        state: r.request_state?,
        answer: r.input_responses.and_then(|a| a.get(INPUT_KEY).cloned()),
    })
}

/// What the user said.
#[derive(Debug, PartialEq)]
enum Outcome {
    Approve,
    Deny(&'static str),
    /// Still pending: why.
    Open(String),
}

fn outcome_of(answer: Answer) -> Outcome {
    let r = match answer {
        Ok(r) => r,
        Err(e) => return Outcome::Open(format!("the client answered an error: {}", e.message)),
    };
    let Ok(a) = serde_json::from_value::<elicit::ElicitAnswer>(r) else {
        return Outcome::Open("the client's answer has no valid action".into());
    };
    match a.action {
        _ if a.approves() => Outcome::Approve,
        elicit::ElicitAction::Accept => {
            Outcome::Deny("the user submitted the form without approving")
        }
        elicit::ElicitAction::Decline => Outcome::Deny("the user declined"),
        elicit::ElicitAction::Cancel => Outcome::Open("the user dismissed the request".into()),
    }
}

/// The `elicitation/create` params for a pending plan (`plan.get`'s answer).
fn ask_params(plan: &PlanResult, pending: &[String]) -> elicit::ElicitForm {
    let mut src = plan
        .detail
        .as_ref()
        .map_or("", |d| d.src.as_str())
        .to_string();
    if src.len() > MAX_SRC {
        let mut cut = MAX_SRC;
        while !src.is_char_boundary(cut) {
            cut -= 1;
        }
        src.truncate(cut);
        src.push_str(" …");
    }
    let kinds: Vec<&str> = pending.iter().map(String::as_str).collect();
    let effects = plan.effects.to_string();
    let mut effects_shown: String = effects.chars().take(MAX_SRC).collect();
    if effects_shown.len() < effects.len() {
        effects_shown.push_str(" …");
    }
    let message = format!(
        "Shoal: {principal} asks to run plan {plan} in session {session}.\n\n\
         In directory: {cwd}\n\n\
         Source:\n{src}\n\n\
         Needs your approval: {pending}\n\
         All effects: {effects_shown}\n\n\
         Approve to let it run once as planned (its filesystem grants still apply).",
        principal = plan.principal,
        plan = plan.plan_ref,
        session = plan.session,
        cwd = plan.cwd,
        pending = kinds.join(", "),
    );
    elicit::ElicitForm::approval(message, &plan.plan_ref)
}

/// Record the user's decision and build the tool result.
async fn settle(
    h: SessionHandle,
    gate: Arc<Gate>,
    plan_ref: String,
    mut pending: CapRequestResult,
    outcome: Outcome,
    via: String,
) -> Result<CapAnswer, RpcError> {
    let decide = |approve: bool| PlanOp::Elicited {
        plan_ref: plan_ref.clone(),
        approve,
        via: via.clone(),
    };
    let (grant, action, why, expires) = match outcome {
        Outcome::Approve => {
            let p = leash_calls::plan_op(h, gate.clone(), decide(true)).await?;
            (Grant::Approved, "accept", None, expires(p))
        }
        Outcome::Deny(why) => {
            let p = leash_calls::plan_op(h, gate.clone(), decide(false)).await?;
            (Grant::Denied, "decline", Some(why.to_string()), expires(p))
        }
        Outcome::Open(why) => {
            pending.elicitation = Some(Elicitation {
                asked: true,
                outcome: Some("pending".into()),
                why: Some(why),
                ..Elicitation::default()
            });
            return Ok(CapAnswer::Request(Box::new(pending)));
        }
    };
    Ok(CapAnswer::Decided(Box::new(CapDecided {
        grant,
        plan_ref,
        enforced: gate.caps_enforced(),
        elicitation: Elicitation {
            asked: true,
            outcome: Some(action.into()),
            by: Some("user".into()),
            via: Some(via),
            why: None,
        },
        uncovered_effects: (grant == Grant::Denied).then(Vec::new),
        why,
        expires,
    })))
}

/// When the decided plan expires.
fn expires(answer: PlanAnswer) -> Option<String> {
    match answer {
        PlanAnswer::Plan(p) => Some(p.expires),
        PlanAnswer::Grant(g) => g.expires,
        PlanAnswer::Plans(_) => None,
    }
}

/// Wait for the client's answer: bounded, and ended by the call's own
/// cancellation or the connection's end (the sender dropped).
async fn wait(rx: oneshot::Receiver<Answer>, cancel: Arc<CallCancel>) -> Result<Answer, String> {
    let deadline = tokio::time::sleep(ELICIT_TIMEOUT);
    tokio::pin!(deadline);
    tokio::pin!(rx);
    loop {
        if cancel.is_cancelled() {
            return Err("the call was cancelled".into());
        }
        tokio::select! {
            r = &mut rx => return r.map_err(|_| "the client closed the connection".to_string()),
            _ = &mut deadline => return Err(format!("no answer within {}s", ELICIT_TIMEOUT.as_secs())),
            _ = cancel.wake.notified() => {}
        }
    }
}

/// After `cap.request`: what to do next.
enum Step {
    Done(Result<CapAnswer, RpcError>),
    /// The plan awaits a human: ask.
    Ask(Box<Asking>),
}

/// A plan to ask about (`pending` is the cap.request reply).
struct Asking {
    h: SessionHandle,
    gate: Arc<Gate>,
    plan_ref: String,
    pending: CapRequestResult,
    /// The plan with its source (`plan.get`).
    detail: Box<PlanResult>,
}

/// What `shoal_cap_request` answers: the request's grant, or the user's decision.
#[derive(Serialize)]
#[serde(untagged)]
enum CapAnswer {
    Request(Box<CapRequestResult>),
    Decided(Box<CapDecided>),
}

impl mcp::ToolOutput for CapAnswer {}

fn tool_result(r: Result<CapAnswer, RpcError>) -> Result<McpResult, RpcError> {
    Ok(mcp::tool_answer(r).into())
}

impl McpConn {
    /// `initialize`: remember whether the client can be asked.
    pub(super) fn elicit_initialized(&mut self, params: &InitializeParams) {
        self.elicit.initialized(params);
        self.client_label = match &self.elicit.client {
            Some(name) => format!("mcp: {name}").into(),
            None => "mcp".into(),
        };
    }

    /// `tools/call` of `shoal_cap_request` (`params`: the whole call's, for
    /// the 2026 envelope and retries).
    pub(super) fn tool_cap_request(
        &mut self,
        args: shoal_proto::mcp::CapRequestArgs,
        params: &Json,
        cancel: Arc<CallCancel>,
    ) -> ToolReply {
        let modern = self.era == Some(ConnEra::Modern);
        let meta = params.get("_meta");
        let can_ask = if modern {
            offers_form(meta.and_then(|m| m.get(mcp_era::CLIENT_CAPABILITIES_KEY)))
        } else {
            self.elicit.form
        };
        let modern_client = meta
            .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
            .and_then(|c| c.get("name"))
            .and_then(Json::as_str)
            .map(|s| s.chars().take(64).collect::<String>());
        let retry = if modern { retry_of(params) } else { None };
        let (plan_ref, kinds) = match leash_calls::cap_request_params(
            &args.plan_ref,
            args.effects.iter().flatten().map(String::as_str),
        ) {
            Ok(x) => x,
            Err(e) => return Box::pin(ready(tool_result(Err(e)))),
        };
        Box::pin(self.session().then(move |h, act, _ctx| -> ToolReply {
            let (h, gate) = match (h, act.gate.clone()) {
                (Err(e), _) => return Box::pin(ready(tool_result(Err(e)))),
                (Ok(_), None) => {
                    return Box::pin(ready(tool_result(Err(RpcError::internal(
                        "attached without a principal",
                    )))))
                }
                (Ok(h), Some(g)) => (h, g),
            };
            // A 2026 retry must bring back a round this connection issued
            // for this very plan; the round is used up either way.
            let retry = match retry {
                Some(r) => match act.elicit.rounds.remove(&r.state) {
                    Some((p, at)) if p == plan_ref && at.elapsed() < ELICIT_TIMEOUT => Some(r),
                    _ => {
                        return Box::pin(ready(tool_result(Err(RpcError::invalid_params(
                            "requestState does not name an open approval round of this plan on this connection",
                        )
                        .with_data(json!({"plan_ref": plan_ref}))))))
                    }
                },
                None => None,
            };
            let via = act.elicit.via(modern_client.as_deref());
            let fut = async move {
                let op = PlanOp::Request {
                    plan_ref: plan_ref.clone(),
                    kinds,
                };
                let mut pending = match leash_calls::cap_request(h.clone(), gate.clone(), op).await {
                    Ok(g) => g,
                    Err(e) => return Step::Done(Err(e)),
                };
                if pending.awaiting.as_deref() != Some("human") {
                    return Step::Done(Ok(CapAnswer::Request(Box::new(pending))));
                }
                let channels = shoal_policy::plan::approve_channels(&gate.principal);
                if !channels.contains(&ApproveVia::Elicitation) {
                    pending.elicitation = Some(Elicitation {
                        asked: false,
                        why: Some(format!(
                            "the policy of {} takes approvals on {} only (approve_via): approve with `shoal plan approve {plan_ref}`",
                            gate.principal,
                            shoal_policy::plan::channel_names(&channels).join(", ")
                        )),
                        ..Elicitation::default()
                    });
                    return Step::Done(Ok(CapAnswer::Request(Box::new(pending))));
                }
                if let Some(r) = retry {
                    let outcome = match r.answer {
                        Some(a) => outcome_of(Ok(a)),
                        None => Outcome::Open("the retry carried no answer".into()),
                    };
                    return Step::Done(settle(h, gate, plan_ref, pending, outcome, via).await);
                }
                if !can_ask {
                    return Step::Done(Ok(CapAnswer::Request(Box::new(pending))));
                }
                match leash_calls::plan_op(h.clone(), gate.clone(), PlanOp::Get(plan_ref.clone())).await {
                    Ok(PlanAnswer::Plan(detail)) => Step::Ask(Box::new(Asking {
                        h,
                        gate,
                        plan_ref,
                        pending,
                        detail,
                    })),
                    Ok(_) => Step::Done(Err(RpcError::internal("unexpected plan store reply"))),
                    Err(e) => Step::Done(Err(e)),
                }
            };
            Box::pin(fut.into_actor(act).then(move |step, act, ctx| -> ToolReply {
                match step {
                    Step::Done(r) => Box::pin(ready(tool_result(r))),
                    Step::Ask(a) => act.ask(*a, modern, cancel, ctx),
                }
            }))
        }))
    }

    /// Ask the user about a pending plan (see the module doc).
    fn ask(
        &mut self,
        a: Asking,
        modern: bool,
        cancel: Arc<CallCancel>,
        ctx: &mut Context<Self>,
    ) -> ToolReply {
        let Asking {
            h,
            gate,
            plan_ref,
            mut pending,
            detail,
        } = a;
        if self.elicit.outstanding() >= MAX_OUTSTANDING {
            pending.elicitation = Some(Elicitation {
                asked: false,
                why: Some(format!(
                    "{MAX_OUTSTANDING} approval requests are already open on this connection"
                )),
                ..Elicitation::default()
            });
            return Box::pin(ready(tool_result(Ok(CapAnswer::Request(Box::new(
                pending,
            ))))));
        }
        let params = ask_params(&detail, pending.uncovered_effects.as_deref().unwrap_or(&[]));
        if modern {
            let state = format!("shoal-approval:{}", uuid::Uuid::now_v7().simple());
            self.elicit
                .rounds
                .insert(state.clone(), (plan_ref, Instant::now()));
            let round = elicit::InputRequired::one(INPUT_KEY, "elicitation/create", params, state);
            return Box::pin(ready(rpc::to_result(&round).map(McpResult::Json)));
        }
        self.elicit.next += 1;
        let id = Json::String(format!("shoal-elicit-{}", self.elicit.next));
        let key = id.to_string();
        let (tx, rx) = oneshot::channel();
        self.elicit.waiting.insert(key.clone(), tx);
        let frame = notify::request(&id, "elicitation/create", params);
        crate::peer::write_frame(&self.tx, ctx, frame);
        tracing::info!(conn = self.cx.id, plan = %plan_ref, "asking the user to approve a plan (elicitation/create)");
        let via = self.elicit.via(None);
        Box::pin(
            wait(rx, cancel)
                .into_actor(self)
                .then(move |answer, act, ctx| -> ToolReply {
                    let outcome = match answer {
                        Ok(a) => outcome_of(a),
                        Err(why) => {
                            // Our request is over: tell the client, if it still listens.
                            if act.elicit.waiting.remove(&key).is_some() {
                                let note = notify::cancelled(&notify::Cancelled {
                                    request_id: &id,
                                    reason: &why,
                                });
                                crate::peer::write_frame(&act.tx, ctx, note);
                            }
                            Outcome::Open(why)
                        }
                    };
                    Box::pin(
                        async move {
                            tool_result(settle(h, gate, plan_ref, pending, outcome, via).await)
                        }
                        .into_actor(act),
                    )
                }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_and_answers() {
        assert!(offers_form(Some(&json!({"elicitation": {}}))));
        assert!(offers_form(Some(
            &json!({"elicitation": {"form": {}, "url": {}}})
        )));
        assert!(!offers_form(Some(&json!({"elicitation": {"url": {}}}))));
        assert!(!offers_form(Some(&json!({"sampling": {}}))));
        assert!(!offers_form(None));
        let yes = json!({"action": "accept", "content": {"approve": true}});
        assert_eq!(outcome_of(Ok(yes)), Outcome::Approve);
        let no = json!({"action": "accept", "content": {"approve": false}});
        assert!(matches!(outcome_of(Ok(no)), Outcome::Deny(_)));
        assert!(matches!(
            outcome_of(Ok(json!({"action": "decline"}))),
            Outcome::Deny(_)
        ));
        assert!(matches!(
            outcome_of(Ok(json!({"action": "cancel"}))),
            Outcome::Open(_)
        ));
        assert!(matches!(
            outcome_of(Err(RpcError::internal("x"))),
            Outcome::Open(_)
        ));
        use shoal_proto::kernel::{PlanDetail, Reversibility, Verdict};
        let plan = PlanResult {
            plan_ref: "plan:1".into(),
            effects: json!([{"kind": "opaque"}]),
            verdict: Verdict::ApprovalRequired,
            approval_pending: true,
            approved: false,
            approval: "pending",
            approved_via: None,
            reason: None,
            session: "s".into(),
            principal: "agent:a".into(),
            cwd: "/usr/bin".into(),
            expires: "2026-01-01T00:00:00Z".into(),
            reversible: Reversibility {
                reversibility: "irreversible",
                irreversible: vec![],
                undo: None,
            },
            detail: Some(PlanDetail {
                src: "sh { x }".repeat(500),
                files: vec![],
                ast: None,
                ast_version: 1,
                created: "2026-01-01T00:00:00Z".into(),
            }),
        };
        let p = serde_json::to_value(ask_params(&plan, &["opaque".to_string()])).unwrap();
        let m = p["message"].as_str().unwrap();
        assert!(
            m.contains("plan:1")
                && m.contains("agent:a")
                && m.contains("Needs your approval: opaque")
                && m.contains("In directory: /usr/bin")
        );
        assert!(m.len() < 2 * MAX_SRC + 600, "{}", m.len());
        assert_eq!(
            p["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
    }
}
