//! External programs from the evaluator: spawning with redirects and
//! environment prefixes, `.feed`, and interpreter blocks (docs/rules.md §8).

use crate::shell::builtins::io_msg;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::command::*;
use crate::ast::{Arg, Expr, ExprKind, RedirectKind};
use crate::eval::{Ctl, EResult, Interp, Pos};
use crate::scope::ScopeRef;
use crate::shell::process::{self, RunError, SpawnSpec, StdinSpec, StdoutSpec};
use shoal_base::lookup;
use shoal_value::{ns, render, ErrorCode, Outcome, OutputBytes, ShoalError, Value};

/// What the globs of `cargs` that matched nothing say (docs/rules.md §8).
pub(super) fn empty_glob_notes(cargs: &[CArg]) -> Vec<u8> {
    let mut notes = Vec::new();
    for a in cargs {
        if let CArg::Glob { pattern, matches } = a {
            if matches.is_empty() {
                notes.extend_from_slice(
                    format!(
                        "note: `{pattern}` matched nothing and was left out (quote it to pass it as written: '{pattern}')\n"
                    )
                    .as_bytes(),
                );
            }
        }
    }
    notes
}

/// `r` with `notes` after its stderr: an outcome's, or a failed command's.
fn with_notes(r: EResult<Value>, notes: &[u8]) -> EResult<Value> {
    let after = |stderr: &[u8]| -> Vec<u8> {
        let mut v = stderr.to_vec();
        if !v.is_empty() && !v.ends_with(b"\n") {
            v.push(b'\n');
        }
        v.extend_from_slice(notes);
        v
    };
    match r {
        Ok(Value::Outcome(ref o)) if !o.stderr.is_spilled() => {
            Ok(Value::Outcome(Arc::new(Outcome {
                status: o.status,
                ok: o.ok,
                signal: o.signal.clone(),
                dur_ns: o.dur_ns,
                pid: o.pid,
                cmd: o.cmd.clone(),
                stdout: o.stdout.clone(),
                stderr: OutputBytes::from(after(&o.stderr.head(usize::MAX))),
                out: o.out.clone(),
                span: o.span,
                truncated: o.truncated,
                typed: o.typed.clone(),
            })))
        }
        Err(Ctl::Err(mut e)) if e.code == ErrorCode::CmdFailed => {
            let stderr = after(e.stderr.as_deref().unwrap_or_default());
            e.stderr = Some(stderr.into());
            Err(Ctl::Err(e))
        }
        r => r,
    }
}

impl Interp {
    /// Builtin `> f` / `>> f`: write the redirect bytes, yield null.
    pub(super) fn apply_value_redirects(
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
            .map_err(|e| {
                ShoalError::custom(format!("cannot write {}: {}", p.display(), io_msg(&e)))
            })?;
            use std::io::Write;
            f.write_all(&bytes).map_err(|e| {
                ShoalError::custom(format!("cannot write {}: {}", p.display(), io_msg(&e)))
            })?;
        }
        Ok(Value::Null)
    }

    /// Spawn an external program (docs/rules.md §8). A glob that matched
    /// nothing is left out of its arguments, and its outcome's stderr (or its
    /// failure's) ends with a note saying so (the end: what a bounded tail keeps).
    pub(super) fn run_external(
        &mut self,
        inv: Invocation,
        pos: Pos,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        let notes = empty_glob_notes(&inv.cargs);
        let r = self.run_external_argv(inv, pos, scope);
        if notes.is_empty() {
            r
        } else {
            with_notes(r, &notes)
        }
    }

    fn run_external_argv(&mut self, inv: Invocation, pos: Pos, scope: &ScopeRef) -> EResult<Value> {
        let argv = carg_argv(&inv.cargs)?;
        if let Some(e) = super::terminal::refusal(&inv.head, &argv) {
            return Err(e.into());
        }
        let mut display = inv.head.clone();
        for a in &inv.cargs {
            for s in carg_display(a) {
                display.push(' ');
                display.push_str(&s);
            }
        }
        if let Some(r) = self.run_adapter(&inv, &argv, &display, pos, scope) {
            return r;
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
    pub(super) fn spawn_program(
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
        // Leash: refused before any redirect file is opened.
        shoal_policy::run_gate::spawn(&program)?;
        // A flag its adapter calls opaque (`curl -K`, `git push --exec`):
        // what it runs or reads the plan could not see.
        if let Some(flag) = self
            .adapters
            .as_ref()
            .and_then(|c| c.opaque_flag(argv0, &argv))
        {
            let what = format!("{argv0} {}", flag.to_string_lossy());
            shoal_policy::run_gate::opaque(&what)?;
        }
        let io = |p: &Path, e: std::io::Error| {
            ShoalError::custom(format!("cannot open {}: {}", p.display(), io_msg(&e)))
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
        let mut merged = self.child_env().into_owned();
        for (k, v) in env_prefix {
            merged.insert(k, v);
        }
        merged.insert("PWD".into(), self.cwd.to_string_lossy().into_owned());
        super::terminal::no_editor(&mut merged);
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
            spill_quota: self.spill.clone(),
        };
        let r = process::run(spec, &self.interrupter);
        let res = match r {
            Ok(r) => r,
            Err(RunError::Interrupted) => return Err(Interp::cancelled().into()),
            Err(RunError::Denied(e)) => return Err(e.into()),
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
            e.stderr = Some(stderr.bounded(shoal_value::methods::ERROR_STDERR_LIMIT));
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
            truncated: res.truncated,
            typed: None,
        })))
    }

    /// `.feed(...)` (docs/rules.md §8): the side that is a command is the command.
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

    pub(super) fn is_command_expr(&self, e: &Expr, scope: &ScopeRef) -> bool {
        match &e.kind {
            ExprKind::Command(_) | ExprKind::InterpBlock { .. } => true,
            ExprKind::Group(inner) => self.is_command_expr(inner, scope),
            ExprKind::Ident(n) => !scope.is_bound(n) && !ns::is_namespace(n),
            _ => false,
        }
    }

    pub(super) fn feed_to(
        &mut self,
        cmd: &Expr,
        v: Value,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
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
            _ => match &self.eval_expr(cmd, scope, Pos::Value)? {
                Value::Command(a) => {
                    let a = &crate::scope::command(a);
                    let (head, head_is_path) = self.head_name(&a.head, scope)?;
                    let mut cargs = Vec::new();
                    for w in &a.args {
                        cargs.push(self.eval_word(w, scope)?);
                    }
                    let env = self.eval_env_prefix(a, scope)?;
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

    /// `TOOL { program }` (docs/rules.md §8).
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
}
