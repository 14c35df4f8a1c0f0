//! `head` (docs/rules.md §9): the first lines (as text) or bytes of one
//! file, with the POSIX spellings of its count. Reads only the file it
//! names, after the Leash check.

use super::{fs_err, gate, to_path, words, Access, BArg, Ctx};
use shoal_value::{SResult, ShoalError, Value};

/// A `head` count: an int or a numeric word.
fn head_count(v: &Value) -> SResult<usize> {
    match v {
        Value::Int(n) if *n >= 0 => Ok(*n as usize),
        Value::Int(_) => Err(ShoalError::arg_error("head: count must not be negative")),
        Value::Str(s) => match words::parse_int_word(s) {
            Some(n) if n >= 0 => Ok(n as usize),
            _ => Err(
                ShoalError::arg_error(format!("head: expected a count, found \"{s}\""))
                    .with_hint("`head FILE N`, `head -n N FILE` or `head -c N FILE` (bytes)"),
            ),
        },
        other => Err(ShoalError::type_error(format!(
            "head: count must be an int, found {}",
            other.type_name()
        ))),
    }
}

/// `head FILE [N]`, and the POSIX forms `head -n N FILE`, `head -N FILE`,
/// `head -nN`, `--lines=N`; `-c N` / `--bytes=N` give the first N bytes.
pub(super) fn head_cmd(args: Vec<BArg>, ctx: &Ctx) -> SResult<Value> {
    let mut vals = Vec::new();
    let mut flag_count: Option<usize> = None;
    let mut want_bytes = false;
    // A flag that takes the next argument as its count: Some(bytes?).
    let mut pending: Option<bool> = None;
    for a in args {
        if let Some(b) = pending.take() {
            let BArg::Val(v) = &a else {
                return Err(ShoalError::arg_error(format!(
                    "head: -{} expects a count",
                    if b { "c" } else { "n" }
                )));
            };
            flag_count = Some(head_count(v)?);
            want_bytes = b;
            continue;
        }
        match a {
            BArg::Val(v) => vals.push(v),
            BArg::Short(s) => {
                let (kind, rest) = match s.as_bytes().first() {
                    Some(b'n') => (Some(false), &s[1..]),
                    Some(b'c') => (Some(true), &s[1..]),
                    Some(d) if d.is_ascii_digit() => (Some(false), s.as_str()),
                    _ => (None, ""),
                };
                let Some(b) = kind else {
                    continue; // -q, -v: nothing to do for one file
                };
                if rest.is_empty() {
                    pending = Some(b);
                } else {
                    flag_count = Some(head_count(&Value::str(rest))?);
                    want_bytes = b;
                }
            }
            BArg::Long { name, value } => {
                let b = match name.as_str() {
                    "lines" => false,
                    "bytes" => true,
                    _ => continue,
                };
                match value {
                    Some(v) => {
                        flag_count = Some(head_count(&v)?);
                        want_bytes = b;
                    }
                    None => pending = Some(b),
                }
            }
        }
    }
    if let Some(b) = pending {
        return Err(ShoalError::arg_error(format!(
            "head: -{} expects a count",
            if b { "c" } else { "n" }
        )));
    }
    let max = if flag_count.is_some() { 1 } else { 2 };
    if vals.is_empty() || vals.len() > max {
        return Err(
            ShoalError::arg_error("head: expected a path and an optional count")
                .with_hint("`head FILE N` or `head -n N FILE`, one file at a time"),
        );
    }
    let p = to_path(&vals[0], "head")?;
    gate(Access::Read, ctx, &p)?;
    let count = match (flag_count, vals.get(1)) {
        (Some(n), _) => n,
        (None, None) => 10,
        (None, Some(v)) => head_count(v)?,
    };
    if want_bytes {
        use std::io::Read;
        let f = std::fs::File::open(ctx.cwd.join(&p)).map_err(|e| fs_err("head", &p, &e))?;
        let mut buf = Vec::new();
        f.take(count as u64)
            .read_to_end(&mut buf)
            .map_err(|e| fs_err("head", &p, &e))?;
        return Ok(Value::bytes(buf));
    }
    let bytes = std::fs::read(ctx.cwd.join(&p)).map_err(|e| fs_err("head", &p, &e))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut raw: Vec<&str> = text.split('\n').collect();
    if text.is_empty() || text.ends_with('\n') {
        raw.pop();
    }
    // The lines as text, like `tail -n N` and `cat`: the same render, and
    // `.lines()` for a list.
    let lines: Vec<&str> = raw
        .into_iter()
        .take(count)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    Ok(Value::str(lines.join("\n")))
}
