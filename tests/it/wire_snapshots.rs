//! The wire as clients see it, as snapshots (`insta`, files in
//! `tests/it/snapshots/`): `tools/list` and `initialize` of both MCP eras, a
//! tool result, a failing outcome, a tool error and JSON-RPC errors, and the
//! kernel's exec reply and error. A change to any of them shows as a diff in
//! review; accept one with `cargo insta review` (or `INSTA_UPDATE=always`).
//! Numbers that differ between runs (refs, times, pids) are redacted.

use crate::common::*;
use insta::assert_json_snapshot;
use serde_json::{json, Value};

/// A 2026-07-28 request: version and capabilities in `_meta`, the session named.
fn modern(c: &mut Conn, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "shoal/session": "snap",
    });
    c.call(method, params)
}

#[test]
fn mcp_2025_handshake_and_tools_list() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": "snap"}}));
    let init = c.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "snap", "version": "0"}}),
    );
    assert_json_snapshot!("initialize_2025_11_25", init, {
        ".result.instructions" => "[the language card]",
        ".result.serverInfo.version" => "[version]",
    });
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_json_snapshot!("tools_list_2025_11_25", c.call("tools/list", json!({})));
}

#[test]
fn mcp_2026_discover_and_tools_list() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    assert_json_snapshot!("server_discover_2026_07_28", modern(&mut c, "server/discover", json!({})), {
        ".result.instructions" => "[the language card]",
        ".result.serverInfo.version" => "[version]",
    });
    assert_json_snapshot!(
        "tools_list_2026_07_28",
        modern(&mut c, "tools/list", json!({}))
    );
}

#[test]
fn mcp_results_and_errors() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.mcp_legacy("snap");
    let call = |c: &mut Conn, args: Value| {
        c.call(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": args}),
        )
    };
    let redact = |v: Value| -> Value {
        // out:N and its uri differ with the order tests ran in a session.
        let s = v.to_string();
        let s = regex_lite_out(&s);
        serde_json::from_str(&s).unwrap()
    };
    assert_json_snapshot!("exec_value", redact(call(&mut c, json!({"src": "6 * 7"}))), {
        ".result.structuredContent.elapsed_ms" => "[ms]",
    });
    assert_json_snapshot!(
        "exec_failing_outcome",
        redact(call(&mut c, json!({"src": "sh { echo out; echo err >&2; exit 3 }"}))),
        {
            ".result.structuredContent.elapsed_ms" => "[ms]",
            ".result.structuredContent.value.dur_ns" => "[ns]",
            ".result.structuredContent.value.pid" => "[pid]",
        }
    );
    assert_json_snapshot!(
        "exec_parse_error",
        redact(call(&mut c, json!({"src": "let = ("})))
    );
    assert_json_snapshot!(
        "exec_bash_habit",
        redact(call(&mut c, json!({"src": "cat f | wc -l"})))
    );
    assert_json_snapshot!(
        "unknown_tool",
        c.call("tools/call", json!({"name": "shoal_nope", "arguments": {}}))
    );
    assert_json_snapshot!("invalid_arguments", call(&mut c, json!({"src": 7})));
    assert_json_snapshot!("unknown_method", c.call("nope/nope", json!({})));
}

#[test]
fn kernel_exec_reply_and_error() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("snap");
    let v = c.call("exec", json!({"src": "{a: 1, b: [true, \"x\"]}"}));
    assert_json_snapshot!("kernel_exec_record", serde_json::from_str::<Value>(&regex_lite_out(&v.to_string())).unwrap(), {
        ".result.elapsed_ms" => "[ms]",
    });
    let e = c.call("exec", json!({"src": "1 / 0"}));
    assert_json_snapshot!(
        "kernel_exec_error",
        serde_json::from_str::<Value>(&regex_lite_out(&e.to_string())).unwrap()
    );
    assert_json_snapshot!("kernel_bad_params", c.call("exec", json!({"source": "1"})));
}

/// `out:N` and `shoal://out/N` with N replaced by `[n]`.
fn regex_lite_out(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = ["out:", "out/"]
        .iter()
        .filter_map(|p| rest.find(p).map(|i| (i, p.len())))
        .min()
        .map(|(i, n)| i + n)
    {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("[n]");
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}
