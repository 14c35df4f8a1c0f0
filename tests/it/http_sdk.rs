//! Slow tier (`make test-all`): real clients against the daemon's Streamable HTTP
//! endpoint. The Python SDK (2.x: classic session, the `Client` in the legacy and
//! the 2026-07-28 era; 1.x: classic) runs the same checks as through the shim
//! (`tests/http_sdk_checks.py`); the TypeScript SDK's StreamableHTTPClientTransport
//! runs `tests/node/ts_http.mjs`; and the MCP conformance suite runs its server
//! scenarios, with the ones that do not apply listed in
//! `tests/node/conformance-baseline.yml` (docs/http.md).

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;
use crate::http_client::{serve, serve_in};

fn python(venv: &str, mode: &str) {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(venv)
        .join("bin/python");
    let s = serve("");
    let out = Command::new(py)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/http_sdk_checks.py"
        ))
        .arg(&s.url)
        .arg(&s.token)
        .arg(s.root.socket())
        .arg(s.root.path())
        .arg(mode)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{venv} {mode} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut checks = vec![
        "exec_valid",
        "exec_invalid",
        "get_unknown_ref",
        "resource_read_out",
        "subscription_update",
        "unsubscribed_stops",
        "progress_notified",
        "cancel_stops_work",
    ];
    if mode != "classic" {
        checks.push("era");
    }
    assert_checks(&stdout, &checks);
}

#[test]
fn python_sdk_2x_over_http() {
    if !have_venv("http_sdk::python_sdk_2x_over_http", ".venv") {
        return;
    }
    python(".venv", "classic");
    python(".venv", "legacy");
    python(".venv", "auto");
}

#[test]
fn python_sdk_1x_over_http() {
    if !have_venv("http_sdk::python_sdk_1x_over_http", "target/venv-mcp1") {
        return;
    }
    python("target/venv-mcp1", "classic");
}

fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

fn node() -> PathBuf {
    node_dir().join("node_modules/node/bin/node")
}

#[test]
fn typescript_sdk_over_http() {
    if !have_node("http_sdk::typescript_sdk_over_http") {
        return;
    }
    let s = serve("");
    let out = Command::new(node())
        .arg(node_dir().join("ts_http.mjs"))
        .arg(&s.url)
        .arg(&s.token)
        .current_dir(node_dir())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "TypeScript client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for c in [
        "exec_value",
        "exec_error",
        "resource_read",
        "subscription_update",
        "task",
        "cancel",
        "terminated",
    ] {
        assert!(
            stdout.contains(&format!("\"check\":\"{c}\",\"ok\":true")),
            "{c}:\n{stdout}"
        );
    }
}

#[test]
fn conformance_suite_server_scenarios() {
    if !have_node("http_sdk::conformance_suite_server_scenarios") {
        return;
    }
    let s = serve("");
    let port = s.addr.rsplit(':').next().unwrap();
    let dir = node_dir();
    let out = Command::new(node())
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &format!("http://localhost:{port}/mcp")])
        .arg("--expected-failures")
        .arg(dir.join("conformance-baseline.yml"))
        .arg("-o")
        .arg(s.root.path().join("conformance"))
        .env(
            "NODE_OPTIONS",
            format!("--import {}", dir.join("conformance_auth.mjs").display()),
        )
        .env("SHOAL_TOKEN", &s.token)
        .current_dir(&dir)
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "conformance suite:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for passed in [
        "server-initialize",
        "ping",
        "tools-list",
        "completion-complete",
        "resources-list",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(
            stdout.contains(&format!("✓ {passed}:")),
            "{passed} did not pass:\n{stdout}"
        );
    }
}

/// Leash approvals asked through `elicitation/create` (`tests/leash_elicit_checks.py`):
/// the same checks as through the shim, in both eras, over HTTP.
#[test]
fn python_sdk_elicitation_over_http() {
    if !have_venv("http_sdk::python_sdk_elicitation_over_http", ".venv") {
        return;
    }
    let s = serve_in(|root| {
        let w = root.join("w");
        std::fs::create_dir_all(&w).unwrap();
        format!(
            "[policy.principal.\"agent:e\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\napprove_via = [\"elicitation\", \"cli\"]\n\n[policy.principal.\"agent:e\".fs]\nread = [\"/**\"]\nwrite = [\"{w}/**\"]\ndelete = [\"{w}/**\"]\n",
            w = w.display()
        )
    });
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let cmd = s.root.command();
    let out = Command::new(py)
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string()))),
        )
        .env("SHOAL_HTTP_URL", &s.url)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/leash_elicit_checks.py"
        ))
        .arg(BIN)
        .arg(s.root.socket())
        .arg(s.root.path())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "elicitation over HTTP failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_checks(&stdout, &crate::leash_elicit::ELICIT_CHECKS);
    let st = crate::http_client::status(&s);
    assert!(
        st["http"]["requests"].as_u64().unwrap() > 20,
        "over HTTP: {st}"
    );
}

/// The TypeScript SDK answers `elicitation/create` over HTTP (`tests/node/ts_elicit.mjs`
/// with `SHOAL_HTTP_URL`): accept approves, decline denies, as through the shim.
#[test]
fn typescript_sdk_elicitation_over_http() {
    if !have_node("http_sdk::typescript_sdk_elicitation_over_http") {
        return;
    }
    let s = serve_in(|root| {
        format!(
            "[policy.principal.\"agent:ts\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\napprove_via = [\"elicitation\", \"cli\"]\n\n[policy.principal.\"agent:ts\".fs]\nread = [\"/**\"]\nwrite = [\"{w}/**\"]\n",
            w = root.join("w").display()
        )
    });
    let out = Command::new(node())
        .arg(node_dir().join("ts_elicit.mjs"))
        .arg(BIN)
        .arg(s.root.socket())
        .arg(s.root.path())
        .current_dir(node_dir())
        .env("SHOAL_HTTP_URL", &s.url)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "TypeScript elicitation over HTTP failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in ["ts_accept", "ts_decline"] {
        assert!(
            stdout.contains(&format!("\"check\":\"{check}\",\"ok\":true")),
            "{check} missing:\n{stdout}"
        );
    }
    let st = crate::http_client::status(&s);
    assert!(
        st["http"]["requests"].as_u64().unwrap() > 4,
        "over HTTP: {st}"
    );
}
