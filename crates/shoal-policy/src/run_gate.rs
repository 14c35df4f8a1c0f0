//! The run-time Leash gate (docs/rules.md §21): the real check of every
//! effect a token principal's evaluation makes, at the site that makes it.
//!
//! The static derivation (`derive`) decides whether a program may start;
//! this module decides, while it runs, whether each file it touches and
//! each binary it starts is granted. The session installs a [`RunGate`] on
//! the evaluation thread for the duration of each exec or task of a
//! principal whose policy is not the permissive local default
//! ([`with_gate`], next to `landlock::with_rules`); every effect site calls
//! [`check`] (or the path / spawn helpers) and fails with `policy_denied`
//! (`-32010` on the wire) when the effect is not granted and not covered by
//! the approved plan being applied. No gate installed (the local uid): no
//! check and no cost beyond one thread-local read.
//!
//! Paths are resolved before they are decided: joined with the evaluator's
//! current cwd, `..` normalised lexically, then the symlinks of the longest
//! existing prefix resolved (`canonicalize`). The final component's symlink
//! is followed for reads and writes and not for the delete of the link
//! itself. A regular file with more than one hard link is refused for
//! writes, deletes and reads (another name may reach a file outside the
//! grants).

use std::cell::RefCell;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::effect::Effect;
use super::policy::{OpaqueMode, PathGlob, PrincipalPolicy};
use shoal_base::error::{ErrorCode, ShoalError};

/// A granted binary: the file a `proc_spawn` grant names, and its content
/// hash when the grant was loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinId {
    pub path: PathBuf,
    pub hash: String,
}

/// How `proc_spawn` grants name binaries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bins {
    /// `proc_spawn = ["*"]`: any binary.
    pub any: bool,
    /// Files named by bare names (resolved on the daemon's PATH) or
    /// absolute paths.
    pub files: Vec<BinId>,
    /// Grants spelled as a BLAKE3 content hash.
    pub hashes: Vec<String>,
}

impl Bins {
    /// Resolve `grants` (bare names on `path_var`, absolute paths as
    /// written, 64-hex hashes as hashes). A name that resolves to nothing
    /// grants nothing.
    pub fn resolve(grants: &[String], path_var: Option<&str>) -> Bins {
        let mut b = Bins::default();
        for g in grants {
            if g == "*" {
                b.any = true;
            } else if g.len() == 64 && g.bytes().all(|c| c.is_ascii_hexdigit()) {
                b.hashes.push(g.to_ascii_lowercase());
            } else {
                let found = if g.starts_with('/') {
                    Some(PathBuf::from(g))
                } else if g.contains('/') {
                    None
                } else {
                    shoal_base::lookup::find_program(g, path_var, Path::new("/"))
                };
                let Some(p) = found else { continue };
                let p = std::fs::canonicalize(&p).unwrap_or(p);
                if let Some(hash) = crate::bin_id::bin_hash_cached(&p) {
                    b.files.push(BinId { path: p, hash });
                }
            }
        }
        b
    }

    /// Is the file at `program` (as the spawn will exec it) granted?
    pub fn grants(&self, program: &Path) -> bool {
        if self.any {
            return true;
        }
        let Ok(real) = std::fs::canonicalize(program) else {
            return false;
        };
        let Some(hash) = crate::bin_id::bin_hash_cached(&real) else {
            return false;
        };
        self.hashes.contains(&hash) || self.files.iter().any(|f| f.path == real && f.hash == hash)
    }
}

/// What the evaluation of one principal may do, installed on its threads.
#[derive(Debug)]
pub struct RunGate {
    pub principal: String,
    /// `None`: the principal has no policy section (everything refused).
    policy: Option<PrincipalPolicy>,
    home: Option<String>,
    bins: Bins,
    /// The effects of the approved plan being applied.
    approved: Vec<Effect>,
}

impl RunGate {
    /// The gate of `principal` under `policy`; `home` is what `~` in a
    /// grant means. Grants whose literal root is reached through a symlink
    /// also match under the root's real path; for a token principal only
    /// through the operator's links (none where a token may write:
    /// [`crate::grant_path::link_dirs`]).
    pub fn new(principal: &str, policy: Option<&PrincipalPolicy>, home: Option<&str>) -> RunGate {
        let links = (principal != crate::runtime().local)
            .then(|| crate::grant_path::link_dirs(policy, home));
        let path_var = std::env::var("PATH").ok();
        let bins = policy
            .map(|p| {
                let gs: Vec<String> = p.proc_spawn.iter().map(|g| g.0.clone()).collect();
                Bins::resolve(&gs, path_var.as_deref())
            })
            .unwrap_or_default();
        let policy = policy.map(|p| {
            let mut p = p.clone();
            for list in [&mut p.fs.read, &mut p.fs.write, &mut p.fs.delete] {
                let extra: Vec<PathGlob> = list
                    .iter()
                    .filter_map(|g| real_root_variant(&g.expanded(home), links.as_deref()))
                    .map(PathGlob)
                    .collect();
                list.extend(extra);
            }
            p
        });
        RunGate {
            principal: principal.to_string(),
            policy,
            home: home.map(str::to_string),
            bins,
            approved: Vec::new(),
        }
    }

    /// This gate while applying an approved plan of `effects`.
    pub fn applying(&self, effects: &[Effect]) -> RunGate {
        RunGate {
            principal: self.principal.clone(),
            policy: self.policy.clone(),
            home: self.home.clone(),
            bins: self.bins.clone(),
            approved: effects.to_vec(),
        }
    }

    /// The decision on one (resolved) effect.
    pub fn decide(&self, e: &Effect) -> Result<(), String> {
        let Some(p) = &self.policy else {
            return Err(super::policy::missing_section(&self.principal));
        };
        match p.check(e, self.home.as_deref()) {
            Ok(true) => Ok(()),
            Ok(false) if self.approved.contains(e) => Ok(()),
            Ok(false) => Err(format!(
                "{} needs approval; plan it and apply the approved plan",
                e.kind()
            )),
            Err(reason) => Err(reason),
        }
    }

    /// Starting the binary at `program` (resolved as the spawn resolves
    /// it): granted by identity, or as an opaque effect.
    pub fn decide_spawn(&self, program: &Path) -> Result<(), String> {
        if self.policy.is_none() {
            return Err(super::policy::missing_section(&self.principal));
        }
        if self.bins.grants(program) {
            return Ok(());
        }
        self.decide(&Effect::Opaque).map_err(|why| {
            format!(
                "{} is not a binary proc_spawn grants (by path and content hash), and {why}",
                program.display()
            )
        })
    }

    fn opaque_mode(&self) -> Option<OpaqueMode> {
        self.policy.as_ref().map(|p| p.opaque)
    }
}

/// `/real/root/rest` for a grant whose glob-free root is a symlink path
/// (`None` when the root resolves to itself or does not exist, or, given
/// `links`, goes through a link in one of them).
fn real_root_variant(pat: &str, links: Option<&[PathBuf]>) -> Option<String> {
    let comps: Vec<&str> = pat.split('/').collect();
    let lit = comps
        .iter()
        .position(|c| crate::glob::is_glob(c))
        .unwrap_or(comps.len());
    let root: String = comps[..lit].join("/");
    let rest: String = comps[lit..].join("/");
    let root_path = if root.is_empty() { "/" } else { root.as_str() };
    let real = match links {
        Some(links) => crate::grant_path::resolve_grant(Path::new(root_path), links)?,
        None => std::fs::canonicalize(root_path).ok()?,
    };
    let real = real.to_string_lossy();
    if real == root_path {
        return None;
    }
    Some(if rest.is_empty() {
        real.into_owned()
    } else {
        format!("{}/{rest}", real.trim_end_matches('/'))
    })
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<RunGate>>> = const { RefCell::new(None) };
}

/// Run `f` with `gate` checking every effect this thread makes.
pub fn with_gate<T>(gate: Option<Arc<RunGate>>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Arc<RunGate>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = prev);
        }
    }
    let prev = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), gate));
    let _reset = Reset(prev);
    f()
}

/// The gate of the current thread (threads the evaluator starts carry it).
pub fn current() -> Option<Arc<RunGate>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Is a gate installed on this thread?
pub fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

fn denied(msg: String) -> ShoalError {
    ShoalError::new(ErrorCode::PolicyDenied, format!("policy denies this: {msg}"))
        .with_hint("the principal's policy does not grant it; plan it (explain / shoal_plan) to see its effects")
}

/// What a file access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Delete,
}

impl Access {
    fn effect(self, path: String) -> Effect {
        let paths = vec![path];
        match self {
            Access::Read => Effect::FsRead { paths },
            Access::Write => Effect::FsWrite { paths },
            Access::Delete => Effect::FsDelete { paths },
        }
    }
}

/// The effect `e` (absolute paths; a relative one is refused) against the
/// installed gate.
pub fn check(e: &Effect) -> Result<(), ShoalError> {
    let Some(g) = current() else { return Ok(()) };
    let (access, paths) = match e {
        Effect::FsRead { paths } => (Access::Read, paths),
        Effect::FsWrite { paths } => (Access::Write, paths),
        Effect::FsDelete { paths } => (Access::Delete, paths),
        other => return g.decide(other).map_err(denied),
    };
    for p in paths {
        let p = Path::new(p);
        if !p.is_absolute() {
            return Err(denied(format!(
                "{} of the relative path {} (no cwd to resolve it against)",
                e.kind(),
                p.display()
            )));
        }
        fs_with(&g, access, Path::new("/"), p)?;
    }
    Ok(())
}

/// A file access of `path` (relative to `cwd`, the evaluator's current
/// one) against the installed gate.
pub fn fs(access: Access, cwd: &Path, path: &Path) -> Result<(), ShoalError> {
    match current() {
        None => Ok(()),
        Some(g) => fs_with(&g, access, cwd, path),
    }
}

/// May the planner look at `path` (absolute) for this thread's principal?
/// Even a file's existence is a read of it: the deriver asks before it
/// stats a file, and treats one it may not read as unknown (it may or may
/// not exist). No gate installed (the local uid): always.
pub fn may_read(path: &Path) -> bool {
    match current() {
        None => true,
        Some(g) => fs_with(&g, Access::Read, Path::new("/"), path).is_ok(),
    }
}

fn fs_with(g: &RunGate, access: Access, cwd: &Path, path: &Path) -> Result<(), ShoalError> {
    // Both spellings must be granted: the lexical one (what the plan showed)
    // and the one the kernel will reach (through symlinks).
    let lex = lexical(cwd, path);
    let resolved = resolve(cwd, path, access != Access::Delete);
    if lex != resolved {
        g.decide(&access.effect(lex.to_string_lossy().into_owned()))
            .map_err(denied)?;
    }
    if let Ok(md) = std::fs::symlink_metadata(&resolved) {
        if md.is_file() && md.nlink() > 1 {
            return Err(denied(format!(
                "{} has {} hard links (another name may reach a file outside the grants)",
                path.display(),
                md.nlink()
            )));
        }
    }
    let e = access.effect(resolved.to_string_lossy().into_owned());
    g.decide(&e).map_err(denied)
}

/// Starting the binary at `program` (the file the spawn execs).
pub fn spawn(program: &Path) -> Result<(), ShoalError> {
    match current() {
        None => Ok(()),
        Some(g) => g.decide_spawn(program).map_err(denied),
    }
}

/// Running code this program does not show (a script file, `source`): an
/// opaque effect.
pub fn opaque(what: &str) -> Result<(), ShoalError> {
    match current() {
        None => Ok(()),
        Some(g) => g.decide(&Effect::Opaque).map_err(|why| {
            denied(format!(
                "{what} runs code the plan cannot see ({why}; opaque = {:?})",
                g.opaque_mode().map(|m| format!("{m:?}").to_lowercase())
            ))
        }),
    }
}

/// `path` joined with `cwd` and resolved as the kernel will: the longest
/// existing prefix canonicalised (its symlinks and `..` as the filesystem
/// has them), the rest normalised lexically; the final component followed
/// only when `follow_last`.
pub fn resolve(cwd: &Path, path: &Path, follow_last: bool) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let last = if follow_last {
        None
    } else {
        match joined.components().next_back() {
            Some(std::path::Component::Normal(l)) => Some(l.to_os_string()),
            _ => None,
        }
    };
    let dir = match (&last, joined.parent()) {
        (Some(_), Some(d)) => d.to_path_buf(),
        _ => joined.clone(),
    };
    let mut real = real_prefix(&dir);
    if let Some(l) = last {
        real.push(l);
    }
    real
}

/// The lexical form of `path` against `cwd` (`..` popped, `.` dropped).
pub fn lexical(cwd: &Path, path: &Path) -> PathBuf {
    shoal_base::paths::normalize(&cwd.join(path))
}

/// `canonicalize` of the longest existing prefix of `p`, the rest
/// normalised lexically on top of it.
fn real_prefix(p: &Path) -> PathBuf {
    let comps: Vec<std::path::Component> = p.components().collect();
    for i in (1..=comps.len()).rev() {
        let prefix: PathBuf = comps[..i].iter().collect();
        if let Ok(r) = std::fs::canonicalize(&prefix) {
            let rest: PathBuf = comps[i..].iter().collect();
            return shoal_base::paths::normalize(&r.join(rest));
        }
    }
    shoal_base::paths::normalize(p)
}

/// [`glob::expand`](crate::glob::expand) for an evaluation under Leash: listing the pattern's root
/// is a read of it (docs/rules.md §21).
pub fn expand_checked(
    pattern: &str,
    cwd: &Path,
    hidden: bool,
) -> Result<Vec<PathBuf>, shoal_base::error::ShoalError> {
    if let Some(c) = pattern.split('/').find(|c| c.contains("**") && *c != "**") {
        // `src**` is `src*` in bash: almost always `{dir}**` missing a `/`.
        return Err(shoal_base::error::ShoalError::arg_error(format!(
            "`**` in `{c}` is not a whole path component: it would match like `*`, within one directory"
        ))
        .with_hint(format!(
            "write `**` as its own component to recurse: `{}`",
            pattern.replacen("**", "/**", 1).replace("//**", "/**")
        )));
    }
    fs(Access::Read, cwd, &crate::glob::root_of(pattern, cwd))?;
    Ok(crate::glob::expand(pattern, cwd, hidden))
}

#[cfg(test)]
mod tests;
