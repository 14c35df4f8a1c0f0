//! `make bench` (Leash part), through the public library API:
//!
//! - plan derivation plus verdict for a 200-statement script (target ≤ 2 ms);
//! - the policy check a gated `exec` adds (derivation + verdict of typical
//!   exec sources, in the session, as the daemon's worker does before
//!   running them; target ≤ 20 µs p50);
//! - through the real daemon, a token principal's evaluation in its worker process
//!   against the local user's, in the same run, one exec of each in turn (on a
//!   shared machine, rounds of hundreds put the host's noise on one side or the
//!   other; pairs put it on both): a trivial `exec` (target ≤ 2× the local
//!   user's p50) and a spawn (`sh { : }`, target ≤ 5 ms more than the local
//!   user's p50);
//! - where bubblewrap is installed, `sh { true }` spawned by the local user against
//!   token principals whose children run in kernel namespaces, one reading every
//!   path and one its project (target ≤ 5 ms more than the local user's p50; the
//!   rows above are `namespaces = "off"`).

#![allow(clippy::print_stdout)] // a benchmark report is its stdout

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use shoal_lang::adapters::Catalog;
use shoal_lang::{Session, SessionOptions};
use shoal_policy::policy::{Policy, PolicyConfig};

#[path = "workloads/daemon.rs"]
mod daemon;
use daemon::BenchDir;

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
    confinement();
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

struct Line {
    w: UnixStream,
    r: BufReader<UnixStream>,
    id: u64,
}

impl Line {
    fn open(p: &Path) -> Line {
        let w = UnixStream::connect(p).expect("connect");
        Line {
            r: BufReader::new(w.try_clone().expect("clone")),
            w,
            id: 0,
        }
    }
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let mut b = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}),
        )
        .expect("encode");
        b.push(b'\n');
        self.w.write_all(&b).expect("send");
        let mut s = String::new();
        self.r.read_line(&mut s).expect("reply");
        let v: Value = serde_json::from_str(&s).expect("json");
        assert!(v.get("error").is_none(), "{method}: {v}");
        v
    }
}

fn time_one(c: &mut Line, src: &str) -> Duration {
    let t = Instant::now();
    c.call("exec", json!({"src": src}));
    t.elapsed()
}

fn time_execs(c: &mut Line, src: &str, n: usize) -> Duration {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        c.call("exec", json!({"src": src}));
        times.push(t.elapsed());
    }
    p50(times)
}

/// A token principal's confined evaluation against the local user's.
fn confinement() {
    let dir = BenchDir::new("shl");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("project");
    let section = |name: &str, ns: &str, read: &str| {
        format!(
            "[policy.principal.\"{name}\"]\nopaque = \"allow\"\nauto_apply = \"in-grant\"\nnamespaces = \"{ns}\"\n[policy.principal.\"{name}\".fs]\nread = [\"{read}\"]\nwrite = [\"{p}/**\"]\ndelete = [\"{p}/**\"]\n",
            p = project.display()
        )
    };
    let own = format!("{}/**", project.display());
    let config = section("agent:bench", "off", "/**")
        + &section("agent:bench-ns", "require", "/**")
        + &section("agent:bench-ns-own", "require", &own);
    let daemon = dir.daemon().config(config).start();
    let sock = daemon.sock();
    let token = |name: &str| {
        let out = daemon
            .cmd()
            .args(["token", "create", name, "--state-dir"])
            .arg(daemon.dir().path().join("state/shoal"))
            .output()
            .expect("token");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    let mut local = Line::open(&sock);
    local.call("session.attach", json!({"session": "bench-local"}));
    let mut agent = Line::open(&sock);
    agent.call(
        "session.attach",
        json!({"session": "bench-agent", "token": token("agent:bench")}),
    );
    let bwrap = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()));
    // In namespaces: a token that reads every path (its grant cut around the
    // daemon's directories into many mounts and rules) and one that reads its
    // project (and the system's program directories).
    let mut in_ns = Vec::new();
    if bwrap {
        for (name, reads) in [
            ("agent:bench-ns", "/**"),
            ("agent:bench-ns-own", "its project"),
        ] {
            let mut l = Line::open(&sock);
            l.call(
                "session.attach",
                json!({"session": name.replace(':', "-"), "token": token(name)}),
            );
            in_ns.push((l, reads));
        }
    }
    // The token's execs cross to its worker process and back (one
    // socketpair hop: two more thread wake-ups than the local user's).
    for (src, n) in [("6 * 7", 2000), ("\"abc\".len()", 2000), ("sh { : }", 200)] {
        // Warm both, then alternate one exec each, so what else the machine
        // does weighs on both alike (pairs, not rounds).
        time_execs(&mut local, src, n / 10);
        time_execs(&mut agent, src, n / 10);
        let (mut l, mut a) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            l.push(time_one(&mut local, src));
            a.push(time_one(&mut agent, src));
        }
        let (l, a) = (p50(l), p50(a));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let trivial = src != "sh { : }";
        let ok = if trivial {
            a <= l * 2
        } else {
            a <= l + Duration::from_millis(5)
        };
        let target = if trivial {
            "≤ 2× local"
        } else {
            "≤ local + 5 ms"
        };
        println!(
            "  exec {:<12} local p50 {:>7.3} ms   token (confined) p50 {:>7.3} ms   ({target}) {}",
            format!("{src:?}"),
            ms(l),
            ms(a),
            verdict(ok)
        );
    }
    for (ns, reads) in &mut in_ns {
        let src = "sh { true }";
        time_execs(&mut local, src, 20);
        time_execs(ns, src, 20);
        let (mut l, mut a) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            l.push(time_execs(&mut local, src, 50));
            a.push(time_execs(ns, src, 50));
        }
        let (l, a) = (p50(l), p50(a));
        println!(
            "  exec {:<12} local p50 {:>7.3} ms   token (namespaces, reads {reads}) p50 {:>7.3} ms   (≤ local + 5 ms) {}",
            format!("{src:?}"),
            l.as_secs_f64() * 1e3,
            a.as_secs_f64() * 1e3,
            verdict(a <= l + Duration::from_millis(5))
        );
    }
    if !bwrap {
        println!("  exec sh {{ true }} in namespaces: skipped (no bwrap on PATH)");
    }
    drop(daemon);
}
