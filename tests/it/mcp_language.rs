//! The language and the shell layer as an agent meets them: `shoal_exec`
//! through the `shoal mcp` shim (the daemon autostarted), with the everyday
//! forms of the language issue and the command-failure contract of the shell
//! issue.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use crate::common::*;
use serde_json::{json, Value};

struct Agent {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    next: u64,
}

impl Agent {
    /// `shoal mcp` on the root's default socket (autostart), initialized.
    fn start(root: &Root) -> Agent {
        let mut child = root
            .command()
            .args(["mcp", "--session", "agent"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn shoal mcp");
        let stdin = child.stdin.take().expect("stdin");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut a = Agent {
            child,
            stdin,
            out,
            next: 0,
        };
        let r = a.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "lang-test", "version": "0"}}),
        );
        assert_eq!(r["result"]["protocolVersion"], json!("2025-11-25"), "{r}");
        a.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        a
    }

    fn send(&mut self, v: &Value) {
        let mut b = serde_json::to_vec(v).expect("json");
        b.push(b'\n');
        self.stdin.write_all(&b).expect("write to shim");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.out.read_line(&mut line).expect("read shim") > 0,
                "shim closed"
            );
            let v: Value = serde_json::from_str(&line).expect("frame is JSON");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// `shoal_exec` and the tool result.
    fn exec(&mut self, args: Value) -> Value {
        let r = self.request(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": args}),
        );
        r["result"].clone()
    }

    /// `shoal_exec {src}` that must succeed: its tagged value.
    fn value(&mut self, src: &str) -> Value {
        let r = self.exec(json!({ "src": src }));
        assert_eq!(r["isError"], json!(false), "{src}: {r}");
        r["structuredContent"]["value"].clone()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strs(items: &[&str]) -> Value {
    json!({"$": "list", "v": items.iter().map(|s| json!({"$": "str", "v": s})).collect::<Vec<_>>()})
}

#[test]
fn everyday_language_forms_through_the_shim() {
    let root = Root::new();
    let work = root.path().join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    for f in ["a.txt", "b.md"] {
        std::fs::write(work.join(f), "x").unwrap();
    }
    let mut a = Agent::start(&root);

    a.value(&format!("cd \"{}\"", work.display()));
    // The session views follow the session: its cwd after `cd`, its env after `env.X =`.
    let r = a.request("resources/read", json!({"uri": "shoal://session/cwd"}));
    assert_eq!(
        r["result"]["structuredContent"]["display"],
        json!(work.display().to_string()),
        "{r}"
    );
    a.value("env.SHOAL_TEST_VIEW = \"visible\"");
    let r = a.request("resources/read", json!({"uri": "shoal://session/env"}));
    assert_eq!(
        r["result"]["structuredContent"]["env"]["SHOAL_TEST_VIEW"],
        json!("visible"),
        "{r}"
    );
    assert_eq!(
        a.value("(ls .).where(.type == 'file').map(.name)"),
        strs(&["a.txt", "b.md"])
    );

    // A large value comes back at once, elided, and stays addressable.
    let r = a.exec(json!({"src": "range(0, 100000).collect()"}));
    let v = &r["structuredContent"]["value"];
    assert_eq!(v["$"], json!("ref"), "{r}");
    assert_eq!(v["of"], json!("list"));
    assert_eq!(v["n"], json!(100000));
    assert_eq!(v["preview"]["v"].as_array().map(Vec::len), Some(5));

    // A failed command in value position is an outcome, not an error.
    a.value("let probe = (^false)");
    let rec = a.value("{ probe, answer: 42 }");
    assert_eq!(rec["$"], json!("record"));
    assert_eq!(rec["v"]["answer"], json!({"$": "int", "v": 42}));
    assert_eq!(rec["v"]["probe"]["$"], json!("outcome"));
    assert_eq!(rec["v"]["probe"]["ok"], json!(false));
    assert_eq!(rec["v"]["probe"]["status"], json!(1));

    assert_eq!(
        a.value(r#"json.parse('{"name": "shoal", "tags": [1, 2, 3]}').tags.sum()"#),
        json!({"$": "int", "v": 6})
    );
    assert_eq!(
        a.value(r#"let who = "agent"; "hello {who}, {6 * 7}""#),
        json!({"$": "str", "v": "hello agent, 42"})
    );
    assert_eq!(
        a.value(
            r#"match {kind: "file", size: 3} { {kind: "dir"} => "dir", {kind: "file", size} => "file of {size}", _ => "?" }"#
        ),
        json!({"$": "str", "v": "file of 3"})
    );
    // A teaching parse error comes back as a tool error the model can read.
    let r = a.exec(json!({"src": "ls | wc"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert_eq!(r["structuredContent"]["code"], json!(-32001));
    assert!(
        r["structuredContent"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("no pipe operator"),
        "{r}"
    );

    drop(a);
    for pid in daemons_on(&root.path().join("run/shoal/shoal.sock")) {
        kill_pid(pid);
    }
}

#[test]
fn failing_commands_are_outcomes_in_value_position_and_errors_in_statements() {
    let root = Root::new();
    let mut a = Agent::start(&root);

    let o = a.value("^false");
    assert_eq!(o["$"], json!("outcome"), "{o}");
    assert_eq!(o["ok"], json!(false));
    assert_eq!(o["status"], json!(1));

    let r = a.exec(json!({"src": "^false", "position": "stmt"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    let sc = &r["structuredContent"];
    assert_eq!(sc["code"], json!(-32002));
    assert_eq!(sc["data"]["code"], json!("cmd_failed"));
    assert_eq!(sc["data"]["status"], json!(1));
    assert_eq!(sc["data"]["stderr"], json!(""));

    let o = a.value("sh { exit 7 }");
    assert_eq!(o["ok"], json!(false));
    assert_eq!(o["status"], json!(7));
    // The outcome carries the span of its invocation (scenario 13).
    assert_eq!(o["span"], json!({"start": 0, "end": 13}), "{o}");

    let r = a.exec(json!({"src": "sh { echo oops 1>&2; exit 7 }", "position": "stmt"}));
    let sc = &r["structuredContent"];
    assert_eq!(sc["data"]["code"], json!("cmd_failed"), "{r}");
    assert_eq!(sc["data"]["status"], json!(7));
    assert_eq!(sc["data"]["stderr"], json!("oops\n"));

    drop(a);
    for pid in daemons_on(&root.path().join("run/shoal/shoal.sock")) {
        kill_pid(pid);
    }
}
