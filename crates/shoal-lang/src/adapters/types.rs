//! The type mini-language of adapter outputs and the conversion of parsed
//! text or JSON into typed values.
//!
//! `str int float bool path datetime size size_kb value record`, `T?`,
//! `list<T>`, `table` (columns from the data) and `table<{name: T, ...}>`
//! (column names may contain spaces: `CONTAINER ID: str`).

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use serde_json::Value as J;

use shoal_value::{json, Record, Value};

/// A declared output type.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Str,
    Int,
    Float,
    Bool,
    Path,
    DateTime,
    /// Bytes.
    Size,
    /// Kilobytes, converted to a size.
    SizeKb,
    /// Any value (the JSON mapping of `json.parse`).
    Value,
    Record,
    Nullable(Box<Ty>),
    List(Box<Ty>),
    /// `None`: columns come from the data.
    Table(Option<Vec<(String, Ty)>>),
}

impl Ty {
    /// Parse a type expression; the error is a short phrase and the byte
    /// offset in `s` where it was found.
    pub fn parse(s: &str) -> Result<Ty, (usize, String)> {
        let mut p = TyParser { s, i: 0 };
        p.ws();
        let t = p.ty()?;
        p.ws();
        if p.i != s.len() {
            return Err((p.i, format!("unexpected `{}` after the type", &s[p.i..])));
        }
        Ok(t)
    }

    /// The columns of a table type (with the nullable wrapper removed).
    pub fn columns(&self) -> Option<&[(String, Ty)]> {
        match self {
            Ty::Table(Some(c)) => Some(c),
            Ty::Nullable(t) => t.columns(),
            _ => None,
        }
    }

    pub fn is_nullable(&self) -> bool {
        matches!(self, Ty::Nullable(_) | Ty::Value)
    }
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Str => f.write_str("str"),
            Ty::Int => f.write_str("int"),
            Ty::Float => f.write_str("float"),
            Ty::Bool => f.write_str("bool"),
            Ty::Path => f.write_str("path"),
            Ty::DateTime => f.write_str("datetime"),
            Ty::Size => f.write_str("size"),
            Ty::SizeKb => f.write_str("size_kb"),
            Ty::Value => f.write_str("value"),
            Ty::Record => f.write_str("record"),
            Ty::Nullable(t) => write!(f, "{t}?"),
            Ty::List(t) => write!(f, "list<{t}>"),
            Ty::Table(None) => f.write_str("table"),
            Ty::Table(Some(cols)) => {
                f.write_str("table<{")?;
                for (i, (n, t)) in cols.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{n}: {t}")?;
                }
                f.write_str("}>")
            }
        }
    }
}

struct TyParser<'a> {
    s: &'a str,
    i: usize,
}

impl TyParser<'_> {
    fn ws(&mut self) {
        while self.s[self.i..].starts_with([' ', '\t', '\n']) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(c) {
            self.i += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), (usize, String)> {
        if self.eat(c) {
            Ok(())
        } else {
            Err((self.i, format!("expected `{c}`")))
        }
    }

    fn ty(&mut self) -> Result<Ty, (usize, String)> {
        self.ws();
        let start = self.i;
        let rest = &self.s[self.i..];
        let n = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let word = &rest[..n];
        self.i += n;
        let base = match word {
            "str" => Ty::Str,
            "int" => Ty::Int,
            "float" => Ty::Float,
            "bool" => Ty::Bool,
            "path" => Ty::Path,
            "datetime" => Ty::DateTime,
            "size" => Ty::Size,
            "size_kb" => Ty::SizeKb,
            "value" => Ty::Value,
            "record" => Ty::Record,
            "list" => {
                self.expect('<')?;
                let t = self.ty()?;
                self.expect('>')?;
                Ty::List(Box::new(t))
            }
            "table" => {
                if self.eat('<') {
                    self.expect('{')?;
                    let mut cols: Vec<(String, Ty)> = Vec::new();
                    loop {
                        self.ws();
                        if self.eat('}') {
                            break;
                        }
                        let rest = &self.s[self.i..];
                        let Some(colon) = rest.find(':') else {
                            return Err((self.i, "expected `name: type`".into()));
                        };
                        let name = rest[..colon].trim();
                        if name.is_empty() || name.contains([',', '{', '}', '<', '>']) {
                            return Err((self.i, format!("bad column name `{name}`")));
                        }
                        if cols.iter().any(|(c, _)| c == name) {
                            return Err((self.i, format!("column `{name}` appears twice")));
                        }
                        self.i += colon + 1;
                        let t = self.ty()?;
                        cols.push((name.to_string(), t));
                        if !self.eat(',') {
                            self.expect('}')?;
                            break;
                        }
                    }
                    self.expect('>')?;
                    if cols.is_empty() {
                        return Err((start, "a table type needs at least one column".into()));
                    }
                    Ty::Table(Some(cols))
                } else {
                    Ty::Table(None)
                }
            }
            "" => return Err((start, "expected a type".into())),
            other => return Err((start, format!("unknown type `{other}`"))),
        };
        if self.eat('?') {
            return Ok(Ty::Nullable(Box::new(base)));
        }
        Ok(base)
    }
}

/// Words that mean "no value" in a text column of a nullable type.
fn is_null_word(s: &str) -> bool {
    s.is_empty() || s == "-"
}

/// A row of `cols` with every value null: parsers copy it for each row and
/// set the values in column order, so the keys are hashed once per table
/// rather than once per cell.
pub fn row_template(cols: &[(String, Ty)]) -> Record {
    cols.iter()
        .map(|(n, _)| (n.as_str().into(), Value::Null))
        .collect()
}

/// The text of a field: borrowed when it is UTF-8 (the usual case), with
/// replacement characters otherwise.
fn text(raw: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(raw) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(raw),
    }
}

/// A plain decimal count (an optional `+`, at most 19 ASCII digits, ASCII
/// blanks around): the everyday int and size cell, read without a string.
/// `None` for anything else, which the string path then decides.
fn plain_count(raw: &[u8]) -> Option<(bool, u64)> {
    let t = raw.trim_ascii();
    let (neg, digits) = match t.first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(d - b'0');
    }
    Some((neg, n))
}

/// [`plain_count`] as an int (`None` past `i64`).
fn plain_int(raw: &[u8]) -> Option<i64> {
    let (neg, n) = plain_count(raw)?;
    let n = i64::try_from(n).ok()?;
    Some(if neg { -n } else { n })
}

/// [`plain_count`] as a size (`None` for a sign `-`, which is no count).
fn plain_size(raw: &[u8]) -> Option<u64> {
    match plain_count(raw)? {
        (false, n) => Some(n),
        (true, _) => None,
    }
}

/// A text field converted to `ty`; the error is a short phrase.
pub fn from_text(raw: &[u8], ty: &Ty) -> Result<Value, String> {
    let s = || text(raw);
    Ok(match ty {
        Ty::Nullable(inner) => {
            if is_null_word(s().trim()) {
                Value::Null
            } else {
                from_text(raw, inner)?
            }
        }
        Ty::Str | Ty::Value => Value::str(s()),
        Ty::Path => Value::os_path(OsStr::from_bytes(raw).to_os_string()),
        Ty::Int => match plain_int(raw) {
            Some(i) => Value::Int(i),
            None => {
                let t = s();
                let t = t.trim();
                t.parse::<i64>()
                    .map(Value::Int)
                    .map_err(|_| format!("`{t}` is not an int"))?
            }
        },
        Ty::Float => {
            let t = s();
            let t = t.trim().trim_end_matches('%');
            t.parse::<f64>()
                .map(Value::Float)
                .map_err(|_| format!("`{t}` is not a float"))?
        }
        Ty::Bool => bool_word(s().trim()).ok_or_else(|| format!("`{}` is not a bool", s()))?,
        Ty::DateTime => datetime(s().trim())?,
        Ty::Size => match plain_size(raw) {
            Some(n) => Value::Size(n),
            None => {
                let t = s();
                let t = t.trim();
                Value::Size(
                    t.parse::<u64>()
                        .map_err(|_| format!("`{t}` is not a byte count"))?,
                )
            }
        },
        Ty::SizeKb => {
            let kb = match plain_size(raw) {
                Some(n) => n,
                None => {
                    let t = s();
                    let t = t.trim();
                    t.parse::<u64>()
                        .map_err(|_| format!("`{t}` is not a kilobyte count"))?
                }
            };
            Value::Size(
                kb.checked_mul(1024)
                    .ok_or_else(|| format!("`{}` KiB overflows a size", s().trim()))?,
            )
        }
        Ty::Record | Ty::List(_) | Ty::Table(_) => {
            return Err(format!("a text field cannot be a {ty}"));
        }
    })
}

pub(super) fn bool_word(s: &str) -> Option<Value> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "y" => Some(Value::Bool(true)),
        "false" | "no" | "0" | "n" => Some(Value::Bool(false)),
        _ => None,
    }
}

pub(super) fn datetime(s: &str) -> Result<Value, String> {
    use jiff::{tz::TimeZone, Timestamp, Zoned};
    if let Ok(ts) = s.parse::<Timestamp>() {
        return Ok(Value::DateTime(Arc::new(ts.to_zoned(TimeZone::UTC))));
    }
    if let Ok(z) = s.parse::<Zoned>() {
        return Ok(Value::DateTime(Arc::new(z)));
    }
    if let Ok(secs) = s.parse::<i64>() {
        if let Ok(ts) = Timestamp::from_second(secs) {
            return Ok(Value::DateTime(Arc::new(ts.to_zoned(TimeZone::UTC))));
        }
    }
    Err(format!("`{s}` is not a datetime"))
}

/// A JSON value converted to `ty`. `cols_from` maps a column name to the key
/// it is read from (columns not in it read their own name).
pub fn from_json(j: &J, ty: &Ty, keys: &dyn Fn(&str) -> String) -> Result<Value, String> {
    Ok(match (ty, j) {
        (Ty::Nullable(_), J::Null) => Value::Null,
        (Ty::Nullable(inner), _) => from_json(j, inner, keys)?,
        (Ty::Value, _) => json::from_json(j),
        (Ty::Str, J::String(s)) => Value::str(s),
        (Ty::Str, J::Number(_) | J::Bool(_)) => Value::str(j.to_string()),
        (Ty::Path, J::String(s)) => Value::path(s),
        (Ty::Int, J::Number(n)) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => return Err(format!("`{n}` is not an int")),
        },
        (Ty::Int, J::String(s)) => Value::Int(
            s.trim()
                .parse::<i64>()
                .map_err(|_| format!("`{s}` is not an int"))?,
        ),
        (Ty::Float, J::Number(n)) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        (Ty::Float, J::String(s)) => from_text(s.as_bytes(), ty)?,
        (Ty::Bool, J::Bool(b)) => Value::Bool(*b),
        (Ty::Bool, J::String(s)) => {
            bool_word(s.trim()).ok_or_else(|| format!("`{s}` is not a bool"))?
        }
        (Ty::DateTime, J::String(s)) => datetime(s.trim())?,
        (Ty::DateTime, J::Number(n)) => datetime(&n.to_string())?,
        (Ty::Size, J::Number(n)) => {
            Value::Size(n.as_u64().ok_or_else(|| format!("`{n}` is not a size"))?)
        }
        (Ty::SizeKb, J::Number(n)) => Value::Size(
            n.as_u64()
                .and_then(|k| k.checked_mul(1024))
                .ok_or_else(|| format!("`{n}` is not a kilobyte count"))?,
        ),
        (Ty::Size | Ty::SizeKb, J::String(s)) => from_text(s.as_bytes(), ty)?,
        (Ty::Record, J::Object(_)) => json::from_json(j),
        (Ty::List(inner), J::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                out.push(from_json(it, inner, keys).map_err(|e| format!("item {i}: {e}"))?);
            }
            Value::list(out)
        }
        (Ty::Table(None), J::Array(items)) => {
            let mut rows = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                match &json::from_json(it) {
                    Value::Record(r) => rows.push(r.clone()),
                    _ => return Err(format!("row {i} is not an object")),
                }
            }
            Value::Table(Arc::new(rows))
        }
        (Ty::Table(Some(cols)), J::Array(items)) => {
            let mut rows = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                rows.push(Arc::new(
                    row_from_json(it, cols, keys).map_err(|e| format!("row {i}: {e}"))?,
                ));
            }
            Value::Table(Arc::new(rows))
        }
        (t, other) => {
            return Err(format!("expected {t}, found {}", json_kind(other)));
        }
    })
}

/// One object as a row of declared columns (a missing key is null when the
/// column is nullable, else an error).
pub fn row_from_json(
    j: &J,
    cols: &[(String, Ty)],
    keys: &dyn Fn(&str) -> String,
) -> Result<Record, String> {
    let J::Object(m) = j else {
        return Err(format!("expected an object, found {}", json_kind(j)));
    };
    let mut r = Record::with_capacity(cols.len());
    for (name, t) in cols {
        let key = keys(name);
        let v = match m.get(&key) {
            Some(x) => from_json(x, t, keys).map_err(|e| format!("`{name}`: {e}"))?,
            None if t.is_nullable() => Value::Null,
            None => return Err(format!("missing field `{key}`")),
        };
        r.insert(name.as_str().into(), v);
    }
    Ok(r)
}

fn json_kind(j: &J) -> &'static str {
    match j {
        J::Null => "null",
        J::Bool(_) => "a bool",
        J::Number(_) => "a number",
        J::String(_) => "a string",
        J::Array(_) => "an array",
        J::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_types() {
        for src in [
            "str",
            "int?",
            "list<path>",
            "table<{filesystem: str, size: size_kb, mounted: path}>",
            "table<{CONTAINER ID: str, NAMES: list<str>?}>",
            "table",
            "record",
            "value",
        ] {
            let t = Ty::parse(src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
            assert_eq!(t.to_string(), src);
        }
        for (src, at) in [
            ("strng", 0),
            ("list<int", 8),
            ("table<{a: int, a: str}>", 15),
            ("table<{}>", 0),
            ("int x", 4),
        ] {
            let e = Ty::parse(src).unwrap_err();
            assert_eq!(e.0, at, "{src}: {e:?}");
        }
    }

    /// The byte path of ints and sizes gives what the string path gives,
    /// for every cell it takes and every cell it leaves.
    #[test]
    fn plain_counts_agree_with_the_string_path() {
        let cells = [
            "42",
            " 42 ",
            "\t7\n",
            "+7",
            "-7",
            "007",
            "0",
            "-0",
            "+0",
            "",
            " ",
            "-",
            "+",
            "--1",
            "+-1",
            "1_000",
            "1.5",
            "1e3",
            "0x10",
            "12a",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "1234567890123456789",
            "\u{a0}5",
            "5\u{a0}",
            "\u{b}5",
            "٣",
        ];
        let int = |t: &str| t.trim().parse::<i64>().ok().map(Value::Int);
        let size = |t: &str| t.trim().parse::<u64>().ok().map(Value::Size);
        let kb = |t: &str| {
            t.trim()
                .parse::<u64>()
                .ok()
                .and_then(|k| k.checked_mul(1024))
                .map(Value::Size)
        };
        for c in cells {
            for (ty, want) in [(Ty::Int, int(c)), (Ty::Size, size(c)), (Ty::SizeKb, kb(c))] {
                let got = from_text(c.as_bytes(), &ty).ok();
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "{ty} {c:?}");
            }
        }
        assert_eq!(
            from_text(b"x1", &Ty::Int).unwrap_err(),
            "`x1` is not an int"
        );
        assert_eq!(
            from_text(b" -3 ", &Ty::Size).unwrap_err(),
            "`-3` is not a byte count"
        );
        // Not UTF-8: replacement characters in the message, never a panic.
        assert!(from_text(b"4\xff", &Ty::Int).is_err());
        assert!(
            matches!(from_text(b"a\xffb", &Ty::Str), Ok(Value::Str(ref s)) if &**s == "a\u{fffd}b")
        );
    }

    #[test]
    fn a_row_template_has_the_columns_in_order() {
        let Ty::Table(Some(cols)) = Ty::parse("table<{b: int, a: str?, c: path}>").expect("type")
        else {
            panic!("a table type");
        };
        let r = row_template(&cols);
        assert_eq!(r.keys().map(|k| &**k).collect::<Vec<_>>(), ["b", "a", "c"]);
        assert!(r.values().all(|v| matches!(v, Value::Null)));
        assert_eq!(r.get("a").map(|v| v.type_name()), Some("null"));
    }

    #[test]
    fn text_fields() {
        assert!(matches!(from_text(b"42", &Ty::Int), Ok(Value::Int(42))));
        assert!(matches!(
            from_text(b"4", &Ty::SizeKb),
            Ok(Value::Size(4096))
        ));
        assert!(matches!(
            from_text(b"-", &Ty::Nullable(Box::new(Ty::Path))),
            Ok(Value::Null)
        ));
        assert!(from_text(b"x", &Ty::Int).is_err());
        assert!(matches!(
            from_text(b"2024-01-02T03:04:05+01:00", &Ty::DateTime),
            Ok(Value::DateTime(_))
        ));
        assert!(matches!(
            from_text(b"12.5%", &Ty::Float),
            Ok(Value::Float(f)) if f == 12.5
        ));
    }
}
