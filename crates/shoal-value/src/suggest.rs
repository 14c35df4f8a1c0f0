//! The unknown-method fall-through (docs/rules.md §10): cross-type `type_error`, else
//! `field_missing` “unknown method `.m` on TYPE” with a did-you-mean hint.
use crate::names::{self, UNIVERSAL};
use crate::{ShoalError, Value};

/// Method names valid for this receiver (used for suggestions).
fn names_for(v: &Value) -> Vec<&'static str> {
    let mut n: Vec<&'static str> = UNIVERSAL.to_vec();
    match v {
        Value::List(_) | Value::Table(_) | Value::Range(_) => n.extend_from_slice(names::COLL),
        Value::Glob(_) => {
            n.extend_from_slice(names::COLL);
            n.extend_from_slice(&["pattern", "expand"]);
        }
        Value::Stream(_) => {
            n.extend_from_slice(names::COLL);
            n.extend_from_slice(names::STREAM);
        }
        Value::Str(_) => n.extend_from_slice(names::TEXT),
        Value::Int(_) | Value::Float(_) => n.extend_from_slice(names::NUMBER),
        Value::Record(_) => n.extend_from_slice(names::RECORD),
        Value::Path(_) => n.extend_from_slice(names::PATH),
        Value::Bytes(_) => n.extend_from_slice(names::BYTES),
        Value::DateTime(_) => n.extend_from_slice(names::DATETIME_FIELDS),
        Value::Duration(_) => n.extend_from_slice(names::DURATION),
        Value::Error(_) => n.extend_from_slice(names::ERROR_FIELDS),
        _ => {}
    }
    n
}

fn known_anywhere(name: &str) -> bool {
    names::COLL.contains(&name)
        || names::TEXT.contains(&name)
        || names::NUMBER.contains(&name)
        || names::RECORD.contains(&name)
        || names::PATH.contains(&name)
        || names::BYTES.contains(&name)
        || names::DURATION.contains(&name)
        || names::STREAM.contains(&name)
        || ["pattern", "expand"].contains(&name)
}

/// Edit distance (chars): insertions, deletions, substitutions and swaps
/// of two neighbours (`nmae` → `name`) cost 1 each (optimal string
/// alignment).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            let mut d = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
            if i > 0 && j > 0 && *ca == b[j - 1] && a[i - 1] == *cb {
                d = d.min(before[j - 1] + 1);
            }
            cur[j + 1] = d;
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// The names of `candidates` nearest to `name`: those at the smallest edit
/// distance within reach (1 for names under 5 characters, 2 under 9, else
/// 3; a candidate `name` begins, for names of 3 or more, counts as 1), at
/// most 3 of them, in order. `name` itself is never suggested.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let len = name.chars().count();
    let reach = match len {
        0..=4 => 1,
        5..=8 => 2,
        _ => 3,
    };
    let mut found: Vec<(usize, &str)> = Vec::new();
    for c in candidates {
        if c == name || found.iter().any(|(_, f)| *f == c) {
            continue;
        }
        let mut d = edit_distance(name, c);
        if len >= 3 && c.starts_with(name) {
            d = d.min(1);
        }
        if d <= reach && d < len {
            found.push((d, c));
        }
    }
    let Some(best) = found.iter().map(|(d, _)| *d).min() else {
        return Vec::new();
    };
    found.retain(|(d, _)| *d == best);
    found.truncate(3);
    found.into_iter().map(|(_, c)| c).collect()
}

/// `did you mean X?` / `did you mean X or Y?` / `did you mean X, Y or Z?`
/// with each name shown by `show`; `None` for no names.
pub fn did_you_mean<S: AsRef<str>>(names: &[S], show: impl Fn(&str) -> String) -> Option<String> {
    let shown: Vec<String> = names.iter().map(|n| show(n.as_ref())).collect();
    let list = match shown.as_slice() {
        [] => return None,
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    };
    Some(format!("did you mean {list}?"))
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
    if matches!(v, Value::Path(_) | Value::Str(_))
        && matches!(name, "write" | "write_text" | "write_all" | "write_str")
    {
        return Some(
            "write a file with `TEXT.save(path)`, e.g. `'hi'.save(\"f.txt\")` (`.append(path)` adds to it)"
                .to_string(),
        );
    }
    if matches!(v, Value::Str(_)) && matches!(name, "substring" | "substr" | "slice") {
        return Some(
            "slice strings with .take(n) / .skip(n), e.g. `s.skip(2).take(3)`".to_string(),
        );
    }
    did_you_mean(&nearest(name, names), |n| format!(".{n}()"))
}

/// The error for a field `recv` has not: `no field `name` on TYPE` with
/// the nearest fields (a record's keys) or methods of the receiver.
pub fn no_field(recv: &Value, name: &str) -> ShoalError {
    let e = match recv {
        Value::Record(_) => ShoalError::field_missing(format!("no field `{name}` in record")),
        _ => ShoalError::field_missing(format!("no field `{name}` on {}", recv.type_name())),
    };
    let hint = match recv {
        Value::Record(r) => {
            let keys: Vec<&str> = r.keys().map(|k| &**k).collect();
            did_you_mean(&nearest(name, keys), |n| format!(".{n}"))
        }
        Value::Error(_) => did_you_mean(&nearest(name, names::ERROR_FIELDS.iter().copied()), |n| {
            format!(".{n}")
        }),
        Value::Path(_) if matches!(name, "type" | "kind") => {
            Some("did you mean .is_dir, .is_file or .ext?".to_string())
        }
        _ => did_you_mean(&nearest(name, names_for(recv)), |n| format!(".{n}")),
    };
    match hint {
        Some(h) => e.with_hint(h),
        None => e,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Record;

    #[test]
    fn swaps_cost_one() {
        assert_eq!(edit_distance("nmae", "name"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    #[test]
    fn nearest_lists_the_closest_names() {
        assert_eq!(nearest("lins", ["lines", "len", "last"]), vec!["lines"]);
        assert_eq!(nearest("sortt", ["sort", "sort_by", "sum"]), vec!["sort"]);
        // Ties at the smallest distance are all named, at most three.
        assert_eq!(nearest("mam", ["map", "max", "min"]), vec!["map", "max"]);
        assert_eq!(nearest("frobnicate", ["len", "map"]), Vec::<&str>::new());
        // A prefix of a name counts as near; the name itself never.
        assert_eq!(nearest("type", ["type_name", "type"]), vec!["type_name"]);
        assert_eq!(
            did_you_mean(&["a"], |n| format!(".{n}")).as_deref(),
            Some("did you mean .a?")
        );
        assert_eq!(
            did_you_mean(&["a", "b", "c"], |n| n.to_string()).as_deref(),
            Some("did you mean a, b or c?")
        );
        assert_eq!(did_you_mean::<&str>(&[], |n| n.to_string()), None);
    }

    #[test]
    fn missing_fields_name_the_nearest_ones() {
        let mut r = Record::new();
        r.insert("name".into(), Value::Int(1));
        r.insert("size".into(), Value::Int(2));
        let e = no_field(&Value::record(r), "nmae");
        assert_eq!(e.msg, "no field `nmae` in record");
        assert_eq!(e.hint.as_deref(), Some("did you mean .name?"));
        let e = no_field(&Value::path("a"), "type");
        assert_eq!(e.msg, "no field `type` on path");
        assert!(
            e.hint.as_deref().is_some_and(|h| h.contains(".is_dir")),
            "{e:?}"
        );
        let e = no_field(&Value::path("a"), "parnt");
        assert_eq!(e.hint.as_deref(), Some("did you mean .parent?"));
    }

    #[test]
    fn a_range_index_says_the_slice_that_works() {
        let xs = Value::list(vec![Value::Int(1), Value::Int(2), Value::Int(3)]);
        let r = |start, end| {
            Value::Range(crate::RangeVal {
                start,
                end,
                inclusive: false,
            })
        };
        let e = crate::ops::index(&xs, &r(1, 3)).unwrap_err();
        assert_eq!(e.msg, "cannot index list with range");
        assert!(
            e.hint
                .as_deref()
                .is_some_and(|h| h.contains(".skip(1).take(2)")),
            "{e:?}"
        );
        let e = crate::ops::index(&xs, &r(0, 2)).unwrap_err();
        assert!(
            e.hint.as_deref().is_some_and(|h| h.contains(".take(2)")),
            "{e:?}"
        );
    }

    #[test]
    fn unknown_methods_name_the_nearest_ones() {
        let e = unknown_method(&Value::str("a\nb"), "lins");
        assert_eq!(e.hint.as_deref(), Some("did you mean .lines()?"));
    }
}
