//! The parsers of git's machine formats: `git status --porcelain=v2`
//! records and NUL-separated fields (`z-records`, `git log -z`).

use std::sync::Arc;

use super::text::row_estimate;
use super::{fail, lines, Failure, OutputSpec, Repeats};
use crate::adapters::types::{from_text, row_template, Ty};
use shoal_value::{Record, Value};

/// Undo git's C-style path quoting (`"a\tb"`, octal escapes).
pub(super) fn unquote(p: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
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

/// The first `N` space-separated fields of a record, the last holding the
/// rest of the line; `None` when there are fewer.
fn fields<const N: usize>(line: &[u8]) -> Option<[&[u8]; N]> {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut it = line.splitn(N, |b| *b == b' ');
    for slot in &mut out {
        *slot = it.next()?;
    }
    Some(out)
}

/// `git status --porcelain=v2` (without `-z`).
pub(super) fn porcelain_v2(spec: &OutputSpec, bytes: &[u8]) -> Result<Value, Failure> {
    let cols = spec.ty.columns().unwrap_or(&[]);
    let ty_of = |name: &str| {
        cols.iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .unwrap_or(Ty::Str)
    };
    let (path_ty, orig_ty) = (ty_of("path"), ty_of("orig"));
    // The parser is declared only for these columns, in this order.
    let template: Record = ["status", "state", "path", "orig"]
        .into_iter()
        .map(|c| (c.into(), Value::Null))
        .collect();
    let (mut codes, mut states) = (Repeats::default(), Repeats::default());
    let mut rows = Vec::with_capacity(row_estimate(bytes));
    for (i, line) in lines(bytes).enumerate() {
        let n = i + 1;
        let bad = |what: &str| fail::<Value>(n, format!("malformed porcelain v2 record: {what}"));
        let (status, state, path, orig): (&[u8], &str, &[u8], Option<&[u8]>) = match line.first() {
            Some(b'#') | None => continue,
            Some(b'1') => {
                let Some(f) = fields::<9>(line) else {
                    return bad("ordinary entry needs 9 fields");
                };
                (f[1], xy_state(f[1]), f[8], None)
            }
            Some(b'2') => {
                let Some(f) = fields::<10>(line) else {
                    return bad("rename entry needs 10 fields");
                };
                let mut pp = f[9].splitn(2, |b| *b == b'\t');
                let p = pp.next().unwrap_or_default();
                let Some(o) = pp.next() else {
                    return bad("rename entry without its original path");
                };
                (f[1], xy_state(f[1]), p, Some(o))
            }
            Some(b'u') => {
                let Some(f) = fields::<11>(line) else {
                    return bad("unmerged entry needs 11 fields");
                };
                (f[1], "unmerged", f[10], None)
            }
            Some(b'?') if line.starts_with(b"? ") => (&b"??"[..], "untracked", &line[2..], None),
            Some(b'!') if line.starts_with(b"! ") => (&b"!!"[..], "ignored", &line[2..], None),
            Some(_) => return bad("unknown record type"),
        };
        let path = unquote(path).or_else(|e| fail(n, e))?;
        let mut r = template.clone();
        r[0] = codes.str(status);
        r[1] = states.str(state.as_bytes());
        r[2] = from_text(&path, &path_ty).or_else(|e| fail(n, e))?;
        if let Some(o) = orig {
            let o = unquote(o).or_else(|e| fail(n, e))?;
            r[3] = from_text(&o, &orig_ty).or_else(|e| fail(n, e))?;
        }
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}

/// The branch headers of `git status --porcelain=v2 --branch` as one line:
/// `on branch main, up to date with origin/main` (`ahead 1, behind 2 of`,
/// `no commits yet`, `HEAD detached at 1a2b3c4`); `clean` adds that there
/// is nothing to commit. `None` without headers.
pub(super) fn porcelain_summary(bytes: &[u8], clean: bool) -> Option<String> {
    let (mut oid, mut head, mut upstream, mut ab) = (None, None, None, None);
    for line in lines(bytes) {
        let Some(rest) = line.strip_prefix(b"# branch.") else {
            continue;
        };
        let text = String::from_utf8_lossy(rest);
        let (key, value) = text.split_once(' ').unwrap_or((&text, ""));
        let value = value.to_string();
        match key {
            "oid" => oid = Some(value),
            "head" => head = Some(value),
            "upstream" => upstream = Some(value),
            "ab" => ab = Some(value),
            _ => {}
        }
    }
    let head = head?;
    let mut s = if head == "(detached)" {
        let short: String = oid.as_deref().unwrap_or("").chars().take(7).collect();
        format!("HEAD detached at {short}")
    } else {
        format!("on branch {head}")
    };
    if oid.as_deref() == Some("(initial)") {
        s.push_str(", no commits yet");
    }
    if let Some(up) = upstream {
        let mut it = ab.as_deref().unwrap_or("").split_whitespace();
        let ahead = it
            .next()
            .and_then(|a| a.trim_start_matches('+').parse::<u64>().ok());
        let behind = it
            .next()
            .and_then(|b| b.trim_start_matches('-').parse::<u64>().ok());
        match (ahead.unwrap_or(0), behind.unwrap_or(0)) {
            (0, 0) => s.push_str(&format!(", up to date with {up}")),
            (a, b) => s.push_str(&format!(", ahead {a}, behind {b} of {up}")),
        }
    }
    if clean {
        s.push_str("; nothing to commit, working tree clean");
    }
    Some(s)
}

/// NUL-separated fields, as many per record as the table has columns
/// (`git log -z --pretty=format:%H%x00...`).
pub(super) fn z_records(spec: &OutputSpec, bytes: &[u8]) -> Result<Value, Failure> {
    let Some(cols) = spec.ty.columns() else {
        return fail(0, "z-records need a table type with columns");
    };
    let body = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    if body.is_empty() {
        return Ok(Value::Table(Arc::new(Vec::new())));
    }
    let fields: Vec<&[u8]> = body.split(|b| *b == 0).collect();
    if !fields.len().is_multiple_of(cols.len()) {
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
    let template = row_template(cols);
    for (k, chunk) in fields.chunks(cols.len()).enumerate() {
        let mut r = template.clone();
        for (((name, t), f), slot) in cols.iter().zip(chunk).zip(r.values_mut()) {
            let f = f.strip_prefix(b"\n").unwrap_or(f);
            *slot = from_text(f, t).or_else(|e| fail(k + 1, format!("`{name}`: {e}")))?;
        }
        rows.push(Arc::new(r));
    }
    Ok(Value::Table(Arc::new(rows)))
}
