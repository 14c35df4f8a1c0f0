//! What every connection and the actors answering it share: the writer task that owns a
//! socket's write half (bounded, in order, with backpressure), hang-up detection, the
//! stream item of a connection actor, and the conversions of session errors into protocol
//! errors. It names no connection or session actor, so the session layer can use it.

use std::io;
use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value as Json;

use tokio::sync::mpsc;

use crate::msg::SessionError;
use shoal_proto::frame::{self, Frame};
use shoal_proto::{kernel, rpc};

/// Whether the peer closed its end completely (`POLLHUP`), as opposed to
/// only shutting down its write side while it waits for answers.
pub fn hung_up(fd: &std::os::fd::OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    let mut p = [PollFd::new(fd, PollFlags::empty())];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut p, Some(&now)), Ok(n) if n > 0)
        && p[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// Set once a connection's peer hung up: every wait of the connection ends.
pub type Hangup = shoal_base::sync::Latch;

/// An actor future that gives up when `stop` resolves first (`None`): how a
/// connection abandons a call whose caller is gone or cancelled it.
pub struct Unless<F, S> {
    inner: F,
    stop: std::pin::Pin<Box<S>>,
}

pub fn unless<F, S>(inner: F, stop: S) -> Unless<F, S> {
    Unless {
        inner,
        stop: Box::pin(stop),
    }
}

impl<A, F, S> ActorFuture<A> for Unless<F, S>
where
    A: Actor,
    F: ActorFuture<A> + Unpin,
    S: std::future::Future<Output = ()>,
{
    type Output = Option<F::Output>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        act: &mut A,
        ctx: &mut A::Context,
        task: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.get_mut();
        if this.stop.as_mut().poll(task).is_ready() {
            return std::task::Poll::Ready(None);
        }
        std::pin::Pin::new(&mut this.inner)
            .poll(act, ctx, task)
            .map(Some)
    }
}

/// Resolves when the peer of the socket `fd` (a duplicate of a connection's socket) hangs
/// up completely. The wait is on readiness, never a timer: a hang-up is `EPOLLHUP`, which
/// epoll reports whatever was asked, so the wait is for writability (edge-triggered: it
/// changes only as the peer reads, so the wait wakes on traffic or on the hang-up).
pub async fn hang_up(fd: Arc<std::os::fd::OwnedFd>) {
    use tokio::io::Interest;
    // A stream of its own over the socket, for its registration with the reactor (the
    // socket is already non-blocking: the flag belongs to the socket, not the descriptor).
    let watch = fd.try_clone().and_then(|dup| {
        let s = std::os::unix::net::UnixStream::from(dup);
        s.set_nonblocking(true)?;
        tokio::net::UnixStream::from_std(s)
    });
    let watch = match watch {
        Ok(w) => w,
        Err(e) => {
            // Not watched (out of descriptors): never taken for a hang-up, so the calls
            // in flight run to their end and are answered to nobody.
            tracing::warn!("cannot watch a connection for a hang-up: {e}");
            return std::future::pending().await;
        }
    };
    loop {
        if watch.ready(Interest::WRITABLE).await.is_err() {
            return std::future::pending().await;
        }
        if hung_up(&fd) {
            return;
        }
        // Not a hang-up: forget this readiness and wait for the next change.
        let _ = watch.try_io(Interest::WRITABLE, || {
            Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
        });
    }
}

/// A reached `[limits]` quota: `-32040` naming the key (docs/protocol.md §10).
pub fn limit_error(key: &str, max: u64, what: &str) -> rpc::RpcError {
    rpc::RpcError::new(
        rpc::RESOURCE_LIMIT,
        format!("resource limit reached: {what} ([limits] {key} = {max})"),
    )
    .with_data(serde_json::json!({"code": "resource_limit", "limit": key, "max": max}))
}

/// One stream item of a connection actor.
pub struct FrameItem(pub io::Result<Frame>);

impl Message for FrameItem {
    type Result = ();
}

/// Frames queued for a connection's writer task before senders are told to wait.
pub const WRITE_QUEUE: usize = 64;

/// The sending side of a connection's socket. A frame is written straight to the socket when
/// nothing is queued ahead of it and the socket takes it whole (the common case: no task
/// hop); otherwise it, or the part the socket did not take, is queued for the writer task,
/// which owns the order from then on. At most [`WRITE_QUEUE`] frames wait: past that
/// `try_send` answers `Full` and `send` waits, which is the connection's backpressure.
#[derive(Clone)]
pub struct Writer {
    shared: Arc<WriterShared>,
    tx: mpsc::UnboundedSender<Vec<u8>>,
}

struct WriterShared {
    sock: tokio::net::unix::OwnedWriteHalf,
    /// Frames handed to the writer task and not yet fully written.
    queued: std::sync::atomic::AtomicUsize,
    /// Held while a frame is written directly and, if partly, queued: a second sender cannot
    /// slip bytes into the middle of it.
    direct: std::sync::Mutex<()>,
    /// Signalled each time the writer task finishes a frame, and when it ends.
    drained: tokio::sync::Notify,
    /// The writer task ended (the peer is gone): nothing more is taken.
    closed: std::sync::atomic::AtomicBool,
    /// How long a frame may wait for room before the client counts as stuck.
    stall: std::time::Duration,
}

/// Why a frame could not be taken.
#[derive(Debug)]
pub enum SendError {
    /// [`WRITE_QUEUE`] frames are waiting already; the frame is handed back.
    Full(Vec<u8>),
    /// The peer is gone.
    Closed,
}

impl Writer {
    /// Take `bytes` without waiting: written now, or queued behind what is queued.
    pub fn try_send(&self, bytes: Vec<u8>) -> Result<(), SendError> {
        use std::sync::atomic::Ordering::SeqCst;
        let s = &self.shared;
        let _order = shoal_base::sync::Locked::locked(&s.direct);
        if s.closed.load(SeqCst) {
            return Err(SendError::Closed);
        }
        let queued = s.queued.load(SeqCst);
        if queued >= WRITE_QUEUE {
            return Err(SendError::Full(bytes));
        }
        let rest = if queued == 0 {
            match s.sock.try_write(&bytes) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => bytes[n..].to_vec(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => bytes,
                Err(_) => return Err(SendError::Closed),
            }
        } else {
            bytes
        };
        s.queued.fetch_add(1, SeqCst);
        self.tx.send(rest).map_err(|_| {
            s.queued.fetch_sub(1, SeqCst);
            SendError::Closed
        })
    }

    /// Take `bytes`, waiting while [`WRITE_QUEUE`] frames are queued.
    pub async fn send(&self, mut bytes: Vec<u8>) -> Result<(), SendError> {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so a frame finished in between still wakes us.
            drained.as_mut().enable();
            match self.try_send(bytes) {
                Err(SendError::Full(b)) => bytes = b,
                r => return r,
            }
            drained.await;
        }
    }

    /// [`Self::send`], giving up after the connection's stall limit
    /// (`[limits] write_stall_ms`): `Err(None)` then, the client is stuck.
    pub async fn send_within_stall(&self, bytes: Vec<u8>) -> Result<(), Option<SendError>> {
        match tokio::time::timeout(self.shared.stall, self.send(bytes)).await {
            Ok(r) => r.map_err(Some),
            Err(_) => Err(None),
        }
    }
}

pub(crate) fn spawn_writer(
    w: tokio::net::unix::OwnedWriteHalf,
    stall: std::time::Duration,
) -> Writer {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let shared = Arc::new(WriterShared {
        sock: w,
        queued: Default::default(),
        direct: Default::default(),
        drained: Default::default(),
        closed: Default::default(),
        stall,
    });
    let s = shared.clone();
    actix_rt::spawn(async move {
        'frames: while let Some(bytes) = rx.recv().await {
            let mut off = 0;
            while off < bytes.len() {
                match s.sock.try_write(&bytes[off..]) {
                    Ok(n) => off += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if s.sock.writable().await.is_err() {
                            break 'frames;
                        }
                    }
                    Err(_) => break 'frames,
                }
            }
            s.queued.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            s.drained.notify_waiters();
        }
        // The peer is gone (or every handle dropped): senders waiting for room learn it now.
        s.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        s.drained.notify_waiters();
        // Dropping the last handle shuts the write half down (tokio's OwnedWriteHalf).
    });
    Writer { shared, tx }
}

/// Queue a frame from inside an actor, keeping order and backpressure: the
/// actor waits (only this connection) while the client is not reading.
pub fn write<A>(tx: &Writer, ctx: &mut Context<A>, value: &Json)
where
    A: Actor<Context = Context<A>>,
{
    write_frame(tx, ctx, frame::encode(value));
}

/// Queue one encoded frame (`\n`-terminated) for the connection's writer.
/// A client that leaves [`WRITE_QUEUE`] frames unread for `[limits]
/// write_stall_ms` is stuck: the connection is closed and its place freed.
pub fn write_frame<A>(tx: &Writer, ctx: &mut Context<A>, bytes: Vec<u8>)
where
    A: Actor<Context = Context<A>>,
{
    match tx.try_send(bytes) {
        Ok(()) | Err(SendError::Closed) => {}
        Err(SendError::Full(bytes)) => {
            let tx = tx.clone();
            let f = async move { tx.send_within_stall(bytes).await };
            ctx.wait(actix::fut::wrap_future(f).map(|r, _act, ctx: &mut Context<A>| {
                if let Err(None) = r {
                    tracing::warn!(
                        "a client stopped reading: {WRITE_QUEUE} frames unread past [limits] write_stall_ms; closing its connection"
                    );
                    ctx.stop();
                }
            }));
        }
    }
}

/// A session failure as its JSON-RPC error (docs/rules.md §14).
/// An `env` parameter (`session.attach`, `shoal/attach`): an object of
/// string values, at most 4096 variables; absent or null is `None`.
pub fn env_vars(
    v: Option<shoal_proto::kernel::EnvVars>,
) -> Result<Option<Vec<(String, String)>>, String> {
    let Some(shoal_proto::kernel::EnvVars(env)) = v else {
        return Ok(None);
    };
    if env.len() > 4096 {
        return Err(format!("env has {} variables (at most 4096)", env.len()));
    }
    for (k, v) in &env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(format!("env has an invalid variable {k:?}"));
        }
    }
    Ok(Some(env))
}

pub fn session_error(e: SessionError) -> rpc::RpcError {
    match e {
        SessionError::Parse(p) => kernel::parse_error(&p),
        SessionError::Raised { error, n, warnings } => {
            let mut e = kernel::raised(&error, n);
            if let Some(d) = e.data.take() {
                e.data = Some(kernel::with_warnings(d, &warnings));
            }
            e
        }
        SessionError::UnknownRef { reference } => {
            let hint = unknown_ref_hint(&reference);
            rpc::RpcError::new(rpc::UNKNOWN_REF, "unknown value ref")
                .with_data(serde_json::json!({ "ref": reference, "hint": hint }))
        }
        SessionError::BadRequest(m) => rpc::RpcError::invalid_params(m),
        SessionError::Closed(name) => rpc::RpcError::new(
            rpc::NOT_ATTACHED,
            format!("session {name} was closed; attach to a session first"),
        ),
        SessionError::Internal(m) => rpc::RpcError::internal(m),
        SessionError::Rpc(e) => e,
    }
}

/// What to write instead of an unknown value ref: `27` → `out:27`.
pub fn unknown_ref_hint(reference: &str) -> String {
    let r = reference.trim();
    let digits: String = r.chars().filter(char::is_ascii_digit).collect();
    let rest = r.trim_matches(|c: char| c.is_ascii_digit());
    let looks_numbered = !digits.is_empty()
        && matches!(
            rest.trim_end_matches([':', '/', '.', '#', '$', ' ']),
            "" | "out" | "#" | "$" | "ref" | "shoal://out" | "value"
        );
    if shoal_proto::kernel::parse_ref(r).is_some() {
        format!("{r} is not a value of this session: refs count from out:1, and a result's `ref` names it")
    } else if let Some(n) = digits
        .parse::<u64>()
        .ok()
        .filter(|n| looks_numbered && *n > 0)
    {
        format!("did you mean out:{n}?")
    } else {
        "value refs look like out:N (the `ref` of a result, or shoal://out/N)".into()
    }
}

/// Whether `SHOAL_DEBUG_HOOKS` enables test-only methods (`debug.crash`).
pub fn debug_hooks() -> bool {
    std::env::var_os("SHOAL_DEBUG_HOOKS").is_some_and(|v| !v.is_empty())
}

/// The span of one request: protocol, connection, session (when attached), request id and
/// method. Entered while the request is dispatched and again when its reply is written, so
/// a log line leads back to its call. With debug logging off it is a disabled span.
pub fn request_span(
    proto: &'static str,
    conn: u64,
    session: Option<&str>,
    id: &Json,
    method: &str,
) -> tracing::Span {
    // Only debug lines are written inside a request's own span (the worker's
    // `exec` span carries the call for everything below), and formatting the
    // fields of a span costs about a tenth of a trivial exec: none without them.
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return tracing::Span::none();
    }
    tracing::info_span!(
        "request",
        proto,
        conn,
        session = session.unwrap_or("-"),
        id = %id,
        method
    )
}

/// Log the end of a request inside its span (errors with their code).
pub fn request_done<T>(res: &Result<T, rpc::RpcError>) {
    match res {
        Ok(_) => tracing::debug!("request done"),
        Err(e) => tracing::debug!(code = e.code, error = %e.message, "request failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixStream;

    #[test]
    fn unknown_refs_say_the_form_that_works() {
        assert_eq!(unknown_ref_hint("27"), "did you mean out:27?");
        assert_eq!(unknown_ref_hint("out27"), "did you mean out:27?");
        assert_eq!(unknown_ref_hint("#3"), "did you mean out:3?");
        assert!(unknown_ref_hint("out:99").contains("not a value of this session"));
        assert!(unknown_ref_hint("0").contains("out:N"));
        assert!(unknown_ref_hint("banana").contains("out:N"));
    }

    /// Frames written directly, partly and through the queue arrive whole and in order; a
    /// peer that does not read fills the queue to [`WRITE_QUEUE`], then `try_send` says
    /// `Full` and hands the frame back; `send` waits until the peer reads.
    #[test]
    fn frames_stay_whole_and_in_order_under_backpressure() {
        let sys = actix::System::new();
        sys.block_on(async {
            let (a, mut b) = UnixStream::pair().unwrap();
            let (_r, w) = a.into_split();
            let tx = spawn_writer(w, std::time::Duration::from_secs(60));
            let frame = |i: usize| format!("{i:06}:{}\n", "x".repeat(4096)).into_bytes();
            let mut sent = 0;
            loop {
                match tx.try_send(frame(sent)) {
                    Ok(()) => sent += 1,
                    Err(SendError::Full(back)) => {
                        assert_eq!(back, frame(sent), "the refused frame comes back");
                        break;
                    }
                    Err(SendError::Closed) => panic!("closed"),
                }
                assert!(sent < 100_000, "never full");
            }
            // The socket took some directly; then exactly WRITE_QUEUE frames wait.
            assert!(sent > WRITE_QUEUE, "{sent}");
            let waiting = tx.clone();
            let last = sent;
            let late = actix_rt::spawn(async move { waiting.send(frame(last)).await.is_ok() });
            let total = sent + 1;
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65536];
            while got.len() < total * frame(0).len() {
                let n = b.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed early");
                got.extend_from_slice(&buf[..n]);
            }
            assert!(late.await.unwrap(), "send completes once the peer reads");
            for (i, line) in got.split(|c| *c == b'\n').take(total).enumerate() {
                let mut want = frame(i);
                want.pop();
                assert_eq!(line, &want[..], "frame {i}");
            }
        });
    }
}
