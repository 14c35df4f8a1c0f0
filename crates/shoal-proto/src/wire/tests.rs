//! The wire encoding's tests: shapes, order, round trips.
use super::*;
use shoal_value::{ErrorCode, RangeVal, Record};
use std::sync::Arc;

fn rec(pairs: &[(&str, Value)]) -> Record {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), v.clone()))
        .collect()
}

#[test]
fn encoding_table() {
    let dt: jiff::Zoned = "2026-03-01T12:30:00+01:00[+01:00]".parse().unwrap();
    let cases: Vec<(Value, Json)> = vec![
        (Value::Null, json!({"$":"null"})),
        (Value::Bool(true), json!({"$":"bool","v":true})),
        (Value::Int(42), json!({"$":"int","v":42})),
        (Value::Float(3.5), json!({"$":"float","v":3.5})),
        (Value::Float(f64::NAN), json!({"$":"float","v":null})),
        (Value::str("hi"), json!({"$":"str","v":"hi"})),
        (Value::Size(4096), json!({"$":"size","v":4096})),
        (
            Value::Duration(1_000_000),
            json!({"$":"duration","v":1000000}),
        ),
        (
            Value::bytes(b"ab".to_vec()),
            json!({"$":"bytes","v":"YWI="}),
        ),
        (Value::path("/tmp/x"), json!({"$":"path","v":"/tmp/x"})),
        (Value::Time(3661), json!({"$":"time","v":"01:01:01"})),
        (
            Value::DateTime(Arc::new(dt)),
            json!({"$":"datetime","v":"2026-03-01T12:30:00+01:00"}),
        ),
        (
            Value::Range(RangeVal {
                start: 1,
                end: 3,
                inclusive: false,
            }),
            json!({"$":"range","start":1,"end":3,"inclusive":false}),
        ),
        (
            Value::list(vec![Value::Int(1)]),
            json!({"$":"list","v":[{"$":"int","v":1}]}),
        ),
        (
            Value::Error(Arc::new(ShoalError::new(
                ErrorCode::DivZero,
                "division by zero",
            ))),
            json!({"$":"error","code":"div_zero","msg":"division by zero"}),
        ),
    ];
    for (v, want) in cases {
        assert_eq!(encode(&v), want, "{v:?}");
    }
}

#[test]
fn records_and_tables_keep_insertion_order() {
    let r = Value::record(rec(&[("zeta", Value::Int(1)), ("alpha", Value::Int(2))]));
    let s = serde_json::to_string(&encode(&r)).unwrap();
    assert!(s.find("zeta").unwrap() < s.find("alpha").unwrap(), "{s}");

    let rows = vec![
        Arc::new(rec(&[("name", Value::str("a")), ("size", Value::Size(1))])),
        Arc::new(rec(&[
            ("name", Value::str("b")),
            ("extra", Value::Bool(true)),
        ])),
    ];
    let t = encode(&Value::Table(Arc::new(rows)));
    assert_eq!(t["n"], json!(2));
    let cols: Vec<&String> = t["cols"].as_object().unwrap().keys().collect();
    assert_eq!(cols, ["name", "size", "extra"]);
    assert_eq!(t["cols"]["extra"][0], json!({"$":"null"}));
    assert_eq!(t["cols"]["size"][1], json!({"$":"null"}));
}

#[test]
fn outcome_out_from_stdout() {
    let o = Outcome {
        status: Some(0),
        ok: true,
        signal: None,
        dur_ns: 5,
        pid: 9,
        cmd: "echo".into(),
        stdout: shoal_value::OutputBytes::from(&b"hello\n"[..]),
        stderr: shoal_value::OutputBytes::from(&b""[..]),
        out: None,
        span: None,
        truncated: false,
        typed: None,
    };
    let mut o = o;
    let j = encode(&Value::Outcome(Arc::new(Outcome {
        stdout: o.stdout.clone(),
        stderr: o.stderr.clone(),
        cmd: o.cmd.clone(),
        signal: None,
        out: None,
        typed: None,
        ..o
    })));
    // An unknown span is absent, not null (scenario 13)...
    assert!(
        j.as_object().is_some_and(|m| !m.contains_key("span")),
        "{j}"
    );
    o = Outcome {
        span: Some(shoal_lang::ast::Span { start: 0, end: 14 }),
        ..o
    };
    // ...and a known one travels and decodes back.
    let j2 = encode(&Value::Outcome(Arc::new(o)));
    assert_eq!(j2["span"], json!({"start": 0, "end": 14}));
    assert_eq!(encode(&decode(&j2).expect("decodes")), j2);
    assert_eq!(j["out"], json!({"$":"str","v":"hello"}));
    assert_eq!(j["ok"], json!(true));
    assert_eq!(
        stdout_value(b"{\"b\":1,\"a\":[2]}"),
        json!({"$":"record","v":{"b":{"$":"int","v":1},"a":{"$":"list","v":[{"$":"int","v":2}]}}})
    );
}

mod props {
    use super::super::*;
    use proptest::prelude::*;
    use shoal_value::{RangeVal, Record};
    use std::sync::Arc;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::Float),
            ".{0,12}".prop_map(Value::str),
            any::<u64>().prop_map(Value::Size),
            any::<i64>().prop_map(Value::Duration),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::bytes),
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(|b| {
                use std::os::unix::ffi::OsStringExt;
                Value::os_path(std::ffi::OsString::from_vec(b))
            }),
            (0u32..86_400).prop_map(Value::Time),
            (-1_000_000_000i64..4_000_000_000, -50_400i32..50_400).prop_map(|(secs, off)| {
                let off = jiff::tz::Offset::from_seconds(off / 60 * 60).unwrap();
                let ts = jiff::Timestamp::from_second(secs).unwrap();
                Value::DateTime(Arc::new(ts.to_zoned(jiff::tz::TimeZone::fixed(off))))
            }),
            (any::<i64>(), any::<i64>(), any::<bool>()).prop_map(|(start, end, inclusive)| {
                Value::Range(RangeVal {
                    start,
                    end,
                    inclusive,
                })
            }),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(3, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::list),
                proptest::collection::vec(("[a-z]{1,6}", inner.clone()), 0..6).prop_map(|kv| {
                    Value::record(
                        kv.into_iter()
                            .map(|(k, v)| (k.into(), v))
                            .collect::<Record>(),
                    )
                }),
                proptest::collection::vec(
                    proptest::collection::vec(("[a-c]{1,2}", inner), 0..4),
                    0..5
                )
                .prop_map(|rows| {
                    // Non-null cells only: a null cell and a missing one encode alike.
                    Value::Table(Arc::new(
                        rows.into_iter()
                            .map(|r| {
                                Arc::new(
                                    r.into_iter()
                                        .filter(|(_, v)| !matches!(v, Value::Null))
                                        .map(|(k, v)| (k.into(), v))
                                        .collect::<Record>(),
                                )
                            })
                            .collect(),
                    ))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// encode → JSON text → parse → decode → encode is the identity.
        #[test]
        fn wire_round_trip(v in value()) {
            let j = encode(&v);
            let text = serde_json::to_string(&j).unwrap();
            let back: Json = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &j);
            let d = decode(&back).expect("decodes");
            prop_assert_eq!(encode(&d), j);
        }

        /// Any path byte string round-trips; non-UTF-8 ones carry `raw`.
        #[test]
        fn paths_round_trip(b in proptest::collection::vec(any::<u8>(), 0..512)) {
            use std::os::unix::ffi::{OsStrExt, OsStringExt};
            let v = Value::os_path(std::ffi::OsString::from_vec(b.clone()));
            let j = encode(&v);
            prop_assert_eq!(j.get("raw").is_some(), std::str::from_utf8(&b).is_err());
            let Some(Value::Path(ref p)) = decode(&j) else { panic!("path") };
            prop_assert_eq!(p.as_os_str().as_bytes(), &b[..]);
        }
    }
}

#[test]
fn streamed_encoding_parses_to_the_tree_encoding() {
    use shoal_value::Record;
    let mut r = Record::new();
    r.insert("a \"q\"".into(), Value::Float(1.5));
    r.insert(
        "n".into(),
        Value::list(vec![Value::Null, Value::Bool(true), Value::Int(-3)]),
    );
    r.insert("s".into(), Value::str("line\nnext \u{1F600}"));
    r.insert("z".into(), Value::Size(4096));
    r.insert("d".into(), Value::Duration(-5));
    r.insert("f".into(), Value::Float(f64::NAN));
    let v = Value::list(vec![Value::record(r), Value::str(""), Value::list(vec![])]);
    let streamed: Json = serde_json::from_slice(&super::encode_to_vec(&v)).unwrap();
    assert_eq!(streamed, super::encode(&v));
    assert_eq!(super::encoded_len(&v), super::encode_to_vec(&v).len());
}
