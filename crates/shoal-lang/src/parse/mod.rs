//! Modal lexer and parser of the Shoal language (docs/rules.md §1, §2, §4, §6, §7, §8).
//!
//! The entry point is [`parse`]. Internally a single `parser::Parser` walks the
//! source; the grammar position decides whether the next token is lexed in EXPR
//! mode (`lexer.rs`, `strings.rs`) or in CMD mode (`cmd.rs`). Statement dispatch
//! and token plumbing live in `parser.rs`, statement forms in `stmt.rs`,
//! operators and postfix chains in `expr.rs`, bracketed primaries and lambdas in
//! `forms.rs`, `if`/`match`/`try`/`with` in `control.rs`, match patterns in
//! `pattern.rs`. The parser never panics and bounds both its recursion depth
//! (`MAX_DEPTH`, plus a stack budget) and operator-chain length.

use std::collections::HashSet;

use crate::ast::{Program, Span};

mod cmd;
mod control;
mod expr;
mod forms;
mod habits;
mod lexer;
mod parser;
mod pattern;
mod stmt;
mod strings;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cases;
#[cfg(test)]
mod tests_habits;

/// A syntax error with the span it points at and an optional teaching hint.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    pub msg: String,
    pub span: Span,
    pub hint: Option<String>,
}

/// A likely bash habit in valid Shoal: the program runs unchanged, and the
/// warning travels beside its result (`{code, message, span, hint}`).
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// Stable snake_case code (`dollar_in_string`, `builtin_in_chain`).
    pub code: &'static str,
    pub message: String,
    pub span: Span,
    /// The Shoal form that was probably meant.
    pub hint: String,
}

/// What the parser knows from earlier input of the same session.
#[derive(Clone, Debug, Default)]
pub struct ParseContext {
    /// Names value-bound at the session's top level by earlier `let`/`var`
    /// (statement dispatch, docs/rules.md §1: a value-bound identifier starts an expression).
    pub value_bound: HashSet<String>,
    /// Every top-level name bound by earlier input (values, functions,
    /// aliases): a bound name shadows a builtin, so no builtin-specific
    /// teaching applies to it.
    pub bound: HashSet<String>,
}

pub(crate) type PResult<T> = Result<T, ParseError>;

/// Maximum nesting depth of expressions, blocks and patterns.
pub(crate) const MAX_DEPTH: usize = 256;

/// Maximum length of one operator, postfix or `catch` chain (bounds the
/// depth of left-leaning trees, which are dropped and evaluated recursively).
pub(crate) const CHAIN_LIMIT: usize = 1000;

/// Stack bytes the parser may use below its entry frame before it reports
/// "nesting too deep" (keeps 2 MiB threads safe even in debug builds).
pub(crate) const STACK_BUDGET: usize = 1 << 20;

/// Parse a whole program. Never panics, whatever the input.
pub fn parse(src: &str, ctx: &ParseContext) -> Result<Program, ParseError> {
    parse_with_warnings(src, ctx).map(|(prog, _)| prog)
}

/// Parse a whole program and report the likely bash habits it contains
/// (sorted by position, one per span and code).
pub fn parse_with_warnings(
    src: &str,
    ctx: &ParseContext,
) -> Result<(Program, Vec<Warning>), ParseError> {
    let mut p = parser::Parser::new(src, ctx);
    if src.starts_with('\u{feff}') {
        p.pos = 3; // skip a UTF-8 byte order mark
    }
    let prog = p.parse_program()?;
    Ok((prog, p.take_warnings()))
}
