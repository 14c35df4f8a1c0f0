//! Where a plan was made (docs/leash.md, Plans): the session's cwd and a
//! digest of its environment. An approved plan applies only there.

use std::path::{Path, PathBuf};

/// Where a plan was made: the session's cwd and a digest of its whole
/// environment. Both decide what the same source does (a relative or bare
/// command name, a script path, `PATH`, `BASH_ENV`, ...), so an approved plan
/// applies only where it was planned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    pub cwd: PathBuf,
    /// 64 hex of BLAKE3 over the environment's pairs, sorted (never shown:
    /// it covers variables the principal may not read).
    pub env: String,
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
        }
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
}
