//! Collection methods (list, table, range; docs/rules.md §10).
use crate::memory;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use super::{arity, count_arg, no_named, req, str_arg, stream_of};
use crate::code::BinOp;
use crate::{ops, Args, Host, RangeVal, Record, SResult, ShoalError, Value};

/// A borrowed-cheap view of a list, table or range.
#[derive(Clone)]
pub enum Coll {
    List(Arc<Vec<Value>>),
    Table(Arc<Vec<Arc<Record>>>),
    Range(RangeVal),
}

impl Coll {
    /// List, table or range; `None` otherwise.
    pub fn from_value(v: &Value) -> Option<Coll> {
        match v {
            Value::List(l) => Some(Coll::List(l.clone())),
            Value::Table(t) => Some(Coll::Table(t.clone())),
            Value::Range(r) => Some(Coll::Range(*r)),
            _ => None,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Coll::List(l) => l.len(),
            Coll::Table(t) => t.len(),
            Coll::Range(r) => range_len(r),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element `i` (must be < len).
    pub fn get(&self, i: usize) -> Value {
        match self {
            Coll::List(l) => l[i].clone(),
            Coll::Table(t) => Value::Record(t[i].clone()),
            Coll::Range(r) => Value::Int(r.start.wrapping_add(i as i64)),
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }
    pub fn to_vec(&self) -> Vec<Value> {
        match self {
            Coll::List(l) => l.as_ref().clone(),
            _ => self.iter().collect(),
        }
    }
}

/// Number of ints in a range.
pub fn range_len(r: &RangeVal) -> usize {
    r.count()
}

fn interrupt_every(host: &dyn Host, i: usize) -> SResult<()> {
    if i & 1023 == 1023 {
        host.check_interrupt()?;
    }
    Ok(())
}

/// `v.clone()`, with ints (the elements of ranges) copied inline.
#[inline(always)]
fn clone_value(v: &Value) -> Value {
    match v {
        Value::Int(i) => Value::Int(*i),
        v => v.clone(),
    }
}

fn nullary(args: &Args, name: &str) -> SResult<()> {
    if !args.pos.is_empty() || !args.named.is_empty() {
        return Err(ShoalError::arg_error(format!(
            "{name} takes no arguments (got {})",
            args.pos.len()
        )));
    }
    Ok(())
}

fn func<'a>(args: &'a Args, name: &str) -> SResult<&'a Value> {
    no_named(args, name)?;
    req(args, 0, name, "a function argument")
}

/// Flatten one level of a collection-ish element.
fn extend_from(out: &mut Vec<Value>, v: &Value, what: &str) -> SResult<()> {
    match Coll::from_value(v) {
        Some(c) => {
            out.extend(c.iter());
            Ok(())
        }
        None => Err(ShoalError::type_error(format!(
            "{what}: expected list, table or range, found {}",
            v.type_name()
        ))),
    }
}

/// Sort values with the language ordering; incomparable pairs → `type_error`.
pub fn sort_values(v: &mut [Value]) -> SResult<()> {
    let mut err = None;
    v.sort_by(|a, b| match ops::compare(a, b) {
        Ok(o) => o,
        Err(e) => {
            err.get_or_insert(e);
            Ordering::Equal
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Hash key for fast structural de-duplication of scalars; `None` for others.
fn scalar_key(v: &Value) -> Option<(u8, String)> {
    match v {
        Value::Null => Some((0, String::new())),
        Value::Bool(b) => Some((1, b.to_string())),
        Value::Int(i) => Some((2, i.to_string())),
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
            Some((2, (*f as i64).to_string()))
        }
        Value::Str(s) => Some((3, s.to_string())),
        _ => None,
    }
}

/// Range methods that do not materialise the whole range (`first`, `last`,
/// `take`, `skip` check the part they build).
const RANGE_LAZY: &[&str] = &[
    "len", "count", "is_empty", "first", "last", "take", "skip", "each", "reduce", "fold", "any",
    "all", "find", "sum", "min", "max", "contains",
];

pub fn call(host: &mut dyn Host, c: &Coll, name: &str, args: &Args) -> SResult<Option<Value>> {
    // A range is O(1) as a value: building its items is sized by user input
    // and checked against the session's memory budget first.
    if let Coll::Range(r) = c {
        if !RANGE_LAZY.contains(&name) {
            memory::reserve_items::<Value>(range_len(r))?;
        }
    }
    let v = match name {
        "len" | "count" => {
            arity(args, 0, name)?;
            Value::Int(c.len() as i64)
        }
        "is_empty" => {
            arity(args, 0, name)?;
            Value::Bool(c.is_empty())
        }
        "first" | "last" => {
            arity(args, 1, name)?;
            let n = c.len();
            match args.pos.first() {
                None => {
                    if n == 0 {
                        Value::Null
                    } else if name == "first" {
                        c.get(0)
                    } else {
                        c.get(n - 1)
                    }
                }
                Some(k) => {
                    let k = count_arg(k, name)?.min(n);
                    memory::reserve_items::<Value>(k)?;
                    let range = if name == "first" { 0..k } else { n - k..n };
                    Value::list(range.map(|i| c.get(i)).collect())
                }
            }
        }
        "take" | "skip" => {
            arity(args, 1, name)?;
            let k = count_arg(req(args, 0, name, "a count")?, name)?.min(c.len());
            let range = if name == "take" { 0..k } else { k..c.len() };
            memory::reserve_items::<Value>(range.len())?;
            Value::list(range.map(|i| c.get(i)).collect())
        }
        "collect" => {
            arity(args, 0, name)?;
            match c {
                Coll::List(l) => Value::List(l.clone()),
                Coll::Table(t) => Value::Table(t.clone()),
                Coll::Range(_) => Value::list(c.to_vec()),
            }
        }
        "stream" => {
            arity(args, 0, name)?;
            stream_of(c.to_vec())
        }
        "tee" => {
            arity(args, 1, name)?;
            let n = match args.pos.first() {
                Some(v) => count_arg(v, name)?,
                None => 2,
            };
            if n == 0 {
                return Err(ShoalError::arg_error(
                    ".tee() needs at least one branch (n > 0)",
                ));
            }
            let items = c.to_vec();
            Value::list((0..n).map(|_| stream_of(items.clone())).collect())
        }
        "map" => {
            let f = func(args, name)?;
            let mut out = Vec::with_capacity(c.len());
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                out.push(host.call1(f, x)?);
            }
            Value::list(out)
        }
        "where" | "filter" => {
            let f = func(args, name)?;
            let mut out = Vec::new();
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                if ops::truth(&host.call1(f, clone_value(&x))?)? {
                    out.push(x);
                }
            }
            Value::list(out)
        }
        "each" => {
            let f = func(args, name)?;
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                host.call1(f, x)?;
            }
            Value::Null
        }
        "reduce" | "fold" => {
            no_named(args, name)?;
            let init = req(args, 0, name, "an initial value and a function")?;
            let f = req(args, 1, name, "a function")?;
            let mut acc = init.clone();
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                acc = host.call(f, vec![acc, x])?;
            }
            acc
        }
        "any" | "all" | "find" => {
            let f = func(args, name)?;
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                let t = ops::truth(&host.call1(f, x.clone())?)?;
                match (name, t) {
                    ("any", true) => return Ok(Some(Value::Bool(true))),
                    ("all", false) => return Ok(Some(Value::Bool(false))),
                    ("find", true) => return Ok(Some(x)),
                    _ => {}
                }
            }
            match name {
                "any" => Value::Bool(false),
                "all" => Value::Bool(true),
                _ => Value::Null,
            }
        }
        "flat_map" => {
            let f = func(args, name)?;
            let mut out = Vec::new();
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                let r = host.call1(f, x)?;
                extend_from(&mut out, &r, "flat_map")?;
            }
            Value::list(out)
        }
        "sort" | "sort_by" => {
            no_named(args, name)?;
            match args.pos.first() {
                None if name == "sort" => {
                    let mut v = c.to_vec();
                    sort_values(&mut v)?;
                    Value::list(v)
                }
                None => return Err(ShoalError::arg_error(".sort_by() requires a key function")),
                Some(f) => {
                    let mut keyed = Vec::with_capacity(c.len());
                    for (i, x) in c.iter().enumerate() {
                        interrupt_every(host, i)?;
                        keyed.push((host.call1(f, x.clone())?, x));
                    }
                    let mut err = None;
                    keyed.sort_by(|a, b| match ops::compare(&a.0, &b.0) {
                        Ok(o) => o,
                        Err(e) => {
                            err.get_or_insert(e);
                            Ordering::Equal
                        }
                    });
                    if let Some(e) = err {
                        return Err(e);
                    }
                    Value::list(keyed.into_iter().map(|(_, x)| x).collect())
                }
            }
        }
        "reverse" => {
            arity(args, 0, name)?;
            let mut v = c.to_vec();
            v.reverse();
            Value::list(v)
        }
        "uniq" => {
            arity(args, 0, name)?;
            let mut seen: HashSet<(u8, String)> = HashSet::new();
            let mut out: Vec<Value> = Vec::new();
            let mut complex: Vec<Value> = Vec::new();
            for x in c.iter() {
                match scalar_key(&x) {
                    Some(k) => {
                        if seen.insert(k) {
                            out.push(x);
                        }
                    }
                    None => {
                        if !complex.iter().any(|y| ops::equals(y, &x)) {
                            complex.push(x.clone());
                            out.push(x);
                        }
                    }
                }
            }
            Value::list(out)
        }
        "sum" => {
            nullary(args, "sum")?;
            if let Coll::Range(r) = c {
                let n = range_len(r) as i128;
                if n == 0 {
                    return Ok(Some(Value::Int(0)));
                }
                let first = r.start as i128;
                let last = first + n - 1;
                let s = (first + last) * n / 2;
                return i64::try_from(s)
                    .map(|s| Some(Value::Int(s)))
                    .map_err(|_| ShoalError::overflow("integer overflow"));
            }
            let mut it = c.iter();
            match it.next() {
                None => Value::Int(0),
                Some(first) => {
                    let mut acc = first;
                    for x in it {
                        acc = ops::binary(BinOp::Add, &acc, &x)?;
                    }
                    acc
                }
            }
        }
        "min" | "max" => {
            nullary(args, name)?;
            let mut best: Option<Value> = None;
            for x in c.iter() {
                best = Some(match best {
                    None => x,
                    Some(b) => {
                        let o = ops::compare(&x, &b)?;
                        if (name == "min" && o == Ordering::Less)
                            || (name == "max" && o == Ordering::Greater)
                        {
                            x
                        } else {
                            b
                        }
                    }
                });
            }
            best.unwrap_or(Value::Null)
        }
        "flatten" => {
            arity(args, 0, name)?;
            let mut out = Vec::new();
            for x in c.iter() {
                extend_from(&mut out, &x, "flatten")?;
            }
            Value::list(out)
        }
        "enumerate" => {
            arity(args, 0, name)?;
            Value::list(
                c.iter()
                    .enumerate()
                    .map(|(i, x)| Value::list(vec![Value::Int(i as i64), x]))
                    .collect(),
            )
        }
        "chunks" => {
            arity(args, 1, name)?;
            let n = count_arg(req(args, 0, name, "a chunk size")?, name)?;
            if n == 0 {
                return Err(ShoalError::arg_error(".chunks() size must be positive"));
            }
            let v = c.to_vec();
            Value::list(v.chunks(n).map(|ch| Value::list(ch.to_vec())).collect())
        }
        "zip" => {
            arity(args, 1, name)?;
            let o = req(args, 0, name, "a collection")?;
            let other = Coll::from_value(o).ok_or_else(|| {
                ShoalError::type_error(format!(
                    ".zip() expects a list, table or range, got {}",
                    o.type_name()
                ))
            })?;
            let n = c.len().min(other.len());
            Value::list(
                (0..n)
                    .map(|i| Value::list(vec![c.get(i), other.get(i)]))
                    .collect(),
            )
        }
        "group" | "group_by" => {
            let f = func(args, name)?;
            let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
            let mut fast: std::collections::HashMap<(u8, String), usize> =
                std::collections::HashMap::new();
            for (i, x) in c.iter().enumerate() {
                interrupt_every(host, i)?;
                let k = host.call1(f, x.clone())?;
                let idx = match scalar_key(&k) {
                    Some(sk) => *fast.entry(sk).or_insert_with(|| {
                        groups.push((k.clone(), Vec::new()));
                        groups.len() - 1
                    }),
                    None => match groups.iter().position(|(g, _)| ops::equals(g, &k)) {
                        Some(p) => p,
                        None => {
                            groups.push((k, Vec::new()));
                            groups.len() - 1
                        }
                    },
                };
                groups[idx].1.push(x);
            }
            Value::list(
                groups
                    .into_iter()
                    .map(|(k, vs)| {
                        let mut r = Record::new();
                        r.insert("key".into(), k);
                        r.insert("values".into(), Value::list(vs));
                        Value::record(r)
                    })
                    .collect(),
            )
        }
        "join" => {
            arity(args, 1, name)?;
            let sep = match args.pos.first() {
                Some(s) => str_arg(s, name)?,
                None => "",
            };
            let mut out = String::new();
            for (i, x) in c.iter().enumerate() {
                match &x {
                    Value::Str(s) => {
                        if i > 0 {
                            out.push_str(sep);
                        }
                        out.push_str(s);
                    }
                    other => {
                        return Err(ShoalError::type_error(format!(
                            ".join() needs a list of str, found {}",
                            other.type_name()
                        ))
                        .with_hint("convert first: `.map(x => \"{x}\").join(sep)`"))
                    }
                }
            }
            Value::str(out)
        }
        "contains" => {
            arity(args, 1, name)?;
            let x = req(args, 0, name, "a value")?;
            let hay = match c {
                Coll::List(l) => Value::List(l.clone()),
                Coll::Table(t) => Value::Table(t.clone()),
                Coll::Range(r) => Value::Range(*r),
            };
            match (&hay, x) {
                (Value::Range(_), Value::Int(_)) => Value::Bool(ops::contains(&hay, x)?),
                (Value::Range(_), _) => Value::Bool(false),
                _ => Value::Bool(ops::contains(&hay, x)?),
            }
        }
        "get" => {
            arity(args, 2, name)?;
            let i = req(args, 0, name, "an index")?;
            let default = args.pos.get(1).cloned().unwrap_or(Value::Null);
            match (c, i) {
                (Coll::List(l), Value::Int(i)) => {
                    let n = l.len() as i64;
                    let j = if *i < 0 { i.saturating_add(n) } else { *i };
                    if j >= 0 && j < n {
                        l[j as usize].clone()
                    } else {
                        default
                    }
                }
                (c, i) => {
                    let t = match c {
                        Coll::List(_) => "list",
                        Coll::Table(_) => "table",
                        Coll::Range(_) => "range",
                    };
                    return Err(ShoalError::type_error(format!(".get() on {t} with {} index", i.type_name()))
                        .with_hint("tables are not a table index: use `.first()`, `.skip(n).first()` or `.find(...)`"));
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}
