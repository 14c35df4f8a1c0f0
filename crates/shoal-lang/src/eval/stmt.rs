//! Statements, blocks, loops and assignment (docs/rules.md §1, §6, §7).

use crate::shell::builtins::io_msg;
use std::sync::Arc;

use crate::ast::{AssignOp, AssignTarget, BinOp, Block, Stmt, StmtKind};
use crate::eval::{Ctl, EResult, Interp, Pos};
use crate::parse::{parse, ParseContext};
use crate::scope::Closure;
use crate::scope::{AssignError, Scope, ScopeRef, UpdateError};
use shoal_value::{ops, ErrorCode, Record, ShoalError, Value};

impl Interp {
    pub(crate) fn eval_stmt(&mut self, st: &Stmt, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        self.check_cancel()?;
        self.check_stack()?;
        let r = self.eval_stmt_inner(st, scope, pos);
        match r {
            Err(Ctl::Err(e)) => Err(Ctl::Err(Box::new(e.with_span(st.span)))),
            other => other,
        }
    }

    fn eval_stmt_inner(&mut self, st: &Stmt, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        match &st.kind {
            StmtKind::Let {
                name,
                mutable,
                value,
                ..
            } => {
                let v = self.eval_expr(value, scope, Pos::Value)?;
                if name != "_" {
                    scope.define(name, v, *mutable, true);
                }
                Ok(Value::Null)
            }
            StmtKind::Fn { def, .. } => {
                if let Some(name) = &def.name {
                    let c = Value::Closure(Arc::new(Closure {
                        def: def.clone(),
                        env: scope.clone(),
                    }));
                    scope.define(name, c, false, false);
                }
                Ok(Value::Null)
            }
            StmtKind::Alias { name, command } => {
                scope.define(name, Value::Command(command.clone()), false, false);
                Ok(Value::Null)
            }
            StmtKind::Use { path } => self.eval_use(path, scope),
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.eval_expr(e, scope, Pos::Value)?,
                    None => Value::Null,
                };
                Err(Ctl::Return(v))
            }
            StmtKind::Break => Err(Ctl::Break),
            StmtKind::Continue => Err(Ctl::Continue),
            StmtKind::For { var, iter, body } => self.eval_for(var, iter, body, scope),
            StmtKind::While { cond, body } => {
                loop {
                    self.check_cancel()?;
                    let c = self.eval_expr(cond, scope, Pos::Value)?;
                    if !ops::truth(&c).map_err(|e| self.lift(e))? {
                        break;
                    }
                    match self.eval_block(body, scope, Pos::Stmt) {
                        Ok(_) | Err(Ctl::Continue) => {}
                        Err(Ctl::Break) => break,
                        Err(other) => return Err(other),
                    }
                }
                Ok(Value::Null)
            }
            StmtKind::Assign { target, op, value } => self.eval_assign(target, *op, value, scope),
            StmtKind::Expr(e) => self.eval_expr(e, scope, pos),
        }
    }

    /// A `{ … }` block in a child scope. Non-final statements are in
    /// statement position, the final one in `final_pos`.
    pub(crate) fn eval_block(
        &mut self,
        b: &Block,
        scope: &ScopeRef,
        final_pos: Pos,
    ) -> EResult<Value> {
        let child = Scope::child(scope);
        self.eval_stmts_in(&b.stmts, &child, final_pos)
    }

    /// Statements directly in `scope` (no new scope).
    pub(crate) fn eval_stmts_in(
        &mut self,
        stmts: &[Stmt],
        scope: &ScopeRef,
        final_pos: Pos,
    ) -> EResult<Value> {
        let mut last = Value::Null;
        let n = stmts.len();
        for (i, st) in stmts.iter().enumerate() {
            let pos = if i + 1 == n { final_pos } else { Pos::Stmt };
            last = self.eval_stmt(st, scope, pos)?;
        }
        Ok(last)
    }

    fn eval_for(
        &mut self,
        var: &str,
        iter: &crate::ast::Expr,
        body: &Block,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        let it = self.eval_expr(iter, scope, Pos::Value)?;
        let items = self.iterate(&it)?;
        for item in items {
            self.check_cancel()?;
            let item = item.map_err(|e| self.lift(e))?;
            let s = Scope::child(scope);
            s.define(var, item, false, true);
            match self.eval_stmts_in(&body.stmts, &s, Pos::Stmt) {
                Ok(_) | Err(Ctl::Continue) => {}
                Err(Ctl::Break) => break,
                Err(other) => return Err(other),
            }
        }
        Ok(Value::Null)
    }

    /// The items of a `for` iterable (docs/rules.md §7).
    pub(crate) fn iterate(
        &mut self,
        v: &Value,
    ) -> EResult<Box<dyn Iterator<Item = Result<Value, ShoalError>> + Send>> {
        Ok(match v {
            Value::List(l) => {
                let l = l.clone();
                Box::new((0..l.len()).map(move |i| Ok(l[i].clone())))
            }
            Value::Table(t) => {
                let t = t.clone();
                Box::new((0..t.len()).map(move |i| Ok(Value::Record(t[i].clone()))))
            }
            Value::Range(r) => {
                let end = if r.inclusive {
                    r.end.saturating_add(1)
                } else {
                    r.end
                };
                Box::new((r.start..end.max(r.start)).map(|i| Ok(Value::Int(i))))
            }
            Value::Glob(g) => {
                let pattern = crate::shell::words::expand_tilde(&g.pattern);
                let paths = shoal_policy::run_gate::expand_checked(&pattern, &g.cwd, g.hidden)?;
                Box::new(paths.into_iter().map(|p| Ok(Value::path(p))))
            }
            Value::Stream(s) => {
                if !s.bounded {
                    return Err(ShoalError::new(
                        ErrorCode::StreamUnbounded,
                        "cannot iterate an unbounded stream to the end",
                    )
                    .with_hint("bound it first, e.g. `.take(n)`")
                    .into());
                }
                let mut guard = shoal_base::sync::Locked::locked(&s.source);
                match guard.take() {
                    Some(src) => src,
                    None => {
                        return Err(ShoalError::new(
                            ErrorCode::StreamConsumed,
                            "stream already consumed",
                        )
                        .into())
                    }
                }
            }
            Value::Outcome(_) => {
                return Err(ShoalError::type_error("cannot iterate over an outcome")
                    .with_hint("iterate its result instead: `.out`")
                    .into())
            }
            other => {
                return Err(ShoalError::type_error(format!(
                    "cannot iterate over {}",
                    other.type_name()
                ))
                .into())
            }
        })
    }

    fn eval_assign(
        &mut self,
        target: &AssignTarget,
        op: AssignOp,
        value: &crate::ast::Expr,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        match target {
            AssignTarget::Var(name) => {
                let rhs = self.eval_expr(value, scope, Pos::Value)?;
                let result = match op_binop(op) {
                    None => scope
                        .assign(name, rhs.clone())
                        .map(|()| rhs)
                        .map_err(UpdateError::Assign),
                    // Read, combine and write under one lock: parallel
                    // thunks sharing a `var` never lose an update.
                    Some(bop) => scope.update(name, |cur| ops::binary(bop, cur, &rhs)),
                };
                match result {
                    Ok(v) => Ok(v),
                    Err(UpdateError::Op(e)) => Err(self.lift(e)),
                    Err(UpdateError::Assign(AssignError::NotFound)) => {
                        Err(not_assignable(name).into())
                    }
                    Err(UpdateError::Assign(AssignError::Immutable)) => Err(immutable(name).into()),
                }
            }
            AssignTarget::Env(name) => {
                if self.fn_depth > 0 {
                    return Err(ShoalError::custom(format!(
                        "`env.{name} = …` is only allowed at the top level; inside a function use `with env: {{…}} {{ … }}`"
                    ))
                    .into());
                }
                if op != AssignOp::Set {
                    return Err(ShoalError::type_error(format!(
                        "compound assignment to `env.{name}` is not supported"
                    ))
                    .with_hint(format!("write `env.{name} = …`"))
                    .into());
                }
                let v = self.eval_expr(value, scope, Pos::Value)?;
                match &v {
                    Value::Null => {
                        self.env.shift_remove(name);
                    }
                    other => {
                        let s = crate::eval::argv_string(other)?;
                        self.env_own.insert(name.clone());
                        self.env
                            .insert(name.clone(), s.to_string_lossy().into_owned());
                    }
                }
                Ok(v)
            }
        }
    }

    /// `use ./path/mod.shl`: evaluate the module in a fresh evaluator and
    /// bind its exports as a record named after the file stem.
    fn eval_use(&mut self, path: &str, scope: &ScopeRef) -> EResult<Value> {
        let p = self.resolve_path(std::path::Path::new(path));
        let p = if p.extension().is_none() && !p.exists() {
            p.with_extension("shl")
        } else {
            p
        };
        super::scripts::gate_script("use", &self.cwd, &p)?;
        let src = std::fs::read_to_string(&p).map_err(|e| {
            ShoalError::new(
                ErrorCode::IoError,
                format!("cannot read module {}: {}", p.display(), io_msg(&e)),
            )
        })?;
        let prog = parse(&src, &ParseContext::default()).map_err(|e| {
            ShoalError::new(ErrorCode::ParseError, format!("{}: {}", p.display(), e.msg))
        })?;
        let mut child = self.child();
        child.src = Arc::from(src.as_str());
        let mscope = child.globals.clone();
        match child.eval_stmts_top(&prog.stmts, &mscope, Pos::Stmt) {
            Ok(_) | Err(Ctl::Exit) => {}
            Err(c) => return Err(Ctl::Err(Box::new(child.ctl_to_err(c)))),
        }
        let mut exports = Record::new();
        for st in &prog.stmts {
            let name = match &st.kind {
                StmtKind::Let {
                    name, export: true, ..
                } => Some(name.clone()),
                StmtKind::Fn { def, export: true } => def.name.clone(),
                _ => None,
            };
            if let Some(n) = name {
                if let Some(v) = mscope.lookup(&n) {
                    exports.insert(n.into(), v);
                }
            }
        }
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "module".into());
        scope.define(&stem, Value::record(exports), false, true);
        Ok(Value::Null)
    }
}

fn op_binop(op: AssignOp) -> Option<BinOp> {
    match op {
        AssignOp::Set => None,
        AssignOp::Add => Some(BinOp::Add),
        AssignOp::Sub => Some(BinOp::Sub),
        AssignOp::Mul => Some(BinOp::Mul),
        AssignOp::Div => Some(BinOp::Div),
    }
}

fn not_assignable(name: &str) -> ShoalError {
    ShoalError::type_error(format!(
        "cannot assign `{name}`: no variable `{name}` is declared"
    ))
    .with_hint(format!(
        "declare it first with `var {name} = …`; to set an environment variable for later commands: `env.{name} = \"…\"`"
    ))
}

fn immutable(name: &str) -> ShoalError {
    ShoalError::type_error(format!(
        "cannot assign `{name}`: it is immutable (declared with `let`)"
    ))
    .with_hint(format!(
        "declare it with `var {name} = …` to make it mutable"
    ))
}
