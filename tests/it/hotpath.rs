//! The exec hot path: the session worker thread evaluates on its own
//! large stack (no thread per exec), and the reply elides the value once, at
//! the connection. What must not be traded away for it: deep recursion ends in
//! `recursion_limit` (never a crash) on the daemon's worker, the stack a deep
//! exec committed is given back, and elision follows the caller's budget.

use crate::common::*;
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

#[test]
fn execs_are_journaled_in_order_and_a_queued_one_keeps_its_place() {
    let root = Root::new();
    let d = Daemon::start_with(&root, &root.socket(), &[], &[("SHOAL_LOG", "shoal=debug")]);
    let mut c = d.conn();
    c.attach("q");
    let r = c.ok("exec", json!({"src": "let x = 6"}));
    assert_eq!(r["ref"], json!("out:1"), "{r}");
    let r = c.ok("exec", json!({"src": "x * 7"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}), "{r}");
    assert_eq!(r["ref"], json!("out:2"), "{r}");
    let r = c.ok("exec", json!({"src": "[x].len()"}));
    assert_eq!(r["value"]["v"], json!(1), "{r}");
    // An error is an error like any other, stored as out:N.
    c.send(&json!({"jsonrpc": "2.0", "id": "q-4", "method": "exec", "params": {"src": "x / 0"}}));
    let r = c.recv();
    assert_eq!(r["error"]["data"]["code"], json!("div_zero"), "{r}");

    // Journaled, in order, and read back like any other value.
    let entries = c.ok("journal.query", json!({"session": "q"}));
    let srcs: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["src"].as_str().unwrap())
        .collect();
    let want = ["let x = 6", "x * 7", "[x].len()", "x / 0"];
    let mut newest_first = want.to_vec();
    newest_first.reverse();
    assert!(srcs == want || srcs == newest_first, "{entries}");
    let g = c.ok("value.get", json!({"ref": "out:2"}));
    assert_eq!(g["value"], json!({"$": "int", "v": 42}), "{g}");
    // Its events went out as the worker's do.
    let ev = c.ok("events.read", json!({"channel": "render"}));
    let renders: Vec<&str> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["payload"]["v"]["render"]["v"].as_str())
        .collect();
    assert!(renders.contains(&"42"), "{ev}");

    // While the worker is busy, an exec queues behind it: order is kept
    // (q-5 may reach the daemon only after the gate opened; its number comes
    // after the slow exec's either way).
    let mut other = d.conn();
    other.attach("q");
    let gate = root.path().join("gate");
    let slow = format!(
        "sh {{ until [ -e {} ]; do sleep 0.01; done }}",
        gate.display()
    );
    c.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "exec", "params": {"src": slow}}));
    session_busy(&mut other, "q", true);
    other.send(
        &json!({"jsonrpc": "2.0", "id": "q-5", "method": "exec", "params": {"src": "x + 1"}}),
    );
    std::fs::write(&gate, "").unwrap();
    let slow = c.recv();
    assert_eq!(slow["result"]["ref"], json!("out:5"), "{slow}");
    let r = other.recv();
    assert_eq!(r["result"]["value"], json!({"$": "int", "v": 7}), "{r}");
    assert_eq!(r["result"]["ref"], json!("out:6"), "{r}");
}

// The worker asks for the next block of `out:N` ahead of need, and a wait grows the block: 3000 execs (eleven 256-number blocks) wait for the
// journal a few times at most, even when a loaded disk takes 100s of ms per commit.
#[test]
fn execs_rarely_wait_for_their_out_numbers() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("refs");
    for i in 0..3000 {
        let r = c.ok("exec", json!({"src": format!("{i} * 2")}));
        assert_eq!(r["value"]["v"], json!(i * 2), "{r}");
    }
    let st = c.ok("daemon.status", json!({}));
    let row = st["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "refs")
        .cloned()
        .unwrap();
    let waits = row["ref_waits"].as_u64().unwrap();
    assert!(waits <= 4, "{waits} waits for out:N reservations: {row}");
}
