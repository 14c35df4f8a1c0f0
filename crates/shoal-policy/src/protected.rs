//! What no token principal may reach, whatever its grants say: the daemon's state, config
//! and socket directories and its private temporary directory (set once at start,
//! [`protect`]), and how a grant that covers one of them is cut around it ([`carve`]). Also
//! the system directories every confined program reads. Both the Landlock rules and the
//! namespaces read these lists; this module depends on neither.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static PROTECTED: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// The daemon's own directories, out of every token's reach (set once at
/// start; canonical paths).
pub fn protect(dirs: impl IntoIterator<Item = PathBuf>) {
    let mut v: Vec<PathBuf> = dirs
        .into_iter()
        .map(|d| d.canonicalize().unwrap_or(d))
        .collect();
    v.sort();
    v.dedup();
    let _ = PROTECTED.set(v);
}

/// The daemon's private temporary directory (`$TMPDIR/shoal-<uid>`).
pub(crate) fn temp_base() -> PathBuf {
    let base = std::env::temp_dir().join(format!("shoal-{}", shoal_base::paths::euid()));
    base.canonicalize().unwrap_or(base)
}

/// Every directory a token principal's rules leave out.
pub fn protected() -> Vec<PathBuf> {
    let mut v = PROTECTED.get().cloned().unwrap_or_default();
    v.push(temp_base());
    v.push(PathBuf::from("/proc"));
    v
}

/// `root` with every protected directory cut out: paths whose subtrees
/// together are `root`'s minus the protected ones. A directory that cannot
/// be listed gives nothing (fails closed); symlinks are skipped (the kernel
/// checks their targets where they resolve).
pub fn carve(root: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    if protected.iter().any(|p| root.starts_with(p)) {
        return Vec::new();
    }
    let inner: Vec<&PathBuf> = protected.iter().filter(|p| p.starts_with(root)).collect();
    if inner.is_empty() {
        return vec![root.to_path_buf()];
    }
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let child = root.join(e.file_name());
        if e.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        if inner.iter().any(|p| p.starts_with(&child)) {
            out.extend(carve(&child, protected));
        } else {
            out.push(child);
        }
    }
    out.sort();
    out
}

/// Cut the protected directories out of a list of rule roots.
pub fn carve_all(roots: Vec<PathBuf>, protected: &[PathBuf]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = roots.iter().flat_map(|r| carve(r, protected)).collect();
    v.sort();
    v.dedup();
    v
}

/// What every token principal may read and execute besides its grants:
/// the system's program and library directories, and the daemon's `PATH`
/// (with the home of a version manager's `shims`, where its versions live).
pub fn system_reads() -> Vec<PathBuf> {
    static SYSTEM: OnceLock<Vec<PathBuf>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| {
            let mut v: Vec<PathBuf> = [
                "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                "/nix",
            ]
            .iter()
            .map(PathBuf::from)
            .collect();
            if let Some(path) = std::env::var_os("PATH") {
                for d in std::env::split_paths(&path).filter(|d| d.is_absolute()) {
                    if d.ends_with("shims") {
                        if let Some(p) = d.parent() {
                            v.push(p.to_path_buf());
                        }
                    }
                    v.push(d);
                }
            }
            for dev in ["/dev/urandom", "/dev/random"] {
                v.push(PathBuf::from(dev));
            }
            let mut v: Vec<PathBuf> = v
                .into_iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect();
            v.sort();
            v.dedup();
            v
        })
        .clone()
}
