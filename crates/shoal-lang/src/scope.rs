//! Lexical scopes: a chain of binding tables shared by closures.
//!
//! A scope is an `Arc` so closures can capture it; bindings live behind a
//! `Mutex` so a captured `var` can be mutated by the closure and the change is
//! visible to everyone holding the scope (docs/rules.md §6). Closures stored in
//! the scope that captured them form an `Arc` cycle; sessions are long-lived and
//! the leak is bounded by the number of function definitions, which is accepted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;

use crate::ast::FnDef;
use shoal_value::{Code, Value};

#[derive(Debug, Clone)]
pub struct Binding {
    pub value: Value,
    pub mutable: bool,
    /// Introduced by `let`/`var`/parameter/loop/match binder (value-bound for
    /// the parser's statement dispatch), as opposed to `fn`/`alias`
    /// (command-bound).
    pub value_bound: bool,
}

/// The bindings of one scope. Most scopes (a call frame, a loop body, a match
/// arm) hold one to three names, so the first [`INLINE`] live inside the scope
/// itself (no allocation at all for a lambda call), the next up to [`SMALL`]
/// in a short vector searched linearly, and a scope that grows past that (a
/// session's top level) switches to an index map.
#[derive(Debug)]
enum Table {
    Inline([Option<(Name, Binding)>; INLINE]),
    Small(Vec<(Name, Binding)>),
    Large(IndexMap<String, Binding>),
}

const INLINE: usize = 3;
const SMALL: usize = 16;

impl Default for Table {
    fn default() -> Table {
        Table::Inline([None, None, None])
    }
}

impl Table {
    fn get(&self, name: &str) -> Option<&Binding> {
        match self {
            Table::Inline(a) => a.iter().flatten().find(|(k, _)| k.is(name)).map(|(_, b)| b),
            Table::Small(v) => v.iter().find(|(k, _)| k.is(name)).map(|(_, b)| b),
            Table::Large(m) => m.get(name),
        }
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Binding> {
        match self {
            Table::Inline(a) => a
                .iter_mut()
                .flatten()
                .find(|(k, _)| k.is(name))
                .map(|(_, b)| b),
            Table::Small(v) => v.iter_mut().find(|(k, _)| k.is(name)).map(|(_, b)| b),
            Table::Large(m) => m.get_mut(name),
        }
    }

    /// Insert or replace; a replaced name keeps its position.
    fn insert(&mut self, name: &str, b: Binding) {
        if let Some(slot) = self.get_mut(name) {
            *slot = b;
            return;
        }
        match self {
            Table::Inline(a) => {
                // Occupied slots are always a prefix (remove shifts left).
                if let Some(free) = a.iter_mut().find(|x| x.is_none()) {
                    *free = Some((Name::new(name), b));
                } else {
                    let mut v: Vec<(Name, Binding)> =
                        a.iter_mut().filter_map(Option::take).collect();
                    v.push((Name::new(name), b));
                    *self = Table::Small(v);
                }
            }
            Table::Small(v) => {
                if v.len() < SMALL {
                    v.push((Name::new(name), b));
                } else {
                    let mut m: IndexMap<String, Binding> = v
                        .drain(..)
                        .map(|(k, b)| (k.as_str().to_string(), b))
                        .collect();
                    m.insert(name.to_string(), b);
                    *self = Table::Large(m);
                }
            }
            Table::Large(m) => {
                m.insert(name.to_string(), b);
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Table::Inline(a) => a.iter().flatten().count(),
            Table::Small(v) => v.len(),
            Table::Large(m) => m.len(),
        }
    }

    fn entries(&self) -> Vec<(String, Binding)> {
        match self {
            Table::Inline(a) => a
                .iter()
                .flatten()
                .map(|(k, b)| (k.as_str().to_string(), b.clone()))
                .collect(),
            Table::Small(v) => v
                .iter()
                .map(|(k, b)| (k.as_str().to_string(), b.clone()))
                .collect(),
            Table::Large(m) => m.iter().map(|(k, b)| (k.clone(), b.clone())).collect(),
        }
    }
}

/// A binding name stored without a heap allocation when it is short (almost
/// every name is): a call frame binds its parameters on every call.
#[derive(Clone, Debug)]
enum Name {
    Inline { len: u8, buf: [u8; Name::INLINE] },
    Heap(Box<str>),
}

impl Name {
    const INLINE: usize = 22;

    fn new(s: &str) -> Name {
        if s.len() <= Name::INLINE {
            let mut buf = [0u8; Name::INLINE];
            buf[..s.len()].copy_from_slice(s.as_bytes());
            Name::Inline {
                len: s.len() as u8,
                buf,
            }
        } else {
            Name::Heap(s.into())
        }
    }

    /// Byte comparison: no UTF-8 re-validation on the lookup path.
    fn is(&self, s: &str) -> bool {
        match self {
            Name::Inline { len, buf } => &buf[..*len as usize] == s.as_bytes(),
            Name::Heap(h) => &**h == s,
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // The bytes were copied from a `&str` whole, so they are UTF-8.
            Name::Inline { len, buf } => std::str::from_utf8(&buf[..*len as usize]).unwrap_or(""),
            Name::Heap(s) => s,
        }
    }
}

#[derive(Debug, Default)]
pub struct Scope {
    /// The function whose parameters `params` holds: `params[i]` is bound to
    /// `params_def.params[i].name`. Parameters are bound while the frame is
    /// still private (through `&mut`, see [`Scope::child_from_pool_with`]),
    /// are immutable bindings and never change once the scope is shared, so
    /// reading them takes no lock. A later `define` of the same name goes to
    /// `vars` and shadows them. (A pooled frame keeps its last `params_def`:
    /// it is only syntax, and reusing it saves a reference count update.)
    params_def: Option<Arc<FnDef>>,
    params: Vec<Value>,
    /// `vars` holds at least one binding. Set (under the lock) by `define`,
    /// cleared only through `&mut`; lets lookups skip locking an empty table.
    has_vars: AtomicBool,
    vars: Mutex<Table>,
    pub parent: Option<ScopeRef>,
}

pub type ScopeRef = Arc<Scope>;

/// Why an assignment failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignError {
    NotFound,
    Immutable,
}

/// Why [`Scope::update`] did not store a new value.
#[derive(Debug)]
pub enum UpdateError<E> {
    /// The binding is missing or immutable.
    Assign(AssignError),
    /// The update function itself failed; the binding is unchanged.
    Op(E),
}

/// Parameters are immutable, value-bound bindings.
const PARAM_MUTABLE: bool = false;
const PARAM_VALUE_BOUND: bool = true;

impl Scope {
    /// A fresh root scope.
    pub fn root() -> ScopeRef {
        Arc::new(Scope::default())
    }

    /// A child scope of `parent`.
    pub fn child(parent: &ScopeRef) -> ScopeRef {
        Arc::new(Scope {
            params_def: None,
            params: Vec::new(),
            has_vars: AtomicBool::new(false),
            vars: Mutex::new(Table::default()),
            parent: Some(parent.clone()),
        })
    }

    /// A child scope of `parent`, reusing a pooled allocation when there is one
    /// (call frames are created and dropped once per call).
    #[inline]
    pub fn child_from_pool(pool: &mut Vec<ScopeRef>, parent: &ScopeRef) -> ScopeRef {
        while let Some(mut s) = pool.pop() {
            if let Some(m) = Arc::get_mut(&mut s) {
                // A frame recycled with `keep_parent` may already have it.
                if !m.parent.as_ref().is_some_and(|p| Arc::ptr_eq(p, parent)) {
                    m.parent = Some(parent.clone());
                }
                return s;
            }
        }
        Scope::child(parent)
    }

    /// [`Scope::child_from_pool`] with the parameters of `def` bound to
    /// `values` in order (as immutable, value-bound bindings; a repeated name
    /// binds its last value) without taking any lock: the frame is still
    /// private here. At most `def.params.len()` values are bound.
    pub fn child_from_pool_with(
        pool: &mut Vec<ScopeRef>,
        parent: &ScopeRef,
        def: &Arc<FnDef>,
        values: impl IntoIterator<Item = Value>,
    ) -> ScopeRef {
        let mut s = Scope::child_from_pool(pool, parent);
        let n = def.params.len();
        match Arc::get_mut(&mut s) {
            Some(m) if !m.has_vars.load(Ordering::Relaxed) && m.params.is_empty() => {
                if !m.params_def.as_ref().is_some_and(|d| Arc::ptr_eq(d, def)) {
                    m.params_def = Some(def.clone());
                }
                m.params.extend(values.into_iter().take(n));
            }
            // Not a fresh frame (never happens): plain definitions.
            _ => {
                for (p, value) in def.params.iter().zip(values) {
                    s.define(&p.name, value, PARAM_MUTABLE, PARAM_VALUE_BOUND);
                }
            }
        }
        s
    }

    /// [`Scope::child_from_pool_with`] for one value.
    pub fn child_from_pool_with1(
        pool: &mut Vec<ScopeRef>,
        parent: &ScopeRef,
        def: &Arc<FnDef>,
        value: Value,
    ) -> ScopeRef {
        let mut s = Scope::child_from_pool(pool, parent);
        match Arc::get_mut(&mut s) {
            Some(m) if !m.has_vars.load(Ordering::Relaxed) && m.params.is_empty() => {
                if !m.params_def.as_ref().is_some_and(|d| Arc::ptr_eq(d, def)) {
                    m.params_def = Some(def.clone());
                }
                if !def.params.is_empty() {
                    m.params.push(value);
                }
                s
            }
            _ => {
                drop(s);
                Scope::child_from_pool_with(pool, parent, def, [value])
            }
        }
    }

    /// Give a finished call frame back to the pool, unless something (a
    /// closure made inside the call) still holds it. `keep_parent`: the
    /// parent outlives the pool anyway (the session's globals), so the pooled
    /// frame may keep referring to it.
    pub fn recycle(pool: &mut Vec<ScopeRef>, mut s: ScopeRef, keep_parent: bool) {
        const POOL_MAX: usize = 64;
        if pool.len() >= POOL_MAX {
            return;
        }
        if let Some(m) = Arc::get_mut(&mut s) {
            if !keep_parent {
                m.parent = None;
            }
            m.params.clear();
            if *m.has_vars.get_mut() {
                *shoal_base::sync::Locked::locked_mut(&mut m.vars) = Table::default();
                *m.has_vars.get_mut() = false;
            }
            pool.push(s);
        }
    }

    /// The value of parameter `name` (the last one of a repeated name).
    #[inline]
    fn param(&self, name: &str) -> Option<&Value> {
        let def = self.params_def.as_deref()?;
        def.params
            .iter()
            .zip(&self.params)
            .rev()
            .find(|(p, _)| p.name == name)
            .map(|(_, v)| v)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A poisoned lock only means a panic happened while it was held; the
        // table itself is still consistent (every mutation is a single insert).
        shoal_base::sync::Locked::locked(&self.vars)
    }

    /// Define (or shadow) `name` in this scope.
    pub fn define(&self, name: &str, value: Value, mutable: bool, value_bound: bool) {
        let mut t = self.table();
        t.insert(
            name,
            Binding {
                value,
                mutable,
                value_bound,
            },
        );
        self.has_vars.store(true, Ordering::Release);
    }

    /// `f` applied to the binding of `name` in this scope or an enclosing one.
    /// `f(value, mutable, value_bound)` of the binding of `name` in this
    /// scope or an enclosing one.
    #[inline]
    fn with_binding<R>(&self, name: &str, f: impl Fn(&Value, bool, bool) -> R) -> Option<R> {
        // Walk the chain by reference: every parent is kept alive by its child.
        let mut cur: Option<&Scope> = Some(self);
        while let Some(s) = cur {
            // `vars` shadows `params`; an empty `vars` needs no lock.
            if s.has_vars.load(Ordering::Acquire) {
                if let Some(b) = s.table().get(name) {
                    return Some(f(&b.value, b.mutable, b.value_bound));
                }
            }
            if let Some(v) = s.param(name) {
                return Some(f(v, PARAM_MUTABLE, PARAM_VALUE_BOUND));
            }
            cur = s.parent.as_deref();
        }
        None
    }

    /// The binding of `name` in this scope or an enclosing one.
    pub fn lookup_binding(&self, name: &str) -> Option<Binding> {
        self.with_binding(name, |v, mutable, value_bound| Binding {
            value: v.clone(),
            mutable,
            value_bound,
        })
    }

    /// The value of `name` in this scope or an enclosing one.
    #[inline]
    pub fn lookup(&self, name: &str) -> Option<Value> {
        self.with_binding(name, |v, _, _| match v {
            // The common case without the out-of-line `Value::clone`.
            Value::Int(i) => Value::Int(*i),
            v => v.clone(),
        })
    }

    /// Is `name` bound anywhere in the chain?
    pub fn is_bound(&self, name: &str) -> bool {
        self.with_binding(name, |_, _, _| ()).is_some()
    }

    /// Assign an existing mutable binding (innermost first).
    pub fn assign(&self, name: &str, value: Value) -> Result<(), AssignError> {
        if self.has_vars.load(Ordering::Acquire) {
            let mut t = self.table();
            if let Some(b) = t.get_mut(name) {
                if !b.mutable {
                    return Err(AssignError::Immutable);
                }
                b.value = value;
                return Ok(());
            }
        }
        if self.param(name).is_some() {
            // Parameters are immutable bindings.
            return Err(AssignError::Immutable);
        }
        match &self.parent {
            Some(p) => p.assign(name, value),
            None => Err(AssignError::NotFound),
        }
    }

    /// Replace the mutable binding `name` with `f(current)` as one step:
    /// the owning scope's lock is held from the read to the write, so two
    /// threads running `n += 1` on a shared `var` never lose an update.
    /// `f` must not touch scopes (it runs under the lock).
    pub fn update<E>(
        &self,
        name: &str,
        f: impl FnOnce(&Value) -> Result<Value, E>,
    ) -> Result<Value, UpdateError<E>> {
        if self.has_vars.load(Ordering::Acquire) {
            let mut t = self.table();
            if let Some(b) = t.get_mut(name) {
                if !b.mutable {
                    return Err(UpdateError::Assign(AssignError::Immutable));
                }
                let v = f(&b.value).map_err(UpdateError::Op)?;
                b.value = v.clone();
                return Ok(v);
            }
        }
        if self.param(name).is_some() {
            return Err(UpdateError::Assign(AssignError::Immutable));
        }
        match &self.parent {
            Some(p) => p.update(name, f),
            None => Err(UpdateError::Assign(AssignError::NotFound)),
        }
    }

    /// Names bound in this scope only, in definition order.
    /// How many names this scope binds (names are only ever added, so an
    /// unchanged count means an unchanged set of names).
    pub fn local_count(&self) -> usize {
        self.table().len()
    }

    pub fn local_names(&self) -> Vec<String> {
        self.local_bindings().into_iter().map(|(k, _)| k).collect()
    }

    /// Bindings of this scope only, in definition order (parameters first;
    /// a parameter shadowed by a later definition keeps its position).
    pub fn local_bindings(&self) -> Vec<(String, Binding)> {
        let vars = self.table().entries();
        let Some(def) = self.params_def.as_deref() else {
            return vars;
        };
        let mut out: Vec<(String, Binding)> = Vec::new();
        for p in def.params.iter().take(self.params.len()) {
            if out.iter().any(|(k, _)| *k == p.name) {
                continue;
            }
            let b = match vars.iter().find(|(k, _)| *k == p.name) {
                Some((_, b)) => b.clone(),
                None => Binding {
                    value: self.param(&p.name).cloned().unwrap_or(Value::Null),
                    mutable: PARAM_MUTABLE,
                    value_bound: PARAM_VALUE_BOUND,
                },
            };
            out.push((p.name.clone(), b));
        }
        out.extend(vars.into_iter().filter(|(k, _)| self.param(k).is_none()));
        out
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

/// A function or lambda with its captured scope: what a `Value::Closure` holds.
pub struct Closure {
    pub def: Arc<FnDef>,
    pub env: ScopeRef,
}

impl std::fmt::Debug for Closure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closure")
            .field("name", &self.def.name)
            .finish_non_exhaustive()
    }
}

impl Code for Closure {
    fn render(&self) -> String {
        let mut params: Vec<String> = self.def.params.iter().map(|p| p.name.clone()).collect();
        if let Some(r) = &self.def.rest {
            params.push(format!("...{}", r.name));
        }
        match &self.def.name {
            Some(n) => format!("fn {n}({})", params.join(", ")),
            None => format!("closure({})", params.join(", ")),
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// The closure behind a `Value::Closure` handle. Only this module's [`Closure`] is ever
/// stored there (the evaluator makes every closure value), so the downcast holds.
pub fn closure(c: &Arc<dyn Code>) -> Arc<Closure> {
    c.clone()
        .into_any()
        .downcast::<Closure>()
        .expect("a Value::Closure holds a lang::scope::Closure")
}

/// The parsed command behind a `Value::Command` handle (an alias target; the evaluator makes
/// every one from an `ast::Command`).
pub fn command(c: &Arc<dyn Code>) -> Arc<crate::ast::Command> {
    c.clone()
        .into_any()
        .downcast::<crate::ast::Command>()
        .expect("a Value::Command holds an ast::Command")
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

    #[test]
    fn small_table_grows_into_a_map_keeping_order_and_shadowing() {
        let s = Scope::root();
        for i in 0..40 {
            s.define(&format!("v{i}"), Value::Int(i), true, true);
        }
        s.define("v3", Value::Int(300), false, true);
        let names = s.local_names();
        assert_eq!(names.len(), 40);
        assert_eq!(names[3], "v3");
        assert_eq!(names[5], "v5");
        assert!(matches!(s.lookup("v3"), Some(Value::Int(300))));
        assert_eq!(s.assign("v3", Value::Int(1)), Err(AssignError::Immutable));
        assert!(s.lookup("v40").is_none());
    }

    #[test]
    fn pooled_frame_params_are_lock_free_immutable_and_shadowable() {
        let def = |src: &str| -> Arc<FnDef> {
            let prog = crate::parse(src, &Default::default()).expect("parses");
            let v = {
                let mut i = crate::eval::Interp::new(
                    std::env::temp_dir(),
                    Default::default(),
                    Default::default(),
                );
                i.run_program(&prog, crate::eval::Pos::Value)
                    .expect("evaluates")
            };
            match &v {
                Value::Closure(c) => closure(c).def.clone(),
                other => panic!("not a closure: {other:?}"),
            }
        };
        let ab = def("((a, b, a) => a)");
        let root = Scope::root();
        root.define("y", Value::Int(7), true, true);
        let mut pool = Vec::new();
        let f = Scope::child_from_pool_with(
            &mut pool,
            &root,
            &ab,
            [Value::Int(1), Value::Int(2), Value::Int(3)],
        );
        // A repeated name binds its last value, at its first position.
        assert!(matches!(f.lookup("a"), Some(Value::Int(3))));
        assert!(matches!(f.lookup("y"), Some(Value::Int(7))));
        assert_eq!(f.assign("a", Value::Int(5)), Err(AssignError::Immutable));
        assert_eq!(f.assign("y", Value::Int(8)), Ok(()));
        assert_eq!(f.local_names(), vec!["a", "b"]);
        f.define("b", Value::Int(20), true, true);
        f.define("c", Value::Int(3), false, true);
        assert!(matches!(f.lookup("b"), Some(Value::Int(20))));
        assert_eq!(f.assign("b", Value::Int(21)), Ok(()));
        assert_eq!(f.local_names(), vec!["a", "b", "c"]);
        assert!(matches!(f.local_bindings()[1].1.value, Value::Int(21)));
        assert!(f
            .lookup_binding("a")
            .is_some_and(|b| !b.mutable && b.value_bound));
        Scope::recycle(&mut pool, f, true);
        assert_eq!(pool.len(), 1);
        let z = def("(z => z)");
        let g = Scope::child_from_pool_with(&mut pool, &root, &z, [Value::Int(9)]);
        assert!(pool.is_empty());
        assert_eq!(g.local_names(), vec!["z"]);
        assert!(g.lookup("a").is_none() && g.lookup("c").is_none());
        assert!(matches!(g.lookup("y"), Some(Value::Int(8))));
        // A frame captured by a closure is not recycled.
        let keep = g.clone();
        Scope::recycle(&mut pool, g, false);
        assert!(pool.is_empty());
        assert!(matches!(keep.lookup("z"), Some(Value::Int(9))));
        // A parent not kept is released with the pooled frame.
        let other = Scope::root();
        let h = Scope::child_from_pool_with(&mut pool, &other, &z, [Value::Int(1)]);
        Scope::recycle(&mut pool, h, false);
        assert_eq!(Arc::strong_count(&other), 1);
    }
}
