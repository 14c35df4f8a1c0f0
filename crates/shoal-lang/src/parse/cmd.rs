//! CMD mode (docs/rules.md §2, §8): command words and their
//! classification (plain, path, glob, flags, `--`, `-`), environment prefixes,
//! `^` heads, redirects, trailing `&` and trailing blocks, `&&`/`||` chains of
//! commands, and the shell-habit teaching errors (pipes, heredocs, fd redirects,
//! stream merging, `$`, backticks, stray brackets).

use std::rc::Rc;
use std::sync::Arc;

use super::lexer::{is_ident_start, Tok, Token};
use super::parser::Parser;
use super::PResult;
use crate::ast::*;

use shoal_policy::glob::is_glob;

fn is_path(text: &str) -> bool {
    text == "~"
        || text.starts_with("~/")
        || text.starts_with("./")
        || text.starts_with("../")
        || text.starts_with('/')
}

/// Classify a plain word's text (first match wins, docs/rules.md §2).
fn classify(text: &str, span: Span) -> WordKind {
    if text == "--" {
        return WordKind::EndOfFlags;
    }
    if text == "-" {
        return WordKind::Dash;
    }
    if is_glob(text) {
        return WordKind::Glob(text.to_string());
    }
    if is_path(text) {
        return WordKind::Path(text.to_string());
    }
    if let Some(rest) = text.strip_prefix("--") {
        let (name, value) = match rest.split_once('=') {
            Some((n, v)) => {
                let kind = if is_glob(v) {
                    WordKind::Glob(v.to_string())
                } else if is_path(v) {
                    WordKind::Path(v.to_string())
                } else {
                    WordKind::Plain(v.to_string())
                };
                (n, Some(Box::new(Word { kind, span })))
            }
            None => (rest, None),
        };
        return WordKind::LongFlag {
            name: name.replace('-', "_"),
            value,
        };
    }
    if let Some(rest) = text.strip_prefix('-') {
        if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return WordKind::ShortFlags(rest.to_string());
        }
    }
    WordKind::Plain(text.to_string())
}

const WRAP_HINT: &str = "wrap the command in parentheses to use its result: `(cmd args).method()`";

impl Parser<'_> {
    /// A command possibly chained with `&&` / `||` (statement or `( … )`).
    pub(super) fn parse_cmd_chain(&mut self) -> PResult<Expr> {
        let mut lhs = self.parse_command_expr()?;
        for n in 0.. {
            if n >= super::CHAIN_LIMIT {
                return Err(self.too_long());
            }
            let p = self.skip_ws(self.pos);
            let op = match (self.byte(p), self.byte(p + 1)) {
                (b'&', b'&') => BinOp::And,
                (b'|', b'|') => BinOp::Or,
                _ => break,
            };
            // The operand just before the operator: the whole LHS at first,
            // then the right side of the last link.
            let last = match &lhs.kind {
                ExprKind::Binary { rhs, .. } if n > 0 => rhs.as_ref(),
                _ => &lhs,
            };
            if let ExprKind::Command(c) = &last.kind {
                self.check_chain_lhs(c, op == BinOp::And, p)?;
            }
            self.pos = p + 2;
            self.last_end = p + 2;
            self.skip_newlines()?;
            let q = self.skip_ws(self.pos);
            let rhs = if self.starts_like_command(q) {
                self.pos = q;
                self.parse_command_expr()?
            } else {
                self.parse_bin(if op == BinOp::And { 4 } else { 3 })?
            };
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        Ok(lhs)
    }

    /// A single command operand after `&&`/`||` inside an expression.
    pub(super) fn parse_cmd_chain_at(&mut self, _min: u8) -> PResult<Expr> {
        self.pos = self.skip_ws(self.pos);
        self.parse_command_expr()
    }

    fn parse_command_expr(&mut self) -> PResult<Expr> {
        let c = self.parse_command()?;
        let span = c.span;
        Ok(Expr {
            kind: ExprKind::Command(Arc::new(c)),
            span,
        })
    }

    pub(super) fn parse_command(&mut self) -> PResult<Command> {
        self.enter()?;
        let r = self.parse_command_inner();
        self.leave();
        r
    }

    fn parse_command_inner(&mut self) -> PResult<Command> {
        let start = self.skip_ws(self.pos);
        self.pos = start;
        let mut env = Vec::new();
        loop {
            let p = self.skip_ws(self.pos);
            if !is_ident_start(self.byte(p)) {
                break;
            }
            let e = self.ident_end(p);
            if self.byte(e) != b'=' || matches!(self.byte(e + 1), b'=' | b'>') {
                break;
            }
            let name = self.slice(p, e).to_string();
            self.pos = e + 1;
            self.last_end = e + 1;
            let value = match self.byte(e + 1) {
                b'"' | b'\'' | b'(' => self.parse_word(false)?,
                _ if self.is_word_end(e + 1) => Word {
                    kind: WordKind::Plain(String::new()),
                    span: Span::new(e + 1, e + 1),
                },
                _ => {
                    let w = self.parse_word(false)?;
                    match w.kind {
                        WordKind::LongFlag { .. }
                        | WordKind::ShortFlags(_)
                        | WordKind::Dash
                        | WordKind::EndOfFlags => {
                            let text = self
                                .slice(w.span.start as usize, w.span.end as usize)
                                .to_string();
                            Word {
                                kind: WordKind::Plain(text),
                                span: w.span,
                            }
                        }
                        _ => w,
                    }
                }
            };
            env.push((name, value));
        }
        let mut p = self.skip_ws(self.pos);
        let mut forced = false;
        if self.byte(p) == b'^' {
            forced = true;
            p = self.skip_ws(p + 1);
        }
        self.pos = p;
        if self.at_cmd_end(p) {
            let t = self.lex_at(p)?;
            return Err(self.err_found("a command name", &t));
        }
        let head = self.parse_word(true)?;
        let mut args: Vec<Word> = Vec::new();
        let mut redirects = Vec::new();
        let mut background = false;
        let mut block = None;
        let mut prev_end = head.span.end as usize;
        let mut prev_dotted = self.slice(head.span.start as usize, prev_end).contains('.');
        loop {
            let p = self.skip_ws(self.pos);
            self.pos = p;
            if p >= self.limit {
                break;
            }
            match self.byte(p) {
                b'\n' | b';' | b'}' | b')' => break,
                b'&' => {
                    match self.byte(p + 1) {
                        b'&' => break,
                        b'>' => return Err(self.err_hint(
                            "no stream-merging redirect `&>` in shoal",
                            p,
                            p + 2,
                            "stdout and stderr are both on the outcome: `(cmd).out`, `(cmd).err`",
                        )),
                        _ => {}
                    }
                    self.pos = p + 1;
                    self.last_end = p + 1;
                    background = true;
                    break;
                }
                b'|' => {
                    if self.byte(p + 1) == b'|' {
                        break;
                    }
                    return Err(self.err_hint(
                        "shoal has no pipe operator `|`",
                        p,
                        p + 1,
                        "run the pipeline as written with `sh { cmd1 | cmd2 }`, feed a value to a command with `(cmd1).feed(cmd2 args)`, or use methods on the result",
                    ));
                }
                b'>' | b'<' => {
                    let kind = self.redirect_op(p)?;
                    let q = self.skip_ws(self.pos);
                    self.pos = q;
                    if self.at_cmd_end(q) || matches!(self.byte(q), b'>' | b'<' | b'&' | b'|') {
                        let t = self.lex_at(q)?;
                        return Err(self.err_found("a redirect target", &t));
                    }
                    let target = self.parse_word(false)?;
                    prev_end = target.span.end as usize;
                    prev_dotted = false;
                    redirects.push(Redirect { kind, target });
                }
                b'{' => {
                    let b = self.parse_block()?;
                    let span = b.span;
                    block = Some(Arc::new(FnDef {
                        name: None,
                        params: vec![],
                        rest: None,
                        ret: None,
                        body: FnBody::Block(b),
                        span,
                    }));
                    break;
                }
                _ => {
                    let glued_call = self.byte(p) == b'(' && p == prev_end && prev_dotted;
                    let w = self.parse_word(false).map_err(|mut e| {
                        if glued_call && e.hint.is_none() {
                            e.hint = Some(WRAP_HINT.to_string());
                        }
                        e
                    })?;
                    let w = self.flag_value(w)?;
                    prev_end = w.span.end as usize;
                    prev_dotted = matches!(
                        w.kind,
                        WordKind::Plain(_) | WordKind::Path(_) | WordKind::Glob(_)
                    ) && self.slice(w.span.start as usize, prev_end).contains('.');
                    args.push(w);
                }
            }
        }
        let c = Command {
            env,
            forced,
            head,
            args,
            redirects,
            background,
            block,
            span: self.span_from(start),
        };
        self.check_command(&c)?;
        Ok(c)
    }

    /// `--name=` followed by a blank or a glued quote/paren takes the next word.
    fn flag_value(&mut self, w: Word) -> PResult<Word> {
        let text = self.slice(w.span.start as usize, w.span.end as usize);
        if !(text.starts_with("--") && text.ends_with('=')) {
            return Ok(w);
        }
        let WordKind::LongFlag { name, .. } = w.kind else {
            return Ok(w);
        };
        let q = self.skip_ws(self.pos);
        if self.at_cmd_end(q) || matches!(self.byte(q), b'>' | b'<' | b'&' | b'|' | b'{') {
            let span = Span::new(w.span.end as usize, w.span.end as usize);
            let value = Some(Box::new(Word {
                kind: WordKind::Plain(String::new()),
                span,
            }));
            return Ok(Word {
                kind: WordKind::LongFlag { name, value },
                span: w.span,
            });
        }
        self.pos = q;
        let v = self.parse_word(false)?;
        let span = w.span.to(v.span);
        Ok(Word {
            kind: WordKind::LongFlag {
                name,
                value: Some(Box::new(v)),
            },
            span,
        })
    }

    fn at_cmd_end(&self, p: usize) -> bool {
        p >= self.limit || matches!(self.byte(p), b'\n' | b';' | b'}' | b')')
    }

    fn redirect_op(&mut self, p: usize) -> PResult<RedirectKind> {
        let (kind, len) = match (self.byte(p), self.byte(p + 1), self.byte(p + 2)) {
            (b'<', b'<', b'<') => {
                return Err(self.err_hint(
                    "no here-strings `<<<` in shoal",
                    p,
                    p + 3,
                    "feed a value to a command: `\"text\".feed(cmd)`",
                ))
            }
            (b'<', b'<', _) => {
                return Err(self.err_hint(
                    "no heredocs `<<` in shoal",
                    p,
                    p + 2,
                    "use a triple-quoted string and `.feed(cmd)`: `\"\"\"…\"\"\".feed(cat)`",
                ))
            }
            (b'<', _, _) => (RedirectKind::In, 1),
            (b'>', b'>', _) => (RedirectKind::Append, 2),
            (b'>', b'&', _) => {
                return Err(self.err_hint(
                    "no fd-numbered redirects in shoal",
                    p,
                    p + 2,
                    "stderr is on the outcome: `(cmd).err`",
                ))
            }
            _ => (RedirectKind::Out, 1),
        };
        self.pos = p + len;
        self.last_end = p + len;
        Ok(kind)
    }

    /// One CMD-mode word at `self.pos` (blanks already skipped).
    pub(super) fn parse_word(&mut self, head: bool) -> PResult<Word> {
        let _ = head;
        let p = self.pos;
        match self.byte(p) {
            b'"' | b'\'' => {
                let (s, end) = self.lex_string(p)?;
                let s = Rc::new(s);
                let t = Token {
                    tok: Tok::Str(Rc::clone(&s)),
                    start: p,
                    end,
                    space_before: false,
                };
                self.pos = end;
                self.last_end = end;
                let e = self.string_expr(&s, &t)?;
                let span = e.span;
                return Ok(Word {
                    kind: WordKind::Expr(e),
                    span,
                });
            }
            b'(' => {
                let e = self.parse_paren()?;
                let span = e.span;
                return Ok(Word {
                    kind: WordKind::Expr(e),
                    span,
                });
            }
            _ => {}
        }
        let mut i = p;
        while !self.is_word_end(i) {
            match self.byte(i) {
                b'$' => return Err(self.sigil_error(i)),
                b'`' => return Err(self.backtick_error(i)),
                _ => i += 1,
            }
        }
        let text = self.slice(p, i);
        if text.is_empty() {
            return Err(self.unexpected_char(p));
        }
        if text.starts_with(']') {
            return Err(self.err("unexpected `]`", p, p + 1));
        }
        if text.starts_with('[') && !text[1..].contains(']') {
            return Err(self.err_hint(
                "`[` cannot start a command argument",
                p,
                i,
                "to pass a list, call the command as a function: `name([a, b])`, or quote the word",
            ));
        }
        if self.byte(i) == b'>' && text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err_hint(
                "no fd-numbered redirects in shoal",
                p,
                i + 1,
                "stderr is on the outcome: `(cmd).err`; write `echo 2 > f` with a space to pass the word `2`",
            ));
        }
        self.pos = i;
        self.last_end = i;
        let span = Span::new(p, i);
        Ok(Word {
            kind: classify(text, span),
            span,
        })
    }
}
