//! One end of the socketpair between the daemon and a worker process.
//!
//! Each frame is one line of JSON: a request `{"q": id, "b": body}`, the
//! reply to one `{"r": id, "ok": body}` or `{"r": id, "err": message}`, a
//! note `{"b": body}` that wants no reply, or `{"x": id}`: the sender gave up
//! waiting for request `id`. Either end sends requests from
//! any thread and waits for its reply there; one reader thread per end
//! routes replies to their waiters and hands requests and notes to the
//! end's handler, which must not block (it hands long work to a thread of
//! its own). When the other end goes, every waiter gets an error and the
//! handler [`Incoming::Closed`].

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use shoal_base::sync::Locked;
use shoal_lang::Interrupter;

type Reply = Result<Json, String>;

/// A frame on the pair, as written and read (the module's docs): which of
/// its members are present says what it is.
#[derive(Debug, Serialize, Deserialize)]
struct Frame<B = Json> {
    /// A request's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    q: Option<u64>,
    /// The id of the request a reply answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r: Option<u64>,
    /// The id of a request no longer awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x: Option<u64>,
    /// A request's or a note's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b: Option<B>,
    /// A reply's answer...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ok: Option<B>,
    /// ...or its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    err: Option<String>,
    /// How many descriptors came with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fds: Option<usize>,
}

impl<B> Frame<B> {
    fn empty() -> Frame<B> {
        Frame {
            q: None,
            r: None,
            x: None,
            b: None,
            ok: None,
            err: None,
            fds: None,
        }
    }
}

/// A request sent: its id, and where its reply comes.
type Asked = (u64, mpsc::Receiver<Reply>);

/// What the reader hands the handler.
#[derive(Debug)]
pub enum Incoming {
    /// A request: answer it with [`Pair::reply`] and its `id`. `fds`: the
    /// descriptors sent with it ([`Pair::request_with_fds`]).
    Request {
        id: u64,
        body: Json,
        fds: Vec<OwnedFd>,
    },
    Note(Json),
    /// The other end gave up waiting for request `id` (interrupted, or out
    /// of time): work on it may stop; a reply still sent is dropped.
    Abandoned {
        id: u64,
    },
    /// The other end closed the pair (or sent a frame that is not one).
    Closed,
}

/// One end of the pair.
pub struct Pair {
    out: Mutex<UnixStream>,
    /// The same socket, to shut it down without waiting for a writer
    /// blocked on `out`.
    ctl: UnixStream,
    waiting: Mutex<HashMap<u64, mpsc::SyncSender<Result<Json, String>>>>,
    next: AtomicU64,
    gone: AtomicBool,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("gone", &self.gone.load(Ordering::Relaxed))
            .finish()
    }
}

/// The error every request gets once the other end is gone.
pub const GONE: &str = "the worker pair is closed";

/// The error of a [`Pair::request_until`] interrupted before its reply.
pub const STOPPED: &str = "interrupted while waiting for the other end";

/// The error of a [`Pair::request_within`] whose reply did not come in time.
pub const LATE: &str = "the other end did not answer in time";

impl Pair {
    /// Start the reader of `stream` on a thread named `name`; `handler`
    /// takes every request and note, then [`Incoming::Closed`] once.
    pub fn start(
        stream: UnixStream,
        name: &str,
        mut handler: impl FnMut(&Arc<Pair>, Incoming) + Send + 'static,
    ) -> io::Result<Arc<Pair>> {
        let read = stream.try_clone()?;
        let ctl = stream.try_clone()?;
        let pair = Arc::new(Pair {
            out: Mutex::new(stream),
            ctl,
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            gone: AtomicBool::new(false),
        });
        let me = pair.clone();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut frames = Frames::default();
                while let Some((frame, fds)) = frames.next(&read) {
                    if let Some(id) = frame.r {
                        let r = match frame.err {
                            Some(e) => Err(e),
                            None => Ok(frame.ok.unwrap_or(Json::Null)),
                        };
                        if let Some(w) = me.waiting.locked().remove(&id) {
                            let _ = w.send(r);
                        }
                        continue;
                    }
                    if let Some(id) = frame.x {
                        handler(&me, Incoming::Abandoned { id });
                        continue;
                    }
                    let body = frame.b.unwrap_or(Json::Null);
                    match frame.q {
                        Some(id) => handler(&me, Incoming::Request { id, body, fds }),
                        None => handler(&me, Incoming::Note(body)),
                    }
                }
                me.gone.store(true, Ordering::SeqCst);
                // Dropping the senders wakes every waiter with an error.
                me.waiting.locked().clear();
                let _ = me.ctl.shutdown(std::net::Shutdown::Both);
                handler(&me, Incoming::Closed);
            })?;
        Ok(pair)
    }

    /// Close the pair: the other end reads its end, and this end's reader
    /// ends (its handler gets [`Incoming::Closed`]).
    pub fn close(&self) {
        let _ = self.ctl.shutdown(std::net::Shutdown::Both);
    }

    /// The other end is gone: the reader saw its end, or the socket says
    /// it hung up (a process that just died, before the reader woke).
    pub fn is_gone(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        if self.gone.load(Ordering::SeqCst) {
            return true;
        }
        let hup = PollFlags::RDHUP | PollFlags::HUP;
        let mut fds = [PollFd::new(&self.ctl, PollFlags::RDHUP)];
        matches!(poll(&mut fds, Some(&Timespec::default())), Ok(n) if n > 0)
            && fds[0].revents().intersects(hup)
    }

    fn send<B: Serialize>(&self, frame: &Frame<B>) -> Result<(), String> {
        let mut line = serde_json::to_vec(frame).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut out = self.out.locked();
        out.write_all(&line).map_err(|_| GONE.to_string())
    }

    /// Send `frame` with `fds` attached to its first byte.
    fn send_fds(&self, frame: &Frame, fds: &[BorrowedFd<'_>]) -> Result<(), String> {
        let mut line = serde_json::to_vec(frame).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let out = self.out.locked();
        shoal_base::fdlines::send(&out, &line, fds).map_err(|_| GONE.to_string())
    }

    /// Send `body` and wait for its reply (an `err` reply, or the other end
    /// going, is the error).
    pub fn request(&self, body: Json) -> Result<Json, String> {
        let (_, rx) = self.ask_with(body, &[])?;
        rx.recv().unwrap_or_else(|_| Err(GONE.into()))
    }

    /// [`Pair::request`], given up ([`STOPPED`]) as soon as `intr` is
    /// interrupted: the interrupt itself wakes the wait, and the other end
    /// hears that its answer is no longer awaited.
    pub fn request_until(self: &Arc<Self>, body: Json, intr: &Interrupter) -> Result<Json, String> {
        let (id, rx) = self.ask_with(body, &[])?;
        let pair = Arc::downgrade(self);
        let _hook = intr.on_interrupt(move || {
            // Whoever takes the waiter answers: the reader or this.
            let waiter = pair.upgrade().and_then(|p| p.waiting.locked().remove(&id));
            if let Some(w) = waiter {
                let _ = w.try_send(Err(STOPPED.into()));
            }
        });
        let r = rx.recv().unwrap_or_else(|_| Err(GONE.into()));
        if matches!(&r, Err(e) if e == STOPPED) {
            self.abandon(id);
        }
        r
    }

    /// Tell the other end that request `id`'s answer is no longer awaited.
    fn abandon(&self, id: u64) {
        let _ = self.send(&Frame::<Json> {
            x: Some(id),
            ..Frame::empty()
        });
    }

    /// [`Pair::request`], given up ([`LATE`]) after `within`.
    pub fn request_within(&self, body: Json, within: std::time::Duration) -> Result<Json, String> {
        let (id, rx) = self.ask_with(body, &[])?;
        match rx.recv_timeout(within) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(GONE.into()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.waiting.locked().remove(&id);
                self.abandon(id);
                Err(LATE.into())
            }
        }
    }

    /// [`Pair::request`] with `fds` sent along (the other end's handler
    /// gets them with the request).
    pub fn request_with_fds(&self, body: Json, fds: &[BorrowedFd<'_>]) -> Result<Json, String> {
        let (_, rx) = self.ask_with(body, fds)?;
        rx.recv().unwrap_or_else(|_| Err(GONE.into()))
    }

    /// Send request `body` with `fds`: its id, and where its reply comes.
    fn ask_with(&self, body: Json, fds: &[BorrowedFd<'_>]) -> Result<Asked, String> {
        if self.is_gone() {
            return Err(GONE.into());
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::sync_channel(1);
        self.waiting.locked().insert(id, tx);
        let mut frame = Frame {
            q: Some(id),
            b: Some(body),
            ..Frame::empty()
        };
        let sent = match fds.len() {
            0 => self.send(&frame),
            n => {
                frame.fds = Some(n);
                self.send_fds(&frame, fds)
            }
        };
        if let Err(e) = sent {
            self.waiting.locked().remove(&id);
            return Err(e);
        }
        // The reader may have ended between the check above and the insert.
        if self.is_gone() {
            self.waiting.locked().remove(&id);
        }
        Ok((id, rx))
    }

    /// Answer request `id`.
    pub fn reply(&self, id: u64, r: Result<Json, String>) {
        self.answer(id, r);
    }

    /// Answer request `id` with `r`, its answer written as it encodes (a
    /// value's wire form streams into the frame: no tree of it is built).
    pub fn answer<B: Serialize>(&self, id: u64, r: Result<B, String>) {
        let (ok, err) = match r {
            Ok(ok) => (Some(ok), None),
            Err(e) => (None, Some(e)),
        };
        let _ = self.send(&Frame {
            r: Some(id),
            ok,
            err,
            ..Frame::empty()
        });
    }

    /// Send `body`, wanting no reply.
    pub fn note(&self, body: Json) {
        let _ = self.send(&Frame {
            b: Some(body),
            ..Frame::empty()
        });
    }
}

/// The longest frame either end reads: past it the other end is not
/// speaking the protocol (a worker's values are bounded by its memory
/// budget well below it), and the pair closes.
pub const MAX_FRAME: usize = 256 << 20;

/// The frames one end reads: lines of JSON, and the descriptors that came
/// with them (a frame marked `"fds": n` takes the next `n`).
#[derive(Default)]
struct Frames(shoal_base::fdlines::Lines);

impl Frames {
    /// The next frame (`None`: the other end closed the pair, or sent
    /// something that is not a frame).
    fn next(&mut self, stream: &UnixStream) -> Option<(Frame, Vec<OwnedFd>)> {
        let line = match self.0.next(stream, MAX_FRAME) {
            Ok(l) => l,
            Err(shoal_base::fdlines::End::Closed) => return None,
            Err(shoal_base::fdlines::End::TooLong) => {
                tracing::error!("a worker pair frame is over {MAX_FRAME} bytes; closing the pair");
                return None;
            }
        };
        // An object: a derived struct would also take an array.
        let frame = shoal_proto::rpc::is_object_text(&line)
            .then(|| serde_json::from_slice::<Frame>(&line).ok())
            .flatten();
        let Some(frame) = frame else {
            tracing::error!("a worker pair frame is not one; closing the pair");
            return None;
        };
        let n = frame.fds.unwrap_or(0);
        Some((frame, self.0.take_fds(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Requests cross both ways at once, a handler's reply may come from
    /// another thread, and a closed end fails its waiters instead of
    /// hanging them.
    #[test]
    fn requests_cross_both_ways_and_a_close_wakes_waiters() {
        let (a, b) = UnixStream::pair().unwrap();
        let echo = |p: &Arc<Pair>, i: Incoming| {
            if let Incoming::Request { id, body, .. } = i {
                let p = p.clone();
                std::thread::spawn(move || {
                    if body == json!("fail") {
                        p.reply(id, Err("refused".into()));
                    } else {
                        p.reply(id, Ok(json!({"echo": body})));
                    }
                });
            }
        };
        let pa = Pair::start(a, "a", echo).unwrap();
        let (closed_tx, closed_rx) = mpsc::channel();
        let pb = Pair::start(b, "b", move |p, i| {
            if matches!(i, Incoming::Closed) {
                let _ = closed_tx.send(());
            } else {
                echo(p, i)
            }
        })
        .unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (pa, pb) = (pa.clone(), pb.clone());
                std::thread::spawn(move || {
                    assert_eq!(pa.request(json!(i)).unwrap(), json!({"echo": i}));
                    assert_eq!(pb.request(json!(-i)).unwrap(), json!({"echo": -i}));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(pa.request(json!("fail")).unwrap_err(), "refused");
        // A frame many reads long arrives whole, and the ones after it too.
        let big = "x".repeat(5 << 20);
        assert_eq!(pa.request(json!(big)).unwrap(), json!({"echo": big}));
        assert_eq!(pa.request(json!(7)).unwrap(), json!({"echo": 7}));
        // `a` goes: `b` hears it, and its requests fail from then on.
        pa.close();
        closed_rx.recv().unwrap();
        assert!(pb.is_gone());
        assert_eq!(pb.request(json!(1)).unwrap_err(), GONE);
    }

    /// A value answered in its wire form arrives as its encoding; a null
    /// answer is an answer; a line that is not a frame closes the pair.
    #[test]
    fn answers_stream_values_and_a_stray_line_closes_the_pair() {
        use shoal_value::Value;
        let v = Value::List(std::sync::Arc::new(vec![
            Value::Int(1),
            Value::Str("two".into()),
            Value::Null,
        ]));
        let (a, b) = UnixStream::pair().unwrap();
        let answered = v.clone();
        let _pb = Pair::start(b, "b", move |p, i| {
            if let Incoming::Request { id, body, .. } = i {
                match body.as_str() {
                    Some("value") => p.answer(id, Ok(shoal_proto::wire::Wire::new(&answered))),
                    _ => p.reply(id, Ok(Json::Null)),
                }
            }
        })
        .unwrap();
        let pa = Pair::start(a.try_clone().unwrap(), "a", |_, _| {}).unwrap();
        assert_eq!(
            pa.request(json!("value")).unwrap(),
            shoal_proto::wire::encode(&v)
        );
        assert_eq!(pa.request(json!("null")).unwrap(), Json::Null);
        (&a).write_all(b"[1, 2]\n").unwrap();
        assert_eq!(pa.request(json!("null")).unwrap_err(), GONE);
    }

    /// A wait given up by an interrupt or a deadline ends then, and one
    /// whose other end goes ends too (the interrupt's hook keeps no waiter).
    #[test]
    fn an_interrupt_a_deadline_or_a_close_ends_a_wait() {
        let (a, b) = UnixStream::pair().unwrap();
        // `b` takes requests and answers none of them; it hears which ones
        // were given up.
        let (held_tx, held_rx) = mpsc::channel();
        let (gave_up_tx, gave_up) = mpsc::channel();
        let pb = Pair::start(b, "b", move |_, i| match i {
            Incoming::Request { id, .. } => held_tx.send(id).unwrap(),
            Incoming::Abandoned { id } => gave_up_tx.send(id).unwrap(),
            _ => {}
        })
        .unwrap();
        let pa = Pair::start(a, "a", |_, _| {}).unwrap();
        let intr = Interrupter::default();
        let waiter = {
            let (pa, intr) = (pa.clone(), intr.clone());
            std::thread::spawn(move || pa.request_until(json!(1), &intr))
        };
        let first = held_rx.recv().unwrap();
        intr.interrupt();
        assert_eq!(waiter.join().unwrap().unwrap_err(), STOPPED);
        assert_eq!(gave_up.recv().unwrap(), first);
        // Already interrupted: given up at once.
        assert_eq!(pa.request_until(json!(2), &intr).unwrap_err(), STOPPED);
        assert_eq!(gave_up.recv().unwrap(), held_rx.recv().unwrap());
        let late = pa.request_within(json!(3), std::time::Duration::from_millis(1));
        assert_eq!(late.unwrap_err(), LATE);
        assert_eq!(gave_up.recv().unwrap(), held_rx.recv().unwrap());
        assert!(pa.waiting.locked().is_empty());
        // The other end goes while a wait is registered with an interrupter.
        let fresh = Interrupter::default();
        let waiter = {
            let pa = pa.clone();
            std::thread::spawn(move || pa.request_until(json!(4), &fresh))
        };
        held_rx.recv().unwrap();
        pb.close();
        assert_eq!(waiter.join().unwrap().unwrap_err(), GONE);
    }
}
