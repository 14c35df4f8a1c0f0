//! Methods on numbers, records, paths, bytes, datetimes, durations; `save`.
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{arity, no_named, str_arg, stream_of, text};
use crate::{json, ops, Args, ErrorCode, GlobVal, Host, Record, SResult, ShoalError, Value};

pub fn number(v: &Value, name: &str, args: &Args) -> SResult<Option<Value>> {
    let out = match name {
        "abs" => {
            arity(args, 0, name)?;
            match v {
                Value::Int(i) => Value::Int(
                    i.checked_abs()
                        .ok_or_else(|| ShoalError::overflow("integer overflow in abs"))?,
                ),
                Value::Float(f) => Value::Float(f.abs()),
                _ => return Ok(None),
            }
        }
        "round" | "floor" | "ceil" => {
            arity(args, 1, name)?;
            let d = match args.pos.first() {
                None => 0,
                Some(Value::Int(d)) => *d,
                Some(other) => {
                    return Err(ShoalError::type_error(format!(
                        ".{name}() digits must be an int, got {}",
                        other.type_name()
                    )))
                }
            };
            match v {
                Value::Int(_) => v.clone(),
                Value::Float(f) => {
                    let op = |x: f64| match name {
                        "round" => x.round(),
                        "floor" => x.floor(),
                        _ => x.ceil(),
                    };
                    if d == 0 {
                        Value::Float(op(*f))
                    } else {
                        let exp =
                            i32::try_from(d).unwrap_or(if d > 0 { i32::MAX } else { i32::MIN });
                        let scale = 10f64.powi(exp);
                        let scaled = f * scale;
                        if !scale.is_finite() || scale == 0.0 || !scaled.is_finite() {
                            Value::Float(*f)
                        } else {
                            Value::Float(op(scaled) / scale)
                        }
                    }
                }
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

pub fn record(r: &Arc<Record>, name: &str, args: &Args) -> SResult<Option<Value>> {
    let out = match name {
        "keys" => {
            arity(args, 0, name)?;
            Value::list(r.keys().map(Value::str).collect())
        }
        "values" => {
            arity(args, 0, name)?;
            Value::list(r.values().cloned().collect())
        }
        "items" => {
            arity(args, 0, name)?;
            Value::list(
                r.iter()
                    .map(|(k, v)| Value::list(vec![Value::str(k), v.clone()]))
                    .collect(),
            )
        }
        "len" | "count" => {
            arity(args, 0, name)?;
            Value::Int(r.len() as i64)
        }
        "is_empty" => {
            arity(args, 0, name)?;
            Value::Bool(r.is_empty())
        }
        "get" => {
            arity(args, 2, name)?;
            let k = args
                .pos
                .first()
                .ok_or_else(|| ShoalError::arg_error(".get() requires a key"))?;
            let k = match k {
                Value::Str(s) => s,
                other => {
                    return Err(ShoalError::type_error(format!(
                        "record .get() key must be a str, got {}",
                        other.type_name()
                    )))
                }
            };
            r.get(&**k)
                .cloned()
                .unwrap_or_else(|| args.pos.get(1).cloned().unwrap_or(Value::Null))
        }
        "contains" => {
            arity(args, 1, name)?;
            let k = args
                .pos
                .first()
                .ok_or_else(|| ShoalError::arg_error(".contains() requires a key"))?;
            Value::Bool(r.contains_key(str_arg(k, name)?))
        }
        "set" => {
            arity(args, 2, name)?;
            let k = args
                .pos
                .first()
                .ok_or_else(|| ShoalError::arg_error(".set() requires a key and a value"))?;
            let k = str_arg(k, name)?;
            let v = args
                .pos
                .get(1)
                .ok_or_else(|| ShoalError::arg_error(".set() requires a value"))?;
            let mut n = r.as_ref().clone();
            n.insert(k.into(), v.clone());
            Value::record(n)
        }
        "merge" => {
            arity(args, 1, name)?;
            match args.pos.first() {
                Some(Value::Record(o)) => {
                    let mut n = r.as_ref().clone();
                    for (k, v) in o.iter() {
                        n.insert(k.clone(), v.clone());
                    }
                    Value::record(n)
                }
                Some(other) => {
                    return Err(ShoalError::type_error(format!(
                        ".merge() expects a record, got {}",
                        other.type_name()
                    )))
                }
                None => return Err(ShoalError::arg_error(".merge() requires a record")),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

fn resolve(host: &dyn Host, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        host.cwd().join(p)
    }
}

/// A whole file, bounded by the session's memory budget.
fn read_file(full: &Path, p: &Path) -> SResult<Vec<u8>> {
    let f = std::fs::File::open(full).map_err(|e| io_err(p, e))?;
    crate::memory::read_bounded(f).map_err(|e| io_err(p, e))?
}

fn io_err(p: &Path, e: std::io::Error) -> ShoalError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ShoalError::not_found(format!("no such file: {}", p.display()))
    } else {
        ShoalError::custom(format!("{}: {e}", p.display()))
    }
}

fn modified_of(md: &std::fs::Metadata) -> Value {
    md.modified()
        .ok()
        .and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map(|ts| Value::DateTime(Arc::new(ts.to_zoned(jiff::tz::TimeZone::system()))))
        .unwrap_or(Value::Null)
}

pub fn path(
    host: &mut dyn Host,
    p: &Arc<PathBuf>,
    name: &str,
    args: &Args,
) -> SResult<Option<Value>> {
    let out = match name {
        "name" => {
            arity(args, 0, name)?;
            p.file_name()
                .map(|n| Value::str(n.to_string_lossy()))
                .unwrap_or(Value::Null)
        }
        "stem" => {
            arity(args, 0, name)?;
            p.file_stem()
                .map(|n| Value::str(n.to_string_lossy()))
                .unwrap_or(Value::Null)
        }
        "ext" => {
            arity(args, 0, name)?;
            p.extension()
                .map(|n| Value::str(n.to_string_lossy()))
                .unwrap_or(Value::Null)
        }
        "parent" => {
            arity(args, 0, name)?;
            match p.parent() {
                Some(q) if !q.as_os_str().is_empty() => Value::path(q),
                _ => Value::Null,
            }
        }
        "join" => {
            arity(args, 1, name)?;
            match args.pos.first() {
                Some(Value::Str(s)) => Value::path(p.join(&**s)),
                Some(Value::Path(q)) => Value::path(p.join(q.as_path())),
                Some(other) => {
                    return Err(ShoalError::type_error(format!(
                        ".join() on a path expects str or path, got {}",
                        other.type_name()
                    )))
                }
                None => return Err(ShoalError::arg_error(".join() requires a path component")),
            }
        }
        "abs" => {
            arity(args, 0, name)?;
            Value::path(resolve(host, p))
        }
        "read" | "read_bytes" | "lines" | "exists" | "is_dir" | "is_file" | "size" | "modified" => {
            if !args.pos.is_empty() || !args.named.is_empty() {
                return Err(ShoalError::arg_error(format!(
                    ".{name}() takes no arguments"
                )));
            }
            let full = resolve(host, p);
            // Leash: even a file's existence is a read of it.
            shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Read, host.cwd(), &full)?;
            match name {
                "exists" => Value::Bool(std::fs::symlink_metadata(&full).is_ok()),
                "is_dir" => Value::Bool(full.is_dir()),
                "is_file" => Value::Bool(full.is_file()),
                "size" => Value::Size(std::fs::metadata(&full).map_err(|e| io_err(p, e))?.len()),
                "modified" => modified_of(&std::fs::metadata(&full).map_err(|e| io_err(p, e))?),
                "read_bytes" => Value::bytes(read_file(&full, p)?),
                _ => {
                    let b = read_file(&full, p)?;
                    let s = String::from_utf8(b).map_err(|_| {
                        ShoalError::new(
                            ErrorCode::Utf8Error,
                            format!("{} is not valid UTF-8", p.display()),
                        )
                    })?;
                    if name == "lines" {
                        Value::list(text::split_lines(&s))
                    } else {
                        Value::str(s)
                    }
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// Expand a glob value to a sorted list of paths (relative to its creation cwd).
pub fn expand_glob(host: &dyn Host, g: &GlobVal) -> SResult<Value> {
    let found = shoal_policy::run_gate::expand_checked(&g.pattern, &g.cwd, g.hidden)?;
    let same = g.cwd == host.cwd();
    Ok(Value::list(
        found
            .into_iter()
            .map(|p| {
                if same || p.is_absolute() {
                    Value::path(p)
                } else {
                    Value::path(g.cwd.join(p))
                }
            })
            .collect(),
    ))
}

pub fn bytes(b: &crate::OutputBytes, name: &str, args: &Args) -> SResult<Option<Value>> {
    let out = match name {
        "len" | "count" => {
            arity(args, 0, name)?;
            Value::Int(b.len() as i64)
        }
        "is_empty" => {
            arity(args, 0, name)?;
            Value::Bool(b.is_empty())
        }
        "stream" if b.is_spilled() => {
            // Lines straight from the spill file, never all in memory.
            arity(args, 0, name)?;
            spilled_lines(b)
        }
        "stream" => {
            arity(args, 0, name)?;
            stream_of(text::split_lines(&String::from_utf8_lossy(b)))
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}
/// A bounded stream of the (lossy UTF-8) lines of spilled bytes, read
/// lazily; same splitting as `split_lines` (`\n`, a trailing `\r` removed).
fn spilled_lines(b: &crate::OutputBytes) -> Value {
    use std::io::BufRead;
    let mut r = std::io::BufReader::with_capacity(256 << 10, b.reader());
    let mut line = Vec::new();
    let mut failed = false;
    let it = std::iter::from_fn(move || {
        line.clear();
        if failed {
            return None;
        }
        match r.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Some(Ok(Value::str(String::from_utf8_lossy(&line))))
            }
            Err(e) => {
                failed = true;
                Some(Err(ShoalError::custom(format!(
                    "cannot read captured output: {e}"
                ))))
            }
        }
    });
    super::make_stream("value", true, Box::new(it))
}

pub fn datetime(z: &jiff::Zoned, name: &str, args: &Args) -> SResult<Option<Value>> {
    let v = match name {
        "year" => z.year() as i64,
        "month" => z.month() as i64,
        "day" => z.day() as i64,
        "hour" => z.hour() as i64,
        "minute" => z.minute() as i64,
        "second" => z.second() as i64,
        _ => return Ok(None),
    };
    arity(args, 0, name)?;
    Ok(Some(Value::Int(v)))
}

pub fn duration(d: i64, name: &str, args: &Args) -> SResult<Option<Value>> {
    let sign = match name {
        "ago" => -1,
        "from_now" => 1,
        _ => return Ok(None),
    };
    arity(args, 0, name)?;
    let ns = if sign < 0 {
        d.checked_neg()
            .ok_or_else(|| ShoalError::overflow("datetime overflow"))?
    } else {
        d
    };
    Ok(Some(Value::DateTime(Arc::new(ops::dt_add(
        &crate::datetime::now(),
        ns,
    )?))))
}

fn path_arg(host: &dyn Host, v: Option<&Value>, name: &str) -> SResult<PathBuf> {
    match v {
        Some(Value::Str(s)) => Ok(resolve(host, Path::new(&**s))),
        Some(Value::Path(p)) => Ok(resolve(host, p)),
        Some(other) => Err(ShoalError::type_error(format!(
            ".{name}() expects a path, got {}",
            other.type_name()
        ))),
        None => Err(ShoalError::arg_error(format!(".{name}() requires a path"))),
    }
}

/// Write `bytes` to `path` (append or truncate); failures → `custom`.
pub fn write_file(path: &Path, bytes: &[u8], append: bool) -> SResult<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true);
    if append {
        opts.append(true);
    } else {
        opts.write(true).truncate(true);
    }
    let mut f = opts
        .open(path)
        .map_err(|e| ShoalError::custom(format!("cannot write {}: {e}", path.display())))?;
    f.write_all(bytes)
        .map_err(|e| ShoalError::custom(format!("cannot write {}: {e}", path.display())))
}

/// Universal `save(path)` / `append(path)`: str/bytes verbatim, others compact JSON.
pub fn save(host: &mut dyn Host, recv: &Value, append: bool, args: &Args) -> SResult<Value> {
    let name = if append { "append" } else { "save" };
    no_named(args, name)?;
    arity(args, 1, name)?;
    let path = path_arg(host, args.pos.first(), name)?;
    shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Write, host.cwd(), &path)?;
    let bytes = match recv {
        Value::Str(s) => s.as_bytes().to_vec(),
        Value::Bytes(b) if b.is_spilled() => {
            // Stream a spilled value instead of loading it.
            let mut opts = std::fs::OpenOptions::new();
            opts.create(true);
            if append {
                opts.append(true);
            } else {
                opts.write(true).truncate(true);
            }
            let err = |e: std::io::Error| {
                ShoalError::custom(format!("cannot write {}: {e}", path.display()))
            };
            let f = opts.open(&path).map_err(err)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            b.write_to(&mut w).map_err(err)?;
            w.flush().map_err(err)?;
            return Ok(recv.clone());
        }
        Value::Bytes(b) => b.to_vec(),
        other => {
            json::materialise_check(other)?;
            json::stringify(other).into_bytes()
        }
    };
    write_file(&path, &bytes, append)?;
    Ok(recv.clone())
}

/// Stream `save`/`append` target path (resolved) plus the value returned.
pub fn stream_target(host: &dyn Host, args: &Args, name: &str) -> SResult<(PathBuf, Value)> {
    arity(args, 1, name)?;
    let p = path_arg(host, args.pos.first(), name)?;
    shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Write, host.cwd(), &p)?;
    Ok((p.clone(), Value::path(p)))
}
