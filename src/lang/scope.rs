//! Lexical scopes: a chain of binding tables shared by closures.
//! OWNER: evaluator helper (may be reshaped; keep the name `ScopeRef`).

use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

use crate::value::Value;

#[derive(Debug, Clone)]
pub struct Binding {
    pub value: Value,
    pub mutable: bool,
}

#[derive(Debug, Default)]
pub struct Scope {
    pub vars: Mutex<IndexMap<String, Binding>>,
    pub parent: Option<ScopeRef>,
}

pub type ScopeRef = Arc<Scope>;
