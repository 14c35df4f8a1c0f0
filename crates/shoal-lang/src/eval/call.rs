//! Calls (docs/rules.md §4: call resolution and binding; §9: special call
//! forms and constructors).

use std::sync::Arc;
use std::time::Duration;

use crate::ast::{Arg, Expr, ExprKind, FnBody, FnDef, TypeAnn};
use crate::eval::command::CArg;
use crate::eval::expr::{make_regex, now_value, today_value};
use crate::eval::{Ctl, EResult, Interp, Pos, MAX_DEPTH};
use crate::scope::{closure, command, Closure, Scope, ScopeRef};
use shoal_value::{methods, ops, Args, ErrorCode, GlobVal, RangeVal, Record, ShoalError, Value};

/// Names handled as special call forms (docs/rules.md §4), before any binding.
const SPECIAL_FORMS: &[&str] = &[
    "parallel", "retry", "on", "now", "today", "assert", "run", "save", "open",
];
/// Constructors (docs/rules.md §4), after special forms.
const CONSTRUCTORS: &[&str] = &[
    "path", "glob", "regex", "range", "channel", "every", "watch", "tail",
];

fn plural(n: usize) -> &'static str {
    if n == 1 {
        "argument"
    } else {
        "arguments"
    }
}

impl Interp {
    pub(crate) fn eval_call(
        &mut self,
        callee: &Expr,
        args: &[Arg],
        scope: &ScopeRef,
        pos: Pos,
    ) -> EResult<Value> {
        if let ExprKind::Ident(name) = &callee.kind {
            if SPECIAL_FORMS.contains(&name.as_str()) || CONSTRUCTORS.contains(&name.as_str()) {
                let (p, n) = self.eval_args(args, scope)?;
                return self.special_call(name, p, n, scope, pos);
            }
            if let Some(v) = scope.lookup(name) {
                let (p, n) = self.eval_args(args, scope)?;
                return self.call_value(&v, p, n);
            }
            if name == "task" {
                // `task(N)`: the session's task:N (a binding named `task` wins).
                let (p, n) = self.eval_args(args, scope)?;
                return self.task_by_number(p, n);
            }
            if name == "out" {
                // `out:N` (the parser's form of it) or `out(N)`.
                let (p, n) = self.eval_args(args, scope)?;
                return self.transcript_value(p, n);
            }
            if self.is_command_name(name, scope) {
                let (p, n) = self.eval_args(args, scope)?;
                let mut cargs: Vec<CArg> = p.into_iter().map(CArg::Val).collect();
                for (k, v) in n {
                    cargs.push(CArg::Long {
                        text: k.replace('_', "-"),
                        name: k,
                        value: Some(v),
                    });
                }
                return self.run_named_command(name, cargs, scope, pos);
            }
            let mut e = ShoalError::new(
                ErrorCode::UndefinedVar,
                format!("undefined function `{name}`"),
            );
            if let Some(h) = self.did_you_mean(name, scope) {
                e = e.with_hint(h);
            }
            return Err(e.into());
        }
        let f = self.eval_expr(callee, scope, Pos::Value)?;
        let (p, n) = self.eval_args(args, scope)?;
        self.call_value(&f, p, n)
    }

    /// `out:N`: the session's transcript value N.
    fn transcript_value(&mut self, pos: Vec<Value>, named: Vec<(String, Value)>) -> EResult<Value> {
        let n = match pos.as_slice() {
            [Value::Int(n)] if *n > 0 && named.is_empty() => *n as u64,
            _ => {
                return Err(
                    ShoalError::arg_error("out:N takes a transcript number N >= 1")
                        .with_hint("write out:3 for the value stored as out:3")
                        .into(),
                )
            }
        };
        let Some(lookup) = self.transcript.clone() else {
            return Err(ShoalError::new(
                ErrorCode::UndefinedVar,
                format!("out:{n}: this evaluation has no transcript"),
            )
            .with_hint("out:N reads the values of a daemon session (shoal_exec)")
            .into());
        };
        lookup(n).map_err(|m| {
            ShoalError::new(ErrorCode::UndefinedVar, m)
                .with_hint(format!(
                    "shoal_get {{\"ref\":\"out:{n}\"}} reads stored values too"
                ))
                .into()
        })
    }

    /// Call a callable value with evaluated arguments.
    pub(crate) fn call_value(
        &mut self,
        f: &Value,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        match f {
            Value::Closure(c) => self.call_closure(&closure(c), pos, named),
            Value::Command(cmd) => {
                let mut cargs: Vec<CArg> = pos.into_iter().map(CArg::Val).collect();
                for (k, v) in named {
                    cargs.push(CArg::Long {
                        text: k.replace('_', "-"),
                        name: k,
                        value: Some(v),
                    });
                }
                let scope = self.globals.clone();
                self.run_alias(&command(cmd), cargs, &scope, Pos::Value)
            }
            other => Err(ShoalError::type_error(format!(
                "cannot call a value of type {}",
                other.type_name()
            ))
            .into()),
        }
    }

    pub(crate) fn call_closure(
        &mut self,
        c: &Arc<Closure>,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        self.check_cancel()?;
        if self.depth >= MAX_DEPTH {
            return Err(ShoalError::new(
                ErrorCode::RecursionLimit,
                format!("maximum call depth of {MAX_DEPTH} exceeded"),
            )
            .into());
        }
        self.check_stack()?;
        let def = &c.def;
        // Fast path: the common call `f(x, y)` (positional arguments for
        // exactly the declared parameters, no defaults needed, no rest, no
        // `list<T>` coercion) binds into the fresh frame without locking.
        let simple = self.fast_paths
            && named.is_empty()
            && def.rest.is_none()
            && pos.len() == def.params.len();
        if simple
            && def
                .params
                .iter()
                .all(|p| list_elem(p.ty.as_ref()).is_none())
        {
            let fscope = Scope::child_from_pool_with(&mut self.scope_pool, &c.env, def, pos);
            return self.run_frame(c, fscope);
        }
        let fscope = Scope::child_from_pool(&mut self.scope_pool, &c.env);
        self.depth += 1;
        self.fn_depth += 1;
        let r = match self.bind_params(def, &fscope, pos, named) {
            Ok(()) => self.eval_body(def, &fscope),
            Err(e) => Err(e),
        };
        self.depth -= 1;
        self.fn_depth -= 1;
        self.recycle_frame(c, fscope);
        Self::finish_call(r)
    }

    /// `call_closure` with one positional argument, without an argument vector.
    pub(crate) fn call_closure1(&mut self, c: &Arc<Closure>, arg: Value) -> EResult<Value> {
        let def = &c.def;
        let simple = self.fast_paths
            && def.params.len() == 1
            && def.rest.is_none()
            && list_elem(def.params[0].ty.as_ref()).is_none();
        if !simple {
            return self.call_closure(c, vec![arg], Vec::new());
        }
        self.check_cancel()?;
        if self.depth >= MAX_DEPTH {
            return Err(ShoalError::new(
                ErrorCode::RecursionLimit,
                format!("maximum call depth of {MAX_DEPTH} exceeded"),
            )
            .into());
        }
        self.check_stack()?;
        let fscope = Scope::child_from_pool_with1(&mut self.scope_pool, &c.env, def, arg);
        self.run_frame(c, fscope)
    }

    /// Evaluate the body of `c` in its bound frame, then recycle the frame.
    #[inline]
    fn run_frame(&mut self, c: &Closure, fscope: ScopeRef) -> EResult<Value> {
        self.depth += 1;
        self.fn_depth += 1;
        let r = self.eval_body(&c.def, &fscope);
        self.depth -= 1;
        self.fn_depth -= 1;
        self.recycle_frame(c, fscope);
        Self::finish_call(r)
    }

    /// Pool a finished frame. A frame of a closure defined at the top level
    /// keeps its parent (the globals, alive as long as this evaluator).
    #[inline]
    fn recycle_frame(&mut self, c: &Closure, fscope: ScopeRef) {
        let keep_parent = Arc::ptr_eq(&c.env, &self.globals);
        Scope::recycle(&mut self.scope_pool, fscope, keep_parent);
    }

    fn eval_body(&mut self, def: &FnDef, fscope: &ScopeRef) -> EResult<Value> {
        match &def.body {
            FnBody::Block(b) => self.eval_stmts_in(&b.stmts, fscope, Pos::Value),
            FnBody::Expr(e) => self.eval_expr(e, fscope, Pos::Value),
        }
    }

    #[inline]
    fn finish_call(r: EResult<Value>) -> EResult<Value> {
        match r {
            Ok(v) => Ok(v),
            Err(c) => Self::finish_ctl(c),
        }
    }

    #[cold]
    #[inline(never)]
    fn finish_ctl(c: Ctl) -> EResult<Value> {
        match c {
            Ctl::Return(v) => Ok(v),
            Ctl::Break => Err(ShoalError::custom("`break` outside a loop").into()),
            Ctl::Continue => Err(ShoalError::custom("`continue` outside a loop").into()),
            other => Err(other),
        }
    }

    /// docs/rules.md §4: named by name, else positional by index, else
    /// default, else `missing argument`.
    fn bind_params(
        &mut self,
        def: &FnDef,
        fscope: &ScopeRef,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<()> {
        for (k, _) in &named {
            let known = def.params.iter().any(|p| &p.name == k)
                || def.rest.as_ref().is_some_and(|r| &r.name == k);
            if !known {
                return Err(ShoalError::arg_error(format!("unknown argument `{k}`")).into());
            }
        }
        let np = def.params.len();
        if pos.len() > np && def.rest.is_none() {
            return Err(ShoalError::arg_error(format!(
                "expected {np} {}, got {}",
                plural(np),
                pos.len()
            ))
            .into());
        }
        let mut pos_iter = pos.into_iter();
        let mut positional: Vec<Option<Value>> = Vec::with_capacity(np);
        for _ in 0..np {
            positional.push(pos_iter.next());
        }
        let surplus: Vec<Value> = pos_iter.collect();
        for (i, p) in def.params.iter().enumerate() {
            let v = if let Some((_, v)) = named.iter().rev().find(|(k, _)| k == &p.name) {
                v.clone()
            } else if let Some(v) = positional[i].take() {
                v
            } else if let Some(d) = &p.default {
                self.eval_expr(d, fscope, Pos::Value)?
            } else {
                return Err(ShoalError::arg_error(format!("missing argument `{}`", p.name)).into());
            };
            let v = coerce_list_param(v, p.ty.as_ref(), &self.cwd)?;
            fscope.define(&p.name, v, false, true);
        }
        if let Some(rest) = &def.rest {
            let mut items = surplus;
            if let Some((_, v)) = named.iter().find(|(k, _)| k == &rest.name) {
                items.push(v.clone());
            }
            let elem = rest_elem_type(rest.ty.as_ref());
            if let Some(t) = elem {
                let mut out = Vec::with_capacity(items.len());
                for it in items {
                    out.push(coerce_elem(it, t, &self.cwd)?);
                }
                items = out;
            }
            fscope.define(&rest.name, Value::list(items), false, true);
        }
        Ok(())
    }

    /// Special call forms and constructors (docs/rules.md §9).
    fn special_call(
        &mut self,
        name: &str,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
        scope: &ScopeRef,
        p: Pos,
    ) -> EResult<Value> {
        let no_named = |named: &Vec<(String, Value)>| -> Result<(), ShoalError> {
            match named.first() {
                Some((k, _)) => Err(ShoalError::arg_error(format!(
                    "{name}: unknown argument `{k}`"
                ))),
                None => Ok(()),
            }
        };
        match name {
            "now" | "today" => {
                no_named(&named)?;
                if !pos.is_empty() {
                    return Err(
                        ShoalError::arg_error(format!("{name}() takes no arguments")).into(),
                    );
                }
                Ok(if name == "now" {
                    now_value()
                } else {
                    today_value()
                })
            }
            "assert" => {
                no_named(&named)?;
                self.assert_values(pos)
            }
            "run" => {
                no_named(&named)?;
                let mut it = pos.into_iter();
                let target = match &it.next() {
                    Some(Value::Str(s)) => s.to_string(),
                    Some(Value::Path(p)) => p.to_string_lossy().into_owned(),
                    Some(other) => {
                        return Err(ShoalError::type_error(format!(
                            "run: expected a target name or path, found {}",
                            other.type_name()
                        ))
                        .into())
                    }
                    None => return Err(ShoalError::arg_error("run: expected a target").into()),
                };
                let rest: Vec<CArg> = it.map(CArg::Val).collect();
                self.run_target(&target, rest, scope, p)
            }
            "save" => {
                no_named(&named)?;
                if pos.len() != 2 {
                    return Err(ShoalError::arg_error(format!(
                        "save expects a path and a value, got {} arguments",
                        pos.len()
                    ))
                    .into());
                }
                let path = pos[0].clone();
                let value = pos[1].clone();
                methods::call_method(
                    self,
                    &value,
                    "save",
                    Args {
                        pos: vec![path],
                        named: vec![],
                    },
                )
                .map_err(|e| self.lift(e))?;
                Ok(value)
            }
            "open" => {
                if pos.len() != 1 {
                    return Err(ShoalError::arg_error("open expects one path").into());
                }
                Ok(Value::Null)
            }
            "retry" => self.retry(pos, named),
            "parallel" => self.parallel(pos, named),
            "on" => self.on_channel(pos, named),
            "path" => {
                no_named(&named)?;
                if pos.len() != 1 {
                    return Err(ShoalError::arg_error(format!(
                        "path expects exactly one argument, got {}",
                        pos.len()
                    ))
                    .into());
                }
                match &pos[0] {
                    Value::Str(s) => Ok(Value::path(s.as_ref())),
                    Value::Path(p) => Ok(Value::Path(p.clone())),
                    other => Err(ShoalError::type_error(format!(
                        "path expects a str, found {}",
                        other.type_name()
                    ))
                    .into()),
                }
            }
            "glob" => {
                let pattern = match pos.first() {
                    Some(Value::Str(s)) => s.to_string(),
                    Some(Value::Glob(g)) => g.pattern.clone(),
                    Some(other) => {
                        return Err(ShoalError::type_error(format!(
                            "glob expects a str pattern, found {}",
                            other.type_name()
                        ))
                        .into())
                    }
                    None => return Err(ShoalError::arg_error("glob expects a pattern").into()),
                };
                if pos.len() > 1 {
                    return Err(ShoalError::arg_error("glob expects one pattern").into());
                }
                let mut hidden = false;
                for (k, v) in &named {
                    match (k.as_str(), v) {
                        ("hidden", Value::Bool(b)) => hidden = *b,
                        ("follow", Value::Bool(_)) => {}
                        ("hidden" | "follow", other) => {
                            return Err(ShoalError::type_error(format!(
                                "glob: `{k}` must be a bool, found {}",
                                other.type_name()
                            ))
                            .into())
                        }
                        _ => {
                            return Err(ShoalError::arg_error(format!(
                                "glob: unknown argument `{k}`"
                            ))
                            .into())
                        }
                    }
                }
                Ok(Value::Glob(Arc::new(GlobVal {
                    pattern,
                    cwd: self.cwd.clone(),
                    hidden,
                })))
            }
            "regex" => {
                no_named(&named)?;
                match pos.as_slice() {
                    [Value::Str(s)] => Ok(make_regex(s)?),
                    [Value::Regex(r)] => Ok(Value::Regex(r.clone())),
                    [other] => Err(ShoalError::type_error(format!(
                        "regex expects a str, found {}",
                        other.type_name()
                    ))
                    .into()),
                    _ => Err(ShoalError::arg_error("regex expects exactly one pattern").into()),
                }
            }
            "range" => {
                // `range(end)`, `range(start, end)`: the half-open int range
                // `start..end`, as an agent writes it in most languages.
                no_named(&named)?;
                let (start, end) = match pos.as_slice() {
                    [Value::Int(e)] => (0, *e),
                    [Value::Int(s), Value::Int(e)] => (*s, *e),
                    [_] | [_, _] => {
                        let found: Vec<&str> = pos.iter().map(Value::type_name).collect();
                        return Err(ShoalError::type_error(format!(
                            "range expects int bounds, found {}",
                            found.join(", ")
                        ))
                        .into());
                    }
                    _ => {
                        return Err(ShoalError::arg_error(format!(
                            "range expects 1 or 2 arguments (end, or start and end), got {}",
                            pos.len()
                        ))
                        .into())
                    }
                };
                Ok(Value::Range(RangeVal {
                    start,
                    end,
                    inclusive: false,
                }))
            }
            "channel" => {
                no_named(&named)?;
                match pos.as_slice() {
                    [Value::Str(s)] => {
                        let mut r = Record::new();
                        r.insert("channel".into(), Value::Str(s.clone()));
                        Ok(Value::record(r))
                    }
                    [other] => Err(ShoalError::type_error(format!(
                        "channel expects a name, found {}",
                        other.type_name()
                    ))
                    .into()),
                    _ => Err(ShoalError::arg_error("channel expects exactly one name").into()),
                }
            }
            "every" => self.every_stream(pos),
            "tail" => self.tail_stream(pos, named),
            "watch" => self.watch_stream(pos, named),
            _ => Err(ShoalError::new(
                ErrorCode::UndefinedVar,
                format!("undefined function `{name}`"),
            )
            .into()),
        }
    }

    /// `assert(cond [, msg])` on evaluated values (docs/rules.md §9).
    pub(crate) fn assert_values(&mut self, pos: Vec<Value>) -> EResult<Value> {
        if pos.is_empty() || pos.len() > 2 {
            return Err(ShoalError::arg_error(format!(
                "assert expects a condition and an optional message, got {} arguments",
                pos.len()
            ))
            .into());
        }
        let ok = ops::truth(&pos[0]).map_err(|e| self.lift(e))?;
        let msg = match pos.get(1) {
            None => "assertion failed".to_string(),
            Some(Value::Str(s)) => s.to_string(),
            Some(other) => {
                return Err(ShoalError::type_error(format!(
                    "assert message must be a str, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        if ok {
            Ok(Value::Null)
        } else {
            Err(ShoalError::new(ErrorCode::AssertFailed, msg).into())
        }
    }

    fn retry(&mut self, pos: Vec<Value>, named: Vec<(String, Value)>) -> EResult<Value> {
        let mut delay_ns: i64 = 0;
        for (k, v) in &named {
            match (k.as_str(), v) {
                ("delay", Value::Duration(d)) => delay_ns = *d,
                ("delay", other) => {
                    return Err(ShoalError::type_error(format!(
                        "retry: delay must be a duration, found {}",
                        other.type_name()
                    ))
                    .into())
                }
                _ => {
                    return Err(
                        ShoalError::arg_error(format!("retry: unknown argument `{k}`")).into(),
                    )
                }
            }
        }
        let (n, thunk) = match pos.as_slice() {
            [Value::Int(n), f] => (*n, f.clone()),
            [Value::Int(_)] => {
                return Err(ShoalError::arg_error("retry expects a block or thunk to run").into())
            }
            [other, _] | [other] => {
                return Err(ShoalError::type_error(format!(
                    "retry: attempts must be an int, found {}",
                    other.type_name()
                ))
                .into())
            }
            _ => {
                return Err(
                    ShoalError::arg_error("retry expects an attempt count and a thunk").into(),
                )
            }
        };
        if n <= 0 {
            return Err(ShoalError::arg_error("retry: attempts must be a positive int").into());
        }
        let mut last: Option<ShoalError> = None;
        for attempt in 0..n {
            if attempt > 0 && delay_ns > 0 {
                self.sleep_interruptibly(Duration::from_nanos(delay_ns as u64))?;
            }
            match self.call_value(&thunk, vec![], vec![]) {
                Ok(v) => return Ok(v),
                Err(Ctl::Err(e)) if self.catchable(&e) => last = Some(*e),
                Err(other) => return Err(other),
            }
        }
        Err(last
            .unwrap_or_else(|| ShoalError::custom("retry: no attempts"))
            .into())
    }

    pub(crate) fn sleep_interruptibly(&self, d: Duration) -> EResult<()> {
        self.check_cancel()?;
        if self.interrupter.sleep_until(std::time::Instant::now() + d) {
            return Err(Interp::cancelled().into());
        }
        Ok(())
    }
}

/// The element type of a `list<T>` annotation.
fn list_elem(ty: Option<&TypeAnn>) -> Option<&str> {
    let t = ty?;
    if t.name == "list" {
        t.args.first().map(|a| a.name.as_str())
    } else {
        None
    }
}

/// The element type of a rest parameter: `...xs: list<int>` or `...xs: int`.
pub(crate) fn rest_elem_type(ty: Option<&TypeAnn>) -> Option<&str> {
    let t = ty?;
    if t.name == "list" {
        t.args.first().map(|a| a.name.as_str())
    } else {
        Some(t.name.as_str())
    }
}

/// A string element coerced to `T` (other values unchanged).
fn coerce_elem(v: Value, t: &str, cwd: &std::path::Path) -> Result<Value, ShoalError> {
    match &v {
        Value::Str(s) if t != "str" && t != "any" => shoal_value::coerce::coerce_word(s, t, cwd),
        _ => Ok(v),
    }
}

/// `list<T>` parameters coerce each string element to `T` (docs/rules.md §4).
fn coerce_list_param(
    v: Value,
    ty: Option<&TypeAnn>,
    cwd: &std::path::Path,
) -> Result<Value, ShoalError> {
    let Some(t) = list_elem(ty) else { return Ok(v) };
    match &v {
        Value::List(items) if items.iter().any(|x| matches!(x, Value::Str(_))) => {
            let mut out = Vec::with_capacity(items.len());
            for it in items.iter() {
                out.push(coerce_elem(it.clone(), t, cwd)?);
            }
            Ok(Value::list(out))
        }
        _ => Ok(v),
    }
}
