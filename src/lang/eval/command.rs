//! Commands (language.md §10, §11): word evaluation, head resolution,
//! builtins, externals, redirects, feed, interpreter blocks, scripts, the
//! directory stack and command-not-found diagnostics.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::lang::ast::{Command, RedirectKind, Word, WordKind};
use crate::lang::eval::call::rest_elem_type;
use crate::lang::eval::{Ctl, EResult, Interp, Pos};
use crate::lang::scope::ScopeRef;
use crate::lang::scope::{closure, command, Closure};
use crate::shell::builtins::{self, BArg};
use crate::shell::{glob, lookup, words};
use crate::value::{render, GlobVal, Outcome, OutputBytes, ShoalError, Value};

/// An evaluated command argument.
#[derive(Clone, Debug)]
pub(crate) enum CArg {
    Val(Value),
    /// A glob word with its (sorted) matches.
    Glob {
        pattern: String,
        matches: Vec<PathBuf>,
    },
    /// `--name[=value]`; `text` is the spelling for external programs.
    Long {
        name: String,
        text: String,
        value: Option<Value>,
    },
    /// `-abc` without the dash.
    Short(String),
    EndOfFlags,
    Dash,
}

/// Heads handled by the evaluator itself (§10.3 step 4).
pub(super) const SPECIAL_HEADS: &[&str] = &[
    "jobs", "exit", "quit", "plan", "apply", "explain", "interact", "assert", "open", "save",
    "reef", "undo", "journal", "history",
];
/// Session heads (§10.3 step 6).
pub(super) const SESSION_HEADS: &[&str] = &[
    "cd", "pushd", "popd", "dirs", "j", "jump", "pwd", "run", "source",
];

/// Every head name the evaluator knows (for did-you-mean and §5.1 step 3).
pub(crate) fn is_builtin_head(name: &str) -> bool {
    SPECIAL_HEADS.contains(&name) || SESSION_HEADS.contains(&name) || builtins::is_fs_builtin(name)
}

pub(super) fn all_heads() -> impl Iterator<Item = &'static str> {
    SPECIAL_HEADS
        .iter()
        .chain(SESSION_HEADS.iter())
        .chain(builtins::FS_BUILTINS.iter())
        .copied()
}

/// Convert a value to an argv string for an external program (§10.2).
pub fn argv_string(v: &Value) -> Result<OsString, ShoalError> {
    crate::value::ops::argv_os(v)
}

pub(super) fn carg_display(a: &CArg) -> Vec<String> {
    match a {
        CArg::Val(v) => vec![match v {
            Value::Str(s) => s.to_string(),
            Value::Path(p) => p.to_string_lossy().into_owned(),
            other => render::display(other),
        }],
        CArg::Glob { matches, .. } => matches
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        CArg::Long {
            text, value: None, ..
        } => vec![format!("--{text}")],
        CArg::Long {
            text,
            value: Some(v),
            ..
        } => vec![format!("--{text}={}", render::display(v))],
        CArg::Short(s) => vec![format!("-{s}")],
        CArg::EndOfFlags => vec!["--".into()],
        CArg::Dash => vec!["-".into()],
    }
}

pub(super) fn to_bargs(cargs: Vec<CArg>) -> Vec<BArg> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(BArg::Val(v)),
            CArg::Glob { matches, .. } => {
                out.extend(matches.into_iter().map(|p| BArg::Val(Value::path(p))))
            }
            CArg::Long { name, value, .. } => out.push(BArg::Long { name, value }),
            CArg::Short(s) => out.push(BArg::Short(s)),
            CArg::EndOfFlags => out.push(BArg::Val(Value::str("--"))),
            CArg::Dash => out.push(BArg::Val(Value::str("-"))),
        }
    }
    out
}

/// The plain values of a command's arguments (flags rendered as text).
pub(super) fn carg_values(cargs: Vec<CArg>) -> Vec<Value> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(v),
            CArg::Glob { matches, .. } => out.extend(matches.into_iter().map(Value::path)),
            other => out.extend(carg_display(&other).into_iter().map(Value::str)),
        }
    }
    out
}

pub(super) fn carg_argv(cargs: &[CArg]) -> Result<Vec<OsString>, ShoalError> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(argv_string(v)?),
            CArg::Glob { matches, .. } => {
                out.extend(matches.iter().map(|p| p.as_os_str().to_os_string()))
            }
            CArg::Long {
                text, value: None, ..
            } => out.push(OsString::from(format!("--{text}"))),
            CArg::Long {
                text,
                value: Some(v),
                ..
            } => {
                let mut s = OsString::from(format!("--{text}="));
                s.push(argv_string(v)?);
                out.push(s);
            }
            CArg::Short(s) => out.push(OsString::from(format!("-{s}"))),
            CArg::EndOfFlags => out.push("--".into()),
            CArg::Dash => out.push("-".into()),
        }
    }
    Ok(out)
}

/// Stdin bytes of a fed value (§10.7); a spilled outcome or bytes value is
/// streamed from its spill file, not loaded.
pub(crate) fn feed_bytes(v: &Value) -> Result<OutputBytes, ShoalError> {
    crate::value::methods::feed_output(v)
}

pub(super) fn runner_for(ext: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match ext {
        "py" => ("python3", &[]),
        "js" => ("node", &[]),
        "ts" => ("deno", &["run"]),
        "sh" => ("sh", &[]),
        "rb" => ("ruby", &[]),
        "lua" => ("lua", &[]),
        "rs" => ("rust-script", &[]),
        _ => return None,
    })
}

impl Interp {
    /// The spelling of a long flag as written (`--dry-run`), recovered from
    /// the source when the word's span points into it.
    pub(super) fn long_flag_text(&self, w: &Word, name: &str) -> String {
        if let Some(text) = self.src.get(w.span.start as usize..w.span.end as usize) {
            if let Some(body) = text.strip_prefix("--") {
                let n = body.split('=').next().unwrap_or("");
                if n.replace('-', "_") == name {
                    return n.to_string();
                }
            }
        }
        name.replace('_', "-")
    }

    pub(super) fn home(&self) -> String {
        self.env.get("HOME").cloned().unwrap_or_else(|| "/".into())
    }

    pub(super) fn expand_home(&self, s: &str) -> String {
        if s == "~" || s.starts_with("~/") {
            format!("{}{}", self.home(), &s[1..])
        } else {
            s.to_string()
        }
    }

    pub(super) fn eval_word(&mut self, w: &Word, scope: &ScopeRef) -> EResult<CArg> {
        Ok(match &w.kind {
            WordKind::Plain(s) => CArg::Val(Value::str(s)),
            WordKind::Path(s) => CArg::Val(Value::path(self.expand_home(s))),
            WordKind::Glob(s) => {
                let pattern = self.expand_home(s);
                let matches = glob::expand(&pattern, &self.cwd, false);
                CArg::Glob { pattern, matches }
            }
            WordKind::Expr(e) => CArg::Val(self.eval_expr(e, scope, Pos::Value)?),
            WordKind::LongFlag { name, value } => {
                let text = self.long_flag_text(w, name);
                let value = match value {
                    None => None,
                    Some(vw) => Some(self.word_value(vw, scope)?),
                };
                CArg::Long {
                    name: name.clone(),
                    text,
                    value,
                }
            }
            WordKind::ShortFlags(s) => CArg::Short(s.clone()),
            WordKind::EndOfFlags => CArg::EndOfFlags,
            WordKind::Dash => CArg::Dash,
        })
    }

    /// A word as a single value (flag values, env prefixes, redirect targets).
    pub(super) fn word_value(&mut self, w: &Word, scope: &ScopeRef) -> EResult<Value> {
        Ok(match self.eval_word(w, scope)? {
            CArg::Val(v) => v,
            CArg::Glob { pattern, matches } => match matches.len() {
                1 => Value::path(matches[0].clone()),
                _ => Value::str(pattern),
            },
            other => Value::str(carg_display(&other).join(" ")),
        })
    }

    pub(super) fn head_name(&mut self, w: &Word, scope: &ScopeRef) -> EResult<(String, bool)> {
        Ok(match &w.kind {
            WordKind::Plain(s) => (s.clone(), false),
            WordKind::Path(s) => (self.expand_home(s), true),
            WordKind::Glob(s) => (s.clone(), false),
            WordKind::Expr(e) => match &self.eval_expr(e, scope, Pos::Value)? {
                Value::Str(s) => (s.to_string(), s.contains('/')),
                Value::Path(p) => (p.to_string_lossy().into_owned(), true),
                other => {
                    return Err(ShoalError::type_error(format!(
                        "a command head must be a name, found {}",
                        other.type_name()
                    ))
                    .into())
                }
            },
            WordKind::LongFlag { name, .. } => (format!("--{name}"), false),
            WordKind::ShortFlags(s) => (format!("-{s}"), false),
            WordKind::EndOfFlags => ("--".into(), false),
            WordKind::Dash => ("-".into(), false),
        })
    }

    pub(super) fn eval_env_prefix(
        &mut self,
        cmd: &Command,
        scope: &ScopeRef,
    ) -> EResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (k, w) in &cmd.env {
            let v = self.word_value(w, scope)?;
            out.push((k.clone(), argv_string(&v)?.to_string_lossy().into_owned()));
        }
        Ok(out)
    }

    pub(super) fn eval_redirects(
        &mut self,
        cmd: &Command,
        scope: &ScopeRef,
    ) -> EResult<Vec<(RedirectKind, PathBuf)>> {
        let mut out = Vec::new();
        for r in &cmd.redirects {
            let v = self.word_value(&r.target, scope)?;
            let p = match &v {
                Value::Str(s) => PathBuf::from(self.expand_home(s)),
                Value::Path(p) => p.as_ref().clone(),
                other => {
                    return Err(ShoalError::type_error(format!(
                        "a redirect target must be a path, found {}",
                        other.type_name()
                    ))
                    .into())
                }
            };
            out.push((r.kind, self.cwd.join(p)));
        }
        Ok(out)
    }

    /// A command node (statement, substitution, `.feed` argument).
    pub(crate) fn eval_command(
        &mut self,
        cmd: &Arc<Command>,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if cmd.background {
            return self.spawn_command(cmd, scope);
        }
        let (head, head_is_path) = self.head_name(&cmd.head, scope)?;
        // Fast path: a value-bound head with nothing else is that value.
        if !head_is_path
            && !cmd.forced
            && cmd.args.is_empty()
            && cmd.env.is_empty()
            && cmd.redirects.is_empty()
            && cmd.block.is_none()
        {
            if let Some(v) = scope.lookup(&head) {
                if !matches!(v, Value::Closure(_) | Value::Command(_)) {
                    return Ok(v);
                }
            }
        }
        let mut cargs = Vec::with_capacity(cmd.args.len());
        for w in &cmd.args {
            cargs.push(self.eval_word(w, scope)?);
        }
        let env = self.eval_env_prefix(cmd, scope)?;
        let redirects = self.eval_redirects(cmd, scope)?;
        let block = cmd.block.as_ref().map(|def| {
            Value::Closure(Arc::new(Closure {
                def: def.clone(),
                env: scope.clone(),
            }))
        });
        let inv = Invocation {
            head,
            head_is_path,
            forced: cmd.forced,
            cargs,
            env,
            redirects,
            block,
            stdin: None,
        };
        self.run_resolved(inv, scope, pos)
    }

    /// Run a command by name with evaluated arguments (bare names in value
    /// position, `name(args)` calls of commands).
    pub(crate) fn run_named_command(
        &mut self,
        name: &str,
        cargs: Vec<CArg>,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        let inv = Invocation {
            head: name.to_string(),
            head_is_path: name.contains('/'),
            forced: false,
            cargs,
            env: Vec::new(),
            redirects: Vec::new(),
            block: None,
            stdin: None,
        };
        self.run_resolved(inv, scope, pos)
    }

    /// §10.3 steps 2–8. `NAME=v` prefixes hold for the whole call, so
    /// builtins and functions that read the environment (`env`, `which`,
    /// `cd` without arguments, externals they start) see them exactly as an
    /// external does; the previous values return afterwards, also on error.
    pub(super) fn run_resolved(
        &mut self,
        inv: Invocation,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if inv.env.is_empty() {
            return self.run_resolved_inner(inv, scope, pos);
        }
        let saved: Vec<(String, Option<String>)> = inv
            .env
            .iter()
            .map(|(k, _)| (k.clone(), self.env.get(k).cloned()))
            .collect();
        for (k, v) in &inv.env {
            self.env.insert(k.clone(), v.clone());
        }
        let r = self.run_resolved_inner(inv, scope, pos);
        for (k, old) in saved.into_iter().rev() {
            match old {
                Some(v) => {
                    self.env.insert(k, v);
                }
                None => {
                    self.env.shift_remove(&k);
                }
            }
        }
        r
    }

    fn run_resolved_inner(
        &mut self,
        inv: Invocation,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if !inv.head_is_path && !self.alias_guard.contains(&inv.head) {
            if let Some(v) = scope.lookup(&inv.head) {
                match &v {
                    Value::Closure(c) => {
                        return self.call_closure_cmd(&closure(c), inv.cargs, inv.block)
                    }
                    Value::Command(a) => {
                        let name = inv.head.clone();
                        self.alias_guard.push(name);
                        let r = self.expand_alias(&command(a), inv, scope, pos);
                        self.alias_guard.pop();
                        return r;
                    }
                    _ => {
                        if !inv.forced
                            && inv.cargs.is_empty()
                            && inv.env.is_empty()
                            && inv.redirects.is_empty()
                            && inv.block.is_none()
                        {
                            return Ok(v);
                        }
                    }
                }
            }
        }
        self.dispatch(inv, scope, pos)
    }

    pub(super) fn expand_alias(
        &mut self,
        a: &Arc<Command>,
        inv: Invocation,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        let (head, head_is_path) = self.head_name(&a.head, scope)?;
        let mut cargs = Vec::new();
        for w in &a.args {
            cargs.push(self.eval_word(w, scope)?);
        }
        cargs.extend(inv.cargs);
        let mut env = self.eval_env_prefix(a, scope)?;
        env.extend(inv.env);
        let mut redirects = self.eval_redirects(a, scope)?;
        redirects.extend(inv.redirects);
        let block = match inv.block {
            Some(b) => Some(b),
            None => a.block.as_ref().map(|def| {
                Value::Closure(Arc::new(Closure {
                    def: def.clone(),
                    env: scope.clone(),
                }))
            }),
        };
        let inv = Invocation {
            head,
            head_is_path,
            forced: a.forced || inv.forced,
            cargs,
            env,
            redirects,
            block,
            stdin: inv.stdin,
        };
        self.run_resolved(inv, scope, pos)
    }

    /// Run an alias value called like a function.
    pub(crate) fn run_alias(
        &mut self,
        a: &Arc<Command>,
        cargs: Vec<CArg>,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        let inv = Invocation {
            head: String::new(),
            head_is_path: false,
            forced: false,
            cargs,
            env: Vec::new(),
            redirects: Vec::new(),
            block: None,
            stdin: None,
        };
        self.expand_alias(a, inv, scope, pos)
    }

    /// Is `name` something a bare name in value position runs (§5.1 step 3)?
    pub(crate) fn is_command_name(&self, name: &str, _scope: &ScopeRef) -> bool {
        if is_builtin_head(name) {
            return true;
        }
        lookup::on_path(name, self.env.get("PATH").map(|s| s.as_str()), &self.cwd)
    }

    pub(crate) fn did_you_mean(&self, name: &str, scope: &ScopeRef) -> Option<String> {
        let len = name.chars().count();
        let max = if len < 5 { 1 } else { 2 };
        let mut cands: Vec<String> = all_heads().map(|s| s.to_string()).collect();
        for (k, b) in scope.visible_bindings() {
            if matches!(b.value, Value::Closure(_) | Value::Command(_)) {
                cands.push(k);
            }
        }
        let mut best: Option<(usize, String)> = None;
        for c in cands {
            if c == name {
                continue;
            }
            let d = crate::value::methods::suggest::edit_distance(name, &c);
            if d <= max && d < len && best.as_ref().is_none_or(|(bd, _)| d < *bd) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| format!("did you mean '{c}'?"))
    }

    pub(super) fn not_found(&self, name: &str, scope: &ScopeRef) -> ShoalError {
        let mut e = ShoalError::not_found(format!("command not found: `{name}`"));
        if let Some(h) = self.did_you_mean(name, scope) {
            e = e.with_hint(h);
        }
        e
    }

    /// §10.3 steps 4–8 for an unbound (or forced) head.
    pub(super) fn dispatch(
        &mut self,
        inv: Invocation,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        let head = inv.head.clone();
        if inv.head_is_path {
            if head.ends_with(".shl") {
                let args = carg_values(inv.cargs);
                return self.run_shl(&self.resolve_path(Path::new(&head)), args);
            }
            return self.run_external(inv, pos, scope);
        }
        let start = Instant::now();
        let result: Value = match head.as_str() {
            "jobs" => self.jobs_table(),
            "exit" | "quit" => {
                let vals = carg_values(inv.cargs);
                match vals.as_slice() {
                    [] => {}
                    [Value::Int(_)] => {}
                    [Value::Str(s)] if words::parse_int_word(s).is_some() => {}
                    _ => {
                        return Err(ShoalError::arg_error(format!(
                            "{head} expects an optional integer status"
                        ))
                        .into())
                    }
                }
                self.exit_requested = true;
                return Err(Ctl::Exit);
            }
            "assert" => return self.assert_values(carg_values(inv.cargs)),
            "save" => {
                let vals = carg_values(inv.cargs);
                if vals.len() != 2 {
                    return Err(ShoalError::arg_error(format!(
                        "save expects a path and a value, got {} arguments",
                        vals.len()
                    ))
                    .into());
                }
                let value = vals[1].clone();
                crate::value::methods::call_method(
                    self,
                    &value,
                    "save",
                    crate::value::Args {
                        pos: vec![vals[0].clone()],
                        named: vec![],
                    },
                )
                .map_err(|e| self.lift(e))?;
                return Ok(value);
            }
            "open" => Value::Null,
            "reef" => return self.reef_cmd(carg_values(inv.cargs)),
            "journal" | "history" => Value::Table(Arc::new(Vec::new())),
            "interact" => {
                // No terminal is attached to an evaluation: run it as a
                // plain external command.
                let mut it = inv.cargs.into_iter();
                let Some(first) = it.next() else {
                    return Err(ShoalError::arg_error("interact expects a command").into());
                };
                let head = carg_display(&first).join(" ");
                let inv = Invocation {
                    head: head.clone(),
                    head_is_path: head.contains('/'),
                    forced: true,
                    cargs: it.collect(),
                    env: inv.env,
                    redirects: inv.redirects,
                    block: None,
                    stdin: None,
                };
                return self.run_external(inv, pos, scope);
            }
            "plan" | "apply" | "explain" | "undo" => {
                return Err(ShoalError::custom(format!(
                    "`{head}` is not available in this session"
                ))
                .with_hint("plans, undo and interactive runs need the journal and a terminal")
                .into())
            }
            "pwd" => {
                return self.apply_value_redirects(Value::path(self.cwd.clone()), &inv.redirects)
            }
            "cd" => {
                let v = self.cd(carg_values(inv.cargs))?;
                return self.apply_value_redirects(v, &inv.redirects);
            }
            "pushd" => {
                let v = self.pushd(carg_values(inv.cargs))?;
                return self.apply_value_redirects(v, &inv.redirects);
            }
            "popd" => {
                self.top_level_only("popd")?;
                if !inv.cargs.is_empty() {
                    return Err(ShoalError::arg_error("popd takes no arguments").into());
                }
                let v = self.popd()?;
                return self.apply_value_redirects(v, &inv.redirects);
            }
            "dirs" => return self.apply_value_redirects(self.dirs_list(), &inv.redirects),
            "j" | "jump" => {
                self.top_level_only(&head)?;
                let vals = carg_values(inv.cargs);
                if vals.len() > 1 {
                    return Err(ShoalError::arg_error(format!("{head}: at most one query")).into());
                }
                let v = self.jump(&head, vals.first())?;
                return self.apply_value_redirects(v, &inv.redirects);
            }
            "run" => {
                let mut it = inv.cargs.into_iter();
                let target = match it.next() {
                    Some(CArg::Val(v @ (Value::Str(_) | Value::Path(_)))) => match &v {
                        Value::Str(s) => s.to_string(),
                        Value::Path(p) => p.to_string_lossy().into_owned(),
                        _ => String::new(),
                    },
                    Some(CArg::Glob { pattern, matches }) => match matches.first() {
                        Some(m) => m.to_string_lossy().into_owned(),
                        None => pattern,
                    },
                    Some(other) => carg_display(&other).join(" "),
                    None => return Err(ShoalError::arg_error("run: expected a target").into()),
                };
                return self.run_target(&target, it.collect(), scope, pos);
            }
            "source" => {
                let vals = carg_values(inv.cargs);
                let p = match vals.as_slice() {
                    [Value::Str(s)] => PathBuf::from(self.expand_home(s)),
                    [Value::Path(p)] => p.as_ref().clone(),
                    _ => return Err(ShoalError::arg_error("source expects one path").into()),
                };
                return self.source_file(&p, scope);
            }
            "which" => {
                let all = inv.cargs.iter().any(|a| match a {
                    CArg::Short(s) => s.contains('a'),
                    CArg::Long { name, .. } => name == "all",
                    _ => false,
                });
                let v = self.which_cmd(
                    carg_values(
                        inv.cargs
                            .into_iter()
                            .filter(|a| matches!(a, CArg::Val(_) | CArg::Glob { .. }))
                            .collect(),
                    ),
                    all,
                )?;
                return self.apply_value_redirects(v, &inv.redirects);
            }
            h if builtins::is_fs_builtin(h) => {
                let interrupter = self.interrupter.clone();
                let interrupted = move || interrupter.is_interrupted();
                let ctx = builtins::Ctx {
                    cwd: &self.cwd,
                    env: &self.env,
                    interrupted: &interrupted,
                };
                // language.md §10.2: an empty glob contributes no argument;
                // the note goes to the outcome's stderr.
                let mut notes = Vec::new();
                for a in &inv.cargs {
                    if let CArg::Glob { pattern, matches } = a {
                        if matches.is_empty() {
                            notes.extend_from_slice(
                                format!("note: `{pattern}` matched nothing\n").as_bytes(),
                            );
                        }
                    }
                }
                let out = builtins::run(h, to_bargs(inv.cargs), &ctx).map_err(|e| self.lift(e))?;
                if self.interrupted() {
                    return Err(Interp::cancelled().into());
                }
                if has_out_redirect(&inv.redirects) {
                    return self.apply_value_redirects(out, &inv.redirects);
                }
                let stdout = render::redirect_bytes(&out);
                return Ok(Value::Outcome(Arc::new(Outcome {
                    status: Some(0),
                    ok: true,
                    signal: None,
                    dur_ns: start.elapsed().as_nanos().min(i64::MAX as u128) as i64,
                    pid: 0,
                    cmd: h.to_string(),
                    stdout: OutputBytes::from(stdout),
                    stderr: OutputBytes::from(notes),
                    out: Some(out),
                    span: self.cmd_span,
                    truncated: false,
                })));
            }
            h if h.ends_with(".shl") => {
                let args = carg_values(inv.cargs);
                return self.run_shl(&self.resolve_path(Path::new(h)), args);
            }
            _ => return self.run_external(inv, pos, scope),
        };
        self.apply_value_redirects(result, &inv.redirects)
    }

    /// Calling a closure in command form (§10.12).
    pub(super) fn call_closure_cmd(
        &mut self,
        c: &Arc<Closure>,
        cargs: Vec<CArg>,
        block: Option<Value>,
    ) -> EResult<Value> {
        let def = c.def.clone();
        let param_ty = |name: &str| {
            def.params
                .iter()
                .find(|p| p.name == name)
                .map(|p| p.ty.clone())
        };
        let mut pos: Vec<Value> = Vec::new();
        let mut named: Vec<(String, Value)> = Vec::new();
        let mut it = cargs.into_iter().peekable();
        while let Some(a) = it.next() {
            match a {
                CArg::Val(v) => pos.push(v),
                CArg::Long {
                    name,
                    value: Some(v),
                    ..
                } => named.push((name, v)),
                CArg::Long {
                    name, value: None, ..
                } => match param_ty(&name) {
                    None if name == "help"
                        && def.rest.as_ref().is_none_or(|r| r.name != "help") =>
                    {
                        let sig = signature(&def);
                        if let Some(sink) = self.sink.as_mut() {
                            sink(&Value::str(sig));
                        }
                        return Ok(Value::Null);
                    }
                    Some(Some(t)) if t.name != "bool" => {
                        let Some(next) = it.next() else {
                            return Err(ShoalError::arg_error(format!(
                                "--{name} requires a value"
                            ))
                            .into());
                        };
                        let v = match next {
                            CArg::Val(v) => v,
                            CArg::Glob { pattern, matches } => match matches.len() {
                                1 => Value::path(matches[0].clone()),
                                _ => Value::str(pattern),
                            },
                            other => Value::str(carg_display(&other).join(" ")),
                        };
                        named.push((name, v));
                    }
                    _ => named.push((name, Value::Bool(true))),
                },
                CArg::Short(s) => pos.push(Value::str(format!("-{s}"))),
                CArg::EndOfFlags => pos.push(Value::str("--")),
                CArg::Dash => pos.push(Value::str("-")),
                CArg::Glob { pattern, matches } => {
                    let idx = pos.len();
                    let pty = def.params.get(idx).and_then(|p| p.ty.clone());
                    match pty {
                        Some(t) if t.name == "glob" => pos.push(Value::Glob(Arc::new(GlobVal {
                            pattern,
                            cwd: self.cwd.clone(),
                            hidden: false,
                        }))),
                        Some(t) if t.name == "list" => {
                            pos.push(Value::list(matches.into_iter().map(Value::path).collect()))
                        }
                        _ => pos.extend(matches.into_iter().map(Value::path)),
                    }
                }
            }
        }
        if let Some(b) = block {
            pos.push(b);
        }
        // Coerce string words to the declared types.
        let np = def.params.len();
        for (i, v) in pos.iter_mut().enumerate() {
            let ty = if i < np {
                def.params[i].ty.clone()
            } else {
                None
            };
            if i < np {
                if let Some(t) = ty {
                    *v = coerce_cmd_value(v.clone(), &t, &self.cwd)?;
                }
            } else if let Some(r) = &def.rest {
                if let Some(et) = rest_elem_type(r.ty.as_ref()) {
                    if let Value::Str(s) = v {
                        if et != "str" {
                            *v = crate::value::coerce::coerce_word(s, et, &self.cwd)?;
                        }
                    }
                }
            }
        }
        for (k, v) in named.iter_mut() {
            if let Some(Some(t)) = param_ty(k) {
                *v = coerce_cmd_value(v.clone(), &t, &self.cwd)?;
            }
        }
        self.call_closure(c, pos, named)
    }
}

pub(super) fn type_text(t: &crate::lang::ast::TypeAnn) -> String {
    let mut s = t.name.clone();
    if !t.args.is_empty() {
        let args: Vec<String> = t.args.iter().map(type_text).collect();
        s.push_str(&format!("<{}>", args.join(", ")));
    }
    if t.optional {
        s.push('?');
    }
    s
}

/// The synthesized signature `fn name(a: int, b = …, ...rest)` shown by
/// `NAME --help`.
pub(super) fn signature(def: &crate::lang::ast::FnDef) -> String {
    let mut parts: Vec<String> = def
        .params
        .iter()
        .map(|p| {
            let mut s = p.name.clone();
            if let Some(t) = &p.ty {
                s.push_str(": ");
                s.push_str(&type_text(t));
            }
            if p.default.is_some() {
                s.push_str(" = …");
            }
            s
        })
        .collect();
    if let Some(r) = &def.rest {
        let mut s = format!("...{}", r.name);
        if let Some(t) = &r.ty {
            s.push_str(": ");
            s.push_str(&type_text(t));
        }
        parts.push(s);
    }
    let mut out = format!(
        "fn {}({})",
        def.name.as_deref().unwrap_or("closure"),
        parts.join(", ")
    );
    if let Some(t) = &def.ret {
        out.push_str(" -> ");
        out.push_str(&type_text(t));
    }
    out
}

pub(super) fn has_out_redirect(r: &[(RedirectKind, PathBuf)]) -> bool {
    r.iter()
        .any(|(k, _)| matches!(k, RedirectKind::Out | RedirectKind::Append))
}

/// Coerce a command-form argument to a parameter type (§10.12).
pub(super) fn coerce_cmd_value(
    v: Value,
    t: &crate::lang::ast::TypeAnn,
    cwd: &Path,
) -> Result<Value, ShoalError> {
    if t.name == "list" {
        let elem = t.args.first().map(|a| a.name.as_str());
        return Ok(match &v {
            Value::Str(s) => Value::list(vec![match elem {
                Some(e) if e != "str" => crate::value::coerce::coerce_word(s, e, cwd)?,
                _ => v.clone(),
            }]),
            _ => v,
        });
    }
    match &v {
        Value::Str(s) => crate::value::coerce::coerce_word(s, &t.name, cwd),
        _ => Ok(v),
    }
}

/// One command invocation after word evaluation.
pub(crate) struct Invocation {
    pub head: String,
    pub head_is_path: bool,
    pub forced: bool,
    pub cargs: Vec<CArg>,
    pub env: Vec<(String, String)>,
    pub redirects: Vec<(RedirectKind, PathBuf)>,
    pub block: Option<Value>,
    pub stdin: Option<OutputBytes>,
}
