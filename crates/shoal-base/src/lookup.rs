//! Executable lookup on a session `PATH` (docs/rules.md §4, §8).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn is_executable(p: &Path) -> bool {
    match std::fs::metadata(p) {
        Ok(m) => m.is_file() && m.permissions().mode() & 0o111 != 0,
        Err(_) => false,
    }
}

/// Resolve a command name. A name containing `/` is a path (relative to
/// `cwd`); otherwise each `PATH` entry is searched in order (an empty entry
/// means the cwd).
pub fn find_program(name: &str, path_var: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        let p = cwd.join(name);
        return is_executable(&p).then_some(p);
    }
    let path_var = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in path_var.split(':') {
        let d = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            cwd.join(dir)
        };
        let p = d.join(name);
        if is_executable(&p) {
            return Some(p);
        }
    }
    None
}

/// Is `name` something a bare identifier may run (docs/rules.md §4)? Names
/// containing `/` or `.` are never looked up.
pub fn on_path(name: &str, path_var: Option<&str>, cwd: &Path) -> bool {
    if name.contains('/') || name.contains('.') {
        return false;
    }
    find_program(name, path_var, cwd).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh() {
        let p = find_program("sh", Some("/nonexistent:/bin:/usr/bin"), Path::new("/"));
        assert!(p.is_some());
        assert!(
            find_program("definitely-not-a-program-zz", Some("/bin"), Path::new("/")).is_none()
        );
        assert!(!on_path("a.b", Some("/bin"), Path::new("/")));
    }
}
