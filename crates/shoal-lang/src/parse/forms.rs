//! Bracketed primaries (docs/rules.md §4, §8): `(`…`)` as lambda
//! parameters, command substitution or a group; lambda bodies; lists; `{`…`}`
//! as record or block; and interpreter blocks (`sh { … }`, `python3'''…'''`).

use std::sync::Arc;

use super::lexer::{is_keyword, Tok, Token};
use super::parser::Parser;
use super::PResult;
use crate::ast::*;

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

impl Parser<'_> {
    pub(super) fn parse_interp_block(&mut self, t: Token) -> PResult<Expr> {
        let tool = self.text(&t).to_string();
        let program = if self.byte(t.end) == b'\'' {
            let (s, end) = self.lex_string(t.end)?;
            self.pos = end;
            self.last_end = end;
            s.plain().unwrap_or_default().trim().to_string()
        } else {
            let open = self.skip_ws(t.end);
            let close = self.scan_interp_braces(open, &tool)?;
            self.pos = close + 1;
            self.last_end = close + 1;
            self.slice(open + 1, close).trim().to_string()
        };
        Ok(Expr {
            kind: ExprKind::InterpBlock { tool, program },
            span: self.span_from(t.start),
        })
    }

    /// `(`: lambda, command substitution or group.
    pub(super) fn parse_paren(&mut self) -> PResult<Expr> {
        let open = self.peek()?;
        if let Some(params) = self.try_lambda_params()? {
            return self.parse_lambda_body(open.start, params);
        }
        self.advance()?; // (
        let saved = (self.no_block, self.allow_item, self.nl_skip);
        self.no_block = false;
        self.allow_item = false;
        self.nl_skip = true;
        let r = self.parse_paren_inner();
        (self.no_block, self.allow_item, self.nl_skip) = saved;
        let inner = r?;
        Ok(Expr {
            kind: ExprKind::Group(bx(inner)),
            span: self.span_from(open.start),
        })
    }

    pub(super) fn parse_paren_inner(&mut self) -> PResult<Expr> {
        self.skip_newlines()?;
        let p = self.skip_ws(self.pos);
        let inner = if self.starts_like_command(p) {
            self.pos = p;
            self.parse_cmd_chain()?
        } else {
            self.parse_expr()?
        };
        self.skip_newlines()?;
        self.expect(Tok::RParen, "`)`")?;
        Ok(inner)
    }

    /// At `(`: if a lambda parameter list followed by `=>` is here, consume it.
    pub(super) fn try_lambda_params(&mut self) -> PResult<Option<Vec<Param>>> {
        let save = (self.pos, self.last_end);
        let r = self.scan_lambda_params();
        match r {
            Ok(Some(ps)) => Ok(Some(ps)),
            _ => {
                (self.pos, self.last_end) = save;
                Ok(None)
            }
        }
    }

    pub(super) fn scan_lambda_params(&mut self) -> PResult<Option<Vec<Param>>> {
        self.advance()?; // (
        let mut params = Vec::new();
        loop {
            self.skip_newlines()?;
            let t = self.peek()?;
            if t.tok == Tok::RParen {
                self.advance()?;
                break;
            }
            if t.tok != Tok::Ident || is_keyword(self.text(&t)) {
                return Ok(None);
            }
            self.advance()?;
            let mut ty = None;
            if self.peek()?.tok == Tok::Colon {
                self.advance()?;
                ty = Some(self.parse_type()?);
            }
            params.push(Param {
                name: self.text(&t).to_string(),
                ty,
                default: None,
            });
            self.skip_newlines()?;
            let n = self.bump()?;
            match n.tok {
                Tok::Comma => {}
                Tok::RParen => break,
                _ => return Ok(None),
            }
        }
        if self.peek()?.tok != Tok::FatArrow {
            return Ok(None);
        }
        self.advance()?;
        Ok(Some(params))
    }

    /// After `=>`: the lambda body in a new scope binding `params`.
    pub(super) fn parse_lambda_body(&mut self, start: usize, params: Vec<Param>) -> PResult<Expr> {
        self.skip_newlines()?;
        self.push_scope();
        for p in &params {
            let n = p.name.clone();
            self.declare(&n, true);
        }
        let saved = self.no_block;
        self.no_block = false;
        let r = (|| {
            let t = self.peek()?;
            if t.tok == Tok::LBrace && !self.brace_is_record()? {
                Ok(FnBody::Block(self.parse_block()?))
            } else {
                Ok(FnBody::Expr(bx(self.parse_expr()?)))
            }
        })();
        self.no_block = saved;
        self.pop_scope();
        let body = r?;
        let span = self.span_from(start);
        let def = FnDef {
            name: None,
            params,
            rest: None,
            ret: None,
            body,
            span,
        };
        Ok(Expr {
            kind: ExprKind::Lambda(Arc::new(def)),
            span,
        })
    }

    pub(super) fn parse_list(&mut self) -> PResult<Expr> {
        let open = self.bump()?;
        let saved = (self.no_block, self.allow_item, self.nl_skip);
        self.no_block = false;
        self.nl_skip = true;
        let r = (|| {
            let mut items = Vec::new();
            loop {
                self.skip_newlines()?;
                if self.peek()?.tok == Tok::RBracket {
                    self.advance()?;
                    break;
                }
                items.push(self.parse_expr()?);
                self.skip_newlines()?;
                let t = self.bump()?;
                match t.tok {
                    Tok::Comma => {}
                    Tok::RBracket => break,
                    _ => return Err(self.err_found("`,` or `]` in a list", &t)),
                }
            }
            Ok(items)
        })();
        (self.no_block, self.allow_item, self.nl_skip) = saved;
        let items = r?;
        Ok(Expr {
            kind: ExprKind::List(items),
            span: self.span_from(open.start),
        })
    }

    /// At `{`: `{}`, `{ key: …` or `{ name, …` (field shorthand) is a record.
    pub(super) fn brace_is_record(&mut self) -> PResult<bool> {
        let open = self.peek()?;
        let q = self.after_newlines(open.end);
        match self.byte(q) {
            b'}' => Ok(true),
            b'"' | b'\'' => match self.lex_string(q) {
                Ok((s, end)) => Ok(s.plain().is_some() && self.byte(self.skip_ws(end)) == b':'),
                Err(_) => Ok(false),
            },
            _ => Ok(self.ident_then_colon(q) || self.ident_then_comma(q)),
        }
    }

    /// `{ name, …`: a record whose first field is the shorthand `name` (`name: name`).
    /// As a block, `name, …` could never parse, so this reading takes nothing away.
    fn ident_then_comma(&self, p: usize) -> bool {
        let e = self.ident_end(p);
        e > p && self.byte(self.skip_ws(e)) == b','
    }

    pub(super) fn parse_brace(&mut self) -> PResult<Expr> {
        if !self.brace_is_record()? {
            let b = self.parse_block()?;
            let span = b.span;
            return Ok(Expr {
                kind: ExprKind::Block(b),
                span,
            });
        }
        let open = self.bump()?;
        let saved = (self.no_block, self.allow_item, self.nl_skip);
        self.no_block = false;
        self.nl_skip = false;
        let r = (|| {
            let mut fields = Vec::new();
            loop {
                self.skip_newlines()?;
                let t = self.bump()?;
                let key = match &t.tok {
                    Tok::RBrace => break,
                    Tok::Ident => self.text(&t).to_string(),
                    Tok::Str(s) if s.plain().is_some() => s.plain().unwrap_or_default(),
                    _ => return Err(self.err_found("a record key", &t)),
                };
                let shorthand = t.tok == Tok::Ident
                    && matches!(self.peek()?.tok, Tok::Comma | Tok::Newline | Tok::RBrace);
                let v = if shorthand {
                    // `{ probe, answer: 42 }`: the field takes the binding's value.
                    Expr {
                        kind: ExprKind::Ident(key.clone()),
                        span: Span::new(t.start, t.end),
                    }
                } else {
                    self.expect(Tok::Colon, "`:` after the record key")?;
                    self.skip_newlines()?;
                    self.parse_expr()?
                };
                fields.push((key, v));
                let t = self.peek()?;
                match t.tok {
                    Tok::Comma | Tok::Newline => {
                        self.advance()?;
                    }
                    Tok::RBrace => {}
                    _ => return Err(self.err_found("`,` or `}` in a record", &t)),
                }
            }
            Ok(fields)
        })();
        (self.no_block, self.allow_item, self.nl_skip) = saved;
        let fields = r?;
        Ok(Expr {
            kind: ExprKind::Record(fields),
            span: self.span_from(open.start),
        })
    }
}
