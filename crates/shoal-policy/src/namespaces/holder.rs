//! A principal's namespaces held by bubblewrap, and how each child joins them
//! (see the module above).

use std::ffi::{CStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use rustix::thread::LinkNameSpaceType as NsType;
use serde::Deserialize;

use super::broker::{HolderArg, HolderSpec};
use super::{pipe, CONFINE_AT, HOLD_ARG, PASSED};

/// Make `fd` the child's descriptor 3 (open across exec).
pub(super) fn at_fd3(cmd: &mut Command, fd: RawFd) {
    at_fd3_keeping(cmd, fd, Vec::new());
}

/// [`at_fd3`], and keep the descriptors `keep` (none of them 3) open across
/// exec as well.
fn at_fd3_keeping(cmd: &mut Command, fd: RawFd, keep: Vec<RawFd>) {
    // SAFETY: between fork and exec: dup2 and fcntl are async-signal-safe
    // system calls, on `fd` and `keep`, descriptors the caller holds open
    // until the spawn returns; nothing is allocated (`keep` was made before
    // the fork). (libc's dup2: rustix's wants fd 3 as an open `OwnedFd`,
    // which it need not be.)
    unsafe {
        let open_across_exec = |fd: RawFd| -> io::Result<()> {
            use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};
            let fd = BorrowedFd::borrow_raw(fd);
            fcntl_setfd(fd, fcntl_getfd(fd)?.difference(FdFlags::CLOEXEC))?;
            Ok(())
        };
        cmd.pre_exec(move || {
            if fd == 3 {
                open_across_exec(3)?;
            } else if libc::dup2(fd, 3) < 0 {
                return Err(io::Error::last_os_error());
            }
            for &k in &keep {
                open_across_exec(k)?;
            }
            Ok(())
        });
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
/// `AT_RECURSIVE`: the whole tree, not only its top mount.
const AT_RECURSIVE: libc::c_int = 0x8000;

/// The lowest descriptor a grant root handed to bubblewrap takes (above 3,
/// where its info pipe goes).
const FIRST_ROOT_FD: RawFd = 10;

/// A holder's `bwrap` arguments, with the descriptors they name. Each grant
/// root is opened now, following no link (`RESOLVE_NO_SYMLINKS`), and handed
/// to bubblewrap as that descriptor (`--bind-fd`, `--ro-bind-fd`): the mount
/// is of what was opened, whatever the path names by the time bubblewrap
/// mounts it (another token may swap a directory it can write for a link at
/// any moment). A root that does not open (gone, or a link in it) is not
/// mounted. bubblewrap resolves each descriptor to its path, mounts that and
/// checks that the mount is the descriptor's file, refusing to start if it is
/// not; then it closes the descriptor.
pub(super) fn bwrap_args(spec: &[HolderArg]) -> (Vec<OsString>, Vec<OwnedFd>) {
    let mut args = Vec::new();
    let mut fds = Vec::new();
    for a in spec {
        match a {
            HolderArg::Word(w) => args.push(w.os()),
            HolderArg::Mount { path, rw } => {
                let path = PathBuf::from(path.os());
                let opened = crate::grant_path::open_path(&path, true)
                    .ok()
                    .flatten()
                    .and_then(|fd| rustix::io::fcntl_dupfd_cloexec(&fd, FIRST_ROOT_FD).ok());
                let Some(fd) = opened else {
                    tracing::debug!(root = %path.display(), "a grant root is gone or a link: not mounted");
                    continue;
                };
                let flag = if *rw { "--bind-fd" } else { "--ro-bind-fd" };
                args.push(flag.into());
                args.push(fd.as_raw_fd().to_string().into());
                args.push(path.into_os_string());
                fds.push(fd);
            }
        }
    }
    (args, fds)
}

/// A principal's namespaces, held open by a `bwrap` that runs
/// `shoal-confine hold` until its stdin closes (or the broker ends: it is
/// started `--die-with-parent`). Children join its user, mount, IPC, UTS
/// and (sealed) network namespaces through the descriptors kept here.
pub(super) struct Holder {
    /// Whose it is (a principal's rules, numbered by the spawning process).
    pub(super) key: u64,
    pub(super) spec: HolderSpec,
    pub(super) bwrap: Child,
    /// Its end closes the holder.
    _stdin: Option<ChildStdin>,
    user: OwnedFd,
    mnt: OwnedFd,
    ipc: OwnedFd,
    uts: OwnedFd,
    net: Option<OwnedFd>,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.bwrap.kill();
        let _ = self.bwrap.wait();
    }
}

impl Holder {
    /// Start `bwrap` with the spec's arguments and wait until the holder
    /// runs inside (its namespaces are then complete); keep them. Once more
    /// if it fails: bubblewrap mounts a root by the path its descriptor
    /// names, and refuses to start when that path was removed or replaced
    /// since the root was opened (`Race condition binding dirfd`); opened
    /// again, such a root is left out.
    pub(super) fn start(bwrap: &Path, exe: &Path, spec: &HolderSpec) -> io::Result<Holder> {
        Holder::start_once(bwrap, exe, spec).or_else(|e| {
            tracing::debug!("a namespace holder did not start ({e}); once more");
            Holder::start_once(bwrap, exe, spec)
        })
    }

    fn start_once(bwrap: &Path, exe: &Path, spec: &HolderSpec) -> io::Result<Holder> {
        let (info_rx, info_tx) = pipe()?;
        let (args, roots) = bwrap_args(&spec.args);
        let mut cmd = Command::new(bwrap);
        cmd.arg("--info-fd").arg("3");
        cmd.args(args);
        // The binary itself, read-only (the holder runs it; children exec it).
        cmd.arg("--ro-bind").arg(exe).arg(CONFINE_AT);
        cmd.arg("--").arg(CONFINE_AT).arg(HOLD_ARG);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let keep = roots.iter().map(|fd| fd.as_raw_fd()).collect();
        at_fd3_keeping(&mut cmd, info_tx.as_raw_fd(), keep);
        let mut child = cmd.spawn()?;
        drop(cmd);
        drop(info_tx);
        drop(roots);
        let failed = |child: &mut Child, what: &str| {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let _ = child.kill();
            let _ = child.wait();
            io::Error::other(format!(
                "cannot start the sandbox's namespaces ({what}): {}",
                err.trim()
            ))
        };
        // One JSON object (read up to its end, not to EOF: whether bwrap
        // closes the descriptor after writing is not promised).
        let pid = serde_json::Deserializer::from_reader(std::fs::File::from(info_rx))
            .into_iter::<Info>()
            .next()
            .and_then(Result::ok)
            .map(|i| i.child_pid);
        let mut ready = [0u8; 1];
        let up = child
            .stdout
            .take()
            .is_some_and(|mut o| o.read_exact(&mut ready).is_ok() && ready == *b"R");
        let Some(pid) = pid.filter(|_| up) else {
            return Err(failed(&mut child, "bwrap"));
        };
        let open = |ns: &str| {
            rustix::fs::open(
                format!("/proc/{pid}/ns/{ns}"),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
        };
        let fds = (|| -> io::Result<_> {
            let net = if spec.sealed {
                Some(open("net")?)
            } else {
                None
            };
            Ok((open("user")?, open("mnt")?, open("ipc")?, open("uts")?, net))
        })();
        // The pid was the holder's while bwrap still runs (it is our child,
        // not yet reaped, and the holder's death ends it).
        let alive = matches!(child.try_wait(), Ok(None));
        let (user, mnt, ipc, uts, net) = match fds {
            Ok(f) if alive => f,
            _ => return Err(failed(&mut child, "its namespaces")),
        };
        // Never join the broker's own mount namespace.
        let own = rustix::fs::stat("/proc/self/ns/mnt")?;
        if rustix::fs::fstat(&mnt)?.st_ino == own.st_ino {
            return Err(failed(&mut child, "no mount namespace of its own"));
        }
        drop(child.stderr.take());
        let stdin = child.stdin.take();
        Ok(Holder {
            key: spec.key,
            spec: spec.clone(),
            bwrap: child,
            _stdin: stdin,
            user,
            mnt,
            ipc,
            uts,
            net,
        })
    }

    /// Between fork and exec, `cmd`'s child (the broker's direct child):
    /// ignore the interrupt signals, join the holder's namespaces, then a
    /// mount and a pid namespace of the child's own; fork. The forked
    /// process (pid 1 there) mounts its own `/proc`, makes the `noexec`
    /// paths so, enters `cwd`, gives up every capability and goes on to
    /// exec `shoal-confine run`; the first one waits for it and exits as it
    /// did, so the broker keeps a direct child to wait on and to signal
    /// (both are in its process group). When pid 1 ends, so does
    /// everything the program left in its pid namespace; each dies with its
    /// parent (`SIGKILL`).
    pub(super) fn enter_at_exec(
        &self,
        cmd: &mut Command,
        cwd: std::ffi::CString,
        noexec: Vec<std::ffi::CString>,
        broker: rustix::process::Pid,
    ) {
        let ns: [(RawFd, NsType); 5] = [
            (self.user.as_raw_fd(), NsType::User),
            (self.mnt.as_raw_fd(), NsType::Mount),
            (self.ipc.as_raw_fd(), NsType::InterProcessCommunication),
            (self.uts.as_raw_fd(), NsType::HostNameAndNISDomainName),
            (
                self.net.as_ref().map_or(-1, |f| f.as_raw_fd()),
                NsType::Network,
            ),
        ];
        // SAFETY: between fork and exec, in the single-threaded child: only
        // system calls (signal, setns, unshare, mount, mount_setattr, prctl,
        // fork, waitpid, close_range, _exit) on integers, the descriptors
        // kept by the holder (open until the broker's spawn returns), C
        // strings made before the fork and a `mount_attr` on the stack;
        // nothing is allocated. `unshare` of the mount and pid namespaces
        // leaves the descriptor table alone.
        unsafe {
            // `mount_setattr(2)` (no wrapper in rustix): the tree at `tree`,
            // every mount of it, loses exec, setuid and devices.
            let noexec_tree = |tree: BorrowedFd<'_>| -> io::Result<()> {
                let attr = MountAttr {
                    attr_set: MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                let flags = (libc::AT_EMPTY_PATH | AT_RECURSIVE) as libc::c_uint;
                let at = &attr as *const MountAttr;
                let size = std::mem::size_of::<MountAttr>();
                let r = libc::syscall(
                    libc::SYS_mount_setattr,
                    tree.as_raw_fd(),
                    c"".as_ptr(),
                    flags,
                    at,
                    size,
                );
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            };
            cmd.pre_exec(move || {
                for s in PASSED {
                    libc::signal(s, libc::SIG_IGN);
                }
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))?;
                if rustix::process::getppid() != Some(broker) {
                    return Err(io::Error::other("the namespace broker is gone"));
                }
                for (fd, kind) in ns {
                    if fd >= 0 {
                        let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                        rustix::thread::move_into_link_name_space(fd, Some(kind))?;
                    }
                }
                rustix::thread::unshare_unsafe(
                    rustix::thread::UnshareFlags::NEWNS | rustix::thread::UnshareFlags::NEWPID,
                )?;
                match libc::fork() {
                    -1 => Err(io::Error::last_os_error()),
                    0 => own_proc(&cwd, &noexec, &noexec_tree),
                    pid => {
                        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
                        // Its pid 1's end is this child's (a wait that fails: 0).
                        let pid = rustix::process::Pid::from_raw(pid);
                        let st = loop {
                            match rustix::process::waitpid(
                                pid,
                                rustix::process::WaitOptions::empty(),
                            ) {
                                Err(rustix::io::Errno::INTR) => {}
                                Ok(Some((_, st))) => break Some(st),
                                _ => break None,
                            }
                        };
                        libc::_exit(st.map_or(0, |st| match st.terminating_signal() {
                            Some(sig) => 128 + sig,
                            None => st.exit_status().unwrap_or(0),
                        }))
                    }
                }
            });
        }
    }
}

/// In a child's own pid namespace (as its pid 1), before exec: its own
/// `/proc`, its cwd, and no capability from here on. Async-signal-safe:
/// system calls on C strings made before the fork.
fn own_proc(
    cwd: &CStr,
    noexec: &[std::ffi::CString],
    noexec_tree: &dyn Fn(BorrowedFd<'_>) -> io::Result<()>,
) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
    use rustix::mount::{mount, mount_change, move_mount, open_tree};
    use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    // Nothing mounted here reaches the holder or the other children.
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    let hidden = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mount(c"proc", c"/proc", c"proc", hidden, None)?;
    // Each such path becomes a mount of its own (with what is mounted below
    // it), then loses exec, with every mount below it (a path this namespace
    // does not hold has nothing to run). The path is opened once, following
    // no link, and all the rest is done on what was opened: a copy of the
    // tree there is made noexec through its descriptor and put over it. (By
    // path, a directory another token may write in could be swapped for a
    // link between the steps, and the mount made elsewhere: round 14's N1;
    // a grant mounted below one was left executable: round 16's E3.) A path
    // that is a link now is refused: the child does not start.
    for p in noexec {
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let at = match rustix::fs::openat2(
            CWD,
            p.as_c_str(),
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        ) {
            Err(rustix::io::Errno::NOENT) => continue,
            r => r?,
        };
        let tree = open_tree(
            &at,
            c"",
            OpenTreeFlags::OPEN_TREE_CLONE
                | OpenTreeFlags::OPEN_TREE_CLOEXEC
                | OpenTreeFlags::AT_RECURSIVE
                | OpenTreeFlags::AT_EMPTY_PATH,
        )?;
        noexec_tree(tree.as_fd())?;
        move_mount(
            &tree,
            c"",
            &at,
            c"",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )?;
    }
    rustix::process::chdir(cwd)?;
    crate::landlock::drop_capabilities()
}

/// What `bwrap --info-fd` reports.
#[derive(Deserialize)]
struct Info {
    #[serde(rename = "child-pid")]
    child_pid: i32,
}

/// `shoal-confine hold`, as a holder's program inside its namespaces: say it is
/// up (`R` on stdout), then wait until stdin closes.
pub fn hold_main() -> i32 {
    use std::io::Write;
    let mut out = io::stdout();
    if out.write_all(b"R").and_then(|_| out.flush()).is_err() {
        return 1;
    }
    let mut sink = [0u8; 64];
    let mut stdin = io::stdin();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => return 0,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return 0,
        }
    }
}
