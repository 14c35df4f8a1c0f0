//! The live view of `shoal attach` and `shoal watch`: what other clients of a
//! session run, and the plans that wait for a human, read from the event bus
//! alone (`session.exec` carries everything a view prints, so a viewer makes no
//! call per exec and adds nothing to the agent's execs), and the human's
//! answer to a plan (`plan.approve` / `plan.deny` with `via: "attach"`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::client::{connect, Client};
use shoal_proto::kernel::{
    AttachParams, DecideParams, EventsRequest, KernelRequest, PlanRef, ReadEventsParams,
    SubscribeParams, Via,
};

/// The channel of the exec view (`shoal_journal::event::EXEC_CHANNEL`).
const EXEC: &str = "session.exec";
const APPROVAL: &str = "approval";

/// A field of a tagged record payload (`{"$": "record", "v": {k: {"$", "v"}}}`).
fn field<'a>(payload: &'a Value, k: &str) -> Option<&'a Value> {
    payload.get("v")?.get(k)?.get("v")
}

fn str_field<'a>(payload: &'a Value, k: &str) -> &'a str {
    field(payload, k).and_then(Value::as_str).unwrap_or("")
}

/// `line` cut to `width` columns (by chars; a line with escapes is left whole).
fn fit(line: &str, width: usize) -> String {
    if line.contains('\u{1b}') || line.chars().count() <= width {
        return line.to_string();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// One exec as a view prints it: a header naming the session, who ran it and
/// its ref, the source, at most ten lines of render and how it ended.
pub fn exec_text(payload: &Value, width: usize) -> String {
    let reference = str_field(payload, "ref");
    let mut out = format!(
        "── [{}] {} ({}) · {reference}\n",
        str_field(payload, "session"),
        str_field(payload, "principal"),
        str_field(payload, "client"),
    );
    for (i, l) in str_field(payload, "src").lines().enumerate() {
        let lead = if i == 0 { "› " } else { "  " };
        out.push_str(&fit(&format!("{lead}{l}"), width));
        out.push('\n');
    }
    let ok = field(payload, "ok")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let code = field(payload, "code").and_then(Value::as_str);
    let status = field(payload, "status").and_then(Value::as_i64);
    let head = str_field(payload, "head");
    match code {
        Some(c) => out.push_str(&fit(&format!("error[{c}]: {head}"), width)),
        None => {
            for l in head.lines() {
                out.push_str(&fit(l, width));
                out.push('\n');
            }
        }
    }
    let more = field(payload, "more").and_then(Value::as_u64).unwrap_or(0);
    if more > 0 {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("… {more} more lines, shoal_get {reference}"));
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&match (ok, status) {
        (true, _) => "ok".to_string(),
        (false, Some(s)) => format!("failed (exit status {s})"),
        (false, None) => "failed".to_string(),
    });
    out
}

/// A plan waiting for a human, as the view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub plan_ref: String,
    pub session: String,
    pub principal: String,
    /// What the view prints of it (source, effects, reversibility, principal).
    pub text: String,
}

impl Pending {
    fn of(p: &Value) -> Option<Pending> {
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let plan_ref = s("plan_ref");
        if plan_ref.is_empty() {
            return None;
        }
        let effects: Vec<String> = p["effects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(effect_text)
            .collect();
        let mut text = format!(
            "── [{}] plan {plan_ref} waits for your approval\n  principal: {}\n",
            s("session"),
            s("principal")
        );
        text.push_str(&format!("  cwd:     {}\n", s("cwd")));
        for (i, l) in s("src").lines().enumerate() {
            text.push_str(if i == 0 { "  src:     " } else { "           " });
            text.push_str(l);
            text.push('\n');
        }
        text.push_str(&format!("  effects: {}\n", effects.join(", ")));
        text.push_str(&format!("  reversibility: {}\n", s("reversibility")));
        if let Some(why) = p["irreversible"].as_array() {
            for w in why.iter().filter_map(Value::as_str) {
                text.push_str(&format!("    {w}\n"));
            }
        }
        text.push_str("  approve? y/n");
        Some(Pending {
            plan_ref,
            session: s("session"),
            principal: s("principal"),
            text,
        })
    }
}

/// One effect in a line: its kind and its other fields' values.
fn effect_text(e: &Value) -> String {
    let kind = e["kind"].as_str().unwrap_or("?");
    let rest: Vec<String> = e
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "kind")
        .map(|(_, v)| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        .collect();
    if rest.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} {}", rest.join(" "))
    }
}

/// What the view hands to its printer.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Text to print above the prompt.
    Text(String),
    /// A plan now waits for a human.
    Pending(Pending),
    /// A plan no longer waits (decided, applied or expired).
    Settled { plan_ref: String, text: String },
}

/// Which events a view shows.
pub struct Filter {
    /// One session's (`None`: every session's).
    pub session: Option<String>,
    /// The viewer's own connection: its execs are not echoed.
    pub own_conn: Option<u64>,
    pub width: usize,
}

impl Filter {
    fn admits_session(&self, s: &str) -> bool {
        self.session.as_deref().is_none_or(|want| want == s)
    }

    /// The item an event gives, if the view shows it.
    pub fn item(&self, ev: &Value) -> Option<Item> {
        let payload = &ev["payload"];
        match ev["channel"].as_str()? {
            EXEC => {
                let conn = field(payload, "conn").and_then(Value::as_u64);
                if !self.admits_session(str_field(payload, "session"))
                    || (conn.is_some() && conn == self.own_conn)
                {
                    return None;
                }
                Some(Item::Text(exec_text(payload, self.width)))
            }
            APPROVAL => {
                if !self.admits_session(payload["session"].as_str().unwrap_or("")) {
                    return None;
                }
                let plan_ref = payload["plan_ref"].as_str()?.to_string();
                match payload["event"].as_str()? {
                    "pending" => Pending::of(payload).map(Item::Pending),
                    other => {
                        let by = payload["via"]
                            .as_str()
                            .map(|v| format!(" ({v})"))
                            .unwrap_or_default();
                        Some(Item::Settled {
                            text: format!(
                                "── [{}] plan {plan_ref} {other}{by}",
                                payload["session"].as_str().unwrap_or("")
                            ),
                            plan_ref,
                        })
                    }
                }
            }
            _ => None,
        }
    }
}

/// The client's error as one line.
pub fn call(c: &mut Client, req: &KernelRequest) -> Result<Value, String> {
    match c.call(req) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.0["message"].as_str().unwrap_or("error").to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// A connection for a view: attached to `session` without creating it (or to
/// none, for every session), subscribed to the exec view and to approvals from
/// now on. Answers it with the plans that wait already.
pub fn open(
    socket: &Path,
    session: Option<&str>,
    kind: &str,
    human: bool,
) -> Result<(Client, Vec<Pending>), String> {
    let s =
        connect(socket).map_err(|e| format!("no daemon answers on {}: {e}", socket.display()))?;
    let mut c = Client::new(s).map_err(|e| e.to_string())?;
    if let Some(name) = session {
        let mut attach = AttachParams::client(Some(name), kind, false);
        attach.create = Some(false);
        if let Some(c) = &mut attach.client {
            c.human = Some(human);
        }
        call(&mut c, &KernelRequest::Attach(attach))?;
    }
    // What the approval ring says still waits; then both channels from now on.
    let read = |channel: &str, limit| {
        KernelRequest::Events(EventsRequest::Read(ReadEventsParams {
            channel: channel.into(),
            since: None,
            limit,
        }))
    };
    let ring = call(&mut c, &read(APPROVAL, None))?;
    let mut waiting: BTreeMap<String, Pending> = BTreeMap::new();
    let mut last = None;
    for ev in ring["events"].as_array().into_iter().flatten() {
        last = ev["seq"].as_u64().or(last);
        let p = &ev["payload"];
        if session.is_some_and(|s| p["session"].as_str() != Some(s)) {
            continue;
        }
        let Some(r) = p["plan_ref"].as_str() else {
            continue;
        };
        match p["event"].as_str() {
            Some("pending") => {
                if let Some(x) = Pending::of(p) {
                    waiting.insert(r.to_string(), x);
                }
            }
            _ => {
                waiting.remove(r);
            }
        }
    }
    let newest = call(&mut c, &read(EXEC, Some(1)))?;
    let exec_last = newest["events"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|e| e["seq"].as_u64());
    for (channel, since) in [(EXEC, exec_last), (APPROVAL, last)] {
        let sub = SubscribeParams {
            channel: channel.into(),
            since,
        };
        call(
            &mut c,
            &KernelRequest::Events(EventsRequest::Subscribe(sub)),
        )?;
    }
    Ok((c, waiting.into_values().collect()))
}

/// Approve or deny `p` as the human at this terminal (`via: "attach"`), on a
/// connection of its own attached to the plan's session (never creating it).
pub fn decide(socket: &Path, p: &Pending, approve: bool) -> String {
    let r = (|| {
        let s = connect(socket).map_err(|e| e.to_string())?;
        let mut c = Client::new(s).map_err(|e| e.to_string())?;
        let mut attach = AttachParams::client(Some(&p.session), "attach", false);
        attach.create = Some(false);
        call(&mut c, &KernelRequest::Attach(attach))?;
        let decide = DecideParams {
            plan_ref: PlanRef(p.plan_ref.clone()),
            via: Some(Via::Attach),
        };
        let req = if approve {
            KernelRequest::PlanApprove(decide)
        } else {
            KernelRequest::PlanDeny(decide)
        };
        call(&mut c, &req)
    })();
    let verb = if approve { "approved" } else { "denied" };
    match r {
        Ok(_) => format!(
            "{verb} plan {} ({} in session {})",
            p.plan_ref, p.principal, p.session
        ),
        Err(e) => format!("plan {}: {e}", p.plan_ref),
    }
}

/// The human's answer to a waiting plan, if `line` is one.
pub fn answer(line: &str) -> Option<bool> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(true),
        "n" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(v: Value) -> Value {
        match v {
            Value::String(_) => json!({"$": "str", "v": v}),
            Value::Bool(_) => json!({"$": "bool", "v": v}),
            Value::Null => json!({"$": "null"}),
            _ => json!({"$": "int", "v": v}),
        }
    }

    fn exec_event(conn: u64, head: &str, more: u64, code: Option<&str>) -> Value {
        json!({"channel": "session.exec", "seq": 1, "ts": 0, "payload": {"$": "record", "v": {
            "session": t(json!("s")), "ref": t(json!("out:4")), "src": t(json!("6 * 7")),
            "principal": t(json!("agent")), "client": t(json!("mcp: claude-code")),
            "conn": t(json!(conn)), "ok": t(json!(code.is_none())),
            "status": t(Value::Null), "code": code.map_or(t(Value::Null), |c| t(json!(c))),
            "head": t(json!(head)), "more": t(json!(more)),
        }}})
    }

    #[test]
    fn an_exec_shows_who_what_and_how_it_ended() {
        let f = Filter {
            session: Some("s".into()),
            own_conn: Some(3),
            width: 80,
        };
        let Some(Item::Text(text)) = f.item(&exec_event(9, "42", 0, None)) else {
            panic!("no text");
        };
        assert_eq!(
            text,
            "── [s] agent (mcp: claude-code) · out:4\n› 6 * 7\n42\nok"
        );
        // Its own execs are not echoed; other sessions are not shown.
        assert_eq!(f.item(&exec_event(3, "42", 0, None)), None);
        let other = Filter {
            session: Some("t".into()),
            own_conn: None,
            width: 80,
        };
        assert_eq!(other.item(&exec_event(9, "42", 0, None)), None);
        let Some(Item::Text(text)) = f.item(&exec_event(9, "1\n2", 5, None)) else {
            panic!("no text");
        };
        assert!(text.contains("… 5 more lines, shoal_get out:4"), "{text}");
        let Some(Item::Text(text)) =
            f.item(&exec_event(9, "division by zero", 0, Some("div_zero")))
        else {
            panic!("no text");
        };
        assert!(
            text.contains("error[div_zero]: division by zero\nfailed"),
            "{text}"
        );
    }

    #[test]
    fn a_pending_plan_names_source_effects_and_reversibility() {
        let ev = json!({"channel": "approval", "payload": {
            "event": "pending", "plan_ref": "p1", "session": "s", "principal": "agent",
            "cwd": "/x", "src": "rm a.txt", "effects": [{"kind": "fs_delete", "path": "/x/a.txt"}],
            "reversibility": "reversible"}});
        let f = Filter {
            session: None,
            own_conn: None,
            width: 80,
        };
        let Some(Item::Pending(p)) = f.item(&ev) else {
            panic!("no plan");
        };
        assert!(p.text.contains("src:     rm a.txt"), "{}", p.text);
        assert!(p.text.contains("cwd:     /x"), "{}", p.text);
        assert!(p.text.contains("effects: fs_delete /x/a.txt"), "{}", p.text);
        assert!(p.text.contains("reversibility: reversible"), "{}", p.text);
        assert_eq!(answer(" Y "), Some(true));
        assert_eq!(answer("no"), Some(false));
        assert_eq!(answer("yes please"), None);
        assert_eq!(fit("abcdef", 4), "abc…");
    }
}
