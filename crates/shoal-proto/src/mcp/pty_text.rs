//! What a model reads of a `shoal_pty_*` result: the screen as the
//! terminal shows it (a line per row, blank rows at the bottom left out)
//! under one line of state, and a short sentence for the other tools. The
//! structured content keeps every member.

use std::borrow::Cow;
use std::fmt::Write as _;

use super::outputs::{PtyAnswer, PtyExit, PtyScreen};
use super::results::ToolOutput;

impl ToolOutput for PtyAnswer {
    fn text(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(match self {
            PtyAnswer::Opened(o) => format!(
                "{} opened: {} (pid {}), {}x{}; read its screen with shoal_pty_read",
                o.pty_id, o.cmd, o.pid, o.cols, o.rows
            ),
            PtyAnswer::Sent(s) => format!("sent {} bytes to {}", s.sent, s.pty_id),
            PtyAnswer::Screen(s) => screen_text(s),
            PtyAnswer::Resized(r) => format!("{} is {}x{} now", r.pty_id, r.cols, r.rows),
            PtyAnswer::Closed(c) => match &c.exit {
                Some(e) => format!("{} closed: its program {}", c.pty_id, ended(e)),
                None => format!("{} closed", c.pty_id),
            },
            PtyAnswer::List(l) if l.ptys.is_empty() => "no PTYs in this session".into(),
            PtyAnswer::List(l) => {
                let mut t = String::new();
                for p in &l.ptys {
                    let _ = write!(
                        t,
                        "{} · {} · {}x{} · {}",
                        p.pty_id,
                        p.cmd,
                        p.cols,
                        p.rows,
                        if p.alive { "running" } else { "ended" }
                    );
                    if let Some(h) = &p.taken_over {
                        let _ = write!(t, " · a human types ({}, {})", h.by, h.client);
                    }
                    t.push('\n');
                }
                t.pop();
                t
            }
        }))
    }
}

/// How a program ended, as a clause.
fn ended(e: &PtyExit) -> String {
    match (e.status, &e.signal) {
        (_, Some(sig)) => format!("was killed by {sig}"),
        (Some(s), None) => format!("exited with status {s}"),
        (None, None) => "ended".into(),
    }
}

/// One state line, then the screen's rows (the scrollback above them when
/// asked for), trailing blanks and blank bottom rows left out.
fn screen_text(s: &PtyScreen) -> String {
    let mut t = format!("{} · {} · {}x{} · ", s.pty_id, s.cmd, s.cols, s.rows);
    match (&s.exit, s.alive) {
        (Some(e), _) => t.push_str(&format!("its program {}", ended(e))),
        (None, true) => t.push_str(&format!("running (pid {})", s.pid)),
        (None, false) => t.push_str("ended"),
    }
    // `matched`: the wait asked for (`wait_for`, `stable_ms` or both) was met.
    match s.matched {
        Some(true) => t.push_str(" · the wait was met"),
        Some(false) => t.push_str(" · the wait was NOT met before the timeout"),
        None => {}
    }
    if !s.changed {
        t.push_str(" · unchanged since the last read");
    }
    if s.alternate_screen == Some(true) {
        t.push_str(" · full-screen program");
    }
    let _ = write!(
        t,
        " · cursor row {} col {}{}",
        s.cursor.row,
        s.cursor.col,
        if s.cursor.hidden { " (hidden)" } else { "" }
    );
    if let Some(back) = s.scrollback.as_ref().filter(|b| !b.is_empty()) {
        let _ = write!(t, "\n--- scrollback ({} lines) ---", back.len());
        for l in back {
            t.push('\n');
            t.push_str(l.trim_end());
        }
    }
    let rows: Vec<&str> = s.screen.iter().map(|l| l.trim_end()).collect();
    let shown = rows
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    t.push_str("\n--- screen ---");
    for l in &rows[..shown] {
        t.push('\n');
        t.push_str(l);
    }
    if shown == 0 {
        t.push_str("\n(blank)");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::outputs::{Cursor, PtyClosed, PtyOpened};

    fn screen(rows: &[&str]) -> PtyScreen {
        PtyScreen {
            pty_id: "pty:1".into(),
            cmd: "python3 -q".into(),
            cols: 80,
            rows: rows.len(),
            cursor: Cursor {
                row: 3,
                col: 4,
                hidden: false,
            },
            screen: rows.iter().map(|r| r.to_string()).collect(),
            changed: true,
            alive: true,
            exit: None,
            pid: 42,
            alternate_screen: None,
            matched: Some(true),
            scrollback: None,
        }
    }

    #[test]
    fn a_screen_reads_as_the_terminal_shows_it() {
        let s = screen(&[">>> print(6*7)   ", "42", "", ">>>", "", ""]);
        let t = PtyAnswer::Screen(Box::new(s)).text().unwrap().into_owned();
        assert_eq!(
            t,
            "pty:1 · python3 -q · 80x6 · running (pid 42) · the wait was met · \
             cursor row 3 col 4\n--- screen ---\n>>> print(6*7)\n42\n\n>>>"
        );
        let mut s = screen(&["", ""]);
        s.matched = Some(false);
        s.changed = false;
        s.alive = false;
        s.exit = Some(PtyExit {
            status: Some(0),
            signal: None,
        });
        s.scrollback = Some(vec!["old  ".into()]);
        let t = PtyAnswer::Screen(Box::new(s)).text().unwrap().into_owned();
        assert!(t.contains("its program exited with status 0"), "{t}");
        assert!(t.contains("the wait was NOT met"), "{t}");
        assert!(t.contains("unchanged since the last read"), "{t}");
        assert!(
            t.ends_with("--- scrollback (1 lines) ---\nold\n--- screen ---\n(blank)"),
            "{t}"
        );
    }

    #[test]
    fn the_other_tools_say_what_happened_in_a_line() {
        let o = PtyAnswer::Opened(PtyOpened {
            pty_id: "pty:2".into(),
            pid: 7,
            cmd: "vim a".into(),
            cols: 100,
            rows: 30,
            alive: true,
        });
        assert_eq!(
            o.text().unwrap(),
            "pty:2 opened: vim a (pid 7), 100x30; read its screen with shoal_pty_read"
        );
        let c = PtyAnswer::Closed(PtyClosed {
            pty_id: "pty:2".into(),
            closed: true,
            exit: Some(PtyExit {
                status: None,
                signal: Some("SIGKILL".into()),
            }),
        });
        assert_eq!(
            c.text().unwrap(),
            "pty:2 closed: its program was killed by SIGKILL"
        );
    }
}
