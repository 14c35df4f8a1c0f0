//! Bounding of renders and tool text (docs/rules.md §17): at most 64 KiB,
//! cut on whole lines, with a `…(R more lines, fetch via URI)` marker; ANSI
//! escapes stripped for clients that are not terminals.

pub const MAX_TEXT: usize = 65_536;

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
