//! `shoal token create|list|revoke` (the token file in the state dir) and
//! `shoal plan list|show|approve|deny` (the human's side of approvals,
//! through the daemon: every session's plans, as the local user).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::client::{connect, Client};
use super::output;
use shoal_policy::tokens::Store;
use shoal_proto::kernel::{AttachParams, DecideParams, KernelRequest, PlanRef, PlanRefParams};

fn store(state_dir: Option<PathBuf>) -> Store {
    Store::new(shoal_base::paths::state_dir(state_dir.as_deref()).join("tokens.json"))
}

fn ns_text(ns: Option<i64>) -> String {
    ns.map(shoal_policy::plan::rfc3339)
        .unwrap_or_else(|| "-".into())
}

/// `shoal token create PRINCIPAL [--ttl D]`: the token alone on the last line.
/// `shoal token create PRINCIPAL` or `--local` (`principal` `None`: the local user).
pub fn token_create(
    state_dir: Option<PathBuf>,
    principal: Option<&str>,
    ttl: Option<String>,
) -> i32 {
    let ttl = match ttl.as_deref().map(shoal_policy::parse_duration).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("shoal token create: --ttl: {e}");
            return 2;
        }
    };
    let store = store(state_dir);
    let made = match principal {
        Some(p) => store.create(p, ttl),
        None => store.create_local(ttl),
    };
    match made {
        Ok((e, bearer)) => {
            eprintln!(
                "created token {} for {} (expires {}); the secret is shown once:",
                e.id,
                e.principal,
                ns_text(e.expires_ns)
            );
            output::line(&bearer);
            0
        }
        Err(e) => {
            eprintln!("shoal token create: {e}");
            1
        }
    }
}

pub fn token_list(state_dir: Option<PathBuf>, as_json: bool) -> i32 {
    match store(state_dir).list() {
        Ok(list) => {
            if as_json {
                let v: Vec<Value> = list
                    .iter()
                    .map(|e| {
                        json!({"id": e.id, "principal": e.principal, "created": ns_text(Some(e.created_ns)),
                               "expires": e.expires_ns.map(shoal_policy::plan::rfc3339),
                               "revoked": e.revoked_ns.map(shoal_policy::plan::rfc3339)})
                    })
                    .collect();
                output::line(&json!({"tokens": v}).to_string());
                return 0;
            }
            output::line(&format!(
                "{:<16}  {:<24}  {:<8}  EXPIRES",
                "ID", "PRINCIPAL", "STATE"
            ));
            let now = shoal_journal::now_ns();
            for e in list {
                let state = if e.revoked_ns.is_some() {
                    "revoked"
                } else if e.expires_ns.is_some_and(|x| x <= now) {
                    "expired"
                } else {
                    "active"
                };
                output::line(&format!(
                    "{:<16}  {:<24}  {:<8}  {}",
                    e.id,
                    e.principal,
                    state,
                    ns_text(e.expires_ns)
                ));
            }
            0
        }
        Err(e) => {
            eprintln!("shoal token list: {e}");
            1
        }
    }
}

/// `shoal token revoke ID|TOKEN`: written to the token file, then told to the
/// daemon on `socket` if one runs (`leash.tokens_changed`): when the principal
/// holds no other valid token, the daemon ends its sessions and processes.
pub fn token_revoke(state_dir: Option<PathBuf>, socket: Option<PathBuf>, what: &str) -> i32 {
    match store(state_dir).revoke(what) {
        Ok(id) => {
            output::line(&format!("revoked {id}"));
            tell_daemon(socket);
            0
        }
        Err(e) => {
            eprintln!("shoal token revoke: {e}");
            1
        }
    }
}

/// Tell a running daemon that the token file changed; without one there is
/// nothing to end (a daemon reads the file when it starts). No daemon on the
/// socket is said in one line: one on another socket would end the principal's
/// work only at its next call.
fn tell_daemon(socket: Option<PathBuf>) {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let Ok(s) = connect(&path) else {
        eprintln!(
            "shoal token revoke: no daemon on {}; a daemon on another socket (--socket) refuses the token on its next call but is not told to end what it runs",
            path.display()
        );
        return;
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    let told = Client::new(s)
        .map_err(|e| e.to_string())
        .and_then(|mut c| call(&mut c, &KernelRequest::TokensChanged));
    match told {
        Ok(r) => {
            let ended: Vec<&str> = r["ended"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !ended.is_empty() {
                let n = r["sessions"].as_array().map_or(0, Vec::len);
                eprintln!(
                    "no valid token left for {}: the daemon ended its work ({n} session{})",
                    ended.join(", "),
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        Err(e) => eprintln!(
            "shoal token revoke: the daemon on {} was not told ({e}); it refuses the token on its next call",
            path.display()
        ),
    }
}

fn client(socket: Option<PathBuf>) -> Result<Client, String> {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let s = connect(&path).map_err(|e| format!("no daemon answers on {}: {e}", path.display()))?;
    Client::new(s).map_err(|e| e.to_string())
}

fn call(c: &mut Client, req: &KernelRequest) -> Result<Value, String> {
    match c.call(req) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!(
            "{} ({})",
            e.0["message"].as_str().unwrap_or("error"),
            e.0["code"]
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Attach `c` to `session` as the CLI.
fn attach(c: &mut Client, session: &str) -> Result<Value, String> {
    let a = AttachParams::client(Some(session), "cli", false);
    call(c, &KernelRequest::Attach(a))
}

/// Every plan of every session (or of one), as the local user sees them.
fn all_plans(c: &mut Client, only: Option<&str>) -> Result<Vec<Value>, String> {
    // Any attachment works for session.list; the first names the sessions.
    let names: Vec<String> = match only {
        Some(s) => vec![s.to_string()],
        None => {
            attach(c, "default")?;
            let l = call(c, &KernelRequest::SessionList)?;
            l["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect()
        }
    };
    let mut out = Vec::new();
    for n in names {
        attach(c, &n)?;
        let l = call(c, &KernelRequest::PlanList)?;
        out.extend(l["plans"].as_array().cloned().unwrap_or_default());
    }
    Ok(out)
}

fn run(f: impl FnOnce() -> Result<(), String>, what: &str) -> i32 {
    match f() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shoal plan {what}: {e}");
            1
        }
    }
}

pub fn plan_list(socket: Option<PathBuf>, session: Option<String>, as_json: bool) -> i32 {
    run(
        || {
            let mut c = client(socket)?;
            let plans = all_plans(&mut c, session.as_deref())?;
            if as_json {
                output::line(&json!({"plans": plans}).to_string());
                return Ok(());
            }
            output::line(&format!(
                "{:<21}  {:<12}  {:<20}  {:<17}  {:<8}  EFFECTS",
                "PLAN", "SESSION", "PRINCIPAL", "VERDICT", "STATE"
            ));
            for p in plans {
                let kinds: Vec<&str> = p["effects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e["kind"].as_str())
                    .collect();
                output::line(&format!(
                    "{:<21}  {:<12}  {:<20}  {:<17}  {:<8}  {}",
                    p["plan_ref"].as_str().unwrap_or(""),
                    p["session"].as_str().unwrap_or(""),
                    p["principal"].as_str().unwrap_or(""),
                    p["verdict"].as_str().unwrap_or(""),
                    p["approval"].as_str().unwrap_or(""),
                    kinds.join(",")
                ));
            }
            Ok(())
        },
        "list",
    )
}

/// The session holding `plan_ref` (the client is left attached to it).
fn find(c: &mut Client, plan_ref: &str) -> Result<Value, String> {
    let plans = all_plans(c, None)?;
    let p = plans
        .into_iter()
        .find(|p| p["plan_ref"] == plan_ref)
        .ok_or_else(|| format!("no live plan {plan_ref} in any session"))?;
    let s = p["session"].as_str().unwrap_or("default").to_string();
    attach(c, &s)?;
    Ok(p)
}

pub fn plan_show(socket: Option<PathBuf>, plan_ref: &str, as_json: bool) -> i32 {
    run(
        || {
            let mut c = client(socket)?;
            find(&mut c, plan_ref)?;
            let p = call(
                &mut c,
                &KernelRequest::PlanGet(PlanRefParams {
                    plan_ref: PlanRef(plan_ref.into()),
                }),
            )?;
            if as_json {
                output::line(&p.to_string());
                return Ok(());
            }
            let mut s = String::new();
            for k in [
                "plan_ref",
                "session",
                "principal",
                "cwd",
                "verdict",
                "approval",
                "reversibility",
                "expires",
                "reason",
            ] {
                if let Some(v) = p.get(k).filter(|v| !v.is_null()) {
                    s.push_str(&format!(
                        "{k}: {}\n",
                        v.as_str().map_or_else(|| v.to_string(), str::to_string)
                    ));
                }
            }
            s.push_str("effects:\n");
            for e in p["effects"].as_array().into_iter().flatten() {
                s.push_str(&format!("  {e}\n"));
            }
            let files = p["files"].as_array().into_iter().flatten();
            let files: Vec<&str> = files.filter_map(|f| f.as_str()).collect();
            if !files.is_empty() {
                // The approval covers these as they are now.
                s.push_str("files (bound by content):\n");
                for f in files {
                    s.push_str(&format!("  {f}\n"));
                }
            }
            s.push_str("src:\n");
            for l in p["src"].as_str().unwrap_or("").lines() {
                s.push_str(&format!("  {l}\n"));
            }
            output::text(&s);
            Ok(())
        },
        "show",
    )
}

pub fn plan_decide(socket: Option<PathBuf>, plan_ref: &str, approve: bool) -> i32 {
    let what = if approve { "approve" } else { "deny" };
    run(
        || {
            let mut c = client(socket)?;
            find(&mut c, plan_ref)?;
            let decide = DecideParams {
                plan_ref: PlanRef(plan_ref.into()),
                via: None,
            };
            let req = if approve {
                KernelRequest::PlanApprove(decide)
            } else {
                KernelRequest::PlanDeny(decide)
            };
            let p = call(&mut c, &req)?;
            output::line(&format!(
                "{} {plan_ref} ({} in session {})",
                if approve { "approved" } else { "denied" },
                p["principal"].as_str().unwrap_or(""),
                p["session"].as_str().unwrap_or("")
            ));
            Ok(())
        },
        what,
    )
}
