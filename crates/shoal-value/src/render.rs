//! Rendering (docs/rules.md §12).
use std::fmt::Write as _;

use crate::{Outcome, Record, Typed, Value};

/// The canonical one-line form (`value.get format:"inline"`).
pub fn inline(v: &Value) -> String {
    let mut s = String::new();
    write_inline(&mut s, v, 0);
    s
}

/// Containers nested deeper than this render as `[…]` / `{…}` (the value
/// itself is intact and reachable through `value.get` paths): rendering never
/// recurses without bound (docs/protocol.md §10).
pub const MAX_DEPTH: usize = 100;

/// Display form: strings raw, everything else inline (interpolation, `.str()`).
pub fn display(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        _ => inline(v),
    }
}

/// `echo` argument form (docs/rules.md §9): strings and paths raw, null empty, else inline.
pub fn echo_display(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        Value::Path(p) => p.to_string_lossy().into_owned(),
        Value::Null => String::new(),
        _ => inline(v),
    }
}

/// Float render: shortest round-trip decimal, never exponent notation,
/// integral values without `.0`; `inf`, `-inf`, `nan`.
pub fn float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else {
        // Rust's `Display` for f64 is shortest-round-trip and never uses exponents.
        format!("{f}")
    }
}

/// Size render (docs/rules.md §12): `999b`, `1.02kb`, `4.19mb`, `1.1tb`.
pub fn size(n: u64) -> String {
    if n < 1000 {
        return format!("{n}b");
    }
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "tb"),
        (1_000_000_000, "gb"),
        (1_000_000, "mb"),
        (1_000, "kb"),
    ];
    let mut idx = UNITS.iter().position(|(u, _)| *u <= n).unwrap_or(3);
    loop {
        let (unit, name) = UNITS[idx];
        // Two decimals, correctly rounded from the f64 ratio (as the reference).
        let text = format!("{:.2}", n as f64 / unit as f64);
        if idx > 0 && text.parse::<f64>().is_ok_and(|x| x >= 1000.0) {
            idx -= 1;
            continue;
        }
        let text = if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.')
        } else {
            &text
        };
        return format!("{text}{name}");
    }
}

/// Duration render (docs/rules.md §12): `0s`, `1m30s`, `4w2d`, `-1m30s`, `1ms500us`.
pub fn duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    if ns < 0 {
        out.push('-');
    }
    let mut rem = ns.unsigned_abs();
    const S: u64 = 1_000_000_000;
    const UNITS: [(u64, &str); 8] = [
        (7 * 86_400 * S, "w"),
        (86_400 * S, "d"),
        (3_600 * S, "h"),
        (60 * S, "m"),
        (S, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (u, name) in UNITS {
        let c = rem / u;
        if c > 0 {
            let _ = write!(out, "{c}{name}");
            rem -= c * u;
        }
    }
    out
}

/// Time-of-day render: `HH:MM`, or `HH:MM:SS` when seconds are non-zero.
pub fn time(secs: u32) -> String {
    let h = secs / 3600;
    let m = (secs / 60) % 60;
    let s = secs % 60;
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// Datetime inline render: the instant in UTC, RFC 3339 with `Z`.
pub fn datetime(z: &jiff::Zoned) -> String {
    z.timestamp().to_string()
}

/// Quoted, escaped string (`"a\nb"`).
pub fn quote_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_quoted(&mut out, s);
    out
}

fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Is `k` a bare record key (`[A-Za-z_][A-Za-z0-9_]*`)?
pub fn is_ident(k: &str) -> bool {
    let mut chars = k.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn push_key(out: &mut String, k: &str) {
    if is_ident(k) {
        out.push_str(k);
    } else {
        push_quoted(out, k);
    }
}

fn write_record(out: &mut String, r: &Record, depth: usize) {
    if r.is_empty() {
        out.push_str("{}");
        return;
    }
    if depth >= MAX_DEPTH {
        out.push_str("{\u{2026}}");
        return;
    }
    out.push('{');
    for (i, (k, v)) in r.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_key(out, k);
        out.push_str(": ");
        write_inline(out, v, depth + 1);
    }
    out.push('}');
}

/// `outcome(status: 0, ok: true)` / `outcome(signal: SIGSEGV, ok: false)`.
pub fn outcome(o: &Outcome) -> String {
    let mut s = match (&o.status, &o.signal) {
        (None, Some(sig)) => format!("outcome(signal: {sig}, ok: {}", o.ok),
        _ => format!("outcome(status: {}, ok: {}", o.status.unwrap_or(-1), o.ok),
    };
    // Only a cut outcome says so: the usual form is unchanged.
    if o.truncated {
        s.push_str(", truncated: true");
    }
    s.push(')');
    s
}

fn items_empty(v: &Value) -> bool {
    match v {
        Value::List(items) => items.is_empty(),
        Value::Table(rows) => rows.is_empty(),
        _ => true,
    }
}

fn write_inline(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&float(*f)),
        Value::Str(s) => push_quoted(out, s),
        Value::Path(p) => {
            let s = p.to_string_lossy();
            if s.contains(' ') {
                out.push('"');
                out.push_str(&s);
                out.push('"');
            } else {
                out.push_str(&s);
            }
        }
        Value::Glob(g) => out.push_str(&g.pattern),
        Value::Regex(r) => {
            out.push_str("re\"");
            out.push_str(&r.source);
            out.push('"');
        }
        Value::Size(n) => out.push_str(&size(*n)),
        Value::Duration(d) => out.push_str(&duration(*d)),
        Value::DateTime(z) => out.push_str(&datetime(z)),
        Value::Time(t) => out.push_str(&time(*t)),
        Value::Bytes(b) => {
            out.push_str("bytes(");
            out.push_str(&size(b.len() as u64));
            out.push(')');
        }
        Value::List(_) | Value::Table(_) if depth >= MAX_DEPTH && !items_empty(v) => {
            out.push_str("[\u{2026}]");
        }
        Value::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_inline(out, x, depth + 1);
            }
            out.push(']');
        }
        Value::Table(rows) => {
            out.push('[');
            for (i, r) in rows.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_record(out, r, depth + 1);
            }
            out.push(']');
        }
        Value::Record(r) => write_record(out, r, depth),
        Value::Range(r) => {
            let _ = write!(
                out,
                "{}{}{}",
                r.start,
                if r.inclusive { "..=" } else { ".." },
                r.end
            );
        }
        Value::Stream(s) => {
            let _ = write!(out, "stream<{}>", s.label);
        }
        Value::Error(e) => {
            let _ = write!(out, "error({}: {})", e.code, e.msg);
        }
        Value::Outcome(o) => out.push_str(&outcome(o)),
        Value::Task(t) => {
            let _ = write!(out, "task({})", t.id);
        }
        Value::Closure(c) | Value::Command(c) => out.push_str(&c.render()),
        Value::Secret(s) => {
            let _ = write!(out, "secret({})", s.name);
        }
    }
}

/// Bytes of a spilled stdout shown when an outcome is rendered as a block.
pub const RENDER_SPILL_HEAD: usize = 64 << 10;

/// The bytes a builtin result writes on redirect / as its `.stdout` (docs/rules.md §12):
/// str → text plus `\n` unless present; bytes raw; null nothing; else display + `\n`.
pub fn redirect_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::Null => Vec::new(),
        Value::Bytes(b) => b.to_vec(),
        Value::Str(s) => {
            let mut out = s.as_bytes().to_vec();
            if !s.ends_with('\n') {
                out.push(b'\n');
            }
            out
        }
        other => {
            let mut out = display(other).into_bytes();
            out.push(b'\n');
            out
        }
    }
}

/// How a block render lays tables and records out (docs/rules.md §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// A list longer than this renders one item per line.
    pub width: usize,
    /// Tables and records shrink to `width` (a terminal); without it they
    /// take the width their cells need (text for a model).
    pub fit: bool,
    /// Table and record cells longer than this many characters are cut (`…`).
    pub cell_cap: usize,
}

/// Cells of a text render are cut past this many characters.
pub const TEXT_CELL_CAP: usize = 200;

impl Layout {
    /// A terminal `width` columns wide: tables shrink to fit it.
    pub fn terminal(width: usize) -> Layout {
        Layout {
            width,
            fit: true,
            cell_cap: usize::MAX,
        }
    }

    /// Text without a terminal width: whole cells up to [`TEXT_CELL_CAP`];
    /// `width` only decides whether a list fits on one line.
    pub fn text(width: usize) -> Layout {
        Layout {
            width,
            fit: false,
            cell_cap: TEXT_CELL_CAP,
        }
    }
}

/// A block render and whether a cell of it was cut at [`Layout::cell_cap`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    pub text: String,
    pub cells_cut: bool,
}

/// Block form for humans: tables as aligned columns within `width` columns.
/// [`block`] of at most `max_items` rows/items of a list or table, with a
/// closing `…(N more items)` line: a million-item value renders in bounded
/// time (the full value stays reachable through its ref).
pub fn block_limited(v: &Value, width: usize, max_items: usize) -> String {
    block_limited_in(v, Layout::terminal(width), max_items).text
}

/// [`block_limited`] laid out by `layout`.
pub fn block_limited_in(v: &Value, layout: Layout, max_items: usize) -> Block {
    let (shown, more) = match v {
        Value::List(items) if items.len() > max_items => (
            Value::list(items[..max_items].to_vec()),
            items.len() - max_items,
        ),
        Value::Table(rows) if rows.len() > max_items => (
            Value::Table(std::sync::Arc::new(rows[..max_items].to_vec())),
            rows.len() - max_items,
        ),
        _ => return block_in(v, layout),
    };
    let mut out = block_in(&shown, layout);
    out.text.push_str(&format!("\n\u{2026}({more} more items)"));
    out
}

/// Text of a bytes value shown by the block render at most; the rest is
/// counted in a closing `…(N more bytes)` line.
pub const BLOCK_BYTES_TEXT: usize = 64 << 10;

/// Bytes as the block render shows them (docs/protocol.md §9): valid UTF-8 text
/// without NUL renders as that text (a final newline dropped), bounded to
/// [`BLOCK_BYTES_TEXT`] on a character boundary; anything else is binary
/// and stays `bytes(N)`.
fn bytes_block(b: &[u8]) -> String {
    let text = match std::str::from_utf8(b) {
        Ok(t) if !t.contains('\0') => t,
        _ => return inline(&Value::Bytes(b.into())),
    };
    if text.len() <= BLOCK_BYTES_TEXT {
        return text.strip_suffix('\n').unwrap_or(text).to_string();
    }
    let mut cut = BLOCK_BYTES_TEXT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &text[..cut];
    // End on a whole line when there is one.
    let head = head.rfind('\n').map_or(head, |i| &head[..i]);
    format!("{head}\n\u{2026}({} more bytes)", text.len() - head.len())
}

pub fn block(v: &Value, width: usize) -> String {
    block_in(v, Layout::terminal(width)).text
}

/// The block render laid out by `layout`.
pub fn block_in(v: &Value, layout: Layout) -> Block {
    let mut cut = false;
    let text = block_text(v, layout, &mut cut);
    Block {
        text,
        cells_cut: cut,
    }
}

fn block_text(v: &Value, layout: Layout, cut: &mut bool) -> String {
    let width = layout.width;
    match v {
        Value::Str(s) => s.to_string(),
        Value::Bytes(b) => bytes_block(b),
        Value::Table(rows) => {
            let rows: Vec<&Record> = rows.iter().map(|r| r.as_ref()).collect();
            table_block(&rows, layout, cut)
        }
        Value::List(items)
            if !items.is_empty() && items.iter().all(|x| matches!(x, Value::Record(_))) =>
        {
            let rows: Vec<&Record> = items
                .iter()
                .filter_map(|x| match x {
                    Value::Record(r) => Some(r.as_ref()),
                    _ => None,
                })
                .collect();
            table_block(&rows, layout, cut)
        }
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(inline).collect();
            let one = format!("[{}]", parts.join(", "));
            if one.chars().count() <= width {
                one
            } else {
                parts.join("\n")
            }
        }
        Value::Record(r) => {
            if r.is_empty() {
                return "{}".to_string();
            }
            let kw = r.keys().map(|k| k.chars().count()).max().unwrap_or(0);
            let max = if layout.fit {
                width.saturating_sub(kw + 2).max(8)
            } else {
                usize::MAX
            };
            let mut out = String::new();
            for (i, (k, v)) in r.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                let val = capped(&cell(v), layout.cell_cap, cut);
                let val = truncate(&val, max);
                let _ = write!(out, "{k:<kw$}  {val}");
            }
            out
        }
        Value::Outcome(o) => {
            // Nested outcomes are walked in a loop, not by recursion.
            let mut o = o;
            while o.ok {
                match &o.out {
                    Some(Value::Outcome(inner)) => o = inner,
                    Some(out) => match &o.typed {
                        Some(t) => return typed_block(o, t, out, layout, cut),
                        None => return block_text(out, layout, cut),
                    },
                    None => break,
                }
            }
            stdout_text(o)
        }
        other => inline(other),
    }
}

/// `s` cut to `cap` characters (noting the cut in `cut`).
fn capped(s: &str, cap: usize, cut: &mut bool) -> String {
    if s.chars().nth(cap).is_none() {
        return s.to_string();
    }
    *cut = true;
    truncate(s, cap)
}

/// An outcome's stdout as text, without its last newline. A spilled stdout
/// renders as its head plus a note; it is not loaded just to be shown.
fn stdout_text(o: &Outcome) -> String {
    let text = if o.stdout.is_spilled() {
        o.stdout.bounded(RENDER_SPILL_HEAD)
    } else {
        o.stdout
            .read_all()
            .unwrap_or_else(|_| std::sync::Arc::from(&b""[..]))
    };
    let mut s = String::from_utf8_lossy(&text).into_owned();
    if s.ends_with('\n') {
        s.pop();
    }
    s
}

/// An outcome an adapter typed (docs/rules.md §8): its summary line, the
/// value (or the tool's own text), and a last line naming the raw form.
fn typed_block(o: &Outcome, t: &Typed, out: &Value, layout: Layout, cut: &mut bool) -> String {
    let mut s = t.summary.clone().unwrap_or_default();
    let body = if t.render_text {
        stdout_text(o)
    } else if t.summary.is_some() && matches!(out, Value::Table(rows) if rows.is_empty()) {
        String::new()
    } else {
        block_text(out, layout, cut)
    };
    for part in [body, typed_line(t)] {
        if part.is_empty() {
            continue;
        }
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&part);
    }
    s
}

/// `typed by the git adapter; raw text: ^git log -5`.
pub fn typed_line(t: &Typed) -> String {
    format!("typed by the {} adapter; raw text: {}", t.adapter, t.raw)
}

fn cell(v: &Value) -> String {
    match v {
        Value::Str(s) => s.replace('\n', "\\n"),
        Value::Null => String::new(),
        Value::Path(p) => p.to_string_lossy().into_owned(),
        other => inline(other),
    }
}

fn truncate(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// The last component of a path-like cell and the rest before it.
fn split_path(v: Option<&Value>) -> Option<(String, String)> {
    let s = match v? {
        Value::Path(p) => p.to_string_lossy().into_owned(),
        Value::Str(s) => s.to_string(),
        _ => return None,
    };
    let s = s.trim_end_matches('/');
    Some(match s.rfind('/') {
        Some(i) => (s[..i].to_string(), s[i + 1..].to_string()),
        None => (String::new(), s.to_string()),
    })
}

/// A `path` column says nothing a `name` column beside it does not when
/// every row's path is one directory joined with its name (`ls`).
fn path_is_redundant(rows: &[&Record]) -> bool {
    let mut dir: Option<String> = None;
    rows.iter().all(|r| {
        let (Some((d, last)), Some(Value::Str(name))) = (split_path(r.get("path")), r.get("name"))
        else {
            return false;
        };
        let same_dir = dir.get_or_insert_with(|| d.clone()) == &d;
        same_dir && last == **name
    })
}

fn table_block(rows: &[&Record], layout: Layout, cut: &mut bool) -> String {
    if rows.is_empty() {
        return "[]".to_string();
    }
    let width = if layout.fit { layout.width } else { usize::MAX };
    let mut cols: Vec<crate::Key> = Vec::new();
    for r in rows {
        for k in r.keys() {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    if cols.iter().any(|c| &**c == "name") && path_is_redundant(rows) {
        cols.retain(|c| &**c != "path");
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            cols.iter()
                .map(|c| {
                    r.get(c)
                        .map(|v| capped(&cell(v), layout.cell_cap, cut))
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = cols.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    // Shrink the widest columns until the table fits.
    let sep = 2;
    let total = |w: &[usize]| w.iter().sum::<usize>() + sep * w.len().saturating_sub(1);
    while total(&widths) > width {
        let (imax, wmax) = widths
            .iter()
            .enumerate()
            .max_by_key(|(_, w)| **w)
            .map(|(i, w)| (i, *w))
            .unwrap_or((0, 0));
        if wmax <= 4 {
            break;
        }
        widths[imax] = wmax - 1;
    }
    let mut out = String::new();
    let fmt_row = |out: &mut String, vals: &mut dyn ExactSizeIterator<Item = &str>| {
        let mut line = String::new();
        let n = vals.len();
        for (i, v) in vals.enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let t = truncate(v, widths[i]);
            let pad = widths[i].saturating_sub(t.chars().count());
            line.push_str(&t);
            if i + 1 < n {
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    fmt_row(&mut out, &mut cols.iter().map(|c| &**c));
    let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
    fmt_row(&mut out, &mut rule.iter().map(String::as_str));
    for row in &cells {
        fmt_row(&mut out, &mut row.iter().map(String::as_str));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        for (n, s) in [
            (0u64, "0b"),
            (999, "999b"),
            (1000, "1kb"),
            (1020, "1.02kb"),
            (4096, "4.1kb"),
            (1024, "1.02kb"),
            (4 * 1024 * 1024, "4.19mb"),
            (1024 * 1024 * 1024, "1.07gb"),
            (1_099_511_627_776, "1.1tb"),
            (3333, "3.33kb"),
            (1_500_000_000, "1.5gb"),
            (999_999, "1mb"),
            (2_000_000_000_000, "2tb"),
            (500, "500b"),
        ] {
            assert_eq!(size(n), s, "{n}");
        }
    }

    #[test]
    fn durations() {
        const S: i64 = 1_000_000_000;
        for (n, s) in [
            (0, "0s"),
            (90 * S, "1m30s"),
            (30 * 86400 * S, "4w2d"),
            (1_500_000_000, "1s500ms"),
            (36 * 3600 * S, "1d12h"),
            (1_500_000, "1ms500us"),
            (-90 * S, "-1m30s"),
            (90000 * S, "1d1h"),
            (250_000_000, "250ms"),
        ] {
            assert_eq!(duration(n), s);
        }
        let _ = duration(i64::MIN);
    }

    #[test]
    fn floats() {
        for (f, s) in [
            (3.0, "3"),
            (1e9, "1000000000"),
            (0.0000001, "0.0000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (2.5, "2.5"),
        ] {
            assert_eq!(float(f), s);
        }
    }

    #[test]
    fn inline_forms() {
        let mut r = Record::new();
        r.insert("name".into(), Value::str("x"));
        r.insert("a-b".into(), Value::Int(1));
        assert_eq!(inline(&Value::record(r)), "{name: \"x\", \"a-b\": 1}");
        assert_eq!(
            inline(&Value::str("a\n\"b\"\t\\")),
            "\"a\\n\\\"b\\\"\\t\\\\\""
        );
        assert_eq!(inline(&Value::Time(36000)), "10:00");
        assert_eq!(inline(&Value::Time(22 * 3600 + 30 * 60 + 15)), "22:30:15");
        assert_eq!(inline(&Value::path("a b")), "\"a b\"");
        assert_eq!(inline(&Value::bytes(vec![1, 2])), "bytes(2b)");
        assert_eq!(inline(&Value::list(vec![])), "[]");
        assert_eq!(inline(&Value::record(Record::new())), "{}");
        assert_eq!(display(&Value::str("hi")), "hi");
    }
}
