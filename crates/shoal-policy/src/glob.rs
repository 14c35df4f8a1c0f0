//! Glob matching and expansion (docs/rules.md §8, §10): the one
//! implementation behind glob words, glob values and their methods.
//!
//! Patterns use `*` (any run within a component), `?` (one character),
//! `[abc]`, `[a-z]`, `[!x]` / `[^x]` (classes) and `**` as a whole component
//! (zero or more directories). Dotfiles are matched only when the pattern
//! component itself starts with `.` or `hidden` is set.

use std::path::{Component, Path, PathBuf};

/// Does `s` contain glob metacharacters?
pub fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', ']'])
}

/// fnmatch-style match of one path component.
pub fn match_component(pat: &str, name: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_at(&p, 0, &n, 0)
}

fn match_at(p: &[char], mut pi: usize, n: &[char], mut ni: usize) -> bool {
    // Iterative with single-star backtracking.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' if ni < n.len() => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' if ni < n.len() => {
                    if let Some((matched, next)) = match_class(p, pi, n[ni]) {
                        if matched {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        // Unclosed class: a literal `[`.
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if ni < n.len() && c != '?' && c != '[' && c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        } else if ni == n.len() {
            return true;
        }
        match star {
            Some((sp, sn)) if sn < n.len() => {
                star = Some((sp, sn + 1));
                pi = sp + 1;
                ni = sn + 1;
            }
            _ => return false,
        }
    }
}

/// Match a `[...]` class starting at `p[start] == '['` against `c`.
/// Returns `(matched, index after the class)`, or `None` if unclosed.
fn match_class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < p.len() && (p[i] == '!' || p[i] == '^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            let hi = p[i + 2];
            if lo <= c && c <= hi {
                matched = true;
            }
            i += 3;
        } else {
            if lo == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

/// Does `name` match the single-component wildcard `pat`? (The name the
/// value methods use for [`match_component`].)
pub fn wildcard_match(pat: &str, name: &str) -> bool {
    match_component(pat, name)
}

/// Expand `pattern` against `cwd`. Results are sorted and spelled as the
/// pattern spells them: relative patterns give relative paths (`*.txt` →
/// `a.txt`), absolute patterns absolute ones. A trailing `/` matches
/// directories only, as in bash (`src/*/`). `~/` must be expanded by the
/// caller.
pub fn expand(pattern: &str, cwd: &Path, hidden: bool) -> Vec<PathBuf> {
    let mut out = expand_all(pattern, cwd, hidden);
    if pattern.len() > 1 && pattern.ends_with('/') {
        out.retain(|p| std::fs::metadata(resolve(cwd, p)).is_ok_and(|m| m.is_dir()));
    }
    out
}

fn expand_all(pattern: &str, cwd: &Path, hidden: bool) -> Vec<PathBuf> {
    let pat = Path::new(pattern);
    let mut prefix = PathBuf::new();
    let mut comps: Vec<String> = Vec::new();
    for c in pat.components() {
        match c {
            Component::RootDir => prefix.push("/"),
            Component::Prefix(p) => prefix.push(p.as_os_str()),
            Component::CurDir => {
                if comps.is_empty() {
                    prefix.push(".");
                }
            }
            Component::ParentDir => {
                if comps.is_empty() {
                    prefix.push("..");
                } else {
                    comps.push("..".into());
                }
            }
            Component::Normal(s) => comps.push(s.to_string_lossy().into_owned()),
        }
    }
    // Literal leading components go into the prefix.
    let mut idx = 0;
    while idx < comps.len() && !is_glob(&comps[idx]) {
        if idx + 1 == comps.len() {
            break;
        }
        prefix.push(&comps[idx]);
        idx += 1;
    }
    let mut out = Vec::new();
    walk(cwd, &prefix, &comps[idx..], hidden, &mut out);
    out.sort();
    out.dedup();
    out
}

/// The glob-free leading directory of `pattern` (what expanding it lists),
/// joined with `cwd`.
pub fn root_of(pattern: &str, cwd: &Path) -> PathBuf {
    let mut root = PathBuf::new();
    let comps: Vec<Component> = Path::new(pattern).components().collect();
    for (i, c) in comps.iter().enumerate() {
        let text = c.as_os_str().to_string_lossy();
        if is_glob(&text) || i + 1 == comps.len() && !matches!(c, Component::RootDir) {
            break;
        }
        root.push(c.as_os_str());
    }
    cwd.join(root)
}

/// Does the absolute, normalised `path` match the path glob `pat`
/// component by component? `*`, `?` and classes never cross `/`; `**` as
/// a whole component matches zero or more components, only where written.
/// The one matcher behind Leash grants (docs/rules.md §21) and glob words.
pub fn match_path(pat: &str, path: &str) -> bool {
    if !pat.starts_with('/') || !path.starts_with('/') {
        return false;
    }
    let p: Vec<&str> = pat.split('/').filter(|c| !c.is_empty()).collect();
    let n: Vec<String> = Path::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    match_parts(&p, &n)
}

fn match_parts(p: &[&str], n: &[String]) -> bool {
    // Iterative `**` backtracking over components (linear in the number
    // of `**`s times the path length; no recursion on user input).
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() && p[pi] == "**" {
            star = Some((pi, ni));
            pi += 1;
            continue;
        }
        if pi < p.len() && ni < n.len() && match_component(p[pi], &n[ni]) {
            pi += 1;
            ni += 1;
            continue;
        }
        if pi == p.len() && ni == n.len() {
            return true;
        }
        match star {
            Some((sp, sn)) if sn < n.len() => {
                star = Some((sp, sn + 1));
                pi = sp + 1;
                ni = sn + 1;
            }
            _ => return false,
        }
    }
}

fn resolve(cwd: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        cwd.to_path_buf()
    } else {
        cwd.join(rel)
    }
}

fn list_dir(dir: &Path) -> Vec<(String, bool)> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = std::fs::metadata(e.path())
                .map(|m| m.is_dir())
                .unwrap_or(false);
            v.push((name, is_dir));
        }
    }
    v.sort();
    v
}

fn walk(cwd: &Path, base: &Path, comps: &[String], hidden: bool, out: &mut Vec<PathBuf>) {
    let Some((first, rest)) = comps.split_first() else {
        if std::fs::symlink_metadata(resolve(cwd, base)).is_ok() {
            out.push(base.to_path_buf());
        }
        return;
    };
    if first == "**" {
        // Zero directories.
        walk(cwd, base, rest, hidden, out);
        // One or more.
        for (name, is_dir) in list_dir(&resolve(cwd, base)) {
            if name.starts_with('.') && !hidden {
                continue;
            }
            if !is_dir {
                // A trailing `**` is everything below, files included (as
                // a Leash grant `dir/**` means).
                if rest.is_empty() {
                    out.push(base.join(&name));
                }
                continue;
            }
            walk(cwd, &base.join(&name), comps, hidden, out);
        }
        return;
    }
    if !is_glob(first) {
        let next = base.join(first);
        if rest.is_empty() {
            if std::fs::symlink_metadata(resolve(cwd, &next)).is_ok() {
                out.push(next);
            }
        } else {
            walk(cwd, &next, rest, hidden, out);
        }
        return;
    }
    let allow_dot = hidden || first.starts_with('.');
    for (name, is_dir) in list_dir(&resolve(cwd, base)) {
        if name.starts_with('.') && !allow_dot {
            continue;
        }
        if !match_component(first, &name) {
            continue;
        }
        if rest.is_empty() {
            out.push(base.join(&name));
        } else if is_dir {
            walk(cwd, &base.join(&name), rest, hidden, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory holding `files` (parents made as needed).
    fn tree(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        d
    }

    /// Expanded paths as strings.
    fn names(v: Vec<PathBuf>) -> Vec<String> {
        v.iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn component_matching() {
        assert!(match_component("*.txt", "a.txt"));
        assert!(!match_component("*.txt", "a.log"));
        assert!(match_component("a?c", "abc"));
        assert!(match_component("[ab]*", "bcd"));
        assert!(!match_component("[!ab]*", "bcd"));
        assert!(match_component("[a-c]x", "bx"));
        assert!(match_component("*", ""));
        assert!(match_component("a*b*c", "aXXbYYc"));
        assert!(!match_component("a*b*c", "aXXbYY"));
    }

    #[test]
    fn expansion() {
        let d = tree(&[
            "a.txt",
            "b.txt",
            "c.log",
            ".h.txt",
            "sub/d.txt",
            "sub/deep/e.txt",
        ]);
        assert_eq!(names(expand("*.txt", d.path(), false)), ["a.txt", "b.txt"]);
        assert_eq!(
            names(expand("*.txt", d.path(), true)),
            [".h.txt", "a.txt", "b.txt"]
        );
        assert_eq!(names(expand(".*.txt", d.path(), false)), [".h.txt"]);
        assert_eq!(
            names(expand("**/*.txt", d.path(), false)),
            ["a.txt", "b.txt", "sub/d.txt", "sub/deep/e.txt"]
        );
        assert_eq!(names(expand("sub/*.txt", d.path(), false)), ["sub/d.txt"]);
        assert!(expand("*.zzz", d.path(), false).is_empty());
        let abs = format!("{}/*.log", d.path().display());
        assert_eq!(
            expand(&abs, Path::new("/"), false),
            [d.path().join("c.log")]
        );
    }

    #[test]
    fn wildcards() {
        for (p, n, want) in [
            ("*.rs", "a.rs", true),
            ("*.rs", "a.rc", false),
            ("a?c", "abc", true),
            ("[ab]*", "bz", true),
            ("[!ab]*", "bz", false),
            ("[a-c]x", "bx", true),
            ("*", "", true),
            ("*a*b", "xxaxxb", true),
        ] {
            assert_eq!(wildcard_match(p, n), want, "{p} {n}");
        }
    }

    #[test]
    fn expansion_of_values() {
        let d = tree(&["a.txt", "b.txt", ".h.txt", "sub/c.txt", "sub/deep/d.txt"]);
        assert_eq!(names(expand("*.txt", d.path(), false)), ["a.txt", "b.txt"]);
        assert_eq!(
            names(expand("*.txt", d.path(), true)),
            [".h.txt", "a.txt", "b.txt"]
        );
        assert_eq!(
            names(expand("**/*.txt", d.path(), false)),
            ["a.txt", "b.txt", "sub/c.txt", "sub/deep/d.txt"]
        );
        assert_eq!(names(expand("sub/*.txt", d.path(), false)), ["sub/c.txt"]);
    }

    #[test]
    fn a_trailing_slash_matches_directories_only() {
        let d = tree(&["a.txt", "sub/c.txt", "sub/deep/d.txt", "two/x"]);
        assert_eq!(names(expand("*/", d.path(), false)), ["sub", "two"]);
        assert_eq!(names(expand("sub/*/", d.path(), false)), ["sub/deep"]);
        assert_eq!(names(expand("*", d.path(), false)), ["a.txt", "sub", "two"]);
        assert!(expand("a.txt/", d.path(), false).is_empty());
    }

    #[test]
    fn a_double_star_inside_a_component_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = crate::run_gate::expand_checked("src**/*.rs", d.path(), false).unwrap_err();
        assert!(e.msg.contains("not a whole path component"), "{e:?}");
        assert_eq!(
            e.hint.as_deref(),
            Some("write `**` as its own component to recurse: `src/**/*.rs`")
        );
        assert!(crate::run_gate::expand_checked("src/**/*.rs", d.path(), false).is_ok());
        assert!(crate::run_gate::expand_checked("**", d.path(), false).is_ok());
    }
}
