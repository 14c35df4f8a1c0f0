//! Lexical scopes: a chain of binding tables shared by closures.
//! OWNER: evaluator helper (may be reshaped; keep the name `ScopeRef`).
//!
//! A scope is an `Arc` so closures can capture it; bindings live behind a
//! `Mutex` so a captured `var` can be mutated by the closure and the change is
//! visible to everyone holding the scope (language.md §7). Closures stored in
//! the scope that captured them form an `Arc` cycle; sessions are long-lived and
//! the leak is bounded by the number of function definitions, which is accepted.

use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;

use crate::value::Value;

#[derive(Debug, Clone)]
pub struct Binding {
    pub value: Value,
    pub mutable: bool,
    /// Introduced by `let`/`var`/parameter/loop/match binder (value-bound for
    /// the parser's statement dispatch), as opposed to `fn`/`alias`
    /// (command-bound).
    pub value_bound: bool,
}

#[derive(Debug, Default)]
pub struct Scope {
    pub vars: Mutex<IndexMap<String, Binding>>,
    pub parent: Option<ScopeRef>,
}

pub type ScopeRef = Arc<Scope>;

/// Why an assignment failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignError {
    NotFound,
    Immutable,
}

impl Scope {
    /// A fresh root scope.
    pub fn root() -> ScopeRef {
        Arc::new(Scope::default())
    }

    /// A child scope of `parent`.
    pub fn child(parent: &ScopeRef) -> ScopeRef {
        Arc::new(Scope {
            vars: Mutex::new(IndexMap::new()),
            parent: Some(parent.clone()),
        })
    }

    fn table(&self) -> MutexGuard<'_, IndexMap<String, Binding>> {
        // A poisoned lock only means a panic happened while it was held; the
        // table itself is still consistent (every mutation is a single insert).
        match self.vars.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Define (or shadow) `name` in this scope.
    pub fn define(&self, name: &str, value: Value, mutable: bool, value_bound: bool) {
        self.table().insert(
            name.to_string(),
            Binding {
                value,
                mutable,
                value_bound,
            },
        );
    }

    /// Remove a binding from this scope only.
    pub fn remove(&self, name: &str) {
        self.table().shift_remove(name);
    }

    /// The binding of `name` in this scope or an enclosing one.
    pub fn lookup_binding(&self, name: &str) -> Option<Binding> {
        if let Some(b) = self.table().get(name) {
            return Some(b.clone());
        }
        let mut cur = self.parent.clone();
        while let Some(s) = cur {
            if let Some(b) = s.table().get(name) {
                return Some(b.clone());
            }
            cur = s.parent.clone();
        }
        None
    }

    /// The value of `name` in this scope or an enclosing one.
    pub fn lookup(&self, name: &str) -> Option<Value> {
        self.lookup_binding(name).map(|b| b.value)
    }

    /// Is `name` bound anywhere in the chain?
    pub fn is_bound(&self, name: &str) -> bool {
        self.lookup_binding(name).is_some()
    }

    /// Assign an existing mutable binding (innermost first).
    pub fn assign(&self, name: &str, value: Value) -> Result<(), AssignError> {
        {
            let mut t = self.table();
            if let Some(b) = t.get_mut(name) {
                if !b.mutable {
                    return Err(AssignError::Immutable);
                }
                b.value = value;
                return Ok(());
            }
        }
        match &self.parent {
            Some(p) => p.assign(name, value),
            None => Err(AssignError::NotFound),
        }
    }

    /// Names bound in this scope only, in definition order.
    pub fn local_names(&self) -> Vec<String> {
        self.table().keys().cloned().collect()
    }

    /// Bindings of this scope only.
    pub fn local_bindings(&self) -> Vec<(String, Binding)> {
        self.table()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Every visible binding (inner shadows outer), for snapshots and
    /// did-you-mean candidates.
    pub fn visible_bindings(&self) -> IndexMap<String, Binding> {
        let mut chain: Vec<Vec<(String, Binding)>> = vec![self.local_bindings()];
        let mut cur = self.parent.clone();
        while let Some(s) = cur {
            chain.push(s.local_bindings());
            cur = s.parent.clone();
        }
        let mut out = IndexMap::new();
        for level in chain.into_iter().rev() {
            for (k, v) in level {
                out.insert(k, v);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn define_lookup_assign() {
        let root = Scope::root();
        root.define("x", Value::Int(1), true, true);
        root.define("y", Value::Int(2), false, true);
        let c = Scope::child(&root);
        assert!(matches!(c.lookup("x"), Some(Value::Int(1))));
        assert_eq!(c.assign("x", Value::Int(5)), Ok(()));
        assert!(matches!(root.lookup("x"), Some(Value::Int(5))));
        assert_eq!(c.assign("y", Value::Int(5)), Err(AssignError::Immutable));
        assert_eq!(c.assign("z", Value::Int(5)), Err(AssignError::NotFound));
        c.define("x", Value::Int(9), false, true);
        assert!(matches!(c.lookup("x"), Some(Value::Int(9))));
        assert!(matches!(root.lookup("x"), Some(Value::Int(5))));
        assert_eq!(c.visible_bindings().len(), 2);
    }
}
