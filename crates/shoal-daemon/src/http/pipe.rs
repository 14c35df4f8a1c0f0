//! One connection of the HTTP transport to the daemon's own socket: the same MCP
//! connection actor a `shoal mcp` shim reaches (one MCP implementation behind two
//! transports), with its frames routed to the HTTP requests they answer.
//!
//! A response goes to the POST that asked; a progress notification to the POST
//! whose `progressToken` it names; a server request (elicitation) to the newest
//! POST whose client takes an SSE stream; everything else to the session's GET
//! stream. A *dedicated* pipe (a stateless 2026-07-28 request's) serves one request
//! at a time and gives it every frame. Dropping the last handle closes the socket
//! both ways, so the daemon sees a hang-up: the calls of a vanished client are
//! cancelled and what its connection held is freed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value as Json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};

use super::sse::SseStream;
use shoal_base::sync::Locked;

/// A frame for one HTTP request: its answer, or a message before it.
pub enum Routed {
    Response(Bytes),
    Message(Bytes),
}

pub struct Pipe {
    out: mpsc::UnboundedSender<Vec<u8>>,
    routes: std::sync::Mutex<Routes>,
    /// Set by [`Pipe::shut`], or dropped with the pipe: both tasks then drop their half
    /// of the socket, and the daemon sees a hang-up.
    stop: watch::Sender<bool>,
}

#[derive(Default)]
struct Routes {
    pending: HashMap<String, mpsc::UnboundedSender<Routed>>,
    /// progressToken (JSON text) → request id (JSON text).
    progress: HashMap<String, String>,
    /// Requests whose client takes an SSE stream, oldest first.
    streaming: Vec<String>,
    /// The session's GET stream (the messages no request claims).
    fallback: Option<Arc<SseStream>>,
    dedicated: bool,
    closed: bool,
    /// The daemon refused the connection (an error with no id, e.g. `max_connections`).
    refused: Option<Bytes>,
}

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<HeadParams<'a>>,
}

#[derive(Deserialize)]
struct HeadParams<'a> {
    #[serde(borrow, default, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
}

/// The answer an HTTP request gets when its client cancelled it (the daemon sends none).
pub const REQUEST_CANCELLED: i64 = -32800;

/// The pipe is closed (the daemon ended the connection).
#[derive(Debug)]
pub struct Closed;

impl Pipe {
    /// Connect to the daemon's socket and send `attach` (the `shoal/attach` frame that
    /// names the session and carries the bearer token) before anything else.
    pub async fn connect(
        socket: &Path,
        attach: Vec<u8>,
        dedicated: bool,
    ) -> std::io::Result<Arc<Pipe>> {
        let stream = UnixStream::connect(socket).await?;
        let (r, mut w) = stream.into_split();
        let (out, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let (stop, stopped) = watch::channel(false);
        let mut writer_stop = stopped.clone();
        let pipe = Arc::new(Pipe {
            out,
            routes: std::sync::Mutex::new(Routes {
                dedicated,
                ..Default::default()
            }),
            stop,
        });
        let _ = pipe.out.send(attach);
        actix_rt::spawn(async move {
            loop {
                let frame = tokio::select! {
                    f = rx.recv() => f,
                    _ = writer_stop.changed() => None,
                };
                let Some(frame) = frame else { break };
                if w.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let weak = Arc::downgrade(&pipe);
        actix_rt::spawn(read_loop(
            BufReader::with_capacity(64 * 1024, r),
            weak,
            stopped,
        ));
        Ok(pipe)
    }

    /// Send one request and route what answers it to the returned channel. `streaming`:
    /// the client takes an SSE stream, so messages about the request come too.
    pub fn request(
        &self,
        id: String,
        progress: Option<String>,
        streaming: bool,
        frame: Vec<u8>,
    ) -> Result<mpsc::UnboundedReceiver<Routed>, Closed> {
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut r = self.routes.locked();
            if let Some(b) = &r.refused {
                let _ = tx.send(Routed::Response(b.clone()));
                return Ok(rx);
            }
            if r.closed {
                return Err(Closed);
            }
            if streaming {
                if let Some(p) = progress {
                    r.progress.insert(p, id.clone());
                }
                r.streaming.push(id.clone());
            }
            r.pending.insert(id, tx);
        }
        self.send(frame)?;
        Ok(rx)
    }

    /// Forget a request whose client is gone: its answer is dropped.
    pub fn forget(&self, id: &str) {
        let mut r = self.routes.locked();
        r.pending.remove(id);
        r.streaming.retain(|s| s != id);
        r.progress.retain(|_, v| v != id);
    }

    /// The client cancelled request `id` (`notifications/cancelled`): the daemon does not
    /// answer a cancelled call, so the HTTP request waiting for it is answered here.
    pub fn cancelled(&self, id: &Json) {
        let key = id.to_string();
        let tx = {
            let mut r = self.routes.locked();
            r.streaming.retain(|s| *s != key);
            r.progress.retain(|_, v| *v != key);
            r.pending.remove(&key)
        };
        if let Some(tx) = tx {
            let e = shoal_proto::rpc::RpcError::new(
                REQUEST_CANCELLED,
                "request cancelled by the client",
            );
            let frame = shoal_proto::rpc::error_frame(id, &e);
            let _ = tx.send(Routed::Response(Bytes::from(frame)));
        }
    }

    /// Send a frame that expects no answer (a notification, a client's response).
    pub fn send(&self, mut frame: Vec<u8>) -> Result<(), Closed> {
        if frame.last() != Some(&b'\n') {
            frame.push(b'\n');
        }
        self.out.send(frame).map_err(|_| Closed)
    }

    pub fn set_fallback(&self, s: Option<Arc<SseStream>>) {
        self.routes.locked().fallback = s;
    }

    pub fn is_closed(&self) -> bool {
        self.routes.locked().closed || self.out.is_closed()
    }

    fn route(&self, line: &[u8]) {
        let Ok(head) = serde_json::from_slice::<Head>(line) else {
            tracing::debug!("http: an unreadable frame from the daemon");
            return;
        };
        let bytes = Bytes::copy_from_slice(line);
        let mut r = self.routes.locked();
        let target = match (&head.method, head.id) {
            (None, Some(id)) => {
                let key = id.get();
                r.streaming.retain(|s| s != key);
                r.progress.retain(|_, v| v != key);
                if let Some(tx) = r.pending.remove(key) {
                    let _ = tx.send(Routed::Response(bytes));
                }
                return;
            }
            (None, None) => {
                // An error for no request (a refused connection): every waiting request
                // hears it, and so does every later one.
                r.refused = Some(bytes.clone());
                for (_, tx) in r.pending.drain() {
                    let _ = tx.send(Routed::Response(bytes.clone()));
                }
                return;
            }
            _ if r.dedicated => r.pending.keys().next().cloned(),
            (Some(m), None) if m == "notifications/progress" => head
                .params
                .and_then(|p| p.progress_token)
                .and_then(|t| r.progress.get(t.get()).cloned()),
            (Some(_), Some(_)) => r.streaming.last().cloned(),
            (Some(_), None) => None,
        };
        if let Some(tx) = target.and_then(|k| r.pending.get(&k)) {
            if tx.send(Routed::Message(bytes.clone())).is_ok() {
                return;
            }
        }
        if let Some(f) = &r.fallback {
            f.push(&bytes);
        }
    }

    /// Close the connection now (a session ended): the daemon sees a hang-up and cancels
    /// what the session still runs; requests still waiting are answered as failed.
    pub fn shut(&self) {
        let _ = self.stop.send(true);
        self.close();
    }

    fn close(&self) {
        let mut r = self.routes.locked();
        r.closed = true;
        r.pending.clear();
        if let Some(f) = r.fallback.take() {
            f.finish();
        }
    }
}

async fn read_loop(
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    pipe: Weak<Pipe>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let n = tokio::select! {
            n = reader.read_until(b'\n', &mut line) => n,
            _ = stopped.changed() => return,
        };
        let Some(p) = pipe.upgrade() else { return };
        match n {
            Ok(0) | Err(_) => {
                p.close();
                return;
            }
            Ok(_) => p.route(&line),
        }
    }
}
