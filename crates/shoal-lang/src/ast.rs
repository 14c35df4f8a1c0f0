//! The syntax tree of the Shoal language.
//!
//! Produced by the parser (`lang::parse`), consumed by the evaluator
//! (`lang::eval`). Every node carries a byte span into the source. The tree is
//! plain data: no evaluation state, no interior mutability, cheap to share
//! (`Arc`) between a closure value and the program it came from.

use std::sync::Arc;

pub use shoal_value::code::{BinOp, Span, UnOp};

use serde::{Serialize, Serializer};

/// The AST serializes (the kernel `parse` method's `ast`) as plain nested JSON.
fn arc<T: Serialize, S: Serializer>(v: &Arc<T>, s: S) -> Result<S::Ok, S::Error> {
    (**v).serialize(s)
}

fn opt_arc<T: Serialize, S: Serializer>(v: &Option<Arc<T>>, s: S) -> Result<S::Ok, S::Error> {
    v.as_deref().serialize(s)
}

/// A whole program: a sequence of statements.
#[derive(Clone, Debug, Serialize)]
pub struct Program {
    pub stmts: Vec<Stmt>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub enum StmtKind {
    /// `let x = e`, `var x: int = e`, `export let ...`. `name` may be `_`.
    Let {
        name: String,
        mutable: bool,
        ty: Option<TypeAnn>,
        value: Expr,
        export: bool,
    },
    /// `fn name(...) { ... }` (optionally `export fn`).
    Fn {
        #[serde(serialize_with = "arc")]
        def: Arc<FnDef>,
        export: bool,
    },
    /// `alias name = command ...`
    Alias {
        name: String,
        #[serde(serialize_with = "arc")]
        command: Arc<Command>,
    },
    /// `use ./path/mod.shl`
    Use {
        path: String,
    },
    Return(Option<Expr>),
    Break,
    Continue,
    For {
        var: String,
        iter: Expr,
        body: Block,
    },
    While {
        cond: Expr,
        body: Block,
    },
    /// `x = e`, `x += e`, `env.NAME = e`.
    Assign {
        target: AssignTarget,
        op: AssignOp,
        value: Expr,
    },
    /// Any expression, commands included (`ExprKind::Command`).
    Expr(Expr),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum AssignTarget {
    Var(String),
    Env(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AssignOp {
    Set,
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Debug, Serialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub enum ExprKind {
    Literal(Literal),
    /// An interpolated string `"a {x} b"`; parts in order.
    Interp(Vec<InterpPart>),
    Ident(String),
    List(Vec<Expr>),
    /// Record literal; keys in source order (duplicates resolved by the evaluator:
    /// first position, last value).
    Record(Vec<(String, Expr)>),
    /// `{ stmts }` in expression position.
    Block(Block),
    Unary {
        op: UnOp,
        expr: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Range {
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
    },
    /// `recv.name` / `recv?.name`
    Field {
        recv: Box<Expr>,
        name: String,
        optional: bool,
    },
    /// `recv.name(args)` / `recv?.name(args)`; a trailing block is appended to
    /// `args` as a zero-parameter lambda by the parser.
    MethodCall {
        recv: Box<Expr>,
        name: String,
        args: Vec<Arg>,
        optional: bool,
    },
    /// `recv[index]`
    Index {
        recv: Box<Expr>,
        index: Box<Expr>,
    },
    /// `callee(args)`. When `callee` is an `Ident` the evaluator applies the
    /// special call resolution of docs/rules.md §4.
    Call {
        callee: Box<Expr>,
        args: Vec<Arg>,
    },
    /// `x => e`, `(a, b) => { ... }`, and implicit item lambdas (`.name > 1` as a
    /// whole argument), which use the parameter name [`ITEM_PARAM`].
    Lambda(#[serde(serialize_with = "arc")] Arc<FnDef>),
    If {
        cond: Box<Expr>,
        then: Block,
        otherwise: Option<Box<Expr>>,
    },
    Match {
        scrutinee: Box<Expr>,
        arms: Vec<MatchArm>,
    },
    /// `try { body } catch [name] { handler }`
    Try {
        body: Block,
        name: Option<String>,
        handler: Block,
    },
    /// Postfix `expr catch [name] handler`
    Catch {
        expr: Box<Expr>,
        name: Option<String>,
        handler: Box<Expr>,
    },
    /// `with cwd: e, env: e, reef: e { body }`
    With {
        cwd: Option<Box<Expr>>,
        env: Option<Box<Expr>>,
        reef: Option<Box<Expr>>,
        body: Block,
    },
    /// `spawn { body }`
    Spawn(Block),
    /// A command (CMD-mode statement, `(cmd args)` substitution, `.feed(cmd)` argument).
    Command(#[serde(serialize_with = "arc")] Arc<Command>),
    /// `sh { ... }`, `python3 '''...'''`.
    InterpBlock {
        tool: String,
        program: String,
    },
    /// `sh { … } &`, `(cmd args) &`: a session task running the expression.
    Background(Box<Expr>),
    /// A parenthesised expression. Grouping creates no semantic node: the evaluator
    /// treats `Group(e)` as `e` (so `(^false)` as a statement still raises).
    Group(Box<Expr>),
}

/// The parameter name of implicit item lambdas (`.where(.a > 1)`); it cannot be
/// written in source because `$` is not an identifier character.
pub const ITEM_PARAM: &str = "$item";

#[derive(Clone, Debug, Serialize)]
pub enum InterpPart {
    Lit(String),
    Expr(Expr),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Bytes.
    Size(u64),
    /// Nanoseconds.
    Duration(i64),
    /// Seconds since midnight.
    Time(u32),
    /// `re"..."`: the source; compiled at evaluation (`arg_error` if invalid).
    Regex(String),
    /// `t"..."`: the text; parsed at evaluation (`arg_error` if invalid).
    DateTime(String),
}

/// A call argument: positional (`name == None`) or named (`name: value`).
#[derive(Clone, Debug, Serialize)]
pub struct Arg {
    pub name: Option<String>,
    pub value: Expr,
}

/// A function or lambda definition.
#[derive(Clone, Debug, Serialize)]
pub struct FnDef {
    /// `Some` for `fn NAME`, `None` for lambdas.
    pub name: Option<String>,
    pub params: Vec<Param>,
    /// `...rest[: type]`
    pub rest: Option<Param>,
    pub ret: Option<TypeAnn>,
    pub body: FnBody,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub enum FnBody {
    Block(Block),
    Expr(Box<Expr>),
}

#[derive(Clone, Debug, Serialize)]
pub struct Param {
    pub name: String,
    pub ty: Option<TypeAnn>,
    pub default: Option<Expr>,
}

/// `NAME [< T, ... >] [?]`
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TypeAnn {
    pub name: String,
    pub args: Vec<TypeAnn>,
    pub optional: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatchArm {
    /// Alternatives (`p1 | p2`); at least one.
    pub patterns: Vec<Pattern>,
    pub guard: Option<Expr>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Pattern {
    /// `_`
    Wildcard,
    /// `name` (also a bare type name such as `int`, and `null` per docs/rules.md §3
    /// may be parsed either way).
    Bind(String),
    /// `true`, `false`, integer or string literal (and `null` if treated as literal).
    Literal(Literal),
    /// `a..b`, `a..=b` with int literals.
    Range {
        start: i64,
        end: i64,
        inclusive: bool,
    },
    /// `TYPE name` / `TYPE _`
    Type { ty: String, bind: Option<String> },
    /// `{f, g: subpattern}`: `None` binds the field to its own name.
    Record(Vec<(String, Option<Pattern>)>),
    /// `[p1, p2]` or `[p1, ...rest]` (`rest: Some(None)` for `...` / `..._`).
    List {
        items: Vec<Pattern>,
        rest: Option<Option<String>>,
    },
}

/// A command in CMD mode (docs/rules.md §8).
#[derive(Clone, Debug, Serialize)]
pub struct Command {
    /// `NAME=value` prefixes.
    pub env: Vec<(String, Word)>,
    /// `^head`: forced external.
    pub forced: bool,
    pub head: Word,
    pub args: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Trailing `&`.
    pub background: bool,
    /// Trailing `{ ... }` block: a zero-parameter lambda appended as the last argument.
    #[serde(serialize_with = "opt_arc")]
    pub block: Option<Arc<FnDef>>,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub struct Word {
    pub kind: WordKind,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize)]
pub enum WordKind {
    /// A plain word: a string argument.
    Plain(String),
    /// `~/x`, `./x`, `../x`, `/x`, `~`: a path argument (text as written; `~` is
    /// expanded by the evaluator).
    Path(String),
    /// A word containing `* ? [ ]`: a glob, expanded by the evaluator.
    Glob(String),
    /// A quoted string (possibly interpolated) or `(expr)`: its value.
    Expr(Expr),
    /// `--name`, `--name=value`, `--name= <next>`; `-` in the name already became `_`.
    LongFlag {
        name: String,
        value: Option<Box<Word>>,
    },
    /// `-abc` (the text without the leading dash).
    ShortFlags(String),
    /// `--`
    EndOfFlags,
    /// `-`
    Dash,
}

#[derive(Clone, Debug, Serialize)]
pub struct Redirect {
    pub kind: RedirectKind,
    pub target: Word,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RedirectKind {
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `<`
    In,
}

/// The head text of an alias command.
pub fn word_text(w: &WordKind) -> String {
    match w {
        WordKind::Plain(s) | WordKind::Path(s) | WordKind::Glob(s) => s.clone(),
        WordKind::LongFlag { name, .. } => format!("--{name}"),
        WordKind::ShortFlags(s) => format!("-{s}"),
        WordKind::EndOfFlags => "--".to_string(),
        WordKind::Dash => "-".to_string(),
        WordKind::Expr(_) => "(expr)".to_string(),
    }
}

impl shoal_value::Code for Command {
    fn render(&self) -> String {
        format!("command({})", word_text(&self.head.kind))
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}
