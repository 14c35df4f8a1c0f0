//! The kernel's context-free `parse` and `complete` methods (docs/rules.md
//! §18): both answer before `session.attach` and touch no session.
//!
//! `parse` returns the serialized syntax tree. The tree is written through a
//! writer that bounds both its size and its nesting, so a hostile program can
//! neither exhaust memory nor overflow a stack while its tree is turned into
//! JSON; the work runs on a thread of its own, off the connection's.

use std::collections::BTreeSet;
use std::io;

use serde_json::{json, Map, Value as Json};

use super::kernel;
use super::rpc::RpcError;
use crate::lang::{parse, ParseContext};

/// The `ast_version` of the serialized [`crate::lang::ast::Program`].
pub const AST_VERSION: u64 = 2;
/// Bytes of serialized syntax tree one `parse` may return.
pub const MAX_AST_BYTES: usize = 16 << 20;
/// JSON nesting of the serialized syntax tree at most.
pub const MAX_AST_DEPTH: usize = 2048;
/// Candidates one `complete` returns at most.
pub const MAX_CANDIDATES: usize = 1000;
/// Stack of the thread a `parse` runs on.
const PARSE_STACK: usize = 64 << 20;

/// The fixed keyword and builtin list `complete` offers.
const WORDS: &[&str] = &[
    "let", "var", "fn", "alias", "use", "export", "return", "break", "continue", "if", "else",
    "match", "for", "in", "while", "try", "catch", "true", "false", "null", "spawn", "with", "sh",
    "ls", "cd", "pwd", "cp", "mv", "rm", "mkdir", "cat", "echo", "run", "parallel", "pick",
    "interact", "explain",
];

/// `{src}` from the params; `-32602` otherwise.
fn src_param(p: &Map<String, Json>, method: &str) -> Result<String, RpcError> {
    match p.get("src") {
        Some(Json::String(s)) => Ok(s.clone()),
        _ => Err(RpcError::invalid_params(format!(
            "{method} requires src (a string)"
        ))),
    }
}

/// `parse {src}` → `{ast_version, ast}`, or `-32001` with `{span, hint}`. Blocking: runs the
/// parse on its own thread and waits for it (call it off the connection's executor, or
/// through [`parse_async`]).
pub fn parse_method(p: &Map<String, Json>) -> Result<Json, RpcError> {
    let src = src_param(p, "parse")?;
    parse_src(&src)
}

/// [`parse_method`] without blocking the caller: the parse runs on a fresh thread.
pub fn parse_async(
    p: &Map<String, Json>,
) -> impl std::future::Future<Output = Result<Json, RpcError>> {
    let src = src_param(p, "parse");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = src.map(|src| {
        std::thread::Builder::new()
            .name("shoal-parse".into())
            .stack_size(PARSE_STACK)
            .spawn(move || {
                let _ = tx.send(parse_tree(&src));
            })
    });
    async move {
        match spawned? {
            Ok(_) => rx
                .await
                .map_err(|_| RpcError::internal("the parse thread ended without an answer"))?,
            Err(e) => Err(RpcError::internal(format!(
                "cannot start a parse thread: {e}"
            ))),
        }
    }
}

/// Parse on a thread with a known stack (the tree's drop and serialization recurse).
fn parse_src(src: &str) -> Result<Json, RpcError> {
    let src = src.to_string();
    std::thread::Builder::new()
        .name("shoal-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || parse_tree(&src))
        .map_err(|e| RpcError::internal(format!("cannot start a parse thread: {e}")))?
        .join()
        .map_err(|_| RpcError::internal("the parse thread panicked"))?
}

fn parse_tree(src: &str) -> Result<Json, RpcError> {
    let program = parse(src, &ParseContext::default()).map_err(|e| kernel::parse_error(&e))?;
    let mut w = BoundedJson::default();
    if let Err(e) = serde_json::to_writer(&mut w, &program) {
        return Err(match w.exceeded {
            Some(why) => {
                RpcError::invalid_params(format!("the syntax tree is too large to return ({why})"))
            }
            None => RpcError::internal(format!("cannot serialize the syntax tree: {e}")),
        });
    }
    // Within the bounds: the tree becomes a value of bounded size and depth.
    let ast = serde_json::to_value(&program)
        .map_err(|e| RpcError::internal(format!("cannot serialize the syntax tree: {e}")))?;
    Ok(json!({"ast_version": AST_VERSION, "ast": ast}))
}

/// A sink for serialized JSON that fails once the text passes [`MAX_AST_BYTES`] or nests
/// deeper than [`MAX_AST_DEPTH`]: the serializer stops at the first failed write, before it
/// recurses any further.
#[derive(Default)]
struct BoundedJson {
    len: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    exceeded: Option<String>,
}

impl io::Write for BoundedJson {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.len += buf.len();
        if self.len > MAX_AST_BYTES {
            self.exceeded = Some(format!("over {MAX_AST_BYTES} bytes"));
            return Err(io::Error::other("too large"));
        }
        for &b in buf {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_AST_DEPTH {
                        self.exceeded = Some(format!("nested over {MAX_AST_DEPTH} levels"));
                        return Err(io::Error::other("too deep"));
                    }
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `complete {src, cursor?}` → `{candidates}`: the keyword/builtin list plus the names bound
/// by `let`/`var`/`fn`/`alias` before the cursor, filtered by the identifier prefix just left
/// of it; sorted, de-duplicated, at most [`MAX_CANDIDATES`]. The cursor is a byte offset
/// (default: the end), clamped to the source and moved back to a character boundary.
pub fn complete_method(p: &Map<String, Json>) -> Result<Json, RpcError> {
    let src = src_param(p, "complete")?;
    let cursor = match p.get("cursor") {
        None | Some(Json::Null) => src.len(),
        Some(v) => match v.as_u64() {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => {
                return Err(RpcError::invalid_params(
                    "cursor must be a non-negative integer (a byte offset)",
                ))
            }
        },
    };
    Ok(json!({"candidates": complete(&src, cursor)}))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The candidates for `src` with the cursor at byte `cursor`.
pub fn complete(src: &str, cursor: usize) -> Vec<String> {
    let mut cursor = cursor.min(src.len());
    while !src.is_char_boundary(cursor) {
        cursor -= 1;
    }
    let before = &src[..cursor];
    let prefix_start = before
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_ident(c))
        .last()
        .map_or(cursor, |(i, _)| i);
    let prefix = &before[prefix_start..];
    let mut names: BTreeSet<&str> = WORDS.iter().copied().collect();
    // Words before the prefix; a binder keyword makes the next word a name.
    let mut binder = false;
    for word in before[..prefix_start]
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
    {
        if binder && !word.starts_with(|c: char| c.is_ascii_digit()) {
            names.insert(word);
        }
        binder = matches!(word, "let" | "var" | "fn" | "alias");
    }
    names
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .take(MAX_CANDIDATES)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn parse_returns_the_tree_or_the_error_with_its_span() {
        let ok = parse_method(&params(json!({"src": "let x = 1 + 2\nx * 3"}))).unwrap();
        assert_eq!(ok["ast_version"], json!(2));
        let stmts = ok["ast"]["stmts"].as_array().unwrap();
        assert_eq!(stmts.len(), 2);
        assert!(
            ok["ast"]["stmts"][0]["kind"]["Let"]["name"] == json!("x"),
            "{ok}"
        );
        let e = parse_method(&params(json!({"src": "let = 5"}))).unwrap_err();
        assert_eq!(e.code, -32001);
        let span = &e.data.as_ref().unwrap()["span"];
        assert!(span["start"].as_u64().unwrap() <= span["end"].as_u64().unwrap());
        let e = parse_method(&params(json!({"source": "1"}))).unwrap_err();
        assert_eq!(e.code, -32602);
    }

    #[test]
    fn a_deep_tree_is_refused_not_overflowed() {
        // A long operator chain inside deep nesting: a very deep left-leaning tree.
        let chain = vec!["1"; 900].join(" + ");
        let src = format!("{}{}{}", "(".repeat(200), chain, ")".repeat(200));
        match parse_method(&params(json!({ "src": src }))) {
            Ok(v) => assert_eq!(v["ast_version"], json!(2)),
            Err(e) => assert!(e.code == -32602 || e.code == -32001, "{e:?}"),
        }
    }

    #[test]
    fn complete_offers_keywords_and_bound_names() {
        let c = complete("let alpha = 1\nfn algo() { 2 }\nal", usize::MAX);
        assert_eq!(c, vec!["algo", "alias", "alpha"]);
        let c = complete("var counter = 0\nco", 18);
        assert_eq!(c, vec!["continue", "counter"]);
        // Cursor in the middle: only what is left of it counts.
        let c = complete("let zeta = 1; ze", 3);
        assert_eq!(c, vec!["let"]);
        // Not on a character boundary: moved back, never a panic.
        let c = complete("é", 1);
        assert!(c.contains(&"while".to_string()));
        let r = complete_method(&params(json!({"src": "wh", "cursor": -1}))).unwrap_err();
        assert_eq!(r.code, -32602);
    }
}
