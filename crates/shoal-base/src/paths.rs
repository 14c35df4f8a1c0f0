//! Where things live (docs/protocol.md §1): the socket, the state directory, the config file.
//!
//! Pure functions of explicit arguments and the environment; what creates
//! files here is [`open_lock_file`] (lock files beside the socket, opened
//! without following symlinks and checked for ownership) and the private
//! file and directory helpers ([`private_dir`], [`private_file`]). The
//! daemon and the shim resolve paths with the same rules, so a shim always
//! finds the daemon it would have started.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The effective uid of this process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Variables a session gets from the daemon when its client sent no
/// environment: the user's identity and where programs are, nothing else.
const BASE_ENV_KEYS: [&str; 6] = ["HOME", "USER", "LOGNAME", "SHELL", "LANG", "PATH"];

/// `PATH` when the daemon has none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment of a session whose client sent none (a kernel client
/// that did not pass `env`): [`BASE_ENV_KEYS`] only. Every other variable of
/// the daemon's own environment stays out of sessions (docs/protocol.md §9).
pub fn base_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = BASE_ENV_KEYS
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    env
}

/// This process's environment as UTF-8 pairs (what a client forwards);
/// variables whose name or value is not UTF-8 are left out.
pub fn client_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn non_empty(v: Option<OsString>) -> Option<OsString> {
    v.filter(|s| !s.is_empty())
}

/// Socket path: `--socket`, else `SHOAL_SOCKET`, else
/// `$XDG_RUNTIME_DIR/shoal/shoal.sock`, else `$TMPDIR/shoal-<uid>/shoal.sock`,
/// else `/tmp/shoal-<uid>/shoal.sock`. Empty variables count as unset.
pub fn socket_path(explicit: Option<&Path>) -> PathBuf {
    socket_path_from(explicit, &|k| std::env::var_os(k))
}

/// [`socket_path`] with an injectable environment (for tests).
pub fn socket_path_from(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = non_empty(env("SHOAL_SOCKET")) {
        return PathBuf::from(p);
    }
    default_socket_dir_from(env).join("shoal.sock")
}

/// The directory shoal owns for its default socket (created `0700` by the daemon).
pub fn default_socket_dir_from(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(r) = non_empty(env("XDG_RUNTIME_DIR")) {
        return PathBuf::from(r).join("shoal");
    }
    let uid = euid();
    let base = non_empty(env("TMPDIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!("shoal-{uid}"))
}

/// Whether `dir` is a directory shoal owns by convention (its default socket
/// dir), which it may create and must force to `0700`. A directory given
/// explicitly through `--socket`/`SHOAL_SOCKET` is left as it is.
pub fn is_default_socket_dir(dir: &Path) -> bool {
    default_socket_dir_from(&|k| std::env::var_os(k)) == dir
}

/// State dir: `--state-dir`, else `$XDG_STATE_HOME/shoal`, else `~/.local/state/shoal`.
pub fn state_dir(explicit: Option<&Path>) -> PathBuf {
    state_dir_from(explicit, &|k| std::env::var_os(k))
}

pub fn state_dir_from(explicit: Option<&Path>, env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(x) = non_empty(env("XDG_STATE_HOME")) {
        return PathBuf::from(x).join("shoal");
    }
    home_from(env).join(".local/state/shoal")
}

/// Config file: `--config`, else `$XDG_CONFIG_HOME/shoal/shoal.toml`, else
/// `~/.config/shoal/shoal.toml`. The bool says whether it was given explicitly
/// (an explicit file must exist; the default one may be absent).
pub fn config_file(explicit: Option<&Path>) -> (PathBuf, bool) {
    config_file_from(explicit, &|k| std::env::var_os(k))
}

pub fn config_file_from(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> (PathBuf, bool) {
    if let Some(p) = explicit {
        return (p.to_path_buf(), true);
    }
    if let Some(x) = non_empty(env("XDG_CONFIG_HOME")) {
        return (PathBuf::from(x).join("shoal/shoal.toml"), false);
    }
    (home_from(env).join(".config/shoal/shoal.toml"), false)
}

fn home_from(env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    non_empty(env("HOME"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The daemon's single-instance lock, beside the socket (`shoal.sock.lock`).
pub fn daemon_lock(socket: &Path) -> PathBuf {
    sibling(socket, ".lock")
}

/// The shims' start lock: racing shims serialise on it so one daemon starts.
pub fn start_lock(socket: &Path) -> PathBuf {
    sibling(socket, ".start.lock")
}

fn sibling(socket: &Path, suffix: &str) -> PathBuf {
    let mut s = socket.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Open (creating it `0600` if absent) a lock file in a possibly shared
/// directory: `O_NOFOLLOW` refuses a planted symlink (its target is never
/// created or opened), and the file must be a regular file owned by this uid.
pub fn open_lock_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                format!(
                    "refusing lock file {}: it is a symbolic link",
                    path.display()
                )
            } else {
                format!("cannot open lock file {}: {e}", path.display())
            }
        })?;
    let m = f
        .metadata()
        .map_err(|e| format!("cannot stat lock file {}: {e}", path.display()))?;
    if !m.is_file() {
        return Err(format!(
            "refusing lock file {}: not a regular file",
            path.display()
        ));
    }
    if m.uid() != euid() {
        return Err(format!(
            "refusing lock file {}: owned by uid {}, not {}",
            path.display(),
            m.uid(),
            euid()
        ));
    }
    Ok(f)
}

/// Create `dir` (and missing parents) `0700`, whatever the umask; an
/// existing directory of this uid with a looser mode is tightened to `0700`.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::metadata(dir) {
        Ok(m) => {
            if m.is_dir() && m.uid() == euid() && m.mode() & 0o777 != 0o700 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
    }
}

/// Make sure `path` exists as a file only this uid can read: created `0600`
/// (mode set after creation, so the umask does not matter) when absent,
/// tightened when it is ours and looser. Never follows a symlink.
pub fn private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f.set_permissions(std::fs::Permissions::from_mode(0o600)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => tighten_file(path),
        Err(e) => Err(e),
    }
}

/// Tighten an existing regular file of this uid to `0600` (others' files and
/// symlinks are left alone).
pub fn tighten_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let m = std::fs::symlink_metadata(path)?;
    if m.is_file() && m.uid() == euid() && m.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// The log directory under the state dir.
pub fn log_dir(state: &Path) -> PathBuf {
    state.join("logs")
}

/// Lexical normalisation without touching the disk (`a/./b/../c` → `a/c`):
/// `.` is dropped and `..` removes the component before it; `..` at the
/// root stays at the root (`/..` → `/`), a leading `..` of a relative path
/// is kept (`../a/../..` → `../..`), and an empty result is `.`.
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn normalize_is_lexical() {
        let n = |s: &str| normalize(Path::new(s)).to_string_lossy().into_owned();
        assert_eq!(n("/a/./b/../c"), "/a/c");
        assert_eq!(n("/.."), "/");
        assert_eq!(n("/a/../../.."), "/");
        assert_eq!(n("/../a"), "/a");
        assert_eq!(n("a/b/.."), "a");
        assert_eq!(n("a/.."), ".");
        assert_eq!(n(""), ".");
        assert_eq!(n("."), ".");
        assert_eq!(n(".."), "..");
        assert_eq!(n("../a/../.."), "../..");
        assert_eq!(n("a/../../b"), "../b");
        assert_eq!(n("a//b/"), "a/b");
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).map(OsString::from)
    }

    #[test]
    fn private_files_and_dirs() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("a/b");
        private_dir(&sub).unwrap();
        assert_eq!(mode(&sub), 0o700);
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&sub).unwrap();
        assert_eq!(mode(&sub), 0o700);
        let f = sub.join("f");
        private_file(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&f, "kept").unwrap();
        private_file(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "kept");
        // A symlink is neither followed nor changed.
        let target = sub.join("t");
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&target, sub.join("l")).unwrap();
        private_file(&sub.join("l")).unwrap();
        assert_eq!(mode(&target), 0o644);
    }

    #[test]
    fn lock_files_refuse_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("victim");
        let link = d.path().join("s.sock.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_lock_file(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(!target.exists(), "the link's target was created");
        // A dangling-free regular file of ours opens, twice.
        let ok = d.path().join("ok.lock");
        open_lock_file(&ok).unwrap();
        open_lock_file(&ok).unwrap();
        // A directory in its place is refused.
        let dir = d.path().join("dir.lock");
        std::fs::create_dir(&dir).unwrap();
        assert!(open_lock_file(&dir).is_err());
    }

    #[test]
    fn socket_rules() {
        let uid = euid();
        type Case<'a> = (Option<&'a str>, Vec<(&'a str, &'a str)>, String);
        let cases: Vec<Case> = vec![
            (
                Some("/x/s.sock"),
                vec![("SHOAL_SOCKET", "/y")],
                "/x/s.sock".into(),
            ),
            (
                None,
                vec![("SHOAL_SOCKET", "/y"), ("XDG_RUNTIME_DIR", "/run/u")],
                "/y".into(),
            ),
            (
                None,
                vec![("SHOAL_SOCKET", ""), ("XDG_RUNTIME_DIR", "/run/u")],
                "/run/u/shoal/shoal.sock".into(),
            ),
            (
                None,
                vec![("XDG_RUNTIME_DIR", ""), ("TMPDIR", "/tt")],
                format!("/tt/shoal-{uid}/shoal.sock"),
            ),
            (None, vec![], format!("/tmp/shoal-{uid}/shoal.sock")),
        ];
        for (explicit, vars, want) in cases {
            let got = socket_path_from(explicit.map(Path::new), &env(&vars));
            assert_eq!(got, PathBuf::from(&want), "{explicit:?} {vars:?}");
        }
    }

    #[test]
    fn state_and_config_rules() {
        assert_eq!(
            state_dir_from(None, &env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            PathBuf::from("/s/shoal")
        );
        assert_eq!(
            state_dir_from(None, &env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/state/shoal")
        );
        assert_eq!(
            config_file_from(None, &env(&[("XDG_CONFIG_HOME", "/c")])),
            (PathBuf::from("/c/shoal/shoal.toml"), false)
        );
        assert_eq!(
            daemon_lock(Path::new("/a/b.sock")),
            PathBuf::from("/a/b.sock.lock")
        );
    }
}
