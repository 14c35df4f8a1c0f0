//! The Listener actor: accepts connections on the daemon socket, checks the
//! peer's uid (`SO_PEERCRED`), and hands each connection to [`super::conn`],
//! which starts a KernelConn or McpConn once the first frame is known.
//!
//! Also the socket rules of contract §1: `0700` dir (when shoal owns it),
//! `0600` socket, a live listener, a foreign-owned path or a non-socket path is
//! never replaced; a stale socket is. A lock file beside the socket keeps two
//! daemons from racing on one path.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use actix::prelude::*;
use tokio::net::{UnixListener, UnixStream};

use super::conn;
use super::daemon::Daemon;
use super::health::{ActorStats, Registration, Registry};
use crate::config::Config;
use crate::paths;

/// A socket this daemon bound; removed at exit only if it is still ours.
pub struct BoundSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
    _lock: File,
}

impl BoundSocket {
    pub fn remove(self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.dev() == self.dev && m.ino() == self.ino {
                match std::fs::remove_file(&self.path) {
                    Ok(()) => tracing::info!(socket = %self.path.display(), "socket removed"),
                    Err(e) => {
                        tracing::warn!(socket = %self.path.display(), "cannot remove socket: {e}")
                    }
                }
            }
        }
    }
}

/// Prepare the socket directory and bind, following contract §1.
pub fn prepare_socket(path: &Path) -> Result<(StdUnixListener, BoundSocket), String> {
    let euid = paths::euid();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    secure_dir(dir, euid)?;

    let lock_path = paths::daemon_lock(path);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open lock file {}: {e}", lock_path.display()))?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Err(format!(
            "another shoal daemon is running on {} (lock {} is held)",
            path.display(),
            lock_path.display()
        ));
    }

    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            if !m.file_type().is_socket() {
                return Err(format!(
                    "refusing to replace {}: it exists and is not a socket",
                    path.display()
                ));
            }
            if m.uid() != euid {
                return Err(format!(
                    "refusing to replace {}: it is owned by uid {}, not {euid}",
                    path.display(),
                    m.uid()
                ));
            }
            match StdUnixStream::connect(path) {
                Ok(_) => {
                    return Err(format!(
                        "a daemon is already listening on {}",
                        path.display()
                    ))
                }
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionRefused
                        || e.kind() == io::ErrorKind::NotFound =>
                {
                    tracing::info!(socket = %path.display(), "removing stale socket");
                    let _ = std::fs::remove_file(path);
                }
                Err(e) => {
                    return Err(format!(
                        "cannot probe existing socket {}: {e}",
                        path.display()
                    ))
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    }

    let listener =
        StdUnixListener::bind(path).map_err(|e| format!("cannot bind {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))?;
    let m = std::fs::symlink_metadata(path)
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    Ok((
        listener,
        BoundSocket {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            _lock: lock,
        },
    ))
}

/// Create the socket dir `0700`; shoal's own default dir is forced to `0700`
/// and must be ours. An existing directory given explicitly is left alone.
fn secure_dir(dir: &Path, euid: u32) -> Result<(), String> {
    let hint = "use a socket path inside a directory you own";
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot secure socket dir {}: {e}; {hint}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot secure socket dir {}: {e}; {hint}", dir.display()))?;
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot secure socket dir {}: {e}; {hint}",
            dir.display()
        )),
        Ok(m) => {
            if paths::is_default_socket_dir(dir) {
                if !m.is_dir() || m.uid() != euid {
                    return Err(format!(
                        "cannot secure socket dir {}: not a directory owned by uid {euid}; {hint}",
                        dir.display()
                    ));
                }
                if m.mode() & 0o777 != 0o700 {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
                        |e| format!("cannot secure socket dir {}: {e}; {hint}", dir.display()),
                    )?;
                }
            }
            Ok(())
        }
    }
}

pub struct Listener {
    listener: Option<UnixListener>,
    daemon: Addr<Daemon>,
    daemon_stats: Arc<ActorStats>,
    config: Arc<Config>,
    registry: Arc<Registry>,
    reg: Registration,
    euid: u32,
    accepted: u64,
}

impl Listener {
    pub fn new(
        listener: UnixListener,
        daemon: Addr<Daemon>,
        daemon_stats: Arc<ActorStats>,
        config: Arc<Config>,
        registry: Arc<Registry>,
        reg: Registration,
    ) -> Self {
        Listener {
            listener: Some(listener),
            daemon,
            daemon_stats,
            config,
            registry,
            reg,
            euid: paths::euid(),
            accepted: 0,
        }
    }
}

struct Accepted(io::Result<UnixStream>);

impl Actor for Listener {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(l) = self.listener.take() {
            ctx.add_stream(futures_util::stream::unfold(l, |l| async move {
                let r = l.accept().await.map(|(s, _)| s);
                Some((Accepted(r), l))
            }));
        }
        self.reg.stats.set_state("accepting");
    }
}

impl StreamHandler<Accepted> for Listener {
    fn handle(&mut self, Accepted(r): Accepted, _ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
        let stream = match r {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                self.reg.stats.set_error(format!("accept: {e}"));
                return;
            }
        };
        let (uid, pid) = match stream.peer_cred() {
            Ok(c) => (c.uid(), c.pid()),
            Err(e) => {
                tracing::warn!("cannot read peer credentials: {e}; refusing");
                return;
            }
        };
        self.accepted += 1;
        let id = self.accepted;
        let foreign = uid != self.euid;
        if foreign && !self.config.socket.allow_uids.contains(&uid) {
            tracing::warn!(
                uid,
                pid,
                "refused connection from uid {uid} (daemon uid {})",
                self.euid
            );
            self.reg
                .stats
                .set_error(format!("refused connection from uid {uid}"));
            actix_rt::spawn(conn::refuse(stream, uid, self.euid));
            return;
        }
        tracing::debug!(conn = id, uid, pid, "connection accepted");
        let ctx = conn::ConnContext {
            id,
            uid,
            pid,
            foreign,
            daemon: self.daemon.clone(),
            daemon_stats: self.daemon_stats.clone(),
            registry: self.registry.clone(),
            parent: self.reg.id(),
            limit: self.config.daemon.max_frame_bytes as usize,
        };
        actix_rt::spawn(conn::serve(stream, ctx));
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        tracing::error!("listener stream ended");
    }
}
