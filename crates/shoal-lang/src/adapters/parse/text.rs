//! The text parsers of whitespace, wide-gap and tab separated columns
//! (`cols`, `cols2`, `tsv`, `tsv-headerless`) and of `key: value` lines
//! (`kv`).

use std::sync::Arc;

use super::{fail, lines, Failure, OutputSpec, Parser, Repeats};
use crate::adapters::types::{from_text, row_template, Ty};
use shoal_value::{Record, Value};

/// Runs of ASCII whitespace separate columns (padding of any width is one
/// gap).
pub(super) fn split_ws<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    let n = line.len();
    let mut i = 0;
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == n {
            return;
        }
        let start = i;
        while i < n && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push(&line[start..i]);
    }
}

pub(super) fn split_tab<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
    out.clear();
    out.extend(line.split(|b| *b == b'\t'));
}

/// Two or more spaces (or a tab) separate columns.
pub(super) fn split_wide<'a>(line: &'a [u8], out: &mut Vec<&'a [u8]>) {
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

pub(super) type Split = for<'a> fn(&'a [u8], &mut Vec<&'a [u8]>);

pub(super) fn columns(spec: &OutputSpec, bytes: &[u8], split: Split) -> Result<Value, Failure> {
    let Some(cols) = spec.ty.columns() else {
        return fail(0, "columns need a table type with columns");
    };
    let ncols = cols.len();
    let mut rows = Vec::with_capacity(row_estimate(bytes));
    // Every row is a copy of one template (the keys hashed once) whose
    // values are then set in column order.
    let template = row_template(cols);
    let mut repeats: Vec<Repeats> = cols.iter().map(|_| Repeats::default()).collect();
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
        let mut r = template.clone();
        for (k, ((name, t), slot)) in cols.iter().zip(r.values_mut()).enumerate() {
            *slot = match fields.get(k) {
                Some(f) if *t == Ty::Str => repeats[k].str(f),
                Some(f) => from_text(f, t).or_else(|e| fail(i + 1, format!("`{name}`: {e}")))?,
                None if t.is_nullable() => Value::Null,
                None => {
                    return fail(
                        i + 1,
                        format!("{} fields where {ncols} columns are declared", fields.len()),
                    )
                }
            };
        }
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

/// How many rows to make room for: the lines of the output, at most a
/// million up front (past that the table grows as it goes).
pub(super) fn row_estimate(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count().min(1 << 20)
}

pub(super) fn tsv_with_header(bytes: &[u8]) -> Result<Value, Failure> {
    let mut it = lines(bytes);
    let Some(head) = it.next() else {
        return Ok(Value::Table(Arc::new(Vec::new())));
    };
    let mut f = Vec::new();
    split_tab(head, &mut f);
    let names: Vec<shoal_value::Key> = f
        .iter()
        .map(|h| String::from_utf8_lossy(h).trim().into())
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
pub(super) fn kv(bytes: &[u8]) -> Result<Value, Failure> {
    let mut r = Record::new();
    let mut last: Option<shoal_value::Key> = None;
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
                let key: shoal_value::Key = key.into();
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
