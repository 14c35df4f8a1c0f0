//! Effect derivation (docs/rules.md §21): a static walk of the
//! syntax tree that never executes anything. What cannot be known
//! statically (a non-literal argument, an unknown external command, an
//! interpreter block) is `opaque`; a non-literal path argument makes the
//! whole plan `[opaque]`.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use super::effect::Effect;
use crate::adapters::Catalog;
use crate::lang::ast::*;

/// What derivation may look at: the session's cwd, environment and adapter
/// catalog, and the names the session bound before this source.
pub struct Context<'a> {
    pub cwd: &'a Path,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub adapters: Option<&'a Catalog>,
    /// Names bound by earlier input of the session (functions, aliases,
    /// values): a command head naming one runs code this source does not show.
    pub bound: &'a HashSet<String>,
}

/// Depth past which derivation gives up (the whole plan is `[opaque]`).
const MAX_DEPTH: usize = 256;

struct Walker<'a, 'c> {
    cx: &'a Context<'c>,
    out: Vec<Effect>,
    seen: HashSet<Effect>,
    /// Names this source binds (functions, aliases, values, parameters,
    /// loop and pattern variables): a bare name among them is not a command.
    local: HashSet<String>,
    depth: usize,
    /// The cwd later relative paths resolve against (`cd X` in the program
    /// moves it; `None`: not known statically).
    cwd: Option<PathBuf>,
    /// Inside a function, lambda or alias body.
    in_fn: usize,
    /// Bodies are derived with the cwd unknown (the program changes its
    /// cwd, so a body may run anywhere).
    fn_cwd_unknown: bool,
    /// The program changes its cwd somewhere.
    saw_cd: bool,
}

/// A derivation that could not be completed statically.
struct Unknown;

type R = Result<(), Unknown>;

/// The arguments of a builtin: command words, or a call's arguments.
#[derive(Clone, Copy)]
enum BArgs<'x> {
    Words(&'x [Word]),
    Call(&'x [Arg]),
}

/// The effects of `prog`, de-duplicated in first-appearance order. Fails
/// closed: what cannot be classified is `opaque`.
pub fn derive(prog: &Program, cx: &Context) -> Vec<Effect> {
    let first = derive_pass(prog, cx, false);
    match first {
        // A program that changes its cwd: bodies may run after the change,
        // so their relative paths are not known.
        Ok((_, true)) => derive_pass(prog, cx, true)
            .map(|(e, _)| e)
            .unwrap_or_else(|Unknown| vec![Effect::Opaque]),
        Ok((e, false)) => e,
        Err(Unknown) => vec![Effect::Opaque],
    }
}

fn derive_pass(
    prog: &Program,
    cx: &Context,
    fn_cwd_unknown: bool,
) -> Result<(Vec<Effect>, bool), Unknown> {
    let mut w = Walker {
        cx,
        out: Vec::new(),
        seen: HashSet::new(),
        local: HashSet::new(),
        depth: 0,
        cwd: Some(cx.cwd.to_path_buf()),
        in_fn: 0,
        fn_cwd_unknown,
        saw_cd: false,
    };
    collect_local(&prog.stmts, &mut w.local);
    w.stmts(&prog.stmts)?;
    Ok((w.out, w.saw_cd))
}

fn collect_local(stmts: &[Stmt], into: &mut HashSet<String>) {
    for s in stmts {
        match &s.kind {
            StmtKind::Fn { def, .. } => {
                if let Some(n) = &def.name {
                    into.insert(n.clone());
                }
            }
            StmtKind::Alias { name, .. } => {
                into.insert(name.clone());
            }
            StmtKind::Let { name, .. } => {
                into.insert(name.clone());
            }
            _ => {}
        }
    }
}

fn pattern_names(p: &Pattern, into: &mut HashSet<String>) {
    match p {
        Pattern::Bind(n) => {
            into.insert(n.clone());
        }
        Pattern::Type { bind: Some(n), .. } => {
            into.insert(n.clone());
        }
        Pattern::Record(fields) => {
            for (k, sub) in fields {
                match sub {
                    Some(sp) => pattern_names(sp, into),
                    None => {
                        into.insert(k.clone());
                    }
                }
            }
        }
        Pattern::List { items, rest } => {
            for i in items {
                pattern_names(i, into);
            }
            if let Some(Some(r)) = rest {
                into.insert(r.clone());
            }
        }
        _ => {}
    }
}

/// Language heads that are no command (`now`, `today`).
fn is_value_word(n: &str) -> bool {
    matches!(n, "now" | "today" | "true" | "false" | "null")
}

impl Walker<'_, '_> {
    fn push(&mut self, e: Effect) {
        if self.seen.insert(e.clone()) {
            self.out.push(e);
        }
    }

    fn enter(&mut self) -> R {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(Unknown)
        } else {
            Ok(())
        }
    }

    /// The cwd relative paths resolve against here (`None`: unknown).
    fn cur_cwd(&self) -> Option<&Path> {
        if self.in_fn > 0 && self.fn_cwd_unknown {
            return None;
        }
        self.cwd.as_deref()
    }

    fn stmts(&mut self, stmts: &[Stmt]) -> R {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn block(&mut self, b: &Block) -> R {
        self.enter()?;
        let before = self.cwd.clone();
        let mut inner = std::mem::take(&mut self.local);
        collect_local(&b.stmts, &mut inner);
        let saved = std::mem::replace(&mut self.local, inner);
        let r = self.stmts(&b.stmts);
        let inner = std::mem::replace(&mut self.local, saved);
        self.local.extend(inner);
        if self.cwd != before {
            // A cd inside a block that may not run (or run again): after
            // it the cwd is not known.
            self.cwd = None;
        }
        self.depth -= 1;
        r
    }

    /// A loop body: walked again with the cwd unknown when it moves it
    /// (the next iteration starts elsewhere).
    fn loop_body(&mut self, b: &Block) -> R {
        let before = self.cwd.clone();
        self.block(b)?;
        if self.cwd != before {
            self.cwd = None;
            self.block(b)?;
        }
        Ok(())
    }

    fn fn_def(&mut self, def: &FnDef) -> R {
        for p in def.params.iter().chain(def.rest.iter()) {
            self.local.insert(p.name.clone());
            if let Some(d) = &p.default {
                self.expr(d)?;
            }
        }
        self.in_fn += 1;
        let saved_cwd = self.cwd.clone();
        let r = match &def.body {
            FnBody::Block(b) => self.block(b),
            FnBody::Expr(e) => self.expr(e),
        };
        // Defining a function runs nothing: the cwd after it is as before.
        self.cwd = saved_cwd;
        self.in_fn -= 1;
        r
    }

    fn stmt(&mut self, s: &Stmt) -> R {
        match &s.kind {
            StmtKind::Let { value, name, .. } => {
                self.expr(value)?;
                self.local.insert(name.clone());
                Ok(())
            }
            StmtKind::Fn { def, .. } => self.fn_def(def),
            StmtKind::Alias { command, .. } => {
                // The alias body runs where it is called: like a function's.
                self.in_fn += 1;
                let saved_cwd = self.cwd.clone();
                let r = self.command(command);
                self.cwd = saved_cwd;
                self.in_fn -= 1;
                r
            }
            StmtKind::Use { .. } => {
                self.push(Effect::Opaque);
                Ok(())
            }
            StmtKind::Return(e) => e.as_ref().map_or(Ok(()), |e| self.expr(e)),
            StmtKind::Break | StmtKind::Continue => Ok(()),
            StmtKind::For { iter, body, var } => {
                self.expr(iter)?;
                self.local.insert(var.clone());
                self.loop_body(body)
            }
            StmtKind::While { cond, body } => {
                self.expr(cond)?;
                self.loop_body(body)?;
                self.expr(cond)
            }
            StmtKind::Assign { target, value, .. } => {
                if let AssignTarget::Env(n) = target {
                    self.push(Effect::EnvWrite {
                        names: vec![n.clone()],
                    });
                }
                self.expr(value)
            }
            StmtKind::Expr(e) => self.expr(e),
        }
    }

    fn args(&mut self, args: &[Arg]) -> R {
        for a in args {
            self.expr(&a.value)?;
        }
        Ok(())
    }

    fn expr(&mut self, e: &Expr) -> R {
        self.enter()?;
        let r = self.expr_inner(e);
        self.depth -= 1;
        r
    }

    /// Is `n` bound (by this source or the session) rather than a command?
    fn is_bound(&self, n: &str) -> bool {
        self.local.contains(n) || self.cx.bound.contains(n)
    }

    /// An unbound namespace root used as a receiver (`json.parse`, `env.X`).
    fn is_namespace_root(&self, e: &Expr) -> bool {
        matches!(&e.kind, ExprKind::Ident(n)
            if !self.is_bound(n)
                && (crate::value::ns::is_namespace(n) || matches!(n.as_str(), "env" | "secret" | "http")))
    }

    /// A bare name in value position: a command when it resolves to one
    /// (`let x = whoami`, `hostname.out`), run with no arguments.
    fn bare_name(&mut self, n: &str) -> R {
        if self.is_bound(n) || is_value_word(n) {
            return Ok(());
        }
        if crate::lang::eval::is_builtin_head(n) {
            if self.builtin(n, BArgs::Words(&[]))?.is_some() {
                return Ok(());
            }
            return self.external(n, &[]);
        }
        let path_var = (self.cx.env)("PATH");
        let cwd = self.cur_cwd().unwrap_or(self.cx.cwd);
        if crate::shell::lookup::on_path(n, path_var.as_deref(), cwd) {
            return self.external(n, &[]);
        }
        // An undefined name raises; it does nothing.
        Ok(())
    }

    fn expr_inner(&mut self, e: &Expr) -> R {
        match &e.kind {
            ExprKind::Literal(_) => Ok(()),
            ExprKind::Ident(n) => self.bare_name(n),
            ExprKind::Interp(parts) => {
                for p in parts {
                    if let InterpPart::Expr(x) = p {
                        self.expr(x)?;
                    }
                }
                Ok(())
            }
            ExprKind::List(xs) => xs.iter().try_for_each(|x| self.expr(x)),
            ExprKind::Record(kv) => kv.iter().try_for_each(|(_, x)| self.expr(x)),
            ExprKind::Block(b) | ExprKind::Spawn(b) => self.block(b),
            ExprKind::Unary { expr, .. } | ExprKind::Group(expr) => self.expr(expr),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs)?;
                self.expr(rhs)
            }
            ExprKind::Range { start, end, .. } => {
                self.expr(start)?;
                self.expr(end)
            }
            ExprKind::Field { recv, name, .. } => {
                if is_ident(recv, "env") && !self.is_bound("env") {
                    self.push(Effect::EnvRead {
                        names: vec![name.clone()],
                    });
                    return Ok(());
                }
                if self.is_namespace_root(recv) {
                    return Ok(());
                }
                self.expr(recv)
            }
            ExprKind::MethodCall {
                recv, name, args, ..
            } => {
                if is_ident(recv, "http") && !self.is_bound("http") {
                    return self.http(name, args);
                }
                if is_ident(recv, "env") && !self.is_bound("env") {
                    self.push(Effect::EnvRead {
                        names: vec!["*".into()],
                    });
                    return self.args(args);
                }
                if !self.is_namespace_root(recv) {
                    self.expr(recv)?;
                }
                self.args(args)?;
                self.method_effects(recv, name, args)
            }
            ExprKind::Index { recv, index } => {
                self.expr(recv)?;
                self.expr(index)
            }
            ExprKind::Call { callee, args } => {
                if let ExprKind::Field { recv, name, .. } = &callee.kind {
                    if is_ident(recv, "http") && !self.is_bound("http") {
                        return self.http(name, args);
                    }
                }
                if let ExprKind::Ident(n) = &callee.kind {
                    return self.call_named(n, args);
                }
                self.expr(callee)?;
                self.args(args)
            }
            ExprKind::Lambda(def) => self.fn_def(def),
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond)?;
                let before = self.cwd.clone();
                self.block(then)?;
                let after_then = std::mem::replace(&mut self.cwd, before);
                otherwise.as_ref().map_or(Ok(()), |o| self.expr(o))?;
                if self.cwd != after_then {
                    self.cwd = None;
                }
                Ok(())
            }
            ExprKind::Match { scrutinee, arms } => {
                self.expr(scrutinee)?;
                for a in arms {
                    for p in &a.patterns {
                        pattern_names(p, &mut self.local);
                    }
                    if let Some(g) = &a.guard {
                        self.expr(g)?;
                    }
                    let before = self.cwd.clone();
                    self.expr(&a.body)?;
                    if self.cwd != before {
                        self.cwd = None;
                    }
                }
                Ok(())
            }
            ExprKind::Try {
                body,
                handler,
                name,
            } => {
                self.block(body)?;
                if let Some(n) = name {
                    self.local.insert(n.clone());
                }
                self.block(handler)
            }
            ExprKind::Catch {
                expr,
                handler,
                name,
            } => {
                self.expr(expr)?;
                if let Some(n) = name {
                    self.local.insert(n.clone());
                }
                self.expr(handler)
            }
            ExprKind::With {
                cwd,
                env,
                reef,
                body,
            } => {
                if cwd.is_some() || env.is_some() || reef.is_some() {
                    // The body's relative paths and PATH are not static.
                    return Err(Unknown);
                }
                self.block(body)
            }
            ExprKind::Command(c) => self.command(c),
            ExprKind::InterpBlock { .. } => {
                self.push(Effect::Opaque);
                Ok(())
            }
        }
    }

    /// `name(args)`: a special form, a constructor, a function of this
    /// source or the session, or a command in call form.
    fn call_named(&mut self, n: &str, args: &[Arg]) -> R {
        if self.local.contains(n) {
            // Defined in this source: its body was walked where defined.
            return self.args(args);
        }
        if self.cx.bound.contains(n) {
            // A function of an earlier exec: its body is not here.
            self.push(Effect::Opaque);
            return self.args(args);
        }
        self.args(args)?;
        let first = || args.iter().find(|a| a.name.is_none()).map(|a| &a.value);
        match n {
            "parallel" | "retry" | "on" | "now" | "today" | "assert" | "path" | "regex"
            | "range" | "channel" | "every" => Ok(()),
            "run" => {
                self.push(Effect::Opaque);
                if let Some(p) = first().and_then(literal_str) {
                    let p = self.resolve(&p)?;
                    self.push(Effect::FsRead { paths: vec![p] });
                }
                Ok(())
            }
            "open" | "tail" | "watch" => {
                let p = first().map(|e| self.literal_path(e)).ok_or(Unknown)??;
                self.push(Effect::FsRead { paths: vec![p] });
                Ok(())
            }
            "glob" => {
                let pat = first().and_then(literal_str).ok_or(Unknown)?;
                let root = crate::value::glob::root_of(&pat, Path::new(""));
                let root = self.resolve(&root.to_string_lossy())?;
                self.push(Effect::FsRead { paths: vec![root] });
                Ok(())
            }
            _ if crate::lang::eval::is_builtin_head(n) => {
                if self.builtin(n, BArgs::Call(args))?.is_some() {
                    return Ok(());
                }
                self.push(Effect::Opaque);
                Ok(())
            }
            // An external command in call form (`id()`, `sh("-c", ..)`), or
            // an undefined function: what it does is not in this source.
            _ => {
                self.push(Effect::Opaque);
                Ok(())
            }
        }
    }

    /// A literal path expression (`"x"`, `path("x")`), resolved.
    fn literal_path(&self, e: &Expr) -> Result<String, Unknown> {
        if let Some(s) = literal_str(e) {
            return self.resolve(&s);
        }
        if let ExprKind::Call { callee, args } = &e.kind {
            if is_ident(callee, "path") && !self.is_bound("path") && args.len() == 1 {
                if let Some(s) = literal_str(&args[0].value) {
                    return self.resolve(&s);
                }
            }
        }
        Err(Unknown)
    }

    /// Methods that touch files (`.save(p)`, `.append(p)`, `.read()`,
    /// `.lines()` on a path, ...).
    fn method_effects(&mut self, recv: &Expr, name: &str, args: &[Arg]) -> R {
        match name {
            "save" | "append" | "write" => {
                let p = match args.iter().find(|a| a.name.is_none()) {
                    Some(a) => self.literal_path(&a.value)?,
                    None => return Ok(()),
                };
                self.push(Effect::FsWrite { paths: vec![p] });
                Ok(())
            }
            "read" | "read_bytes" | "lines" | "exists" | "is_dir" | "is_file" | "size"
            | "modified" => {
                if is_textual(recv) {
                    return Ok(());
                }
                match self.literal_path(recv) {
                    Ok(p) => self.push(Effect::FsRead { paths: vec![p] }),
                    // A receiver that may be a path this source does not spell.
                    Err(Unknown) => self.push(Effect::Opaque),
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn http(&mut self, method: &str, args: &[Arg]) -> R {
        if !matches!(method, "get" | "post" | "put" | "delete") {
            self.push(Effect::Opaque);
            return self.args(args);
        }
        let url = args.first().and_then(|a| literal_str(&a.value));
        let (host, port) = match url.as_deref().and_then(host_port) {
            Some(hp) => hp,
            None => ("*".to_string(), 443),
        };
        self.push(Effect::NetConnect { host, port });
        self.args(args)
    }

    /// A literal word as a path string; `Err` when it is not static.
    fn path_word(&self, w: &Word) -> Result<Option<String>, Unknown> {
        let text = match &w.kind {
            WordKind::Plain(s) | WordKind::Path(s) | WordKind::Glob(s) => s.clone(),
            WordKind::Expr(e) => literal_str(e).ok_or(Unknown)?,
            WordKind::LongFlag { .. }
            | WordKind::ShortFlags(_)
            | WordKind::EndOfFlags
            | WordKind::Dash => return Ok(None),
        };
        Ok(Some(self.resolve(&text)?))
    }

    /// `text` as an absolute normalised path; `Err` when it is relative
    /// and the cwd is not known here.
    fn resolve(&self, text: &str) -> Result<String, Unknown> {
        let expanded = if text == "~" || text.starts_with("~/") {
            match (self.cx.env)("HOME") {
                Some(h) => format!("{h}{}", &text[1..]),
                None => text.to_string(),
            }
        } else {
            text.to_string()
        };
        let p = Path::new(&expanded);
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cur_cwd().ok_or(Unknown)?.join(p)
        };
        Ok(normalize(&joined).to_string_lossy().into_owned())
    }

    fn paths(&self, words: &[Word]) -> Result<Vec<String>, Unknown> {
        let mut out = Vec::new();
        let mut after_end = false;
        for w in words {
            if matches!(w.kind, WordKind::EndOfFlags) && !after_end {
                after_end = true;
                continue;
            }
            if let Some(p) = self.path_word(w)? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The path arguments of a builtin, in either form (a call's named
    /// arguments are flags).
    fn arg_paths(&self, args: BArgs) -> Result<Vec<String>, Unknown> {
        match args {
            BArgs::Words(w) => self.paths(w),
            BArgs::Call(a) => a
                .iter()
                .filter(|a| a.name.is_none())
                .map(|a| self.literal_path(&a.value))
                .collect(),
        }
    }

    fn command(&mut self, c: &Command) -> R {
        self.enter()?;
        let r = self.command_inner(c);
        self.depth -= 1;
        r
    }

    fn command_inner(&mut self, c: &Command) -> R {
        for (_, w) in &c.env {
            self.word_exprs(w)?;
        }
        if c.env.iter().any(|(k, _)| k == "PATH") {
            // Which binary runs depends on a PATH this source sets.
            self.push(Effect::Opaque);
        }
        for r in &c.redirects {
            let Some(p) = self.path_word(&r.target)? else {
                return Err(Unknown);
            };
            match r.kind {
                RedirectKind::In => self.push(Effect::FsRead { paths: vec![p] }),
                RedirectKind::Out | RedirectKind::Append => {
                    self.push(Effect::FsWrite { paths: vec![p] })
                }
            }
        }
        for w in &c.args {
            self.word_exprs(w)?;
        }
        if let Some(b) = &c.block {
            self.fn_def(b)?;
        }
        let head = match &c.head.kind {
            WordKind::Plain(s) | WordKind::Path(s) => s.clone(),
            WordKind::Expr(e) => match literal_str(e) {
                Some(s) => s,
                None => {
                    self.push(Effect::Opaque);
                    return Ok(());
                }
            },
            _ => {
                self.push(Effect::Opaque);
                return Ok(());
            }
        };
        if !c.forced {
            if self.local.contains(&head) {
                // Defined in this source: its body was walked where defined
                // (with the cwd unknown when the program moves it).
                return Ok(());
            }
            if self.cx.bound.contains(&head) {
                self.push(Effect::Opaque);
                return Ok(());
            }
            if let Some(()) = self.builtin(&head, BArgs::Words(&c.args))? {
                return Ok(());
            }
        }
        if head.ends_with(".shl") {
            // A script: code this source does not show.
            self.push(Effect::Opaque);
            let p = self.resolve(&head)?;
            self.push(Effect::FsRead { paths: vec![p] });
            return Ok(());
        }
        self.external(&head, &c.args)
    }

    /// Expressions inside words (`(cmd)` substitutions) have effects of their own.
    fn word_exprs(&mut self, w: &Word) -> R {
        match &w.kind {
            WordKind::Expr(e) => self.expr(e),
            WordKind::LongFlag { value: Some(v), .. } => self.word_exprs(v),
            _ => Ok(()),
        }
    }

    /// `cd`/`pushd` to `args`: the cwd later paths resolve against.
    fn change_dir(&mut self, args: BArgs) {
        self.saw_cd = true;
        let target = match self.arg_paths(args) {
            Ok(p) if p.is_empty() => (self.cx.env)("HOME").map(PathBuf::from),
            Ok(p) if p.len() == 1 && !p[0].ends_with("/-") => Some(PathBuf::from(&p[0])),
            _ => None,
        };
        self.cwd = target;
    }

    /// `Some(())` when `head` is a builtin (its effects pushed).
    fn builtin(&mut self, head: &str, args: BArgs) -> Result<Option<()>, Unknown> {
        match head {
            "echo" | "sleep" | "pwd" | "dirs" | "jobs" | "exit" | "quit" | "assert" | "plan"
            | "explain" => {}
            "interact" => self.push(Effect::Opaque),
            "env" => self.push(Effect::EnvRead {
                names: vec!["*".into()],
            }),
            "which" => self.push(Effect::EnvRead {
                names: vec!["PATH".into()],
            }),
            "ls" | "cat" | "stat" | "head" | "open" => {
                let mut p = self.arg_paths(args)?;
                if p.is_empty() {
                    p.push(self.resolve(".")?);
                }
                self.push(Effect::FsRead { paths: p });
            }
            "mkdir" | "touch" => {
                let p = self.arg_paths(args)?;
                if !p.is_empty() {
                    self.push(Effect::FsWrite { paths: p });
                }
            }
            "save" => {
                // `save PATH VALUE`: the first argument is the file.
                let p = self.arg_paths(args).or_else(|Unknown| match args {
                    BArgs::Call(a) => a
                        .iter()
                        .find(|a| a.name.is_none())
                        .map(|a| self.literal_path(&a.value).map(|p| vec![p]))
                        .unwrap_or(Ok(Vec::new())),
                    BArgs::Words(w) => w
                        .first()
                        .map(|w| self.path_word(w).map(|p| p.into_iter().collect()))
                        .unwrap_or(Ok(Vec::new())),
                })?;
                if let Some(first) = p.first() {
                    self.push(Effect::FsWrite {
                        paths: vec![first.clone()],
                    });
                }
            }
            "ln" => {
                let p = self.arg_paths(args)?;
                if p.len() > 1 {
                    self.push(Effect::FsWrite {
                        paths: p[1..].to_vec(),
                    });
                }
            }
            "cp" | "mv" => {
                let mut p = self.arg_paths(args)?;
                if p.len() < 2 {
                    return Err(Unknown);
                }
                let dest = p.pop().unwrap_or_default();
                self.push(Effect::FsRead { paths: p.clone() });
                self.push(Effect::FsWrite { paths: vec![dest] });
                if head == "mv" {
                    self.push(Effect::FsDelete { paths: p });
                }
            }
            "rm" => {
                let p = self.arg_paths(args)?;
                if !p.is_empty() {
                    self.push(Effect::FsDelete { paths: p });
                }
            }
            "cd" | "pushd" => {
                self.push(Effect::SessionWrite);
                self.change_dir(args);
            }
            "j" | "jump" | "popd" => {
                self.push(Effect::SessionWrite);
                self.saw_cd = true;
                self.cwd = None;
            }
            "journal" | "history" => self.push(Effect::JournalRead),
            "run" | "source" => {
                // Scripts: what they do is not in this source.
                self.push(Effect::Opaque);
                if let Ok(p) = self.arg_paths(args) {
                    if let Some(first) = p.first() {
                        self.push(Effect::FsRead {
                            paths: vec![first.clone()],
                        });
                    }
                }
            }
            "undo" | "reef" | "apply" => self.push(Effect::Opaque),
            _ => return Ok(None),
        }
        Ok(Some(()))
    }

    fn external(&mut self, head: &str, args: &[Word]) -> R {
        if let (Some(cat), Some(cwd)) = (self.cx.adapters, self.cur_cwd()) {
            let cwd = cwd.to_path_buf();
            let mut argv = Vec::with_capacity(args.len());
            let mut literal = true;
            for w in args {
                match word_text(w) {
                    Some(s) => argv.push(s),
                    None => {
                        literal = false;
                        break;
                    }
                }
            }
            if literal {
                let path_var = (self.cx.env)("PATH");
                let bin = crate::shell::lookup::find_program(head, path_var.as_deref(), &cwd);
                let hash = bin.as_deref().and_then(bin_hash_cached);
                if let Some(effs) = crate::adapters::effects_of(
                    cat,
                    head,
                    &argv,
                    &cwd,
                    self.cx.env,
                    hash.as_deref(),
                ) {
                    for e in effs {
                        self.push(e.into());
                    }
                    return Ok(());
                }
            }
        }
        self.push(Effect::Opaque);
        Ok(())
    }
}

/// A receiver that is text, never a path (`"a\nb".lines()`, a command's
/// output).
fn is_textual(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Literal(Literal::Str(_)) | ExprKind::Interp(_) | ExprKind::Command(_) => true,
        ExprKind::Field { name, .. } => matches!(name.as_str(), "stdout" | "stderr"),
        ExprKind::Group(x) => is_textual(x),
        _ => false,
    }
}

/// BLAKE3 of a binary, cached by file identity (device, inode, size and
/// mtime: a plan and every spawn hash the same few tools over and over).
pub fn bin_hash_cached(path: &Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Key = (u64, u64, u64, i64, i64);
    static CACHE: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).ok()?;
    let key = (md.dev(), md.ino(), md.len(), md.mtime(), md.mtime_nsec());
    use crate::sync::Locked;
    if let Some(h) = CACHE.locked().get_or_insert_with(HashMap::new).get(&key) {
        return Some(h.clone());
    }
    let h = crate::adapters::bin_hash(path)?;
    let mut c = CACHE.locked();
    let map = c.get_or_insert_with(HashMap::new);
    if map.len() > 256 {
        map.clear();
    }
    map.insert(key, h.clone());
    Some(h)
}

fn is_ident(e: &Expr, name: &str) -> bool {
    matches!(&e.kind, ExprKind::Ident(n) if n == name)
}

/// A string literal (or an interpolation without expressions).
fn literal_str(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Literal(Literal::Str(s)) => Some(s.clone()),
        ExprKind::Interp(parts) => {
            let mut s = String::new();
            for p in parts {
                match p {
                    InterpPart::Lit(l) => s.push_str(l),
                    InterpPart::Expr(_) => return None,
                }
            }
            Some(s)
        }
        ExprKind::Group(x) => literal_str(x),
        _ => None,
    }
}

/// The argv text of a literal word (flags as written).
fn word_text(w: &Word) -> Option<String> {
    Some(match &w.kind {
        WordKind::Plain(s) | WordKind::Path(s) | WordKind::Glob(s) => s.clone(),
        WordKind::Expr(e) => literal_str(e)?,
        WordKind::LongFlag { name, value } => {
            let n = format!("--{}", name.replace('_', "-"));
            match value {
                None => n,
                Some(v) => format!("{n}={}", word_text(v)?),
            }
        }
        WordKind::ShortFlags(s) => format!("-{s}"),
        WordKind::EndOfFlags => "--".into(),
        WordKind::Dash => "-".into(),
    })
}

/// `scheme://host[:port]/...` → host and port (443 for https, else 80).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let default = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, tail) = v6.split_once(']')?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((h.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None if !authority.is_empty() => Some((authority.to_string(), default)),
        None => None,
    }
}

/// Lexical normalisation: `.` dropped, `..` pops (never above the root).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(host_port("https://x.org/a"), Some(("x.org".into(), 443)));
        assert_eq!(host_port("http://x.org:8080"), Some(("x.org".into(), 8080)));
        assert_eq!(host_port("http://[::1]:9/"), Some(("::1".into(), 9)));
        assert_eq!(host_port("nope"), None);
    }
}
