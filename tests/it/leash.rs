//! Leash through the real daemon (raw kernel and MCP frames): plans and
//! their verdicts, owner binding, expiry, a policy-bound token principal
//! confined by Landlock, refusals and revocation (the design's Leash scenarios,
//! and scenario items 29–30).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

fn plan(c: &mut Conn, src: &str) -> Value {
    c.ok("exec", json!({"src": src, "mode": "plan"}))
}

fn code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {r}"))
}

fn kinds(p: &Value) -> Vec<String> {
    p["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

fn write_config(root: &Root, text: &str) -> PathBuf {
    let p = root.path().join("shoal.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn plans_reversibility_refs_and_approved_mode() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("p");
    let dir = root.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    c.ok("exec", json!({"src": format!("cd {}", dir.display())}));
    std::fs::write(dir.join("a.txt"), "a").unwrap();

    // 46, 47: reversibility from real effects.
    for (src, rev, k) in [
        ("rm a.txt", "reversible", vec!["fs_delete"]),
        (
            "mv a.txt b.txt",
            "reversible",
            vec!["fs_read", "fs_write", "fs_delete"],
        ),
        ("1 + 2", "reversible", vec![]),
        ("ls", "reversible", vec!["fs_read"]),
        ("sh { echo hi }", "irreversible", vec!["opaque"]),
        ("sh { rm -rf a.txt }", "irreversible", vec!["opaque"]),
    ] {
        let p = plan(&mut c, src);
        assert_eq!(p["reversibility"], json!(rev), "{src}: {p}");
        assert_eq!(kinds(&p), k, "{src}: {p}");
        assert!(p["plan_ref"].as_str().unwrap().starts_with("plan:"));
        assert!(p["expires"].as_str().unwrap().ends_with('Z'), "{p}");
    }
    let p = plan(&mut c, "rm a.txt");
    assert_eq!(
        p["effects"][0]["paths"],
        json!([dir.join("a.txt").display().to_string()])
    );
    // The local user's built-in policy is permissive (docs/rules.md §21).
    assert_eq!(plan(&mut c, "sh { echo hi }")["verdict"], json!("allow"));

    // 50: refs are unique per source, applying runs that source.
    let first = plan(&mut c, "sh { echo FIRST }");
    let second = plan(&mut c, "sh { echo SECOND }");
    assert_ne!(first["plan_ref"], second["plan_ref"]);
    let r = c.ok("plan.apply", json!({"plan_ref": first["plan_ref"]}));
    assert!(r["render"].as_str().unwrap().contains("FIRST"), "{r}");
    assert!(!dir.join("b.txt").exists());

    // 55: explain stores nothing and runs nothing.
    let e = c.ok("explain", json!({"src": "rm gone.txt"}));
    assert_eq!(e["reversibility"], json!("reversible"));
    assert_eq!(e["verdict"], json!("allow"));
    // 56: unknown plan.
    let r = c.call("plan.apply", json!({"plan_ref": "plan:0000000000000000"}));
    assert_eq!(code(&r), -32012, "{r}");
    // 30: mode approved is no bypass.
    let r = c.call(
        "exec",
        json!({"src": "sh { echo FIRST }", "mode": "approved"}),
    );
    assert_eq!(code(&r), -32010, "{r}");
    let r = c.call(
        "exec",
        json!({"src": "sh { echo OTHER }", "mode": "approved", "plan_ref": first["plan_ref"]}),
    );
    assert_eq!(code(&r), -32010, "{r}");
    // A plan applies once: planned again, the same source runs once more.
    plan(&mut c, "sh { echo FIRST }");
    let r = c.ok(
        "exec",
        json!({"src": "sh { echo FIRST }", "mode": "approved", "plan_ref": first["plan_ref"]}),
    );
    assert!(r["render"].as_str().unwrap().contains("FIRST"), "{r}");
    // plan.get: the stored plan with its source.
    let g = c.ok("plan.get", json!({"plan_ref": first["plan_ref"]}));
    assert_eq!(g["src"], json!("sh { echo FIRST }"));
    assert_eq!(g["approval_pending"], json!(false));
    let l = c.ok("plan.list", json!({}));
    assert!(l["plans"].as_array().unwrap().len() >= 3);
    // 47: a planned run is journaled with its effects.
    let j = c.ok("journal.query", json!({"limit": 10}));
    let entries = j
        .as_array()
        .cloned()
        .unwrap_or_else(|| j["entries"].as_array().cloned().unwrap_or_default());
    let sh = entries
        .iter()
        .find(|e| e["src"] == json!("sh { echo FIRST }"))
        .unwrap_or_else(|| panic!("{j}"));
    assert_eq!(sh["opaque"], json!(true), "{sh}");
}

#[test]
fn owner_binding_and_expiry() {
    let root = Root::new();
    let cfg = write_config(&root, "[plans]\nttl = \"2s\"\n");
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let mut a = d.conn();
    let mut b = d.conn();
    a.attach("a");
    b.attach("b");
    let src = "sh { echo same }";
    let pa = plan(&mut a, src);
    let pb = plan(&mut b, src);
    assert_ne!(
        pa["plan_ref"], pb["plan_ref"],
        "two sessions never share a plan"
    );
    let ra = pa["plan_ref"].clone();
    for (m, p) in [
        ("plan.get", json!({"plan_ref": ra})),
        ("plan.apply", json!({"plan_ref": ra})),
        ("cap.request", json!({"plan_ref": ra, "effects": []})),
    ] {
        let r = b.call(m, p);
        assert!(
            r.get("error").is_some(),
            "{m} of another session's plan: {r}"
        );
    }
    assert!(b.ok("plan.list", json!({}))["plans"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["plan_ref"] != ra));
    // Still the owner's.
    a.ok("plan.get", json!({"plan_ref": ra}));
    // plans.ttl = 2s: then -32012.
    eventually("the plan expires", Duration::from_secs(10), || {
        let r = a.call("plan.get", json!({"plan_ref": ra}));
        (r.get("error").is_some()).then(|| assert_eq!(code(&r), -32012, "{r}"))
    });
    let r = a.call("plan.apply", json!({"plan_ref": ra}));
    assert_eq!(code(&r), -32012, "{r}");
}

fn policy_root() -> (Root, PathBuf, PathBuf, PathBuf) {
    let root = Root::new();
    let project = root.path().join("project");
    let outside = root.path().join("outside.txt");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(&outside, "keep\n").unwrap();
    let cfg = write_config(
        &root,
        &format!(
            r#"
[policy.principal."agent:p"]
opaque = "ask"
auto_apply = "in-grant"
journal_read = false

[policy.principal."agent:p".fs]
read = ["/**"]
write = ["{p}/**"]
delete = ["{p}/**"]
"#,
            p = project.display()
        ),
    );
    (root, project, outside, cfg)
}

#[test]
fn policy_bound_token_principal_with_landlock() {
    let (root, project, outside, cfg) = policy_root();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let t = create_token(&root, "agent:p");
    let mut c = d.conn();
    let r = c.attach_token("agent", &t);
    let att = &r["result"];
    assert_eq!(att["principal"], json!("agent:p"), "{r}");
    assert_eq!(att["caps_enforced"], json!(true), "{r}");
    assert_eq!(att["caps"]["opaque"], json!("approval_required"));

    // In the grants: runs.
    let x = project.join("x");
    c.ok("exec", json!({"src": format!("touch {}", x.display())}));
    assert!(x.exists());
    // Outside: refused by verdict, the file intact.
    let r = c.call("exec", json!({"src": format!("rm {}", outside.display())}));
    assert_eq!(code(&r), -32010, "{r}");
    assert!(r["error"]["data"]["effects"].is_array());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
    // 29: a run the policy asks about is -32011 with the effects.
    let src = format!("sh {{ echo x > {} }}", outside.display());
    let r = c.call("exec", json!({"src": src}));
    assert_eq!(code(&r), -32011, "{r}");
    assert_eq!(r["error"]["data"]["effects"], json!([{"kind": "opaque"}]));

    // Planned: approval required; cap.request leaves the opaque part to a human.
    let p = plan(&mut c, &src);
    assert_eq!(p["verdict"], json!("approval_required"), "{p}");
    assert_eq!(p["approval_pending"], json!(true));
    let pr = p["plan_ref"].as_str().unwrap().to_string();
    let r = c.call("plan.apply", json!({"plan_ref": pr}));
    assert_eq!(code(&r), -32011, "{r}");
    let g = c.ok(
        "cap.request",
        json!({"plan_ref": pr, "effects": ["fs.write"]}),
    );
    assert_eq!(g["grant"], json!("approval_pending"));
    assert_eq!(g["uncovered_effects"], json!(["opaque"]));
    let g = c.ok("cap.request", json!({"plan_ref": pr, "effects": []}));
    assert_eq!(g["grant"], json!("approval_pending"), "{g}");
    assert_eq!(g["uncovered_effects"], json!(["opaque"]));
    // The agent cannot approve its own plan.
    let r = c.call("plan.approve", json!({"plan_ref": pr}));
    assert_eq!(code(&r), -32010, "{r}");

    // The human approves with the CLI.
    let sock = root.socket();
    let sock = sock.to_str().unwrap();
    let (st, out, err) = run(&root, &["plan", "list", "--socket", sock], &[]);
    assert_eq!(st, 0, "{err}");
    assert!(out.contains(&pr) && out.contains("agent:p"), "{out}");
    let (st, out, err) = run(&root, &["plan", "show", &pr, "--socket", sock], &[]);
    assert_eq!(st, 0, "{err}");
    assert!(
        out.contains("approval_required") && out.contains("echo x"),
        "{out}"
    );
    let (st, out, err) = run(&root, &["plan", "approve", &pr, "--socket", sock], &[]);
    assert_eq!(st, 0, "{out}{err}");
    // Applied, the write fails under Landlock: the file is intact.
    let r = c.call("plan.apply", json!({"plan_ref": pr}));
    let text = r.to_string();
    assert!(kernel_refused(&text), "{r}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
    // Inside the grants the same shape of plan writes.
    let inside = project.join("in.txt");
    let p = plan(&mut c, &format!("sh {{ echo y > {} }}", inside.display()));
    let pr2 = p["plan_ref"].as_str().unwrap().to_string();
    let (st, _, err) = run(&root, &["plan", "approve", &pr2, "--socket", sock], &[]);
    assert_eq!(st, 0, "{err}");
    c.ok("plan.apply", json!({"plan_ref": pr2}));
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "y\n");
    // A denied plan can no longer be applied.
    let p = plan(&mut c, "sh { echo denied }");
    let pr3 = p["plan_ref"].as_str().unwrap().to_string();
    let (st, _, err) = run(&root, &["plan", "deny", &pr3, "--socket", sock], &[]);
    assert_eq!(st, 0, "{err}");
    let r = c.call("plan.apply", json!({"plan_ref": pr3}));
    assert_eq!(code(&r), -32010, "{r}");

    // docs/protocol.md §6: this principal sees only its own journal entries.
    let mut local = d.conn();
    local.attach("agent");
    local.ok("exec", json!({"src": "echo local"}));
    let j = c.ok("journal.query", json!({"limit": 100}));
    let all = j
        .as_array()
        .cloned()
        .unwrap_or_else(|| j["entries"].as_array().cloned().unwrap_or_default());
    assert!(!all.is_empty(), "{j}");
    assert!(
        all.iter().all(|e| e["principal"] == json!("agent:p")),
        "{j}"
    );

    // shoal status says whether the grants are enforced.
    let (st, out, err) = run(&root, &["status", "--socket", sock], &[]);
    assert_eq!(st, 0, "{err}");
    assert!(out.contains("agent:p (caps_enforced true"), "{out}");
}

#[test]
fn refusals_and_revocation() {
    let (root, _project, _outside, cfg) = policy_root();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let mut c = d.conn();
    // A bad token.
    let r = c.attach_token("x", "not-a-token");
    assert_eq!(code(&r), -32030, "{r}");
    // No policy section: refused exec, plan apply and PTY open, naming the section.
    let t = create_token(&root, "agent:none");
    let r = c.attach_token("none", &t);
    assert_eq!(r["result"]["principal"], json!("agent:none"), "{r}");
    let section = "[policy.principal.\"agent:none\"]";
    let r = c.call("exec", json!({"src": "1 + 2"}));
    assert_eq!(code(&r), -32010, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(section),
        "{r}"
    );
    let p = plan(&mut c, "echo hi");
    assert_eq!(p["verdict"], json!("deny"));
    let r = c.call("plan.apply", json!({"plan_ref": p["plan_ref"]}));
    assert_eq!(code(&r), -32010, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(section),
        "{r}"
    );
    let r = c.call("pty.open", json!({"cmd": "sh"}));
    assert_eq!(code(&r), -32010, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(section),
        "{r}"
    );
    assert_eq!(c.ok("pty.list", json!({}))["ptys"], json!([]));

    // Revocation: the next call is refused, no restart.
    let t2 = create_token(&root, "agent:p");
    let mut c2 = d.conn();
    c2.attach_token("p", &t2);
    c2.ok("exec", json!({"src": "echo ok"}));
    let (st, out, _) = run(&root, &["token", "list"], &[]);
    assert_eq!(st, 0);
    assert!(out.contains("agent:p") && out.contains("active"), "{out}");
    assert!(!out.contains(&t2), "secrets are never listed");
    let (st, _, err) = run(&root, &["token", "revoke", &t2], &[]);
    assert_eq!(st, 0, "{err}");
    let r = c2.call("exec", json!({"src": "echo ok"}));
    assert_eq!(code(&r), -32030, "{r}");
    let r = c2.attach_token("p", &t2);
    assert_eq!(code(&r), -32030, "{r}");
    // The file: 0600, hashed.
    let f = root.state_dir().join("tokens.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!std::fs::read_to_string(&f).unwrap().contains(&t));
}

fn mcp_tool(c: &mut Conn, name: &str, args: Value) -> Value {
    c.ok("tools/call", json!({"name": name, "arguments": args}))
}

#[test]
fn mcp_tools_and_plan_resources() {
    let (root, _project, outside, cfg) = policy_root();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let t = create_token(&root, "agent:p");
    let mut m = d.conn();
    m.ok("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    m.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": "mcp", "token": t}}));
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let src = format!("sh {{ echo x > {} }}", outside.display());
    let r = mcp_tool(&mut m, "shoal_plan", json!({"src": src}));
    assert_eq!(r["isError"], json!(false), "{r}");
    let p = &r["structuredContent"];
    assert_eq!(p["verdict"], json!("approval_required"), "{r}");
    let pr = p["plan_ref"].as_str().unwrap().to_string();
    let hex = pr.strip_prefix("plan:").unwrap();
    let r = mcp_tool(&mut m, "shoal_apply", json!({"plan_ref": pr}));
    assert_eq!(r["isError"], json!(true));
    assert_eq!(r["structuredContent"]["code"], json!(-32011), "{r}");
    let r = mcp_tool(
        &mut m,
        "shoal_cap_request",
        json!({"plan_ref": pr, "effects": ["opaque"]}),
    );
    assert_eq!(
        r["structuredContent"]["grant"],
        json!("approval_pending"),
        "{r}"
    );
    // 53, 54: shoal://plan/HEX is listed and readable; unknown is an error.
    let l = m.ok("resources/list", json!({}));
    let uri = format!("shoal://plan/{hex}");
    assert!(l.to_string().contains(&uri), "{l}");
    let r = m.ok("resources/read", json!({"uri": uri}));
    let text = r["contents"][0]["text"].as_str().unwrap();
    let stored: Value = serde_json::from_str(text).unwrap();
    assert_eq!(stored["plan_ref"], json!(pr));
    assert_eq!(stored["reversibility"], json!("irreversible"));
    assert!(stored.get("ast").is_some() && stored["src"] == json!(src));
    let r = m.call(
        "resources/read",
        json!({"uri": "shoal://plan/deadbeefdeadbeef"}),
    );
    assert!(r.get("error").is_some(), "{r}");
    // A run the policy denies, as a tool error.
    let r = mcp_tool(
        &mut m,
        "shoal_exec",
        json!({"src": format!("rm {}", outside.display())}),
    );
    assert_eq!(r["structuredContent"]["code"], json!(-32010), "{r}");
    assert!(Path::new(&outside).exists());
}

#[test]
fn policy_keys_are_checked_with_positions() {
    let root = Root::new();
    for (text, want) in [
        ("[policy.principal.\"a\"]\nopaque = \"maybe\"\n", ":2:"),
        (
            "[policy.principal.\"a\"]\nnet_connect = [\"nohost\"]\n",
            ":2:",
        ),
        ("[policy.principal.\"a\"]\nfs.read = [\"rel/**\"]\n", ":2:"),
        ("[policy.principal.\"a\"]\n\nbogus = 1\n", ":3:"),
        ("[plans]\nttl = \"forever\"\n", ":2:"),
    ] {
        let p = write_config(&root, text);
        let (st, out, err) = run(&root, &["config", "check", p.to_str().unwrap()], &[]);
        assert_eq!(st, 1, "{text}: {out}");
        assert!(err.contains(&format!("shoal.toml{want}")), "{text}: {err}");
    }
}

#[test]
fn adapted_commands_plan_with_concrete_effects() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let repo = root.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("HOME", root.path())
            .output()
            .expect("git");
        assert!(st.status.success(), "{args:?}: {st:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://github.com/example/repo.git",
    ]);
    let mut c = d.conn();
    c.attach("g");
    c.ok("exec", json!({"src": format!("cd {}", repo.display())}));
    // Adapters feed the planner: `git push origin main` has no opaque effect.
    let p = plan(&mut c, "git push origin main");
    let k = kinds(&p);
    assert!(!k.contains(&"opaque".to_string()), "{p}");
    assert!(
        p["effects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == json!("net_connect")
                && e["host"] == json!("github.com")
                && e["port"] == json!(443)),
        "{p}"
    );
    let p = plan(&mut c, "git status");
    assert!(kinds(&p).contains(&"fs_read".to_string()), "{p}");
    assert!(kinds(&p).contains(&"proc_spawn".to_string()), "{p}");
    assert_eq!(p["reversibility"], json!("reversible"), "{p}");
    // An unknown binary stays opaque.
    assert_eq!(
        kinds(&plan(&mut c, "some-unknown-tool --x")),
        vec!["opaque"]
    );
}

/// A TCP connect to `port` from Python, printing `TCP_OK` or `TCP_NO` (spelt
/// apart in the source, so only the output contains the words).
/// A write the kernel refused: Landlock ("Permission denied") or, in the
/// child's namespaces, a read-only mount or a path that is not there.
fn kernel_refused(text: &str) -> bool {
    ["ermission denied", "Read-only file system", "No such file"]
        .iter()
        .any(|m| text.contains(m))
}

fn connect_probe(port: u16) -> String {
    format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)' 2>&1 && echo TCP\"\"_OK || echo TCP\"\"_NO"
    )
}

/// Python `code` (single-quote free), printing `PY_OK` or `PY_NO`.
fn py_probe(code: &str) -> String {
    format!("sh {{ python3 -c '{code}' 2>&1 && echo PY\"\"_OK || echo PY\"\"_NO }}")
}

#[test]
fn hermetic_principals_get_no_tcp() {
    let root = Root::new();
    let project = root.path().join("project");
    let outside = root.path().join("outside.txt");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(&outside, "keep\n").unwrap();
    let section = |name: &str, hermetic: bool| {
        format!(
            r#"
[policy.principal."{name}"]
opaque = "allow"
auto_apply = "in-grant"
hermetic = {hermetic}

[policy.principal."{name}".fs]
read = ["/**"]
write = ["{p}/**"]
delete = ["{p}/**"]
"#,
            p = project.display()
        )
    };
    let cfg = write_config(
        &root,
        &(section("agent:h", true) + &section("agent:n", false)),
    );
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    // The listener the probes aim at (never accepted: the backlog answers).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("sh {{ {} }}", connect_probe(port));

    let mut n = d.conn();
    let r = n.attach_token("plain", &create_token(&root, "agent:n"));
    assert_eq!(r["result"]["principal"], json!("agent:n"), "{r}");
    let out = n.ok("exec", json!({"src": probe})).to_string();
    assert!(
        out.contains("TCP_OK"),
        "a non-hermetic principal connects: {out}"
    );

    // UDP: reachable for a non-hermetic principal, sealed off for a hermetic
    // one (the socket filter); the daemon's own unix socket is out of reach
    // for both (every token principal gets the unix socket filter).
    let udp = py_probe(&format!(
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", {port}))"
    ));
    let unix = py_probe(&format!(
        "import socket; socket.socket(socket.AF_UNIX).connect(\"{}\")",
        root.socket().display()
    ));
    let out = n.ok("exec", json!({"src": udp})).to_string();
    assert!(out.contains("PY_OK"), "{udp}: {out}");
    let out = n.ok("exec", json!({"src": unix})).to_string();
    assert!(
        out.contains("PY_NO") && out.contains("Permission denied"),
        "{unix}: {out}"
    );

    let mut h = d.conn();
    let r = h.attach_token("sealed", &create_token(&root, "agent:h"));
    assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");
    // Foreground: the connect fails at the OS level.
    let out = h.ok("exec", json!({"src": probe})).to_string();
    assert!(
        out.contains("TCP_NO") && out.contains("Permission denied") && !out.contains("TCP_OK"),
        "{out}"
    );
    for probe in [&udp, &unix] {
        let out = h.ok("exec", json!({"src": probe})).to_string();
        assert!(
            out.contains("PY_NO") && out.contains("Permission denied") && !out.contains("PY_OK"),
            "{probe}: {out}"
        );
    }
    // Writes outside the grants still fail; inside they work.
    let src = format!("sh {{ echo x > {} }}", outside.display());
    let text = h.call("exec", json!({"src": src})).to_string();
    assert!(kernel_refused(&text), "{text}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
    let inside = project.join("in.txt");
    h.ok(
        "exec",
        json!({"src": format!("sh {{ echo y > {} }}", inside.display())}),
    );
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "y\n");
    // A background task is sealed the same way.
    let r = h.ok("exec", json!({"src": probe, "background": true}));
    let task = r["task"].as_str().unwrap().to_string();
    let rec = h.ok("task.await", json!({"task": task, "timeout_ms": 20000}));
    assert_eq!(rec["state"], "completed", "{rec}");
    let v = h.ok(
        "value.get",
        json!({"ref": rec["result_ref"], "format": "render"}),
    );
    let text = v.to_string();
    assert!(text.contains("TCP_NO") && !text.contains("TCP_OK"), "{v}");
    // And a program on a PTY.
    let screen = h
        .pty_screen_after(&connect_probe(port), 120, 10)
        .to_string();
    assert!(
        screen.contains("TCP_NO") && !screen.contains("TCP_OK"),
        "{screen}"
    );

    // shoal status says what is sealed.
    let sock = root.socket();
    let (st, out, err) = run(
        &root,
        &["status", "--json", "--socket", sock.to_str().unwrap()],
        &[],
    );
    assert_eq!(st, 0, "{err}");
    assert!(
        out.contains("\"net\":\"sealed\"") || out.contains("\"net\": \"sealed\""),
        "{out}"
    );
    drop(listener);
}
