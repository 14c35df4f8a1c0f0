//! Durable reservation of a session's `out:N` numbers.
//!
//! A number is handed out only once it is durably reserved in the journal,
//! so a crash between handing out `out:N` and committing its row can never
//! make the next daemon hand the same number out again. Numbers are reserved
//! a block at a time. The next block is requested in the background as soon
//! as an eighth of the current one is used, on every path that hands a
//! number out ([`RefReservation::ensure`] before, [`RefReservation::ahead`]
//! after): its commit rides the writer's own schedule, and an exec waits for
//! the journal only when it reaches a number whose reservation is not durable
//! yet (the first block, a disk slower than most of a block of execs, or a
//! failing one). Every such wait doubles the block size (from [`BLOCK`] up to
//! [`MAX_BLOCK`]), so a slow disk stops stalling execs after a few blocks; a
//! crash skips at most a block of numbers (refs are never reissued, only
//! skipped), and a clean stop gives the unused ones back. [`RefReservation::waits`] counts those waits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::writer::JournalWriter;
use super::{Durability, Op, Result};
use shoal_base::sync::Locked;

/// `out:N` numbers reserved by the first journal write of a session.
pub const BLOCK: u64 = 256;

/// Each wait doubles the block, up to this: a disk whose commits take longer
/// than a block of execs gets blocks that outlast its commits.
pub const MAX_BLOCK: u64 = 1 << 16;

/// One session's reservation state.
#[derive(Debug, Default)]
pub struct RefReservation {
    marks: Mutex<Marks>,
    /// The highest mark a background reservation made durable (set by the
    /// writer thread when its commit returns).
    confirmed: Arc<AtomicU64>,
    /// Times a number had to wait for its reservation's commit.
    waits: AtomicU64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Marks {
    /// Numbers up to this one are durably reserved.
    durable: u64,
    /// The highest mark asked for (durable or still committing).
    requested: u64,
    /// Numbers per reservation now (0: [`BLOCK`]).
    block: u64,
}

impl Marks {
    fn block(&self) -> u64 {
        if self.block == 0 {
            BLOCK
        } else {
            self.block
        }
    }
}

impl RefReservation {
    /// Numbers up to `last` are already used or reserved (read from the
    /// journal before the first number is handed out).
    pub fn start_at(&self, last: u64) {
        *self.marks.locked() = Marks {
            durable: last,
            requested: last,
            block: BLOCK,
        };
        self.confirmed.store(last, Ordering::Release);
    }

    /// Times handing out a number waited for the journal (`daemon.status`
    /// `ref_waits`: 1 for the first block, then 0 while the disk keeps up).
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Is `n` durably reserved?
    pub fn covers(&self, n: u64) -> bool {
        n <= self.refresh().durable
    }

    /// The marks, with what background commits confirmed since.
    fn refresh(&self) -> Marks {
        let mut m = self.marks.locked();
        m.durable = m.durable.max(self.confirmed.load(Ordering::Acquire));
        *m
    }

    /// Make sure `next` is durably reserved before it is handed out, and ask
    /// for the following block ahead of time. Blocks only when `next` is past
    /// the durable mark.
    pub fn ensure(&self, writer: &JournalWriter, session: &str, next: u64) -> Result<()> {
        let mut m = self.marks.locked();
        m.durable = m.durable.max(self.confirmed.load(Ordering::Acquire));
        if next > m.durable {
            self.waits.fetch_add(1, Ordering::Relaxed);
            if next <= m.requested {
                // The block is committing: wait for it (a durable flush
                // commits everything queued, the reservation included).
                writer.flush()?;
                m.durable = m.requested;
            } else {
                let upto = next + m.block() - 1;
                submit_durably(writer, session, upto)?;
                m.durable = upto;
                m.requested = upto;
            }
            m.block = (m.block() * 2).min(MAX_BLOCK);
        }
        self.ask_ahead(&mut m, writer, session, next);
        Ok(())
    }

    /// `used` was just handed out (it is durably reserved): ask for the next
    /// block if less than half of this one is left. Never waits.
    pub fn ahead(&self, writer: &JournalWriter, session: &str, used: u64) {
        let mut m = self.marks.locked();
        m.durable = m.durable.max(self.confirmed.load(Ordering::Acquire));
        if used <= m.durable {
            self.ask_ahead(&mut m, writer, session, used);
        }
    }

    fn ask_ahead(&self, m: &mut Marks, writer: &JournalWriter, session: &str, next: u64) {
        let block = m.block();
        if m.requested == m.durable && m.durable - next < block - block / 8 {
            let upto = m.durable + block;
            if self.request_ahead(writer, session, upto).is_ok() {
                m.requested = upto;
            }
        }
    }

    /// Queue a reservation up to `upto` without waiting; `confirmed` moves
    /// when its durable commit returns.
    fn request_ahead(&self, writer: &JournalWriter, session: &str, upto: u64) -> Result<()> {
        let op = Op::ReserveRefs {
            session: session.to_string(),
            upto,
        };
        let confirmed = self.confirmed.clone();
        match writer.config().durability {
            Durability::Immediate => {
                let done: super::writer::Done = Box::new(move |r| {
                    if r.is_ok() {
                        confirmed.fetch_max(upto, Ordering::AcqRel);
                    }
                });
                writer.submit(op, Some(done)).map(|_| ())
            }
            Durability::Batched => {
                writer.submit(op, None)?;
                writer.flush_with(Box::new(move |r| {
                    if r.is_ok() {
                        confirmed.fetch_max(upto, Ordering::AcqRel);
                    }
                }))
            }
        }
    }

    /// At a clean shutdown: give back the numbers after `used` durably, so
    /// the next start continues right after the last one handed out.
    pub fn release(&self, writer: &JournalWriter, session: &str, used: u64) -> Result<()> {
        let mut m = self.marks.locked();
        if used >= m.durable.max(m.requested) {
            return Ok(());
        }
        let op = Op::ReleaseRefs {
            session: session.to_string(),
            upto: used,
        };
        writer.submit_wait(op).and_then(|_| writer.flush())?;
        // Queue order puts the release after any reservation still committing.
        self.confirmed.store(used, Ordering::Release);
        *m = Marks {
            durable: used,
            requested: used,
            block: m.block,
        };
        Ok(())
    }
}

/// Reserve up to `upto` and wait until that is durable.
fn submit_durably(writer: &JournalWriter, session: &str, upto: u64) -> Result<()> {
    let op = Op::ReserveRefs {
        session: session.to_string(),
        upto,
    };
    writer.submit_wait(op)?;
    if writer.config().durability == Durability::Batched {
        writer.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Store, StoreOptions, WriterConfig};

    fn writer(dir: &tempfile::TempDir, durability: Durability) -> JournalWriter {
        let store = Store::open(dir.path().join("j.redb"), StoreOptions::default()).expect("open");
        let cfg = WriterConfig {
            durability,
            ..WriterConfig::default()
        };
        JournalWriter::start(Arc::new(store), cfg).expect("writer")
    }

    /// The first number waits for a durable block; the next block is asked
    /// for ahead of time, so numbers well past the first block need no wait,
    /// and the store's mark always covers every number handed out.
    #[test]
    fn blocks_are_reserved_ahead_and_durably() {
        for durability in [Durability::Batched, Durability::Immediate] {
            let dir = tempfile::tempdir().expect("tempdir");
            let w = writer(&dir, durability);
            let r = RefReservation::default();
            r.start_at(0);
            assert!(!r.covers(1));
            r.ensure(&w, "s", 1).unwrap();
            assert!(r.covers(BLOCK));
            assert_eq!(w.store().refs_reserved("s").unwrap(), BLOCK);
            for n in 2..=3 * BLOCK {
                r.ensure(&w, "s", n).unwrap();
                assert!(r.covers(n), "{durability:?}: {n}");
            }
            w.flush().unwrap();
            let mark = w.store().refs_reserved("s").unwrap();
            assert!(mark >= 3 * BLOCK, "{durability:?}: mark {mark}");
            // A clean stop gives back what was never handed out.
            r.release(&w, "s", 3 * BLOCK).unwrap();
            assert_eq!(w.store().refs_reserved("s").unwrap(), 3 * BLOCK);
            assert!(!r.covers(3 * BLOCK + 1));
        }
    }

    /// Numbers handed out without `ensure` (the quick path) still get the
    /// next block ahead of time through `ahead`: no wait after the first.
    #[test]
    fn ahead_keeps_the_quick_path_from_waiting() {
        for durability in [Durability::Batched, Durability::Immediate] {
            let dir = tempfile::tempdir().expect("tempdir");
            let w = writer(&dir, durability);
            let r = RefReservation::default();
            r.start_at(0);
            r.ensure(&w, "s", 1).unwrap();
            for n in 2..=4 * BLOCK {
                // What the quick path does: hand out only a covered number.
                while !r.covers(n) {
                    w.flush().unwrap();
                }
                r.ahead(&w, "s", n);
            }
            assert_eq!(r.waits(), 1, "{durability:?}");
        }
    }

    /// Restarting from a stored mark continues past it.
    #[test]
    fn start_at_a_stored_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = writer(&dir, Durability::Batched);
        let r = RefReservation::default();
        r.start_at(500);
        assert!(r.covers(500));
        r.ensure(&w, "s", 501).unwrap();
        assert_eq!(w.store().refs_reserved("s").unwrap(), 500 + BLOCK);
    }
}
