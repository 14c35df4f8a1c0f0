//! The output parsers: bytes of a tool's stdout → a value of the declared
//! type, or a failure naming the line. Never a half-typed value.

use std::sync::Arc;

use serde_json::Value as J;

use super::types::{from_json, from_text, row_from_json, Ty};
use crate::value::{Record, Value};

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
    parse_with(spec, bytes, true)
}

/// `fast`: JSON goes straight to typed values when it can ([`fastjson`]);
/// without it (tests and the benchmark compare the two) always through a
/// `serde_json` tree.
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
    }
}

/// Lines without their `\n`; no trailing empty line.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let empty = body.is_empty();
    body.split(|b| *b == b'\n').filter(move |_| !empty)
}

fn parse_json(
    spec: &OutputSpec,
    bytes: &[u8],
    keys: &dyn Fn(&str) -> String,
    fast: bool,
) -> Result<Value, Failure> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(match &spec.ty {
            Ty::Table(_) => Value::Table(Arc::new(Vec::new())),
            Ty::List(_) => Value::list(Vec::new()),
            Ty::Record => Value::record(Record::new()),
            _ => Value::Null,
        });
    }
    if let Some(v) = fast
        .then(|| super::fastjson::document(spec, bytes))
        .flatten()
    {
        return Ok(v);
    }
    // The tree path: several documents, and every failure (one wording, one
    // line rule for both paths).
    let mut j = json_documents(spec, bytes)?;
    for k in &spec.select {
        j = match j {
            J::Object(mut m) => match m.remove(k) {
                Some(v) => v,
                None => return fail(0, format!("the document has no key `{k}`")),
            },
            J::Array(a) if k.parse::<usize>().is_ok_and(|i| i < a.len()) => {
                let i: usize = k.parse().unwrap_or(0);
                a.into_iter().nth(i).unwrap_or(J::Null)
            }
            _ => return fail(0, format!("cannot select `{k}` from a non-object")),
        };
    }
    // A single object where a table is declared is a one-row table (go list).
    if let (Ty::Table(_), J::Object(_)) = (&spec.ty, &j) {
        j = J::Array(vec![j]);
    }
    match (&spec.ty, j) {
        (Ty::Table(_) | Ty::List(_), J::Array(items)) => {
            // Row-level errors name the line of the row when it is one per line.
            typed_items(&spec.ty, items.into_iter().map(|x| (0, x)).collect(), keys)
        }
        (ty, j) => from_json(&j, ty, keys).or_else(|e| fail(0, e)),
    }
}

/// One JSON document, or several in a row (`jq '.[]'`, `sqlite3` with two
/// statements, `go list` of several packages): several are a list for
/// `value`, their rows joined for a table, an error otherwise.
fn json_documents(spec: &OutputSpec, bytes: &[u8]) -> Result<J, Failure> {
    let line_of = |offset: usize| {
        bytes[..offset.min(bytes.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    };
    let mut docs = Vec::new();
    let mut it = serde_json::Deserializer::from_slice(bytes).into_iter::<J>();
    loop {
        let at = it.byte_offset();
        match it.next() {
            None => break,
            Some(Ok(d)) => docs.push(d),
            Some(Err(e)) => {
                let line = if e.line() > 0 { e.line() } else { line_of(at) };
                return fail(line, format!("not JSON: {e}"));
            }
        }
    }
    if docs.len() == 1 {
        return Ok(docs.pop().unwrap_or(J::Null));
    }
    match &spec.ty {
        Ty::Value => Ok(J::Array(docs)),
        Ty::Table(_) if spec.select.is_empty() => {
            let mut rows = Vec::new();
            for d in docs {
                match d {
                    J::Array(a) => rows.extend(a),
                    o @ J::Object(_) => rows.push(o),
                    _ => return fail(0, "several JSON documents that are not rows"),
                }
            }
            Ok(J::Array(rows))
        }
        t => fail(
            0,
            format!("{} JSON documents where one {t} is declared", docs.len()),
        ),
    }
}

fn typed_items(
    ty: &Ty,
    items: Vec<(usize, J)>,
    keys: &dyn Fn(&str) -> String,
) -> Result<Value, Failure> {
    match ty {
        Ty::Table(Some(cols)) => {
            let mut rows = Vec::with_capacity(items.len());
            for (n, (line, j)) in items.iter().enumerate() {
                let r = row_from_json(j, cols, keys).or_else(|e| {
                    fail(
                        *line,
                        if *line == 0 {
                            format!("row {n}: {e}")
                        } else {
                            e
                        },
                    )
                })?;
                rows.push(Arc::new(r));
            }
            Ok(Value::Table(Arc::new(rows)))
        }
        Ty::Table(None) | Ty::List(_) => {
            let line = items.first().map(|x| x.0).unwrap_or(0);
            let arr = J::Array(items.into_iter().map(|x| x.1).collect());
            from_json(&arr, ty, keys).or_else(|e| fail(line, e))
        }
        other => fail(0, format!("cannot produce {other} from items")),
    }
}

fn split_ws<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    out.extend(
        line.split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty()),
    );
}

fn split_tab<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    out.extend(line.split(|b| *b == b'\t'));
}

/// Two or more spaces (or a tab) separate columns.
fn split_wide<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    let mut i = 0;
    let n = line.len();
    while i < n && line[i] == b' ' {
        i += 1;
    }
    let mut start = i;
    while i < n {
        let gap = line[i] == b'\t' || (line[i] == b' ' && i + 1 < n && line[i + 1] == b' ');
        if gap {
            out.push(&line[start..i]);
            while i < n && (line[i] == b' ' || line[i] == b'\t') {
                i += 1;
            }
            start = i;
        } else {
            i += 1;
        }
    }
    if start < n {
        out.push(&line[start..n]);
    }
}

/// Join the overflow words of a whitespace-split line into the last column,
/// keeping the original spacing.
fn rejoin<'a>(line: &'a [u8], fields: &[&'a [u8]], ncols: usize) -> &'a [u8] {
    let first = fields[ncols - 1];
    let last = fields[fields.len() - 1];
    let start = first.as_ptr() as usize - line.as_ptr() as usize;
    let end = last.as_ptr() as usize - line.as_ptr() as usize + last.len();
    &line[start..end]
}

type Split = for<'a> fn(&'a [u8], &mut Vec<&'a [u8]>);

fn columns(spec: &OutputSpec, bytes: &[u8], split: Split) -> Result<Value, Failure> {
    let Some(cols) = spec.ty.columns() else {
        return fail(0, "columns need a table type with columns");
    };
    let ncols = cols.len();
    let mut rows = Vec::new();
    // One field buffer for every line.
    let mut fields: Vec<&[u8]> = Vec::with_capacity(ncols + 4);
    for (i, raw) in lines(bytes).enumerate() {
        if i < spec.header {
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        split(line, &mut fields);
        // cols2 rows whose cells are single-space separated (numeric tables)
        if spec.parser == Parser::Cols2 && fields.len() < ncols {
            split_ws(line, &mut fields);
        }
        let joined;
        if fields.len() > ncols {
            joined = if spec.parser == Parser::Cols || spec.parser == Parser::Cols2 {
                rejoin(line, &fields, ncols)
            } else {
                return fail(
                    i + 1,
                    format!("{} fields where {ncols} columns are declared", fields.len()),
                );
            };
            fields.truncate(ncols);
            fields[ncols - 1] = joined;
        }
        let mut r = Record::with_capacity(ncols);
        for (k, (name, t)) in cols.iter().enumerate() {
            let v = match fields.get(k) {
                Some(f) => from_text(f, t).or_else(|e| fail(i + 1, format!("`{name}`: {e}")))?,
                None if t.is_nullable() => Value::Null,
                None => {
                    return fail(
                        i + 1,
                        format!("{} fields where {ncols} columns are declared", fields.len()),
                    )
                }
            };
            r.insert(name.clone(), v);
        }
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

fn tsv_with_header(bytes: &[u8]) -> Result<Value, Failure> {
    let mut it = lines(bytes);
    let Some(head) = it.next() else {
        return Ok(Value::Table(Arc::new(Vec::new())));
    };
    let mut f = Vec::new();
    split_tab(head, &mut f);
    let names: Vec<String> = f
        .iter()
        .map(|h| String::from_utf8_lossy(h).trim().to_string())
        .collect();
    let mut rows = Vec::new();
    for (i, line) in it.enumerate() {
        split_tab(line, &mut f);
        if f.len() != names.len() {
            return fail(
                i + 2,
                format!("{} fields under {} headers", f.len(), names.len()),
            );
        }
        let r: Record = names
            .iter()
            .zip(&f)
            .map(|(n, v)| (n.clone(), Value::str(String::from_utf8_lossy(v))))
            .collect();
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

/// `key: value` / `key=value` lines; a line without a separator continues
/// the previous value (multi-line environment values).
fn kv(bytes: &[u8]) -> Result<Value, Failure> {
    let mut r = Record::new();
    let mut last: Option<String> = None;
    for (i, raw) in lines(bytes).enumerate() {
        let line = String::from_utf8_lossy(raw);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        let eq = line.find('=');
        let colon = line.find(':');
        let sep = match (eq, colon) {
            (Some(e), Some(c)) => Some(e.min(c)),
            (a, b) => a.or(b),
        };
        let key = sep.map(|p| line[..p].trim()).unwrap_or("");
        match sep {
            Some(p) if !key.is_empty() && !key.contains(char::is_whitespace) => {
                let key = key.to_string();
                let val = line[p + 1..].trim_start_matches(' ').to_string();
                r.insert(key.clone(), Value::str(val));
                last = Some(key);
            }
            _ => match &last {
                Some(k) => {
                    let prev = match r.get(k) {
                        Some(Value::Str(s)) => s.to_string(),
                        _ => String::new(),
                    };
                    r.insert(k.clone(), Value::str(format!("{prev}\n{line}")));
                }
                None if line.trim().is_empty() => {}
                None => return fail(i + 1, "expected `key: value` or `key=value`"),
            },
        }
    }
    Ok(Value::record(r))
}

/// Undo git's C-style path quoting (`"a\tb"`, octal escapes).
fn unquote(p: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if p.len() < 2 || p[0] != b'"' || p[p.len() - 1] != b'"' {
        return Ok(std::borrow::Cow::Borrowed(p));
    }
    let body = &p[1..p.len() - 1];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = body.get(i + 1) else {
            return Err("dangling `\\` in a quoted path".into());
        };
        i += 2;
        out.push(match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'v' => 11,
            b'"' => b'"',
            b'\\' => b'\\',
            b'0'..=b'3' => {
                let oct = body.get(i - 1..i + 2).ok_or("short octal escape")?;
                let s = std::str::from_utf8(oct).map_err(|_| "bad octal escape")?;
                i += 2;
                u8::from_str_radix(s, 8).map_err(|_| "bad octal escape")?
            }
            other => return Err(format!("unknown escape `\\{}`", other as char)),
        });
    }
    Ok(std::borrow::Cow::Owned(out))
}

/// The state word of a porcelain XY code.
fn xy_state(xy: &[u8]) -> &'static str {
    let pick = if xy.first().is_some_and(|c| *c != b'.') {
        xy[0]
    } else {
        xy.get(1).copied().unwrap_or(b'.')
    };
    match pick {
        b'M' => "modified",
        b'A' => "added",
        b'D' => "deleted",
        b'R' => "renamed",
        b'C' => "copied",
        b'T' => "typechange",
        b'U' => "unmerged",
        _ => "modified",
    }
}

/// `git status --porcelain=v2` (without `-z`).
fn porcelain_v2(spec: &OutputSpec, bytes: &[u8]) -> Result<Value, Failure> {
    let cols = spec.ty.columns().unwrap_or(&[]);
    let ty_of = |name: &str| {
        cols.iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .unwrap_or(Ty::Str)
    };
    let (path_ty, orig_ty) = (ty_of("path"), ty_of("orig"));
    let mut rows = Vec::new();
    for (i, line) in lines(bytes).enumerate() {
        let n = i + 1;
        let bad = |what: &str| fail::<Value>(n, format!("malformed porcelain v2 record: {what}"));
        let (status, state, path, orig): (&[u8], &str, &[u8], Option<&[u8]>) = match line.first() {
            Some(b'#') | None => continue,
            Some(b'1') => {
                let f: Vec<&[u8]> = line.splitn(9, |b| *b == b' ').collect();
                if f.len() != 9 {
                    bad("ordinary entry needs 9 fields")?;
                }
                (f[1], xy_state(f[1]), f[8], None)
            }
            Some(b'2') => {
                let f: Vec<&[u8]> = line.splitn(10, |b| *b == b' ').collect();
                if f.len() != 10 {
                    bad("rename entry needs 10 fields")?;
                }
                let mut pp = f[9].splitn(2, |b| *b == b'\t');
                let p = pp.next().unwrap_or_default();
                let Some(o) = pp.next() else {
                    return bad("rename entry without its original path");
                };
                (f[1], xy_state(f[1]), p, Some(o))
            }
            Some(b'u') => {
                let f: Vec<&[u8]> = line.splitn(11, |b| *b == b' ').collect();
                if f.len() != 11 {
                    bad("unmerged entry needs 11 fields")?;
                }
                (f[1], "unmerged", f[10], None)
            }
            Some(b'?') if line.starts_with(b"? ") => (&b"??"[..], "untracked", &line[2..], None),
            Some(b'!') if line.starts_with(b"! ") => (&b"!!"[..], "ignored", &line[2..], None),
            Some(_) => return bad("unknown record type"),
        };
        let path = unquote(path).or_else(|e| fail(n, e))?;
        let mut r = Record::with_capacity(4);
        r.insert("status".into(), Value::str(String::from_utf8_lossy(status)));
        r.insert("state".into(), Value::str(state));
        r.insert(
            "path".into(),
            from_text(&path, &path_ty).or_else(|e| fail(n, e))?,
        );
        let o = match orig {
            Some(o) => {
                let o = unquote(o).or_else(|e| fail(n, e))?;
                from_text(&o, &orig_ty).or_else(|e| fail(n, e))?
            }
            None => Value::Null,
        };
        r.insert("orig".into(), o);
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

/// NUL-separated fields, as many per record as the table has columns
/// (`git log -z --pretty=format:%H%x00...`).
fn z_records(spec: &OutputSpec, bytes: &[u8]) -> Result<Value, Failure> {
    let Some(cols) = spec.ty.columns() else {
        return fail(0, "z-records need a table type with columns");
    };
    let body = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    if body.is_empty() {
        return Ok(Value::Table(Arc::new(Vec::new())));
    }
    let fields: Vec<&[u8]> = body.split(|b| *b == 0).collect();
    if fields.len() % cols.len() != 0 {
        let rec = fields.len() / cols.len() + 1;
        return fail(
            rec,
            format!(
                "{} NUL-separated fields are not whole records of {}",
                fields.len(),
                cols.len()
            ),
        );
    }
    let mut rows = Vec::with_capacity(fields.len() / cols.len());
    for (k, chunk) in fields.chunks(cols.len()).enumerate() {
        let mut r = Record::with_capacity(cols.len());
        for ((name, t), f) in cols.iter().zip(chunk) {
            let f = f.strip_prefix(b"\n").unwrap_or(f);
            r.insert(
                name.clone(),
                from_text(f, t).or_else(|e| fail(k + 1, format!("`{name}`: {e}")))?,
            );
        }
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::render;

    fn spec(p: &str, ty: &str) -> OutputSpec {
        OutputSpec {
            parser: Parser::from_name(p).expect("parser"),
            ty: Ty::parse(ty).expect("type"),
            select: vec![],
            keys: vec![],
            header: 1,
        }
    }

    #[test]
    fn cols_join_overflow_into_last_column() {
        let s = spec(
            "cols",
            "table<{filesystem: str, size: size_kb, used: size_kb, avail: size_kb, use_pct: str, mounted: path}>",
        );
        let out = b"Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 100 40 60 40% /\ntmpfs 8 0 8 0% /mnt/my disk\n";
        let v = parse(&s, out).expect("parses");
        assert_eq!(
            render::inline(&v),
            r#"[{filesystem: "/dev/vda", size: 100KB, used: 40KB, avail: 60KB, use_pct: "40%", mounted: /}, {filesystem: "tmpfs", size: 8KB, used: 0B, avail: 8KB, use_pct: "0%", mounted: "/mnt/my disk"}]"#
                .replace("100KB", &render::inline(&Value::Size(102400)))
                .replace("40KB", &render::inline(&Value::Size(40960)))
                .replace("60KB", &render::inline(&Value::Size(61440)))
                .replace("8KB", &render::inline(&Value::Size(8192)))
                .replace("0B", &render::inline(&Value::Size(0)))
                .replace("mounted: /}", &format!("mounted: {}}}", render::inline(&Value::path("/"))))
                .replace("\"/mnt/my disk\"", &render::inline(&Value::path("/mnt/my disk")))
        );
        let e = parse(&s, b"h\n/dev/vda 100 x 60 40% /\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("`used`"), "{e:?}");
    }

    #[test]
    fn cols2_splits_on_wide_gaps_and_falls_back() {
        let s = spec("cols2", "table<{a: str, b: int}>");
        let v = parse(&s, b"A  B\none word  7\n").expect("parses");
        assert_eq!(render::inline(&v), r#"[{a: "one word", b: 7}]"#);
        let s = spec("cols2", "table<{r: int, b: int, c: int}>");
        let v = parse(&s, b"h\n 1 2  3\n").expect("parses");
        assert_eq!(render::inline(&v), "[{r: 1, b: 2, c: 3}]");
    }

    #[test]
    fn porcelain_v2_records() {
        let s = spec(
            "porcelain-v2",
            "table<{status: str, state: str, path: path, orig: path?}>",
        );
        let out = b"# branch.oid abc\n1 .M N... 100644 100644 100644 aa bb src/a.rs\n1 A. N... 000000 100644 100644 00 cc new file.txt\n2 R. N... 100644 100644 100644 aa aa R100 b.rs\ta.rs\nu UU N... 100644 100644 100644 100644 a b c conflict.txt\n? \"tab\\there\"\n! target\n";
        let v = parse(&s, out).expect("parses");
        let Value::Table(rows) = &v else { panic!() };
        let st: Vec<String> = rows.iter().map(|r| render::inline(&r["state"])).collect();
        assert_eq!(
            st,
            [
                "\"modified\"",
                "\"added\"",
                "\"renamed\"",
                "\"unmerged\"",
                "\"untracked\"",
                "\"ignored\""
            ]
        );
        assert_eq!(
            render::inline(&rows[1]["path"]),
            render::inline(&Value::path("new file.txt"))
        );
        assert_eq!(
            render::inline(&rows[2]["orig"]),
            render::inline(&Value::path("a.rs"))
        );
        assert_eq!(
            render::inline(&rows[4]["path"]),
            render::inline(&Value::path("tab\there"))
        );
        let e = parse(&s, b"1 .M N... 100644 src\n").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn z_records_chunk_by_columns() {
        let s = spec(
            "z-records",
            "table<{hash: str, author: str, date: datetime, subject: str}>",
        );
        let out =
            b"h1\0Ann\x002024-01-02T03:04:05+01:00\0first\0h2\0Bob\x002024-01-03T00:00:00Z\0second";
        let v = parse(&s, out).expect("parses");
        let Value::Table(rows) = &v else { panic!() };
        assert_eq!(rows.len(), 2);
        assert!(matches!(rows[0]["date"], Value::DateTime(_)));
        let e = parse(&s, b"h1\0Ann\0nope\0first").unwrap_err();
        assert!(e.msg.contains("`date`"), "{e:?}");
        assert!(parse(&s, b"h1\0Ann").is_err());
    }

    #[test]
    fn json_select_keys_and_empty() {
        let mut s = spec("json", "table<{name: str, size: size}>");
        s.select = vec!["blockdevices".into()];
        let v = parse(&s, br#"{"blockdevices":[{"name":"vda","size":1024}]}"#).expect("parses");
        assert_eq!(
            render::inline(&v),
            format!(
                "[{{name: \"vda\", size: {}}}]",
                render::inline(&Value::Size(1024))
            )
        );
        let mut s = spec("ndjson", "table<{CONTAINER ID: str}>");
        s.keys = vec![("CONTAINER ID".into(), "ID".into())];
        let v = parse(&s, b"{\"ID\":\"ab\"}\n{\"ID\":\"cd\"}\n").expect("parses");
        assert_eq!(
            render::inline(&v),
            r#"[{"CONTAINER ID": "ab"}, {"CONTAINER ID": "cd"}]"#
        );
        let e = parse(&s, b"{\"ID\":\"ab\"}\n{\"Nope\":1}\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse(&spec("json", "record"), b"{\n\"a\": 1,\n}").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(matches!(&parse(&spec("json", "table"), b""), Ok(Value::Table(t)) if t.is_empty()));
    }

    #[test]
    fn kv_and_lines_and_tsv() {
        let v = parse(&spec("kv", "record"), b"A=1\nB: two\nC=x=y\n").expect("parses");
        assert_eq!(render::inline(&v), r#"{A: "1", B: "two", C: "x=y"}"#);
        let v = parse(&spec("lines", "list<str>"), b"a\nb\n").expect("parses");
        assert_eq!(render::inline(&v), r#"["a", "b"]"#);
        let v = parse(&spec("lines", "list<str>"), b"").expect("parses");
        assert_eq!(render::inline(&v), "[]");
        let v = parse(
            &spec("tsv-headerless", "table<{size: size_kb, path: path}>"),
            b"4\t./a\n",
        )
        .expect("parses");
        let Value::Table(rows) = &v else { panic!() };
        assert!(matches!(rows[0]["size"], Value::Size(4096)));
        let e = parse(
            &spec("tsv-headerless", "table<{size: size_kb, path: path}>"),
            b"4\ta\tb\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
    }

    /// The direct JSON path gives the tree path's value whenever that
    /// succeeds, and the tree path's failure otherwise.
    #[test]
    fn fast_json_matches_the_tree_path() {
        let cases: &[(&str, &str, &[&str], &str)] = &[
            ("json", "value", &[], r#"{"b": [1, -2, 3.5, 18446744073709551615, "x\u00e9\n"], "a": {"z": null, "y": true}, "b": 7}"#),
            ("json", "value", &[], r#"[{"n": 1}, {"n": 2, "m": [ {"q": 1} ]}]"#),
            ("json", "value", &[], r#"[{"n": 1}, 2, []]"#),
            ("json", "value", &[], r#"[]"#),
            ("json", "value", &[], r#""just a string""#),
            ("json", "value", &[], "1\n2\n{\"a\":1}"),
            ("json", "record", &[], r#"{"k": [1, {"x": 2}]}"#),
            ("json", "record", &[], r#"[1]"#),
            ("json", "table", &[], r#"[{"a": 1}, {"b": "two"}]"#),
            ("json", "table", &[], r#"{"a": 1}"#),
            ("json", "table", &[], r#"[{"a": 1}, 3]"#),
            ("json", "table<{name: str, version: str}>", &[], r#"[{"name": "a", "version": "1.0", "extra": {"deep": [1, 2]}}, {"version": "2", "name": "b"}]"#),
            ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a", "n": "12"}, {"name": 5, "n": 3}]"#),
            ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a", "n": 1.5}]"#),
            ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a"}]"#),
            ("json", "table<{name: str, n: int?}>", &[], r#"[{"name": "a"}, {"name": "b", "n": null}, {"name": "c", "n": 4, "n": 5}]"#),
            ("json", "table<{name: str, n: int}>", &[], r#"{"name": "single", "n": 1}"#),
            ("json", "table<{name: str, n: int}>", &[], "[{\"name\": \"a\", \"n\": 1}]\n[{\"name\": \"b\", \"n\": 2}]"),
            ("json", "table<{name: str, size: size, kb: size_kb, f: float, ok: bool, p: path, t: datetime, s: str}>", &[],
                r#"[{"name": "x", "size": 10, "kb": 2, "f": 3, "ok": "yes", "p": "/a b", "t": "2024-01-02T03:04:05Z", "s": 1.25},
                    {"name": "y", "size": "11", "kb": "3", "f": "4.5%", "ok": false, "p": "rel", "t": 1700000000, "s": true}]"#),
            ("json", "table<{name: str, size: size}>", &[], r#"[{"name": "x", "size": -1}]"#),
            ("json", "table<{name: str, kids: table<{k: int}>?, tags: list<str>}>", &[], r#"[{"name": "x", "kids": [{"k": 1}], "tags": ["a", "b"]}, {"name": "y", "tags": []}]"#),
            ("json", "list<int>", &[], r#"[1, 2, "3"]"#),
            ("json", "list<int>", &[], r#"[1, 2, "x"]"#),
            ("json", "int", &[], r#"42"#),
            ("json", "table<{name: str}>", &["blockdevices"], r#"{"other": 1, "blockdevices": [{"name": "vda"}]}"#),
            ("json", "table<{name: str}>", &["blockdevices"], r#"{"other": 1}"#),
            ("json", "table<{name: str}>", &["a", "1"], r#"{"a": [[{"name": "no"}], [{"name": "yes"}]]}"#),
            ("json", "table<{name: str}>", &["a", "5"], r#"{"a": [[{"name": "no"}]]}"#),
            ("json", "record", &[], "{\n\"a\": 1,\n}"),
            ("json", "value", &[], "[1, 2"),
            ("ndjson", "table<{id: str}>", &[], "{\"id\": \"a\"}\n\n{\"id\": \"b\", \"x\": 1}\n"),
            ("ndjson", "table<{id: str}>", &[], "{\"id\": \"a\"}\n{\"nope\": 1}\n"),
            ("ndjson", "table", &[], "{\"id\": \"a\"}\n{\"z\": [1]}\n"),
            ("ndjson", "list<int>", &[], "1\n2\n"),
            ("ndjson", "list<int>", &[], "1\nx\n"),
        ];
        for (parser, ty, select, text) in cases {
            let mut s = spec(parser, ty);
            s.select = select.iter().map(|k| k.to_string()).collect();
            let fast = parse_with(&s, text.as_bytes(), true);
            let tree = parse_with(&s, text.as_bytes(), false);
            assert_eq!(
                format!("{fast:?}"),
                format!("{tree:?}"),
                "{parser} {ty} {select:?} {text}"
            );
        }
        // The direct path serves the everyday shapes.
        let s = spec("json", "table<{name: str, version: str}>");
        assert!(
            crate::adapters::fastjson::document(&s, br#"[{"name": "a", "version": "1"}]"#)
                .is_some()
        );
        assert!(
            crate::adapters::fastjson::document(&spec("json", "value"), br#"{"a": [1]}"#).is_some()
        );
        // Column keys: two columns may read one key (the tree path serves).
        let mut s = spec("json", "table<{ID: str, name: str, again: str}>");
        s.keys = vec![("again".into(), "ID".into())];
        let text = br#"[{"ID": "a", "name": "n"}]"#;
        assert_eq!(
            format!("{:?}", parse_with(&s, text, true)),
            format!("{:?}", parse_with(&s, text, false))
        );
    }
}
