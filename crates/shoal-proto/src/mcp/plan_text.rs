//! What a model reads of a plan (`shoal_plan`, a plan's `shoal_get`): its
//! standing in a line (verdict, approval, reversibility), where and as
//! whom it runs, its effects one a line, what cannot be undone or how to
//! undo it, and the next call. The structured content keeps every member.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value as Json;

use super::journal_text::effect_text;
use super::outputs::{PlanAnswer, PlanResult, Verdict};
use super::results::ToolOutput;

impl ToolOutput for PlanResult {
    fn text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(plan_text(self)))
    }
}

impl ToolOutput for PlanAnswer {
    fn text(&self) -> Option<Cow<'_, str>> {
        match self {
            PlanAnswer::Plan(p) => Some(Cow::Owned(plan_text(p))),
            PlanAnswer::Plans(ps) if ps.is_empty() => Some(Cow::Borrowed("no plans")),
            PlanAnswer::Plans(ps) => Some(Cow::Owned(
                ps.iter().map(plan_text).collect::<Vec<_>>().join("\n\n"),
            )),
            // A grant reads as its JSON.
            PlanAnswer::Grant(_) => None,
        }
    }
}

fn plan_text(p: &PlanResult) -> String {
    let approval = match p.approved_via {
        Some(via) if p.approved => format!("approved by {via}"),
        _ => p.approval.to_string(),
    };
    let mut t = format!(
        "{} · {} · {approval} · {} · expires {}\nin {} as {} (session {})",
        p.plan_ref,
        p.verdict.as_str(),
        p.reversible.reversibility,
        p.expires,
        p.cwd,
        p.principal,
        p.session
    );
    if let Some(r) = &p.reason {
        let _ = write!(t, "\nreason: {r}");
    }
    let effects: Vec<String> = match &p.effects {
        Json::Array(es) => es.iter().map(effect_text).collect(),
        _ => Vec::new(),
    };
    t.push_str("\neffects:");
    if effects.is_empty() {
        t.push_str(" none");
    }
    for e in effects {
        let _ = write!(t, "\n  {e}");
    }
    for why in &p.reversible.irreversible {
        let _ = write!(t, "\ncannot be undone: {why}");
    }
    if let Some(u) = &p.reversible.undo {
        let _ = write!(t, "\nundo: {}", u.how);
        if let Some(trash) = &u.trash {
            let _ = write!(t, " (trash: {trash})");
        }
    }
    if let Some(d) = &p.detail {
        t.push_str("\nsource:");
        for l in d.src.lines() {
            let _ = write!(t, "\n  {l}");
        }
    }
    let next = match p.verdict {
        Verdict::Deny => None,
        _ if p.approved => Some(format!(
            "next: shoal_apply {{\"plan_ref\":\"{}\"}} runs it as planned",
            p.plan_ref
        )),
        _ if p.approval_pending => Some(format!(
            "next: shoal_cap_request {{\"plan_ref\":\"{}\"}} asks for it, or a human runs \
             `shoal plan approve {}`",
            p.plan_ref, p.plan_ref
        )),
        _ => None,
    };
    if let Some(n) = next {
        t.push('\n');
        t.push_str(&n);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Reversibility, UndoOut};
    use serde_json::json;

    fn plan() -> PlanResult {
        PlanResult {
            plan_ref: "plan:1".into(),
            effects: json!([{"kind": "fs_delete", "paths": ["/w/a.txt"]},
                {"kind": "proc_spawn", "bin_hash": "d41f".repeat(16), "argv0": "git"}]),
            verdict: Verdict::Allow,
            approval_pending: false,
            approved: true,
            approval: "approved",
            approved_via: Some("policy"),
            reason: None,
            session: "default".into(),
            principal: "uid:0".into(),
            cwd: "/w".into(),
            expires: "2026-12-07T20:45:10Z".into(),
            reversible: Reversibility {
                reversibility: "reversible",
                irreversible: vec![],
                undo: Some(UndoOut {
                    trash: Some("/t/1".into()),
                    paths: vec!["/w/a.txt".into()],
                    how: "mv it back",
                }),
            },
            detail: None,
        }
    }

    #[test]
    fn a_plan_reads_as_its_standing_effects_and_next_call() {
        let t = plan_text(&plan());
        assert_eq!(
            t,
            "plan:1 · allow · approved by policy · reversible · expires 2026-12-07T20:45:10Z\n\
             in /w as uid:0 (session default)\n\
             effects:\n  fs_delete /w/a.txt\n  proc_spawn git\n\
             undo: mv it back (trash: /t/1)\n\
             next: shoal_apply {\"plan_ref\":\"plan:1\"} runs it as planned"
        );
        let mut p = plan();
        p.verdict = Verdict::ApprovalRequired;
        p.approved = false;
        p.approval_pending = true;
        p.approval = "pending";
        p.approved_via = None;
        p.reversible.undo = None;
        p.reversible.reversibility = "irreversible";
        p.reversible.irreversible =
            vec!["net_connect *:443: what is sent cannot be recalled".into()];
        let t = plan_text(&p);
        assert!(
            t.starts_with("plan:1 · approval_required · pending · irreversible"),
            "{t}"
        );
        assert!(t.contains("\ncannot be undone: net_connect *:443"), "{t}");
        assert!(
            t.ends_with("or a human runs `shoal plan approve plan:1`"),
            "{t}"
        );
        p.verdict = Verdict::Deny;
        p.reason = Some("outside fs.write".into());
        let t = plan_text(&p);
        assert!(
            t.contains("\nreason: outside fs.write") && !t.contains("next:"),
            "{t}"
        );
    }
}
