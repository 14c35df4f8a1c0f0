//! The clients people run, against `shoal mcp` (autostarting the daemon on a
//! private socket): the official TypeScript SDK 1.x, the TypeScript client
//! 2.x (both eras) and the MCP Inspector CLI 2.x (`--protocol-era modern`
//! and `legacy`). Both validate `structuredContent` against the tool's
//! `outputSchema` even on error results, so every error path is exercised.
//! MCP Tasks go through the TypeScript SDK 1.x (`ts_tasks.mjs`) and the
//! Inspector's connection CLI `mcpdo` (its one-shot `--cli` has no `tasks/*`).
//! Node 22 and the packages come from `make node` (`tests/node`, installed
//! by `make test-all`); without them the tests are skipped, with their reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use serde_json::Value;

fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// Node 22 from the `node` npm package (the Inspector needs >= 22).
fn node() -> PathBuf {
    let n = node_dir().join("node_modules/node/bin/node");
    assert!(
        n.exists(),
        "no Node.js under {}: run `make node` (or `make test`, which installs it)",
        n.display()
    );
    n
}

fn inspector() -> PathBuf {
    let p = node_dir()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    assert!(
        p.exists(),
        "no MCP Inspector at {}: run `make node`",
        p.display()
    );
    p
}

/// The environment a client gives `shoal mcp`: this root's private dirs.
fn client_env(root: &Root) -> Vec<(String, String)> {
    let p = root.path();
    vec![
        (
            "XDG_RUNTIME_DIR".into(),
            p.join("run").display().to_string(),
        ),
        (
            "XDG_STATE_HOME".into(),
            p.join("state").display().to_string(),
        ),
        (
            "XDG_CONFIG_HOME".into(),
            p.join("config").display().to_string(),
        ),
    ]
}

fn stop_daemons(sock: &Path) {
    for p in daemons_on(sock) {
        kill_pid(p);
    }
}

/// `mcp-inspector --cli [opts] BIN mcp --socket S [method args]`.
fn run_inspector(root: &Root, before: &[&str], after: &[&str]) -> Output {
    let sock = root.socket();
    let mut cmd = Command::new(node());
    cmd.arg(inspector()).arg("--cli").args(before);
    for (k, v) in client_env(root) {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    cmd.arg(BIN)
        .arg("mcp")
        .arg("--socket")
        .arg(&sock)
        .args(after)
        .current_dir(root.path())
        .env("HOME", root.path())
        .env("MCP_CATALOG_PATH", root.path().join("catalog.json"));
    cmd.output().expect("run the inspector")
}

fn text_of(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn typescript_sdk_accepts_every_result() {
    if !have_node("node_clients::typescript_sdk_accepts_every_result") {
        return;
    }
    let root = Root::new();
    let sock = root.socket();
    let script = node_dir().join("ts_client.mjs");
    let out = Command::new(node())
        .arg(&script)
        .arg(BIN)
        .arg(&sock)
        .arg(root.path())
        .current_dir(node_dir())
        .env("HOME", root.path())
        .output()
        .expect("run node");
    stop_daemons(&sock);
    let (stdout, stderr) = text_of(&out);
    assert!(
        out.status.success(),
        "TypeScript client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for check in [
        "exec_kernel_error",
        "exec_parse_error_hint",
        "get_kernel_error",
        "journal_kernel_error",
        "exec_client_env",
        "exec_cat_text",
        "language_card",
        "resource_error",
        "completion",
    ] {
        assert!(
            stdout.contains(&format!("\"check\":\"{check}\",\"ok\":true")),
            "{check} missing:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("\"check\":\"classic\",\"ok\":true"),
        "{stdout}"
    );
}

/// The TypeScript client 2.x (`@modelcontextprotocol/client`) negotiating
/// the era itself settles on 2026-07-28; without negotiation it does the
/// 2025-11-25 handshake. Both list the tools and call `shoal_exec`.
#[test]
fn typescript_client_2x_in_both_eras() {
    if !have_node("node_clients::typescript_client_2x_in_both_eras") {
        return;
    }
    for mode in ["auto", "legacy"] {
        let root = Root::new();
        let sock = root.socket();
        let out = Command::new(node())
            .arg(node_dir().join("ts2_client.mjs"))
            .arg(BIN)
            .arg(&sock)
            .arg(root.path())
            .arg(mode)
            .current_dir(node_dir())
            .env("HOME", root.path())
            .output()
            .expect("run node");
        stop_daemons(&sock);
        let (stdout, stderr) = text_of(&out);
        assert!(
            out.status.success(),
            "TypeScript client 2.x ({mode}) failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        for check in ["era", "tools_listed", "exec_value", "exec_error", "classic"] {
            assert!(
                stdout.contains(&format!("\"check\":\"{check}\",\"ok\":true")),
                "{mode}: {check} missing:\n{stdout}"
            );
        }
    }
}

/// `--strict` in both eras: the 2026-07-28 envelope (server/discover, no
/// handshake) and the 2025 handshake.
#[test]
fn inspector_strict_tools_list_is_clean() {
    if !have_node("node_clients::inspector_strict_tools_list_is_clean") {
        return;
    }
    for era in ["modern", "legacy"] {
        strict_tools_list(era);
    }
}

fn strict_tools_list(era: &str) {
    let root = Root::new();
    let out = run_inspector(
        &root,
        &["--strict", "--protocol-era", era],
        &["--method", "tools/list"],
    );
    stop_daemons(&root.socket());
    let (stdout, stderr) = text_of(&out);
    assert!(
        out.status.success(),
        "--strict ({era}) failed ({}):\n{stderr}",
        out.status
    );
    let v: Value = serde_json::from_str(&stdout).expect("tools/list JSON");
    let tools = v["tools"].as_array().expect("tools");
    assert!(tools.len() >= 3, "{stdout}");
    // The 2025 era advertises task augmentation on shoal_exec (the
    // 2026-07-28 era has no `execution` field: the server decides).
    if era == "legacy" {
        let exec = tools
            .iter()
            .find(|t| t["name"] == "shoal_exec")
            .expect("shoal_exec listed");
        assert_eq!(exec["execution"]["taskSupport"], "optional", "{stdout}");
    }
    assert!(
        !stderr.contains("error") && !stderr.contains("Warning"),
        "strict ({era}) reported problems:\n{stderr}"
    );
}

/// Each tool through the Inspector: a valid call, an invalid-argument call
/// and a kernel error. Error results come back as results (exit 5,
/// `tool_is_error`), with the message in the text, never as a schema
/// rejection.
#[test]
fn inspector_delivers_valid_and_error_results() {
    if !have_node("node_clients::inspector_delivers_valid_and_error_results") {
        return;
    }
    for era in ["modern", "legacy"] {
        delivers_valid_and_error_results(era);
    }
}

fn delivers_valid_and_error_results(era: &str) {
    let root = Root::new();
    let call = |tool: &str, args: &[&str]| {
        let mut after = vec!["--method", "tools/call", "--tool-name", tool];
        for a in args {
            after.push("--tool-arg");
            after.push(a);
        }
        run_inspector(&root, &["--protocol-era", era], &after)
    };
    let cases: &[(&str, &[&str], bool, &str)] = &[
        ("shoal_exec", &["src=6 * 7"], true, "42"),
        ("shoal_exec", &["src=1 / 0"], false, "division by zero"),
        ("shoal_exec", &["bogus=1"], false, "invalid arguments"),
        ("shoal_exec", &["src=ls | grep x"], false, "hint:"),
        ("shoal_get", &["ref=out:1"], true, "42"),
        ("shoal_get", &["ref=out:999999"], false, "unknown value ref"),
        (
            "shoal_get",
            &["ref=out:1", "format=yaml"],
            false,
            "invalid arguments",
        ),
        ("shoal_journal", &["limit=1"], true, "entries"),
        ("shoal_journal", &["limit=0"], false, "invalid arguments"),
        (
            "shoal_journal",
            &["since=10", "until=5"],
            false,
            "is after until",
        ),
    ];
    for (tool, args, ok, want) in cases {
        let out = call(tool, args);
        let (stdout, stderr) = text_of(&out);
        let code = out.status.code();
        if *ok {
            assert_eq!(code, Some(0), "{era}: {tool} {args:?}:\n{stdout}\n{stderr}");
        } else {
            assert_eq!(
                code,
                Some(5),
                "{era}: {tool} {args:?} should be a delivered error result:\n{stdout}\n{stderr}"
            );
            assert!(stdout.contains("\"isError\": true"), "{stdout}");
        }
        assert!(
            stdout.contains(want),
            "{tool} {args:?}: text lacks {want:?}:\n{stdout}\n{stderr}"
        );
        assert!(
            !stdout.contains("does not match") && !stderr.contains("does not match"),
            "{tool} {args:?}: schema rejection:\n{stdout}\n{stderr}"
        );
    }
    stop_daemons(&root.socket());
}

#[test]
fn inspector_load_has_no_errors() {
    if !have_node("node_clients::inspector_load_has_no_errors") {
        return;
    }
    let root = Root::new();
    let out = run_inspector(
        &root,
        &[],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "shoal_exec",
            "--tool-arg",
            "src=6 * 7",
            "--load",
            "--load-requests",
            "200",
            "--load-concurrency",
            "4",
        ],
    );
    stop_daemons(&root.socket());
    let (stdout, stderr) = text_of(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("load summary JSON");
    assert_eq!(v["requests"], 200, "{stdout}");
    assert_eq!(v["ok"], 200, "{stdout}");
    assert_eq!(v["errors"], 0, "{stdout}");
    assert_eq!(v["toolErrors"], 0, "{stdout}");
}

/// MCP Tasks through the TypeScript SDK 1.x (`ts_tasks.mjs`): its own task
/// loop (`callToolStream`), then by hand a task-augmented `shoal_exec`
/// polled with `tasks/get` and fetched with `tasks/result`, a failing task,
/// a second one cancelled with `tasks/cancel`, `tasks/list` over two pages
/// and `notifications/tasks/status`, each answer parsed by the SDK's own
/// schemas (and tool results by the `outputSchema` validator).
#[test]
fn typescript_sdk_accepts_every_task_result() {
    if !have_node("node_clients::typescript_sdk_accepts_every_task_result") {
        return;
    }
    let root = Root::new();
    let sock = root.socket();
    let out = Command::new(node())
        .arg(node_dir().join("ts_tasks.mjs"))
        .arg(BIN)
        .arg(&sock)
        .arg(root.path())
        .current_dir(node_dir())
        .env("HOME", root.path())
        .output()
        .expect("run node");
    stop_daemons(&sock);
    let (stdout, stderr) = text_of(&out);
    assert!(
        out.status.success(),
        "TypeScript tasks client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for check in [
        "tasks_capability",
        "task_support_optional",
        "call_tool_stream",
        "create_task_result",
        "tasks_get_polled",
        "tasks_result",
        "tasks_failed",
        "tasks_cancel",
        "cancelled_stays",
        "cancel_terminal",
        "status_notifications",
        "tasks_list",
        "unknown_task",
        "tasks_done",
    ] {
        assert!(
            stdout.contains(&format!("\"check\":\"{check}\",\"ok\":true")),
            "{check} missing:\n{stdout}"
        );
    }
}

/// The Inspector's one-shot `--cli` has no `tasks/*` methods; its
/// connection CLI `mcpdo` (same package) has them and a task-augmented
/// `tools/call --task`. One private mcpdo daemon (its own dir and token
/// under the root, stopped at the end) holds the connection to `shoal mcp`.
struct Mcpdo<'a> {
    root: &'a Root,
}

impl Mcpdo<'_> {
    fn run(&self, args: &[&str]) -> (Option<i32>, Value, String) {
        let script = node_dir()
            .join("node_modules/@modelcontextprotocol/inspector/clients/mcpdo/build/mcp-bin.js");
        assert!(
            script.exists(),
            "no mcpdo at {}: run `make node`",
            script.display()
        );
        let p = self.root.path();
        let out = Command::new(node())
            .arg(script)
            .arg("--format")
            .arg("json")
            .args(args)
            .current_dir(p)
            .env("HOME", p)
            .env("MCP_CATALOG_PATH", p.join("catalog.json"))
            .env("MCP_INSPECTOR_DAEMON_DIR", p.join("mcpd"))
            .env(
                "MCP_INSPECTOR_DAEMON_TOKEN",
                format!("shoal-test-{}", std::process::id()),
            )
            .env("MCP_INSPECTOR_SECRET_STORE", "memory")
            .output()
            .expect("run mcpdo");
        let (stdout, stderr) = text_of(&out);
        let v = serde_json::from_str(&stdout)
            .or_else(|_| serde_json::from_str(&stderr))
            .unwrap_or(Value::Null);
        (out.status.code(), v, format!("{stdout}\n{stderr}"))
    }

    fn ok(&self, args: &[&str]) -> Value {
        let (code, v, text) = self.run(args);
        assert_eq!(code, Some(0), "mcpdo {args:?}:\n{text}");
        assert!(
            !text.contains("does not match") && !text.contains("Invalid"),
            "mcpdo {args:?}: schema rejection:\n{text}"
        );
        v
    }
}

impl Drop for Mcpdo<'_> {
    fn drop(&mut self) {
        self.run(&["daemon", "stop"]);
    }
}

#[test]
fn inspector_drives_mcp_tasks() {
    if !have_node("node_clients::inspector_drives_mcp_tasks") {
        return;
    }
    let root = Root::new();
    let sock = root.socket();
    let sock_s = sock.display().to_string();
    {
        let m = Mcpdo { root: &root };
        let mut connect = vec!["connect".to_string(), "--connection".into(), "sh".into()];
        for (k, v) in client_env(&root) {
            connect.push("-e".into());
            connect.push(format!("{k}={v}"));
        }
        connect.extend(["--".into(), BIN.into(), "mcp".into(), "--socket".into()]);
        connect.push(sock_s.clone());
        let args: Vec<&str> = connect.iter().map(String::as_str).collect();
        let c = m.ok(&args);
        assert_eq!(c["protocolEra"], "legacy", "{c}");
        let on = |rest: &[&str]| {
            let mut a = vec!["--connection", "sh"];
            a.extend_from_slice(rest);
            m.ok(&a)
        };
        // A task-augmented call: the Inspector polls it to its result.
        let r = on(&[
            "tools/call",
            "shoal_exec",
            "src:=sh { sleep 0.3; echo via-inspector }",
            "--task",
        ]);
        assert_eq!(r["isError"], false, "{r}");
        assert!(r.to_string().contains("via-inspector"), "{r}");
        let task = r["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no related task in {r}"))
            .to_string();
        let g = on(&["tasks/get", &task]);
        assert_eq!(g["task"]["status"], "completed", "{g}");
        let res = on(&["tasks/result", &task]);
        assert_eq!(res["isError"], false, "{res}");
        assert!(
            res["structuredContent"]["ref"]
                .as_str()
                .is_some_and(|s| s.starts_with("out:")),
            "{res}"
        );
        // A running one (a plain background exec), cancelled.
        let bg = on(&[
            "tools/call",
            "shoal_exec",
            "src:=sh { sleep 30 }",
            "background:=true",
        ]);
        let long = bg["structuredContent"]["task"]
            .as_str()
            .unwrap_or_else(|| panic!("no task in {bg}"))
            .to_string();
        let g = on(&["tasks/get", &long]);
        assert_eq!(g["task"]["status"], "working", "{g}");
        let c = on(&["tasks/cancel", &long]);
        assert_eq!(c["cancelled"], true, "{c}");
        let g = on(&["tasks/get", &long]);
        assert_eq!(g["task"]["status"], "cancelled", "{g}");
        let l = on(&["tasks/list"]);
        let ids: Vec<&str> = l["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("no tasks in {l}"))
            .iter()
            .filter_map(|t| t["taskId"].as_str())
            .collect();
        assert!(
            ids.contains(&task.as_str()) && ids.contains(&long.as_str()),
            "{l}"
        );
        // A failing task-augmented call: delivered as the kernel's error.
        let (code, v, text) = m.run(&[
            "--connection",
            "sh",
            "tools/call",
            "shoal_exec",
            "src:=1 / 0",
            "--task",
        ]);
        assert_ne!(code, Some(0), "{text}");
        assert!(
            v.to_string().contains("division by zero") && !text.contains("does not match"),
            "{text}"
        );
    }
    stop_daemons(&sock);
}
