//! Clients as they really are (docs/protocol.md §9), over raw frames: the client's
//! environment and directory reach the session it creates (and the
//! daemon's never do), readable text for UTF-8 bytes, resource errors that
//! carry the kernel's own code, paginated `resources/list`, completion of
//! template arguments, the language card as prompt and resource.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::common::*;
use serde_json::{json, Value};

/// `shoal mcp` started with exactly `env` (plus nothing), as a minimal MCP
/// client starts it.
struct Shim {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    next: u64,
}

impl Shim {
    fn start(root: &Root, args: &[&str], env: &[(&str, &str)]) -> Shim {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .arg("mcp")
            .arg("--socket")
            .arg(root.socket())
            .args(args)
            .current_dir(root.path())
            .env("XDG_STATE_HOME", root.path().join("state"))
            .env("XDG_CONFIG_HOME", root.path().join("config"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn shim");
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut s = Shim {
            child,
            stdin,
            out,
            next: 0,
        };
        s.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}),
        );
        s
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        b.push(b'\n');
        self.stdin.write_all(&b).unwrap();
        loop {
            let mut line = String::new();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "shim closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn exec(&mut self, src: &str) -> Value {
        let r = self.call(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": {"src": src}}),
        );
        r["result"].clone()
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn the_clients_environment_reaches_its_session_and_the_daemons_never_does() {
    let root = Root::new();
    // The daemon is started by another client, with a variable of its own.
    let _d = Daemon::start_with(&root, &root.socket(), &[], &[("DAEMON_ONLY", "1")]);
    let home = root.path().display().to_string();
    let path = std::env::var("PATH").unwrap();
    let mut first = Shim::start(&root, &[], &[("HOME", &home), ("PATH", &path)]);
    let r = first.exec("env.FOO");
    assert_eq!(r["isError"], json!(true), "{r}");
    let r = first.exec("os.env().contains('DAEMON_ONLY')");
    assert_eq!(text(&r), "false", "the daemon's environment leaked: {r}");

    let mut second = Shim::start(
        &root,
        &["--session", "withfoo"],
        &[("HOME", &home), ("PATH", &path), ("FOO", "bar")],
    );
    let r = second.exec("env.FOO == 'bar'");
    assert_eq!(text(&r), "true", "{r}");
    // Exactly the client's: nothing else appears.
    let r = second.exec("os.env().keys().sort()");
    let keys = r["structuredContent"]["value"].to_string();
    for k in ["FOO", "HOME", "PATH", "PWD"] {
        assert!(keys.contains(&format!("\"{k}\"")), "{k} missing: {keys}");
    }
    assert!(!keys.contains("DAEMON_ONLY"), "{keys}");
    // The directory came from the client too.
    let r = second.exec("pwd");
    assert!(text(&r).contains(&home), "{r}");

    // A kernel attach to the existing session keeps its environment and says so.
    let mut c = Conn::open(&root.socket());
    let a = c.ok(
        "session.attach",
        json!({"session": "withfoo", "env": {"FOO": "other"}}),
    );
    assert_eq!(a["created"], json!(false), "{a}");
    assert_eq!(a["env_differs"], json!(true), "{a}");
    let v = c.ok("exec", json!({"src": "env.FOO"}));
    assert_eq!(v["render"], json!("bar"), "{v}");
    // A new session from a kernel attach with env starts with exactly it.
    let a = c.ok(
        "session.attach",
        json!({"session": "k2", "env": {"ONLY": "this"}, "cwd": home}),
    );
    assert_eq!(a["created"], json!(true), "{a}");
    assert_eq!(a["env_differs"], json!(false), "{a}");
    let v = c.ok("exec", json!({"src": "os.env().keys().sort()"}));
    assert_eq!(v["render"], json!("[\"ONLY\", \"PWD\"]"), "{v}");
    // A bad env is refused clearly.
    let e = c.call("session.attach", json!({"session": "k3", "env": {"A": 1}}));
    assert_eq!(e["error"]["code"], json!(-32602), "{e}");
}

#[test]
fn utf8_bytes_render_as_text_and_binary_stays_bytes() {
    let root = Root::new();
    let d = Daemon::start(&root);
    std::fs::write(root.path().join("notes.md"), "# Notes\nbuy milk\n").unwrap();
    std::fs::write(root.path().join("p.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let mut c = d.conn();
    c.ok(
        "session.attach",
        json!({"session": "r", "cwd": root.path()}),
    );
    let v = c.ok("exec", json!({"src": "cat notes.md"}));
    assert_eq!(v["render"], json!("# Notes\nbuy milk"), "{v}");
    let v = c.ok("exec", json!({"src": "cat p.png"}));
    assert_eq!(v["render"], json!("bytes(16b)"), "{v}");
    // The inline render the corpus compares is unchanged.
    let r = c.ok(
        "value.get",
        json!({"ref": "out:1", "path": "out", "format": "inline"}),
    );
    assert_eq!(r["inline"], json!("bytes(17b)"), "{r}");
    // Through `shoal exec` too.
    let (code, out, err) = run(
        &root,
        &[
            "exec",
            "--socket",
            &root.socket().display().to_string(),
            &format!("cat {}", root.path().join("notes.md").display()),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("buy milk"), "{out}");
}

#[test]
fn resources_paginate_complete_and_fail_with_the_kernels_error() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    for i in 0..250 {
        c.ok(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": {"src": format!("{i}")}}),
        );
    }
    // Every ref, each once, newest first, across pages.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = c.ok("resources/list", params);
        pages += 1;
        for r in page["resources"].as_array().unwrap() {
            if let Some(n) = r["uri"].as_str().unwrap().strip_prefix("shoal://out/") {
                seen.push(n.parse::<u64>().unwrap());
            }
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (1..=250).rev().collect::<Vec<_>>());
    let bad = c.call("resources/list", json!({"cursor": "nonsense"}));
    assert_eq!(bad["error"]["code"], json!(-32602), "{bad}");

    // resources/read errors carry the kernel's own code, message and data.
    let e = c.call("resources/read", json!({"uri": "shoal://out/9999"}));
    assert_eq!(e["error"]["code"], json!(-32004), "{e}");
    assert_eq!(e["error"]["message"], json!("unknown value ref"), "{e}");
    assert_eq!(e["error"]["data"]["ref"], json!("out:9999"), "{e}");
    let e = c.call("resources/read", json!({"uri": "shoal://out/1?path=nope"}));
    assert_eq!(e["error"]["code"], json!(-32005), "{e}");

    // completion/complete of template arguments.
    let comp = c.ok(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "shoal://out/{n}{?path,slice,format}"},
               "argument": {"name": "n", "value": "24"}}),
    );
    let values = comp["completion"]["values"].as_array().unwrap();
    assert_eq!(values[0], json!("249"), "{comp}");
    assert!(values.contains(&json!("24")), "{comp}");
    assert!(values.iter().all(|v| v.as_str().unwrap().starts_with("24")));
    let comp = c.ok(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "shoal://events/{channel}{?since,limit}"},
               "argument": {"name": "channel", "value": "jo"}}),
    );
    assert_eq!(comp["completion"]["values"], json!(["journal"]), "{comp}");
    let comp = c.ok(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "shoal://session/{view}"},
               "argument": {"name": "view", "value": ""}}),
    );
    assert_eq!(
        comp["completion"]["values"],
        json!(["cwd", "env"]),
        "{comp}"
    );

    // The language card: instructions, prompt and resource agree.
    let init = c.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    assert!(init["instructions"]
        .as_str()
        .unwrap()
        .contains("shoal_language"));
    assert!(init["capabilities"]["prompts"].is_object(), "{init}");
    let prompts = c.ok("prompts/list", json!({}));
    assert_eq!(prompts["prompts"][0]["name"], json!("shoal_language"));
    let p = c.ok("prompts/get", json!({"name": "shoal_language"}));
    let card = p["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.ok("resources/read", json!({"uri": "shoal://docs/language"}));
    assert_eq!(r["contents"][0]["text"].as_str().unwrap(), card);
    assert_eq!(r["contents"][0]["mimeType"], json!("text/markdown"));
    let e = c.call("prompts/get", json!({"name": "nope"}));
    assert_eq!(e["error"]["code"], json!(-32602), "{e}");

    // Budget: tools/list plus prompts/list stay small: 16 KiB for all 13
    // tools, each output schema admitting the error shape.
    let tools = c.ok("tools/list", json!({}));
    let size =
        serde_json::to_vec(&tools).unwrap().len() + serde_json::to_vec(&prompts).unwrap().len();
    assert!(size < 16 * 1024, "tools/list + prompts/list = {size} bytes");
}
