//! The text shown for a value (docs/rules.md §12): an outcome that is not ok
//! says so in its first line (`exit status N`, `killed by signal SIG`), then
//! the block render, then a bounded `--- stderr ---` section when the command
//! wrote to stderr (ok or not), then a note when table cells were cut. This is
//! exec's `render`: the MCP text and what `shoal exec` prints.

use std::io::Read;

use super::output::OutputBytes;
use super::render::{self, Layout};
use super::{Outcome, Value};

/// Lines of stderr shown at most (the last ones).
pub const STDERR_LINES: usize = 20;
/// Bytes of stderr shown at most (the last ones).
pub const STDERR_BYTES: usize = 2048;

/// The parts of a value's text: a status line, the render, what follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shown {
    /// `exit status N` / `killed by signal SIG` for an outcome that is not ok.
    pub status: Option<String>,
    /// The block render.
    pub body: String,
    /// The stderr section (header line included), when stderr is not empty.
    pub stderr: Option<String>,
    /// The captured output was cut at the spill limit.
    pub truncated: bool,
    /// A table or record cell was cut at the layout's cell cap.
    pub cells_cut: bool,
}

/// The text shown for `v` laid out by `layout` (lists and tables at most
/// `max_items` long).
pub fn shown(v: &Value, layout: Layout, max_items: usize) -> Shown {
    let b = render::block_limited_in(v, layout, max_items);
    let mut s = Shown {
        body: b.text,
        cells_cut: b.cells_cut,
        ..Shown::default()
    };
    if let Some(o) = last_outcome(v) {
        s.status = status_line(o);
        s.stderr = stderr_section(&o.stderr);
        s.truncated = o.truncated;
    }
    s
}

/// The outcome whose status a value shows: the innermost of a chain of ok
/// outcomes wrapping outcomes (as the block render walks it).
fn last_outcome(v: &Value) -> Option<&Outcome> {
    let Value::Outcome(o) = v else {
        return None;
    };
    let mut o: &Outcome = o;
    while o.ok {
        match &o.out {
            Some(Value::Outcome(inner)) => o = inner,
            _ => break,
        }
    }
    Some(o)
}

/// `exit status N` or `killed by signal SIG` for an outcome that is not ok.
pub fn status_line(o: &Outcome) -> Option<String> {
    if o.ok {
        return None;
    }
    Some(match (&o.signal, o.status) {
        (Some(sig), _) => format!("killed by signal {sig}"),
        (None, Some(n)) => format!("exit status {n}"),
        (None, None) => "exit status unknown".to_string(),
    })
}

/// At most [`STDERR_LINES`] lines and [`STDERR_BYTES`] bytes of `stderr`
/// under `--- stderr ---`; `None` when it is empty. When it is longer, its
/// first lines (where a usage error or the first compiler error is) and its
/// last ones (where a traceback ends), a line between them saying how many
/// were left out: `--- stderr (first H and last K of N lines) ---`. A
/// spilled stream is read through, never loaded whole.
pub fn stderr_section(stderr: &OutputBytes) -> Option<String> {
    if stderr.is_empty() {
        return None;
    }
    let (tail, total) = tail_of(stderr);
    let text = String::from_utf8_lossy(&tail);
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.len() > STDERR_LINES {
        lines.drain(..lines.len() - STDERR_LINES);
    }
    let (kept, partial) = last_lines(&lines, STDERR_LINES, STDERR_BYTES);
    if kept.len() == total && !partial {
        return Some(format!("--- stderr ---\n{}", kept.join("\n")));
    }
    // Cut: room for its first lines, then the last ones in what is left.
    let head = if total > 1 {
        first_lines(stderr)
    } else {
        Vec::new()
    };
    let room = STDERR_BYTES.saturating_sub(head.iter().map(|l| l.len() + 1).sum());
    let (kept, _) = last_lines(&lines, STDERR_LINES - head.len(), room);
    let head: Vec<String> = head
        .into_iter()
        .take(total.saturating_sub(kept.len()))
        .collect();
    let left_out = total.saturating_sub(kept.len() + head.len());
    let header = if head.is_empty() {
        format!("--- stderr (last {} of {total} lines) ---", kept.len())
    } else {
        format!(
            "--- stderr (first {} and last {} of {total} lines) ---",
            head.len(),
            kept.len()
        )
    };
    let mut out = vec![header];
    out.extend(head);
    if left_out > 0 {
        out.push(format!("\u{2026} ({left_out} lines left out) \u{2026}"));
    }
    out.extend(kept);
    Some(out.join("\n"))
}

/// Lines a cut stderr section shows of its beginning, and the bytes of
/// each at most.
const HEAD_LINES: usize = 3;
const HEAD_LINE_BYTES: usize = 200;

/// The first [`HEAD_LINES`] lines of `stderr`, each cut to
/// [`HEAD_LINE_BYTES`] (read from its first bytes only).
fn first_lines(stderr: &OutputBytes) -> Vec<String> {
    let head = stderr.head(HEAD_LINES * (HEAD_LINE_BYTES + 1) * 4);
    let text = String::from_utf8_lossy(&head);
    text.split('\n')
        .take(HEAD_LINES)
        .map(|l| {
            if l.len() <= HEAD_LINE_BYTES {
                return l.to_string();
            }
            let mut end = HEAD_LINE_BYTES;
            while !l.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}\u{2026}", &l[..end])
        })
        .collect()
}

/// Whole lines from the end of `lines` while they fit in `max` lines and
/// `bytes`; a last line longer than the budget keeps its end (then `true`).
fn last_lines(lines: &[&str], max: usize, bytes: usize) -> (Vec<String>, bool) {
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    let mut partial = false;
    for line in lines.iter().rev().take(max) {
        if used + line.len() < bytes {
            used += line.len() + 1;
            kept.push(line.to_string());
            continue;
        }
        if kept.is_empty() && bytes > 4 {
            let mut start = line.len().saturating_sub(bytes - 4);
            while !line.is_char_boundary(start) {
                start += 1;
            }
            kept.push(format!("\u{2026}{}", &line[start..]));
            partial = true;
        }
        break;
    }
    kept.reverse();
    (kept, partial)
}

/// The last bytes of `out` (enough for the section) and its line count (a
/// final line without a newline counts).
fn tail_of(out: &OutputBytes) -> (Vec<u8>, usize) {
    const KEEP: usize = 2 * STDERR_BYTES + 4096;
    let mut r = out.reader();
    let mut buf = vec![0u8; 64 << 10];
    let mut tail: Vec<u8> = Vec::new();
    let mut newlines = 0;
    let mut last = b'\n';
    loop {
        let got = match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..got];
        newlines += chunk.iter().filter(|b| **b == b'\n').count();
        last = chunk[got - 1];
        tail.extend_from_slice(chunk);
        if tail.len() > 2 * KEEP {
            tail.drain(..tail.len() - KEEP);
        }
    }
    if tail.len() > KEEP {
        tail.drain(..tail.len() - KEEP);
    }
    let total = newlines + usize::from(last != b'\n');
    (tail, total)
}

impl Shown {
    /// The note closing a text whose cells were cut, naming where the value is.
    pub fn cut_note(reference: &str) -> String {
        format!(
            "cells over {} characters cut; shoal_get {reference} for all",
            render::TEXT_CELL_CAP
        )
    }

    /// The lines after the body: the stderr section and the notes.
    fn after(&self, reference: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.cells_cut {
            out.push(Self::cut_note(reference));
        }
        if self.truncated {
            out.push("output cut at the session's spill limit ([limits] spill_bytes)".into());
        }
        out.extend(self.stderr.iter().cloned());
        out
    }

    /// The whole text (`reference` is the value's `out:N`).
    pub fn text(&self, reference: &str) -> String {
        self.text_with(reference, |b| b.to_string())
    }

    /// The text with the body passed through `bound`, which is given the
    /// bytes the rest leaves of `limit` (status line and stderr are never cut
    /// by it).
    pub fn bounded(
        &self,
        reference: &str,
        limit: usize,
        bound: impl Fn(&str, usize) -> String,
    ) -> String {
        let rest: usize = self.status.as_ref().map_or(0, |s| s.len() + 1)
            + self
                .after(reference)
                .iter()
                .map(|l| l.len() + 1)
                .sum::<usize>();
        let room = limit.saturating_sub(rest);
        self.text_with(reference, |b| bound(b, room))
    }

    fn text_with(&self, reference: &str, body: impl Fn(&str) -> String) -> String {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(self.status.iter().cloned());
        if !self.body.is_empty() {
            parts.push(body(&self.body));
        }
        parts.extend(self.after(reference));
        parts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Record;

    fn outcome(status: Option<i64>, signal: Option<&str>, stdout: &str, stderr: &str) -> Value {
        Value::Outcome(std::sync::Arc::new(Outcome {
            status,
            ok: status == Some(0),
            signal: signal.map(str::to_string),
            dur_ns: 0,
            pid: 1,
            cmd: "c".into(),
            stdout: OutputBytes::from(stdout),
            stderr: OutputBytes::from(stderr),
            out: None,
            span: None,
            truncated: false,
            typed: None,
        }))
    }

    fn text(v: &Value) -> String {
        shown(v, Layout::text(80), 2000).text("out:7")
    }

    #[test]
    fn failure_says_so_first() {
        let make = "make: *** No rule to make target 'x'.  Stop.\n";
        assert_eq!(
            text(&outcome(Some(2), None, "", make)),
            format!("exit status 2\n--- stderr ---\n{}", make.trim_end())
        );
        assert_eq!(text(&outcome(Some(1), None, "", "")), "exit status 1");
        assert_eq!(
            text(&outcome(None, Some("SIGKILL"), "partial\n", "")),
            "killed by signal SIGKILL\npartial"
        );
        assert_eq!(
            text(&outcome(Some(3), None, "a\nb\n", "w\n")),
            "exit status 3\na\nb\n--- stderr ---\nw"
        );
    }

    #[test]
    fn success_shows_stderr_after_output() {
        assert_eq!(
            text(&outcome(Some(0), None, "out\n", "warn\n")),
            "out\n--- stderr ---\nwarn"
        );
        assert_eq!(text(&outcome(Some(0), None, "out\n", "")), "out");
        assert_eq!(text(&Value::Int(42)), "42");
    }

    #[test]
    fn stderr_keeps_its_first_and_last_lines_within_its_bytes() {
        let many: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let t = text(&outcome(Some(1), None, "", &many));
        let last: Vec<String> = (34..=50).map(|i| format!("line {i}")).collect();
        assert_eq!(
            t,
            format!(
                "exit status 1\n--- stderr (first 3 and last 17 of 50 lines) ---\n\
                 line 1\nline 2\nline 3\n\u{2026} (30 lines left out) \u{2026}\n{}",
                last.join("\n")
            )
        );
        // Twenty lines fit whole; twenty-one do not.
        let twenty: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let t = text(&outcome(Some(1), None, "", &twenty));
        assert!(t.starts_with("exit status 1\n--- stderr ---\nl1\n"), "{t}");
        let t = text(&outcome(Some(1), None, "", &format!("{twenty}l21\n")));
        assert!(
            t.contains("(first 3 and last 17 of 21 lines)") && t.contains("(1 lines left out)"),
            "{t}"
        );
        // Long lines: at most 2 KiB; the first ones cut, whole lines from the end.
        let long: String = (0..10)
            .map(|i| format!("{i}{}\n", "x".repeat(500)))
            .collect();
        let t = text(&outcome(Some(1), None, "", &long));
        let section = t.split_once('\n').unwrap().1;
        assert!(
            section.starts_with("--- stderr (first 3 and last 2 of 10 lines) ---\n0x"),
            "{t}"
        );
        assert!(
            section.contains("\u{2026} (5 lines left out) \u{2026}\n8x"),
            "{t}"
        );
        assert!(section.len() <= STDERR_BYTES + 128, "{}", section.len());
        // One huge line keeps its end.
        let huge = format!("{}END", "é".repeat(3000));
        let t = text(&outcome(Some(0), None, "", &huge));
        assert!(
            t.starts_with("--- stderr (last 1 of 1 lines) ---\n\u{2026}"),
            "{t}"
        );
        assert!(
            t.ends_with("END") && t.len() <= STDERR_BYTES + 64,
            "{}",
            t.len()
        );
        // A usage error: its first line is shown.
        let usage = format!(
            "error: unknown option `--frob`\n{}",
            "  --opt  text\n".repeat(130)
        );
        let t = text(&outcome(Some(129), None, "", &usage));
        assert!(t.contains("---\nerror: unknown option `--frob`\n"), "{t}");
    }

    #[test]
    fn bounded_keeps_status_and_stderr() {
        let body: String = (0..1000).map(|i| format!("row {i}\n")).collect();
        let s = shown(
            &outcome(Some(1), None, &body, "boom\n"),
            Layout::text(80),
            10,
        );
        let t = s.bounded("out:1", 200, |b, room| b[..room.min(b.len())].to_string());
        assert!(t.starts_with("exit status 1\nrow 0\n"), "{t}");
        assert!(t.ends_with("\n--- stderr ---\nboom"), "{t}");
        assert!(t.len() <= 200, "{}", t.len());
    }

    #[test]
    fn cut_cells_say_where_the_rest_is() {
        let mut r = Record::new();
        r.insert(
            "hash".into(),
            Value::str("0123456789abcdef0123456789abcdef01234567"),
        );
        r.insert("subject".into(), Value::str("s".repeat(300)));
        let t = text(&Value::list(vec![Value::record(r)]));
        let row = t.lines().nth(2).unwrap();
        assert!(
            row.starts_with("0123456789abcdef0123456789abcdef01234567  "),
            "{t}"
        );
        assert!(
            row.ends_with(&format!("{}\u{2026}", "s".repeat(199))),
            "{t}"
        );
        assert!(t.ends_with("\ncells over 200 characters cut; shoal_get out:7 for all"));
    }

    fn row(path: &str, name: &str, note: &str) -> Value {
        let mut r = Record::new();
        r.insert("path".into(), Value::path(path));
        r.insert("name".into(), Value::str(name));
        r.insert("note".into(), Value::str(note));
        Value::record(r)
    }

    #[test]
    fn text_layout_has_no_width() {
        let long = "n".repeat(150);
        let t = Value::list(vec![row("/d/a", "a", &long), row("/d/bb", "bb", "x")]);
        // Text: whole cells, and `path` beside its `name` goes.
        let b = render::block_in(&t, Layout::text(80));
        assert!(!b.cells_cut);
        let lines: Vec<&str> = b.text.lines().collect();
        assert_eq!(lines[0], "name  note");
        assert_eq!(lines[2], format!("a     {long}"));
        assert_eq!(lines[3], "bb    x");
        // A terminal: shrunk to its width.
        let term = render::block(&t, 40);
        assert!(term.lines().all(|l| l.chars().count() <= 40), "{term}");
        assert!(term.contains('\u{2026}'), "{term}");
        // Paths in different directories are not redundant.
        let t = Value::list(vec![row("/d/a", "a", ""), row("/e/b", "b", "")]);
        assert!(render::block_in(&t, Layout::text(80))
            .text
            .starts_with("path  name"));
        // Records cap their values too; lists still wrap at the width.
        let mut r = Record::new();
        r.insert("k".into(), Value::str("z".repeat(250)));
        let b = render::block_in(&Value::record(r), Layout::text(80));
        assert!(b.cells_cut);
        assert_eq!(b.text, format!("k  {}\u{2026}", "z".repeat(199)));
        let words = Value::list((0..30).map(|i| Value::Int(i * 1000)).collect());
        assert_eq!(
            render::block_in(&words, Layout::text(80))
                .text
                .lines()
                .count(),
            30
        );
    }
}
