//! MCP over Streamable HTTP from the daemon itself (docs/http.md): `[http] listen`
//! or `shoal daemon --http ADDR` serves `/mcp` with actix-web on the daemon's
//! actix System (its workers are arbiters of that System, stopped with it).
//!
//! The transport only carries frames: every MCP session or stateless request is
//! served by the same MCP connection actor as a `shoal mcp` shim, reached through
//! the daemon's own socket (`pipe.rs`), so its connections count against
//! `[limits] max_connections` and end with a hang-up like any other. `guard.rs`
//! checks Host, Origin and the bearer token; `serve.rs` maps POST, GET and
//! DELETE onto frames; `sse.rs` numbers, replays and keeps alive event streams.

pub mod guard;
pub mod pipe;
mod serve;
pub mod sse;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::config::{Config, HttpConfig};
use pipe::Pipe;
use shoal_base::sync::Locked;
use sse::SseStream;

/// What `shoal status` shows of the HTTP listener.
pub struct HttpStats {
    pub listen: String,
    /// TCP connections open now.
    pub connections: AtomicUsize,
    /// SSE streams being read now.
    pub streams: AtomicUsize,
    /// 2025-era sessions (`Mcp-Session-Id`) open now.
    pub sessions: AtomicUsize,
    /// Requests served since start.
    pub requests: AtomicU64,
}

/// What the daemon keeps of its running HTTP listener ([`start`] makes it): the
/// counters `daemon.status` shows, and the listener's sessions (weakly: they go with
/// the server) to end those whose token is no longer valid.
#[derive(Clone)]
pub struct Served {
    stats: Arc<HttpStats>,
    http: Weak<Http>,
}

impl Served {
    /// The tokens changed (revoked, expired): end at once every HTTP session and
    /// idle connection whose token is no longer valid.
    pub fn tokens_changed(&self) {
        if let Some(h) = self.http.upgrade() {
            h.reap();
        }
    }

    /// The `http` object of `daemon.status`.
    pub fn status(&self) -> shoal_proto::kernel::HttpStatus {
        let s = &self.stats;
        shoal_proto::kernel::HttpStatus {
            listen: s.listen.clone(),
            url: format!("http://{}/mcp", s.listen),
            connections: s.connections.load(Ordering::Relaxed),
            streams: s.streams.load(Ordering::Relaxed),
            sessions: s.sessions.load(Ordering::Relaxed),
            requests: s.requests.load(Ordering::Relaxed),
        }
    }
}

/// Idle pipes kept per bearer and session for stateless requests.
const POOL: usize = 8;
/// Streams a session remembers for `Last-Event-ID`.
const REMEMBERED_STREAMS: usize = 32;

/// A bearer and the session its stateless requests name on the URL.
type PoolKey = (String, Option<String>);

/// The listener's shared state (every worker's handlers read it).
pub struct Http {
    socket: PathBuf,
    listen: SocketAddr,
    limit: usize,
    cfg: HttpConfig,
    sessions: std::sync::Mutex<HashMap<String, Arc<Session>>>,
    /// Idle stateless pipes by (bearer, session).
    pool: std::sync::Mutex<HashMap<PoolKey, Vec<Arc<Pipe>>>>,
    /// Stateless requests running, by principal.
    running: std::sync::Mutex<HashMap<String, usize>>,
    stats: Arc<HttpStats>,
}

/// A 2025-era session: one MCP connection to the daemon, its GET stream and the
/// streams a client may resume.
pub struct Session {
    id: String,
    principal: String,
    /// The token it was opened with: the session ends once it is no longer
    /// valid (revoked, expired).
    bearer: String,
    pipe: Arc<Pipe>,
    version: String,
    get: std::sync::Mutex<Option<Arc<SseStream>>>,
    streams: std::sync::Mutex<VecDeque<Arc<SseStream>>>,
    last_used: std::sync::Mutex<Instant>,
}

impl Session {
    fn touch(&self) {
        *self.last_used.locked() = Instant::now();
    }

    fn remember(&self, s: Arc<SseStream>) {
        let mut v = self.streams.locked();
        if v.len() >= REMEMBERED_STREAMS {
            v.pop_front();
        }
        v.push_back(s);
    }

    fn stream(&self, id: u64) -> Option<Arc<SseStream>> {
        self.streams.locked().iter().find(|s| s.id == id).cloned()
    }

    fn end(&self) {
        self.pipe.shut();
        self.pipe.set_fallback(None);
        if let Some(g) = self.get.locked().take() {
            g.finish();
        }
    }
}

impl Http {
    fn session(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.sessions.locked();
        let s = map.get(id)?.clone();
        if s.pipe.is_closed() {
            map.remove(id);
            self.stats.sessions.fetch_sub(1, Ordering::SeqCst);
            s.end();
            return None;
        }
        Some(s)
    }

    fn remove_session(&self, id: &str) -> bool {
        let s = self.sessions.locked().remove(id);
        match s {
            Some(s) => {
                self.stats.sessions.fetch_sub(1, Ordering::SeqCst);
                s.end();
                true
            }
            None => false,
        }
    }

    /// End sessions unused for `session_idle_secs` with no stream being read,
    /// and every session and idle pipe whose token is no longer valid.
    fn reap(&self) {
        let idle = Duration::from_secs(self.cfg.session_idle_secs);
        let stale: Vec<String> = self
            .sessions
            .locked()
            .values()
            .filter(|s| {
                let read = s.get.locked().as_ref().is_some_and(|g| g.is_live());
                s.pipe.is_closed()
                    || (!read && s.last_used.locked().elapsed() >= idle)
                    || !valid(&s.bearer)
            })
            .map(|s| s.id.clone())
            .collect();
        for id in stale {
            tracing::debug!(session = %id, "http session ended (idle, closed, or its token invalid)");
            self.remove_session(&id);
        }
        self.pool.locked().retain(|(bearer, _), _| valid(bearer));
    }

    /// Take a place for one more daemon connection of `principal`'s (a
    /// session being opened, a stateless request), held until [`Http::release`]:
    /// its idle pooled pipes go first, then (`evict`) its least recently used
    /// session. Whether it got one under `connections_per_principal` (the local
    /// user, whose daemon it is, is bounded by `max_connections` alone). The
    /// check and the taking are one step: requests at the same moment cannot
    /// all pass the check.
    fn reserve(&self, principal: &str, evict: bool) -> bool {
        let mut running = self.running.locked();
        let held = running.get(principal).copied().unwrap_or(0);
        let local = principal == shoal_policy::runtime().local;
        if !local && !self.room_for(principal, evict, held) {
            return false;
        }
        *running.entry(principal.to_string()).or_default() += 1;
        true
    }

    /// Give back a place [`Http::reserve`] took.
    fn release(&self, principal: &str) {
        let mut running = self.running.locked();
        if let Some(n) = running.get_mut(principal) {
            *n -= 1;
            if *n == 0 {
                running.remove(principal);
            }
        }
    }

    /// Whether a token principal with `held` places taken (and its sessions
    /// and pooled pipes) has room for one more, after giving back its pooled
    /// pipes and (`evict`) ending its least recently used sessions.
    fn room_for(&self, principal: &str, evict: bool, held: usize) -> bool {
        let max = self.cfg.connections_per_principal;
        let sessions = || {
            let map = self.sessions.locked();
            let mine: Vec<(Instant, String)> = map
                .values()
                .filter(|s| s.principal == principal)
                .map(|s| (*s.last_used.locked(), s.id.clone()))
                .collect();
            mine
        };
        let running = || held;
        let pooled = |pool: &HashMap<PoolKey, Vec<Arc<Pipe>>>| -> usize {
            pool.iter()
                .filter(|((b, _), _)| of_principal(b, principal))
                .map(|(_, v)| v.len())
                .sum()
        };
        if sessions().len() + running() + pooled(&self.pool.locked()) < max {
            return true;
        }
        self.pool
            .locked()
            .retain(|(b, _), _| !of_principal(b, principal));
        let mine = sessions();
        if mine.len() + running() < max {
            return true;
        }
        if !evict {
            return false;
        }
        let mut mine = mine;
        mine.sort();
        let mut held = mine.len() + running();
        for (_, id) in mine {
            if held < max {
                break;
            }
            tracing::info!(session = %id, principal, "http session ended: its principal opened one past connections_per_principal");
            self.remove_session(&id);
            held -= 1;
        }
        held < max
    }
}

/// Whether `bearer` is still a valid token.
fn valid(bearer: &str) -> bool {
    let rt = shoal_policy::runtime();
    rt.tokens
        .as_ref()
        .and_then(|t| t.validate(bearer))
        .is_some()
}

/// Whether `bearer` is a valid token of `principal`.
fn of_principal(bearer: &str, principal: &str) -> bool {
    let rt = shoal_policy::runtime();
    rt.tokens
        .as_ref()
        .and_then(|t| t.validate(bearer))
        .is_some_and(|p| p == principal)
}

/// A duplicate of a connection's socket: how a handler waiting for an answer learns that
/// its client went away (the server itself only finds out when it writes).
#[derive(Clone)]
pub struct Peer(Arc<std::os::fd::OwnedFd>);

impl Peer {
    /// The client closed its side (`POLLRDHUP`): HTTP clients do not half-close while
    /// they wait for an answer, so this is a client that gave up.
    pub fn gone(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&*self.0, PollFlags::RDHUP)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
            && fds[0]
                .revents()
                .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR)
    }

    /// Resolves once the client closed its side, woken by the socket's
    /// readiness: a duplicate of the socket registered with the runtime's
    /// reactor (the server's own registration is actix-web's, and it only
    /// reads when it has a request to read), each wake checked with
    /// [`Peer::gone`]. Pending data wakes it once; the close wakes it again.
    /// Never resolves when the socket cannot be watched (no descriptor left).
    pub async fn closed(&self) {
        use tokio::io::Interest;
        let watch = self
            .0
            .try_clone()
            .map(std::net::TcpStream::from)
            .and_then(tokio::net::TcpStream::from_std);
        let Ok(watch) = watch else {
            return std::future::pending().await;
        };
        while !self.gone() {
            if watch.ready(Interest::READABLE).await.is_err() {
                return std::future::pending().await;
            }
            // Nothing is read here: the readiness is cleared so only a new
            // event (the close) wakes the next wait.
            let _ = watch.try_io(Interest::READABLE, || {
                Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
            });
        }
    }
}

/// Counts an open TCP connection until the connection ends.
struct ConnGuard(Arc<HttpStats>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The address to serve (`--http` over `[http] listen`), checked and bound before the
/// daemon starts; `None`: HTTP is off. A non-loopback address is an error.
pub fn bind(flag: Option<&str>, cfg: &HttpConfig) -> Result<Option<std::net::TcpListener>, String> {
    let Some(addr) = flag.or(cfg.listen.as_deref()) else {
        return Ok(None);
    };
    let a = crate::config::http_listen(addr)?;
    let l = std::net::TcpListener::bind(a)
        .map_err(|e| format!("cannot listen for HTTP on {addr}: {e}"))?;
    Ok(Some(l))
}

/// Start serving on `listener` (inside the daemon's System): the server runs as tasks
/// and arbiters of that System and stops with it. What the daemon keeps of it comes back.
pub fn start(
    listener: std::net::TcpListener,
    socket: PathBuf,
    config: &Config,
) -> Result<Served, String> {
    use actix_web::{web, App, HttpServer};
    let listen = listener
        .local_addr()
        .map_err(|e| format!("http listener: {e}"))?;
    let stats = Arc::new(HttpStats {
        listen: listen.to_string(),
        connections: AtomicUsize::new(0),
        streams: AtomicUsize::new(0),
        sessions: AtomicUsize::new(0),
        requests: AtomicU64::new(0),
    });
    let http = Arc::new(Http {
        socket,
        listen,
        limit: config.daemon.max_frame_bytes as usize,
        cfg: config.http.clone(),
        sessions: Default::default(),
        pool: Default::default(),
        running: Default::default(),
        stats: stats.clone(),
    });
    let data = web::Data::from(http.clone());
    let conn_stats = stats.clone();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/mcp", web::post().to(serve::post))
            .route("/mcp", web::get().to(serve::get))
            .route("/mcp", web::delete().to(serve::delete))
            .default_service(web::to(serve::other))
    })
    .workers(workers)
    .disable_signals()
    // TCP connections cost a descriptor each; what they can do needs a token, and each MCP
    // session counts in `max_connections` on the socket. Bounded, not tied to it.
    .max_connections((config.limits.max_connections * 4).max(64))
    .client_request_timeout(Duration::from_millis(config.http.request_timeout_ms))
    .client_disconnect_timeout(Duration::from_secs(1))
    .on_connect(move |io, ext| {
        conn_stats.connections.fetch_add(1, Ordering::SeqCst);
        ext.insert(Arc::new(ConnGuard(conn_stats.clone())));
        if let Some(t) = io.downcast_ref::<actix_web::rt::net::TcpStream>() {
            use std::os::fd::AsFd;
            if let Ok(fd) = t.as_fd().try_clone_to_owned() {
                ext.insert(Peer(Arc::new(fd)));
            }
        }
    })
    .listen(listener)
    .map_err(|e| format!("http listener: {e}"))?
    .run();
    actix_rt::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!("http server failed: {e}");
        }
    });
    let every = Duration::from_secs(config.http.session_idle_secs.clamp(1, 10));
    let weak = Arc::downgrade(&http);
    let reaper = weak.clone();
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Some(h) = reaper.upgrade() else { return };
            h.reap();
        }
    });
    tracing::info!(listen = %listen, "serving MCP over HTTP at http://{listen}/mcp");
    Ok(Served { stats, http: weak })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait for a client to go is woken by its close: a client that
    /// closes after sending a byte (a wake that is not a close) ends a 60 s
    /// wait long before its deadline.
    #[test]
    fn a_peer_s_close_wakes_its_wait() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let peer = Peer(Arc::new(std::os::fd::OwnedFd::from(server)));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let closer = tokio::task::spawn_blocking(move || {
                client.write_all(b"x").unwrap();
                drop(client);
            });
            let waited = tokio::time::timeout(Duration::from_secs(60), peer.closed()).await;
            assert!(waited.is_ok(), "woken by the close");
            closer.await.unwrap();
        });
        assert!(peer.gone());
    }
}
