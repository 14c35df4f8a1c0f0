//! Values of any nesting depth (docs/protocol.md §10): built, rendered, encoded,
//! elided, compared, cloned and dropped on a thread with a small stack.

use std::sync::Arc;

use crate::{elide, wire};
use shoal_value::{json, ops, render, Outcome, Record, Value};

/// Run `f` on a thread whose stack is far too small for recursion per level.
fn small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no overflow, no panic");
}

fn deep_list(n: usize) -> Value {
    let mut x = Value::list(vec![]);
    for _ in 0..n {
        x = Value::list(vec![x]);
    }
    x
}

fn deep_record(n: usize) -> Value {
    let mut x = Value::Null;
    for i in 0..n {
        let mut r = Record::new();
        r.insert("k".into(), x);
        r.insert("i".into(), Value::Int(i as i64));
        x = Value::record(r);
    }
    x
}

fn deep_outcome(n: usize) -> Value {
    let mut x = Value::Int(1);
    for _ in 0..n {
        x = Value::Outcome(Arc::new(Outcome {
            status: Some(0),
            ok: true,
            signal: None,
            dur_ns: 0,
            pid: 0,
            cmd: "t".into(),
            stdout: Default::default(),
            stderr: Default::default(),
            out: Some(x),
            span: None,
            truncated: false,
            typed: None,
        }));
    }
    x
}

fn exercise(v: Value) {
    let inline = render::inline(&v);
    assert!(inline.len() < 10_000, "inline render is depth-bounded");
    let _ = render::block(&v, 80);
    let j = wire::encode(&v);
    let text = serde_json::to_vec(&j).expect("serializes");
    let streamed = wire::encode_to_vec(&v);
    let back: serde_json::Value =
        serde_json::from_slice(&streamed).expect("parses under serde's nesting limit");
    assert_eq!(back, j, "streamed and tree encodings agree");
    assert!(wire::decode(&back).is_some());
    assert!(text.len() < 100_000);
    let e = elide::elide(&v, &elide::Budget::default(), "shoal://session/s/out/1");
    assert!(serde_json::to_vec(&e).expect("serializes").len() < 65_536);
    let _ = json::stringify(&v);
    let c = v.clone();
    assert!(ops::equals(&v, &c));
    drop(c);
    drop(v);
}

#[test]
fn deep_lists_never_recurse() {
    small_stack(|| {
        exercise(deep_list(3000));
        exercise(deep_list(100_000));
        // Two distinct deep lists compare structurally, not by pointer.
        let (a, b) = (deep_list(100_000), deep_list(100_000));
        assert!(ops::equals(&a, &b));
        assert!(!ops::equals(&a, &deep_list(99_999)));
    });
}

#[test]
fn deep_records_and_outcomes_never_recurse() {
    small_stack(|| {
        exercise(deep_record(100_000));
        exercise(deep_outcome(100_000));
    });
}

#[test]
fn deep_refs_name_their_path() {
    let v = deep_list(wire::MAX_DEPTH + 3);
    let j = wire::encode_under(&v, "shoal://session/s/out/7");
    let mut cur = &j;
    for _ in 0..wire::MAX_DEPTH {
        cur = &cur["v"][0];
    }
    assert_eq!(cur["$"], "ref");
    let want = format!(
        "shoal://session/s/out/7?path={}",
        "[0]".repeat(wire::MAX_DEPTH)
    );
    assert_eq!(cur["uri"], want.as_str());
    // The path resolves to the container the ref stands for.
    let segs = crate::valpath::parse(&"[0]".repeat(wire::MAX_DEPTH)).expect("parses");
    let at = crate::valpath::apply(&v, &segs).expect("resolves");
    assert!(matches!(at, Value::List(_)));
}

#[test]
fn inline_render_marks_the_depth_cut() {
    let r = render::inline(&deep_list(render::MAX_DEPTH + 5));
    assert!(r.contains("[\u{2026}]"), "{r}");
    // Shallow values render exactly as before.
    assert_eq!(render::inline(&deep_list(2)), "[[[]]]");
}
