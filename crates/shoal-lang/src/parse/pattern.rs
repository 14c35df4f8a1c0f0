//! Match patterns (docs/rules.md §7): wildcard, binders, literals, int ranges,
//! `TYPE name`, record and list patterns with a trailing rest. Binders are
//! declared value-bound in the arm's scope (opened by the caller).

use super::lexer::Tok;
use super::parser::Parser;
use super::PResult;
use crate::ast::*;

const TYPE_NAMES: &[&str] = &[
    "null", "bool", "int", "float", "str", "path", "glob", "regex", "size", "duration", "datetime",
    "time", "bytes", "list", "record", "table", "range", "stream", "error", "outcome", "task",
    "closure", "command", "secret",
];

impl Parser<'_> {
    pub(super) fn parse_pattern(&mut self) -> PResult<Pattern> {
        self.enter()?;
        let r = self.parse_pattern_inner();
        self.leave();
        r
    }

    fn parse_pattern_inner(&mut self) -> PResult<Pattern> {
        let t = self.bump()?;
        match &t.tok {
            Tok::Ident => {
                let name = self.text(&t).to_string();
                match name.as_str() {
                    "_" => return Ok(Pattern::Wildcard),
                    "true" => return Ok(Pattern::Literal(Literal::Bool(true))),
                    "false" => return Ok(Pattern::Literal(Literal::Bool(false))),
                    "null" => return Ok(Pattern::Literal(Literal::Null)),
                    _ => {}
                }
                if TYPE_NAMES.contains(&name.as_str()) {
                    let n = self.peek()?;
                    if n.tok == Tok::Ident && !self.is_word(&n, "if") {
                        self.advance()?;
                        let b = self.text(&n).to_string();
                        let bind = if b == "_" { None } else { Some(b) };
                        if let Some(b) = &bind {
                            self.declare(b, true);
                        }
                        return Ok(Pattern::Type { ty: name, bind });
                    }
                }
                self.declare(&name, true);
                Ok(Pattern::Bind(name))
            }
            Tok::Int(a) => {
                let n = self.peek()?;
                if matches!(n.tok, Tok::DotDot | Tok::DotDotEq) {
                    self.advance()?;
                    let e = self.bump()?;
                    let Tok::Int(b) = e.tok else {
                        return Err(self.err_found("an integer literal as the range end", &e));
                    };
                    return Ok(Pattern::Range {
                        start: *a,
                        end: b,
                        inclusive: n.tok == Tok::DotDotEq,
                    });
                }
                Ok(Pattern::Literal(Literal::Int(*a)))
            }
            Tok::Str(s) => match s.plain() {
                Some(text) => Ok(Pattern::Literal(Literal::Str(text))),
                None => Err(self.err("string patterns cannot interpolate", t.start, t.end)),
            },
            Tok::LBrace => self.parse_record_pattern(),
            Tok::LBracket => self.parse_list_pattern(),
            Tok::Pipe => {
                Err(self.err("unexpected `|` at the start of a match arm", t.start, t.end))
            }
            Tok::Minus => Err(self.err(
                "negative numbers are not supported as patterns",
                t.start,
                t.end,
            )),
            _ => Err(self.err_found("a pattern", &t)),
        }
    }

    fn parse_record_pattern(&mut self) -> PResult<Pattern> {
        let mut fields = Vec::new();
        loop {
            self.skip_newlines()?;
            let t = self.bump()?;
            let key = match &t.tok {
                Tok::RBrace => break,
                Tok::Ident => self.text(&t).to_string(),
                Tok::Str(s) if s.plain().is_some() => s.plain().unwrap_or_default(),
                _ => return Err(self.err_found("a field name in a record pattern", &t)),
            };
            let sub = if self.peek()?.tok == Tok::Colon {
                self.advance()?;
                self.skip_newlines()?;
                Some(self.parse_pattern()?)
            } else {
                self.declare(&key, true);
                None
            };
            fields.push((key, sub));
            self.skip_newlines()?;
            let t = self.bump()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => break,
                _ => return Err(self.err_found("`,` or `}` in a record pattern", &t)),
            }
        }
        Ok(Pattern::Record(fields))
    }

    fn parse_list_pattern(&mut self) -> PResult<Pattern> {
        let mut items = Vec::new();
        let mut rest = None;
        loop {
            self.skip_newlines()?;
            let t = self.peek()?;
            if t.tok == Tok::RBracket {
                self.advance()?;
                break;
            }
            if rest.is_some() {
                return Err(self.err(
                    "a rest pattern `...` must be the last element",
                    t.start,
                    t.end,
                ));
            }
            if t.tok == Tok::Ellipsis {
                self.advance()?;
                let n = self.peek()?;
                if n.tok == Tok::Ident && !n.space_before {
                    self.advance()?;
                    let name = self.text(&n).to_string();
                    if name == "_" {
                        rest = Some(None);
                    } else {
                        self.declare(&name, true);
                        rest = Some(Some(name));
                    }
                } else {
                    rest = Some(None);
                }
            } else {
                items.push(self.parse_pattern()?);
            }
            self.skip_newlines()?;
            let t = self.bump()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBracket => break,
                _ => return Err(self.err_found("`,` or `]` in a list pattern", &t)),
            }
        }
        Ok(Pattern::List { items, rest })
    }
}
