//! Whose events a subscriber sees (docs/rules.md §19): every publish of a session carries its
//! [`Origin`] (the session's name and owner, stamped by the [`super::BusHandle`] the session
//! holds), and a token principal's subscriptions and reads carry a [`Scope`] that admits only
//! the events of sessions it owns or its policy's `sessions` shares with it. The local uid has
//! no scope and sees everything. It decides visibility only; it never delivers or stores.

use std::sync::Arc;

/// The session an event is of: its name and the principal that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub session: String,
    pub owner: String,
}

impl Origin {
    pub fn new(session: &str, owner: &str) -> Arc<Origin> {
        Arc::new(Origin {
            session: session.to_string(),
            owner: owner.to_string(),
        })
    }
}

/// What a token principal may see of the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub principal: String,
}

impl Scope {
    /// The scope of `principal`: `None` for the local uid (it sees every event).
    pub fn for_principal(principal: &str) -> Option<Scope> {
        (principal != shoal_policy::runtime().local).then(|| Scope {
            principal: principal.to_string(),
        })
    }

    /// May this principal see an event of `origin`? An event of no session (a client's
    /// publish before this was stamped, a stored event read back from the journal) is not
    /// shown: what cannot be attributed is withheld.
    pub fn sees(&self, origin: Option<&Origin>) -> bool {
        origin.is_some_and(|o| {
            o.owner == self.principal
                || shoal_policy::runtime()
                    .policy
                    .get(&self.principal)
                    .is_some_and(|p| p.shares_session(&o.session))
        })
    }

    /// May this principal learn that channel `name` exists? Channels named after a session
    /// or a task (`jobs.S`, `task.N`) are not listed for it.
    pub fn lists_channel(&self, name: &str) -> bool {
        !(name.starts_with("jobs.") || name.starts_with("task."))
    }
}

/// Does an optional scope (`None`: the local uid) admit `origin`?
pub fn admits(scope: Option<&Scope>, origin: Option<&Origin>) -> bool {
    scope.is_none_or(|s| s.sees(origin))
}
