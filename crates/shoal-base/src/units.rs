//! Unit literals: sizes (`4kb`, `1.5gib`) and durations (`250ms`, `1.5h`).

fn split_number(s: &str) -> Option<(f64, bool, &str)> {
    let end = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num_clean = num.replace('_', "");
    if num_clean.is_empty() {
        return None;
    }
    let is_int = num_clean
        .chars()
        .all(|c| c.is_ascii_digit() || c == '-' || c == '+');
    num_clean.parse::<f64>().ok().map(|f| (f, is_int, unit))
}

/// Parse a size literal (`237b`, `1.5gb`, `4kib`); `None` when invalid.
pub fn parse_size(s: &str) -> Option<u64> {
    let (n, _, unit) = split_number(s.trim())?;
    let mult: f64 = match unit {
        "b" => 1.0,
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
    if !v.is_finite() || !(0.0..18_446_744_073_709_551_615.0).contains(&v) {
        return None;
    }
    Some(v as u64)
}

/// Nanoseconds in one duration unit (`ns` … `w`): the one unit table of the crate (duration
/// literals, shell duration words, `.duration()` coercion).
pub fn duration_unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "d" => 86_400e9,
        "w" => 604_800e9,
        _ => return None,
    })
}

/// Parse a duration literal (`250ms`, `1.5h`, `-90s`); `None` when invalid.
/// With `bare_seconds`, a plain integer means seconds (`5` → `5s`).
pub fn parse_duration(s: &str, bare_seconds: bool) -> Option<i64> {
    let (n, is_int, unit) = split_number(s.trim())?;
    let mult: f64 = match unit {
        "" if bare_seconds && is_int => 1e9,
        u => duration_unit_ns(u)?,
    };
    let v = (n * mult).round();
    if !v.is_finite() || !(-9.2e18..9.2e18).contains(&v) {
        return None;
    }
    Some(v as i64)
}
