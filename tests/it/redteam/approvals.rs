//! Attacks on approvals and on the daemon's own files: a plan under `auto_apply = "never"`
//! approved by the agent's own `cap.request`, an approved plan applied twice (and replayed
//! with `mode: "approved"`), the elicitation approval answered by the very client that asked;
//! the state dir and journal readable by others, and the token visible in `shoal mcp`'s argv.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

use super::*;

/// agent:never: in-grant writes, but `auto_apply = "never"`; agent:ask: opaque needs a human
/// (`opaque = "ask"`), the system dirs readable so `sh` can run.
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut sys = pj.clone();
    sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    principal(
        "agent:never",
        "opaque = \"deny\"\nauto_apply = \"never\"\nsession_write = true",
        &pj,
        &pj,
        &pj,
    ) + &principal(
        "agent:ask",
        "opaque = \"ask\"\nauto_apply = \"in-grant\"\nsession_write = true",
        &sys,
        &pj,
        &pj,
    )
}

/// The plan_ref of a `plan` reply (kernel result or MCP structuredContent).
fn plan_ref(r: &Value) -> Option<String> {
    [
        &r["result"]["plan_ref"],
        &r["result"]["structuredContent"]["plan_ref"],
    ]
    .iter()
    .find_map(|v| v.as_str().map(str::to_string))
}

pub(super) fn plan(ag: &mut Agent, src: &str) -> String {
    let r = if ag.mcp {
        ag.conn.call(
            "tools/call",
            json!({"name": "shoal_plan", "arguments": {"src": src}}),
        )
    } else {
        ag.conn.call("exec", json!({"src": src, "mode": "plan"}))
    };
    plan_ref(&r).unwrap_or_else(|| panic!("no plan for {src}: {r}"))
}

pub(super) fn apply(ag: &mut Agent, pr: &str) -> Value {
    ag.tool("plan.apply", "shoal_apply", json!({"plan_ref": pr}))
}

/// `shoal plan approve REF`, as the human does it.
pub(super) fn human_approves(a: &Arena, pr: &str) {
    let (st, out, err) = run(
        &a.root,
        &["plan", "approve", pr, "--socket", &a.sock()],
        &[],
    );
    assert_eq!(st, 0, "shoal plan approve {pr}: {out}{err}");
}

#[test]
fn approvals_come_from_a_human_and_apply_once() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    let mut k = a.kernel(Some("agent:never"), "never", None);
    let mut m = a.mcp(Some("agent:never"), "never-mcp", None);
    for ag in [&mut k, &mut m] {
        let via = if ag.mcp { "mcp" } else { "kernel" };
        // 12: auto_apply = "never" and the agent's own cap.request.
        let target = a.p(&format!("n12-{via}"));
        let src = format!("touch {}", target.display());
        let pr = plan(ag, &src);
        ag.tool(
            "cap.request",
            "shoal_cap_request",
            json!({"plan_ref": pr, "effects": ["fs.write"]}),
        );
        ag.tool("cap.request", "shoal_cap_request", json!({"plan_ref": pr}));
        apply(ag, &pr);
        rep.judge(
            &format!("12 auto_apply never: cap.request then apply [{via}]"),
            target.exists().then(|| "the plan ran".to_string()),
        );
        let _ = std::fs::remove_file(&target);
        let r = ag.conn.call("plan.approve", json!({"plan_ref": pr}));
        apply(ag, &pr);
        rep.judge(
            &format!("12 the agent approves its own plan [{via}]"),
            target.exists().then(|| clip(&r.to_string())),
        );
        // The control: the human approves, the plan runs once.
        let _ = std::fs::remove_file(&target);
        human_approves(&a, &pr);
        let r = apply(ag, &pr);
        rep.control(
            &format!("12 a human-approved plan applies [{via}]"),
            target.exists(),
            &r.to_string(),
        );
        // 12: an approved plan applies again and again.
        let _ = std::fs::remove_file(&target);
        apply(ag, &pr);
        rep.judge(
            &format!("12 an approved plan applied a second time [{via}]"),
            target.exists().then(|| "it ran again".to_string()),
        );
        let _ = std::fs::remove_file(&target);
        if !ag.mcp {
            ag.conn.call(
                "exec",
                json!({"src": src, "mode": "approved", "plan_ref": pr}),
            );
            rep.judge(
                "12 an applied plan replayed with mode approved [kernel]",
                target.exists().then(|| "it ran again".to_string()),
            );
            let _ = std::fs::remove_file(&target);
        }
    }

    // 13: the elicitation approval answered by the client that asked.
    let tok = create_token(&a.root, "agent:ask");
    let mut c = mcp_conn(&a.d, "ask", Some(&tok), &a.proj, None, true);
    let target = a.p("e13");
    let src = format!("sh {{ echo x > {} }}", target.display());
    let r = c.call(
        "tools/call",
        json!({"name": "shoal_plan", "arguments": {"src": src}}),
    );
    let pr = plan_ref(&r).unwrap_or_else(|| panic!("no plan: {r}"));
    c.send(&json!({"jsonrpc": "2.0", "id": 913, "method": "tools/call",
        "params": {"name": "shoal_cap_request", "arguments": {"plan_ref": pr}}}));
    let mut answered = Vec::new();
    loop {
        let f = c.recv();
        if f["method"] == json!("elicitation/create") {
            // The agent's own client says yes.
            c.send(&json!({"jsonrpc": "2.0", "id": f["id"],
                "result": {"action": "accept", "content": {"approve": true}}}));
            answered.push(f);
            continue;
        }
        if f["id"] == json!(913) {
            break;
        }
    }
    c.call(
        "tools/call",
        json!({"name": "shoal_apply", "arguments": {"plan_ref": pr}}),
    );
    rep.judge(
        "13 elicitation accepted by the asking client, then apply [mcp]",
        target
            .exists()
            .then(|| format!("ran after {} self-answered elicitation(s)", answered.len())),
    );
    human_approves(&a, &pr);
    let r = c.call(
        "tools/call",
        json!({"name": "shoal_apply", "arguments": {"plan_ref": pr}}),
    );
    rep.control(
        "13 a human-approved opaque plan applies",
        target.exists(),
        &r.to_string(),
    );
    rep.finish("approvals");
}

/// Mode bits of `p` others (group, world) have.
fn others_bits(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o077
}

/// `shoal mcp` with `args` and `env`: a handshake and one `shoal_exec` of `src`; (the
/// reply to it, whether the token appeared in its argv, its stderr).
fn shim(
    a: &Arena,
    args: &[&str],
    env: &[(&str, &str)],
    token: &str,
    src: &str,
) -> (Value, bool, String) {
    let mut cmd = a.root.command();
    cmd.arg("mcp")
        .arg("--socket")
        .arg(a.root.socket())
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .current_dir(&a.proj)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shoal mcp");
    let argv = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap_or_default();
    let in_argv = String::from_utf8_lossy(&argv).contains(token);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |v: Value| {
        let mut b = serde_json::to_vec(&v).expect("json");
        b.push(b'\n');
        stdin.write_all(&b).is_ok()
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "redteam", "version": "0"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "shoal_exec", "arguments": {"src": src}}}));
    let mut reply = Value::Null;
    let mut line = String::new();
    while stdout.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
        let f: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        line.clear();
        if f["id"] == json!(2) {
            reply = f;
            break;
        }
    }
    drop(stdin);
    let _ = wait_timeout(&mut child, Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (reply, in_argv, err)
}

#[test]
fn state_files_are_private_and_the_token_stays_out_of_argv() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    let tok = create_token(&a.root, "agent:ask");
    let mut local = a.kernel(None, "files", None);
    local.exec("echo journaled");
    let state = a.root.state_dir();
    for (name, p) in [
        ("16 the state dir", state.clone()),
        ("16 journal.redb", state.join("journal.redb")),
        ("16 tokens.json", state.join("tokens.json")),
    ] {
        let bits = others_bits(&p);
        rep.judge(
            &format!("{name} is private to the user"),
            (bits != 0).then(|| format!("{} has group/other bits {bits:o}", p.display())),
        );
    }
    let tf = a.root.path().join("token-file");
    std::fs::write(&tf, format!("{tok}\n")).expect("token file");
    std::fs::set_permissions(&tf, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // The attacker's view: who else on the box can read the token from ps.
    let probe = "1 + 41";
    let tfs = tf.to_string_lossy().into_owned();
    for (name, args, env) in [
        (
            "16 shoal mcp --token-file",
            vec!["--token-file", tfs.as_str()],
            vec![],
        ),
        (
            "16 shoal mcp with SHOAL_TOKEN",
            vec![],
            vec![("SHOAL_TOKEN", tok.as_str())],
        ),
    ] {
        let (reply, in_argv, err) = shim(&a, &args, &env, &tok, probe);
        let worked = leaks(&reply, "42");
        rep.judge(
            &format!("{name}: no way to pass the token outside argv"),
            (!worked).then(|| clip(&format!("{reply} {err}"))),
        );
        rep.judge(
            &format!("{name}: the token is in argv"),
            in_argv.then(|| "visible in /proc/PID/cmdline".into()),
        );
    }
    // `--token T` still works, and says on stderr that argv is public.
    let (reply, _, err) = shim(&a, &["--token", &tok], &[], &tok, probe);
    rep.control(
        "16 shoal mcp --token still serves",
        leaks(&reply, "42"),
        &format!("{reply} {err}"),
    );
    rep.judge(
        "16 shoal mcp --token T gives no warning that argv is public",
        err.trim().is_empty().then(|| "stderr is empty".to_string()),
    );
    rep.finish("state files and the token");
}
