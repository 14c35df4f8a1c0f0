//! Journal tests of durability: restart, crash recovery of both writer modes, and files
//! that are foreign or corrupt (refused untouched).

use super::*;

#[test]
fn restart_keeps_entries_transcripts_events() {
    let d = tmp();
    let (hash, id) = {
        let s = open(&d);
        let mut f = fin(true, r#"{"$":"int","v":3}"#);
        f.transcript = Some(1);
        let id = record(&s, ne("p", 5, "1 + 2", &[]), f);
        for seq in 0..5u64 {
            s.apply_one(Op::Event {
                channel: "journal".into(),
                seq,
                ts: seq as i64,
                payload: std::sync::Arc::new(json!({"seq": seq}).into()),
            })
            .unwrap();
        }
        let row = s.transcript_get("work", 1).unwrap().unwrap();
        (row.value.unwrap().hash, id)
    };
    let s = open(&d);
    assert_eq!(s.get_entry(id).unwrap().unwrap().src, "1 + 2");
    let row = s.transcript_get("work", 1).unwrap().unwrap();
    assert_eq!(row.entry_id, Some(id));
    assert_eq!(row.value.as_ref().unwrap().hash, hash);
    assert_eq!(
        s.blob_get(&hash).unwrap().unwrap(),
        br#"{"$":"int","v":3}"#.to_vec()
    );
    assert!(s.blob_get(&row.render.unwrap().hash).unwrap().is_some());
    assert_eq!(s.transcript_last("work").unwrap(), Some(1));
    assert_eq!(s.transcript_last("other").unwrap(), None);
    assert_eq!(s.max_seq("journal").unwrap(), Some(4));
    assert_eq!(s.max_seq("session.transcript").unwrap(), None);
    let seqs = |v: Vec<StoredEvent>| v.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(s.events_read("journal", Some(0), 0).unwrap()),
        vec![1, 2, 3, 4]
    );
    assert_eq!(seqs(s.events_read("journal", None, 2).unwrap()), vec![3, 4]);
    assert!(s.events_read("journal", Some(4), 0).unwrap().is_empty());
    assert!(s
        .events_read("journal", Some(u64::MAX), 0)
        .unwrap()
        .is_empty());
    assert_eq!(
        s.events_read("journal", Some(3), 0).unwrap()[0].payload,
        json!({"seq": 4})
    );
    // ids continue after restart
    assert_eq!(record(&s, ne("p", 6, "x", &[]), fin(true, "v")), id + 1);
}

/// `n` finished `echo` records (ts 0..n), each acknowledged; their ids.
fn submit_echoes(w: &JournalWriter, n: i64) -> Vec<EntryId> {
    (0..n)
        .map(|i| {
            w.submit_wait(Op::Record {
                id: None,
                entry: ne("p", i, "echo", &[]),
                finish: fin(true, "v"),
            })
            .unwrap()
            .unwrap()
        })
        .collect()
}

/// A batched writer on a fresh store in `d` that commits only when asked (flush_ms 60 s).
fn batched_writer(d: &tempfile::TempDir) -> JournalWriter {
    let store =
        Arc::new(Store::open(d.path().join("journal.redb"), StoreOptions::default()).unwrap());
    JournalWriter::start(
        store,
        WriterConfig {
            durability: Durability::Batched,
            flush_ms: 60_000,
            ..WriterConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn batched_ops_wake_the_writer_once_per_flush_not_per_op() {
    let d = tmp();
    let w = batched_writer(&d);
    let ids = submit_echoes(&w, 500);
    // The first op woke the idle thread (a second wake-up is possible only while the thread
    // is still starting); the others waited in the inbox for its deadline.
    let st = w.stats();
    assert!(st.wakes <= 2, "{st:?}");
    assert_eq!(st.committed_ops, 0, "{st:?}");
    // A read-your-writes query still sees every acknowledged op at once.
    let q = Query {
        limit: Some(500),
        ..Query::default()
    };
    assert_eq!(w.query(&q, &Scope::All).unwrap().len(), 500);
    // After a flush the thread goes idle; an op then wakes it again (or is taken by the
    // thread on its way to sleep), and shutdown commits it.
    w.flush().unwrap();
    w.submit_wait(Op::Append {
        id: None,
        entry: ne("p", 9999, "ls", &[]),
    })
    .unwrap();
    assert!(w.stats().wakes <= 4, "{:?}", w.stats());
    w.shutdown().unwrap();
    assert_eq!(w.store().stats().unwrap().entries, 501);
    for id in ids {
        assert!(
            w.store().get_entry(id).unwrap().is_some(),
            "acked {id} lost"
        );
    }
}

#[test]
fn batched_control_channel_full_of_flushes_still_drains() {
    // Batched mode's channel holds CONTROL_QUEUE messages: many more flushers than that,
    // with ops submitted between them, all return and lose nothing.
    let d = tmp();
    let w = batched_writer(&d);
    let threads = 4 * crate::writer::CONTROL_QUEUE;
    std::thread::scope(|s| {
        for t in 0..threads {
            let w = &w;
            s.spawn(move || {
                w.submit_wait(Op::Append {
                    id: None,
                    entry: ne("p", t as i64, "ls", &[]),
                })
                .unwrap();
                if t % 2 == 0 {
                    w.flush().unwrap();
                } else {
                    w.sync_visible().unwrap();
                }
            });
        }
    });
    let q = Query {
        limit: Some(threads + 1),
        ..Query::default()
    };
    assert_eq!(w.query(&q, &Scope::All).unwrap().len(), threads);
    w.shutdown().unwrap();
    assert_eq!(w.store().stats().unwrap().entries, threads as u64);
}

#[test]
fn writer_immediate_survives_crash() {
    let d = tmp();
    let path = d.path().join("journal.redb");
    let mut acked = Vec::new();
    {
        let store = Arc::new(Store::open(&path, StoreOptions::default()).unwrap());
        let w = JournalWriter::start(
            store.clone(),
            WriterConfig {
                durability: Durability::Immediate,
                ..WriterConfig::default()
            },
        )
        .unwrap();
        assert!(JournalWriter::start(store.clone(), WriterConfig::default()).is_err());
        acked.extend(submit_echoes(&w, 50));
        // concurrent submitters share commits
        std::thread::scope(|sc| {
            for t in 0..4 {
                let w = &w;
                sc.spawn(move || {
                    for i in 0..25 {
                        w.submit_wait(Op::Append {
                            id: None,
                            entry: ne("q", 1000 + t * 100 + i, "ls", &[]),
                        })
                        .unwrap();
                    }
                });
            }
        });
        let st = w.stats();
        assert_eq!(st.committed_ops, 150);
        assert!(st.commits <= 150);
        w.simulate_crash();
    }
    let s = Store::open(&path, StoreOptions::default()).unwrap();
    for id in acked {
        assert!(s.get_entry(id).unwrap().is_some(), "acked {id} lost");
    }
    assert_eq!(s.stats().unwrap().entries, 150);
}

#[test]
fn writer_batched_flush_visibility_and_shutdown() {
    let d = tmp();
    let path = d.path().join("journal.redb");
    {
        let store = Arc::new(Store::open(&path, StoreOptions::default()).unwrap());
        let w = JournalWriter::start(
            store.clone(),
            WriterConfig {
                durability: Durability::Batched,
                flush_ms: 60_000,
                ..WriterConfig::default()
            },
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sub = w
            .submit(
                Op::Record {
                    id: None,
                    entry: ne("p", 1, "1 + 2", &[]),
                    finish: fin(true, "3"),
                },
                Some(Box::new(move |r| tx.send(r).unwrap())),
            )
            .unwrap();
        assert_eq!(sub.entry_id, Some(1));
        // acknowledged at once in batched mode
        assert_eq!(rx.try_recv().unwrap(), Ok(Some(1)));
        // not yet committed ...
        assert!(store.get_entry(1).unwrap().is_none());
        // ... but the writer's query reads its own writes
        let got = w.query(&Query::default(), &Scope::All).unwrap();
        assert_eq!(ids(&got), vec![1]);
        for i in 2..=10 {
            w.submit(
                Op::Append {
                    id: None,
                    entry: ne("p", i, "ls", &[]),
                },
                None,
            )
            .unwrap();
        }
        w.shutdown().unwrap();
        assert!(w.submit_wait(Op::UnpinEntry(1)).is_err());
    }
    let s = Store::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(s.stats().unwrap().entries, 10);
}

#[test]
fn writer_batched_timer_and_crash_opens_cleanly() {
    let d = tmp();
    let path = d.path().join("journal.redb");
    {
        let store = Arc::new(Store::open(&path, StoreOptions::default()).unwrap());
        let w = JournalWriter::start(
            store.clone(),
            WriterConfig {
                durability: Durability::Batched,
                flush_ms: 20,
                ..WriterConfig::default()
            },
        )
        .unwrap();
        for i in 0..20 {
            w.submit_wait(Op::Append {
                id: None,
                entry: ne("p", i, "ls", &[]),
            })
            .unwrap();
        }
        // the timer commits within flush_ms (polled with a deadline); the
        // writer's counters move just after the commit is visible
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.stats().unwrap().entries < 20 || w.stats().queued > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the batched writer never committed"
            );
            std::thread::yield_now();
        }
        assert_eq!(store.stats().unwrap().entries, 20);
        assert!(w.stats().commits >= 1);
        assert_eq!(w.stats().queued, 0);
        for i in 0..20 {
            w.submit_wait(Op::Append {
                id: None,
                entry: ne("p", 100 + i, "ls", &[]),
            })
            .unwrap();
        }
        w.simulate_crash();
    }
    let s = Store::open(&path, StoreOptions::default()).unwrap();
    let n = s.stats().unwrap().entries;
    assert!((20..=40).contains(&n), "{n}");
    assert!(s.check_refcounts().unwrap().is_empty());
}

fn assert_refused(bytes: &[u8], want: fn(&JournalError) -> bool) {
    let d = tmp();
    let path = d.path().join("journal.redb");
    std::fs::write(&path, bytes).unwrap();
    let err = Store::open(&path, StoreOptions::default()).unwrap_err();
    assert!(want(&err), "unexpected error {err:?}");
    assert!(!err.to_string().is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "file was modified");
}

#[test]
fn foreign_and_corrupt_files_are_refused_untouched() {
    assert_refused(b"hello, this is not a database at all\n", |e| {
        matches!(e, JournalError::NotAJournal { .. })
    });
    assert_refused(&[0u8; 8192], |e| {
        matches!(e, JournalError::NotAJournal { .. })
    });
    // a redb database that is not ours
    let d = tmp();
    let p = d.path().join("other.redb");
    {
        let db = redb::Database::create(&p).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("theirs");
            tx.open_table(def).unwrap().insert(1, 2).unwrap();
        }
        tx.commit().unwrap();
    }
    let foreign = std::fs::read(&p).unwrap();
    assert_refused(&foreign, |e| matches!(e, JournalError::Foreign { .. }));
    // ours, but from the future
    let p2 = d.path().join("future.redb");
    {
        let s = Store::open(&p2, StoreOptions::default()).unwrap();
        drop(s);
        let db = redb::Database::create(&p2).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(schema::META)
            .unwrap()
            .insert("schema_version", schema::enc_u64s(&[99]).as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let future = std::fs::read(&p2).unwrap();
    assert_refused(&future, |e| {
        matches!(e, JournalError::TooNew { found: 99, .. })
    });
    // ours, with damaged pages: an error or a clean open, never a panic
    let p3 = d.path().join("ours.redb");
    {
        let s = Store::open(&p3, StoreOptions::default()).unwrap();
        for i in 0..200 {
            record(&s, ne("p", i, "echo hi", &[]), fin(true, &"x".repeat(100)));
        }
    }
    let mut bytes = std::fs::read(&p3).unwrap();
    let n = bytes.len();
    for b in bytes[4096..n].iter_mut().step_by(7) {
        *b ^= 0x5a;
    }
    std::fs::write(&p3, &bytes).unwrap();
    let r = std::panic::catch_unwind(|| {
        Store::open(&p3, StoreOptions::default()).and_then(|s| {
            s.query(&Query::default(), &Scope::All)?;
            Ok(())
        })
    });
    assert!(r.is_ok(), "panicked on a damaged file");
    // a second open of a live store is refused
    let p4 = d.path().join("live.redb");
    let _live = Store::open(&p4, StoreOptions::default()).unwrap();
    assert!(matches!(
        Store::open(&p4, StoreOptions::default()).unwrap_err(),
        JournalError::Locked { .. }
    ));
}

#[test]
fn batched_at_risk_counts_from_the_oldest_acknowledgement_until_it_is_durable() {
    let d = tmp();
    let w = batched_writer(&d);
    assert_eq!(w.stats().at_risk_us, 0, "nothing acknowledged yet");
    let before = std::time::Instant::now();
    submit_echoes(&w, 3);
    // It counts from the first acknowledgement: never longer than since just before it,
    // and it grows (a bounded spin, not a sleep: a microsecond passes).
    let first = w.stats().at_risk_us;
    assert!(first as u128 <= before.elapsed().as_micros(), "{first}");
    let grew = (0..10_000_000).any(|_| w.stats().at_risk_us > first);
    assert!(grew, "at_risk_us stayed at {first}");
    // A read-your-writes query makes the ops visible, not durable: still at risk, same origin.
    let q = Query {
        limit: Some(10),
        ..Query::default()
    };
    assert_eq!(w.query(&q, &Scope::All).unwrap().len(), 3);
    let visible = w.stats().at_risk_us;
    assert!(
        visible > first,
        "{visible} after a visibility commit, {first} before"
    );
    // A durable commit ends the risk.
    w.flush().unwrap();
    assert_eq!(w.stats().at_risk_us, 0, "{:?}", w.stats());
}
