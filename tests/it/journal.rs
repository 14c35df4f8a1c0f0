//! The journal over the real daemon: entries and filters (scenarios 57–60), `blob.get`,
//! durable event replay and seqs across restarts (90–91), `out:N` after a restart, durability
//! under SIGKILL with concurrent clients (immediate and batched), a corrupt store file, and `shoal history`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

fn config(root: &Root, body: &str) -> PathBuf {
    let p = root.path().join("j.toml");
    std::fs::write(&p, body).unwrap();
    p
}

fn start(root: &Root, cfg: Option<&Path>) -> Daemon {
    match cfg {
        Some(c) => Daemon::start_with(
            root,
            &root.socket(),
            &["--config", c.to_str().unwrap()],
            &[],
        ),
        None => Daemon::start(root),
    }
}

/// Stop gracefully (SIGTERM: the journal is flushed) and wait.
fn stop(mut d: Daemon) {
    d.signal(libc::SIGTERM);
    let st = d
        .wait_timeout(Duration::from_secs(20))
        .expect("daemon exit");
    assert!(st.success(), "daemon exit: {st:?}");
}

fn query(c: &mut Conn, params: Value) -> Vec<Value> {
    c.ok("journal.query", params)
        .as_array()
        .cloned()
        .expect("array")
}

fn srcs(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["src"].as_str().unwrap().to_string())
        .collect()
}

fn local_principal() -> String {
    // SAFETY: geteuid has no preconditions.
    format!("uid:{}", rustix::process::geteuid().as_raw())
}

#[test]
fn execs_are_journaled_with_exact_filters() {
    let root = Root::new();
    let d = start(&root, None);
    let mut c = d.conn();
    c.attach("work");
    let t0 = c.ok("journal.query", json!({})).as_array().unwrap().len();
    assert_eq!(t0, 0);
    // Scenario 90 prerequisite: the live journal channel, subscribed.
    let r = c.ok("events.subscribe", json!({"channel": "journal"}));
    assert_eq!(r, json!({"channel": "journal", "subscribed": true}));

    let r = c.call("exec", json!({"src": "rm gone.txt"}));
    assert!(r.get("error").is_some(), "rm of a missing file fails: {r}");
    // The subscribed event arrives as a notification (after the reply or before it).
    let mut ev = c.recv();
    while ev.get("method") != Some(&json!("event")) {
        ev = c.recv();
    }
    assert_eq!(ev["params"]["channel"], json!("journal"));
    assert_eq!(ev["params"]["payload"]["v"]["head"]["v"], json!("rm"));
    assert_eq!(ev["params"]["payload"]["v"]["ok"]["v"], json!(false));
    let r = c.ok("events.unsubscribe", json!({"channel": "journal"}));
    assert_eq!(r["subscribed"], json!(false));

    for i in 0..5 {
        c.ok("exec", json!({"src": format!("{i} + 1")}));
    }
    c.ok("exec", json!({"src": "1 + 2"}));

    // 57: newest first; the value output's blob is the tagged JSON of the value.
    let es = query(&mut c, json!({"limit": 10}));
    assert_eq!(es.len(), 7);
    let e = &es[0];
    assert_eq!(e["src"], json!("1 + 2"));
    assert_eq!(e["ok"], json!(true));
    assert_eq!(e["opaque"], json!(false));
    assert_eq!(e["status"], json!(0));
    assert_eq!(e["session"], json!("work"));
    assert_eq!(e["principal"], json!(local_principal()));
    let ids: Vec<u64> = es.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let out = e["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == json!("value"))
        .expect("value output")
        .clone();
    let hash = out["hash"].as_str().unwrap();
    assert_eq!(hash.len(), 64);
    assert!(hash
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert!(out["len"].as_u64().unwrap() > 0);
    let b = c.ok("blob.get", json!({"hash": hash}));
    assert_eq!(b["value"], json!({"$": "int", "v": 3}));
    assert!(b["value"].to_string().contains("\"v\":3"));
    let b2 = c.ok("blob.get", json!({"hash": format!("blake3:{hash}")}));
    assert_eq!(b2["value"], b["value"]);
    let r = c.call("blob.get", json!({"hash": "00".repeat(32)}));
    assert_eq!(r["error"]["code"], json!(-32004), "{r}");
    let r = c.call("blob.get", json!({}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");

    // 60: entry shape; a failed exec is journaled with ok:false.
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    for k in [
        "id",
        "session",
        "principal",
        "ts",
        "dur_ns",
        "cwd",
        "src",
        "effects",
        "status",
        "ok",
        "opaque",
        "outputs",
    ] {
        assert!(keys.contains(&k), "entry has {k}: {e}");
    }
    assert!(e["cwd"]["display"].is_string());
    assert!(e["dur_ns"].as_i64().unwrap() > 0);
    let failed = es.last().unwrap();
    assert_eq!(failed["src"], json!("rm gone.txt"));
    assert_eq!(failed["ok"], json!(false));
    assert_ne!(failed["status"], json!(0));
    let kinds: Vec<&str> = es
        .iter()
        .flat_map(|e| e["outputs"].as_array().unwrap().iter())
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"value") && kinds.contains(&"render"),
        "{kinds:?}"
    );

    // 58 and docs/protocol.md §6: filters are exact and applied before limit.
    assert_eq!(query(&mut c, json!({"until": 1})), Vec::<Value>::new());
    // Runs record their derived effects: only the `rm` deleted anything.
    assert_eq!(
        srcs(&query(&mut c, json!({"effects": ["fs.delete"]}))),
        ["rm gone.txt"]
    );
    assert_eq!(
        query(&mut c, json!({"effects": ["net.connect"]})),
        Vec::<Value>::new()
    );
    assert_eq!(
        srcs(&query(&mut c, json!({"head": "rm", "limit": 1}))),
        ["rm gone.txt"]
    );
    assert_eq!(
        srcs(&query(&mut c, json!({"ok": false, "limit": 1}))),
        ["rm gone.txt"]
    );
    assert_eq!(
        query(&mut c, json!({"head": "r"})).len(),
        0,
        "head is exact"
    );
    assert_eq!(query(&mut c, json!({"ok": true})).len(), 6);
    assert_eq!(query(&mut c, json!({"limit": 2})).len(), 2);
    assert_eq!(
        query(&mut c, json!({"principal": local_principal()})).len(),
        7
    );
    assert_eq!(query(&mut c, json!({"principal": "agent:nobody"})).len(), 0);
    let ts = es[3]["ts"].as_i64().unwrap();
    let window = query(&mut c, json!({"since": ts, "until": ts}));
    assert_eq!(srcs(&window), [es[3]["src"].as_str().unwrap()]);
    assert_eq!(query(&mut c, json!({"since": ts})).len(), 4);
    let r = c.call("journal.query", json!({"limit": "ten"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");

    // journal.query needs an attachment (docs/protocol.md §10), then shows every session's entries.
    let mut c2 = d.conn();
    let r = c2.call("journal.query", json!({"limit": 1}));
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    c2.attach("other");
    assert_eq!(
        query(&mut c2, json!({"limit": 1}))[0]["src"],
        json!("1 + 2")
    );

    // Status shows the journal.
    let st = c.ok("daemon.status", json!({}));
    assert_eq!(st["journal"]["durability"], json!("batched"));
    assert!(st["journal"]["last_commit_us"].is_u64(), "{st}");
    stop(d);
}

/// Send all requests, then read all replies (same order).
fn pipeline(c: &mut Conn, reqs: &[(&str, Value)]) -> Vec<Value> {
    let mut buf = Vec::new();
    for (i, (m, p)) in reqs.iter().enumerate() {
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 10_000 + i, "method": m, "params": p}),
        )
        .unwrap();
        b.push(b'\n');
        buf.extend(b);
    }
    let mut w = c.stream.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        w.write_all(&buf).unwrap();
    });
    let mut out = Vec::new();
    while out.len() < reqs.len() {
        let r = c.recv();
        if r.get("id").is_some() {
            out.push(r);
        }
    }
    writer.join().unwrap();
    out
}

fn read_events(c: &mut Conn, params: Value) -> Vec<Value> {
    c.ok("events.read", params)["events"]
        .as_array()
        .cloned()
        .unwrap()
}

#[test]
fn durable_channels_replay_past_the_ring_and_continue_after_restart() {
    let root = Root::new();
    let d = start(&root, None);
    let mut c = d.conn();
    c.attach("replay");
    let n = 1100usize;
    let reqs: Vec<(&str, Value)> = (0..n)
        .map(|i| ("exec", json!({"src": format!("{i} + 0")})))
        .collect();
    for r in pipeline(&mut c, &reqs) {
        assert!(r.get("error").is_none(), "{r}");
    }
    // 90: every event after seq 0, contiguous, with payloads rebuilt from the store.
    // Batched mode publishes an exec's journal event just after its reply.
    let js = eventually("every journal event", Duration::from_secs(10), || {
        let js = read_events(&mut c, json!({"channel": "journal", "since": 0}));
        (js.len() + 1 >= n).then_some(js)
    });
    let seqs: Vec<u64> = js.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..n as u64).collect::<Vec<_>>());
    for e in &js[..3] {
        let v = &e["payload"]["v"];
        assert_eq!(
            v["head"]["v"],
            json!(format!("{}", e["seq"].as_u64().unwrap()))
        );
        assert_eq!(v["ok"]["v"], json!(true));
        assert_eq!(v["principal"]["v"], json!(local_principal()));
        assert_eq!(v["entry_id"]["v"], json!(e["seq"].as_u64().unwrap() + 1));
    }
    let ts = read_events(&mut c, json!({"channel": "session.transcript", "since": 0}));
    assert_eq!(ts.len(), n - 1);
    for e in [&ts[0], &ts[500], &ts[n - 2]] {
        let seq = e["seq"].as_u64().unwrap();
        assert_eq!(
            e["payload"]["v"]["ref"]["v"],
            json!(format!("out:{}", seq + 1))
        );
        assert_eq!(e["payload"]["v"]["summary"]["v"]["type"]["v"], json!("int"));
    }
    let last5 = read_events(
        &mut c,
        json!({"channel": "journal", "since": 0, "limit": 5}),
    );
    let s5: Vec<u64> = last5.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(s5, (n as u64 - 5..n as u64).collect::<Vec<_>>());
    assert!(read_events(&mut c, json!({"channel": "journal", "since": n - 1})).is_empty());
    assert!(read_events(&mut c, json!({"channel": "journal", "since": n + 50})).is_empty());
    let tail = read_events(&mut c, json!({"channel": "journal", "since": n - 11}));
    assert_eq!(tail.len(), 10);
    assert_eq!(tail[0]["seq"], json!(n - 10));
    assert!(read_events(&mut c, json!({"channel": "no.such"})).is_empty());
    // render events follow every successful exec.
    let rs = read_events(&mut c, json!({"channel": "render", "since": n - 2}));
    assert_eq!(rs[0]["payload"]["v"]["ref"]["v"], json!(format!("out:{n}")));

    // A failed exec: a journal event but no transcript event; it still consumes an out:N.
    let r = c.call("exec", json!({"src": "rm gone.txt"}));
    assert_eq!(
        r["error"]["data"]["ref"],
        json!(format!("out:{}", n + 1)),
        "{r}"
    );
    let r = c.ok("exec", json!({"src": "7"}));
    assert_eq!(r["ref"], json!(format!("out:{}", n + 2)));
    let j = read_events(&mut c, json!({"channel": "journal", "since": n - 1}));
    assert_eq!(j.len(), 2);
    assert_eq!(j[0]["payload"]["v"]["ok"]["v"], json!(false));
    let t = read_events(
        &mut c,
        json!({"channel": "session.transcript", "since": n - 1}),
    );
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["seq"], json!(n));
    assert_eq!(
        t[0]["payload"]["v"]["ref"]["v"],
        json!(format!("out:{}", n + 2))
    );

    // events.publish: user.* only.
    let r = c.call(
        "events.publish",
        json!({"channel": "journal", "payload": 1}),
    );
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(
        r["error"]["message"],
        json!("only user.* channels may be published to")
    );
    let p = c.ok(
        "events.publish",
        json!({"channel": "user.x", "payload": {"a": 1}}),
    );
    assert_eq!(p["seq"], json!(0));
    let u = read_events(&mut c, json!({"channel": "user.x"}));
    assert_eq!(u[0]["payload"], json!({"a": 1}));
    drop(c);
    stop(d);

    // 91: seqs continue after a restart and old events are still replayable; out:N too.
    let d = start(&root, None);
    let mut c = d.conn();
    c.attach("replay");
    let r = c.ok("exec", json!({"src": "40 + 2"}));
    // Numbers are reserved in blocks ahead of use (docs/protocol.md §10): after a restart numbering
    // continues past the reservation, so past every number handed out.
    let got: u64 = r["ref"].as_str().unwrap()[4..].parse().unwrap();
    assert!(got > n as u64 + 2, "out:N continues: {r}");
    let j = read_events(&mut c, json!({"channel": "journal", "since": n as u64 + 1}));
    let s: Vec<u64> = j.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(s, vec![n as u64 + 2], "journal seq continues");
    assert_eq!(j[0]["payload"]["v"]["head"]["v"], json!("40"));
    let old = read_events(
        &mut c,
        json!({"channel": "journal", "since": 0, "limit": 3}),
    );
    assert_eq!(old.len(), 3);
    assert_eq!(old[2]["seq"], json!(n + 2));
    let all = read_events(&mut c, json!({"channel": "journal", "since": 0}));
    assert_eq!(all.len(), n + 2);
    let t = read_events(&mut c, json!({"channel": "session.transcript", "since": n}));
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["seq"], json!(n + 1));
    assert_eq!(t[0]["payload"]["v"]["ref"]["v"], r["ref"]);
    // Values from before the restart answer value.get (paths work on rebuilt values).
    let v = c.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "int", "v": 0}));
    let v = c.ok(
        "value.get",
        json!({"ref": format!("out:{}", n + 2), "format": "render"}),
    );
    assert_eq!(v["render"], json!("7"));
    let r = c.call("value.get", json!({"ref": format!("out:{}", n + 1)}));
    assert!(
        r.get("result").is_some(),
        "the failed exec's error value: {r}"
    );
    let r = c.call("value.get", json!({"ref": "out:99999"}));
    assert_eq!(r["error"]["code"], json!(-32004), "{r}");
    // Non-durable channels restart at 0.
    assert_eq!(
        c.ok("events.publish", json!({"channel": "user.x", "payload": 2}))["seq"],
        json!(0)
    );
    stop(d);
}

/// Stream execs until killed; returns (src, ack time) of every acknowledged one.
fn stream_until_killed(d: &Daemon, session: &str, kill_after: usize) -> Vec<(String, Instant)> {
    let mut c = d.conn();
    c.attach(session);
    let mut acked = Vec::new();
    for i in 0.. {
        let src = format!("{i} * 3");
        if i == kill_after {
            d.signal(libc::SIGKILL);
        }
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": i, "method": "exec", "params": {"src": src}}),
        )
        .unwrap();
        b.push(b'\n');
        use std::io::{BufRead, Write};
        if c.stream.write_all(&b).is_err() {
            break;
        }
        let mut line = String::new();
        let mut r = std::io::BufReader::new(&c.stream);
        match r.read_line(&mut line) {
            Ok(n) if n > 0 => {
                let v: Value = serde_json::from_str(&line).unwrap();
                assert!(v.get("result").is_some(), "{v}");
                acked.push((src, Instant::now()));
            }
            _ => break,
        }
    }
    acked
}

fn journaled_srcs(c: &mut Conn) -> std::collections::HashSet<String> {
    query(c, json!({"limit": 10000}))
        .iter()
        .map(|e| e["src"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn immediate_durability_survives_sigkill() {
    let root = Root::new();
    let cfg = config(&root, "[journal]\ndurability = \"immediate\"\n");
    let mut d = start(&root, Some(&cfg));
    let acked = stream_until_killed(&d, "dur", 60);
    d.wait_timeout(Duration::from_secs(10)).expect("killed");
    assert!(acked.len() >= 60);
    let d = start(&root, Some(&cfg));
    let mut c = d.conn();
    c.attach("dur");
    let have = journaled_srcs(&mut c);
    for (src, _) in &acked {
        assert!(have.contains(src), "acknowledged {src:?} lost");
    }
    // An out:N from before the kill is readable through value.get.
    let v = c.ok("value.get", json!({"ref": "out:2"}));
    assert_eq!(v["value"], json!({"$": "int", "v": 3}));
    let st = c.ok("daemon.status", json!({}));
    assert_eq!(st["journal"]["durability"], json!("immediate"));
    stop(d);
}

/// What one streaming client saw: (src, when its reply was read, its `out:N`).
type Acks = Vec<(String, Instant, u64)>;

/// Stream quick execs into `session` until the daemon dies.
fn stream_acks(socket: PathBuf, session: String, acked: Arc<AtomicUsize>) -> Acks {
    use std::io::{BufRead, Write};
    let mut c = Conn::open(&socket);
    c.attach(&session);
    let mut r = std::io::BufReader::new(c.stream.try_clone().unwrap());
    let mut out = Vec::new();
    for i in 0.. {
        let src = format!("\"{session}-{i}\"");
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": i, "method": "exec", "params": {"src": src}}),
        )
        .unwrap();
        b.push(b'\n');
        if c.stream.write_all(&b).is_err() {
            break;
        }
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(n) if n > 0 => {
                let v: Value = serde_json::from_str(&line).unwrap();
                let n = v["result"]["ref"].as_str().unwrap_or_else(|| panic!("{v}"))[4..]
                    .parse()
                    .unwrap();
                out.push((src, Instant::now(), n));
                acked.fetch_add(1, Ordering::SeqCst);
            }
            _ => break,
        }
    }
    out
}

/// The journal's status fields `key` as a number (0 when absent).
fn journal_us(st: &Value, key: &str) -> u64 {
    st["journal"][key].as_u64().unwrap_or(0)
}

// SIGKILL under three concurrent clients, at a different point each round
// (`SHOAL_KILL_ROUNDS`, default 2; `make load` runs more): immediate loses no
// acknowledged exec; batched loses none older than what the daemon last reported at risk
// (`at_risk_us`) plus the time since that report; no `out:N` is ever handed out twice.
#[test]
fn sigkill_under_concurrent_clients_keeps_the_durability_promise() {
    let rounds: u64 = std::env::var("SHOAL_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    for durability in ["immediate", "batched"] {
        for round in 0..rounds {
            kill_round(durability, round);
        }
    }
}

fn kill_round(durability: &str, round: u64) {
    let flush_ms = 20;
    let root = Root::new();
    let cfg = config(
        &root,
        &format!("[journal]\ndurability = \"{durability}\"\nflush_ms = {flush_ms}\n"),
    );
    let mut d = start(&root, Some(&cfg));
    let acked = Arc::new(AtomicUsize::new(0));
    let sessions: Vec<String> = (0..3).map(|k| format!("k{k}")).collect();
    let clients: Vec<_> = sessions
        .iter()
        .map(|s| {
            let (sock, s, a) = (root.socket(), s.clone(), acked.clone());
            std::thread::spawn(move || stream_acks(sock, s, a))
        })
        .collect();
    // The daemon's own account of what a crash would lose, read while the clients stream:
    // the age of its oldest acknowledged op not yet durable, when that status was asked for.
    let mut watch = d.conn();
    watch.attach("watch");
    let mut last_report = (Instant::now(), 0);
    // A different kill point each round: 300 to about 1400 acknowledged execs.
    let kill_after = 300 + (round * 7919 + 13) % 1100;
    while acked.load(Ordering::SeqCst) < kill_after as usize {
        let asked = Instant::now();
        let st = watch.ok("daemon.status", json!({}));
        last_report = (asked, journal_us(&st, "at_risk_us"));
    }
    d.signal(libc::SIGKILL);
    let killed_at = Instant::now();
    drop(watch);
    let acks: Vec<Acks> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    d.wait_timeout(Duration::from_secs(10)).expect("killed");

    let d = start(&root, Some(&cfg));
    // An op lost in the kill was not durable at the kill, so it was at risk at the last
    // report too or was acknowledged after it: it is no older than the reported age plus
    // the time from asking to the kill (a client takes its reply's time after the daemon
    // acknowledged, so its own measure is shorter still). A commit slower than every one
    // before it is inside this bound, unlike the commit windows the daemon reports.
    let (asked, at_risk_us) = last_report;
    let window = Duration::from_micros(at_risk_us) + killed_at.duration_since(asked);
    for (s, acks) in sessions.iter().zip(&acks) {
        let mut c = d.conn();
        c.attach(s);
        let have = journaled_srcs(&mut c);
        for (src, at, _) in acks {
            let age = killed_at.saturating_duration_since(*at);
            let kept = have.contains(src);
            if durability == "immediate" {
                assert!(kept, "round {round}: acknowledged {src:?} lost");
            } else {
                assert!(
                    kept || age <= window,
                    "round {round}: {src:?} acknowledged {age:?} before the kill was lost (window {window:?})"
                );
            }
        }
        // No ref is reissued: the next out:N is past every one handed out.
        let last = acks.iter().map(|a| a.2).max().unwrap_or(0);
        let r = c.ok("exec", json!({"src": "1"}));
        let n: u64 = r["ref"].as_str().unwrap()[4..].parse().unwrap();
        assert!(
            n > last,
            "round {round}: out:{n} reissued (out:{last} was handed out)"
        );
    }
    stop(d);
}

#[test]
fn a_corrupt_or_foreign_store_stops_the_daemon_untouched() {
    for (name, bytes) in [
        (
            "garbage",
            b"this is not a database at all, just some bytes\n".repeat(200),
        ),
        ("foreign", foreign_redb()),
    ] {
        let root = Root::new();
        std::fs::create_dir_all(root.state_dir()).unwrap();
        let path = root.state_dir().join("journal.redb");
        std::fs::write(&path, &bytes).unwrap();
        let out = root
            .command()
            .arg("daemon")
            .arg("--socket")
            .arg(root.socket())
            .arg("--state-dir")
            .arg(root.state_dir())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}: daemon must refuse");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot open the journal") && err.contains("journal.redb"),
            "{name}: {err}"
        );
        assert!(out.stdout.is_empty(), "stdout carries frames only");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{name}: file untouched"
        );
        assert!(!root.socket().exists(), "{name}: no socket left behind");
    }
}

/// A valid redb file with a table of its own (not a shoal journal).
fn foreign_redb() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.redb");
    {
        let db = redb::Database::create(&p).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<&str, &str> = redb::TableDefinition::new("other");
            let mut t = tx.open_table(def).unwrap();
            t.insert("k", "v").unwrap();
        }
        tx.commit().unwrap();
    }
    std::fs::read(&p).unwrap()
}

#[test]
fn history_through_the_daemon_and_from_the_store() {
    let root = Root::new();
    let d = start(&root, None);
    let mut c = d.conn();
    c.attach("h");
    c.ok("exec", json!({"src": "echo hello"}));
    let _ = c.call("exec", json!({"src": "rm gone.txt"}));
    c.ok("exec", json!({"src": "2 + 2"}));
    let sock = root.socket();
    let sock = sock.to_str().unwrap();
    let (code, out, err) = run(&root, &["history", "--socket", sock, "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let live: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(srcs(&live), ["2 + 2", "rm gone.txt", "echo hello"]);
    let (code, out, _) = run(
        &root,
        &["history", "--socket", sock, "--ok", "false", "--json"],
        &[],
    );
    assert_eq!(code, 0);
    let failed: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(srcs(&failed), ["rm gone.txt"]);
    let (code, out, _) = run(&root, &["history", "--socket", sock, "--head", "echo"], &[]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("echo hello") && out.contains(" ok "), "{out}");
    let id = live[2]["id"].as_u64().unwrap().to_string();
    let (code, out, err) = run(&root, &["history", "show", &id, "--socket", sock], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("src        echo hello"), "{out}");
    assert!(out.contains("--- stdout\nhello"), "{out}");
    let (code, out, _) = run(
        &root,
        &["history", "show", &id, "--json", "--socket", sock],
        &[],
    );
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown, live[2]);
    let (code, _, err) = run(&root, &["history", "show", "999", "--socket", sock], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("no journal entry 999"), "{err}");
    drop(c);
    stop(d);

    // No daemon: read from the store (default state dir of this root's XDG env).
    let (code, out, err) = run(&root, &["history", "--socket", sock, "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let offline: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(offline, live);
    let (code, out, _) = run(
        &root,
        &["history", "--socket", sock, "--limit", "1", "--json"],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(
        srcs(&serde_json::from_str::<Vec<Value>>(&out).unwrap()),
        ["2 + 2"]
    );
    let (code, out, err) = run(&root, &["history", "show", &id, "--socket", sock], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("--- stdout\nhello"), "{out}");
    // An empty state dir: a clear error.
    let empty = Root::new();
    let (code, _, err) = run(
        &empty,
        &["history", "--socket", "/tmp/nonexistent.sock"],
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("no daemon answers"), "{err}");
}

#[test]
fn retention_keeps_the_newest_entries_and_live_transcript_values() {
    let root = Root::new();
    let cfg = config(&root, "[journal]\nmax_entries = 5\n");
    let d = start(&root, Some(&cfg));
    let mut c = d.conn();
    c.attach("ret");
    for i in 0..12 {
        c.ok("exec", json!({"src": format!("\"v{i}\"")}));
    }
    let es = query(&mut c, json!({"limit": 100}));
    assert_eq!(
        srcs(&es),
        ["\"v11\"", "\"v10\"", "\"v9\"", "\"v8\"", "\"v7\""]
    );
    drop(c);
    stop(d);
    // The entry of out:1 is gone, its value is not: a live transcript ref holds it.
    let d = start(&root, Some(&cfg));
    let mut c = d.conn();
    c.attach("ret");
    let v = c.ok("value.get", json!({"ref": "out:1"}));
    assert_eq!(v["value"], json!({"$": "str", "v": "v0"}));
    let v = c.ok("value.get", json!({"ref": "out:1", "format": "raw"}));
    assert_eq!(v["raw"], json!("v0"));
    // Closing the session releases its transcript rows; a new session of the same name
    // continues past the old numbers (an old out:1 answers -32004, never the new value).
    c.ok("session.close", json!({"session": "ret"}));
    c.attach("ret");
    let r = c.ok("exec", json!({"src": "1"}));
    assert_ne!(r["ref"], json!("out:1"));
    let old = c.call("value.get", json!({"ref": "out:1"}));
    assert_eq!(old["error"]["code"], json!(-32004), "{old}");
    stop(d);
}
