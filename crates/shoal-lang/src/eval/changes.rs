//! What `tail` and `watch` wait on between items: inotify on the paths they
//! follow, beside the interrupt's eventfd, in one `poll` without a timeout.
//! Where inotify cannot tell (a network, FUSE or pseudo filesystem, whose
//! changes made elsewhere it never reports), or the kernel refuses an
//! inotify instance or a watch (`fs.inotify.max_user_instances`,
//! `max_user_watches`) or an eventfd, the wait falls back to looking again
//! after a period, still ended at once by an interrupt.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

use crate::interrupt::Interrupter;

/// Filesystems whose changes inotify may miss (made on another host, or
/// not through the VFS): NFS, SMB, CIFS, SMB2, FUSE, 9p, Ceph, AFS, proc,
/// sysfs.
const UNWATCHABLE: &[u64] = &[
    0x6969,
    0x517b,
    0xff53_4d42,
    0xfe53_4d42,
    0x6573_5546,
    0x0102_1997,
    0x00c3_6400,
    0x5346_414f,
    0x9fa0,
    0x6265_6572,
];

/// How a [`Changes::wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A followed path changed (or may have: look again).
    Changed,
    Interrupted,
    /// The fallback's period passed.
    Elapsed,
}

pub(crate) struct Changes {
    /// `None`: fall back to looking every `period`.
    inotify: Option<OwnedFd>,
    period: Duration,
}

impl Changes {
    /// Changes under `root` (a file or a directory), or every `period` when
    /// inotify cannot follow them there.
    pub(crate) fn new(root: &Path, period: Duration) -> Changes {
        let local = rustix::fs::statfs(root)
            .map(|s| !UNWATCHABLE.contains(&(s.f_type as u64)))
            .unwrap_or(false);
        let inotify = local
            .then(|| inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok())
            .flatten();
        Changes { inotify, period }
    }

    /// Whether a wait sleeps until an event (not a period).
    pub(crate) fn event_driven(&self) -> bool {
        self.inotify.is_some()
    }

    /// Follow a tailed file: data written to it, its truncation.
    pub(crate) fn follow_file(&mut self, path: &Path) {
        self.add(path, WatchFlags::MODIFY | WatchFlags::ATTRIB);
    }

    /// Follow the entries of a directory: created, written, removed, moved.
    pub(crate) fn follow_dir(&mut self, dir: &Path) {
        self.add(
            dir,
            WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MODIFY
                | WatchFlags::ATTRIB
                | WatchFlags::CLOSE_WRITE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR,
        );
    }

    /// Watching a path again keeps its one watch. A refused watch (out of
    /// watches) falls back to the period: a change there would be missed.
    fn add(&mut self, path: &Path, flags: WatchFlags) {
        if let Some(fd) = &self.inotify {
            if let Err(e) = inotify::add_watch(fd, path, flags) {
                // Gone meanwhile: nothing there to follow.
                if e != rustix::io::Errno::NOENT {
                    self.inotify = None;
                }
            }
        }
    }

    /// Block until a followed path changes or `intr` is interrupted (or,
    /// falling back, the period passes). The change events are consumed:
    /// the caller looks at the files again after this.
    pub(crate) fn wait(&self, intr: &Interrupter) -> Woke {
        let (Some(ino), Some(wake)) = (&self.inotify, intr.wake_fd()) else {
            return if intr.sleep_until(Instant::now() + self.period) {
                Woke::Interrupted
            } else {
                Woke::Elapsed
            };
        };
        // After taking the eventfd, before waiting on it.
        if intr.is_interrupted() {
            return Woke::Interrupted;
        }
        let mut fds = [
            PollFd::new(ino, PollFlags::IN),
            PollFd::from_borrowed_fd(wake, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // Not expected of a poll on two valid fds; never spin on it.
            Err(_) => {
                intr.sleep_until(Instant::now() + self.period);
            }
        }
        if intr.is_interrupted() {
            return Woke::Interrupted;
        }
        let mut buf = [0u8; 4096];
        while matches!(rustix::io::read(ino, &mut buf), Ok(n) if n > 0) {}
        Woke::Changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `c.wait(intr)` on another thread, with `then` run here once that
    /// thread sleeps in the wait (so a look before it cannot answer);
    /// bounded by a watchdog (a wait nothing wakes never ends), not a
    /// timing claim.
    fn wait_after(c: Changes, intr: &Interrupter, then: impl FnOnce()) -> Woke {
        let (tid_tx, tid) = std::sync::mpsc::channel();
        let (tx, rx) = std::sync::mpsc::channel();
        let intr = intr.clone();
        std::thread::spawn(move || {
            let _ = tid_tx.send(rustix::thread::gettid().as_raw_nonzero().get());
            let _ = tx.send(c.wait(&intr));
        });
        let stat = format!("/proc/self/task/{}/stat", tid.recv().unwrap());
        // The kernel shows no event for a thread falling asleep: look.
        while !std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('S'))
        }) {
            std::thread::yield_now();
        }
        then();
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the wait was woken")
    }

    #[test]
    fn a_write_or_an_interrupt_ends_the_wait_with_no_period() {
        let d = tempfile::tempdir().unwrap();
        let period = Duration::from_secs(3600);
        let intr = Interrupter::default();
        let f = d.path().join("log");
        std::fs::write(&f, "").unwrap();
        let mut c = Changes::new(&f, period);
        c.follow_file(&f);
        assert!(c.event_driven(), "inotify follows a file in {:?}", d.path());
        let woke = wait_after(c, &intr, || std::fs::write(&f, "a line\n").unwrap());
        assert_eq!(woke, Woke::Changed);
        // A directory: a file made in it.
        let mut c = Changes::new(d.path(), period);
        c.follow_dir(d.path());
        let woke = wait_after(c, &intr, || {
            std::fs::write(d.path().join("new"), "").unwrap();
        });
        assert_eq!(woke, Woke::Changed);
        // Nothing changes: only the interrupt ends the wait.
        let quiet = d.path().join("quiet");
        std::fs::create_dir(&quiet).unwrap();
        let mut c = Changes::new(&quiet, period);
        c.follow_dir(&quiet);
        let woke = wait_after(c, &intr, || intr.interrupt());
        assert_eq!(woke, Woke::Interrupted);
        // No wait slept out a period.
        assert_eq!(intr.wakes(), 0);
    }
}
