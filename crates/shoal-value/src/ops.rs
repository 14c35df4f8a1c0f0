//! Operators (docs/rules.md §5).
use std::cmp::Ordering;
use std::sync::Arc;

use crate::code::{BinOp, UnOp};
use crate::{render, Record, SResult, ShoalError, Value};

fn cannot(op: &str, a: &Value, b: &Value) -> ShoalError {
    ShoalError::type_error(format!(
        "cannot apply `{op}` to {} and {}",
        a.type_name(),
        b.type_name()
    ))
}

fn int_overflow() -> ShoalError {
    ShoalError::overflow("integer overflow")
}
fn size_overflow() -> ShoalError {
    ShoalError::overflow("size overflow")
}
fn dur_overflow() -> ShoalError {
    ShoalError::overflow("duration overflow")
}
fn dt_overflow() -> ShoalError {
    ShoalError::overflow("datetime overflow")
}

/// Arithmetic, comparison, membership (`+ - * / % == != < <= > >= in`). `&&`,
/// `||`, `??` short-circuit and are evaluated by the evaluator, not here.
pub fn binary(op: BinOp, a: &Value, b: &Value) -> SResult<Value> {
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => arith(op, a, b),
        BinOp::Eq => Ok(Value::Bool(equals(a, b))),
        BinOp::Ne => Ok(Value::Bool(!equals(a, b))),
        BinOp::Lt => Ok(Value::Bool(compare(a, b)? == Ordering::Less)),
        BinOp::Le => Ok(Value::Bool(compare(a, b)? != Ordering::Greater)),
        BinOp::Gt => Ok(Value::Bool(compare(a, b)? == Ordering::Greater)),
        BinOp::Ge => Ok(Value::Bool(compare(a, b)? != Ordering::Less)),
        BinOp::In => Ok(Value::Bool(contains(b, a)?)),
        BinOp::And | BinOp::Or | BinOp::Coalesce => Err(ShoalError::type_error(format!(
            "operator `{}` is evaluated by the evaluator",
            op.symbol()
        ))),
    }
}

/// [`binary`] on two ints when it succeeds: `None` when the operator is not
/// an int arithmetic or comparison operator, or the result is an error
/// (overflow, zero divisor), so the caller falls back to [`binary`], which
/// reports it. Same results as [`binary`] otherwise.
#[inline(always)]
pub fn binary_int(op: BinOp, x: i64, y: i64) -> Option<Value> {
    Some(match op {
        BinOp::Add => Value::Int(x.checked_add(y)?),
        BinOp::Sub => Value::Int(x.checked_sub(y)?),
        BinOp::Mul => Value::Int(x.checked_mul(y)?),
        BinOp::Div if y != 0 => Value::Int(x.checked_div(y)?),
        // `i64::MIN % -1` is 0, as in `arith`.
        BinOp::Rem if y != 0 => Value::Int(x.checked_rem(y).unwrap_or(0)),
        BinOp::Eq => Value::Bool(x == y),
        BinOp::Ne => Value::Bool(x != y),
        BinOp::Lt => Value::Bool(x < y),
        BinOp::Le => Value::Bool(x <= y),
        BinOp::Gt => Value::Bool(x > y),
        BinOp::Ge => Value::Bool(x >= y),
        _ => return None,
    })
}

fn float_op(op: BinOp, x: f64, y: f64) -> f64 {
    match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        _ => x % y,
    }
}

fn size_from_f64(f: f64) -> SResult<u64> {
    if f.is_nan() || f.is_infinite() {
        return Err(size_overflow());
    }
    if f < 0.0 {
        return Err(ShoalError::type_error("size cannot be negative"));
    }
    let r = f.round();
    if r >= 18_446_744_073_709_551_615.0 {
        return Err(size_overflow());
    }
    Ok(r as u64)
}

fn dur_from_f64(f: f64) -> SResult<i64> {
    if !f.is_finite() {
        return Err(dur_overflow());
    }
    let r = f.round();
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_807.0).contains(&r) {
        return Err(dur_overflow());
    }
    Ok(r as i64)
}

fn arith(op: BinOp, a: &Value, b: &Value) -> SResult<Value> {
    use Value::*;
    let sym = op.symbol();
    match (a, b) {
        (Int(x), Int(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                BinOp::Add => x.checked_add(y).ok_or_else(int_overflow)?,
                BinOp::Sub => x.checked_sub(y).ok_or_else(int_overflow)?,
                BinOp::Mul => x.checked_mul(y).ok_or_else(int_overflow)?,
                BinOp::Div => {
                    if y == 0 {
                        return Err(ShoalError::div_zero());
                    }
                    x.checked_div(y).ok_or_else(int_overflow)?
                }
                _ => {
                    if y == 0 {
                        return Err(ShoalError::div_zero());
                    }
                    x.checked_rem(y).unwrap_or(0)
                }
            };
            Ok(Int(r))
        }
        (Int(x), Float(y)) => Ok(Float(float_op(op, *x as f64, *y))),
        (Float(x), Int(y)) => Ok(Float(float_op(op, *x, *y as f64))),
        (Float(x), Float(y)) => Ok(Float(float_op(op, *x, *y))),
        (Str(x), Str(y)) if op == BinOp::Add => {
            let mut s = String::with_capacity(x.len() + y.len());
            s.push_str(x);
            s.push_str(y);
            Ok(Value::str(s))
        }
        (List(x), List(y)) if op == BinOp::Add => {
            let mut v = Vec::with_capacity(x.len() + y.len());
            v.extend(x.iter().cloned());
            v.extend(y.iter().cloned());
            Ok(Value::list(v))
        }
        (Size(x), Size(y)) => match op {
            BinOp::Add => Ok(Size(x.checked_add(*y).ok_or_else(size_overflow)?)),
            BinOp::Sub => {
                if y > x {
                    Err(ShoalError::type_error("size cannot go negative"))
                } else {
                    Ok(Size(x - y))
                }
            }
            BinOp::Div => {
                if *y == 0 {
                    Err(ShoalError::div_zero())
                } else {
                    Ok(Float(*x as f64 / *y as f64))
                }
            }
            _ => Err(cannot(sym, a, b)),
        },
        (Size(s), Int(n)) | (Int(n), Size(s)) if op == BinOp::Mul => {
            if *n < 0 {
                return Err(ShoalError::type_error("size cannot be negative"));
            }
            Ok(Size(s.checked_mul(*n as u64).ok_or_else(size_overflow)?))
        }
        (Size(s), Int(n)) if op == BinOp::Div => {
            if *n == 0 {
                return Err(ShoalError::div_zero());
            }
            if *n < 0 {
                return Err(ShoalError::type_error(
                    "size cannot be divided by a negative number",
                ));
            }
            Ok(Size(s / *n as u64))
        }
        (Size(s), Float(f)) | (Float(f), Size(s)) if op == BinOp::Mul => {
            if *f < 0.0 {
                return Err(ShoalError::type_error("size cannot be negative"));
            }
            Ok(Size(size_from_f64(*s as f64 * f)?))
        }
        (Duration(x), Duration(y)) => match op {
            BinOp::Add => Ok(Duration(x.checked_add(*y).ok_or_else(dur_overflow)?)),
            BinOp::Sub => Ok(Duration(x.checked_sub(*y).ok_or_else(dur_overflow)?)),
            BinOp::Div => {
                if *y == 0 {
                    Err(ShoalError::div_zero())
                } else {
                    Ok(Float(*x as f64 / *y as f64))
                }
            }
            _ => Err(cannot(sym, a, b)),
        },
        (Duration(d), Int(n)) | (Int(n), Duration(d)) if op == BinOp::Mul => {
            Ok(Duration(d.checked_mul(*n).ok_or_else(dur_overflow)?))
        }
        (Duration(d), Int(n)) if op == BinOp::Div => {
            if *n == 0 {
                return Err(ShoalError::div_zero());
            }
            Ok(Duration(d.checked_div(*n).ok_or_else(dur_overflow)?))
        }
        (Duration(d), Float(f)) | (Float(f), Duration(d)) if op == BinOp::Mul => {
            Ok(Duration(dur_from_f64(*d as f64 * f)?))
        }
        (DateTime(t), Duration(d)) if op == BinOp::Add || op == BinOp::Sub => {
            let d = if op == BinOp::Sub {
                d.checked_neg().ok_or_else(dt_overflow)?
            } else {
                *d
            };
            Ok(DateTime(Arc::new(dt_add(t, d)?)))
        }
        (Duration(d), DateTime(t)) if op == BinOp::Add => Ok(DateTime(Arc::new(dt_add(t, *d)?))),
        (DateTime(x), DateTime(y)) if op == BinOp::Sub => {
            let nx = x.timestamp().as_nanosecond();
            let ny = y.timestamp().as_nanosecond();
            let d = nx.checked_sub(ny).ok_or_else(dur_overflow)?;
            let d: i64 = d.try_into().map_err(|_| dur_overflow())?;
            Ok(Duration(d))
        }
        _ => Err(cannot(sym, a, b)),
    }
}

/// `datetime + nanoseconds`, checked.
pub fn dt_add(t: &jiff::Zoned, ns: i64) -> SResult<jiff::Zoned> {
    let span = jiff::SignedDuration::from_nanos(ns);
    t.checked_add(span).map_err(|_| dt_overflow())
}

pub fn unary(op: UnOp, v: &Value) -> SResult<Value> {
    match op {
        UnOp::Not => Ok(Value::Bool(!truth(v)?)),
        UnOp::Neg => match v {
            Value::Int(i) => Ok(Value::Int(i.checked_neg().ok_or_else(int_overflow)?)),
            Value::Float(f) => Ok(Value::Float(-f)),
            Value::Duration(d) => Ok(Value::Duration(d.checked_neg().ok_or_else(dur_overflow)?)),
            other => Err(ShoalError::type_error(format!(
                "cannot negate {}",
                other.type_name()
            ))),
        },
    }
}

fn records_equal(a: &Record, b: &Record) -> bool {
    let mut todo = Vec::new();
    push_records(a, b, &mut todo) && drain_equal(todo)
}

/// Queue the field pairs of two records; `false` if their key sets differ.
fn push_records<'a>(a: &'a Record, b: &'a Record, todo: &mut Vec<(&'a Value, &'a Value)>) -> bool {
    a.len() == b.len()
        && a.iter().all(|(k, v)| match b.get(k) {
            Some(w) => {
                todo.push((v, w));
                true
            }
            None => false,
        })
}

/// Structural equality (docs/rules.md §5). Never errors, and never recurses: nested
/// pairs wait on an explicit stack, so values of any depth compare.
pub fn equals(a: &Value, b: &Value) -> bool {
    drain_equal(vec![(a, b)])
}

fn drain_equal<'a>(mut todo: Vec<(&'a Value, &'a Value)>) -> bool {
    while let Some((a, b)) = todo.pop() {
        if !equal_step(a, b, &mut todo) {
            return false;
        }
    }
    true
}

/// Compare `a` and `b` one level deep; the pairs of their children are
/// pushed on `todo`.
fn equal_step<'a>(a: &'a Value, b: &'a Value, todo: &mut Vec<(&'a Value, &'a Value)>) -> bool {
    use Value::*;
    match (a, b) {
        (Null, Null) => true,
        (Bool(x), Bool(y)) => x == y,
        (Int(x), Int(y)) => x == y,
        (Float(x), Float(y)) => x == y,
        (Int(x), Float(y)) | (Float(y), Int(x)) => (*x as f64) == *y && (*y as i128) == *x as i128,
        (Str(x), Str(y)) => x == y,
        (Path(x), Path(y)) => x == y,
        (Path(p), Str(s)) | (Str(s), Path(p)) => p.to_string_lossy() == **s,
        (Glob(x), Glob(y)) => x.pattern == y.pattern,
        (Regex(x), Regex(y)) => x.source == y.source,
        (Size(x), Size(y)) => x == y,
        (Duration(x), Duration(y)) => x == y,
        (DateTime(x), DateTime(y)) => x.timestamp() == y.timestamp(),
        (Time(x), Time(y)) => x == y,
        (Bytes(x), Bytes(y)) => x == y,
        (List(x), List(y)) => {
            if Arc::ptr_eq(x, y) {
                return true;
            }
            if x.len() != y.len() {
                return false;
            }
            for (p, q) in x.iter().zip(y.iter()) {
                // Leaves compare in place; only nesting pairs wait on the stack.
                if crate::nests(p) || crate::nests(q) {
                    todo.push((p, q));
                } else if !equal_step(p, q, todo) {
                    return false;
                }
            }
            true
        }
        (Record(x), Record(y)) => Arc::ptr_eq(x, y) || push_records(x, y, todo),
        (Table(x), Table(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(p, q)| push_records(p, q, todo))
        }
        (Table(t), List(l)) | (List(l), Table(t)) => {
            t.len() == l.len()
                && t.iter()
                    .zip(l.iter())
                    .all(|(r, v)| matches!(v, Record(w) if push_records(r, w, todo)))
        }
        (Range(x), Range(y)) => x == y,
        (Error(x), Error(y)) => {
            x.code == y.code && x.msg == y.msg && x.hint == y.hint && x.status == y.status
        }
        (Outcome(x), Outcome(y)) => Arc::ptr_eq(x, y),
        (Closure(x), Closure(y)) => Arc::ptr_eq(x, y),
        (Stream(x), Stream(y)) => Arc::ptr_eq(x, y),
        (Task(x), Task(y)) => Arc::ptr_eq(x, y) || x.id == y.id,
        (Command(x), Command(y)) => Arc::ptr_eq(x, y),
        (Secret(x), Secret(y)) => x.name == y.name,
        _ => false,
    }
}

fn incomparable(a: &Value, b: &Value) -> ShoalError {
    ShoalError::type_error(format!(
        "cannot compare {} and {}",
        a.type_name(),
        b.type_name()
    ))
}

fn cmp_f64(a: &Value, b: &Value, x: f64, y: f64) -> SResult<Ordering> {
    x.partial_cmp(&y).ok_or_else(|| incomparable(a, b))
}

/// Ordering (docs/rules.md §5); `type_error` for incomparable pairs.
pub fn compare(a: &Value, b: &Value) -> SResult<Ordering> {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => Ok(x.cmp(y)),
        (Int(x), Float(y)) => cmp_f64(a, b, *x as f64, *y),
        (Float(x), Int(y)) => cmp_f64(a, b, *x, *y as f64),
        (Float(x), Float(y)) => cmp_f64(a, b, *x, *y),
        (Str(x), Str(y)) => Ok(x.as_bytes().cmp(y.as_bytes())),
        (Path(x), Path(y)) => Ok(x.as_os_str().cmp(y.as_os_str())),
        (Size(x), Size(y)) => Ok(x.cmp(y)),
        (Duration(x), Duration(y)) => Ok(x.cmp(y)),
        (DateTime(x), DateTime(y)) => Ok(x.timestamp().cmp(&y.timestamp())),
        (Time(x), Time(y)) => Ok(x.cmp(y)),
        (Bool(x), Bool(y)) => Ok(x.cmp(y)),
        _ => Err(incomparable(a, b)),
    }
}

/// A condition (docs/rules.md §5): bool, or an outcome's `ok`; else `type_error`.
pub fn truth(v: &Value) -> SResult<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Outcome(o) => Ok(o.ok),
        other => Err(ShoalError::type_error(format!(
            "expected a condition (bool), found {}",
            other.type_name()
        ))
        .with_hint(
            "shoal has no truthiness: compare explicitly, e.g. `x != null`, `xs.len() > 0`",
        )),
    }
}

/// Membership `needle in hay` (docs/rules.md §5).
pub fn contains(hay: &Value, needle: &Value) -> SResult<bool> {
    match (hay, needle) {
        (Value::List(items), x) => Ok(items.iter().any(|i| equals(i, x))),
        (Value::Table(rows), x) => Ok(match x {
            Value::Record(r) => rows.iter().any(|row| records_equal(row, r)),
            _ => false,
        }),
        (Value::Str(h), Value::Str(n)) => Ok(h.contains(&**n)),
        (Value::Record(r), Value::Str(k)) => Ok(r.contains_key(&**k)),
        (Value::Range(r), Value::Int(i)) => Ok(if r.inclusive {
            *i >= r.start && *i <= r.end
        } else {
            *i >= r.start && *i < r.end
        }),
        (h, n) => Err(ShoalError::type_error(format!(
            "cannot test membership of {} in {}",
            n.type_name(),
            h.type_name()
        ))),
    }
}

fn norm_index(i: i64, len: usize) -> Option<usize> {
    let len_i = len as i64;
    let j = if i < 0 { i.checked_add(len_i)? } else { i };
    if j < 0 || j >= len_i {
        None
    } else {
        Some(j as usize)
    }
}

/// Indexing `recv[idx]` (docs/rules.md §4).
pub fn index(recv: &Value, idx: &Value) -> SResult<Value> {
    match (recv, idx) {
        (Value::List(items), Value::Int(i)) => match norm_index(*i, items.len()) {
            Some(j) => Ok(items[j].clone()),
            None => Err(ShoalError::new(
                crate::ErrorCode::IndexRange,
                format!("index {i} out of range for list of length {}", items.len()),
            )),
        },
        (Value::Str(s), Value::Int(i)) => {
            let n = s.chars().count();
            match norm_index(*i, n) {
                Some(j) => Ok(Value::str(
                    s.chars().nth(j).map(String::from).unwrap_or_default(),
                )),
                None => Err(ShoalError::new(
                    crate::ErrorCode::IndexRange,
                    format!("index {i} out of range for string of length {n}"),
                )),
            }
        }
        (Value::Record(r), Value::Str(k)) => r
            .get(&**k)
            .cloned()
            .ok_or_else(|| crate::suggest::no_field(recv, k)),
        (r, i) => {
            let e = ShoalError::type_error(format!(
                "cannot index {} with {}",
                r.type_name(),
                i.type_name()
            ));
            match index_hint(r, i) {
                Some(h) => Err(e.with_hint(h)),
                None => Err(e),
            }
        }
    }
}

/// The form that works for an index that does not (`xs[1..3]`: `.skip(1).take(2)`).
fn index_hint(recv: &Value, idx: &Value) -> Option<String> {
    match (recv, idx) {
        (Value::List(_) | Value::Table(_) | Value::Str(_), Value::Range(r)) => {
            let end = if r.inclusive {
                r.end.saturating_add(1)
            } else {
                r.end
            };
            let n = end.saturating_sub(r.start).max(0);
            Some(if r.start <= 0 {
                format!(
                    "ranges do not index: take the first {n} with `.take({n})` (`.skip(a).take(n)` for a slice)"
                )
            } else {
                format!(
                    "ranges do not index: slice with `.skip({}).take({n})`",
                    r.start
                )
            })
        }
        (Value::Record(_), Value::Int(_)) => {
            Some("records are indexed by key: `r[\"key\"]` or `r.key`".into())
        }
        (Value::List(_) | Value::Table(_), Value::Str(k)) => Some(format!(
            "lists are indexed by position (`xs[0]`); a column of records: `xs.map(r => r.{k})`"
        )),
        _ => None,
    }
}

/// Convert a value to an argv string for an external program (docs/rules.md §8).
pub fn argv_string(v: &Value) -> SResult<String> {
    match v {
        Value::Str(s) => Ok(s.to_string()),
        Value::Path(p) => Ok(p.to_string_lossy().into_owned()),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => Ok(render::inline(v)),
        Value::Size(n) => Ok(n.to_string()),
        Value::Duration(d) => Ok(d.to_string()),
        Value::Secret(_) => Err(ShoalError::type_error(
            "a secret cannot be passed as a command argument",
        )),
        other => Err(ShoalError::type_error(format!(
            "cannot pass a {} as a command argument",
            other.type_name()
        ))),
    }
}

/// The byte form of a path argument (byte preserving) for argv.
pub fn argv_os(v: &Value) -> SResult<std::ffi::OsString> {
    match v {
        Value::Path(p) => Ok(p.as_os_str().to_os_string()),
        other => argv_string(other).map(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(op: BinOp, a: Value, c: Value) -> String {
        match binary(op, &a, &c) {
            Ok(v) => render::inline(&v),
            Err(e) => format!("!{}", e.code),
        }
    }

    #[test]
    fn int_fast_path_agrees_with_binary() {
        use BinOp::*;
        let ints = [
            i64::MIN,
            i64::MIN + 1,
            -7,
            -3,
            -1,
            0,
            1,
            2,
            3,
            7,
            i64::MAX - 1,
            i64::MAX,
        ];
        let ops = [
            Add, Sub, Mul, Div, Rem, Eq, Ne, Lt, Le, Gt, Ge, In, And, Or, Coalesce,
        ];
        for op in ops {
            for x in ints {
                for y in ints {
                    let slow = binary(op, &Value::Int(x), &Value::Int(y));
                    match binary_int(op, x, y) {
                        Some(v) => {
                            assert!(slow.as_ref().is_ok_and(|w| equals(&v, w)), "{op:?} {x} {y}")
                        }
                        None => assert!(
                            slow.is_err() || matches!(op, In),
                            "{op:?} {x} {y} has a fast result"
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn matrix() {
        use BinOp::*;
        use Value::*;
        const S: i64 = 1_000_000_000;
        let cases: Vec<(BinOp, Value, Value, &str)> = vec![
            (Add, Int(i64::MAX), Int(1), "!overflow"),
            (Div, Int(-7), Int(2), "-3"),
            (Rem, Int(-7), Int(3), "-1"),
            (Rem, Int(7), Int(-3), "1"),
            (Div, Int(1), Int(0), "!div_zero"),
            (Rem, Int(1), Int(0), "!div_zero"),
            (Div, Float(1.0), Float(0.0), "inf"),
            (Rem, Int(5), Float(2.0), "1"),
            (Sub, Size(2000), Size(500), "1.5kb"),
            (Sub, Size(1000), Size(2000), "!type_error"),
            (Div, Size(10000), Size(4000), "2.5"),
            (Mul, Int(4), Size(3000), "12kb"),
            (Div, Size(10000), Int(3), "3.33kb"),
            (Mul, Size(2000), Float(1.5), "3kb"),
            (Div, Size(10000), Float(2.0), "!type_error"),
            (Div, Size(10000), Int(0), "!div_zero"),
            (Mul, Size(1000), Float(-1.0), "!type_error"),
            (
                Mul,
                Size(9_000_000_000_000_000_000),
                Float(100.0),
                "!overflow",
            ),
            (Add, Int(1), Size(1), "!type_error"),
            (Div, Duration(90 * S), Duration(60 * S), "1.5"),
            (Mul, Duration(30 * S), Float(1.5), "45s"),
            (Mul, Duration(5 * S), Float(-1.0), "-5s"),
            (Div, Duration(90 * S), Int(3), "30s"),
            (Add, Bool(true), Bool(false), "!type_error"),
            (Add, Str("a".into()), Int(1), "!type_error"),
            (Eq, Int(5), Float(5.0), "true"),
            (Eq, Int(1), Str("1".into()), "false"),
            (Lt, Str("Z".into()), Str("a".into()), "true"),
            (Lt, Str("a".into()), Int(1), "!type_error"),
            (
                In,
                Int(3),
                Value::Range(crate::RangeVal {
                    start: 3,
                    end: 3,
                    inclusive: false,
                }),
                "false",
            ),
            (Eq, Float(f64::NAN), Float(f64::NAN), "false"),
        ];
        for (op, x, y, want) in cases {
            let got = b(op, x.clone(), y.clone());
            assert_eq!(got, want, "{} {:?} {:?}", op.symbol(), x, y);
        }
    }

    #[test]
    fn indexing() {
        let l = Value::list(vec![Value::Int(10), Value::Int(20), Value::Int(30)]);
        assert!(matches!(index(&l, &Value::Int(-2)), Ok(Value::Int(20))));
        assert_eq!(
            index(&l, &Value::Int(3)).unwrap_err().code,
            crate::ErrorCode::IndexRange
        );
        assert_eq!(
            index(&l, &Value::Float(1.0)).unwrap_err().code,
            crate::ErrorCode::TypeError
        );
    }
}
