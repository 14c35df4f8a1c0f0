//! The journal workload of `make bench` (benches/shoal.rs includes it): batched append
//! throughput and query p50s over a fresh store. Lives under benches/, never in the library;
//! never prints: the caller formats the [`BenchReport`].

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use shoal_journal::*;

/// Figures of one run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub entries: usize,
    /// Batched writer: entries/s from the first submit to the end of the final flush.
    pub append_per_sec: f64,
    /// Caller-side cost of one batched `submit` (what an exec round trip pays), p50 µs.
    pub submit_p50_us: f64,
    pub query_limit100_p50_us: f64,
    pub query_head_p50_us: f64,
    pub query_rare_head_p50_us: f64,
    pub query_principal_p50_us: f64,
    pub query_principal_and_head_p50_us: f64,
    pub query_effects_p50_us: f64,
    pub query_since_p50_us: f64,
    pub query_scoped_p50_us: f64,
    /// `since`..`until` covering entries 5%..10% (oldest side).
    pub query_old_window_p50_us: f64,
    /// principal and head that never occur together (the intersection is empty).
    pub query_empty_p50_us: f64,
    /// `ok:false` (1 in 17 entries).
    pub query_failed_p50_us: f64,
    pub file_bytes: u64,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "journal bench over {} entries", self.entries)?;
        writeln!(
            f,
            "  append (batched)            {:>10.0} entries/s",
            self.append_per_sec
        )?;
        writeln!(
            f,
            "  submit p50                  {:>10.1} µs",
            self.submit_p50_us
        )?;
        writeln!(
            f,
            "  query limit 100 p50         {:>10.1} µs",
            self.query_limit100_p50_us
        )?;
        writeln!(
            f,
            "  + head p50                  {:>10.1} µs",
            self.query_head_p50_us
        )?;
        writeln!(
            f,
            "  + rare head (1%) p50        {:>10.1} µs",
            self.query_rare_head_p50_us
        )?;
        writeln!(
            f,
            "  + principal p50             {:>10.1} µs",
            self.query_principal_p50_us
        )?;
        writeln!(
            f,
            "  + principal & rare head p50 {:>10.1} µs",
            self.query_principal_and_head_p50_us
        )?;
        writeln!(
            f,
            "  + effects p50               {:>10.1} µs",
            self.query_effects_p50_us
        )?;
        writeln!(
            f,
            "  + since (newest 10%) p50    {:>10.1} µs",
            self.query_since_p50_us
        )?;
        writeln!(
            f,
            "  scoped to a principal p50   {:>10.1} µs",
            self.query_scoped_p50_us
        )?;
        writeln!(
            f,
            "  old time window p50         {:>10.1} µs",
            self.query_old_window_p50_us
        )?;
        writeln!(
            f,
            "  empty intersection p50      {:>10.1} µs",
            self.query_empty_p50_us
        )?;
        writeln!(
            f,
            "  ok:false p50                {:>10.1} µs",
            self.query_failed_p50_us
        )?;
        write!(
            f,
            "  file size                   {:>10} bytes",
            self.file_bytes
        )
    }
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

const HEADS: [&str; 10] = [
    "ls", "cat", "echo", "rm", "cp", "mv", "grep", "cargo", "make", "cd",
];

fn entry(i: usize, ts: i64) -> (NewEntry, Finish) {
    let head = if i % 100 == 42 {
        "git"
    } else {
        HEADS[i % HEADS.len()]
    };
    let src = format!("{head} file{i}.txt | where size > {i}");
    let effects = match head {
        "rm" => vec![json!({"kind": "fs_delete", "paths": [format!("file{i}.txt")]})],
        "cp" | "mv" => vec![
            json!({"kind": "fs_read", "paths": [format!("file{i}.txt")]}),
            json!({"kind": "fs_write", "paths": ["out"]}),
        ],
        "cargo" | "make" | "git" => {
            vec![json!({"kind": "proc_spawn", "bin_hash": "", "argv0": head})]
        }
        _ => vec![json!({"kind": "fs_read", "paths": ["."]})],
    };
    let e = NewEntry {
        session: format!("s{}", i % 4),
        principal: format!("agent:{}", i % 10),
        ts,
        cwd: Cwd {
            display: "/home/me/project".into(),
            raw: None,
        },
        src: src.clone(),
        ast: Some(json!({"kind": "program", "stmts": [{"kind": "pipeline", "src": src}]})),
        opaque: false,
        effects,
    };
    let value = format!(
        r#"{{"$":"record","v":{{"n":{{"$":"int","v":{i}}},"name":{{"$":"str","v":"file{i}.txt"}}}}}}"#
    );
    let f = Finish {
        dur_ns: 1_200_000,
        status: Some(0),
        ok: !i.is_multiple_of(17),
        outputs: vec![
            OutputData::new(OutputKind::Value, value.into_bytes()),
            OutputData::new(
                OutputKind::Render,
                format!("n: {i}\nname: file{i}.txt").into_bytes(),
            ),
        ],
        transcript: Some(i as u64 + 1),
    };
    (e, f)
}

fn time_query(w: &JournalWriter, q: &Query, scope: &Scope, reps: usize) -> Result<f64> {
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let r = w.store().query(q, scope)?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(r);
    }
    Ok(p50(v))
}

/// Build a fresh store of `n` entries in a temporary directory (removed afterwards) through the
/// batched writer, then time the queries.
pub fn bench_journal(n: usize) -> Result<BenchReport> {
    let dir = std::env::temp_dir().join(format!(
        "shoal-journal-bench-{}-{}",
        std::process::id(),
        now_ns()
    ));
    std::fs::create_dir_all(&dir)?;
    let r = run(&dir, n);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn run(dir: &std::path::Path, n: usize) -> Result<BenchReport> {
    let store = Arc::new(Store::open(
        dir.join("journal.redb"),
        StoreOptions::default(),
    )?);
    let w = JournalWriter::start(store.clone(), WriterConfig::default())?;
    let base = 1_750_000_000_000_000_000i64;
    let inputs: Vec<(NewEntry, Finish)> =
        (0..n).map(|i| entry(i, base + i as i64 * 1000)).collect();
    let mut submit = Vec::with_capacity(n);
    let t0 = Instant::now();
    for (e, f) in inputs {
        let t = Instant::now();
        w.submit(
            Op::Record {
                id: None,
                entry: e,
                finish: f,
            },
            None,
        )?;
        submit.push(t.elapsed().as_secs_f64() * 1e6);
    }
    w.flush()?;
    let append_per_sec = n as f64 / t0.elapsed().as_secs_f64();
    let reps = 200;
    let q = |f: &dyn Fn(&mut Query)| {
        let mut q = Query {
            limit: Some(100),
            ..Query::default()
        };
        f(&mut q);
        q
    };
    let all = Scope::All;
    Ok(BenchReport {
        entries: n,
        append_per_sec,
        submit_p50_us: p50(submit),
        query_limit100_p50_us: time_query(&w, &q(&|_| {}), &all, reps)?,
        query_head_p50_us: time_query(&w, &q(&|q| q.head = Some("ls".into())), &all, reps)?,
        query_rare_head_p50_us: time_query(&w, &q(&|q| q.head = Some("git".into())), &all, reps)?,
        query_principal_p50_us: time_query(
            &w,
            &q(&|q| q.principal = Some("agent:3".into())),
            &all,
            reps,
        )?,
        query_principal_and_head_p50_us: time_query(
            &w,
            &q(&|q| {
                q.principal = Some("agent:2".into());
                q.head = Some("git".into());
            }),
            &all,
            reps,
        )?,
        query_effects_p50_us: time_query(
            &w,
            &q(&|q| q.effects = Some(vec!["fs.write".into()])),
            &all,
            reps,
        )?,
        query_since_p50_us: time_query(
            &w,
            &q(&|q| q.since = Some(base + (n as i64 * 9 / 10) * 1000)),
            &all,
            reps,
        )?,
        query_scoped_p50_us: time_query(
            &w,
            &q(&|_| {}),
            &Scope::Principal("agent:5".into()),
            reps,
        )?,
        query_old_window_p50_us: time_query(
            &w,
            &q(&|q| {
                q.since = Some(base + (n as i64 / 20) * 1000);
                q.until = Some(base + (n as i64 / 10) * 1000);
            }),
            &all,
            reps,
        )?,
        query_empty_p50_us: time_query(
            &w,
            &q(&|q| {
                q.principal = Some("agent:1".into());
                q.head = Some("rm".into());
            }),
            &all,
            reps,
        )?,
        query_failed_p50_us: time_query(&w, &q(&|q| q.ok = Some(false)), &all, reps)?,
        file_bytes: store.stats()?.file_bytes,
    })
}
