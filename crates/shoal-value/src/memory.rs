//! Per-session memory accounting (`[limits] session_memory`, docs/protocol.md §10).
//!
//! A counting global allocator attributes every allocation made on an
//! evaluation thread (the exec thread, task threads, `parallel` workers) to
//! the budget of the session that thread evaluates for; frees on those
//! threads are credited back. What is measured is the net growth during the
//! current exec (the budget is reset when an exec starts): past the limit
//! the budget is marked exceeded and the evaluator's next checkpoint (every
//! statement, call and every 1024 items of a collection loop) fails with
//! `resource_limit`. An allocator cannot fail an allocation without
//! aborting the process, so allocations sized by user input (materialising
//! a range, `map` over one, reading a file, parsing JSON) are checked with
//! [`reserve`] *before* they are made.
//!
//! Memory the session holds outside evaluation (its PTYs' emulators) is
//! *held*: [`MemBudget::hold`] charges a bound up front and refuses what
//! does not fit, [`MemBudget::release`] gives it back. Held bytes count
//! against the same limit as evaluation and survive the reset of an exec.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use crate::{ErrorCode, SResult, ShoalError};

/// The default of `[limits] session_memory` (1 GiB).
pub const DEFAULT_LIMIT: u64 = 1 << 30;

/// One session's memory budget. Budgets live for the rest of the process
/// (they are a few bytes each, one per language session), so a thread that
/// outlives its session never holds a dangling budget.
#[derive(Debug)]
pub struct MemBudget {
    limit: AtomicU64,
    used: AtomicI64,
    /// Bytes held outside evaluation (PTYs), not reset by an exec.
    held: AtomicU64,
    exceeded: AtomicBool,
}

impl MemBudget {
    /// A new budget of `limit` bytes (0: [`DEFAULT_LIMIT`]).
    pub fn leak(limit: u64) -> &'static MemBudget {
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
        Box::leak(Box::new(MemBudget {
            limit: AtomicU64::new(limit),
            used: AtomicI64::new(0),
            held: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
        }))
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Change the limit (0: [`DEFAULT_LIMIT`]).
    pub fn set_limit(&self, limit: u64) {
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Bytes held outside evaluation.
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Charge `bytes` held outside evaluation, if they fit beside what is
    /// held and what the current evaluation uses; else `Err(held now)`.
    pub fn hold(&self, bytes: u64) -> Result<(), u64> {
        let evaluating = self.used().max(0) as u64;
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                let total = held.saturating_add(bytes).saturating_add(evaluating);
                (total <= self.limit()).then_some(held + bytes)
            })
            .map(|_| ())
    }

    /// Give back `bytes` of [`hold`](Self::hold).
    pub fn release(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(bytes))
            });
    }

    /// Net bytes allocated since the last [`reset`](Self::reset) (may be
    /// negative when older values were freed).
    pub fn used(&self) -> i64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Start counting afresh (an exec starts).
    pub fn reset(&self) {
        self.used.store(0, Ordering::Relaxed);
        self.exceeded.store(false, Ordering::Relaxed);
    }

    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    /// `Err(resource_limit)` once the budget was exceeded.
    pub fn check(&self) -> SResult<()> {
        if self.exceeded() {
            Err(held_limit_error(self.limit(), self.held()))
        } else {
            Ok(())
        }
    }

    /// Bytes evaluation may still allocate.
    fn room(&self) -> u64 {
        self.limit()
            .saturating_sub(self.held())
            .saturating_sub(self.used().max(0) as u64)
    }

    fn charge(&self, delta: i64) {
        let now = self.used.fetch_add(delta, Ordering::Relaxed) + delta;
        if delta > 0
            && now.saturating_add(self.held() as i64) > self.limit() as i64
            && !self.exceeded()
        {
            self.exceeded.store(true, Ordering::Relaxed);
        }
    }
}

/// The `resource_limit` error naming the key.
pub fn limit_error(limit: u64) -> ShoalError {
    held_limit_error(limit, 0)
}

/// [`limit_error`] saying what the session's PTYs hold of the limit.
fn held_limit_error(limit: u64, held: u64) -> ShoalError {
    let size = crate::render::size;
    let held = if held > 0 {
        format!(" (its PTYs hold {} of it)", size(held))
    } else {
        String::new()
    };
    ShoalError::new(
        ErrorCode::ResourceLimit,
        format!(
            "session_memory: this evaluation needs more than the session's memory limit of {}{held}",
            size(limit)
        ),
    )
    .with_hint(
        "raise [limits] session_memory in shoal.toml, or work on smaller pieces (streams, take(n))",
    )
}

thread_local! {
    static CURRENT: Cell<Option<&'static MemBudget>> = const { Cell::new(None) };
}

/// Attribute this thread's allocations to `b` from now on.
pub fn attach(b: &'static MemBudget) {
    let _ = CURRENT.try_with(|c| c.set(Some(b)));
}

/// Attribute this thread's allocations to `b` again (what [`current`] said
/// before an [`attach`]): `None` detaches.
pub fn restore(b: Option<&'static MemBudget>) {
    let _ = CURRENT.try_with(|c| c.set(b));
}

/// The budget this thread's allocations count against, if any.
pub fn current() -> Option<&'static MemBudget> {
    CURRENT.try_with(Cell::get).ok().flatten()
}

/// Check, before making it, that an allocation of `bytes` fits the current
/// thread's budget (or the default limit on a thread without one).
pub fn reserve(bytes: u64) -> SResult<()> {
    let (room, limit) = room();
    if bytes > room {
        Err(held_limit_error(
            limit,
            current().map_or(0, MemBudget::held),
        ))
    } else {
        Ok(())
    }
}

/// Bytes the current thread may still allocate (what the session's PTYs
/// hold is not available), and the limit.
pub fn room() -> (u64, u64) {
    match current() {
        Some(b) => (b.room(), b.limit()),
        None => (DEFAULT_LIMIT, DEFAULT_LIMIT),
    }
}

/// Read all of `r` (a file, possibly endless like `/dev/zero`) within the
/// budget: `Ok(Err(resource_limit))` past it.
pub fn read_bounded(r: impl std::io::Read) -> std::io::Result<SResult<Vec<u8>>> {
    use std::io::Read as _;
    let (room, limit) = room();
    let mut buf = Vec::new();
    r.take(room.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > room {
        return Ok(Err(limit_error(limit)));
    }
    Ok(Ok(buf))
}

/// [`reserve`] for `n` values of type `T`.
pub fn reserve_items<T>(n: usize) -> SResult<()> {
    reserve((n as u64).saturating_mul(std::mem::size_of::<T>().max(1) as u64))
}

#[inline]
fn charge(delta: i64) {
    if let Ok(Some(b)) = CURRENT.try_with(Cell::get) {
        b.charge(delta);
    }
}

/// The process allocator: the system allocator plus attribution.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the bookkeeping touches only atomics and a const-initialised
// thread-local without destructor (it never allocates).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            charge(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            charge(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) };
        charge(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            charge(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_count_against_the_attached_budget() {
        std::thread::spawn(|| {
            let b = MemBudget::leak(8 << 20);
            attach(b);
            let v = vec![0u8; 4 << 20];
            assert!(b.used() >= 4 << 20);
            assert!(!b.exceeded());
            let w = vec![0u8; 5 << 20];
            assert!(b.exceeded());
            assert!(b.check().is_err());
            drop((v, w));
            assert!(b.used() < 1 << 20);
            b.reset();
            assert!(b.check().is_ok());
            assert!(reserve(7 << 20).is_ok());
            let e = reserve(9 << 20).unwrap_err();
            assert_eq!(e.code, ErrorCode::ResourceLimit);
            assert!(e.msg.contains("session_memory"));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn held_bytes_count_against_the_limit_and_survive_a_reset() {
        std::thread::spawn(|| {
            let b = MemBudget::leak(10 << 20);
            assert_eq!(b.hold(6 << 20), Ok(()));
            assert_eq!(b.hold(6 << 20), Err(6 << 20), "12 MiB do not fit 10");
            b.reset();
            assert_eq!(b.held(), 6 << 20);
            attach(b);
            // Evaluation has what the held bytes leave.
            assert!(reserve(3 << 20).is_ok());
            assert!(reserve(5 << 20).is_err());
            let v = vec![1u8; 5 << 20];
            assert!(b.exceeded());
            // An evaluation's use counts against a hold too.
            assert!(b.hold(1).is_err());
            drop(v);
            restore(None);
            b.reset();
            b.release(6 << 20);
            assert_eq!(b.held(), 0);
            assert_eq!(b.hold(10 << 20), Ok(()));
            b.release(u64::MAX);
            assert_eq!(b.held(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_without_a_budget_are_not_counted() {
        std::thread::spawn(|| {
            assert!(current().is_none());
            let _v = vec![0u8; 1 << 20];
            assert!(reserve(DEFAULT_LIMIT + 1).is_err());
        })
        .join()
        .unwrap();
    }
}
