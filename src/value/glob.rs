//! Glob matching and expansion (language.md §10.2, §12.8).
use std::path::{Path, PathBuf};

/// Does `name` match the single-component wildcard `pat` (`*`, `?`, `[...]`)?
pub fn wildcard_match(pat: &str, name: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_from(&p, &n)
}

fn match_class(p: &[char], c: char) -> Option<(bool, usize)> {
    // p[0] == '['; returns (matched, length consumed)
    let mut i = 1;
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
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

fn match_from(p: &[char], n: &[char]) -> bool {
    // Iterative with single-star backtracking.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, len)) = match_class(&p[pi..], n[ni]) {
                        if ok {
                            pi += len;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

fn has_magic(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Expand `pattern` relative to `cwd`. Results are sorted; relative patterns
/// yield relative paths. Dotfiles match only when the component pattern starts
/// with `.` or `hidden` is set. `**` matches any number of directories.
pub fn expand(pattern: &str, cwd: &Path, hidden: bool) -> Vec<PathBuf> {
    let absolute = pattern.starts_with('/');
    let comps: Vec<&str> = pattern
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let base_rel = PathBuf::new();
    let root = if absolute {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    };
    let mut out = Vec::new();
    walk(&root, &base_rel, &comps, hidden, absolute, &mut out);
    out.sort();
    out.dedup();
    out
}

fn walk(
    root: &Path,
    rel: &Path,
    comps: &[&str],
    hidden: bool,
    absolute: bool,
    out: &mut Vec<PathBuf>,
) {
    let full = root.join(rel);
    let Some((first, rest)) = comps.split_first() else {
        let p = if absolute { full } else { rel.to_path_buf() };
        if !p.as_os_str().is_empty() {
            out.push(p);
        }
        return;
    };
    if *first == "**" {
        // zero directories
        walk(root, rel, rest, hidden, absolute, out);
        if let Ok(rd) = std::fs::read_dir(&full) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name_s = name.to_string_lossy();
                if name_s.starts_with('.') && !hidden {
                    continue;
                }
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    walk(root, &rel.join(&name), comps, hidden, absolute, out);
                }
            }
        }
        return;
    }
    if !has_magic(first) {
        let next = rel.join(first);
        if rest.is_empty() {
            if std::fs::symlink_metadata(root.join(&next)).is_ok() {
                walk(root, &next, rest, hidden, absolute, out);
            }
        } else if root.join(&next).is_dir() {
            walk(root, &next, rest, hidden, absolute, out);
        }
        return;
    }
    let Ok(rd) = std::fs::read_dir(&full) else {
        return;
    };
    let allow_dot = hidden || first.starts_with('.');
    for e in rd.flatten() {
        let name = e.file_name();
        let name_s = name.to_string_lossy();
        if name_s.starts_with('.') && !allow_dot {
            continue;
        }
        if !wildcard_match(first, &name_s) {
            continue;
        }
        let next = rel.join(&name);
        if rest.is_empty() || root.join(&next).is_dir() {
            walk(root, &next, rest, hidden, absolute, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn expansion() {
        let d = tempfile::tempdir().unwrap();
        for f in ["a.txt", "b.txt", ".h.txt", "sub/c.txt", "sub/deep/d.txt"] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let names = |v: Vec<PathBuf>| {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
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
}
