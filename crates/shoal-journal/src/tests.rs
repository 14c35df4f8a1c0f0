//! Unit tests of the journal library (`cargo test --lib journal`).

use std::sync::Arc;

use redb::ReadableTable;
use serde_json::json;

use super::*;

mod durability;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(dir.path().join("journal.redb"), StoreOptions::default()).expect("open")
}

fn ne(principal: &str, ts: i64, src: &str, effects: &[&str]) -> NewEntry {
    NewEntry {
        session: "work".into(),
        principal: principal.into(),
        ts,
        cwd: Cwd {
            display: "/home/me".into(),
            raw: None,
        },
        src: src.into(),
        ast: Some(json!({"stmts": [src]})),
        effects: effects.iter().map(|k| json!({"kind": k})).collect(),
        opaque: effects.contains(&"opaque"),
    }
}

fn fin(ok: bool, value: &str) -> Finish {
    Finish {
        dur_ns: 1_000,
        status: Some(if ok { 0 } else { 1 }),
        ok,
        outputs: vec![
            OutputData::new(OutputKind::Value, value.as_bytes().to_vec()),
            OutputData::new(OutputKind::Render, format!("render {value}").into_bytes()),
        ],
        transcript: None,
    }
}

fn record(s: &Store, e: NewEntry, f: Finish) -> EntryId {
    s.apply_one(Op::Record {
        id: None,
        entry: e,
        finish: f,
    })
    .expect("record")
    .expect("id")
}

fn ids(v: &[Entry]) -> Vec<EntryId> {
    v.iter().map(|e| e.id).collect()
}

#[test]
fn scenario_57_shape_and_blob() {
    let d = tmp();
    let s = open(&d);
    let id = record(
        &s,
        ne("local", 10, "1 + 2", &[]),
        fin(true, r#"{"$":"int","v":3}"#),
    );
    assert_eq!(id, 1);
    let rows = s
        .query(
            &Query {
                limit: Some(10),
                ..Query::default()
            },
            &Scope::All,
        )
        .unwrap();
    assert_eq!(rows.len(), 1);
    let e = &rows[0];
    assert_eq!(e.src, "1 + 2");
    assert_eq!(e.ok, Some(true));
    assert!(!e.opaque);
    let v = e
        .outputs
        .iter()
        .find(|o| o.kind == OutputKind::Value)
        .unwrap();
    assert_eq!(v.hash.len(), 64);
    assert!(v.len > 0);
    let blob = s.blob_get(&v.hash).unwrap().unwrap();
    assert!(String::from_utf8(blob.clone()).unwrap().contains("\"v\":3"));
    assert_eq!(
        s.blob_get(&format!("blake3:{}", v.hash)).unwrap(),
        Some(blob)
    );
    assert!(s.blob_get("zz").is_err());
    // JSON edge shape
    let j = serde_json::to_value(e).unwrap();
    for k in [
        "id",
        "session",
        "principal",
        "ts",
        "dur_ns",
        "cwd",
        "src",
        "ast",
        "effects",
        "status",
        "ok",
        "opaque",
        "outputs",
    ] {
        assert!(j.get(k).is_some(), "missing {k}");
    }
    assert_eq!(j["cwd"], json!({"display": "/home/me"}));
    assert_eq!(
        j["outputs"][0],
        json!({"kind": "value", "hash": v.hash, "len": v.len})
    );
}

#[test]
fn failed_and_unfinished_entries() {
    let d = tmp();
    let s = open(&d);
    let a = record(&s, ne("p", 1, "false", &[]), fin(false, "x"));
    let b = s
        .apply_one(Op::Append {
            id: None,
            entry: ne("p", 2, "sleep 9", &[]),
        })
        .unwrap()
        .unwrap();
    let all = s.query(&Query::default(), &Scope::All).unwrap();
    assert_eq!(ids(&all), vec![b, a]);
    assert_eq!(all[0].ok, None);
    assert_eq!(all[0].dur_ns, None);
    let q = |ok| Query {
        ok: Some(ok),
        ..Query::default()
    };
    assert_eq!(ids(&s.query(&q(false), &Scope::All).unwrap()), vec![a]);
    assert!(s.query(&q(true), &Scope::All).unwrap().is_empty());
    s.apply_one(Op::Finish {
        id: b,
        finish: fin(true, "done"),
    })
    .unwrap();
    assert_eq!(ids(&s.query(&q(true), &Scope::All).unwrap()), vec![b]);
    // finishing twice or an unknown id is a per-op error, not a failed batch
    let r = s
        .apply(
            vec![
                Op::Finish {
                    id: b,
                    finish: fin(true, "again"),
                },
                Op::Finish {
                    id: 99,
                    finish: fin(true, "x"),
                },
                Op::Append {
                    id: None,
                    entry: ne("p", 3, "ls", &[]),
                },
            ],
            redb::Durability::Immediate,
        )
        .unwrap();
    assert!(r[0].is_err() && r[1].is_err());
    assert_eq!(r[2], Ok(Some(3)));
}

#[test]
fn filters_before_limit_head() {
    let d = tmp();
    let s = open(&d);
    let mut matches = Vec::new();
    for i in 0..200i64 {
        let src = if i % 70 == 5 {
            "git status"
        } else if i % 3 == 0 {
            "gitx status"
        } else {
            "ls -l"
        };
        let id = record(&s, ne("p", i, src, &[]), fin(true, "v"));
        if src.starts_with("git ") {
            matches.push(id);
        }
    }
    assert_eq!(matches.len(), 3);
    let q = Query {
        head: Some("git".into()),
        limit: Some(2),
        ..Query::default()
    };
    let got = ids(&s.query(&q, &Scope::All).unwrap());
    assert_eq!(got, vec![matches[2], matches[1]]);
    // default limit 100, limit 0 = 100
    assert_eq!(s.query(&Query::default(), &Scope::All).unwrap().len(), 100);
    let q0 = Query {
        limit: Some(0),
        ..Query::default()
    };
    let all = s.query(&q0, &Scope::All).unwrap();
    assert_eq!(all.len(), 100);
    assert_eq!(all[0].id, 200);
    assert_eq!(all[99].id, 101);
}

#[test]
fn effects_exact_dotted_and_snake_all_of() {
    let d = tmp();
    let s = open(&d);
    let rm = record(
        &s,
        ne("p", 1, "rm gone.txt", &["fs_delete"]),
        fin(true, "a"),
    );
    let mv = record(
        &s,
        ne("p", 2, "mv a b", &["fs_read", "fs_write", "fs.delete"]),
        fin(true, "b"),
    );
    let _cat = record(&s, ne("p", 3, "cat a", &["fs_read"]), fin(true, "c"));
    let q = |e: &[&str]| Query {
        effects: Some(e.iter().map(|s| s.to_string()).collect()),
        ..Query::default()
    };
    assert_eq!(
        ids(&s.query(&q(&["fs.delete"]), &Scope::All).unwrap()),
        vec![mv, rm]
    );
    assert_eq!(
        ids(&s.query(&q(&["fs_delete"]), &Scope::All).unwrap()),
        vec![mv, rm]
    );
    assert_eq!(
        ids(&s
            .query(&q(&["fs.delete", "fs_write"]), &Scope::All)
            .unwrap()),
        vec![mv]
    );
    // exact kinds, not substrings
    assert!(s.query(&q(&["fs"]), &Scope::All).unwrap().is_empty());
    assert!(s.query(&q(&["delete"]), &Scope::All).unwrap().is_empty());
    assert!(s
        .query(&q(&["net.connect"]), &Scope::All)
        .unwrap()
        .is_empty());
    // empty effects list = no constraint
    assert_eq!(s.query(&q(&[]), &Scope::All).unwrap().len(), 3);
}

#[test]
fn time_principal_scope() {
    let d = tmp();
    let s = open(&d);
    for i in 1..=10i64 {
        let p = if i % 2 == 0 { "alice" } else { "bob" };
        record(&s, ne(p, i * 100, "echo hi", &[]), fin(true, "v"));
    }
    let q = |since: Option<i64>, until: Option<i64>| Query {
        since,
        until,
        ..Query::default()
    };
    assert_eq!(
        ids(&s.query(&q(Some(300), Some(500)), &Scope::All).unwrap()),
        vec![5, 4, 3]
    );
    assert!(s.query(&q(None, Some(1)), &Scope::All).unwrap().is_empty());
    assert!(s
        .query(&q(Some(1001), None), &Scope::All)
        .unwrap()
        .is_empty());
    assert!(s
        .query(&q(Some(600), Some(500)), &Scope::All)
        .unwrap()
        .is_empty());
    assert_eq!(s.query(&q(Some(1000), None), &Scope::All).unwrap().len(), 1);
    let alice = Scope::Principal("alice".into());
    assert_eq!(
        ids(&s.query(&Query::default(), &alice).unwrap()),
        vec![10, 8, 6, 4, 2]
    );
    let qp = |p: &str| Query {
        principal: Some(p.into()),
        ..Query::default()
    };
    assert_eq!(s.query(&qp("bob"), &Scope::All).unwrap().len(), 5);
    assert!(s.query(&qp("bob"), &alice).unwrap().is_empty());
    assert_eq!(s.query(&qp("alice"), &alice).unwrap().len(), 5);
    assert!(s.query(&qp("ali"), &Scope::All).unwrap().is_empty());
}

/// Random entries (timestamps partly out of order), random queries: the planner must agree with
/// a brute-force scan using the exact predicate.
#[test]
fn planner_matches_brute_force() {
    planner_vs_brute_force(false, None);
}

/// After retention removed the oldest rows the time bounds stay valid.
#[test]
fn planner_matches_brute_force_after_retention() {
    planner_vs_brute_force(false, Some(250));
}

/// Ids inserted out of order (explicit ids, shuffled): exercises the slow entry-time path.
#[test]
fn planner_matches_brute_force_out_of_order_ids() {
    planner_vs_brute_force(true, None);
}

fn planner_vs_brute_force(shuffle: bool, keep: Option<u64>) {
    let d = tmp();
    let s = Store::open(
        d.path().join("journal.redb"),
        StoreOptions {
            retention: Retention {
                max_entries: keep,
                ..Retention::default()
            },
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let principals = ["a", "b", "c"];
    let heads = ["ls", "git", "cat", "rm"];
    let kinds = ["fs_read", "fs.write", "proc_spawn", "opaque"];
    let mut ops = Vec::new();
    for i in 0..600i64 {
        let ts = i * 10 + (rnd(5) as i64 - 2) * 25; // jitter: not monotone
        let ts = if i == 300 { 0 } else { ts }; // a clock jump backwards
        let eff: Vec<&str> = kinds.iter().copied().filter(|_| rnd(3) == 0).collect();
        let e = ne(
            principals[rnd(3) as usize],
            ts,
            &format!("{} x", heads[rnd(4) as usize]),
            &eff,
        );
        // shuffled: ids are a permutation of 1..=600 (601 is prime)
        let id = if shuffle {
            Some((i as u64 + 1) * 7919 % 601)
        } else {
            None
        };
        if rnd(10) == 0 {
            ops.push(Op::Append { id, entry: e });
        } else {
            ops.push(Op::Record {
                id,
                entry: e,
                finish: fin(rnd(4) != 0, "v"),
            });
        }
        if ops.len() == 50 {
            for r in s
                .apply(std::mem::take(&mut ops), redb::Durability::None)
                .unwrap()
            {
                r.unwrap();
            }
        }
    }
    let all = s
        .query(
            &Query {
                limit: Some(10_000),
                ..Query::default()
            },
            &Scope::All,
        )
        .unwrap();
    assert_eq!(all.len() as u64, keep.unwrap_or(600));
    for round in 0..400 {
        let mut q = Query::default();
        if rnd(2) == 0 {
            q.since = Some(rnd(6200) as i64 - 100);
        }
        if rnd(2) == 0 {
            q.until = Some(rnd(6200) as i64 - 100);
        }
        if rnd(3) == 0 {
            q.principal = Some(principals[rnd(3) as usize].into());
        }
        if rnd(3) == 0 {
            q.head = Some(heads[rnd(4) as usize].into());
        }
        if rnd(3) == 0 {
            q.ok = Some(rnd(2) == 0);
        }
        if rnd(3) == 0 {
            q.effects = Some(
                kinds
                    .iter()
                    .filter(|_| rnd(3) == 0)
                    .map(|k| k.to_string())
                    .collect(),
            );
        }
        q.limit = Some(rnd(30) as usize);
        let scope = if rnd(4) == 0 {
            Scope::Principal(principals[rnd(3) as usize].into())
        } else {
            Scope::All
        };
        let want: Vec<EntryId> = all
            .iter()
            .filter(|e| q.matches(&scope, e))
            .take(q.effective_limit())
            .map(|e| e.id)
            .collect();
        let got = ids(&s.query(&q, &scope).unwrap());
        assert_eq!(got, want, "round {round}: {q:?} {scope:?}");
    }
}

#[test]
fn retention_and_gc_keep_referenced_blobs() {
    let d = tmp();
    let s = Store::open(
        d.path().join("journal.redb"),
        StoreOptions {
            retention: Retention {
                max_entries: Some(10),
                ..Retention::default()
            },
            ..StoreOptions::default()
        },
    )
    .unwrap();
    // entry 1: value referenced by a transcript row
    let mut f = fin(true, "kept-by-transcript");
    f.transcript = Some(1);
    let e1 = record(&s, ne("p", 1, "a", &[]), f);
    // entry 2: pinned entry
    let e2 = record(&s, ne("p", 2, "b", &[]), fin(true, "kept-by-pinned-entry"));
    s.apply_one(Op::PinEntry(e2)).unwrap();
    // entry 3: pinned blob
    let e3 = record(&s, ne("p", 3, "c", &[]), fin(true, "kept-by-pin"));
    let pinned_hash = cas::hash_hex(b"kept-by-pin");
    s.apply_one(Op::PinBlob(format!("blake3:{pinned_hash}")))
        .unwrap();
    // entry 4: nothing keeps it
    let e4 = record(&s, ne("p", 4, "d", &[]), fin(true, "collectable"));
    for i in 5..=40 {
        record(&s, ne("p", i, "e", &[]), fin(true, &format!("v{i}")));
    }
    let st = s.stats().unwrap();
    assert_eq!(st.entries, 10);
    assert!(s.get_entry(e1).unwrap().is_none());
    assert!(s.get_entry(e2).unwrap().is_some(), "pinned entry deleted");
    assert!(s.get_entry(e3).unwrap().is_none());
    assert!(s.get_entry(e4).unwrap().is_none());
    assert_eq!(
        s.blob_get(&cas::hash_hex(b"kept-by-transcript")).unwrap(),
        Some(b"kept-by-transcript".to_vec())
    );
    assert!(s
        .blob_get(&cas::hash_hex(b"kept-by-pinned-entry"))
        .unwrap()
        .is_some());
    assert!(s.blob_get(&pinned_hash).unwrap().is_some());
    assert!(s.blob_info(&pinned_hash).unwrap().unwrap().pinned);
    assert_eq!(s.blob_get(&cas::hash_hex(b"collectable")).unwrap(), None);
    assert_eq!(
        s.blob_get(&cas::hash_hex(b"render collectable")).unwrap(),
        None
    );
    assert!(s.check_refcounts().unwrap().is_empty());
    // releasing the holders lets GC take the blobs
    s.apply_one(Op::UnpinBlob(pinned_hash.clone())).unwrap();
    assert_eq!(s.blob_get(&pinned_hash).unwrap(), None);
    s.apply_one(Op::DropTranscript {
        session: "work".into(),
    })
    .unwrap();
    assert_eq!(
        s.blob_get(&cas::hash_hex(b"kept-by-transcript")).unwrap(),
        None
    );
    assert!(s.check_refcounts().unwrap().is_empty());
    // index rows of deleted entries are gone too: queries stay exact
    let got = s
        .query(
            &Query {
                head: Some("a".into()),
                ..Query::default()
            },
            &Scope::All,
        )
        .unwrap();
    assert!(got.is_empty());
}

#[test]
fn retention_by_bytes_and_event_pruning() {
    let d = tmp();
    let s = Store::open(
        d.path().join("journal.redb"),
        StoreOptions {
            retention: Retention {
                max_entries: Some(50),
                max_bytes: Some(64 << 10),
                floor: 5,
            },
            ..StoreOptions::default()
        },
    )
    .unwrap();
    for i in 0..100 {
        // incompressible-ish 4 KiB outputs
        let mut x = (i as u64 + 1).wrapping_mul(0x9e3779b97f4a7c15);
        let v: String = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        record(&s, ne("p", i, "gen", &[]), fin(true, &v));
        s.apply_one(Op::Event {
            channel: "journal".into(),
            seq: i as u64,
            ts: i,
            payload: std::sync::Arc::new(json!(i).into()),
        })
        .unwrap();
    }
    let st = s.stats().unwrap();
    assert!(st.bytes <= 64 << 10, "{st:?}");
    assert!(st.entries >= 5 && st.entries < 50, "{st:?}");
    assert!(s.check_refcounts().unwrap().is_empty());
    let ev = s.events_read("journal", None, 0).unwrap();
    assert_eq!(ev.len(), 50);
    assert_eq!(ev[0].seq, 50);
    assert_eq!(s.max_seq("journal").unwrap(), Some(99));
}

#[test]
fn blobs_compress_dedupe_and_cap() {
    let d = tmp();
    let s = Store::open(
        d.path().join("journal.redb"),
        StoreOptions {
            max_blob_bytes: 1 << 20,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let big = "abc".repeat(100_000); // 300 KB, compressible
    let huge = vec![7u8; 2 << 20]; // over the cap
    let id = s
        .apply_one(Op::Record {
            id: None,
            entry: ne("p", 1, "gen", &[]),
            finish: Finish {
                dur_ns: 1,
                status: Some(0),
                ok: true,
                outputs: vec![
                    OutputData::new(OutputKind::Stdout, big.clone().into_bytes()),
                    OutputData::new(OutputKind::Stderr, big.clone().into_bytes()),
                    OutputData::new(OutputKind::Value, huge.clone()),
                ],
                transcript: Some(7),
            },
        })
        .unwrap()
        .unwrap();
    let e = s.get_entry(id).unwrap().unwrap();
    assert_eq!(e.outputs[0].hash, e.outputs[1].hash);
    let info = s.blob_info(&e.outputs[0].hash).unwrap().unwrap();
    assert_eq!(info.refs, 2);
    assert_eq!(info.len, 300_000);
    assert!(info.stored_len < 10_000, "{info:?}");
    assert_eq!(
        s.blob_get(&e.outputs[0].hash).unwrap().unwrap(),
        big.into_bytes()
    );
    assert!(!e.outputs[2].stored);
    assert_eq!(e.outputs[2].len, 2 << 20);
    assert_eq!(e.outputs[2].hash, cas::hash_hex(&huge));
    assert_eq!(s.blob_get(&e.outputs[2].hash).unwrap(), None);
    let j = serde_json::to_value(&e.outputs[2]).unwrap();
    assert_eq!(j["stored"], json!(false));
    let row = s.transcript_get("work", 7).unwrap().unwrap();
    assert!(!row.value.unwrap().stored);
    assert!(row.render.is_none());
    assert!(s.check_refcounts().unwrap().is_empty());
}

#[test]
fn corrupt_rows_are_errors_not_panics() {
    let d = tmp();
    let path = d.path().join("journal.redb");
    let (id, h) = {
        let s = open(&d);
        let id = record(&s, ne("p", 1, "x", &[]), fin(true, "value bytes"));
        (id, cas::hash_hex(b"value bytes"))
    };
    {
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(schema::ENTRIES)
            .unwrap()
            .insert(id, [1u8, b'{', b'x'].as_slice())
            .unwrap();
        {
            // flip one byte of the stored data of the first blob ("value bytes")
            let mut blobs = tx.open_table(schema::BLOBS).unwrap();
            let mut rec = blobs.get(1).unwrap().unwrap().value().to_vec();
            let last = rec.len() - 1;
            rec[last] ^= 1;
            blobs.insert(1, rec.as_slice()).unwrap();
        }
        tx.commit().unwrap();
    }
    let s = Store::open(&path, StoreOptions::default()).unwrap();
    assert!(matches!(s.get_entry(id), Err(JournalError::Corrupt(_))));
    assert!(matches!(
        s.query(&Query::default(), &Scope::All),
        Err(JournalError::Corrupt(_))
    ));
    assert!(matches!(s.blob_get(&h), Err(JournalError::Corrupt(_))));
}

#[test]
fn a_new_journal_appears_whole_and_a_stale_half_made_one_is_replaced() {
    let d = tmp();
    let path = d.path().join("journal.redb");
    let new = d.path().join("journal.redb.new");
    // What a daemon killed while creating its journal leaves now: the file
    // it was making beside the journal, never a half-written journal.
    std::fs::write(&new, b"\x00half a header").unwrap();
    {
        let s = open(&d);
        record(&s, ne("p", 1, "x", &[]), fin(true, "v"));
    }
    assert!(!new.exists(), "the stale .new was replaced and renamed");
    let head = std::fs::read(&path).unwrap();
    assert!(
        head.starts_with(b"redb"),
        "{:?}",
        &head[..16.min(head.len())]
    );
    // The journal opens again with its entry; an empty file (made private
    // before redb writes) is created whole too.
    assert_eq!(
        open(&d)
            .query(&Query::default(), &Scope::All)
            .unwrap()
            .len(),
        1
    );
    let d2 = tmp();
    std::fs::write(d2.path().join("journal.redb"), b"").unwrap();
    drop(open(&d2));
    assert!(!d2.path().join("journal.redb.new").exists());
}

/// A reader scoped to a principal gets a blob only through an entry of its own: another
/// principal's output reads exactly like a hash nobody stored, even when the bytes sit in the
/// store; the same bytes become readable once an entry of its own produces them.
#[test]
fn scoped_blob_reads_need_an_own_entry() {
    let d = tmp();
    let s = open(&d);
    record(&s, ne("local", 10, "cat secret", &[]), fin(true, "SECRET"));
    record(&s, ne("agent:t", 11, "1", &[]), fin(true, "mine"));
    let t = Scope::Principal("agent:t".into());
    let secret = cas::hash_hex(b"SECRET");
    let mine = cas::hash_hex(b"mine");
    assert!(s.blob_get(&secret).unwrap().is_some());
    assert_eq!(s.blob_get_scoped(&secret, &t).unwrap(), None);
    let upper = format!("blake3:{}", secret.to_uppercase());
    assert_eq!(s.blob_get_scoped(&upper, &t).unwrap(), None);
    assert_eq!(
        s.blob_get_scoped(&cas::hash_hex(b"nobody"), &t).unwrap(),
        None
    );
    assert_eq!(
        s.blob_get_scoped(&mine, &t).unwrap().as_deref(),
        Some(&b"mine"[..])
    );
    assert_eq!(
        s.blob_get_scoped(&format!("blake3:{}", mine.to_uppercase()), &t)
            .unwrap()
            .as_deref(),
        Some(&b"mine"[..])
    );
    assert!(s.blob_get_scoped(&secret, &Scope::All).unwrap().is_some());
    // The hash in the token's own source is not a reference to the blob.
    record(
        &s,
        ne("agent:t", 12, &format!("echo {secret}"), &[]),
        fin(true, "x"),
    );
    assert_eq!(s.blob_get_scoped(&secret, &t).unwrap(), None);
    // A principal whose name only shares a truncated index key gets nothing either.
    let long = "p".repeat(schema::MAX_INDEX_KEY + 10);
    record(
        &s,
        ne(&format!("{long}a"), 13, "1", &[]),
        fin(true, "long-a"),
    );
    let b = Scope::Principal(format!("{long}b"));
    assert_eq!(
        s.blob_get_scoped(&cas::hash_hex(b"long-a"), &b).unwrap(),
        None
    );
    // Producing the same bytes itself makes them its own.
    record(&s, ne("agent:t", 14, "cat copy", &[]), fin(true, "SECRET"));
    assert!(s.blob_get_scoped(&secret, &t).unwrap().is_some());
}
