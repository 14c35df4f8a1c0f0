//! The typed fold against the JSON fold it replaced: the same result bytes
//! for exec results, views, task reads, plain results and errors.

use serde_json::{json, Map, Value as Json};

use super::results::*;
use crate::kernel::{CancelResult, GetResult, TaskRead, ValueRead};
use crate::mcp::{
    Applied, CapRequestResult, ExecAnswer, ExecResult, JournalResult, PtyAnswer, PtyClosed,
    PtySent, TaskStarted, WarningOut,
};
use crate::rpc::RpcError;

/// The JSON fold as it was: reads `render`/`inline`/`raw`, `uri`,
/// `value.uri`, `ref` and `warnings` out of the tree.
mod reference {
    use crate::bound::{bound_text, MAX_TEXT};
    use crate::uri;
    use serde_json::{json, Value as Json};

    fn warning_lines(structured: &Json) -> String {
        let mut out = String::new();
        for w in structured
            .get("warnings")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let field = |k: &str| w.get(k).and_then(Json::as_str).unwrap_or("");
            out.push_str(&format!(
                "\nwarning[{}]: {} (hint: {})",
                field("code"),
                field("message"),
                field("hint")
            ));
        }
        out
    }

    fn link_uri(structured: &Json) -> Option<String> {
        if let Some(u) = structured.get("uri").and_then(Json::as_str) {
            return Some(u.to_string());
        }
        if let Some(u) = structured
            .get("value")
            .and_then(|v| v.get("uri"))
            .and_then(Json::as_str)
        {
            return Some(u.to_string());
        }
        structured
            .get("ref")
            .and_then(Json::as_str)
            .and_then(uri::ref_to_uri)
    }

    pub fn success(structured: Json) -> Json {
        let uri = link_uri(&structured);
        let text = match ["render", "inline", "raw"]
            .iter()
            .find_map(|k| structured.get(*k).and_then(Json::as_str))
        {
            Some(r) => bound_text(r, MAX_TEXT, uri.as_deref()),
            None => bound_text(
                &serde_json::to_string_pretty(&structured).unwrap_or_default(),
                MAX_TEXT,
                uri.as_deref(),
            ),
        };
        let text = text + &warning_lines(&structured);
        let mut content = vec![json!({"type": "text", "text": text})];
        if let Some(uri) = &uri {
            let name = structured.get("ref").and_then(Json::as_str).unwrap_or(uri);
            content.push(json!({"type": "resource_link", "uri": uri, "name": name, "mimeType": "application/json"}));
        }
        json!({"content": content, "structuredContent": structured, "isError": false})
    }

    pub fn error(error: Json) -> Json {
        let uri = error
            .get("data")
            .and_then(|d| {
                d.get("uri")
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        d.get("ref")
                            .and_then(Json::as_str)
                            .filter(|r| r.starts_with("out:"))
                            .and_then(uri::ref_to_uri)
                    })
            })
            .filter(|_| error.get("code") == Some(&json!(crate::rpc::RAISED)));
        let text = bound_text(&error_text(&error), MAX_TEXT, uri.as_deref());
        let mut content = vec![json!({"type": "text", "text": text})];
        if let Some(u) = &uri {
            let name = error["data"]["ref"].as_str().unwrap_or(u);
            content.push(json!({"type": "resource_link", "uri": u, "name": name, "mimeType": "application/json"}));
        }
        json!({"content": content, "structuredContent": error, "isError": true})
    }

    fn error_text(error: &Json) -> String {
        let data = error.get("data");
        let field = |k: &str| data.and_then(|d| d.get(k));
        let message = error["message"].as_str().unwrap_or("error");
        let rpc_code = error["code"].as_i64().unwrap_or(0);
        let mut out = match field("code").and_then(Json::as_str) {
            Some(lang) => format!("error [{lang}, {rpc_code}]: {message}"),
            None => format!("error [{rpc_code}]: {message}"),
        };
        if let Some(hint) = field("hint").and_then(Json::as_str) {
            out.push_str("\nhint: ");
            out.push_str(hint);
        }
        for e in field("errors")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let path = e["path"]
                .as_str()
                .filter(|p| !p.is_empty())
                .unwrap_or("(arguments)");
            out.push_str(&format!(
                "\n  {path}: {}",
                e["message"].as_str().unwrap_or("")
            ));
        }
        if let Some(status) = field("status").filter(|s| !s.is_null()) {
            out.push_str(&format!("\nstatus: {status}"));
        }
        if let Some(stderr) = field("stderr")
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
        {
            let bytes = shoal_value::output::OutputBytes::from(stderr);
            if let Some(section) = shoal_value::shown::stderr_section(&bytes) {
                out.push('\n');
                out.push_str(&section);
            }
        }
        out
    }
}

/// The typed fold gives the bytes the JSON fold gave for the same result.
fn same<S: ToolOutput + Clone>(s: S) {
    let old = reference::success(serde_json::to_value(s.clone()).unwrap());
    let new = tool_success(s);
    assert_eq!(serde_json::to_string(&new).unwrap(), old.to_string());
}

fn texts() -> Vec<String> {
    let long: String = (1..=4000).map(|i| format!("line {i}\n")).collect();
    let wide = "x".repeat(70_000);
    vec![
        String::new(),
        "42".into(),
        "a\nb\n".into(),
        "ünïcödé \u{1F600}\ttab \"quoted\" \\".into(),
        long,
        wide,
    ]
}

fn warning(i: u32) -> WarningOut {
    WarningOut {
        code: format!("w{i}"),
        message: format!("message {i}"),
        span: crate::mcp::Span {
            start: i,
            end: i + 3,
        },
        hint: format!("hint {i}"),
    }
}

#[test]
fn exec_results_fold_as_the_json_form() {
    for (i, render) in texts().into_iter().enumerate() {
        for warnings in [vec![], vec![warning(1)], vec![warning(1), warning(2)]] {
            for journal in [None, Some("degraded")] {
                let r = ExecResult {
                    reference: format!("out:{i}"),
                    uri: format!("shoal://out/{i}"),
                    value: json!({"$": "int", "v": i}),
                    render: render.clone(),
                    elapsed_ms: 0.125,
                    warnings: warnings.clone(),
                    journal,
                };
                same(r.clone());
                same(Applied {
                    result: ExecResult {
                        value: crate::elide::ReplyValue {
                            value: shoal_value::Value::Int(i as i64),
                            budget: Default::default(),
                            uri: r.uri.clone(),
                        },
                        reference: r.reference.clone(),
                        uri: r.uri.clone(),
                        render: r.render.clone(),
                        elapsed_ms: r.elapsed_ms,
                        warnings: r.warnings.clone(),
                        journal,
                    },
                    plan_ref: "plan:ab".into(),
                });
            }
        }
        for render in [None, Some(render.clone())] {
            for timed_out in [None, Some(true)] {
                same(ExecAnswer::Task(TaskStarted {
                    task: "task:2".into(),
                    events: "shoal://events/task.2".into(),
                    render: render.clone(),
                    timed_out,
                }));
            }
        }
    }
}

#[test]
fn views_and_task_reads_fold_as_the_json_form() {
    let values = [
        None,
        Some(json!({"$": "int", "v": 1})),
        Some(json!({"$": "ref", "ref": "out:9", "uri": "shoal://out/9/items"})),
        Some(json!([1, 2])),
    ];
    for text in texts() {
        for value in &values {
            for reference in ["out:3", "task:4", "weird ref", ""] {
                for view in 0..4 {
                    let mut g = GetResult::of(reference.into());
                    g.value = value.clone();
                    match view {
                        0 => g.render = Some(text.clone()),
                        1 => g.inline = Some(text.clone()),
                        2 => {
                            g.raw = Some(text.clone());
                            g.n = Some(text.len() as u64);
                            g.truncated = Some(false);
                        }
                        _ => g.lines = Some([1, 2]),
                    }
                    same(g.clone());
                    same(ValueRead::Value(Box::new(g)));
                }
            }
        }
        let mut rec = shoal_lang::task::TaskRecord::new(4, "s", "1 + 1", 1);
        rec.finish(shoal_lang::task::Ending::Value { n: 7, ok: true }, 2);
        let read = TaskRead {
            record: crate::kernel::TaskRow::of(&rec),
            value: Some(json!({"$": "int", "v": 2})),
            reference: "task:4".into(),
            uri: "shoal://task/4".into(),
            render: text.clone(),
        };
        same(read.clone());
        same(ValueRead::Task(Box::new(read)));
    }
}

#[test]
fn plain_results_fold_as_their_pretty_json() {
    same(CancelResult {
        task: "task:1".into(),
        cancel_requested: true,
        state: "running".into(),
    });
    let mut entries = Vec::new();
    for i in 0..3 {
        let mut m = Map::new();
        m.insert("n".into(), json!(i));
        m.insert("src".into(), json!("x".repeat(30_000)));
        entries.push(m);
        same(JournalResult {
            entries: entries.clone(),
            truncated: (i > 1).then_some(true),
            more: (i > 1).then_some(4),
        });
    }
    same(PtyAnswer::Sent(PtySent {
        pty_id: "pty:1".into(),
        sent: 3,
    }));
    same(PtyAnswer::Closed(PtyClosed {
        pty_id: "pty:1".into(),
        closed: true,
        exit: None,
    }));
    let mut grant = CapRequestResult::of(crate::mcp::Grant::ApprovalPending, "plan:1".into());
    same(grant.clone());
    grant.awaiting = Some("human".into());
    grant.uncovered_effects = Some(vec!["opaque".into()]);
    same(grant);
}

#[test]
fn errors_fold_as_the_json_form() {
    let stderr: String = (1..=30).map(|i| format!("e{i}\n")).collect();
    let datas = [
        None,
        Some(json!({})),
        Some(json!({"code": "cmd_failed", "status": 2, "stderr": stderr})),
        Some(json!({"code": "div_zero", "hint": "do not", "ref": "out:5"})),
        Some(json!({"ref": "out:5", "uri": "shoal://out/5/x"})),
        Some(json!({"ref": "task:5"})),
        Some(json!({"uri": "shoal://out/6"})),
        Some(json!({"code": 7, "status": null, "stderr": ""})),
        Some(json!({"status": "weird", "stderr": 5})),
        Some(
            json!({"errors": [{"path": "", "message": "must be an object"}, {"path": "/src", "message": "not a string"}, {"path": 3}]}),
        ),
        Some(json!({"hint": "h".repeat(70_000)})),
        Some(json!([1, 2])),
        Some(json!("text")),
    ];
    for code in [
        crate::rpc::RAISED,
        crate::rpc::INVALID_PARAMS,
        crate::rpc::INTERNAL_ERROR,
    ] {
        for data in &datas {
            for message in ["boom", "", "multi\nline"] {
                let mut e = RpcError::new(code, message);
                e.data = data.clone();
                let old = reference::error(e.to_json());
                let new = tool_error(&e);
                assert_eq!(serde_json::to_string(&new).unwrap(), old.to_string());
            }
        }
    }
}

#[test]
fn error_text_shows_the_end_of_stderr() {
    let stderr: String = (1..=30).map(|i| format!("e{i}\n")).collect();
    let e = RpcError::new(-32002, "`make` exited with status 2")
        .with_data(json!({"code": "cmd_failed", "status": 2, "stderr": stderr}));
    let want: Vec<String> = (11..=30).map(|i| format!("e{i}")).collect();
    assert_eq!(
        error_text(&e),
        format!(
            "error [cmd_failed, -32002]: `make` exited with status 2\nstatus: 2\n\
             --- stderr (last 20 of 30 lines) ---\n{}",
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
    let v: Json = serde_json::to_value(&stamped).unwrap();
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
    let related = r.related(crate::mcp_tasks::related_meta(1));
    let v: Json = serde_json::to_value(&related).unwrap();
    assert_eq!(
        v["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": "task:1"}})
    );
}
