//! The parser state, token plumbing (peek/bump with a one-entry cache keyed by
//! position), the lexical scope stack of value-bound names, and statements:
//! statement dispatch (docs/rules.md §1), `let`/`var`/`fn`/`alias`/`use`/`export`/
//! `return`/`for`/`while`, assignments and statement separators.

use std::collections::HashMap;

use super::lexer::{is_ident_char, is_ident_start, is_keyword, Tok, Token, INTERPRETERS};
use super::{PResult, ParseContext, ParseError, Warning, MAX_DEPTH, STACK_BUDGET};
use crate::ast::*;

pub(crate) struct Parser<'a> {
    pub(super) src: &'a str,
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
    pub(super) limit: usize,
    pub(super) last_end: usize,
    /// The token at (pos, limit, nl_skip); `cache_key.0 == usize::MAX` when empty.
    cache_key: (usize, usize, bool),
    cache: Token,
    scopes: Vec<HashMap<String, bool>>,
    ctx: &'a ParseContext,
    pub(super) depth: usize,
    /// Address of a local in `new`: recursion also stops when the stack used
    /// since then exceeds [`STACK_BUDGET`] (debug builds have big frames).
    stack_base: usize,
    /// Memo of the last `after_newlines` call: (from, limit, result).
    nl_memo: std::cell::Cell<(usize, usize, usize)>,
    /// In `if`/`while`/`for`/`match`/`with` headers: no trailing blocks.
    pub(super) no_block: bool,
    /// The next primary may be a leading `.` (implicit item lambda).
    pub(super) allow_item: bool,
    /// Inside `( )`, `[ ]` and argument lists newlines are insignificant.
    pub(super) nl_skip: bool,
    /// Bash habits seen so far (the lexer may see a token twice: deduplicated
    /// when taken).
    warnings: std::cell::RefCell<Vec<Warning>>,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, ctx: &'a ParseContext) -> Parser<'a> {
        let here = 0u8;
        let stack_base = std::ptr::addr_of!(here) as usize;
        Parser {
            stack_base,
            nl_memo: std::cell::Cell::new((usize::MAX, 0, 0)),
            src,
            bytes: src.as_bytes(),
            pos: 0,
            limit: src.len(),
            last_end: 0,
            cache_key: (usize::MAX, 0, false),
            cache: Token {
                tok: Tok::Eof,
                start: 0,
                end: 0,
                space_before: false,
            },
            scopes: vec![HashMap::new()],
            ctx,
            depth: 0,
            no_block: false,
            allow_item: false,
            nl_skip: false,
            warnings: std::cell::RefCell::new(Vec::new()),
        }
    }

    // ----- warnings -------------------------------------------------------------

    /// Note a likely bash habit at `[s, e)`.
    pub(super) fn warn(
        &self,
        code: &'static str,
        msg: impl Into<String>,
        s: usize,
        e: usize,
        hint: impl Into<String>,
    ) {
        let mut w = self.warnings.borrow_mut();
        // Bounded: a program full of habits reports the first few hundred.
        if w.len() < 256 {
            w.push(Warning {
                code,
                message: msg.into(),
                span: Span::new(s, e.max(s)),
                hint: hint.into(),
            });
        }
    }

    /// The warnings, in source order, one per (span, code).
    pub(super) fn take_warnings(&mut self) -> Vec<Warning> {
        let mut w = std::mem::take(self.warnings.get_mut());
        w.sort_by_key(|x| (x.span.start, x.span.end, x.code));
        w.dedup_by(|a, b| a.span == b.span && a.code == b.code);
        w
    }

    /// `name` is bound by this program or earlier input (any kind of
    /// binding), so it does not mean the builtin of that name.
    pub(super) fn is_bound_any(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains_key(name)) || self.ctx.bound.contains(name)
    }

    // ----- errors -------------------------------------------------------------

    pub(super) fn err(&self, msg: impl Into<String>, s: usize, e: usize) -> ParseError {
        ParseError {
            msg: msg.into(),
            span: Span::new(s, e.max(s)),
            hint: None,
        }
    }

    pub(super) fn err_hint(
        &self,
        msg: impl Into<String>,
        s: usize,
        e: usize,
        hint: impl Into<String>,
    ) -> ParseError {
        ParseError {
            msg: msg.into(),
            span: Span::new(s, e.max(s)),
            hint: Some(hint.into()),
        }
    }

    pub(super) fn err_found(&self, what: &str, t: &Token) -> ParseError {
        let found = match t.tok {
            Tok::Ident => format!("`{}`", self.text(t)),
            _ => t.tok.name().to_string(),
        };
        self.err(format!("expected {what}, found {found}"), t.start, t.end)
    }

    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        let here = 0u8;
        let used = (std::ptr::addr_of!(here) as usize).abs_diff(self.stack_base);
        if self.depth > MAX_DEPTH || used > STACK_BUDGET {
            return Err(self.err("nesting too deep", self.pos, self.pos + 1));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ----- tokens --------------------------------------------------------------

    /// Make sure the token at the current position is cached.
    pub(super) fn fill(&mut self) -> PResult<()> {
        let key = (self.pos, self.limit, self.nl_skip);
        if self.cache_key == key {
            return Ok(());
        }
        let mut t = self.lex_at(self.pos)?;
        if self.nl_skip {
            while t.tok == Tok::Newline {
                let mut n = self.lex_at(t.end)?;
                n.space_before = true;
                t = n;
            }
        }
        self.cache = t;
        self.cache_key = key;
        Ok(())
    }

    /// The current token (call [`Parser::fill`] first).
    pub(super) fn cur(&self) -> &Token {
        &self.cache
    }

    pub(super) fn peek(&mut self) -> PResult<Token> {
        self.fill()?;
        Ok(self.cache.clone())
    }

    /// The current token is `want` (a payload-free token).
    pub(super) fn at(&mut self, want: Tok) -> PResult<bool> {
        self.fill()?;
        Ok(self.cache.tok == want)
    }

    /// Consume the current token without returning it.
    pub(super) fn advance(&mut self) -> PResult<()> {
        self.fill()?;
        self.pos = self.cache.end;
        self.last_end = self.cache.end;
        Ok(())
    }

    pub(super) fn bump(&mut self) -> PResult<Token> {
        let t = self.peek()?;
        self.pos = t.end;
        self.last_end = t.end;
        Ok(t)
    }

    pub(super) fn text(&self, t: &Token) -> &'a str {
        self.slice(t.start, t.end)
    }

    pub(super) fn is_word(&self, t: &Token, w: &str) -> bool {
        t.tok == Tok::Ident && self.text(t) == w
    }

    pub(super) fn expect(&mut self, want: Tok, what: &str) -> PResult<Token> {
        if self.at(want)? {
            self.bump()
        } else {
            Err(self.err_found(what, self.cur()))
        }
    }

    pub(super) fn expect_ident(&mut self, what: &str) -> PResult<(String, Token)> {
        let t = self.peek()?;
        if t.tok == Tok::Ident {
            self.advance()?;
            Ok((self.text(&t).to_string(), t))
        } else {
            Err(self.err_found(what, &t))
        }
    }

    pub(super) fn skip_newlines(&mut self) -> PResult<()> {
        while self.at(Tok::Newline)? {
            self.advance()?;
        }
        Ok(())
    }

    /// Position of the first token after blanks, comments and newlines.
    pub(super) fn after_newlines(&self, start: usize) -> usize {
        let (from, limit, to) = self.nl_memo.get();
        if from == start && limit == self.limit {
            return to;
        }
        let mut p = start;
        loop {
            p = self.skip_ws(p);
            if self.byte(p) == b'\n' {
                p += 1;
            } else {
                break;
            }
        }
        self.nl_memo.set((start, self.limit, p));
        p
    }

    /// The keyword `w` (not a longer identifier) is at `p`.
    pub(super) fn word_at(&self, p: usize, w: &str) -> bool {
        self.slice(p, p + w.len()) == w && !is_ident_char(self.byte(p + w.len()))
    }

    /// After optional newlines, the keyword `w` follows (`else`, `catch`);
    /// if so, move to it.
    pub(super) fn continue_with_word(&mut self, w: &str) -> bool {
        let q = self.after_newlines(self.pos);
        if self.word_at(q, w) {
            self.pos = q;
            true
        } else {
            false
        }
    }

    /// After blanks, an identifier at `p` is followed by `:` (a record key or
    /// named argument).
    pub(super) fn ident_then_colon(&self, p: usize) -> bool {
        let e = self.ident_end(p);
        e > p && self.byte(self.skip_ws(e)) == b':'
    }

    pub(super) fn span_from(&self, start: usize) -> Span {
        Span::new(start, self.last_end.max(start))
    }

    // ----- scopes --------------------------------------------------------------

    pub(super) fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
    }

    pub(super) fn pop_scope(&mut self) {
        if self.scopes.len() > 1 {
            self.scopes.pop();
        }
    }

    pub(super) fn declare(&mut self, name: &str, value: bool) {
        if name == "_" {
            return;
        }
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), value);
        }
    }

    pub(super) fn is_value_bound(&self, name: &str) -> bool {
        for s in self.scopes.iter().rev() {
            if let Some(v) = s.get(name) {
                return *v;
            }
        }
        self.ctx.value_bound.contains(name) || matches!(name, "path" | "glob" | "regex")
    }

    // ----- raw lookahead -------------------------------------------------------

    pub(super) fn ident_end(&self, p: usize) -> usize {
        let mut i = p;
        if !is_ident_start(self.byte(i)) {
            return p;
        }
        while is_ident_char(self.byte(i)) {
            i += 1;
        }
        i
    }

    /// Command terminators and blanks (where a CMD word ends).
    pub(super) fn is_word_end(&self, i: usize) -> bool {
        i >= self.limit
            || matches!(
                self.byte(i),
                b' ' | b'\t'
                    | b'\r'
                    | b'\n'
                    | b'('
                    | b')'
                    | b'{'
                    | b'}'
                    | b'"'
                    | b'\''
                    | b';'
                    | b'&'
                    | b'<'
                    | b'>'
                    | b'|'
            )
    }

    /// Raw text at `p` starts a path word (`/x`, `~`, `~/x`, `./x`, `../x`).
    pub(super) fn starts_path(&self, p: usize) -> bool {
        match self.byte(p) {
            b'/' => p < self.limit,
            b'~' => self.byte(p + 1) == b'/' || self.is_word_end(p + 1),
            b'.' => {
                self.byte(p + 1) == b'/' || (self.byte(p + 1) == b'.' && self.byte(p + 2) == b'/')
            }
            _ => false,
        }
    }

    /// An interpreter block starts at the identifier `[p, e)`.
    pub(super) fn interp_follows(&self, p: usize, e: usize) -> bool {
        let name = self.slice(p, e);
        if !INTERPRETERS.contains(&name) || self.is_value_bound(name) {
            return false;
        }
        if self.byte(e) == b'\'' {
            return true;
        }
        let mut i = e;
        while matches!(self.byte(i), b' ' | b'\t') {
            i += 1;
        }
        self.byte(i) == b'{'
    }

    /// End of the balanced `( … )` opened at `open` (raw scan, strings skipped).
    fn raw_paren_end(&self, open: usize) -> usize {
        let mut depth = 0usize;
        let mut i = open;
        while i < self.limit {
            match self.byte(i) {
                b'(' => depth += 1,
                b')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b'"' | b'\'' => {
                    if let Ok((_, end)) = self.lex_string(i) {
                        i = end;
                        continue;
                    }
                }
                b'\n' => return i,
                _ => {}
            }
            i += 1;
        }
        i
    }

    /// `re"…"` / `t"…"` starts at the identifier `[p, e)`.
    pub(super) fn tagged_string(&self, p: usize, e: usize) -> bool {
        matches!(self.slice(p, e), "re" | "t") && self.byte(e) == b'"'
    }

    /// Content at `p` is a command (docs/rules.md §4, command substitution).
    pub(super) fn starts_like_command(&self, p: usize) -> bool {
        let b = self.byte(p);
        if p >= self.limit {
            return false;
        }
        if b == b'^' || self.starts_path(p) {
            return true;
        }
        if !is_ident_start(b) {
            return false;
        }
        let e = self.ident_end(p);
        let name = self.slice(p, e);
        if is_keyword(name) || name == "it" || name == "out" || self.is_value_bound(name) {
            return false;
        }
        if self.interp_follows(p, e) || self.tagged_string(p, e) {
            return false;
        }
        let n = self.byte(e);
        if matches!(n, b'.' | b'(' | b'[') || (n == b'?' && self.byte(e + 1) == b'.') {
            return false;
        }
        let q = self.skip_ws(e);
        !(self.byte(q) == b'=' && self.byte(q + 1) == b'>')
    }

    // ----- programs and statements ----------------------------------------------

    pub(crate) fn parse_program(&mut self) -> PResult<Program> {
        let stmts = self.parse_stmts(false)?;
        Ok(Program { stmts })
    }

    /// Statements up to EOF (`in_block == false`) or up to a `}` (not consumed).
    pub(super) fn parse_stmts(&mut self, in_block: bool) -> PResult<Vec<Stmt>> {
        let mut stmts = if self.depth == 0 {
            // Top level of a program: size for ~one statement per 48 bytes.
            Vec::with_capacity(self.limit / 48 + 1)
        } else {
            Vec::new()
        };
        loop {
            // Separators are skipped on raw bytes: the statement itself may
            // start with text EXPR mode cannot lex (`~`, `./x`).
            let mut p = self.skip_ws(self.pos);
            while matches!(self.byte(p), b'\n' | b';') {
                p = self.skip_ws(p + 1);
            }
            self.pos = p;
            if p >= self.limit {
                if in_block {
                    return Err(self.err("expected `}`, found end of input", p, p));
                }
                break;
            }
            if self.byte(p) == b'}' {
                if in_block {
                    break;
                }
                return Err(self.err("unexpected `}`", p, p + 1));
            }
            let s = self.parse_stmt()?;
            stmts.push(s);
            self.fill()?;
            let t = self.cur();
            match t.tok {
                Tok::Newline | Tok::Semi => {
                    self.advance()?;
                }
                Tok::RBrace | Tok::Eof => {}
                _ => {
                    return Err(self.err(
                        "expected newline or `;` between statements",
                        t.start,
                        t.end,
                    ))
                }
            }
        }
        Ok(stmts)
    }

    /// `{ stmts }` with its own scope.
    pub(super) fn parse_block(&mut self) -> PResult<Block> {
        self.enter()?;
        let open = self.expect(Tok::LBrace, "`{`")?;
        let saved = (self.no_block, self.allow_item, self.nl_skip);
        self.no_block = false;
        self.nl_skip = false;
        self.allow_item = false;
        self.push_scope();
        let r = self.parse_stmts(true);
        self.pop_scope();
        (self.no_block, self.allow_item, self.nl_skip) = saved;
        let stmts = r?;
        self.expect(Tok::RBrace, "`}`")?;
        self.leave();
        Ok(Block {
            stmts,
            span: self.span_from(open.start),
        })
    }

    fn parse_stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.parse_stmt_inner();
        self.leave();
        r
    }

    fn parse_stmt_inner(&mut self) -> PResult<Stmt> {
        let p = self.skip_ws(self.pos);
        self.pos = p;
        let b = self.byte(p);
        if b == b'^' || self.starts_path(p) {
            return self.cmd_stmt(p);
        }
        if !is_ident_start(b) {
            if let Some(e) = self.teach_dot_source(p) {
                return Err(e);
            }
            if b == b'[' {
                return self.expr_stmt(p).map_err(|e| self.teach_test(p, e));
            }
            return self.expr_stmt(p);
        }
        let e = self.ident_end(p);
        let name = self.slice(p, e);
        match name {
            "let" | "var" => return self.parse_let(p, false),
            "export" => return self.parse_export(p),
            "fn" => return self.parse_fn_stmt(p, false),
            "alias" => return self.parse_alias(p),
            "use" => return self.parse_use(p),
            "return" => {
                self.advance()?;
                let t = self.peek()?;
                let v = match t.tok {
                    Tok::Newline | Tok::Semi | Tok::RBrace | Tok::Eof => None,
                    _ => Some(self.parse_expr()?),
                };
                return Ok(Stmt {
                    kind: StmtKind::Return(v),
                    span: self.span_from(p),
                });
            }
            "break" | "continue" => {
                self.advance()?;
                let kind = if name == "break" {
                    StmtKind::Break
                } else {
                    StmtKind::Continue
                };
                return Ok(Stmt {
                    kind,
                    span: self.span_from(p),
                });
            }
            "for" => return self.parse_for(p).map_err(|e| self.teach_for(p, e)),
            "while" => return self.parse_while(p).map_err(|e| self.teach_while(p, e)),
            "true" | "false" | "null" | "if" | "match" | "try" | "with" | "spawn" => {
                return self.expr_stmt(p)
            }
            "else" | "in" | "catch" => {
                return Err(self.err(format!("unexpected `{name}`"), p, e));
            }
            _ => {}
        }
        if self.interp_follows(p, e) || self.tagged_string(p, e) {
            return self.expr_stmt(p);
        }
        // NAME=value: env prefix (more words follow) or assignment.
        if self.byte(e) == b'=' && !matches!(self.byte(e + 1), b'=' | b'>') {
            let mut w = e + 1;
            match self.byte(w) {
                b'"' | b'\'' => w = self.lex_string(w).map(|x| x.1).unwrap_or(w),
                b'(' => w = self.raw_paren_end(w),
                _ => {
                    while !self.is_word_end(w) {
                        w += 1;
                    }
                }
            }
            let q = self.skip_ws(w);
            let n = self.byte(q);
            if q < self.limit && (is_ident_start(n) || matches!(n, b'.' | b'/' | b'~' | b'^')) {
                return self.cmd_stmt(p);
            }
            if !self.is_bound_any(name) {
                return Err(self.teach_glued_assign(p, e, w));
            }
            return self.parse_assign(p, AssignTarget::Var(name.to_string()));
        }
        if name == "env" && self.byte(e) == b'.' && is_ident_start(self.byte(e + 1)) {
            let ne = self.ident_end(e + 1);
            let q = self.skip_ws(ne);
            if self.assign_op_at(q).is_some() {
                let var = self.slice(e + 1, ne).to_string();
                self.advance()?; // env
                self.advance()?; // .
                self.advance()?; // NAME
                return self.parse_assign(p, AssignTarget::Env(var));
            }
        }
        let q = self.skip_ws(e);
        if self.assign_op_at(q).is_some() {
            return self.parse_assign(p, AssignTarget::Var(name.to_string()));
        }
        let n = self.byte(e);
        if matches!(n, b'.' | b'(' | b'[') || (n == b'?' && self.byte(e + 1) == b'.') {
            return self.expr_stmt(p);
        }
        if self.is_value_bound(name) {
            return self.expr_stmt(p);
        }
        if name == "out" && self.out_ref_end(e).is_some() {
            return self.expr_stmt(p);
        }
        if name == "it" || name == "out" {
            return Err(self.repl_only(name, p, e));
        }
        self.cmd_stmt(p)
    }

    /// `out:N` after `out` ending at `e`: where its digits end.
    pub(super) fn out_ref_end(&self, e: usize) -> Option<usize> {
        if self.byte(e) != b':' || !self.byte(e + 1).is_ascii_digit() {
            return None;
        }
        let mut q = e + 1;
        while q < self.limit && self.byte(q).is_ascii_digit() {
            q += 1;
        }
        let next = self.byte(q);
        (q <= self.limit && !(next.is_ascii_alphanumeric() || next == b'_')).then_some(q)
    }

    pub(super) fn repl_only(&self, name: &str, s: usize, e: usize) -> ParseError {
        let hint = if name == "out" {
            "a stored result is out:N, e.g. out:3.lines().len(); or bind a value with `let` and use that name"
        } else {
            "bind the value with `let` and use that name"
        };
        self.err_hint(
            format!("`{name}` is REPL-only (the previous result); it does not exist in scripts"),
            s,
            e,
            hint,
        )
    }

    fn assign_op_at(&self, q: usize) -> Option<AssignOp> {
        let n = self.byte(q + 1);
        match self.byte(q) {
            b'=' if !matches!(n, b'=' | b'>') => Some(AssignOp::Set),
            b'+' if n == b'=' => Some(AssignOp::Add),
            b'-' if n == b'=' => Some(AssignOp::Sub),
            b'*' if n == b'=' => Some(AssignOp::Mul),
            b'/' if n == b'=' => Some(AssignOp::Div),
            _ => None,
        }
    }

    fn expr_stmt(&mut self, p: usize) -> PResult<Stmt> {
        let e = self.parse_expr()?;
        Ok(Stmt {
            kind: StmtKind::Expr(e),
            span: self.span_from(p),
        })
    }

    fn cmd_stmt(&mut self, p: usize) -> PResult<Stmt> {
        let e = self.parse_cmd_chain()?;
        Ok(Stmt {
            kind: StmtKind::Expr(e),
            span: self.span_from(p),
        })
    }
}
