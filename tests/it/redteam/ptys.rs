//! A PTY in a token's session: whoever opens it, its program runs under the
//! session owner's sandbox, so the local user attached to the token's
//! session cannot hand the token (which drives the PTY with `pty.send`) an
//! unconfined shell.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
    read.extend(pj.iter().cloned());
    let keys = "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true";
    principal("agent:pty", keys, &read, &pj, &pj)
}

/// Open `sh` on a PTY on `opener`, have `driver` type into it, and read the
/// screen once the command's end marker shows.
fn typed(opener: &mut Agent, driver: &mut Agent, line: &str) -> Value {
    let open = opener
        .conn
        .call("pty.open", json!({"cmd": "sh", "args": []}));
    let id = open["result"]["pty_id"].clone();
    assert!(!id.is_null(), "{}: pty.open: {open}", opener.label());
    let sent = driver.conn.call(
        "pty.send",
        json!({"pty_id": id, "input": format!("{line}; echo DONE-$((40+2))\n")}),
    );
    assert!(sent.get("error").is_none(), "pty.send: {sent}");
    let screen = driver.conn.call(
        "pty.read",
        json!({"pty_id": id, "wait_for": "DONE-42", "timeout_ms": 10000}),
    );
    opener.conn.call("pty.close", json!({"pty_id": id}));
    screen
}

#[test]
fn a_pty_the_local_user_opens_in_a_tokens_session_is_confined() {
    let a = Arena::start(config, &[]);
    let stolen = a.p("stolen");
    let line = format!(
        "cat {} > {}; cat {}",
        a.secret.display(),
        stolen.display(),
        a.secret.display()
    );
    // Control: in its own session the local user's PTY reads the secret.
    let mut local_own = a.kernel(None, "mine", None);
    let mut local_own2 = a.kernel(None, "mine", None);
    let screen = typed(&mut local_own, &mut local_own2, &line);
    assert!(leaks(&screen, &a.marker), "control: {screen}");
    std::fs::remove_file(&stolen).expect("control wrote the copy");

    // The attack: the token's session, a PTY the local user opens, the token types.
    let mut agent = a.kernel(Some("agent:pty"), "agent-s", None);
    let mut local = a.kernel(None, "agent-s@agent:pty", None);
    let screen = typed(&mut local, &mut agent, &line);
    let copied = std::fs::read_to_string(&stolen).unwrap_or_default();
    assert!(
        leaks(&screen, "DONE-42") && !leaks(&screen, &a.marker) && !copied.contains(&a.marker),
        "ESCAPED: the token drove an unconfined PTY of its session: {screen} / {copied:?}"
    );
}

/// `pty.open` of a path outside the token's grants answers as it does for a
/// path that does not exist: it tells nothing of what is there.
#[test]
fn pty_open_tells_nothing_of_paths_outside_the_grants() {
    let a = Arena::start(config, &[]);
    let tool = a.out("tool");
    std::fs::write(&tool, "#!/bin/sh\necho hi\n").expect("tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let missing = a.out("missing");
    let mut agent = a.kernel(Some("agent:pty"), "probe", None);
    let mut answer = |p: &Path| {
        let r = agent
            .conn
            .call("pty.open", json!({"cmd": p.display().to_string()}));
        let text = r["error"]
            .to_string()
            .replace(&p.display().to_string(), "PATH");
        (r.get("result").is_some(), text)
    };
    let (there, missing_answer) = (answer(&tool), answer(&missing));
    assert!(
        !there.0 && there == missing_answer,
        "ESCAPED: pty.open tells an outside file from a missing one: {there:?} / {missing_answer:?}"
    );
    // Control: the local user runs the outside tool.
    let mut local = a.kernel(None, "probe-local", None);
    let r = local
        .conn
        .call("pty.open", json!({"cmd": tool.display().to_string()}));
    assert!(r.get("result").is_some(), "control: {r}");
}
