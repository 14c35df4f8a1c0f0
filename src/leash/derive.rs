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
    /// Functions and aliases this source defines (their bodies are walked
    /// where they are defined).
    local: HashSet<String>,
    depth: usize,
}

/// A derivation that could not be completed statically.
struct Unknown;

type R = Result<(), Unknown>;

/// The effects of `prog`, de-duplicated in first-appearance order.
pub fn derive(prog: &Program, cx: &Context) -> Vec<Effect> {
    let mut w = Walker {
        cx,
        out: Vec::new(),
        seen: HashSet::new(),
        local: HashSet::new(),
        depth: 0,
    };
    collect_local(&prog.stmts, &mut w.local);
    match w.stmts(&prog.stmts) {
        Ok(()) => w.out,
        Err(Unknown) => vec![Effect::Opaque],
    }
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

    fn stmts(&mut self, stmts: &[Stmt]) -> R {
        for s in stmts {
            self.stmt(s)?;
        }
        Ok(())
    }

    fn block(&mut self, b: &Block) -> R {
        self.enter()?;
        let mut inner = std::mem::take(&mut self.local);
        collect_local(&b.stmts, &mut inner);
        let saved = std::mem::replace(&mut self.local, inner);
        let r = self.stmts(&b.stmts);
        let inner = std::mem::replace(&mut self.local, saved);
        self.local.extend(inner);
        self.depth -= 1;
        r
    }

    fn fn_def(&mut self, def: &FnDef) -> R {
        for p in def.params.iter().chain(def.rest.iter()) {
            if let Some(d) = &p.default {
                self.expr(d)?;
            }
        }
        match &def.body {
            FnBody::Block(b) => self.block(b),
            FnBody::Expr(e) => self.expr(e),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> R {
        match &s.kind {
            StmtKind::Let { value, .. } => self.expr(value),
            StmtKind::Fn { def, .. } => self.fn_def(def),
            StmtKind::Alias { command, .. } => self.command(command),
            StmtKind::Use { .. } => {
                self.push(Effect::Opaque);
                Ok(())
            }
            StmtKind::Return(e) => e.as_ref().map_or(Ok(()), |e| self.expr(e)),
            StmtKind::Break | StmtKind::Continue => Ok(()),
            StmtKind::For { iter, body, .. } => {
                self.expr(iter)?;
                self.block(body)
            }
            StmtKind::While { cond, body } => {
                self.expr(cond)?;
                self.block(body)
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

    fn expr_inner(&mut self, e: &Expr) -> R {
        match &e.kind {
            ExprKind::Literal(_) | ExprKind::Ident(_) => Ok(()),
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
                if is_ident(recv, "env") {
                    self.push(Effect::EnvRead {
                        names: vec![name.clone()],
                    });
                    return Ok(());
                }
                self.expr(recv)
            }
            ExprKind::MethodCall {
                recv, name, args, ..
            } => {
                if is_ident(recv, "http") {
                    return self.http(name, args);
                }
                self.expr(recv)?;
                self.args(args)
            }
            ExprKind::Index { recv, index } => {
                self.expr(recv)?;
                self.expr(index)
            }
            ExprKind::Call { callee, args } => {
                if let ExprKind::Field { recv, name, .. } = &callee.kind {
                    if is_ident(recv, "http") {
                        return self.http(name, args);
                    }
                }
                if let ExprKind::Ident(n) = &callee.kind {
                    if self.cx.bound.contains(n) && !self.local.contains(n) {
                        // A function of an earlier exec: its body is not here.
                        self.push(Effect::Opaque);
                    }
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
                self.block(then)?;
                otherwise.as_ref().map_or(Ok(()), |o| self.expr(o))
            }
            ExprKind::Match { scrutinee, arms } => {
                self.expr(scrutinee)?;
                for a in arms {
                    if let Some(g) = &a.guard {
                        self.expr(g)?;
                    }
                    self.expr(&a.body)?;
                }
                Ok(())
            }
            ExprKind::Try { body, handler, .. } => {
                self.block(body)?;
                self.block(handler)
            }
            ExprKind::Catch { expr, handler, .. } => {
                self.expr(expr)?;
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
        Ok(Some(self.resolve(&text)))
    }

    fn resolve(&self, text: &str) -> String {
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
            self.cx.cwd.join(p)
        };
        normalize(&joined).to_string_lossy().into_owned()
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
                // Defined in this source: its body was walked where defined.
                return Ok(());
            }
            if self.cx.bound.contains(&head) {
                self.push(Effect::Opaque);
                return Ok(());
            }
            if let Some(()) = self.builtin(&head, &c.args)? {
                return Ok(());
            }
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

    /// `Some(())` when `head` is a builtin (its effects pushed).
    fn builtin(&mut self, head: &str, args: &[Word]) -> Result<Option<()>, Unknown> {
        match head {
            "echo" | "sleep" | "pwd" | "dirs" | "jobs" | "exit" | "quit" | "assert" | "plan"
            | "explain" | "interact" => {}
            "env" => self.push(Effect::EnvRead {
                names: vec!["*".into()],
            }),
            "which" => self.push(Effect::EnvRead {
                names: vec!["PATH".into()],
            }),
            "ls" | "cat" | "stat" | "head" | "open" => {
                let mut p = self.paths(args)?;
                if p.is_empty() {
                    p.push(self.resolve("."));
                }
                self.push(Effect::FsRead { paths: p });
            }
            "mkdir" | "touch" | "save" => {
                let p = self.paths(args)?;
                if !p.is_empty() {
                    self.push(Effect::FsWrite { paths: p });
                }
            }
            "ln" => {
                let p = self.paths(args)?;
                if p.len() > 1 {
                    self.push(Effect::FsWrite {
                        paths: p[1..].to_vec(),
                    });
                }
            }
            "cp" | "mv" => {
                let mut p = self.paths(args)?;
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
                let p = self.paths(args)?;
                if !p.is_empty() {
                    self.push(Effect::FsDelete { paths: p });
                }
            }
            "cd" | "j" | "jump" | "pushd" | "popd" => self.push(Effect::SessionWrite),
            "journal" | "history" => self.push(Effect::JournalRead),
            // Scripts, undo, reef, apply: what they do is not in this source.
            "run" | "source" | "undo" | "reef" | "apply" => self.push(Effect::Opaque),
            _ => return Ok(None),
        }
        Ok(Some(()))
    }

    fn external(&mut self, head: &str, args: &[Word]) -> R {
        if let Some(cat) = self.cx.adapters {
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
                let bin =
                    crate::shell::lookup::find_program(head, path_var.as_deref(), self.cx.cwd);
                let hash = bin.as_deref().and_then(bin_hash_cached);
                if let Some(effs) = crate::adapters::effects_of(
                    cat,
                    head,
                    &argv,
                    self.cx.cwd,
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

/// BLAKE3 of a binary, cached by path, size and mtime (a plan hashes the
/// same few tools over and over).
pub fn bin_hash_cached(path: &Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Key = (PathBuf, u64, i64, i64);
    static CACHE: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(path).ok()?;
    let key = (path.to_path_buf(), md.len(), md.mtime(), md.mtime_nsec());
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
