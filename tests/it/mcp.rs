//! MCP over the daemon socket (raw frames) and through the `shoal mcp` shim.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

fn init(c: &mut Conn, version: &str) -> Value {
    c.ok("initialize", json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}))
}

#[test]
fn handshake_negotiation_and_unknown_methods() {
    let root = Root::new();
    let d = Daemon::start(&root);
    // server/discover as the very first frame: answered at once (and it is
    // MCP); without the 2026 envelope it does not settle the era.
    let mut c = d.conn();
    let r = c.call("server/discover", json!({}));
    assert!(r["result"]["supportedVersions"].is_array(), "{r}");
    for (asked, got) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let r = init(&mut c, asked);
        assert_eq!(r["protocolVersion"], json!(got), "{asked}");
        assert_eq!(r["serverInfo"]["name"], json!("shoal"));
        assert!(r["capabilities"]["tools"].is_object());
    }
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(c.ok("ping", json!({})), json!({}));
    assert_eq!(
        init(&mut c, "2025-06-18")["capabilities"]["resources"]["subscribe"],
        json!(true)
    );
    assert!(c.ok("resources/list", json!({}))["resources"].is_array());
    let r = c.call("prompts/list", json!({}));
    assert_eq!(r["result"]["prompts"][0]["name"], json!("shoal_language"));
    let r = c.call("logging/setLevel", json!({"level": "info"}));
    assert_eq!(r["error"]["code"], json!(-32601));
    c.send_raw(b"{oops\n");
    assert_eq!(c.recv()["error"]["code"], json!(-32700));

    let tools = c.ok("tools/list", json!({}));
    let list = tools["tools"].as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "shoal_exec",
            "shoal_get",
            "shoal_journal",
            "shoal_pty_open",
            "shoal_pty_send",
            "shoal_pty_read",
            "shoal_pty_resize",
            "shoal_pty_close",
            "shoal_pty_list",
            "shoal_cancel",
            "shoal_plan",
            "shoal_apply",
            "shoal_cap_request"
        ],
        "only working tools are advertised"
    );
    for t in list {
        assert_eq!(t["outputSchema"]["type"], json!("object"), "{t}");
        assert_eq!(
            t["inputSchema"]["additionalProperties"],
            json!(false),
            "{t}"
        );
    }
    let t = &list[0];
    assert_eq!(t["name"], json!("shoal_exec"));
    assert_eq!(t["inputSchema"]["type"], json!("object"));
    assert_eq!(t["inputSchema"]["required"], json!(["src"]));
    assert_eq!(t["outputSchema"]["type"], json!("object"));
}

#[test]
fn tool_argument_validation_and_errors() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    init(&mut c, "2025-06-18");
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": 7, "extra": true}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["code"], json!(-32602));
    let errors = sc["data"]["errors"].as_array().unwrap();
    assert!(errors.iter().any(|e| e["path"] == json!("/src")), "{sc}");
    assert!(errors.iter().all(|e| e["message"].is_string()));
    assert_eq!(r["content"][0]["type"], json!("text"));
    let r = c.ok("tools/call", json!({"name": "shoal_exec"}));
    assert_eq!(r["isError"], json!(true));
    assert!(
        r["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("src"),
        "{r}"
    );
    let r = c.call("tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1", "background": true}}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(r["structuredContent"]["task"].is_string(), "{r}");
}

#[test]
fn shoal_exec_folds_into_a_call_tool_result() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": "agent"}}));
    init(&mut c, "2025-11-25");
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "6 * 7"}}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["value"], json!({"$": "int", "v": 42}));
    assert_eq!(sc["ref"], json!("out:1"));
    assert_eq!(sc["uri"], json!("shoal://out/1"));
    assert_eq!(r["content"][0], json!({"type": "text", "text": "42"}));
    assert_eq!(r["content"][1]["type"], json!("resource_link"));
    assert_eq!(r["content"][1]["uri"], json!("shoal://out/1"));
    assert!(r["content"][1]["name"].is_string());
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1 / 0"}}),
    );
    assert_eq!(r["isError"], json!(true));
    assert_eq!(r["structuredContent"]["code"], json!(-32002));
    assert_eq!(r["structuredContent"]["data"]["code"], json!("div_zero"));
    // The session named by shoal/attach holds the values.
    let mut k = d.conn();
    k.attach("agent");
    assert_eq!(
        k.ok("value.get", json!({"ref": "out:1"}))["value"],
        json!({"$": "int", "v": 42})
    );
}

struct Shim {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
}

impl Shim {
    fn start(root: &Root, args: &[&str], env: &[(&str, &str)]) -> Shim {
        let mut cmd = root.command();
        cmd.arg("mcp").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        Shim { child, stdin, out }
    }
    fn send(&mut self, v: &Value) {
        let mut b = serde_json::to_vec(v).unwrap();
        b.push(b'\n');
        self.stdin.as_mut().unwrap().write_all(&b).unwrap();
    }
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.out.read_line(&mut line).unwrap() > 0,
            "shim stdout closed"
        );
        serde_json::from_str(&line).unwrap()
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize_frame(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

#[test]
fn shim_autostarts_pipes_and_exits_zero_on_stdin_close() {
    let root = Root::new();
    let sock = root.path().join("run/shoal/shoal.sock");
    assert!(!sock.exists());
    // Default socket path from XDG_RUNTIME_DIR; the daemon is started detached.
    let mut shim = Shim::start(&root, &["--session", "mine"], &[]);
    shim.send(&initialize_frame(1));
    let r = shim.recv();
    assert_eq!(r["result"]["protocolVersion"], json!("2025-06-18"), "{r}");
    shim.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    shim.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert_eq!(
        shim.recv()["result"]["tools"][0]["name"],
        json!("shoal_exec")
    );
    // A request followed by stdin close still gets its answer, then exit 0.
    shim.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    drop(shim.stdin.take());
    assert_eq!(shim.recv()["id"], json!(3));
    let st = wait_timeout(&mut shim.child, Duration::from_secs(5)).expect("shim exits");
    assert_eq!(st.code(), Some(0));

    let pids = daemons_on(&sock);
    assert_eq!(pids.len(), 1, "one daemon: {pids:?}");
    // The session named by --session exists.
    let mut c = Conn::open(&sock);
    c.attach("probe");
    let list = c.ok("session.list", json!({}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"probe"), "{names:?}");
    // The detached daemon is in its own session.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pids[0])).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    assert_eq!(
        fields[3],
        pids[0].to_string(),
        "daemon is a session leader: {stat}"
    );
    for p in pids {
        kill_pid(p);
    }
}

#[test]
fn racing_shims_start_one_daemon() {
    let root = Root::new();
    let sock = root.socket();
    let s = sock.to_str().unwrap().to_string();
    let mut shims: Vec<Shim> = (0..3)
        .map(|_| Shim::start(&root, &["--socket", &s], &[]))
        .collect();
    for (i, sh) in shims.iter_mut().enumerate() {
        sh.send(&initialize_frame(i as u64 + 1));
    }
    for (i, sh) in shims.iter_mut().enumerate() {
        assert_eq!(sh.recv()["id"], json!(i as u64 + 1));
    }
    let pids = eventually("daemon list settles", Duration::from_secs(5), || {
        let p = daemons_on(&sock);
        (p.len() == 1).then_some(p)
    });
    drop(shims);
    for p in pids {
        kill_pid(p);
    }
}

#[test]
fn shim_without_daemon_and_autostart_disabled_fails_with_one_line() {
    let root = Root::new();
    let sock = root.socket();
    let out = root
        .command()
        .args(["mcp", "--socket", sock.to_str().unwrap()])
        .env("SHOAL_NO_AUTOSTART", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("shoal mcp: cannot reach the daemon"),
        "{err}"
    );
    assert!(!sock.exists());
}

#[test]
fn exec_command_runs_through_the_daemon() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let s = d.socket.to_str().unwrap().to_string();
    let (code, out, err) = run(&root, &["exec", "6 * 7", "--socket", &s], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "42");
    let (code, out, _) = run(&root, &["exec", "6 * 7", "--json", "--socket", &s], &[]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["value"], json!({"$": "int", "v": 42}));
    assert_eq!(v["ref"], json!("out:2"));
    let (code, _, err) = run(&root, &["exec", "1 / 0", "--socket", &s], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("div_zero"), "{err}");
}

/// A request without `params` (absent, not `{}`), its response.
fn call_bare(c: &mut Conn, id: u64, method: &str) -> Value {
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method}));
    let r = c.recv();
    assert_eq!(r["id"], json!(id), "{r}");
    r
}

/// The `-32602` of a method whose params do not read, with the path named.
fn bad_params(c: &mut Conn, method: &str, params: Value, path: &str) {
    let r = c.call(method, params.clone());
    assert_eq!(r["error"]["code"], json!(-32602), "{method} {params}: {r}");
    assert_eq!(r["error"]["data"]["path"], json!(path), "{method}: {r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.starts_with(&format!("invalid params for {method}: ")),
        "{method}: {m}"
    );
    if path != "." {
        assert!(m.contains(&format!("{path}: ")), "{method}: {m}");
    }
}

#[test]
fn methods_read_their_params_in_one_step() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    // Lenient where clients are: members the server does not read, `_meta`,
    // absent params.
    let r = c.ok(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}, "sampling": {}},
               "clientInfo": {"name": "t", "version": "0", "title": "T"}, "_meta": {"progressToken": 1}, "later": 1}),
    );
    assert_eq!(r["protocolVersion"], json!("2025-06-18"), "{r}");
    assert_eq!(call_bare(&mut c, 1, "ping")["result"], json!({}));
    assert!(call_bare(&mut c, 2, "resources/list")["result"]["resources"].is_array());
    assert_eq!(
        call_bare(&mut c, 3, "initialize")["result"]["protocolVersion"],
        json!("2025-11-25")
    );
    c.ok("ping", json!({"_meta": {"x": 1}}));
    // A member of the wrong type, or a missing one: -32602 naming its path.
    bad_params(
        &mut c,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "clientInfo": {"name": 7}}),
        "clientInfo.name",
    );
    bad_params(
        &mut c,
        "initialize",
        json!({"protocolVersion": 2025}),
        "protocolVersion",
    );
    bad_params(&mut c, "prompts/get", json!({}), ".");
    bad_params(&mut c, "prompts/get", json!({"name": 5}), "name");
    bad_params(
        &mut c,
        "completion/complete",
        json!({"ref": {"type": "ref/tool"}, "argument": {"name": "n", "value": ""}}),
        "ref.type",
    );
    bad_params(
        &mut c,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "shoal_language"}, "argument": {"name": "x", "value": 1}}),
        "argument.value",
    );
    bad_params(&mut c, "resources/list", json!({"cursor": 5}), "cursor");
    bad_params(&mut c, "resources/read", json!({}), ".");
    bad_params(
        &mut c,
        "resources/read",
        json!({"uri": ["shoal://out/1"]}),
        "uri",
    );
    bad_params(&mut c, "resources/subscribe", json!({"uri": 1}), "uri");
    bad_params(&mut c, "resources/unsubscribe", json!({}), ".");
    // The tasks' params and the tools/call envelope (a bad argument stays
    // the tool's isError result).
    let mut m = d.mcp_legacy("s");
    bad_params(&mut m, "tasks/get", json!({}), ".");
    bad_params(&mut m, "tasks/get", json!({"taskId": 5}), "taskId");
    bad_params(&mut m, "tasks/cancel", json!({"taskId": null}), "taskId");
    bad_params(&mut m, "tasks/result", json!({"task_id": "task:1"}), ".");
    bad_params(&mut m, "tasks/list", json!({"cursor": 1}), "cursor");
    bad_params(&mut m, "tools/call", json!({"name": 5}), "name");
    bad_params(&mut m, "tools/call", json!({"arguments": {}}), ".");
    bad_params(&mut m, "tools/call", json!(["shoal_exec"]), ".");
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": [1], "_meta": {"progressToken": "p"}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1 + 1"}, "task": null}),
    );
    assert_eq!(
        r["structuredContent"]["value"],
        json!({"$": "int", "v": 2}),
        "{r}"
    );
    // What reads still answers as before.
    let r = c.ok(
        "prompts/get",
        json!({"name": "shoal_language", "arguments": {}}),
    );
    assert_eq!(r["messages"][0]["content"]["type"], json!("text"));
    assert_eq!(
        c.ok("resources/unsubscribe", json!({"uri": "shoal://journal"})),
        json!({})
    );
}
