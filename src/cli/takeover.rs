//! `shoal attach --pty pty:N [SESSION]`: take over an agent's terminal,
//! tmux-attach style (docs/takeover.md).
//!
//! The human's terminal goes raw and to its alternate screen; the PTY's
//! screen is painted there with its colours and followed live (`pty.watch`
//! notifications carry the escape sequences). Every byte typed is forwarded
//! as it is (`pty.send {bytes}`), except the detach key Ctrl-] (0x1d). While
//! attached the PTY has the human's terminal size (SIGWINCH → `pty.resize`);
//! on detach it gets back the size the agent gave it, the claim is released
//! and the program runs on. Another human holding the PTY makes this a
//! read-only view (keys other than Ctrl-] are dropped).
//!
//! Threads: the main one reads the keyboard, one reads the daemon's frames
//! (paints, and hands replies back), one waits for SIGWINCH. Terminal modes
//! go through crossterm; the bytes painted go through `cli::output::raw`.

use std::io::{self, BufRead, BufReader, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use super::client::Client;
use super::output;
use shoal_proto::kernel::{
    AttachParams, KernelRequest, PtyIdParams, PtyRef, PtyRequest, PtyResizeParams, PtySendParams,
};

/// The detach key: Ctrl-] (as telnet and `docker attach` use it).
pub const DETACH: u8 = 0x1d;
/// How long a detach waits for the daemon to confirm the release.
const RELEASE_WAIT: Duration = Duration::from_secs(3);
/// `-32024`: another human holds the PTY.
const TAKEN_OVER: i64 = -32024;

/// Requests written without waiting; their replies come back through the
/// frame reader.
struct Conn {
    sock: Mutex<UnixStream>,
    next: AtomicU64,
}

impl Conn {
    fn send(&self, req: &KernelRequest) -> io::Result<u64> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let frame = shoal_proto::rpc::request_frame(id, req.method(), req.params())?;
        let mut s = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        s.write_all(&frame)?;
        Ok(id)
    }
}

/// `{pty_id}` of the PTY named `pty_id`.
fn id_of(pty_id: &str) -> PtyIdParams {
    PtyIdParams {
        pty_id: PtyRef::Name(pty_id.into()),
    }
}

/// A `pty.resize` of `pty_id` to the human's terminal size.
fn resize(pty_id: &str, cols: impl Into<u64>, rows: impl Into<u64>) -> KernelRequest {
    KernelRequest::Pty(PtyRequest::Resize(PtyResizeParams {
        pty_id: PtyRef::Name(pty_id.into()),
        cols: cols.into(),
        rows: rows.into(),
    }))
}

/// What the frame reader tells the keyboard loop.
#[derive(Default)]
struct Seen {
    /// The program's terminal is gone (`ended`), with its exit.
    ended: Mutex<Option<String>>,
    /// The daemon closed the connection.
    gone: AtomicBool,
    /// Set (under its lock) once the keyboard loop ended: the screen is no
    /// longer drawn, so a frame that arrives while detaching (the redraw
    /// the agent's size brings back) never lands on the human's own screen.
    detached: Mutex<bool>,
}

/// The terminal in raw mode on its alternate screen until dropped.
struct RawTerminal;

impl RawTerminal {
    fn enter() -> io::Result<RawTerminal> {
        crossterm::terminal::enable_raw_mode()?;
        let mut b = Vec::new();
        crossterm::queue!(b, crossterm::terminal::EnterAlternateScreen)?;
        output::raw(&b)?;
        Ok(RawTerminal)
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        // Modes the program may have set on the human's terminal: attributes,
        // cursor shown, no bracketed paste, no mouse reports, normal keypad.
        let mut b =
            b"\x1b[m\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1l\x1b>"
                .to_vec();
        let _ = crossterm::queue!(b, crossterm::terminal::LeaveAlternateScreen);
        let _ = output::raw(&b);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

fn fail(e: impl std::fmt::Display) -> i32 {
    eprintln!("shoal attach: {e}");
    1
}

fn remote(e: &Value) -> String {
    e.get("message")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_string()
}

/// Take over `pty` of `session`; the exit code.
pub fn run(socket: Option<PathBuf>, session: &str, pty: &str) -> i32 {
    let Some(n) = shoal_pty::parse_id(pty) else {
        return fail(format!("{pty:?} is not a PTY id (pty:N)"));
    };
    let pty_id = shoal_pty::id_name(n);
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        return fail("--pty needs a terminal on stdin and stdout");
    }
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let stream = match super::client::connect(&path) {
        Ok(s) => s,
        Err(e) => return fail(format!("no daemon answers at {}: {e}", path.display())),
    };
    let setup = (|| -> io::Result<Result<(Value, bool), String>> {
        let mut c = Client::new(stream.try_clone()?)?;
        let mut attach = AttachParams::client(Some(session), "attach", true);
        attach.create = Some(false);
        if let Some(c) = &mut attach.client {
            c.human = Some(true);
        }
        if let Err(e) = c.call(&KernelRequest::Attach(attach))? {
            return Ok(Err(remote(&e.0)));
        }
        match c.call(&KernelRequest::PtyClaim(id_of(&pty_id)))? {
            Ok(v) => Ok(Ok((v, true))),
            Err(e) if e.0.get("code").and_then(Value::as_i64) == Some(TAKEN_OVER) => {
                // Another human types: watch only.
                match c.call(&KernelRequest::Pty(PtyRequest::List))? {
                    Ok(l) => {
                        let entry = l["ptys"]
                            .as_array()
                            .and_then(|a| {
                                a.iter()
                                    .find(|p| p["pty_id"].as_str() == Some(pty_id.as_str()))
                            })
                            .cloned()
                            .unwrap_or_default();
                        Ok(Ok((entry, false)))
                    }
                    Err(e) => Ok(Err(remote(&e.0))),
                }
            }
            Err(e) => Ok(Err(remote(&e.0))),
        }
    })();
    let (claimed, typing) = match setup {
        Ok(Ok(v)) => v,
        Ok(Err(m)) => return fail(m),
        Err(e) => return fail(e),
    };
    let before = (
        claimed["cols"].as_u64().unwrap_or(80),
        claimed["rows"].as_u64().unwrap_or(24),
    );
    match attached(stream, &pty_id, typing, before) {
        Ok(Some(exit)) => {
            eprintln!("shoal attach: {pty_id} ended (exit {exit})");
            0
        }
        Ok(None) => {
            eprintln!("shoal attach: detached from {pty_id}; it runs on");
            0
        }
        Err(e) => fail(e),
    }
}

/// The attached loop; `Some(exit)` when the program ended, `None` on detach.
fn attached(
    stream: UnixStream,
    pty_id: &str,
    typing: bool,
    before: (u64, u64),
) -> io::Result<Option<String>> {
    let conn = Arc::new(Conn {
        sock: Mutex::new(stream.try_clone()?),
        next: AtomicU64::new(1_000),
    });
    let seen = Arc::new(Seen::default());
    let (wake_r, wake_w) = UnixStream::pair()?;
    let (replies_tx, replies) = mpsc::channel::<(u64, Value)>();
    let _term = RawTerminal::enter()?;
    if typing {
        if let Ok((cols, rows)) = crossterm::terminal::size() {
            conn.send(&resize(pty_id, cols, rows))?;
        }
    }
    conn.send(&KernelRequest::PtyWatch(id_of(pty_id)))?;
    {
        let seen = seen.clone();
        let mut wake = wake_w.try_clone()?;
        let reader = BufReader::new(stream);
        std::thread::Builder::new()
            .name("attach-frames".into())
            .spawn(move || {
                read_frames(reader, &seen, &replies_tx, &mut wake);
                seen.gone.store(true, Ordering::Relaxed);
                let _ = wake.write_all(b"x");
            })?;
    }
    let signals = if typing {
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH])?;
        let handle = signals.handle();
        let (conn, id) = (conn.clone(), pty_id.to_string());
        std::thread::Builder::new()
            .name("attach-winch".into())
            .spawn(move || {
                for _ in signals.forever() {
                    if let Ok((cols, rows)) = crossterm::terminal::size() {
                        let _ = conn.send(&resize(&id, cols, rows));
                    }
                }
            })?;
        Some(handle)
    } else {
        None
    };
    let keys = keyboard(&conn, pty_id, typing, &wake_r);
    *seen.detached.lock().unwrap_or_else(|p| p.into_inner()) = true;
    keys?;
    if let Some(h) = signals {
        h.close();
    }
    let ended = seen.ended.lock().unwrap_or_else(|p| p.into_inner()).take();
    if typing && !seen.gone.load(Ordering::Relaxed) {
        // The agent gets back the screen size it chose, then the PTY.
        if ended.is_none() {
            let (cols, rows) = before;
            conn.send(&resize(pty_id, cols, rows))?;
        }
        let release = conn.send(&KernelRequest::PtyRelease(id_of(pty_id)))?;
        let deadline = std::time::Instant::now() + RELEASE_WAIT;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match replies.recv_timeout(left) {
                Ok((id, _)) if id == release => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    Ok(ended)
}

/// Forward the keyboard until Ctrl-] or a wake from the frame reader.
fn keyboard(conn: &Conn, pty_id: &str, typing: bool, wake: &UnixStream) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    let stdin = io::stdin();
    let mut buf = vec![0u8; 64 * 1024];
    let b64 = base64::engine::general_purpose::STANDARD;
    loop {
        let (key_ready, woken) = {
            let fd = stdin.as_fd();
            let mut fds = [
                PollFd::new(&fd, PollFlags::IN),
                PollFd::new(wake, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        if woken {
            return Ok(());
        }
        if !key_ready {
            continue;
        }
        // Straight from the descriptor: bytes left in std's buffer would
        // wait for the next key (poll sees only the descriptor).
        let n = match rustix::io::read(stdin.as_fd(), &mut buf) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(());
        }
        let keys = &buf[..n];
        let (send, detach) = match keys.iter().position(|&b| b == DETACH) {
            Some(i) => (&keys[..i], true),
            None => (keys, false),
        };
        if typing && !send.is_empty() {
            conn.send(&KernelRequest::Pty(PtyRequest::Send(PtySendParams {
                pty_id: PtyRef::Name(pty_id.into()),
                input: json!({"bytes": b64.encode(send)}),
            })))?;
        }
        if detach {
            return Ok(());
        }
    }
}

/// Paint `pty.screen` notifications, pass replies on; wake the keyboard
/// loop when the program ended.
fn read_frames(
    mut reader: BufReader<UnixStream>,
    seen: &Seen,
    replies: &mpsc::Sender<(u64, Value)>,
    wake: &mut UnixStream,
) {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["method"] == "pty.screen" {
            let p = &v["params"];
            if p["ended"] == json!(true) {
                *seen.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(exit_text(&p["exit"]));
                let _ = wake.write_all(b"x");
            } else if let Some(ansi) = p["ansi"].as_str() {
                // Drawn under the lock the detach takes: never after it.
                let detached = seen.detached.lock().unwrap_or_else(|p| p.into_inner());
                if !*detached && output::raw(ansi.as_bytes()).is_err() {
                    return;
                }
            }
            continue;
        }
        if let Some(id) = v["id"].as_u64() {
            let _ = replies.send((id, v));
        }
    }
}

fn exit_text(e: &Value) -> String {
    match (e["status"].as_i64(), e["signal"].as_str()) {
        (Some(s), _) => format!("status {s}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown".into(),
    }
}
