//! The tagged wire encoding of values (docs/rules.md §15): `{"$":"int","v":42}` and
//! friends.
//!
//! Datetimes are RFC 3339 strings; record keys and table columns keep their
//! insertion order. Encoding never fails and never panics: display-only kinds
//! (closures, commands) fall back to a plain description if rendering does.

use base64::Engine as _;
use serde_json::{json, Map, Value as Json};

use shoal_value::{Outcome, ShoalError, Value};

/// Containers nested deeper than this travel as a `ref` to their path
/// (`{"$":"ref","uri":"…?path=[0][0]…",…}`), so an encoding never recurses
/// without bound and always parses back under serde_json's nesting limit of
/// 128 (a container is at most three JSON levels).
pub const MAX_DEPTH: usize = 40;

/// Encode a value.
pub fn encode(v: &Value) -> Json {
    encode_under(v, "")
}

/// Encode a value addressed by `uri`: containers past [`MAX_DEPTH`] become
/// refs to `uri` plus their path.
pub fn encode_under(v: &Value, uri: &str) -> Json {
    Enc::new(uri).value(v, 0)
}

/// One step of a path from the encoded root.
#[derive(Clone, Copy)]
enum Step<'a> {
    Index(usize),
    Field(&'a str),
}

/// The encoder's walk state: the path from the root (for deep refs).
struct Enc<'a> {
    uri: &'a str,
    path: Vec<Step<'a>>,
}

impl<'a> Enc<'a> {
    fn new(uri: &'a str) -> Self {
        Enc {
            uri,
            path: Vec::new(),
        }
    }

    fn child(&mut self, step: Step<'a>, v: &'a Value, depth: usize) -> Json {
        self.path.push(step);
        let j = self.value(v, depth + 1);
        self.path.pop();
        j
    }

    /// Past the depth limit a non-empty container is a ref to its path.
    fn too_deep(&self, v: &Value, depth: usize) -> Option<Json> {
        if depth < MAX_DEPTH || !shoal_value::nests(v) {
            return None;
        }
        let n = match v {
            Value::List(x) => x.len(),
            Value::Record(r) => r.len(),
            Value::Table(t) => t.len(),
            _ => 1,
        };
        if n == 0 && !matches!(v, Value::Outcome(_)) {
            return None;
        }
        let mut path = String::new();
        for s in &self.path {
            match s {
                Step::Index(i) => path.push_str(&format!("[{i}]")),
                Step::Field(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
            }
        }
        Some(json!({
            "$": "ref",
            "uri": super::uri::with_path(self.uri, &path),
            "of": v.type_name(),
            "n": n,
            "preview": {"$": "null"},
            "render_head": format!("\u{2026}(nested deeper than {MAX_DEPTH} levels)"),
        }))
    }

    fn value(&mut self, v: &'a Value, depth: usize) -> Json {
        if let Some(r) = self.too_deep(v, depth) {
            return r;
        }
        match v {
            Value::Null => tag_only("null"),
            Value::Bool(b) => tagged("bool", Json::Bool(*b)),
            Value::Int(i) => tagged("int", Json::from(*i)),
            // Not finite: null (JSON has no NaN or infinity).
            Value::Float(f) => tagged("float", Json::from(*f)),
            Value::Str(s) => tagged("str", Json::String(s.to_string())),
            Value::Size(n) => tagged("size", Json::from(*n)),
            Value::Duration(ns) => tagged("duration", Json::from(*ns)),
            Value::Bytes(b) => tagged("bytes", Json::String(b64(b))),
            Value::Path(p) => path(p),
            Value::List(items) => {
                let v: Vec<Json> = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.child(Step::Index(i), x, depth))
                    .collect();
                tagged("list", Json::Array(v))
            }
            Value::Record(r) => {
                let mut m = Map::with_capacity(r.len());
                for (k, x) in r.iter() {
                    let j = self.child(Step::Field(k), x, depth);
                    m.insert(k.to_string(), j);
                }
                tagged("record", Json::Object(m))
            }
            Value::Table(rows) => self.table(rows, depth),
            Value::Outcome(o) => self.outcome(o, depth),
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
            Value::Task(t) => {
                json!({"$": "task", "id": t.id, "ref": shoal_lang::task::ref_name(t.id), "done": false})
            }
            Value::Closure(c) => {
                json!({"$": "closure", "repr": safe_inline(v).unwrap_or_else(|| c.render())})
            }
            Value::Command(_) => {
                json!({"$": "cmd", "repr": safe_inline(v).unwrap_or_else(|| "<command>".into())})
            }
            Value::Stream(s) => json!({"$": "stream", "label": s.label}),
            Value::Secret(s) => json!({"$": "secret", "name": s.name}),
        }
    }
}

fn safe_inline(v: &Value) -> Option<String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shoal_value::render::inline(v)
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

impl<'a> Enc<'a> {
    fn table(&mut self, rows: &'a [std::sync::Arc<shoal_value::Record>], depth: usize) -> Json {
        // Column set: union of row keys in first-seen order.
        let mut cols: indexmap::IndexMap<&str, Vec<Json>> = indexmap::IndexMap::new();
        for row in rows {
            for k in row.keys() {
                cols.entry(k).or_default();
            }
        }
        for (i, row) in rows.iter().enumerate() {
            for (k, cells) in cols.iter_mut() {
                let cell = match row.get(*k) {
                    Some(x) => {
                        self.path.push(Step::Index(i));
                        let j = self.child(Step::Field(k), x, depth);
                        self.path.pop();
                        j
                    }
                    None => tag_only("null"),
                };
                cells.push(cell);
            }
        }
        let mut m = Map::with_capacity(cols.len());
        for (k, cells) in cols {
            m.insert(k.to_string(), Json::Array(cells));
        }
        let mut t = Map::with_capacity(3);
        t.insert("$".into(), Json::from("table"));
        t.insert("cols".into(), Json::Object(m));
        t.insert("n".into(), Json::from(rows.len()));
        Json::Object(t)
    }

    fn outcome(&mut self, o: &'a Outcome, depth: usize) -> Json {
        let out = match &o.out {
            Some(v) => self.child(Step::Field("out"), v, depth),
            None => stdout_value(&o.stdout),
        };
        let mut j = json!({
            "$": "outcome",
            "status": o.status,
            "ok": o.ok,
            "signal": o.signal,
            "out": null,
            "err": String::from_utf8_lossy(&o.stderr),
            "dur_ns": o.dur_ns,
            "pid": o.pid,
            "cmd": o.cmd,
        });
        // Moved in (json! would copy the whole value through serde).
        if let Some(m) = j.as_object_mut() {
            m.insert("out".into(), out);
        }
        // The key is absent (not null) when the span is unknown.
        if let (Some(sp), Some(m)) = (o.span, j.as_object_mut()) {
            m.insert("span".into(), json!({"start": sp.start, "end": sp.end}));
        }
        // Present only when output was cut at `[limits] spill_bytes`.
        if let (true, Some(m)) = (o.truncated, j.as_object_mut()) {
            m.insert("truncated".into(), json!(true));
        }
        j
    }
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
    tagged("str", Json::String(t.to_string()))
}

/// `{"$": tag, "v": v}`, built in place (`json!` would copy `v` through serde,
/// once per nesting level).
fn tagged(tag: &str, v: Json) -> Json {
    let mut m = Map::with_capacity(2);
    m.insert("$".to_owned(), Json::String(tag.to_owned()));
    m.insert("v".to_owned(), v);
    Json::Object(m)
}

/// `{"$": tag}`.
fn tag_only(tag: &str) -> Json {
    let mut m = Map::with_capacity(1);
    m.insert("$".to_owned(), Json::String(tag.to_owned()));
    Json::Object(m)
}

/// [`encode`] written straight to JSON bytes: lists, records and scalars are
/// streamed without building a `serde_json::Value` tree, so journaling a
/// million-item list costs bytes, not a million small maps. The output parses
/// to exactly what [`encode`] returns.
pub fn encode_to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    Enc::new("").write(v, 0, &mut out);
    out
}

/// [`encode_under`] written to `out` as JSON bytes (see [`encode_to_vec`]).
pub fn encode_under_into(v: &Value, uri: &str, out: &mut Vec<u8>) {
    Enc::new(uri).write(v, 0, out);
}

/// The length of [`encode`]'s JSON text of `v`, without building its tree.
pub fn encoded_len(v: &Value) -> usize {
    encode_to_vec(v).len()
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    // serde_json's string escaping; writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

impl<'a> Enc<'a> {
    fn write(&mut self, v: &'a Value, depth: usize, out: &mut Vec<u8>) {
        use std::io::Write;
        if let Some(r) = self.too_deep(v, depth) {
            let _ = serde_json::to_writer(&mut *out, &r);
            return;
        }
        match v {
            Value::Null => out.extend_from_slice(br#"{"$":"null"}"#),
            Value::Bool(b) => {
                let _ = write!(out, r#"{{"$":"bool","v":{b}}}"#);
            }
            Value::Int(i) => {
                let _ = write!(out, r#"{{"$":"int","v":{i}}}"#);
            }
            Value::Size(n) => {
                let _ = write!(out, r#"{{"$":"size","v":{n}}}"#);
            }
            Value::Duration(n) => {
                let _ = write!(out, r#"{{"$":"duration","v":{n}}}"#);
            }
            Value::Str(s) => {
                out.extend_from_slice(br#"{"$":"str","v":"#);
                write_str(out, s);
                out.push(b'}');
            }
            Value::List(items) => {
                out.extend_from_slice(br#"{"$":"list","v":["#);
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.path.push(Step::Index(i));
                    self.write(x, depth + 1, out);
                    self.path.pop();
                }
                out.extend_from_slice(b"]}");
            }
            Value::Record(r) => {
                out.extend_from_slice(br#"{"$":"record","v":{"#);
                for (i, (k, x)) in r.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, k);
                    out.push(b':');
                    self.path.push(Step::Field(k));
                    self.write(x, depth + 1, out);
                    self.path.pop();
                }
                out.extend_from_slice(b"}}");
            }
            other => {
                let j = self.value(other, depth);
                let _ = serde_json::to_writer(&mut *out, &j);
            }
        }
    }
}

/// Plain JSON → tagged wire form (objects become records, in order).
pub fn from_plain_json(j: &Json) -> Json {
    match j {
        Json::Null => tag_only("null"),
        Json::Bool(b) => tagged("bool", Json::Bool(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => tagged("int", Json::from(i)),
            None => tagged("float", n.as_f64().map_or(Json::Null, Json::from)),
        },
        Json::String(s) => tagged("str", Json::String(s.clone())),
        Json::Array(a) => tagged("list", Json::Array(a.iter().map(from_plain_json).collect())),
        Json::Object(o) => {
            let m: Map<String, Json> = o
                .iter()
                .map(|(k, v)| (k.clone(), from_plain_json(v)))
                .collect();
            tagged("record", Json::Object(m))
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

/// Decode a tagged wire value back into a value (journal-backed refs,
/// round-trip tests). Data kinds decode exactly; outcomes decode with their
/// `out` and `err`; errors decode to a record of their fields; display-only
/// kinds (closure, cmd, stream, secret, task, glob, regex, ref) to their
/// display string. `None` for anything that is not a wire value.
pub fn decode(j: &Json) -> Option<Value> {
    use std::sync::Arc;
    let o = j.as_object()?;
    let tag = o.get("$")?.as_str()?;
    let v = o.get("v");
    let s = |k: &str| o.get(k).and_then(Json::as_str);
    Some(match tag {
        "null" => Value::Null,
        "bool" => Value::Bool(v?.as_bool()?),
        "int" => Value::Int(v?.as_i64()?),
        "float" => Value::Float(v?.as_f64().unwrap_or(f64::NAN)),
        "str" => Value::str(v?.as_str()?),
        "size" => Value::Size(v?.as_u64()?),
        "duration" => Value::Duration(v?.as_i64()?),
        "bytes" => Value::bytes(unb64(v?.as_str()?)?),
        "path" => match s("raw") {
            Some(raw) => {
                use std::os::unix::ffi::OsStringExt;
                Value::os_path(std::ffi::OsString::from_vec(unb64(raw)?))
            }
            None => Value::path(v?.as_str()?),
        },
        "list" => Value::list(
            v?.as_array()?
                .iter()
                .map(decode)
                .collect::<Option<Vec<_>>>()?,
        ),
        "record" => Value::record(
            v?.as_object()?
                .iter()
                .map(|(k, x)| Some((k.as_str().into(), decode(x)?)))
                .collect::<Option<shoal_value::Record>>()?,
        ),
        "table" => {
            let n = o.get("n")?.as_u64()? as usize;
            let cols = o.get("cols")?.as_object()?;
            let mut rows = vec![shoal_value::Record::new(); n];
            for (k, cells) in cols {
                let k: shoal_value::Key = k.as_str().into();
                let cells = cells.as_array()?;
                if cells.len() != n {
                    return None;
                }
                for (row, c) in rows.iter_mut().zip(cells) {
                    // Missing cells were encoded as null: keep them absent.
                    if c.get("$").and_then(Json::as_str) != Some("null") {
                        row.insert(k.clone(), decode(c)?);
                    }
                }
            }
            Value::Table(Arc::new(rows.into_iter().map(Arc::new).collect()))
        }
        "datetime" => {
            let t = v?.as_str()?;
            let tz = if let Some(stripped) = t.strip_suffix('Z') {
                format!("{stripped}+00:00[UTC]")
            } else {
                format!("{t}[{}]", t.get(t.len().checked_sub(6)?..)?)
            };
            Value::DateTime(Arc::new(tz.parse::<jiff::Zoned>().ok()?))
        }
        "time" => {
            let t = v?.as_str()?;
            let p: Vec<u32> = t
                .split(':')
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            if p.len() != 3 {
                return None;
            }
            Value::Time(p[0] * 3600 + p[1] * 60 + p[2])
        }
        "range" => Value::Range(shoal_value::RangeVal {
            start: o.get("start")?.as_i64()?,
            end: o.get("end")?.as_i64()?,
            inclusive: o.get("inclusive")?.as_bool()?,
        }),
        "outcome" => Value::Outcome(Arc::new(Outcome {
            status: o.get("status").and_then(Json::as_i64),
            ok: o.get("ok")?.as_bool()?,
            signal: s("signal").map(str::to_string),
            dur_ns: o.get("dur_ns").and_then(Json::as_i64).unwrap_or(0),
            pid: o.get("pid").and_then(Json::as_u64).unwrap_or(0) as u32,
            cmd: s("cmd").unwrap_or("").to_string(),
            stdout: Default::default(),
            stderr: shoal_value::OutputBytes::from(s("err").unwrap_or("").as_bytes()),
            out: Some(decode(o.get("out")?)?),
            truncated: o.get("truncated").and_then(Json::as_bool).unwrap_or(false),
            typed: None,
            span: o.get("span").and_then(|sp| {
                Some(shoal_lang::ast::Span {
                    start: u32::try_from(sp.get("start")?.as_u64()?).ok()?,
                    end: u32::try_from(sp.get("end")?.as_u64()?).ok()?,
                })
            }),
        })),
        "error" => {
            let code =
                shoal_value::ErrorCode::parse(s("code")?).unwrap_or(shoal_value::ErrorCode::Custom);
            let mut e = ShoalError::new(code, s("msg")?);
            e.hint = s("hint").map(str::to_string);
            e.stderr = s("stderr").map(|x| Arc::from(x.as_bytes()));
            e.span = o.get("span").and_then(|sp| {
                Some(shoal_lang::ast::Span {
                    start: u32::try_from(sp.get("start")?.as_u64()?).ok()?,
                    end: u32::try_from(sp.get("end")?.as_u64()?).ok()?,
                })
            });
            Value::Error(Arc::new(e))
        }
        "glob" => Value::str(s("pattern")?),
        "regex" => Value::str(s("src")?),
        "closure" | "cmd" => Value::str(s("repr")?),
        "stream" => Value::str(s("label")?),
        "secret" => Value::str(s("name")?),
        "task" => Value::Int(o.get("id")?.as_i64()?),
        "ref" => Value::str(s("uri")?),
        _ => return None,
    })
}

fn unb64(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_value::{ErrorCode, RangeVal, Record};
    use std::sync::Arc;

    fn rec(pairs: &[(&str, Value)]) -> Record {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
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
            stdout: shoal_value::OutputBytes::from(&b"hello\n"[..]),
            stderr: shoal_value::OutputBytes::from(&b""[..]),
            out: None,
            span: None,
            truncated: false,
            typed: None,
        };
        let mut o = o;
        let j = encode(&Value::Outcome(Arc::new(Outcome {
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
            cmd: o.cmd.clone(),
            signal: None,
            out: None,
            typed: None,
            ..o
        })));
        // An unknown span is absent, not null (scenario 13)...
        assert!(
            j.as_object().is_some_and(|m| !m.contains_key("span")),
            "{j}"
        );
        o = Outcome {
            span: Some(shoal_lang::ast::Span { start: 0, end: 14 }),
            ..o
        };
        // ...and a known one travels and decodes back.
        let j2 = encode(&Value::Outcome(Arc::new(o)));
        assert_eq!(j2["span"], json!({"start": 0, "end": 14}));
        assert_eq!(encode(&decode(&j2).expect("decodes")), j2);
        assert_eq!(j["out"], json!({"$":"str","v":"hello"}));
        assert_eq!(j["ok"], json!(true));
        assert_eq!(
            stdout_value(b"{\"b\":1,\"a\":[2]}"),
            json!({"$":"record","v":{"b":{"$":"int","v":1},"a":{"$":"list","v":[{"$":"int","v":2}]}}})
        );
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;
        use shoal_value::{RangeVal, Record};
        use std::sync::Arc;

        fn leaf() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::Int),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::Float),
                ".{0,12}".prop_map(Value::str),
                any::<u64>().prop_map(Value::Size),
                any::<i64>().prop_map(Value::Duration),
                proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::bytes),
                proptest::collection::vec(any::<u8>(), 0..64).prop_map(|b| {
                    use std::os::unix::ffi::OsStringExt;
                    Value::os_path(std::ffi::OsString::from_vec(b))
                }),
                (0u32..86_400).prop_map(Value::Time),
                (-1_000_000_000i64..4_000_000_000, -50_400i32..50_400).prop_map(|(secs, off)| {
                    let off = jiff::tz::Offset::from_seconds(off / 60 * 60).unwrap();
                    let ts = jiff::Timestamp::from_second(secs).unwrap();
                    Value::DateTime(Arc::new(ts.to_zoned(jiff::tz::TimeZone::fixed(off))))
                }),
                (any::<i64>(), any::<i64>(), any::<bool>()).prop_map(|(start, end, inclusive)| {
                    Value::Range(RangeVal {
                        start,
                        end,
                        inclusive,
                    })
                }),
            ]
        }

        fn value() -> impl Strategy<Value = Value> {
            leaf().prop_recursive(3, 48, 6, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::list),
                    proptest::collection::vec(("[a-z]{1,6}", inner.clone()), 0..6).prop_map(|kv| {
                        Value::record(
                            kv.into_iter()
                                .map(|(k, v)| (k.into(), v))
                                .collect::<Record>(),
                        )
                    }),
                    proptest::collection::vec(
                        proptest::collection::vec(("[a-c]{1,2}", inner), 0..4),
                        0..5
                    )
                    .prop_map(|rows| {
                        // Non-null cells only: a null cell and a missing one encode alike.
                        Value::Table(Arc::new(
                            rows.into_iter()
                                .map(|r| {
                                    Arc::new(
                                        r.into_iter()
                                            .filter(|(_, v)| !matches!(v, Value::Null))
                                            .map(|(k, v)| (k.into(), v))
                                            .collect::<Record>(),
                                    )
                                })
                                .collect(),
                        ))
                    }),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// encode → JSON text → parse → decode → encode is the identity.
            #[test]
            fn wire_round_trip(v in value()) {
                let j = encode(&v);
                let text = serde_json::to_string(&j).unwrap();
                let back: Json = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(&back, &j);
                let d = decode(&back).expect("decodes");
                prop_assert_eq!(encode(&d), j);
            }

            /// Any path byte string round-trips; non-UTF-8 ones carry `raw`.
            #[test]
            fn paths_round_trip(b in proptest::collection::vec(any::<u8>(), 0..512)) {
                use std::os::unix::ffi::{OsStrExt, OsStringExt};
                let v = Value::os_path(std::ffi::OsString::from_vec(b.clone()));
                let j = encode(&v);
                prop_assert_eq!(j.get("raw").is_some(), std::str::from_utf8(&b).is_err());
                let Some(Value::Path(ref p)) = decode(&j) else { panic!("path") };
                prop_assert_eq!(p.as_os_str().as_bytes(), &b[..]);
            }
        }
    }

    #[test]
    fn streamed_encoding_parses_to_the_tree_encoding() {
        use shoal_value::Record;
        let mut r = Record::new();
        r.insert("a \"q\"".into(), Value::Float(1.5));
        r.insert(
            "n".into(),
            Value::list(vec![Value::Null, Value::Bool(true), Value::Int(-3)]),
        );
        r.insert("s".into(), Value::str("line\nnext \u{1F600}"));
        r.insert("z".into(), Value::Size(4096));
        r.insert("d".into(), Value::Duration(-5));
        r.insert("f".into(), Value::Float(f64::NAN));
        let v = Value::list(vec![Value::record(r), Value::str(""), Value::list(vec![])]);
        let streamed: Json = serde_json::from_slice(&super::encode_to_vec(&v)).unwrap();
        assert_eq!(streamed, super::encode(&v));
    }
}
