//! The shapes of folded tool results, judged by what a model reads
//! (`content[].text`), the link to the stored value and the structured
//! content beside them.

use serde_json::{json, Value as Json};

use super::results::*;
use crate::kernel::{CancelResult, GetResult};
use crate::mcp::{ExecResult, Span, TaskStarted, WarningOut};
use crate::rpc::{self, RpcError};

fn wire(r: &ToolResult) -> Json {
    serde_json::to_value(r).unwrap()
}

fn exec(n: u64, render: &str) -> ExecResult<Json> {
    ExecResult {
        reference: format!("out:{n}"),
        uri: format!("shoal://out/{n}"),
        value: json!({"$": "str", "v": render}),
        render: render.into(),
        elapsed_ms: 0.5,
        warnings: vec![],
        journal: None,
    }
}

#[test]
fn an_exec_result_is_its_render_a_link_and_the_result() {
    let mut r = exec(3, "42");
    r.value = json!({"$": "int", "v": 42});
    r.warnings = vec![WarningOut {
        code: "echo_redirect".into(),
        message: "`>` here is a comparison".into(),
        span: Span { start: 0, end: 4 },
        hint: "write to a file with `.save(path)`".into(),
    }];
    // The bytes a client receives, key order included.
    assert_eq!(
        serde_json::to_string(&tool_success(r)).unwrap(),
        concat!(
            r#"{"content":[{"type":"text","text":"42\nwarning[echo_redirect]: `>` here is a comparison (hint: write to a file with `.save(path)`)"},"#,
            r#"{"type":"resource_link","uri":"shoal://out/3","name":"out:3","mimeType":"application/json"}],"#,
            r#""structuredContent":{"ref":"out:3","uri":"shoal://out/3","value":{"$":"int","v":42},"render":"42","elapsed_ms":0.5,"#,
            r#""warnings":[{"code":"echo_redirect","message":"`>` here is a comparison","span":{"start":0,"end":4},"hint":"write to a file with `.save(path)`"}]},"#,
            r#""isError":false}"#
        )
    );
}

#[test]
fn a_patch_reads_as_the_patch() {
    let patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n";
    let v = wire(&tool_success(exec(7, patch)));
    assert_eq!(v["content"][0], json!({"type": "text", "text": patch}));
    assert_eq!(v["content"][1]["uri"], "shoal://out/7");
    assert_eq!(v["structuredContent"]["render"], patch);
}

#[test]
fn a_big_value_shows_its_head_and_where_the_rest_is() {
    let big: String = (1..=20_000).map(|i| format!("row {i}\n")).collect();
    let v = wire(&tool_success(exec(12, &big)));
    let text = v["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("row 1\nrow 2\n"), "{}", &text[..40]);
    assert!(text.len() <= crate::bound::MAX_TEXT, "{}", text.len());
    let tail = text.lines().last().unwrap();
    assert!(
        tail.starts_with('…') && tail.ends_with("more lines, fetch via shoal://out/12)"),
        "{tail}"
    );
    assert_eq!(
        v["content"][1],
        json!({"type": "resource_link", "uri": "shoal://out/12", "name": "out:12", "mimeType": "application/json"})
    );
    // The structured content keeps the whole render.
    assert_eq!(
        v["structuredContent"]["render"].as_str().unwrap().len(),
        big.len()
    );
}

#[test]
fn a_view_links_its_elided_value_else_its_ref() {
    let mut g = GetResult::of("out:4".into());
    g.value = Some(json!({"$": "ref", "ref": "out:4", "uri": "shoal://out/4/items"}));
    g.render = Some("[…]".into());
    let v = wire(&tool_success(g.clone()));
    assert_eq!(v["content"][0]["text"], "[…]");
    assert_eq!(v["content"][1]["uri"], "shoal://out/4/items");
    assert_eq!(v["content"][1]["name"], "out:4");
    g.value = None;
    g.render = None;
    g.raw = Some("raw bytes".into());
    let v = wire(&tool_success(g));
    assert_eq!(v["content"][0]["text"], "raw bytes");
    assert_eq!(v["content"][1]["uri"], "shoal://out/4");
}

#[test]
fn a_result_without_text_reads_as_its_pretty_json() {
    let v = wire(&tool_success(CancelResult {
        task: "task:1".into(),
        cancel_requested: true,
        state: "running".into(),
    }));
    assert_eq!(
        v,
        json!({
            "content": [{"type": "text", "text": "{\n  \"task\": \"task:1\",\n  \"cancel_requested\": true,\n  \"state\": \"running\"\n}"}],
            "structuredContent": {"task": "task:1", "cancel_requested": true, "state": "running"},
            "isError": false,
        })
    );
    let started = wire(&tool_success(TaskStarted {
        task: "task:2".into(),
        events: "shoal://events/task.2".into(),
        render: Some("task:2 started".into()),
        timed_out: None,
    }));
    assert_eq!(
        started["content"],
        json!([{"type": "text", "text": "task:2 started"}])
    );
}

#[test]
fn a_failing_command_shows_its_error_status_and_stderr() {
    let e = RpcError::new(rpc::RAISED, "`make` exited with status 2").with_data(json!({
        "code": "cmd_failed", "status": 2, "stderr": "cc: error: x.c: No such file\n", "ref": "out:5",
    }));
    let v = wire(&tool_error(&e));
    assert_eq!(
        v,
        json!({
            "content": [
                {"type": "text", "text": "error [cmd_failed, -32002]: `make` exited with status 2\nstatus: 2\n--- stderr ---\ncc: error: x.c: No such file"},
                {"type": "resource_link", "uri": "shoal://out/5", "name": "out:5", "mimeType": "application/json"},
            ],
            "structuredContent": e.to_json(),
            "isError": true,
        })
    );
}

#[test]
fn an_error_says_its_hint_and_each_bad_argument() {
    let e = crate::mcp::invalid_arguments(
        "invalid arguments for shoal_exec: 5 is not a string".into(),
        vec![
            crate::mcp::argument_error("/src", "5 is not a string"),
            crate::mcp::argument_error("", "bogus is not allowed"),
        ],
    );
    let v = wire(&tool_error(&e));
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "error [-32602]: invalid arguments for shoal_exec: 5 is not a string\n  /src: 5 is not a string\n  (arguments): bogus is not allowed"}])
    );
    // One bad argument is said once.
    let one = crate::mcp::invalid_arguments(
        "invalid arguments for shoal_exec: src: 5 is not a string".into(),
        vec![crate::mcp::argument_error("/src", "5 is not a string")],
    );
    assert_eq!(
        wire(&tool_error(&one))["content"][0]["text"],
        json!("error [-32602]: invalid arguments for shoal_exec: src: 5 is not a string")
    );
    // Only a raised error links its stored value.
    let e = RpcError::new(rpc::UNKNOWN_REF, "unknown ref out:9")
        .with_data(json!({"ref": "out:9", "hint": "refs start at out:1"}));
    let v = wire(&tool_error(&e));
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "error [-32004]: unknown ref out:9\nhint: refs start at out:1"}])
    );
}

#[test]
fn error_text_shows_the_ends_of_stderr() {
    let stderr: String = (1..=30).map(|i| format!("e{i}\n")).collect();
    let e = RpcError::new(-32002, "`make` exited with status 2")
        .with_data(json!({"code": "cmd_failed", "status": 2, "stderr": stderr}));
    let want: Vec<String> = (14..=30).map(|i| format!("e{i}")).collect();
    assert_eq!(
        error_text(&e),
        format!(
            "error [cmd_failed, -32002]: `make` exited with status 2\nstatus: 2\n\
             --- stderr (first 3 and last 17 of 30 lines) ---\ne1\ne2\ne3\n\
             \u{2026} (10 lines left out) \u{2026}\n{}",
            want.join("\n")
        )
    );
}

#[test]
fn the_stamp_and_the_task_meta_come_after_the_result() {
    let r = tool_success(CancelResult {
        task: "task:1".into(),
        cancel_requested: true,
        state: "running".into(),
    });
    let mut stamped = r.clone();
    stamped.stamp();
    let v = wire(&stamped);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "content",
            "structuredContent",
            "isError",
            "resultType",
            "_meta"
        ]
    );
    assert_eq!(v["resultType"], "complete");
    assert_eq!(
        v["_meta"],
        json!({"io.modelcontextprotocol/serverInfo": crate::mcp::server_info()})
    );
    let v = wire(&r.related(crate::mcp_tasks::related_meta(1)));
    assert_eq!(
        v["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": "task:1"}})
    );
}
