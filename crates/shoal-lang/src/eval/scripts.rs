//! `run`, `source` and `.shl` scripts (docs/rules.md §8).

use crate::shell::builtins::io_msg;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::command::*;
use crate::eval::{Ctl, EResult, Interp, Pos};
use crate::parse::{parse, ParseContext};
use crate::scope::ScopeRef;
use shoal_base::lookup;
use shoal_value::{ErrorCode, ShoalError, Value};

/// Leash for running the script at `path` (docs/rules.md §21): an opaque
/// effect (its effects were never planned) and a read of the file.
pub(super) fn gate_script(what: &str, cwd: &Path, path: &Path) -> Result<(), ShoalError> {
    shoal_policy::run_gate::opaque(&format!("{what} {}", path.display()))?;
    shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Read, cwd, path)
}

impl Interp {
    /// `run TARGET args…` (docs/rules.md §8).
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
        // Leash: a script is code the plan cannot see, and a read of it.
        gate_script("run", &self.cwd, &abs)?;
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

    /// Run a `.shl` script in a child evaluator with a fresh scope (docs/rules.md §8).
    pub(crate) fn run_shl(&mut self, path: &Path, args: Vec<Value>) -> EResult<Value> {
        gate_script("run", &self.cwd, path)?;
        let src = std::fs::read_to_string(path).map_err(|e| {
            ShoalError::new(
                ErrorCode::IoError,
                format!("cannot read {}: {}", path.display(), io_msg(&e)),
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

    /// `source PATH`: evaluate a file in the current scope (docs/rules.md §8).
    pub(super) fn source_file(&mut self, p: &Path, scope: &ScopeRef) -> EResult<Value> {
        let abs = self.resolve_path(p);
        gate_script("source", &self.cwd, &abs)?;
        let src = std::fs::read_to_string(&abs).map_err(|e| {
            ShoalError::new(
                ErrorCode::IoError,
                format!("cannot read {}: {}", p.display(), io_msg(&e)),
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
}
