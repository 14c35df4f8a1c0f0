//! Memory as a user pays for it, of a real daemon, idle and per unit of what
//! clients make it hold (a session, an idle PTY, 10,000 transcript entries),
//! each the growth over N units divided by N, on a daemon of its own after a
//! warm-up unit (so one-time costs, like the first session's machinery, are
//! not charged to every unit). Three figures, from `/proc/PID/smaps_rollup`:
//!
//! - anonymous (`Anonymous`): the heap, malloc arenas, thread stacks and the
//!   binary's relocated data. Only swap can free it, so it is what the
//!   daemon costs the machine, and what the targets hold it to;
//! - USS (`Private_Clean + Private_Dirty`): that and the file pages only this
//!   process maps, mostly its binary's code. Those are page cache: the kernel
//!   drops them under pressure and reads them back when needed, and another
//!   process running the binary shares them (then they leave both USS);
//! - `Pss`.
//!
//! Include it as `#[path = "workloads/memory.rs"] mod memory;` beside
//! `workloads/daemon.rs` (as `mod daemon`).

// Each bench is its own crate and uses a part of this.
#![allow(dead_code)]

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::daemon::{BenchDaemon, BenchDir, Line};

/// The targets of anonymous memory, kB: idle, per session, per idle PTY.
pub const TARGET_IDLE_KB: u64 = 4 * 1024;
pub const TARGET_SESSION_KB: u64 = 1024;
pub const TARGET_PTY_KB: u64 = 300;

/// Units per figure: sessions, idle PTYs, execs.
pub const SESSIONS: usize = 20;
pub const PTYS: usize = 20;
pub const EXECS: usize = 10_000;

/// The fields of `/proc/PID/smaps_rollup` (or one mapping of `smaps`) that
/// the figures use, kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mem {
    pub rss: u64,
    pub pss: u64,
    pub private_clean: u64,
    pub private_dirty: u64,
    /// Anonymous memory (heap, thread stacks, malloc arenas).
    pub anonymous: u64,
}

/// A figure in kB: private memory (USS), its anonymous part (heap, stacks,
/// malloc arenas, relocated data: what the targets hold; the rest is file
/// pages only this process maps, the binary's code and read-only data), and
/// `Pss`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kb {
    pub uss: f64,
    pub anon: f64,
    pub pss: f64,
}

impl Mem {
    /// Unique set size: what the process alone holds.
    pub fn uss(&self) -> u64 {
        self.private_clean + self.private_dirty
    }

    pub fn kb(&self) -> Kb {
        Kb {
            uss: self.uss() as f64,
            anon: self.anonymous as f64,
            pss: self.pss as f64,
        }
    }

    fn add_field(&mut self, line: &str) {
        let mut it = line.split_whitespace();
        let (Some(key), Some(n)) = (it.next(), it.next().and_then(|n| n.parse::<u64>().ok()))
        else {
            return;
        };
        match key {
            "Rss:" => self.rss += n,
            "Pss:" => self.pss += n,
            "Private_Clean:" => self.private_clean += n,
            "Private_Dirty:" => self.private_dirty += n,
            "Anonymous:" => self.anonymous += n,
            _ => {}
        }
    }
}

/// `/proc/PID/smaps_rollup`.
pub fn rollup(pid: u32) -> Mem {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let mut m = Mem::default();
    for l in text.lines() {
        m.add_field(l);
    }
    m
}

/// The rollup once it stops moving: the same USS and anonymous memory (each
/// within 8 kB) three reads in a row, 100 ms apart, or the last read after
/// 5 s (the journal writer commits and the allocator settles in the
/// background after a burst).
pub fn settled(pid: u32) -> Mem {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = rollup(pid);
    let mut same = 0;
    while same < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let m = rollup(pid);
        if m.uss().abs_diff(last.uss()) <= 8 && m.anonymous.abs_diff(last.anonymous) <= 8 {
            same += 1;
        } else {
            same = 0;
        }
        last = m;
    }
    last
}

/// Where a process's memory is, from `/proc/PID/smaps`: the shoal binary's
/// own mappings (code and data pages), other files (shared libraries), the
/// main heap (`[heap]`, glibc's main arena), other anonymous mappings (the
/// other malloc arenas, thread stacks, large allocations) and the rest
/// (`[stack]`, `[vdso]`, ...).
#[derive(Clone, Copy, Debug, Default)]
pub struct Breakdown {
    pub binary: Mem,
    pub libs: Mem,
    pub heap: Mem,
    pub anon: Mem,
    pub anon_mappings: usize,
    pub other: Mem,
}

pub fn breakdown(pid: u32) -> Breakdown {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut b = Breakdown::default();
    let mut cur: Option<&mut Mem> = None;
    for l in text.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        // A mapping's header starts with its address range `lo-hi`.
        if first.contains('-') && !first.ends_with(':') {
            let path = l.split_whitespace().nth(5).unwrap_or("");
            cur = Some(if path.is_empty() {
                b.anon_mappings += 1;
                &mut b.anon
            } else if Path::new(path) == exe {
                &mut b.binary
            } else if path == "[heap]" {
                &mut b.heap
            } else if path.starts_with('/') {
                &mut b.libs
            } else {
                &mut b.other
            });
        } else if let Some(m) = cur.as_deref_mut() {
            m.add_field(l);
        }
    }
    b
}

impl fmt::Display for Breakdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, name: &str, m: &Mem| {
            writeln!(
                f,
                "    {name:<34} anon {:>6} kB  USS {:>7} kB  Pss {:>7} kB  Rss {:>7} kB",
                m.anonymous,
                m.uss(),
                m.pss,
                m.rss
            )
        };
        row(f, "shoal binary (code, data)", &self.binary)?;
        row(f, "shared libraries", &self.libs)?;
        row(f, "[heap] (main malloc arena)", &self.heap)?;
        row(
            f,
            &format!("anonymous ({} mappings)", self.anon_mappings),
            &self.anon,
        )?;
        row(f, "other ([stack], [vdso], ...)", &self.other)
    }
}

/// Other processes running `bin` (by `/proc/PID/exe`): they share its code
/// pages with a daemon of it, whose USS is then smaller than alone.
pub fn others_running(bin: &Path) -> usize {
    let Ok(bin) = std::fs::canonicalize(bin) else {
        return 0;
    };
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc").map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n != me)
            })
            .filter(|e| std::fs::read_link(e.path().join("exe")).is_ok_and(|p| p == bin))
            .count()
    })
}

/// The daemon's threads (`/proc/PID/task`).
pub fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// Growth per unit of `n` units.
fn per_unit(before: Mem, after: Mem, n: usize) -> Kb {
    let (b, a, n) = (before.kb(), after.kb(), n as f64);
    Kb {
        uss: (a.uss - b.uss) / n,
        anon: (a.anon - b.anon) / n,
        pss: (a.pss - b.pss) / n,
    }
}

/// Every memory figure of one binary.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub idle: Mem,
    pub idle_breakdown: Breakdown,
    pub idle_threads: usize,
    pub per_session: Kb,
    pub per_pty: Kb,
    /// Per `EXECS` transcript entries (not per entry): the first `EXECS`
    /// of a session, and the next.
    pub per_10k_entries: Kb,
    pub per_10k_more_entries: Kb,
    /// Where the memory is after them.
    pub entries_breakdown: Breakdown,
    /// Where the memory is after the sessions' figure, and its threads.
    pub sessions_breakdown: Breakdown,
    pub sessions_threads: usize,
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn ok(v: &Value, what: &str) {
    assert!(v.get("error").is_none(), "{what}: {v}");
}

/// A kernel connection attached to `session`.
fn attach(d: &BenchDaemon, session: &str) -> Line {
    let mut l = Line::open(&d.sock());
    ok(
        &l.call(&rpc(0, "session.attach", json!({"session": session}))),
        "session.attach",
    );
    l
}

/// Run `src` on `l` and check it answered.
fn exec(l: &mut Line, src: &str) {
    ok(&l.call(&rpc(1, "exec", json!({"src": src}))), src);
}

/// An exec that goes through the session's worker (a method call is never
/// answered on the quick lane), as any session an agent uses does.
const SESSION_EXEC: &str = "[1, 2, 3].len()";

fn start(bin: &Path) -> BenchDaemon {
    BenchDir::new("shm")
        .daemon()
        .bin(bin)
        .config(format!("[limits]\nmax_ptys_per_session = {}\n", PTYS + 10))
        .start()
}

/// The idle daemon: started, nothing asked of it.
pub fn idle(bin: &Path) -> (Mem, Breakdown, usize) {
    let d = start(bin);
    let m = settled(d.pid());
    (m, breakdown(d.pid()), threads(d.pid()))
}

/// `SESSIONS` sessions, each created by a connection of its own (kept open,
/// as a client keeps it) with one exec; after one such warm-up session.
pub fn per_session(bin: &Path) -> (Kb, Breakdown, usize) {
    let d = start(bin);
    let mut warm = attach(&d, "warm");
    exec(&mut warm, SESSION_EXEC);
    let before = settled(d.pid());
    let mut lines = Vec::new();
    for i in 0..SESSIONS {
        let mut l = attach(&d, &format!("s{i}"));
        exec(&mut l, SESSION_EXEC);
        lines.push(l);
    }
    let after = settled(d.pid());
    let r = (
        per_unit(before, after, SESSIONS),
        breakdown(d.pid()),
        threads(d.pid()),
    );
    drop(lines);
    r
}

/// `PTYS` idle 80x24 PTYs running `cat` in one session, after one warm-up
/// PTY; each read once, so its screen exists.
pub fn per_pty(bin: &Path) -> Kb {
    let d = start(bin);
    let mut l = attach(&d, "ptys");
    exec(&mut l, SESSION_EXEC);
    let open = |l: &mut Line| {
        let r = l.call(&rpc(
            2,
            "pty.open",
            json!({"cmd": "cat", "cols": 80, "rows": 24}),
        ));
        ok(&r, "pty.open");
        let id = r["result"]["pty_id"].clone();
        ok(
            &l.call(&rpc(3, "pty.read", json!({"pty_id": id}))),
            "pty.read",
        );
    };
    open(&mut l);
    let before = settled(d.pid());
    for _ in 0..PTYS {
        open(&mut l);
    }
    let after = settled(d.pid());
    per_unit(before, after, PTYS)
}

/// `EXECS` execs of `1 + 1` in one session (each a transcript entry and a
/// journal entry), after 500 warm-up execs, then `EXECS` more: the first
/// batch also fills bounded caches (the journal's redb page cache, the event
/// bus's rings of recent events), the second shows what keeps growing.
pub fn per_10k_entries(bin: &Path) -> (Kb, Kb, Breakdown) {
    let d = start(bin);
    let mut l = attach(&d, "transcript");
    let frame = {
        let mut b =
            serde_json::to_vec(&rpc(1, "exec", json!({"src": "1 + 1"}))).expect("an exec frame");
        b.push(b'\n');
        b
    };
    let mut reply = String::new();
    let mut run = |n: usize| {
        for _ in 0..n {
            l.call_raw(&frame, &mut reply);
        }
        assert!(reply.contains("\"result\""), "exec 1 + 1: {reply}");
    };
    run(500);
    let before = settled(d.pid());
    run(EXECS);
    let mid = settled(d.pid());
    run(EXECS);
    let after = settled(d.pid());
    (
        per_unit(before, mid, 1),
        per_unit(mid, after, 1),
        breakdown(d.pid()),
    )
}

/// Every figure of `bin`, one daemon after another (never two at once: two
/// daemons of one binary would share its code pages and each look smaller).
pub fn measure(bin: &Path) -> Figures {
    let (idle, idle_breakdown, idle_threads) = idle(bin);
    let (per_session, sessions_breakdown, sessions_threads) = per_session(bin);
    let per_pty = per_pty(bin);
    let (per_10k_entries, per_10k_more_entries, entries_breakdown) = per_10k_entries(bin);
    Figures {
        idle,
        idle_breakdown,
        idle_threads,
        per_session,
        sessions_breakdown,
        sessions_threads,
        per_pty,
        per_10k_entries,
        per_10k_more_entries,
        entries_breakdown,
    }
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub kb: Kb,
    /// The target of its anonymous memory, kB.
    pub target: Option<u64>,
    /// Run-to-run noise is small enough to mark a change of over 10%
    /// (the growth after the caches are full moves with malloc's heap steps).
    pub steady: bool,
}

/// The rows of the table.
pub fn rows(f: &Figures) -> Vec<Row> {
    let row = |name: String, kb: Kb, target: Option<u64>, steady: bool| Row {
        name,
        kb,
        target,
        steady,
    };
    vec![
        row(
            "idle daemon".into(),
            f.idle.kb(),
            Some(TARGET_IDLE_KB),
            true,
        ),
        row(
            format!("per session (of {SESSIONS}, one exec each)"),
            f.per_session,
            Some(TARGET_SESSION_KB),
            true,
        ),
        row(
            format!("per idle PTY (of {PTYS}, `cat`, 80x24)"),
            f.per_pty,
            Some(TARGET_PTY_KB),
            true,
        ),
        row(
            format!("per {EXECS} transcript entries, first"),
            f.per_10k_entries,
            None,
            true,
        ),
        row(
            format!("per {EXECS} transcript entries, next"),
            f.per_10k_more_entries,
            None,
            false,
        ),
    ]
}
