//! Statement forms (docs/rules.md §6, §7): `let`/`var`/`export`,
//! assignments (`x = e`, `x += e`, `env.NAME = e`), `fn` definitions with typed
//! and default parameters, `alias`, `use`, `for`, `while`, type annotations, and
//! the parsing of string-interpolation holes in place.

use std::sync::Arc;

use super::lexer::{is_ident_char, is_ident_start, is_keyword, Tok};
use super::parser::Parser;
use super::PResult;
use crate::ast::*;

impl Parser<'_> {
    pub(super) fn parse_assign(&mut self, p: usize, target: AssignTarget) -> PResult<Stmt> {
        if let AssignTarget::Var(_) = target {
            self.advance()?; // the name
        }
        let t = self.bump()?;
        let op = match t.tok {
            Tok::Assign => AssignOp::Set,
            Tok::PlusEq => AssignOp::Add,
            Tok::MinusEq => AssignOp::Sub,
            Tok::StarEq => AssignOp::Mul,
            Tok::SlashEq => AssignOp::Div,
            _ => return Err(self.err_found("an assignment operator", &t)),
        };
        self.skip_newlines()?;
        let value = self.parse_expr()?;
        Ok(Stmt {
            kind: StmtKind::Assign { target, op, value },
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_type(&mut self) -> PResult<TypeAnn> {
        self.enter()?;
        let (name, _) = self.expect_ident("a type name")?;
        let mut args = Vec::new();
        if self.peek()?.tok == Tok::Lt {
            self.advance()?;
            loop {
                args.push(self.parse_type()?);
                let t = self.bump()?;
                match t.tok {
                    Tok::Comma => continue,
                    Tok::Gt => break,
                    _ => return Err(self.err_found("`,` or `>` in a type", &t)),
                }
            }
        }
        let mut optional = false;
        if self.peek()?.tok == Tok::Question {
            self.advance()?;
            optional = true;
        }
        self.leave();
        Ok(TypeAnn {
            name,
            args,
            optional,
        })
    }

    pub(super) fn parse_let(&mut self, p: usize, export: bool) -> PResult<Stmt> {
        let kw = self.bump()?;
        let mutable = self.text(&kw) == "var";
        let (name, nt) = self.expect_ident("a name to bind")?;
        if is_keyword(&name) {
            return Err(self.err(
                format!("cannot bind the keyword `{name}`"),
                nt.start,
                nt.end,
            ));
        }
        let mut ty = None;
        if self.peek()?.tok == Tok::Colon {
            self.advance()?;
            ty = Some(self.parse_type()?);
        }
        let t = self.peek()?;
        if t.tok != Tok::Assign {
            return Err(self.err_found("`=`", &t));
        }
        self.advance()?;
        self.skip_newlines()?;
        let value = self.parse_expr()?;
        self.declare(&name, true);
        Ok(Stmt {
            kind: StmtKind::Let {
                name,
                mutable,
                ty,
                value,
                export,
            },
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_export(&mut self, p: usize) -> PResult<Stmt> {
        self.advance()?;
        let t = self.peek()?;
        let q = t.start;
        if self.is_word(&t, "let") || self.is_word(&t, "var") {
            let mut s = self.parse_let(q, true)?;
            s.span = self.span_from(p);
            Ok(s)
        } else if self.is_word(&t, "fn") {
            let mut s = self.parse_fn_stmt(q, true)?;
            s.span = self.span_from(p);
            Ok(s)
        } else {
            Err(self.teach_export(q, self.err_found("`let`, `var` or `fn` after `export`", &t)))
        }
    }

    pub(super) fn parse_fn_stmt(&mut self, p: usize, export: bool) -> PResult<Stmt> {
        self.advance()?; // fn
        let (name, _) = self.expect_ident("a function name")?;
        self.declare(&name, false);
        let def = self.parse_fn_rest(p, Some(name))?;
        Ok(Stmt {
            kind: StmtKind::Fn {
                def: Arc::new(def),
                export,
            },
            span: self.span_from(p),
        })
    }

    /// `( params ) [-> type] { body }` after `fn NAME`.
    pub(super) fn parse_fn_rest(&mut self, p: usize, name: Option<String>) -> PResult<FnDef> {
        self.expect(Tok::LParen, "`(` after the function name")?;
        self.push_scope();
        let r = self.parse_fn_params_body(p, name);
        self.pop_scope();
        r
    }

    pub(super) fn parse_fn_params_body(
        &mut self,
        p: usize,
        name: Option<String>,
    ) -> PResult<FnDef> {
        let mut params = Vec::new();
        let mut rest = None;
        loop {
            self.skip_newlines()?;
            let t = self.peek()?;
            if t.tok == Tok::RParen {
                self.advance()?;
                break;
            }
            if rest.is_some() {
                return Err(self.err("the rest parameter must be last", t.start, t.end));
            }
            let is_rest = t.tok == Tok::Ellipsis;
            if is_rest {
                self.advance()?;
            }
            let (pname, _) = self.expect_ident("a parameter name")?;
            let mut ty = None;
            if self.peek()?.tok == Tok::Colon {
                self.advance()?;
                ty = Some(self.parse_type()?);
            }
            let mut default = None;
            if !is_rest && self.peek()?.tok == Tok::Assign {
                self.advance()?;
                default = Some(self.parse_expr()?);
            }
            self.declare(&pname, true);
            let param = Param {
                name: pname,
                ty,
                default,
            };
            if is_rest {
                rest = Some(param);
            } else {
                params.push(param);
            }
            self.skip_newlines()?;
            let t = self.bump()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RParen => break,
                _ => return Err(self.err_found("`,` or `)` in the parameter list", &t)),
            }
        }
        let mut ret = None;
        if self.peek()?.tok == Tok::Arrow {
            self.advance()?;
            ret = Some(self.parse_type()?);
        }
        let body = self.parse_block()?;
        Ok(FnDef {
            name,
            params,
            rest,
            ret,
            body: FnBody::Block(body),
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_alias(&mut self, p: usize) -> PResult<Stmt> {
        self.advance()?; // alias
        let (name, _) = self.expect_ident("an alias name")?;
        let eq = self.expect(Tok::Assign, "`=` after the alias name")?;
        if matches!(self.byte(eq.end), b'\'' | b'"') {
            let body = self
                .lex_string(eq.end)
                .ok()
                .and_then(|(s, _)| s.plain())
                .unwrap_or_else(|| "cmd args".into());
            return Err(self.err_hint(
                "`alias NAME='…'` is bash syntax: the quotes would make the whole text one command name",
                p,
                self.last_end,
                format!("write the command itself: `alias {name} = {}`", body.trim()),
            ));
        }
        self.pos = self.skip_ws(self.pos);
        let cmd = self.parse_command()?;
        self.declare(&name, false);
        Ok(Stmt {
            kind: StmtKind::Alias {
                name,
                command: Arc::new(cmd),
            },
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_use(&mut self, p: usize) -> PResult<Stmt> {
        self.advance()?; // use
        let s = self.skip_ws(self.pos);
        self.pos = s;
        let word = self.parse_word(false)?;
        let path = match word.kind {
            WordKind::Plain(t) | WordKind::Path(t) => t,
            WordKind::Expr(Expr {
                kind: ExprKind::Literal(Literal::Str(t)),
                ..
            }) => t,
            _ => return Err(self.err("expected a module path after `use`", s, self.last_end)),
        };
        let file = path.rsplit('/').next().unwrap_or("");
        let stem = file.split('.').next().unwrap_or("");
        if !stem.is_empty() {
            let stem = stem.to_string();
            self.declare(&stem, true);
        }
        Ok(Stmt {
            kind: StmtKind::Use { path },
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_for(&mut self, p: usize) -> PResult<Stmt> {
        self.advance()?; // for
        let (var, _) = self.expect_ident("a loop variable")?;
        let t = self.peek()?;
        if !self.is_word(&t, "in") {
            return Err(self.err_found("`in`", &t));
        }
        self.advance()?;
        let iter = self.parse_header_expr()?;
        self.push_scope();
        self.declare(&var, true);
        let body = self.parse_block();
        self.pop_scope();
        let body = body?;
        Ok(Stmt {
            kind: StmtKind::For { var, iter, body },
            span: self.span_from(p),
        })
    }

    pub(super) fn parse_while(&mut self, p: usize) -> PResult<Stmt> {
        self.advance()?; // while
        let cond = self.parse_header_expr()?;
        let body = self.parse_block()?;
        Ok(Stmt {
            kind: StmtKind::While { cond, body },
            span: self.span_from(p),
        })
    }

    /// An expression in a header position: trailing blocks are not taken.
    pub(super) fn parse_header_expr(&mut self) -> PResult<Expr> {
        let saved = self.no_block;
        self.no_block = true;
        let r = self.parse_bin(1);
        self.no_block = saved;
        r
    }

    /// Parse the hole `[s, e)` of an interpolated string as one expression.
    pub(super) fn parse_hole(&mut self, s: usize, e: usize) -> PResult<Expr> {
        self.enter()?;
        let saved = (
            self.pos,
            self.limit,
            self.last_end,
            self.no_block,
            self.allow_item,
            self.nl_skip,
        );
        self.pos = s;
        self.limit = e;
        self.nl_skip = false;
        self.no_block = false;
        self.allow_item = false;
        let r = self.parse_stmts(false);
        (
            self.pos,
            self.limit,
            self.last_end,
            self.no_block,
            self.allow_item,
            self.nl_skip,
        ) = saved;
        self.leave();
        let mut stmts = r.map_err(|mut e| {
            if e.hint.is_none() {
                e.hint = Some(super::strings::BRACE_HINT.into());
            }
            e
        })?;
        if stmts.len() == 1 {
            if let Some(Stmt {
                kind: StmtKind::Expr(x),
                ..
            }) = stmts.pop()
            {
                return Ok(hole_ident(x));
            }
        }
        Err(self.err_hint(
            "a string interpolation `{…}` must hold exactly one expression",
            s,
            e,
            super::strings::BRACE_HINT,
        ))
    }
}

/// A hole holding just a bare name (`"{x}"`) is a name reference even when the
/// name is not known to be value-bound: the evaluator resolves it like any
/// identifier (binding, then command name), which keeps late-bound names working.
fn hole_ident(x: Expr) -> Expr {
    if let ExprKind::Command(c) = &x.kind {
        if c.env.is_empty()
            && !c.forced
            && c.args.is_empty()
            && c.redirects.is_empty()
            && !c.background
            && c.block.is_none()
        {
            if let WordKind::Plain(name) = &c.head.kind {
                if name.bytes().next().is_some_and(is_ident_start)
                    && name.bytes().all(is_ident_char)
                {
                    return Expr {
                        kind: ExprKind::Ident(name.clone()),
                        span: x.span,
                    };
                }
            }
        }
    }
    x
}
