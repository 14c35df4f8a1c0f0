//! Taking over a PTY (`pty.claim`, docs/protocol.md §8): one client at a
//! time types into it, the claimant; any number watch.
//!
//! A claim is held by a connection through a [`ClaimGuard`]: releasing it,
//! dropping it (the connection hung up or closed) or closing the PTY ends
//! it. While a PTY is claimed, every other caller's `pty.send`, `pty.resize`
//! and `pty.close` is refused with [`taken_over`]; reads go on, so an agent
//! sees what the human did.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::json;

use shoal_base::sync::Locked;
use shoal_proto::rpc::{self, RpcError};

/// Who holds a PTY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The holding connection.
    pub conn: u64,
    /// The client kind it attached as (`attach`), for the refusal's text.
    pub client: String,
}

/// The claim and watcher count of one PTY (in its `PtyHandle`).
#[derive(Debug, Default)]
pub struct Claims {
    /// The claim and the number of the guard that holds it.
    holder: Mutex<Option<(Claim, u64)>>,
    watchers: AtomicUsize,
}

/// Numbers claim guards (a renewed claim's old guard releases nothing).
static GUARDS: AtomicU64 = AtomicU64::new(1);

impl Claims {
    /// The claim when `caller` is not its holder (None: `caller` may type).
    pub fn held_by_other(&self, caller: Option<u64>) -> Option<Claim> {
        self.holder
            .locked()
            .as_ref()
            .filter(|(c, _)| Some(c.conn) != caller)
            .map(|(c, _)| c.clone())
    }

    pub fn holder(&self) -> Option<Claim> {
        self.holder.locked().as_ref().map(|(c, _)| c.clone())
    }

    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// A counted watcher, uncounted when the guard drops.
    pub fn watcher(self: &Arc<Self>) -> WatchGuard {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        WatchGuard(self.clone())
    }

    /// Claim for `claim.conn`; a claim its holder already has is renewed.
    /// `Err`: another connection holds it.
    pub fn claim(self: &Arc<Self>, claim: Claim) -> Result<ClaimGuard, Claim> {
        let mut h = self.holder.locked();
        match &*h {
            Some((other, _)) if other.conn != claim.conn => Err(other.clone()),
            _ => {
                let number = GUARDS.fetch_add(1, Ordering::Relaxed);
                *h = Some((claim, number));
                Ok(ClaimGuard {
                    claims: Arc::downgrade(self),
                    number,
                })
            }
        }
    }
}

/// A held claim: dropping it releases the PTY (if its holder still holds it).
#[derive(Debug)]
pub struct ClaimGuard {
    claims: Weak<Claims>,
    number: u64,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        if let Some(c) = self.claims.upgrade() {
            let mut h = c.holder.locked();
            if h.as_ref().is_some_and(|(_, n)| *n == self.number) {
                *h = None;
            }
        }
    }
}

/// One counted watcher.
#[derive(Debug)]
pub struct WatchGuard(Arc<Claims>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `-32024`: `what` was refused because a human has taken the PTY over.
pub fn taken_over(id: u64, what: &str, c: &Claim) -> RpcError {
    let pty = super::id_name(id);
    let client = if c.client.is_empty() {
        "attach"
    } else {
        c.client.as_str()
    };
    RpcError::new(
        rpc::PTY_TAKEN_OVER,
        format!(
            "{pty} is taken over by a human ({client}): {what} is refused until they release it; reads go on and show what they type (wait_for the prompt they leave it at)"
        ),
    )
    .with_data(json!({"code": "taken_over", "pty_id": pty, "by": "human", "client": client}))
}

/// `-32024` for a claim another connection holds.
pub fn claimed_by_other(id: u64, c: &Claim) -> RpcError {
    taken_over(id, "another claim", c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(conn: u64) -> Claim {
        Claim {
            conn,
            client: "attach".into(),
        }
    }

    #[test]
    fn one_holder_released_by_its_guard_only() {
        let c = Arc::new(Claims::default());
        let g = c.claim(claim(1)).unwrap();
        assert_eq!(c.claim(claim(2)).unwrap_err().conn, 1);
        assert_eq!(c.held_by_other(Some(2)).map(|c| c.conn), Some(1));
        assert_eq!(c.held_by_other(None).map(|c| c.conn), Some(1));
        assert!(c.held_by_other(Some(1)).is_none());
        // A renewal by the holder: the old guard's drop releases nothing.
        let g2 = c.claim(claim(1)).unwrap();
        drop(g);
        assert_eq!(c.holder().map(|c| c.conn), Some(1));
        drop(g2);
        assert!(c.holder().is_none());
        let g3 = c.claim(claim(2)).unwrap();
        assert_eq!(c.holder().map(|c| c.conn), Some(2));
        drop(g3);
        assert!(c.holder().is_none());
        let w = (c.watcher(), c.watcher());
        assert_eq!(c.watchers(), 2);
        drop(w);
        assert_eq!(c.watchers(), 0);
    }

    #[test]
    fn the_refusal_names_the_human() {
        let e = taken_over(1, "pty.send", &claim(3));
        assert_eq!(e.code, rpc::PTY_TAKEN_OVER);
        assert!(e
            .message
            .starts_with("pty:1 is taken over by a human (attach)"));
        assert!(e.message.contains("reads go on"), "{}", e.message);
    }
}
