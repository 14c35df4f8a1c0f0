//! A human takes over an agent's terminal (docs/takeover.md): `pty.claim`,
//! `pty.release` and `pty.watch` over raw kernel frames, and `shoal attach
//! --pty` driven in a real terminal (tmux, skipped with its reason when
//! missing) beside an MCP agent that opened `python3 -q`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn tool(c: &mut Conn, name: &str, args: Value) -> Value {
    let r = c.ok("tools/call", json!({"name": name, "arguments": args}));
    assert!(r["structuredContent"].is_object(), "{name}: {r}");
    r
}

fn list_entry(c: &mut Conn, id: &str) -> Value {
    let l = c.ok("pty.list", json!({}));
    l["ptys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pty_id"] == json!(id))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A kernel connection that also gets `pty.screen` notifications, kept
/// aside while a reply is awaited.
struct Watcher {
    c: Conn,
    notes: std::collections::VecDeque<Value>,
}

impl Watcher {
    fn ok(&mut self, method: &str, params: Value) -> Value {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 20);
        let id = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.c
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let f = self.c.recv();
            if f["id"] == json!(id) {
                assert!(f.get("error").is_none(), "{method}: {f}");
                return f["result"].clone();
            }
            assert_eq!(f["method"], json!("pty.screen"), "{f}");
            self.notes.push_back(f["params"].clone());
        }
    }

    /// The next `pty.screen` notification.
    fn note(&mut self) -> Value {
        if let Some(n) = self.notes.pop_front() {
            return n;
        }
        loop {
            let f = self.c.recv();
            if f["method"] == "pty.screen" {
                return f["params"].clone();
            }
        }
    }
}

#[test]
fn claim_release_and_watch_over_the_kernel_protocol() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut agent = d.conn();
    agent.attach("k");
    let p = agent.ok(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", "printf '\\033[31mred\\033[m\\n'; exec cat"],
            "cols": 40, "rows": 10}),
    );
    let id0 = p["pty_id"].clone();
    let r = agent.ok(
        "pty.read",
        json!({"pty_id": id0, "wait_for": "red", "timeout_ms": 10000}),
    );
    assert_eq!(r["matched"], json!(true), "{r}");
    let id = id0.as_str().unwrap().to_string();

    let mut human = d.conn();
    human.ok(
        "session.attach",
        json!({"session": "k", "client": {"kind": "attach", "tty": true}}),
    );
    let c = human.ok("pty.claim", json!({"pty_id": id}));
    assert_eq!(c["claimed"], json!(true), "{c}");
    // A second claim by the holder is a renewal.
    human.ok("pty.claim", json!({"pty_id": id}));
    let e = list_entry(&mut agent, &id);
    assert_eq!(
        e["taken_over"],
        json!({"by": "human", "client": "attach"}),
        "{e}"
    );

    // The agent's input, resize and close are refused, naming the human.
    for (m, params) in [
        ("pty.send", json!({"pty_id": id, "input": "x"})),
        ("pty.resize", json!({"pty_id": id, "cols": 50, "rows": 10})),
        ("pty.close", json!({"pty_id": id})),
    ] {
        let r = agent.call(m, params);
        assert_eq!(r["error"]["code"], json!(-32024), "{m}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!("{id} is taken over by a human (attach)")),
            "{msg}"
        );
        assert_eq!(r["error"]["data"]["code"], json!("taken_over"));
    }
    // Another human may not claim it either.
    let mut other = d.conn();
    other.attach("k");
    let r = other.call("pty.claim", json!({"pty_id": id}));
    assert_eq!(r["error"]["code"], json!(-32024), "{r}");

    // The claimant watches: the whole screen in colour, then what it types.
    let mut human = Watcher {
        c: human,
        notes: Default::default(),
    };
    human.ok("pty.watch", json!({"pty_id": id}));
    let first = human.note();
    assert_eq!(first["full"], json!(true), "{first}");
    assert_eq!(
        (first["cols"].clone(), first["rows"].clone()),
        (json!(40), json!(10))
    );
    let ansi = first["ansi"].as_str().unwrap();
    assert!(ansi.contains("\u{1b}[31mred"), "{ansi:?}");
    human.ok("pty.send", json!({"pty_id": id, "input": "typed\r"}));
    let mut painted = String::new();
    let mut seq = first["seq"].as_u64().unwrap();
    eventually("the echo painted", WAIT, || {
        let n = human.note();
        assert_eq!(n["seq"].as_u64().unwrap(), seq + 1, "{n}");
        assert_eq!(n["full"], json!(false), "{n}");
        seq += 1;
        painted.push_str(n["ansi"].as_str().unwrap());
        painted.contains("typed").then_some(())
    });
    // The agent reads what the human typed.
    let r = agent.ok(
        "pty.read",
        json!({"pty_id": id, "wait_for": "typed", "timeout_ms": 10000}),
    );
    assert_eq!(r["matched"], json!(true), "{r}");
    let e = list_entry(&mut agent, &id);
    assert_eq!(e["watchers"], json!(1), "{e}");

    // Released: the agent types again.
    let r = human.ok("pty.release", json!({"pty_id": id}));
    assert_eq!(r["released"], json!(true), "{r}");
    agent.ok("pty.send", json!({"pty_id": id, "input": "again\r"}));
    assert!(list_entry(&mut agent, &id).get("taken_over").is_none());

    // A hang-up releases a claim and ends a watch.
    human.ok("pty.claim", json!({"pty_id": id}));
    drop(human);
    eventually("the hang-up released the claim", WAIT, || {
        let e = list_entry(&mut agent, &id);
        (e.get("taken_over").is_none() && e.get("watchers").is_none()).then_some(())
    });
    agent.ok("pty.send", json!({"pty_id": id, "input": "after\r"}));

    // The end of the program ends the stream.
    let mut other = Watcher {
        c: other,
        notes: Default::default(),
    };
    other.ok("pty.watch", json!({"pty_id": id}));
    other.note();
    agent.ok(
        "pty.send",
        json!({"pty_id": id, "input": {"key": "Ctrl-D"}}),
    );
    let end = eventually("the stream's end", WAIT, || {
        let n = other.note();
        (n["ended"] == json!(true)).then_some(n)
    });
    assert_eq!(end["alive"], json!(false), "{end}");
    assert_eq!(end["exit"]["status"], json!(0), "{end}");
    agent.ok("pty.close", json!({"pty_id": id}));
}

#[test]
fn a_token_principal_cannot_take_over() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let token = create_token(&root, "agent-b");
    let mut c = d.conn();
    let r = c.attach_token("tok", &token);
    assert!(r.get("error").is_none(), "{r}");
    for m in ["pty.claim", "pty.watch"] {
        let r = c.call(m, json!({"pty_id": "pty:1"}));
        assert_eq!(r["error"]["code"], json!(-32010), "{m}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("only the local user"),
            "{r}"
        );
    }
}

/// A tmux server of its own (its socket in the test's root), ended by pid.
struct Tmux {
    name: String,
    tmpdir: std::path::PathBuf,
    pid: Option<i32>,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.env("TMUX_TMPDIR", &self.tmpdir)
            .env_remove("TMUX")
            .arg("-L")
            .arg(&self.name);
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("tmux");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A 100x30 session running `sh -c script` in window `window`.
    fn start(root: &Path, script: &str) -> Tmux {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut t = Tmux {
            name: format!("shoal-takeover-{}-{n}", std::process::id()),
            tmpdir: root.to_path_buf(),
            pid: None,
        };
        t.run(&[
            "new-session",
            "-d",
            "-s",
            "h",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            script,
        ]);
        t.pid = t
            .run(&["display-message", "-p", "#{pid}"])
            .trim()
            .parse()
            .ok();
        t
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "h"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "h"];
        a.extend_from_slice(keys);
        self.run(&a);
    }

    fn wait_for(&self, what: &str) -> String {
        eventually(&format!("{what:?} on the human's terminal"), WAIT, || {
            let s = self.screen();
            s.contains(what).then_some(s)
        })
    }

    /// The pid of the pane's program's first child (the `shoal attach`).
    fn attach_pid(&self) -> i32 {
        let sh: i32 = self
            .run(&["display-message", "-p", "-t", "h", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap();
        eventually("the attach process", WAIT, || {
            let kids = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children")).ok()?;
            kids.split_whitespace().next()?.parse().ok()
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            kill_pid(pid);
        }
    }
}

#[test]
fn a_human_takes_over_the_agents_python_in_a_real_terminal() {
    if !have_tools(
        "takeover::a_human_takes_over_the_agents_python_in_a_real_terminal",
        &["tmux", "python3"],
    ) {
        return;
    }
    let root = Root::new();
    let d = Daemon::start(&root);
    // The agent: an MCP client that opens python3 on a PTY.
    let mut agent = d.mcp_legacy("py");
    let o = tool(
        &mut agent,
        "shoal_pty_open",
        json!({"cmd": "python3", "args": ["-q"]}),
    );
    let id = o["structuredContent"]["pty_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = tool(
        &mut agent,
        "shoal_pty_read",
        json!({"pty_id": id, "wait_for": ">>>", "timeout_ms": 15000}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");
    let mut k = d.conn();
    k.attach("py");

    // The human: `shoal attach --pty` in a 100x30 terminal.
    let script = format!(
        "{BIN} attach --socket {} --pty {id} py; echo attach-exit=$?; sleep 600",
        d.socket.display()
    );
    let t = Tmux::start(root.path(), &script);
    t.wait_for(">>>");
    eventually("the claim", WAIT, || {
        let e = list_entry(&mut k, &id);
        (e["taken_over"]["by"] == "human" && e["cols"] == json!(100)).then_some(())
    });
    // `shoal status` shows the human at the PTY.
    let sock = d.socket.display().to_string();
    let (st, out, err) = run(&root, &["status", "--socket", &sock], &[]);
    assert_eq!(st, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("no {id} row:\n{out}"));
    assert!(row.contains("typing"), "{out}");
    // A second human only watches: the PTY is taken.
    let viewer = Tmux::start(root.path(), &script);
    viewer.wait_for(">>>");
    eventually("two watchers", WAIT, || {
        (list_entry(&mut k, &id)["watchers"] == json!(2)).then_some(())
    });
    t.keys(&["print(6*7)", "Enter"]);
    t.wait_for("42");
    viewer.wait_for("42");
    drop(viewer);
    // The agent reads what the human did.
    let r = tool(
        &mut agent,
        "shoal_pty_read",
        json!({"pty_id": id, "wait_for": "re:(?m)^42$", "timeout_ms": 15000}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");
    // The agent's input is refused while the human holds the terminal.
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_send", "arguments": {"pty_id": id, "input": ["1+1", {"key": "Enter"}]}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("taken over by a human (attach)"), "{text}");

    // Ctrl-] detaches: the terminal is given back, python runs on at the
    // agent's size, and the agent types again.
    t.keys(&["C-]"]);
    let s = t.wait_for("attach-exit=0");
    assert!(s.contains(&format!("detached from {id}")), "{s}");
    let e = eventually("the release", WAIT, || {
        let e = list_entry(&mut k, &id);
        e.get("taken_over").is_none().then_some(e)
    });
    assert_eq!(e["alive"], json!(true), "{e}");
    assert_eq!(
        (e["cols"].clone(), e["rows"].clone()),
        (json!(80), json!(24))
    );
    tool(
        &mut agent,
        "shoal_pty_send",
        json!({"pty_id": id, "input": ["print(2**10)", {"key": "Enter"}]}),
    );
    let r = tool(
        &mut agent,
        "shoal_pty_read",
        json!({"pty_id": id, "wait_for": "1024", "timeout_ms": 15000}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");
    drop(t);

    // A claimant that hangs up (its process killed) gives the PTY back.
    let t = Tmux::start(root.path(), &script);
    t.wait_for("1024");
    eventually("the second claim", WAIT, || {
        (list_entry(&mut k, &id)["taken_over"]["by"] == "human").then_some(())
    });
    kill_pid(t.attach_pid());
    eventually("the hang-up's release", WAIT, || {
        list_entry(&mut k, &id)
            .get("taken_over")
            .is_none()
            .then_some(())
    });
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_send", "arguments": {"pty_id": id, "input": ["print(7)", {"key": "Enter"}]}}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    drop(t);
    let pid = list_entry(&mut k, &id)["pid"].as_i64().unwrap();
    k.ok("pty.close", json!({"pty_id": id}));
    eventually("python reaped", WAIT, || {
        std::fs::metadata(format!("/proc/{pid}"))
            .is_err()
            .then_some(())
    });
}
