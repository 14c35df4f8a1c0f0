//! `value.get` paths and slices (docs/rules.md §16).
//!
//! Grammar: `.` separates and is skipped anywhere; `[N]` indexes, `[A..B]`
//! takes a half-open, clamped range; any other run of characters up to the
//! next `.` or `[` is a field name.

use std::sync::Arc;

use shoal_value::{methods, Outcome, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Field(String),
    Index(usize),
    Range(usize, usize),
}

/// Parse a path; `Err` is a message for `-32005`.
pub fn parse(path: &str) -> Result<Vec<Seg>, String> {
    let mut segs = Vec::new();
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => i += 1,
            b'[' => {
                let close = path[i..]
                    .find(']')
                    .map(|j| i + j)
                    .ok_or_else(|| format!("unterminated [ in path {path:?}"))?;
                let inner = path[i + 1..close].trim();
                let num = |s: &str| {
                    s.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("bad index {s:?} in path {path:?}"))
                };
                segs.push(match inner.split_once("..") {
                    Some((a, z)) => Seg::Range(num(a)?, num(z)?),
                    None => Seg::Index(num(inner)?),
                });
                i = close + 1;
            }
            _ => {
                let end = path[i..]
                    .find(['.', '['])
                    .map(|j| i + j)
                    .unwrap_or(path.len());
                segs.push(Seg::Field(path[i..end].to_string()));
                i = end;
            }
        }
    }
    Ok(segs)
}

/// Apply a parsed path.
pub fn apply(v: &Value, segs: &[Seg]) -> Result<Value, String> {
    let mut cur = v.clone();
    for s in segs {
        cur = step(&cur, s)?;
    }
    Ok(cur)
}

fn clamp(a: usize, b: usize, len: usize) -> (usize, usize) {
    let s = a.min(len);
    (s, b.max(s).min(len))
}

fn step(v: &Value, seg: &Seg) -> Result<Value, String> {
    match (v, seg) {
        (Value::Record(r), Seg::Field(k)) => r
            .get(k.as_str())
            .cloned()
            .ok_or_else(|| format!("no field {k:?} in record")),
        (Value::Table(rows), Seg::Field(k)) if k == "rows" => Ok(Value::list(
            rows.iter().map(|r| Value::Record(r.clone())).collect(),
        )),
        (Value::Table(rows), Seg::Field(k)) => {
            if rows.iter().any(|r| r.contains_key(k.as_str())) {
                Ok(Value::list(
                    rows.iter()
                        .map(|r| r.get(k.as_str()).cloned().unwrap_or(Value::Null))
                        .collect(),
                ))
            } else {
                Err(format!("no column {k:?} in table"))
            }
        }
        (Value::Table(rows), Seg::Index(n)) => rows
            .get(*n)
            .map(|r| Value::Record(r.clone()))
            .ok_or_else(|| format!("row {n} out of range (table has {} rows)", rows.len())),
        (Value::Table(rows), Seg::Range(a, b)) => {
            let (s, e) = clamp(*a, *b, rows.len());
            Ok(Value::Table(Arc::new(rows[s..e].to_vec())))
        }
        (Value::List(xs), Seg::Index(n)) => xs
            .get(*n)
            .cloned()
            .ok_or_else(|| format!("index {n} out of range (list has {} items)", xs.len())),
        (Value::List(xs), Seg::Range(a, b)) => {
            let (s, e) = clamp(*a, *b, xs.len());
            Ok(Value::list(xs[s..e].to_vec()))
        }
        (Value::Outcome(o), Seg::Field(k)) => outcome_field(o, k),
        (Value::Error(e), Seg::Field(k)) => Ok(match k.as_str() {
            "code" => Value::str(e.code.as_str()),
            "msg" => Value::str(&e.msg),
            "hint" => e.hint.as_ref().map(Value::str).unwrap_or(Value::Null),
            "stderr" => e
                .stderr
                .as_ref()
                .map(|s| Value::bytes(s.to_vec()))
                .unwrap_or(Value::Null),
            "status" => e.status.map(Value::Int).unwrap_or(Value::Null),
            _ => return Err(format!("no field {k:?} on an error")),
        }),
        (Value::Range(r), Seg::Field(k)) => Ok(match k.as_str() {
            "start" => Value::Int(r.start),
            "end" => Value::Int(r.end),
            "inclusive" => Value::Bool(r.inclusive),
            _ => return Err(format!("no field {k:?} on a range")),
        }),
        (Value::Task(t), Seg::Field(k)) => Ok(match k.as_str() {
            "id" => Value::Int(t.id as i64),
            "done" => Value::Bool(false),
            _ => return Err(format!("no field {k:?} on a task")),
        }),
        (other, Seg::Field(k)) => Err(format!(
            "cannot access field {k:?} of {}",
            a(other.type_name())
        )),
        // An outcome's rows or lines are its result's: say where they are.
        (Value::Outcome(_), Seg::Index(_) | Seg::Range(..)) => {
            Err("cannot index an outcome: its result is `.out` (a path like `.out[3]`)".into())
        }
        (other, Seg::Index(_)) | (other, Seg::Range(..)) => {
            Err(format!("cannot index {}", a(other.type_name())))
        }
    }
}

/// `name` with its indefinite article (`an int`, `a str`).
fn a(name: &str) -> String {
    match name.as_bytes().first() {
        Some(b'a' | b'e' | b'i' | b'o' | b'u') => format!("an {name}"),
        _ => format!("a {name}"),
    }
}

fn outcome_field(o: &Outcome, k: &str) -> Result<Value, String> {
    Ok(match k {
        "status" => o.status.map(Value::Int).unwrap_or(Value::Null),
        "ok" => Value::Bool(o.ok),
        "signal" => o.signal.as_ref().map(Value::str).unwrap_or(Value::Null),
        "out" => methods::outcome_out_unchecked(o),
        "stdout" => Value::Bytes(o.stdout.clone()),
        "stderr" => Value::Bytes(o.stderr.clone()),
        "dur_ns" => Value::Duration(o.dur_ns),
        "pid" => Value::Int(o.pid as i64),
        "cmd" => Value::str(&o.cmd),
        "truncated" => Value::Bool(o.truncated),
        other => step(
            &methods::outcome_out_unchecked(o),
            &Seg::Field(other.to_string()),
        )?,
    })
}

/// The top-level `slice` (after the path); `Err` is "cannot slice a <type>".
pub fn slice(v: &Value, a: usize, b: usize) -> Result<Value, String> {
    Ok(match v {
        Value::List(xs) => {
            let (s, e) = clamp(a, b, xs.len());
            Value::list(xs[s..e].to_vec())
        }
        Value::Table(rows) => {
            let (s, e) = clamp(a, b, rows.len());
            Value::Table(Arc::new(rows[s..e].to_vec()))
        }
        Value::Str(st) => {
            let n = st.chars().count();
            let (s, e) = clamp(a, b, n);
            Value::str(st.chars().skip(s).take(e - s).collect::<String>())
        }
        Value::Bytes(bytes) => {
            let all = bytes
                .read_all()
                .map_err(|e| format!("cannot load bytes: {e}"))?;
            let (s, e) = clamp(a, b, all.len());
            Value::bytes(all[s..e].to_vec())
        }
        Value::Outcome(_) => {
            return Err(
                "cannot slice an outcome: give path: \"out\" to slice its value \
                 (items, or chars of a str), or lines: [a, b] for lines of its text"
                    .into(),
            )
        }
        other => return Err(format!("cannot slice a {}", other.type_name())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_value::Record;

    #[test]
    fn grammar() {
        assert_eq!(
            parse(".rows[3].name").unwrap(),
            vec![
                Seg::Field("rows".into()),
                Seg::Index(3),
                Seg::Field("name".into())
            ]
        );
        assert_eq!(
            parse("out[0..2]").unwrap(),
            vec![Seg::Field("out".into()), Seg::Range(0, 2)]
        );
        assert_eq!(parse("..a").unwrap(), vec![Seg::Field("a".into())]);
        assert!(parse("a[").is_err());
        assert!(parse("a[x]").is_err());
        assert!(parse("a[-1]").is_err());
        assert!(parse("a[1..]").is_err());
        assert_eq!(parse("").unwrap(), vec![]);
    }

    #[test]
    fn a_wrong_step_says_what_it_met_and_an_outcome_where_its_rows_are() {
        let e = apply(&Value::Int(3), &parse("[0]").unwrap()).unwrap_err();
        assert_eq!(e, "cannot index an int");
        let e = apply(&Value::str("x"), &parse("[0]").unwrap()).unwrap_err();
        assert_eq!(e, "cannot index a str");
        let e = apply(&Value::Int(3), &parse(".a").unwrap()).unwrap_err();
        assert_eq!(e, "cannot access field \"a\" of an int");
        let o = Value::Outcome(Arc::new(shoal_value::Outcome {
            status: Some(0),
            ok: true,
            signal: None,
            dur_ns: 0,
            pid: 0,
            cmd: "ls".into(),
            stdout: Default::default(),
            stderr: Default::default(),
            out: None,
            span: None,
            truncated: false,
            typed: None,
        }));
        let e = apply(&o, &parse("[3]").unwrap()).unwrap_err();
        assert!(e.contains("`.out[3]`"), "{e}");
    }

    #[test]
    fn semantics() {
        let mut r = Record::new();
        r.insert("name".into(), Value::str("a"));
        let t = Value::Table(Arc::new(vec![Arc::new(r.clone()), Arc::new(r)]));
        let rows = apply(&t, &parse("rows[0..2]").unwrap()).unwrap();
        assert!(matches!(&rows, Value::List(x) if x.len() == 2));
        let name = apply(&t, &parse("rows[0].name").unwrap()).unwrap();
        assert!(matches!(name, Value::Str(ref s) if &**s == "a"));
        assert!(apply(&t, &parse("nope").unwrap()).is_err());
        assert!(apply(&Value::Int(1), &parse("[0]").unwrap()).is_err());
        let l = Value::list((0..10).map(Value::Int).collect());
        assert!(matches!(slice(&l, 8, 20).unwrap(), Value::List(ref x) if x.len() == 2));
        assert!(matches!(slice(&l, 5, 2).unwrap(), Value::List(ref x) if x.is_empty()));
        assert!(matches!(slice(&t, 1, 3).unwrap(), Value::Table(ref x) if x.len() == 1));
        assert!(slice(&Value::Int(1), 0, 1).is_err());
        assert!(
            matches!(slice(&Value::str("héllo"), 1, 3).unwrap(), Value::Str(ref s) if &**s == "él")
        );
    }
}
