//! Bounding of renders and tool text (docs/rules.md §17): at most 64 KiB,
//! cut on whole lines, with a `…(R more lines, fetch via URI)` marker; ANSI
//! escapes stripped for clients that are not terminals. The text of a value
//! (an exec's render, `shoal_get`'s) is cut to head plus tail instead
//! ([`head_tail`]), its marker naming the `shoal_get` call for the lines cut.

pub const MAX_TEXT: usize = 65_536;

/// The default budget of a value's text (an exec's render, `shoal_get`'s):
/// about a third of it for the head, the rest for the tail.
pub const TEXT_BUDGET: usize = 12 << 10;

/// The text a value is shown as, stripped of ANSI escapes unless for a terminal.
pub fn text_for(render: &str, tty: bool) -> std::borrow::Cow<'_, str> {
    if tty || !render.contains('\x1b') {
        std::borrow::Cow::Borrowed(render)
    } else {
        std::borrow::Cow::Owned(strip_ansi(render))
    }
}

/// Where a text's lines can be fetched: the ref (`out:K`) and the path in it.
#[derive(Clone, Copy, Debug)]
pub struct LinesRef<'a> {
    pub reference: &'a str,
    pub path: Option<&'a str>,
}

impl LinesRef<'_> {
    /// The `shoal_get` arguments returning lines `a..=b` (compact JSON).
    pub fn call(&self, a: usize, b: usize) -> String {
        let mut m = serde_json::Map::new();
        m.insert("ref".into(), self.reference.into());
        if let Some(p) = self.path {
            m.insert("path".into(), p.into());
        }
        m.insert("lines".into(), serde_json::json!([a, b]));
        serde_json::Value::Object(m).to_string()
    }

    /// Room for the marker of any range of `n` lines, and its newline.
    fn reserve(&self, n: usize) -> usize {
        // "line N" → "lines N–N": "s", the dash and N again.
        self.footer(n, n, n).len() + 1 + 1 + '\u{2013}'.len_utf8() + n.to_string().len()
    }

    /// The marker line for lines `a..=b` of `n` left out.
    pub fn footer(&self, a: usize, b: usize, n: usize) -> String {
        let what = if a == b {
            format!("line {a}")
        } else {
            format!("lines {a}\u{2013}{b}")
        };
        format!(
            "\u{2026} {what} of {n} elided; shoal_get {}",
            self.call(a, b)
        )
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a char boundary.
fn cut_at(s: &str, max: usize) -> &str {
    let mut cut = max.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// `text` within `limit` bytes: whole as it is when it fits, else its first
/// lines (about a third of the budget), the marker line
/// `… lines A–B of N elided; shoal_get {"ref":"out:K","lines":[A,B]}`, then
/// its last lines (the rest of the budget). Lines are `str::lines`, numbered
/// from 1. A budget smaller than the marker gives the marker alone; a first
/// line longer than the head's share shows its start, cut on a char boundary
/// and ended with `…` (it still counts as elided).
pub fn head_tail(text: &str, limit: usize, at: LinesRef<'_>) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    // The marker's size with the widest numbers it can carry.
    let reserve = at.reserve(n);
    let avail = limit.saturating_sub(reserve);
    let head_share = avail / 3;
    let mut used = 0;
    let mut head = 0;
    while head < n && used + lines[head].len() < head_share {
        used += lines[head].len() + 1;
        head += 1;
    }
    let mut tail = 0;
    let mut tail_used = 0;
    while head + tail < n && used + tail_used + lines[n - 1 - tail].len() < avail {
        tail_used += lines[n - 1 - tail].len() + 1;
        tail += 1;
    }
    let mut out = String::with_capacity(limit);
    for l in &lines[..head] {
        out.push_str(l);
        out.push('\n');
    }
    if head == 0 && tail == 0 && head_share > 1 && n > 0 {
        // One long first line: its start, so the text is not the marker only.
        out.push_str(cut_at(lines[0], head_share.saturating_sub(4)));
        out.push_str("\u{2026}\n");
    }
    let (a, b) = (head + 1, n - tail);
    if a <= b {
        out.push_str(&at.footer(a, b, n));
    }
    for l in &lines[n - tail..] {
        out.push('\n');
        out.push_str(l);
    }
    out
}

/// Lines `a..=b` (1-based) of `text` within `limit` bytes: whole lines from
/// `a` while they fit, then the marker naming the call for the rest. The
/// range is clamped to the text; `Err` when `a` is past its end. A first
/// line longer than the budget is cut on a char boundary, with a note.
/// `(text, last line returned, number of lines)`.
pub fn lines_of(
    text: &str,
    a: usize,
    b: usize,
    limit: usize,
    at: LinesRef<'_>,
) -> Result<(String, usize, usize), String> {
    let n = text.lines().count();
    if a == 0 || b < a {
        return Err(format!(
            "lines must be [a, b] with 1 <= a <= b (got [{a}, {b}])"
        ));
    }
    if a > n {
        return Err(format!("lines [{a}, {b}]: the text has {n} lines"));
    }
    let b = b.min(n);
    let reserve = at.reserve(n);
    let mut out = String::new();
    let mut last = a - 1;
    for (i, l) in text.lines().enumerate().skip(a - 1).take(b + 1 - a) {
        let room = if i + 1 == b {
            limit
        } else {
            limit.saturating_sub(reserve)
        };
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + l.len() > room {
            if out.is_empty() {
                let keep = cut_at(l, limit.saturating_sub(reserve + 64));
                out = format!(
                    "{keep}\u{2026}\n\u{2026} line {} is {} bytes; cut to its first {}",
                    i + 1,
                    l.len(),
                    keep.len()
                );
                last = i + 1;
                if last < b {
                    out.push('\n');
                    out.push_str(&at.footer(last + 1, b, n));
                }
                return Ok((out, last, n));
            }
            break;
        }
        if sep == 1 {
            out.push('\n');
        }
        out.push_str(l);
        last = i + 1;
    }
    if last < b {
        out.push('\n');
        out.push_str(&at.footer(last + 1, b, n));
    }
    Ok((out, last, n))
}

/// Bound `text` for a client; `tty` keeps ANSI escapes.
pub fn bound_render(text: &str, tty: bool, uri: Option<&str>) -> String {
    let text = if tty {
        text.to_string()
    } else {
        strip_ansi(text)
    };
    bound_text(&text, MAX_TEXT, uri)
}

/// Bound `text` to at most `limit` bytes (clamped to 96..=64 KiB): whole
/// leading lines, then `…(R more lines, fetch via <uri>)` (`ref` when no URI
/// is known). A first line longer than the budget is hard-cut on a char
/// boundary.
pub fn bound_text(text: &str, limit: usize, uri: Option<&str>) -> String {
    let limit = limit.clamp(96, MAX_TEXT);
    if text.len() <= limit {
        return text.to_string();
    }
    let target = uri.unwrap_or("ref");
    // Room for the marker: "…(" + digits + " more lines, fetch via " + target + ")".
    let reserve = (96).max(target.len() + 48);
    let keep = limit.saturating_sub(reserve).max(1);
    let total = text.lines().count();
    let mut out = String::new();
    let mut kept = 0;
    for line in text.lines() {
        if out.len() + line.len() + 1 > keep {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    if kept == 0 {
        let mut cut = keep.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&text[..cut]);
        out.push('\n');
        kept = 1;
    }
    out.push_str(&format!(
        "…({} more lines, fetch via {target})",
        total.saturating_sub(kept)
    ));
    out
}

pub use shoal_term::ansi::strip_ansi;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_and_bounds() {
        assert_eq!(strip_ansi("\x1b[31mred\x1b[0m \x1b]0;t\x07x"), "red x");
        assert_eq!(
            bound_render("\x1b[1mb\x1b[0m", true, None),
            "\x1b[1mb\x1b[0m"
        );
        let big: String = (0..5000)
            .map(|i| format!("line {i:05} ........\n"))
            .collect();
        let b = bound_render(&big, false, Some("shoal://out/9"));
        assert!(b.len() <= MAX_TEXT);
        assert!(
            b.ends_with("more lines, fetch via shoal://out/9)"),
            "{}",
            &b[b.len() - 60..]
        );
        let one = "x".repeat(200_000);
        let b = bound_render(&one, false, None);
        assert!(b.len() <= MAX_TEXT && b.ends_with("…(0 more lines, fetch via ref)"));
    }
    const AT: LinesRef<'static> = LinesRef {
        reference: "out:7",
        path: None,
    };

    fn numbered(n: usize) -> (String, Vec<String>) {
        let lines: Vec<String> = (1..=n).map(|i| format!("line {i:05}")).collect();
        (lines.join("\n"), lines)
    }

    /// The marker line's numbers and `shoal_get` arguments.
    fn marker(t: &str) -> (usize, usize, usize, serde_json::Value) {
        let l = t
            .lines()
            .find(|l| l.starts_with('\u{2026}'))
            .expect("marker");
        let rest = l.strip_prefix("\u{2026} lines ").expect("lines");
        let (range, rest) = rest.split_once(" of ").unwrap();
        let (a, b) = range.split_once('\u{2013}').unwrap();
        let (n, call) = rest.split_once(" elided; shoal_get ").unwrap();
        let call = serde_json::from_str(call).unwrap();
        (
            a.parse().unwrap(),
            b.parse().unwrap(),
            n.parse().unwrap(),
            call,
        )
    }

    #[test]
    fn head_plus_tail_within_the_budget() {
        let (text, lines) = numbered(5000);
        assert_eq!(head_tail("short\ntext", TEXT_BUDGET, AT), "short\ntext");
        for limit in [TEXT_BUDGET, 2000, 600, 200] {
            let t = head_tail(&text, limit, AT);
            assert!(t.len() <= limit, "{limit}: {}", t.len());
            let (a, b, n, call) = marker(&t);
            assert_eq!(n, 5000);
            assert_eq!(call, serde_json::json!({"ref": "out:7", "lines": [a, b]}));
            let got: Vec<&str> = t.lines().collect();
            let head = a - 1;
            let tail = 5000 - b;
            assert_eq!(got.len(), head + 1 + tail, "{t}");
            assert_eq!(got[..head], lines[..head]);
            assert_eq!(got[head + 1..], lines[b..]);
            if limit >= 600 {
                assert!(head > 0 && tail > head, "{limit}: head {head}, tail {tail}");
            }
        }
        // The default: about 4 KiB of head, 8 KiB of tail.
        let t = head_tail(&text, TEXT_BUDGET, AT);
        let (a, b, _, _) = marker(&t);
        let head_bytes = (a - 1) * 11;
        let tail_bytes = (5000 - b) * 11;
        assert!((3500..=4200).contains(&head_bytes), "{head_bytes}");
        assert!((7500..=8300).contains(&tail_bytes), "{tail_bytes}");
        // Smaller than the marker: the marker alone.
        let t = head_tail(&text, 10, AT);
        assert_eq!(
            t,
            "\u{2026} lines 1\u{2013}5000 of 5000 elided; shoal_get {\"ref\":\"out:7\",\"lines\":[1,5000]}"
        );
        // A path is named in the call.
        let at = LinesRef {
            reference: "out:7",
            path: Some("out"),
        };
        let (_, _, _, call) = marker(&head_tail(&text, 2000, at));
        assert_eq!(call["path"], serde_json::json!("out"));
        // One long line: its start, cut on a char boundary.
        let long = "é".repeat(20_000);
        let t = head_tail(&long, 3000, AT);
        assert!(t.len() <= 3000 && t.starts_with("éé"), "{}", t.len());
        assert!(
            t.ends_with("of 1 elided; shoal_get {\"ref\":\"out:7\",\"lines\":[1,1]}"),
            "{t}"
        );
    }

    #[test]
    fn lines_are_exact_and_page() {
        let (text, lines) = numbered(5000);
        let (t, last, n) = lines_of(&text, 10, 12, MAX_TEXT, AT).unwrap();
        assert_eq!(
            (t.as_str(), last, n),
            ("line 00010\nline 00011\nline 00012", 12, 5000)
        );
        let (t, last, _) = lines_of(&text, 4999, 9999, MAX_TEXT, AT).unwrap();
        assert_eq!((t.as_str(), last), ("line 04999\nline 05000", 5000));
        assert!(lines_of(&text, 5001, 5001, MAX_TEXT, AT)
            .unwrap_err()
            .contains("has 5000 lines"));
        assert!(lines_of(&text, 0, 3, MAX_TEXT, AT).is_err());
        assert!(lines_of(&text, 5, 3, MAX_TEXT, AT).is_err());
        // Past the budget: whole lines from a, then the marker for the rest;
        // following the markers gives every line once.
        let mut got: Vec<String> = Vec::new();
        let (mut a, b) = (1, 5000);
        loop {
            let (t, last, _) = lines_of(&text, a, b, 1000, AT).unwrap();
            assert!(t.len() <= 1000, "{}", t.len());
            let body: Vec<&str> = t.lines().filter(|l| !l.starts_with('\u{2026}')).collect();
            got.extend(body.iter().map(|s| s.to_string()));
            assert_eq!(last, a - 1 + body.len());
            if last == b {
                break;
            }
            let (na, nb, _, call) = marker(&t);
            assert_eq!((na, nb), (last + 1, b));
            assert_eq!(call["lines"], serde_json::json!([na, nb]));
            a = na;
        }
        assert_eq!(got, lines);
        // A line longer than the budget is cut, and says so.
        let long = format!("{}\nnext", "x".repeat(5000));
        let (t, last, _) = lines_of(&long, 1, 2, 1000, AT).unwrap();
        assert!(t.len() <= 1000 && t.contains("line 1 is 5000 bytes"), "{t}");
        assert_eq!(last, 1);
        assert!(
            t.ends_with("shoal_get {\"ref\":\"out:7\",\"lines\":[2,2]}"),
            "{t}"
        );
    }
}
