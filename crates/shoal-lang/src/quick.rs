//! Quick programs: the class of programs whose evaluation is bounded by the
//! size of their source, so a host may run them on a thread that must never
//! block (the daemon answers them on the connection's arbiter instead of
//! handing them to the session's worker thread: docs/rules.md §1).
//!
//! A program is quick when it is one expression statement built only from
//! scalar literals (null, booleans, numbers, sizes, durations, times), names
//! bound to such scalars, unary and binary operators, and list or record
//! literals of those; at most [`MAX_NODES`] nodes and [`MAX_DEPTH`] levels.
//! No calls, methods, fields, indexing, ranges, strings, blocks or commands:
//! over scalars every operator is O(1), so the whole evaluation is O(source)
//! and cannot recurse, spawn, wait, allocate without bound or touch the
//! system. Whatever is not provably quick is simply not quick.

use crate::ast::{ExprKind, Literal, Program, StmtKind};
use crate::scope::ScopeRef;
use shoal_value::Value;

/// Longest source considered (longer programs are never quick).
pub const MAX_SRC: usize = 256;
/// Most syntax nodes in a quick program.
pub const MAX_NODES: usize = 64;
/// Deepest nesting of a quick program.
pub const MAX_DEPTH: usize = 16;

/// A cheap test on the text alone, before parsing: `false` means the program
/// is certainly not quick (too long, or a character no quick program has:
/// quotes, `$`, `~`, `/` starting a path, `;`-free shell syntax, ...).
pub fn may_be_quick(src: &str) -> bool {
    src.len() <= MAX_SRC
        && !src.trim().is_empty()
        && src.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b' ' | b'\t'
                        | b'\n'
                        | b'_'
                        | b'.'
                        | b'+'
                        | b'-'
                        | b'*'
                        | b'/'
                        | b'%'
                        | b'<'
                        | b'>'
                        | b'='
                        | b'!'
                        | b'&'
                        | b'|'
                        | b'?'
                        | b'('
                        | b')'
                        | b'['
                        | b']'
                        | b'{'
                        | b'}'
                        | b','
                        | b':'
                )
        })
}

/// Whether `prog` is quick, with names resolved in `globals`.
pub fn is_quick(prog: &Program, globals: &ScopeRef) -> bool {
    let mut nodes = 0usize;
    match prog.stmts.as_slice() {
        [s] => match &s.kind {
            StmtKind::Expr(e) => expr_quick(&e.kind, globals, 0, &mut nodes),
            _ => false,
        },
        _ => false,
    }
}

fn expr_quick(e: &ExprKind, globals: &ScopeRef, depth: usize, nodes: &mut usize) -> bool {
    *nodes += 1;
    if *nodes > MAX_NODES || depth > MAX_DEPTH {
        return false;
    }
    let sub = |e: &ExprKind, nodes: &mut usize| expr_quick(e, globals, depth + 1, nodes);
    match e {
        ExprKind::Literal(l) => matches!(
            l,
            Literal::Null
                | Literal::Bool(_)
                | Literal::Int(_)
                | Literal::Float(_)
                | Literal::Size(_)
                | Literal::Duration(_)
                | Literal::Time(_)
        ),
        ExprKind::Ident(name) => globals.lookup(name).is_some_and(|v| scalar(&v)),
        ExprKind::Unary { expr, .. } => sub(&expr.kind, nodes),
        ExprKind::Group(e) => sub(&e.kind, nodes),
        ExprKind::Binary { lhs, rhs, .. } => sub(&lhs.kind, nodes) && sub(&rhs.kind, nodes),
        ExprKind::List(items) => items.iter().all(|i| sub(&i.kind, nodes)),
        ExprKind::Record(fields) => fields.iter().all(|(_, v)| sub(&v.kind, nodes)),
        _ => false,
    }
}

/// A value every operator handles in constant time.
fn scalar(v: &Value) -> bool {
    matches!(
        v,
        Value::Null
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Float(_)
            | Value::Size(_)
            | Value::Duration(_)
            | Value::Time(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Position, Session, SessionOptions};

    fn quick(s: &mut Session, src: &str) -> bool {
        may_be_quick(src)
            && s.prepare_exec(src, Position::Value)
                .map(|p| s.is_quick(&p))
                .unwrap_or(false)
    }

    #[test]
    fn constant_expressions_and_scalar_names_are_quick() {
        let mut s = Session::new(SessionOptions::default());
        s.exec("let x = 6", Position::Stmt).unwrap();
        s.exec("let xs = [1, 2]", Position::Stmt).unwrap();
        s.exec("let t = \"text\"", Position::Stmt).unwrap();
        for src in [
            "6 * 7",
            "null",
            "x * 7",
            "-(x + 1) / 2 >= 3 && !false",
            "[1, 2.5, null, 1kb, 3s]",
            "{a: 1, b: x}",
            "x ?? 0",
            "(x)",
        ] {
            assert!(quick(&mut s, src), "{src:?} should be quick");
        }
        for src in [
            "ls",
            "1 + 2\n3 * 4",
            "\"a\" * 1000000000",
            "t * 1000000000",
            "xs + xs",
            "xs.len()",
            "range(1, 1000000000).sum()",
            "let y = 1",
            "x = 2",
            "for i in [1] { i }",
            "{ 1 }",
            "f(1)",
            "(xs)",
            "nosuchname + 1",
            "1..1000000000",
            "out:1",
            &format!("{}1", "1 + ".repeat(40)),
            &format!("{}1{}", "(".repeat(20), ")".repeat(20)),
        ] {
            assert!(!quick(&mut s, src), "{src:?} must not be quick");
        }
    }
}
