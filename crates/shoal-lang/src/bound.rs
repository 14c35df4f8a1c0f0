//! The files a plan's source names (docs/leash.md, Plans): an approved plan
//! is bound to their content, so rewriting `./build.sh` (or the script given
//! to `sh`, `bash`, `python3`) after the approval refuses the apply.
//!
//! Deliberately simple and conservative: every word of the source text (the
//! language's words, strings, and the text of `sh { }` blocks alike) that
//! names an existing regular file the principal may read is a candidate,
//! relative to the session's cwd or to any directory another word names
//! (`cd sub; ./x`), and a bare word is also looked up as a command on `PATH`.
//! A `#!` script's interpreter is bound too, and a glob binds its matches.
//! A source that builds names the scan cannot follow (quotes glued to a
//! word, backslashes, `$` inside a word, command substitution, `-m`) is
//! unbound. Names built by the language (`"./b" ++ "x"`) and files a program
//! reads by itself are not seen.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Distinct words looked at; a source with more is unbound.
const MAX_WORDS: usize = 4096;
/// Directories relative words are tried against (the cwd first).
const MAX_DIRS: usize = 16;

/// Characters that end a word (shell and language punctuation).
fn is_break(c: char) -> bool {
    c.is_whitespace() || ";|&(){}[]<>\"'`,=".contains(c)
}

/// The distinct words of `src`: split at punctuation, plus each quoted
/// string whole (a name with spaces). `None`: more than [`MAX_WORDS`].
fn words(src: &str) -> Option<Vec<String>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let quoted = ['"', '\''].into_iter().flat_map(|q| {
        src.split(q)
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s)
    });
    for w in src.split(is_break).chain(quoted) {
        let w = w.trim();
        if w.is_empty() || w.len() > 4096 || !seen.insert(w.to_string()) {
            continue;
        }
        if out.len() == MAX_WORDS {
            return None;
        }
        out.push(w.to_string());
    }
    Some(out)
}

/// Whether `src` builds a name in a way this scan cannot follow: a quote
/// glued to a word (`"$PWD"/build.sh`, `./bu''ild.sh`), a backslash outside
/// quotes (`./build\.sh`), a `$` inside a word, a command substitution, or
/// `-m` (a module found by the interpreter, not by name). Such a plan is
/// unbound: an opaque one does not apply.
fn builds_names(src: &str) -> bool {
    let glued = |c: Option<char>| c.is_some_and(|c| !is_break(c) && !c.is_whitespace());
    let chars: Vec<char> = src.chars().collect();
    let mut quote: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        match quote {
            Some(q) if c == q => {
                quote = None;
                if glued(next) {
                    return true;
                }
            }
            Some(_) => {}
            None if c == '"' || c == '\'' => {
                if glued(prev) {
                    return true;
                }
                quote = Some(c);
            }
            None if c == '\\' || c == '`' => return true,
            None if c == '$' && (glued(prev) || next == Some('(')) => return true,
            None => {}
        }
    }
    src.split(is_break).any(|w| w == "-m")
}

/// `~/x`, `$NAME/x` and `${NAME}/x` with the session's environment.
fn expand(w: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    if w == "~" || w.starts_with("~/") {
        if let Some(h) = env("HOME") {
            return format!("{h}{}", &w[1..]);
        }
    }
    if let Some(rest) = w.strip_prefix('$') {
        let (name, tail) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once('}') {
                Some((n, t)) => (n, t),
                None => return w.to_string(),
            },
            None => {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if let Some(v) = env(name) {
            return format!("{v}{tail}");
        }
    }
    w.to_string()
}

fn may_see(p: &Path) -> bool {
    shoal_policy::run_gate::may_read(p)
}

fn is_file(p: &Path) -> bool {
    may_see(p) && std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// A word that may be a command name looked up on `PATH`.
fn is_command_name(w: &str) -> bool {
    !w.starts_with(['-', '.', '$', '~'])
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
}

/// The interpreter of a `#!` script at `p` (and, for `env`, the program it
/// names, looked up by `resolve`).
fn interpreters(p: &Path, resolve: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Vec::new();
    };
    let line = String::from_utf8_lossy(line);
    let line = line.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let Some(interp) = parts.next() else {
        return Vec::new();
    };
    let interp = match p.parent() {
        Some(dir) => dir.join(interp),
        None => PathBuf::from(interp),
    };
    let mut out = vec![interp.clone()];
    if interp.file_name().is_some_and(|n| n == "env") {
        if let Some(prog) = parts.find(|a| !a.starts_with('-') && !a.contains('=')) {
            out.extend(resolve(prog));
        }
    }
    out
}

/// The files `src` names as seen from `cwd` (see the module doc), in the
/// order found, and whether the source has more words than are looked at.
pub fn named_files(
    src: &str,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    resolve: &dyn Fn(&str) -> Option<PathBuf>,
) -> (Vec<PathBuf>, bool) {
    let (words, truncated) = match words(src) {
        Some(w) => (w, builds_names(src)),
        None => (Vec::new(), true),
    };
    let words: Vec<String> = words.iter().map(|w| expand(w, env)).collect();
    let mut dirs = vec![cwd.to_path_buf()];
    // Twice: `cd a; cd b` reaches `a/b` whatever order the words come in.
    for _ in 0..2 {
        for w in &words {
            for base in dirs.clone() {
                let p = shoal_base::paths::normalize(&base.join(w));
                if dirs.len() < MAX_DIRS && !dirs.contains(&p) && may_see(&p) && p.is_dir() {
                    dirs.push(p);
                }
            }
        }
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let add = |p: PathBuf, files: &mut Vec<PathBuf>| {
        if !files.contains(&p) && is_file(&p) {
            files.push(p);
        }
    };
    for w in &words {
        for base in &dirs {
            add(shoal_base::paths::normalize(&base.join(w)), &mut files);
            // A glob binds what it matches now (a new match refuses the apply).
            if shoal_policy::glob::is_glob(w) {
                for m in shoal_policy::glob::expand(w, base, false) {
                    add(shoal_base::paths::normalize(&base.join(m)), &mut files);
                }
            }
        }
        if is_command_name(w) {
            if let Some(p) = resolve(w) {
                add(p, &mut files);
            }
        }
    }
    let mut i = 0;
    while i < files.len() && i < shoal_policy::place::MAX_BOUND_FILES {
        for p in interpreters(&files[i], resolve) {
            add(shoal_base::paths::normalize(&p), &mut files);
        }
        i += 1;
    }
    (files, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str, cwd: &Path) -> Vec<String> {
        let env = |k: &str| (k == "HOME").then(|| cwd.display().to_string());
        let resolve = |w: &str| (w == "tool").then(|| cwd.join("bin/tool"));
        let (files, truncated) = named_files(src, cwd, &env, &resolve);
        assert!(!truncated);
        // Only those under `cwd` (a `#!/bin/sh` names `/bin/sh` too).
        files
            .iter()
            .filter_map(|p| p.strip_prefix(cwd).ok())
            .map(|p| p.display().to_string())
            .collect()
    }

    #[test]
    fn programs_scripts_and_their_interpreters_are_named() {
        let d = tempfile::tempdir().unwrap();
        let d = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join("bin")).unwrap();
        std::fs::write(d.join("build.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(d.join("sub/x.py"), "#!/usr/bin/env tool\n").unwrap();
        std::fs::write(d.join("bin/tool"), "").unwrap();
        std::fs::write(d.join("my file"), "").unwrap();
        assert_eq!(names("./build.sh", &d), vec!["build.sh"]);
        assert_eq!(names("sh { ./build.sh }", &d), vec!["build.sh"]);
        assert_eq!(names("bash build.sh --x=1", &d), vec!["build.sh"]);
        // A script's `#!/usr/bin/env tool` names `tool` on PATH.
        assert_eq!(
            names("cd sub; python3 x.py", &d),
            vec!["sub/x.py", "bin/tool"]
        );
        assert_eq!(
            names("cat \"my file\" ~/build.sh", &d),
            vec!["build.sh", "my file"]
        );
        assert_eq!(names("$HOME/sub/x.py", &d), vec!["sub/x.py", "bin/tool"]);
        assert!(names("echo hi; ls sub", &d).is_empty());
        // A glob binds its matches.
        assert_eq!(names("sh { ./buil?.sh }", &d), vec!["build.sh"]);
    }

    #[test]
    fn names_built_at_run_time_leave_the_plan_unbound() {
        let d = tempfile::tempdir().unwrap();
        let env = |_: &str| None;
        let resolve = |_: &str| None;
        let unbound = |src: &str| named_files(src, d.path(), &env, &resolve).1;
        for src in [
            "sh { \"$PWD\"/build.sh }",
            "sh { ./bu''ild.sh }",
            "sh { ./build\\.sh }",
            "sh { ./b$X.sh }",
            "sh { $(echo ./build.sh) }",
            "sh { `echo ./build.sh` }",
            "python3 -m tool",
        ] {
            assert!(unbound(src), "{src}");
        }
        for src in [
            "sh { ./build.sh }",
            "sh { echo \"a b\" 'c' }",
            "cat \"my file\"",
            "sh { $HOME/x }",
        ] {
            assert!(!unbound(src), "{src}");
        }
    }
}
