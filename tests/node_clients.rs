//! The clients people run, against `shoal mcp` (autostarting the daemon on a
//! private socket): the official TypeScript SDK 1.x, the TypeScript client
//! 2.x (both eras) and the MCP Inspector CLI 2.x (`--protocol-era modern`
//! and `legacy`). Both validate `structuredContent` against the tool's
//! `outputSchema` even on error results, so every error path is exercised.
//! Node 22 and the packages come from `make node` (`tests/node`, installed
//! by `make test`); a missing install fails with a clear message.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
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
