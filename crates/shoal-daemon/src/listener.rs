//! The Listener actor: accepts connections on the daemon socket, checks the
//! peer's uid (`SO_PEERCRED`), and hands each connection to [`crate::conn`],
//! which starts a KernelConn or McpConn once the first frame is known.
//!
//! Also the socket rules of docs/protocol.md §1: `0700` dir (when shoal owns it),
//! `0600` socket, a live listener, a foreign-owned path or a non-socket path is
//! never replaced; a stale socket is. A lock file beside the socket keeps two
//! daemons from racing on one path.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::Value as Json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedReadHalf;
use tokio::net::{UnixListener, UnixStream};

use crate::config::Config;
use crate::conn::{self, reserve_error, ConnContext};
use crate::health::{ActorStats, Registration, Registry};
use crate::kernel_conn::KernelConn;
use crate::mcp_conn::McpConn;
use crate::msg::Crash;
use crate::peer::{self, spawn_writer, FrameItem};
use shoal_base::paths;
use shoal_proto::frame::{self, Frame, FrameReader};
use shoal_proto::{mcp, rpc};

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

/// Prepare the socket directory and bind, following docs/protocol.md §1.
pub fn prepare_socket(path: &Path) -> Result<(StdUnixListener, BoundSocket), String> {
    let euid = paths::euid();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    secure_dir(dir, euid)?;

    let lock_path = paths::daemon_lock(path);
    let lock = paths::open_lock_file(&lock_path)?;
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
    /// Connections open now (shared with `daemon.status`).
    open: Arc<AtomicUsize>,
    daemon: conn::DaemonRef,
    daemon_stats: Arc<ActorStats>,
    config: Arc<Config>,
    registry: Arc<Registry>,
    reg: Registration,
    euid: u32,
    accepted: u64,
    /// The arbiters connections are served on, round robin, up to one per
    /// core, each started when the rotation first reaches it (an idle daemon
    /// has none). The System arbiter keeps the daemon's services (event bus,
    /// journal writer, this listener), so their work never delays a reply;
    /// connections on different arbiters (and the sessions they create) run
    /// on different cores.
    arbiters: Vec<ArbiterHandle>,
    /// How many there may be (0: none could be started; serve here).
    max_arbiters: usize,
}

impl Listener {
    pub fn new(
        listener: UnixListener,
        daemon: conn::DaemonRef,
        daemon_stats: Arc<ActorStats>,
        config: Arc<Config>,
        registry: Arc<Registry>,
        reg: Registration,
        open: Arc<AtomicUsize>,
    ) -> Self {
        Listener {
            listener: Some(listener),
            open,
            daemon,
            daemon_stats,
            config,
            registry,
            reg,
            euid: paths::euid(),
            accepted: 0,
            arbiters: Vec::new(),
            max_arbiters: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
        }
    }

    /// The arbiter for connection `id` (starting it if the rotation reaches a new one);
    /// `None`: none could be started, serve on this one.
    fn arbiter_for(&mut self, id: u64) -> Option<ArbiterHandle> {
        if self.max_arbiters == 0 {
            return None;
        }
        let i = (id.saturating_sub(1) % self.max_arbiters as u64) as usize;
        if i >= self.arbiters.len() {
            // Arbiter::new panics when no thread can be started: serve on the
            // arbiters there are.
            match std::panic::catch_unwind(Arbiter::new) {
                Ok(a) => {
                    self.arbiters.push(a.handle());
                    tracing::debug!(arbiter = i, "connection arbiter started");
                }
                Err(_) => {
                    tracing::warn!("cannot start a connection arbiter");
                    self.max_arbiters = self.arbiters.len();
                }
            }
        }
        let n = self.arbiters.len();
        (n > 0).then(|| self.arbiters[i.min(n - 1)].clone())
    }
}

struct Accepted(UnixStream);

/// The accept loop's memory of descriptor exhaustion.
struct AcceptLoop {
    listener: UnixListener,
    stats: Arc<ActorStats>,
    /// The next pause after EMFILE/ENFILE (doubles up to [`BACKOFF_MAX`]).
    backoff: Duration,
    last_log: Option<Instant>,
    /// Failures not logged since the last line.
    quiet: u64,
}

const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// At most one log line per this interval about failing accepts.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Out of descriptors or kernel memory: accepting again at once would spin.
fn is_exhaustion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

impl AcceptLoop {
    /// The next connection. Transient errors (a peer that gave up) are skipped; descriptor
    /// exhaustion backs off (10 ms doubling to 1 s), logs at most one line per 10 s, and
    /// recovers as soon as an accept succeeds again.
    async fn next(&mut self) -> UnixStream {
        loop {
            match self.listener.accept().await {
                Ok((s, _)) => {
                    if self.backoff > BACKOFF_MIN || self.quiet > 0 {
                        tracing::info!(
                            failed = self.quiet,
                            "accepting connections again after descriptor exhaustion"
                        );
                        self.stats.set_state("accepting");
                    }
                    self.backoff = BACKOFF_MIN;
                    self.quiet = 0;
                    return s;
                }
                Err(e) => {
                    let exhausted = is_exhaustion(&e);
                    self.quiet += 1;
                    let due = self.last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY);
                    if due {
                        tracing::warn!(
                            failed = self.quiet,
                            "accept failed: {e}{}",
                            if exhausted {
                                "; backing off until descriptors free up"
                            } else {
                                ""
                            }
                        );
                        self.last_log = Some(Instant::now());
                        self.quiet = 0;
                    }
                    self.stats.set_error(format!("accept: {e}"));
                    if exhausted {
                        self.stats.set_state("backing off");
                        tokio::time::sleep(self.backoff).await;
                        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    } else {
                        // Not a resource problem, but never a hot loop either.
                        tokio::time::sleep(BACKOFF_MIN).await;
                    }
                }
            }
        }
    }
}

impl Actor for Listener {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if let Some(l) = self.listener.take() {
            let state = AcceptLoop {
                listener: l,
                stats: self.reg.stats.clone(),
                backoff: BACKOFF_MIN,
                last_log: None,
                quiet: 0,
            };
            ctx.add_stream(futures_util::stream::unfold(state, |mut st| async move {
                let s = st.next().await;
                Some((Accepted(s), st))
            }));
        }
        self.reg.stats.set_state("accepting");
    }
}

impl Handler<Crash> for Listener {
    type Result = ();

    /// The debug hook: panic, for the daemon to restart the accept loop.
    fn handle(&mut self, _msg: Crash, _ctx: &mut Context<Self>) {
        self.reg.stats.handled();
        panic!("listener: crash requested by debug hook");
    }
}

impl StreamHandler<Accepted> for Listener {
    fn handle(&mut self, Accepted(stream): Accepted, _ctx: &mut Context<Self>) {
        self.reg.stats.handled_item();
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
            actix_rt::spawn(refuse(stream, uid, self.euid));
            return;
        }
        let max = self.config.limits.max_connections;
        let mut reserved = false;
        let slot = conn::ConnSlot::take(&self.open, max).or_else(|| {
            // The local user's reserve (never a foreign uid's).
            reserved = true;
            (!foreign)
                .then(|| conn::ConnSlot::take(&self.open, max + conn::RESERVED_FOR_LOCAL))
                .flatten()
        });
        let Some(slot) = slot else {
            tracing::warn!(
                conn = id,
                max,
                "refused a connection: max_connections reached"
            );
            self.reg
                .stats
                .set_error(format!("max_connections ({max}) reached"));
            let e = peer::limit_error("max_connections", max as u64, "too many open connections");
            actix_rt::spawn(refuse_with(stream, e));
            return;
        };
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
            limits: Arc::new(self.config.limits.clone()),
            slot: Arc::new(slot),
            peer: None,
            reserved,
        };
        let Some(arbiter) = self.arbiter_for(id) else {
            actix_rt::spawn(serve(stream, ctx));
            return;
        };
        // The socket moves to the other arbiter's runtime (registered there).
        match stream.into_std() {
            Ok(std) => {
                arbiter.spawn(async move {
                    match UnixStream::from_std(std) {
                        Ok(s) => serve(s, ctx).await,
                        Err(e) => tracing::warn!("cannot serve a connection: {e}"),
                    }
                });
            }
            Err(e) => tracing::warn!("cannot move a connection to its arbiter: {e}"),
        }
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        tracing::error!("listener stream ended");
    }
}

/// Tell a refused peer why, then close.
pub async fn refuse(stream: UnixStream, uid: u32, euid: u32) {
    let e = rpc::RpcError::new(
        rpc::AUTH_FAILED,
        format!("connection refused: peer uid {uid} is not the daemon's uid {euid} and is not allowed by [socket] allow_uids"),
    );
    refuse_with(stream, e).await
}

/// Answer `e` (id null) to a connection that will not be served, then close.
pub async fn refuse_with(mut stream: UnixStream, e: rpc::RpcError) {
    let _ = stream
        .write_all(&frame::encode(&rpc::error_response(&Json::Null, &e)))
        .await;
    let _ = stream.shutdown().await;
    // Drain what the peer already sent (briefly), so closing does not reset
    // the connection before it has read the refusal.
    let drain = async {
        let mut buf = [0u8; 4096];
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}

/// Serve one accepted connection: sniff, then start the right actor.
pub async fn serve(stream: UnixStream, mut ctx: ConnContext) {
    {
        use std::os::fd::AsFd;
        ctx.peer = stream.as_fd().try_clone_to_owned().ok().map(Arc::new);
    }
    let (r, w) = stream.into_split();
    let tx = spawn_writer(
        w,
        std::time::Duration::from_millis(ctx.limits.write_stall_ms),
    );
    let mut reader = FrameReader::new(BufReader::with_capacity(64 * 1024, r), ctx.limit);
    loop {
        let f = match reader.next().await {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(conn = ctx.id, "read error before the first frame: {e}");
                return;
            }
        };
        let bytes = match f {
            Frame::Oversized { len } => {
                let _ = tx
                    .send(frame::encode(&rpc::oversized(ctx.limit, len)))
                    .await;
                continue;
            }
            Frame::Line(b) => b,
        };
        let method = match rpc::classify(&bytes) {
            rpc::Incoming::Invalid { id, error } => {
                let _ = tx
                    .send(frame::encode(&rpc::error_response(&id, &error)))
                    .await;
                continue;
            }
            rpc::Incoming::Notification { method, .. } if method.is_empty() => continue,
            rpc::Incoming::Notification { method, .. } | rpc::Incoming::Request { method, .. } => {
                method
            }
        };
        let first = stream::once(async move { FrameItem(Ok(Frame::Line(bytes))) });
        let items = first.chain(frames(reader));
        if mcp::is_mcp_method(&method) && ctx.reserved {
            let _ = tx
                .send(frame::encode(&rpc::error_response(
                    &Json::Null,
                    &reserve_error(ctx.limits.max_connections),
                )))
                .await;
            return;
        }
        if mcp::is_mcp_method(&method) {
            let reg = ctx
                .registry
                .register("mcp_conn", conn_name(&ctx), Some(ctx.parent));
            McpConn::create(move |c| {
                c.add_stream(items);
                McpConn::new(ctx, tx, reg)
            });
        } else {
            let reg = ctx
                .registry
                .register("kernel_conn", conn_name(&ctx), Some(ctx.parent));
            KernelConn::start_with(ctx, tx, reg, items);
        }
        return;
    }
}

fn conn_name(ctx: &ConnContext) -> String {
    match ctx.pid {
        Some(pid) => format!("conn:{} uid={} pid={pid}", ctx.id, ctx.uid),
        None => format!("conn:{} uid={}", ctx.id, ctx.uid),
    }
}

fn frames(reader: FrameReader<BufReader<OwnedReadHalf>>) -> impl Stream<Item = FrameItem> {
    stream::unfold(Some(reader), |state| async move {
        let mut reader = state?;
        match reader.next().await {
            Ok(Some(f)) => Some((FrameItem(Ok(f)), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((FrameItem(Err(e)), None)),
        }
    })
}
