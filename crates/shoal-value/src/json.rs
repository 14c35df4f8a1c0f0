//! The value <-> JSON mapping of docs/rules.md §11.
use std::sync::Arc;

use serde_json::{Map, Number};

use crate::{render, Record, Value};

fn obj_sorted(pairs: Vec<(String, serde_json::Value)>) -> serde_json::Value {
    let mut pairs = pairs;
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k, v);
    }
    serde_json::Value::Object(m)
}

fn record_json(r: &Record, depth: usize) -> serde_json::Value {
    obj_sorted(
        r.iter()
            .map(|(k, v)| (k.to_string(), to_json_at(v, depth + 1)))
            .collect(),
    )
}

/// Containers nested deeper than this become the string `"…"`: JSON text
/// is written and read back (serde_json stops at 128 levels) without
/// unbounded recursion.
pub const MAX_DEPTH: usize = 100;

fn float_json(f: f64) -> serde_json::Value {
    match Number::from_f64(f) {
        Some(n) => serde_json::Value::Number(n),
        None => serde_json::Value::Null,
    }
}

/// Value → JSON (objects have sorted keys, as in the reference).
pub fn to_json(v: &Value) -> serde_json::Value {
    to_json_at(v, 0)
}

fn to_json_at(v: &Value, depth: usize) -> serde_json::Value {
    use serde_json::Value as J;
    if depth >= MAX_DEPTH && crate::nests(v) {
        return J::String("\u{2026}".into());
    }
    match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::Number((*i).into()),
        Value::Float(f) => float_json(*f),
        Value::Str(s) => J::String(s.to_string()),
        Value::Path(p) => J::String(p.to_string_lossy().into_owned()),
        Value::Glob(g) => J::String(g.pattern.clone()),
        Value::Regex(r) => J::String(r.source.clone()),
        Value::DateTime(z) => J::String(z.to_string()),
        Value::Time(t) => J::String(render::time(*t)),
        Value::Size(n) => J::Number((*n).into()),
        Value::Duration(d) => J::Number((*d).into()),
        Value::Bytes(b) => J::String(String::from_utf8_lossy(b).into_owned()),
        Value::List(items) => J::Array(items.iter().map(|x| to_json_at(x, depth + 1)).collect()),
        Value::Range(r) => {
            let end = if r.inclusive {
                r.end.saturating_add(1)
            } else {
                r.end
            };
            J::Array(
                (r.start..end.max(r.start))
                    .map(|i| J::Number(i.into()))
                    .collect(),
            )
        }
        Value::Record(r) => record_json(r, depth),
        Value::Table(rows) => J::Array(rows.iter().map(|r| record_json(r, depth + 1)).collect()),
        Value::Outcome(o) => obj_sorted(vec![
            (
                "err".into(),
                J::String(String::from_utf8_lossy(&o.stderr).into_owned()),
            ),
            ("ok".into(), J::Bool(o.ok)),
            (
                "out".into(),
                match &o.out {
                    Some(v) => to_json_at(v, depth + 1),
                    None => J::String(String::from_utf8_lossy(&o.stdout).into_owned()),
                },
            ),
            (
                "status".into(),
                o.status.map(|s| J::Number(s.into())).unwrap_or(J::Null),
            ),
        ]),
        Value::Error(e) => obj_sorted(vec![
            ("code".into(), J::String(e.code.as_str().to_string())),
            ("msg".into(), J::String(e.msg.clone())),
        ]),
        Value::Secret(s) => J::String(format!("secret({})", s.name)),
        other => J::String(render::inline(other)),
    }
}

/// JSON → value: integers that fit i64 → int, other numbers → float; objects →
/// records with sorted keys; arrays → table when non-empty and all objects.
pub fn from_json(j: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match j {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::str(s),
        J::Array(items) => {
            if !items.is_empty() && items.iter().all(|x| x.is_object()) {
                let rows = items
                    .iter()
                    .filter_map(|x| match x {
                        J::Object(m) => Some(Arc::new(obj_record(m))),
                        _ => None,
                    })
                    .collect();
                Value::Table(Arc::new(rows))
            } else {
                Value::list(items.iter().map(from_json).collect())
            }
        }
        J::Object(m) => Value::record(obj_record(m)),
    }
}

fn obj_record(m: &Map<String, serde_json::Value>) -> Record {
    let mut pairs: Vec<(&String, &serde_json::Value)> = m.iter().collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    pairs
        .into_iter()
        .map(|(k, v)| (k.as_str().into(), from_json(v)))
        .collect()
}

/// `Err(resource_limit)` when turning `v` into JSON would materialise more
/// than the session's memory budget (a range is O(1) as a value but N items
/// as JSON). Walks with an explicit stack.
pub fn materialise_check(v: &Value) -> crate::SResult<()> {
    let mut items: u64 = 0;
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Range(r) => items = items.saturating_add(r.count() as u64),
            Value::List(l) => todo.extend(
                l.iter()
                    .filter(|x| matches!(x, Value::Range(_)) || crate::nests(x)),
            ),
            Value::Record(r) => todo.extend(r.values()),
            Value::Table(t) => todo.extend(t.iter().flat_map(|r| r.values())),
            Value::Outcome(o) => todo.extend(o.out.as_ref()),
            _ => {}
        }
    }
    // A JSON number plus its text.
    crate::memory::reserve(items.saturating_mul(48))
}

/// Compact JSON text (`.json()`, `json.stringify`).
pub fn stringify(v: &Value) -> String {
    serde_json::to_string(&to_json(v)).unwrap_or_else(|_| "null".to_string())
}

/// Pretty JSON text (2-space indentation).
pub fn stringify_pretty(v: &Value) -> String {
    serde_json::to_string_pretty(&to_json(v)).unwrap_or_else(|_| "null".to_string())
}

/// Parse JSON text into a value; `None` if invalid.
pub fn parse(s: &str) -> Option<Value> {
    serde_json::from_str::<serde_json::Value>(s)
        .ok()
        .map(|j| from_json(&j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let cases = [
            (
                r#"{"b": 1, "a": [1, 2.5, "x", null, true]}"#,
                r#"{a: [1, 2.5, "x", null, true], b: 1}"#,
            ),
            ("[{\"a\": 1}, {\"a\": 2}]", "[{a: 1}, {a: 2}]"),
            ("[]", "[]"),
            ("18446744073709551615", "18446744073709552000"),
        ];
        for (src, want) in cases {
            let v = parse(src).unwrap();
            assert_eq!(render::inline(&v), want);
        }
        assert!(matches!(parse("[{\"a\": 1}]"), Some(Value::Table(_))));
        let mut r = Record::new();
        r.insert("z".into(), Value::Int(1));
        r.insert("a".into(), Value::Size(1000));
        assert_eq!(stringify(&Value::record(r)), r#"{"a":1000,"z":1}"#);
    }
}
