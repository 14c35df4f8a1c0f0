//! The exec hot path: the session worker thread evaluates on its own
//! large stack (no thread per exec), and the reply elides the value once, at
//! the connection. What must not be traded away for it: deep recursion ends in
//! `recursion_limit` (never a crash) on the daemon's worker, the stack a deep
//! exec committed is given back, and elision follows the caller's budget.

mod common;

use common::*;
use serde_json::json;

fn rss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn deep_recursion_on_the_worker_ends_in_recursion_limit_and_the_stack_is_returned() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("deep");
    let before = rss_kb(d.pid());
    // Legal depth just under the limit: answers.
    let r = c.ok(
        "exec",
        json!({"src": "fn f(n) { if n == 0 { 0 } else { 1 + f(n - 1) } }\nf(9990)"}),
    );
    assert_eq!(r["value"]["v"], json!(9990), "{r}");
    // Unbounded recursion: a catchable recursion_limit, never a crash.
    let r = c.ok(
        "exec",
        json!({"src": "fn h(n) { h(n + 1) }\nh(0) catch e { e.code }"}),
    );
    assert_eq!(r["value"]["v"], json!("recursion_limit"), "{r}");
    let r = c.call("exec", json!({"src": "let g = x => g(x)\ng(1)"}));
    assert_eq!(r["error"]["data"]["code"], json!("recursion_limit"), "{r}");
    // Recursion through a method callback (deeper native frames per call).
    let r = c.ok(
        "exec",
        json!({"src": "fn g(n) { if n == 0 { 0 } else { [n].map(x => g(x - 1)).first() + 1 } }\ng(4900)"}),
    );
    assert_eq!(r["value"]["v"], json!(4900), "{r}");
    // The same worker keeps serving, with its bindings.
    let r = c.ok("exec", json!({"src": "f(3)"}));
    assert_eq!(r["value"]["v"], json!(3), "{r}");
    // The deep execs committed tens of MB of stack; it was given back.
    let after = rss_kb(d.pid());
    assert!(
        after < before + 32 * 1024,
        "RSS {before} kB before the deep execs, {after} kB after"
    );
}

#[test]
fn exec_elides_with_the_callers_budget_in_one_round_trip() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("elide");
    // Small values come back whole.
    let r = c.ok("exec", json!({"src": "[1, 2, 3]"}));
    assert_eq!(r["render"], json!("[1, 2, 3]"), "{r}");
    assert_eq!(r["value"]["v"].as_array().map(Vec::len), Some(3), "{r}");
    // Over the caller's budget: an elided stand-in naming its ref.
    let r = c.ok(
        "exec",
        json!({"src": "range(0, 100).collect()", "elide": {"max_items": 10}}),
    );
    let uri = r["uri"].as_str().unwrap().to_string();
    assert_eq!(r["value"]["$"], json!("ref"), "{r}");
    assert_eq!(r["value"]["n"], json!(100), "{r}");
    assert_eq!(r["value"]["uri"], json!(uri), "{r}");
    // The default budget admits the same list.
    let r = c.ok("exec", json!({"src": "range(0, 100).collect()"}));
    assert_eq!(r["value"]["v"].as_array().map(Vec::len), Some(100), "{r}");
    // The stored value is whole whatever the reply showed.
    let g = c.ok("value.get", json!({"ref": "out:2", "slice": [95, 100]}));
    let v: Vec<_> = g["value"]["v"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["v"].clone())
        .collect();
    assert_eq!(
        v,
        vec![json!(95), json!(96), json!(97), json!(98), json!(99)],
        "{g}"
    );
}
