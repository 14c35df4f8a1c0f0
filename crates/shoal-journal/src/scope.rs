//! [`Scope`]: whose entries a reader may see. A leaf both the read side ([`crate::store`]) and
//! the planner ([`crate::query`]) name; it imports nothing of the crate.

/// Who is asking: the local human / `journal_read` principals see all, others their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Principal(String),
}
