//! Data namespaces `json yaml toml csv math os config` (language.md §13).
//! OWNER: values helper.
use crate::value::{Args, Host, SResult, Value};

/// Is `name` a namespace root (when not shadowed by a binding)?
pub fn is_namespace(name: &str) -> bool {
    matches!(name, "json" | "yaml" | "toml" | "csv" | "math" | "os" | "config")
}
/// `ns.member(args)`
pub fn call(host: &mut dyn Host, ns: &str, member: &str, args: Args) -> SResult<Value> {
    let _ = (host, ns, member, args);
    todo!()
}
/// `ns.member` without a call (constants such as `math.pi`, `config.KEY`).
pub fn field(host: &mut dyn Host, ns: &str, member: &str) -> SResult<Value> {
    let _ = (host, ns, member);
    todo!()
}
