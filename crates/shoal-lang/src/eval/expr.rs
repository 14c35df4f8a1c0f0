//! Expressions (docs/rules.md §4, §5, §7): literals, names, operators,
//! fields, methods, indexing, `if`, `match`, `try`, postfix `catch`, `with`.

use std::sync::Arc;

use crate::ast::{Arg, BinOp, Expr, ExprKind, InterpPart, Literal};
use crate::eval::{Ctl, EResult, Interp, Pos};
use crate::scope::{Closure, Scope, ScopeRef};
use shoal_value::{
    datetime, methods, ns, ops, render, Args, ErrorCode, RangeVal, Record, RegexVal, ShoalError,
    Value,
};

/// Evaluated named arguments, in source order.
pub(crate) type NamedArgs = Vec<(String, Value)>;

impl Interp {
    /// Evaluate an expression. The arms that closure-heavy code runs on every
    /// call (literals, names, operators, fields, methods, calls) are here;
    /// the rest live in [`Interp::eval_expr_cold`] so this frame stays small.
    pub(crate) fn eval_expr(&mut self, e: &Expr, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        match &e.kind {
            ExprKind::Literal(l) => match l {
                Literal::Int(i) => Ok(Value::Int(*i)),
                Literal::Bool(b) => Ok(Value::Bool(*b)),
                Literal::Null => Ok(Value::Null),
                Literal::Float(f) => Ok(Value::Float(*f)),
                _ => self.literal_cold(l),
            },
            ExprKind::Ident(name) => self.eval_ident(name, scope),
            ExprKind::Binary { op, lhs, rhs } => self.eval_binary(*op, lhs, rhs, scope),
            ExprKind::Unary { op, expr } => {
                let v = self.eval_expr(expr, scope, Pos::Value)?;
                ops::unary(*op, &v).map_err(|e| self.lift(e))
            }
            ExprKind::Field {
                recv,
                name,
                optional,
            } => self.eval_field(recv, name, *optional, scope),
            ExprKind::MethodCall {
                recv,
                name,
                args,
                optional,
            } => self.eval_method(recv, name, args, *optional, scope, pos),
            ExprKind::Call { callee, args } => self.eval_call(callee, args, scope, pos),
            ExprKind::Lambda(def) => Ok(Value::Closure(Arc::new(Closure {
                def: def.clone(),
                env: scope.clone(),
            }))),
            ExprKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval_expr(cond, scope, Pos::Value)?;
                if ops::truth(&c).map_err(|e| self.lift(e))? {
                    self.eval_block(then, scope, Pos::Value)
                } else if let Some(o) = otherwise {
                    self.eval_expr(o, scope, Pos::Value)
                } else {
                    Ok(Value::Null)
                }
            }
            ExprKind::Group(inner) => self.eval_expr(inner, scope, pos),
            _ => self.eval_expr_cold(e, scope, pos),
        }
    }

    #[inline(never)]
    fn literal_cold(&self, l: &Literal) -> EResult<Value> {
        Ok(self.literal(l)?)
    }

    /// The less frequent arms of [`Interp::eval_expr`].
    #[inline(never)]
    fn eval_expr_cold(&mut self, e: &Expr, scope: &ScopeRef, pos: Pos) -> EResult<Value> {
        match &e.kind {
            ExprKind::Interp(parts) => self.eval_interp(parts, scope),
            ExprKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(self.eval_expr(it, scope, Pos::Value)?);
                }
                Ok(Value::list(out))
            }
            ExprKind::Record(fields) => {
                let mut r = Record::new();
                for (k, v) in fields {
                    let v = self.eval_expr(v, scope, Pos::Value)?;
                    r.insert(k.as_str().into(), v);
                }
                Ok(Value::record(r))
            }
            ExprKind::Block(b) => self.eval_block(b, scope, Pos::Value),
            ExprKind::Range {
                start,
                end,
                inclusive,
            } => {
                let a = self.eval_expr(start, scope, Pos::Value)?;
                let b = self.eval_expr(end, scope, Pos::Value)?;
                match (&a, &b) {
                    (Value::Int(s), Value::Int(t)) => Ok(Value::Range(RangeVal {
                        start: *s,
                        end: *t,
                        inclusive: *inclusive,
                    })),
                    _ => Err(ShoalError::type_error(format!(
                        "range bounds must be int, found {} and {}",
                        a.type_name(),
                        b.type_name()
                    ))
                    .into()),
                }
            }
            ExprKind::Index { recv, index } => {
                let r = self.eval_expr(recv, scope, Pos::Value)?;
                let i = self.eval_expr(index, scope, Pos::Value)?;
                index_value(&r, &i).map_err(|e| self.lift(e))
            }
            ExprKind::Match { scrutinee, arms } => {
                let v = self.eval_expr(scrutinee, scope, Pos::Value)?;
                for arm in arms {
                    for pat in &arm.patterns {
                        let s = Scope::child(scope);
                        if !self.match_pattern(pat, &v, &s) {
                            continue;
                        }
                        if let Some(g) = &arm.guard {
                            let gv = self.eval_expr(g, &s, Pos::Value)?;
                            if !ops::truth(&gv).map_err(|e| self.lift(e))? {
                                continue;
                            }
                        }
                        return self.eval_expr(&arm.body, &s, Pos::Value);
                    }
                }
                Ok(Value::Null)
            }
            ExprKind::Try {
                body,
                name,
                handler,
            } => match self.eval_block(body, scope, Pos::Value) {
                Err(Ctl::Err(err)) if self.catchable(&err) => {
                    let s = Scope::child(scope);
                    if let Some(n) = name {
                        s.define(n, Value::Error(Arc::new(*err)), false, true);
                    }
                    self.eval_block(handler, &s, Pos::Value)
                }
                other => other,
            },
            ExprKind::Catch {
                expr,
                name,
                handler,
            } => match self.eval_expr(expr, scope, Pos::Value) {
                Err(Ctl::Err(err)) if self.catchable(&err) => {
                    let s = Scope::child(scope);
                    if let Some(n) = name {
                        s.define(n, Value::Error(Arc::new(*err)), false, true);
                    }
                    self.eval_expr(handler, &s, Pos::Value)
                }
                other => other,
            },
            ExprKind::With {
                cwd,
                env,
                reef,
                body,
            } => self.eval_with(cwd, env, reef, body, scope),
            ExprKind::Spawn(body) => self.spawn_block(body, scope),
            ExprKind::Background(inner) => self.spawn_expr(inner, scope),
            ExprKind::Command(cmd) => {
                let saved = self.cmd_span.replace(cmd.span);
                let r = self.eval_command(cmd, scope, pos);
                self.cmd_span = saved;
                r
            }
            ExprKind::InterpBlock { tool, program } => {
                let saved = self.cmd_span.replace(e.span);
                let r = self.run_interp_block(tool, program, None, pos);
                self.cmd_span = saved;
                r
            }
            ExprKind::Literal(_)
            | ExprKind::Ident(_)
            | ExprKind::Binary { .. }
            | ExprKind::Unary { .. }
            | ExprKind::Field { .. }
            | ExprKind::MethodCall { .. }
            | ExprKind::Call { .. }
            | ExprKind::Lambda(_)
            | ExprKind::If { .. }
            | ExprKind::Group(_) => self.eval_expr(e, scope, pos),
        }
    }

    /// Errors a `try`/`catch` may handle: everything except cancellation and
    /// a pending `exit`.
    pub(crate) fn catchable(&self, e: &ShoalError) -> bool {
        e.code != ErrorCode::Cancelled && !self.exit_requested
    }

    pub(crate) fn literal(&self, l: &Literal) -> Result<Value, ShoalError> {
        Ok(match l {
            Literal::Null => Value::Null,
            Literal::Bool(b) => Value::Bool(*b),
            Literal::Int(i) => Value::Int(*i),
            Literal::Float(f) => Value::Float(*f),
            Literal::Str(s) => Value::str(s),
            Literal::Size(n) => Value::Size(*n),
            Literal::Duration(n) => Value::Duration(*n),
            Literal::Time(t) => Value::Time(*t),
            Literal::Regex(src) => make_regex(src)?,
            Literal::DateTime(text) => {
                Value::DateTime(Arc::new(datetime::parse_datetime_literal(text)?))
            }
        })
    }

    fn eval_interp(&mut self, parts: &[InterpPart], scope: &ScopeRef) -> EResult<Value> {
        let mut out = String::new();
        for p in parts {
            match p {
                InterpPart::Lit(s) => out.push_str(s),
                InterpPart::Expr(e) => {
                    let v = self.eval_expr(e, scope, Pos::Value)?;
                    match &v {
                        Value::Str(s) => out.push_str(s),
                        Value::Secret(_) => {
                            return Err(ShoalError::type_error(
                                "a secret cannot be interpolated into a string",
                            )
                            .with_hint(
                                "pass secrets to the tool that needs them without rendering them",
                            )
                            .into())
                        }
                        other => out.push_str(&render::inline(other)),
                    }
                }
            }
        }
        Ok(Value::str(out))
    }

    /// A bare name in expression position (docs/rules.md §4).
    pub(crate) fn eval_ident(&mut self, name: &str, scope: &ScopeRef) -> EResult<Value> {
        if let Some(v) = scope.lookup(name) {
            return Ok(v);
        }
        match name {
            "now" => return Ok(now_value()),
            "today" => return Ok(today_value()),
            _ => {}
        }
        if self.is_command_name(name, scope) {
            return self.run_named_command(name, Vec::new(), scope, Pos::Value);
        }
        let mut e = ShoalError::new(
            ErrorCode::UndefinedVar,
            format!("undefined variable `{name}`"),
        );
        // An all-caps name is most often an environment variable.
        if name.bytes().any(|b| b.is_ascii_uppercase())
            && !name.bytes().any(|b| b.is_ascii_lowercase())
            && self.env_get(name).is_some()
        {
            e = e.with_hint(format!(
                "`{name}` is an environment variable: `env.{name}` (in a string `{{env.{name}}}`)"
            ));
        }
        Err(e.into())
    }

    fn eval_binary(
        &mut self,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        match op {
            BinOp::And | BinOp::Or => {
                let l = self.eval_expr(lhs, scope, Pos::Value)?;
                let t = ops::truth(&l).map_err(|e| self.lift(e))?;
                if (op == BinOp::And) != t {
                    Ok(l)
                } else {
                    self.eval_expr(rhs, scope, Pos::Value)
                }
            }
            BinOp::Coalesce => {
                let l = self.eval_expr(lhs, scope, Pos::Value)?;
                if matches!(l, Value::Null) {
                    self.eval_expr(rhs, scope, Pos::Value)
                } else {
                    Ok(l)
                }
            }
            _ => {
                let l = self.eval_operand(lhs, scope)?;
                let r = self.eval_operand(rhs, scope)?;
                if let (Value::Int(x), Value::Int(y), true) = (&l, &r, self.fast_paths) {
                    if let Some(v) = ops::binary_int(op, *x, *y) {
                        return Ok(v);
                    }
                }
                self.binary_slow(op, &l, &r)
            }
        }
    }

    /// An operand of a binary operator: bound names and int literals
    /// without a round trip through [`Interp::eval_expr`].
    #[inline(always)]
    fn eval_operand(&mut self, e: &Expr, scope: &ScopeRef) -> EResult<Value> {
        match &e.kind {
            ExprKind::Literal(Literal::Int(i)) => Ok(Value::Int(*i)),
            ExprKind::Ident(name) => match scope.lookup(name) {
                Some(v) => Ok(v),
                None => self.eval_ident(name, scope),
            },
            _ => self.eval_expr(e, scope, Pos::Value),
        }
    }

    #[inline(never)]
    fn binary_slow(&self, op: BinOp, l: &Value, r: &Value) -> EResult<Value> {
        ops::binary(op, l, r).map_err(|e| self.lift(e))
    }

    /// An unbound namespace root used as a receiver (`json.parse`).
    fn namespace_root(&self, recv: &Expr, scope: &ScopeRef) -> Option<String> {
        if let ExprKind::Ident(n) = &recv.kind {
            if !scope.is_bound(n) && (ns::is_namespace(n) || n == "env" || n == "secret") {
                return Some(n.clone());
            }
        }
        None
    }

    fn eval_field(
        &mut self,
        recv: &Expr,
        name: &str,
        optional: bool,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        if let Some(root) = self.namespace_root(recv, scope) {
            return match root.as_str() {
                "env" => match self.env_get(name) {
                    Some(v) => Ok(Value::str(v)),
                    None => Err(ShoalError::field_missing(format!(
                        "no environment variable `{name}`"
                    ))
                    .with_hint(format!("`(env {name}).out` gives null when it is unset"))
                    .into()),
                },
                "secret" => Err(ShoalError::field_missing(format!(
                    "unknown member `secret.{name}`"
                ))
                .with_hint("use `secret.get(name)`")
                .into()),
                _ => ns::field(self, &root, name).map_err(|e| self.lift(e)),
            };
        }
        let r = self.eval_expr(recv, scope, Pos::Value)?;
        if optional && matches!(r, Value::Null) {
            return Ok(Value::Null);
        }
        if let Some(v) = self.intercept_field(&r, name)? {
            return Ok(v);
        }
        methods::get_field(self, &r, name).map_err(|e| self.lift(e))
    }

    /// Evaluate call arguments in order.
    pub(crate) fn eval_args(
        &mut self,
        args: &[Arg],
        scope: &ScopeRef,
    ) -> EResult<(Vec<Value>, NamedArgs)> {
        let mut pos = Vec::new();
        let mut named = Vec::new();
        for a in args {
            let v = self.eval_expr(&a.value, scope, Pos::Value)?;
            match &a.name {
                Some(n) => named.push((n.clone(), v)),
                None => pos.push(v),
            }
        }
        Ok((pos, named))
    }

    fn eval_method(
        &mut self,
        recv: &Expr,
        name: &str,
        args: &[Arg],
        optional: bool,
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if let Some(root) = self.namespace_root(recv, scope) {
            let (p, n) = self.eval_args(args, scope)?;
            return match root.as_str() {
                "secret" => self.secret_call(name, p),
                "env" => {
                    // `env.NAME(...)`: run the `env` builtin and forward.
                    let o = self.run_named_command("env", Vec::new(), scope, Pos::Value)?;
                    methods::call_method(self, &o, name, Args { pos: p, named: n })
                        .map_err(|e| self.lift(e))
                }
                _ => {
                    ns::call(self, &root, name, Args { pos: p, named: n }).map_err(|e| self.lift(e))
                }
            };
        }
        if name == "feed" {
            return self.eval_feed(recv, args, scope, pos);
        }
        let r = self.eval_expr(recv, scope, Pos::Value)?;
        if optional && matches!(r, Value::Null) {
            return Ok(Value::Null);
        }
        let (p, n) = self.eval_args(args, scope)?;
        if let Some(v) = self.intercept_method(&r, name, &p, &n)? {
            return Ok(v);
        }
        methods::call_method(self, &r, name, Args { pos: p, named: n }).map_err(|e| self.lift(e))
    }

    /// Evaluator-level field intercepts (tasks, errors raised by the
    /// evaluator's own types). `None`: not intercepted.
    fn intercept_field(&mut self, r: &Value, name: &str) -> EResult<Option<Value>> {
        if let Value::Task(t) = r {
            return self.task_method(t.id, name, &[]).map(Some);
        }
        Ok(None)
    }

    /// Evaluator-level method intercepts (docs/rules.md §10): callable record
    /// fields, channel records, tasks. `None`: not intercepted.
    fn intercept_method(
        &mut self,
        r: &Value,
        name: &str,
        pos: &[Value],
        named: &[(String, Value)],
    ) -> EResult<Option<Value>> {
        match r {
            Value::Record(rec) => {
                if let Some(f @ (Value::Closure(_) | Value::Command(_))) = rec.get(name) {
                    let f = f.clone();
                    return self.call_value(&f, pos.to_vec(), named.to_vec()).map(Some);
                }
                if rec.len() == 1 {
                    if let Some(Value::Str(ch)) = rec.get("channel") {
                        let ch = ch.to_string();
                        return self.channel_method(&ch, name, pos, named);
                    }
                }
                Ok(None)
            }
            Value::Task(t) => self.task_method(t.id, name, pos).map(Some),
            Value::Stream(s) if name == "into" && pos.len() == 1 => {
                self.stream_into(s, &pos[0]).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn secret_call(&mut self, name: &str, args: Vec<Value>) -> EResult<Value> {
        if name != "get" {
            return Err(
                ShoalError::field_missing(format!("unknown member `secret.{name}`")).into(),
            );
        }
        let key = match args.first() {
            Some(Value::Str(s)) => s.to_string(),
            Some(other) => {
                return Err(ShoalError::type_error(format!(
                    "secret.get expects a name, found {}",
                    other.type_name()
                ))
                .into())
            }
            None => return Err(ShoalError::arg_error("secret.get requires a name").into()),
        };
        Err(ShoalError::not_found(format!("unknown secret `{key}`"))
            .with_hint("no secret store is configured")
            .into())
    }

    fn eval_with(
        &mut self,
        cwd: &Option<Box<Expr>>,
        env: &Option<Box<Expr>>,
        reef: &Option<Box<Expr>>,
        body: &crate::ast::Block,
        scope: &ScopeRef,
    ) -> EResult<Value> {
        let new_cwd = match cwd {
            Some(e) => {
                let v = self.eval_expr(e, scope, Pos::Value)?;
                let p = match &v {
                    Value::Str(s) => std::path::PathBuf::from(s.as_ref()),
                    Value::Path(p) => p.as_ref().clone(),
                    other => {
                        return Err(ShoalError::type_error(format!(
                            "with cwd: expects a str or path, found {}",
                            other.type_name()
                        ))
                        .into())
                    }
                };
                let abs = crate::shell::builtins::normalize(&self.resolve_path(&p));
                if !abs.is_dir() {
                    return Err(ShoalError::arg_error(format!(
                        "with cwd: {} is not a directory",
                        p.display()
                    ))
                    .into());
                }
                Some(abs)
            }
            None => None,
        };
        let overlay = match env {
            Some(e) => {
                let v = self.eval_expr(e, scope, Pos::Value)?;
                match &v {
                    Value::Record(r) => {
                        let mut out = Vec::new();
                        for (k, v) in r.iter() {
                            let s = match v {
                                Value::Null => None,
                                other => Some(
                                    crate::eval::argv_string(other)?
                                        .to_string_lossy()
                                        .into_owned(),
                                ),
                            };
                            out.push((k.to_string(), s));
                        }
                        Some(out)
                    }
                    other => {
                        return Err(ShoalError::type_error(format!(
                            "with env: expects a record, found {}",
                            other.type_name()
                        ))
                        .into())
                    }
                }
            }
            None => None,
        };
        let reef_scope = match reef {
            Some(e) => match &self.eval_expr(e, scope, Pos::Value)? {
                Value::Record(r) => {
                    let mut out = Vec::new();
                    for (k, v) in r.iter() {
                        let c = match v {
                            Value::Str(s) => s.to_string(),
                            other => render::display(other),
                        };
                        out.push((k.to_string(), c));
                    }
                    Some(out)
                }
                other => {
                    return Err(ShoalError::type_error(format!(
                        "with reef: expects a record, found {}",
                        other.type_name()
                    ))
                    .into())
                }
            },
            None => None,
        };
        let saved_cwd = self.cwd.clone();
        let saved_env = self.env.clone();
        if let Some(c) = new_cwd {
            self.cwd = c;
        }
        if let Some(ov) = overlay {
            for (k, v) in ov {
                match v {
                    Some(s) => {
                        self.env_own.insert(k.clone());
                        self.env.insert(k, s);
                    }
                    None => {
                        self.env.shift_remove(&k);
                    }
                }
            }
        }
        let pushed = reef_scope.is_some();
        if let Some(rs) = reef_scope {
            self.reef_stack.push(rs);
        }
        let r = self.eval_block(body, scope, Pos::Value);
        if pushed {
            self.reef_stack.pop();
        }
        self.cwd = saved_cwd;
        self.env = saved_env;
        r
    }
}

pub(crate) fn make_regex(src: &str) -> Result<Value, ShoalError> {
    match regex::Regex::new(src) {
        Ok(re) => Ok(Value::Regex(Arc::new(RegexVal {
            source: src.to_string(),
            re,
        }))),
        Err(e) => Err(ShoalError::arg_error(format!("invalid regex `{src}`: {e}"))),
    }
}

pub(crate) fn now_value() -> Value {
    Value::DateTime(Arc::new(datetime::now()))
}

pub(crate) fn today_value() -> Value {
    Value::DateTime(Arc::new(datetime::today()))
}

/// `v[i]` (docs/rules.md §4).
pub(crate) fn index_value(recv: &Value, idx: &Value) -> Result<Value, ShoalError> {
    if let Value::Outcome(_) = recv {
        return Err(ShoalError::type_error("cannot index an outcome")
            .with_hint("index its result: `.out[i]`"));
    }
    ops::index(recv, idx)
}
