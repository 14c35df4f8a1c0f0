//! Commands (docs/rules.md §8, §9): head resolution (closures, aliases, builtins,
//! session heads, externals), dispatch of one invocation, aliases and command-not-found
//! diagnostics. Word evaluation is in `args.rs`, command-form closure calls in
//! `closure_cmd.rs`, scripts in `scripts.rs`, the directory stack in `dirs.rs`, externals in
//! `external.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;

use crate::ast::{Command, RedirectKind};
use crate::eval::{Ctl, EResult, Interp, Pos};
use crate::scope::ScopeRef;
use crate::scope::{closure, command, Closure};
use crate::shell::builtins::{self};
use crate::shell::{lookup, words};
use shoal_value::{render, Outcome, OutputBytes, ShoalError, Value};

pub(crate) use super::args::*;
pub(super) use super::closure_cmd::*;
use crate::heads::{all_heads, is_builtin_head};

/// Whether `cargs` hold a flag outside `modeled` (names as the builtin sees
/// them: a short cluster letter by letter, a long flag with `_` for `-`).
fn unmodeled_flag(cargs: &[CArg], modeled: &[&str]) -> bool {
    cargs.iter().any(|a| match a {
        CArg::Short(s) => s
            .chars()
            .any(|c| !modeled.contains(&c.to_string().as_str())),
        CArg::Long { name, .. } => !modeled.contains(&name.as_str()),
        _ => false,
    })
}

/// Heads never offered as `did you mean` (a typo must not lead to a deletion).
const NEVER_SUGGESTED: &[&str] = &["rm", "kill"];

/// Tools often missing, and what does the same everywhere.
const INSTEAD: &[(&str, &str)] = &[
    ("rg", "`grep -rn PATTERN .` searches the same way"),
    ("fd", "`find . -name 'PATTERN'` finds files by name"),
    ("bat", "`cat FILE` or `head -n 50 FILE` reads a file"),
    ("exa", "`ls` lists a directory as a table"),
    ("eza", "`ls` lists a directory as a table"),
];

impl Interp {
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

    /// Head resolution (docs/rules.md §8). `NAME=v` prefixes hold for the whole call, so
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

    /// Is `name` something a bare name in value position runs (docs/rules.md §4)?
    pub(crate) fn is_command_name(&self, name: &str, _scope: &ScopeRef) -> bool {
        if is_builtin_head(name) {
            return true;
        }
        lookup::on_path(name, self.env.get("PATH").map(|s| s.as_str()), &self.cwd)
    }

    pub(crate) fn did_you_mean(&self, name: &str, scope: &ScopeRef) -> Option<String> {
        use shoal_value::suggest;
        // A head that destroys is never offered for a typo (`rg` is not `rm`).
        let mut cands: Vec<String> = all_heads()
            .filter(|h| !NEVER_SUGGESTED.contains(h))
            .map(|s| s.to_string())
            .collect();
        for (k, b) in scope.visible_bindings() {
            if matches!(b.value, Value::Closure(_) | Value::Command(_)) {
                cands.push(k);
            }
        }
        let near = suggest::nearest(name, cands.iter().map(String::as_str));
        suggest::did_you_mean(&near, |c| format!("'{c}'"))
    }

    /// A missing program's hint: `did you mean` a near head, or what does
    /// the same for a tool often missing.
    pub(super) fn not_found(&self, name: &str, scope: &ScopeRef) -> ShoalError {
        let mut e = ShoalError::not_found(format!("command not found: `{name}`"));
        if let Some((_, instead)) = INSTEAD.iter().find(|(missing, _)| *missing == name) {
            e = e.with_hint(format!("`{name}` is not installed here; {instead}"));
        } else if let Some(h) = self.did_you_mean(name, scope) {
            e = e.with_hint(h);
        }
        e
    }

    /// Head resolution (docs/rules.md §8) for an unbound (or forced) head.
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
        if matches!(head.as_str(), "cd" | "pushd" | "popd" | "j" | "jump") {
            // Leash: moving the session's directory is a session write.
            shoal_policy::run_gate::check(&shoal_policy::Effect::SessionWrite)?;
        }
        let result: Value = match head.as_str() {
            "jobs" => self.jobs_table()?,
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
                shoal_value::methods::call_method(
                    self,
                    &value,
                    "save",
                    shoal_value::Args {
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
            // A builtin given a flag it does not model runs the program as
            // written (the agent's flags win, docs/rules.md §8).
            h if builtins::modeled_flags(h).is_some_and(|m| unmodeled_flag(&inv.cargs, m)) => {
                return self.run_external(inv, pos, scope);
            }
            h if builtins::is_fs_builtin(h) => {
                // `env` shows what the principal may read (docs/rules.md §21).
                let readable: IndexMap<String, String>;
                let env = match &self.env_view {
                    Some(v) if h == "env" => {
                        readable = v.readable(&self.env).into_iter().collect();
                        &readable
                    }
                    _ => &self.env,
                };
                let ctx = builtins::Ctx {
                    cwd: &self.cwd,
                    env,
                    interrupter: &self.interrupter,
                };
                // docs/rules.md §8: an empty glob contributes no argument;
                // the note goes to the outcome's stderr.
                let notes = super::external::empty_glob_notes(&inv.cargs);
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
                    typed: None,
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
