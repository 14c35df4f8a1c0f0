//! Denial of service by token principals through the daemon's shared limits: two tokens
//! together taking every place of `max_sessions` (the local user could open no session),
//! and one token holding `session_memory` in each of its sessions (16 × 1 GiB by default).
//! Judged by the replies and by the daemon's own accounting in `daemon.status`, never by
//! time or RSS.

use super::*;

/// Two token principals (agent:t, agent:u) that may only evaluate.
fn principals(proj: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let keys = "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true";
    principal("agent:t", keys, &pj, &pj, &pj) + &principal("agent:u", keys, &pj, &pj, &pj)
}

/// A `-32040` `resource_limit` refusal naming `key`.
fn refused_at(r: &Value, key: &str) -> bool {
    r["error"]["code"] == json!(-32040) && r["error"]["data"]["limit"] == json!(key)
}

/// An exec that failed with `resource_limit` (`-32040`).
fn out_of_memory(r: &Value) -> bool {
    r["error"]["code"] == json!(-32040) && r["error"]["data"]["code"] == json!("resource_limit")
}

/// The typed int of an exec reply's `result` (or of `ok`'s answer).
fn int(v: i64) -> Value {
    json!({"$": "int", "v": v})
}

/// Build a string of 16 × 2^`doublings` bytes in the binding `name`; its length.
fn build(name: &str, doublings: u32) -> String {
    format!("var {name} = \"xxxxxxxxxxxxxxxx\"; for i in 0..{doublings} {{ {name} = {name} + {name} }}; {name}.len()")
}

/// `daemon.status` over `c`.
fn status(c: &mut Conn) -> Value {
    c.ok("daemon.status", json!({}))
}

/// A session's row of a status.
fn row<'a>(st: &'a Value, session: &str) -> &'a Value {
    st["sessions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == json!(session)))
        .unwrap_or_else(|| panic!("no row {session}: {st}"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Tokens together fill `max_sessions` only up to the local user's reserve: after both
/// took every session they could, the local user still opens sessions (the whole reserve)
/// and works in them; past the reserve `max_sessions` holds for it too.
#[test]
fn tokens_together_leave_the_local_users_sessions() {
    // 10 places, 4 of them the local user's; each token may own 5 (together 10).
    let a = Arena::start(
        |proj, _| {
            "[limits]\nmax_sessions = 10\nmax_sessions_per_principal = 5\n".to_string()
                + &principals(proj)
        },
        &[],
    );
    let mut held = Vec::new();
    let mut made = Vec::new();
    let mut refusals = Vec::new();
    for who in ["agent:t", "agent:u"] {
        let tok = create_token(&a.root, who);
        let mut c = a.d.conn();
        let mut count = 0;
        for i in 0..10 {
            let r = c.attach_token(&format!("fill-{who}-{i}"), &tok);
            if r.get("error").is_some() {
                refusals.push(r);
                break;
            }
            count += 1;
        }
        made.push(count);
        // The connection stays: its sessions are held.
        held.push(c);
    }
    assert_eq!(made, [5, 1], "tokens together hold 6 of 10: {refusals:?}");
    assert!(
        refused_at(&refusals[0], "max_sessions_per_principal"),
        "{}",
        refusals[0]
    );
    assert!(refused_at(&refusals[1], "max_sessions"), "{}", refusals[1]);

    // The local user: the 4 places left are its own, and it works in them.
    let mut local = Vec::new();
    for i in 0..4 {
        let mut c = a.d.conn();
        let r = c.call(
            "session.attach",
            json!({"session": format!("user-{i}"), "client": {"kind": "redteam", "tty": false}}),
        );
        assert!(r.get("error").is_none(), "local user-{i}: {r}");
        local.push(c);
    }
    let r = local[0].ok("exec", json!({"src": "1 + 1"}));
    assert_eq!(r["value"], int(2), "{r}");
    // max_sessions itself still holds for everyone.
    let mut c = a.d.conn();
    let r = c.call(
        "session.attach",
        json!({"session": "user-past-max", "client": {"kind": "redteam", "tty": false}}),
    );
    assert!(refused_at(&r, "max_sessions"), "{r}");
    let st = status(&mut local[0]);
    assert_eq!(st["limits"]["sessions"]["used"], json!(10), "{st}");
}

/// A token's sessions share one `principal_memory`: a value built in session A (within
/// `session_memory`) stays counted, so the same build in session B fails there, counted
/// in `daemon.status`; the token can still drop B's half-built binding (and the count
/// follows), and the local user, not bound by it, still builds as much.
#[test]
fn a_tokens_sessions_share_one_memory_budget() {
    let a = Arena::start(
        |proj, _| {
            // principal_memory is unset: it defaults to session_memory (64 MiB).
            "[limits]\nsession_memory = 67108864\n".to_string() + &principals(proj)
        },
        &[],
    );
    // A string of 16 MiB (its last doubling needs ~40 MiB: within session_memory).
    const BUILT: u64 = 16 << 20;
    // The count follows allocations, not values: a few KiB either way.
    const SLACK: u64 = 1 << 20;
    let built = int(BUILT as i64);
    let tok = create_token(&a.root, "agent:u");
    let mut sa = a.d.conn();
    assert!(sa.attach_token("mem-a", &tok).get("error").is_none());
    // Two execs of session A: each within session_memory; A keeps 32 MiB.
    for name in ["a1", "a2"] {
        let r = sa.call("exec", json!({"src": build(name, 20)}));
        assert_eq!(
            r["result"]["value"], built,
            "A builds within its limits: {r}"
        );
    }
    // B: the same build (alone within session_memory) does not fit beside A's values.
    let mut sb = a.d.conn();
    assert!(sb.attach_token("mem-b", &tok).get("error").is_none());
    let r = sb.call("exec", json!({"src": build("big", 20)}));
    assert!(out_of_memory(&r), "B's build fails: {r}");
    // A's values are counted.
    let st = status(&mut sa);
    let quota = &st["limits"]["principal_memory"];
    assert_eq!(quota["max"], json!(64 << 20), "{st}");
    assert!(
        n(&quota["used"]) >= 2 * BUILT - SLACK,
        "A's values are counted: {st}"
    );
    assert!(
        n(&row(&st, "mem-a@agent:u")["memory"]) >= 2 * BUILT - SLACK,
        "{st}"
    );

    // What B's exec left bound stays counted, and A's too.
    let st = status(&mut sb);
    let left_in_b = n(&row(&st, "mem-b@agent:u")["memory"]);
    assert!(
        left_in_b >= SLACK,
        "B's half-built binding is counted: {st}"
    );
    assert!(
        n(&st["limits"]["principal_memory"]["used"]) >= 2 * BUILT + left_in_b - 2 * SLACK,
        "{st}"
    );
    // The daemon answers the token; dropping B's binding gives its count back.
    let r = sb.ok("exec", json!({"src": "big = \"\"; 1 + 1"}));
    assert_eq!(r["value"], int(2), "{r}");
    // The worker runs execs in order: once this one answers, the last is wholly done
    // (the copy of the bindings kept for background tasks is refreshed after a reply).
    sb.ok("exec", json!({"src": "1 + 1"}));
    let st = status(&mut sb);
    assert!(
        n(&row(&st, "mem-b@agent:u")["memory"]) < left_in_b / 2,
        "B's count follows the drop: {st}"
    );
    let r = sa.ok("exec", json!({"src": "a1.len()"}));
    assert_eq!(r["value"], built, "{r}");

    // The local user is not bound by principal_memory: it builds beside the token's.
    let mut home = a.kernel(None, "home", None);
    let r = home.exec(&build("mine", 20));
    assert_eq!(r["result"]["value"], built, "{r}");
    let st = status(&mut home.conn);
    assert!(n(&row(&st, "home")["memory"]) >= BUILT - SLACK, "{st}");
    assert_eq!(
        st["limits"]["principal_memory"]["key"],
        json!("principal_memory"),
        "{st}"
    );
}
