//! Policy per principal (`[policy.principal."NAME"]` in `shoal.toml`,
//! docs/rules.md §21) and verdicts.
//!
//! The TOML types are strict (`deny_unknown_fields`, checked grant
//! spellings), so every key is honoured or rejected with file:line:column
//! by the config loader.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer};

use super::effect::Effect;

/// `[policy]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    pub principal: BTreeMap<String, PrincipalPolicy>,
}

/// `[policy.principal."NAME"]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct PrincipalPolicy {
    #[serde(alias = "net")]
    pub net_connect: Vec<NetGrant>,
    pub net_listen: Vec<u16>,
    #[serde(alias = "spawn")]
    pub proc_spawn: Vec<NonEmpty>,
    pub env_read: Vec<NonEmpty>,
    pub env_write: Vec<NonEmpty>,
    #[serde(alias = "secrets")]
    pub secret_use: Vec<NonEmpty>,
    pub session_write: bool,
    pub journal_read: bool,
    pub time: bool,
    pub auto_apply: AutoApply,
    pub opaque: OpaqueMode,
    pub hermetic: bool,
    pub fs: FsGrants,
    /// Channels a human may approve this principal's plans on (unset: the
    /// CLI only for a token principal, every channel for the local uid).
    pub approve_via: Option<Vec<ApproveVia>>,
    /// Sessions owned by other principals this one may attach to read-only
    /// (globs over session names, `*` and `?` as in file names).
    pub sessions: Vec<NonEmpty>,
    /// Kernel namespaces (bubblewrap) for a token principal's children:
    /// `auto` (default), `require` or `off`; never for the local uid.
    pub namespaces: Namespaces,
}

/// An approval channel (`approve_via`).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ApproveVia {
    /// `shoal plan approve REF`.
    Cli,
    /// An MCP `elicitation/create` answered in the plan owner's client.
    Elicitation,
    /// A local-uid client attached to the session (other than the CLI).
    Attach,
}

impl ApproveVia {
    pub const ALL: [ApproveVia; 3] = [ApproveVia::Cli, ApproveVia::Elicitation, ApproveVia::Attach];

    pub fn as_str(self) -> &'static str {
        match self {
            ApproveVia::Cli => "cli",
            ApproveVia::Elicitation => "elicitation",
            ApproveVia::Attach => "attach",
        }
    }
}

/// `[policy.principal."NAME".fs]` (or dotted `fs.read = [...]`).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct FsGrants {
    pub read: Vec<PathGlob>,
    pub write: Vec<PathGlob>,
    pub delete: Vec<PathGlob>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AutoApply {
    #[default]
    Never,
    InGrant,
    Reversible,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OpaqueMode {
    #[default]
    Deny,
    Ask,
    Allow,
}

/// A non-empty string grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonEmpty(pub String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() {
            return Err(serde::de::Error::custom("a grant must not be empty"));
        }
        Ok(NonEmpty(s))
    }
}

/// `HOSTGLOB:PORT` (PORT a number or `*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetGrant {
    pub host: String,
    pub port: Option<u16>,
}

impl<'de> Deserialize<'de> for NetGrant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NetGrant::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl NetGrant {
    pub fn parse(s: &str) -> Result<NetGrant, String> {
        let (h, p) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("net grant {s:?} must be HOST:PORT (PORT a number or *)"))?;
        if h.is_empty() {
            return Err(format!("net grant {s:?} has an empty host"));
        }
        let port = if p == "*" {
            None
        } else {
            Some(
                p.parse::<u16>()
                    .map_err(|_| format!("net grant {s:?}: port {p:?} is not 0..=65535 or *"))?,
            )
        };
        Ok(NetGrant {
            host: h.to_string(),
            port,
        })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && crate::glob::match_component(&self.host, host)
    }
}

/// A filesystem grant: an absolute path glob, or one starting with `~/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathGlob(pub String);

impl<'de> Deserialize<'de> for PathGlob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !(s.starts_with('/') || s == "~" || s.starts_with("~/")) {
            return Err(serde::de::Error::custom(format!(
                "fs grant {s:?} must be an absolute path glob or start with ~/"
            )));
        }
        if s.split('/').any(|c| c.contains("**") && c != "**") {
            return Err(serde::de::Error::custom(format!(
                "fs grant {s:?}: ** must be a whole path component"
            )));
        }
        Ok(PathGlob(s))
    }
}

impl PathGlob {
    /// The glob with `~` expanded from `home`.
    pub fn expanded(&self, home: Option<&str>) -> String {
        match (self.0.strip_prefix('~'), home) {
            (Some(rest), Some(h)) => format!("{}{rest}", h.trim_end_matches('/')),
            _ => self.0.clone(),
        }
    }
}

/// Does the (absolute, normalised) `path` match the grant glob `pat`?
/// `**` matches zero or more components; other components are fnmatch
/// (`*` never crosses `/`). The language's own matcher
/// ([`crate::glob::match_path`]): grants and glob words agree.
pub fn path_matches(pat: &str, path: &str) -> bool {
    crate::glob::match_path(pat, path)
}

/// The components of the absolute `path` before its first glob component.
fn glob_free_root(path: &str) -> String {
    let lit: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty())
        .take_while(|c| !crate::glob::is_glob(c))
        .collect();
    format!("/{}", lit.join("/"))
}

/// A verdict (wire strings `allow`, `deny`, `approval_required`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    ApprovalRequired,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::ApprovalRequired => "approval_required",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of checking a plan against a principal's policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    /// Why, for the error message (`fs_write /x is outside fs.write`, or the
    /// missing policy section).
    pub reason: Option<String>,
    /// Effects the policy grants only with a human's approval (opaque in
    /// `ask` mode).
    pub ask: Vec<Effect>,
}

/// The built-in policy of the local uid (docs/rules.md §21: permissive).
pub fn local_default() -> PrincipalPolicy {
    let all = || vec![PathGlob("/**".into())];
    PrincipalPolicy {
        net_connect: vec![NetGrant {
            host: "*".into(),
            port: None,
        }],
        net_listen: Vec::new(),
        proc_spawn: vec![NonEmpty("*".into())],
        env_read: vec![NonEmpty("*".into())],
        env_write: vec![NonEmpty("*".into())],
        secret_use: Vec::new(),
        session_write: true,
        journal_read: true,
        time: true,
        auto_apply: AutoApply::InGrant,
        opaque: OpaqueMode::Allow,
        hermetic: false,
        fs: FsGrants {
            read: all(),
            write: all(),
            delete: all(),
        },
        approve_via: None,
        sessions: vec![NonEmpty("*".into())],
        namespaces: Namespaces::Auto,
    }
}

/// The refusal for a principal without a policy section.
pub fn missing_section(principal: &str) -> String {
    format!(
        "principal {principal:?} has no policy: add a [policy.principal.\"{principal}\"] section to shoal.toml"
    )
}

impl PrincipalPolicy {
    /// The channels that may approve this principal's plans (`local`: the
    /// principal is the local uid).
    pub fn approve_channels(&self, local: bool) -> Vec<ApproveVia> {
        match &self.approve_via {
            Some(v) => v.clone(),
            None if local => ApproveVia::ALL.to_vec(),
            None => vec![ApproveVia::Cli],
        }
    }

    /// May this principal read session `name` of another principal (a glob
    /// of `sessions` matches the whole name)?
    pub fn shares_session(&self, name: &str) -> bool {
        self.sessions
            .iter()
            .any(|g| crate::glob::match_component(&g.0, name))
    }

    /// Is `path` inside some of `grants`?
    ///
    /// A path that is itself a glob (`rm proj/**/f` derived before
    /// expansion) is covered only if every path it can match is: here,
    /// conservatively, only by a grant `…/**` covering its glob-free root
    /// (each expanded path is checked again at run time).
    fn fs_ok(grants: &[PathGlob], paths: &[String], home: Option<&str>) -> Option<String> {
        for p in paths {
            let norm = shoal_base::paths::normalize(Path::new(p));
            let norm = norm.to_string_lossy();
            let covered = if crate::glob::is_glob(&norm) {
                let root = glob_free_root(&norm);
                grants.iter().any(|g| {
                    let g = g.expanded(home);
                    g.ends_with("/**") && path_matches(&g, &root)
                })
            } else {
                grants
                    .iter()
                    .any(|g| path_matches(&g.expanded(home), &norm))
            };
            if !covered {
                return Some(norm.into_owned());
            }
        }
        None
    }

    fn names_ok(grants: &[NonEmpty], names: &[String]) -> Option<String> {
        if grants.iter().any(|g| g.0 == "*") {
            return None;
        }
        names
            .iter()
            .find(|n| !grants.iter().any(|g| &g.0 == *n))
            .cloned()
    }

    /// One effect: `Ok(true)` allowed, `Ok(false)` needs approval, `Err`
    /// denied with the reason.
    pub fn check(&self, e: &Effect, home: Option<&str>) -> Result<bool, String> {
        let deny = |what: String| Err(what);
        match e {
            Effect::Opaque => match self.opaque {
                OpaqueMode::Allow => Ok(true),
                OpaqueMode::Ask => Ok(false),
                OpaqueMode::Deny => deny(
                    "opaque effects are denied (opaque = \"deny\"): the plan runs a program it cannot see into (an external command, or a builtin given a flag it does not model, which runs the program of that name)"
                        .into(),
                ),
            },
            Effect::FsRead { paths } => match Self::fs_ok(&self.fs.read, paths, home) {
                None => Ok(true),
                Some(p) => deny(format!("fs_read of {p} is outside fs.read")),
            },
            Effect::FsWrite { paths } => match Self::fs_ok(&self.fs.write, paths, home) {
                None => Ok(true),
                Some(p) => deny(format!("fs_write of {p} is outside fs.write")),
            },
            Effect::FsDelete { paths } => match Self::fs_ok(&self.fs.delete, paths, home) {
                None => Ok(true),
                Some(p) => deny(format!("fs_delete of {p} is outside fs.delete")),
            },
            Effect::ProcSpawn { bin_hash, argv0 } => {
                let base = Path::new(argv0)
                    .file_name()
                    .map(|b| b.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if self.proc_spawn.iter().any(|g| {
                    g.0 == "*"
                        || (!bin_hash.is_empty() && &g.0 == bin_hash)
                        || &g.0 == argv0
                        || g.0 == base
                }) {
                    Ok(true)
                } else {
                    deny(format!("proc_spawn of {argv0} is not in proc_spawn"))
                }
            }
            Effect::NetConnect { host, port } => {
                if self.net_connect.iter().any(|g| g.matches(host, *port)) {
                    Ok(true)
                } else {
                    deny(format!(
                        "net_connect to {host}:{port} is not in net_connect"
                    ))
                }
            }
            Effect::NetListen { port } => {
                if self.net_listen.contains(port) {
                    Ok(true)
                } else {
                    deny(format!("net_listen on {port} is not in net_listen"))
                }
            }
            Effect::EnvRead { names } => match Self::names_ok(&self.env_read, names) {
                None => Ok(true),
                Some(n) => deny(format!("env_read of {n} is not in env_read")),
            },
            Effect::EnvWrite { names } => match Self::names_ok(&self.env_write, names) {
                None => Ok(true),
                Some(n) => deny(format!("env_write of {n} is not in env_write")),
            },
            Effect::SecretUse { names } => match Self::names_ok(&self.secret_use, names) {
                None => Ok(true),
                Some(n) => deny(format!("secret_use of {n} is not in secret_use")),
            },
            Effect::SessionWrite if self.session_write => Ok(true),
            Effect::JournalRead if self.journal_read => Ok(true),
            Effect::Time if self.time => Ok(true),
            Effect::SessionWrite | Effect::JournalRead | Effect::Time => deny(format!(
                "{} is not granted ({} = false)",
                e.kind(),
                e.kind()
            )),
        }
    }

    /// The verdict for a plan (docs/rules.md §21, with `auto_apply`).
    pub fn decide(&self, effects: &[Effect], home: Option<&str>) -> Decision {
        let mut ask = Vec::new();
        for e in effects {
            match self.check(e, home) {
                Err(reason) => {
                    return Decision {
                        verdict: Verdict::Deny,
                        reason: Some(reason),
                        ask: Vec::new(),
                    }
                }
                Ok(false) => ask.push(e.clone()),
                Ok(true) => {}
            }
        }
        let verdict = if !ask.is_empty() {
            Verdict::ApprovalRequired
        } else {
            match self.auto_apply {
                AutoApply::Never => Verdict::ApprovalRequired,
                AutoApply::InGrant => Verdict::Allow,
                AutoApply::Reversible if super::effect::auto_reversible(effects) => Verdict::Allow,
                AutoApply::Reversible => Verdict::ApprovalRequired,
            }
        };
        let reason = match verdict {
            Verdict::Allow => None,
            _ if !ask.is_empty() => Some(format!(
                "{} needs approval (opaque = \"ask\")",
                ask.iter().map(|e| e.kind()).collect::<Vec<_>>().join(", ")
            )),
            _ => Some(format!(
                "auto_apply = \"{}\" requires approval of this plan",
                match self.auto_apply {
                    AutoApply::Never => "never",
                    AutoApply::InGrant => "in-grant",
                    AutoApply::Reversible => "reversible",
                }
            )),
        };
        Decision {
            verdict,
            reason,
            ask,
        }
    }
}

/// The daemon's policy: the configured sections plus the local uid default.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub principals: BTreeMap<String, PrincipalPolicy>,
}

impl Policy {
    pub fn from_config(c: &PolicyConfig, local: &str) -> Policy {
        let mut principals = c.principal.clone();
        principals
            .entry(local.to_string())
            .or_insert_with(local_default);
        Policy { principals }
    }

    pub fn get(&self, principal: &str) -> Option<&PrincipalPolicy> {
        self.principals.get(principal)
    }

    /// The verdict for `principal` (no section: deny naming the section).
    pub fn decide(&self, principal: &str, effects: &[Effect], home: Option<&str>) -> Decision {
        match self.get(principal) {
            Some(p) => p.decide(effects, home),
            None => Decision {
                verdict: Verdict::Deny,
                reason: Some(missing_section(principal)),
                ask: Vec::new(),
            },
        }
    }
}

/// `namespaces = "auto" | "require" | "off"` of a principal's policy.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Namespaces {
    /// Use bubblewrap when the daemon found it at start; else Landlock and
    /// seccomp alone.
    #[default]
    Auto,
    /// Refuse to start a child without bubblewrap.
    Require,
    /// Never: Landlock and seccomp alone.
    Off,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(path_matches("/**", "/a/b"));
        assert!(path_matches("/**", "/"));
        assert!(path_matches("/p/**", "/p"));
        assert!(path_matches("/p/**", "/p/x/y"));
        assert!(!path_matches("/p/**", "/q/x"));
        assert!(path_matches("/p/*.txt", "/p/a.txt"));
        assert!(!path_matches("/p/*.txt", "/p/d/a.txt"));
        assert!(path_matches("/p/**/t/*", "/p/a/b/t/x"));
        assert!(!path_matches("relative/**", "/relative/x"));
    }

    /// The grant matcher and the language's globbing agree: one table.
    #[test]
    fn one_glob_matcher() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for f in ["a/f", "a/b/f", "f", "a/x.txt", "a/b/c/f", "z/f"] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        let r = root.display().to_string();
        for (pat, path, want) in [
            ("/*/f", "/a/b/f", false),
            ("/*/f", "/a/f", true),
            ("/**/f", "/a/b/c/f", true),
            ("/**/f", "/f", true),
            ("/a/*", "/a/b/f", false),
            ("/a/**", "/a/b/f", true),
            ("/a/*.txt", "/a/x.txt", true),
            ("/a/?.txt", "/a/x.txt", true),
            ("/[az]/f", "/z/f", true),
            ("/[!a]/f", "/a/f", false),
        ] {
            let (gpat, gpath) = (format!("{r}{pat}"), format!("{r}{path}"));
            assert_eq!(path_matches(&gpat, &gpath), want, "{pat} vs {path}");
            // The language's expansion of the same pattern finds exactly
            // the paths the grant matcher accepts.
            let found: Vec<String> = crate::glob::expand(&gpat, Path::new("/"), true)
                .into_iter()
                .map(|p| p.display().to_string())
                .collect();
            assert_eq!(found.contains(&gpath), want, "expand {pat}: {found:?}");
        }
    }

    /// A derived path that is a glob is covered only when a `/**` grant
    /// covers its root (attack: `proj/*/f` granting `rm proj/**/f`).
    #[test]
    fn glob_paths_need_a_recursive_grant() {
        let p: PrincipalPolicy = toml::from_str("fs.delete = [\"/proj/*/f\"]").unwrap();
        let d = |s: &str| Effect::FsDelete {
            paths: vec![s.into()],
        };
        assert!(p.check(&d("/proj/a/f"), None).is_ok());
        assert!(p.check(&d("/proj/a/b/f"), None).is_err());
        assert!(p.check(&d("/proj/**/f"), None).is_err());
        assert!(p.check(&d("/proj/*/f"), None).is_err());
        let p: PrincipalPolicy = toml::from_str("fs.delete = [\"/proj/**\"]").unwrap();
        assert!(p.check(&d("/proj/**/f"), None).is_ok());
        assert!(p.check(&d("/proj/a/*.txt"), None).is_ok());
        assert!(p.check(&d("/other/**/f"), None).is_err());
        assert!(p.check(&d("/**"), None).is_err());
    }

    #[test]
    fn verdicts() {
        let p: PrincipalPolicy = toml::from_str(
            r#"
opaque = "ask"
auto_apply = "in-grant"
fs.write = ["/proj/**"]
"#,
        )
        .unwrap();
        let w = |s: &str| Effect::FsWrite {
            paths: vec![s.into()],
        };
        assert_eq!(p.decide(&[w("/proj/x")], None).verdict, Verdict::Allow);
        assert_eq!(p.decide(&[w("/etc/x")], None).verdict, Verdict::Deny);
        assert_eq!(
            p.decide(&[w("/proj/x"), Effect::Opaque], None).verdict,
            Verdict::ApprovalRequired
        );
        let pol = Policy::from_config(&PolicyConfig::default(), "uid:0");
        let d = pol.decide("agent", &[], None);
        assert_eq!(d.verdict, Verdict::Deny);
        assert!(d.reason.unwrap().contains("[policy.principal.\"agent\"]"));
        assert_eq!(
            pol.decide("uid:0", &[Effect::Opaque, w("/x")], None)
                .verdict,
            Verdict::Allow
        );
    }

    #[test]
    fn bad_keys_are_errors() {
        for bad in [
            "net_connect = [\"nohost\"]",
            "net_connect = [\"h:99999\"]",
            "fs.read = [\"rel/**\"]",
            "unknown = 1",
            "opaque = \"maybe\"",
            "auto_apply = \"always\"",
            "fs.exec = []",
            "env.read = [\"HOME\"]",
            "approve_via = [\"email\"]",
            "approve_via = \"cli\"",
        ] {
            assert!(toml::from_str::<PrincipalPolicy>(bad).is_err(), "{bad}");
        }
        let ok: PrincipalPolicy =
            toml::from_str("net = [\"*.x.org:*\"]\nspawn = [\"git\"]\nsecrets = [\"t\"]").unwrap();
        assert_eq!(ok.net_connect.len(), 1);
        assert_eq!(ok.proc_spawn.len(), 1);
        assert_eq!(ok.approve_channels(false), vec![ApproveVia::Cli]);
        assert_eq!(ok.approve_channels(true), ApproveVia::ALL.to_vec());
        let e: PrincipalPolicy = toml::from_str("approve_via = [\"elicitation\"]").unwrap();
        assert_eq!(e.approve_channels(true), vec![ApproveVia::Elicitation]);
        assert!(toml::from_str::<PrincipalPolicy>("sessions = [\"\"]").is_err());
        assert!(toml::from_str::<PrincipalPolicy>("sessions = \"x\"").is_err());
    }

    #[test]
    fn shared_sessions_are_whole_name_globs() {
        let p: PrincipalPolicy = toml::from_str("sessions = [\"shared-*\", \"ci?\"]").unwrap();
        assert!(p.shares_session("shared-a"));
        assert!(p.shares_session("shared-a/b"));
        assert!(p.shares_session("ci1"));
        assert!(!p.shares_session("ci12"));
        assert!(!p.shares_session("xshared-a"));
        assert!(!p.shares_session("default"));
        assert!(!PrincipalPolicy::default().shares_session("shared-a"));
    }
}
