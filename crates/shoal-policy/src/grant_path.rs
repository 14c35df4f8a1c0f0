//! Where a token's grant path leads now: resolved through the links it may
//! follow ([`resolve_grant`]), and opened for a Landlock rule or a
//! namespace mount without following any link ([`open_grant`],
//! [`open_path`]), so a link swapped in since the rules were made grants
//! nothing.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::policy::PrincipalPolicy;

/// Longest glob-free prefix of an (expanded, absolute) glob.
pub(crate) fn root_of(glob: &str) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for c in glob.split('/').filter(|c| !c.is_empty()) {
        if crate::glob::is_glob(c) {
            break;
        }
        if c == ".." {
            out.pop();
        } else if c != "." {
            out.push(c);
        }
    }
    glob.starts_with('/').then_some(out)
}

/// Where a link may have been made by a token principal: the write and
/// delete grant roots of every token principal in the daemon's policy (and
/// of `own`, whose policy may be one not installed), as written and as
/// resolved. A link met in one of them is never followed when a grant is
/// resolved or opened: a token may have made it, to point its own grant or
/// another token's where it chose. Links elsewhere are the operator's.
pub fn link_dirs(own: Option<&PrincipalPolicy>, home: Option<&str>) -> Vec<PathBuf> {
    let rt = crate::runtime();
    let mut v: Vec<PathBuf> = rt
        .policy
        .principals
        .iter()
        .filter(|(name, _)| **name != rt.local)
        .map(|(_, p)| p)
        .chain(own)
        .flat_map(|p| p.fs.write.iter().chain(&p.fs.delete))
        .filter_map(|g| root_of(&g.expanded(home)))
        .collect();
    let resolved: Vec<PathBuf> = v.iter().filter_map(|r| r.canonicalize().ok()).collect();
    v.extend(resolved);
    v.sort();
    v.dedup();
    v
}

/// A token's grant root with its symbolic links resolved, or `None` (the grant is
/// dropped) when the path goes through a link in a directory a token may write
/// (`writable`, from [`link_dirs`]): a link it could have made would point the grant
/// wherever it chose (`proj/target -> /` turning `delete = ["proj/target/**"]` into the whole disk). Links
/// elsewhere (an operator's `~/src -> /data/src`, merged `/usr`) are followed. A path
/// that does not exist, or loops, grants nothing.
pub fn resolve_grant(root: &Path, writable: &[PathBuf]) -> Option<PathBuf> {
    use std::collections::VecDeque;
    use std::path::Component;
    let mut cur = PathBuf::from("/");
    let mut rest: VecDeque<std::ffi::OsString> = VecDeque::new();
    let push_front = |rest: &mut VecDeque<std::ffi::OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => rest.push_front(n.to_os_string()),
                Component::ParentDir => rest.push_front("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push_front(&mut rest, root);
    let mut links = 0;
    while let Some(c) = rest.pop_front() {
        if c == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&c);
        let meta = std::fs::symlink_metadata(&next).ok()?;
        if !meta.file_type().is_symlink() {
            cur = next;
            continue;
        }
        links += 1;
        if links > 40 || writable.iter().any(|w| cur.starts_with(w)) {
            tracing::warn!(grant = %root.display(), link = %next.display(),
                "a grant goes through a link the principal can make: the grant is dropped");
            return None;
        }
        let target = std::fs::read_link(&next).ok()?;
        if target.is_absolute() {
            cur = PathBuf::from("/");
        }
        push_front(&mut rest, &target);
    }
    Some(cur)
}

/// `path` opened (`O_PATH`) for a rule, following no link when `no_links`
/// (before Linux 5.6, no link in its last component). `None`: it is gone
/// (one of many entries a grant was cut into, say) or has a link in it.
pub(crate) fn open_path(path: &Path, no_links: bool) -> io::Result<Option<OwnedFd>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
    use rustix::io::Errno;
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let opened = if no_links {
        match rustix::fs::openat2(CWD, path, flags, Mode::empty(), ResolveFlags::NO_SYMLINKS) {
            Err(Errno::NOSYS) => rustix::fs::open(path, flags | OFlags::NOFOLLOW, Mode::empty()),
            r => r,
        }
    } else {
        rustix::fs::open(path, flags, Mode::empty())
    };
    match opened {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT | Errno::LOOP) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A token's grant path as a rule opens it now: the path itself when no
/// link is in it (one walk: the common case), else what [`resolve_grant`]
/// resolves it to, opened without following links. Either open fails on
/// a link swapped in meanwhile, so a grant the principal turned into a
/// link since its rules were made (`mv target t2; ln -s / target`) grants
/// nothing, not what the link points at. `None`: nothing is granted.
pub(crate) fn open_grant(path: &Path, writable: &[PathBuf]) -> io::Result<Option<OwnedFd>> {
    if let Ok(Some(fd)) = open_path(path, true) {
        return Ok(Some(fd));
    }
    // A link in it, or it failed to open: resolved a component at a time.
    match resolve_grant(path, writable) {
        Some(real) => open_path(&real, true),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    /// The inode `fd` names.
    fn ino(fd: &OwnedFd) -> (u64, u64) {
        let st = rustix::fs::fstat(fd).unwrap();
        (st.st_dev, st.st_ino)
    }

    /// Against the walk a component at a time on every kind of path a grant
    /// meets: [`open_grant`] opens what the resolved path names, and a root
    /// opens without links (what a namespace holder mounts) just when it
    /// resolves to itself.
    #[test]
    fn opening_a_grant_agrees_with_resolving_it_first() {
        let base = std::env::temp_dir().join(format!("shoal-grant-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for d in ["proj/sub/deep", "outside/in", "op/real/x"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let base = base.canonicalize().unwrap();
        let (proj, outside) = (base.join("proj"), base.join("outside"));
        std::fs::write(proj.join("file"), "f").unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        symlink(&outside, proj.join("to-outside")).unwrap();
        symlink("../outside", proj.join("rel")).unwrap();
        symlink(proj.join("file"), proj.join("to-file")).unwrap();
        symlink(base.join("op/real"), base.join("link")).unwrap();
        symlink(base.join("loop-a"), base.join("loop-b")).unwrap();
        symlink(base.join("loop-b"), base.join("loop-a")).unwrap();
        let writable = vec![proj.clone()];
        let paths = [
            "proj",
            "proj/sub",
            "proj/sub/deep",
            "proj/file",
            "proj/file/under-a-file",
            "proj/missing",
            "proj/to-outside",
            "proj/to-outside/secret",
            "proj/rel/in",
            "proj/to-file",
            "link",
            "link/x",
            "link/../real",
            "loop-a",
            "outside",
            "outside/secret",
            "proj/sub/../file",
        ];
        for rel in paths {
            let p = base.join(rel);
            let walked = resolve_grant(&p, &writable);
            let old = walked
                .as_ref()
                .and_then(|r| open_path(r, true).unwrap())
                .map(|fd| ino(&fd));
            let new = open_grant(&p, &writable).unwrap().map(|fd| ino(&fd));
            assert_eq!(new, old, "{rel}: opened");
            // (A root to mount is a resolved path: never with `..` in it.)
            if !rel.contains("..") {
                let itself = walked.as_deref() == Some(&*p) && std::fs::metadata(&p).is_ok();
                let mounted = open_path(&p, true).ok().flatten().is_some();
                assert_eq!(mounted, itself, "{rel}: mounted");
            }
        }
        // The cases that matter, stated: a link the principal can make grants
        // nothing; an operator's link is followed.
        assert!(open_grant(&proj.join("to-outside"), &writable)
            .unwrap()
            .is_none());
        let followed = open_grant(&base.join("link"), &writable).unwrap().unwrap();
        let real = std::fs::metadata(base.join("op/real")).unwrap();
        assert_eq!(ino(&followed), (real.dev(), real.ino()));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
