//! Method tests with a tiny host whose "closures" are strings naming simple ops.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::code::BinOp;
use crate::{ops, render, Record};

struct TestHost {
    cwd: PathBuf,
}

impl Host for TestHost {
    fn call(&mut self, f: &Value, args: Vec<Value>) -> SResult<Value> {
        let Value::Str(op) = f else {
            return Err(ShoalError::type_error("not callable"));
        };
        let a = args.first().cloned().unwrap_or(Value::Null);
        match &**op {
            "id" => Ok(a),
            "double" => ops::binary(BinOp::Mul, &a, &Value::Int(2)),
            "neg" => ops::unary(crate::code::UnOp::Neg, &a),
            "even" => Ok(Value::Bool(equals_int(
                &ops::binary(BinOp::Rem, &a, &Value::Int(2))?,
                0,
            ))),
            "gt1" => ops::binary(BinOp::Gt, &a, &Value::Int(1)),
            "len" => call_method(self, &a, "len", Args::default()),
            "add" => ops::binary(BinOp::Add, &a, &args[1]),
            "pair" => Ok(Value::list(vec![a.clone(), a])),
            "k" => get_field(self, &a, "k"),
            "eq4" => Ok(Value::Bool(equals_int(&a, 4))),
            other => Err(ShoalError::type_error(format!("unknown test fn {other}"))),
        }
    }
    fn cwd(&self) -> &Path {
        &self.cwd
    }
    fn env_vars(&self) -> Vec<(String, String)> {
        vec![("USER".into(), "tester".into())]
    }
    fn config(&self) -> Record {
        Record::new()
    }
    fn check_interrupt(&self) -> SResult<()> {
        Ok(())
    }
}

fn equals_int(v: &Value, i: i64) -> bool {
    ops::equals(v, &Value::Int(i))
}

fn host() -> TestHost {
    TestHost {
        cwd: std::env::temp_dir(),
    }
}

fn ints(xs: &[i64]) -> Value {
    Value::list(xs.iter().map(|x| Value::Int(*x)).collect())
}

fn strs(xs: &[&str]) -> Value {
    Value::list(xs.iter().map(Value::str).collect())
}

fn rec(pairs: &[(&str, Value)]) -> Value {
    Value::record(
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
            .collect(),
    )
}

fn run(h: &mut TestHost, recv: &Value, name: &str, pos: Vec<Value>) -> String {
    match call_method(h, recv, name, Args { pos, named: vec![] }) {
        Ok(v) => render::inline(&v),
        Err(e) => format!("!{}: {} {}", e.code, e.msg, e.hint.unwrap_or_default()),
    }
}

#[test]
fn method_table() {
    let mut h = host();
    let s = Value::str;
    let cases: Vec<(Value, &str, Vec<Value>, &str)> = vec![
        (ints(&[1, 2, 3]), "first", vec![Value::Int(2)], "[1, 2]"),
        (ints(&[1, 2, 3]), "last", vec![Value::Int(2)], "[2, 3]"),
        (
            ints(&[1, 2, 3]),
            "take",
            vec![Value::Int(-1)],
            "!type_error",
        ),
        (ints(&[1, 2, 3, 4]), "where", vec![s("even")], "[2, 4]"),
        (ints(&[1, 2, 3]), "map", vec![s("double")], "[2, 4, 6]"),
        (ints(&[1, 2, 3]), "all", vec![s("gt1")], "false"),
        (ints(&[1, 2]), "flat_map", vec![s("pair")], "[1, 1, 2, 2]"),
        (
            strs(&["bb", "a", "ccc"]),
            "sort_by",
            vec![s("len")],
            "[\"a\", \"bb\", \"ccc\"]",
        ),
        (ints(&[3, 1, 2]), "sort_by", vec![s("neg")], "[3, 2, 1]"),
        (
            ints(&[1, 2, 3, 4, 5]),
            "chunks",
            vec![Value::Int(2)],
            "[[1, 2], [3, 4], [5]]",
        ),
        (
            ints(&[1, 2, 3]),
            "chunks",
            vec![Value::Int(0)],
            "!arg_error",
        ),
        (ints(&[3, 1, 3, 2, 1]), "uniq", vec![], "[3, 1, 2]"),
        (
            ints(&[2, 1, 2, 3]),
            "group",
            vec![s("id")],
            "[{key: 2, values: [2, 2]}, {key: 1, values: [1]}, {key: 3, values: [3]}]",
        ),
        (
            ints(&[1, 2, 3]),
            "get",
            vec![Value::Int(-1), Value::Int(99)],
            "3",
        ),
        (
            ints(&[1, 2, 3]),
            "get",
            vec![Value::Int(9), s("missing")],
            "\"missing\"",
        ),
        (ints(&[1, 2]), "join", vec![s(",")], "!type_error"),
        (ints(&[1, 2]), "zip", vec![Value::Int(5)], "!type_error"),
        (
            ints(&[1, 2, 3, 4]),
            "reduce",
            vec![Value::Int(0), s("add")],
            "10",
        ),
        (Value::list(vec![]), "sum", vec![], "0"),
        (
            Value::list(vec![Value::Float(1.5), Value::Float(2.5)]),
            "sum",
            vec![],
            "4",
        ),
        (
            ints(&[3, 1, 2]),
            "max",
            vec![s("x")],
            "!arg_error: max takes no arguments (got 1) ",
        ),
        (
            Value::list(vec![Value::Int(1), s("a")]),
            "sort",
            vec![],
            "!type_error",
        ),
        (
            Value::list(vec![ints(&[1]), Value::Int(2)]),
            "flatten",
            vec![],
            "!type_error",
        ),
        (
            Value::Range(crate::RangeVal {
                start: 1,
                end: 5,
                inclusive: true,
            }),
            "sum",
            vec![],
            "15",
        ),
        (
            Value::Range(crate::RangeVal {
                start: 5,
                end: 1,
                inclusive: false,
            }),
            "len",
            vec![],
            "0",
        ),
        (
            Value::Range(crate::RangeVal {
                start: 1,
                end: 5,
                inclusive: false,
            }),
            "map",
            vec![s("double")],
            "[2, 4, 6, 8]",
        ),
        (
            ints(&[1]),
            "frobnicate",
            vec![],
            "!field_missing: unknown method `.frobnicate` on list ",
        ),
        (
            ints(&[1, 2]),
            "length",
            vec![],
            "!field_missing: unknown method `.length` on list did you mean .len()?",
        ),
        (
            s("abc"),
            "size",
            vec![],
            "!field_missing: unknown method `.size` on str did you mean .len()?",
        ),
        (
            s("a"),
            "to_upper",
            vec![],
            "!field_missing: unknown method `.to_upper` on str did you mean .upper()?",
        ),
        (
            ints(&[3, 1]),
            "sortt",
            vec![],
            "!field_missing: unknown method `.sortt` on list did you mean .sort()?",
        ),
        (
            Value::path("a.txt"),
            "read_str",
            vec![],
            "!field_missing: unknown method `.read_str` on path did you mean .read()?",
        ),
        (s("café"), "len", vec![], "4"),
        (s("a,,b"), "split", vec![s(",")], "[\"a\", \"\", \"b\"]"),
        (
            s("a,b"),
            "split",
            vec![],
            "!arg_error: .split() requires a separator: `s.split(\",\")` ",
        ),
        (
            s("hello"),
            "starts_with",
            vec![],
            "!arg_error: .starts_with() requires a prefix ",
        ),
        (s("abc"), "contains", vec![Value::Int(1)], "!type_error"),
        (s("onlyline"), "lines", vec![], "[\"onlyline\"]"),
        (s(""), "lines", vec![], "[]"),
        (s("a\r\nb\n"), "lines", vec![], "[\"a\", \"b\"]"),
        (s("a b  c"), "words", vec![], "[\"a\", \"b\", \"c\"]"),
        (s("abcdefg"), "skip", vec![Value::Int(2)], "\"cdefg\""),
        (s("3.5"), "parse_int", vec![], "!arg_error"),
        (s("42"), "parse_int", vec![], "42"),
        (Value::Float(2.5), "round", vec![], "3"),
        (Value::Float(-2.5), "round", vec![], "-3"),
        (Value::Float(3.14359), "round", vec![Value::Int(2)], "3.14"),
        (Value::Float(3.14359), "ceil", vec![Value::Int(2)], "3.15"),
        (
            Value::Float(1.23456),
            "round",
            vec![Value::Int(400)],
            "1.23456",
        ),
        (Value::Int(i64::MIN), "abs", vec![], "!overflow"),
        (Value::Int(5), "len", vec![], "!type_error"),
        (Value::Size(5000), "abs", vec![], "!type_error"),
        (Value::Int(42), "str", vec![], "\"42\""),
        (Value::Bool(true), "str", vec![], "\"true\""),
        (
            rec(&[("a", Value::Int(1))]),
            "json",
            vec![],
            "\"{\\\"a\\\":1}\"",
        ),
        (rec(&[("a", Value::Int(1))]), "first", vec![], "!type_error"),
        (
            rec(&[("a", Value::Int(1)), ("b", Value::Int(2))]),
            "set",
            vec![s("a"), Value::Int(99)],
            "{a: 99, b: 2}",
        ),
        (
            rec(&[("a", Value::Int(1))]),
            "set",
            vec![],
            "!arg_error: .set() requires a key and a value ",
        ),
        (
            rec(&[("a", Value::Int(1))]),
            "get",
            vec![Value::Int(0), Value::Int(9)],
            "!type_error",
        ),
        (
            rec(&[("a", Value::Int(1))]),
            "merge",
            vec![Value::Int(5)],
            "!type_error",
        ),
        (
            rec(&[("a", Value::Int(1)), ("b", Value::Int(2))]),
            "items",
            vec![],
            "[[\"a\", 1], [\"b\", 2]]",
        ),
        (Value::path("sub/a.toml"), "parent", vec![], "sub"),
        (Value::path("a.toml"), "parent", vec![], "null"),
        (Value::path("README"), "ext", vec![], "null"),
        (Value::path("a"), "join", vec![s("b.txt")], "a/b.txt"),
        (Value::path("a"), "join", vec![Value::Int(1)], "!type_error"),
        (Value::path("a.txt"), "exists", vec![s("x")], "!arg_error"),
        (
            Value::path("definitely-not-here.txt"),
            "read",
            vec![],
            "!not_found",
        ),
        (
            Value::bytes(b"hi".to_vec()),
            "reverse",
            vec![],
            "!type_error",
        ),
        (Value::bytes(vec![0xff]), "str", vec![], "!utf8_error"),
        (
            Value::bytes(b"hi".to_vec()),
            "json",
            vec![],
            "\"\\\"hi\\\"\"",
        ),
    ];
    for (recv, name, pos, want) in cases {
        let got = run(&mut h, &recv, name, pos);
        if want.starts_with('!') && !want.contains(':') {
            assert!(
                got.starts_with(want),
                "{}.{name}: got {got}, want {want}",
                render::inline(&recv)
            );
        } else {
            assert_eq!(got, want, "{}.{name}", render::inline(&recv));
        }
    }
}

#[test]
fn fields_and_fallback() {
    let mut h = host();
    let r = rec(&[("values", Value::Int(42))]);
    assert!(matches!(
        get_field(&mut h, &r, "values"),
        Ok(Value::Int(42))
    ));
    assert_eq!(
        get_field(&mut h, &rec(&[("a", Value::Int(1))]), "items")
            .unwrap_err()
            .code,
        ErrorCode::FieldMissing
    );
    assert_eq!(
        render::inline(&get_field(&mut h, &Value::str("hi"), "upper").unwrap()),
        "\"HI\""
    );
    assert_eq!(
        render::inline(&get_field(&mut h, &ints(&[1, 2, 3]), "sum").unwrap()),
        "6"
    );
    assert_eq!(
        get_field(&mut h, &Value::Duration(5), "nope")
            .unwrap_err()
            .code,
        ErrorCode::FieldMissing
    );
    let dt = Value::DateTime(Arc::new(
        crate::datetime::parse_datetime_literal("2026-07-09T14:30:45Z").unwrap(),
    ));
    assert_eq!(
        render::inline(&get_field(&mut h, &dt, "minute").unwrap()),
        "30"
    );
    assert_eq!(
        get_field(&mut h, &dt, "nope").unwrap_err().code,
        ErrorCode::FieldMissing
    );
    let e = call_method(&mut h, &dt, "str", Args::default()).unwrap_err();
    assert_eq!(e.code, ErrorCode::TypeError);
    assert!(e.hint.unwrap_or_default().contains("interpolation"));
    assert_eq!(
        call_method(&mut h, &dt, "len", Args::default())
            .unwrap_err()
            .code,
        ErrorCode::TypeError
    );
}

fn outcome(ok: bool, stdout: &str) -> Value {
    Value::Outcome(Arc::new(Outcome {
        status: Some(if ok { 0 } else { 1 }),
        ok,
        signal: None,
        dur_ns: 5,
        pid: 7,
        cmd: "x".into(),
        stdout: crate::OutputBytes::from(stdout),
        stderr: crate::OutputBytes::from("err"),
        out: None,
        span: None,
        truncated: false,
        typed: None,
    }))
}

#[test]
fn outcomes() {
    let mut h = host();
    let o = outcome(true, "{\"b\": 1, \"a\": 2}\n");
    assert_eq!(
        render::inline(&get_field(&mut h, &o, "out").unwrap()),
        "{a: 2, b: 1}"
    );
    assert_eq!(render::inline(&get_field(&mut h, &o, "b").unwrap()), "1");
    let f = outcome(false, "");
    assert_eq!(
        get_field(&mut h, &f, "out").unwrap_err().code,
        ErrorCode::CmdFailed
    );
    assert_eq!(
        get_field(&mut h, &f, "nope").unwrap_err().code,
        ErrorCode::CmdFailed
    );
    assert_eq!(
        render::inline(&get_field(&mut h, &f, "status").unwrap()),
        "1"
    );
    assert_eq!(
        render::inline(&call_method(&mut h, &f, "len", Args::default()).unwrap()),
        "0"
    );
    let t = outcome(true, "hi\n");
    assert_eq!(
        render::inline(&get_field(&mut h, &t, "out").unwrap()),
        "\"hi\""
    );
    assert_eq!(feed_bytes(&t).unwrap(), b"hi\n");
    assert_eq!(feed_bytes(&strs(&["b", "a"])).unwrap(), b"b\na\n");
    assert_eq!(feed_bytes(&ints(&[1, 2])).unwrap(), b"[1,2]");
    assert_eq!(feed_bytes(&Value::Size(1000)).unwrap(), b"1kb");
    assert_eq!(
        feed_bytes(&Value::path("a")).unwrap_err().code,
        ErrorCode::TypeError
    );
}

#[test]
fn streams() {
    let mut h = host();
    let st = || {
        call_method(
            &mut host(),
            &ints(&[1, 1, 2, 2, 2, 3, 1]),
            "stream",
            Args::default(),
        )
        .unwrap()
    };
    let run_chain = |h: &mut TestHost, s: Value, steps: &[(&str, Vec<Value>)]| {
        let mut v = s;
        for (n, a) in steps {
            v = match call_method(
                h,
                &v,
                n,
                Args {
                    pos: a.clone(),
                    named: vec![],
                },
            ) {
                Ok(v) => v,
                Err(e) => return format!("!{}", e.code),
            };
        }
        render::inline(&v)
    };
    assert_eq!(
        run_chain(&mut h, st(), &[("dedupe", vec![]), ("collect", vec![])]),
        "[1, 2, 3, 1]"
    );
    assert_eq!(
        run_chain(&mut h, st(), &[("distinct", vec![]), ("collect", vec![])]),
        "[1, 2, 3]"
    );
    assert_eq!(
        run_chain(
            &mut h,
            st(),
            &[
                ("map", vec![Value::str("double")]),
                ("take", vec![Value::Int(3)]),
                ("collect", vec![])
            ]
        ),
        "[2, 2, 4]"
    );
    assert_eq!(
        run_chain(
            &mut h,
            st(),
            &[
                ("scan", vec![Value::Int(0), Value::str("add")]),
                ("collect", vec![])
            ]
        ),
        "[1, 2, 4, 6, 8, 11, 12]"
    );
    assert_eq!(
        run_chain(
            &mut h,
            st(),
            &[("window", vec![Value::Int(2)]), ("first", vec![])]
        ),
        "[1, 1]"
    );
    assert_eq!(run_chain(&mut h, st(), &[("sum", vec![])]), "12");
    assert_eq!(
        run_chain(
            &mut h,
            st(),
            &[("take_until", vec![Value::str("gt1")]), ("collect", vec![])]
        ),
        "[1, 1]"
    );
    assert_eq!(
        run_chain(
            &mut h,
            st(),
            &[
                ("throttle", vec![Value::Duration(1_000_000_000)]),
                ("collect", vec![])
            ]
        ),
        "[1]"
    );
    assert_eq!(
        run_chain(&mut h, st(), &[("tee", vec![Value::Int(0)])]),
        "!arg_error"
    );
    // single consumer
    let s = st();
    let _ = call_method(&mut h, &s, "collect", Args::default()).unwrap();
    assert_eq!(
        call_method(&mut h, &s, "collect", Args::default())
            .unwrap_err()
            .code,
        ErrorCode::StreamConsumed
    );
    // unbounded: deferred map then take
    let unb = stream::make_stream("event", false, Box::new((1..).map(|i| Ok(Value::Int(i)))));
    assert_eq!(
        run_chain(
            &mut h,
            unb,
            &[
                ("map", vec![Value::str("double")]),
                ("where", vec![Value::str("even")]),
                ("take", vec![Value::Int(3)]),
                ("collect", vec![])
            ]
        ),
        "[2, 4, 6]"
    );
    let unb = stream::make_stream("event", false, Box::new((1..).map(|i| Ok(Value::Int(i)))));
    assert_eq!(
        run_chain(&mut h, unb, &[("collect", vec![])]),
        "!stream_unbounded"
    );
    // live tee of an unbounded stream
    let unb = stream::make_stream(
        "datetime",
        false,
        Box::new((1..).map(|i| Ok(Value::Int(i)))),
    );
    let forks = call_method(
        &mut h,
        &unb,
        "tee",
        Args {
            pos: vec![Value::Int(2)],
            named: vec![],
        },
    )
    .unwrap();
    let f0 = ops::index(&forks, &Value::Int(0)).unwrap();
    let f1 = ops::index(&forks, &Value::Int(1)).unwrap();
    assert_eq!(
        run_chain(
            &mut h,
            f0,
            &[("take", vec![Value::Int(70)]), ("len", vec![])]
        ),
        "70"
    );
    assert_eq!(
        run_chain(
            &mut h,
            f1,
            &[("take", vec![Value::Int(65)]), ("last", vec![])]
        ),
        "{dropped: 6}"
    );
}

#[test]
fn big_range_map_is_fast_enough() {
    let mut h = host();
    let r = Value::Range(crate::RangeVal {
        start: 0,
        end: 100_000,
        inclusive: false,
    });
    let m = call_method(
        &mut h,
        &r,
        "map",
        Args {
            pos: vec![Value::str("double")],
            named: vec![],
        },
    )
    .unwrap();
    let n = call_method(&mut h, &m, "len", Args::default()).unwrap();
    assert_eq!(render::inline(&n), "100000");
}
