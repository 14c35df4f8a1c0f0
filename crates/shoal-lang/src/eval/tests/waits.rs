//! The language's waits (`sleep`, `retry`'s delay, `every`, a task's
//! `.await()`, a channel's `take` and `events`) end on an interrupt that
//! wakes them, and do not wake in between to look for one.

use crate::session::{ExecError, Position, Session, SessionOptions};
use shoal_value::{render, ErrorCode};

fn session() -> (tempfile::TempDir, Session) {
    let d = tempfile::tempdir().expect("tempdir");
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
    ];
    for wait in waits {
        let src = format!(
            "let go = channel(\"go\")\nlet t = spawn {{\ngo.emit(1)\n{wait}\n}}\n\
             go.events().take(1).collect()\nt.cancel()\nt.await()"
        );
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
        // A watchdog, not a timing claim: a wait its interrupt does not
        // wake never ends.
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("`{wait}` was not woken by its cancel"));
        assert_eq!(got, "!cancelled", "{wait}");
    }
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
