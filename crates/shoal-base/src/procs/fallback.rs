//! Without a writable cgroup2: the daemon is a child subreaper (orphaned
//! descendants are re-parented to it, not to init), programs get
//! `PR_SET_PDEATHSIG(SIGKILL)` (see [`super::ChildJoin`]), and the process
//! group of every live program is tracked with its leader's start time, in
//! memory and in the durable record. What this misses is in
//! docs/processes.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitIdOptions};

use super::record;
use crate::sync::Locked;

struct Group {
    start: u64,
    session: Arc<str>,
}

/// Held (shared) by every spawn from before its fork until its child is
/// tracked, and (exclusively) by the orphan reaper, which so never reaps a
/// program whose own thread is about to wait for it.
pub static SPAWNING: RwLock<()> = RwLock::new(());

/// Live programs' groups: leader pid → start time and session.
static GROUPS: Mutex<BTreeMap<i32, Group>> = Mutex::new(BTreeMap::new());

/// Become a child subreaper and start the reaper of adopted orphans.
pub fn start() {
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        tracing::warn!("PR_SET_CHILD_SUBREAPER failed: {e}");
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("shoal-orphans".into())
        .stack_size(64 * 1024)
        .spawn(|| loop {
            std::thread::sleep(Duration::from_secs(2));
            reap_orphans();
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the orphan reaper: {e}");
    }
}

pub fn track(pid: i32, session: Arc<str>) {
    let start = record::start_time(pid).unwrap_or(0);
    GROUPS.locked().insert(pid, Group { start, session });
}

pub fn untrack(pid: i32) {
    GROUPS.locked().remove(&pid);
}

/// The tracked groups, for the record.
pub fn groups() -> Vec<(i32, u64)> {
    GROUPS.locked().iter().map(|(p, g)| (*p, g.start)).collect()
}

/// Our children that are not tracked programs (orphans adopted as subreaper):
/// `(pid, zombie)`.
fn adopted() -> Vec<(i32, bool)> {
    let me = std::process::id() as i32;
    let tracked = GROUPS.locked().keys().copied().collect::<Vec<_>>();
    let ptys: Vec<i32> = super::pty_children().keys().copied().collect();
    record::all_pids()
        .into_iter()
        .filter(|p| !tracked.contains(p) && !ptys.contains(p))
        .filter_map(|p| {
            let (_, ppid, zombie) = record::pgrp_ppid(p)?;
            (ppid == me).then_some((p, zombie))
        })
        .collect()
}

/// Reap adopted orphans that have exited (never a tracked program: their
/// own threads wait for those).
fn reap_orphans() {
    let _gate = SPAWNING.write().unwrap_or_else(|e| e.into_inner());
    for (pid, zombie) in adopted() {
        if !zombie {
            continue;
        }
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::waitid(
                rustix::process::WaitId::Pid(p),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            );
        }
    }
}

/// SIGKILL the tracked groups of `session` (what escaped them with `setsid`
/// is not found: see docs/processes.md).
pub fn kill_session(session: &str) {
    let groups: Vec<(i32, u64)> = GROUPS
        .locked()
        .iter()
        .filter(|(_, g)| &*g.session == session)
        .map(|(p, g)| (*p, g.start))
        .collect();
    for (pgid, start) in groups {
        record::kill_group(pgid, start);
    }
}

/// Daemon stop: SIGKILL every tracked group, then every adopted orphan
/// (until none is left, bounded). How many were killed.
pub fn kill_all() -> usize {
    let mut n = 0;
    for (pgid, start) in groups() {
        n += record::kill_group(pgid, start);
    }
    let mut seen = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let live: Vec<i32> = adopted()
            .into_iter()
            .filter(|(_, z)| !z)
            .map(|(p, _)| p)
            .collect();
        reap_orphans();
        if live.is_empty() || std::time::Instant::now() >= deadline {
            return n;
        }
        for &p in &live {
            if let Some(pid) = Pid::from_raw(p) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            if seen.insert(p) {
                n += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
