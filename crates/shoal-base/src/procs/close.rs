//! A session's close, on a thread of its own ([`run`]), and what it waits
//! on: the session's live programs and spawns in flight ([`Counts`]), whose
//! every change wakes it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{cgroup, fallback, session_path, Manager, Mode};
use crate::sync::{Changes, Locked};

/// Per session: programs started and not reaped (`live`), spawns prepared
/// and not yet started or abandoned (`in_flight`). Each change is notified.
#[derive(Default)]
pub(super) struct Counts {
    live: Mutex<HashMap<Arc<str>, usize>>,
    in_flight: Mutex<HashMap<Arc<str>, usize>>,
    changed: Changes,
}

fn add(table: &Mutex<HashMap<Arc<str>, usize>>, session: &Arc<str>, up: bool) {
    let mut t = table.locked();
    if up {
        *t.entry(session.clone()).or_default() += 1;
    } else if let Some(n) = t.get_mut(session) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            t.remove(session);
        }
    }
}

impl Counts {
    /// A program of `session` started (`up`) or was reaped.
    pub(super) fn live(&self, session: &Arc<str>, up: bool) {
        add(&self.live, session, up);
        self.changed.notify();
    }

    /// A spawn for `session` is prepared (`up`), or started or abandoned.
    pub(super) fn in_flight(&self, session: &Arc<str>, up: bool) {
        add(&self.in_flight, session, up);
        self.changed.notify();
    }

    pub(super) fn live_of(&self, session: &str) -> usize {
        self.live.locked().get(session).copied().unwrap_or(0)
    }

    /// Nothing of `session` runs or is about to start.
    fn settled(&self, session: &str) -> bool {
        self.live_of(session) == 0 && !self.in_flight.locked().contains_key(session)
    }
}

/// The close thread: wait (at most `grace`) for the session's programs to
/// end after their polite signals, then kill what is left of its tree.
pub(super) fn run(
    m: &'static Manager,
    session: Arc<str>,
    closing: Option<PathBuf>,
    grace: Duration,
) {
    let c = &m.counts;
    c.changed
        .wait_until(Instant::now() + grace, || c.live_of(&session) == 0);
    let Mode::Cgroup { base } = &m.mode else {
        return fallback::kill_session(&session);
    };
    let mut n = 0;
    if let Some(dir) = &closing {
        n += cgroup::kill_tree(dir, Duration::from_secs(2));
    }
    // A spawn in flight at the close joins a little later: in the renamed
    // tree, or in the session's directory it made again (prepare refuses
    // every spawn after the close). Killed again until the session's
    // programs are all reaped and its spawns settled (each change of those
    // wakes the wait); the remade directory only while no session of the
    // name has opened since. A process joining a cgroup (the child's own
    // write to `cgroup.procs`) tells us nothing short of an inotify watch on
    // `cgroup.events`, so the re-kill is also re-checked every 20 ms.
    let again = session_path(base, &session);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(dir) = &closing {
            if cgroup::populated(dir) {
                n += cgroup::kill_tree(dir, Duration::from_secs(2));
            }
        }
        {
            let closed = m.closed.locked();
            if closed.contains(&session) && cgroup::populated(&again) {
                let _ = cgroup::kill(&again);
                n += 1;
            }
        }
        if c.settled(&session) || Instant::now() >= until {
            break;
        }
        let recheck = (Instant::now() + Duration::from_millis(20)).min(until);
        c.changed.wait_until(recheck, || c.settled(&session));
    }
    if n > 0 {
        tracing::info!(session = %session, killed = n, "session closed: its processes were killed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The close's wait is woken by the counts' changes: a program reaped on
    /// another thread ends a 60 s wait long before its deadline.
    #[test]
    fn a_wait_on_the_counts_ends_when_the_last_program_is_reaped() {
        let c = Arc::new(Counts::default());
        let s: Arc<str> = "s".into();
        c.live(&s, true);
        c.in_flight(&s, true);
        let (c2, s2) = (c.clone(), s.clone());
        let reaper = std::thread::spawn(move || {
            c2.in_flight(&s2, false);
            c2.live(&s2, false);
        });
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(60);
        assert!(c.changed.wait_until(deadline, || c.settled(&s)));
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "woken by the change"
        );
        reaper.join().unwrap();
        assert_eq!(c.live_of(&s), 0);
    }
}
