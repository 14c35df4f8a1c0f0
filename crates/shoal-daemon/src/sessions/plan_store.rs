//! PlanStore: one per session, a child of its SessionSupervisor. Holds the
//! session's plans (docs/rules.md §21): each bound to its owner (the ref hashes
//! session, principal, source and effects), expiring after `plans.ttl`,
//! approved by `cap.request` within the owner's policy (never under
//! `auto_apply = "never"`) or by a human on a channel the owner's
//! `approve_via` lists, and applied once. Every change of a plan's standing
//! is an `approval` event.

use std::collections::HashMap;

use actix::prelude::*;

use crate::event_bus::BusHandle;
use crate::health::Registration;
use crate::sessions::supervisor::SessionSupervisor;
use shoal_policy::plan::{approve_channels, auto_apply_of, channel_names, Approval, Plan};
use shoal_policy::policy::{ApproveVia, AutoApply};
use shoal_policy::{effect, Verdict};
use shoal_proto::kernel::PlanResult;
use shoal_proto::mcp::{CapRequestResult, Grant};
use shoal_proto::rpc::{self, RpcError, APPROVAL_REQUIRED, LEASH_DENIED, UNKNOWN_PLAN};
use shoal_proto::wire;
use shoal_value::{Record, Value};

/// Plans a session keeps at most (the oldest go first).
const MAX_PLANS: usize = 1024;

pub struct PlanStore {
    plans: HashMap<String, Plan>,
    bus: Option<BusHandle>,
    reg: Registration,
    /// Tells the supervisor when this actor stops (dropped with it).
    _exit: Option<crate::sessions::supervisor::ExitNotice>,
}

/// Who asks.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: String,
}

impl Caller {
    /// The local uid: the human at this machine, who approves and denies.
    pub fn is_human(&self) -> bool {
        self.principal == shoal_policy::runtime().local
    }
}

#[derive(Clone, Debug)]
pub enum PlanOp {
    /// Store a fresh plan (or refresh the same owner's identical one).
    Put(Box<Plan>),
    Get(String),
    List,
    /// `cap.request`: approve what the owner's policy grants.
    Request {
        plan_ref: String,
        kinds: Vec<String>,
    },
    /// `plan.approve` (the human, on channel `via`: the CLI or another
    /// attached local client).
    Approve {
        plan_ref: String,
        via: ApproveVia,
    },
    /// `plan.deny` (the human, on any channel).
    Deny {
        plan_ref: String,
        via: ApproveVia,
    },
    /// `plan.apply`: the plan, if it may run now (and then it is used up).
    /// With `src` (`exec mode:"approved"`), only if it is the plan's source.
    Apply {
        plan_ref: String,
        src: Option<String>,
    },
    /// The user's answer to an MCP elicitation about the caller's own
    /// pending plan (docs/rules.md §21): a human decision, recorded with how it
    /// was made.
    Elicited {
        plan_ref: String,
        approve: bool,
        /// How the user was asked (`MCP elicitation/create via CLIENT`).
        via: String,
    },
}

/// A plan request for the session's PlanStore (through its supervisor).
#[derive(Message)]
#[rtype(result = "Result<PlanReply, RpcError>")]
pub struct PlanCall {
    pub caller: Caller,
    pub op: PlanOp,
}

#[derive(Debug)]
pub enum PlanReply {
    /// A plan as the wire shows it (`Put`, `Get`, `Approve`, `Deny`).
    Plan(Box<PlanResult>),
    /// `List`: the caller's plans, oldest first.
    Plans(Vec<PlanResult>),
    /// `Request`: the grant.
    Grant(Box<CapRequestResult>),
    /// `Apply`: the plan to run.
    Run(Box<Plan>),
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn unknown(plan_ref: &str) -> RpcError {
    RpcError::new(UNKNOWN_PLAN, "unknown or expired plan_ref").with_data_of(&PlanData::of(plan_ref))
}

/// A plan a human denied, or one already applied, takes no further step
/// (request, approval or apply).
fn still_open(approval: Approval, plan_ref: &str) -> Result<(), RpcError> {
    match approval {
        Approval::Denied => Err(RpcError::new(LEASH_DENIED, "a human denied this plan")
            .with_data_of(&PlanData::of(plan_ref))),
        Approval::Applied => Err(already_applied(plan_ref)),
        _ => Ok(()),
    }
}

fn already_applied(plan_ref: &str) -> RpcError {
    RpcError::new(
        APPROVAL_REQUIRED,
        format!("plan {plan_ref} was already applied: a plan applies once; plan the source again (a new plan needs its own approval)"),
    )
    .with_data_of(&PlanData {
        applied: true,
        ..PlanData::of(plan_ref)
    })
}

/// The `data` of a refusal about a plan: the plan, and what else the
/// refusal names.
#[derive(serde::Serialize)]
struct PlanData<'a> {
    plan_ref: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    applied: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    approval_pending: bool,
    /// The channels its owner's policy takes human approvals on.
    #[serde(skip_serializing_if = "Option::is_none")]
    approve_via: Option<Vec<&'static str>>,
}

impl PlanData<'_> {
    fn of(plan_ref: &str) -> PlanData<'_> {
        PlanData {
            plan_ref,
            applied: false,
            approval_pending: false,
            approve_via: None,
        }
    }
}

/// An `approval` event: the plan as the wire shows it, what happened, its
/// source as a human deciding from `shoal attach` / `shoal watch` reads it,
/// and, for a human's decision, who decided and how.
#[derive(serde::Serialize)]
struct ApprovalEvent<'a> {
    #[serde(flatten)]
    plan: PlanResult,
    event: &'a str,
    src: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    via: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<&'static str>,
}

/// How a human decision on `via` is recorded (`via` in events and the journal).
fn via_text(via: ApproveVia, approve: bool) -> String {
    let verb = if approve { "approve" } else { "deny" };
    match via {
        ApproveVia::Cli => format!("shoal plan {verb}"),
        ApproveVia::Attach => format!("plan.{verb} from an attached client"),
        ApproveVia::Elicitation => "MCP elicitation/create".into(),
    }
}

impl PlanStore {
    pub fn new(bus: Option<BusHandle>, reg: Registration) -> PlanStore {
        PlanStore {
            plans: HashMap::new(),
            bus,
            reg,
            _exit: None,
        }
    }

    /// Report this actor's end to its supervisor.
    pub fn with_exit_notice(mut self, exit: crate::sessions::supervisor::ExitNotice) -> Self {
        self._exit = Some(exit);
        self
    }

    fn publish(&self, event: &str, plan: &Plan) {
        self.publish_by(event, plan, None);
    }

    /// An `approval` event; a human decision (`by`, `via`, and the
    /// `approve_via` channel) also goes to the durable `journal` channel, so
    /// the journal says who decided and how.
    fn publish_by(&self, event: &str, plan: &Plan, decided: Option<(&str, &str, ApproveVia)>) {
        let Some(bus) = &self.bus else {
            return;
        };
        let payload = ApprovalEvent {
            plan: PlanResult::of(plan),
            event,
            src: shoal_journal::event::ExecView::src_of(&plan.src),
            by: decided.map(|d| d.0),
            via: decided.map(|d| d.1),
            channel: decided.map(|d| d.2.as_str()),
        };
        bus.publish("approval", rpc::to_result(&payload).unwrap_or_default());
        if let Some((by, via, channel)) = decided {
            let channel = channel.as_str();
            tracing::info!(plan = %plan.plan_ref, principal = %plan.principal, by, via, channel, decision = event, "plan decided by a human");
            // The journal's record of the decision, a value like any event's.
            let fields = [
                ("approval", event),
                ("plan_ref", &plan.plan_ref),
                ("session", &plan.session),
                ("principal", &plan.principal),
                ("head", shoal_journal::head_of(&plan.src)),
                ("by", by),
                ("via", via),
                ("channel", channel),
            ];
            let record: Record = fields
                .into_iter()
                .map(|(k, v)| (k.into(), Value::str(v)))
                .collect();
            bus.publish("journal", wire::encode(&Value::record(record)));
        }
    }

    fn sweep(&mut self) {
        let now = shoal_journal::now_ns();
        let gone: Vec<String> = self
            .plans
            .values()
            .filter(|p| p.expired(now))
            .map(|p| p.plan_ref.clone())
            .collect();
        for r in gone {
            if let Some(p) = self.plans.remove(&r) {
                self.publish("expired", &p);
            }
        }
    }

    /// The caller's live plan `r` (or the human's view of any plan here).
    fn owned(&mut self, r: &str, caller: &Caller, human_ok: bool) -> Result<&mut Plan, RpcError> {
        let now = shoal_journal::now_ns();
        if self.plans.get(r).is_some_and(|p| p.expired(now)) {
            if let Some(p) = self.plans.remove(r) {
                self.publish("expired", &p);
            }
        }
        let p = self.plans.get_mut(r).ok_or_else(|| unknown(r))?;
        if p.principal != caller.principal && !(human_ok && caller.is_human()) {
            return Err(
                RpcError::new(LEASH_DENIED, "plan belongs to another principal")
                    .with_data_of(&PlanData::of(r)),
            );
        }
        Ok(p)
    }

    fn handle_op(&mut self, caller: Caller, op: PlanOp) -> Result<PlanReply, RpcError> {
        match op {
            PlanOp::Put(plan) => {
                self.sweep();
                let mut plan = *plan;
                if let Some(old) = self.plans.get(&plan.plan_ref) {
                    // Same owner, source and effects: keep its standing,
                    // unless it was applied (then this is a new plan). A
                    // human's answer stands while the policy still asks for
                    // one; otherwise the verdict decides it as for a new
                    // plan, so the two never contradict.
                    if old.approval != Approval::Applied {
                        plan.created_ns = old.created_ns;
                        if plan.verdict == Verdict::ApprovalRequired {
                            plan.approval = old.approval;
                            plan.approved_via = old.approved_via;
                            if plan.approval == Approval::NotApplicable {
                                plan.approval = Approval::Pending;
                                plan.approved_via = None;
                            }
                        }
                    }
                }
                if self.plans.len() >= MAX_PLANS && !self.plans.contains_key(&plan.plan_ref) {
                    if let Some(oldest) = self
                        .plans
                        .values()
                        .min_by_key(|p| p.created_ns)
                        .map(|p| p.plan_ref.clone())
                    {
                        self.plans.remove(&oldest);
                    }
                }
                if plan.approval_pending() {
                    self.publish("pending", &plan);
                }
                let j = PlanResult::of(&plan);
                self.plans.insert(plan.plan_ref.clone(), plan);
                Ok(PlanReply::Plan(Box::new(j)))
            }
            PlanOp::Get(r) => Ok(PlanReply::Plan(Box::new(PlanResult::detail(
                self.owned(&r, &caller, true)?,
            )))),
            PlanOp::List => {
                self.sweep();
                let mut v: Vec<&Plan> = self
                    .plans
                    .values()
                    .filter(|p| p.principal == caller.principal || caller.is_human())
                    .collect();
                v.sort_by(|a, b| {
                    a.created_ns
                        .cmp(&b.created_ns)
                        .then(a.plan_ref.cmp(&b.plan_ref))
                });
                let rows: Vec<PlanResult> = v.into_iter().map(PlanResult::of).collect();
                Ok(PlanReply::Plans(rows))
            }
            PlanOp::Request { plan_ref, kinds } => {
                let p = self.owned(&plan_ref, &caller, false)?;
                if p.verdict == Verdict::Deny {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "policy denies requested effects: {}",
                            p.reason.as_deref().unwrap_or("not granted")
                        ),
                    )
                    .with_data_of(&PlanData::of(&plan_ref)));
                }
                still_open(p.approval, &plan_ref)?;
                let requested: Vec<&str> = kinds
                    .iter()
                    .filter_map(|k| effect::normalize_kind(k))
                    .collect();
                let mut uncovered: Vec<&'static str> = Vec::new();
                if !kinds.is_empty() {
                    for e in &p.effects {
                        if !requested.contains(&e.kind()) && !uncovered.contains(&e.kind()) {
                            uncovered.push(e.kind());
                        }
                    }
                }
                if !uncovered.is_empty() {
                    return Ok(PlanReply::Grant(Box::new(CapRequestResult {
                        why: Some("requested effect scope does not cover the plan".into()),
                        uncovered_effects: Some(strings(&uncovered)),
                        expires: Some(shoal_policy::plan::rfc3339(p.expires_ns)),
                        ..CapRequestResult::of(Grant::ApprovalPending, plan_ref)
                    })));
                }
                let channels = channel_names(&approve_channels(&p.principal));
                if p.approval == Approval::Approved || p.verdict == Verdict::Allow {
                    if p.approval != Approval::Approved {
                        p.approval = Approval::Approved;
                        p.approved_via = Some("policy");
                    }
                    let enforced = shoal_policy::Gate::for_principal(&p.principal).caps_enforced();
                    return Ok(PlanReply::Grant(Box::new(CapRequestResult {
                        enforced: Some(enforced),
                        granted_effects: Some(kinds),
                        expires: Some(shoal_policy::plan::rfc3339(p.expires_ns)),
                        ..CapRequestResult::of(Grant::Approved, plan_ref)
                    })));
                }
                // What the owner's policy grants only with a human's consent;
                // under `auto_apply = "never"` that is everything: the
                // agent's own request approves nothing, whatever the grants.
                let gate = shoal_policy::Gate::for_principal(&p.principal);
                let never = auto_apply_of(&p.principal) == AutoApply::Never;
                let d = gate.decide(&p.effects);
                let mut pending: Vec<&'static str> = Vec::new();
                for e in if never { &p.effects } else { &d.ask } {
                    if !pending.contains(&e.kind()) {
                        pending.push(e.kind());
                    }
                }
                if !never && pending.is_empty() {
                    // Every effect is within the grants (auto_apply asked
                    // for a request): the owner's policy approves it.
                    p.approval = Approval::Approved;
                    p.approved_via = Some("policy");
                    let p = p.clone();
                    self.publish("approved", &p);
                    return Ok(PlanReply::Grant(Box::new(CapRequestResult {
                        enforced: Some(gate.caps_enforced()),
                        granted_effects: Some(kinds),
                        expires: Some(shoal_policy::plan::rfc3339(p.expires_ns)),
                        ..CapRequestResult::of(Grant::Approved, plan_ref)
                    })));
                }
                let why = if never {
                    format!("auto_apply = \"never\" for {}: only a human approves; approve with `shoal plan approve {plan_ref}`", p.principal)
                } else {
                    format!("the policy of {} asks a human for these; approve with `shoal plan approve {plan_ref}`", p.principal)
                };
                let j = CapRequestResult {
                    awaiting: Some("human".into()),
                    why: Some(why),
                    uncovered_effects: Some(strings(&pending)),
                    approve_via: Some(strings(&channels)),
                    expires: Some(shoal_policy::plan::rfc3339(p.expires_ns)),
                    ..CapRequestResult::of(Grant::ApprovalPending, plan_ref)
                };
                let p = p.clone();
                self.publish("pending", &p);
                Ok(PlanReply::Grant(Box::new(j)))
            }
            PlanOp::Approve { plan_ref: r, .. } | PlanOp::Deny { plan_ref: r, .. }
                if !caller.is_human() =>
            {
                Err(RpcError::new(
                    LEASH_DENIED,
                    "only the local user approves or denies plans (shoal plan approve|deny)",
                )
                .with_data_of(&PlanData::of(&r)))
            }
            PlanOp::Approve { plan_ref: r, via } => {
                let p = self.owned(&r, &caller, true)?;
                let channels = approve_channels(&p.principal);
                if !channels.contains(&via) {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "the policy of {} takes approvals on {} only (approve_via), not {}: approve with `shoal plan approve {r}`",
                            p.principal,
                            channel_names(&channels).join(", "),
                            via.as_str()
                        ),
                    )
                    .with_data_of(&PlanData {
        approve_via: Some(channel_names(&channels)),
        ..PlanData::of(&r)
    }));
                }
                if p.approval == Approval::Applied {
                    return Err(already_applied(&r));
                }
                if p.verdict == Verdict::Deny {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "policy denies this plan ({}); change the policy instead",
                            p.reason.as_deref().unwrap_or("not granted")
                        ),
                    )
                    .with_data_of(&PlanData::of(&r)));
                }
                p.approval = Approval::Approved;
                p.approved_via = Some(via.as_str());
                let p = p.clone();
                let by = caller.principal.clone();
                self.publish_by("approved", &p, Some((&by, &via_text(via, true), via)));
                Ok(PlanReply::Plan(Box::new(PlanResult::of(&p))))
            }
            PlanOp::Deny { plan_ref: r, via } => {
                let p = self.owned(&r, &caller, true)?;
                p.approval = Approval::Denied;
                p.approved_via = None;
                let p = p.clone();
                let by = caller.principal.clone();
                self.publish_by("denied", &p, Some((&by, &via_text(via, false), via)));
                Ok(PlanReply::Plan(Box::new(PlanResult::of(&p))))
            }
            PlanOp::Elicited {
                plan_ref,
                approve,
                via,
            } => {
                let p = self.owned(&plan_ref, &caller, false)?;
                if p.verdict == Verdict::Deny {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "policy denies this plan ({}); no approval can change that",
                            p.reason.as_deref().unwrap_or("not granted")
                        ),
                    )
                    .with_data_of(&PlanData::of(&plan_ref)));
                }
                still_open(p.approval, &plan_ref)?;
                let channels = approve_channels(&p.principal);
                if !channels.contains(&ApproveVia::Elicitation) {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "the policy of {} does not take approvals by elicitation (approve_via: {}): approve with `shoal plan approve {plan_ref}`",
                            p.principal,
                            channel_names(&channels).join(", ")
                        ),
                    )
                    .with_data_of(&PlanData {
        approve_via: Some(channel_names(&channels)),
        ..PlanData::of(&plan_ref)
    }));
                }
                if approve {
                    p.approval = Approval::Approved;
                    p.approved_via = Some(ApproveVia::Elicitation.as_str());
                } else {
                    p.approval = Approval::Denied;
                    p.approved_via = None;
                }
                let p = p.clone();
                let event = if approve { "approved" } else { "denied" };
                self.publish_by(event, &p, Some(("user", &via, ApproveVia::Elicitation)));
                Ok(PlanReply::Plan(Box::new(PlanResult::of(&p))))
            }
            PlanOp::Apply { plan_ref: r, src } => {
                let p = self.owned(&r, &caller, false)?;
                if src.is_some_and(|s| s != p.src) {
                    return Err(RpcError::new(
                        LEASH_DENIED,
                        "the source differs from the approved plan's",
                    )
                    .with_data_of(&PlanData::of(&r)));
                }
                still_open(p.approval, &r)?;
                match (p.approval, p.verdict) {
                    (_, Verdict::Deny) => Err(RpcError::new(
                        LEASH_DENIED,
                        format!(
                            "policy denies this plan: {}",
                            p.reason.as_deref().unwrap_or("not granted")
                        ),
                    )
                    .with_data_of(&PlanData::of(&r))),
                    (Approval::Approved, _) | (_, Verdict::Allow) => {
                        // Used up as it starts: a second apply is refused
                        // whatever becomes of this one.
                        p.approval = Approval::Applied;
                        let p = p.clone();
                        self.publish("applied", &p);
                        Ok(PlanReply::Run(Box::new(p)))
                    }
                    _ => Err(RpcError::new(
                        APPROVAL_REQUIRED,
                        format!(
                            "plan approval pending: a human approves it ('shoal plan approve {r}', \
                             or when shoal_cap_request asks); apply it again once approved"
                        ),
                    )
                    .with_data_of(&PlanData {
                        approval_pending: true,
                        ..PlanData::of(&r)
                    })),
                }
            }
        }
    }
}

impl Actor for PlanStore {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        // Expired plans are swept on every store and list, and refused on
        // every access, so no timer keeps the actor alive.
        self.reg.stats.set_state("idle");
    }
}

impl Handler<PlanCall> for PlanStore {
    type Result = Result<PlanReply, RpcError>;

    fn handle(&mut self, msg: PlanCall, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.handle_op(msg.caller, msg.op)
    }
}

impl Handler<PlanCall> for SessionSupervisor {
    type Result = ResponseFuture<Result<PlanReply, RpcError>>;

    fn handle(&mut self, msg: PlanCall, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let store = self.plan_store(ctx);
        Box::pin(async move {
            store
                .send(msg)
                .await
                .unwrap_or_else(|_| Err(RpcError::internal("the plan store stopped")))
        })
    }
}

impl Handler<crate::msg::DerivePlan> for SessionSupervisor {
    type Result = ResponseFuture<Result<shoal_policy::undo::Derived, crate::msg::SessionError>>;

    fn handle(&mut self, msg: crate::msg::DerivePlan, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let child = self.session_child();
        Box::pin(async move {
            let addr = child?;
            addr.send(msg).await.unwrap_or_else(|_| {
                Err(crate::msg::SessionError::Internal(
                    "the session actor died while planning".into(),
                ))
            })
        })
    }
}
