//! Match patterns (docs/rules.md §7).

use crate::ast::{Literal, Pattern};
use crate::eval::Interp;
use crate::scope::ScopeRef;
use shoal_value::{ops, Value};

/// Type names a `TYPE name` pattern may test.
const TYPE_NAMES: &[&str] = &[
    "null", "bool", "int", "float", "str", "path", "glob", "regex", "size", "duration", "datetime",
    "time", "bytes", "list", "record", "table", "range", "stream", "error", "outcome", "task",
    "closure", "command", "secret",
];

impl Interp {
    /// Does `v` match `pat`? Binders are defined in `scope` (a fresh child
    /// scope per arm attempt).
    pub(crate) fn match_pattern(&mut self, pat: &Pattern, v: &Value, scope: &ScopeRef) -> bool {
        match pat {
            Pattern::Wildcard => true,
            Pattern::Bind(name) => {
                if name == "null" {
                    // docs/rules.md §3: treated as the null literal.
                    return matches!(v, Value::Null);
                }
                if name != "_" {
                    scope.define(name, v.clone(), false, true);
                }
                true
            }
            Pattern::Literal(l) => {
                let lit = match l {
                    Literal::Null => Value::Null,
                    Literal::Bool(b) => Value::Bool(*b),
                    Literal::Int(i) => Value::Int(*i),
                    Literal::Float(f) => Value::Float(*f),
                    Literal::Str(s) => Value::str(s),
                    other => match self.literal(other) {
                        Ok(v) => v,
                        Err(_) => return false,
                    },
                };
                ops::equals(&lit, v)
            }
            Pattern::Range {
                start,
                end,
                inclusive,
            } => {
                let x = match v {
                    Value::Int(i) => *i as f64,
                    Value::Float(f) => *f,
                    _ => return false,
                };
                let (s, e) = (*start as f64, *end as f64);
                x >= s && if *inclusive { x <= e } else { x < e }
            }
            Pattern::Type { ty, bind } => {
                let ok = if TYPE_NAMES.contains(&ty.as_str()) {
                    v.type_name() == ty
                } else {
                    false
                };
                if ok {
                    if let Some(b) = bind {
                        if b != "_" {
                            scope.define(b, v.clone(), false, true);
                        }
                    }
                }
                ok
            }
            Pattern::Record(fields) => {
                let Value::Record(r) = v else { return false };
                for (k, sub) in fields {
                    let Some(fv) = r.get(k.as_str()) else {
                        return false;
                    };
                    match sub {
                        None => scope.define(k, fv.clone(), false, true),
                        Some(p) => {
                            if !self.match_pattern(p, fv, scope) {
                                return false;
                            }
                        }
                    }
                }
                true
            }
            Pattern::List { items, rest } => {
                let Value::List(l) = v else { return false };
                match rest {
                    None if l.len() != items.len() => return false,
                    Some(_) if l.len() < items.len() => return false,
                    _ => {}
                }
                for (p, x) in items.iter().zip(l.iter()) {
                    if !self.match_pattern(p, x, scope) {
                        return false;
                    }
                }
                if let Some(Some(name)) = rest {
                    if name != "_" {
                        scope.define(name, Value::list(l[items.len()..].to_vec()), false, true);
                    }
                }
                true
            }
        }
    }
}
