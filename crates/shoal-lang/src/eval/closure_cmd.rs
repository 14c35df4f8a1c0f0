//! Calling a closure in command form (docs/rules.md §8): binding flags and positional
//! words to its parameters and coercing them to the declared types, plus the signature
//! text shown in its errors. It never spawns a process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::args::*;
use crate::ast::RedirectKind;
use crate::eval::call::rest_elem_type;
use crate::eval::{EResult, Interp};
use crate::scope::Closure;
use shoal_value::{GlobVal, ShoalError, Value};

impl Interp {
    /// Calling a closure in command form (docs/rules.md §8).
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
                            *v = shoal_value::coerce::coerce_word(s, et, &self.cwd)?;
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

pub(super) fn type_text(t: &crate::ast::TypeAnn) -> String {
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
pub(super) fn signature(def: &crate::ast::FnDef) -> String {
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

/// Coerce a command-form argument to a parameter type (docs/rules.md §8).
pub(super) fn coerce_cmd_value(
    v: Value,
    t: &crate::ast::TypeAnn,
    cwd: &Path,
) -> Result<Value, ShoalError> {
    if t.name == "list" {
        let elem = t.args.first().map(|a| a.name.as_str());
        return Ok(match &v {
            Value::Str(s) => Value::list(vec![match elem {
                Some(e) if e != "str" => shoal_value::coerce::coerce_word(s, e, cwd)?,
                _ => v.clone(),
            }]),
            _ => v,
        });
    }
    match &v {
        Value::Str(s) => shoal_value::coerce::coerce_word(s, &t.name, cwd),
        _ => Ok(v),
    }
}
