//! PTY memory is bounded, counted and freed (docs/protocol.md §8): a screen
//! has at most 250,000 cells, each PTY's bound is charged to its session's
//! `[limits] session_memory` while it is open, an open that does not fit is
//! refused with `-32040`, and closing gives the memory back to the OS. The
//! daemon's RSS is read from /proc.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// The largest screen allowed: 250,000 cells.
const COLS: u64 = 1000;
const ROWS: u64 = 250;
/// What one PTY of that size may hold at most (grids, renderings,
/// scrollback, buffers): the daemon charges about 21 MB for it.
const PER_PTY: u64 = 24 << 20;
const MIB: u64 = 1 << 20;

fn rss(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

fn err_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error: {r}"))
}

fn err_msg(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A program that fills the main screen and 1000+ lines of scrollback with
/// full-width lines, then the alternate screen, then prints the marker and
/// stays. `marker` (a unique argv word) names the test's processes.
fn filler(marker: &str) -> Value {
    let src = "import sys,time\n\
w=sys.stdout.write\n\
for i in range(1500): w('%06d' % i + 'x' * 990 + '\\n')\n\
w('\\x1b[?1049h')\n\
for i in range(260): w('%06d' % i + 'y' * 990 + '\\n')\n\
w('\\x1b[?1049l' + 'FILLED' + '-DONE\\n')\n\
sys.stdout.flush()\n\
time.sleep(600)\n";
    json!(["-c", src, marker])
}

#[test]
fn ptys_are_charged_refused_past_the_budget_and_freed_on_close() {
    let root = Root::new();
    let d = Daemon::with_config(
        &root,
        "[limits]\nsession_memory = 67108864\nmax_ptys_per_session = 64\n",
        &[],
    );
    let mut c = d.conn();
    c.attach("ptymem");
    let marker = format!("ptymem-fill-{}", std::process::id());
    let start = rss(d.pid());
    let mut ids = Vec::new();
    let mut refused = None;
    for _ in 0..8 {
        let r = c.call(
            "pty.open",
            json!({"cmd": "python3", "args": filler(&marker), "cols": COLS, "rows": ROWS}),
        );
        if r.get("error").is_some() {
            refused = Some(r);
            break;
        }
        let id = r["result"]["pty_id"].clone();
        let read = c.ok(
            "pty.read",
            json!({"pty_id": id, "wait_for": "FILLED-DONE", "timeout_ms": 120000, "scrollback": 2000}),
        );
        assert_eq!(read["matched"], json!(true), "{read}");
        let sb = read["scrollback"].as_array().expect("scrollback").len();
        assert!(sb > 900, "the scrollback filled: {sb} lines");
        ids.push(id);
        let now = rss(d.pid());
        let bound = start + ids.len() as u64 * PER_PTY + 64 * MIB;
        assert!(
            now < bound,
            "RSS {now} with {} full PTYs is over {bound} (start {start})",
            ids.len()
        );
    }
    // 64 MiB holds a few PTYs of the largest size, not eight.
    let r = refused.expect("an open past session_memory is refused");
    assert!(!ids.is_empty(), "at least one PTY fits: {r}");
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("session_memory"), "{r}");
    let msg = err_msg(&r);
    assert!(
        msg.contains("[limits] session_memory") && msg.contains("open PTY"),
        "{msg}"
    );
    let st = c.ok("daemon.status", json!({}));
    let row = st["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == json!("ptymem")))
        .cloned()
        .unwrap_or_else(|| panic!("no session row: {st}"));
    let held = row["pty_memory"]
        .as_u64()
        .unwrap_or_else(|| panic!("{row}"));
    assert!(held >= ids.len() as u64 * 16_000_000, "{row}");
    let sock = root.socket();
    let (code, text, _) = run(&root, &["status", "--socket", sock.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PTY MEM"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("ptymem "))
        .unwrap_or_default();
    assert!(line.contains(" MiB"), "{text}");

    let peak = rss(d.pid());
    for id in &ids {
        let closed = c.ok("pty.close", json!({"pty_id": id}));
        assert_eq!(closed["closed"], json!(true), "{closed}");
    }
    // The memory goes back to the OS (a bounded wait for the last frees).
    let back = start + 16 * MIB;
    eventually(
        "RSS back near the start after closing every PTY",
        Duration::from_secs(20),
        || (rss(d.pid()) < back).then_some(()),
    );
    eprintln!(
        "pty_memory: start {start}, peak {peak} with {} PTYs, after close {}",
        ids.len(),
        rss(d.pid())
    );
    let st = c.ok("daemon.status", json!({}));
    let row = st["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == json!("ptymem")))
        .cloned()
        .unwrap();
    assert_eq!(row["pty_memory"], json!(0), "{row}");
}

#[test]
fn oversized_screens_are_refused_and_a_closed_ptys_budget_is_usable_again() {
    let root = Root::new();
    let d = Daemon::with_config(&root, "[limits]\nsession_memory = 16777216\n", &[]);
    let mut c = d.conn();
    c.attach("ptysize");
    let sleeper =
        |cols: u64, rows: u64| json!({"cmd": "sleep", "args": ["600"], "cols": cols, "rows": rows});
    // More cells than any screen may have: -32602 naming the limit.
    let r = c.call("pty.open", sleeper(1000, 1000));
    assert_eq!(err_code(&r), -32602, "{r}");
    let msg = err_msg(&r);
    assert!(
        msg.contains("1000000 cells") && msg.contains("250000"),
        "{msg}"
    );
    assert_eq!(r["error"]["data"]["max_cells"], json!(250000), "{r}");

    // 500x250 (125,000 cells, ~12 MB) fits 16 MiB once, not twice.
    let a = c.ok("pty.open", sleeper(500, 250));
    let a_id = a["pty_id"].clone();
    // What the PTY holds is not there for evaluation: 4 MiB of string
    // (about twice that at the peak) fits 16 MiB alone, not beside the PTY.
    let grow = "var s = 'x'\nfor i in range(0, 22) { s = s + s }\ns.len()";
    let r = c.call("exec", json!({ "src": grow }));
    assert_eq!(err_code(&r), -32040, "{r}");
    let msg = err_msg(&r);
    assert!(
        msg.contains("session_memory") && msg.contains("PTYs hold"),
        "{msg}"
    );
    let r = c.call("pty.open", sleeper(500, 250));
    assert_eq!(err_code(&r), -32040, "{r}");
    assert_eq!(r["error"]["data"]["limit"], json!("session_memory"), "{r}");
    let msg = err_msg(&r);
    assert!(msg.contains("[limits] session_memory"), "{msg}");
    assert!(msg.contains("1 open PTY holds"), "{msg}");

    // A resize past the cell cap is -32602, one past the budget -32040; the
    // PTY keeps its size either way.
    let r = c.call(
        "pty.resize",
        json!({"pty_id": a_id, "cols": 1000, "rows": 1000}),
    );
    assert_eq!(err_code(&r), -32602, "{r}");
    let r = c.call(
        "pty.resize",
        json!({"pty_id": a_id, "cols": 1000, "rows": 250}),
    );
    assert_eq!(err_code(&r), -32040, "{r}");
    let read = c.ok("pty.read", json!({"pty_id": a_id}));
    assert_eq!(
        (read["cols"].clone(), read["rows"].clone()),
        (json!(500), json!(250))
    );
    // Shrinking always fits.
    let z = c.ok(
        "pty.resize",
        json!({"pty_id": a_id, "cols": 100, "rows": 40}),
    );
    assert_eq!(z, json!({"pty_id": a_id, "cols": 100, "rows": 40}));

    // Closing gives the budget back: the refused open fits now, again and again.
    c.ok("pty.close", json!({"pty_id": a_id}));
    for _ in 0..3 {
        let b = c.ok("pty.open", sleeper(500, 250));
        c.ok("pty.close", json!({"pty_id": b["pty_id"]}));
    }
    let r = c.ok("exec", json!({ "src": grow }));
    assert_eq!(r["value"], json!({"$": "int", "v": 1 << 22}), "{r}");
}

#[test]
fn an_ended_programs_screen_is_readable_until_close_then_freed() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("ptyexit");
    let marker = format!("ptymem-exit-{}", std::process::id());
    let start = rss(d.pid());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let mut args = filler(&marker);
        // The same output, then the program ends.
        let src = args[1].as_str().unwrap().replace("time.sleep(600)\n", "");
        args[1] = json!(src);
        let p = c.ok(
            "pty.open",
            json!({"cmd": "python3", "args": args, "cols": COLS, "rows": ROWS}),
        );
        ids.push(p["pty_id"].clone());
    }
    for id in &ids {
        // Its exit may be seen before the last of its output is (the
        // kernel hands the tail of a flood over later): wait for both.
        let r = eventually(
            "the program ends and its last output is on the screen",
            Duration::from_secs(120),
            || {
                let r = c.ok(
                    "pty.read",
                    json!({"pty_id": id, "wait_for": "FILLED-DONE", "timeout_ms": 1000, "scrollback": 5}),
                );
                (r["alive"] == json!(false) && r["matched"] == json!(true)).then_some(r)
            },
        );
        assert!(screen_has(&r, "FILLED-DONE"), "{r}");
        assert_eq!(r["scrollback"].as_array().map(Vec::len), Some(5), "{r}");
    }
    let peak = rss(d.pid());
    for id in &ids {
        c.ok("pty.close", json!({"pty_id": id}));
    }
    let back = start + 16 * MIB;
    eventually(
        "RSS back near the start after closing ended PTYs",
        Duration::from_secs(20),
        || (rss(d.pid()) < back).then_some(()),
    );
    eprintln!(
        "pty_memory (ended): start {start}, peak {peak}, after close {}",
        rss(d.pid())
    );
}

fn screen_has(r: &Value, text: &str) -> bool {
    r["screen"]
        .as_array()
        .is_some_and(|rows| rows.iter().any(|l| l.as_str().unwrap_or("").contains(text)))
}
