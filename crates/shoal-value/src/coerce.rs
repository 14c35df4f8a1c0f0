//! Word coercion for command-form calls (docs/rules.md §8) and unit-literal
//! parsing helpers (`4kb`, `250ms`, `10:30am`).
use std::sync::Arc;

use crate::{datetime, render, GlobVal, SResult, ShoalError, Value};

fn expected(ty: &str, word: &str) -> ShoalError {
    ShoalError::arg_error(format!("expected {ty}, found {}", render::quote_str(word)))
}

pub use shoal_base::units::{duration_unit_ns, parse_duration, parse_size};

/// Parse a time-of-day literal (`10:30`, `9:05am`, `10:30:15pm`) into seconds
/// since midnight; `None` when invalid.
pub fn parse_time(s: &str) -> Option<u32> {
    let t = s.trim().to_ascii_lowercase();
    let (body, ampm) = if let Some(b) = t.strip_suffix("am") {
        (b, Some(false))
    } else if let Some(b) = t.strip_suffix("pm") {
        (b, Some(true))
    } else {
        (t.as_str(), None)
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.len() < 2
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    if parts[0].len() > 2 || parts[1].len() != 2 || parts.get(2).is_some_and(|p| p.len() != 2) {
        return None;
    }
    let mut h: u32 = parts[0].parse().ok()?;
    let m: u32 = parts[1].parse().ok()?;
    let sec: u32 = parts.get(2).map(|p| p.parse().ok()).unwrap_or(Some(0))?;
    if m > 59 || sec > 59 {
        return None;
    }
    match ampm {
        Some(pm) => {
            if !(1..=12).contains(&h) {
                return None;
            }
            h %= 12;
            if pm {
                h += 12;
            }
        }
        None if h > 23 => return None,
        None => {}
    }
    Some(h * 3600 + m * 60 + sec)
}

/// Coerce a command word to a declared parameter type (docs/rules.md §8): `int float size
/// duration (bare int = seconds) time datetime bool path glob str`. Unknown
/// types pass the word through as a str. Failure → `arg_error`
/// (`expected int, found "abc"`). `cwd` is captured by `glob`.
pub fn coerce_word(word: &str, ty: &str, cwd: &std::path::Path) -> SResult<Value> {
    let w = word.trim();
    Ok(match ty {
        "int" => Value::Int(
            w.replace('_', "")
                .parse::<i64>()
                .map_err(|_| expected(ty, word))?,
        ),
        "float" => Value::Float(w.parse::<f64>().map_err(|_| expected(ty, word))?),
        "size" => Value::Size(parse_size(w).ok_or_else(|| expected(ty, word))?),
        "duration" => Value::Duration(parse_duration(w, true).ok_or_else(|| expected(ty, word))?),
        "time" => Value::Time(parse_time(w).ok_or_else(|| expected(ty, word))?),
        "datetime" => Value::DateTime(Arc::new(
            datetime::parse_datetime_literal(w).map_err(|_| expected(ty, word))?,
        )),
        "bool" => match w {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(expected(ty, word)),
        },
        "path" => Value::path(word),
        "glob" => Value::Glob(Arc::new(GlobVal {
            pattern: word.to_string(),
            cwd: cwd.to_path_buf(),
            hidden: false,
        })),
        _ => Value::str(word),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        let cwd = std::path::Path::new("/");
        let r = |w: &str, t: &str| match coerce_word(w, t, cwd) {
            Ok(v) => render::inline(&v),
            Err(e) => format!("!{}: {}", e.code, e.msg),
        };
        assert_eq!(r("2", "int"), "2");
        assert_eq!(r("abc", "int"), "!arg_error: expected int, found \"abc\"");
        assert_eq!(r("250ms", "duration"), "250ms");
        assert_eq!(r("5", "duration"), "5s");
        assert_eq!(r("1.5kb", "size"), "1.5kb");
        assert_eq!(
            r("notasize", "size"),
            "!arg_error: expected size, found \"notasize\""
        );
        assert_eq!(r("10:00am", "time"), "10:00");
        assert!(r("12am", "time").starts_with('!'));
        assert_eq!(r("12:00am", "time"), "00:00");
        assert_eq!(r("10:30:15pm", "time"), "22:30:15");
        assert_eq!(r("2026-07-09T14:00Z", "datetime"), "2026-07-09T14:00:00Z");
        assert_eq!(r("true", "bool"), "true");
        assert_eq!(r("*.txt", "glob"), "*.txt");
        assert_eq!(parse_size("4kib"), Some(4096));
        assert_eq!(parse_duration("1.5h", false), Some(5_400_000_000_000));
    }
}
