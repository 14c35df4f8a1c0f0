//! The value <-> JSON mapping of language.md §13.1. OWNER: values helper.
use crate::value::Value;

pub fn to_json(v: &Value) -> serde_json::Value {
    let _ = v;
    todo!()
}
pub fn from_json(j: &serde_json::Value) -> Value {
    let _ = j;
    todo!()
}
