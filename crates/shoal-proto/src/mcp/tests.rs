//! Tests of the MCP surface (`proto::mcp`): negotiation, schemas, tool results.

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
    assert!(validate_args("shoal_exec", &json!({"src": "1"})).is_ok());
    let e = validate_args("shoal_exec", &json!({"src": 5, "bogus": true})).unwrap_err();
    assert_eq!(e["code"], json!(-32602));
    let errs = e["data"]["errors"].as_array().unwrap();
    assert_eq!(errs.len(), 2, "{e}");
    assert!(errs.iter().any(|x| x["path"] == json!("/src")));
    let out = super::super::kernel::exec_result(1, json!({"$":"int","v":42}), "42".into(), 0.5);
    let ov = jsonschema::validator_for(&exec_output_schema()).unwrap();
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
