//! `shoal-confine run` inside the namespaces: confine, run, report.

use std::ffi::OsString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::{Encoded, PASSED};

/// `shoal-confine run FD RULES PROGRAM ARGV0 ARGS..` inside the namespace:
/// apply the rules to this process, fork, exec the program in the child,
/// write its raw wait status to FD and exit the way a shell reports it.
/// `args` starts after `run`.
pub fn confine_main(args: Vec<OsString>) -> i32 {
    match confine_run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shoal: cannot start the program in its sandbox: {e}");
            126
        }
    }
}

fn confine_run(args: Vec<OsString>) -> Result<i32, String> {
    let mut it = args.into_iter();
    let (Some(fd), Some(rules), Some(program), Some(argv0)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return Err("usage: shoal-confine run FD RULES PROGRAM ARGV0 [ARGS..]".into());
    };
    let fd: RawFd = fd
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|fd| *fd >= 3)
        .ok_or("bad status descriptor")?;
    // This process stays beside the program (its pid 1) until it ends: the
    // program may not reach it through `/proc/1` (its descriptors: the
    // status pipe, a launcher's pipe the daemon inherited; its memory).
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| e.to_string())?;
    // SAFETY: `fd` is the status pipe `bwrap` left open for this process and
    // named on its command line; nothing else in this process owns it. Every
    // other descriptor above stdio is one this process inherited and does
    // not use (nothing here has opened one yet): closed.
    let status = unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, (fd - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (fd + 1) as u32, u32::MAX, 0u32);
        OwnedFd::from_raw_fd(fd)
    };
    let encoded: Encoded = serde_json::from_slice(rules.as_bytes()).map_err(|e| e.to_string())?;
    let tmpdir = encoded.tmpdir.clone();
    let rules = encoded.rules()?;
    let rs = rules
        .ruleset_running(Path::new(&program))
        .map_err(|e| e.to_string())?;
    rs.confine().apply().map_err(|e| e.to_string())?;
    rustix::io::fcntl_setfd(&status, rustix::io::FdFlags::CLOEXEC).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&program);
    cmd.arg0(argv0);
    cmd.args(it);
    if let Some(t) = tmpdir {
        cmd.env("TMPDIR", t);
    }
    // SAFETY: between fork and exec the child only resets the dispositions
    // of a few signals (`signal` is async-signal-safe) and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            for s in PASSED {
                libc::signal(s, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let st = match cmd.spawn() {
        Ok(mut child) => {
            use std::os::unix::process::ExitStatusExt;
            child.wait().map_err(|e| e.to_string())?.into_raw()
        }
        Err(e) => {
            eprintln!("shoal: {}: {e}", Path::new(&program).display());
            // As a shell reports it: 127 not found, 126 not runnable.
            (if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            }) << 8
        }
    };
    let _ = rustix::io::write(&status, &st.to_le_bytes());
    Ok(if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        1
    })
}
