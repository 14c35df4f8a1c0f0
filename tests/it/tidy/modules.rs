//! The tidy check on module layers: inside each crate under `crates/`, the top-level modules
//! import each other in no cycle. A path through a `pub use` (in `lib.rs` or any module) counts
//! as an import of the module that defines the item, so a re-export cannot hide a cycle. Test
//! code is left out (tests may reach across modules). Reads files only.

use std::collections::{BTreeMap, BTreeSet};

use super::{before_test_module, report, rust_files};

/// A module path from the crate root (`[]` is the root, `["store", "apply"]` is `store::apply`).
type ModPath = Vec<String>;

/// The file's code before its inline test module, comments left out.
fn code_of(text: &str) -> String {
    let test_mod = ["#[cfg(", "test)]"].concat();
    before_test_module(text, &test_mod)
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module a file under `src/` is (`lib.rs` is the root, `a/mod.rs` and `a.rs` are `a`).
fn module_of(rel_in_src: &str) -> ModPath {
    let parts: Vec<String> = rel_in_src
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    match parts.as_slice() {
        [only] if only == "lib" => Vec::new(),
        [.., last] if last == "mod" => parts[..parts.len() - 1].to_vec(),
        _ => parts,
    }
}

/// The paths a use tree at the start of `s` names (`a::{b, c::D as E}` gives `a::b` named
/// `b` and `a::c::D` named `E`), each with the name it binds; `*` for a glob. Stops at the first
/// thing a use tree cannot hold, so an expression path (`a::f(x)`) gives `a::f`.
fn use_tree(s: &str) -> Vec<(Vec<String>, String)> {
    fn ws(s: &[u8], i: &mut usize) {
        while *i < s.len() && s[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }
    fn ident(s: &[u8], i: &mut usize) -> String {
        let start = *i;
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
            *i += 1;
        }
        String::from_utf8_lossy(&s[start..*i]).into_owned()
    }
    fn tree(s: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        ws(s, i);
        match s.get(*i) {
            Some(b'{') => {
                *i += 1;
                loop {
                    ws(s, i);
                    if s.get(*i).is_none_or(|c| *c == b'}') {
                        *i += 1;
                        return;
                    }
                    tree(s, i, prefix.clone(), out);
                    ws(s, i);
                    match s.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                }
            }
            Some(b'*') => {
                *i += 1;
                let mut path = prefix;
                path.push("*".to_string());
                out.push((path, "*".to_string()));
            }
            _ => {
                let name = ident(s, i);
                if name.is_empty() {
                    return;
                }
                if s[*i..].starts_with(b"::") {
                    *i += 2;
                    let mut path = prefix;
                    path.push(name);
                    return tree(s, i, path, out);
                }
                let mut path = prefix;
                if name != "self" {
                    path.push(name);
                }
                let mut bound = path.last().cloned().unwrap_or_default();
                let mut j = *i;
                ws(s, &mut j);
                if s[j..].starts_with(b"as") && s.get(j + 2).is_some_and(u8::is_ascii_whitespace) {
                    j += 2;
                    ws(s, &mut j);
                    bound = ident(s, &mut j);
                    *i = j;
                }
                out.push((path, bound));
            }
        }
    }
    let mut out = Vec::new();
    tree(s.as_bytes(), &mut 0, Vec::new(), &mut out);
    out
}

/// Every `crate::` path, and every `super::` path that climbs to the crate root, in `code` (of
/// the file that is `module`): the path from the root and the line it starts on.
fn root_paths(module: &[String], code: &str) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut rest = code;
    loop {
        // The earlier of the next `crate::` and the next `super::`.
        let at = match (rest.find("crate::"), rest.find("super::")) {
            (Some(c), Some(s)) => c.min(s),
            (Some(i), None) | (None, Some(i)) => i,
            (None, None) => break,
        };
        let before = rest[..at].chars().next_back();
        let line = code[..code.len() - rest.len() + at].matches('\n').count() + 1;
        let mut tail = &rest[at..];
        // How deep below the crate root the path starts.
        let depth = if let Some(t) = tail.strip_prefix("crate::") {
            tail = t;
            Some(0)
        } else {
            let mut ups = 0;
            while let Some(t) = tail.strip_prefix("super::") {
                ups += 1;
                tail = t;
            }
            module.len().checked_sub(ups)
        };
        rest = tail;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let Some(depth) = depth else { continue };
        for (path, _) in use_tree(tail) {
            let mut full = module[..depth].to_vec();
            full.extend(path);
            out.push((full, line));
        }
    }
    out
}

/// One crate's modules and what each re-exports: `(module, name) -> path it names`.
struct Crate {
    modules: BTreeSet<ModPath>,
    exports: BTreeMap<(ModPath, String), Vec<String>>,
}

impl Crate {
    /// The `pub use` items (any visibility) of the file that is `module`.
    fn add_exports(&mut self, module: &[String], code: &str) {
        for stmt in code.split(';') {
            let t = stmt.trim_start();
            let Some(vis) = t.strip_prefix("pub") else {
                continue;
            };
            let vis = vis.trim_start();
            let vis = match vis.strip_prefix('(') {
                Some(v) => v.split_once(')').map_or("", |(_, r)| r).trim_start(),
                None => vis,
            };
            let Some(tree) = vis.strip_prefix("use ") else {
                continue;
            };
            for (path, bound) in use_tree(tree) {
                if bound == "*" {
                    continue;
                }
                let from_root = match path.first().map(String::as_str) {
                    Some("crate") => path[1..].to_vec(),
                    Some("super") => {
                        let ups = path.iter().take_while(|s| *s == "super").count();
                        let Some(depth) = module.len().checked_sub(ups) else {
                            continue;
                        };
                        let mut p = module[..depth].to_vec();
                        p.extend_from_slice(&path[ups..]);
                        p
                    }
                    Some("self") => [module, &path[1..]].concat(),
                    // A child module, or a name in this module's scope (an external crate
                    // counts as this module: it is not another module of the crate).
                    _ => [module, &path].concat(),
                };
                self.exports.insert((module.to_vec(), bound), from_root);
            }
        }
    }

    /// The top-level module that defines what `path` (from the root) names, following
    /// re-exports; `None` for an item of the root itself or another crate's.
    fn defining_top(&self, path: &[String]) -> Option<String> {
        let mut path = path.to_vec();
        for _ in 0..16 {
            // The longest prefix that is a module; the segment after it is the item.
            let m = (0..=path.len())
                .rev()
                .find(|&n| self.modules.contains(&path[..n]))
                .unwrap_or(0);
            let Some(item) = path.get(m) else {
                return path.first().cloned();
            };
            match self.exports.get(&(path[..m].to_vec(), item.clone())) {
                Some(to) if *to != path[..=m] => path = [to, &path[m + 1..]].concat(),
                // A module's own item; at the root, no module's (or another crate's).
                _ => return (m > 0).then(|| path[0].clone()),
            }
        }
        path.first().cloned()
    }
}

#[test]
fn modules_inside_each_crate_form_no_cycle() {
    // Per crate: module -> module it names -> where it first does.
    type Graph = BTreeMap<String, BTreeMap<String, String>>;
    let mut crates: BTreeMap<String, (Crate, Vec<(String, String)>)> = BTreeMap::new();
    for (p, text) in rust_files() {
        let Some(rest) = p.strip_prefix("crates/") else {
            continue;
        };
        let Some((krate, in_src)) = rest.split_once("/src/") else {
            continue;
        };
        if in_src.ends_with("/tests.rs")
            || in_src == "tests.rs"
            || in_src.contains("/tests/")
            || in_src.starts_with("tests/")
        {
            continue;
        }
        let (c, files) = crates.entry(krate.to_string()).or_insert_with(|| {
            let c = Crate {
                modules: BTreeSet::new(),
                exports: BTreeMap::new(),
            };
            (c, Vec::new())
        });
        let module = module_of(in_src);
        for n in 0..=module.len() {
            c.modules.insert(module[..n].to_vec());
        }
        let code = code_of(&text);
        c.add_exports(&module, &code);
        files.push((in_src.to_string(), code));
    }
    let mut bad = Vec::new();
    for (krate, (c, files)) in &crates {
        let mut g: Graph = BTreeMap::new();
        for (in_src, code) in files {
            let module = module_of(in_src);
            let Some(top) = module.first() else {
                continue; // lib.rs: the root is no layer of its own
            };
            let entry = g.entry(top.clone()).or_default();
            for (path, line) in root_paths(&module, code) {
                if let Some(to) = c.defining_top(&path).filter(|to| to != top) {
                    entry
                        .entry(to)
                        .or_insert_with(|| format!("{in_src}:{line}"));
                }
            }
        }
        for c in cycles(&g) {
            let path: Vec<String> = c
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], g[w[0]][w[1]]))
                .collect();
            bad.push(format!("{krate}: {}", path.join(", ")));
        }
    }
    report("top-level modules that import each other in a cycle", bad);
}

/// Each cycle a depth-first search of `g` closes with a back edge.
fn cycles(g: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<&String>> {
    // Edges to names that are not modules of the crate's files are not module edges.
    let edges = |m: &String| -> Vec<&String> {
        g.get(m)
            .map(|t| t.keys().filter(|n| g.contains_key(*n)).collect())
            .unwrap_or_default()
    };
    fn visit<'a>(
        m: &'a String,
        edges: &dyn Fn(&'a String) -> Vec<&'a String>,
        colour: &mut BTreeMap<&'a String, u8>,
        stack: &mut Vec<&'a String>,
        cycles: &mut Vec<Vec<&'a String>>,
    ) {
        colour.insert(m, 1);
        stack.push(m);
        for n in edges(m) {
            match colour.get(n).copied().unwrap_or(0) {
                0 => visit(n, edges, colour, stack, cycles),
                1 => {
                    let from = stack.iter().position(|s| *s == n).unwrap_or(0);
                    let mut c: Vec<&String> = stack[from..].to_vec();
                    c.push(n);
                    cycles.push(c);
                }
                _ => {}
            }
        }
        stack.pop();
        colour.insert(m, 2);
    }
    let mut colour = BTreeMap::new();
    let mut out = Vec::new();
    for m in g.keys() {
        if colour.get(m).copied().unwrap_or(0) == 0 {
            visit(m, &edges, &mut colour, &mut Vec::new(), &mut out);
        }
    }
    out
}

#[test]
fn a_re_export_resolves_to_the_module_that_defines_it() {
    let mut c = Crate {
        modules: [vec![], vec!["query".into()], vec!["store".into()]]
            .into_iter()
            .collect(),
        exports: BTreeMap::new(),
    };
    c.add_exports(
        &[],
        "pub use query::{Query, Scope as S};\npub use other::Thing;",
    );
    c.add_exports(
        &["store".into()],
        "pub(crate) use crate::query::Query as Q;",
    );
    let top = |p: &[&str]| c.defining_top(&p.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(top(&["S"]).as_deref(), Some("query"));
    assert_eq!(top(&["Query"]).as_deref(), Some("query"));
    assert_eq!(top(&["store", "Q"]).as_deref(), Some("query"));
    assert_eq!(top(&["store", "Store"]).as_deref(), Some("store"));
    assert_eq!(top(&["Entry"]), None);
    assert_eq!(top(&["Thing"]), None);
}
