//! The spill directory, `$TMPDIR/shoal-<uid>/spill` unless [`set_spill_dir`] chose another:
//! created mode 0700 and owner-checked before use, never followed through a symlink, and
//! swept of files left by dead processes. It creates directories only; the files in it
//! belong to `output.rs`.

use crate::sync::Locked;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static SPILL_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

thread_local! {
    /// A confined evaluation thread's own private directory (a token
    /// principal's, see `leash::confine`): its spill files and trash go
    /// there instead of the daemon's, which it cannot reach.
    static THREAD_BASE: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

/// Give the calling thread its own private base directory (or none).
pub fn set_thread_private_base(dir: Option<PathBuf>) {
    THREAD_BASE.with(|b| *b.borrow_mut() = dir);
}

/// The calling thread's own private base directory, if it has one (a
/// token principal's evaluation thread).
pub fn thread_private_base() -> Option<PathBuf> {
    thread_base()
}

fn thread_base() -> Option<PathBuf> {
    THREAD_BASE.with(|b| b.borrow().clone())
}

/// Create `dir` 0700 (its parent must exist) and check that it is a real,
/// private directory owned by us.
pub fn ensure_private(dir: &Path) -> io::Result<()> {
    ensure_private_dir(dir)
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The default spill directory: `$TMPDIR/shoal-<uid>/spill`.
pub fn default_spill_dir() -> PathBuf {
    std::env::temp_dir()
        .join(format!("shoal-{}", uid()))
        .join("spill")
}

/// Use `dir` for spill files from now on (created 0700 on first use).
pub fn set_spill_dir(dir: impl Into<PathBuf>) {
    let mut g = SPILL_DIR.locked();
    *g = Some(dir.into());
    READY.locked().take();
}

/// The directory spill files go to now.
pub fn spill_dir() -> PathBuf {
    SPILL_DIR.locked().clone().unwrap_or_else(default_spill_dir)
}

/// The verified directory (created once per configured path).
pub static READY: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Create `dir` with mode 0700 (its parent must exist) and check that it is
/// a real directory (not a symlink) owned by us that nobody else can enter.
fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let md = fs::symlink_metadata(dir)?;
    if !md.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if md.uid() != uid() {
        return Err(io::Error::other(format!(
            "{} is owned by another user",
            dir.display()
        )));
    }
    if md.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Where [`private_temp_dir`] puts `sub`, without creating anything.
pub fn private_temp_path(sub: &str) -> PathBuf {
    match thread_base() {
        Some(base) => base.join(sub),
        None => std::env::temp_dir()
            .join(format!("shoal-{}", uid()))
            .join(sub),
    }
}

/// `$TMPDIR/shoal-<uid>/<sub>`, both levels created 0700 and checked to be
/// real directories owned by us (the parent sits in a world-writable
/// directory, so a name someone else made first is refused, never followed).
pub fn private_temp_dir(sub: &str) -> io::Result<PathBuf> {
    if let Some(base) = thread_base() {
        let dir = base.join(sub);
        ensure_private_dir(&dir)?;
        return Ok(dir);
    }
    let base = std::env::temp_dir().join(format!("shoal-{}", uid()));
    ensure_private_dir(&base)?;
    let dir = base.join(sub);
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Remove spill files left behind by processes that no longer exist.
fn sweep_stale(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let me = std::process::id();
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != me && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(e.path());
        }
    }
}

pub fn ready_dir() -> io::Result<PathBuf> {
    if let Some(base) = thread_base() {
        let dir = base.join("spill");
        ensure_private_dir(&dir)?;
        return Ok(dir);
    }
    let dir = spill_dir();
    let mut g = READY.locked();
    if g.as_deref() == Some(dir.as_path()) {
        return Ok(dir);
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        if dir == default_spill_dir() {
            // `$TMPDIR/shoal-<uid>` sits in a world-writable directory: it
            // must be ours and private too, or someone could swap `spill`.
            ensure_private_dir(parent)?;
        } else if fs::symlink_metadata(parent).is_err() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
    }
    ensure_private_dir(&dir)?;
    sweep_stale(&dir);
    *g = Some(dir.clone());
    Ok(dir)
}
