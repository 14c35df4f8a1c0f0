//! String methods (docs/rules.md §10).
use std::sync::Arc;

use super::{arity, count_arg, str_arg, stream_of};
use crate::{Args, Host, RegexVal, SResult, ShoalError, Value};

/// Compile a regex for `regex("…")` / `re"…"`; invalid → `arg_error`.
pub fn compile_regex(src: &str) -> SResult<Value> {
    match regex::Regex::new(src) {
        Ok(re) => Ok(Value::Regex(Arc::new(RegexVal {
            source: src.to_string(),
            re,
        }))),
        Err(e) => Err(ShoalError::arg_error(format!("invalid regex `{src}`: {e}"))),
    }
}

/// `lines` semantics: split on `\n`, strip trailing `\r`, no final empty line.
pub fn split_lines(s: &str) -> Vec<Value> {
    if s.is_empty() {
        return Vec::new();
    }
    let body = s.strip_suffix('\n').unwrap_or(s);
    body.split('\n')
        .map(|l| Value::str(l.strip_suffix('\r').unwrap_or(l)))
        .collect()
}

fn regex_of(v: &Value, name: &str) -> SResult<Arc<RegexVal>> {
    match v {
        Value::Regex(r) => Ok(r.clone()),
        Value::Str(s) => match &compile_regex(s)? {
            Value::Regex(r) => Ok(r.clone()),
            _ => Err(ShoalError::type_error("regex")),
        },
        other => Err(ShoalError::type_error(format!(
            ".{name}() expects a regex, got {}",
            other.type_name()
        ))),
    }
}

pub fn call(host: &mut dyn Host, s: &Arc<str>, name: &str, args: &Args) -> SResult<Option<Value>> {
    let _ = host;
    let v = match name {
        "len" | "count" => {
            arity(args, 0, name)?;
            Value::Int(s.chars().count() as i64)
        }
        "is_empty" => {
            arity(args, 0, name)?;
            Value::Bool(s.is_empty())
        }
        "lines" => {
            arity(args, 0, name)?;
            Value::list(split_lines(s))
        }
        "words" => {
            arity(args, 0, name)?;
            Value::list(s.split_whitespace().map(Value::str).collect())
        }
        "chars" => {
            arity(args, 0, name)?;
            Value::list(s.chars().map(|c| Value::str(c.to_string())).collect())
        }
        "trim" => {
            arity(args, 0, name)?;
            Value::str(s.trim())
        }
        "trim_start" => {
            arity(args, 0, name)?;
            Value::str(s.trim_start())
        }
        "trim_end" => {
            arity(args, 0, name)?;
            Value::str(s.trim_end())
        }
        "upper" => {
            arity(args, 0, name)?;
            Value::str(s.to_uppercase())
        }
        "lower" => {
            arity(args, 0, name)?;
            Value::str(s.to_lowercase())
        }
        "split" => {
            arity(args, 1, name)?;
            let sep = args.pos.first().ok_or_else(|| {
                ShoalError::arg_error(".split() requires a separator: `s.split(\",\")`")
            })?;
            match sep {
                Value::Regex(r) => Value::list(r.re.split(s).map(Value::str).collect()),
                other => {
                    let sep = str_arg(other, name)?;
                    if sep.is_empty() {
                        Value::list(s.chars().map(|c| Value::str(c.to_string())).collect())
                    } else {
                        Value::list(s.split(sep).map(Value::str).collect())
                    }
                }
            }
        }
        "starts_with" | "ends_with" => {
            arity(args, 1, name)?;
            let what = if name == "starts_with" {
                "a prefix"
            } else {
                "a suffix"
            };
            let a = args
                .pos
                .first()
                .ok_or_else(|| ShoalError::arg_error(format!(".{name}() requires {what}")))?;
            let a = str_arg(a, name)?;
            Value::Bool(if name == "starts_with" {
                s.starts_with(a)
            } else {
                s.ends_with(a)
            })
        }
        "contains" => {
            arity(args, 1, name)?;
            let a = args
                .pos
                .first()
                .ok_or_else(|| ShoalError::arg_error(".contains() requires a substring"))?;
            match a {
                Value::Regex(r) => Value::Bool(r.re.is_match(s)),
                other => Value::Bool(s.contains(str_arg(other, name)?)),
            }
        }
        "replace" => {
            arity(args, 2, name)?;
            let pat = args.pos.first().ok_or_else(|| {
                ShoalError::arg_error(".replace() requires a pattern and a replacement")
            })?;
            let rep = args.pos.get(1).ok_or_else(|| {
                ShoalError::arg_error(".replace() requires a replacement: `s.replace(pat, rep)`")
            })?;
            let rep = str_arg(rep, name)?;
            match pat {
                Value::Regex(r) => Value::str(r.re.replace_all(s, rep)),
                other => Value::str(s.replace(str_arg(other, name)?, rep)),
            }
        }
        "matches" => {
            arity(args, 1, name)?;
            let re = regex_of(
                args.pos
                    .first()
                    .ok_or_else(|| ShoalError::arg_error(".matches() requires a regex"))?,
                name,
            )?;
            Value::list(re.re.find_iter(s).map(|m| Value::str(m.as_str())).collect())
        }
        "match" => {
            arity(args, 1, name)?;
            let re = regex_of(
                args.pos
                    .first()
                    .ok_or_else(|| ShoalError::arg_error(".match() requires a regex"))?,
                name,
            )?;
            re.re
                .find(s)
                .map(|m| Value::str(m.as_str()))
                .unwrap_or(Value::Null)
        }
        "parse_int" => {
            arity(args, 0, name)?;
            let t = s.trim();
            let t2 = t.replace('_', "");
            match t2.parse::<i64>() {
                Ok(i) if !t.is_empty() => Value::Int(i),
                _ => {
                    return Err(ShoalError::arg_error(format!(
                        "cannot parse {} as int",
                        crate::render::quote_str(s)
                    )))
                }
            }
        }
        "parse_float" => {
            arity(args, 0, name)?;
            match s.trim().parse::<f64>() {
                Ok(f) => Value::Float(f),
                Err(_) => {
                    return Err(ShoalError::arg_error(format!(
                        "cannot parse {} as float",
                        crate::render::quote_str(s)
                    )))
                }
            }
        }
        "take" | "skip" => {
            arity(args, 1, name)?;
            let n = count_arg(
                args.pos
                    .first()
                    .ok_or_else(|| ShoalError::arg_error(format!(".{name}() requires a count")))?,
                name,
            )?;
            if name == "take" {
                Value::str(s.chars().take(n).collect::<String>())
            } else {
                Value::str(s.chars().skip(n).collect::<String>())
            }
        }
        "reverse" => {
            arity(args, 0, name)?;
            Value::str(s.chars().rev().collect::<String>())
        }
        "stream" => {
            arity(args, 0, name)?;
            stream_of(split_lines(s))
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}
