//! The few pieces of the language that values carry, defined here so that `value` never
//! depends on `lang`: byte spans, operators, and opaque handles to code (a closure's
//! definition with its captured scope, an alias's parsed command). This module renders and
//! compares those handles; it never looks inside or runs them: `lang` makes them and gets
//! its own type back with [`Code::as_any`].

use std::any::Any;
use std::sync::Arc;

pub use shoal_base::error::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum UnOp {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    And,
    Or,
    Coalesce,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::In => "in",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::Coalesce => "??",
        }
    }
}

/// Code a value carries (`Value::Closure`, `Value::Command`), opaque to `value`.
pub trait Code: Any + Send + Sync + std::fmt::Debug {
    /// The inline rendering: `fn name(a, b)`, `closure(a)`, `command(git)`.
    fn render(&self) -> String;
    /// The concrete type, for the language that made it.
    fn as_any(&self) -> &dyn Any;
    /// The concrete type behind a shared handle.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}
