//! Control-flow expressions (docs/rules.md §7): `if`/`else`, `try`/`catch`,
//! `with cwd:/env:/reef:`, and `match` with arms, alternatives and guards.
//! Headers are parsed without trailing blocks (`if r.ok { … }` works).

use super::lexer::Tok;
use super::parser::Parser;
use super::PResult;
use crate::ast::*;

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

impl Parser<'_> {
    pub(super) fn parse_if(&mut self) -> PResult<Expr> {
        let p = self.skip_ws(self.pos);
        self.parse_if_inner().map_err(|e| self.teach_if(p, e))
    }

    fn parse_if_inner(&mut self) -> PResult<Expr> {
        let kw = self.bump()?;
        let cond = self.parse_header_expr()?;
        let then = self.parse_block()?;
        let mut otherwise = None;
        if self.continue_with_word("else") {
            self.advance()?;
            let t = self.peek()?;
            if self.is_word(&t, "if") {
                otherwise = Some(bx(self.parse_if()?));
            } else {
                let b = self.parse_block()?;
                let span = b.span;
                otherwise = Some(bx(Expr {
                    kind: ExprKind::Block(b),
                    span,
                }));
            }
        }
        let span = self.span_from(kw.start);
        Ok(Expr {
            kind: ExprKind::If {
                cond: bx(cond),
                then,
                otherwise,
            },
            span,
        })
    }

    pub(super) fn parse_try(&mut self) -> PResult<Expr> {
        let kw = self.bump()?;
        let body = self.parse_block()?;
        if !self.continue_with_word("catch") {
            let n = self.peek()?;
            return Err(self.err_found("`catch` after the `try` block", &n));
        }
        self.advance()?;
        let mut name = None;
        let t = self.peek()?;
        if t.tok == Tok::Ident {
            name = Some(self.text(&t).to_string());
            self.advance()?;
        }
        self.push_scope();
        if let Some(n) = &name {
            self.declare(n, true);
        }
        let handler = self.parse_block();
        self.pop_scope();
        let handler = handler?;
        Ok(Expr {
            kind: ExprKind::Try {
                body,
                name,
                handler,
            },
            span: self.span_from(kw.start),
        })
    }

    pub(super) fn parse_with(&mut self) -> PResult<Expr> {
        let kw = self.bump()?;
        let (mut cwd, mut env, mut reef) = (None, None, None);
        loop {
            let (key, kt) = self.expect_ident("`cwd`, `env` or `reef`")?;
            self.expect(Tok::Colon, "`:` after the `with` key")?;
            let v = Some(bx(self.parse_header_expr()?));
            match key.as_str() {
                "cwd" => cwd = v,
                "env" => env = v,
                "reef" => reef = v,
                _ => {
                    return Err(self.err(
                        format!("unknown `with` key `{key}` (expected cwd, env or reef)"),
                        kt.start,
                        kt.end,
                    ))
                }
            }
            if self.peek()?.tok == Tok::Comma {
                self.advance()?;
                self.skip_newlines()?;
                continue;
            }
            break;
        }
        let body = self.parse_block()?;
        Ok(Expr {
            kind: ExprKind::With {
                cwd,
                env,
                reef,
                body,
            },
            span: self.span_from(kw.start),
        })
    }

    pub(super) fn parse_match(&mut self) -> PResult<Expr> {
        let kw = self.bump()?;
        let scrutinee = self.parse_header_expr()?;
        let saved = self.nl_skip;
        self.nl_skip = false;
        let r = self.parse_match_arms();
        self.nl_skip = saved;
        let arms = r?;
        Ok(Expr {
            kind: ExprKind::Match {
                scrutinee: bx(scrutinee),
                arms,
            },
            span: self.span_from(kw.start),
        })
    }

    fn parse_match_arms(&mut self) -> PResult<Vec<MatchArm>> {
        self.expect(Tok::LBrace, "`{` after the match scrutinee")?;
        let mut arms = Vec::new();
        loop {
            let mut t = self.peek()?;
            while matches!(t.tok, Tok::Newline | Tok::Semi | Tok::Comma) {
                self.advance()?;
                t = self.peek()?;
            }
            if t.tok == Tok::RBrace {
                self.advance()?;
                break;
            }
            if t.tok == Tok::Pipe {
                return Err(self.err("unexpected `|` at the start of a match arm", t.start, t.end));
            }
            self.push_scope();
            let arm = self.parse_arm();
            self.pop_scope();
            arms.push(arm?);
            let t = self.peek()?;
            if !matches!(t.tok, Tok::Newline | Tok::Semi | Tok::Comma | Tok::RBrace) {
                return Err(self.err_found("a newline, `;` or `,` between match arms", &t));
            }
        }
        Ok(arms)
    }

    fn parse_arm(&mut self) -> PResult<MatchArm> {
        let start = self.peek()?.start;
        let mut patterns = vec![self.parse_pattern()?];
        while self.peek()?.tok == Tok::Pipe {
            self.advance()?;
            self.skip_newlines()?;
            patterns.push(self.parse_pattern()?);
        }
        let mut guard = None;
        let t = self.peek()?;
        if self.is_word(&t, "if") {
            self.advance()?;
            guard = Some(self.parse_bin(1)?);
        }
        self.expect(Tok::FatArrow, "`=>` in the match arm")?;
        self.skip_newlines()?;
        let body = self.parse_expr()?;
        Ok(MatchArm {
            patterns,
            guard,
            body,
            span: self.span_from(start),
        })
    }
}
