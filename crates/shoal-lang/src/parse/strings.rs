//! String literals, which lex identically in EXPR and CMD mode: `"…"` with
//! escapes and `{expr}` holes, raw `'…'`, dedented `"""…"""` / `'''…'''`, plus
//! the raw payload scanning of interpreter blocks (`sh { … }`). Holes are kept as
//! source ranges; the parser parses them in place so spans stay exact.

use super::parser::Parser;
use super::{PResult, ParseError};

/// The hint of an error inside a `{…}` hole of a `"…"` string: most such
/// braces were meant as text (JSON, code).
pub(super) const BRACE_HINT: &str = "`{` in a \"…\" string starts an interpolation `{expr}`: write `\\{` for a literal brace, or use a raw string, which has none: `'{\"a\": 1}'` (`'''…'''` over several lines)";

#[derive(Clone, Debug, PartialEq)]
pub(super) enum SPart {
    Lit(String),
    /// Byte range of the hole's text (without the braces).
    Hole(usize, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct StrTok {
    pub parts: Vec<SPart>,
}

impl StrTok {
    /// The text when the string has no interpolation holes.
    pub(super) fn plain(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                SPart::Lit(t) => s.push_str(t),
                SPart::Hole(..) => return None,
            }
        }
        Some(s)
    }
}

enum Raw {
    Text(usize, usize),
    Hole(usize, usize),
}

/// Dedent a triple-quoted body (docs/rules.md §2).
pub(super) fn dedent(body: &str) -> String {
    let mut s = body;
    if let Some(r) = s.strip_prefix("\r\n") {
        s = r;
    } else if let Some(r) = s.strip_prefix('\n') {
        s = r;
    }
    if let Some(idx) = s.rfind('\n') {
        if s[idx + 1..].chars().all(|c| c == ' ' || c == '\t') {
            s = &s[..idx];
            s = s.strip_suffix('\r').unwrap_or(s);
        }
    }
    let blank = |l: &str| l.chars().all(|c| c == ' ' || c == '\t' || c == '\r');
    let lead = |l: &str| l.bytes().take_while(|b| *b == b' ' || *b == b'\t').count();
    let indent = s
        .split('\n')
        .filter(|l| !blank(l))
        .map(lead)
        .min()
        .unwrap_or(0);
    let mut out = String::with_capacity(s.len());
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let cut = lead(line).min(indent);
        out.push_str(&line[cut..]);
    }
    out
}

impl Parser<'_> {
    /// Lex a string literal whose opening quote is at `p`.
    pub(super) fn lex_string(&self, p: usize) -> PResult<(StrTok, usize)> {
        let q = self.byte(p);
        let triple = self.byte(p + 1) == q && self.byte(p + 2) == q;
        if q == b'\'' {
            if triple {
                let mut i = p + 3;
                loop {
                    if i >= self.limit {
                        return Err(self.err("unterminated string", p, i));
                    }
                    if self.byte(i) == b'\''
                        && self.byte(i + 1) == b'\''
                        && self.byte(i + 2) == b'\''
                    {
                        break;
                    }
                    i += 1;
                }
                let text = dedent(self.slice(p + 3, i));
                return Ok((
                    StrTok {
                        parts: vec![SPart::Lit(text)],
                    },
                    i + 3,
                ));
            }
            let mut i = p + 1;
            loop {
                if i >= self.limit {
                    return Err(self.err("unterminated string", p, i));
                }
                match self.byte(i) {
                    b'\'' => break,
                    b'\n' => return Err(self.err("unterminated string (newline)", p, i)),
                    _ => i += 1,
                }
            }
            let text = self.slice(p + 1, i).to_string();
            return Ok((
                StrTok {
                    parts: vec![SPart::Lit(text)],
                },
                i + 1,
            ));
        }
        let body_start = if triple { p + 3 } else { p + 1 };
        let (raws, end) = self.scan_double(p, body_start, triple)?;
        let mut parts = Vec::new();
        if !triple {
            for r in raws {
                match r {
                    Raw::Text(s, e) => {
                        if s < e {
                            parts.push(SPart::Lit(self.unescape(self.slice(s, e), s)?));
                        }
                    }
                    Raw::Hole(s, e) => parts.push(SPart::Hole(s, e)),
                }
            }
        } else {
            let mut flat = String::new();
            let mut holes = Vec::new();
            for r in raws {
                match r {
                    Raw::Text(s, e) => flat.push_str(self.slice(s, e)),
                    Raw::Hole(s, e) => {
                        flat.push('\u{1}');
                        holes.push((s, e));
                    }
                }
            }
            let flat = dedent(&flat);
            let mut holes = holes.into_iter();
            let pieces: Vec<&str> = flat.split('\u{1}').collect();
            let n = pieces.len();
            for (k, piece) in pieces.into_iter().enumerate() {
                if !piece.is_empty() {
                    parts.push(SPart::Lit(self.unescape(piece, body_start)?));
                }
                if k + 1 < n {
                    match holes.next() {
                        Some((s, e)) => parts.push(SPart::Hole(s, e)),
                        None => parts.push(SPart::Lit("\u{1}".into())),
                    }
                }
            }
        }
        Ok((StrTok { parts }, end))
    }

    fn scan_double(&self, p: usize, start: usize, triple: bool) -> PResult<(Vec<Raw>, usize)> {
        let mut raws = Vec::new();
        let mut seg = start;
        let mut i = start;
        loop {
            if i >= self.limit {
                return Err(self.err("unterminated string", p, i));
            }
            match self.byte(i) {
                b'\n' if !triple => return Err(self.err("unterminated string (newline)", p, i)),
                b'"' => {
                    if !triple {
                        raws.push(Raw::Text(seg, i));
                        return Ok((raws, i + 1));
                    }
                    if self.byte(i + 1) == b'"' && self.byte(i + 2) == b'"' {
                        raws.push(Raw::Text(seg, i));
                        return Ok((raws, i + 3));
                    }
                    i += 1;
                }
                b'\\' if self.byte(i + 1) == b'u' && self.byte(i + 2) == b'{' => {
                    i += 3;
                    while i < self.limit && self.byte(i).is_ascii_hexdigit() {
                        i += 1;
                    }
                }
                b'\\' => i += 2,
                b'$' => {
                    self.warn_dollar(i);
                    i += 1;
                }
                b'{' => {
                    raws.push(Raw::Text(seg, i));
                    let close = self.scan_hole(i, triple)?;
                    raws.push(Raw::Hole(i + 1, close));
                    i = close + 1;
                    seg = i;
                }
                _ => i += 1,
            }
        }
    }

    /// `$NAME` / `${NAME}` at `i` inside a `"…"` string is literal text in
    /// Shoal, which a bash writer rarely means.
    fn warn_dollar(&self, i: usize) {
        let braced = self.byte(i + 1) == b'{';
        let at = if braced { i + 2 } else { i + 1 };
        let e = self.ident_end(at);
        if e == at {
            return;
        }
        let name = self.slice(at, e);
        let end = if braced && self.byte(e) == b'}' {
            e + 1
        } else {
            e
        };
        let (message, hint) = if braced {
            (
                format!("`${{{name}}}` in a string is `$` followed by the value of `{name}`: a Shoal string has no `$` expansion"),
                format!("drop the `$`: `{{{name}}}` for a variable, `{{env.{name}}}` for the environment"),
            )
        } else {
            (
                format!("`${name}` in a string is literal text: a Shoal string has no `$` expansion"),
                format!("interpolate with braces: `{{env.{name}}}` for the environment, `{{{name}}}` for a variable"),
            )
        };
        self.warn("dollar_in_string", message, i, end, hint);
    }

    /// Find the `}` closing the hole opened at `open`.
    fn scan_hole(&self, open: usize, multiline: bool) -> PResult<usize> {
        let unterminated = || {
            self.err_hint(
                "unterminated `{expr}` in string",
                open,
                open + 1,
                BRACE_HINT,
            )
        };
        let mut depth = 1usize;
        let mut i = open + 1;
        loop {
            if i >= self.limit {
                return Err(unterminated());
            }
            match self.byte(i) {
                b'\n' if !multiline => return Err(unterminated()),
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(i);
                    }
                }
                q @ (b'"' | b'\'') => {
                    let mut j = i + 1;
                    while j < self.limit && self.byte(j) != q {
                        if q == b'"' && self.byte(j) == b'\\' {
                            j += 1;
                        } else if self.byte(j) == b'\n' && !multiline {
                            return Err(unterminated());
                        }
                        j += 1;
                    }
                    if j >= self.limit {
                        return Err(unterminated());
                    }
                    i = j;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// Process escapes of a `"` string segment; `base` is its source offset.
    pub(super) fn unescape(&self, text: &str, base: usize) -> PResult<String> {
        if !text.contains('\\') {
            return Ok(text.to_string());
        }
        let mut out = String::with_capacity(text.len());
        let mut it = text.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((j, e)) = it.next() else {
                return Err(self.err("unknown escape `\\`", base + i, base + i + 1));
            };
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                '{' => out.push('{'),
                '}' => out.push('}'),
                '\n' => {}
                'u' => {
                    let bad = |k: usize| self.err("invalid unicode escape", base + i, base + k);
                    if it.next().map(|x| x.1) != Some('{') {
                        return Err(bad(j + 1));
                    }
                    let mut hex = String::new();
                    let mut closed = false;
                    for (_, h) in it.by_ref() {
                        if h == '}' {
                            closed = true;
                            break;
                        }
                        hex.push(h);
                        if hex.len() > 8 {
                            break;
                        }
                    }
                    let ch = if closed {
                        u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                    } else {
                        None
                    };
                    match ch {
                        Some(ch) => out.push(ch),
                        None => return Err(bad(j + 1)),
                    }
                }
                other => {
                    let e = self.err(
                        format!("unknown escape `\\{other}`"),
                        base + i,
                        base + j + other.len_utf8(),
                    );
                    return Err(match other {
                        '$' | '`' => ParseError {
                            hint: Some(format!(
                                "`{other}` is plain text in a Shoal string: write it without `\\`"
                            )),
                            ..e
                        },
                        _ => e,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Scan an interpreter block `{ … }` opened at `open`; returns the index of
    /// the closing brace. Quotes closed on the same line hide their braces.
    pub(super) fn scan_interp_braces(&self, open: usize, tool: &str) -> PResult<usize> {
        let mut depth = 1usize;
        let mut i = open + 1;
        loop {
            if i >= self.limit {
                return Err(self.err_hint(
                    format!("unbalanced braces in interpreter block `{tool}`"),
                    open,
                    i,
                    "every `{` in the block needs a matching `}`; or use TOOL'''…'''",
                ));
            }
            match self.byte(i) {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(i);
                    }
                }
                q @ (b'"' | b'\'') => {
                    let mut j = i + 1;
                    while j < self.limit && self.byte(j) != q && self.byte(j) != b'\n' {
                        if q == b'"' && self.byte(j) == b'\\' {
                            j += 1;
                        }
                        j += 1;
                    }
                    if j < self.limit && self.byte(j) == q {
                        i = j;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}
