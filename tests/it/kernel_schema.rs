//! The kernel methods' result schemas (docs/kernel-schema.json, generated
//! by `shoal_proto::kernel::kernel_schemas`) are true of the real daemon:
//! every method is called at least once, in its common variants, and each
//! successful reply's `result` validates against its method's schema.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// The result schemas, each standing alone (the shared `$defs` copied in),
/// and the methods called so far.
struct Checker {
    doc: Value,
    called: BTreeSet<String>,
}

impl Checker {
    fn new() -> Checker {
        Checker {
            doc: shoal_proto::kernel::kernel_schemas(),
            called: BTreeSet::new(),
        }
    }

    /// `result` of `method` against its schema, closed (a member it does not
    /// name is a mismatch too): the errors, with where.
    fn check(&mut self, method: &str, result: &Value) {
        let mut s = self.doc["methods"][method]["result"].clone();
        assert!(!s.is_null(), "no result schema for {method}");
        s["$defs"] = self.doc["$defs"].clone();
        closed(&mut s);
        let v = jsonschema::validator_for(&s).expect("a valid schema");
        let errors: Vec<String> = v
            .iter_errors(result)
            .map(|e| format!("at {}: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{method}: the reply does not match its schema:\n{}\nresult: {result}",
            errors.join("\n")
        );
        self.called.insert(method.to_string());
    }

    /// Call `method` on `c` (a notification before the reply is skipped),
    /// expect success and check its result.
    fn ok(&mut self, c: &mut Conn, method: &str, params: Value) -> Value {
        let r = reply(c, method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        let result = r["result"].clone();
        self.check(method, &result);
        result
    }
}

/// Every object schema that names its members takes no other
/// (`unevaluatedProperties`: members a `$ref` or `anyOf` beside it names
/// count as named).
fn closed(schema: &mut Value) {
    match schema {
        Value::Object(o) => {
            o.values_mut().for_each(closed);
            if o.contains_key("properties") {
                o.entry("unevaluatedProperties").or_insert(json!(false));
            }
        }
        Value::Array(a) => a.iter_mut().for_each(closed),
        _ => {}
    }
}

/// The reply to a request on `c`, notifications on the way skipped.
fn reply(c: &mut Conn, method: &str, params: Value) -> Value {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = format!(
        "schema-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    loop {
        let r = c.recv();
        if r.get("id") == Some(&json!(id)) {
            return r;
        }
        assert!(r.get("id").is_none(), "a reply to another request: {r}");
    }
}

fn config(root: &Root) -> std::path::PathBuf {
    let p = root.path().join("shoal.toml");
    std::fs::write(
        &p,
        "[policy.principal.\"agent:s\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\n\
         approve_via = [\"attach\"]\nfs.read = [\"/**\"]\n",
    )
    .unwrap();
    p
}

fn daemon(root: &Root, cfg: &Path) -> Daemon {
    Daemon::start_with(
        root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[("SHOAL_DEBUG_HOOKS", "1")],
    )
}

/// A background task's final record (`task.await` until it ended).
fn awaited(k: &mut Checker, c: &mut Conn, task: &Value) -> Value {
    eventually("the task ends", Duration::from_secs(30), || {
        let r = k.ok(c, "task.await", json!({"task": task, "timeout_ms": 5000}));
        matches!(
            r["state"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
        .then_some(r)
    })
}

#[test]
fn every_kernel_reply_matches_its_result_schema() {
    let root = Root::new();
    let cfg = config(&root);
    let d = daemon(&root, &cfg);
    let mut k = Checker::new();
    let mut c = d.conn();

    // Before attaching: parse, complete, the token file.
    k.ok(
        &mut c,
        "parse",
        json!({"src": "let x = [1, {a: \"b\"}]\nx.len()"}),
    );
    k.ok(&mut c, "complete", json!({"src": "wh"}));
    k.ok(&mut c, "leash.tokens_changed", json!({}));
    k.ok(&mut c, "session.attach", json!({"session": "sch"}));
    k.ok(&mut c, "complete", json!({"src": "ls ./", "cursor": 5}));

    // exec: a value, text, a failing command, a record, output, warnings.
    let v = k.ok(&mut c, "exec", json!({"src": "1 + 1"}));
    let n = v["ref"].clone();
    let s = k.ok(&mut c, "exec", json!({"src": "\"hello\""}));
    // A failing command raises (an error reply, no result) unless handled.
    let failed = reply(&mut c, "exec", json!({"src": "sh { exit 3 }"}));
    assert_eq!(failed["error"]["code"], -32002, "{failed}");
    k.ok(&mut c, "exec", json!({"src": "false || echo fallback"}));
    k.ok(
        &mut c,
        "exec",
        json!({"src": "sh { echo out; echo err >&2 }"}),
    );
    k.ok(
        &mut c,
        "exec",
        json!({"src": "{a: 1, b: [true, \"t\", null, 1.5]}"}),
    );
    k.ok(&mut c, "exec", json!({"src": "ls"}));
    let warned = k.ok(&mut c, "exec", json!({"src": "echo a && echo b"}));
    assert!(warned["warnings"].is_array(), "{warned}");
    k.ok(&mut c, "exec", json!({"src": "sh { seq 1 3 }"}));
    k.ok(
        &mut c,
        "exec",
        json!({"src": "range(0, 600).collect()", "elide": {"max_items": 5}}),
    );
    k.ok(&mut c, "exec", json!({"src": "1 + 2", "timeout_ms": 10000}));
    let bytes = k.ok(&mut c, "exec", json!({"src": "sh { printf ab }.stdout"}));

    // value.get in each format, a path, lines.
    for p in [
        json!({"ref": n}),
        json!({"ref": n, "format": "json"}),
        json!({"ref": n, "format": "render"}),
        json!({"ref": n, "format": "inline"}),
        json!({"ref": s["ref"], "format": "raw"}),
        json!({"ref": s["ref"], "lines": [1, 1]}),
        json!({"ref": n, "path": ".", "elide": {"max_bytes": 1}}),
    ] {
        k.ok(&mut c, "value.get", p);
    }
    let raw = json!({"ref": bytes["ref"], "format": "raw"});
    let b64 = k.ok(&mut c, "value.get", raw);
    assert!(b64["raw_base64"].is_string(), "{b64}");
    let raw = json!({"ref": s["ref"], "format": "raw", "elide": {"max_bytes": 2}});
    let cut = k.ok(&mut c, "value.get", raw);
    assert_eq!(cut["truncated"], true, "{cut}");

    // Tasks: one running (suspended, resumed, cancelled), one finished.
    let bg = k.ok(
        &mut c,
        "exec",
        json!({"src": "sh { sleep 30 }", "background": true}),
    );
    let long = bg["task"].clone();
    // Running, and (once its program started) with a pid and a tail.
    let running = eventually("the task's program", Duration::from_secs(20), || {
        let r = k.ok(&mut c, "task.get", json!({"task": long}));
        (!r["pid"].is_null()).then_some(r)
    });
    assert_eq!(running["state"], "running", "{running}");
    k.ok(&mut c, "value.get", json!({"ref": long}));
    k.ok(&mut c, "task.list", json!({}));
    // A wait budget that runs out: the task it became, still running.
    let waited = k.ok(
        &mut c,
        "exec",
        json!({"src": "sh { sleep 30 }", "timeout_ms": 1}),
    );
    assert_eq!(waited["timed_out"], true, "{waited}");
    k.ok(&mut c, "task.cancel", json!({"task": waited["task"]}));
    k.ok(&mut c, "task.suspend", json!({"task": long}));
    k.ok(&mut c, "task.resume", json!({"task": long}));
    k.ok(&mut c, "task.cancel", json!({"task": long}));
    awaited(&mut k, &mut c, &long);
    let quick = k.ok(&mut c, "exec", json!({"src": "2 * 21", "background": true}))["task"].clone();
    let done = awaited(&mut k, &mut c, &quick);
    assert_eq!(done["state"], "completed", "{done}");
    k.ok(&mut c, "task.get", json!({"task": quick}));
    k.ok(&mut c, "value.get", json!({"ref": quick}));
    let failing = k.ok(
        &mut c,
        "exec",
        json!({"src": "sh { exit 3 }", "background": true}),
    )["task"]
        .clone();
    let ended = awaited(&mut k, &mut c, &failing);
    assert_eq!(ended["state"], "failed", "{ended}");
    k.ok(&mut c, "value.get", json!({"ref": failing}));
    k.ok(&mut c, "task.list", json!({}));

    // Plans the local user's policy allows: made, read, applied.
    let plan = k.ok(&mut c, "exec", json!({"src": "1 + 3", "mode": "plan"}));
    let pr = plan["plan_ref"].clone();
    k.ok(&mut c, "plan.get", json!({"plan_ref": pr}));
    k.ok(&mut c, "plan.list", json!({}));
    k.ok(&mut c, "plan.apply", json!({"plan_ref": pr}));
    let plan = k.ok(&mut c, "exec", json!({"src": "1 + 4", "mode": "plan"}));
    k.ok(
        &mut c,
        "exec",
        json!({"src": "1 + 4", "mode": "approved", "plan_ref": plan["plan_ref"]}),
    );
    let rm = root.path().join("gone");
    std::fs::write(&rm, "x").unwrap();
    let rm_src = format!("rm {}", rm.display());
    k.ok(&mut c, "explain", json!({"src": rm_src}));
    let plan = k.ok(&mut c, "exec", json!({"src": rm_src, "mode": "plan"}));
    k.ok(&mut c, "plan.get", json!({"plan_ref": plan["plan_ref"]}));

    // Plans a token principal's policy asks about: pending, granted, decided.
    let tok = create_token(&root, "agent:s");
    let mut agent = d.conn();
    let a = reply(
        &mut agent,
        "session.attach",
        json!({"session": "asks", "token": tok, "client": {"kind": "test"}}),
    );
    k.check("session.attach", &a["result"]);
    k.ok(&mut agent, "daemon.status", json!({}));
    k.ok(&mut agent, "session.list", json!({}));
    let explained = k.ok(&mut agent, "explain", json!({"src": "sh { echo asks }"}));
    assert_eq!(explained["verdict"], "approval_required", "{explained}");
    let pending = k.ok(
        &mut agent,
        "exec",
        json!({"src": "sh { echo asks }", "mode": "plan"}),
    );
    assert_eq!(pending["verdict"], "approval_required", "{pending}");
    let (p1, src1) = (pending["plan_ref"].clone(), "sh { echo asks }");
    k.ok(&mut agent, "cap.request", json!({"plan_ref": p1}));
    k.ok(
        &mut agent,
        "cap.request",
        json!({"plan_ref": p1, "effects": ["fs.write"]}),
    );
    let p2 = k.ok(
        &mut agent,
        "exec",
        json!({"src": "sh { echo denied }", "mode": "plan"}),
    )["plan_ref"]
        .clone();
    let mut human = d.conn();
    k.ok(
        &mut human,
        "session.attach",
        json!({"session": "asks@agent:s"}),
    );
    let approved = k.ok(&mut human, "plan.approve", json!({"plan_ref": p1}));
    assert_eq!(approved["approved"], true, "{approved}");
    k.ok(&mut human, "plan.deny", json!({"plan_ref": p2}));
    k.ok(&mut agent, "plan.list", json!({}));
    k.ok(
        &mut agent,
        "exec",
        json!({"src": src1, "mode": "approved", "plan_ref": p1}),
    );

    // The journal of what ran, and a stored output by its hash.
    let entries = eventually("journal entries", Duration::from_secs(20), || {
        let es = k.ok(&mut c, "journal.query", json!({"session": "sch"}));
        (es.as_array().is_some_and(|a| a.len() >= 5)).then_some(es)
    });
    let first = entries[0].clone();
    k.ok(&mut c, "journal.get", json!({"id": first["id"]}));
    let with_output = entries
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["outputs"].as_array().and_then(|o| o.first()).cloned())
        .expect("an entry with an output");
    k.ok(&mut c, "blob.get", json!({"hash": with_output["hash"]}));
    k.ok(
        &mut c,
        "blob.get",
        json!({"hash": with_output["hash"], "max_bytes": 1}),
    );

    // The bus: published, read, subscribed and dropped.
    k.ok(
        &mut c,
        "events.publish",
        json!({"channel": "user.schema", "payload": {"n": 1}}),
    );
    k.ok(&mut c, "events.read", json!({"channel": "user.schema"}));
    k.ok(&mut c, "events.read", json!({"channel": "journal"}));
    let mut bus = d.conn();
    k.ok(
        &mut bus,
        "events.subscribe",
        json!({"channel": "user.quiet"}),
    );
    k.ok(
        &mut bus,
        "events.unsubscribe",
        json!({"channel": "user.quiet"}),
    );

    // PTYs: opened, driven, read, taken over and watched by a human.
    let pty = k.ok(
        &mut c,
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", "echo READY; sleep 30"], "cols": 40, "rows": 10}),
    );
    let id = pty["pty_id"].clone();
    k.ok(
        &mut c,
        "pty.read",
        json!({"pty_id": id, "wait_for": "READY", "timeout_ms": 10000, "scrollback": 5}),
    );
    k.ok(&mut c, "pty.send", json!({"pty_id": id, "input": "x"}));
    k.ok(
        &mut c,
        "pty.resize",
        json!({"pty_id": id, "cols": 50, "rows": 12}),
    );
    k.ok(&mut c, "pty.list", json!({}));
    let mut watcher = d.conn();
    k.ok(&mut watcher, "session.attach", json!({"session": "sch"}));
    k.ok(&mut watcher, "pty.watch", json!({"pty_id": id}));
    k.ok(&mut watcher, "pty.claim", json!({"pty_id": id}));
    k.ok(&mut c, "pty.list", json!({}));
    k.ok(&mut watcher, "pty.release", json!({"pty_id": id}));
    k.ok(&mut c, "daemon.status", json!({}));
    k.ok(&mut c, "pty.close", json!({"pty_id": id}));

    // Sessions: listed, the daemon's view, one closed, one crashed.
    k.ok(&mut c, "session.list", json!({}));
    k.ok(&mut c, "daemon.status", json!({}));
    let mut scratch = d.conn();
    k.ok(&mut scratch, "session.attach", json!({"session": "gone"}));
    k.ok(&mut scratch, "session.close", json!({}));
    let mut crash = d.conn();
    k.ok(&mut crash, "session.attach", json!({"session": "crash"}));
    k.ok(&mut crash, "debug.crash", json!({}));
    k.ok(&mut c, "debug.crash", json!({"actor": "event_bus"}));
    k.ok(&mut c, "leash.tokens_changed", json!({}));

    let all: BTreeSet<String> = shoal_proto::kernel::methods().map(String::from).collect();
    let missed: Vec<&String> = all.difference(&k.called).collect();
    assert!(missed.is_empty(), "methods never called: {missed:?}");
}
