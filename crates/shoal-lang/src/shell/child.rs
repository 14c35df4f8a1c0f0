//! A started program, whichever way it was started: our own child (`std`),
//! or one a token's namespace broker started for us
//! ([`shoal_policy::namespaces::Brokered`]: its parent is the broker, so it
//! is waited for through its pidfd and reaped and signalled by the broker).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};

use shoal_policy::namespaces::Brokered;

pub(super) enum Proc {
    Own(Child),
    Brokered(Brokered),
}

/// A started program and our ends of its pipes.
pub(super) struct Started {
    pub child: Proc,
    pub pipes: Pipes,
}

/// Our ends of a started program's pipes.
#[derive(Default)]
pub(super) struct Pipes {
    pub stdin: Option<Box<dyn Write + Send>>,
    pub stdout: Option<Box<dyn super::process::ReadFd>>,
    pub stderr: Option<Box<dyn super::process::ReadFd>>,
}

impl Pipes {
    /// Take the pipes `std` made for `child`.
    pub fn of_child(child: &mut Child) -> Pipes {
        Pipes {
            stdin: child.stdin.take().map(|p| Box::new(p) as _),
            stdout: child.stdout.take().map(|p| Box::new(p) as _),
            stderr: child.stderr.take().map(|p| Box::new(p) as _),
        }
    }

    /// The pipes the broker's spawn gave back.
    pub fn of_fds(
        stdin: Option<OwnedFd>,
        stdout: Option<OwnedFd>,
        stderr: Option<OwnedFd>,
    ) -> Pipes {
        fn read(fd: OwnedFd) -> Box<dyn super::process::ReadFd> {
            Box::new(File::from(fd))
        }
        Pipes {
            stdin: stdin.map(|fd| Box::new(File::from(fd)) as _),
            stdout: stdout.map(read),
            stderr: stderr.map(read),
        }
    }
}

impl Proc {
    pub fn id(&self) -> u32 {
        match self {
            Proc::Own(c) => c.id(),
            Proc::Brokered(b) => b.id(),
        }
    }

    /// A pidfd of it (readable once it exited); `None` where the kernel has none.
    pub fn pidfd(&self) -> Option<OwnedFd> {
        match self {
            Proc::Own(c) => {
                let pid = rustix::process::Pid::from_raw(c.id() as i32)?;
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            }
            Proc::Brokered(b) => b.pidfd().try_clone_to_owned().ok(),
        }
    }

    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Proc::Own(c) => c.try_wait(),
            Proc::Brokered(b) => Ok(b.try_wait()?.map(ExitStatus::from_raw)),
        }
    }

    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Proc::Own(c) => c.wait(),
            Proc::Brokered(b) => b.wait().map(ExitStatus::from_raw),
        }
    }

    /// SIGKILL it (a brokered one: its whole group).
    pub fn kill(&mut self) {
        match self {
            Proc::Own(c) => {
                let _ = c.kill();
            }
            Proc::Brokered(b) => {
                b.signal_group(libc::SIGKILL);
            }
        }
    }
}
