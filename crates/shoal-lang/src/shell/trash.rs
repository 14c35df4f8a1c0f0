//! The trash of `rm` without `--permanent`: `trash/<pid>` under
//! `$TMPDIR/shoal-<uid>` for the local user, and under a token principal's
//! private directory for that principal (`shoal_policy::confine`), both
//! private (0700). A token principal's trash is bounded by
//! `[limits] token_trash` ([`set_token_cap`]): before an entry goes in, the
//! oldest entries are purged until it fits (entry names start with a
//! nanosecond timestamp, so name order is age order, also across the `<pid>`
//! directories of earlier daemons), and an entry larger than the cap is
//! deleted instead of kept. The local user's trash is not bounded.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// `[limits] token_trash` by default: 256 MiB.
pub const DEFAULT_TOKEN_CAP: u64 = 256 << 20;

/// What one file, directory or link counts as at least (a file system
/// block), so a trash of empty files is bounded too.
pub const MIN_ENTRY: u64 = 4096;

static TOKEN_CAP: AtomicU64 = AtomicU64::new(DEFAULT_TOKEN_CAP);

/// Bound every token principal's trash to `bytes` from now on (the daemon
/// installs `[limits] token_trash` at start).
pub fn set_token_cap(bytes: u64) {
    TOKEN_CAP.store(bytes, Ordering::Relaxed);
}

/// The bound on the calling thread's trash: `Some` on a token principal's
/// evaluation thread (one with a private directory of its own), `None` for
/// the local user's.
pub fn cap() -> Option<u64> {
    shoal_base::spill_dir::thread_private_base().map(|_| TOKEN_CAP.load(Ordering::Relaxed))
}

/// Where [`trash_dir`] is, without creating it (a plan names it).
pub fn trash_dir_path() -> PathBuf {
    shoal_base::spill_dir::private_temp_path("trash").join(std::process::id().to_string())
}

/// The per-process trash directory used by `rm` without `--permanent`:
/// `trash/<pid>` (see the module doc), private (0700) at every level so no
/// other user can read what was removed or plant a link in its place.
pub fn trash_dir() -> io::Result<PathBuf> {
    let dir = shoal_value::output::private_temp_dir("trash")?.join(std::process::id().to_string());
    match std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let md = std::fs::symlink_metadata(&dir)?;
    if !md.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Bytes `path` takes, links not followed: each file, directory and link
/// its length or its blocks, whichever is more, and at least [`MIN_ENTRY`].
/// Counting stops once past `limit` (the answer is then above `limit`).
pub fn size(path: &Path, limit: u64) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut todo = vec![path.to_path_buf()];
    while let Some(p) = todo.pop() {
        let md = std::fs::symlink_metadata(&p)?;
        let bytes = md.len().max(md.blocks().saturating_mul(512)).max(MIN_ENTRY);
        total = total.saturating_add(bytes);
        if total > limit {
            return Ok(total);
        }
        if md.is_dir() {
            for e in std::fs::read_dir(&p)? {
                todo.push(e?.path());
            }
        }
    }
    Ok(total)
}

/// What [`put`] did with a removed path.
#[derive(Debug, PartialEq, Eq)]
pub enum Put {
    /// Moved into the trash, here.
    Trashed(PathBuf),
    /// Deleted for good: it is larger than the token's trash may hold.
    Deleted { cap: u64 },
}

/// Move `abs` into the trash directory `dir` under a fresh timestamped
/// name, with `mv` moving it. On a token principal's thread the trash is
/// first purged, oldest entries first, until `abs` fits under the cap, and
/// `abs` is deleted instead when it alone is larger than the cap.
pub fn put(abs: &Path, dir: &Path, mv: impl Fn(&Path, &Path) -> io::Result<()>) -> io::Result<Put> {
    let stamp = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "item".into());
    let target = dir.join(format!("{stamp}-{name}"));
    let Some(cap) = cap() else {
        mv(abs, &target)?;
        return Ok(Put::Trashed(target));
    };
    // Held (an flock of the trash root) while the trash is measured, purged
    // and added to, so two removals of one principal (two sessions, or two
    // processes) cannot both count on the same room.
    let root = dir.parent().unwrap_or(dir);
    let room = std::fs::File::open(root)?;
    room.lock()?;
    let need = size(abs, cap)?;
    if need > cap {
        let md = std::fs::symlink_metadata(abs)?;
        if md.is_dir() {
            std::fs::remove_dir_all(abs)?;
        } else {
            std::fs::remove_file(abs)?;
        }
        return Ok(Put::Deleted { cap });
    }
    purge(root, cap - need)?;
    mv(abs, &target)?;
    Ok(Put::Trashed(target))
}

/// Remove the oldest entries of the trash `root` (`root/<pid>/<entry>`)
/// until what is left takes at most `keep` bytes. The `<pid>` directories
/// stay (another process may be about to move an entry into its own).
pub fn purge(root: &Path, keep: u64) -> io::Result<()> {
    let mut entries = Vec::new();
    for d in std::fs::read_dir(root)? {
        let d = d?;
        if !d.file_type()?.is_dir() {
            continue;
        }
        for e in std::fs::read_dir(d.path())? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let stamp: u128 = name
                .split('-')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let bytes = size(&e.path(), u64::MAX)?;
            entries.push((stamp, e.path(), bytes));
        }
    }
    entries.sort();
    let mut used: u64 = entries.iter().map(|e| e.2).fold(0, u64::saturating_add);
    for (_, path, bytes) in entries {
        if used <= keep {
            break;
        }
        if std::fs::symlink_metadata(&path)?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
        used = used.saturating_sub(bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purging_removes_the_oldest_entries_first() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let (old, me) = (root.join("1"), root.join(std::process::id().to_string()));
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(me.join("30-d")).unwrap();
        std::fs::write(old.join("10-a"), vec![0u8; 10_000]).unwrap();
        std::fs::write(me.join("20-b"), vec![0u8; 10_000]).unwrap();
        std::fs::write(me.join("30-d/f"), vec![0u8; 10_000]).unwrap();
        let each = size(&me.join("20-b"), u64::MAX).unwrap();
        assert!(each >= 10_000);
        let dir = size(&me.join("30-d"), u64::MAX).unwrap();
        assert!(dir >= 10_000 + MIN_ENTRY, "{dir}");
        // Room for the newest two: the oldest goes.
        purge(root, each + dir).unwrap();
        assert!(!old.join("10-a").exists() && old.exists());
        assert!(me.join("20-b").exists() && me.join("30-d/f").exists());
        purge(root, dir).unwrap();
        assert!(!me.join("20-b").exists() && me.join("30-d/f").exists());
        purge(root, 0).unwrap();
        assert_eq!(std::fs::read_dir(&me).unwrap().count(), 0);
        assert!(me.exists(), "this process's trash dir stays");
        // Counting stops past the limit.
        std::fs::write(me.join("big"), vec![0u8; 100_000]).unwrap();
        assert!(size(&me, 1000).unwrap() > 1000);
    }

    /// A token's thread (one with a private base) purges and deletes what
    /// does not fit; the local user's thread keeps everything.
    #[test]
    fn a_tokens_trash_is_bounded_and_the_local_users_is_not() {
        let t = tempfile::tempdir().unwrap();
        let proj = t.path().join("proj");
        std::fs::create_dir_all(&proj).unwrap();
        let base = t.path().join("private");
        std::fs::create_dir_all(&base).unwrap();
        let rename = |a: &Path, b: &Path| std::fs::rename(a, b);
        let p = proj.clone();
        let token = std::thread::spawn(move || {
            shoal_base::spill_dir::set_thread_private_base(Some(base));
            // Only threads with a private base read the cap: no other test's.
            set_token_cap(90_000);
            let cap = cap().unwrap();
            assert_eq!(cap, 90_000);
            let dir = trash_dir().unwrap();
            let mut kept = Vec::new();
            for i in 0..5 {
                let f = p.join(format!("f{i}"));
                std::fs::write(&f, vec![0u8; (cap / 3) as usize]).unwrap();
                match put(&f, &dir, rename).unwrap() {
                    Put::Trashed(at) => kept.push(at),
                    other => panic!("{other:?}"),
                }
                assert!(!f.exists());
                assert!(size(dir.parent().unwrap(), u64::MAX).unwrap() <= cap + 2 * MIN_ENTRY);
            }
            // The two newest are there, the older ones purged.
            assert!(kept[3].exists() && kept[4].exists());
            assert!(kept[..3].iter().all(|k| !k.exists()));
            let big = p.join("big");
            std::fs::write(&big, vec![0u8; cap as usize + 1]).unwrap();
            assert_eq!(put(&big, &dir, rename).unwrap(), Put::Deleted { cap });
            assert!(!big.exists());
            assert!(kept[4].exists(), "a deleted one purges nothing");
        });
        token.join().unwrap();
        assert_eq!(cap(), None, "this thread is the local user's");
        let local = t.path().join("local-trash");
        std::fs::create_dir_all(&local).unwrap();
        let f = proj.join("big");
        std::fs::write(&f, vec![0u8; 1 << 20]).unwrap();
        let Put::Trashed(at) = put(&f, &local, rename).unwrap() else {
            panic!("the local user's rm deleted");
        };
        assert_eq!(std::fs::metadata(at).unwrap().len(), 1 << 20);
    }
}
