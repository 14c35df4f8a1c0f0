//! Parsing command words into typed values (language.md §10.12 word
//! coercion, §11.1 builtin coercions) and literal texts that are parsed at
//! run time (`t"…"`).
//!
//! These are deliberately separate functions so they can be swapped for the
//! values module's versions if it grows equivalents.

use std::sync::Arc;

use crate::value::{GlobVal, ShoalError, Value};

/// `42`, `-5`, `1_000`, `0xff`.
pub fn parse_int_word(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if body.is_empty() {
        return None;
    }
    let clean: String = body.chars().filter(|c| *c != '_').collect();
    let lower = clean.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string())
    } else {
        (10, lower.clone())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let signed = if neg { format!("-{digits}") } else { digits };
    i64::from_str_radix(&signed, radix).ok()
}

pub fn parse_float_word(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let ok = t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E' | '_'));
    if !ok {
        return match t {
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            "nan" => Some(f64::NAN),
            _ => None,
        };
    }
    t.replace('_', "").parse::<f64>().ok()
}

/// Split `12.5kb` into (`12.5`, `kb`).
fn split_number_unit(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_digit() || *c == '.' || *c == '_' || (*i == 0 && (*c == '-' || *c == '+')))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() || num == "-" || num == "+" {
        return None;
    }
    let n: f64 = num.replace('_', "").parse().ok()?;
    Some((n, unit))
}

/// `4kb`, `1.5mib`, `100` (bytes).
pub fn parse_size_word(s: &str) -> Option<u64> {
    let (n, unit) = split_number_unit(s)?;
    let mult: f64 = match unit {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v = (n * mult).round();
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return None;
    }
    Some(v as u64)
}

fn duration_unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        "w" => 604800e9,
        _ => return None,
    })
}

/// `250ms`, `1m30s`, `-5s`, `90` (a bare number means seconds).
pub fn parse_duration_word(s: &str) -> Option<i64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t),
    };
    if let Some(secs) = parse_float_word(body) {
        let ns = (secs * 1e9).round();
        if !ns.is_finite() || ns.abs() > i64::MAX as f64 {
            return None;
        }
        return Some(if neg { -(ns as i64) } else { ns as i64 });
    }
    let mut total: f64 = 0.0;
    let mut rest = body;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))?;
        if num_end == 0 {
            return None;
        }
        let unit_end = rest[num_end..]
            .find(|c: char| !c.is_ascii_alphabetic())
            .map(|i| i + num_end)
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].replace('_', "").parse().ok()?;
        let mult = duration_unit_ns(&rest[num_end..unit_end])?;
        total += n * mult;
        rest = &rest[unit_end..];
    }
    let ns = total.round();
    if !ns.is_finite() || ns > i64::MAX as f64 {
        return None;
    }
    Some(if neg { -(ns as i64) } else { ns as i64 })
}

/// `10:30`, `9:05am`, `10:30:15pm` → seconds since midnight.
pub fn parse_time_word(s: &str) -> Option<u32> {
    let t = s.trim().to_ascii_lowercase();
    let (body, ampm) = if let Some(b) = t.strip_suffix("am") {
        (b.to_string(), Some(false))
    } else if let Some(b) = t.strip_suffix("pm") {
        (b.to_string(), Some(true))
    } else {
        (t.clone(), None)
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.len() < 2 || parts.len() > 3 {
        return None;
    }
    let num = |p: &str, max_len: usize| -> Option<u32> {
        if p.is_empty() || p.len() > max_len || !p.chars().all(|c| c.is_ascii_digit()) {
            None
        } else {
            p.parse().ok()
        }
    };
    let mut h = num(parts[0], 2)?;
    if parts[1].len() != 2 {
        return None;
    }
    let m = num(parts[1], 2)?;
    let sec = if parts.len() == 3 {
        if parts[2].len() != 2 {
            return None;
        }
        num(parts[2], 2)?
    } else {
        0
    };
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
        None => {
            if h > 23 {
                return None;
            }
        }
    }
    Some(h * 3600 + m * 60 + sec)
}

/// `t"…"` texts and datetime words: a zoned form with a bracketed zone, an
/// RFC 3339 instant (seconds optional; held in UTC) or a bare date (midnight
/// UTC).
pub fn parse_datetime(s: &str) -> Option<jiff::Zoned> {
    let t = s.trim();
    if t.contains('[') {
        return t.parse::<jiff::Zoned>().ok();
    }
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Some(ts.to_zoned(jiff::tz::TimeZone::UTC));
    }
    if let Ok(d) = t.parse::<jiff::civil::Date>() {
        if !t.contains('T') && !t.contains(' ') {
            return d.to_zoned(jiff::tz::TimeZone::UTC).ok();
        }
    }
    None
}

/// Coerce a command word to a declared type (language.md §10.12). Unknown
/// type names leave the string unchanged.
pub fn coerce_word(word: &str, ty: &str, cwd: &std::path::Path) -> Result<Value, ShoalError> {
    let fail = || ShoalError::arg_error(format!("expected {ty}, found \"{word}\""));
    Ok(match ty {
        "int" => Value::Int(parse_int_word(word).ok_or_else(fail)?),
        "float" => Value::Float(parse_float_word(word).ok_or_else(fail)?),
        "size" => Value::Size(parse_size_word(word).ok_or_else(fail)?),
        "duration" => Value::Duration(parse_duration_word(word).ok_or_else(fail)?),
        "time" => Value::Time(parse_time_word(word).ok_or_else(fail)?),
        "datetime" => Value::DateTime(Arc::new(parse_datetime(word).ok_or_else(fail)?)),
        "bool" => match word {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(fail()),
        },
        "path" => Value::path(expand_tilde(word)),
        "glob" => Value::Glob(Arc::new(GlobVal {
            pattern: word.to_string(),
            cwd: cwd.to_path_buf(),
            hidden: false,
        })),
        _ => Value::str(word),
    })
}

/// `~` and `~/x` → HOME-relative.
pub fn expand_tilde(s: &str) -> String {
    if s == "~" || s.starts_with("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return format!("{}{}", home.to_string_lossy(), &s[1..]);
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(parse_int_word("42"), Some(42));
        assert_eq!(parse_int_word("-5"), Some(-5));
        assert_eq!(parse_int_word("0xff"), Some(255));
        assert_eq!(parse_int_word("abc"), None);
        assert_eq!(parse_duration_word("5"), Some(5_000_000_000));
        assert_eq!(parse_duration_word("250ms"), Some(250_000_000));
        assert_eq!(parse_duration_word("1m30s"), Some(90_000_000_000));
        assert_eq!(parse_duration_word("x"), None);
        assert_eq!(parse_size_word("4kb"), Some(4000));
        assert_eq!(parse_size_word("1kib"), Some(1024));
        assert_eq!(parse_size_word("notasize"), None);
        assert_eq!(parse_time_word("10:00am"), Some(36000));
        assert_eq!(parse_time_word("12am"), None);
        assert_eq!(
            parse_time_word("10:30:15pm"),
            Some(22 * 3600 + 30 * 60 + 15)
        );
        assert_eq!(parse_time_word("12:00am"), Some(0));
        assert!(parse_datetime("2026-07-09T14:00Z").is_some());
        assert!(parse_datetime("2026-07-09T14:00:00-07:00").is_some());
        assert!(parse_datetime("2026-07-09").is_some());
        assert!(parse_datetime("2026-07-09T14:00:00-04:00[America/New_York]").is_some());
        assert!(parse_datetime("nope").is_none());
    }
}
