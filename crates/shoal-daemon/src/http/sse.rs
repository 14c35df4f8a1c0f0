//! Server-sent event streams of the HTTP transport: each stream numbers its events
//! (`id: STREAM-SEQ`), keeps the last [`REPLAY`] of them, and can be taken up again
//! by a client that reconnects with `Last-Event-ID` (docs/http.md "Streams").
//! The body a client reads is a channel fed by [`SseStream::push`]; a comment line
//! every keep-alive interval finds a client that vanished, and dropping its body
//! frees the stream's place at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::mpsc;

use super::HttpStats;
use shoal_base::sync::Locked;

/// Events each stream keeps for a client that reconnects.
pub const REPLAY: usize = 256;

/// Stream numbers, daemon-wide: an event id names its stream.
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

/// One SSE stream: its numbered events and the client reading it now, if any.
pub struct SseStream {
    pub id: u64,
    inner: std::sync::Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    seq: u64,
    buf: VecDeque<(u64, Bytes)>,
    live: Option<mpsc::UnboundedSender<Bytes>>,
    done: bool,
}

/// One SSE event carrying a JSON-RPC message (`data` is one JSON line).
pub fn event(stream: u64, seq: u64, data: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(data.len() + 48);
    b.extend_from_slice(format!("id: {stream}-{seq}\nevent: message\ndata: ").as_bytes());
    b.extend_from_slice(data.strip_suffix(b"\n").unwrap_or(data));
    b.extend_from_slice(b"\n\n");
    Bytes::from(b)
}

/// `Last-Event-ID` → (stream, seq).
pub fn parse_event_id(v: &str) -> Option<(u64, u64)> {
    let (s, n) = v.trim().split_once('-')?;
    Some((s.parse().ok()?, n.parse().ok()?))
}

impl SseStream {
    pub fn new() -> Arc<SseStream> {
        Arc::new(SseStream {
            id: NEXT_STREAM.fetch_add(1, Ordering::Relaxed),
            inner: Default::default(),
        })
    }

    /// Number, keep and send one message (a JSON line).
    pub fn push(&self, data: &[u8]) {
        let mut g = self.inner.locked();
        g.seq += 1;
        let ev = event(self.id, g.seq, data);
        let seq = g.seq;
        if g.buf.len() >= REPLAY {
            g.buf.pop_front();
        }
        g.buf.push_back((seq, ev.clone()));
        if let Some(tx) = &g.live {
            if tx.send(ev).is_err() {
                g.live = None;
            }
        }
    }

    /// Whether a client reads this stream now.
    pub fn is_live(&self) -> bool {
        self.inner
            .locked()
            .live
            .as_ref()
            .is_some_and(|t| !t.is_closed())
    }

    /// Whether the stream has ended (its request answered).
    pub fn is_done(&self) -> bool {
        self.inner.locked().done
    }

    /// A reader for this stream: `prime` first sends an empty event whose id a client
    /// can resume from (2025-11-25), then the events after `after` (a resumption),
    /// then what is pushed from now on. A finished stream replays and ends.
    pub fn attach(&self, after: Option<u64>, prime: bool) -> mpsc::UnboundedReceiver<Bytes> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut g = self.inner.locked();
        if prime {
            let _ = tx.send(Bytes::from(format!(
                "id: {}-{}\nretry: 1000\ndata: \n\n",
                self.id, g.seq
            )));
        }
        if let Some(after) = after {
            for (_, ev) in g.buf.iter().filter(|(s, _)| *s > after) {
                let _ = tx.send(ev.clone());
            }
        }
        if !g.done {
            g.live = Some(tx);
        }
        rx
    }

    /// The stream ended: its reader gets what is queued, then the end.
    pub fn finish(&self) {
        let mut g = self.inner.locked();
        g.done = true;
        g.live = None;
    }
}

/// Counts an open SSE body in the listener's stats until it is dropped.
pub struct StreamSlot(Arc<HttpStats>);

impl StreamSlot {
    pub fn take(stats: &Arc<HttpStats>) -> StreamSlot {
        stats.streams.fetch_add(1, Ordering::SeqCst);
        StreamSlot(stats.clone())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The body of an SSE response: the channel's events, a comment every
/// `keepalive`, and `hold` (what the stream keeps alive) until it ends.
pub fn body<H: 'static>(
    rx: mpsc::UnboundedReceiver<Bytes>,
    keepalive: Duration,
    slot: StreamSlot,
    hold: H,
) -> impl Stream<Item = Result<Bytes, actix_web::Error>> {
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    futures_util::stream::unfold(
        (rx, tick, slot, hold),
        |(mut rx, mut tick, slot, hold)| async move {
            tokio::select! {
                ev = rx.recv() => ev.map(|b| (Ok(b), (rx, tick, slot, hold))),
                _ = tick.tick() => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), (rx, tick, slot, hold))),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnecting_reader_gets_what_it_missed() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = SseStream::new();
            let mut a = s.attach(None, false);
            s.push(b"{\"n\":1}");
            s.push(b"{\"n\":2}\n");
            assert_eq!(
                a.recv().await.unwrap(),
                event(s.id, 1, b"{\"n\":1}").to_vec()
            );
            drop(a);
            s.push(b"{\"n\":3}");
            assert!(!s.is_live());
            let mut b = s.attach(Some(1), true);
            let prime = b.recv().await.unwrap();
            assert!(std::str::from_utf8(&prime).unwrap().starts_with("id: "));
            assert_eq!(b.recv().await.unwrap(), event(s.id, 2, b"{\"n\":2}"));
            assert_eq!(b.recv().await.unwrap(), event(s.id, 3, b"{\"n\":3}"));
            s.finish();
            assert!(b.recv().await.is_none());
            assert_eq!(parse_event_id(&format!("{}-7", s.id)), Some((s.id, 7)));
        });
    }
}
