//! `pty.send` input (docs/rules.md §22): the named-key table and the
//! recursive input encoding (strings, `{key}`, `{text}`, `{bytes}`, arrays).

use base64::Engine;
use serde_json::Value as Json;

/// Bytes one `pty.send` may carry at most.
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Nesting depth of input arrays at most.
const MAX_DEPTH: usize = 32;

/// The bytes of a named key; `None` for an unknown name. Names are
/// case-insensitive except the control prefix, which is exactly `Ctrl-`,
/// `ctrl-` or `C-`.
pub fn named_key(name: &str) -> Option<Vec<u8>> {
    for prefix in ["Ctrl-", "ctrl-", "C-"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return ctrl_key(rest).map(|b| vec![b]);
        }
    }
    let lower = name.to_ascii_lowercase();
    let bytes: &[u8] = match lower.as_str() {
        "enter" | "return" | "cr" => b"\r",
        "newline" | "lf" => b"\n",
        "tab" => b"\t",
        "backtab" | "shift-tab" => b"\x1b[Z",
        "escape" | "esc" => b"\x1b",
        "backspace" | "bs" => b"\x7f",
        "delete" | "del" => b"\x1b[3~",
        "insert" | "ins" => b"\x1b[2~",
        "space" => b" ",
        "up" => b"\x1b[A",
        "down" => b"\x1b[B",
        "right" => b"\x1b[C",
        "left" => b"\x1b[D",
        "home" => b"\x1b[H",
        "end" => b"\x1b[F",
        "pageup" | "pgup" => b"\x1b[5~",
        "pagedown" | "pgdn" => b"\x1b[6~",
        "f1" => b"\x1bOP",
        "f2" => b"\x1bOQ",
        "f3" => b"\x1bOR",
        "f4" => b"\x1bOS",
        "f5" => b"\x1b[15~",
        "f6" => b"\x1b[17~",
        "f7" => b"\x1b[18~",
        "f8" => b"\x1b[19~",
        "f9" => b"\x1b[20~",
        "f10" => b"\x1b[21~",
        "f11" => b"\x1b[23~",
        "f12" => b"\x1b[24~",
        _ => return None,
    };
    Some(bytes.to_vec())
}

/// The byte after a control prefix: a letter (either case), `Space`, or one
/// of `@ [ \ ] ^ _ ?`.
fn ctrl_key(rest: &str) -> Option<u8> {
    if rest.eq_ignore_ascii_case("space") {
        return Some(0);
    }
    let mut chars = rest.chars();
    let c = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

/// Why an input did not encode: the message and the offending element's
/// index path (top-level index first; empty for a non-array input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub message: String,
    pub path: Vec<usize>,
}

impl InputError {
    /// The top-level element index, when the input was an array.
    pub fn index(&self) -> Option<usize> {
        self.path.first().copied()
    }
}

/// Encode `pty.send` input into bytes, in order.
pub fn encode_input(input: &Json) -> Result<Vec<u8>, InputError> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    encode_into(input, &mut out, &mut path)?;
    Ok(out)
}

fn encode_into(v: &Json, out: &mut Vec<u8>, path: &mut Vec<usize>) -> Result<(), InputError> {
    let fail = |path: &Vec<usize>, message: String| InputError {
        message,
        path: path.clone(),
    };
    match v {
        Json::String(s) => out.extend_from_slice(s.as_bytes()),
        Json::Object(o) => {
            if let Some(k) = o.get("key") {
                let Some(name) = k.as_str() else {
                    return Err(fail(path, "pty.send key must be a string".into()));
                };
                match named_key(name) {
                    Some(b) => out.extend_from_slice(&b),
                    None => return Err(fail(path, format!("unknown key name {name:?}"))),
                }
            } else if let Some(t) = o.get("text").and_then(Json::as_str) {
                out.extend_from_slice(t.as_bytes());
            } else if let Some(b) = o.get("bytes").and_then(Json::as_str) {
                match base64::engine::general_purpose::STANDARD.decode(b) {
                    Ok(bytes) => out.extend_from_slice(&bytes),
                    Err(e) => return Err(fail(path, format!("invalid base64 in bytes: {e}"))),
                }
            } else {
                return Err(fail(
                    path,
                    "pty.send input object must have one of `key`, `text`, or `bytes`".into(),
                ));
            }
        }
        Json::Array(items) => {
            if path.len() >= MAX_DEPTH {
                return Err(fail(path, "pty.send input is nested too deeply".into()));
            }
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                encode_into(item, out, path)?;
                path.pop();
            }
        }
        other => {
            let kind = match other {
                Json::Null => "null",
                Json::Bool(_) => "a boolean",
                _ => "a number",
            };
            return Err(fail(
                path,
                format!(
                    "pty.send input must be a string, an object with key/text/bytes, or an array (got {kind})"
                ),
            ));
        }
    }
    if out.len() > MAX_INPUT_BYTES {
        return Err(fail(
            path,
            format!("pty.send input is over {MAX_INPUT_BYTES} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_keys_and_case_rules() {
        let cases: &[(&str, &[u8])] = &[
            ("Enter", b"\r"),
            ("return", b"\r"),
            ("CR", b"\r"),
            ("Newline", b"\n"),
            ("lf", b"\n"),
            ("Escape", b"\x1b"),
            ("ESC", b"\x1b"),
            ("Tab", b"\t"),
            ("BackTab", b"\x1b[Z"),
            ("Shift-Tab", b"\x1b[Z"),
            ("Backspace", b"\x7f"),
            ("bs", b"\x7f"),
            ("Delete", b"\x1b[3~"),
            ("Del", b"\x1b[3~"),
            ("Insert", b"\x1b[2~"),
            ("Space", b" "),
            ("Up", b"\x1b[A"),
            ("DOWN", b"\x1b[B"),
            ("Right", b"\x1b[C"),
            ("left", b"\x1b[D"),
            ("Home", b"\x1b[H"),
            ("End", b"\x1b[F"),
            ("PageUp", b"\x1b[5~"),
            ("PgUp", b"\x1b[5~"),
            ("PageDown", b"\x1b[6~"),
            ("pgdn", b"\x1b[6~"),
            ("F1", b"\x1bOP"),
            ("F4", b"\x1bOS"),
            ("f5", b"\x1b[15~"),
            ("F10", b"\x1b[21~"),
            ("F11", b"\x1b[23~"),
            ("F12", b"\x1b[24~"),
            ("Ctrl-C", b"\x03"),
            ("ctrl-a", b"\x01"),
            ("C-d", b"\x04"),
            ("Ctrl-Z", b"\x1a"),
            ("Ctrl-[", b"\x1b"),
            ("Ctrl-\\", b"\x1c"),
            ("Ctrl-]", b"\x1d"),
            ("Ctrl-^", b"\x1e"),
            ("Ctrl-_", b"\x1f"),
            ("Ctrl-?", b"\x7f"),
            ("Ctrl-@", b"\x00"),
            ("Ctrl-Space", b"\x00"),
            ("Ctrl-space", b"\x00"),
        ];
        for (name, bytes) in cases {
            assert_eq!(named_key(name).as_deref(), Some(*bytes), "{name}");
        }
        for bad in ["Nope", "CTRL-C", "Ctrl-", "Ctrl-CC", "Ctrl-1", "F13", ""] {
            assert_eq!(named_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn input_forms_concatenate() {
        let e = |v: Json| encode_input(&v);
        assert_eq!(e(json!("héllo")).unwrap(), "héllo".as_bytes());
        assert_eq!(e(json!({"key": "Enter"})).unwrap(), b"\r");
        assert_eq!(e(json!({"text": "abc"})).unwrap(), b"abc");
        assert_eq!(e(json!({"bytes": "aGVsbG8="})).unwrap(), b"hello");
        assert_eq!(
            e(json!(["i", "hello", {"key": "Escape"}, ":wq", {"key": "Enter"}])).unwrap(),
            b"ihello\x1b:wq\r"
        );
        // Precedence: key > text > bytes.
        assert_eq!(e(json!({"text": "t", "key": "Tab"})).unwrap(), b"\t");
        assert_eq!(e(json!({"bytes": "eA==", "text": "t"})).unwrap(), b"t");
        assert_eq!(e(json!([])).unwrap(), b"");
    }

    #[test]
    fn bad_input_names_the_element() {
        let err = encode_input(&json!(["ok", {"key": "Nope"}])).unwrap_err();
        assert_eq!(err.index(), Some(1));
        assert!(err.message.contains("Nope"), "{}", err.message);
        let err = encode_input(&json!(["a", "b", {"other": 1}])).unwrap_err();
        assert_eq!(err.path, vec![2]);
        assert!(err.message.contains("`key`, `text`, or `bytes`"));
        let err = encode_input(&json!(["a", ["b", 5]])).unwrap_err();
        assert_eq!(err.path, vec![1, 1]);
        assert_eq!(err.index(), Some(1));
        let err = encode_input(&json!(5)).unwrap_err();
        assert_eq!(err.index(), None);
        assert!(encode_input(&json!(null)).is_err());
        assert!(encode_input(&json!(true)).is_err());
        assert!(encode_input(&json!({"bytes": "!!"})).is_err());
        assert!(encode_input(&json!({"key": 3})).is_err());
        let big = "x".repeat(MAX_INPUT_BYTES + 1);
        assert!(encode_input(&json!(big)).is_err());
    }
}
