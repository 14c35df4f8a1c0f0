//! Datetime helpers (docs/rules.md §3): `t"…"` literals, now/today.
use jiff::{civil::Date, tz::TimeZone, Timestamp, Zoned};

use crate::{SResult, ShoalError};

/// Parse the body of a `t"…"` literal (or a `datetime` word coercion): a zoned
/// form with a bracketed zone, an RFC 3339 instant (seconds optional; held in
/// UTC), or a bare date (midnight UTC). Invalid → `arg_error`.
pub fn parse_datetime_literal(s: &str) -> SResult<Zoned> {
    let t = s.trim();
    if t.contains('[') {
        if let Ok(z) = t.parse::<Zoned>() {
            return Ok(z);
        }
    } else if t.contains('T') || t.contains('t') || t.contains(' ') {
        if let Ok(ts) = t.parse::<Timestamp>() {
            return Ok(ts.to_zoned(TimeZone::UTC));
        }
    } else if let Ok(d) = t.parse::<Date>() {
        if let Ok(z) = d.to_zoned(TimeZone::UTC) {
            return Ok(z);
        }
    }
    Err(ShoalError::arg_error(format!("invalid datetime `{s}`")))
}

/// The current instant in the system zone (`now`).
pub fn now() -> Zoned {
    Zoned::now()
}

/// Start of the current day in the system zone (`today`).
pub fn today() -> Zoned {
    let n = Zoned::now();
    n.start_of_day().unwrap_or(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;

    #[test]
    fn literals() {
        for (src, want) in [
            ("2026-07-09T14:00Z", "2026-07-09T14:00:00Z"),
            ("2026-07-09T14:00:00-07:00", "2026-07-09T21:00:00Z"),
            ("2026-07-09", "2026-07-09T00:00:00Z"),
            ("2026-07-09T14:00:00+00:00[UTC]", "2026-07-09T14:00:00Z"),
            ("2026-07-09T14:00:00.5Z", "2026-07-09T14:00:00.5Z"),
        ] {
            let z = parse_datetime_literal(src).unwrap();
            assert_eq!(render::datetime(&z), want, "{src}");
        }
        assert_eq!(
            parse_datetime_literal("2026-07-09T14:00Z")
                .unwrap()
                .to_string(),
            "2026-07-09T14:00:00+00:00[UTC]"
        );
        assert!(parse_datetime_literal("nope").is_err());
    }
}
