//! The seccomp programs run through a small classic-BPF interpreter over a
//! table of system calls and arguments: each row's allow / errno / kill
//! verdict is asserted, instruction by instruction as the kernel would
//! execute them. Tests only; installs nothing.

use super::seccomp::{AUDIT_ARCH, NO_ATTR, NO_SHARED, NO_UNIX, SEAL};

/// What a filter returns for a call.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Allow,
    Errno(i32),
    Kill,
}

/// `struct seccomp_data` as the filter reads it (native endianness).
fn data(arch: u32, nr: i64, args: [u64; 6]) -> Vec<u8> {
    let mut d = Vec::with_capacity(64);
    d.extend_from_slice(&(nr as u32).to_ne_bytes());
    d.extend_from_slice(&arch.to_ne_bytes());
    d.extend_from_slice(&0u64.to_ne_bytes()); // instruction_pointer
    for a in args {
        d.extend_from_slice(&a.to_ne_bytes());
    }
    d
}

/// Run `prog` over `data`: the subset of classic BPF the filters use
/// (`ld [k]`, `jeq #k`, `jge #k`, `ret #k`); anything else fails the test,
/// as does a jump or load out of bounds or a fall off the end.
fn run(prog: &[libc::sock_filter], data: &[u8]) -> Verdict {
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    loop {
        let ins = prog.get(pc).expect("the program ends in a return");
        pc += 1;
        match ins.code {
            0x20 => {
                let k = ins.k as usize;
                assert!(k.is_multiple_of(4) && k + 4 <= data.len(), "load at {k}");
                acc = u32::from_ne_bytes(data[k..k + 4].try_into().expect("4 bytes"));
            }
            0x15 | 0x35 => {
                let taken = if ins.code == 0x15 {
                    acc == ins.k
                } else {
                    acc >= ins.k
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
                assert!(pc < prog.len(), "jump out of the program");
            }
            0x06 => {
                return match ins.k & 0xffff_0000 {
                    0x7fff_0000 => Verdict::Allow,
                    0x0005_0000 => Verdict::Errno((ins.k & 0xffff) as i32),
                    0x8000_0000 => Verdict::Kill,
                    other => panic!("unexpected action {other:#x}"),
                }
            }
            code => panic!("instruction {code:#x} outside the interpreted subset"),
        }
    }
}

fn call(prog: &[libc::sock_filter], nr: i64, args: [u64; 6]) -> Verdict {
    run(prog, &data(AUDIT_ARCH.expect("a supported arch"), nr, args))
}

const EACCES: Verdict = Verdict::Errno(libc::EACCES);
const EPERM: Verdict = Verdict::Errno(libc::EPERM);

#[test]
fn every_filter_kills_foreign_abis() {
    let Some(arch) = AUDIT_ARCH else { return };
    for prog in [&SEAL[..], &NO_UNIX[..], &NO_ATTR[..], &NO_SHARED[..]] {
        // A 32-bit (or any other) architecture.
        assert_eq!(
            run(prog, &data(0x4000_0003, libc::SYS_read, [0; 6])),
            Verdict::Kill
        );
        // x32 numbers (bit 30 set).
        assert_eq!(
            run(prog, &data(arch, 0x4000_0000 | libc::SYS_read, [0; 6])),
            Verdict::Kill
        );
        assert_eq!(call(prog, libc::SYS_read, [0; 6]), Verdict::Allow);
    }
}

#[test]
fn hermetic_children_create_no_socket() {
    if AUDIT_ARCH.is_none() {
        return;
    }
    let table: &[(i64, [u64; 6], Verdict)] = &[
        (
            libc::SYS_socket,
            [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            EACCES,
        ),
        (
            libc::SYS_socket,
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            EACCES,
        ),
        (
            libc::SYS_socket,
            [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
            EACCES,
        ),
        (libc::SYS_io_uring_setup, [8, 0, 0, 0, 0, 0], EPERM),
        (
            libc::SYS_socketpair,
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            Verdict::Allow,
        ),
        (libc::SYS_openat, [0; 6], Verdict::Allow),
        (libc::SYS_connect, [3, 0, 0, 0, 0, 0], Verdict::Allow),
    ];
    for (nr, args, want) in table {
        assert_eq!(&call(&SEAL, *nr, *args), want, "syscall {nr} {args:?}");
    }
}

#[test]
fn token_children_create_no_unix_socket() {
    if AUDIT_ARCH.is_none() {
        return;
    }
    let unix = libc::AF_UNIX as u64;
    let table: &[(i64, [u64; 6], Verdict)] = &[
        (libc::SYS_socket, [unix, 1, 0, 0, 0, 0], EACCES),
        (libc::SYS_socket, [unix, 2, 0, 0, 0, 0], EACCES),
        // The kernel reads an int: high bits do not hide AF_UNIX.
        (libc::SYS_socket, [(1 << 32) | unix, 1, 0, 0, 0, 0], EACCES),
        (
            libc::SYS_socket,
            [libc::AF_INET as u64, 1, 0, 0, 0, 0],
            Verdict::Allow,
        ),
        (
            libc::SYS_socket,
            [libc::AF_INET6 as u64, 2, 0, 0, 0, 0],
            Verdict::Allow,
        ),
        (libc::SYS_socketpair, [unix, 1, 0, 0, 0, 0], Verdict::Allow),
        (libc::SYS_io_uring_setup, [8, 0, 0, 0, 0, 0], EPERM),
        (libc::SYS_write, [unix, 0, 0, 0, 0, 0], Verdict::Allow),
    ];
    for (nr, args, want) in table {
        assert_eq!(&call(&NO_UNIX, *nr, *args), want, "syscall {nr} {args:?}");
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn token_children_change_no_attribute_by_name() {
    let table: &[(i64, [u64; 6], Verdict)] = &[
        (libc::SYS_chmod, [0x1000, 0o777, 0, 0, 0, 0], EPERM),
        (libc::SYS_fchmodat, [0, 0x1000, 0o777, 0, 0, 0], EPERM),
        (452, [0; 6], EPERM), // fchmodat2
        (libc::SYS_chown, [0; 6], EPERM),
        (libc::SYS_lchown, [0; 6], EPERM),
        (libc::SYS_fchownat, [0; 6], EPERM),
        (libc::SYS_utime, [0; 6], EPERM),
        (libc::SYS_utimes, [0; 6], EPERM),
        (libc::SYS_futimesat, [0; 6], EPERM),
        (libc::SYS_setxattr, [0; 6], EPERM),
        (libc::SYS_lsetxattr, [0; 6], EPERM),
        (libc::SYS_removexattr, [0; 6], EPERM),
        (libc::SYS_lremovexattr, [0; 6], EPERM),
        (463, [0; 6], EPERM), // setxattrat
        (466, [0; 6], EPERM), // removexattrat
        // utimensat with a path is by name; with a null path it is futimens.
        (libc::SYS_utimensat, [3, 0x1000, 0, 0, 0, 0], EPERM),
        (libc::SYS_utimensat, [3, 0x1_0000_0000, 0, 0, 0, 0], EPERM),
        (libc::SYS_utimensat, [3, 0, 0, 0, 0, 0], Verdict::Allow),
        // The descriptor forms stay.
        (libc::SYS_fchmod, [3, 0o644, 0, 0, 0, 0], Verdict::Allow),
        (libc::SYS_fchown, [3, 0, 0, 0, 0, 0], Verdict::Allow),
        (libc::SYS_fsetxattr, [0; 6], Verdict::Allow),
        (libc::SYS_openat, [0; 6], Verdict::Allow),
        (
            libc::SYS_socket,
            [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            Verdict::Allow,
        ),
    ];
    for (nr, args, want) in table {
        assert_eq!(&call(&NO_ATTR, *nr, *args), want, "syscall {nr} {args:?}");
    }
}

#[test]
fn children_outside_namespaces_share_no_ipc_keyring_or_datagram_pair() {
    if AUDIT_ARCH.is_none() {
        return;
    }
    let unix = libc::AF_UNIX as u64;
    let (dgram, stream) = (libc::SOCK_DGRAM as u64, libc::SOCK_STREAM as u64);
    let (nb, ce) = (libc::SOCK_NONBLOCK as u64, libc::SOCK_CLOEXEC as u64);
    let mut table: Vec<(i64, [u64; 6], Verdict)> = [
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
    ]
    .iter()
    .map(|nr| (*nr, [0u64; 6], EPERM))
    .collect();
    for ty in [dgram, dgram | nb, dgram | ce, dgram | nb | ce] {
        table.push((libc::SYS_socketpair, [unix, ty, 0, 0, 0, 0], EACCES));
    }
    table.extend([
        (
            libc::SYS_socketpair,
            [unix, stream, 0, 0, 0, 0],
            Verdict::Allow,
        ),
        (
            libc::SYS_socketpair,
            [unix, stream | ce, 0, 0, 0, 0],
            Verdict::Allow,
        ),
        (libc::SYS_socket, [unix, dgram, 0, 0, 0, 0], Verdict::Allow),
        (libc::SYS_shmdt, [0; 6], Verdict::Allow),
        (libc::SYS_mmap, [0; 6], Verdict::Allow),
        (libc::SYS_openat, [0; 6], Verdict::Allow),
    ]);
    for (nr, args, want) in &table {
        assert_eq!(&call(&NO_SHARED, *nr, *args), want, "syscall {nr} {args:?}");
    }
}
