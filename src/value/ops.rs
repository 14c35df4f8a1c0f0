//! Operators (language.md §6). OWNER: values helper.
use std::cmp::Ordering;

use crate::lang::ast::{BinOp, UnOp};
use crate::value::{SResult, Value};

/// Arithmetic, comparison, membership (`+ - * / % == != < <= > >= in`). `&&`,
/// `||`, `??` short-circuit and are evaluated by the evaluator, not here.
pub fn binary(op: BinOp, a: &Value, b: &Value) -> SResult<Value> {
    let _ = (op, a, b);
    todo!()
}
pub fn unary(op: UnOp, v: &Value) -> SResult<Value> {
    let _ = (op, v);
    todo!()
}
/// Structural equality (§6.4). Never errors.
pub fn equals(a: &Value, b: &Value) -> bool {
    let _ = (a, b);
    todo!()
}
/// Ordering (§6.3); `type_error` for incomparable pairs.
pub fn compare(a: &Value, b: &Value) -> SResult<Ordering> {
    let _ = (a, b);
    todo!()
}
/// A condition (§6.7): bool, or an outcome's `ok`; else `type_error`.
pub fn truth(v: &Value) -> SResult<bool> {
    let _ = v;
    todo!()
}
