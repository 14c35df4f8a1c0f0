//! The evaluator's fast paths against the general paths beside them
//! (`SHOAL_NO_FAST_PATHS=1`): int operators (`ops::binary_int` against
//! `ops::binary`) and simple calls (parameters bound into a fresh frame
//! against `bind_params`), over generated programs; both must give the same
//! value or the same error.

use proptest::prelude::*;

use crate::session::{ExecError, Position, Session, SessionOptions};
use shoal_value::render;

fn run(src: &str, fast: bool) -> String {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = Session::new(SessionOptions {
        cwd: d.path().to_path_buf(),
        env: Vec::new(),
        ..Default::default()
    });
    s.set_fast_paths(fast);
    match s.exec(src, Position::Value) {
        Ok(v) => render::inline(&v),
        Err(ExecError::Parse(e)) => format!("!parse {e:?}"),
        Err(ExecError::Raised(e)) => format!("!{}: {}", e.code, e.msg),
    }
}

fn same(src: &str) -> Result<(), TestCaseError> {
    let fast = run(src, true);
    let general = run(src, false);
    prop_assert_eq!(&fast, &general, "{}", src);
    Ok(())
}

const OPS: &[&str] = &[
    "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "in", "??", "&&", "||",
];

/// An int as the language writes it (`i64::MIN` has no literal).
fn int(n: i64) -> String {
    match n {
        i64::MIN => "(-9223372036854775807 - 1)".into(),
        n if n < 0 => format!("({n})"),
        n => n.to_string(),
    }
}

/// Ints near the edges (overflow, zero divisors, `MIN % -1`) and anywhere,
/// with a few operands of other types.
fn operand() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            0i64, 1, -1, 2, -2, 7, i64::MAX, i64::MAX - 1, i64::MIN, i64::MIN + 1,
        ])
        .prop_map(int),
        4 => any::<i64>().prop_map(int),
        1 => prop::sample::select(vec!["1.5", "\"a\"", "null", "true", "[1, 2]", "2kb", "3s"])
            .prop_map(str::to_string),
    ]
}

/// A function or closure with one parameter shape, and a body that uses its
/// parameters (reads, reassigns, captures them).
const DEFS: &[&str] = &[
    "fn f(a, b) { [a, b] }",
    "fn f(a, b) { a = a + 1\n[a, b] }",
    "fn f(a, b) { let g = () => [b, a]\ng() }",
    "fn f(a, b) { let a = 9\n[a, b] }",
    "fn f(a, b = 2) { [a, b] }",
    "fn f(a: int, b: str) { [a, b] }",
    "fn f(a, xs: list<int>) { [a, xs] }",
    "fn f(a, ...rest) { [a, rest] }",
    "fn f(a) { if a == 0 { 0 } else { a + f(a - 1) } }",
    "fn f() { 1 }",
    "let f = (a, b) => [a, b]",
    "let f = (a) => a * 2",
    "let k = 3\nlet f = (a, b) => [a, b, k]",
];

const ARGS: &[&str] = &[
    "",
    "1",
    "1, 2",
    "1, 2, 3",
    "\"x\"",
    "1, \"x\"",
    "1, [2, 3]",
    "1, b: 5",
    "b: 5, a: 1",
    "1, [\"no\"]",
    "4",
];

/// Every int operator over every pair of edge values (overflow, zero
/// divisors, `MIN / -1`, `MIN % -1`): too rare to leave to chance.
#[test]
fn int_operators_agree_at_the_edges() {
    let edges = [0, 1, -1, 7, -7, i64::MAX, i64::MIN, i64::MIN + 1];
    for a in edges {
        for b in edges {
            for op in &OPS[..11] {
                same(&format!("let x = {}\nx {op} {}", int(a), int(b))).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn int_operators_agree(a in operand(), op in prop::sample::select(OPS), b in operand()) {
        // Literal operands, bound operands, and a chain (the result feeds
        // the next operator).
        same(&format!("{a} {op} {b}"))?;
        same(&format!("let x = {a}\nlet y = {b}\nx {op} y"))?;
        same(&format!("var x = {a}\nx = x {op} {b}\n[x, ({a}) {op} ({b}) {op} ({b})]"))?;
    }

    #[test]
    fn simple_calls_agree(
        def in prop::sample::select(DEFS),
        args in prop::sample::select(ARGS),
        each in any::<bool>(),
    ) {
        same(&format!("{def}\nf({args})"))?;
        if each {
            // One argument, through `map` (`call_closure1`).
            same(&format!("{def}\n[{args}].map(f)"))?;
        }
    }
}
