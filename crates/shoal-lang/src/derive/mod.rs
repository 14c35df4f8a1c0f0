//! Effect derivation (docs/rules.md §21): a static walk of the
//! syntax tree that never executes anything. What cannot be known
//! statically (a non-literal argument, an unknown external command, an
//! interpreter block) is `opaque`; a non-literal path argument makes the
//! whole plan `[opaque]`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::adapters::Catalog;
use crate::ast::*;
use shoal_policy::effect::Effect;
use shoal_policy::undo::{Derived, Undo};

mod cmd;

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
    /// What the program cannot undo, and what `rm` trashes.
    undo: Undo,
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
    derive_full(prog, cx).effects
}

/// The effects of `prog` and what of them can be undone (a plan's
/// reversibility).
pub fn derive_full(prog: &Program, cx: &Context) -> Derived {
    let first = derive_pass(prog, cx, false);
    match first {
        // A program that changes its cwd: bodies may run after the change,
        // so their relative paths are not known.
        Ok((_, true)) => derive_pass(prog, cx, true)
            .map(|(d, _)| d)
            .unwrap_or_else(|Unknown| Derived::opaque()),
        Ok((d, false)) => d,
        Err(Unknown) => Derived::opaque(),
    }
}

fn derive_pass(
    prog: &Program,
    cx: &Context,
    fn_cwd_unknown: bool,
) -> Result<(Derived, bool), Unknown> {
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
        undo: Undo::default(),
    };
    collect_local(&prog.stmts, &mut w.local);
    w.stmts(&prog.stmts)?;
    let mut undo = w.undo;
    if !undo.trashed.is_empty() {
        let dir = crate::shell::builtins::trash_dir_path();
        undo.trash_dir = Some(dir.to_string_lossy().into_owned());
    }
    Ok((
        Derived {
            effects: w.out,
            undo,
            place: None,
        },
        w.saw_cd,
    ))
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
                && (shoal_value::ns::is_namespace(n) || matches!(n.as_str(), "env" | "secret" | "http")))
    }

    /// A bare name in value position: a command when it resolves to one
    /// (`let x = whoami`, `hostname.out`), run with no arguments.
    fn bare_name(&mut self, n: &str) -> R {
        if self.is_bound(n) || is_value_word(n) {
            return Ok(());
        }
        if crate::heads::is_builtin_head(n) {
            if self.builtin(n, BArgs::Words(&[]))?.is_some() {
                return Ok(());
            }
            return self.external(n, &[]);
        }
        let path_var = (self.cx.env)("PATH");
        let cwd = self.cur_cwd().unwrap_or(self.cx.cwd);
        if shoal_base::lookup::on_path(n, path_var.as_deref(), cwd) {
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
            ExprKind::Unary { expr, .. } | ExprKind::Group(expr) | ExprKind::Background(expr) => {
                self.expr(expr)
            }
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
                if is_ident(recv, "secret") && !self.is_bound("secret") && name == "get" {
                    let names = match args.first().and_then(|a| literal_str(&a.value)) {
                        Some(n) => vec![n],
                        None => vec!["*".into()],
                    };
                    self.push(Effect::SecretUse { names });
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
}

pub use shoal_policy::bin_id::bin_hash_cached;

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

pub use shoal_base::paths::normalize;

#[cfg(test)]
mod tests;
