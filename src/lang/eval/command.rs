//! Commands (language.md §10, §11): word evaluation, head resolution,
//! builtins, externals, redirects, feed, interpreter blocks, scripts, the
//! directory stack and command-not-found diagnostics.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::lang::ast::{Arg, Command, Expr, ExprKind, RedirectKind, Word, WordKind};
use crate::lang::eval::call::rest_elem_type;
use crate::lang::eval::{Ctl, EResult, Interp, Pos};
use crate::lang::parse::{parse, ParseContext};
use crate::lang::scope::ScopeRef;
use crate::shell::builtins::{self, BArg};
use crate::shell::process::{self, RunError, SpawnSpec, StdinSpec, StdoutSpec};
use crate::shell::{glob, lookup, words};
use crate::value::{
    ns, render, Closure, ErrorCode, GlobVal, Outcome, OutputBytes, ShoalError, Value,
};

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
const SPECIAL_HEADS: &[&str] = &[
    "jobs", "exit", "quit", "plan", "apply", "explain", "interact", "assert", "open", "save",
    "reef", "undo", "journal", "history",
];
/// Session heads (§10.3 step 6).
const SESSION_HEADS: &[&str] = &[
    "cd", "pushd", "popd", "dirs", "j", "jump", "pwd", "run", "source",
];

/// Every head name the evaluator knows (for did-you-mean and §5.1 step 3).
pub(crate) fn is_builtin_head(name: &str) -> bool {
    SPECIAL_HEADS.contains(&name) || SESSION_HEADS.contains(&name) || builtins::is_fs_builtin(name)
}

fn all_heads() -> impl Iterator<Item = &'static str> {
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

fn carg_display(a: &CArg) -> Vec<String> {
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

fn to_bargs(cargs: Vec<CArg>) -> Vec<BArg> {
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
fn carg_values(cargs: Vec<CArg>) -> Vec<Value> {
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

fn carg_argv(cargs: &[CArg]) -> Result<Vec<OsString>, ShoalError> {
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

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Stdin bytes of a fed value (§10.7); a spilled outcome or bytes value is
/// streamed from its spill file, not loaded.
pub(crate) fn feed_bytes(v: &Value) -> Result<OutputBytes, ShoalError> {
    crate::value::methods::feed_output(v)
}

fn runner_for(ext: &str) -> Option<(&'static str, &'static [&'static str])> {
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
    fn long_flag_text(&self, w: &Word, name: &str) -> String {
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

    fn home(&self) -> String {
        self.env.get("HOME").cloned().unwrap_or_else(|| "/".into())
    }

    fn expand_home(&self, s: &str) -> String {
        if s == "~" || s.starts_with("~/") {
            format!("{}{}", self.home(), &s[1..])
        } else {
            s.to_string()
        }
    }

    fn eval_word(&mut self, w: &Word, scope: &ScopeRef) -> EResult<CArg> {
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
    fn word_value(&mut self, w: &Word, scope: &ScopeRef) -> EResult<Value> {
        Ok(match self.eval_word(w, scope)? {
            CArg::Val(v) => v,
            CArg::Glob { pattern, matches } => match matches.len() {
                1 => Value::path(matches[0].clone()),
                _ => Value::str(pattern),
            },
            other => Value::str(carg_display(&other).join(" ")),
        })
    }

    fn head_name(&mut self, w: &Word, scope: &ScopeRef) -> EResult<(String, bool)> {
        Ok(match &w.kind {
            WordKind::Plain(s) => (s.clone(), false),
            WordKind::Path(s) => (self.expand_home(s), true),
            WordKind::Glob(s) => (s.clone(), false),
            WordKind::Expr(e) => match self.eval_expr(e, scope, Pos::Value)? {
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

    fn eval_env_prefix(
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

    fn eval_redirects(
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

    /// §10.3 steps 2–8.
    fn run_resolved(&mut self, inv: Invocation, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        if !inv.head_is_path && !self.alias_guard.contains(&inv.head) {
            if let Some(v) = scope.lookup(&inv.head) {
                match v {
                    Value::Closure(c) => return self.call_closure_cmd(&c, inv.cargs, inv.block),
                    Value::Command(a) => {
                        let name = inv.head.clone();
                        self.alias_guard.push(name);
                        let r = self.expand_alias(&a, inv, scope, pos);
                        self.alias_guard.pop();
                        return r;
                    }
                    other => {
                        if !inv.forced
                            && inv.cargs.is_empty()
                            && inv.env.is_empty()
                            && inv.redirects.is_empty()
                            && inv.block.is_none()
                        {
                            return Ok(other);
                        }
                    }
                }
            }
        }
        self.dispatch(inv, scope, pos)
    }

    fn expand_alias(
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
            let d = levenshtein(name, &c);
            if d <= max && d < len && best.as_ref().is_none_or(|(bd, _)| d < *bd) {
                best = Some((d, c));
            }
        }
        best.map(|(_, c)| format!("did you mean '{c}'?"))
    }

    fn not_found(&self, name: &str, scope: &ScopeRef) -> ShoalError {
        let mut e = ShoalError::not_found(format!("command not found: `{name}`"));
        if let Some(h) = self.did_you_mean(name, scope) {
            e = e.with_hint(h);
        }
        e
    }

    /// §10.3 steps 4–8 for an unbound (or forced) head.
    fn dispatch(&mut self, inv: Invocation, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
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
                    Some(CArg::Val(Value::Str(s))) => s.to_string(),
                    Some(CArg::Val(Value::Path(p))) => p.to_string_lossy().into_owned(),
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

    /// Builtin `> f` / `>> f`: write the redirect bytes, yield null.
    fn apply_value_redirects(
        &mut self,
        v: Value,
        redirects: &[(RedirectKind, PathBuf)],
    ) -> EResult<Value> {
        if !has_out_redirect(redirects) {
            return Ok(v);
        }
        let bytes = render::redirect_bytes(&v);
        for (k, p) in redirects {
            let mut f = match k {
                RedirectKind::Out => File::create(p),
                RedirectKind::Append => OpenOptions::new().create(true).append(true).open(p),
                RedirectKind::In => continue,
            }
            .map_err(|e| ShoalError::custom(format!("cannot write {}: {e}", p.display())))?;
            use std::io::Write;
            f.write_all(&bytes)
                .map_err(|e| ShoalError::custom(format!("cannot write {}: {e}", p.display())))?;
        }
        Ok(Value::Null)
    }

    /// Spawn an external program (§10.3 step 8).
    fn run_external(&mut self, inv: Invocation, pos: Pos, scope: &ScopeRef) -> EResult<Value> {
        let argv = carg_argv(&inv.cargs)?;
        let mut display = inv.head.clone();
        for a in &inv.cargs {
            for s in carg_display(a) {
                display.push(' ');
                display.push_str(&s);
            }
        }
        let path_var = inv
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| self.env.get("PATH").cloned());
        let found = if inv.head_is_path {
            lookup::find_program(&inv.head, path_var.as_deref(), &self.cwd)
        } else {
            self.program_for(&inv.head, path_var.as_deref())?
        };
        let Some(program) = found else {
            if inv.head_is_path && self.cwd.join(&inv.head).exists() {
                return Err(ShoalError::new(
                    ErrorCode::Permission,
                    format!("`{}` is not executable", inv.head),
                )
                .into());
            }
            return Err(self.not_found(&inv.head, scope).into());
        };
        self.spawn_program(
            program,
            &inv.head,
            argv,
            display,
            inv.env,
            &inv.redirects,
            inv.stdin,
            pos,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_program(
        &mut self,
        program: PathBuf,
        argv0: &str,
        argv: Vec<OsString>,
        display: String,
        env_prefix: Vec<(String, String)>,
        redirects: &[(RedirectKind, PathBuf)],
        stdin_bytes: Option<OutputBytes>,
        pos: Pos,
    ) -> EResult<Value> {
        let io = |p: &Path, e: std::io::Error| {
            ShoalError::custom(format!("cannot open {}: {e}", p.display()))
        };
        let mut stdin = match stdin_bytes {
            Some(b) => StdinSpec::Bytes(b),
            None => StdinSpec::Null,
        };
        let mut stdout = StdoutSpec::Capture;
        for (k, p) in redirects {
            match k {
                RedirectKind::In => stdin = StdinSpec::File(File::open(p).map_err(|e| io(p, e))?),
                RedirectKind::Out => {
                    stdout = StdoutSpec::File(File::create(p).map_err(|e| io(p, e))?)
                }
                RedirectKind::Append => {
                    stdout = StdoutSpec::File(
                        OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(p)
                            .map_err(|e| io(p, e))?,
                    )
                }
            }
        }
        let mut env: Vec<(OsString, OsString)> =
            Vec::with_capacity(self.env.len() + env_prefix.len());
        let mut merged = self.env.clone();
        for (k, v) in env_prefix {
            merged.insert(k, v);
        }
        merged.insert("PWD".into(), self.cwd.to_string_lossy().into_owned());
        for (k, v) in merged {
            env.push((k.into(), v.into()));
        }
        let spec = SpawnSpec {
            program,
            argv0: argv0.into(),
            args: argv,
            cwd: self.cwd.clone(),
            env,
            stdin,
            stdout,
            pid_slot: Some(self.child_pid.clone()),
        };
        let interrupter = self.interrupter.clone();
        let r = process::run(spec, &move || interrupter.is_interrupted());
        let res = match r {
            Ok(r) => r,
            Err(RunError::Interrupted) => return Err(Interp::cancelled().into()),
            Err(RunError::Spawn(e)) => {
                return Err(match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        ShoalError::not_found(format!("command not found: `{argv0}`"))
                    }
                    std::io::ErrorKind::PermissionDenied => ShoalError::new(
                        ErrorCode::Permission,
                        format!("cannot run `{argv0}`: permission denied"),
                    ),
                    _ => ShoalError::custom(format!("cannot run `{argv0}`: {e}")),
                }
                .into())
            }
        };
        let ok = res.status == Some(0);
        let mut stderr = res.stderr;
        let mut notes = Vec::new();
        for (what, n) in [
            ("stdout", res.stdout_dropped),
            ("stderr", res.stderr_dropped),
        ] {
            if n > 0 {
                notes.extend_from_slice(
                    format!("\nshoal: {n} bytes of {what} could not be stored (spill file)\n")
                        .as_bytes(),
                );
            }
        }
        if !notes.is_empty() {
            if stderr.is_spilled() {
                tracing::warn!("{}", String::from_utf8_lossy(&notes).trim());
            } else {
                let mut v = stderr.to_vec();
                v.extend_from_slice(&notes);
                stderr = OutputBytes::from(v);
            }
        }
        if pos == Pos::Stmt && !ok {
            let msg = match (&res.status, &res.signal) {
                (Some(n), _) => format!("`{display}` exited with status {n}"),
                (None, Some(sig)) => format!("`{display}` died from {sig}"),
                (None, None) => format!("`{display}` failed"),
            };
            let mut e = ShoalError::new(ErrorCode::CmdFailed, msg);
            e.status = res.status;
            e.stderr = Some(stderr.bounded(crate::value::methods::ERROR_STDERR_LIMIT));
            return Err(e.into());
        }
        Ok(Value::Outcome(Arc::new(Outcome {
            status: res.status,
            ok,
            signal: res.signal,
            dur_ns: res.dur_ns,
            pid: res.pid,
            cmd: display,
            stdout: res.stdout,
            stderr,
            out: None,
            span: self.cmd_span,
        })))
    }

    /// Calling a closure in command form (§10.12).
    fn call_closure_cmd(
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

    /// `run TARGET args…` (§10.9).
    pub(crate) fn run_target(
        &mut self,
        target: &str,
        cargs: Vec<CArg>,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        let tpath = PathBuf::from(self.expand_home(target));
        let abs = self.cwd.join(&tpath);
        let ext = tpath
            .extension()
            .map(|e| e.to_string_lossy().into_owned())
            .unwrap_or_default();
        let manifest_runner = if ext.is_empty() {
            None
        } else {
            crate::shell::reef::runner_for_ext(&self.cwd, &ext)
        };
        let scriptish = target.contains('/')
            || target.starts_with('.')
            || target.starts_with('~')
            || ((runner_for(&ext).is_some() || manifest_runner.is_some() || ext == "shl")
                && abs.exists());
        if !scriptish {
            let inv = Invocation {
                head: target.to_string(),
                head_is_path: false,
                forced: true,
                cargs,
                env: Vec::new(),
                redirects: Vec::new(),
                block: None,
                stdin: None,
            };
            return self.run_external(inv, pos, scope);
        }
        if ext == "shl" {
            return self.run_shl(&abs, carg_values(cargs));
        }
        let mut argv: Vec<OsString> = Vec::new();
        let (program_name, display_head): (String, String) = if let Some(runner) = manifest_runner {
            argv.push(abs.clone().into_os_string());
            (runner.clone(), format!("{runner} {target}"))
        } else if let Some((runner, pre)) = runner_for(&ext) {
            argv.extend(pre.iter().map(OsString::from));
            argv.push(abs.clone().into_os_string());
            (runner.to_string(), format!("{runner} {target}"))
        } else {
            let shebang = std::fs::read(&abs)
                .map(|b| b.starts_with(b"#!"))
                .unwrap_or(false);
            if !shebang {
                return Err(ShoalError::new(
                    ErrorCode::RunnerNotFound,
                    format!("no runner for `{target}`"),
                )
                .with_hint("known script extensions: py js ts sh shl rb lua rs, or start the file with a #! line")
                .into());
            }
            (abs.to_string_lossy().into_owned(), target.to_string())
        };
        argv.extend(carg_argv(&cargs)?);
        let mut display = display_head;
        for a in &cargs {
            for s in carg_display(a) {
                display.push(' ');
                display.push_str(&s);
            }
        }
        let path_var = self.env.get("PATH").cloned();
        let Some(program) = lookup::find_program(&program_name, path_var.as_deref(), &self.cwd)
        else {
            return Err(ShoalError::new(
                ErrorCode::RunnerNotFound,
                format!("runner `{program_name}` for `{target}` is not installed"),
            )
            .into());
        };
        self.spawn_program(
            program,
            &program_name,
            argv,
            display,
            Vec::new(),
            &[],
            None,
            pos,
        )
    }

    /// Run a `.shl` script in a child evaluator with a fresh scope (§10.9).
    pub(crate) fn run_shl(&mut self, path: &Path, args: Vec<Value>) -> EResult<Value> {
        let src = std::fs::read_to_string(path).map_err(|e| {
            ShoalError::new(
                ErrorCode::IoError,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        let mut ctx = ParseContext::default();
        ctx.value_bound.insert("args".into());
        ctx.value_bound.insert("script".into());
        let prog = parse(&src, &ctx).map_err(|e| {
            ShoalError::new(
                ErrorCode::ParseError,
                format!("{}: {}", path.display(), e.msg),
            )
        })?;
        let mut child = self.child();
        child.src = Arc::from(src.as_str());
        child.globals.define("args", Value::list(args), false, true);
        child
            .globals
            .define("script", Value::path(path), false, true);
        let g = child.globals.clone();
        match child.eval_stmts_top(&prog.stmts, &g, Pos::Stmt) {
            Ok(v) => Ok(v),
            Err(Ctl::Exit) => Ok(Value::Null),
            Err(c) => Err(Ctl::Err(Box::new(child.ctl_to_err(c)))),
        }
    }

    /// `source PATH`: evaluate a file in the current scope (§10.9).
    fn source_file(&mut self, p: &Path, scope: &ScopeRef) -> EResult<Value> {
        let abs = self.resolve_path(p);
        let src = std::fs::read_to_string(&abs).map_err(|e| {
            ShoalError::new(
                ErrorCode::IoError,
                format!("cannot read {}: {e}", p.display()),
            )
        })?;
        let mut ctx = ParseContext::default();
        for (k, b) in scope.visible_bindings() {
            if b.value_bound {
                ctx.value_bound.insert(k);
            }
        }
        let prog = parse(&src, &ctx).map_err(|e| {
            ShoalError::new(ErrorCode::ParseError, format!("{}: {}", p.display(), e.msg))
        })?;
        let saved = std::mem::replace(&mut self.src, Arc::from(src.as_str()));
        let r = self.eval_stmts_in(&prog.stmts, scope, Pos::Stmt);
        self.src = saved;
        r
    }

    /// `.feed(...)` (§10.7): the side that is a command is the command.
    pub(crate) fn eval_feed(
        &mut self,
        recv: &Expr,
        args: &[Arg],
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if args.len() != 1 || args[0].name.is_some() {
            return Err(ShoalError::arg_error("feed expects exactly one command or value").into());
        }
        let arg = &args[0].value;
        if self.is_command_expr(recv, scope) && !self.is_command_expr(arg, scope) {
            let v = self.eval_expr(arg, scope, Pos::Value)?;
            return self.feed_to(recv, v, scope, pos);
        }
        let v = self.eval_expr(recv, scope, Pos::Value)?;
        self.feed_to(arg, v, scope, pos)
    }

    fn is_command_expr(&self, e: &Expr, scope: &ScopeRef) -> bool {
        match &e.kind {
            ExprKind::Command(_) | ExprKind::InterpBlock { .. } => true,
            ExprKind::Group(inner) => self.is_command_expr(inner, scope),
            ExprKind::Ident(n) => !scope.is_bound(n) && !ns::is_namespace(n),
            _ => false,
        }
    }

    fn feed_to(&mut self, cmd: &Expr, v: Value, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        let bytes = feed_bytes(&v).map_err(|e| self.lift(e))?;
        match &cmd.kind {
            ExprKind::Group(inner) => self.feed_to(inner, v, scope, pos),
            ExprKind::InterpBlock { tool, program } => {
                self.run_interp_block(tool, program, Some(bytes), pos)
            }
            ExprKind::Command(c) => {
                let (head, head_is_path) = self.head_name(&c.head, scope)?;
                let mut cargs = Vec::new();
                for w in &c.args {
                    cargs.push(self.eval_word(w, scope)?);
                }
                let env = self.eval_env_prefix(c, scope)?;
                let redirects: Vec<_> = self
                    .eval_redirects(c, scope)?
                    .into_iter()
                    .filter(|(k, _)| *k != RedirectKind::In)
                    .collect();
                let inv = Invocation {
                    head,
                    head_is_path,
                    forced: true,
                    cargs,
                    env,
                    redirects,
                    block: None,
                    stdin: Some(bytes),
                };
                self.run_external(inv, pos, scope)
            }
            ExprKind::Ident(n) if !scope.is_bound(n) => {
                let inv = Invocation {
                    head: n.clone(),
                    head_is_path: false,
                    forced: true,
                    cargs: Vec::new(),
                    env: Vec::new(),
                    redirects: Vec::new(),
                    block: None,
                    stdin: Some(bytes),
                };
                self.run_external(inv, pos, scope)
            }
            _ => match self.eval_expr(cmd, scope, Pos::Value)? {
                Value::Command(a) => {
                    let (head, head_is_path) = self.head_name(&a.head, scope)?;
                    let mut cargs = Vec::new();
                    for w in &a.args {
                        cargs.push(self.eval_word(w, scope)?);
                    }
                    let env = self.eval_env_prefix(&a, scope)?;
                    let inv = Invocation {
                        head,
                        head_is_path,
                        forced: true,
                        cargs,
                        env,
                        redirects: Vec::new(),
                        block: None,
                        stdin: Some(bytes),
                    };
                    self.run_external(inv, pos, scope)
                }
                Value::Str(s) => {
                    let inv = Invocation {
                        head: s.to_string(),
                        head_is_path: s.contains('/'),
                        forced: true,
                        cargs: Vec::new(),
                        env: Vec::new(),
                        redirects: Vec::new(),
                        block: None,
                        stdin: Some(bytes),
                    };
                    self.run_external(inv, pos, scope)
                }
                other => Err(ShoalError::type_error(format!(
                    "feed expects a command, found {}",
                    other.type_name()
                ))
                .into()),
            },
        }
    }

    /// `TOOL { program }` (§10.8).
    pub(crate) fn run_interp_block(
        &mut self,
        tool: &str,
        program: &str,
        stdin: Option<OutputBytes>,
        pos: Pos,
    ) -> EResult<Value> {
        let flag: Option<&str> = match tool {
            "sh" | "bash" | "zsh" | "fish" | "python" | "python3" => Some("-c"),
            "node" | "ruby" | "perl" | "lua" | "Rscript" | "osascript" => Some("-e"),
            "php" => Some("-r"),
            "deno" => Some("eval"),
            "jq" => Some(""),
            _ => None,
        };
        let (argv, stdin) = match flag {
            Some("") => (vec![OsString::from(program)], stdin),
            Some(f) => (vec![OsString::from(f), OsString::from(program)], stdin),
            None => {
                if stdin.is_some() {
                    return Err(ShoalError::arg_error(format!(
                        "cannot feed `{tool}`: its program is passed on stdin"
                    ))
                    .into());
                }
                (Vec::new(), Some(OutputBytes::from(program)))
            }
        };
        let path_var = self.env.get("PATH").cloned();
        let Some(prog) = lookup::find_program(tool, path_var.as_deref(), &self.cwd) else {
            return Err(ShoalError::not_found(format!("command not found: `{tool}`")).into());
        };
        let display = format!("{tool} {{ {} }}", program.lines().next().unwrap_or(""));
        self.spawn_program(prog, tool, argv, display, Vec::new(), &[], stdin, pos)
    }

    // ----- directory stack -------------------------------------------------

    fn top_level_only(&self, head: &str) -> EResult<()> {
        if self.fn_depth > 0 {
            return Err(ShoalError::custom(format!(
                "`{head}` changes the session directory and is only allowed at the top level"
            ))
            .with_hint("inside a function use `with cwd: DIR { … }`")
            .into());
        }
        Ok(())
    }

    fn target_dir(&self, v: &Value, head: &str) -> EResult<PathBuf> {
        let p = match v {
            Value::Str(s) => PathBuf::from(self.expand_home(s)),
            Value::Path(p) => p.as_ref().clone(),
            other => {
                return Err(ShoalError::arg_error(format!(
                    "{head}: expected a directory, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        let abs = builtins::normalize(&self.cwd.join(&p));
        if !abs.is_dir() {
            return Err(ShoalError::arg_error(format!(
                "{head}: {}: no such directory",
                p.display()
            ))
            .into());
        }
        Ok(abs)
    }

    fn set_cwd(&mut self, new: PathBuf) {
        self.visit_tick += 1;
        let tick = self.visit_tick;
        match self.visited.iter_mut().find(|(p, _, _)| *p == new) {
            Some(e) => {
                e.1 += 1;
                e.2 = tick;
            }
            None => self.visited.push((new.clone(), 1, tick)),
        }
        let old = std::mem::replace(&mut self.cwd, new);
        self.env
            .insert("OLDPWD".into(), old.to_string_lossy().into_owned());
        self.env
            .insert("PWD".into(), self.cwd.to_string_lossy().into_owned());
        self.oldpwd = Some(old);
    }

    fn cd(&mut self, args: Vec<Value>) -> EResult<Value> {
        self.top_level_only("cd")?;
        let target = match args.as_slice() {
            [] => PathBuf::from(self.home()),
            [Value::Str(s)] if s.as_ref() == "-" => match &self.oldpwd {
                Some(p) => p.clone(),
                None => {
                    return Err(ShoalError::custom(
                        "cd -: no previous directory (OLDPWD is not set)",
                    )
                    .into())
                }
            },
            [v] => self.target_dir(v, "cd")?,
            _ => return Err(ShoalError::arg_error("cd expects at most one directory").into()),
        };
        if !target.is_dir() {
            return Err(ShoalError::arg_error(format!(
                "cd: {}: no such directory",
                target.display()
            ))
            .into());
        }
        self.set_cwd(target);
        Ok(Value::path(self.cwd.clone()))
    }

    /// `j` / `jump [query]`: the most frequently and recently visited
    /// directory of this session whose path contains the query.
    fn jump(&mut self, head: &str, query: Option<&Value>) -> EResult<Value> {
        let q = match query {
            None => String::new(),
            Some(Value::Str(s)) => s.to_string(),
            Some(Value::Path(p)) => p.to_string_lossy().into_owned(),
            Some(other) => {
                return Err(ShoalError::type_error(format!(
                    "{head}: expected a query, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        if !q.is_empty() {
            let direct = builtins::normalize(&self.cwd.join(self.expand_home(&q)));
            if direct.is_dir() && (q.contains('/') || q.starts_with('.') || q.starts_with('~')) {
                self.set_cwd(direct);
                return Ok(Value::path(self.cwd.clone()));
            }
        }
        let ql = q.to_lowercase();
        let best = self
            .visited
            .iter()
            .filter(|(p, _, _)| *p != self.cwd && p.is_dir())
            .filter(|(p, _, _)| p.to_string_lossy().to_lowercase().contains(&ql))
            .max_by_key(|(_, n, t)| (*n as u64) * 4 + *t)
            .map(|(p, _, _)| p.clone());
        match best {
            Some(p) => {
                self.set_cwd(p);
                Ok(Value::path(self.cwd.clone()))
            }
            None => Err(ShoalError::not_found(format!(
                "{head}: no remembered directory matches `{q}`"
            ))
            .with_hint("directories are remembered as you `cd` into them")
            .into()),
        }
    }

    fn dirs_list(&self) -> Value {
        let mut out = vec![Value::path(self.cwd.clone())];
        out.extend(self.dir_stack.iter().rev().map(|p| Value::path(p.clone())));
        Value::list(out)
    }

    fn pushd(&mut self, args: Vec<Value>) -> EResult<Value> {
        self.top_level_only("pushd")?;
        match args.as_slice() {
            [] => {
                let Some(top) = self.dir_stack.pop() else {
                    return Err(ShoalError::custom(
                        "pushd: no other directory to swap with (the directory stack is empty)",
                    )
                    .into());
                };
                let cur = self.cwd.clone();
                self.dir_stack.push(cur);
                self.set_cwd(top);
            }
            [v] => {
                let new = self.target_dir(v, "pushd")?;
                let cur = self.cwd.clone();
                self.dir_stack.push(cur);
                self.set_cwd(new);
            }
            _ => return Err(ShoalError::arg_error("pushd expects at most one directory").into()),
        }
        Ok(self.dirs_list())
    }

    fn popd(&mut self) -> EResult<Value> {
        let Some(top) = self.dir_stack.pop() else {
            return Err(ShoalError::custom("popd: the directory stack is empty").into());
        };
        self.set_cwd(top);
        Ok(self.dirs_list())
    }
}

fn type_text(t: &crate::lang::ast::TypeAnn) -> String {
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
fn signature(def: &crate::lang::ast::FnDef) -> String {
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

fn has_out_redirect(r: &[(RedirectKind, PathBuf)]) -> bool {
    r.iter()
        .any(|(k, _)| matches!(k, RedirectKind::Out | RedirectKind::Append))
}

/// Coerce a command-form argument to a parameter type (§10.12).
fn coerce_cmd_value(
    v: Value,
    t: &crate::lang::ast::TypeAnn,
    cwd: &Path,
) -> Result<Value, ShoalError> {
    if t.name == "list" {
        let elem = t.args.first().map(|a| a.name.as_str());
        return Ok(match v {
            Value::Str(s) => Value::list(vec![match elem {
                Some(e) if e != "str" => crate::value::coerce::coerce_word(&s, e, cwd)?,
                _ => Value::Str(s),
            }]),
            other => other,
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
