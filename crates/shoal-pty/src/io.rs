//! The I/O thread of one PTY: it alone reads and writes the master and
//! feeds the emulator. One `poll` waits on the master (output; input when
//! writes are pending), a wake eventfd (commands) and the child's pidfd.
//!
//! Backpressure is structural: a chunk read is fed to the emulator before the
//! next read, so while the emulator is behind nothing is read, the kernel's
//! PTY buffer fills and the child blocks in `write`. The emulator belongs to
//! this thread alone: it publishes the rendered screen (an `Arc` swapped
//! under a lock held for a pointer copy) as soon as the master has nothing
//! more to read, and at most every [`PUBLISH_EVERY`] while a flood lasts, so
//! a flood costs one rendering per 2 ms, not one per chunk; readers on the
//! arbiter never wait for emulation; scrollback and resizes are commands.
//! No other thread ever waits on the child.

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use tokio::sync::{oneshot, watch};

use super::spawn::{self, Exit};
use super::stream::Stream;
use super::term::{Rendered, Term};
use shoal_base::sync::Locked;

/// Bytes read from the master per poll round.
pub const READ_CHUNK: usize = 64 * 1024;
/// While output keeps arriving the screen is published at most this often;
/// it is published at once whenever the master has nothing more to read
/// (an echo is visible without waiting for this).
pub const PUBLISH_EVERY: Duration = Duration::from_millis(2);
/// Input bytes queued for the child at most.
pub const MAX_PENDING_INPUT: usize = 1 << 20;

/// Whether the child runs and how it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Life {
    pub alive: bool,
    pub exit: Option<Exit>,
    /// The master saw EOF (no slave open any more).
    pub eof: bool,
}

/// What the I/O thread shares with readers.
pub struct Shared {
    /// The screen as last published by the I/O thread.
    screen: Mutex<Arc<Rendered>>,
    /// The emulator once the I/O thread has ended (for scrollback reads).
    retired: Mutex<Option<Term>>,
    /// The hash of the screen the previous read returned (`changed`).
    last_read: Mutex<Option<u64>>,
    life: Mutex<Life>,
    /// When output last arrived (or the size changed).
    last_output: Mutex<Instant>,
    /// Bumped on every change of the screen or of `life`.
    changes: watch::Sender<u64>,
}

impl Shared {
    pub fn new(term: &mut Term) -> Shared {
        Shared {
            screen: Mutex::new(term.render_shared()),
            last_read: Mutex::new(None),
            retired: Mutex::new(None),
            life: Mutex::new(Life {
                alive: true,
                ..Life::default()
            }),
            last_output: Mutex::new(Instant::now()),
            changes: watch::Sender::new(0),
        }
    }

    /// The screen now.
    pub fn screen(&self) -> Arc<Rendered> {
        self.screen.locked().clone()
    }

    /// The screen, consuming the `changed` bit.
    pub fn read_screen(&self) -> (Arc<Rendered>, bool) {
        let s = self.screen();
        let mut last = self.last_read.locked();
        let changed = *last != Some(s.hash);
        *last = Some(s.hash);
        (s, changed)
    }

    /// Drop the emulator of an ended I/O thread (the PTY is closed) and
    /// give its memory back to the OS, off the caller's thread.
    pub fn drop_retired(&self) {
        if let Some(term) = self.take_retired() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn_blocking(move || free_term(term))),
                Err(_) => free_term(term),
            }
        }
    }

    /// The emulator of an ended I/O thread, taken (for [`free_term`]).
    pub fn take_retired(&self) -> Option<Term> {
        self.retired.locked().take()
    }

    /// Scrollback from the emulator of an ended I/O thread.
    pub fn retired_scrollback(&self, n: usize) -> Vec<String> {
        self.retired
            .locked()
            .as_ref()
            .map(|t| t.scrollback(n))
            .unwrap_or_default()
    }

    fn publish(&self, term: &mut Term) {
        let r = term.render_shared();
        let old = std::mem::replace(&mut *self.screen.locked(), r);
        // The previous screen is freed after the lock is released.
        drop(old);
    }

    pub fn life(&self) -> Life {
        *self.life.locked()
    }

    pub fn last_output(&self) -> Instant {
        *self.last_output.locked()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn touch(&self) {
        *self.last_output.locked() = Instant::now();
        self.changes.send_modify(|g| *g += 1);
    }

    fn set_life(&self, f: impl FnOnce(&mut Life)) {
        f(&mut self.life.locked());
        self.changes.send_modify(|g| *g += 1);
    }
}

/// Drop an emulator and give its memory back to the OS (a walk of the
/// allocator's arenas: call it off the arbiter).
pub fn free_term(term: Term) {
    drop(term);
    shoal_base::procmem::give_back_free_memory();
}

/// A request to the I/O thread.
pub enum Cmd {
    /// Write these bytes; answered once all are written.
    Write {
        bytes: Vec<u8>,
        reply: oneshot::Sender<io::Result<usize>>,
    },
    /// Kill the process group and answer with the exit once reaped.
    Close {
        reply: oneshot::Sender<Option<Exit>>,
    },
    /// Resize the emulator (the PTY itself was resized by the caller).
    Resize {
        rows: u16,
        cols: u16,
        reply: oneshot::Sender<()>,
    },
    /// The newest `n` scrolled-off lines.
    Scrollback {
        n: usize,
        reply: oneshot::Sender<Vec<String>>,
    },
    /// Watch the live screen (`pty.watch`): the whole screen now and the
    /// updates after it.
    Watch {
        reply: oneshot::Sender<super::stream::Watching>,
    },
}

struct Pending {
    bytes: Vec<u8>,
    done: usize,
    reply: oneshot::Sender<io::Result<usize>>,
}

pub struct IoThread {
    pub master: Arc<OwnedFd>,
    pub pidfd: OwnedFd,
    pub wake: Arc<OwnedFd>,
    pub cmds: Receiver<Cmd>,
    pub shared: Arc<Shared>,
    pub pid: i32,
    pub term: Term,
    /// The live screen while somebody watches it.
    pub stream: Option<Stream>,
}

/// A fresh eventfd for waking the I/O thread.
pub fn eventfd() -> io::Result<OwnedFd> {
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
    )?)
}

/// Wake the I/O thread (after queueing a command).
pub fn wake(fd: &OwnedFd) {
    // A full counter is harmless: the thread is woken anyway.
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::read(fd, buf)?)
}

fn write_fd(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::io::write(fd, buf)?)
}

enum Read {
    Data,
    Empty,
    Eof,
}

impl IoThread {
    /// Run until the child is reaped and either the master is at EOF or a
    /// close was asked (or every handle is gone).
    pub fn run(mut self) {
        // Emulation is background work (a flood keeps moving on a loaded
        // machine, and never delays a request).
        shoal_base::procmem::background_thread();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut pending: VecDeque<Pending> = VecDeque::new();
        let mut pending_bytes = 0usize;
        let mut closers: Vec<oneshot::Sender<Option<Exit>>> = Vec::new();
        let mut closing = false;
        let mut exit: Option<Exit> = None;
        let mut reaped = false;
        let mut eof = false;
        // Output fed to the emulator but not yet published.
        let mut dirty = false;
        let mut published = Instant::now();
        loop {
            if reaped && (eof || closing) {
                break;
            }
            pending.retain(|p| !p.reply.is_closed());
            let mut master_events = PollFlags::empty();
            if !eof {
                master_events |= PollFlags::IN;
                if !pending.is_empty() {
                    master_events |= PollFlags::OUT;
                }
            }
            // With output unpublished, only look: nothing ready means that
            // output is all there is for now, so it is published.
            let timeout = dirty.then_some(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            // The wake eventfd always; the master while it is read or
            // written; the pidfd until the child is reaped.
            let (r, woken, rev, exited) = {
                let mut fds = [
                    PollFd::new(&*self.wake, PollFlags::IN),
                    PollFd::new(&*self.wake, PollFlags::IN),
                    PollFd::new(&*self.wake, PollFlags::IN),
                ];
                let mut n = 1;
                let mut at_master = None;
                let mut at_pidfd = None;
                if !master_events.is_empty() {
                    fds[n] = PollFd::new(&*self.master, master_events);
                    at_master = Some(n);
                    n += 1;
                }
                if !reaped {
                    fds[n] = PollFd::new(&self.pidfd, PollFlags::IN);
                    at_pidfd = Some(n);
                    n += 1;
                }
                let r = rustix::event::poll(&mut fds[..n], timeout.as_ref());
                let rev = |at: Option<usize>| at.map_or(PollFlags::empty(), |i| fds[i].revents());
                (
                    r,
                    !fds[0].revents().is_empty(),
                    rev(at_master),
                    !rev(at_pidfd).is_empty(),
                )
            };
            match r {
                Ok(0) => {
                    self.flush(&mut dirty, &mut published);
                    continue;
                }
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::error!(pid = self.pid, "pty poll failed: {e}");
                    spawn::kill_group(self.pid);
                    closing = true;
                }
            }
            if woken {
                let mut counter = [0u8; 8];
                let _ = read_fd(&self.wake, &mut counter);
                loop {
                    match self.cmds.try_recv() {
                        Ok(Cmd::Write { bytes, reply }) => {
                            if eof || reaped {
                                let _ = reply.send(Err(io::Error::other(
                                    "the program's terminal is closed",
                                )));
                            } else if pending_bytes + bytes.len() > MAX_PENDING_INPUT {
                                let _ = reply.send(Err(io::Error::other(
                                    "the program is not reading its input (queue full)",
                                )));
                            } else {
                                pending_bytes += bytes.len();
                                pending.push_back(Pending {
                                    bytes,
                                    done: 0,
                                    reply,
                                });
                            }
                        }
                        Ok(Cmd::Close { reply }) => {
                            closers.push(reply);
                            if !closing && !reaped {
                                spawn::kill_group(self.pid);
                            }
                            closing = true;
                        }
                        Ok(Cmd::Resize { rows, cols, reply }) => {
                            self.term.set_size(rows, cols);
                            self.shared.publish(&mut self.term);
                            self.stream_publish();
                            self.shared.touch();
                            let _ = reply.send(());
                        }
                        Ok(Cmd::Watch { reply }) => {
                            // The whole screen a watcher starts from is as new.
                            self.flush(&mut dirty, &mut published);
                            let screen = self.term.vt_screen();
                            let s = self.stream.get_or_insert_with(|| Stream::new(screen));
                            let _ = reply.send(s.watch(screen));
                        }
                        Ok(Cmd::Scrollback { n, reply }) => {
                            // The screen a read returns beside it is as new.
                            self.flush(&mut dirty, &mut published);
                            let _ = reply.send(self.term.scrollback(n));
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            // Every handle is gone: the same hard kill as close.
                            if !closing && !reaped {
                                spawn::kill_group(self.pid);
                            }
                            closing = true;
                            break;
                        }
                    }
                }
            }
            if rev.contains(PollFlags::OUT) {
                while let Some(p) = pending.front_mut() {
                    match write_fd(&self.master, &p.bytes[p.done..]) {
                        Ok(n) => {
                            p.done += n;
                            pending_bytes -= n;
                            if p.done == p.bytes.len() {
                                let p = pending.pop_front().expect("front exists");
                                let _ = p.reply.send(Ok(p.bytes.len()));
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            for p in pending.drain(..) {
                                let _ = p.reply.send(Err(io::Error::new(e.kind(), e.to_string())));
                            }
                            pending_bytes = 0;
                            break;
                        }
                    }
                }
            }
            if rev.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                match self.read_once(&mut buf) {
                    Read::Eof => eof = true,
                    Read::Data => {
                        dirty = true;
                        if published.elapsed() >= PUBLISH_EVERY {
                            self.flush(&mut dirty, &mut published);
                        }
                    }
                    Read::Empty => {}
                }
            }
            if exited {
                // The child exited: what it wrote last is still in the PTY buffer.
                while !eof {
                    match self.read_once(&mut buf) {
                        Read::Data => dirty = true,
                        Read::Empty => break,
                        Read::Eof => eof = true,
                    }
                }
                // The last screen is out before the exit is.
                self.flush(&mut dirty, &mut published);
                if let Some(e) = spawn::reap(self.pid) {
                    exit = Some(e);
                    reaped = true;
                    self.shared.set_life(|l| {
                        l.alive = false;
                        l.exit = Some(e);
                    });
                } else if !spawn::live_pids().contains(&self.pid) {
                    // Reaped elsewhere (daemon exit): nothing left to wait for.
                    reaped = true;
                    self.shared.set_life(|l| l.alive = false);
                }
            }
            if eof && !self.shared.life().eof {
                self.flush(&mut dirty, &mut published);
                self.shared.set_life(|l| l.eof = true);
                for p in pending.drain(..) {
                    let _ = p
                        .reply
                        .send(Err(io::Error::other("the program's terminal is closed")));
                }
                pending_bytes = 0;
            }
        }
        self.flush(&mut dirty, &mut published);
        for p in pending.drain(..) {
            let _ = p
                .reply
                .send(Err(io::Error::other("the program's terminal is closed")));
        }
        drop((pending, buf));
        let IoThread {
            shared, term, cmds, ..
        } = self;
        if closing {
            // Closed, or every handle is gone: nobody reads this emulator
            // again, so its memory goes back to the OS now.
            free_term(term);
        } else {
            *shared.retired.locked() = Some(term);
        }
        // Commands queued meanwhile are answered from the retired emulator.
        while let Ok(c) = cmds.try_recv() {
            match c {
                Cmd::Scrollback { n, reply } => {
                    let _ = reply.send(shared.retired_scrollback(n));
                }
                Cmd::Close { reply } => {
                    let _ = reply.send(exit);
                }
                Cmd::Write { reply, .. } => {
                    let _ = reply.send(Err(io::Error::other("the program's terminal is closed")));
                }
                Cmd::Resize { reply, .. } => {
                    let _ = reply.send(());
                }
                // Nothing more will change: the watcher sees the end.
                Cmd::Watch { reply } => drop(reply),
            }
        }
        for c in closers {
            let _ = c.send(exit);
        }
    }

    /// Publish the screen if output arrived since the last time.
    fn flush(&mut self, dirty: &mut bool, at: &mut Instant) {
        if *dirty {
            self.shared.publish(&mut self.term);
            self.stream_publish();
            self.shared.touch();
            *dirty = false;
            *at = Instant::now();
        }
    }

    /// Send the live screen's update to its watchers; the stream goes with
    /// the last of them.
    fn stream_publish(&mut self) {
        if let Some(s) = &mut self.stream {
            if !s.publish(self.term.vt_screen()) {
                self.stream = None;
            }
        }
    }

    /// Read one chunk and feed it to the emulator (not yet published).
    fn read_once(&mut self, buf: &mut [u8]) -> Read {
        match read_fd(&self.master, buf) {
            Ok(0) => Read::Eof,
            Ok(n) => {
                self.term.process(&buf[..n]);
                Read::Data
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Read::Empty,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Read::Empty,
            // EIO: the last slave fd closed.
            Err(_) => Read::Eof,
        }
    }
}
