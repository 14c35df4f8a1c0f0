//! The output parsers: bytes of a tool's stdout → a value of the declared
//! type, or a failure naming the line. Never a half-typed value.
//!
//! This file holds the parser names, the output spec and the dispatch;
//! `text.rs` the column and `key: value` parsers, `git.rs` git's porcelain
//! and NUL-separated records, `patch.rs` unified diffs, `json.rs` the `serde_json` tree path of JSON
//! (the direct path is [`super::fastjson`]).

use std::sync::Arc;

use serde_json::Value as J;

use super::types::{from_text, Ty};
use shoal_value::Value;

mod git;
mod json;
mod patch;
#[cfg(test)]
mod tests;
mod text;

use git::{porcelain_summary, porcelain_v2, z_records};
use json::{parse_json, typed_items};
use text::{columns, kv, split_tab, split_wide, split_ws, tsv_with_header};

/// The parsers an adapter may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parser {
    Json,
    Ndjson,
    Lines,
    Cols,
    Cols2,
    Tsv,
    TsvHeaderless,
    Kv,
    PorcelainV2,
    ZRecords,
    Patch,
}

impl Parser {
    pub const ALL: &'static [(&'static str, Parser)] = &[
        ("json", Parser::Json),
        ("ndjson", Parser::Ndjson),
        ("lines", Parser::Lines),
        ("cols", Parser::Cols),
        ("cols2", Parser::Cols2),
        ("tsv", Parser::Tsv),
        ("tsv-headerless", Parser::TsvHeaderless),
        ("kv", Parser::Kv),
        ("porcelain-v2", Parser::PorcelainV2),
        ("z-records", Parser::ZRecords),
        ("patch", Parser::Patch),
    ];

    pub fn from_name(s: &str) -> Option<Parser> {
        Parser::ALL.iter().find(|(n, _)| *n == s).map(|(_, p)| *p)
    }

    pub fn name(self) -> &'static str {
        Parser::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// Which declared types this parser can produce (checked at load time).
    pub fn accepts(self, ty: &Ty) -> Result<(), String> {
        let ok = match self {
            Parser::Json => true,
            Parser::Ndjson => matches!(ty, Ty::Table(_) | Ty::List(_)),
            Parser::Lines => {
                matches!(ty, Ty::List(t) if !matches!(**t, Ty::Record | Ty::Table(_) | Ty::List(_)))
            }
            Parser::Cols | Parser::Cols2 | Parser::TsvHeaderless | Parser::ZRecords => {
                matches!(ty, Ty::Table(Some(_)))
            }
            Parser::Tsv => matches!(ty, Ty::Table(_)),
            Parser::Kv => matches!(ty, Ty::Record),
            // The columns are the parser's (see `patch.rs`).
            Parser::Patch => matches!(ty, Ty::Table(None)),
            Parser::PorcelainV2 => ty.columns().is_some_and(|c| {
                c.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
                    == ["status", "state", "path", "orig"]
            }),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("parser `{}` cannot produce `{ty}`", self.name()))
        }
    }
}

/// How to read one output: the parser, the declared type and its options.
#[derive(Clone, Debug)]
pub struct OutputSpec {
    pub parser: Parser,
    pub ty: Ty,
    /// Dotted key path of the JSON document to type (`blockdevices`).
    pub select: Vec<String>,
    /// Column → JSON key it is read from.
    pub keys: Vec<(String, String)>,
    /// Header lines skipped by `cols`/`cols2`/`tsv`.
    pub header: usize,
    /// The outcome renders as the tool's own text (`lines`, `patch`).
    pub render_text: bool,
}

/// A parse failure: 1-based line (0 when it concerns the whole output).
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub line: usize,
    pub msg: String,
}

fn fail<T>(line: usize, msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure {
        line,
        msg: msg.into(),
    })
}

/// Parse `bytes` by `spec`.
pub fn parse(spec: &OutputSpec, bytes: &[u8]) -> Result<Value, Failure> {
    parse_with(spec, bytes, shoal_base::fast_paths())
}

/// `fast`: JSON goes straight to typed values when it can ([`fastjson`]);
/// without it (`SHOAL_NO_FAST_PATHS=1`, and tests and the benchmark that
/// compare the two) always through a `serde_json` tree.
///
/// [`fastjson`]: super::fastjson
#[doc(hidden)]
pub fn parse_with(spec: &OutputSpec, bytes: &[u8], fast: bool) -> Result<Value, Failure> {
    let keys = |c: &str| -> String {
        spec.keys
            .iter()
            .find(|(k, _)| k == c)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| c.to_string())
    };
    match spec.parser {
        Parser::Json => parse_json(spec, bytes, &keys, fast),
        Parser::Ndjson => {
            if let Some(v) = fast.then(|| super::fastjson::ndjson(spec, bytes)).flatten() {
                return Ok(v);
            }
            // The tree path: the same value, and the failures' wording.
            let mut items = Vec::new();
            for (i, line) in lines(bytes).enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let j: J = serde_json::from_slice(line)
                    .or_else(|e| fail(i + 1, format!("not JSON: {e}")))?;
                items.push((i + 1, j));
            }
            typed_items(&spec.ty, items, &keys)
        }
        Parser::Lines => {
            let Ty::List(inner) = &spec.ty else {
                return fail(0, "lines produce a list");
            };
            let mut out = Vec::new();
            for (i, line) in lines(bytes).enumerate() {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                out.push(from_text(line, inner).or_else(|e| fail(i + 1, e))?);
            }
            Ok(Value::list(out))
        }
        Parser::Cols => columns(spec, bytes, split_ws),
        Parser::Cols2 => columns(spec, bytes, split_wide),
        Parser::Tsv => match &spec.ty {
            Ty::Table(Some(_)) => columns(spec, bytes, split_tab),
            _ => tsv_with_header(bytes),
        },
        Parser::TsvHeaderless => {
            let spec = OutputSpec {
                header: 0,
                ..spec.clone()
            };
            columns(&spec, bytes, split_tab)
        }
        Parser::Kv => kv(bytes),
        Parser::PorcelainV2 => porcelain_v2(spec, bytes),
        Parser::ZRecords => z_records(spec, bytes),
        Parser::Patch => patch::patch(bytes),
    }
}

/// A line the render shows above the typed value: `git status` names its
/// branch (and says a clean tree is clean, where the table is empty).
pub fn summary(spec: &OutputSpec, bytes: &[u8], v: &Value) -> Option<String> {
    match spec.parser {
        Parser::PorcelainV2 => {
            let clean = matches!(v, Value::Table(rows) if rows.is_empty());
            porcelain_summary(bytes, clean)
        }
        _ => None,
    }
}

/// The string cells of one column, shared while they repeat (a user name
/// down `ps`, a status code down `git status`): the last few distinct
/// values are kept, and a column that hardly repeats stops looking.
#[derive(Default)]
struct Repeats {
    recent: Vec<Arc<str>>,
    /// The slot the next new value replaces once `recent` is full.
    next: usize,
    looked: u32,
    hits: u32,
}

impl Repeats {
    const KEPT: usize = 8;

    /// The cell as a string value (invalid UTF-8 replaced, as `str` cells
    /// always are).
    fn str(&mut self, raw: &[u8]) -> Value {
        if self.looked >= 256 && self.hits < self.looked / 4 {
            return match std::str::from_utf8(raw) {
                Ok(text) => Value::str(text),
                Err(_) => Value::str(String::from_utf8_lossy(raw)),
            };
        }
        self.looked = self.looked.saturating_add(1);
        if let Some(s) = self.recent.iter().find(|s| s.as_bytes() == raw) {
            self.hits = self.hits.saturating_add(1);
            return Value::Str(s.clone());
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            return Value::str(String::from_utf8_lossy(raw));
        };
        let s: Arc<str> = Arc::from(text);
        if self.recent.len() < Self::KEPT {
            self.recent.push(s.clone());
        } else {
            self.recent[self.next] = s.clone();
            self.next = (self.next + 1) % Self::KEPT;
        }
        Value::Str(s)
    }
}

/// Lines without their `\n`; no trailing empty line.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let empty = body.is_empty();
    body.split(|b| *b == b'\n').filter(move |_| !empty)
}
