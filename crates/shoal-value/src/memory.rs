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
//!
//! A token principal's sessions also count against one [`PrincipalBudget`]
//! (`[limits] principal_memory`): what they hold *together*, across execs (a
//! value an exec left bound, also one half-built by an exec that failed, stays
//! counted until it is freed or its session closes). Each session's share is
//! its net allocation since it started ([`MemBudget::resident`], never below 0)
//! plus its held bytes; past the principal's limit the session's next
//! checkpoint fails with `resource_limit` naming `principal_memory`, the same
//! way as past `session_memory` (an exec that itself allocated less than
//! [`PRINCIPAL_GRACE`] goes on up to the limit plus that grace, so a principal
//! at its limit can still drop a binding). The count follows the session's evaluation
//! threads: what they allocate and free; what the daemon builds from a result
//! for the wire or the journal is made outside the budget ([`Detached`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::{ErrorCode, SResult, ShoalError};

/// The default of `[limits] session_memory` (1 GiB).
pub const DEFAULT_LIMIT: u64 = 1 << 30;

/// One session's memory budget. Budgets live for the rest of the process
/// (they are a few bytes each, one per language session), so a thread that
/// outlives its session never holds a dangling budget.
#[derive(Debug)]
pub struct MemBudget {
    limit: AtomicU64,
    /// Net bytes allocated since the budget was made (never reset).
    resident: AtomicI64,
    /// `resident` when the current exec started.
    base: AtomicI64,
    /// Bytes held outside evaluation (PTYs), not reset by an exec.
    held: AtomicU64,
    exceeded: AtomicBool,
    /// Exceeded because the principal's budget was, not the session's.
    over_principal: AtomicBool,
    /// The budget of the token principal that owns the session, if any.
    principal: OnceLock<&'static PrincipalBudget>,
    /// The session ended: its share left the principal's budget.
    parted: AtomicBool,
}

/// What an exec of a principal at its `principal_memory` may still allocate
/// (so it can read a length or drop a binding): 1 MiB.
pub const PRINCIPAL_GRACE: i64 = 1 << 20;

/// A token principal's memory budget (`[limits] principal_memory`): the sum of
/// its sessions' shares (see the module docs). One per principal for the rest
/// of the process.
#[derive(Debug)]
pub struct PrincipalBudget {
    limit: AtomicU64,
    used: AtomicI64,
}

impl PrincipalBudget {
    /// A new budget of `limit` bytes (0: [`DEFAULT_LIMIT`]).
    pub fn leak(limit: u64) -> &'static PrincipalBudget {
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
        Box::leak(Box::new(PrincipalBudget {
            limit: AtomicU64::new(limit),
            used: AtomicI64::new(0),
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

    /// Bytes its sessions hold together.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed).max(0) as u64
    }

    fn add(&self, delta: i64) {
        if delta != 0 {
            self.used.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// Past the limit for an exec that allocated `growth` net: past it by more
    /// than [`PRINCIPAL_GRACE`], or past it at all when the exec itself grew
    /// by more than that.
    fn over(&self, growth: i64) -> bool {
        let past = self.used.load(Ordering::Relaxed) - self.limit() as i64;
        past > PRINCIPAL_GRACE || (past > 0 && growth > PRINCIPAL_GRACE)
    }

    fn room(&self) -> u64 {
        self.limit().saturating_sub(self.used())
    }
}

impl MemBudget {
    /// A new budget of `limit` bytes (0: [`DEFAULT_LIMIT`]).
    pub fn leak(limit: u64) -> &'static MemBudget {
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
        Box::leak(Box::new(MemBudget {
            limit: AtomicU64::new(limit),
            resident: AtomicI64::new(0),
            base: AtomicI64::new(0),
            held: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
            over_principal: AtomicBool::new(false),
            principal: OnceLock::new(),
            parted: AtomicBool::new(false),
        }))
    }

    /// Count this session against `p` too (once, before it evaluates).
    pub fn with_principal(&'static self, p: &'static PrincipalBudget) -> &'static MemBudget {
        if self.principal.set(p).is_ok() {
            p.add(self.share());
        }
        self
    }

    /// The principal's budget this session counts against, until it ends.
    pub fn principal(&self) -> Option<&'static PrincipalBudget> {
        if self.parted.load(Ordering::Relaxed) {
            return None;
        }
        self.principal.get().copied()
    }

    /// The session ended: its share leaves the principal's budget (what its
    /// threads free later is no longer the principal's).
    pub fn part(&self) {
        if let Some(p) = self.principal() {
            if !self.parted.swap(true, Ordering::Relaxed) {
                p.add(-self.share());
            }
        }
    }

    /// Net bytes the session's evaluation threads allocated and did not free
    /// since it started (what its values hold; PTYs are [`held`](Self::held)).
    pub fn resident(&self) -> u64 {
        self.resident.load(Ordering::Relaxed).max(0) as u64
    }

    /// What the session counts against its principal's budget.
    fn share(&self) -> i64 {
        self.resident.load(Ordering::Relaxed).max(0) + self.held() as i64
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
    /// A token's session: also refused when it does not fit the principal's
    /// budget beside what its other sessions hold.
    pub fn hold(&self, bytes: u64) -> Result<(), u64> {
        let evaluating = self.used().max(0) as u64;
        let principal = self.principal();
        if principal.is_some_and(|p| bytes > p.room()) {
            return Err(self.held());
        }
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                let total = held.saturating_add(bytes).saturating_add(evaluating);
                (total <= self.limit()).then_some(held + bytes)
            })
            .map(|_| {
                if let Some(p) = principal {
                    p.add(bytes as i64);
                }
            })
    }

    /// Give back `bytes` of [`hold`](Self::hold).
    pub fn release(&self, bytes: u64) {
        if let Ok(was) = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(bytes))
            })
        {
            if let Some(p) = self.principal() {
                p.add(-(was.min(bytes) as i64));
            }
        }
    }

    /// Net bytes allocated since the last [`reset`](Self::reset) (may be
    /// negative when older values were freed).
    pub fn used(&self) -> i64 {
        self.resident.load(Ordering::Relaxed) - self.base.load(Ordering::Relaxed)
    }

    /// Start counting afresh (an exec starts). What earlier execs left stays
    /// [`resident`](Self::resident) and counted against the principal.
    pub fn reset(&self) {
        self.base
            .store(self.resident.load(Ordering::Relaxed), Ordering::Relaxed);
        self.exceeded.store(false, Ordering::Relaxed);
        self.over_principal.store(false, Ordering::Relaxed);
    }

    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    /// `Err(resource_limit)` once the budget was exceeded.
    pub fn check(&self) -> SResult<()> {
        if !self.exceeded() {
            Ok(())
        } else if self.over_principal.load(Ordering::Relaxed) {
            Err(principal_limit_error(self.principal()))
        } else {
            Err(held_limit_error(self.limit(), self.held()))
        }
    }

    /// Bytes evaluation may still allocate (the session's room, and its
    /// principal's), and the error past it.
    fn room_or(&self) -> (u64, ShoalError) {
        let own = self
            .limit()
            .saturating_sub(self.held())
            .saturating_sub(self.used().max(0) as u64);
        match self.principal() {
            Some(p) if p.room() < own => (p.room(), principal_limit_error(Some(p))),
            _ => (own, held_limit_error(self.limit(), self.held())),
        }
    }

    fn charge(&self, delta: i64) {
        let old = self.resident.fetch_add(delta, Ordering::Relaxed);
        let new = old + delta;
        if let Some(p) = self.principal() {
            p.add(new.max(0) - old.max(0));
            if delta > 0 && p.over(self.used()) && !self.exceeded() {
                self.over_principal.store(true, Ordering::Relaxed);
                self.exceeded.store(true, Ordering::Relaxed);
            }
        }
        let now = new - self.base.load(Ordering::Relaxed);
        if delta > 0
            && now.saturating_add(self.held() as i64) > self.limit() as i64
            && !self.exceeded()
        {
            self.exceeded.store(true, Ordering::Relaxed);
        }
    }
}

/// The `resource_limit` error of a token principal's sessions past
/// `[limits] principal_memory`.
fn principal_limit_error(p: Option<&PrincipalBudget>) -> ShoalError {
    let size = crate::render::size;
    let (limit, used) = p.map_or((DEFAULT_LIMIT, 0), |p| (p.limit(), p.used()));
    ShoalError::new(
        ErrorCode::ResourceLimit,
        format!(
            "principal_memory: this evaluation needs more than is left of the memory limit of {} this principal's sessions share (they hold {} together)",
            size(limit),
            size(used)
        ),
    )
    .with_hint(
        "free big bindings or close sessions you no longer need (session.close); the operator may raise [limits] principal_memory",
    )
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
    let (room, err) = room_or();
    if bytes > room {
        Err(err)
    } else {
        Ok(())
    }
}

/// Bytes the current thread may still allocate (what the session's PTYs
/// hold is not available; for a token's session, at most what its
/// principal has left), and the session's limit.
pub fn room() -> (u64, u64) {
    match current() {
        Some(b) => (b.room_or().0, b.limit()),
        None => (DEFAULT_LIMIT, DEFAULT_LIMIT),
    }
}

fn room_or() -> (u64, ShoalError) {
    match current() {
        Some(b) => b.room_or(),
        None => (DEFAULT_LIMIT, limit_error(DEFAULT_LIMIT)),
    }
}

/// Read all of `r` (a file, possibly endless like `/dev/zero`) within the
/// budget: `Ok(Err(resource_limit))` past it.
pub fn read_bounded(r: impl std::io::Read) -> std::io::Result<SResult<Vec<u8>>> {
    use std::io::Read as _;
    let (room, err) = room_or();
    let mut buf = Vec::new();
    r.take(room.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > room {
        return Ok(Err(err));
    }
    Ok(Ok(buf))
}

/// While it lives, this thread's allocations count against no budget (what
/// the daemon builds from a result for the wire, the journal or the event
/// bus: freed on other threads, it is not the session's to hold).
pub struct Detached(Option<&'static MemBudget>);

impl Detached {
    #[must_use]
    pub fn new() -> Detached {
        let was = current();
        restore(None);
        Detached(was)
    }
}

impl Default for Detached {
    fn default() -> Self {
        Detached::new()
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        restore(self.0);
    }
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
    fn a_principal_budget_counts_what_its_sessions_keep_across_execs() {
        std::thread::spawn(|| {
            let p = PrincipalBudget::leak(8 << 20);
            let a = MemBudget::leak(8 << 20).with_principal(p);
            let b = MemBudget::leak(8 << 20).with_principal(p);
            attach(a);
            let kept = vec![1u8; 5 << 20];
            a.reset(); // the next exec: what the last one left stays counted
            assert!(a.resident() >= 5 << 20 && a.used() == 0);
            assert!(p.used() >= 5 << 20);
            attach(b);
            assert!(reserve(4 << 20).is_err(), "only ~3 MiB are left to b");
            let e = reserve(4 << 20).unwrap_err();
            assert!(e.msg.starts_with("principal_memory"), "{}", e.msg);
            let v = vec![1u8; 4 << 20];
            assert!(b.exceeded());
            assert!(b.check().unwrap_err().msg.starts_with("principal_memory"));
            assert!(!a.exceeded());
            drop(v);
            b.reset();
            assert!(b.check().is_ok());
            // A PTY's hold counts against the principal too.
            assert_eq!(b.hold(4 << 20), Err(0));
            // A session that ends leaves the principal's budget.
            restore(Some(a));
            a.part();
            assert!(p.used() < 1 << 20, "{}", p.used());
            drop(kept);
            assert!(p.used() < 1 << 20, "{}", p.used());
            restore(None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn detached_allocations_count_against_no_budget() {
        std::thread::spawn(|| {
            let b = MemBudget::leak(8 << 20);
            attach(b);
            let v = {
                let _outside = Detached::new();
                vec![0u8; 4 << 20]
            };
            assert!(b.used() < 1 << 20);
            assert!(current().is_some());
            std::mem::forget(v);
            restore(None);
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
