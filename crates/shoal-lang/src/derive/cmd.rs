//! Effect derivation for commands, calls and methods (docs/rules.md §21):
//! the builtins' effects in command and call form, files reached by value
//! methods, `cd` moving the cwd later paths resolve against, externals
//! through the adapters. Static only: nothing here runs or spawns.

use std::path::{Path, PathBuf};

use super::{
    bin_hash_cached, is_ident, literal_str, normalize, word_text, BArgs, Unknown, Walker, R,
};
use super::{host_port, Effect};
use crate::ast::*;

impl Walker<'_, '_> {
    /// `name(args)`: a special form, a constructor, a function of this
    /// source or the session, or a command in call form.
    pub(super) fn call_named(&mut self, n: &str, args: &[Arg]) -> R {
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
            | "range" | "channel" | "every" | "task" => Ok(()),
            // `out:N`: a stored value, read.
            "out" => Ok(()),
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
                let root = shoal_policy::glob::root_of(&pat, Path::new(""));
                let root = self.resolve(&root.to_string_lossy())?;
                self.push(Effect::FsRead { paths: vec![root] });
                Ok(())
            }
            _ if crate::heads::is_builtin_head(n) => {
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
    pub(super) fn literal_path(&self, e: &Expr) -> Result<String, Unknown> {
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
    pub(super) fn method_effects(&mut self, recv: &Expr, name: &str, args: &[Arg]) -> R {
        match name {
            "save" | "append" | "write" => {
                let p = match args.iter().find(|a| a.name.is_none()) {
                    Some(a) => self.literal_path(&a.value)?,
                    None => return Ok(()),
                };
                if name != "append" {
                    self.overwrites(&format!(".{name}"), &p);
                }
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

    pub(super) fn http(&mut self, method: &str, args: &[Arg]) -> R {
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
    pub(super) fn path_word(&self, w: &Word) -> Result<Option<String>, Unknown> {
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
    pub(super) fn resolve(&self, text: &str) -> Result<String, Unknown> {
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

    pub(super) fn paths(&self, words: &[Word]) -> Result<Vec<String>, Unknown> {
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
    pub(super) fn arg_paths(&self, args: BArgs) -> Result<Vec<String>, Unknown> {
        match args {
            BArgs::Words(w) => self.paths(w),
            BArgs::Call(a) => a
                .iter()
                .filter(|a| a.name.is_none())
                .map(|a| self.literal_path(&a.value))
                .collect(),
        }
    }

    pub(super) fn command(&mut self, c: &Command) -> R {
        self.enter()?;
        let r = self.command_inner(c);
        self.depth -= 1;
        r
    }

    pub(super) fn command_inner(&mut self, c: &Command) -> R {
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
                RedirectKind::Out => {
                    self.overwrites("`>`", &p);
                    self.push(Effect::FsWrite { paths: vec![p] })
                }
                RedirectKind::Append => self.push(Effect::FsWrite { paths: vec![p] }),
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
    pub(super) fn word_exprs(&mut self, w: &Word) -> R {
        match &w.kind {
            WordKind::Expr(e) => self.expr(e),
            WordKind::LongFlag { value: Some(v), .. } => self.word_exprs(v),
            _ => Ok(()),
        }
    }

    /// `cd`/`pushd` to `args`: the cwd later paths resolve against.
    pub(super) fn change_dir(&mut self, args: BArgs) {
        self.saw_cd = true;
        let target = match self.arg_paths(args) {
            Ok(p) if p.is_empty() => (self.cx.env)("HOME").map(PathBuf::from),
            Ok(p) if p.len() == 1 && !p[0].ends_with("/-") => Some(PathBuf::from(&p[0])),
            _ => None,
        };
        self.cwd = target;
    }

    /// `Some(())` when `head` is a builtin (its effects pushed). A builtin
    /// given a flag it does not model runs the program as written: `None`,
    /// planned as that program.
    pub(super) fn builtin(&mut self, head: &str, args: BArgs) -> Result<Option<()>, Unknown> {
        if let (Some(modeled), BArgs::Words(words)) =
            (crate::shell::builtins::modeled_flags(head), &args)
        {
            let unmodeled = words.iter().any(|w| match &w.kind {
                WordKind::ShortFlags(s) => s
                    .chars()
                    .any(|c| !modeled.contains(&c.to_string().as_str())),
                WordKind::LongFlag { name, .. } => !modeled.contains(&name.as_str()),
                _ => false,
            });
            if unmodeled {
                return Ok(None);
            }
        }
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
                    self.overwrites("save", first);
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
                for src in &p {
                    self.overwrites(head, &landing(src, &dest));
                }
                self.push(Effect::FsRead { paths: p.clone() });
                self.push(Effect::FsWrite { paths: vec![dest] });
                if head == "mv" {
                    self.push(Effect::FsDelete { paths: p });
                }
            }
            "rm" => {
                let p = self.arg_paths(args)?;
                if !p.is_empty() {
                    if has_flag(args, "permanent") {
                        for x in &p {
                            self.undo
                                .lose(format!("rm --permanent deletes {x} for good"));
                        }
                    } else {
                        self.trashes(&p);
                    }
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

    pub(super) fn external(&mut self, head: &str, args: &[Word]) -> R {
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
                let bin = shoal_base::lookup::find_program(head, path_var.as_deref(), &cwd);
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
                        self.push(e);
                    }
                    return Ok(());
                }
            }
        }
        self.push(Effect::Opaque);
        Ok(())
    }
}

impl Walker<'_, '_> {
    /// `rm` to the trash: undoable, except on a token principal's thread
    /// for what is larger than its trash may hold (`[limits] token_trash`),
    /// which `rm` deletes for good. What exists is measured now; a glob's
    /// files, and a path outside the principal's read grants, are not.
    fn trashes(&mut self, paths: &[String]) {
        let Some(cap) = crate::shell::trash::cap() else {
            self.undo.trash(paths);
            return;
        };
        for p in paths {
            let path = Path::new(p);
            let glob = p.contains(['*', '?', '[']);
            if !shoal_policy::run_gate::may_read(path) || (glob && !path.exists()) {
                self.undo.lose(format!(
                    "rm may delete {p} for good: its size is not looked at, and what is larger than [limits] token_trash ({cap} bytes) is not trashed"
                ));
            } else if crate::shell::trash::size(path, cap).is_ok_and(|n| n > cap) {
                self.undo.lose(format!(
                    "rm deletes {p} for good: it is larger than [limits] token_trash ({cap} bytes)"
                ));
            } else {
                self.undo.trash(std::slice::from_ref(p));
            }
        }
    }

    /// Writing `p` over a file that exists now loses its content. A path
    /// outside the principal's read grants is not looked at (its existence
    /// is a read of it): it may exist, so the write may lose it.
    fn overwrites(&mut self, what: &str, p: &str) {
        if !shoal_policy::run_gate::may_read(Path::new(p)) {
            self.undo.lose(format!(
                "{what} may overwrite {p}: whether it exists is not looked at (outside what this principal may read)"
            ));
        } else if std::fs::metadata(p).is_ok_and(|m| !m.is_dir()) {
            self.undo.lose(format!(
                "{what} overwrites {p}: its present content is lost"
            ));
        }
    }
}

/// Where `cp`/`mv` of `src` to `dest` lands (inside `dest` when it is a
/// directory). A `dest` the principal may not read is not looked at: the
/// answer is `dest` itself (whose overwrite check then says "may").
fn landing(src: &str, dest: &str) -> String {
    let d = Path::new(dest);
    if !shoal_policy::run_gate::may_read(d) {
        return dest.to_string();
    }
    match Path::new(src).file_name() {
        Some(name) if d.is_dir() => d.join(name).to_string_lossy().into_owned(),
        _ => dest.to_string(),
    }
}

/// A builtin's flag `--name` (or `name: …` in call form) is given.
fn has_flag(args: BArgs, name: &str) -> bool {
    match args {
        BArgs::Words(w) => w
            .iter()
            .any(|w| matches!(&w.kind, WordKind::LongFlag { name: n, .. } if n == name)),
        BArgs::Call(a) => a.iter().any(|a| a.name.as_deref() == Some(name)),
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
