//! Method dispatch and field access (docs/rules.md §10).
use std::sync::Arc;

use crate::{
    json, render, suggest, Args, ErrorCode, Host, Outcome, OutputBytes, SResult, ShoalError,
    StreamVal, Value,
};

mod coll;
mod other;
mod stream;

mod text;

pub use coll::{range_len, Coll};
pub use stream::{collect_stream, make_stream, PendingStages, Staged as StreamCursor};
pub use text::{compile_regex, split_lines};

/// `recv.name(args)` for every receiver type, outcome forwarding included.
/// The evaluator handles its own intercepts (`.feed`, callable record fields,
/// namespaces) before calling this.
pub fn call_method(host: &mut dyn Host, recv: &Value, name: &str, args: Args) -> SResult<Value> {
    // tap / also see the receiver itself (also outcomes).
    if name == "tap" || name == "also" {
        no_named(&args, name)?;
        let f = args
            .pos
            .first()
            .ok_or_else(|| ShoalError::arg_error(format!("{name} requires a function")))?;
        host.call(f, vec![recv.clone()])?;
        return Ok(recv.clone());
    }
    if let Value::Outcome(o) = recv {
        match name {
            "stdout" => return Ok(Value::Bytes(o.stdout.clone())),
            "stderr" => return Ok(Value::Bytes(o.stderr.clone())),
            _ => {}
        }
        let out = outcome_out_unchecked(o);
        return call_method(host, &out, name, args);
    }
    if let Value::Str(s) = recv {
        if s.starts_with("val:blake3:") {
            return Err(ShoalError::not_found(format!(
                "content reference `{s}` cannot be resolved: no journal/CAS is attached"
            )));
        }
    }
    // Universal methods.
    match name {
        "json" => {
            arity(&args, 0, name)?;
            json::materialise_check(recv)?;
            return Ok(Value::str(json::stringify(recv)));
        }
        "save" | "append" if !matches!(recv, Value::Stream(_)) => {
            return other::save(host, recv, name == "append", &args);
        }
        "str" => {
            arity(&args, 0, name)?;
            return to_str(recv, true);
        }
        "display" => {
            arity(&args, 0, name)?;
            return to_str(recv, false);
        }
        "type_name" => {
            arity(&args, 0, name)?;
            return Ok(Value::str(recv.type_name()));
        }
        _ => {}
    }
    let res = match recv {
        Value::Stream(s) => stream::call(host, s, name, &args),
        Value::Glob(g) if name == "pattern" => {
            arity(&args, 0, name)?;
            return Ok(Value::str(&g.pattern));
        }
        Value::Glob(g) if name == "expand" => {
            arity(&args, 0, name)?;
            return other::expand_glob(host, g);
        }
        Value::Glob(g) => {
            let list = other::expand_glob(host, g)?;
            return call_method(host, &list, name, args);
        }
        Value::List(_) | Value::Table(_) | Value::Range(_) => {
            let c =
                Coll::from_value(recv).ok_or_else(|| ShoalError::type_error("not a collection"))?;
            coll::call(host, &c, name, &args)
        }
        Value::Str(s) => text::call(host, s, name, &args),
        Value::Int(_) | Value::Float(_) => other::number(recv, name, &args),
        Value::Record(r) => other::record(r, name, &args),
        Value::Path(p) => other::path(host, p, name, &args),
        Value::Bytes(b) => other::bytes(b, name, &args),
        Value::DateTime(z) => other::datetime(z, name, &args),
        Value::Duration(d) => other::duration(*d, name, &args),
        Value::Error(e) if crate::names::ERROR_FIELDS.contains(&name) => {
            arity(&args, 0, name)?;
            return error_field(e, name);
        }
        _ => Ok(None),
    }?;
    match res {
        Some(v) => Ok(v),
        None => Err(suggest::unknown_method(recv, name)),
    }
}

/// `recv.name` with the field / zero-argument-method fallback of docs/rules.md §10.
pub fn get_field(host: &mut dyn Host, recv: &Value, name: &str) -> SResult<Value> {
    match recv {
        Value::Record(r) => r
            .get(name)
            .cloned()
            .ok_or_else(|| suggest::no_field(recv, name)),
        Value::Outcome(o) => outcome_field(host, o, name),
        Value::Error(e) => error_field(e, name),
        Value::DateTime(z) => match other::datetime(z, name, &Args::default()) {
            Ok(Some(v)) if crate::names::DATETIME_FIELDS.contains(&name) => Ok(v),
            _ => Err(no_field(recv, name)),
        },
        _ => match call_method(host, recv, name, Args::default()) {
            Err(e) if e.code == ErrorCode::FieldMissing && e.msg.starts_with("unknown method") => {
                Err(no_field(recv, name))
            }
            r => r,
        },
    }
}

fn no_field(recv: &Value, name: &str) -> ShoalError {
    suggest::no_field(recv, name)
}

fn error_field(e: &ShoalError, name: &str) -> SResult<Value> {
    Ok(match name {
        "code" => Value::str(e.code.as_str()),
        "msg" => Value::str(&e.msg),
        "hint" => e.hint.as_ref().map(Value::str).unwrap_or(Value::Null),
        "stderr" => e
            .stderr
            .as_ref()
            .map(|b| Value::Bytes(OutputBytes::from(b.clone())))
            .unwrap_or(Value::Null),
        "status" => e.status.map(Value::Int).unwrap_or(Value::Null),
        _ => {
            return Err(suggest::no_field(
                &Value::Error(std::sync::Arc::new(e.clone())),
                name,
            ))
        }
    })
}

/// Bytes of stderr carried by a `cmd_failed` error (the outcome keeps all).
pub const ERROR_STDERR_LIMIT: usize = 1 << 20;

/// The `cmd_failed` error for a failed outcome (“`CMD` exited with status N”).
pub fn cmd_failed(o: &Outcome) -> ShoalError {
    let msg = match (&o.status, &o.signal) {
        (None, Some(sig)) => format!("`{}` died from {sig}", o.cmd),
        (s, _) => format!("`{}` exited with status {}", o.cmd, s.unwrap_or(-1)),
    };
    let mut e = ShoalError::new(ErrorCode::CmdFailed, msg);
    e.status = o.status;
    e.stderr = Some(o.stderr.bounded(ERROR_STDERR_LIMIT));
    e
}

/// `.out` of an outcome WITHOUT the failure check (method forwarding, docs/rules.md §10):
/// a builtin's structured result, or the external's stdout (lossy UTF-8, one
/// trailing `\n` removed, JSON-sniffed when it starts with `{` or `[`).
pub fn outcome_out_unchecked(o: &Outcome) -> Value {
    if let Some(v) = &o.out {
        return v.clone();
    }
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    if s.ends_with('\n') {
        s.pop();
    }
    let t = s.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        if let Some(v) = json::parse(&s) {
            return v;
        }
    }
    Value::str(s)
}

/// `.out` of an outcome: `cmd_failed` when the outcome failed.
pub fn outcome_out(o: &Outcome) -> SResult<Value> {
    if !o.ok {
        return Err(read_failed(o));
    }
    Ok(outcome_out_unchecked(o))
}

/// `cmd_failed` for reading `.out`/`.err` of a failed outcome, saying what
/// reads it instead.
fn read_failed(o: &Outcome) -> ShoalError {
    cmd_failed(o).with_hint(
        "a failed outcome raises on .out, .err and their fields; read it with .status, .stderr and .stdout",
    )
}

/// Outcome field access (docs/rules.md §8): own fields, else forwarded to `.out`.
pub fn outcome_field(host: &mut dyn Host, o: &Outcome, name: &str) -> SResult<Value> {
    Ok(match name {
        "status" => o.status.map(Value::Int).unwrap_or(Value::Null),
        "ok" => Value::Bool(o.ok),
        "signal" => o.signal.as_ref().map(Value::str).unwrap_or(Value::Null),
        "dur" => Value::Duration(o.dur_ns),
        "pid" => Value::Int(o.pid as i64),
        "cmd" => Value::str(&o.cmd),
        "truncated" => Value::Bool(o.truncated),
        "stdout" => Value::Bytes(o.stdout.clone()),
        "stderr" => Value::Bytes(o.stderr.clone()),
        "out" => outcome_out(o)?,
        "err" => {
            if !o.ok {
                return Err(read_failed(o));
            }
            Value::Bytes(o.stderr.clone())
        }
        _ => {
            let out = outcome_out(o)?;
            return get_field(host, &out, name);
        }
    })
}

/// `.str()` (strict) / `.display()` (lossy) conversions (docs/rules.md §10).
fn to_str(v: &Value, strict: bool) -> SResult<Value> {
    match v {
        Value::Str(_) => Ok(v.clone()),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => Ok(Value::str(render::inline(v))),
        Value::Path(p) => {
            if strict {
                match p.to_str() {
                    Some(s) => Ok(Value::str(s)),
                    None => Err(ShoalError::new(
                        ErrorCode::Utf8Error,
                        "path is not valid UTF-8",
                    )),
                }
            } else {
                Ok(Value::str(p.to_string_lossy()))
            }
        }
        Value::Bytes(b) => {
            if strict {
                match std::str::from_utf8(b) {
                    Ok(s) => Ok(Value::str(s)),
                    Err(e) => Err(ShoalError::new(
                        ErrorCode::Utf8Error,
                        format!("bytes are not valid UTF-8: {e}"),
                    )),
                }
            } else {
                Ok(Value::str(String::from_utf8_lossy(b)))
            }
        }
        Value::Secret(_) => Err(ShoalError::type_error(
            "a secret cannot be converted to a string",
        )),
        other if strict => Err(ShoalError::type_error(format!(
            "cannot convert {} with .str()",
            other.type_name()
        ))
        .with_hint(format!(
            "use interpolation instead: \"{{x}}\" renders a {}",
            other.type_name()
        ))),
        other => Ok(Value::str(render::display(other))),
    }
}

/// Stdin for `value.feed(cmd)` (docs/rules.md §8) without copying: bytes values and
/// text outcomes hand over their (possibly spilled) bytes as they are.
pub fn feed_output(v: &Value) -> SResult<OutputBytes> {
    match v {
        Value::Bytes(b) => Ok(b.clone()),
        Value::Outcome(o) if o.out.is_none() && !json_candidate(&o.stdout.head(4096)) => {
            Ok(o.stdout.clone())
        }
        other => feed_bytes(other).map(OutputBytes::from),
    }
}

/// Whether stdout might be JSON (`.out` sniffing): first non-blank byte is
/// `{` or `[`.
fn json_candidate(head: &[u8]) -> bool {
    matches!(
        head.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{') | Some(b'[') | None
    )
}

/// Stdin bytes for `value.feed(cmd)` (docs/rules.md §8).
pub fn feed_bytes(v: &Value) -> SResult<Vec<u8>> {
    match v {
        Value::Str(s) => Ok(s.as_bytes().to_vec()),
        Value::Bytes(b) => Ok(b.to_vec()),
        Value::Int(_)
        | Value::Float(_)
        | Value::Bool(_)
        | Value::Size(_)
        | Value::Duration(_)
        | Value::DateTime(_)
        | Value::Time(_) => Ok(render::inline(v).into_bytes()),
        Value::List(items) if items.iter().all(|x| matches!(x, Value::Str(_))) => {
            let mut out = Vec::new();
            for x in items.iter() {
                if let Value::Str(s) = x {
                    out.extend_from_slice(s.as_bytes());
                    out.push(b'\n');
                }
            }
            Ok(out)
        }
        Value::List(_) | Value::Record(_) | Value::Table(_) | Value::Range(_) => {
            json::materialise_check(v)?;
            Ok(json::stringify(v).into_bytes())
        }
        Value::Outcome(o) => match outcome_out_unchecked(o) {
            Value::Str(_) => Ok(o.stdout.to_vec()),
            other => feed_bytes(&other),
        },
        Value::Path(_) => Err(ShoalError::type_error(
            "cannot feed a path: a path is a name, not the file's contents",
        )
        .with_hint("feed its contents with `p.read()` or `p.read_bytes()`")),
        Value::Stream(_) => Err(ShoalError::type_error("cannot feed a stream")
            .with_hint("collect it first: `s.collect().feed(...)`")),
        Value::Secret(_)
        | Value::Task(_)
        | Value::Closure(_)
        | Value::Error(_)
        | Value::Glob(_)
        | Value::Regex(_) => Err(ShoalError::new(
            ErrorCode::FeedError,
            format!("cannot feed a {} to a command", v.type_name()),
        )),
        Value::Null | Value::Command(_) => Err(ShoalError::type_error(format!(
            "cannot feed {} to a command",
            v.type_name()
        ))),
    }
}

// ---- argument helpers ------------------------------------------------------

pub(crate) fn no_named(args: &Args, name: &str) -> SResult<()> {
    if let Some((k, _)) = args.named.first() {
        return Err(ShoalError::arg_error(format!(
            "unknown argument `{k}` for .{name}()"
        )));
    }
    Ok(())
}

/// At most `max` positional arguments and no named ones.
pub(crate) fn arity(args: &Args, max: usize, name: &str) -> SResult<()> {
    no_named(args, name)?;
    if args.pos.len() > max {
        return Err(ShoalError::arg_error(format!(
            ".{name}() expected {max} argument(s), got {}",
            args.pos.len()
        )));
    }
    Ok(())
}

/// Required positional `i`.
pub(crate) fn req<'a>(args: &'a Args, i: usize, name: &str, what: &str) -> SResult<&'a Value> {
    args.pos
        .get(i)
        .ok_or_else(|| ShoalError::arg_error(format!(".{name}() requires {what}")))
}

/// A non-negative int count argument (negative or non-int → `type_error`).
pub(crate) fn count_arg(v: &Value, name: &str) -> SResult<usize> {
    match v {
        Value::Int(i) if *i >= 0 => Ok(usize::try_from(*i).unwrap_or(usize::MAX)),
        Value::Int(i) => Err(ShoalError::type_error(format!(
            ".{name}() count must be non-negative, got {i}"
        ))),
        other => Err(ShoalError::type_error(format!(
            ".{name}() expects an int count, got {}",
            other.type_name()
        ))),
    }
}

pub(crate) fn str_arg<'a>(v: &'a Value, name: &str) -> SResult<&'a str> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(ShoalError::type_error(format!(
            ".{name}() expects a str, got {}",
            other.type_name()
        ))),
    }
}

/// Build a bounded stream over `items`.
pub(crate) fn stream_of(items: Vec<Value>) -> Value {
    Value::Stream(Arc::new(StreamVal::new(
        "value",
        true,
        Box::new(items.into_iter().map(Ok)),
    )))
}

#[cfg(test)]
mod tests;
