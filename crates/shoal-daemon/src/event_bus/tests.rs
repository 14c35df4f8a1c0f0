//! The bus: slow subscribers, the inbox, settling at shutdown.

use super::*;
use crate::health::Registry;
use std::sync::Mutex;
use std::time::Duration;

fn publish(channel: &str, v: u64) -> (Publish, Option<Arc<Origin>>) {
    let p = Publish {
        channel: channel.into(),
        payload: json!(v).into(),
    };
    (p, None)
}

#[test]
fn the_first_publish_since_the_bus_took_the_inbox_wakes_it() {
    let inbox = Inbox::default();
    // Nothing published: no wake.
    assert!(!inbox.push([]));
    // The first publish wakes the bus; the next ones ride the Drain already on its way.
    assert!(inbox.push([publish("a", 0)]));
    assert!(!inbox.push([publish("a", 1), publish("a", 2)]));
    // The bus takes them in order; the next publish wakes it again.
    let got: Vec<Json> = inbox
        .take()
        .0
        .iter()
        .map(|(p, _)| p.payload.to_json().into_owned())
        .collect();
    assert_eq!(got, vec![json!(0), json!(1), json!(2)]);
    assert!(inbox.push([publish("b", 3)]));
    assert!(!inbox.push([publish("a", 4)]));
    assert_eq!(inbox.take().0.len(), 2);
    assert!(!inbox.push([]), "nothing new: no wake");
}

/// A collector of delivered events.
struct Collect(Arc<Mutex<Vec<BusEvent>>>);
impl Actor for Collect {
    type Context = Context<Self>;
}
impl Handler<BusEvent> for Collect {
    type Result = ();
    fn handle(&mut self, ev: BusEvent, _ctx: &mut Context<Self>) {
        self.0.lock().unwrap().push(ev);
    }
}

#[test]
fn an_inbox_nobody_takes_keeps_the_newest_events_and_counts_the_rest() {
    // A bus gone for good never takes its inbox: publishers must not grow it without end.
    let inbox = Inbox::default();
    let n = MAX_PENDING as u64 + 1000;
    for i in 0..n {
        inbox.push([publish("a", i)]);
    }
    let (kept, dropped) = inbox.take();
    assert_eq!(kept.len(), MAX_PENDING);
    assert_eq!(dropped, 1000);
    assert_eq!(
        kept[0].0.payload.to_json().into_owned(),
        json!(1000),
        "the oldest went"
    );
    assert_eq!(
        kept.back().unwrap().0.payload.to_json().into_owned(),
        json!(n - 1)
    );
    let (rest, dropped) = inbox.take();
    assert!(rest.is_empty());
    assert_eq!(dropped, 0, "the count starts again");
}

#[test]
fn publishes_through_the_inbox_are_read_in_order_and_delivered_to_subscribers() {
    let sys = System::new();
    sys.block_on(async {
        let reg = Arc::new(Registry::default()).register("event_bus", "t", None);
        let stats = reg.stats.clone();
        let book = SubscriberBook::default();
        let bus = EventBus::with_book(None, vec![], book.clone(), reg).start();
        let handle = book.handle(Supervised::new(crate::health::Counted::new(
            bus.clone(),
            stats,
        )));
        // No subscriber: a read right after the publishes sees them all, in order.
        for i in 0..5 {
            handle.publish("q", json!(i));
        }
        let read = |bus: &Addr<EventBus>| {
            bus.send(ReadEvents {
                channel: "q".into(),
                since: None,
                limit: None,
                scope: None,
            })
        };
        let seqs: Vec<u64> = read(&bus).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
        // A direct Publish comes after what the inbox held before it.
        handle.publish("q", json!(5));
        let direct = bus
            .send(Publish {
                channel: "q".into(),
                payload: json!(6).into(),
            })
            .await
            .unwrap();
        assert_eq!(direct.seq, 6);
        // With a subscriber, a publish is delivered with no read to drain it.
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let sub = Collect(g).start();
        bus.send(Subscribe {
            channel: "q".into(),
            sub: sub.recipient(),
            scope: None,
        })
        .await
        .unwrap();
        handle.publish("q", json!(7));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "not delivered");
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
        let got = got.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].seq, got[0].payload.to_json().into_owned()),
            (7, json!(7))
        );
    });
}

#[test]
fn settle_queues_the_durable_events_left_in_the_inbox_for_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let store = journal::Store::open(dir.path().join("j.redb"), Default::default()).unwrap();
    let writer = Writer::start(Arc::new(store), Default::default()).unwrap();
    let book = SubscriberBook::default();
    book.inbox.push([
        publish("journal", 10),
        publish("user.x", 11),
        publish("journal", 12),
    ]);
    assert_eq!(book.settle(&writer), 2, "user.x is not durable");
    writer.shutdown().unwrap();
    let stored = writer.store().events_read("journal", None, 0).unwrap();
    let got: Vec<(u64, Json)> = stored.into_iter().map(|e| (e.seq, e.payload)).collect();
    assert_eq!(got, vec![(0, json!(10)), (1, json!(12))]);
    assert!(book.inbox.take().0.is_empty());
}

/// A subscriber on its own arbiter that takes 1 ms per event.
struct Slow(Arc<Mutex<Vec<BusEvent>>>);
impl Actor for Slow {
    type Context = Context<Self>;
}
impl Handler<BusEvent> for Slow {
    type Result = ();
    fn handle(&mut self, ev: BusEvent, _ctx: &mut Context<Self>) {
        std::thread::sleep(Duration::from_millis(1));
        self.0.lock().unwrap().push(ev);
    }
}

#[test]
fn a_slow_subscriber_gets_a_dropped_marker_then_newer_events() {
    let sys = System::new();
    sys.block_on(async {
        let reg = Arc::new(Registry::default()).register("event_bus", "t", None);
        let bus = EventBus::new(None, vec![], reg).start();
        let got = Arc::new(Mutex::new(Vec::new()));
        let arb = Arbiter::new();
        let g = got.clone();
        let slow = Slow::start_in_arbiter(&arb.handle(), move |_| Slow(g));
        bus.send(Subscribe {
            channel: "user.t".into(),
            sub: slow.recipient(),
            scope: None,
        })
        .await
        .unwrap();
        let n = 1100u64;
        for i in 0..n {
            bus.do_send(Publish {
                channel: "user.t".into(),
                payload: json!(i).into(),
            });
        }
        // Wait for the marker, then publish one more.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !got
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.payload.to_json().get("dropped").is_some())
        {
            assert!(std::time::Instant::now() < deadline, "no marker");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        bus.send(Publish {
            channel: "user.t".into(),
            payload: json!("late").into(),
        })
        .await
        .unwrap();
        while got
            .lock()
            .unwrap()
            .last()
            .map(|e| e.payload.to_json().into_owned())
            != Some(json!("late"))
        {
            assert!(std::time::Instant::now() < deadline, "no late event");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        let got = got.lock().unwrap().clone();
        // In order, every event delivered or counted once: a marker names the latest
        // dropped and how many since the last event delivered; what follows it is newer.
        let mut next = 0u64;
        let mut markers = 0;
        for e in &got {
            let p = e.payload.to_json().into_owned();
            match p.get("dropped") {
                Some(d) => {
                    markers += 1;
                    assert_eq!(p["latest_seq"], json!(e.seq), "{p}");
                    assert!(e.seq >= next, "{p} at {next}");
                    assert_eq!(d, &json!(e.seq + 1 - next), "{p} at {next}");
                    next = e.seq + 1;
                }
                None => {
                    assert_eq!(e.seq, next, "{p}");
                    next += 1;
                }
            }
        }
        assert_eq!(next, n + 1);
        assert!(markers >= 1);
        // What follows the last marker fits in the subscriber's share of the channel.
        let last_marker = got
            .iter()
            .rposition(|e| e.payload.to_json().get("dropped").is_some())
            .unwrap();
        assert!(got.len() - last_marker - 1 <= QUEUE + 1);
        // The ring keeps the last RING events; limit keeps the newest.
        let all = bus
            .send(ReadEvents {
                channel: "user.t".into(),
                since: None,
                limit: None,
                scope: None,
            })
            .await
            .unwrap();
        assert_eq!(all.len(), RING);
        assert_eq!(all.last().unwrap().seq, n);
        let tail = bus
            .send(ReadEvents {
                channel: "user.t".into(),
                since: Some(n - 10),
                limit: Some(3),
                scope: None,
            })
            .await
            .unwrap();
        let seqs: Vec<u64> = tail.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![n - 2, n - 1, n]);
        arb.stop();
    });
}

/// What the bus holds stays bounded however a client publishes: large events
/// shorten their channel's ring, many channels cost the ones published to
/// longest ago their events and then themselves, and a channel made again
/// never gives a seq twice.
#[test]
fn the_bus_holds_a_bounded_number_of_bytes() {
    let sys = System::new();
    sys.block_on(async {
        let reg = Arc::new(Registry::default()).register("event_bus", "t", None);
        let mut bus = EventBus::new(None, Vec::new(), reg);
        let big = |i: usize| Payload::from(json!(format!("{i:08}{}", "x".repeat(16_000))));
        for i in 0..100 {
            bus.publish("user.big".into(), big(i), None);
        }
        let ch = &bus.channels["user.big"];
        assert!(ch.bytes <= RING_BYTES, "{}", ch.bytes);
        assert!(ch.ring.len() >= RING_BYTES / 16_100, "{}", ch.ring.len());
        let seqs: Vec<u64> = ch.ring.iter().map(|e| e.seq).collect();
        assert_eq!(*seqs.last().unwrap(), 99, "the newest is kept");
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

        // Many channels, each given one large event: the bus's total stays
        // under its bound, and the first channels are let go.
        let n = 2 * BUS_BYTES / 16_000;
        for i in 0..n {
            bus.publish(format!("user.c{i}"), big(i), None);
            assert!(bus.held <= BUS_BYTES, "{} after {i}", bus.held);
        }
        assert!(!bus.channels.contains_key("user.c0"));
        assert!(!bus.channels.contains_key("user.big"));
        assert!(bus.channels.contains_key(&format!("user.c{}", n - 1)));
        assert!(bus.channels.len() <= BUS_BYTES / 16_000 + 1);
        let held: usize = bus.channels.values().map(|c| c.bytes + CHANNEL_BYTES).sum();
        assert_eq!(held, bus.held, "the count agrees with what is held");
        // `user.big` had seqs up to 99: made again, it goes on past them.
        let ev = bus.publish("user.big".into(), json!(1).into(), None);
        assert!(ev.seq >= 100, "{}", ev.seq);
        // Small events keep the ring's count bound.
        for i in 0..(RING as u64 + 10) {
            bus.publish("user.small".into(), json!(i).into(), None);
        }
        assert_eq!(bus.channels["user.small"].ring.len(), RING);
    });
}

#[test]
fn a_payload_over_the_limit_is_refused_with_its_size() {
    assert_eq!(oversized(MAX_EVENT_BYTES), None);
    let why = oversized(MAX_EVENT_BYTES + 1).unwrap();
    assert!(
        why.contains("64 KiB") && why.contains(&(MAX_EVENT_BYTES + 1).to_string()),
        "{why}"
    );
}
