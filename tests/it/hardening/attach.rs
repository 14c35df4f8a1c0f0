//! Before and at attach: session names are validated, lock files never follow
//! a planted symlink, an unattached connection can only attach (and ask the
//! context-free `parse` and `complete`). Each test starts its own daemon.

use serde_json::json;

use super::*;
use crate::common::*;

// Row 3: names with NUL, control characters or over 256 bytes are -32602, at once, for the
// kernel and for the shim's `shoal/attach`; the daemon goes on.
#[test]
fn session_names_are_validated() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    for bad in ["a\u{0}b", "tab\there", "bell\u{7}", &"x".repeat(257)] {
        let r = c.call("session.attach", json!({"session": bad}));
        assert_eq!(err_code(&r), -32602, "{bad:?}: {r}");
    }
    let long = "y".repeat(256);
    assert_eq!(c.attach(&long)["session"], json!(long));
    assert_eq!(
        c.ok("exec", json!({"src": "6 * 7"}))["value"],
        json!({"$": "int", "v": 42})
    );

    let mut m = mcp(&d, "a\u{0}b");
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1"}}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert_eq!(r["structuredContent"]["code"], json!(-32602), "{r}");

    // No crash loop: nothing restarted, no panic logged.
    let st = c.ok("daemon.status", json!({}));
    let restarts: u64 = st["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["restarts"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(restarts, 0, "{st}");
    assert!(!root.log().contains("panic"), "{}", root.log());
}

// Row 10: a planted symlink at the daemon's lock or the shim's start lock is refused and its
// target never created.
#[test]
fn lock_files_do_not_follow_symlinks() {
    let root = Root::new();
    let socket = root.socket();
    let victim = root.path().join("victim");
    let lock = PathBuf::from(format!("{}.lock", socket.display()));
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = root
        .command()
        .args(["daemon", "--socket", socket.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!victim.exists(), "the daemon created the link's target");
    std::fs::remove_file(&lock).unwrap();

    let start = PathBuf::from(format!("{}.start.lock", socket.display()));
    std::os::unix::fs::symlink(&victim, &start).unwrap();
    let (code, _, err) = run(&root, &["mcp", "--socket", socket.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!victim.exists(), "the shim created the link's target");
    assert!(daemons_on(&socket).is_empty());
}

// Row 11: before attaching only session.attach (parse, complete) answer; blob.get is bounded.
#[test]
fn unattached_connections_can_only_attach() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    for (m, p) in [
        ("journal.query", json!({})),
        ("journal.get", json!({"id": 1})),
        ("blob.get", json!({"hash": "00".repeat(32)})),
        ("value.get", json!({"ref": "out:1"})),
        ("exec", json!({"src": "1"})),
    ] {
        let r = c.call(m, p);
        assert_eq!(err_code(&r), -32000, "{m}: {r}");
    }
    // The local user may watch the bus without a session (`shoal watch --all`).
    c.ok("events.read", json!({"channel": "journal"}));
    c.attach("big");
    c.ok("exec", json!({"src": "range(0, 50000).map(x => x * 3)"}));
    // Batched mode records after the reply: wait for the entry.
    let es = eventually("the entry", Duration::from_secs(10), || {
        let es = c.ok("journal.query", json!({"limit": 1}));
        (!es.as_array()?.is_empty()).then_some(es)
    });
    let out = es[0]["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("{es}"))
        .iter()
        .find(|o| o["kind"] == json!("value"))
        .unwrap_or_else(|| panic!("{}", es[0]))
        .clone();
    assert!(out["len"].as_u64().unwrap() > 100_000, "{out}");
    let hash = out["hash"].as_str().unwrap();
    let b = c.ok("blob.get", json!({"hash": hash}));
    assert_eq!(b["value"]["$"], json!("ref"), "unbounded blob.get");
    assert_eq!(b["value"]["uri"], json!(format!("shoal://val/{hash}")));
    assert!(b.to_string().len() < 16_384, "{}", b.to_string().len());
    let b = c.ok(
        "blob.get",
        json!({"hash": hash, "max_bytes": 100_000_000u64}),
    );
    assert!(b.to_string().len() < 70_000 + 4096);
    // A small blob still comes back whole.
    c.ok("exec", json!({"src": "3"}));
    let es = eventually("the entry", Duration::from_secs(10), || {
        let es = c.ok("journal.query", json!({"limit": 1}));
        (es[0]["src"] == json!("3")).then_some(es)
    });
    let h = es[0]["outputs"][0]["hash"].as_str().unwrap().to_string();
    assert_eq!(
        c.ok("blob.get", json!({"hash": h}))["value"],
        json!({"$": "int", "v": 3})
    );
}

// Row 11 (the rest): `parse` and `complete` are context-free and answer before attaching.
#[test]
fn parse_and_complete_answer_before_attach() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    let r = c.ok("parse", json!({"src": "let x = [1, 2]\nx.len() + 1"}));
    assert_eq!(r["ast_version"], json!(2), "{r}");
    assert_eq!(r["ast"]["stmts"].as_array().map(Vec::len), Some(2), "{r}");
    let r = c.call("parse", json!({"src": "let = 1"}));
    assert_eq!(err_code(&r), -32001, "{r}");
    let span = &r["error"]["data"]["span"];
    assert!(
        span["start"].as_u64().unwrap() <= span["end"].as_u64().unwrap(),
        "{r}"
    );
    assert!(r["error"]["data"].get("hint").is_some(), "{r}");
    assert_eq!(err_code(&c.call("parse", json!({}))), -32602);
    let r = c.ok(
        "complete",
        json!({"src": "let total = 1\nfn tally() { 2 }\nta", "cursor": 1000}),
    );
    assert_eq!(r["candidates"], json!(["tally"]), "{r}");
    let r = c.ok("complete", json!({"src": "wh"}));
    assert_eq!(r["candidates"], json!(["while"]), "{r}");
    // Not on a character boundary: an answer, not a dropped connection.
    let r = c.ok("complete", json!({"src": "é", "cursor": 1}));
    assert!(r["candidates"].as_array().unwrap().len() > 10, "{r}");
    // A tree too deep to return is refused, and the connection goes on.
    let deep = format!("{}1{}", "[".repeat(250), "]".repeat(250));
    let chain = vec!["1"; 999].join(" + ");
    let src = format!("{}{chain}{}", "(".repeat(200), ")".repeat(200));
    for s in [deep, src] {
        let r = c.call("parse", json!({ "src": s }));
        if r.get("error").is_some() {
            assert!([-32602, -32001].contains(&err_code(&r)), "{r}");
        }
    }
    // Everything else still needs an attachment.
    assert_eq!(err_code(&c.call("exec", json!({"src": "1"}))), -32000);
    c.attach("p");
    assert_eq!(
        c.ok("exec", json!({"src": "6 * 7"}))["value"],
        json!({"$": "int", "v": 42})
    );
}
