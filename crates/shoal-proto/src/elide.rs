//! Elision (docs/rules.md §17 with docs/protocol.md §3): a value over its
//! budget travels as `{"$":"ref", uri, of, n, cols?, preview, render_head}`
//! and is fetched piecewise through `value.get` paths and slices.
//!
//! Deciding is cheap: counts are checked first and the encoded size is
//! estimated by a walk that stops as soon as the budget is exceeded, so a
//! million-item list is elided without being encoded.
//!
//! Outcomes keep their envelope (status, ok, cmd, ...): only `out` is elided
//! (URI `?path=out`) and `err` is bounded as text (`?path=stderr`), so stderr
//! is no unbounded side door.

use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::bound::{bound_text, strip_ansi, TEXT_BUDGET};
use super::wire;
use shoal_value::{render, Outcome, Record, Value};

/// The hard cap on any single encoded answer part.
pub const HARD_CAP: usize = 65_536;
/// Items, rows or keys kept in a preview.
pub const PREVIEW_ITEMS: usize = 5;
/// Bytes (or chars) kept in a bytes/str preview.
pub const PREVIEW_BYTES: usize = 256;
/// Lines of `render_head`.
pub const RENDER_HEAD_LINES: usize = 10;
/// A preview whose encoding exceeds this is shortened.
const PREVIEW_MAX_BYTES: usize = 3072;

// A per-call `elide` object as it arrives (every member optional); a plain
// comment, not a doc comment: it would become its schema's description.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct Elide {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
}

impl Elide {
    /// The defaults overridden by the members given.
    pub fn budget(&self) -> Budget {
        let mut b = Budget::default();
        let size = |n: u64| n.min(usize::MAX as u64) as usize;
        if let Some(n) = self.max_bytes.map(size) {
            b.max_bytes = n.min(HARD_CAP);
            b.max_bytes_raw = n.min(HARD_CAP);
            b.max_text = Some(n.min(HARD_CAP));
        }
        if let Some(n) = self.max_rows {
            b.max_rows = size(n);
        }
        if let Some(n) = self.max_items {
            b.max_items = size(n);
        }
        b
    }

    /// `max_bytes` as given, bounding `raw` text (default the hard cap).
    pub fn raw_limit(&self) -> usize {
        self.max_bytes.map_or(HARD_CAP, |n| {
            (n.min(usize::MAX as u64) as usize).min(HARD_CAP)
        })
    }

    /// A budget of an optional `elide` object.
    pub fn budget_of(e: Option<&Elide>) -> Budget {
        e.map(Elide::budget).unwrap_or_default()
    }
}

/// Per-call elision budget (`ElideBudget`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub max_bytes: usize,
    pub max_rows: usize,
    pub max_items: usize,
    pub max_bytes_raw: usize,
    /// `elide.max_bytes` as given: it bounds the value's text too (else
    /// [`TEXT_BUDGET`]).
    pub max_text: Option<usize>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_bytes: 8192,
            max_rows: 100,
            max_items: 500,
            max_bytes_raw: 4096,
            max_text: None,
        }
    }
}

impl Budget {
    /// The defaults overridden by a per-call `elide` object. `max_bytes` sets
    /// both byte budgets, clamped to the hard cap; `max_rows`/`max_items` are
    /// taken as given (0 forces elision of any non-empty table/list).
    pub fn from_json(j: Option<&Json>) -> Result<Budget, String> {
        let Some(j) = j.filter(|j| !j.is_null()) else {
            return Ok(Budget::default());
        };
        let Some(o) = j.as_object() else {
            return Err("elide must be an object".into());
        };
        let get = |k: &str| -> Result<Option<u64>, String> {
            match o.get(k) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("elide.{k} must be a non-negative integer")),
            }
        };
        Ok(Elide {
            max_bytes: get("max_bytes")?,
            max_rows: get("max_rows")?,
            max_items: get("max_items")?,
        }
        .budget())
    }

    /// The byte budget of the value's text: `elide.max_bytes` when given,
    /// else [`TEXT_BUDGET`] (head plus tail, docs/rules.md §17).
    pub fn text_limit(&self) -> usize {
        self.max_text.unwrap_or(TEXT_BUDGET)
    }
}

pub use crate::uri::with_path;

/// The top-level encoding of `v` under budget `b`; `uri` addresses `v`.
pub fn elide(v: &Value, b: &Budget, uri: &str) -> Json {
    match elision(v, b, uri) {
        Elided::Whole(w) => serde_json::to_value(w).unwrap_or(Json::Null),
        Elided::Cut(j) => j,
    }
}

/// [`elide`] without building the whole value's tree: a value within the
/// budget is streamed by [`wire::Wire`] into whatever serializes the reply.
pub fn elision<'a>(v: &'a Value, b: &Budget, uri: &'a str) -> Elided<'a> {
    match v {
        Value::Outcome(o) => Elided::Cut(outcome(o, b, uri)),
        _ if over_budget(v, b) => Elided::Cut(elided(v, uri)),
        _ => Elided::Whole(wire::Wire::under(v, uri)),
    }
}

/// A value's encoding under a budget ([`elision`]): the whole value, or its
/// elided form (a ref with a preview, or an outcome with `out` elided).
pub enum Elided<'a> {
    Whole(wire::Wire<'a>),
    Cut(Json),
}

impl serde::Serialize for Elided<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Elided::Whole(w) => w.serialize(s),
            Elided::Cut(j) => j.serialize(s),
        }
    }
}

/// An exec's value as its reply carries it: the stored value, elided under
/// the caller's budget as the reply is written ([`elision`]: within the
/// budget it streams straight into the reply; no tree of it is built).
#[derive(Clone, Debug)]
pub struct ReplyValue {
    pub value: Value,
    pub budget: Budget,
    pub uri: String,
}

impl schemars::JsonSchema for ReplyValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ReplyValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "description": "tagged wire value, e.g. {\"$\":\"int\",\"v\":42}; {\"$\":\"ref\"} when elided"
        })
    }
}

impl serde::Serialize for ReplyValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Deciding (and building a ref's preview) renders the value: a panic
        // there is an encoding error, never a lost connection.
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            elision(&self.value, &self.budget, &self.uri)
        }))
        .map_err(|_| serde::ser::Error::custom("encoding panicked"))?;
        e.serialize(s)
    }
}

/// Whether `v` must travel as a ref.
pub fn over_budget(v: &Value, b: &Budget) -> bool {
    match v {
        Value::List(items) if items.len() > b.max_items => return true,
        Value::Table(rows) if rows.len() > b.max_rows => return true,
        Value::Bytes(bytes) if bytes.len() > b.max_bytes_raw || bytes.is_spilled() => return true,
        _ => {}
    }
    let mut left = b.max_bytes as i64;
    !fits(v, &mut left, 0)
}

/// What a container past [`wire::MAX_DEPTH`] costs: its encoding is a ref.
const DEEP_REF_BYTES: i64 = 160;

fn json_len(j: &Json) -> i64 {
    serde_json::to_vec(j).map(|v| v.len() as i64).unwrap_or(0)
}

fn str_len(s: &str) -> i64 {
    // Quotes plus escapes; exact for the common case without control chars.
    let extra: i64 = s
        .bytes()
        .map(|c| match c {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as i64 + 2 + extra
}

fn digits(n: usize) -> i64 {
    n.to_string().len() as i64
}

/// Subtract the encoded size of `v` from `left` (exact for the container and
/// string kinds); `false` once it went negative.
fn fits(v: &Value, left: &mut i64, depth: usize) -> bool {
    if depth >= wire::MAX_DEPTH && shoal_value::nests(v) {
        *left -= DEEP_REF_BYTES;
        return *left >= 0;
    }
    match v {
        Value::List(items) => {
            *left -= 19 + items.len().saturating_sub(1) as i64;
            for i in items.iter() {
                if *left < 0 || !fits(i, left, depth + 1) {
                    return false;
                }
            }
        }
        Value::Record(r) => {
            *left -= 21 + r.len().saturating_sub(1) as i64;
            for (k, x) in r.iter() {
                *left -= str_len(k) + 1;
                if *left < 0 || !fits(x, left, depth + 1) {
                    return false;
                }
            }
        }
        Value::Table(rows) => {
            *left -= 28 + digits(rows.len());
            let mut cols: indexmap::IndexSet<&str> = indexmap::IndexSet::new();
            for row in rows.iter() {
                for k in row.keys() {
                    cols.insert(k);
                }
            }
            *left -= cols.len().saturating_sub(1) as i64;
            for c in &cols {
                *left -= str_len(c) + 3 + rows.len().saturating_sub(1) as i64;
            }
            for row in rows.iter() {
                for c in &cols {
                    match row.get(*c) {
                        Some(x) => {
                            if !fits(x, left, depth + 1) {
                                return false;
                            }
                        }
                        None => *left -= 12,
                    }
                }
                if *left < 0 {
                    return false;
                }
            }
        }
        Value::Str(s) => *left -= 16 + str_len(s),
        Value::Bytes(b) => *left -= 20 + (b.len() as i64 + 2) / 3 * 4,
        Value::Outcome(o) => {
            *left -= 120 + o.cmd.len() as i64 + o.stderr.len() as i64;
            if *left < 0 {
                return false;
            }
            match &o.out {
                Some(x) => return fits(x, left, depth + 1),
                None => *left -= 17 + o.stdout.len() as i64,
            }
        }
        other => *left -= wire::encoded_len(other) as i64,
    }
    *left >= 0
}

/// Number reported as `n`.
fn count(v: &Value) -> usize {
    match v {
        Value::Table(rows) => rows.len(),
        Value::List(items) => items.len(),
        Value::Bytes(b) => b.len(),
        Value::Str(s) => s.len(),
        Value::Record(r) => r.len(),
        _ => 1,
    }
}

/// The value shown as `preview` (`None` → `{"$":"null"}`).
fn preview_value(v: &Value, items: usize) -> Option<Value> {
    Some(match v {
        Value::Table(rows) => Value::Table(std::sync::Arc::new(
            rows.iter().take(items).cloned().collect(),
        )),
        Value::List(xs) => Value::list(xs.iter().take(items).cloned().collect()),
        Value::Bytes(b) => Value::bytes(b.head(PREVIEW_BYTES).into_owned()),
        Value::Str(s) => Value::str(s.chars().take(PREVIEW_BYTES).collect::<String>()),
        Value::Record(r) => Value::record(
            r.keys()
                .take(items)
                .map(|k| (k.clone(), Value::Null))
                .collect::<Record>(),
        ),
        _ => return None,
    })
}

/// The elided form of `v`.
pub fn elided(v: &Value, uri: &str) -> Json {
    let mut items = PREVIEW_ITEMS;
    let (preview, pv) = loop {
        let pv = preview_value(v, items);
        let enc = pv
            .as_ref()
            .map(|p| wire::encode_under(p, uri))
            .unwrap_or_else(|| wire::encode(&Value::Null));
        if items == 0 || json_len(&enc) <= PREVIEW_MAX_BYTES as i64 {
            break (enc, pv);
        }
        items -= 1;
        if items == 0 {
            break (wire::encode(&Value::Null), None);
        }
    };
    let render_head = pv
        .map(|p| {
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render::block(&p, 80)))
                    .unwrap_or_default();
            let r = strip_ansi(&r);
            let head: Vec<&str> = r.lines().take(RENDER_HEAD_LINES).collect();
            bound_text(&head.join("\n"), 2048, Some(uri))
        })
        .unwrap_or_default();
    let cols = match v {
        Value::Table(rows) => {
            let mut cols = Map::new();
            for row in rows.iter() {
                for (k, x) in row.iter() {
                    if !cols.contains_key(&**k) {
                        cols.insert(k.to_string(), Json::from(x.type_name()));
                    }
                }
            }
            Some(cols)
        }
        _ => None,
    };
    to_json(&RefMarker {
        tag: "ref",
        uri,
        of: v.type_name(),
        n: count(v),
        cols,
        preview,
        render_head,
    })
}

/// What an elided value leaves in its place (docs/protocol.md §3).
#[derive(Serialize)]
struct RefMarker<'a> {
    #[serde(rename = "$")]
    tag: &'static str,
    uri: &'a str,
    /// Its type.
    of: &'static str,
    /// Its rows, items, bytes or characters.
    n: usize,
    /// A table's columns and the type of each (as its first row that has it).
    #[serde(skip_serializing_if = "Option::is_none")]
    cols: Option<Map<String, Json>>,
    /// Its first items, in wire form.
    preview: Json,
    render_head: String,
}

/// An outcome with its envelope kept (`out` elided, `err` bounded).
#[derive(Serialize)]
struct OutcomeMarker<'a> {
    #[serde(rename = "$")]
    tag: &'static str,
    status: Option<i64>,
    ok: bool,
    signal: &'a Option<String>,
    out: Json,
    err: String,
    dur_ns: i64,
    pid: u32,
    cmd: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    span: Option<SpanOut>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

#[derive(Serialize)]
struct SpanOut {
    start: u32,
    end: u32,
}

/// A marker as JSON (plain data: it always encodes).
fn to_json<T: Serialize>(m: &T) -> Json {
    serde_json::to_value(m).unwrap_or(Json::Null)
}

/// An outcome with its envelope kept, `out` elided and `err` bounded.
fn outcome(o: &Outcome, b: &Budget, uri: &str) -> Json {
    let out_uri = with_path(uri, "out");
    let out = shoal_value::methods::outcome_out_unchecked(o);
    let out = elide_inner(&out, b, &out_uri);
    let err_uri = with_path(uri, "stderr");
    let head = o.stderr.head(b.max_bytes.saturating_add(1));
    let err = String::from_utf8_lossy(&head);
    let err = if o.stderr.len() > b.max_bytes {
        let t = bound_text(&err, b.max_bytes, Some(&err_uri));
        if t.len() == err.len() {
            // The head fits as a whole but the full stderr does not.
            format!("{err}\n…(more, fetch via {err_uri})")
        } else {
            t
        }
    } else {
        err.into_owned()
    };
    to_json(&OutcomeMarker {
        tag: "outcome",
        status: o.status,
        ok: o.ok,
        signal: &o.signal,
        out,
        err,
        dur_ns: o.dur_ns,
        pid: o.pid,
        cmd: &o.cmd,
        span: o.span.map(|sp| SpanOut {
            start: sp.start,
            end: sp.end,
        }),
        truncated: o.truncated,
    })
}

fn elide_inner(v: &Value, b: &Budget, uri: &str) -> Json {
    if over_budget(v, b) {
        elided(v, uri)
    } else {
        wire::encode_under(v, uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn ints(n: i64) -> Value {
        Value::list((0..n).map(Value::Int).collect())
    }

    /// A stored reply value writes what [`elide`] builds, within the budget
    /// and over it (a table past `max_rows` becomes a ref).
    #[test]
    fn a_reply_value_streams_what_elide_builds() {
        let rows: Vec<Arc<Record>> = (0..150)
            .map(|i| {
                Arc::new(
                    [("n".into(), Value::Int(i)), ("s".into(), Value::str("x"))]
                        .into_iter()
                        .collect(),
                )
            })
            .collect();
        let table = Value::Table(Arc::new(rows));
        for (v, b) in [
            (ints(3), Budget::default()),
            (
                ints(3),
                Elide {
                    max_items: Some(2),
                    ..Default::default()
                }
                .budget(),
            ),
            (table.clone(), Budget::default()),
            (
                table,
                Elide {
                    max_rows: Some(500),
                    max_bytes: Some(60_000),
                    ..Default::default()
                }
                .budget(),
            ),
        ] {
            let r = ReplyValue {
                value: v.clone(),
                budget: b,
                uri: "shoal://out/4".into(),
            };
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(
                serde_json::from_str::<Json>(&text).unwrap(),
                elide(&v, &b, "shoal://out/4")
            );
        }
    }

    #[test]
    fn budgets() {
        let b = Budget::from_json(Some(&json!({"max_bytes": 5_000_000}))).unwrap();
        assert_eq!(b.max_bytes, HARD_CAP);
        assert_eq!(b.max_bytes_raw, HARD_CAP);
        assert!(Budget::from_json(Some(&json!({"max_rows": -1}))).is_err());
        assert_eq!(Budget::from_json(None).unwrap(), Budget::default());
    }

    #[test]
    fn max_bytes_bounds_the_text_too() {
        assert_eq!(Budget::default().text_limit(), TEXT_BUDGET);
        assert_eq!(TEXT_BUDGET, 12 << 10);
        let b = Budget::from_json(Some(&json!({"max_bytes": 2000}))).unwrap();
        assert_eq!((b.max_text, b.text_limit()), (Some(2000), 2000));
        let b = Budget::from_json(Some(&json!({"max_bytes": 5_000_000}))).unwrap();
        assert_eq!(b.text_limit(), HARD_CAP);
        let b = Budget::from_json(Some(&json!({"max_rows": 3}))).unwrap();
        assert_eq!(b.text_limit(), TEXT_BUDGET);
    }

    #[test]
    fn small_values_inline_big_ones_elide() {
        let b = Budget::default();
        assert_eq!(elide(&Value::Int(3), &b, "u"), json!({"$":"int","v":3}));
        let ten = ints(10);
        assert_eq!(elide(&ten, &b, "u")["$"], json!("list"));
        let tight = Budget::from_json(Some(&json!({"max_items": 5}))).unwrap();
        let r = elide(&ten, &tight, "shoal://out/1");
        assert_eq!(r["$"], json!("ref"));
        assert_eq!(r["n"], json!(10));
        assert_eq!(r["of"], json!("list"));
        assert_eq!(r["preview"]["v"].as_array().unwrap().len(), 5);
        assert!(r["render_head"].as_str().unwrap().contains('0'));

        let big = ints(1_000_000);
        let t0 = std::time::Instant::now();
        let r = elide(&big, &b, "shoal://out/2");
        assert!(t0.elapsed().as_millis() < 1000);
        assert_eq!(r["n"], json!(1_000_000));

        let s = Value::str("x".repeat(20_000));
        assert_eq!(elide(&s, &b, "u")["$"], json!("ref"));
        let loose = Budget::from_json(Some(&json!({"max_bytes": 30_000}))).unwrap();
        assert_eq!(elide(&s, &loose, "u")["$"], json!("str"));
        let huge = Value::str("y".repeat(100_000));
        let capped = Budget::from_json(Some(&json!({"max_bytes": 5_000_000}))).unwrap();
        let r = elide(&huge, &capped, "u");
        assert_eq!(
            (r["$"].clone(), r["of"].clone(), r["n"].clone()),
            (json!("ref"), json!("str"), json!(100_000))
        );
        assert_eq!(r["preview"]["v"].as_str().unwrap().len(), 256);
    }

    #[test]
    fn size_estimate_matches_encoding_at_the_edge() {
        // A record whose encoding is exactly at the limit stays inline.
        let mut r = Record::new();
        for i in 0..50 {
            r.insert(format!("k{i}").into(), Value::str("v\"\n"));
        }
        let v = Value::record(r);
        let len = serde_json::to_vec(&wire::encode(&v)).unwrap().len();
        let at = Budget {
            max_bytes: len,
            ..Budget::default()
        };
        let under = Budget {
            max_bytes: len - 1,
            ..Budget::default()
        };
        assert!(!over_budget(&v, &at), "len {len}");
        assert!(over_budget(&v, &under));
        let t = Value::Table(Arc::new(
            (0..20)
                .map(|i| {
                    let mut r = Record::new();
                    r.insert("name".into(), Value::str(format!("f{i}")));
                    if i % 2 == 0 {
                        r.insert("size".into(), Value::Size(i));
                    }
                    Arc::new(r)
                })
                .collect(),
        ));
        let len = serde_json::to_vec(&wire::encode(&t)).unwrap().len();
        assert!(!over_budget(
            &t,
            &Budget {
                max_bytes: len,
                ..Budget::default()
            }
        ));
        assert!(over_budget(
            &t,
            &Budget {
                max_bytes: len - 1,
                ..Budget::default()
            }
        ));
    }

    #[test]
    fn tables_carry_cols_and_outcomes_keep_their_envelope() {
        let rows: Vec<Arc<Record>> = (0..150)
            .map(|i| {
                let mut r = Record::new();
                r.insert("name".into(), Value::str(format!("file{i}")));
                r.insert("size".into(), Value::Size(i));
                Arc::new(r)
            })
            .collect();
        let t = Value::Table(Arc::new(rows));
        let r = elide(&t, &Budget::default(), "shoal://out/4");
        assert_eq!(r["of"], json!("table"));
        assert_eq!(r["n"], json!(150));
        assert_eq!(r["cols"], json!({"name":"str","size":"size"}));
        assert_eq!(r["preview"]["n"], json!(5));
        assert!(r["render_head"].as_str().unwrap().contains("name"));
        assert!(serde_json::to_vec(&r).unwrap().len() < 4096);

        let o = Outcome {
            status: Some(0),
            ok: true,
            signal: None,
            dur_ns: 1,
            pid: 2,
            cmd: "ls".into(),
            stdout: Default::default(),
            stderr: shoal_value::OutputBytes::from("e\n".repeat(10_000).into_bytes()),
            out: Some(t),
            span: None,
            truncated: false,
            typed: None,
        };
        let j = elide(
            &Value::Outcome(Arc::new(o)),
            &Budget::default(),
            "shoal://out/4",
        );
        assert_eq!(j["$"], json!("outcome"));
        assert_eq!(j["out"]["uri"], json!("shoal://out/4?path=out"));
        let err = j["err"].as_str().unwrap();
        assert!(err.len() <= 8192, "{}", err.len());
        assert!(
            err.ends_with("fetch via shoal://out/4?path=stderr)"),
            "{err}"
        );
    }
}
