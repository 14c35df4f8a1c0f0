//! ANSI escape sequences removed from text: the one stripper, used where
//! text goes to a client that is not a terminal (shoal-proto's bounding)
//! and beside the emulator. Pure string work; never parses a screen.

/// Remove CSI and OSC escape sequences (and any other two-byte `ESC x`).
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
    use super::strip_ansi;

    #[test]
    fn strips_csi_osc_and_two_byte_escapes() {
        assert_eq!(strip_ansi("\x1b[31mred\x1b[0m \x1b]0;t\x07x"), "red x");
        assert_eq!(strip_ansi("\x1b]8;;u\x1b\\link\x1b]8;;\x1b\\"), "link");
        assert_eq!(strip_ansi("a\x1b=b\x1b"), "ab");
        assert_eq!(strip_ansi("plain"), "plain");
    }
}
