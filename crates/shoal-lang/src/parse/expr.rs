//! Expressions (docs/rules.md §4, §7): precedence climbing, postfix chains with
//! trailing blocks and newline continuation, primaries (literals, lists, record
//! vs block, `(`…`)` lambda / command substitution / group detection), lambdas
//! and implicit item lambdas, calls, `if`/`match`/`try`/`with`/`spawn`,
//! interpreter blocks and interpolated strings.

use std::rc::Rc;
use std::sync::Arc;

use super::lexer::{is_keyword, Tok, Token};
use super::parser::Parser;
use super::strings::{SPart, StrTok};
use super::{PResult, ParseError, CHAIN_LIMIT};
use crate::ast::*;

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// A value a bash writer would redirect into a file: a string, or a
/// command's result (`"""…""".feed(cat)`, `(echo hi)`).
fn is_text_value(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(Literal::Str(_)) | ExprKind::Interp(_) | ExprKind::Command(_) => true,
        ExprKind::MethodCall { name, .. } => name == "feed",
        ExprKind::Group(x) => is_text_value(x),
        _ => false,
    }
}

fn binop(t: &Tok) -> Option<(BinOp, u8)> {
    Some(match t {
        Tok::QQ => (BinOp::Coalesce, 1),
        Tok::OrOr => (BinOp::Or, 2),
        Tok::AndAnd => (BinOp::And, 3),
        Tok::EqEq => (BinOp::Eq, 4),
        Tok::Ne => (BinOp::Ne, 4),
        Tok::Lt => (BinOp::Lt, 4),
        Tok::Le => (BinOp::Le, 4),
        Tok::Gt => (BinOp::Gt, 4),
        Tok::Ge => (BinOp::Ge, 4),
        Tok::Plus => (BinOp::Add, 6),
        Tok::Minus => (BinOp::Sub, 6),
        Tok::Star => (BinOp::Mul, 7),
        Tok::Slash => (BinOp::Div, 7),
        Tok::Percent => (BinOp::Rem, 7),
        _ => return None,
    })
}

impl Parser<'_> {
    /// A full expression at a fresh start: lambdas and postfix `catch`.
    pub(super) fn parse_expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.parse_expr_inner();
        self.leave();
        r
    }

    fn parse_expr_inner(&mut self) -> PResult<Expr> {
        if let Some(l) = self.try_bare_lambda()? {
            return Ok(l);
        }
        let e = self.parse_bin(1)?;
        self.parse_catch_tail(e)
    }

    /// `x => body` at a fresh expression start.
    fn try_bare_lambda(&mut self) -> PResult<Option<Expr>> {
        self.fill()?;
        let t = self.cur();
        if t.tok == Tok::Ident && !is_keyword(self.text(t)) && !self.allow_item {
            let q = self.skip_ws(t.end);
            if self.byte(q) == b'=' && self.byte(q + 1) == b'>' {
                let t = t.clone();
                let name = self.text(&t).to_string();
                self.advance()?;
                self.advance()?;
                let params = vec![Param {
                    name,
                    ty: None,
                    default: None,
                }];
                return self.parse_lambda_body(t.start, params).map(Some);
            }
        }
        Ok(None)
    }

    /// Postfix `catch [name] handler` (possibly on the next line), repeated.
    fn parse_catch_tail(&mut self, mut e: Expr) -> PResult<Expr> {
        let mut chain = 0usize;
        loop {
            if !self.continue_with_word("catch") {
                break;
            }
            chain += 1;
            if chain > CHAIN_LIMIT {
                return Err(self.too_long());
            }
            self.advance()?;
            let mut name = None;
            let t = self.peek()?;
            if t.tok == Tok::Ident
                && !is_keyword(self.text(&t))
                && self.byte(self.skip_ws(t.end)) == b'{'
            {
                name = Some(self.text(&t).to_string());
                self.advance()?;
            }
            let handler = if let Some(n) = &name {
                self.push_scope();
                self.declare(n, true);
                let b = self.parse_block();
                self.pop_scope();
                let b = b?;
                let span = b.span;
                Expr {
                    kind: ExprKind::Block(b),
                    span,
                }
            } else {
                self.parse_bin(1)?
            };
            let span = e.span.to(handler.span);
            e = Expr {
                kind: ExprKind::Catch {
                    expr: bx(e),
                    name,
                    handler: bx(handler),
                },
                span,
            };
        }
        Ok(e)
    }

    /// Binary operators with precedence `>= min`.
    pub(super) fn parse_bin(&mut self, min: u8) -> PResult<Expr> {
        self.enter()?;
        let r = self.parse_bin_inner(min);
        self.leave();
        r
    }

    fn parse_bin_inner(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.parse_unary()?;
        for _ in 0..CHAIN_LIMIT {
            match self.bin_step(lhs, min)? {
                Ok(e) => lhs = e,
                Err(e) => return Ok(e),
            }
        }
        Err(self.too_long())
    }

    pub(super) fn too_long(&self) -> ParseError {
        self.err_hint(
            "expression too long (operator or call chain nesting limit)",
            self.pos,
            self.pos + 1,
            "split it with `let` bindings",
        )
    }

    /// One operator of the climb: `Ok(new lhs)` to continue, `Err(lhs)` to stop.
    fn bin_step(&mut self, lhs: Expr, min: u8) -> PResult<Result<Expr, Expr>> {
        self.fill()?;
        let is_op = {
            let t = self.cur();
            match &t.tok {
                Tok::Pipe | Tok::Amp | Tok::DotDot | Tok::DotDotEq => true,
                Tok::Ident => self.text(t) == "in",
                other => binop(other).is_some(),
            }
        };
        if !is_op {
            return Ok(Err(lhs));
        }
        let t = self.peek()?;
        let (op, prec) = match &t.tok {
            Tok::Pipe => {
                return Err(self.err_hint(
                    "shoal has no pipe operator `|`",
                    t.start,
                    t.end,
                    "feed a value to a command with `value.feed(cmd args)`, run a shell pipeline with `sh { cmd1 | cmd2 }`, or chain methods",
                ))
            }
            Tok::Amp => {
                // `sh { … } &`, `(cmd args) &` at the end of a statement: in
                // the background, like `cmd args &`.
                let p = self.skip_ws(t.end);
                let at_end = p >= self.limit || matches!(self.byte(p), b'\n' | b';' | b'}' | b')');
                if min <= 1 && at_end && backgroundable(&lhs) {
                    self.advance()?;
                    let span = Span::new(lhs.span.start as usize, t.end);
                    return Ok(Ok(Expr {
                        kind: ExprKind::Background(bx(lhs)),
                        span,
                    }));
                }
                return Err(self.err_hint(
                    "`&` is not an operator here",
                    t.start,
                    t.end,
                    "`&` at the end runs a command in the background (`cmd args &`, \
                     `sh { … } &`); `&&` is a logical and",
                ));
            }
            Tok::DotDot | Tok::DotDotEq => {
                if min > 5 {
                    return Ok(Err(lhs));
                }
                self.advance()?;
                self.skip_newlines()?;
                let rhs = self.parse_bin(6)?;
                let span = lhs.span.to(rhs.span);
                let inclusive = t.tok == Tok::DotDotEq;
                return Ok(Ok(Expr {
                    kind: ExprKind::Range {
                        start: bx(lhs),
                        end: bx(rhs),
                        inclusive,
                    },
                    span,
                }));
            }
            Tok::Ident if self.text(&t) == "in" => (BinOp::In, 4),
            other => match binop(other) {
                Some(x) => x,
                None => return Ok(Err(lhs)),
            },
        };
        if prec < min {
            return Ok(Err(lhs));
        }
        self.advance()?;
        self.skip_newlines()?;
        if op == BinOp::Gt && is_text_value(&lhs) {
            self.no_value_redirect(t.start)?;
        }
        let rhs = if matches!(op, BinOp::And | BinOp::Or) && self.rhs_is_command() {
            self.parse_cmd_chain_at(prec + 1)?
        } else {
            self.parse_bin(prec + 1)?
        };
        if prec == 4 {
            let n = self.peek()?;
            let chained = match &n.tok {
                Tok::Ident => self.text(&n) == "in",
                other => matches!(binop(other), Some((_, 4))),
            };
            if chained {
                return Err(self.err_hint(
                    "comparison operators do not chain",
                    n.start,
                    n.end,
                    "combine comparisons with `&&`: `a < b && b < c`",
                ));
            }
        }
        let span = lhs.span.to(rhs.span);
        Ok(Ok(Expr {
            kind: ExprKind::Binary {
                op,
                lhs: bx(lhs),
                rhs: bx(rhs),
            },
            span,
        }))
    }

    /// `TEXT > f.txt`: a bash writer's redirect of a value, which would
    /// compare it with an unbound name. Refused with the form that writes.
    fn no_value_redirect(&self, op_at: usize) -> PResult<()> {
        let p = self.skip_ws(self.pos);
        let mut e = p;
        while e < self.limit
            && (self.byte(e).is_ascii_alphanumeric()
                || matches!(self.byte(e), b'_' | b'.' | b'/' | b'-' | b'~'))
        {
            e += 1;
        }
        let word = &self.src[p..e];
        let first = word.split(['.', '/']).next().unwrap_or("");
        let unbound_name = !first.is_empty()
            && !first.starts_with(|c: char| c.is_ascii_digit())
            && !self.is_bound_any(first)
            && !self.is_value_bound(first);
        let file_like = word.contains('.') || word.contains('/');
        let a_path = first.is_empty() && file_like;
        if word.is_empty() || !(unbound_name || a_path) {
            return Ok(());
        }
        Err(self.err_hint(
            "`>` after a value compares; it does not write a file",
            op_at,
            e,
            format!(
                "write the value with `.save(\"{word}\")`, e.g. `'''text'''.save(\"{word}\")` (`.append(\"{word}\")` adds to the file); `>` redirects a command only: `echo hi > {word}`"
            ),
        ))
    }

    /// After `&&`/`||`: the operand is a command with arguments.
    fn rhs_is_command(&mut self) -> bool {
        let p = self.skip_ws(self.pos);
        if !self.starts_like_command(p) {
            return false;
        }
        if self.byte(p) == b'^' || self.starts_path(p) {
            return true;
        }
        let e = self.ident_end(p);
        match self.lex_at(e) {
            Ok(t) => !matches!(
                t.tok,
                Tok::Newline
                    | Tok::Eof
                    | Tok::Semi
                    | Tok::RBrace
                    | Tok::RParen
                    | Tok::RBracket
                    | Tok::Comma
                    | Tok::AndAnd
                    | Tok::OrOr
                    | Tok::QQ
            ),
            Err(_) => true,
        }
    }

    fn parse_unary(&mut self) -> PResult<Expr> {
        self.fill()?;
        let op = match self.cur().tok {
            Tok::Bang => UnOp::Not,
            Tok::Minus => UnOp::Neg,
            _ => return self.parse_postfix(),
        };
        let t = self.peek()?;
        self.enter()?;
        self.advance()?;
        let e = self.parse_unary();
        self.leave();
        let e = e?;
        let span = Span::new(t.start, e.span.end as usize);
        Ok(Expr {
            kind: ExprKind::Unary { op, expr: bx(e) },
            span,
        })
    }

    fn trailing_block(&mut self) -> PResult<Option<Arg>> {
        if self.no_block || self.peek()?.tok != Tok::LBrace {
            return Ok(None);
        }
        let b = self.parse_block()?;
        let span = b.span;
        let def = FnDef {
            name: None,
            params: vec![],
            rest: None,
            ret: None,
            body: FnBody::Block(b),
            span,
        };
        Ok(Some(Arg {
            name: None,
            value: Expr {
                kind: ExprKind::Lambda(Arc::new(def)),
                span,
            },
        }))
    }

    fn parse_postfix(&mut self) -> PResult<Expr> {
        let mut e = self.parse_primary()?;
        for _ in 0..CHAIN_LIMIT {
            match self.postfix_step(e)? {
                Ok(n) => e = n,
                Err(n) => return Ok(n),
            }
        }
        Err(self.too_long())
    }

    /// One postfix operation: `Ok(new)` to continue, `Err(e)` when none applies.
    fn postfix_step(&mut self, e: Expr) -> PResult<Result<Expr, Expr>> {
        self.fill()?;
        let t = self.cur();
        let glued = !t.space_before;
        match t.tok {
            Tok::Newline => {
                let q = self.after_newlines(self.pos);
                let (b, n) = (self.byte(q), self.byte(q + 1));
                if (b == b'.' && n != b'.') || (b == b'?' && n == b'.') {
                    self.pos = q;
                    return Ok(Ok(e));
                }
                Ok(Err(e))
            }
            Tok::Dot => self.postfix_dot(e, false).map(Ok),
            Tok::QDot => self.postfix_dot(e, true).map(Ok),
            Tok::LParen if glued => self.postfix_call(e).map(Ok),
            Tok::LBracket if glued => self.postfix_index(e).map(Ok),
            _ => Ok(Err(e)),
        }
    }

    fn postfix_dot(&mut self, e: Expr, optional: bool) -> PResult<Expr> {
        self.advance()?;
        let nt = self.peek()?;
        if nt.tok != Tok::Ident {
            return Err(self.err_found("a field or method name after `.`", &nt));
        }
        self.advance()?;
        let name = self.text(&nt).to_string();
        let a = self.peek()?;
        let start = e.span.start as usize;
        if a.tok == Tok::LParen && !a.space_before {
            self.advance()?;
            let mut args = self.parse_args(name == "feed")?;
            if let Some(tb) = self.trailing_block()? {
                args.push(tb);
            }
            let span = self.span_from(start);
            Ok(Expr {
                kind: ExprKind::MethodCall {
                    recv: bx(e),
                    name,
                    args,
                    optional,
                },
                span,
            })
        } else if let Some(tb) = self.trailing_block()? {
            let span = self.span_from(start);
            Ok(Expr {
                kind: ExprKind::MethodCall {
                    recv: bx(e),
                    name,
                    args: vec![tb],
                    optional,
                },
                span,
            })
        } else {
            let span = self.span_from(start);
            Ok(Expr {
                kind: ExprKind::Field {
                    recv: bx(e),
                    name,
                    optional,
                },
                span,
            })
        }
    }

    fn postfix_call(&mut self, e: Expr) -> PResult<Expr> {
        self.advance()?;
        let mut args = self.parse_args(false)?;
        if let Some(tb) = self.trailing_block()? {
            args.push(tb);
        }
        let span = self.span_from(e.span.start as usize);
        Ok(Expr {
            kind: ExprKind::Call {
                callee: bx(e),
                args,
            },
            span,
        })
    }

    fn postfix_index(&mut self, e: Expr) -> PResult<Expr> {
        self.advance()?;
        let saved = (self.no_block, self.nl_skip);
        self.no_block = false;
        self.nl_skip = true;
        let r = self.index_inner();
        (self.no_block, self.nl_skip) = saved;
        let index = r?;
        let span = self.span_from(e.span.start as usize);
        Ok(Expr {
            kind: ExprKind::Index {
                recv: bx(e),
                index: bx(index),
            },
            span,
        })
    }

    fn index_inner(&mut self) -> PResult<Expr> {
        self.skip_newlines()?;
        let i = self.parse_expr()?;
        self.skip_newlines()?;
        self.expect(Tok::RBracket, "`]`")?;
        Ok(i)
    }

    /// Call arguments after `(` (consumed) up to and including `)`.
    fn parse_args(&mut self, feed: bool) -> PResult<Vec<Arg>> {
        let saved = (self.no_block, self.allow_item, self.nl_skip);
        self.no_block = false;
        self.allow_item = false;
        self.nl_skip = true;
        let r = self.parse_args_inner(feed);
        (self.no_block, self.allow_item, self.nl_skip) = saved;
        r
    }

    fn parse_args_inner(&mut self, feed: bool) -> PResult<Vec<Arg>> {
        let mut args = Vec::new();
        loop {
            self.skip_newlines()?;
            let t = self.peek()?;
            if t.tok == Tok::RParen {
                self.advance()?;
                break;
            }
            let mut name = None;
            if t.tok == Tok::Ident && self.ident_then_colon(t.start) {
                name = Some(self.text(&t).to_string());
                self.advance()?;
                self.advance()?;
                self.skip_newlines()?;
            }
            let value =
                if name.is_none() && feed && self.starts_like_command(self.skip_ws(self.pos)) {
                    self.pos = self.skip_ws(self.pos);
                    self.parse_cmd_chain()?
                } else if self.peek()?.tok == Tok::Dot {
                    let start = self.peek()?.start;
                    self.parse_item_lambda(start)?
                } else {
                    self.parse_expr()?
                };
            args.push(Arg { name, value });
            self.skip_newlines()?;
            let t = self.bump()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RParen => break,
                _ => return Err(self.err_found("`,` or `)` in the argument list", &t)),
            }
        }
        Ok(args)
    }

    fn parse_item_lambda(&mut self, start: usize) -> PResult<Expr> {
        self.allow_item = true;
        let r = self.parse_expr();
        self.allow_item = false;
        let body = r?;
        let span = Span::new(start, body.span.end as usize);
        let def = FnDef {
            name: None,
            params: vec![Param {
                name: ITEM_PARAM.to_string(),
                ty: None,
                default: None,
            }],
            rest: None,
            ret: None,
            body: FnBody::Expr(bx(body)),
            span,
        };
        Ok(Expr {
            kind: ExprKind::Lambda(Arc::new(def)),
            span,
        })
    }

    fn lit(&self, l: Literal, t: &Token) -> Expr {
        Expr {
            kind: ExprKind::Literal(l),
            span: Span::new(t.start, t.end),
        }
    }

    pub(super) fn parse_primary(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.parse_primary_inner();
        self.leave();
        r
    }

    fn parse_primary_inner(&mut self) -> PResult<Expr> {
        let item = std::mem::replace(&mut self.allow_item, false);
        let t = self.peek()?;
        match &t.tok {
            Tok::Ident => self.parse_ident_primary(t),
            Tok::LParen => self.parse_paren(),
            Tok::LBracket => self.parse_list(),
            Tok::LBrace => self.parse_brace(),
            Tok::Dot if item => Ok(Expr {
                kind: ExprKind::Ident(ITEM_PARAM.to_string()),
                span: Span::new(t.start, t.start),
            }),
            _ => self.primary_other(t),
        }
    }

    fn primary_other(&mut self, t: Token) -> PResult<Expr> {
        let l =
            match &t.tok {
                Tok::Int(v) => Literal::Int(*v),
                Tok::Float(v) => Literal::Float(*v),
                Tok::Size(v) => Literal::Size(*v),
                Tok::Dur(v) => Literal::Duration(*v),
                Tok::Time(v) => Literal::Time(*v),
                Tok::Regex(s) => Literal::Regex(s.to_string()),
                Tok::DateTime(s) => Literal::DateTime(s.to_string()),
                Tok::Str(s) => {
                    let s = Rc::clone(s);
                    self.advance()?;
                    return self.string_expr(&s, &t);
                }
                Tok::Caret => {
                    self.pos = t.start;
                    let c = self.parse_command()?;
                    let span = c.span;
                    return Ok(Expr {
                        kind: ExprKind::Command(Arc::new(c)),
                        span,
                    });
                }
                Tok::Dot | Tok::QDot => return Err(self.err_hint(
                    "a leading `.` has no receiver here",
                    t.start,
                    t.end,
                    "`.field` shorthand works only as a whole call argument, e.g. `.map(.name)`",
                )),
                Tok::RBracket => return Err(self.err("unexpected `]`", t.start, t.end)),
                Tok::Pipe if self.closure_bars(t.end).is_some() => {
                    let end = self.closure_bars(t.end).unwrap_or(t.end);
                    let params: Vec<&str> =
                        self.slice(t.end, end - 1).split(',').map(str::trim).collect();
                    let params = params.join(", ");
                    let arrow = if params.contains(',') {
                        format!("({params}) => ...")
                    } else {
                        format!("{params} => ...")
                    };
                    return Err(self.err_hint(
                        format!("shoal writes this function `{arrow}`, not `|{params}| ...`"),
                        t.start,
                        end,
                        "for example `[1, 2].map(x => x * 10)`, `.where(.n > 2)`, `.map(.name)`",
                    ));
                }
                Tok::Pipe => {
                    return Err(self.err_hint(
                        "shoal has no pipe operator `|`",
                        t.start,
                        t.end,
                        "feed a value to a command with `value.feed(cmd args)`, or run a shell pipeline with `sh { cmd1 | cmd2 }`",
                    ))
                }
                Tok::Amp => return Err(self.err("`&` is not an operator here", t.start, t.end)),
                _ => return Err(self.err_found("expression", &t)),
            };
        self.advance()?;
        Ok(self.lit(l, &t))
    }

    /// The end of `a, b|` from `p` (just past an opening `|`): the bars of a
    /// closure written as other languages write one (`|x| x * 2`).
    fn closure_bars(&self, p: usize) -> Option<usize> {
        let mut p = self.skip_ws(p);
        loop {
            let start = p;
            while self.byte(p).is_ascii_alphanumeric() || self.byte(p) == b'_' {
                p += 1;
            }
            if p == start || self.byte(start).is_ascii_digit() {
                return None;
            }
            p = self.skip_ws(p);
            match self.byte(p) {
                b',' => p = self.skip_ws(p + 1),
                b'|' => return Some(p + 1),
                _ => return None,
            }
        }
    }

    pub(super) fn string_expr(&mut self, s: &StrTok, t: &Token) -> PResult<Expr> {
        let span = Span::new(t.start, t.end);
        if let Some(text) = s.plain() {
            return Ok(Expr {
                kind: ExprKind::Literal(Literal::Str(text)),
                span,
            });
        }
        let mut parts = Vec::with_capacity(s.parts.len());
        for p in &s.parts {
            match p {
                SPart::Lit(l) => parts.push(InterpPart::Lit(l.clone())),
                SPart::Hole(a, b) => parts.push(InterpPart::Expr(self.parse_hole(*a, *b)?)),
            }
        }
        Ok(Expr {
            kind: ExprKind::Interp(parts),
            span,
        })
    }

    /// `out:N`: a transcript value, as the call `out(N)` the evaluator answers.
    fn out_ref(&mut self, t: Token) -> PResult<Expr> {
        let end = self.out_ref_end(t.end).unwrap_or(t.end);
        let digits = self.slice(t.end + 1, end);
        let n: i64 = digits.parse().map_err(|_| {
            self.err_hint(
                format!("out:{digits} is out of range"),
                t.start,
                end,
                "a transcript number is out:N with N >= 1",
            )
        })?;
        self.pos = end;
        self.last_end = end;
        let span = Span::new(t.start, end);
        let num = Expr {
            kind: ExprKind::Literal(Literal::Int(n)),
            span: Span::new(t.end + 1, end),
        };
        Ok(Expr {
            kind: ExprKind::Call {
                callee: Box::new(Expr {
                    kind: ExprKind::Ident("out".into()),
                    span: Span::new(t.start, t.end),
                }),
                args: vec![Arg {
                    name: None,
                    value: num,
                }],
            },
            span,
        })
    }

    fn parse_ident_primary(&mut self, t: Token) -> PResult<Expr> {
        let name = self.text(&t);
        let span = Span::new(t.start, t.end);
        match name {
            "true" | "false" => {
                self.advance()?;
                Ok(self.lit(Literal::Bool(name == "true"), &t))
            }
            "null" => {
                self.advance()?;
                Ok(self.lit(Literal::Null, &t))
            }
            "if" => self.parse_if(),
            "match" => self.parse_match(),
            "try" => self.parse_try(),
            "with" => self.parse_with(),
            "spawn" => {
                self.advance()?;
                let b = self.parse_block()?;
                Ok(Expr {
                    kind: ExprKind::Spawn(b),
                    span: self.span_from(t.start),
                })
            }
            _ if is_keyword(name) => Err(self.err_found("expression", &t)),
            _ if self.interp_follows(t.start, t.end) => self.parse_interp_block(t),
            "out" if !self.is_value_bound(name) && self.out_ref_end(t.end).is_some() => {
                self.out_ref(t)
            }
            "it" | "out" if !self.is_value_bound(name) => Err(self.repl_only(name, t.start, t.end)),
            _ => {
                self.advance()?;
                Ok(Expr {
                    kind: ExprKind::Ident(name.to_string()),
                    span,
                })
            }
        }
    }
}

/// What `&` may put in the background: an interpreter block or a
/// parenthesised command.
fn backgroundable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::InterpBlock { .. } | ExprKind::Command(_) => true,
        ExprKind::Group(inner) => backgroundable(inner),
        _ => false,
    }
}
