//! Parser tests: a compact s-expression rendering of the AST, table-driven
//! cases per feature (source → rendering, or source → error substring), and
//! property tests that `parse` never panics on arbitrary input.

use super::{parse, ParseContext};
use crate::ast::*;

fn lit(l: &Literal) -> String {
    match l {
        Literal::Null => "null".into(),
        Literal::Bool(b) => b.to_string(),
        Literal::Int(i) => i.to_string(),
        Literal::Float(f) => format!("{f:?}f"),
        Literal::Str(s) => format!("{s:?}"),
        Literal::Size(b) => format!("{b}B"),
        Literal::Duration(n) => format!("{n}ns"),
        Literal::Time(s) => format!("time({s})"),
        Literal::Regex(r) => format!("re{r:?}"),
        Literal::DateTime(t) => format!("dt{t:?}"),
    }
}

fn ty(t: &TypeAnn) -> String {
    let mut s = t.name.clone();
    if !t.args.is_empty() {
        s.push('<');
        s.push_str(&t.args.iter().map(ty).collect::<Vec<_>>().join(","));
        s.push('>');
    }
    if t.optional {
        s.push('?');
    }
    s
}

fn block(b: &Block) -> String {
    let mut s = "(block".to_string();
    for st in &b.stmts {
        s.push(' ');
        s.push_str(&stmt(st));
    }
    s.push(')');
    s
}

fn params(d: &FnDef) -> String {
    let mut ps: Vec<String> = d
        .params
        .iter()
        .map(|p| {
            let mut s = p.name.clone();
            if let Some(t) = &p.ty {
                s = format!("{s}:{}", ty(t));
            }
            if let Some(d) = &p.default {
                s = format!("{s}={}", expr(d));
            }
            s
        })
        .collect();
    if let Some(r) = &d.rest {
        ps.push(format!("...{}", r.name));
    }
    let mut s = format!("({})", ps.join(" "));
    if let Some(r) = &d.ret {
        s = format!("{s}->{}", ty(r));
    }
    s
}

fn body(b: &FnBody) -> String {
    match b {
        FnBody::Block(b) => block(b),
        FnBody::Expr(e) => expr(e),
    }
}

fn args(a: &[Arg]) -> String {
    a.iter()
        .map(|a| match &a.name {
            Some(n) => format!(" {n}={}", expr(&a.value)),
            None => format!(" {}", expr(&a.value)),
        })
        .collect()
}

fn pat(p: &Pattern) -> String {
    match p {
        Pattern::Wildcard => "_".into(),
        Pattern::Bind(n) => n.clone(),
        Pattern::Literal(l) => lit(l),
        Pattern::Range {
            start,
            end,
            inclusive,
        } => {
            format!("{start}{}{end}", if *inclusive { "..=" } else { ".." })
        }
        Pattern::Type { ty, bind } => format!("({ty} {})", bind.as_deref().unwrap_or("_")),
        Pattern::Record(fs) => {
            let f: Vec<String> = fs
                .iter()
                .map(|(k, p)| match p {
                    Some(p) => format!("{k}:{}", pat(p)),
                    None => k.clone(),
                })
                .collect();
            format!("{{{}}}", f.join(" "))
        }
        Pattern::List { items, rest } => {
            let mut f: Vec<String> = items.iter().map(pat).collect();
            match rest {
                Some(Some(n)) => f.push(format!("...{n}")),
                Some(None) => f.push("...".into()),
                None => {}
            }
            format!("[{}]", f.join(" "))
        }
    }
}

fn word(w: &Word) -> String {
    match &w.kind {
        WordKind::Plain(t) => t.clone(),
        WordKind::Path(t) => format!("p:{t}"),
        WordKind::Glob(t) => format!("g:{t}"),
        WordKind::Expr(e) => expr(e),
        WordKind::LongFlag { name, value: None } => format!("--{name}"),
        WordKind::LongFlag {
            name,
            value: Some(v),
        } => format!("--{name}={}", word(v)),
        WordKind::ShortFlags(f) => format!("-{f}"),
        WordKind::EndOfFlags => "<-->".into(),
        WordKind::Dash => "<->".into(),
    }
}

fn command(c: &Command) -> String {
    let mut s = "(cmd".to_string();
    for (k, v) in &c.env {
        s.push_str(&format!(" {k}={}", word(v)));
    }
    if c.forced {
        s.push_str(" ^");
    }
    s.push(' ');
    s.push_str(&word(&c.head));
    for a in &c.args {
        s.push(' ');
        s.push_str(&word(a));
    }
    for r in &c.redirects {
        let op = match r.kind {
            RedirectKind::Out => ">",
            RedirectKind::Append => ">>",
            RedirectKind::In => "<",
        };
        s.push_str(&format!(" {op}{}", word(&r.target)));
    }
    if c.background {
        s.push_str(" &");
    }
    if let Some(b) = &c.block {
        s.push(' ');
        s.push_str(&body(&b.body));
    }
    s.push(')');
    s
}

fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Literal(l) => lit(l),
        ExprKind::Interp(parts) => {
            let p: Vec<String> = parts
                .iter()
                .map(|p| match p {
                    InterpPart::Lit(s) => format!("{s:?}"),
                    InterpPart::Expr(e) => expr(e),
                })
                .collect();
            format!("(interp {})", p.join(" "))
        }
        ExprKind::Ident(n) => n.clone(),
        ExprKind::List(items) => {
            format!("[{}]", items.iter().map(expr).collect::<Vec<_>>().join(" "))
        }
        ExprKind::Record(fs) => {
            let f: Vec<String> = fs.iter().map(|(k, v)| format!("{k}:{}", expr(v))).collect();
            format!("{{{}}}", f.join(" "))
        }
        ExprKind::Block(b) => block(b),
        ExprKind::Unary { op, expr: x } => {
            format!(
                "({} {})",
                if *op == UnOp::Not { "!" } else { "neg" },
                expr(x)
            )
        }
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.symbol(), expr(lhs), expr(rhs))
        }
        ExprKind::Range {
            start,
            end,
            inclusive,
        } => {
            format!(
                "({} {} {})",
                if *inclusive { "..=" } else { ".." },
                expr(start),
                expr(end)
            )
        }
        ExprKind::Field {
            recv,
            name,
            optional,
        } => {
            format!(
                "({}{name} {})",
                if *optional { "?." } else { "." },
                expr(recv)
            )
        }
        ExprKind::MethodCall {
            recv,
            name,
            args: a,
            optional,
        } => {
            format!(
                "({}{name}() {}{})",
                if *optional { "?." } else { "." },
                expr(recv),
                args(a)
            )
        }
        ExprKind::Index { recv, index } => format!("(idx {} {})", expr(recv), expr(index)),
        ExprKind::Call { callee, args: a } => format!("(call {}{})", expr(callee), args(a)),
        ExprKind::Lambda(d) => format!("(fn {} {})", params(d), body(&d.body)),
        ExprKind::If {
            cond,
            then,
            otherwise,
        } => match otherwise {
            Some(o) => format!("(if {} {} {})", expr(cond), block(then), expr(o)),
            None => format!("(if {} {})", expr(cond), block(then)),
        },
        ExprKind::Match { scrutinee, arms } => {
            let mut s = format!("(match {}", expr(scrutinee));
            for a in arms {
                let ps: Vec<String> = a.patterns.iter().map(pat).collect();
                s.push_str(&format!(" ({}", ps.join("|")));
                if let Some(g) = &a.guard {
                    s.push_str(&format!(" if {}", expr(g)));
                }
                s.push_str(&format!(" => {})", expr(&a.body)));
            }
            s.push(')');
            s
        }
        ExprKind::Try {
            body: b,
            name,
            handler,
        } => {
            format!(
                "(try {} {} {})",
                block(b),
                name.as_deref().unwrap_or("_"),
                block(handler)
            )
        }
        ExprKind::Catch {
            expr: x,
            name,
            handler,
        } => {
            format!(
                "(catch {} {} {})",
                expr(x),
                name.as_deref().unwrap_or("_"),
                expr(handler)
            )
        }
        ExprKind::With {
            cwd,
            env,
            reef,
            body: b,
        } => {
            let mut s = "(with".to_string();
            for (k, v) in [("cwd", cwd), ("env", env), ("reef", reef)] {
                if let Some(v) = v {
                    s.push_str(&format!(" {k}={}", expr(v)));
                }
            }
            format!("{s} {})", block(b))
        }
        ExprKind::Spawn(b) => format!("(spawn {})", block(b)),
        ExprKind::Background(e) => format!("({} &)", expr(e)),
        ExprKind::Command(c) => command(c),
        ExprKind::InterpBlock { tool, program } => format!("({tool}! {program:?})"),
        ExprKind::Group(x) => format!("(grp {})", expr(x)),
    }
}

fn stmt(s: &Stmt) -> String {
    match &s.kind {
        StmtKind::Let {
            name,
            mutable,
            ty: t,
            value,
            export,
        } => {
            let kw = if *mutable { "var" } else { "let" };
            let ex = if *export { "export " } else { "" };
            let t = t
                .as_ref()
                .map(|t| format!(":{}", ty(t)))
                .unwrap_or_default();
            format!("({ex}{kw} {name}{t} {})", expr(value))
        }
        StmtKind::Fn { def, export } => format!(
            "({}defn {} {} {})",
            if *export { "export " } else { "" },
            def.name.as_deref().unwrap_or("?"),
            params(def),
            body(&def.body)
        ),
        StmtKind::Alias { name, command: c } => format!("(alias {name} {})", command(c)),
        StmtKind::Use { path } => format!("(use {path})"),
        StmtKind::Return(e) => match e {
            Some(e) => format!("(return {})", expr(e)),
            None => "(return)".into(),
        },
        StmtKind::Break => "(break)".into(),
        StmtKind::Continue => "(continue)".into(),
        StmtKind::For { var, iter, body: b } => format!("(for {var} {} {})", expr(iter), block(b)),
        StmtKind::While { cond, body: b } => format!("(while {} {})", expr(cond), block(b)),
        StmtKind::Assign { target, op, value } => {
            let t = match target {
                AssignTarget::Var(n) => n.clone(),
                AssignTarget::Env(n) => format!("env.{n}"),
            };
            let op = match op {
                AssignOp::Set => "=",
                AssignOp::Add => "+=",
                AssignOp::Sub => "-=",
                AssignOp::Mul => "*=",
                AssignOp::Div => "/=",
            };
            format!("({op} {t} {})", expr(value))
        }
        StmtKind::Expr(e) => expr(e),
    }
}

/// Render a program; errors render as `ERR: msg`.
pub(super) fn render(src: &str) -> String {
    render_ctx(src, &ParseContext::default())
}

pub(super) fn render_ctx(src: &str, ctx: &ParseContext) -> String {
    match parse(src, ctx) {
        Ok(p) => p.stmts.iter().map(stmt).collect::<Vec<_>>().join(" ; "),
        Err(e) => format!("ERR: {}", e.msg),
    }
}

pub(super) fn check(cases: &[(&str, &str)]) {
    let mut bad = Vec::new();
    for (src, want) in cases {
        let got = render(src);
        if got != *want {
            bad.push(format!("src:  {src:?}\nwant: {want}\ngot:  {got}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} failures:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}

pub(super) fn check_err(cases: &[(&str, &str)]) {
    let mut bad = Vec::new();
    for (src, want) in cases {
        match parse(src, &ParseContext::default()) {
            Ok(_) => bad.push(format!(
                "src: {src:?} parsed, want error {want:?}: {}",
                render(src)
            )),
            Err(e) if !e.msg.contains(want) => bad.push(format!(
                "src: {src:?}\nwant error containing {want:?}\ngot: {:?}",
                e.msg
            )),
            Err(_) => {}
        }
    }
    assert!(
        bad.is_empty(),
        "{} failures:\n{}",
        bad.len(),
        bad.join("\n\n")
    );
}
