//! Command-word parsing the builtins need beyond typed coercion (which is
//! `shoal_value::coerce`): integer words (`head f 5`), compound durations
//! (`sleep 1m30s`, a bare number meaning seconds) and `~` expansion.

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
        let mult = shoal_value::coerce::duration_unit_ns(&rest[num_end..unit_end])?;
        total += n * mult;
        rest = &rest[unit_end..];
    }
    let ns = total.round();
    if !ns.is_finite() || ns > i64::MAX as f64 {
        return None;
    }
    Some(if neg { -(ns as i64) } else { ns as i64 })
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
        assert_eq!(shoal_value::coerce::parse_size("4kb"), Some(4000));
        assert_eq!(shoal_value::coerce::parse_size("1kib"), Some(1024));
        assert_eq!(shoal_value::coerce::parse_size("notasize"), None);
        assert_eq!(shoal_value::coerce::parse_time("10:00am"), Some(36000));
        assert_eq!(shoal_value::coerce::parse_time("12am"), None);
        assert_eq!(
            shoal_value::coerce::parse_time("10:30:15pm"),
            Some(22 * 3600 + 30 * 60 + 15)
        );
        assert_eq!(shoal_value::coerce::parse_time("12:00am"), Some(0));
        assert!(shoal_value::datetime::parse_datetime_literal("2026-07-09T14:00Z").is_ok());
        assert!(shoal_value::datetime::parse_datetime_literal("2026-07-09T14:00:00-07:00").is_ok());
        assert!(shoal_value::datetime::parse_datetime_literal("2026-07-09").is_ok());
        assert!(shoal_value::datetime::parse_datetime_literal(
            "2026-07-09T14:00:00-04:00[America/New_York]"
        )
        .is_ok());
        assert!(shoal_value::datetime::parse_datetime_literal("nope").is_err());
    }
}
