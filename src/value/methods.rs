//! Method dispatch and field access (language.md §12). OWNER: values helper.
use crate::value::{Args, Host, SResult, Value};

/// `recv.name(args)` for every receiver type, outcome forwarding included.
/// The evaluator handles its own intercepts (`.feed`, callable record fields,
/// namespaces) before calling this.
pub fn call_method(host: &mut dyn Host, recv: &Value, name: &str, args: Args) -> SResult<Value> {
    let _ = (host, recv, name, args);
    todo!()
}
/// `recv.name` with the field / zero-argument-method fallback of §12.1.
pub fn get_field(host: &mut dyn Host, recv: &Value, name: &str) -> SResult<Value> {
    let _ = (host, recv, name);
    todo!()
}
