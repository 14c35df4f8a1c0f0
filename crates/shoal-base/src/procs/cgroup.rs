//! The cgroup v2 side of process ownership: finding the daemon's own cgroup,
//! creating the `shoal-<pid>` tree, killing a subtree (`cgroup.kill`),
//! counting and removing it. Every function here is a thin, blocking wrapper
//! over cgroupfs files; nothing is cached but the base path.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where cgroup2 is mounted: the mount point of the first `cgroup2` line of
/// `/proc/self/mountinfo`.
pub fn mount_point() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        // `id parent maj:min root mount-point options… - fstype source opts`
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        pre.split_whitespace().nth(4).map(unescape)
    })
}

/// Octal escapes of mountinfo (`\040` for a space).
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let digits = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The daemon's own cgroup, from the `0::` line of `/proc/self/cgroup`, as a
/// path under the cgroup2 mount.
pub fn own_cgroup() -> Option<PathBuf> {
    let mount = mount_point()?;
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    // A cgroup removed under us reads `/… (deleted)`: unusable.
    if rel.ends_with(" (deleted)") {
        return None;
    }
    Some(mount.join(rel.trim_start_matches('/')))
}

/// Whether `dir` looks like a cgroup2 directory (it has `cgroup.kill`).
pub fn is_cgroup(dir: &Path) -> bool {
    dir.join("cgroup.kill").exists()
}

/// `cgroup.kill`: SIGKILL every process of `dir` and its descendants.
pub fn kill(dir: &Path) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))?;
    f.write_all(b"1")
}

/// Whether any process is in `dir` or below (`cgroup.events`).
pub fn populated(dir: &Path) -> bool {
    match fs::read_to_string(dir.join("cgroup.events")) {
        Ok(t) => t.lines().any(|l| l == "populated 1"),
        Err(_) => false,
    }
}

/// Wait (bounded) until nothing is left in `dir`.
pub fn wait_empty(dir: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if !populated(dir) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The pids in `dir` and below.
pub fn pids(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(t) = fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(t.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(rd) = fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    out
}

/// Remove `dir` and every cgroup below it, deepest first. Directories still
/// holding processes stay (EBUSY); the first error is returned.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    let mut first: Option<io::Error> = None;
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if let Err(err) = remove_tree(&e.path()) {
                    first.get_or_insert(err);
                }
            }
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Kill everything in `dir` and below, wait (bounded) until it is empty and
/// remove the tree. Returns how many processes were in it.
pub fn kill_tree(dir: &Path, within: Duration) -> usize {
    if !dir.exists() {
        return 0;
    }
    let n = pids(dir).len();
    if populated(dir) {
        if let Err(e) = kill(dir) {
            tracing::warn!(cgroup = %dir.display(), "cgroup.kill failed: {e}");
        }
        if !wait_empty(dir, within) {
            tracing::warn!(cgroup = %dir.display(), "processes still in the cgroup after cgroup.kill");
        }
    }
    if let Err(e) = remove_tree(dir) {
        tracing::debug!(cgroup = %dir.display(), "cgroup not removed: {e}");
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/a\\040b"), PathBuf::from("/a b"));
        assert_eq!(unescape("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape("/end\\"), PathBuf::from("/end\\"));
    }
}
