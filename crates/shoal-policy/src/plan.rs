//! Plans: a source, its derived effects and its owner (docs/rules.md §21).

use serde_json::Value as Json;

use super::effect::Effect;
pub use super::place::Place;
use super::policy::{ApproveVia, AutoApply, Verdict};
use super::undo::Undo;

/// `plan:` + 16 hex of BLAKE3 over session, principal, source, effects and
/// place (with its bound files' digests): bound to its owner, so two callers
/// never share or overwrite one, and to where it was made and what its files
/// held, so planning the same source elsewhere or after a rewrite is a new plan.
pub fn plan_ref(
    session: &str,
    principal: &str,
    src: &str,
    effects: &[Effect],
    place: &Place,
) -> String {
    let mut h = blake3::Hasher::new();
    let cwd = place.cwd.as_os_str().as_encoded_bytes();
    for part in [
        session.as_bytes(),
        principal.as_bytes(),
        src.as_bytes(),
        cwd,
        place.env.as_bytes(),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    for f in &place.files {
        for part in [f.path.as_os_str().as_encoded_bytes(), f.digest.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
    }
    h.update(&[u8::from(place.unbound)]);
    let effects = serde_json::to_vec(effects).unwrap_or_default();
    h.update(&effects);
    let hex = h.finalize().to_hex();
    format!("plan:{}", &hex[..16])
}

/// Where a stored plan stands. With its verdict it makes one of these
/// pairs, never another (docs/rules.md §21): `allow` + `approved` (by
/// `policy`, or a human), `approval_required` + `pending` / `approved` /
/// `denied`, `deny` + `none` (or `denied` by a human); any verdict +
/// `applied` once it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Waiting for `cap.request` or a human.
    Pending,
    /// The policy denies the plan: no approval applies.
    NotApplicable,
    Approved,
    /// A human said no.
    Denied,
    /// Applied (or its apply started): a plan runs once; planning the same
    /// source again makes a new plan that needs its own approval.
    Applied,
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Pending => "pending",
            Approval::NotApplicable => "none",
            Approval::Approved => "approved",
            Approval::Denied => "denied",
            Approval::Applied => "applied",
        }
    }

    /// A new plan's standing under `verdict`, and who approved it.
    pub fn initial(verdict: Verdict) -> (Approval, Option<&'static str>) {
        match verdict {
            Verdict::Allow => (Approval::Approved, Some("policy")),
            Verdict::ApprovalRequired => (Approval::Pending, None),
            Verdict::Deny => (Approval::NotApplicable, None),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub plan_ref: String,
    pub session: String,
    pub principal: String,
    pub src: String,
    /// Where it was made: it applies only there.
    pub place: Place,
    pub effects: Vec<Effect>,
    /// What of the effects can be undone.
    pub undo: Undo,
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub approval: Approval,
    /// The channel that approved it (`cli`, `elicitation`, `attach`;
    /// `policy` when the owner's grants did).
    pub approved_via: Option<&'static str>,
    /// Unix ns.
    pub created_ns: i64,
    pub expires_ns: i64,
}

impl Plan {
    pub fn expired(&self, now_ns: i64) -> bool {
        now_ns >= self.expires_ns
    }

    pub fn approval_pending(&self) -> bool {
        self.verdict == Verdict::ApprovalRequired && self.approval == Approval::Pending
    }

    pub fn effects_json(&self) -> Json {
        Json::Array(self.effects.iter().map(Effect::to_json).collect())
    }
}

/// The channels on which a human may approve `principal`'s plans
/// (`approve_via`; a principal without a policy section: the CLI only).
pub fn approve_channels(principal: &str) -> Vec<ApproveVia> {
    let rt = super::runtime();
    let local = principal == rt.local;
    match rt.policy.get(principal) {
        Some(p) => p.approve_channels(local),
        None if local => ApproveVia::ALL.to_vec(),
        None => vec![ApproveVia::Cli],
    }
}

/// `auto_apply` of `principal` (`never` without a policy section).
pub fn auto_apply_of(principal: &str) -> AutoApply {
    super::runtime()
        .policy
        .get(principal)
        .map_or(AutoApply::Never, |p| p.auto_apply)
}

/// The names of `channels`, for replies and errors.
pub fn channel_names(channels: &[ApproveVia]) -> Vec<&'static str> {
    channels.iter().map(|c| c.as_str()).collect()
}

/// An RFC 3339 UTC timestamp of unix ns.
pub fn rfc3339(ns: i64) -> String {
    jiff::Timestamp::from_nanosecond(ns as i128)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn refs_are_owner_bound() {
        let e = vec![Effect::Opaque];
        let at = Place::of(Path::new("/usr/bin"), [("PATH", "/usr/bin")]);
        let a = plan_ref("s1", "uid:0", "sh { x }", &e, &at);
        assert_eq!(a, plan_ref("s1", "uid:0", "sh { x }", &e, &at));
        assert_ne!(a, plan_ref("s2", "uid:0", "sh { x }", &e, &at));
        assert_ne!(a, plan_ref("s1", "agent", "sh { x }", &e, &at));
        assert_ne!(a, plan_ref("s1", "uid:0", "sh { y }", &e, &at));
        assert_ne!(a, plan_ref("s1", "uid:0", "sh { x }", &[], &at));
        let elsewhere = Place::of(Path::new("/home/a"), [("PATH", "/usr/bin")]);
        assert_ne!(a, plan_ref("s1", "uid:0", "sh { x }", &e, &elsewhere));
        let mut bound = at.clone();
        bound.files.push(super::super::place::BoundFile {
            path: "/usr/bin/x".into(),
            digest: "b3:00".into(),
        });
        let b = plan_ref("s1", "uid:0", "sh { x }", &e, &bound);
        assert_ne!(a, b);
        bound.files[0].digest = "b3:01".into();
        assert_ne!(b, plan_ref("s1", "uid:0", "sh { x }", &e, &bound));
        assert_eq!(a.len(), 21);
    }
}
