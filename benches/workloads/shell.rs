//! The process-layer workload of `make bench` (benches/lang.rs includes it), run
//! through the public [`Session::exec`] API. Lives under benches/, never in the library:
//!
//! * [`bench_capture`]: capture N bytes of stdout in value position
//!   (`let o = (sh { head -c N /dev/zero })`, then `o.stdout.len()`):
//!   throughput and peak RSS growth (target for 1 GiB: ≥ 500 MB/s, ≤ 64 MB);
//! * [`bench_true`]: `^true` evaluations, p50/p99 (target p50 ≤ 2 ms);
//! * [`bench_leaks`]: N sequential `sh { echo hi }`; open fds before/after and
//!   zombie children afterwards (target: 0 and 0).
//!
//! Each returns a [`BenchReport`] that implements `Display`. Nothing is
//! printed here.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_lang::session::{Position, Session, SessionOptions};
use shoal_lang::shell::procstat::{open_fds, zombie_children};
use shoal_value::Value;

/// Figures of one benchmark; absent figures are `None`.
#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    pub name: String,
    pub iters: usize,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
    /// MB (10^6 bytes) per second.
    pub throughput_mb_s: Option<f64>,
    /// Peak resident set growth during the run, bytes.
    pub rss_growth: Option<i64>,
    /// Open fds after minus before.
    pub fd_delta: Option<i64>,
    /// Zombie children of this process after the run.
    pub zombies: Option<usize>,
    /// Anything that went wrong (a failed exec, a wrong result).
    pub error: Option<String>,
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<44} n={:<5}", self.name, self.iters)?;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        if let Some(p) = self.p50 {
            write!(f, " p50 {:>8.3} ms", ms(p))?;
        }
        if let Some(p) = self.p99 {
            write!(f, " p99 {:>8.3} ms", ms(p))?;
        }
        if let Some(t) = self.throughput_mb_s {
            write!(f, " {t:>8.0} MB/s")?;
        }
        if let Some(r) = self.rss_growth {
            write!(f, " rss +{:.1} MB", r as f64 / 1e6)?;
        }
        if let Some(d) = self.fd_delta {
            write!(f, " fd delta {d}")?;
        }
        if let Some(z) = self.zombies {
            write!(f, " zombies {z}")?;
        }
        if let Some(e) = &self.error {
            write!(f, " ERROR: {e}")?;
        }
        Ok(())
    }
}

fn session() -> Session {
    Session::new(SessionOptions {
        cwd: std::env::temp_dir(),
        ..Default::default()
    })
}

fn percentile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    Some(sorted[i.min(sorted.len() - 1)])
}

/// Resident set size of this process, bytes (Linux `/proc`).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// Samples RSS every few milliseconds until dropped; yields the peak.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_bytes().unwrap_or(0)));
        let (s, p) = (stop.clone(), peak.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(r) = rss_bytes() {
                    p.fetch_max(r, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        RssSampler {
            stop,
            peak,
            handle: Some(handle),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        if let Some(r) = rss_bytes() {
            self.peak.fetch_max(r, Ordering::Relaxed);
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Capture `bytes` bytes of stdout in value position and read its length.
pub fn bench_capture(bytes: u64) -> BenchReport {
    let mut r = BenchReport {
        name: format!("capture {} MiB stdout (value position)", bytes >> 20),
        iters: 1,
        ..Default::default()
    };
    let mut s = session();
    // Warm up the process machinery (and the spill dir) outside the figures.
    let _ = s.exec(
        "(sh { head -c 100000 /dev/zero }).stdout.len()",
        Position::Value,
    );
    let before = rss_bytes().unwrap_or(0);
    let sampler = RssSampler::start();
    let t = Instant::now();
    let src = format!("let o = (sh {{ head -c {bytes} /dev/zero }})\no.stdout.len()");
    let res = s.exec(&src, Position::Value);
    let el = t.elapsed();
    let peak = sampler.finish();
    match res {
        Ok(Value::Int(n)) if n as u64 == bytes => {}
        other => r.error = Some(format!("unexpected result {other:?}")),
    }
    r.p50 = Some(el);
    r.throughput_mb_s = Some(bytes as f64 / el.as_secs_f64() / 1e6);
    r.rss_growth = Some(peak as i64 - before as i64);
    r
}

/// `iters` evaluations of `^true`.
pub fn bench_true(iters: usize) -> BenchReport {
    let mut r = BenchReport {
        name: "^true evaluation".into(),
        iters,
        ..Default::default()
    };
    let mut s = session();
    for _ in 0..10.min(iters) {
        let _ = s.exec("^true", Position::Value);
    }
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let res = s.exec("^true", Position::Value);
        samples.push(t.elapsed());
        if let Err(e) = res {
            r.error = Some(format!("{e:?}"));
            break;
        }
    }
    samples.sort();
    r.p50 = percentile(&samples, 0.5);
    r.p99 = percentile(&samples, 0.99);
    r
}

/// `iters` sequential `sh { echo hi }`: fd delta and zombie children.
pub fn bench_leaks(iters: usize) -> BenchReport {
    let mut r = BenchReport {
        name: "sequential sh { echo hi }".into(),
        iters,
        ..Default::default()
    };
    let mut s = session();
    let _ = s.exec("sh { echo hi }", Position::Stmt);
    let fds_before = open_fds();
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let res = s.exec("sh { echo hi }", Position::Stmt);
        samples.push(t.elapsed());
        if let Err(e) = res {
            r.error = Some(format!("{e:?}"));
            break;
        }
    }
    samples.sort();
    r.p50 = percentile(&samples, 0.5);
    r.p99 = percentile(&samples, 0.99);
    if let (Some(a), Some(b)) = (fds_before, open_fds()) {
        r.fd_delta = Some(b as i64 - a as i64);
    }
    r.zombies = Some(zombie_children());
    r
}

/// All of the above with the sizes (1 GiB, 1000, 1000).
pub fn bench_all() -> Vec<BenchReport> {
    vec![bench_capture(1 << 30), bench_true(1000), bench_leaks(1000)]
}
