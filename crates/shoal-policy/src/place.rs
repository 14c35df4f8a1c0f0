//! Where a plan was made (docs/leash.md, Plans): the session's cwd, a
//! digest of its environment and of the files its source names. An approved
//! plan applies only there, and only to those files as they were.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// At most this many files bind a plan; a source naming more is `unbound`.
pub const MAX_BOUND_FILES: usize = 64;
/// Past this size a file is bound by its identity and change time (which
/// any write moves), not its content hash.
pub const MAX_HASHED_BYTES: u64 = 16 << 20;

/// A file the plan's source names (a program it runs, a script it gives an
/// interpreter) and a digest of it when the plan was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundFile {
    /// As the source reached it (not canonicalised: a symlink swapped in on
    /// the way changes what opening it reads).
    pub path: PathBuf,
    /// `b3:` + 64 hex of BLAKE3 over its content, or `stat:` + device, inode,
    /// size and change time of a file over [`MAX_HASHED_BYTES`].
    pub digest: String,
}

/// Why a plan whose file `f` changed does not apply.
pub fn changed_why(f: &Path) -> String {
    format!(
        "{} changed (or appeared, or is gone) since the plan was made",
        f.display()
    )
}

/// The digest of the regular file at `path` as [`BoundFile::digest`] has it
/// (`None`: no readable regular file there).
pub fn file_digest(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let md = f.metadata().ok()?;
    if !md.is_file() {
        return None;
    }
    if md.len() > MAX_HASHED_BYTES {
        return Some(format!(
            "stat:{}:{}:{}:{}.{}",
            md.dev(),
            md.ino(),
            md.len(),
            md.ctime(),
            md.ctime_nsec()
        ));
    }
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(format!("b3:{}", h.finalize().to_hex()))
}

/// Where a plan was made: the session's cwd and a digest of its whole
/// environment. Both decide what the same source does (a relative or bare
/// command name, a script path, `PATH`, `BASH_ENV`, ...), so an approved plan
/// applies only where it was planned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Place {
    pub cwd: PathBuf,
    /// 64 hex of BLAKE3 over the environment's pairs, sorted (never shown:
    /// it covers variables the principal may not read).
    pub env: String,
    /// The files the source names, in the order found (docs/leash.md, Plans).
    pub files: Vec<BoundFile>,
    /// The source named more than [`MAX_BOUND_FILES`] files: those past the
    /// cap are not bound, so an opaque plan of it does not apply.
    pub unbound: bool,
}

impl Place {
    pub fn of<'a>(cwd: &Path, env: impl IntoIterator<Item = (&'a str, &'a str)>) -> Place {
        let mut pairs: Vec<(&str, &str)> = env.into_iter().collect();
        pairs.sort_unstable();
        let mut h = blake3::Hasher::new();
        for (k, v) in pairs {
            for part in [k, v] {
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
        }
        Place {
            cwd: cwd.to_path_buf(),
            env: h.finalize().to_hex().to_string(),
            files: Vec::new(),
            unbound: false,
        }
    }

    /// This place bound to the regular files at `paths` (as they are now;
    /// those past [`MAX_BOUND_FILES`] make it `unbound`).
    pub fn with_files(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Place {
        for path in paths {
            if self.files.iter().any(|f| f.path == path) {
                continue;
            }
            if self.files.len() == MAX_BOUND_FILES {
                self.unbound = true;
                break;
            }
            if let Some(digest) = file_digest(&path) {
                self.files.push(BoundFile { path, digest });
            }
        }
        self
    }

    /// The bound files' paths as replies show them.
    pub fn file_texts(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| f.path.to_string_lossy().into_owned())
            .collect()
    }

    /// A file bound here that differs at `now` (changed, gone, or newly
    /// named there), or None when all are as they were.
    pub fn changed(&self, now: &Place) -> Option<PathBuf> {
        for f in &self.files {
            if !now.files.contains(f) {
                return Some(f.path.clone());
            }
        }
        now.files
            .iter()
            .find(|f| !self.files.iter().any(|g| g.path == f.path))
            .map(|f| f.path.clone())
    }

    /// The cwd as replies show it.
    pub fn cwd_text(&self) -> String {
        self.cwd.to_string_lossy().into_owned()
    }

    /// Why a run at `now` is not where this plan was made (None: it is).
    pub fn moved(&self, now: &Place) -> Option<String> {
        if self.cwd != now.cwd {
            Some(format!(
                "the session's cwd is {} but the plan was made in {}",
                now.cwd.display(),
                self.cwd.display()
            ))
        } else if self.env != now.env {
            Some("the session's environment changed since the plan was made".into())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_differ_by_cwd_and_environment() {
        let a = Place::of(Path::new("/p"), [("PATH", "/usr/bin"), ("A", "1")]);
        // The order of the variables does not matter; their values do.
        assert_eq!(
            a,
            Place::of(Path::new("/p"), [("A", "1"), ("PATH", "/usr/bin")])
        );
        assert!(a.moved(&a.clone()).is_none());
        let path = Place::of(Path::new("/p"), [("PATH", "/p:/usr/bin"), ("A", "1")]);
        assert!(a.moved(&path).is_some());
        let cwd = Place::of(Path::new("/q"), [("PATH", "/usr/bin"), ("A", "1")]);
        assert!(a.moved(&cwd).unwrap().contains("/q"));
        // A pair never reads as two others.
        assert_ne!(
            Place::of(Path::new("/p"), [("AB", "C")]),
            Place::of(Path::new("/p"), [("A", "BC")])
        );
    }

    #[test]
    fn bound_files_notice_a_rewrite_a_removal_and_a_new_file() {
        let d = tempfile::tempdir().unwrap();
        let (x, y) = (d.path().join("x.sh"), d.path().join("y.sh"));
        std::fs::write(&x, "echo benign").unwrap();
        let at = |paths: Vec<PathBuf>| Place::of(d.path(), []).with_files(paths);
        let plan = at(vec![x.clone(), y.clone(), d.path().to_path_buf()]);
        // Only regular files that exist are bound.
        assert_eq!(plan.file_texts(), vec![x.to_string_lossy().into_owned()]);
        assert!(plan.files[0].digest.starts_with("b3:"));
        assert!(plan.changed(&at(vec![x.clone(), y.clone()])).is_none());
        std::fs::write(&x, "echo swapped").unwrap();
        assert_eq!(plan.changed(&at(vec![x.clone()])), Some(x.clone()));
        std::fs::write(&x, "echo benign").unwrap();
        std::fs::write(&y, "echo new").unwrap();
        assert_eq!(plan.changed(&at(vec![x.clone(), y.clone()])), Some(y));
        std::fs::remove_file(&x).unwrap();
        assert_eq!(plan.changed(&at(vec![x.clone()])), Some(x));
        let many: Vec<PathBuf> = (0..=MAX_BOUND_FILES)
            .map(|i| {
                let p = d.path().join(format!("f{i}"));
                std::fs::write(&p, "").unwrap();
                p
            })
            .collect();
        let capped = at(many);
        assert!(capped.unbound && capped.files.len() == MAX_BOUND_FILES);
    }
}
