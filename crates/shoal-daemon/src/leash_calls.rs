//! The Leash requests both connections serve (kernel `exec mode:"plan"`,
//! `explain`, `plan.*`, `cap.request`; MCP `shoal_plan`, `shoal_apply`,
//! `shoal_cap_request`): principals from tokens, plans through the
//! session's PlanStore, applies through the session.

use std::sync::Arc;

use serde_json::{json, Value as Json};

use crate::msg::{DerivePlan, SessionError};
use crate::sessions::handle::SessionHandle;
use crate::sessions::plan_store::{Caller, PlanCall, PlanOp, PlanReply};
use crate::sessions::session::CallCancel;
use shoal_lang::Position;
use shoal_policy::plan::{plan_ref, Approval, Plan};
use shoal_policy::policy::ApproveVia;
use shoal_policy::{effect, Gate};
use shoal_proto::elide::Budget;
use shoal_proto::kernel::PlanResult;
use shoal_proto::mcp::{Applied, CapRequestResult, PlanAnswer};
use shoal_proto::rpc::{self, RpcError};

/// The principal of a connection: the local uid, or the token's.
pub fn principal(token: Option<&str>, foreign: bool) -> Result<String, RpcError> {
    match token {
        None if foreign => Err(RpcError::new(
            rpc::AUTH_FAILED,
            "connections from another uid must present a bearer token",
        )),
        None => Ok(shoal_policy::runtime().local.clone()),
        Some(t) => {
            let rt = shoal_policy::runtime();
            let store = rt.tokens.as_ref().ok_or_else(|| {
                RpcError::new(
                    rpc::AUTH_FAILED,
                    "bearer tokens are unavailable in this daemon",
                )
            })?;
            store.validate(t).ok_or_else(|| {
                RpcError::new(
                    rpc::AUTH_FAILED,
                    "invalid, expired, or revoked bearer token",
                )
            })
        }
    }
}

/// The `via` of `plan.approve` / `plan.deny` (`cli` or `attach`; absent: the
/// connection's own, `dflt`). The MCP dialog (`elicitation`) is never named by a client.
pub fn via(v: Option<shoal_proto::kernel::Via>, dflt: ApproveVia) -> ApproveVia {
    match v {
        None => dflt,
        Some(shoal_proto::kernel::Via::Cli) => ApproveVia::Cli,
        Some(shoal_proto::kernel::Via::Attach) => ApproveVia::Attach,
    }
}

/// Before every call of a token connection: the token still holds.
pub fn recheck(token: Option<&str>, foreign: bool, gate: &Gate) -> Result<(), RpcError> {
    if token.is_none() && !foreign {
        return Ok(());
    }
    let p = principal(token, foreign)?;
    if p != gate.principal {
        return Err(RpcError::new(
            rpc::AUTH_FAILED,
            "invalid, expired, or revoked bearer token",
        ));
    }
    Ok(())
}

fn caller(gate: &Gate) -> Caller {
    Caller {
        principal: gate.principal.clone(),
    }
}

async fn derive(
    handle: &SessionHandle,
    gate: &Arc<Gate>,
    src: &str,
) -> Result<shoal_policy::undo::Derived, RpcError> {
    let name = handle.name.clone();
    handle
        .send(DerivePlan {
            src: src.to_string(),
            gate: Some(gate.clone()),
        })
        .await
        .map_err(|_| SessionError::Closed(name))
        .and_then(|r| r)
        .map_err(crate::peer::session_error)
}

/// `explain`: the effects and verdict of a source; nothing is stored or run.
pub async fn explain(
    handle: SessionHandle,
    gate: Arc<Gate>,
    src: String,
) -> Result<shoal_proto::kernel::Explained, RpcError> {
    let derived = derive(&handle, &gate, &src).await?;
    let d = gate.decide_derived(&derived);
    Ok(shoal_proto::kernel::Explained {
        effects: derived
            .effects
            .iter()
            .map(shoal_policy::Effect::to_json)
            .collect(),
        reversible: shoal_proto::kernel::Reversibility::of(&derived.effects, &derived.undo),
        verdict: d.verdict.into(),
        reason: d.reason,
        principal: gate.principal.clone(),
        caps_enforced: gate.caps_enforced(),
    })
}

/// `exec mode:"plan"` / `shoal_plan`: derive, decide, store.
pub async fn plan(
    handle: SessionHandle,
    gate: Arc<Gate>,
    src: String,
) -> Result<PlanResult, RpcError> {
    let derived = derive(&handle, &gate, &src).await?;
    let effects = derived.effects.clone();
    let d = gate.decide_derived(&derived);
    // Verdict and approval never contradict (docs/rules.md §21): what the
    // policy allows is approved by it, what it denies takes no approval.
    let (approval, approved_via) = Approval::initial(d.verdict);
    let now = shoal_journal::now_ns();
    let ttl = shoal_policy::runtime()
        .plan_ttl
        .as_nanos()
        .min(i64::MAX as u128) as i64;
    let place = derived
        .place
        .clone()
        .ok_or_else(|| RpcError::internal("the plan's place is unknown"))?;
    let plan = Plan {
        plan_ref: plan_ref(&handle.name, &gate.principal, &src, &effects, &place),
        session: handle.name.clone(),
        principal: gate.principal.clone(),
        src,
        place,
        effects,
        undo: derived.undo,
        verdict: d.verdict,
        reason: d.reason,
        approval,
        approved_via,
        created_ns: now,
        expires_ns: now.saturating_add(ttl),
    };
    match call(&handle, &gate, PlanOp::Put(Box::new(plan))).await? {
        PlanReply::Plan(p) => Ok(*p),
        _ => Err(RpcError::internal("unexpected plan store reply")),
    }
}

async fn call(handle: &SessionHandle, gate: &Gate, op: PlanOp) -> Result<PlanReply, RpcError> {
    let name = handle.name.clone();
    handle
        .send(PlanCall {
            caller: caller(gate),
            op,
        })
        .await
        .map_err(|_| crate::peer::session_error(SessionError::Closed(name)))?
}

/// `plan.get`, `plan.list`, `cap.request`, `plan.approve`, `plan.deny`.
pub async fn plan_op(
    handle: SessionHandle,
    gate: Arc<Gate>,
    op: PlanOp,
) -> Result<PlanAnswer, RpcError> {
    match call(&handle, &gate, op).await? {
        PlanReply::Plan(p) => Ok(PlanAnswer::Plan(p)),
        PlanReply::Plans(p) => Ok(PlanAnswer::Plans(p)),
        PlanReply::Grant(g) => Ok(PlanAnswer::Grant(g)),
        PlanReply::Run(_) => Err(RpcError::internal("unexpected plan store reply")),
    }
}

/// `cap.request` / `shoal_cap_request` (a [`PlanOp::Request`]): the grant.
pub async fn cap_request(
    handle: SessionHandle,
    gate: Arc<Gate>,
    op: PlanOp,
) -> Result<CapRequestResult, RpcError> {
    match call(&handle, &gate, op).await? {
        PlanReply::Grant(g) => Ok(*g),
        _ => Err(RpcError::internal("unexpected plan store reply")),
    }
}

/// `plan.apply` / `shoal_apply`: run an approved (or allowed) plan of the
/// caller, once, where it was planned: in another cwd or environment it is
/// refused (the same source may run another program there). The effects are
/// derived again first: if they changed since planning (new files for a
/// glob), the plan must be made again.
pub async fn apply(
    handle: SessionHandle,
    gate: Arc<Gate>,
    plan_ref: String,
    tty: bool,
    budget: Budget,
    cancel: Arc<CallCancel>,
) -> Result<Applied, RpcError> {
    apply_checked(handle, gate, plan_ref, None, tty, budget, cancel).await
}

/// `exec {mode:"approved", plan_ref, src}`: no bypass. The plan must be
/// the caller's, approved (or allowed), and of exactly this source;
/// anything else is `-32010`.
pub async fn exec_approved(
    handle: SessionHandle,
    gate: Arc<Gate>,
    src: String,
    plan_ref: Option<String>,
    tty: bool,
    budget: Budget,
    cancel: Arc<CallCancel>,
) -> Result<Applied, RpcError> {
    let denied = |m: &str| RpcError::new(rpc::LEASH_DENIED, m.to_string());
    let Some(plan_ref) = plan_ref else {
        return Err(denied(
            "mode \"approved\" needs the plan_ref of an approved plan",
        ));
    };
    apply_checked(handle, gate, plan_ref, Some(src), tty, budget, cancel)
        .await
        .map_err(|e| {
            if e.code == rpc::APPROVAL_REQUIRED || e.code == rpc::UNKNOWN_PLAN {
                RpcError::new(
                    rpc::LEASH_DENIED,
                    format!("not an approved plan: {}", e.message),
                )
                .with_data(e.data.clone().unwrap_or(Json::Null))
            } else {
                e
            }
        })
}

async fn apply_checked(
    handle: SessionHandle,
    gate: Arc<Gate>,
    plan_ref: String,
    src: Option<String>,
    tty: bool,
    budget: Budget,
    cancel: Arc<CallCancel>,
) -> Result<Applied, RpcError> {
    // The store checks the source and uses the plan up (it applies once).
    let op = PlanOp::Apply {
        plan_ref: plan_ref.clone(),
        src,
    };
    let plan = match call(&handle, &gate, op).await? {
        PlanReply::Run(p) => p,
        _ => return Err(RpcError::internal("unexpected plan store reply")),
    };
    let now = derive(&handle, &gate, &plan.src).await?;
    if let Some(why) = now.place.as_ref().and_then(|p| plan.place.moved(p)) {
        return Err(moved(&plan_ref, &plan.place, &why));
    }
    if let Some(f) = now.place.as_ref().and_then(|p| plan.place.changed(p)) {
        return Err(changed(&plan_ref, &plan.place, &f));
    }
    if plan.place.unbound && plan.effects.contains(&shoal_policy::Effect::Opaque) {
        return Err(RpcError::new(
            rpc::APPROVAL_REQUIRED,
            format!(
                "the plan's source names more than {} files, so what it runs is not bound to \
                 what was approved; an opaque plan of it does not apply",
                shoal_policy::place::MAX_BOUND_FILES
            ),
        )
        .with_data(json!({"plan_ref": plan_ref, "unbound": true})));
    }
    if now.effects != plan.effects {
        return Err(RpcError::new(
            rpc::APPROVAL_REQUIRED,
            "the plan's effects changed since it was made (cwd or files differ); plan it again",
        )
        .with_data(json!({
            "plan_ref": plan_ref,
            "effects": now.effects.iter().map(shoal_policy::Effect::to_json).collect::<Vec<_>>(),
        })));
    }
    let new_losses: Vec<&String> = now
        .undo
        .lost
        .iter()
        .filter(|l| !plan.undo.lost.contains(l))
        .collect();
    if !new_losses.is_empty() {
        // A file the plan would have made now exists: the plan said it
        // could be undone, and no longer can.
        return Err(RpcError::new(
            rpc::APPROVAL_REQUIRED,
            "the plan can no longer be undone as it said (a file it writes exists now); plan it again",
        )
        .with_data(json!({"plan_ref": plan_ref, "irreversible": new_losses})));
    }
    // The run-time gate lets through what the approved plan lists.
    // The session checks the place again as the run starts (a call queued
    // meanwhile may have changed it).
    let applying = Arc::new(gate.applying(&plan.effects));
    let exec = crate::msg::Exec {
        src: plan.src.clone(),
        position: Position::Stmt,
        tty,
        cancel,
        gate: Some(applying),
        check: false,
        width: None,
        place: Some(plan.place.clone()),
        approved: plan.effects.clone(),
    };
    let result = crate::sessions::exec::exec_result(handle, exec, budget)
        .await
        .map_err(|e| {
            let data = e.data.as_ref();
            if data.and_then(|d| d.get("moved")).is_some() {
                moved(&plan_ref, &plan.place, &e.message)
            } else if let Some(f) = data.and_then(|d| d.get("changed")?.as_str()) {
                changed(&plan_ref, &plan.place, std::path::Path::new(f))
            } else {
                e
            }
        })?;
    Ok(Applied { result, plan_ref })
}

/// The refusal of an apply away from where the plan was made.
pub fn moved(plan_ref: &str, place: &shoal_policy::plan::Place, why: &str) -> RpcError {
    RpcError::new(
        rpc::APPROVAL_REQUIRED,
        format!("{why}: an approved plan applies only where it was made; plan it again here"),
    )
    .with_data(json!({"plan_ref": plan_ref, "cwd": place.cwd_text(), "moved": true}))
}

/// The refusal of an apply after a file the plan names changed: an
/// approval covers the programs and scripts as they were.
pub fn changed(plan_ref: &str, place: &shoal_policy::plan::Place, f: &std::path::Path) -> RpcError {
    RpcError::new(
        rpc::APPROVAL_REQUIRED,
        format!(
            "{}: an approved plan runs only the files it named as they were; plan it again",
            shoal_policy::place::changed_why(f)
        ),
    )
    .with_data(json!({
        "plan_ref": plan_ref,
        "cwd": place.cwd_text(),
        "changed": f.to_string_lossy(),
    }))
}

/// `cap.request` params checked: the plan (never empty) and the requested
/// kinds (dotted or snake spelling).
pub fn cap_request_params<'a>(
    plan_ref: &str,
    kinds: impl Iterator<Item = &'a str>,
) -> Result<(String, Vec<String>), RpcError> {
    if plan_ref.is_empty() {
        return Err(RpcError::invalid_params("plan_ref must not be empty"));
    }
    let mut out = Vec::new();
    for (i, k) in kinds.enumerate() {
        if effect::normalize_kind(k).is_none() {
            return Err(RpcError::invalid_params(format!(
                "effects[{i}]: unknown effect kind {k:?}"
            ))
            .with_data(json!({"index": i, "kinds": effect::KINDS})));
        }
        out.push(k.to_string());
    }
    Ok((plan_ref.to_string(), out))
}
