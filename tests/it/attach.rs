//! `shoal attach` and `shoal watch` driven in a real terminal (tmux:
//! `send-keys`, `capture-pane`) beside an agent on the same daemon: the
//! human's execs, the live view of the agent's, bindings shared both ways,
//! inline approvals that the agent's apply then honours, detaching, watching
//! without creating, and the ownership rule for tokens.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// A tmux server of its own (`-L`), one 120x40 window running a command; the
/// server is killed when the test ends.
struct Tmux {
    name: String,
}

impl Tmux {
    /// `shoal ARGS` in the root's environment; when it exits, the pane prints
    /// `EXITED <status>` and stays.
    fn start(root: &Root, args: &[&str]) -> Tmux {
        let name = format!("shoal-it-{}-{}", std::process::id(), root.path().display())
            .replace(['/', '.'], "-");
        let p = root.path();
        let cmd = format!(
            "env XDG_RUNTIME_DIR={run} XDG_STATE_HOME={state} XDG_CONFIG_HOME={config} \
             XDG_DATA_HOME={data} HOME={home} SHOAL_NO_AUTOSTART=1 TERM=xterm-256color \
             {bin} {args} --socket {sock}; echo EXITED $?; sleep 600",
            run = p.join("run").display(),
            state = p.join("state").display(),
            config = p.join("config").display(),
            data = p.join("data").display(),
            home = p.display(),
            bin = BIN,
            args = args.join(" "),
            sock = root.socket().display(),
        );
        let st = Command::new("tmux")
            .args([
                "-L",
                &name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "120",
            ])
            .args(["-y", "40", &cmd])
            .status()
            .expect("tmux");
        assert!(st.success(), "tmux new-session failed");
        Tmux { name }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.name])
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `text` literally, then Enter.
    fn line(&self, text: &str) {
        self.tmux(&["send-keys", "-l", text]);
        self.tmux(&["send-keys", "Enter"]);
    }

    fn key(&self, key: &str) {
        self.tmux(&["send-keys", key]);
    }

    /// The window's text, scrollback included.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-S", "-500"])
    }

    /// Wait until the screen satisfies `f`; the screen then.
    fn wait(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_for(&self, text: &str) -> String {
        self.wait(text, |s| s.contains(text))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.name, "kill-server"])
            .status();
    }
}

/// The text of a `shoal_exec` tool result.
fn mcp_exec(c: &mut Conn, src: &str) -> String {
    let r = c.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": src}}),
    );
    r["content"][0]["text"].as_str().unwrap_or("").to_string()
}

fn sessions(c: &mut Conn) -> Vec<Value> {
    c.ok("daemon.status", json!({}))["sessions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The policy of `agent:att`: may do anything in `project`, but every program
/// (an opaque effect) waits for a human, who may answer from attach.
fn asking_policy(project: &Path) -> String {
    format!(
        "[policy.principal.\"agent:att\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n\
         approve_via = [\"cli\", \"attach\"]\nfs.read = [\"/**\"]\nfs.write = [\"{p}/**\"]\n",
        p = project.display()
    )
}

/// A daemon under `asking_policy` for `<root>/proj` (created), and that dir.
fn asking_daemon(root: &Root) -> (Daemon, PathBuf) {
    let proj = root.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(&cfg, asking_policy(&proj)).unwrap();
    let d = Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    (d, proj)
}

/// The ref of a plan of `src` (`exec` in plan mode).
fn plan_ref(agent: &mut Conn, src: &str) -> String {
    agent.ok("exec", json!({"src": src, "mode": "plan"}))["plan_ref"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A connection of `agent:att` (a new token) attached to its own `session`.
fn agent_in(root: &Root, d: &Daemon, session: &str) -> Conn {
    let tok = create_token(root, "agent:att");
    let mut agent = d.conn();
    assert!(agent.attach_token(session, &tok).get("result").is_some());
    agent
}

#[test]
fn attach_runs_source_beside_an_agent_and_detaches() {
    if !have_tools(
        "attach::attach_runs_source_beside_an_agent_and_detaches",
        &["tmux"],
    ) {
        return;
    }
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut agent = d.mcp_legacy("pair");
    mcp_exec(&mut agent, "1");
    let t = Tmux::start(&root, &["attach", "pair"]);
    t.wait_for("pair>");
    t.line("6 * 7");
    t.wait(r"42 after 6 * 7", |s| s.contains("pair> 6 * 7\n42\n"));

    // The agent's exec shows above the prompt, with who ran it and its status.
    let sent = Instant::now();
    assert!(mcp_exec(&mut agent, "100 + 23").contains("123"));
    let s = t.wait("the agent's exec in the live view", |s| {
        s.contains("› 100 + 23\n123\nok")
    });
    eprintln!(
        "live view: the agent's exec was on the attach screen {:.1} ms after its reply",
        sent.elapsed().as_secs_f64() * 1000.0
    );
    assert!(
        s.contains("[pair] uid:") && s.contains("(mcp: t) · out:"),
        "{s}"
    );
    // A failure shows its status.
    mcp_exec(&mut agent, "1 / 0");
    t.wait_for("error[div_zero]: division by zero\nfailed");

    // The human's binding is the agent's; the human's own execs are not echoed.
    t.line("let x = 5");
    eventually("x bound", Duration::from_secs(30), || {
        mcp_exec(&mut agent, "x * 2").contains("10").then_some(())
    });
    assert!(!t.screen().contains("› let x = 5"), "{}", t.screen());
    // ... and the agent's is the human's.
    mcp_exec(&mut agent, "let from_agent = 7");
    t.line("from_agent + 1");
    t.wait_for("\n8\n");

    // One human is attached; `shoal status` says so.
    let row = eventually("a human in pair", Duration::from_secs(30), || {
        let mut c = d.conn();
        c.attach("probe");
        sessions(&mut c)
            .into_iter()
            .find(|s| s["name"] == "pair" && s["humans"].as_array().is_some_and(|h| h.len() == 1))
    });
    assert_eq!(row["humans"][0]["client"], json!("attach"), "{row}");
    let (st, out, _) = run(
        &root,
        &["status", "--socket", root.socket().to_str().unwrap()],
        &[],
    );
    assert_eq!(st, 0);
    assert!(
        out.contains("HUMANS") && out.contains("human in pair: attach"),
        "{out}"
    );

    // `:pty N` takes over the agent's python on a PTY; Ctrl-] comes back.
    let o = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_open", "arguments": {"cmd": "python3", "args": ["-q"]}}),
    );
    let id = o["structuredContent"]["pty_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_read",
               "arguments": {"pty_id": id, "wait_for": ">>>", "timeout_ms": 15000}}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");
    let n = id.trim_start_matches("pty:");
    t.line(&format!(":pty {n}"));
    t.wait_for(">>>");
    t.line("print(6*7)");
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_read",
               "arguments": {"pty_id": id, "wait_for": "re:(?m)^42$", "timeout_ms": 15000}}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");
    t.key("C-]");
    t.wait_for(&format!("detached from {id}"));
    t.line("6 * 9");
    t.wait_for("\n54\n");
    // The program runs on, and the agent types into it again.
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_send",
               "arguments": {"pty_id": id, "input": ["print(2**10)", {"key": "Enter"}]}}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    let r = agent.ok(
        "tools/call",
        json!({"name": "shoal_pty_read",
               "arguments": {"pty_id": id, "wait_for": "re:(?m)^1024$", "timeout_ms": 15000}}),
    );
    assert_eq!(r["structuredContent"]["matched"], json!(true), "{r}");

    // Ctrl-D detaches; the session and its bindings stay.
    t.key("C-d");
    t.wait_for("detached; session pair stays");
    t.wait_for("EXITED 0");
    assert!(mcp_exec(&mut agent, "x + from_agent").contains("12"));
    let mut c = d.conn();
    c.attach("probe");
    let pair = sessions(&mut c)
        .into_iter()
        .find(|s| s["name"] == "pair")
        .expect("pair stays");
    assert_eq!(pair["humans"], json!([]), "{pair}");
}

#[test]
fn ctrl_c_cancels_the_running_exec_and_history_comes_from_the_journal() {
    if !have_tools(
        "attach::ctrl_c_cancels_the_running_exec",
        &["tmux", "sleep"],
    ) {
        return;
    }
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("hist");
    c.ok("exec", json!({"src": "let earlier = 41"}));
    let t = Tmux::start(&root, &["attach", "hist", "--quiet"]);
    t.wait_for("hist>");
    // Up recalls the session's journal.
    t.key("Up");
    t.wait_for("hist> let earlier = 41");
    t.key("C-c");
    t.wait("the line cleared", |s| s.trim_end().ends_with("hist>"));
    t.line("sh { sleep 60 }");
    t.wait_for("hist> sh { sleep 60 }");
    session_busy(&mut c, "hist", true);
    t.key("C-c");
    t.wait_for("error[cancelled]");
    session_busy(&mut c, "hist", false);
    // Multi-line input: an open block continues on the next line.
    t.line("fn twice(a) {");
    t.line("a * 2 }");
    t.line("twice(earlier + 1)");
    t.wait_for("\n84\n");
}

#[test]
fn a_plan_waiting_for_a_human_is_approved_with_y_and_then_applies() {
    if !have_tools("attach::a_plan_waiting_for_a_human", &["tmux"]) {
        return;
    }
    let root = Root::new();
    let (d, proj) = asking_daemon(&root);
    let tok = create_token(&root, "agent:att");
    // The agent: an MCP client with the token, in session `att`.
    let mut agent = d.conn();
    agent.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach",
                       "params": {"session": "att", "token": tok}}));
    agent.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "0"}}),
    );
    agent.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // Its first call creates the session, owned by its principal (a session the
    // human created first would be the local user's, closed to the token).
    assert!(mcp_exec(&mut agent, "6 * 7").contains("42"));
    // (A token's sessions are named NAME@PRINCIPAL.)
    let t = Tmux::start(&root, &["attach", "att@agent:att"]);
    t.wait_for("att@agent:att>");

    let log = proj.join("log");
    let src = format!("sh {{ echo applied >> {} }}", log.display());
    let p = agent.ok(
        "tools/call",
        json!({"name": "shoal_plan", "arguments": {"src": src}}),
    );
    let p = &p["structuredContent"];
    assert_eq!(p["verdict"], json!("approval_required"), "{p}");
    let r = p["plan_ref"].as_str().unwrap().to_string();
    let s = t.wait_for(&format!("approve plan {r}? [y/n]"));
    assert!(s.contains("principal: agent:att"), "{s}");
    assert!(s.contains("effects: opaque"), "{s}");
    assert!(s.contains("reversibility: irreversible"), "{s}");
    assert!(s.contains(&format!("src:     {src}")), "{s}");
    t.line("y");
    t.wait_for(&format!(
        "approved plan {r} (agent:att in session att@agent:att)"
    ));
    assert!(!log.exists());
    let a = agent.ok(
        "tools/call",
        json!({"name": "shoal_apply", "arguments": {"plan_ref": r}}),
    );
    assert_eq!(a["isError"], json!(false), "{a}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "applied\n");
    // Recorded as decided from attach.
    let mut c = d.conn();
    c.attach("probe");
    let j = c.ok("events.read", json!({"channel": "journal"}));
    let decided = j["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["payload"]["v"]["plan_ref"]["v"] == json!(r))
        .cloned()
        .expect("the decision is journaled");
    assert_eq!(
        decided["payload"]["v"]["channel"]["v"],
        json!("attach"),
        "{decided}"
    );
}

#[test]
fn watch_shows_execs_and_never_creates_a_session() {
    if !have_tools("attach::watch_shows_execs", &["tmux"]) {
        return;
    }
    let root = Root::new();
    let d = Daemon::start(&root);
    let sock = root.socket();
    let (st, _, err) = run(
        &root,
        &["watch", "nosuch", "--socket", sock.to_str().unwrap()],
        &[],
    );
    assert_eq!(st, 1);
    assert!(err.contains("no session \"nosuch\""), "{err}");
    let mut c = d.conn();
    c.attach("w");
    assert!(!sessions(&mut c).iter().any(|s| s["name"] == "nosuch"));

    let t = Tmux::start(&root, &["watch", "w"]);
    t.wait_for("watching session w");
    eventually("the watcher counted", Duration::from_secs(30), || {
        sessions(&mut c)
            .into_iter()
            .find(|s| s["name"] == "w" && s["humans"].as_array().is_some_and(|h| h.len() == 1))
    });
    c.ok("exec", json!({"src": "6 * 7"}));
    let s = t.wait_for("› 6 * 7\n42\nok");
    assert!(s.contains("(test) · out:1"), "{s}");
    // Another session's execs are not in this view.
    let mut other = d.conn();
    other.attach("elsewhere");
    other.ok("exec", json!({"src": "1000 + 1"}));
    c.ok("exec", json!({"src": "2 + 2"}));
    let s = t.wait_for("› 2 + 2\n4\nok");
    assert!(!s.contains("1001"), "{s}");
    // A long render is bounded, with the ref to read the rest.
    c.ok("exec", json!({"src": "range(1, 31).map(x => {n: x})"}));
    let s = t.wait_for("more lines, shoal_get out:3");
    assert!(s.contains("\n8\n… 22 more lines"), "{s}");
}

#[test]
fn watch_all_answers_a_plan_of_any_session() {
    if !have_tools("attach::watch_all_answers_a_plan", &["tmux"]) {
        return;
    }
    let root = Root::new();
    let (d, proj) = asking_daemon(&root);
    let t = Tmux::start(&root, &["watch", "--all"]);
    t.wait_for("watching every session");
    let mut agent = agent_in(&root, &d, "far");
    agent.ok("exec", json!({"src": "6 * 7"}));
    t.wait_for("[far@agent:att] agent:att (test) · out:1");
    let log = proj.join("log");
    let src = format!("sh {{ echo yes >> {} }}", log.display());
    let r = plan_ref(&mut agent, &src);
    t.wait_for(&format!("[far@agent:att] plan {r} waits for your approval"));
    t.line("n");
    t.wait_for(&format!("denied plan {r}"));
    let refused = agent.call("plan.apply", json!({"plan_ref": r}));
    assert!(refused.get("error").is_some(), "{refused}");
    // Planned again: a new question, answered yes this time.
    let src2 = format!("sh {{ echo again >> {} }}", log.display());
    let r2 = plan_ref(&mut agent, &src2);
    t.wait_for(&format!(
        "[far@agent:att] plan {r2} waits for your approval"
    ));
    t.line("y");
    t.wait_for(&format!("approved plan {r2}"));
    agent.ok("plan.apply", json!({"plan_ref": r2}));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "again\n");
    // Watching every session created none.
    let mut c = d.conn();
    c.attach("probe");
    let names: Vec<Value> = sessions(&mut c).iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// A token may not attach to the local user's session, nor answer a plan as
/// if it were the human at the terminal.
#[test]
fn a_token_cannot_attach_to_the_local_users_session() {
    let root = Root::new();
    let (d, _proj) = asking_daemon(&root);
    let mut human = d.conn();
    human.ok(
        "session.attach",
        json!({"session": "mine", "client": {"kind": "attach", "human": true}}),
    );
    let tok = create_token(&root, "agent:att");
    let mut agent = d.conn();
    let r = agent.call(
        "session.attach",
        json!({"session": "mine", "token": tok, "client": {"kind": "attach", "human": true}}),
    );
    // The name gives it a session of its own (`mine@agent:att`), never the user's.
    assert_eq!(
        r["result"]["session"],
        json!("mine@agent:att"),
        "a token attached to the local user's session: {r}"
    );
    // Its own session: it plans, and cannot approve its plan from "attach".
    assert!(agent.attach_token("own", &tok).get("result").is_some());
    let p = agent.ok("exec", json!({"src": "sh { true }", "mode": "plan"}));
    let r = agent.call(
        "plan.approve",
        json!({"plan_ref": p["plan_ref"], "via": "attach"}),
    );
    assert!(r.get("error").is_some(), "a token approved a plan: {r}");
    // A token's attachment never counts as a human.
    let st = human.ok("daemon.status", json!({}));
    let own = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "own@agent:att")
        .cloned()
        .unwrap();
    assert_eq!(own["humans"], json!([]), "{own}");
}

/// `exec`'s `width` (what attach sends: its terminal's columns) is checked,
/// and a session can be reached without being created (`create: false`).
#[test]
fn exec_takes_a_width_and_attach_may_refuse_to_create() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let r = c.call(
        "session.attach",
        json!({"session": "absent", "create": false, "client": {"kind": "watch"}}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(r["error"]["data"]["exists"], json!(false), "{r}");
    let a = c.ok(
        "session.attach",
        json!({"session": "w", "client": {"kind": "attach", "tty": true}}),
    );
    assert!(a["conn"].as_u64().is_some(), "{a}");
    for bad in [json!(5), json!(5000), json!("wide")] {
        let r = c.call("exec", json!({"src": "1", "width": bad}));
        assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    }
    // A terminal's table fits its width.
    let words = "a b c d e f g h i j k l m n o p q r s t u v w x y z";
    let src = format!("range(0, 3).map(x => {{n: x, words: \"{words}\"}})");
    let wide = c.ok("exec", json!({"src": src, "width": 200}));
    assert!(wide["render"].as_str().unwrap().contains(words), "{wide}");
    let narrow = c.ok("exec", json!({"src": src, "width": 30}));
    let text = narrow["render"].as_str().unwrap();
    assert!(!text.contains(words) && text.contains('…'), "{narrow}");
    let names: Vec<Value> = sessions(&mut c).iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, vec![json!("w")]);
}

#[test]
fn completion_offers_the_sessions_paths_to_the_local_user_only() {
    let root = Root::new();
    let (d, proj) = asking_daemon(&root);
    std::fs::write(proj.join("notes.txt"), "").unwrap();
    let complete = |c: &mut Conn, src: &str| c.ok("complete", json!({"src": src}));
    // Before attaching: no session, no paths.
    let mut human = d.conn();
    assert_eq!(complete(&mut human, "cat no")["candidates"], json!([]));
    human.ok(
        "session.attach",
        json!({"session": "mine", "cwd": proj, "client": {"kind": "attach", "human": true}}),
    );
    let r = complete(&mut human, "cat no");
    assert_eq!(r, json!({"candidates": ["notes.txt"], "start": 4}));
    // The session's names, bound by any client, once an exec has run.
    human.ok("exec", json!({"src": "let limit_of_rows = 3"}));
    let r = complete(&mut human, "1 + limit_");
    assert_eq!(r["candidates"], json!(["limit_of_rows"]), "{r}");
    // A token in its own session, in the same directory, is shown no listing.
    let mut agent = agent_in(&root, &d, "own");
    assert_eq!(complete(&mut agent, "cat no")["candidates"], json!([]));
    let r = complete(&mut agent, "cat ./");
    assert!(!r.to_string().contains("notes"), "{r}");
}
