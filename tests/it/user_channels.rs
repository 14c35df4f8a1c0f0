//! `user.*` channels are the language's side of the daemon's event bus:
//! what a session emits is published on the bus, and what a client publishes
//! reaches its session's `channel(...)`.

use crate::common::*;
use serde_json::json;

#[test]
fn user_channels_bridge_the_language_and_the_event_bus() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("bridge");
    c.ok(
        "exec",
        json!({"src": "let c = channel(\"user.build\")\nc.emit({step: 1})\nchannel(\"local\").emit(2)"}),
    );
    // The user.* event is on the bus, as the tagged value; non-user channels stay local.
    let ev = c.ok("events.read", json!({"channel": "user.build"}));
    let events = ev["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{ev}");
    assert_eq!(
        events[0]["payload"],
        json!({"$": "record", "v": {"step": {"$": "int", "v": 1}}})
    );
    let local = c.ok("events.read", json!({"channel": "local"}));
    assert_eq!(local["events"], json!([]), "{local}");

    // Another client subscribed to the channel sees the session's next emit.
    let mut watcher = d.conn();
    watcher.attach("watcher");
    watcher.ok("events.subscribe", json!({"channel": "user.build"}));
    c.ok("exec", json!({"src": "c.emit(\"done\")"}));
    let note = eventually(
        "the event notification",
        std::time::Duration::from_secs(5),
        || {
            let m = watcher.recv();
            (m["method"] == json!("event")
                && m["params"]["payload"] == json!({"$": "str", "v": "done"}))
            .then_some(m)
        },
    );
    assert_eq!(note["params"]["channel"], json!("user.build"));

    // A client's publish reaches the session's channel.
    c.ok(
        "events.publish",
        json!({"channel": "user.build", "payload": {"from": "ci", "ok": true}}),
    );
    let v = c.ok("exec", json!({"src": "c.latest()", "position": "value"}));
    assert_eq!(
        v["value"],
        json!({"$": "record", "v": {"from": {"$": "str", "v": "ci"}, "ok": {"$": "bool", "v": true}}})
    );
}
