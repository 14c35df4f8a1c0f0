//! The tidy check on process-wide locks: no `static` in shipped code (the crates and the
//! binary, tests left out) holds a `Mutex`, `RwLock` or `Condvar` unless the allow-list
//! below names it with the reason the process itself owns that state. Everything else has
//! an owner that creates it and passes it down (an actor, a registry the daemon makes at
//! start), so tests can make their own. Reads files only.

use super::{before_test_module, has_word, report, rust_files};

/// Process-wide statics that hold a lock (`Mutex`, `RwLock`, `Condvar`, directly or in a
/// struct of their crate, however wrapped) in shipped code:
/// `(file, static, why it is process-wide)`. State belongs to an owner who creates it and
/// passes it down (an actor, a registry the daemon creates); a static is left only where the
/// process itself is the owner. The list only shrinks.
const STATIC_LOCKS_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "crates/shoal-base/src/spill_dir.rs",
        "SPILL_DIR",
        "the spill directory is the process's: every language session's outputs spill there",
    ),
    (
        "crates/shoal-base/src/spill_dir.rs",
        "READY",
        "the spill directory checked once per process, read by every spill of any thread",
    ),
    (
        "crates/shoal-base/src/procs/fallback.rs",
        "SPAWNING",
        "orders every fork of the process against its one subreaper's orphan reaping",
    ),
    (
        "crates/shoal-base/src/procs/fallback.rs",
        "GROUPS",
        "the subreaper fallback: the process reaps every orphan, whichever session spawned it",
    ),
    (
        "crates/shoal-base/src/procs/mod.rs",
        "PTY_CHILDREN",
        "unreaped PTY children of the process, which its cgroup tree and reaper account for",
    ),
    (
        "crates/shoal-base/src/procs/mod.rs",
        "SAVING",
        "serializes writes of the process's one `<state>/processes` record file",
    ),
    (
        "crates/shoal-policy/src/bin_id.rs",
        "CACHE",
        "a pure cache of binary hashes by file identity: the same answer for every caller",
    ),
    (
        "crates/shoal-policy/src/lib.rs",
        "RUNTIME",
        "the Leash runtime (policy, token store), installed once at start (docs/leash.md)",
    ),
    (
        "crates/shoal-policy/src/namespaces/mod.rs",
        "MODES",
        "each principal's namespace mode, beside the Leash runtime the process installs once",
    ),
    (
        "crates/shoal-policy/src/namespaces/launch.rs",
        "PTY",
        "the process's namespaced PTY children, which its broker started, until it reaps them",
    ),
    (
        "crates/shoal-base/src/procs/mod.rs",
        "MANAGER",
        "the process's cgroup tree or subreaper, chosen once at start, and its live counts",
    ),
    (
        "crates/shoal-policy/src/namespaces/mod.rs",
        "ENGINE",
        "the one namespace broker process the process starts token children through",
    ),
    (
        "crates/shoal-lang/src/shell/process.rs",
        "BUFS",
        "a pool of read buffers shared by every evaluation thread: memory reuse, no state",
    ),
];

/// The body of `struct name { .. }` in `code` (to its closing `}` at a line start).
fn struct_body<'a>(code: &'a str, name: &str) -> Option<&'a str> {
    let start = code.find(&format!("struct {name} {{"))?;
    let body = &code[start..];
    Some(body.find("\n}").map_or(body, |end| &body[..end]))
}

fn names_lock(text: &str) -> bool {
    ["Mutex", "RwLock", "Condvar"]
        .iter()
        .any(|w| has_word(text, w))
}

/// Whether the struct `name` of `code` (its crate) holds a lock: a field names one, or
/// (at most `depth` levels down) is a struct of the crate that does.
fn struct_holds_lock(code: &str, name: &str, depth: usize) -> bool {
    let Some(body) = struct_body(code, name) else {
        return false;
    };
    // Its fields, not their comments (a comment may name any type).
    let body: String = body
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let body = body.as_str();
    if names_lock(body) {
        return true;
    }
    depth > 0
        && body
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && *w != name)
            .any(|w| struct_holds_lock(code, w, depth - 1))
}

/// Whether a static of type `ty` holds a lock: the type names one, or names a struct of `code`
/// (its crate) that holds one, however wrapped (`OnceLock<Weak<Table>>`, `LazyLock<Arc<T>>`).
fn holds_lock(ty: &str, code: &str) -> bool {
    // A `Cell` or `RefCell` is not `Sync`: such a static is a `thread_local!`, one per thread.
    let outer = ty.trim_start().trim_start_matches("std::cell::");
    if outer.starts_with("Cell<") || outer.starts_with("RefCell<") {
        return false;
    }
    names_lock(ty)
        || ty
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
            .any(|w| struct_holds_lock(code, w, 2))
}

/// `(name, type)` of a `static` declared on `lines[i]` (the type runs to the `=` or `;`,
/// over several lines if need be).
fn static_decl(lines: &[&str], i: usize) -> Option<(String, String)> {
    let code = |l: &str| l.split("//").next().unwrap_or("").to_string();
    let line = code(lines[i]);
    let mut t = line.trim_start();
    for vis in ["pub(crate) ", "pub(super) ", "pub "] {
        t = t.strip_prefix(vis).unwrap_or(t);
    }
    let t = t.strip_prefix("static ")?;
    let t = t.strip_prefix("mut ").unwrap_or(t);
    let (name, rest) = t.split_once(':')?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut ty = rest.to_string();
    let mut j = i;
    while !ty.contains('=') && !ty.contains(';') && j + 1 < lines.len() {
        j += 1;
        ty.push_str(&code(lines[j]));
    }
    let ty = ty.split(['=', ';']).next().unwrap_or("").to_string();
    Some((name.to_string(), ty))
}

#[test]
fn no_process_wide_locks_outside_the_allow_list() {
    let test_mod = ["#[cfg(", "test)]"].concat();
    // Shipped code only (a file's test module and test files left out), by crate.
    let mut shipped: Vec<(String, String, String)> = Vec::new();
    for (path, text) in rust_files() {
        let krate = match path.strip_prefix("crates/") {
            Some(rest) => rest.split('/').next().unwrap_or("").to_string(),
            None if path.starts_with("src/") => "shoal".to_string(),
            None => continue,
        };
        if path.contains("/tests/") || path.ends_with("tests.rs") {
            continue;
        }
        let code = before_test_module(&text, &test_mod);
        shipped.push((krate, path, code));
    }
    let crate_code = |krate: &str| -> String {
        shipped
            .iter()
            .filter(|(k, _, _)| k == krate)
            .map(|(_, _, c)| c.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut bad = Vec::new();
    let mut seen = Vec::new();
    for (krate, path, code) in &shipped {
        let lines: Vec<&str> = code.lines().collect();
        let mut all = None;
        for i in 0..lines.len() {
            let Some((name, ty)) = static_decl(&lines, i) else {
                continue;
            };
            let all = all.get_or_insert_with(|| crate_code(krate));
            if !holds_lock(&ty, all) {
                continue;
            }
            if STATIC_LOCKS_ALLOWED
                .iter()
                .any(|(p, n, why)| p == path && *n == name && !why.is_empty())
            {
                seen.push((path.clone(), name));
            } else {
                bad.push(format!("{path}:{}: static {name}:{ty}", i + 1));
            }
        }
    }
    report(
        "a static holds a lock (give the state an owner that creates it and passes it down)",
        bad,
    );
    let stale: Vec<String> = STATIC_LOCKS_ALLOWED
        .iter()
        .filter(|(p, n, _)| !seen.iter().any(|(sp, sn)| sp == p && sn == n))
        .map(|(p, n, _)| format!("{p}: {n}"))
        .collect();
    report("allow-listed lock statics that no longer exist", stale);
}
