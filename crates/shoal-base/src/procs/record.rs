//! The durable record of what a daemon's programs may have left behind
//! (`<state dir>/processes`, 0600, replaced atomically) and the recovery a
//! later daemon runs from it: the recorded cgroup tree is killed and removed,
//! or, in the fallback, the recorded process groups whose leaders' start times
//! still match (so a reused pid is never signalled).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// One daemon's record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The daemon's pid and its start time (`/proc/PID/stat` field 22).
    pub daemon: (i32, u64),
    /// Its cgroup tree (`…/shoal-<pid>`), when it had one.
    pub cgroup: Option<PathBuf>,
    /// Fallback: process groups (leader pid, leader start time).
    pub groups: Vec<(i32, u64)>,
}

const MAGIC: &str = "shoal-processes 1";

impl Record {
    pub fn encode(&self) -> String {
        let mut s = format!("{MAGIC}\ndaemon {} {}\n", self.daemon.0, self.daemon.1);
        if let Some(c) = &self.cgroup {
            s.push_str(&format!("cgroup {}\n", c.display()));
        }
        for (pgid, start) in &self.groups {
            s.push_str(&format!("group {pgid} {start}\n"));
        }
        s
    }

    pub fn decode(text: &str) -> Option<Record> {
        let mut lines = text.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let mut r = Record::default();
        for l in lines {
            let (kind, rest) = l.split_once(' ')?;
            let two = |rest: &str| -> Option<(i32, u64)> {
                let (a, b) = rest.split_once(' ')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            };
            match kind {
                "daemon" => r.daemon = two(rest)?,
                "cgroup" => r.cgroup = Some(PathBuf::from(rest)),
                "group" => r.groups.push(two(rest)?),
                _ => {}
            }
        }
        Some(r)
    }

    /// Replace the file atomically (write a private temporary, rename).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(self.encode().as_bytes())?;
        }
        fs::rename(&tmp, path)
    }

    pub fn load(path: &Path) -> Option<Record> {
        Record::decode(&fs::read_to_string(path).ok()?)
    }
}

/// The fields of `/proc/PID/stat` after the command name: index 0 is field 3
/// (state), 2 is field 5 (pgrp), 19 is field 22 (start time).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The start time of `pid` (field 22), `None` when it does not exist.
pub fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Process group and parent of `pid`, and whether it is a zombie.
pub fn pgrp_ppid(pid: i32) -> Option<(i32, i32, bool)> {
    let f = stat_fields(pid)?;
    Some((
        f.get(2)?.parse().ok()?,
        f.get(1)?.parse().ok()?,
        f.first().is_some_and(|s| s == "Z"),
    ))
}

/// Every pid in /proc.
pub fn all_pids() -> Vec<i32> {
    fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The members of the group `pgid` whose leader started at `start`: none when
/// the pid is now another process's (its start time differs). A group id is
/// never reused while any member lives, so with the leader gone the members
/// left are the recorded group's.
pub fn members(pgid: i32, start: u64) -> Vec<i32> {
    if let Some(t) = start_time(pgid) {
        if t != start {
            return Vec::new();
        }
    }
    all_pids()
        .into_iter()
        .filter(|&p| pgrp_ppid(p).is_some_and(|(g, _, _)| g == pgid))
        .collect()
}

/// SIGKILL the recorded group (see [`members`]); how many were signalled.
pub fn kill_group(pgid: i32, start: u64) -> usize {
    let m = members(pgid, start);
    if m.is_empty() {
        return 0;
    }
    if let Some(g) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(g, Signal::KILL);
    }
    m.len()
}

/// Whether the daemon of `rec` still runs (same pid, same start time).
fn daemon_alive(rec: &Record) -> bool {
    start_time(rec.daemon.0) == Some(rec.daemon.1)
}

/// At start: kill and remove what a previous, dead daemon of this state dir
/// recorded, then drop its record. Returns how many processes were killed.
pub fn recover(path: &Path) -> usize {
    let Some(rec) = Record::load(path) else {
        let _ = fs::remove_file(path);
        return 0;
    };
    if rec.daemon.0 == std::process::id() as i32 {
        // Our own pid from an earlier life (a pid namespace restarted): dead.
    } else if daemon_alive(&rec) {
        tracing::warn!(
            pid = rec.daemon.0,
            "the daemon that recorded {} still runs; its processes are left alone",
            path.display()
        );
        return 0;
    }
    let mut killed = 0;
    if let Some(dir) = &rec.cgroup {
        let named = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("shoal-"));
        if named && super::cgroup::is_cgroup(dir) {
            killed += super::cgroup::kill_tree(dir, Duration::from_secs(5));
        }
    }
    for (pgid, start) in &rec.groups {
        killed += kill_group(*pgid, *start);
    }
    if killed > 0 {
        tracing::warn!(
            killed,
            daemon = rec.daemon.0,
            "killed processes a previous daemon left behind"
        );
    }
    let _ = fs::remove_file(path);
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let r = Record {
            daemon: (42, 7),
            cgroup: Some("/sys/fs/cgroup/x/shoal-42".into()),
            groups: vec![(100, 5), (200, 6)],
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode("junk"), None);
    }

    #[test]
    fn own_start_time_is_read() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        let (g, _, zombie) = pgrp_ppid(me).expect("stat");
        assert!(g > 0 && !zombie);
    }
}
