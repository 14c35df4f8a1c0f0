//! Leash approvals come from a human on a channel the policy allows and
//! apply once; token principals see only the environment `env_read` grants;
//! the state dir is private; `shoal mcp` takes its token from the
//! environment or a private file (docs/rules.md §21). Real daemon, raw
//! kernel and MCP frames; outcomes are judged on disk and in reply text.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::common::*;
use serde_json::{json, Value};

fn code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {r}"))
}

fn config(root: &Root, text: &str) -> PathBuf {
    let p = root.path().join("shoal.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn daemon(root: &Root, cfg: &Path, env: &[(&str, &str)]) -> Daemon {
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        env,
    )
}

fn plan_ref(c: &mut Conn, src: &str) -> (String, Value) {
    let p = c.ok("exec", json!({"src": src, "mode": "plan"}));
    (p["plan_ref"].as_str().unwrap().to_string(), p)
}

/// `shoal plan approve REF` (the human, as the local uid, through the CLI).
fn cli_approve(root: &Root, r: &str) -> (i32, String) {
    let sock = root.socket();
    let (st, out, err) = run(
        root,
        &["plan", "approve", r, "--socket", sock.to_str().unwrap()],
        &[],
    );
    (st, format!("{out}{err}"))
}

/// A daemon whose one policy section is `section(proj)`, and a connection of
/// `principal` (a new token) attached to `session`, in a root with a `proj` directory.
struct Agent {
    root: Root,
    proj: PathBuf,
    _d: Daemon,
    c: Conn,
}

fn agent(principal: &str, session: &str, section: impl Fn(&Path) -> String) -> Agent {
    let root = Root::new();
    let proj = root.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let cfg = config(&root, &section(&proj));
    let d = daemon(&root, &cfg, &[]);
    let tok = create_token(&root, principal);
    let mut c = d.conn();
    assert!(c.attach_token(session, &tok).get("result").is_some());
    Agent {
        root,
        proj,
        _d: d,
        c,
    }
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Approved once (by the CLI), a plan applies once: the second apply is
/// refused and the file shows one run. Planning the same source again needs
/// a new approval.
#[test]
fn an_approved_plan_applies_once() {
    let Agent {
        root,
        proj,
        _d,
        mut c,
    } = agent("agent:once", "once", |proj| {
        format!(
            "[policy.principal.\"agent:once\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n\
             fs.read = [\"/**\"]\nfs.write = [\"{p}/**\"]\n",
            p = proj.display()
        )
    });
    let log = proj.join("log");
    let src = format!("sh {{ echo run >> {} }}", log.display());
    let (r, p) = plan_ref(&mut c, &src);
    assert_eq!(p["verdict"], json!("approval_required"), "{p}");
    let (st, out) = cli_approve(&root, &r);
    assert_eq!(st, 0, "{out}");
    let g = c.ok("plan.get", json!({"plan_ref": r}));
    assert_eq!(g["approved_via"], json!("cli"), "{g}");
    c.ok("plan.apply", json!({"plan_ref": r}));
    assert_eq!(lines(&log), 1);

    for m in ["plan.apply", "cap.request"] {
        let again = c.call(m, json!({"plan_ref": r}));
        assert_eq!(code(&again), -32011, "{m}: {again}");
        assert!(again.to_string().contains("already applied"), "{again}");
    }
    let again = c.call(
        "exec",
        json!({"src": src, "mode": "approved", "plan_ref": r}),
    );
    assert_eq!(code(&again), -32010, "{again}");
    assert_eq!(lines(&log), 1, "the plan ran twice");
    // The CLI cannot approve a used-up plan either.
    let (st, out) = cli_approve(&root, &r);
    assert_ne!(st, 0, "{out}");

    // Planned again: pending, and a new approval applies once. The source names
    // `log`, which the run changed, so the ref (which covers the files a source
    // names) is a new one.
    let (r2, p2) = plan_ref(&mut c, &src);
    assert_ne!(r2, r);
    assert_eq!(p2["approval_pending"], json!(true), "{p2}");
    assert_eq!(code(&c.call("plan.apply", json!({"plan_ref": r2}))), -32011);
    assert_eq!(lines(&log), 1);
    let (st, out) = cli_approve(&root, &r2);
    assert_eq!(st, 0, "{out}");
    c.ok("plan.apply", json!({"plan_ref": r2}));
    assert_eq!(code(&c.call("plan.apply", json!({"plan_ref": r2}))), -32011);
    assert_eq!(lines(&log), 2);
}

/// `auto_apply = "never"`: the agent's own `cap.request` approves nothing,
/// even for effects inside its grants; the CLI's approval makes one apply
/// work. Another local client (not the CLI) may not approve when
/// `approve_via` lists only the CLI (the default).
#[test]
fn auto_apply_never_waits_for_the_cli() {
    let Agent {
        root,
        proj,
        _d: d,
        mut c,
    } = agent("agent:n", "never", |proj| {
        format!(
            "[policy.principal.\"agent:n\"]\nauto_apply = \"never\"\n\
             fs.read = [\"/**\"]\nfs.write = [\"{p}/**\"]\n",
            p = proj.display()
        )
    });
    let f = proj.join("n.txt");
    let (r, p) = plan_ref(&mut c, &format!("touch {}", f.display()));
    assert_eq!(p["verdict"], json!("approval_required"), "{p}");
    for effects in [json!([]), json!(["fs_write", "fs_read"])] {
        let g = c.ok("cap.request", json!({"plan_ref": r, "effects": effects}));
        assert_eq!(g["grant"], json!("approval_pending"), "{g}");
        assert_eq!(g["awaiting"], json!("human"), "{g}");
        assert!(
            !g["uncovered_effects"].as_array().unwrap().is_empty(),
            "{g}"
        );
        assert!(
            g["why"].as_str().unwrap().contains("shoal plan approve"),
            "{g}"
        );
    }
    assert_eq!(code(&c.call("plan.apply", json!({"plan_ref": r}))), -32011);
    assert!(!f.exists());
    // The agent cannot approve; a local client attached otherwise than by
    // the CLI is not a channel this policy allows.
    assert_eq!(
        code(&c.call("plan.approve", json!({"plan_ref": r}))),
        -32010
    );
    let mut local = d.conn();
    local.attach("never@agent:n");
    let a = local.call("plan.approve", json!({"plan_ref": r}));
    assert_eq!(code(&a), -32010, "{a}");
    assert!(a.to_string().contains("approve_via"), "{a}");
    assert_eq!(code(&c.call("plan.apply", json!({"plan_ref": r}))), -32011);
    assert!(!f.exists());

    let (st, out) = cli_approve(&root, &r);
    assert_eq!(st, 0, "{out}");
    c.ok("plan.apply", json!({"plan_ref": r}));
    assert!(f.exists());
    std::fs::remove_file(&f).unwrap();
    assert_eq!(code(&c.call("plan.apply", json!({"plan_ref": r}))), -32011);
    assert!(!f.exists(), "applied twice");
}

/// `approve_via` takes only known channels, checked with file:line:column.
#[test]
fn approve_via_values_are_checked() {
    let root = Root::new();
    let bad = config(
        &root,
        "[policy.principal.\"a\"]\napprove_via = [\"cli\", \"email\"]\n",
    );
    let (st, _, err) = run(&root, &["config", "check", bad.to_str().unwrap()], &[]);
    assert_eq!(st, 1, "{err}");
    assert!(
        err.contains("shoal.toml:2:23:") && err.contains("email"),
        "{err}"
    );
    let ok = config(
        &root,
        "[policy.principal.\"a\"]\napprove_via = [\"cli\", \"elicitation\", \"attach\"]\n",
    );
    let (st, _, err) = run(&root, &["config", "check", ok.to_str().unwrap()], &[]);
    assert_eq!(st, 0, "{err}");
}

/// `approve_via = ["attach"]` lets an attached local client approve; a
/// token principal whose policy does not list `elicitation` is never asked
/// through its own MCP client, and the reply names the CLI.
#[test]
fn approval_channels_follow_approve_via() {
    let root = Root::new();
    let cfg = config(
        &root,
        "[policy.principal.\"agent:att\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n\
         approve_via = [\"attach\"]\n\
         [policy.principal.\"agent:cli\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n",
    );
    let d = daemon(&root, &cfg, &[]);
    let att = create_token(&root, "agent:att");
    let mut c = d.conn();
    c.attach_token("att", &att);
    let (r, _) = plan_ref(&mut c, "sh { echo attach }");
    let mut local = d.conn();
    local.attach("att@agent:att");
    let a = local.ok("plan.approve", json!({"plan_ref": r}));
    assert_eq!(a["approved_via"], json!("attach"), "{a}");
    // attach only: the CLI is not one of this policy's channels.
    let (r2, _) = plan_ref(&mut c, "sh { echo cli }");
    let (st, out) = cli_approve(&root, &r2);
    assert_ne!(st, 0, "{out}");
    assert!(out.contains("approve_via"), "{out}");
    // The refusal's data names the plan and the channels that would do.
    let e = local.call("plan.approve", json!({"plan_ref": r2, "via": "cli"}));
    assert_eq!(
        e["error"]["data"],
        json!({"plan_ref": r2, "approve_via": ["attach"]}),
        "{e}"
    );

    // The default for a token: the CLI only; no elicitation/create is sent.
    let tok = create_token(&root, "agent:cli");
    let mut m = d.conn();
    m.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
        "params": {"session": "el", "token": tok}}));
    m.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "self-approver", "version": "1"}}),
    );
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let p = m.ok(
        "tools/call",
        json!({"name": "shoal_plan", "arguments": {"src": "sh { echo asked }"}}),
    );
    let r3 = p["structuredContent"]["plan_ref"]
        .as_str()
        .unwrap()
        .to_string();
    m.send(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "shoal_cap_request", "arguments": {"plan_ref": r3}}}));
    let reply = m.recv();
    assert_eq!(reply["id"], json!(77), "an elicitation was sent: {reply}");
    let g = &reply["result"]["structuredContent"];
    assert_eq!(g["grant"], json!("approval_pending"), "{reply}");
    assert_eq!(g["elicitation"]["asked"], json!(false), "{reply}");
    assert!(reply.to_string().contains("shoal plan approve"), "{reply}");
    let a = m.ok(
        "tools/call",
        json!({"name": "shoal_apply", "arguments": {"plan_ref": r3}}),
    );
    assert_eq!(a["isError"], json!(true), "{a}");
}

const SECRET: &str = "hunter2-client";
const DAEMON_SECRET: &str = "hunter2-daemon";

/// A token with `env_read = ["HOME"]` reads neither the client's SECRET nor
/// the daemon's by any route (the language, its children, a PTY, the MCP
/// resource); the local uid, in the same environment, does.
#[test]
fn env_read_governs_every_route() {
    let root = Root::new();
    let cfg = config(
        &root,
        "[policy.principal.\"agent:env\"]\nenv_read = [\"HOME\"]\nopaque = \"allow\"\n\
         proc_spawn = [\"*\"]\nauto_apply = \"in-grant\"\nfs.read = [\"/**\"]\n",
    );
    let d = daemon(&root, &cfg, &[("DAEMON_SECRET", DAEMON_SECRET)]);
    let tok = create_token(&root, "agent:env");
    let home = root.path().display().to_string();
    let client_env = json!({"SECRET": SECRET, "HOME": home, "PATH": "/usr/bin:/bin"});
    let mut c = d.conn();
    let a = c.call(
        "session.attach",
        json!({"session": "envs", "token": tok, "env": client_env,
            "client": {"kind": "test", "tty": false}}),
    );
    assert!(a.get("result").is_some(), "{a}");
    // A PTY before the first exec: never the daemon's own environment.
    let p = c.ok(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", "env; echo END; sleep 30"], "cols": 200, "rows": 50}),
    );
    let s = c.ok(
        "pty.read",
        json!({"pty_id": p["pty_id"], "wait_for": "END", "timeout_ms": 10000}),
    );
    c.ok("pty.close", json!({"pty_id": p["pty_id"]}));
    let screen = s.to_string();
    assert!(screen.contains("END"), "{s}");
    assert!(
        !screen.contains(SECRET) && !screen.contains(DAEMON_SECRET),
        "{s}"
    );
    for src in [
        "env.SECRET",
        "let e = env; e.SECRET",
        "let e = env\ne",
        "env",
        "env.keys()",
        "os.env()",
        "env SECRET",
        "\"{env.SECRET}\"",
        "let e = env; e.values()",
        "sh { echo \"[$SECRET][$DAEMON_SECRET]\" }",
        "^env",
        "printenv SECRET",
    ] {
        let r = c.call("exec", json!({"src": src}));
        let text = r.to_string();
        assert!(
            !text.contains(SECRET) && !text.contains(DAEMON_SECRET),
            "{src}: {text}"
        );
    }
    // The granted name reads.
    let r = c.ok("exec", json!({"src": "env.HOME"}));
    assert!(r.to_string().contains(&home), "{r}");

    // The MCP resource shows only the granted names.
    let mut m = d.conn();
    m.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
        "params": {"session": "envm", "token": tok, "env": client_env}}));
    m.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}),
    );
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = m.ok("resources/read", json!({"uri": "shoal://session/env"}));
    let text = r.to_string();
    assert!(!text.contains(SECRET) && !text.contains("SECRET"), "{text}");
    assert!(text.contains("HOME"), "{text}");

    // Control: the local uid sees the variable in the same environment.
    let mut l = d.conn();
    l.ok(
        "session.attach",
        json!({"session": "envl", "env": client_env, "client": {"kind": "test", "tty": false}}),
    );
    let r = l.ok("exec", json!({"src": "env.SECRET"}));
    assert!(r.to_string().contains(SECRET), "{r}");
    let r = l.ok("exec", json!({"src": "sh { echo \"[$SECRET]\" }"}));
    assert!(r.to_string().contains(SECRET), "{r}");
}

/// The state dir and the log dir are 0700; the journal, the token file and
/// the log files 0600, tightened at start when they were looser.
#[test]
fn state_files_are_private() {
    let root = Root::new();
    let state = root.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let check = |state: &Path| {
        assert_eq!(mode(state), 0o700, "state dir");
        assert_eq!(mode(&state.join("logs")), 0o700, "log dir");
        assert_eq!(mode(&state.join("journal.redb")), 0o600, "journal");
        assert_eq!(mode(&state.join("tokens.json")), 0o600, "tokens");
        let logs: Vec<PathBuf> = std::fs::read_dir(state.join("logs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(!logs.is_empty());
        for l in logs {
            assert_eq!(mode(&l), 0o600, "{}", l.display());
        }
    };
    {
        let _d = Daemon::start(&root);
        create_token(&root, "agent:m");
        check(&state);
    }
    for (p, m) in [
        (state.clone(), 0o755),
        (state.join("logs"), 0o755),
        (state.join("journal.redb"), 0o644),
        (state.join("tokens.json"), 0o644),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).unwrap();
    }
    for e in std::fs::read_dir(state.join("logs")).unwrap().flatten() {
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let _d = Daemon::start(&root);
    check(&state);
}

/// Run `shoal mcp ARGS` with `env`, send `frames` and close stdin; the
/// replies and stderr.
fn shim(
    root: &Root,
    args: &[&str],
    env: &[(&str, &str)],
    frames: &[Value],
) -> (i32, Vec<Value>, String) {
    let mut cmd = root.command();
    cmd.arg("mcp").args(args).env("SHOAL_NO_AUTOSTART", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for f in frames {
            // The shim may already have exited (a refused token file).
            let _ = writeln!(stdin, "{f}");
        }
    }
    let out = child.wait_with_output().unwrap();
    let replies = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        out.status.code().unwrap_or(-1),
        replies,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `--token-file` (private) and `SHOAL_TOKEN` attach as the token's
/// principal; a file others can read is refused; `--token` warns.
#[test]
fn shoal_mcp_reads_the_token_privately() {
    let root = Root::new();
    let outside = root.path().join("outside.txt");
    let cfg = config(
        &root,
        "[policy.principal.\"agent:shim\"]\nauto_apply = \"in-grant\"\n",
    );
    let d = daemon(&root, &cfg, &[]);
    let tok = create_token(&root, "agent:shim");
    let sock = d.socket.to_str().unwrap().to_string();
    let frames = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "shoal_exec", "arguments": {"src": "40 + 2"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "shoal_exec", "arguments": {"src": format!("touch {}", outside.display())}}}),
    ];
    let by_id = |replies: &[Value], id: u64| -> Value {
        replies
            .iter()
            .find(|r| r["id"] == json!(id))
            .cloned()
            .unwrap_or_else(|| panic!("no reply {id}: {replies:?}"))
    };
    let file = root.path().join("token");
    std::fs::write(&file, format!("{tok}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file_s = file.to_str().unwrap().to_string();
    for (args, env) in [
        (vec!["--socket", &sock, "--token-file", &file_s], vec![]),
        (vec!["--socket", &sock], vec![("SHOAL_TOKEN", tok.as_str())]),
    ] {
        let (st, replies, err) = shim(&root, &args, &env, &frames);
        assert_eq!(st, 0, "{err}");
        assert!(!err.contains("process list"), "{err}");
        let two = by_id(&replies, 2);
        assert_eq!(two["result"]["isError"], json!(false), "{two}");
        assert!(two.to_string().contains("42"), "{two}");
        // The token's principal, not the local uid: outside its grants.
        let three = by_id(&replies, 3);
        assert_eq!(three["result"]["isError"], json!(true), "{three}");
        assert!(!outside.exists());
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (st, replies, err) = shim(
        &root,
        &["--socket", &sock, "--token-file", &file_s],
        &[],
        &frames,
    );
    assert_ne!(st, 0);
    assert!(replies.is_empty(), "{replies:?}");
    assert!(err.contains("chmod 600"), "{err}");

    let (st, replies, err) = shim(&root, &["--socket", &sock, "--token", &tok], &[], &frames);
    assert_eq!(st, 0, "{err}");
    assert!(
        err.contains("--token puts the token in the process list; use SHOAL_TOKEN or --token-file"),
        "{err}"
    );
    assert_eq!(by_id(&replies, 2)["result"]["isError"], json!(false));
    // A token's alphabet is base64url: one may start with `-` and is still a value.
    let (_, _, err) = shim(
        &root,
        &["--socket", &sock, "--token", "-Inot-a-token"],
        &[],
        &frames,
    );
    assert!(!err.contains("unexpected argument"), "{err}");
}

/// An approved opaque plan of a `"require"` principal whose `proc_spawn` lists its
/// programs may start a program the list does not name, and it runs in the principal's
/// namespaces all the same (it does not see the test's process). The rules' mode and
/// holder key are checked in `namespaces::tests`.
#[test]
fn an_approved_opaque_plan_runs_in_the_principals_namespaces() {
    if !have_tools(
        "an_approved_opaque_plan_runs_in_the_principals_namespaces",
        &["bwrap"],
    ) {
        return;
    }
    let Agent {
        root,
        proj,
        _d,
        mut c,
    } = agent("agent:op", "op", |proj| {
        format!(
            "[policy.principal.\"agent:op\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n\
             namespaces = \"require\"\nproc_spawn = [\"git\"]\n\
             fs.read = [\"/usr/**\", \"/bin/**\", \"/lib/**\", \"/lib64/**\", \"/etc/**\", \"{p}/**\"]\n\
             fs.write = [\"{p}/**\"]\n",
            p = proj.display()
        )
    });
    let seen = proj.join("seen");
    let src = format!(
        "sh -c 'test -e /proc/{me} && echo pid-seen > {s} || echo pid-hidden > {s}'",
        s = seen.display(),
        me = std::process::id()
    );
    // Not on the list: refused until approved.
    let refused = c.call("exec", json!({"src": src}));
    assert_eq!(code(&refused), -32011, "{refused}");
    assert!(!seen.exists());
    let (r, p) = plan_ref(&mut c, &src);
    assert_eq!(p["effects"], json!([{"kind": "opaque"}]), "{p}");
    let (st, out) = cli_approve(&root, &r);
    assert_eq!(st, 0, "{out}");
    let applied = c.ok("plan.apply", json!({"plan_ref": r}));
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap_or_default(),
        "pid-hidden\n",
        "{applied}"
    );
}
