//! PTYs (docs/protocol.md §8, docs/rules.md §22): real terminals for
//! interactive programs, read as screens without polling.
//!
//! - `keys.rs`: the named-key table and `pty.send` input encoding.
//! - `term.rs`: the vt100 emulator with a bounded plain-text scrollback
//!   (screens of at most `MAX_CELLS` cells; [`charge`] is what one PTY may
//!   hold, charged to its session's memory budget by `actors/pty.rs`).
//! - `spawn.rs`: openpty, the child as session leader with a controlling
//!   terminal, `TIOCSWINSZ`, and the process-wide table of unreaped children.
//! - `io.rs`: the per-PTY I/O thread (reads feed the emulator, writes, exit).
//! - `api.rs`: request parameters and result shapes.
//! - `claim.rs`: a human's takeover (one typist, any number of watchers);
//!   `stream.rs`: the live screen watchers get (`pty.watch`).
//!
//! [`PtyHandle`] ties one PTY together; the actor shell holds one per PTY.
//! Dropping the last handle is a hard kill of the process group.

pub mod api;
pub mod claim;
pub mod io;
pub mod keys;
#[cfg(test)]
mod mcp_schema_tests;
pub mod spawn;
pub mod stream;
pub mod term;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use shoal_base::sync::Locked;
use tokio::sync::oneshot;

pub use spawn::{Exit, SpawnSpec};
pub use term::{Rendered, Snapshot};

use io::{Cmd, IoThread, Shared};

/// `TERM` given to children whose environment has none.
pub const DEFAULT_TERM: &str = "xterm-256color";
/// `wait_for`/`stable_ms` without `timeout_ms` wait this long at most.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// The longest `timeout_ms` honoured.
pub const MAX_WAIT: Duration = Duration::from_secs(300);
/// A `pty.send` that the program does not consume within this fails.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// The stack of a PTY's I/O thread.
const IO_STACK: usize = 256 * 1024;
/// Bytes a PTY holds besides its emulator, at most: the read buffer, the
/// I/O thread's stack, the fast path's line records and carried input, and
/// the queue of input the program has not read yet.
pub const BUFFER_BYTES: u64 =
    (io::READ_CHUNK + IO_STACK + (256 << 10) + io::MAX_PENDING_INPUT) as u64;

/// What a PTY of `rows` whose rows may be `row_cap` cells wide holds at
/// most: charged to its session's `[limits] session_memory` while it is
/// open (docs/protocol.md §8).
pub fn charge(rows: u16, row_cap: u16) -> u64 {
    term::bound(rows, row_cap) + BUFFER_BYTES
}

/// Environment variables never passed to a PTY child (they describe the
/// daemon's own service manager).
const SCRUBBED_ENV: [&str; 3] = ["LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET"];

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The open PTYs of one owner (the daemon keeps one per session), by id:
/// what `shoal status` lists without asking the actor that holds the PTYs.
/// Each [`PtyHandle`] is entered by [`PtyHandle::open`] and leaves on drop.
/// Cheap to clone: the clones share one table. The lock stays because the
/// status reads it from any arbiter and a handle's drop runs on any thread.
#[derive(Clone, Default)]
pub struct OpenPtys(Arc<Mutex<BTreeMap<u64, Weak<PtyHandle>>>>);

impl std::fmt::Debug for OpenPtys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenPtys")
            .field("ids", &self.0.locked().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl OpenPtys {
    /// The PTYs open and not closing, ascending by id.
    pub fn list(&self) -> Vec<PtyInfo> {
        let open: Vec<Arc<PtyHandle>> = self
            .0
            .locked()
            .values()
            .filter_map(Weak::upgrade)
            .filter(|h| !h.closed.load(Ordering::Relaxed))
            .collect();
        open.iter().map(|h| h.info()).collect()
    }
}

/// `pty:N` → `N`.
pub fn parse_id(s: &str) -> Option<u64> {
    s.strip_prefix("pty:").unwrap_or(s).parse().ok()
}

pub fn id_name(id: u64) -> String {
    format!("pty:{id}")
}

/// The environment of a child: `base` with `overrides` replacing same-named
/// entries, `TERM` when absent, the service-manager variables removed.
pub fn child_env(
    base: Vec<(String, String)>,
    overrides: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = base.into_iter().collect();
    for (k, v) in overrides {
        env.insert(k.clone(), v.clone());
    }
    for k in SCRUBBED_ENV {
        env.remove(k);
    }
    env.entry("TERM".into())
        .or_insert_with(|| DEFAULT_TERM.into());
    env.into_iter().collect()
}

/// How `pty.read` waits before answering.
#[derive(Clone, Debug, Default)]
pub struct ReadOpts {
    pub wait_for: Option<Matcher>,
    pub stable: Option<Duration>,
    pub timeout: Option<Duration>,
    pub scrollback: Option<usize>,
}

impl ReadOpts {
    fn waits(&self) -> bool {
        self.wait_for.is_some() || self.stable.is_some()
    }
}

/// `wait_for`: plain text, or a regex after `re:`.
#[derive(Clone, Debug)]
pub enum Matcher {
    Text(String),
    Regex(regex::Regex),
}

impl Matcher {
    pub fn parse(s: &str) -> Result<Matcher, String> {
        match s.strip_prefix("re:") {
            Some(re) => regex::RegexBuilder::new(re)
                .size_limit(1 << 20)
                .build()
                .map(Matcher::Regex)
                .map_err(|e| format!("invalid wait_for regex: {e}")),
            None => Ok(Matcher::Text(s.to_string())),
        }
    }

    pub fn matches(&self, screen: &str) -> bool {
        match self {
            Matcher::Text(t) => screen.contains(t.as_str()),
            Matcher::Regex(r) => r.is_match(screen),
        }
    }
}

/// A `pty.read` answer.
#[derive(Clone, Debug)]
pub struct ReadResult {
    pub snapshot: Snapshot,
    pub alive: bool,
    pub exit: Option<Exit>,
    /// Set when the read waited: whether the condition held.
    pub matched: Option<bool>,
}

/// What `pty.list` and `shoal status` show of a PTY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtyInfo {
    pub id: u64,
    pub session: String,
    pub cmd: String,
    pub pid: i32,
    pub rows: u16,
    pub cols: u16,
    pub alive: bool,
    /// The human who has taken it over (`pty.claim`).
    pub claimed: Option<claim::Claim>,
    /// Clients watching its live screen (`pty.watch`).
    pub watchers: usize,
}

/// One PTY: the child, its I/O thread and its screen.
pub struct PtyHandle {
    pub id: u64,
    pub session: String,
    /// The command and its arguments joined by spaces.
    pub cmd: String,
    pub pid: i32,
    shared: Arc<Shared>,
    master: Arc<OwnedFd>,
    wake: Arc<OwnedFd>,
    cmds: Mutex<Option<Sender<Cmd>>>,
    closed: std::sync::atomic::AtomicBool,
    claims: Arc<claim::Claims>,
    /// The table this PTY is listed in until it drops.
    table: OpenPtys,
}

impl PtyHandle {
    /// Start `spec` on a new PTY of `session`, entered in `table` (blocking:
    /// fork and exec; call it off the arbiter). The id is fresh and
    /// process-wide.
    pub fn open(
        spec: &SpawnSpec,
        session: &str,
        table: &OpenPtys,
    ) -> std::io::Result<Arc<PtyHandle>> {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let home = shoal_base::procs::Home::new(session, shoal_base::procs::Owner::Pty(id));
        let s = spawn::spawn(spec, Some(home))?;
        let mut term = term::Term::new(spec.rows, spec.cols, term::SCROLLBACK_LINES);
        let shared = Arc::new(Shared::new(&mut term));
        let master = Arc::new(s.master);
        let wake = match io::eventfd() {
            Ok(w) => Arc::new(w),
            Err(e) => {
                spawn::kill_group(s.pid);
                return Err(e);
            }
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = IoThread {
            master: master.clone(),
            pidfd: s.pidfd,
            wake: wake.clone(),
            cmds: rx,
            shared: shared.clone(),
            pid: s.pid,
            term,
            stream: None,
        };
        if let Err(e) = std::thread::Builder::new()
            .name(format!("pty:{id}"))
            .stack_size(IO_STACK)
            .spawn(move || thread.run())
        {
            spawn::kill_group(s.pid);
            return Err(e);
        }
        let mut cmd = spec.cmd.clone();
        for a in &spec.args {
            cmd.push(' ');
            cmd.push_str(a);
        }
        let h = Arc::new(PtyHandle {
            id,
            session: session.to_string(),
            cmd,
            pid: s.pid,
            shared,
            master,
            wake,
            cmds: Mutex::new(Some(tx)),
            closed: std::sync::atomic::AtomicBool::new(false),
            claims: Arc::default(),
            table: table.clone(),
        });
        table.0.locked().insert(id, Arc::downgrade(&h));
        Ok(h)
    }

    fn command(&self, c: Cmd) -> bool {
        let sent = self
            .cmds
            .locked()
            .as_ref()
            .is_some_and(|tx| tx.send(c).is_ok());
        if sent {
            io::wake(&self.wake);
        }
        sent
    }

    pub fn info(&self) -> PtyInfo {
        let screen = self.shared.screen();
        let (rows, cols) = (screen.rows.len() as u16, screen.cols);
        PtyInfo {
            id: self.id,
            session: self.session.clone(),
            cmd: self.cmd.clone(),
            pid: self.pid,
            rows,
            cols,
            alive: self.shared.life().alive,
            claimed: self.claims.holder(),
            watchers: self.claims.watchers(),
        }
    }

    /// Who may type (docs/protocol.md §8, `pty.claim`).
    pub fn claims(&self) -> &Arc<claim::Claims> {
        &self.claims
    }

    /// Watch the live screen: the whole screen now, the updates after it
    /// (the receiver closes when the program's terminal is gone) and the
    /// guard that counts this watcher. `None`: the PTY has ended.
    pub fn watch(
        &self,
    ) -> impl std::future::Future<Output = Option<(stream::Watching, claim::WatchGuard)>> + 'static
    {
        let (reply, rx) = oneshot::channel();
        let sent = self.command(Cmd::Watch { reply });
        let guard = self.claims.watcher();
        async move {
            if !sent {
                return None;
            }
            rx.await.ok().map(|w| (w, guard))
        }
    }

    pub fn alive(&self) -> bool {
        self.shared.life().alive
    }

    /// How the program ended (None while it runs, or when unknown).
    pub fn exit(&self) -> Option<Exit> {
        self.shared.life().exit
    }

    /// A change counter that ticks on every screen or life change.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.subscribe()
    }

    /// Write input; answers the byte count once the program's terminal took
    /// it all.
    pub fn write(
        &self,
        bytes: Vec<u8>,
    ) -> impl std::future::Future<Output = std::io::Result<usize>> + 'static {
        let (reply, rx) = oneshot::channel();
        let n = bytes.len();
        let sent = n == 0 || self.command(Cmd::Write { bytes, reply });
        async move {
            if n == 0 {
                return Ok(0);
            }
            if !sent {
                return Err(std::io::Error::other("the pty is closed"));
            }
            match tokio::time::timeout(SEND_TIMEOUT, rx).await {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(std::io::Error::other("the pty is closed")),
                Err(_) => Err(std::io::Error::other(
                    "timed out: the program did not read its input",
                )),
            }
        }
    }

    /// `TIOCSWINSZ`, then the emulator; the size as clamped, once the
    /// emulator has it.
    pub fn resize(
        &self,
        rows: u16,
        cols: u16,
    ) -> impl std::future::Future<Output = std::io::Result<(u16, u16)>> + 'static {
        let (rows, cols) = (term::clamp_dim(rows as u64), term::clamp_dim(cols as u64));
        let done = spawn::resize(self.master.as_fd(), rows, cols).map(|()| {
            let (reply, rx) = oneshot::channel();
            self.command(Cmd::Resize { rows, cols, reply });
            rx
        });
        async move {
            // A PTY whose thread ended (program gone) resizes the tty only.
            let _ = done?.await;
            Ok((rows, cols))
        }
    }

    /// Consume the `changed` bit (as a read would).
    pub fn consume_changed(&self) {
        self.shared.read_screen();
    }

    /// Kill the process group and reap; the exit (None when it is unknown).
    pub fn close(&self) -> impl std::future::Future<Output = Option<Exit>> + 'static {
        self.closed.store(true, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let sent = self.command(Cmd::Close { reply });
        let shared = self.shared.clone();
        async move {
            let exit = match (sent, rx.await) {
                (true, Ok(e)) => e,
                _ => shared.life().exit,
            };
            // A program that ended before the close left its emulator for
            // scrollback reads; closed, nothing reads it. The close answers
            // once its memory is back with the OS.
            if let Some(term) = shared.take_retired() {
                let _ = tokio::task::spawn_blocking(move || io::free_term(term)).await;
            }
            exit
        }
    }

    /// Read the screen, first waiting for `wait_for` / `stable_ms` when
    /// asked (event driven: every change of the screen wakes the check).
    pub fn read(&self, opts: ReadOpts) -> impl std::future::Future<Output = ReadResult> + 'static {
        let shared = self.shared.clone();
        // Scrollback is asked of the I/O thread once the wait is over.
        let tx = self.cmds.locked().clone();
        let wake = self.wake.clone();
        let mut changes = shared.subscribe();
        async move {
            let matched = if opts.waits() {
                let timeout = opts.timeout.unwrap_or(DEFAULT_WAIT).min(MAX_WAIT);
                let deadline = tokio::time::Instant::now() + timeout;
                let mut open = true;
                loop {
                    changes.borrow_and_update();
                    // The end is read before the screen is checked: the I/O
                    // thread publishes the last screen before it marks the
                    // end, so a screen checked after an end is seen is final.
                    let life = shared.life();
                    let (ok, wake_at) = check(&shared, &opts);
                    if ok {
                        break true;
                    }
                    // Nothing more can arrive: a wait for text is over.
                    if (!open || (!life.alive && life.eof)) && opts.stable.is_none() {
                        break false;
                    }
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    let until = wake_at
                        .map(tokio::time::Instant::from_std)
                        .map_or(deadline, |w| w.min(deadline));
                    if open {
                        tokio::select! {
                            r = changes.changed() => open = r.is_ok(),
                            _ = tokio::time::sleep_until(until) => {}
                        }
                    } else {
                        tokio::time::sleep_until(until).await;
                    }
                }
            } else {
                false
            };
            let (screen, changed) = shared.read_screen();
            let scrollback = match opts.scrollback {
                Some(n) => {
                    let (reply, rx) = oneshot::channel();
                    let sent = tx
                        .as_ref()
                        .is_some_and(|tx| tx.send(Cmd::Scrollback { n, reply }).is_ok());
                    if sent {
                        io::wake(&wake);
                    }
                    Some(match (sent, rx.await) {
                        (true, Ok(lines)) => lines,
                        _ => shared.retired_scrollback(n),
                    })
                }
                None => None,
            };
            let snapshot = Snapshot {
                screen: (*screen).clone(),
                changed,
                scrollback,
            };
            let life = shared.life();
            ReadResult {
                snapshot,
                alive: life.alive,
                exit: life.exit,
                matched: opts.waits().then_some(matched),
            }
        }
    }
}

/// Whether the read condition holds now; else when a stability wait could
/// next hold (no change meanwhile).
fn check(shared: &Shared, opts: &ReadOpts) -> (bool, Option<Instant>) {
    let text_ok = match &opts.wait_for {
        None => true,
        Some(m) => m.matches(&shared.screen().text()),
    };
    let Some(stable) = opts.stable else {
        return (text_ok, None);
    };
    let due = shared.last_output() + stable;
    let now = Instant::now();
    (text_ok && now >= due, (now < due).then_some(due))
}

impl Drop for PtyHandle {
    fn drop(&mut self) {
        self.table.0.locked().remove(&self.id);
        // An ended program's emulator (kept for scrollback reads) goes now.
        self.shared.drop_retired();
        // The I/O thread sees the channel disconnect and kills the group.
        drop(self.cmds.locked().take());
        io::wake(&self.wake);
    }
}

/// End every PTY's process group and reap the children (daemon exit).
pub fn kill_all() {
    spawn::kill_all();
}
