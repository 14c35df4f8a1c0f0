//! Starting a wrapped program through the broker, and the handle of one
//! it started ([`Brokered`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;

use shoal_base::sync::Locked;

use super::broker::{Reply, Request, SpawnReq, B};
use super::{available, call, live_keys, pipe, Wrapped};

/// One of a wrapped program's standard streams.
#[derive(Debug)]
pub enum Stdio {
    /// `/dev/null`.
    Null,
    /// A pipe whose other end [`Launched`] holds.
    Piped,
    /// This descriptor.
    Fd(OwnedFd),
}

/// How to start a wrapped program.
#[derive(Debug)]
pub struct Launch<'a> {
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: &'a Path,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
    /// A PTY's program: a session leader with stdin as its controlling
    /// terminal (else the leader of a process group of its own).
    pub pty: bool,
    /// The `cgroup.procs` it joins first.
    pub procs: Option<BorrowedFd<'a>>,
}

/// A started wrapped program and our ends of its pipes.
#[derive(Debug)]
pub struct Launched {
    pub child: Brokered,
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

/// Start `w` through the broker.
pub fn launch(w: Wrapped, l: Launch<'_>) -> io::Result<Launched> {
    let mut give: Vec<OwnedFd> = Vec::with_capacity(5);
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    let mut given = [false; 3];
    for (i, s) in [l.stdin, l.stdout, l.stderr].into_iter().enumerate() {
        match s {
            Stdio::Null => {}
            Stdio::Fd(fd) => {
                give.push(fd);
                given[i] = true;
            }
            Stdio::Piped => {
                let (r, wr) = pipe()?;
                let (mine, theirs) = if i == 0 { (wr, r) } else { (r, wr) };
                ours[i] = Some(mine);
                give.push(theirs);
                given[i] = true;
            }
        }
    }
    let (status_rx, status_tx) = pipe()?;
    give.push(status_tx);
    let b = |p: &Path| B::from(p);
    let (holder, fresh) = w.join.holder();
    let req = SpawnReq {
        args: w.args.iter().map(|a| B::from(a.as_os_str())).collect(),
        env: l
            .env
            .iter()
            .map(|(k, v)| (B::from(k.as_os_str()), B::from(v.as_os_str())))
            .collect(),
        cwd: b(l.cwd),
        holder,
        fresh,
        inner_cwd: b(&w.join.cwd),
        noexec: w.join.noexec.iter().map(|p| b(p)).collect(),
        stdio: given,
        procs: l.procs.is_some(),
        pty: l.pty,
        live: live_keys(None),
    };
    let mut fds: Vec<BorrowedFd<'_>> = give.iter().map(|f| f.as_fd()).collect();
    fds.extend(l.procs);
    let mut req = Request::Spawn(Box::new(req));
    let mut answer = call(&req, &fds);
    if let (false, Err(e), Request::Spawn(r)) = (fresh, &answer, &mut req) {
        if e.raw_os_error() == Some(super::broker::STALE) {
            // No holder runs for the remembered spec: one starts from a
            // spec made (and checked) now.
            r.holder = w.join.fresh_holder();
            r.fresh = true;
            answer = call(&req, &fds);
        }
    }
    let (reply, mut back) = answer.map_err(explained)?;
    drop(fds);
    // The child holds its ends now; ours close here.
    drop(give);
    let (Reply::Spawned { pid }, Some(pidfd)) = (reply, back.pop()) else {
        return Err(io::Error::other(
            "the namespace broker answered out of turn",
        ));
    };
    let [stdin, stdout, stderr] = ours;
    Ok(Launched {
        child: Brokered {
            pid,
            pidfd,
            status: status_rx,
            done: None,
        },
        stdin,
        stdout,
        stderr,
    })
}

/// A program the broker started (its child, not ours): waited for through
/// its pidfd, signalled and reaped by the broker. Dropped unreaped, its
/// group is killed and it is reaped.
#[derive(Debug)]
pub struct Brokered {
    pid: i32,
    pidfd: OwnedFd,
    /// Where `shoal-confine run` writes the program's wait status.
    status: OwnedFd,
    /// Its raw wait status, once reaped.
    done: Option<i32>,
}

impl Brokered {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Readable once it has exited.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// Its raw wait status if it has exited (it is reaped then), `None`
    /// while it runs. The program's own status where it got that far (the
    /// chain reports a signal as 128+n).
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        if self.done.is_none() && !self.exited(Some(rustix::event::Timespec::default())) {
            return Ok(None);
        }
        self.reap().map(Some)
    }

    /// Wait until it has exited, then [`Brokered::try_wait`].
    pub fn wait(&mut self) -> io::Result<i32> {
        while self.done.is_none() && !self.exited(None) {}
        self.reap()
    }

    /// Signal its process group (not once it was reaped). Whether it was sent.
    pub fn signal_group(&self, sig: i32) -> bool {
        self.done.is_none() && signal_group(self.pid, sig)
    }

    fn exited(&self, timeout: Option<rustix::event::Timespec>) -> bool {
        let mut fds = [rustix::event::PollFd::new(
            &self.pidfd,
            rustix::event::PollFlags::IN,
        )];
        matches!(rustix::event::poll(&mut fds, timeout.as_ref()), Ok(n) if n > 0)
    }

    fn reap(&mut self) -> io::Result<i32> {
        if let Some(raw) = self.done {
            return Ok(raw);
        }
        let raw = match call(&Request::Reap { pid: self.pid }, &[])? {
            (Reply::Reaped { raw }, _) => raw,
            _ => {
                return Err(io::Error::other(
                    "the namespace broker answered out of turn",
                ))
            }
        };
        let raw = self.reported().unwrap_or(raw);
        self.done = Some(raw);
        Ok(raw)
    }

    /// What `shoal-confine run` reported (`None`: it never got that far).
    fn reported(&self) -> Option<i32> {
        let mut buf = [0u8; 4];
        // Non-blocking: every holder of the write end is gone once the
        // child is reaped, but a read must never hang the run.
        if let Ok(fl) = rustix::fs::fcntl_getfl(&self.status) {
            let _ = rustix::fs::fcntl_setfl(&self.status, fl | rustix::fs::OFlags::NONBLOCK);
        }
        let mut got = 0;
        while got < 4 {
            match rustix::io::read(&self.status, &mut buf[got..]) {
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        Some(i32::from_le_bytes(buf))
    }
}

impl Drop for Brokered {
    fn drop(&mut self) {
        if self.done.is_none() {
            signal_group(self.pid, libc::SIGKILL);
            let _ = self.wait();
        }
    }
}

/// Signal the process group of `pid`, a child the broker started and has
/// not reaped (a confined process's own signal is refused: Landlock scopes
/// its signals to its domain). Whether it was sent.
pub fn signal_group(pid: i32, sig: i32) -> bool {
    available()
        && matches!(
            call(&Request::Signal { pid, sig }, &[]),
            Ok((Reply::Signalled { sent: true }, _))
        )
}

/// PTY programs in namespaces, by pid, until reaped.
static PTY: Mutex<BTreeMap<i32, Brokered>> = Mutex::new(BTreeMap::new());

/// Keep `b`, a PTY's program, until [`try_reap`] reaps it.
pub fn remember(b: Brokered) {
    PTY.locked().insert(b.pid, b);
}

/// For a PTY's program started in namespaces (`None`: `pid` is not one):
/// its raw wait status once it exited (its group is killed first, while
/// the unreaped leader still pins its id), `Ok(None)` while it runs.
pub fn try_reap(pid: i32) -> Option<io::Result<Option<i32>>> {
    let mut table = PTY.locked();
    let b = table.get_mut(&pid)?;
    if b.done.is_none() && !b.exited(Some(rustix::event::Timespec::default())) {
        return Some(Ok(None));
    }
    b.signal_group(libc::SIGKILL);
    let r = b.try_wait();
    table.remove(&pid);
    Some(r)
}

/// A spawn's failure as the agent reads it. `ELOOP` here comes from the
/// child's start (`holder::own_proc`), which refuses a write grant, or a
/// directory a token may write in, that is a symbolic link by then.
fn explained(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::new(
            e.kind(),
            "a write grant, or a directory a token may write in, is a symbolic link now \
             (a token may have put it there): the program is not started",
        );
    }
    e
}
