//! The unknown-method fall-through (§12.1): cross-type `type_error`, else
//! `field_missing` “unknown method `.m` on TYPE” with a did-you-mean hint.
use super::{coll, other, stream, text};
use crate::value::{ShoalError, Value};

const UNIVERSAL: &[&str] = &[
    "tap",
    "also",
    "json",
    "save",
    "append",
    "str",
    "display",
    "feed",
    "pick",
    "type_name",
];

/// Method names valid for this receiver (used for suggestions).
fn names_for(v: &Value) -> Vec<&'static str> {
    let mut n: Vec<&'static str> = UNIVERSAL.to_vec();
    match v {
        Value::List(_) | Value::Table(_) | Value::Range(_) => n.extend_from_slice(coll::NAMES),
        Value::Glob(_) => {
            n.extend_from_slice(coll::NAMES);
            n.extend_from_slice(&["pattern", "expand"]);
        }
        Value::Stream(_) => {
            n.extend_from_slice(coll::NAMES);
            n.extend_from_slice(stream::NAMES);
        }
        Value::Str(_) => n.extend_from_slice(text::NAMES),
        Value::Int(_) | Value::Float(_) => n.extend_from_slice(other::NUMBER_NAMES),
        Value::Record(_) => n.extend_from_slice(other::RECORD_NAMES),
        Value::Path(_) => n.extend_from_slice(other::PATH_NAMES),
        Value::Bytes(_) => n.extend_from_slice(other::BYTES_NAMES),
        Value::DateTime(_) => n.extend_from_slice(other::DATETIME_FIELDS),
        Value::Duration(_) => n.extend_from_slice(other::DURATION_NAMES),
        Value::Error(_) => n.extend_from_slice(other::ERROR_FIELDS),
        _ => {}
    }
    n
}

fn known_anywhere(name: &str) -> bool {
    coll::NAMES.contains(&name)
        || text::NAMES.contains(&name)
        || other::NUMBER_NAMES.contains(&name)
        || other::RECORD_NAMES.contains(&name)
        || other::PATH_NAMES.contains(&name)
        || other::BYTES_NAMES.contains(&name)
        || other::DURATION_NAMES.contains(&name)
        || stream::NAMES.contains(&name)
        || ["pattern", "expand"].contains(&name)
}

/// Levenshtein distance (chars).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn hint_for(v: &Value, name: &str) -> Option<String> {
    let names = names_for(v);
    if name == "length" || (name == "size" && !names.contains(&"size")) {
        return Some("did you mean .len()?".to_string());
    }
    if name == "read_str" || name == "read_string" || name == "read_text" {
        return Some("did you mean .read()?".to_string());
    }
    if let Some(x) = name.strip_prefix("to_") {
        if names.contains(&x) {
            return Some(format!("did you mean .{x}()?"));
        }
    }
    if matches!(v, Value::List(_)) && matches!(name, "push" | "append" | "add" | "insert") {
        return Some(
            "lists are immutable values: build a new one with `list + [item]`".to_string(),
        );
    }
    if matches!(v, Value::Str(_)) && matches!(name, "substring" | "substr" | "slice") {
        return Some(
            "slice strings with .take(n) / .skip(n), e.g. `s.skip(2).take(3)`".to_string(),
        );
    }
    let limit = if name.chars().count() < 5 { 1 } else { 2 };
    let mut best: Option<(usize, &str)> = None;
    for n in names {
        let d = edit_distance(name, n);
        if d <= limit && d < name.chars().count() && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, n));
        }
    }
    best.map(|(_, n)| format!("did you mean .{n}()?"))
}

/// The error for a method that does not apply to `recv`.
pub fn unknown_method(recv: &Value, name: &str) -> ShoalError {
    let ty = recv.type_name();
    let special = matches!(name, "length" | "size") && !names_for(recv).contains(&name);
    if known_anywhere(name) && !special {
        let mut e = ShoalError::type_error(format!("method `.{name}` does not apply to {ty}"));
        if name == "str"
            || matches!(
                recv,
                Value::DateTime(_) | Value::Size(_) | Value::Duration(_) | Value::Time(_)
            )
        {
            e = e.with_hint("use interpolation to render it: \"{x}\"");
        }
        return e;
    }
    let e = ShoalError::field_missing(format!("unknown method `.{name}` on {ty}"));
    match hint_for(recv, name) {
        Some(h) => e.with_hint(h),
        None => e,
    }
}
