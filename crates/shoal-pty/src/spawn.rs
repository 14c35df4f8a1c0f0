//! Starting a program on a new PTY and ending it: `openpty` for the pair,
//! the child as a session leader with the slave as its controlling terminal
//! (so it is also its own process group), `TIOCSWINSZ` for resizes, and the
//! process-wide table of PTY children not yet reaped.
//!
//! Every signal to a PTY's process group and every reap goes through that
//! table under one lock, so a pid is never signalled after it was reaped
//! (and possibly reused). [`kill_all`] ends every group at daemon exit.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use rustix::process::{Signal, WaitIdOptions, WaitOptions};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What to run and how.
#[derive(Clone, Debug)]
pub struct SpawnSpec {
    pub cmd: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child (nothing else is inherited).
    pub env: Vec<(String, String)>,
    pub rows: u16,
    pub cols: u16,
}

/// A started child: the master side, its pid (= pgid = sid) and a pidfd.
pub struct Spawned {
    pub master: OwnedFd,
    pub pid: i32,
    pub pidfd: OwnedFd,
    pub program: PathBuf,
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub status: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    fn from_wait(st: i32) -> Exit {
        if libc::WIFEXITED(st) {
            Exit {
                status: Some(libc::WEXITSTATUS(st)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(st) {
            Exit {
                status: None,
                signal: Some(libc::WTERMSIG(st)),
            }
        } else {
            Exit {
                status: None,
                signal: None,
            }
        }
    }

    /// `SIGKILL`, `SIGTERM`, …; others `SIG<n>`.
    pub fn signal_name(&self) -> Option<String> {
        self.signal.map(signal_name)
    }
}

pub use shoal_base::procs::signal_name;

/// PTY children not yet reaped, each with its cgroup (docs/processes.md).
fn live() -> std::sync::MutexGuard<'static, BTreeMap<i32, shoal_base::procs::Tracked>> {
    shoal_base::procs::pty_children()
}

/// Resolve `cmd` on the `PATH` of `env` (a name with `/` is a path).
pub fn resolve(cmd: &str, env: &[(String, String)], cwd: &Path) -> io::Result<PathBuf> {
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    // A program the caller may not read is not there for it: the answer
    // must not tell a token whether a path outside its grants exists.
    shoal_base::lookup::find_program(cmd, path, cwd)
        .filter(|p| shoal_policy::landlock::current().is_none_or(|r| r.reads(p)))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                if cmd.contains('/') {
                    format!("{cmd}: no such executable file")
                } else {
                    format!("{cmd}: not found on PATH")
                },
            )
        })
}

fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Open a PTY pair and start `spec` on its slave side, owned by `home`.
pub fn spawn(spec: &SpawnSpec, home: Option<shoal_base::procs::Home>) -> io::Result<Spawned> {
    let program = resolve(&spec.cmd, &spec.env, &spec.cwd)?;
    // Leash: the binary itself must be granted (by identity) to a gated principal.
    shoal_policy::run_gate::spawn(&program)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e.msg))?;
    let ws = winsize(spec.rows, spec.cols);
    let (master, slave, tty) =
        openpty::openpty(None, Some(&ws), None).map_err(|e| io::Error::other(e.to_string()))?;
    let master = OwnedFd::from(master);
    let slave = OwnedFd::from(slave);
    // Leash: a token principal's child in kernel namespaces (bubblewrap),
    // started by the namespace broker.
    let ns = shoal_policy::namespaces::wrap(&program, spec.cmd.as_ref(), &spec.args, &spec.cwd)?;
    let env = spec
        .env
        .iter()
        .filter(|(k, _)| shoal_policy::landlock::passes_env(k))
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    // Its cgroup, joined before any confinement. Started from a short-lived
    // thread, so no parent-death signal.
    let join = shoal_base::procs::prepare(home, true);
    // The table lock is held across the spawn so a reaper never sees the pid
    // before it is registered.
    let mut table = live();
    let pid = match ns {
        Some(w) => {
            use shoal_policy::namespaces::{launch, Launch, Stdio as Io};
            let child_join = join.child();
            let launched = child_join.procs().and_then(|procs| {
                let l = Launch {
                    env: env.collect(),
                    cwd: &spec.cwd,
                    stdin: Io::Fd(slave.try_clone()?),
                    stdout: Io::Fd(slave.try_clone()?),
                    stderr: Io::Fd(slave),
                    pty: true,
                    procs,
                };
                launch(w, l)
            });
            match launched {
                Ok(l) => {
                    let pid = l.child.id() as i32;
                    shoal_policy::namespaces::remember(l.child);
                    pid
                }
                Err(e) => {
                    drop(table);
                    join.abandon();
                    return Err(e);
                }
            }
        }
        None => {
            let mut cmd = Command::new(&program);
            cmd.arg0(&spec.cmd).args(&spec.args);
            cmd.current_dir(&spec.cwd)
                .env_clear()
                .envs(env)
                .stdin(Stdio::from(slave.try_clone()?))
                .stdout(Stdio::from(slave.try_clone()?))
                .stderr(Stdio::from(slave));
            // SAFETY: the closure runs in the forked child before exec and calls only
            // async-signal-safe syscalls (setsid, ioctl) on fd 0, the slave.
            unsafe {
                cmd.pre_exec(|| {
                    rustix::process::setsid()?;
                    rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
                    Ok(())
                });
            }
            let child_join = join.child();
            // SAFETY: apply writes to an open descriptor; it allocates nothing.
            unsafe {
                cmd.pre_exec(move || child_join.apply());
            }
            // Leash: the principal's filesystem grants, enforced by Landlock.
            let tty = std::path::PathBuf::from(&tty);
            let spawned = match shoal_policy::landlock::prepare(Some(&tty), &program) {
                Ok(Some(rs)) => {
                    let mut confine = rs.confine();
                    // SAFETY: apply makes a few syscalls and allocates nothing.
                    unsafe {
                        cmd.pre_exec(move || confine.apply());
                    }
                    cmd.spawn()
                }
                Ok(None) => cmd.spawn(),
                Err(e) => Err(e),
            };
            // The parent's copies of the slave close with `cmd`: EOF needs that.
            drop(cmd);
            match spawned {
                // Reaped by pid ([`reap`]), not through the handle.
                Ok(child) => child.id() as i32,
                Err(e) => {
                    drop(table);
                    join.abandon();
                    return Err(e);
                }
            }
        }
    };
    table.insert(pid, join.started(pid));
    drop(table);
    let pidfd = match rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| io::Error::other("bad pid"))
        .and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
                .map_err(io::Error::from)
        }) {
        Ok(fd) => fd,
        Err(e) => {
            kill_group(pid);
            wait_gone(pid, Duration::from_secs(2));
            return Err(io::Error::other(format!("pidfd_open: {e}")));
        }
    };
    set_nonblocking(master.as_fd())?;
    Ok(Spawned {
        master,
        pid,
        pidfd,
        program,
    })
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)?;
    Ok(())
}

/// `TIOCSWINSZ` on the master: the kernel signals the foreground group.
pub fn resize(master: BorrowedFd<'_>, rows: u16, cols: u16) -> io::Result<()> {
    let ws = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master, ws)?;
    Ok(())
}

/// SIGCONT + SIGKILL to the group of an unreaped PTY child; false when it
/// was already reaped.
pub fn kill_group(pid: i32) -> bool {
    let table = live();
    let Some(tracked) = table.get(&pid) else {
        return false;
    };
    // The unreaped leader pins the pgid, so it is ours.
    if let Some(group) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(group, Signal::CONT);
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    }
    // What left the group (setsid, double fork) is still in its cgroup.
    tracked.kill();
    true
}

/// Reap a PTY child that has exited (its pidfd is readable), first killing
/// what is left of its process group. `None` while it still runs.
pub fn reap(pid: i32) -> Option<Exit> {
    let table = live();
    if !table.contains_key(&pid) {
        return None;
    }
    // A program in namespaces is the broker's child, reaped there.
    if let Some(r) = shoal_policy::namespaces::try_reap(pid) {
        let exit = match r {
            Ok(None) => return None,
            Ok(Some(raw)) => Exit::from_wait(raw),
            Err(_) => Exit {
                status: None,
                signal: None,
            },
        };
        return Some(forget(table, pid, exit));
    }
    // Peek first (WNOWAIT): the exited leader stays a zombie, pinning its
    // pgid while the rest of its group is killed, then it is reaped.
    let child = rustix::process::Pid::from_raw(pid)?;
    let peek = rustix::process::waitid(
        rustix::process::WaitId::Pid(child),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    );
    match peek {
        Ok(None) => return None,
        Ok(Some(_)) => {
            let _ = rustix::process::kill_process_group(child, Signal::KILL);
        }
        Err(_) => {}
    }
    let exit = match rustix::process::waitpid(Some(child), WaitOptions::NOHANG) {
        Ok(None) => return None,
        Ok(Some((_, st))) => Exit::from_wait(st.as_raw()),
        // ECHILD: someone else reaped it; the status is lost.
        Err(_) => Exit {
            status: None,
            signal: None,
        },
    };
    Some(forget(table, pid, exit))
}

/// `pid` was reaped: out of the table; what left its group is still in its
/// cgroup, killed, and the cgroup removed once it is empty (bounded).
fn forget(
    mut table: std::sync::MutexGuard<'static, BTreeMap<i32, shoal_base::procs::Tracked>>,
    pid: i32,
    exit: Exit,
) -> Exit {
    let tracked = table.remove(&pid);
    drop(table);
    if let Some(t) = tracked {
        t.kill();
        t.remove_when_empty(Duration::from_secs(1));
    }
    exit
}

/// Wait (bounded) until `pid` is reaped: here, woken by its pidfd (readable
/// once it exited), or by its I/O thread (then gone from [`live`]).
fn wait_gone(pid: i32, d: Duration) -> Option<Exit> {
    let deadline = Instant::now() + d;
    // Opened before the check below: a pid still in the table then was not
    // reaped yet, so this pidfd is the child's, not a reuse's.
    let pidfd = rustix::process::Pid::from_raw(pid)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    loop {
        if let Some(e) = reap(pid) {
            return Some(e);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if !live().contains_key(&pid) || left.is_zero() {
            return None;
        }
        match &pidfd {
            Some(fd) => exited_within(fd.as_fd(), left),
            // No pidfd (descriptors exhausted, the spawn's own failure to
            // open one): nothing to wait on but a re-check every 2 ms.
            None => std::thread::sleep(left.min(Duration::from_millis(2))),
        }
    }
}

/// Wait at most `left` for a pidfd to say its process exited.
fn exited_within(pidfd: BorrowedFd<'_>, left: Duration) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let t = Timespec {
        tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: left.subsec_nanos().into(),
    };
    let _ = poll(&mut [PollFd::new(&pidfd, PollFlags::IN)], Some(&t));
}

/// Pids of PTY children not yet reaped.
pub fn live_pids() -> Vec<i32> {
    live().keys().copied().collect()
}

/// End every PTY process group and reap the children (daemon exit).
pub fn kill_all() {
    let pids = live_pids();
    for pid in &pids {
        kill_group(*pid);
    }
    for pid in pids {
        wait_gone(pid, Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait is woken by the child's exit (its pidfd), not by a re-check:
    /// a killed child ends a 60 s wait long before its deadline.
    #[test]
    fn wait_gone_ends_when_the_killed_child_exits() {
        let spec = SpawnSpec {
            cmd: "sleep".into(),
            args: vec!["1000".into()],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            rows: 10,
            cols: 40,
        };
        let child = spawn(&spec, None).expect("spawn sleep");
        assert!(kill_group(child.pid));
        let t0 = Instant::now();
        let exit = wait_gone(child.pid, Duration::from_secs(60)).expect("reaped here");
        assert!(t0.elapsed() < Duration::from_secs(30), "woken by the exit");
        assert_eq!(exit.signal, Some(Signal::KILL.as_raw()));
        assert!(!live().contains_key(&child.pid));
    }
}
