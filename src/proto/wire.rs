//! The tagged wire encoding of values (reference-protocol §4.1 with the
//! contract's changes): `{"$":"int","v":42}` and friends.
//!
//! Datetimes are RFC 3339 strings; record keys and table columns keep their
//! insertion order. Encoding never fails and never panics: display-only kinds
//! (closures, commands) fall back to a plain description if rendering does.

use base64::Engine as _;
use serde_json::{json, Map, Value as Json};

use crate::value::{Outcome, ShoalError, Value};

/// Encode a value.
pub fn encode(v: &Value) -> Json {
    match v {
        Value::Null => json!({"$": "null"}),
        Value::Bool(b) => json!({"$": "bool", "v": b}),
        Value::Int(i) => json!({"$": "int", "v": i}),
        Value::Float(f) => {
            json!({"$": "float", "v": if f.is_finite() { json!(f) } else { Json::Null }})
        }
        Value::Str(s) => json!({"$": "str", "v": &**s}),
        Value::Size(n) => json!({"$": "size", "v": n}),
        Value::Duration(ns) => json!({"$": "duration", "v": ns}),
        Value::Bytes(b) => json!({"$": "bytes", "v": b64(b)}),
        Value::Path(p) => path(p),
        Value::List(items) => {
            json!({"$": "list", "v": items.iter().map(encode).collect::<Vec<_>>()})
        }
        Value::Record(r) => {
            let mut m = Map::new();
            for (k, v) in r.iter() {
                m.insert(k.clone(), encode(v));
            }
            json!({"$": "record", "v": m})
        }
        Value::Table(rows) => table(rows),
        Value::Outcome(o) => outcome(o),
        Value::Error(e) => error(e),
        Value::DateTime(z) => {
            json!({"$": "datetime", "v": z.timestamp().display_with_offset(z.offset()).to_string()})
        }
        Value::Time(secs) => {
            let s = secs % 86_400;
            json!({"$": "time", "v": format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)})
        }
        Value::Glob(g) => json!({"$": "glob", "pattern": g.pattern}),
        Value::Regex(r) => json!({"$": "regex", "src": r.source}),
        Value::Range(r) => {
            json!({"$": "range", "start": r.start, "end": r.end, "inclusive": r.inclusive})
        }
        Value::Task(t) => json!({"$": "task", "id": t.id, "done": false}),
        Value::Closure(c) => {
            let fallback = || {
                let params: Vec<&str> = c.def.params.iter().map(|p| p.name.as_str()).collect();
                format!(
                    "fn {}({})",
                    c.def.name.as_deref().unwrap_or(""),
                    params.join(", ")
                )
            };
            json!({"$": "closure", "repr": safe_inline(v).unwrap_or_else(fallback)})
        }
        Value::Command(_) => {
            json!({"$": "cmd", "repr": safe_inline(v).unwrap_or_else(|| "<command>".into())})
        }
        Value::Stream(s) => json!({"$": "stream", "label": s.label}),
        Value::Secret(s) => json!({"$": "secret", "name": s.name}),
    }
}

fn safe_inline(v: &Value) -> Option<String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::value::render::inline(v)
    }))
    .ok()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn path(p: &std::path::Path) -> Json {
    match p.to_str() {
        Some(s) => json!({"$": "path", "v": s}),
        None => {
            use std::os::unix::ffi::OsStrExt;
            json!({"$": "path", "v": p.to_string_lossy(), "raw": b64(p.as_os_str().as_bytes())})
        }
    }
}

fn table(rows: &[std::sync::Arc<crate::value::Record>]) -> Json {
    // Column set: union of row keys in first-seen order.
    let mut cols: indexmap::IndexMap<&str, Vec<Json>> = indexmap::IndexMap::new();
    for row in rows {
        for k in row.keys() {
            cols.entry(k.as_str()).or_default();
        }
    }
    for row in rows {
        for (k, cells) in cols.iter_mut() {
            cells.push(
                row.get(*k)
                    .map(encode)
                    .unwrap_or_else(|| json!({"$": "null"})),
            );
        }
    }
    let mut m = Map::new();
    for (k, cells) in cols {
        m.insert(k.to_string(), Json::Array(cells));
    }
    json!({"$": "table", "cols": m, "n": rows.len()})
}

fn outcome(o: &Outcome) -> Json {
    let out = match &o.out {
        Some(v) => encode(v),
        None => stdout_value(&o.stdout),
    };
    json!({
        "$": "outcome",
        "status": o.status,
        "ok": o.ok,
        "signal": o.signal,
        "out": out,
        "err": String::from_utf8_lossy(&o.stderr),
        "dur_ns": o.dur_ns,
        "pid": o.pid,
        "cmd": o.cmd,
    })
}

/// An external command's `.out`: JSON when stdout looks like JSON, else text
/// minus one trailing newline.
fn stdout_value(stdout: &[u8]) -> Json {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(j) = serde_json::from_str::<Json>(&text) {
            return from_plain_json(&j);
        }
    }
    let t = text.strip_suffix('\n').unwrap_or(&text);
    json!({"$": "str", "v": t})
}

/// Plain JSON → tagged wire form (objects become records, in order).
pub fn from_plain_json(j: &Json) -> Json {
    match j {
        Json::Null => json!({"$": "null"}),
        Json::Bool(b) => json!({"$": "bool", "v": b}),
        Json::Number(n) => match n.as_i64() {
            Some(i) => json!({"$": "int", "v": i}),
            None => json!({"$": "float", "v": n.as_f64()}),
        },
        Json::String(s) => json!({"$": "str", "v": s}),
        Json::Array(a) => {
            json!({"$": "list", "v": a.iter().map(from_plain_json).collect::<Vec<_>>()})
        }
        Json::Object(o) => {
            let m: Map<String, Json> = o
                .iter()
                .map(|(k, v)| (k.clone(), from_plain_json(v)))
                .collect();
            json!({"$": "record", "v": m})
        }
    }
}

/// The `error` wire value (optional fields omitted when absent; no `status`).
pub fn error(e: &ShoalError) -> Json {
    let mut m = Map::new();
    m.insert("$".into(), json!("error"));
    m.insert("code".into(), json!(e.code.as_str()));
    m.insert("msg".into(), json!(e.msg));
    if let Some(s) = e.span {
        m.insert("span".into(), json!({"start": s.start, "end": s.end}));
    }
    if let Some(h) = &e.hint {
        m.insert("hint".into(), json!(h));
    }
    if let Some(s) = &e.stderr {
        m.insert("stderr".into(), json!(String::from_utf8_lossy(s)));
    }
    Json::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{ErrorCode, RangeVal, Record};
    use std::sync::Arc;

    fn rec(pairs: &[(&str, Value)]) -> Record {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn encoding_table() {
        let dt: jiff::Zoned = "2026-03-01T12:30:00+01:00[+01:00]".parse().unwrap();
        let cases: Vec<(Value, Json)> = vec![
            (Value::Null, json!({"$":"null"})),
            (Value::Bool(true), json!({"$":"bool","v":true})),
            (Value::Int(42), json!({"$":"int","v":42})),
            (Value::Float(3.5), json!({"$":"float","v":3.5})),
            (Value::Float(f64::NAN), json!({"$":"float","v":null})),
            (Value::str("hi"), json!({"$":"str","v":"hi"})),
            (Value::Size(4096), json!({"$":"size","v":4096})),
            (
                Value::Duration(1_000_000),
                json!({"$":"duration","v":1000000}),
            ),
            (
                Value::bytes(b"ab".to_vec()),
                json!({"$":"bytes","v":"YWI="}),
            ),
            (Value::path("/tmp/x"), json!({"$":"path","v":"/tmp/x"})),
            (Value::Time(3661), json!({"$":"time","v":"01:01:01"})),
            (
                Value::DateTime(Arc::new(dt)),
                json!({"$":"datetime","v":"2026-03-01T12:30:00+01:00"}),
            ),
            (
                Value::Range(RangeVal {
                    start: 1,
                    end: 3,
                    inclusive: false,
                }),
                json!({"$":"range","start":1,"end":3,"inclusive":false}),
            ),
            (
                Value::list(vec![Value::Int(1)]),
                json!({"$":"list","v":[{"$":"int","v":1}]}),
            ),
            (
                Value::Error(Arc::new(ShoalError::new(
                    ErrorCode::DivZero,
                    "division by zero",
                ))),
                json!({"$":"error","code":"div_zero","msg":"division by zero"}),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(encode(&v), want, "{v:?}");
        }
    }

    #[test]
    fn records_and_tables_keep_insertion_order() {
        let r = Value::record(rec(&[("zeta", Value::Int(1)), ("alpha", Value::Int(2))]));
        let s = serde_json::to_string(&encode(&r)).unwrap();
        assert!(s.find("zeta").unwrap() < s.find("alpha").unwrap(), "{s}");

        let rows = vec![
            Arc::new(rec(&[("name", Value::str("a")), ("size", Value::Size(1))])),
            Arc::new(rec(&[
                ("name", Value::str("b")),
                ("extra", Value::Bool(true)),
            ])),
        ];
        let t = encode(&Value::Table(Arc::new(rows)));
        assert_eq!(t["n"], json!(2));
        let cols: Vec<&String> = t["cols"].as_object().unwrap().keys().collect();
        assert_eq!(cols, ["name", "size", "extra"]);
        assert_eq!(t["cols"]["extra"][0], json!({"$":"null"}));
        assert_eq!(t["cols"]["size"][1], json!({"$":"null"}));
    }

    #[test]
    fn outcome_out_from_stdout() {
        let o = Outcome {
            status: Some(0),
            ok: true,
            signal: None,
            dur_ns: 5,
            pid: 9,
            cmd: "echo".into(),
            stdout: Arc::from(&b"hello\n"[..]),
            stderr: Arc::from(&b""[..]),
            out: None,
        };
        let j = encode(&Value::Outcome(Arc::new(o)));
        assert_eq!(j["out"], json!({"$":"str","v":"hello"}));
        assert_eq!(j["ok"], json!(true));
        assert_eq!(
            stdout_value(b"{\"b\":1,\"a\":[2]}"),
            json!({"$":"record","v":{"b":{"$":"int","v":1},"a":{"$":"list","v":[{"$":"int","v":2}]}}})
        );
    }
}
