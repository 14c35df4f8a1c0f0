//! Tests of the MCP surface (`proto::mcp`): negotiation, schemas, tool results.

use serde_json::json;

use super::*;

#[test]
fn negotiation() {
    assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
    assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
    assert_eq!(negotiate(Some("2024-11-05")), NEWEST);
    assert_eq!(negotiate(Some("2026-07-28")), NEWEST);
    assert_eq!(negotiate(None), NEWEST);
}

#[test]
fn schemas_are_valid_and_validate() {
    for t in tools(Caps {
        journal: true,
        events: true,
    })
    .as_array()
    .unwrap()
    {
        assert!(
            jsonschema::meta::is_valid(&t["inputSchema"]),
            "{}",
            t["name"]
        );
        assert!(
            jsonschema::meta::is_valid(&t["outputSchema"]),
            "{}",
            t["name"]
        );
    }
    let caps = Caps::default();
    assert_eq!(
        parse_call(caps, "shoal_exec", Some(json!({"src": "1"}))),
        Ok(Tool::Exec(ExecArgs {
            src: "1".into(),
            mode: None,
            background: None,
            timeout_ms: None,
            position: None,
            elide: None,
        }))
    );
    let Err(CallError::InvalidArguments(e)) =
        parse_call(caps, "shoal_exec", Some(json!({"src": 5, "bogus": true})))
    else {
        panic!("invalid arguments pass");
    };
    let e = e.to_json();
    assert_eq!(e["code"], json!(-32602));
    let errs = e["data"]["errors"].as_array().unwrap();
    assert_eq!(errs.len(), 2, "{e}");
    assert!(errs.iter().any(|x| x["path"] == json!("/src")));
    let out = super::super::kernel::exec_result(1, json!({"$":"int","v":42}), "42".into(), 0.5);
    let ov = jsonschema::validator_for(&exec_output()).unwrap();
    assert!(ov.is_valid(&out));
}

#[test]
fn first_frame_methods() {
    for m in [
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "notifications/initialized",
        "shoal/attach",
        "subscriptions/listen",
    ] {
        assert!(is_mcp_method(m), "{m}");
    }
    for m in ["session.attach", "exec", "daemon.status", "tools"] {
        assert!(!is_mcp_method(m), "{m}");
    }
}

#[test]
fn the_table_parses_every_tool() {
    let caps = Caps {
        journal: true,
        events: true,
    };
    let calls = [
        (
            "shoal_exec",
            json!({"src": "1", "position": "stmt", "elide": {"max_rows": 3}}),
        ),
        (
            "shoal_get",
            json!({"ref": "out:1", "slice": [0, 2], "format": "json"}),
        ),
        ("shoal_journal", json!({"limit": 5, "ok": true})),
        ("shoal_pty_open", json!({"cmd": "cat", "env": {"A": "b"}})),
        (
            "shoal_pty_send",
            json!({"pty_id": "pty:1", "input": [{"key": "Enter"}]}),
        ),
        (
            "shoal_pty_read",
            json!({"pty_id": "pty:1", "wait_for": "x"}),
        ),
        (
            "shoal_pty_resize",
            json!({"pty_id": "pty:1", "cols": 10, "rows": 5}),
        ),
        ("shoal_pty_close", json!({"pty_id": "pty:1"})),
        ("shoal_pty_list", json!({})),
        ("shoal_cancel", json!({"task": "task:3"})),
        ("shoal_plan", json!({"src": "ls"})),
        ("shoal_apply", json!({"plan_ref": "plan:1"})),
        (
            "shoal_cap_request",
            json!({"plan_ref": "plan:1", "effects": ["fs.write"]}),
        ),
    ];
    assert_eq!(calls.len(), TOOLS.len());
    for (name, args) in calls {
        let t =
            parse_call(caps, name, Some(args.clone())).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(t.name(), name);
        let schema = t.def().input_schema();
        assert_eq!(schema["type"], json!("object"), "{name}");
        assert!(
            schema.get("$defs").is_none() && schema.get("$ref").is_none(),
            "{name}: {schema}"
        );
        // Unknown members are refused with their path.
        let mut extra = args.clone();
        extra["bogus"] = json!(1);
        assert!(
            matches!(
                parse_call(caps, name, Some(extra)),
                Err(CallError::InvalidArguments(_))
            ),
            "{name}"
        );
    }
    assert_eq!(
        parse_call(Caps::default(), "shoal_journal", None),
        Err(CallError::UnknownTool("shoal_journal".into()))
    );
    let Err(CallError::InvalidArguments(e)) = parse_call(
        caps,
        "shoal_get",
        Some(json!({"ref": "out:1", "lines": [0, 2]})),
    ) else {
        panic!("line 0 passes");
    };
    let e = e.to_json();
    assert_eq!(e["data"]["errors"][0]["path"], json!("/lines/0"), "{e}");
    let Err(CallError::InvalidArguments(e)) = parse_call(
        caps,
        "shoal_exec",
        Some(json!({"src": "1", "timeout_ms": -1})),
    ) else {
        panic!("a negative timeout passes");
    };
    let e = e.to_json();
    assert_eq!(e["data"]["errors"][0]["path"], json!("/timeout_ms"), "{e}");
    assert!(matches!(
        parse_call(caps, "shoal_exec", Some(json!([1]))),
        Err(CallError::InvalidArguments(_))
    ));
}

#[test]
fn an_exec_answers_its_result_or_its_task_and_an_apply_its_plan() {
    let result = ExecResult {
        reference: "out:1".into(),
        uri: "shoal://out/1".into(),
        value: crate::elide::ReplyValue {
            value: shoal_value::Value::Int(2),
            budget: Default::default(),
            uri: "shoal://out/1".into(),
        },
        render: "2".into(),
        elapsed_ms: 0.5,
        warnings: vec![],
        journal: Some("degraded"),
    };
    let ran = json!({
        "ref": "out:1", "uri": "shoal://out/1", "value": {"$": "int", "v": 2},
        "render": "2", "elapsed_ms": 0.5, "journal": "degraded",
    });
    assert_eq!(
        serde_json::to_string(&ExecAnswer::Ran(result.clone())).unwrap(),
        serde_json::to_string(&ran).unwrap()
    );
    let task = ExecAnswer::Task(TaskStarted {
        task: "task:3".into(),
        events: "task.3".into(),
        render: None,
        timed_out: Some(true),
    });
    assert_eq!(
        serde_json::to_value(&task).unwrap(),
        json!({"task": "task:3", "events": "task.3", "timed_out": true})
    );
    let mut applied = ran;
    applied["plan_ref"] = json!("plan:9");
    assert_eq!(
        serde_json::to_string(&Applied {
            result,
            plan_ref: "plan:9".into()
        })
        .unwrap(),
        serde_json::to_string(&applied).unwrap()
    );
}

#[test]
fn a_plan_call_answers_a_plan_its_rows_or_a_grant() {
    let grant = PlanAnswer::Grant(Box::new(CapRequestResult {
        grant: Grant::Approved,
        plan_ref: "plan:1".into(),
        awaiting: None,
        enforced: Some(true),
        why: None,
        uncovered_effects: None,
        granted_effects: None,
        approve_via: None,
        expires: None,
        elicitation: None,
    }));
    assert_eq!(
        serde_json::to_value(&grant).unwrap(),
        json!({"grant": "approved", "plan_ref": "plan:1", "enforced": true})
    );
    assert_eq!(
        serde_json::to_value(PlanAnswer::Plans(vec![])).unwrap(),
        json!([])
    );
    assert_eq!(
        serde_json::to_value(crate::kernel::PlanList { plans: vec![] }).unwrap(),
        json!({"plans": []})
    );
}

/// The message and the first `{path, message}` of a call's argument error.
fn argument_error(name: &str, args: Json) -> (String, String, String) {
    let caps = Caps {
        journal: true,
        events: true,
    };
    let Err(CallError::InvalidArguments(e)) = parse_call(caps, name, Some(args.clone())) else {
        panic!("{name} {args} passes");
    };
    assert_eq!(e.code, crate::rpc::INVALID_PARAMS);
    let data = e.data.unwrap();
    let first = &data["errors"][0];
    (
        e.message,
        first["path"].as_str().unwrap().to_string(),
        first["message"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_bad_argument_names_its_path() {
    let (m, path, _) = argument_error("shoal_exec", json!({"src": "1", "timeout_ms": "x"}));
    assert_eq!(
        m,
        "invalid arguments for shoal_exec: timeout_ms: invalid type: string \"x\", expected u64"
    );
    assert_eq!(path, "/timeout_ms");
    // Nested: the member of the member.
    let (m, path, msg) =
        argument_error("shoal_exec", json!({"src": "1", "elide": {"max_rows": -3}}));
    assert_eq!(path, "/elide/max_rows");
    assert!(
        m.contains("elide.max_rows: invalid value: integer `-3`"),
        "{m}"
    );
    assert!(msg.starts_with("invalid value: integer `-3`"), "{msg}");
    let (m, path, _) = argument_error("shoal_pty_send", json!({"pty_id": "pty:1", "input": 5}));
    assert_eq!(path, "/input");
    assert!(m.contains("input: invalid type: integer `5`"), "{m}");
    let (_, path, _) = argument_error("shoal_pty_open", json!({"cmd": "sh", "env": {"A": 1}}));
    assert_eq!(path, "/env/A");
    let (_, path, _) = argument_error("shoal_get", json!({"ref": "out:1", "slice": [0, "x"]}));
    assert_eq!(path, "/slice/1");
    // Missing: the arguments themselves.
    let (m, path, _) = argument_error("shoal_plan", json!({}));
    assert_eq!(
        (m.as_str(), path.as_str()),
        ("invalid arguments for shoal_plan: missing field `src`", "")
    );
}

#[test]
fn what_the_schema_says_beyond_types_is_enforced() {
    let (m, path, _) = argument_error("shoal_journal", json!({"limit": 0}));
    assert_eq!(path, "/limit");
    assert!(
        m.contains("limit: invalid value: integer `0`, expected an integer of at least 1"),
        "{m}"
    );
    let (_, path, _) = argument_error("shoal_get", json!({"ref": "out:1", "lines": [1, 0]}));
    assert_eq!(path, "/lines/1");
    for bad in ["3", "task:", "task:x1", "task:1 "] {
        let (_, path, _) = argument_error("shoal_cancel", json!({"task": bad}));
        assert_eq!(path, "/task", "{bad}");
    }
    let (_, path, _) = argument_error("shoal_pty_open", json!({"cmd": ""}));
    assert_eq!(path, "/cmd");
    let (_, path, _) = argument_error("shoal_pty_read", json!({"pty_id": "pty:1", "wait_for": ""}));
    assert_eq!(path, "/wait_for");
    let (_, path, _) = argument_error("shoal_exec", json!({"src": "1", "mode": "plan"}));
    assert_eq!(path, "/mode");
    // Every bad member is reported, in the order given: unknown ones, and
    // each that does not read (a required one set aside is not missing).
    let caps = Caps::default();
    let Err(CallError::InvalidArguments(e)) = parse_call(
        caps,
        "shoal_exec",
        Some(json!({"a": 1, "src": 2, "mode": "x", "b": 3, "timeout_ms": -1})),
    ) else {
        panic!("passes");
    };
    assert!(
        e.message.starts_with(
            "invalid arguments for shoal_exec: unknown field `a`, expected one of `src`"
        ),
        "{}",
        e.message
    );
    let errors = e.data.unwrap()["errors"].clone();
    let paths: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        ["/a", "/src", "/mode", "/b", "/timeout_ms"],
        "{errors}"
    );
    assert!(errors[2]["message"]
        .as_str()
        .unwrap()
        .starts_with("unknown variant `x`"));
    // Missing is reported when nothing else is wrong with the member.
    let (m, _, _) = argument_error("shoal_pty_resize", json!({"pty_id": "pty:1", "cols": 5}));
    assert_eq!(
        m,
        "invalid arguments for shoal_pty_resize: missing field `rows`"
    );
    let Err(CallError::InvalidArguments(e)) = parse_call(
        caps,
        "shoal_pty_resize",
        Some(json!({"pty_id": 1, "cols": 5})),
    ) else {
        panic!("passes");
    };
    let errors = e.data.unwrap()["errors"].clone();
    assert_eq!(errors.as_array().unwrap().len(), 2, "{errors}");
    assert_eq!(errors[0]["path"], "/pty_id");
    assert_eq!(errors[1]["message"], "missing field `rows`");
    // What passes still passes; null is an absent optional member.
    assert!(parse_call(caps, "shoal_cancel", Some(json!({"task": "task:12"}))).is_ok());
    assert!(parse_call(
        caps,
        "shoal_exec",
        Some(json!({"src": "1", "timeout_ms": null}))
    )
    .is_ok());
}
