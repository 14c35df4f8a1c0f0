//! The broker: a process of its own (`shoal-confine broker`) that starts a
//! token principal's children in its namespaces, for a process that may
//! not (a worker confines itself whole, and Landlock forbids mounting).
//!
//! It is started once, before the process that uses it confines anything,
//! with one end of a socketpair as its stdin. It takes one request at a
//! time, each a line of JSON with the descriptors it names:
//!
//! * `spawn`: start `shoal-confine run ..` in the holder of the given
//!   namespaces (starting the holder first where there is none) with the
//!   given stdio, status pipe and `cgroup.procs`; answer its pid and a
//!   pidfd. It runs nothing else: the program is always [`CONFINE_AT`].
//! * `signal`: signal the process group of a child it started and has not
//!   reaped.
//! * `reap`: reap such a child (asked once its pidfd says it exited).
//! * `keep`: end the holders of principals not named.
//!
//! It ends when the other end closes; its holders and children go with it
//! (`--die-with-parent`, and each child's parent-death signal).

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use shoal_base::fdlines::{self, Lines};
use shoal_base::sync::Locked;

use super::holder::{at_fd3, Holder};
use super::{CONFINE_AT, MAX_HOLDERS};

/// The subcommand of `shoal-confine` that runs the broker.
pub const BROKER_ARG: &str = "broker";

/// The longest request line (arguments and environment of one program).
const MAX_LINE: usize = 64 << 20;

/// Bytes (a path, an argument) as base64 in the JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct B(pub Vec<u8>);

impl Serialize for B {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for B {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<B, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map(B)
            .map_err(serde::de::Error::custom)
    }
}

impl From<&std::ffi::OsStr> for B {
    fn from(s: &std::ffi::OsStr) -> B {
        B(s.as_bytes().to_vec())
    }
}

impl From<&Path> for B {
    fn from(p: &Path) -> B {
        B::from(p.as_os_str())
    }
}

impl B {
    pub(super) fn os(&self) -> OsString {
        OsString::from_vec(self.0.clone())
    }

    fn c(&self) -> io::Result<CString> {
        CString::new(self.0.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    }
}

/// Which namespaces a child joins: a holder per principal (`key`) and
/// `bwrap` arguments.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) struct HolderSpec {
    pub key: u64,
    pub args: Vec<HolderArg>,
    pub sealed: bool,
}

/// One piece of a holder's `bwrap` command line.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub(super) enum HolderArg {
    /// An argument as it is.
    Word(B),
    /// A grant root, mounted at its own path (`rw`: writable). The broker
    /// opens it as the holder starts and mounts what it opened
    /// (`holder::bwrap_args`).
    Mount { path: B, rw: bool },
}

/// A spawn's answer when no holder runs for a remembered (not fresh)
/// [`HolderSpec`]: make it again and ask once more.
pub(super) const STALE: i32 = libc::ESTALE;

/// One child to start.
#[derive(Serialize, Deserialize, Debug)]
pub(super) struct SpawnReq {
    /// The arguments of [`CONFINE_AT`] (`run 3 RULES PROGRAM ARGV0 ..`).
    pub args: Vec<B>,
    pub env: Vec<(B, B)>,
    /// Where the child starts (before it enters the namespaces).
    pub cwd: B,
    pub holder: HolderSpec,
    /// `holder` was made for this spawn, its roots checked for links just
    /// now: a holder may start from it. One remembered from an earlier
    /// spawn only finds a running holder (else [`STALE`]): a holder's
    /// mounts are made once, so only a start needs the check.
    pub fresh: bool,
    /// Where it goes in its own mount namespace.
    pub inner_cwd: B,
    /// Paths mounted again without exec there.
    pub noexec: Vec<B>,
    /// Which of stdin, stdout, stderr come as descriptors (the others are
    /// `/dev/null`).
    pub stdio: [bool; 3],
    /// A `cgroup.procs` to join comes after the status pipe.
    pub procs: bool,
    /// A session leader with stdin as its controlling terminal (a PTY),
    /// not the leader of a process group of its own.
    pub pty: bool,
    /// The keys of the principals whose holders are still wanted.
    pub live: Vec<u64>,
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Request {
    Spawn(Box<SpawnReq>),
    Signal { pid: i32, sig: i32 },
    Reap { pid: i32 },
    Keep { live: Vec<u64> },
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "r", rename_all = "snake_case")]
pub(super) enum Reply {
    /// A pidfd comes with it.
    Spawned {
        pid: i32,
    },
    Signalled {
        sent: bool,
    },
    Reaped {
        raw: i32,
    },
    Kept,
    Failed {
        errno: Option<i32>,
        msg: String,
    },
}

/// A line: how many descriptors follow it, and what it says.
#[derive(Serialize, Deserialize)]
struct Line<T> {
    fds: usize,
    body: T,
}

fn failed(e: &io::Error) -> Reply {
    Reply::Failed {
        errno: e.raw_os_error(),
        msg: e.to_string(),
    }
}

fn write_line<T: Serialize>(s: &UnixStream, body: T, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut line = serde_json::to_vec(&Line {
        fds: fds.len(),
        body,
    })?;
    line.push(b'\n');
    fdlines::send(s, &line, fds)
}

/// A request too long for the broker: refused here, never sent (the
/// broker takes a longer line as the end of the protocol).
fn too_long(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("the program's arguments and environment take {len} bytes, over the {MAX_LINE} a namespaced spawn takes"),
    )
}

fn read_line<T: for<'de> Deserialize<'de>>(
    s: &UnixStream,
    lines: &mut Lines,
) -> io::Result<(T, Vec<OwnedFd>)> {
    let line = lines.next(s, MAX_LINE).map_err(|_| gone())?;
    let l: Line<T> = serde_json::from_slice(&line)?;
    let fds = lines.take_fds(l.fds);
    Ok((l.body, fds))
}

/// The spawning process's end: one request at a time.
pub(super) struct Client {
    io: Mutex<(UnixStream, Lines)>,
    /// The broker, reaped once it is gone.
    child: Mutex<Child>,
}

/// The error of every request once the broker is gone.
pub(super) fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the namespace broker is gone")
}

impl Client {
    /// Start `confine broker [BWRAP]` (its own process group, stdout
    /// `/dev/null`, our end of a new socketpair as its stdin).
    pub fn start(confine: &Path, bwrap: Option<&Path>) -> io::Result<Client> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut cmd = Command::new(confine);
        cmd.arg(BROKER_ARG);
        if let Some(b) = bwrap {
            cmd.arg(b);
        }
        cmd.stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .process_group(0);
        let child = cmd.spawn()?;
        Ok(Client {
            io: Mutex::new((ours, Lines::default())),
            child: Mutex::new(child),
        })
    }

    pub fn call(&self, req: &Request, fds: &[BorrowedFd<'_>]) -> io::Result<(Reply, Vec<OwnedFd>)> {
        let mut line = serde_json::to_vec(&Line {
            fds: fds.len(),
            body: req,
        })?;
        line.push(b'\n');
        if line.len() > MAX_LINE {
            return Err(too_long(line.len()));
        }
        let mut io = self.io.locked();
        let (s, lines) = &mut *io;
        fdlines::send(s, &line, fds).map_err(|_| gone())?;
        read_line(s, lines)
    }

    /// The broker is gone: end it (if it is not yet) and reap it.
    pub fn end(&self) {
        let mut c = self.child.locked();
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// `shoal-confine broker [BWRAP]`: serve the socket at stdin until it
/// closes.
pub fn broker_main(args: Vec<OsString>) -> i32 {
    let sock = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            eprintln!("shoal-confine broker: no socket on stdin: {e}");
            return 1;
        }
    };
    // Nothing it starts gets the socket (ours is close-on-exec).
    let null = std::fs::File::open("/dev/null")
        .and_then(|null| rustix::stdio::dup2_stdin(&null).map_err(io::Error::from));
    if let Err(e) = null {
        eprintln!("shoal-confine broker: cannot detach stdin from the socket: {e}");
        return 1;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("shoal-confine broker: {e}");
            return 1;
        }
    };
    let mut b = Broker {
        bwrap: args.into_iter().next().map(PathBuf::from),
        exe,
        me: rustix::process::getpid(),
        holders: Vec::new(),
        children: BTreeMap::new(),
    };
    let mut lines = Lines::default();
    loop {
        let (req, fds) = match read_line::<Request>(&sock, &mut lines) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return 0,
            Err(e) => {
                eprintln!("shoal-confine broker: a request that is not one: {e}");
                return 1;
            }
        };
        let (reply, out): (Reply, Option<OwnedFd>) = match req {
            Request::Spawn(s) => match b.spawn(*s, fds) {
                Ok((pid, pidfd)) => (Reply::Spawned { pid }, Some(pidfd)),
                Err(e) => (failed(&e), None),
            },
            Request::Signal { pid, sig } => (
                Reply::Signalled {
                    sent: b.signal(pid, sig),
                },
                None,
            ),
            Request::Reap { pid } => match b.children.remove(&pid) {
                Some(mut c) => match c.wait() {
                    Ok(st) => (Reply::Reaped { raw: st.into_raw() }, None),
                    Err(e) => (failed(&e), None),
                },
                None => (failed(&io::Error::from_raw_os_error(libc::ECHILD)), None),
            },
            Request::Keep { live } => {
                b.keep(&live);
                (Reply::Kept, None)
            }
        };
        let fds: Vec<BorrowedFd<'_>> = out.iter().map(|f| f.as_fd()).collect();
        if write_line(&sock, reply, &fds).is_err() {
            return 0;
        }
    }
}

struct Broker {
    bwrap: Option<PathBuf>,
    /// This binary, bound at [`CONFINE_AT`] in each holder.
    exe: PathBuf,
    me: rustix::process::Pid,
    holders: Vec<Holder>,
    /// The children started here and not yet reaped.
    children: BTreeMap<i32, Child>,
}

impl Broker {
    /// End the holders of principals not in `live` (and dead ones).
    fn keep(&mut self, live: &[u64]) {
        self.holders
            .retain_mut(|h| live.contains(&h.key) && matches!(h.bwrap.try_wait(), Ok(None)));
    }

    fn signal(&self, pid: i32, sig: i32) -> bool {
        self.children.contains_key(&pid)
            && rustix::process::Pid::from_raw(pid)
                .zip(rustix::process::Signal::from_named_raw(sig))
                .is_some_and(|(p, s)| rustix::process::kill_process_group(p, s).is_ok())
    }

    fn spawn(&mut self, req: SpawnReq, fds: Vec<OwnedFd>) -> io::Result<(i32, OwnedFd)> {
        let given = req.stdio.iter().filter(|s| **s).count();
        let want = given + 1 + usize::from(req.procs);
        if fds.len() != want {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} descriptors came with a spawn, not {want}", fds.len()),
            ));
        }
        let mut fds = fds.into_iter();
        let mut stdio: Vec<Stdio> = Vec::with_capacity(3);
        for given in req.stdio {
            stdio.push(match given {
                true => Stdio::from(fds.next().expect("counted")),
                false => Stdio::null(),
            });
        }
        let status = fds.next().expect("counted");
        let procs = fds.next();
        self.keep(&req.live);
        let key = req.holder.key;
        let found = self
            .holders
            .iter()
            .position(|h| h.key == key && h.spec == req.holder);
        let at = match (found, &self.bwrap) {
            (Some(i), _) => i,
            (None, _) if !req.fresh => return Err(io::Error::from_raw_os_error(STALE)),
            (None, Some(bwrap)) => {
                let h = Holder::start(bwrap, &self.exe, &req.holder)?;
                // A principal's oldest holder goes, never another's (its
                // private `/tmp` would go with it).
                if self.holders.iter().filter(|h| h.key == key).count() >= MAX_HOLDERS {
                    if let Some(i) = self.holders.iter().position(|h| h.key == key) {
                        self.holders.remove(i);
                    }
                }
                self.holders.push(h);
                self.holders.len() - 1
            }
            (None, None) => return Err(io::Error::other("bubblewrap is not available")),
        };
        let mut cmd = Command::new(CONFINE_AT);
        cmd.args(req.args.iter().map(B::os));
        cmd.env_clear()
            .envs(req.env.iter().map(|(k, v)| (k.os(), v.os())));
        cmd.current_dir(req.cwd.os());
        let mut stdio = stdio.into_iter();
        cmd.stdin(stdio.next().expect("three"))
            .stdout(stdio.next().expect("three"))
            .stderr(stdio.next().expect("three"));
        if !req.pty {
            cmd.process_group(0);
        }
        let (pty, join) = (req.pty, procs.as_ref().map(|p| p.as_raw_fd()));
        // SAFETY: setsid, an ioctl on fd 0 (the PTY's slave) and one write
        // to a descriptor open until the spawn returns; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                if pty {
                    rustix::process::setsid()?;
                    rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
                }
                if let Some(p) = join {
                    rustix::io::write(BorrowedFd::borrow_raw(p), b"0")?;
                }
                Ok(())
            });
        }
        at_fd3(&mut cmd, status.as_raw_fd());
        let noexec = req
            .noexec
            .iter()
            .map(B::c)
            .collect::<io::Result<Vec<_>>>()?;
        self.holders[at].enter_at_exec(&mut cmd, req.inner_cwd.c()?, noexec, self.me);
        let mut child = cmd.spawn()?;
        // Our copies of its stdio, status pipe and cgroup go now.
        drop(cmd);
        drop((status, procs));
        let pid = child.id() as i32;
        let pidfd = rustix::process::Pid::from_raw(pid)
            .ok_or_else(|| io::Error::other("bad pid"))
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
                    .map_err(io::Error::from)
            });
        match pidfd {
            Ok(fd) => {
                self.children.insert(pid, child);
                Ok((pid, fd))
            }
            Err(e) => {
                let _ = rustix::process::kill_process_group(
                    rustix::process::Pid::from_raw(pid).expect("a child's pid"),
                    rustix::process::Signal::KILL,
                );
                let _ = child.wait();
                Err(e)
            }
        }
    }
}
