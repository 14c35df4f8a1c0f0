//! The seccomp socket filters a token principal's children install after
//! their Landlock domain (see `landlock.rs` for what each principal gets):
//! hermetic children may create no socket at all, every other token
//! principal's children no `AF_UNIX` socket. A second filter, [`NO_ATTR`],
//! keeps every token principal's children from changing the mode, owner,
//! times or extended attributes of a file *by name* (Landlock does not
//! govern those: a child could `chmod` a file it may not even read). Static
//! classic-BPF programs, installed between fork and exec (async-signal-safe).

use std::io;

/// Mark every descriptor from `low` up close-on-exec. Async-signal-safe.
pub(super) fn cloexec_from(low: u32) {
    const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
    // SAFETY: plain syscalls on integers.
    unsafe {
        if libc::syscall(libc::SYS_close_range, low, u32::MAX, CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Before Linux 5.11: one descriptor at a time, up to the limit (no limit: 65536).
        let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let top = lim.current.unwrap_or(u64::MAX).min(1 << 16) as i32;
        for fd in low as i32..top {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// The architecture the socket filter is built for (`AUDIT_ARCH_*`).
#[cfg(target_arch = "x86_64")]
pub(super) const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
pub(super) const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) const AUDIT_ARCH: Option<u32> = None;

const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// What both filters start with: a syscall of another ABI (a foreign
/// `seccomp_data.arch`, or an x32 number) kills the process; the syscall
/// number is loaded for what follows.
const PROLOGUE: [libc::sock_filter; 6] = [
    bpf(BPF_LD_W_ABS, 0, 0, 4), // seccomp_data.arch
    bpf(
        BPF_JEQ_K,
        1,
        0,
        match AUDIT_ARCH {
            Some(a) => a,
            None => 0,
        },
    ),
    bpf(BPF_RET_K, 0, 0, RET_KILL_PROCESS),
    bpf(BPF_LD_W_ABS, 0, 0, 0), // seccomp_data.nr
    bpf(BPF_JGE_K, 0, 1, 0x4000_0000),
    bpf(BPF_RET_K, 0, 0, RET_KILL_PROCESS),
];

/// A filter: [`PROLOGUE`] then `body` (`N` = 6 + `M`, checked when compiled;
/// the prologue's jumps stay inside it, the body's inside the body).
const fn after_prologue<const M: usize, const N: usize>(
    body: [libc::sock_filter; M],
) -> [libc::sock_filter; N] {
    assert!(N == PROLOGUE.len() + M, "filter length");
    let mut out = [bpf(0, 0, 0, 0); N];
    let mut i = 0;
    while i < PROLOGUE.len() {
        out[i] = PROLOGUE[i];
        i += 1;
    }
    let mut j = 0;
    while j < M {
        out[PROLOGUE.len() + j] = body[j];
        j += 1;
    }
    out
}

/// A hermetic child's seccomp filter: `socket(2)` fails with `EACCES` (no
/// socket of any family: UDP, unix, raw, netlink), `io_uring_setup` with
/// `EPERM` (its ring could open sockets), syscalls of another ABI (x32,
/// 32-bit compat) kill the process; everything else is allowed.
/// `socketpair` stays (an unnamed pair reaches nothing outside).
pub(super) static SEAL: [libc::sock_filter; 11] = after_prologue([
    bpf(BPF_JEQ_K, 0, 1, libc::SYS_socket as u32),
    bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EACCES as u32),
    bpf(BPF_JEQ_K, 0, 1, libc::SYS_io_uring_setup as u32),
    bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
    bpf(BPF_RET_K, 0, 0, RET_ALLOW),
]);

/// Every other token principal's filter: `socket(2)` with domain
/// `AF_UNIX` fails with `EACCES` (the low 32 bits of the argument are
/// compared, as the kernel reads an `int`), `io_uring_setup` with `EPERM`
/// (`IORING_OP_SOCKET` would bypass the filter), other syscall ABIs kill
/// the process; everything else (TCP, UDP, `socketpair`) is allowed.
pub(super) static NO_UNIX: [libc::sock_filter; 13] = after_prologue([
    bpf(BPF_JEQ_K, 0, 1, libc::SYS_io_uring_setup as u32),
    bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
    bpf(BPF_JEQ_K, 0, 3, libc::SYS_socket as u32),
    bpf(BPF_LD_W_ABS, 0, 0, 16), // seccomp_data.args[0], low word
    bpf(BPF_JEQ_K, 0, 1, libc::AF_UNIX as u32),
    bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EACCES as u32),
    bpf(BPF_RET_K, 0, 0, RET_ALLOW),
]);

/// Can this kernel install the socket filters (seccomp filters with the
/// errno and kill-process actions)?
pub fn filter_available() -> bool {
    static AVAIL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAIL.get_or_init(|| {
        [RET_ERRNO, RET_KILL_PROCESS].iter().all(|action| {
            // SAFETY: SECCOMP_GET_ACTION_AVAIL (2) reads one u32 that
            // lives across the call.
            unsafe { libc::syscall(libc::SYS_seccomp, 2u32, 0u32, action as *const u32) == 0 }
        })
    })
}

/// Install a socket filter (no_new_privs is already set).
/// Async-signal-safe.
pub(super) fn install_filter(filter: &'static [libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at a static filter and lives across the call;
    // PR_SET_SECCOMP with SECCOMP_MODE_FILTER (2) only reads it.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            2 as libc::c_ulong,
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The syscalls that change a file's mode, owner, times or extended
/// attributes by path (their descriptor forms stay: a descriptor was
/// opened under Landlock). `utimensat` is handled apart: with a null path
/// it is `futimens`.
#[cfg(target_arch = "x86_64")]
const BY_NAME: [i64; 14] = [
    libc::SYS_chmod,
    libc::SYS_fchmodat,
    452, // fchmodat2
    libc::SYS_chown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    463, // setxattrat
];
#[cfg(target_arch = "aarch64")]
const BY_NAME: [i64; 14] = [
    libc::SYS_fchmodat,
    452, // fchmodat2
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    463, // setxattrat
    466, // removexattrat
    // Repeats keep one length for both architectures.
    libc::SYS_fchmodat,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat,
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const BY_NAME: [i64; 14] = [-1; 14];

#[cfg(target_arch = "x86_64")]
const REMOVEXATTRAT_OR_UTIMENSAT: i64 = 466; // removexattrat
#[cfg(not(target_arch = "x86_64"))]
const REMOVEXATTRAT_OR_UTIMENSAT: i64 = libc::SYS_utimensat;

/// A body of `M` instructions that starts with `JEQ nr; RET errno` for each
/// syscall of `list` (the rest is the caller's to fill).
const fn deny_each<const L: usize, const M: usize>(
    list: &[i64; L],
    errno: i32,
) -> [libc::sock_filter; M] {
    assert!(M > 2 * L, "body length");
    let mut out = [bpf(0, 0, 0, 0); M];
    let mut i = 0;
    while i < L {
        out[2 * i] = bpf(BPF_JEQ_K, 0, 1, list[i] as u32);
        out[2 * i + 1] = bpf(BPF_RET_K, 0, 0, RET_ERRNO | errno as u32);
        i += 1;
    }
    out
}

const fn no_attr_body() -> [libc::sock_filter; 37] {
    let mut out = deny_each(&BY_NAME, libc::EPERM);
    let b = 2 * BY_NAME.len(); // 28
    out[b] = bpf(BPF_JEQ_K, 0, 1, REMOVEXATTRAT_OR_UTIMENSAT as u32);
    out[b + 1] = bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32);
    // utimensat: allowed only with a null path (args[1], both words 0).
    out[b + 2] = bpf(BPF_JEQ_K, 0, 5, libc::SYS_utimensat as u32);
    out[b + 3] = bpf(BPF_LD_W_ABS, 0, 0, 24); // args[1], low word
    out[b + 4] = bpf(BPF_JEQ_K, 0, 2, 0);
    out[b + 5] = bpf(BPF_LD_W_ABS, 0, 0, 28); // args[1], high word
    out[b + 6] = bpf(BPF_JEQ_K, 1, 0, 0);
    out[b + 7] = bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32);
    out[b + 8] = bpf(BPF_RET_K, 0, 0, RET_ALLOW);
    out
}

/// Every token principal's second filter: the by-name attribute changes of
/// [`BY_NAME`] (and `removexattrat`, and `utimensat` with a path) fail with
/// `EPERM`; everything else is allowed.
pub(super) static NO_ATTR: [libc::sock_filter; 43] = after_prologue(no_attr_body());

/// The kernel objects a token's child would share with the local user when it
/// runs in the daemon's own namespaces, and which Landlock does not govern:
/// SysV shared memory, message queues and semaphores, and the keyrings.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SHARED_OBJECTS: [i64; 14] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semctl,
    libc::SYS_semtimedop,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SHARED_OBJECTS: [i64; 14] = [-1; 14];

const SOCK_DGRAM: u32 = libc::SOCK_DGRAM as u32;
const SOCK_NONBLOCK: u32 = libc::SOCK_NONBLOCK as u32;
const SOCK_CLOEXEC: u32 = libc::SOCK_CLOEXEC as u32;

const fn no_shared_body() -> [libc::sock_filter; 36] {
    let mut out = deny_each(&SHARED_OBJECTS, libc::EPERM);
    let b = 2 * SHARED_OBJECTS.len(); // 28
                                      // socketpair(.., SOCK_DGRAM [| NONBLOCK] [| CLOEXEC], ..): a datagram socket can
                                      // `sendto` a named unix socket, which Landlock does not check.
    out[b] = bpf(BPF_JEQ_K, 0, 6, libc::SYS_socketpair as u32);
    out[b + 1] = bpf(BPF_LD_W_ABS, 0, 0, 24); // args[1] (type), low word
    out[b + 2] = bpf(BPF_JEQ_K, 3, 0, SOCK_DGRAM);
    out[b + 3] = bpf(BPF_JEQ_K, 2, 0, SOCK_DGRAM | SOCK_NONBLOCK);
    out[b + 4] = bpf(BPF_JEQ_K, 1, 0, SOCK_DGRAM | SOCK_CLOEXEC);
    out[b + 5] = bpf(BPF_JEQ_K, 0, 1, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
    out[b + 6] = bpf(BPF_RET_K, 0, 0, RET_ERRNO | libc::EACCES as u32);
    out[b + 7] = bpf(BPF_RET_K, 0, 0, RET_ALLOW);
    out
}

/// A token principal's child outside namespaces: [`SHARED_OBJECTS`] fail with
/// `EPERM`, a datagram `socketpair` with `EACCES`; everything else is allowed.
pub(super) static NO_SHARED: [libc::sock_filter; 42] = after_prologue(no_shared_body());
