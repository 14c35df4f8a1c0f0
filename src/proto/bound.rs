//! Bounding of renders and tool text (reference-protocol §4.4): at most 64 KiB,
//! cut on whole lines, with a `…(R more lines, fetch via URI)` marker; ANSI
//! escapes stripped for clients that are not terminals.

pub const MAX_TEXT: usize = 65_536;
const KEEP: usize = MAX_TEXT - 96;

/// Bound `text` for a client; `tty` keeps ANSI escapes.
pub fn bound_render(text: &str, tty: bool, uri: Option<&str>) -> String {
    let text = if tty {
        text.to_string()
    } else {
        strip_ansi(text)
    };
    if text.len() <= MAX_TEXT {
        return text;
    }
    let total = text.lines().count();
    let mut out = String::new();
    let mut kept = 0;
    for line in text.lines() {
        if out.len() + line.len() + 1 > KEEP {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    if kept == 0 {
        out = text
            .chars()
            .scan(0usize, |n, c| {
                *n += c.len_utf8();
                (*n <= KEEP).then_some(c)
            })
            .collect();
        out.push('\n');
        kept = 1;
    }
    let target = uri.unwrap_or("ref");
    out.push_str(&format!(
        "…({} more lines, fetch via {target})",
        total.saturating_sub(kept)
    ));
    out
}

/// Remove CSI and OSC escape sequences.
pub fn strip_ansi(s: &str) -> String {
    if !s.contains('\x1b') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match it.peek() {
            Some('[') => {
                it.next();
                for c in it.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                it.next();
                while let Some(c) = it.next() {
                    if c == '\x07' {
                        break;
                    }
                    if c == '\x1b' && it.peek() == Some(&'\\') {
                        it.next();
                        break;
                    }
                }
            }
            Some(_) => {
                it.next();
            }
            None => {}
        }
    }
    out
}

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
}
