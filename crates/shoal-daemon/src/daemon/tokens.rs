//! A token principal's work ends with its last valid token (docs/leash.md,
//! Tokens). The daemon checks who still holds one when `shoal token revoke`
//! tells it (`leash.tokens_changed`), when a token's call finds the token file
//! changed and reads it again, and when the first token expires (one timer,
//! armed again after each check). A principal left without a valid token has
//! its sessions ended ([`EndSession`]: tasks cancelled, PTYs closed, every
//! process in the sessions' cgroups killed at once) and its namespace holders
//! ended.

use std::collections::BTreeSet;
use std::time::Duration;

use actix::prelude::*;

use super::Daemon;
use crate::msg::TokensChanged;
use shoal_proto::kernel::TokensChecked;

/// The longest the expiry timer waits before looking again (a far expiry; a
/// wall clock that moved meanwhile).
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

impl Handler<TokensChanged> for Daemon {
    type Result = MessageResult<TokensChanged>;

    fn handle(&mut self, _msg: TokensChanged, ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        MessageResult(self.check_tokens(ctx))
    }
}

impl Daemon {
    /// At start: hear of the token file's re-reads, and arm the first expiry.
    pub(super) fn watch_tokens(&mut self, ctx: &mut Context<Self>) {
        let Some(store) = shoal_policy::runtime().tokens.as_ref() else {
            return;
        };
        let me = ctx.address().downgrade();
        store.on_reload(Box::new(move || {
            if let Some(a) = me.upgrade() {
                a.do_send(TokensChanged);
            }
        }));
        self.check_tokens(ctx);
    }

    /// End the work of every token principal without a valid token; arm the
    /// timer of the next expiry.
    fn check_tokens(&mut self, ctx: &mut Context<Self>) -> TokensChecked {
        let mut out = TokensChecked::default();
        if self.stopping {
            return out;
        }
        let rt = shoal_policy::runtime();
        let Some(store) = rt.tokens.as_ref() else {
            return out;
        };
        let standing = match store.standing() {
            Ok(s) => s,
            Err(e) => {
                // Every bearer is refused meanwhile (validate reads nothing).
                tracing::warn!("the token file cannot be read ({e}); no principal's work ended");
                return out;
            }
        };
        if let Some(h) = self.expiry.take() {
            ctx.cancel_future(h);
        }
        if let Some(at) = standing.next_expiry_ns {
            let left = at.saturating_sub(shoal_base::now_ns()).max(0) as u64;
            let wait = (Duration::from_nanos(left) + Duration::from_millis(1)).min(MAX_WAIT);
            self.expiry = Some(ctx.run_later(wait, |act, ctx| {
                act.expiry = None;
                act.check_tokens(ctx);
            }));
        }
        let local = &rt.local;
        let gone = |p: &String| p != local && !standing.valid.contains(p);
        // Holders first: a child started meanwhile finds none of its own.
        for p in shoal_policy::namespaces::principals() {
            if gone(&p) {
                shoal_policy::namespaces::end_principal(&p);
            }
        }
        // And the holders whose rules nobody holds any more (no principal
        // is named by them: a closed connection's).
        shoal_policy::namespaces::prune();
        // Their worker processes, with every program they run.
        if let Some(svc) = &self.services {
            svc.workers.end(gone);
        }
        let ending: Vec<(String, String)> = self
            .sessions
            .values()
            .filter(|(_, s, _)| !s.owner_is_local && gone(&s.owner))
            .map(|(_, s, _)| (s.name.clone(), s.owner.clone()))
            .collect();
        let mut ended = BTreeSet::new();
        for (name, owner) in ending {
            if self.remove_session(&name, true) {
                tracing::info!(session = %name, principal = %owner, "session ended: its principal holds no valid token");
                out.sessions.push(name);
                ended.insert(owner);
            }
        }
        out.ended = ended.into_iter().collect();
        // A revoked token's HTTP sessions end even when its principal holds another.
        if let Some(h) = &self.http {
            h.tokens_changed();
        }
        out
    }
}
