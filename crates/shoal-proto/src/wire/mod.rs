//! The tagged wire encoding of values (docs/rules.md §15): `{"$":"int","v":42}` and
//! friends.
//!
//! Datetimes are RFC 3339 strings; record keys and table columns keep their
//! insertion order. Encoding never fails and never panics: display-only kinds
//! (closures, commands) fall back to a plain description if rendering does.

use base64::Engine as _;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
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
    // Serializing into a tree cannot fail: every key is a string.
    serde_json::to_value(Wire::under(v, uri)).unwrap_or(Json::Null)
}

/// [`encode`] as JSON bytes, streamed: no tree is built, so journaling a
/// million-item list costs bytes, not a million small maps.
pub fn encode_to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, &Wire::new(v));
    out
}

/// The length of [`encode`]'s JSON text of `v`, counted as it streams (no
/// buffer, no tree).
pub fn encoded_len(v: &Value) -> usize {
    let mut n = shoal_base::count::ByteCount::default();
    let _ = serde_json::to_writer(&mut n, &Wire::new(v));
    n.0
}

/// The wire encoding of a value as a [`Serialize`]: the one encoder, which
/// writes straight into whatever serializer it is given (reply bytes, journal
/// bytes, or a `serde_json::Value` for [`encode`]).
#[derive(Clone, Copy)]
pub struct Wire<'a> {
    v: &'a Value,
    at: At<'a>,
}

impl<'a> Wire<'a> {
    /// `v` as the root of its encoding.
    pub fn new(v: &'a Value) -> Self {
        Wire::under(v, "")
    }

    /// `v` as the root, addressed by `uri` (deep refs name `uri` plus a path).
    pub fn under(v: &'a Value, uri: &'a str) -> Self {
        Wire {
            v,
            at: At {
                uri,
                depth: 0,
                path: None,
            },
        }
    }
}

/// One step of a path from the encoded root.
#[derive(Clone, Copy)]
enum Step<'a> {
    Index(usize),
    Field(&'a str),
}

/// A path from the root, leaf first (each node lives on the encoder's stack).
struct PathNode<'a> {
    step: Step<'a>,
    up: Option<&'a PathNode<'a>>,
}

/// Where a value sits under the root: its nesting depth and its path.
#[derive(Clone, Copy)]
struct At<'a> {
    uri: &'a str,
    depth: usize,
    path: Option<&'a PathNode<'a>>,
}

impl<'a> At<'a> {
    /// One level deeper, at `path`.
    fn below(&self, path: &'a PathNode<'a>) -> At<'a> {
        At {
            uri: self.uri,
            depth: self.depth + 1,
            path: Some(path),
        }
    }

    /// The path as `value.get` reads it (`[0].name.x`).
    fn path_text(&self) -> String {
        let mut steps = Vec::new();
        let mut node = self.path;
        while let Some(n) = node {
            steps.push(n.step);
            node = n.up;
        }
        let mut path = String::new();
        for s in steps.iter().rev() {
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
        path
    }

    /// Past the depth limit a non-empty container is a ref to its path.
    fn too_deep(&self, v: &Value) -> Option<Json> {
        if self.depth < MAX_DEPTH || !shoal_value::nests(v) {
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
        Some(json!({
            "$": "ref",
            "uri": super::uri::with_path(self.uri, &self.path_text()),
            "of": v.type_name(),
            "n": n,
            "preview": {"$": "null"},
            "render_head": format!("\u{2026}(nested deeper than {MAX_DEPTH} levels)"),
        }))
    }
}

/// `{"$": tag, "v": v}`.
fn tag_v<S: Serializer, T: Serialize + ?Sized>(s: S, tag: &str, v: &T) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry("$", tag)?;
    m.serialize_entry("v", v)?;
    m.end()
}

/// `{"$": tag}`.
struct Tag(&'static str);

impl Serialize for Tag {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("$", self.0)?;
        m.end()
    }
}

/// A value's `Display` written as a JSON string (no intermediate `String`).
struct Shown<D>(D);

impl<D: std::fmt::Display> Serialize for Shown<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let at = &self.at;
        if let Some(r) = at.too_deep(self.v) {
            return r.serialize(s);
        }
        match self.v {
            Value::Null => Tag("null").serialize(s),
            Value::Bool(b) => tag_v(s, "bool", b),
            Value::Int(i) => tag_v(s, "int", i),
            // Not finite: null (JSON has no NaN or infinity).
            Value::Float(f) => tag_v(s, "float", &Json::from(*f)),
            Value::Str(x) => tag_v(s, "str", &**x),
            Value::Size(n) => tag_v(s, "size", n),
            Value::Duration(ns) => tag_v(s, "duration", ns),
            Value::Bytes(b) => tag_v(s, "bytes", &b64(b)),
            Value::Path(p) => match p.to_str() {
                Some(x) => tag_v(s, "path", x),
                None => {
                    use std::os::unix::ffi::OsStrExt;
                    let mut m = s.serialize_map(Some(3))?;
                    m.serialize_entry("$", "path")?;
                    m.serialize_entry("v", &p.to_string_lossy())?;
                    m.serialize_entry("raw", &b64(p.as_os_str().as_bytes()))?;
                    m.end()
                }
            },
            Value::List(items) => tag_v(s, "list", &Items { items, at }),
            Value::Record(r) => tag_v(s, "record", &Fields { r, at }),
            Value::Table(rows) => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("$", "table")?;
                m.serialize_entry("cols", &Columns::of(rows, at))?;
                m.serialize_entry("n", &rows.len())?;
                m.end()
            }
            Value::Outcome(o) => outcome(s, o, at),
            Value::Error(e) => error(e).serialize(s),
            Value::DateTime(z) => tag_v(
                s,
                "datetime",
                &Shown(z.timestamp().display_with_offset(z.offset())),
            ),
            Value::Time(secs) => {
                let x = secs % 86_400;
                let t = format!("{:02}:{:02}:{:02}", x / 3600, (x / 60) % 60, x % 60);
                tag_v(s, "time", &t)
            }
            Value::Glob(g) => json!({"$": "glob", "pattern": g.pattern}).serialize(s),
            Value::Regex(r) => json!({"$": "regex", "src": r.source}).serialize(s),
            Value::Range(r) => {
                json!({"$": "range", "start": r.start, "end": r.end, "inclusive": r.inclusive})
                    .serialize(s)
            }
            Value::Task(t) => {
                json!({"$": "task", "id": t.id, "ref": shoal_lang::task::ref_name(t.id), "done": false})
                    .serialize(s)
            }
            Value::Closure(c) => {
                json!({"$": "closure", "repr": safe_inline(self.v).unwrap_or_else(|| c.render())})
                    .serialize(s)
            }
            Value::Command(_) => {
                json!({"$": "cmd", "repr": safe_inline(self.v).unwrap_or_else(|| "<command>".into())})
                    .serialize(s)
            }
            Value::Stream(x) => json!({"$": "stream", "label": x.label}).serialize(s),
            Value::Secret(x) => json!({"$": "secret", "name": x.name}).serialize(s),
        }
    }
}

/// A list's items, each one level deeper at `[i]`.
struct Items<'a> {
    items: &'a [Value],
    at: &'a At<'a>,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.items.len()))?;
        for (i, v) in self.items.iter().enumerate() {
            let node = PathNode {
                step: Step::Index(i),
                up: self.at.path,
            };
            seq.serialize_element(&Wire {
                v,
                at: self.at.below(&node),
            })?;
        }
        seq.end()
    }
}

/// A record's fields in order, each one level deeper at `.key`.
struct Fields<'a> {
    r: &'a shoal_value::Record,
    at: &'a At<'a>,
}

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.r.len()))?;
        for (k, v) in self.r.iter() {
            let node = PathNode {
                step: Step::Field(k),
                up: self.at.path,
            };
            m.serialize_entry(
                &**k,
                &Wire {
                    v,
                    at: self.at.below(&node),
                },
            )?;
        }
        m.end()
    }
}

type Rows = [std::sync::Arc<shoal_value::Record>];

/// A table's columns: the union of its rows' keys in first-seen order, each
/// a list of cells (`null` where a row lacks the key); a cell is one level
/// deeper than the table, at `[row].col`.
struct Columns<'a> {
    rows: &'a Rows,
    cols: indexmap::IndexSet<&'a str>,
    at: &'a At<'a>,
}

impl<'a> Columns<'a> {
    fn of(rows: &'a Rows, at: &'a At<'a>) -> Self {
        let mut cols = indexmap::IndexSet::new();
        for row in rows {
            for k in row.keys() {
                cols.insert(&**k);
            }
        }
        Columns { rows, cols, at }
    }
}

impl Serialize for Columns<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.cols.len()))?;
        for k in &self.cols {
            m.serialize_entry(
                *k,
                &Cells {
                    rows: self.rows,
                    col: k,
                    at: self.at,
                },
            )?;
        }
        m.end()
    }
}

/// One column's cells.
struct Cells<'a> {
    rows: &'a Rows,
    col: &'a str,
    at: &'a At<'a>,
}

impl Serialize for Cells<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.rows.len()))?;
        for (i, row) in self.rows.iter().enumerate() {
            match row.get(self.col) {
                Some(v) => {
                    let index = PathNode {
                        step: Step::Index(i),
                        up: self.at.path,
                    };
                    let field = PathNode {
                        step: Step::Field(self.col),
                        up: Some(&index),
                    };
                    seq.serialize_element(&Wire {
                        v,
                        at: self.at.below(&field),
                    })?
                }
                None => seq.serialize_element(&Tag("null"))?,
            }
        }
        seq.end()
    }
}

/// An outcome: its envelope, with `out` (the builtin's value one level deeper,
/// or stdout as [`stdout_value`]) in place; `span` only when known,
/// `truncated` only when output was cut at `[limits] spill_bytes`.
fn outcome<S: Serializer>(s: S, o: &Outcome, at: &At<'_>) -> Result<S::Ok, S::Error> {
    let n = 9 + usize::from(o.span.is_some()) + usize::from(o.truncated);
    let mut m = s.serialize_map(Some(n))?;
    m.serialize_entry("$", "outcome")?;
    m.serialize_entry("status", &o.status)?;
    m.serialize_entry("ok", &o.ok)?;
    m.serialize_entry("signal", &o.signal)?;
    match &o.out {
        Some(v) => {
            let node = PathNode {
                step: Step::Field("out"),
                up: at.path,
            };
            m.serialize_entry(
                "out",
                &Wire {
                    v,
                    at: at.below(&node),
                },
            )?
        }
        None => m.serialize_entry("out", &stdout_value(&o.stdout))?,
    }
    m.serialize_entry("err", &String::from_utf8_lossy(&o.stderr))?;
    m.serialize_entry("dur_ns", &o.dur_ns)?;
    m.serialize_entry("pid", &o.pid)?;
    m.serialize_entry("cmd", &o.cmd)?;
    if let Some(sp) = o.span {
        m.serialize_entry("span", &json!({"start": sp.start, "end": sp.end}))?;
    }
    if o.truncated {
        m.serialize_entry("truncated", &true)?;
    }
    m.end()
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
mod tests;
