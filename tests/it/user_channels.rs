//! `user.*` channels are the language's side of the daemon's event bus:
//! what a session emits is published on the bus, and what a client publishes
//! reaches its session's `channel(...)`.

use crate::common::*;
use serde_json::json;
use std::time::Duration;

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
    let note = eventually("the event notification", Duration::from_secs(5), || {
        let m = watcher.recv();
        (m["method"] == json!("event")
            && m["params"]["payload"] == json!({"$": "str", "v": "done"}))
        .then_some(m)
    });
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

fn vm_rss_kb(pid: i32) -> u64 {
    let rss = crate::worker::status_field(pid as u32, "VmRSS");
    rss.trim_end_matches(" kB").parse().unwrap()
}

/// A client cannot grow the daemon by publishing: an event over 64 KiB is
/// refused where it is made (the language, `events.publish`), and many
/// large events on many channels keep the bus within its bound.
#[test]
fn large_events_are_refused_and_many_keep_the_bus_bounded() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("flood");
    let r = c.call(
        "exec",
        json!({"src": "channel(\"user.m\").emit((0..100000).map(x => \"x\").join(\"\"))"}),
    );
    let e = r["error"].to_string();
    assert!(e.contains("at most 64 KiB"), "{r}");
    let ev = c.ok("events.read", json!({"channel": "user.m"}));
    assert_eq!(ev["events"], json!([]), "nothing was published: {ev}");
    let r = c.call(
        "events.publish",
        json!({"channel": "user.m", "payload": "x".repeat(100_000)}),
    );
    assert_eq!(r["error"]["code"], json!(-32040), "{r}");
    assert!(r["error"]["message"].to_string().contains("64 KiB"), "{r}");

    // 72 MB of events just under the limit, on 1,200 channels: the bus
    // keeps about 32 MiB of them (it grew by 37 MB, and by 150 MB before it
    // was bounded, for 120 MB).
    let before = vm_rss_kb(d.pid());
    let body = "y".repeat(60_000);
    for i in 0..1200 {
        c.ok(
            "events.publish",
            json!({"channel": format!("user.flood{i}"), "payload": body}),
        );
    }
    let grown = vm_rss_kb(d.pid()).saturating_sub(before);
    assert!(grown < 60_000, "the daemon grew by {grown} kB");
    // The newest channels still have their event; the oldest were let go.
    let ev = c.ok("events.read", json!({"channel": "user.flood1199"}));
    assert_eq!(ev["events"].as_array().unwrap().len(), 1, "{ev}");
    let ev = c.ok("events.read", json!({"channel": "user.flood0"}));
    assert_eq!(ev["events"], json!([]), "{ev}");
}

/// A client that subscribes and stops reading costs the daemon a bounded
/// backlog per subscription, not every event published since: 16 channels
/// given 64 events of 60 KB each (61 MB) while it reads nothing. When it
/// reads again it is told what it lost, then gets the newest events.
#[test]
fn a_subscriber_that_stops_reading_holds_a_bounded_backlog() {
    let root = Root::new();
    // The stalled client is kept (not closed for its stall) for the whole test.
    let d = Daemon::with_config(&root, "[limits]\nwrite_stall_ms = 600000\n", &[]);
    let channels = 16;
    let per_channel = 64u64;
    let mut stalled = d.conn();
    stalled.attach("stalled");
    for i in 0..channels {
        stalled.ok(
            "events.subscribe",
            json!({"channel": format!("user.lag{i}")}),
        );
    }
    let mut c = d.conn();
    c.attach("publisher");
    let before = vm_rss_kb(d.pid());
    let body = "z".repeat(60_000);
    for n in 0..per_channel {
        for i in 0..channels {
            c.ok(
                "events.publish",
                json!({"channel": format!("user.lag{i}"), "payload": {"n": n, "body": body}}),
            );
        }
    }
    // Every channel's ring (256 KiB each), every backlog (256 KiB each) and
    // the stalled connection's queue of written frames (64 frames): about
    // 12 MB. Each subscription's backlog used to hold what it had not read
    // (up to 256 events each): 61 MB here, 16 MB per subscription at most.
    let grown = vm_rss_kb(d.pid()).saturating_sub(before);
    assert!(grown < 32_000, "the daemon grew by {grown} kB");

    // Reading again: before channel 0's newest event, a marker of what it lost.
    let mut marker = None;
    let last = eventually("channel 0's newest event", Duration::from_secs(30), || {
        let m = stalled.recv();
        let p = &m["params"];
        if m["method"] != json!("event") || p["channel"] != json!("user.lag0") {
            return None;
        }
        if p["payload"].get("dropped").is_some() {
            marker = Some(p.clone());
        }
        (p["payload"]["n"] == json!(per_channel - 1)).then(|| p.clone())
    });
    let marker = marker.expect("a dropped marker before the newest event");
    assert!(
        marker["payload"]["dropped"].as_u64().unwrap() > 0,
        "{marker}"
    );
    assert!(
        marker["seq"].as_u64() < last["seq"].as_u64(),
        "{marker} {last}"
    );
}
