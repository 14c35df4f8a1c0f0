//! The kernel's `parse` and `complete` methods (docs/rules.md §18): both
//! answer before `session.attach` and touch no session; on a connection of the
//! local user attached to a session, `complete` also offers the paths of the
//! session's directory and the commands on its `PATH` ([`Where`]).
//!
//! `parse` returns the serialized syntax tree. The tree is written through a
//! writer that bounds both its size and its nesting, so a hostile program can
//! neither exhaust memory nor overflow a stack while its tree is turned into
//! JSON; the work runs on a thread of its own, off the connection's.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::kernel;
use super::rpc::RpcError;
use shoal_lang::{parse, ParseContext};

/// The `ast_version` of the serialized [`shoal_lang::ast::Program`].
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

/// `parse {src}` → `{ast_version, ast}`, or `-32001` with `{span, hint}`. Blocking: runs the
/// parse on its own thread and waits for it (call it off the connection's executor, or
/// through [`parse_async`]).
pub fn parse_method(p: &kernel::SrcParams) -> Result<Json, RpcError> {
    parse_src(&p.src)
}

/// [`parse_method`] without blocking the caller: the parse runs on a fresh thread.
pub fn parse_async(
    p: kernel::SrcParams,
) -> impl std::future::Future<Output = Result<Json, RpcError>> {
    let src = p.src;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("shoal-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            let _ = tx.send(parse_tree(&src));
        });
    async move {
        match spawned {
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
    serde_json::to_value(kernel::Parsed {
        ast_version: AST_VERSION,
        ast: &program,
    })
    .map_err(|e| RpcError::internal(format!("cannot serialize the syntax tree: {e}")))
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

/// Where an attached local user's `complete` looks for paths and commands:
/// the session's directory and its `PATH`.
pub struct Where {
    pub cwd: PathBuf,
    pub path: Option<String>,
    /// The session's top-level names (bindings, functions, aliases).
    pub names: std::sync::Arc<[String]>,
}

/// `complete {src, cursor?}` → `{candidates, start}`: the keyword/builtin list plus the
/// names bound by `let`/`var`/`fn`/`alias` before the cursor, filtered by the identifier
/// prefix just left of it; with a [`Where`], also the session's names, the files and
/// directories (a `/` after
/// each directory) matching the word left of the cursor, and, for a statement's first
/// word, the commands on `PATH`. `start` is the byte offset where the replaced text
/// begins. Sorted, de-duplicated, at most [`MAX_CANDIDATES`]. The cursor is a byte
/// offset (default: the end), clamped to the source and moved back to a character
/// boundary.
pub fn complete_method(p: &kernel::CompleteParams, at: Option<&Where>) -> Completions {
    let cursor = p
        .cursor
        .map_or(p.src.len(), |n| usize::try_from(n).unwrap_or(usize::MAX));
    let (start, candidates) = complete_at(&p.src, cursor, at);
    Completions { candidates, start }
}

pub use crate::kernel::Completions;

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A character that ends a command word (or a path) on its left.
fn ends_word(c: char) -> bool {
    c.is_whitespace() || "\"'()[]{},;|&<>=`".contains(c)
}

/// The candidates for `src` with the cursor at byte `cursor`.
pub fn complete(src: &str, cursor: usize) -> Vec<String> {
    complete_at(src, cursor, None).1
}

/// [`complete`] with an optional [`Where`]: the start of the replaced text and
/// the candidates.
pub fn complete_at(src: &str, cursor: usize, at: Option<&Where>) -> (usize, Vec<String>) {
    let mut cursor = cursor.min(src.len());
    while !src.is_char_boundary(cursor) {
        cursor -= 1;
    }
    let before = &src[..cursor];
    let word_start = before
        .char_indices()
        .rev()
        .take_while(|&(_, c)| !ends_word(c))
        .last()
        .map_or(cursor, |(i, _)| i);
    let word = &before[word_start..];
    if let Some(at) = at {
        // A word with a path's characters completes as a path only.
        if word.contains('/') || word.starts_with('.') || word.starts_with('~') {
            return (word_start, paths(&at.cwd, word));
        }
    }
    let prefix_start = before
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_ident(c))
        .last()
        .map_or(cursor, |(i, _)| i);
    let prefix = &before[prefix_start..];
    let mut names: BTreeSet<String> = WORDS.iter().map(|w| w.to_string()).collect();
    // Words before the prefix; a binder keyword makes the next word a name.
    let mut binder = false;
    for word in before[..prefix_start]
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
    {
        if binder && !word.starts_with(|c: char| c.is_ascii_digit()) {
            names.insert(word.to_string());
        }
        binder = matches!(word, "let" | "var" | "fn" | "alias");
    }
    // After a `.` comes a field or method, which no name or keyword is.
    if before[..prefix_start].ends_with('.') {
        return (prefix_start, Vec::new());
    }
    if let Some(at) = at {
        names.extend(at.names.iter().cloned());
    }
    names.retain(|n| n.starts_with(prefix));
    // Paths and commands replace the whole word: only when it is the identifier.
    if let (Some(at), true) = (at, prefix_start == word_start) {
        let head = before[..word_start].trim_end();
        let first = head.is_empty() || head.ends_with(['\n', ';', '{', '(', '|', '&']);
        if first {
            names.extend(commands(at.path.as_deref(), word));
        } else if !before[..word_start].ends_with(['.', '(', ',', '[']) {
            names.extend(paths(&at.cwd, word));
        }
    }
    let out = names.into_iter().take(MAX_CANDIDATES).collect();
    (prefix_start, out)
}

/// Entries of the directory part of `word` (relative to `cwd`, or `~/`) whose
/// names start with the rest; directories end in `/`. Hidden entries only when
/// the rest starts with `.`; names a command word could not hold are left out.
fn paths(cwd: &Path, word: &str) -> Vec<String> {
    let (dir, rest) = match word.rfind('/') {
        Some(i) => (&word[..=i], &word[i + 1..]),
        None => ("", word),
    };
    let base = if let Some(home_rel) = dir.strip_prefix("~/") {
        match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(home_rel),
            None => return Vec::new(),
        }
    } else if dir.is_empty() {
        cwd.to_path_buf()
    } else {
        cwd.join(dir)
    };
    let Ok(rd) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(rest) || (name.starts_with('.') && !rest.starts_with('.')) {
                return None;
            }
            if name.chars().any(ends_word) {
                return None;
            }
            let is_dir = e.path().is_dir();
            Some(format!("{dir}{name}{}", if is_dir { "/" } else { "" }))
        })
        .collect();
    out.sort();
    out.truncate(MAX_CANDIDATES);
    out
}

/// Executables on `path` whose names start with `prefix` (none for an empty prefix).
fn commands(path: Option<&str>, prefix: &str) -> Vec<String> {
    let Some(path) = path.filter(|_| !prefix.is_empty()) else {
        return Vec::new();
    };
    let mut out = BTreeSet::new();
    for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if !name.starts_with(prefix) || name.chars().any(ends_word) {
                continue;
            }
            let exec = std::fs::metadata(e.path())
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
            if exec {
                out.insert(name);
            }
            if out.len() >= MAX_CANDIDATES {
                return out.into_iter().collect();
            }
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Json) -> kernel::SrcParams {
        serde_json::from_value(v).unwrap()
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
    fn complete_with_a_session_offers_its_paths_and_commands() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("notes.txt"), "").unwrap();
        std::fs::write(d.path().join("notes two.txt"), "").unwrap();
        std::fs::write(d.path().join(".hidden"), "").unwrap();
        std::fs::create_dir_all(d.path().join("nested/inner")).unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("notify-me"), "").unwrap();
        std::fs::set_permissions(
            bin.join("notify-me"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(bin.join("not-executable"), "").unwrap();
        let at = Where {
            cwd: d.path().to_path_buf(),
            path: Some(bin.display().to_string()),
            names: std::sync::Arc::from(vec!["notable".to_string(), "limit".to_string()]),
        };
        // An argument: files and directories (a name with a space is left out).
        let (start, c) = complete_at("cat no", 6, Some(&at));
        assert_eq!(
            (start, c),
            (4, vec!["notable".to_string(), "notes.txt".to_string()])
        );
        let (_, c) = complete_at("cat ne", 6, Some(&at));
        assert_eq!(c, vec!["nested/"]);
        // A path word replaces the whole word; hidden entries only when asked.
        let (start, c) = complete_at("ls nested/i", 11, Some(&at));
        assert_eq!((start, c), (3, vec!["nested/inner/".to_string()]));
        let (_, c) = complete_at("cat ./.h", 8, Some(&at));
        assert_eq!(c, vec!["./.hidden"]);
        // The first word: keywords, names and the executables on PATH.
        let (start, c) = complete_at("not", 3, Some(&at));
        assert_eq!(
            (start, c),
            (0, vec!["notable".to_string(), "notify-me".to_string()])
        );
        // The session's names, in an expression too.
        assert_eq!(complete_at("1 + li", 6, Some(&at)).1, vec!["limit"]);
        // A method or a call argument is no path.
        assert!(complete_at("x.no", 4, Some(&at)).1.is_empty());
        // Without a session: the context-free list only.
        assert!(complete_at("cat no", 6, None).1.is_empty());
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
        let p = serde_json::from_value(json!({"src": "wh", "cursor": 1})).unwrap();
        assert_eq!(complete_method(&p, None).start, 0);
    }
}
