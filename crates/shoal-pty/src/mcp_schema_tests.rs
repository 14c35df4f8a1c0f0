//! The PTY layer's answers against the `shoal_pty_*` tools' output schemas.

use crate::api;
use crate::{Exit, PtyInfo};
use serde_json::json;
use shoal_proto::mcp::{self, parse_call, CallError, Caps};

fn out_validator(name: &str) -> jsonschema::Validator {
    let tools = mcp::tools_detailed(Caps::default());
    let t = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap();
    assert!(jsonschema::meta::is_valid(&t["inputSchema"]));
    assert!(jsonschema::meta::is_valid(&t["outputSchema"]));
    jsonschema::validator_for(&t["outputSchema"]).unwrap()
}

#[test]
fn results_and_errors_validate() {
    let info = PtyInfo {
        id: 3,
        session: "s".into(),
        cmd: "cat".into(),
        pid: 42,
        rows: 10,
        cols: 40,
        alive: true,
        claimed: None,
        watchers: 0,
    };
    let err =
        json!({"code": -32022, "message": "unknown or closed pty_id", "data": {"pty_id": "pty:9"}});
    let cases = [
        ("shoal_pty_open", api::open_result(&info)),
        ("shoal_pty_send", api::send_result(3, 5)),
        ("shoal_pty_resize", api::resize_result(3, 30, 100)),
        (
            "shoal_pty_close",
            api::close_result(
                3,
                Some(Exit {
                    status: None,
                    signal: Some(9),
                }),
            ),
        ),
        ("shoal_pty_close", api::close_result(3, None)),
        (
            "shoal_pty_list",
            api::list_result(std::slice::from_ref(&info)),
        ),
    ];
    for (tool, ok) in cases {
        let ok = shoal_proto::mcp::result_json(ok);
        let v = out_validator(tool);
        assert!(v.is_valid(&ok), "{tool}: {ok}");
        assert!(v.is_valid(&err), "{tool} error shape");
        assert!(!v.is_valid(&json!({"nothing": 1})), "{tool} rejects junk");
    }
    let mut t = crate::term::Term::new(2, 10, 0);
    t.process(b"hi");
    let r = crate::ReadResult {
        snapshot: t.read(Some(1)),
        alive: false,
        exit: Some(Exit {
            status: Some(0),
            signal: None,
        }),
        matched: Some(true),
    };
    let read = shoal_proto::mcp::result_json(api::read_result(&info, &r));
    assert!(out_validator("shoal_pty_read").is_valid(&read), "{read}");
    assert_eq!(read["exit"], json!({"status": 0, "signal": null}));
}

#[test]
fn arguments_validate() {
    let ok = |tool: &str, args: serde_json::Value| parse_call(Caps::default(), tool, Some(args));
    assert!(ok("shoal_pty_open", json!({"cmd": "cat", "cols": 40})).is_ok());
    let Err(CallError::InvalidArguments(e)) = ok("shoal_pty_open", json!({"cmd": "", "bogus": 1}))
    else {
        panic!("invalid pty_open arguments pass");
    };
    let e = e.to_json();
    assert_eq!(e["code"], json!(-32602));
    assert!(ok(
        "shoal_pty_send",
        json!({"pty_id": "pty:1", "input": ["a", {"key": "Enter"}]})
    )
    .is_ok());
    assert!(ok("shoal_pty_send", json!({"pty_id": "pty:1", "input": 5})).is_err());
    assert!(ok("shoal_pty_resize", json!({"pty_id": "pty:1", "cols": 5})).is_err());
    assert!(ok("shoal_pty_list", json!({})).is_ok());
}
