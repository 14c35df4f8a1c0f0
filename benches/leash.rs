//! `make bench` (Leash part), through the public library API:
//!
//! - plan derivation plus verdict for a 200-statement script (target ≤ 2 ms);
//! - the policy check a gated `exec` adds (derivation + verdict of typical
//!   exec sources, in the session, as the daemon's worker does before
//!   running them; target ≤ 20 µs p50).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal::adapters::Catalog;
use shoal::lang::{Session, SessionOptions};
use shoal::leash::policy::{Policy, PolicyConfig};

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "OVER TARGET"
    }
}

fn script() -> String {
    let forms = [
        "let x = 1 + 2",
        "ls /tmp",
        "touch /tmp/leash-bench/a.txt",
        "rm /tmp/leash-bench/b.txt",
        "cp /tmp/a /tmp/b",
        "for i in 0..3 { echo (i) }",
        "git status",
        "sh { echo hi }",
        "if x > 2 { mkdir /tmp/leash-bench/d }",
        "env.FOO = \"bar\"",
    ];
    (0..200)
        .map(|i| forms[i % forms.len()])
        .collect::<Vec<_>>()
        .join("\n")
}

fn main() {
    println!("leash benchmarks");
    let cfg: PolicyConfig = toml::from_str(
        "[principal.\"agent\"]\nopaque = \"ask\"\nauto_apply = \"in-grant\"\nproc_spawn = [\"git\"]\nenv_write = [\"FOO\"]\nfs.read = [\"/**\"]\nfs.write = [\"/tmp/**\"]\nfs.delete = [\"/tmp/**\"]\n",
    )
    .expect("policy");
    let policy = Policy::from_config(&cfg, "uid:0");
    let session = Session::new(SessionOptions {
        cwd: std::env::temp_dir(),
        adapters: Some(Arc::new(Catalog::builtin())),
        ..Default::default()
    });

    let src = script();
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let effects = session.derive_effects(&src).expect("parses");
        let d = policy.decide("agent", &effects, Some("/root"));
        std::hint::black_box(d);
        times.push(t.elapsed());
    }
    let p = p50(times);
    println!(
        "  derivation + verdict, 200 statements   p50 {:>8.3} ms   (target ≤ 2 ms) {}",
        p.as_secs_f64() * 1e3,
        verdict(p <= Duration::from_millis(2))
    );

    for exec in [
        "1 + 2",
        "ls",
        "touch /tmp/leash-bench/x",
        "git status",
        "sh { echo hi }",
    ] {
        let mut times = Vec::new();
        for _ in 0..2000 {
            let t = Instant::now();
            let effects = session.derive_effects(exec).expect("parses");
            let d = policy.decide("agent", &effects, Some("/root"));
            std::hint::black_box(d);
            times.push(t.elapsed());
        }
        let p = p50(times);
        println!(
            "  gate of one exec {:<28} p50 {:>8.2} µs   (target ≤ 20 µs) {}",
            format!("{exec:?}"),
            p.as_secs_f64() * 1e6,
            verdict(p <= Duration::from_micros(20))
        );
    }
}
