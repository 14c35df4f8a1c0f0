//! The language's waits (`sleep`, `retry`'s delay, `every`, a task's
//! `.await()`, a channel's `take` and `events`, `tail`, `watch`) end on an
//! interrupt that wakes them, and do not wake in between to look for one.

use crate::session::{ExecError, Position, Session, SessionOptions};
use shoal_value::{render, ErrorCode};

fn session() -> (tempfile::TempDir, Session) {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join("log"), "old\n").expect("log");
    let s = Session::new(SessionOptions {
        cwd: d.path().to_path_buf(),
        env: Vec::new(),
        ..Default::default()
    });
    (d, s)
}

/// Each wait, begun in a task, ends when the task is cancelled. The task
/// emits on `go` before it waits, and the cancel follows that event, so the
/// wait has (all but surely) begun: only the interrupt's hook can end it,
/// as none of these waits wakes on its own within the hour.
#[test]
fn a_cancelled_task_ends_its_wait() {
    let waits = [
        "sleep 1h",
        "retry(2, () => 1 / 0, delay: 1h)",
        "every(1h).take(1).collect()",
        "channel(\"never\").take()",
        "channel(\"never\").take(timeout: 1h)",
        "channel(\"never\").events().take(1).collect()",
        "let inner = spawn { channel(\"never\").take() }\ninner.await()",
        "tail(\"log\").take(1).collect()",
        "watch(\"log\").take(1).collect()",
        "watch(\".\").take(1).collect()",
    ];
    for wait in waits {
        want_in_time(
            wait,
            "!cancelled",
            &format!(
                "let go = channel(\"go\")\nlet t = spawn {{\ngo.emit(1)\n{wait}\n}}\n\
             go.events().take(1).collect()\nt.cancel()\nt.await()"
            ),
        );
    }
}

/// What is written after `tail` and `watch` begin wakes them: the writes
/// come from a task started after the stream.
#[test]
fn tail_and_watch_wake_on_writes() {
    for (src, want) in [
        (
            "let s = tail(\"log\")\nlet t = spawn { echo a >> log\necho b >> log }\ns.take(2).collect()",
            "[\"a\", \"b\"]",
        ),
        (
            "let s = tail(\"log\", from_start: true)\nlet t = spawn { echo a >> log }\ns.take(2).collect()",
            "[\"old\", \"a\"]",
        ),
        (
            "mkdir sub\nlet s = watch(\".\")\nlet t = spawn { echo x > sub/new.txt }\nlet e = s.take(1).collect()[0]\n[e.kind, e.path.name]",
            "[\"create\", \"new.txt\"]",
        ),
    ] {
        want_in_time(src, want, src);
    }
}

/// Run `src` in a fresh session and want `want` (an inline render, or
/// `!code`) within a watchdog's bound: a wait nothing wakes never ends.
fn want_in_time(what: &str, want: &str, src: &str) {
    let src = src.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (_d, mut s) = session();
        let r = s.exec(&src, Position::Stmt);
        let _ = tx.send(match r {
            Ok(v) => render::inline(&v),
            Err(ExecError::Raised(e)) => format!("!{}", e.code),
            Err(ExecError::Parse(e)) => format!("!parse {e:?}"),
        });
    });
    // A watchdog, not a timing claim.
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("`{what}` was never woken"));
    assert_eq!(got, want, "{what}");
}

/// A short wait, not interrupted, wakes once at its end (or twice, for a
/// spurious wake-up), not once per polling period.
#[test]
fn an_uninterrupted_wait_wakes_only_at_its_end() {
    for (src, want) in [
        ("sleep 200ms", None),
        ("every(200ms).take(1).collect().len()", None),
        (
            "retry(2, () => 1 / 0, delay: 200ms)",
            Some(ErrorCode::DivZero),
        ),
    ] {
        let (_d, mut s) = session();
        let intr = s.interrupter();
        let r = s.exec(src, Position::Stmt);
        match (want, r) {
            (None, Ok(_)) => {}
            (Some(code), Err(ExecError::Raised(e))) if e.code == code => {}
            (_, other) => panic!("{src}: {other:?}"),
        }
        let wakes = intr.wakes();
        assert!((1..=2).contains(&wakes), "{src}: woke {wakes} times");
    }
}
