//! The effect vocabulary (docs/rules.md §21): what a program may do
//! to the world, as the planner derives it and a policy checks it.

use serde::Serialize;

/// One effect; JSON `{"kind": snake_case, ...fields}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Effect {
    FsRead { paths: Vec<String> },
    FsWrite { paths: Vec<String> },
    FsDelete { paths: Vec<String> },
    ProcSpawn { bin_hash: String, argv0: String },
    NetConnect { host: String, port: u16 },
    NetListen { port: u16 },
    EnvRead { names: Vec<String> },
    EnvWrite { names: Vec<String> },
    SecretUse { names: Vec<String> },
    SessionWrite,
    JournalRead,
    Time,
    Opaque,
}

/// Every kind, in vocabulary order.
pub const KINDS: &[&str] = &[
    "fs_read",
    "fs_write",
    "fs_delete",
    "proc_spawn",
    "net_connect",
    "net_listen",
    "env_read",
    "env_write",
    "secret_use",
    "session_write",
    "journal_read",
    "time",
    "opaque",
];

impl Effect {
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::FsRead { .. } => "fs_read",
            Effect::FsWrite { .. } => "fs_write",
            Effect::FsDelete { .. } => "fs_delete",
            Effect::ProcSpawn { .. } => "proc_spawn",
            Effect::NetConnect { .. } => "net_connect",
            Effect::NetListen { .. } => "net_listen",
            Effect::EnvRead { .. } => "env_read",
            Effect::EnvWrite { .. } => "env_write",
            Effect::SecretUse { .. } => "secret_use",
            Effect::SessionWrite => "session_write",
            Effect::JournalRead => "journal_read",
            Effect::Time => "time",
            Effect::Opaque => "opaque",
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Parse one effect from its JSON form (the fuzzed effect lists, and
    /// `cap.request` objects). Unknown kinds and bad fields are `None`.
    pub fn from_json(v: &serde_json::Value) -> Option<Effect> {
        let o = v.as_object()?;
        let kind = normalize_kind(o.get("kind")?.as_str()?)?;
        let strs = |k: &str| -> Option<Vec<String>> {
            o.get(k)?
                .as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        let port = |k: &str| -> Option<u16> { u16::try_from(o.get(k)?.as_u64()?).ok() };
        let s = |k: &str| -> Option<String> { Some(o.get(k)?.as_str()?.to_string()) };
        Some(match kind {
            "fs_read" => Effect::FsRead {
                paths: strs("paths")?,
            },
            "fs_write" => Effect::FsWrite {
                paths: strs("paths")?,
            },
            "fs_delete" => Effect::FsDelete {
                paths: strs("paths")?,
            },
            "proc_spawn" => Effect::ProcSpawn {
                bin_hash: s("bin_hash")?,
                argv0: s("argv0")?,
            },
            "net_connect" => Effect::NetConnect {
                host: s("host")?,
                port: port("port")?,
            },
            "net_listen" => Effect::NetListen {
                port: port("port")?,
            },
            "env_read" => Effect::EnvRead {
                names: strs("names")?,
            },
            "env_write" => Effect::EnvWrite {
                names: strs("names")?,
            },
            "secret_use" => Effect::SecretUse {
                names: strs("names")?,
            },
            "session_write" => Effect::SessionWrite,
            "journal_read" => Effect::JournalRead,
            "time" => Effect::Time,
            _ => Effect::Opaque,
        })
    }
}

/// A kind as agents may spell it (`fs.write` or `fs_write`) in its
/// canonical snake form; `None` when it names no kind.
pub fn normalize_kind(k: &str) -> Option<&'static str> {
    let k = shoal_base::text::effect_kind_snake(k);
    KINDS.iter().copied().find(|x| *x == k)
}

/// Reversibility as the wire reports it (docs/rules.md §21): `irreversible` when any
/// effect is opaque or touches the network.
pub fn wire_reversibility(effects: &[Effect]) -> &'static str {
    if effects.iter().any(|e| {
        matches!(
            e,
            Effect::Opaque | Effect::NetConnect { .. } | Effect::NetListen { .. }
        )
    }) {
        "irreversible"
    } else {
        "reversible"
    }
}

/// Reversibility as `auto_apply = "reversible"` uses it (docs/rules.md §21): a plan
/// with an opaque effect or a delete is not known to be reversible.
pub fn auto_reversible(effects: &[Effect]) -> bool {
    !effects
        .iter()
        .any(|e| matches!(e, Effect::Opaque | Effect::FsDelete { .. }))
}
