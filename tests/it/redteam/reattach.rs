//! Attacks on who a connection is: a token principal's connection that sends `shoal/attach`
//! again (without its token, or naming the local user's session) to become the local uid,
//! over Streamable HTTP (the bridge's socket connection has the daemon's own uid) and on
//! the socket after its token was revoked. Judged by the file the write would make and by
//! the secret in the replies; the control is a local-uid token doing the same.

use super::*;
use crate::http_client::{request, serve_in, Client, Served};

/// agent:rt: opaque denied, fs read/write/delete = `<root>/proj`.
fn config(root: &Path) -> String {
    let proj = root.join("proj");
    std::fs::create_dir_all(&proj).expect("proj");
    project_only("agent:rt", &proj)
}

/// A notification POSTed in `c`'s HTTP session (the body as written); its status.
fn notify_raw(s: &Served, c: &Client, body: &str) -> u16 {
    let auth = format!("Bearer {}", c.token);
    let h = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", c.session.as_str()),
    ];
    request(&c.agent, "POST", &s.url, &h, Some(body)).status
}

/// Re-attach without a token (naming the local user's session), then write outside the
/// grants and read the secret: what the client sees, as one string.
fn reattach_then_escape(s: &Served, c: &mut Client, target: &Path, secret: &Path) -> String {
    let _ = notify_raw(
        s,
        c,
        &json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": "home"}})
            .to_string(),
    );
    // The same with a second `method` key: the bridge checks the last, a parser the first.
    let _ = notify_raw(
        s,
        c,
        r#"{"jsonrpc":"2.0","method":"shoal/attach","method":"notifications/x","params":{"session":"home"}}"#,
    );
    let w = c.exec(&format!("\"x\".save({})", lit(target)));
    let r = c.exec(&format!("cat({})", lit(secret)));
    format!("{w}{r}")
}

#[test]
fn an_http_token_cannot_attach_again_as_the_local_user() {
    let s = serve_in(config);
    let secret = s.root.path().join("secret");
    let mark = marker("H");
    std::fs::write(&secret, &mark).expect("secret");
    let tok = create_token(&s.root, "agent:rt");

    // Control: a local-uid token's client does write and read.
    let mut local = Client::new(&s);
    let made = s.root.path().join("made-by-local");
    let seen = reattach_then_escape(&s, &mut local, &made, &secret);
    assert!(made.exists(), "control: the local uid writes: {seen}");
    assert!(seen.contains(&mark), "control: the local uid reads: {seen}");

    // The attack: the token's HTTP session re-attaches without its token, before and
    // after its first call.
    for first_call in [false, true] {
        let mut agent = Client::with(&s, &tok, json!({}));
        if first_call {
            let _ = agent.exec("1 + 1");
        }
        let target = s.root.path().join(format!("pwned-{first_call}"));
        let seen = reattach_then_escape(&s, &mut agent, &target, &secret);
        assert!(
            !target.exists(),
            "ESCAPED: the token wrote as the local uid"
        );
        assert!(
            !seen.contains(&mark),
            "ESCAPED: the token read the secret: {seen}"
        );
    }
}

#[test]
fn a_socket_connection_keeps_its_token_and_a_revoked_one_stays_refused() {
    let a = Arena::start(config_with, &[]);
    let tok = create_token(&a.root, "agent:rt");
    let call = |c: &mut Conn, src: String| {
        c.call(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": {"src": src}}),
        )
        .to_string()
    };
    // Attach again before any call, tokenless, naming the local user's session.
    let mut c = mcp_conn(&a.d, "rt", Some(&tok), &a.proj, None, false);
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": "home"}}));
    let target = a.out("pwned-socket");
    let r = call(&mut c, format!("\"x\".save({})", lit(&target)));
    assert!(
        !target.exists(),
        "ESCAPED: wrote outside after a second attach: {r}"
    );
    let r = call(&mut c, format!("cat({})", lit(&a.secret)));
    assert!(!r.contains(&a.marker), "ESCAPED: read the secret: {r}");

    // Control: the token writes in its project.
    let mut c = mcp_conn(&a.d, "rt2", Some(&tok), &a.proj, None, false);
    let inside = a.p("inside");
    let r = call(&mut c, format!("\"x\".save({})", lit(&inside)));
    assert!(inside.exists(), "control: {r}");
    // Revoke the token, then attach again without it: nothing runs any more.
    let (code, _, err) = run(&a.root, &["token", "revoke", &tok], &[]);
    assert_eq!(code, 0, "{err}");
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {}}));
    let after = a.p("after-revoke");
    let r = call(&mut c, format!("\"x\".save({})", lit(&after)));
    assert!(
        !after.exists(),
        "ESCAPED: a revoked token still writes: {r}"
    );
}

fn config_with(proj: &Path, _root: &Path) -> String {
    project_only("agent:rt", proj)
}
