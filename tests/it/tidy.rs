//! Tidy checks over the source tree, in the spirit of rust-analyzer's: rules about the code
//! itself that a reviewer would otherwise have to remember. Reads files only; it never builds,
//! runs or changes anything.
//!
//! Every `.rs` file under `src/`, `actors/`, `crates/`, `benches/`, `tests/` and `fuzz/`:
//! - opens with `//!` saying what it owns and what it must never do;
//! - names no owner tag and no issue number (the tracker is not part of the code);
//! - uses `unsafe` only if it is in [`UNSAFE_ALLOWED`] (prefer `rustix` over raw `libc`), each
//!   block or impl under a `// SAFETY:` comment (above it or above its statement);
//! - has no ignored test;
//! - cites rules in the repository (`docs/rules.md`, `docs/protocol.md`), never the
//!   specification files outside it;
//! - cites only sections that exist: every `§N` in code, docs, config and tests names a
//!   `docs/NAME.md` (on its line or the line before; in a `docs/` file, a bare `§N` is that
//!   file's) with a `§N.` heading;
//! - stays under [`MAX_LINES`] lines unless it is in [`TOO_LONG_FOR_NOW`];
//! - in shipped code, declares no `static` holding a lock unless it is in
//!   `locks::STATIC_LOCKS_ALLOWED`, with the reason the process owns it (`tidy/locks.rs`).
//!
//! README.md (for users) stays within [`README_MAX_LINES`] and ARCHITECTURE.md (the code
//! map) within [`ARCHITECTURE_MAX_LINES`]: detail belongs in `docs/`.
//!
//! No crate below `shoal-daemon` names the actor framework: only the daemon does. The daemon's
//! `msg.rs` is a leaf: it imports no other actor module. Inside each crate the top-level modules
//! form layers: no import cycle between them, a re-exported item counting as its defining
//! module's (`tidy/modules.rs`; Cargo checks the crates themselves).

use std::path::{Path, PathBuf};

mod locks;
mod modules;

const MAX_LINES: usize = 800;

/// README.md serves a first-time user; everything else goes to `docs/`.
const README_MAX_LINES: usize = 200;

/// ARCHITECTURE.md is a map, not a manual.
const ARCHITECTURE_MAX_LINES: usize = 300;

/// Files still over [`MAX_LINES`]. Each is to be split and removed from this list; the list
/// only ever shrinks.
const TOO_LONG_FOR_NOW: &[&str] = &[];

/// Files allowed to use `unsafe`, each for a reason no safe wrapper (std or rustix) covers.
const UNSAFE_ALLOWED: &[&str] = &[
    // The counting global allocator (per-session memory budgets).
    "crates/shoal-value/src/memory.rs",
    // pre_exec hooks between fork and exec (cgroup join, confinement).
    "crates/shoal-lang/src/shell/process.rs",
    // pre_exec hook of the daemon spawned by the client.
    "src/cli/client.rs",
    // The PTY child's pre_exec hooks (setsid, controlling terminal, cgroup,
    // confinement).
    "crates/shoal-pty/src/spawn.rs",
    // Releasing the evaluation thread's unused stack pages (pthread stack bounds, madvise).
    "crates/shoal-lang/src/session.rs",
    // glibc's allocator tunables and trim (mallopt, malloc_trim) and a thread's
    // scheduling policy (sched_setscheduler): no safe wrapper.
    "crates/shoal-base/src/procmem.rs",
    // The kernel's Landlock ABI, reported and checked before a spawn (the `landlock`
    // crate keeps it private).
    "crates/shoal-policy/src/landlock.rs",
    // Its tests' pre_exec hooks (a child applies a ruleset to itself).
    "crates/shoal-policy/src/landlock_tests.rs",
    // A namespaced child between fork and exec: a descriptor at fd 3, joining the holder's
    // namespaces, the fork of its pid 1 and the wait for it (no rustix wrapper for fork),
    // and mount_setattr on the tree it exposes (no rustix wrapper).
    "crates/shoal-policy/src/namespaces/holder.rs",
    // The namespace broker's children between fork and exec: session leader, cgroup join.
    "crates/shoal-policy/src/namespaces/broker.rs",
    // Inside the namespaces: the status pipe named on the command line, and the program's
    // signal dispositions between fork and exec.
    "crates/shoal-policy/src/namespaces/confine.rs",
    // The seccomp socket filters (prctl, seccomp, close_range between fork and exec).
    "crates/shoal-policy/src/seccomp.rs",
    // Adopting a socket-activated listener fd.
    "crates/shoal-daemon/src/daemon/setup.rs",
    // A socket-activation test's pre_exec hook: the listener at fd 3 in the child.
    "tests/it/daemon.rs",
];

const ROOTS: &[&str] = &["src", "actors", "crates", "benches", "tests", "fuzz"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                continue;
            }
            if ft.is_dir() {
                if name != "target" && name != "node_modules" && !name.starts_with('.') {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    let base = root();
    let mut paths = Vec::new();
    for r in ROOTS {
        walk(&base.join(r), &mut paths);
    }
    paths.sort();
    let files: Vec<(String, String)> = paths
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&base)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{rel}: {e}"));
            (rel, text)
        })
        .collect();
    assert!(files.len() > 100, "the walk found too few files");
    files
}

fn report(what: &str, bad: Vec<String>) {
    assert!(bad.is_empty(), "{what}:\n  {}", bad.join("\n  "));
}

/// A word of `needle` in `line` (not part of a longer identifier).
fn has_word(line: &str, needle: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(needle).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + needle.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[test]
fn every_file_opens_with_a_module_doc() {
    let bad = rust_files()
        .into_iter()
        .filter(|(_, text)| !text.starts_with("//!"))
        .map(|(p, _)| p)
        .collect();
    report("files that do not open with //!", bad);
}

/// Every line, in the files `file` selects, for which `bad` holds: `path:line: text`.
fn offending_lines(file: impl Fn(&str) -> bool, bad: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (p, text) in rust_files() {
        if !file(&p) {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            if bad(line) {
                out.push(format!("{p}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    out
}

#[test]
fn no_owners_and_no_issue_numbers() {
    let owner = ["OWNER", ":"].concat();
    let issue_number = |line: &str| {
        let lower = line.to_ascii_lowercase();
        ["issue ", "issue #", "issues "].iter().any(|w| {
            lower.match_indices(w).any(|(k, _)| {
                lower[k + w.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            })
        })
    };
    let bad = offending_lines(|_| true, |l| l.contains(&owner) || issue_number(l));
    report("owner tags or issue numbers in code", bad);
}

#[test]
fn unsafe_only_in_the_allow_list() {
    let kw = ["uns", "afe"].concat();
    let lint = format!("{kw}_op_in_{kw}_fn");
    let bad = offending_lines(
        |p| !UNSAFE_ALLOWED.contains(&p),
        |line| {
            let code = line.split("//").next().unwrap_or("");
            has_word(code, &kw) && !code.contains(&lint)
        },
    );
    report(
        &format!("`{kw}` outside the allow-list (prefer rustix)"),
        bad,
    );
    let files: Vec<String> = rust_files().into_iter().map(|(p, _)| p).collect();
    let stale: Vec<String> = UNSAFE_ALLOWED
        .iter()
        .filter(|f| !files.iter().any(|p| p == *f))
        .map(|f| f.to_string())
        .collect();
    report("allow-listed files that no longer exist", stale);
}

/// Where the `unsafe` block or impl on `lines[i]` lacks its reason: a `// SAFETY:` comment on
/// the lines just above it, or above the statement it is part of (attributes between are
/// fine). A blank line, or the end of another statement (`;`, `{`, `}`, `,`), between them is
/// no reason.
fn lacks_safety_comment(lines: &[&str], i: usize) -> bool {
    let mut j = i;
    loop {
        let Some(prev) = j.checked_sub(1).map(|k| lines[k].trim()) else {
            return true;
        };
        if prev.starts_with("//") {
            return !lines[..j]
                .iter()
                .rev()
                .take_while(|l| l.trim().starts_with("//"))
                .any(|l| l.contains("SAFETY:"));
        }
        let code = prev.split("//").next().unwrap_or("").trim_end();
        if prev.is_empty() || code.ends_with([';', '{', '}', ',']) {
            return true;
        }
        // An attribute, or the earlier lines of the same statement.
        j -= 1;
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let kw = ["uns", "afe"].concat();
    let (block, imp) = (format!("{kw} {{"), format!("{kw} impl"));
    let mut bad = Vec::new();
    for (p, text) in rust_files() {
        if !["crates/", "src/", "tests/", "benches/"]
            .iter()
            .any(|r| p.starts_with(r))
        {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if (code.contains(&block) || code.contains(&imp)) && lacks_safety_comment(&lines, i) {
                bad.push(format!("{p}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    report(
        &format!("`{kw}` without a `// SAFETY:` comment just above it (or its statement)"),
        bad,
    );
}

#[test]
fn a_safety_comment_must_be_just_above() {
    let kw = ["uns", "afe"].concat();
    let lines = |t: &str| {
        t.replace("UNS", &kw)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let check = |t: &str| {
        let l = lines(t);
        let refs: Vec<&str> = l.iter().map(String::as_str).collect();
        lacks_safety_comment(&refs, refs.len() - 1)
    };
    let why = ["// SAF", "ETY: fd 3 is ours"].concat();
    assert!(!check(&format!("{why}\nUNS {{ f() }};")));
    assert!(!check(&format!(
        "{why}\n// more\n#[allow(x)]\nlet r =\n    UNS {{ f() }};"
    )));
    assert!(check("let a = 1;\nUNS { f() };"));
    assert!(check(&format!("{why}\n\nUNS {{ f() }};")));
    assert!(check("// a comment with no reason\nUNS { f() };"));
    assert!(check(&format!("{why}\nlet a = 1;\nUNS {{ f() }};")));
}

/// The most `unsafe` blocks the shipped code may hold (crates and the
/// binary; tests, benchmarks and fuzz targets are not counted): what std and
/// rustix cannot express (pre_exec hooks, the counting allocator, glibc
/// tunables, the pthread stack bounds, the seccomp filters, an inherited
/// listener fd, the Landlock ABI probe).
const UNSAFE_BUDGET: usize = 25;

/// `text` up to its inline test module (`#[cfg(test)]` then `mod NAME {`); a test module in a
/// file of its own (`mod NAME;`) cuts nothing.
pub(crate) fn before_test_module(text: &str, test_mod: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == test_mod
                && lines.get(i + 1).is_some_and(|l| {
                    let l = l.trim();
                    l.split_whitespace().any(|w| w == "mod") && l.ends_with('{')
                })
        })
        .unwrap_or(lines.len());
    lines[..end].join("\n")
}

#[test]
fn unsafe_stays_within_its_budget() {
    let kw = ["uns", "afe"].concat();
    let block = format!("{kw} {{");
    let test_mod = ["#[cfg(", "test)]"].concat();
    let mut per_file = Vec::new();
    let mut total = 0;
    for (path, text) in rust_files() {
        let shipped = (path.starts_with("crates/") || path.starts_with("src/"))
            && !path.contains("/tests/")
            && !path.ends_with("tests.rs");
        if !shipped {
            continue;
        }
        // Code in a file's inline test module is test code.
        let code = before_test_module(&text, &test_mod);
        let n = code
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .map(|l| l.matches(&block).count())
            .sum::<usize>();
        if n > 0 {
            per_file.push(format!("{n} {path}"));
            total += n;
        }
    }
    assert!(
        total <= UNSAFE_BUDGET,
        "{total} `{kw}` blocks, over the budget of {UNSAFE_BUDGET} (prefer rustix or a maintained crate):\n  {}",
        per_file.join("\n  ")
    );
}

#[test]
fn no_ignored_tests() {
    let attr = ["#[", "ignore"].concat();
    let bad = offending_lines(|_| true, |l| l.trim_start().starts_with(&attr));
    report("ignored tests", bad);
}

// The module tree is the file tree in the crates and the binary: no `#[path]`.
// Tests, benches and fuzz targets may borrow a shared driver or corpus by path.
#[test]
fn no_path_attributes_in_the_crates() {
    let attr = ["#[", "path"].concat();
    let bad = offending_lines(
        |p| p.starts_with("crates/") || p.starts_with("src/"),
        |l| l.trim_start().starts_with(&attr),
    );
    report("#[path] in a crate (use a directory module)", bad);
}

#[test]
fn the_core_does_not_name_the_actor_framework() {
    let name = ["act", "ix"].concat();
    let bad = offending_lines(
        |p| {
            (p.starts_with("crates/") && !p.starts_with("crates/shoal-daemon/"))
                || p.starts_with("src/")
        },
        |l| l.to_ascii_lowercase().contains(&name),
    );
    report(
        "a crate below shoal-daemon names the actor framework (only the daemon may)",
        bad,
    );
}

#[test]
fn files_stay_under_the_line_limit() {
    let mut bad = Vec::new();
    for (p, text) in rust_files() {
        let n = text.lines().count();
        if n >= MAX_LINES && !TOO_LONG_FOR_NOW.contains(&p.as_str()) {
            bad.push(format!("{p}: {n} lines"));
        }
    }
    report("files over the line limit", bad);
}

#[test]
fn the_message_module_is_a_leaf() {
    let bad = offending_lines(
        |p| p == "crates/shoal-daemon/src/msg.rs",
        |l| {
            let code = l.split("//").next().unwrap_or("");
            code.contains("super::") || code.contains("crate::")
        },
    );
    report("the daemon's msg.rs names another actor module", bad);
}

#[test]
fn an_evaluation_never_touches_the_sessions_state() {
    // eval.rs evaluates wherever the language session lives: what it needs
    // comes in as values, so it names neither the session's shared state nor
    // the daemon's services.
    let bad = offending_lines(
        |p| p == "crates/shoal-daemon/src/eval.rs",
        |l| {
            let code = l.split("//").next().unwrap_or("");
            [
                "SessionShared",
                "shared",
                "Services",
                "supervisor",
                "journal_writer",
            ]
            .iter()
            .any(|w| code.contains(w))
        },
    );
    report("eval.rs reaches the session's state", bad);
}

#[test]
fn comments_cite_rules_in_the_repository() {
    // The specification files live outside the repository (a clone does not have them), and
    // `docs/language.md` is the agent card, not the language specification.
    let needles = [
        ["language", ".md §"].concat(),
        ["contract", ".md"].concat(),
        ["contract", " §"].concat(),
        ["reference", "-protocol"].concat(),
        ["reference", " §"].concat(),
    ];
    let bad = offending_lines(
        |_| true,
        |line| {
            line.find("//")
                .is_some_and(|i| needles.iter().any(|n| line[i..].contains(n.as_str())))
        },
    );
    report(
        "comments citing specification files outside the repository (use docs/rules.md §N)",
        bad,
    );
}

/// The text files whose `§` citations must resolve: every `.rs` file of [`rust_files`], and
/// the documents, examples, configuration and test scripts beside them.
fn citing_files() -> Vec<(String, String)> {
    let base = root();
    let mut files = rust_files();
    let mut extra = vec![
        "README.md".to_string(),
        "ARCHITECTURE.md".to_string(),
        "Makefile".to_string(),
        "shoal.toml.example".to_string(),
    ];
    for dir in ["docs", "config", "tests"] {
        let mut stack = vec![base.join(dir)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() && name != "node_modules" && !name.starts_with('.') {
                    stack.push(p);
                } else if ft.is_file()
                    && [".md", ".toml", ".py", ".mjs"]
                        .iter()
                        .any(|x| name.ends_with(x))
                {
                    let rel = p.strip_prefix(&base).expect("under the root");
                    extra.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    for rel in extra {
        let text =
            std::fs::read_to_string(base.join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        files.push((rel, text));
    }
    files
}

/// The section numbers (`1`, `12`, `3.2`, ...) of the `## §N.` headings of `docs/NAME.md`.
fn doc_sections(name: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs").join(format!("{name}.md"))).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.trim_start_matches('#').strip_prefix(" §"))
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect::<String>()
                    .trim_end_matches('.')
                    .to_string()
            })
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

/// The last `docs/NAME.md` named in `text`: `NAME`.
fn last_doc(text: &str) -> Option<&str> {
    text.match_indices("docs/")
        .filter_map(|(i, _)| {
            let rest = &text[i + 5..];
            let end = rest.find(".md")?;
            let name = &rest[..end];
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                .then_some(name)
        })
        .last()
}

#[test]
fn section_citations_resolve() {
    let mut bad = Vec::new();
    // This file names `§` as data (the needles above), not as citations.
    for (path, text) in citing_files()
        .into_iter()
        .filter(|(p, _)| p != "tests/it/tidy.rs")
    {
        let own = path
            .strip_prefix("docs/")
            .and_then(|p| p.strip_suffix(".md"));
        let mut prev = "";
        for (i, line) in text.lines().enumerate() {
            let heading = own.is_some() && line.starts_with('#');
            for (at, _) in line.match_indices('§') {
                let number: String = line[at + '§'.len_utf8()..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let number = number.trim_end_matches('.');
                if heading || line[at..].starts_with("§N") {
                    continue; // a heading itself, or the placeholder `§N` in prose
                }
                let doc = last_doc(&line[..at]).or_else(|| last_doc(prev)).or(own);
                let found = doc
                    .and_then(doc_sections)
                    .is_some_and(|s| s.iter().any(|n| n == number));
                if number.is_empty() || !found {
                    let doc = doc.map_or("no docs/ file".to_string(), |d| format!("docs/{d}.md"));
                    bad.push(format!(
                        "{path}:{}: §{number} of {doc}: {}",
                        i + 1,
                        line.trim()
                    ));
                }
            }
            prev = line;
        }
    }
    report(
        "section citations that name no heading in docs/ (cite `docs/NAME.md §N`)",
        bad,
    );
}

#[test]
fn readme_and_architecture_stay_short() {
    for (file, max) in [
        ("README.md", README_MAX_LINES),
        ("ARCHITECTURE.md", ARCHITECTURE_MAX_LINES),
    ] {
        let text = std::fs::read_to_string(root().join(file)).expect(file);
        let n = text.lines().count();
        assert!(
            n <= max,
            "{file} has {n} lines (at most {max}): move detail to docs/"
        );
    }
}
