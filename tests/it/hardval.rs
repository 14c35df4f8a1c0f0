//! docs/protocol.md §10, value-level rows: one exec never takes the daemon down.
//! Row 1: allocations sized by user input are bounded by `[limits]
//! session_memory` (`-32040` naming the key); row 2: values of any nesting
//! depth; row 9: `[limits] spill_bytes` caps captured output. Each test
//! checks that the daemon survives and another session still answers.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

fn daemon_with(root: &Root, toml: &str) -> Daemon {
    let cfg = root.path().join("shoal.toml");
    std::fs::write(&cfg, toml).unwrap();
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    )
}

/// Another session on a fresh connection still evaluates.
fn others_still_answer(d: &Daemon) {
    let mut o = d.conn();
    o.attach("bystander");
    let r = o.ok("exec", json!({"src": "6 * 7"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}), "{r}");
}

fn resource_limit(r: &Value) {
    assert_eq!(r["error"]["code"], json!(-32040), "{r}");
    assert_eq!(r["error"]["data"]["code"], json!("resource_limit"), "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("session_memory"), "{r}");
}

#[test]
fn user_sized_allocations_hit_session_memory_not_the_process() {
    let root = Root::new();
    let d = daemon_with(&root, "[limits]\nsession_memory = 67108864\n");
    let mut c = d.conn();
    c.attach("hog");
    for src in [
        "range(0, 10_000_000_000).collect()",
        "range(0, 100_000_000).collect()",
        "range(0, 10_000_000_000).map(x => x)",
        "range(0, 10_000_000_000).sort()",
        "range(0, 10_000_000_000).skip(1)",
        "json.stringify(range(0, 10_000_000_000))",
        "[range(0, 10_000_000_000)].json()",
        "path('/dev/zero').read()",
        // Growth one step at a time is caught at the loop's checkpoints.
        "var xs = [1]\nfor i in range(0, 100) { xs = xs + xs }\nxs.len()",
        "var s = 'x'\nwhile true { s = s + s }",
    ] {
        let t0 = std::time::Instant::now();
        let r = c.call("exec", json!({ "src": src }));
        eprintln!("{src:?}: {:?}", t0.elapsed());
        resource_limit(&r);
    }
    // The session goes on, bindings and all.
    let r = c.ok("exec", json!({"src": "range(0, 10).collect().len()"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 10}), "{r}");
    // Lazy range methods stay cheap.
    let r = c.ok("exec", json!({"src": "range(0, 10_000_000_000).take(3)"}));
    assert_eq!(r["value"]["v"].as_array().map(Vec::len), Some(3), "{r}");
    others_still_answer(&d);
}

#[test]
fn deep_values_are_built_encoded_stored_and_dropped() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("deep");
    for (n, src) in [
        (3000, "var x = []\nfor i in range(0, 3000) { x = [x] }\nx"),
        (
            100_000,
            "var y = []\nfor i in range(0, 100000) { y = [y] }\ny",
        ),
        (
            100_000,
            "var r = {}\nfor i in range(0, 100000) { r = {k: r, i: i} }\nr",
        ),
    ] {
        let r = c.ok("exec", json!({ "src": src }));
        assert!(r["value"].is_object(), "{n}: {r}");
        let reference = r["ref"].as_str().unwrap().to_string();
        for format in ["inline", "json"] {
            let g = c.ok("value.get", json!({"ref": reference, "format": format}));
            assert!(g.is_object(), "{g}");
        }
    }
    // Compared and cloned.
    let r = c.ok(
        "exec",
        json!({"src": "var z = []\nfor i in range(0, 100000) { z = [z] }\nz == y"}),
    );
    assert_eq!(r["value"], json!({"$": "bool", "v": true}), "{r}");
    others_still_answer(&d);
    // Closing the session drops the values.
    c.ok("session.close", json!({"session": "deep"}));
    others_still_answer(&d);
    // SIGTERM with a deep value held: a clean exit.
    let mut k = d.conn();
    k.attach("held");
    k.ok(
        "exec",
        json!({"src": "var w = []\nfor i in range(0, 100000) { w = [w] }\nw"}),
    );
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("daemon exits");
    assert_eq!(st.code(), Some(0), "{st}");
    assert!(!root.socket().exists(), "socket removed");
}

#[test]
fn spill_bytes_caps_captured_output() {
    let root = Root::new();
    let d = daemon_with(&root, "[limits]\nspill_bytes = 16777216\n");
    let mut c = d.conn();
    c.attach("spill");
    let r = c.ok(
        "exec",
        json!({"src": "let o = sh { yes }\n{t: o.truncated, n: o.stdout.len(), ok: o.ok}"}),
    );
    let v = &r["value"]["v"];
    assert_eq!(v["t"], json!({"$": "bool", "v": true}), "{r}");
    let n = v["n"]["v"].as_i64().unwrap();
    assert!(n > 8 << 20 && n <= 16 << 20, "{r}");
    // The child saw its stream closed (`yes` died of SIGPIPE).
    assert_eq!(v["ok"], json!({"$": "bool", "v": false}), "{r}");
    // The outcome itself carries the flag on the wire and in its render.
    let r = c.ok(
        "exec",
        json!({"src": "sh { yes | head -c 30000000 }", "position": "value"}),
    );
    assert_eq!(r["value"]["truncated"], json!(true), "{r}");
    assert!(r["value"]["cmd"].is_string(), "{r}");
    let g = c.ok("value.get", json!({"ref": r["ref"], "format": "inline"}));
    assert!(
        g["inline"].as_str().unwrap().contains("truncated: true"),
        "{g}"
    );
    // An outcome that was not cut has no `truncated` key.
    let r = c.ok(
        "exec",
        json!({"src": "sh { echo hi }", "position": "value"}),
    );
    assert!(r["value"].get("truncated").is_none(), "{r}");
    // Spill files are removed with their values and the quota comes back.
    c.ok("session.close", json!({"session": "spill"}));
    let mut c = d.conn();
    c.attach("spill");
    let r = c.ok(
        "exec",
        json!({"src": "let o = sh { head -c 12000000 /dev/zero }\n[o.truncated, o.stdout.len()]"}),
    );
    assert_eq!(
        r["value"]["v"],
        json!([{"$": "bool", "v": false}, {"$": "int", "v": 12_000_000}]),
        "{r}"
    );
    others_still_answer(&d);
}
