//! Leash: plans before effects, a policy per principal, tokens and the
//! OS sandbox (docs/rules.md §21).
//!
//! Pure except for the token file and the Landlock calls (the language's
//! `derive` walks the syntax tree into this crate's effects): `policy` decides, `plan` names and describes plans,
//! `tokens` keeps bearer tokens hashed on disk, `landlock` lowers a
//! principal's filesystem grants for its children, `seccomp` holds the
//! socket filters token principals' children install after them.

pub mod bin_id;
pub mod confine;
pub mod effect;
pub mod exec_list;
pub mod glob;
pub mod grant_path;
pub mod landlock;
#[cfg(test)]
mod landlock_tests;
pub mod namespaces;
pub mod place;
pub mod plan;
pub mod policy;
pub mod protected;
pub mod run_gate;
pub mod seccomp;
#[cfg(test)]
mod seccomp_tests;
pub mod tokens;
pub mod undo;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use effect::Effect;
pub use policy::{Decision, Policy, Verdict};

/// The daemon-wide Leash state: the policy, the token store, the plan TTL.
pub struct Runtime {
    pub policy: Arc<Policy>,
    pub tokens: Option<tokens::Store>,
    pub plan_ttl: Duration,
    /// The local uid principal (`uid:N`).
    pub local: String,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Install the daemon's runtime (once, at start).
pub fn install(policy: &policy::PolicyConfig, plan_ttl: Duration, state_dir: Option<PathBuf>) {
    let local = local_principal();
    let _ = RUNTIME.set(Runtime {
        policy: Arc::new(Policy::from_config(policy, &local)),
        tokens: state_dir.map(|d| tokens::Store::new(d.join("tokens.json"))),
        plan_ttl,
        local,
    });
}

/// The runtime (the built-in defaults when none was installed).
pub fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let local = local_principal();
        Runtime {
            policy: Arc::new(Policy::from_config(&Default::default(), &local)),
            tokens: None,
            plan_ttl: DEFAULT_PLAN_TTL,
            local,
        }
    })
}

pub const DEFAULT_PLAN_TTL: Duration = Duration::from_secs(3600);

pub fn local_principal() -> String {
    format!("uid:{}", shoal_base::paths::euid())
}

/// What a connection's principal brings to each run: its policy and its
/// sandbox.
#[derive(Debug)]
pub struct Gate {
    pub principal: String,
    pub policy: Arc<Policy>,
    /// The principal's filesystem grants lowered for Landlock, plus the
    /// socket filter for every token principal (`None`: the children are
    /// not confined; only ever the local uid).
    pub sandbox: Option<Arc<landlock::Rules>>,
    /// `$HOME` of the daemon (what `~` in a grant means), read once.
    home: Option<String>,
    /// The run-time gate installed on the evaluation threads of this
    /// principal's runs (`None`: the permissive local default, unchecked).
    pub run: Option<Arc<run_gate::RunGate>>,
}

impl Gate {
    pub fn for_principal(principal: &str) -> Gate {
        let rt = runtime();
        let home = std::env::var("HOME").ok();
        let policy = rt.policy.get(principal);
        // Every principal but the local uid is a token principal: its
        // children always get the unix socket filter (the daemon's socket
        // would admit them as the local uid).
        let sandbox = if principal == rt.local {
            policy.and_then(|p| landlock::Rules::lower(p, home.as_deref()))
        } else {
            Some(landlock::Rules::for_token(policy, home.as_deref()))
        }
        .map(Arc::new);
        if let (Some(s), false) = (&sandbox, principal == rt.local) {
            let mode = policy.map_or(namespaces::Mode::Auto, |p| p.namespaces);
            namespaces::register(s, mode, principal);
        }
        let permissive =
            principal == rt.local && policy.is_some_and(|p| *p == policy::local_default());
        let run = (!permissive)
            .then(|| Arc::new(run_gate::RunGate::new(principal, policy, home.as_deref())));
        Gate {
            principal: principal.to_string(),
            policy: rt.policy.clone(),
            sandbox,
            home,
            run,
        }
    }

    /// This gate while applying an approved plan of `effects`: what the
    /// plan lists passes the run-time checks too.
    pub fn applying(&self, effects: &[Effect]) -> Gate {
        // An approved opaque plan may start any program it can read. Its rules are the
        // principal's as well: the same namespace mode (a `"require"` never runs
        // without namespaces) and the same holders (its private `/tmp`).
        let sandbox = match &self.sandbox {
            Some(r) if effects.contains(&Effect::Opaque) && r.exec.is_some() => {
                let wider = Arc::new(r.any_program());
                if !self.is_local() {
                    let p = self.policy.get(&self.principal);
                    let mode = p.map_or(namespaces::Mode::Auto, |p| p.namespaces);
                    namespaces::register(&wider, mode, &self.principal);
                }
                Some(wider)
            }
            s => s.clone(),
        };
        Gate {
            principal: self.principal.clone(),
            policy: self.policy.clone(),
            sandbox,
            home: self.home.clone(),
            run: self.run.as_ref().map(|r| Arc::new(r.applying(effects))),
        }
    }

    pub fn is_local(&self) -> bool {
        self.principal == runtime().local
    }

    /// Are this principal's grants (filesystem, and network where lowered)
    /// enforced by the OS?
    pub fn caps_enforced(&self) -> bool {
        self.sandbox
            .as_ref()
            .is_some_and(|r| r.enforceable_at(landlock::abi()).is_ok())
    }

    /// What the OS confines of this principal's network use.
    pub fn net_confinement(&self) -> &'static str {
        self.sandbox
            .as_ref()
            .map_or("open", |r| r.net.enforced_at(landlock::abi()))
    }

    pub fn decide(&self, effects: &[Effect]) -> Decision {
        self.policy
            .decide(&self.principal, effects, self.home.as_deref())
    }

    /// [`decide`](Self::decide) knowing what the program cannot undo:
    /// `auto_apply = "reversible"` allows no plan that overwrites or
    /// deletes for good.
    pub fn decide_derived(&self, d: &undo::Derived) -> Decision {
        let mut out = self.decide(&d.effects);
        let reversible_only = self
            .policy
            .get(&self.principal)
            .is_some_and(|p| p.auto_apply == policy::AutoApply::Reversible);
        if out.verdict == Verdict::Allow && reversible_only && !d.undo.lost.is_empty() {
            out.verdict = Verdict::ApprovalRequired;
            out.reason = Some(format!(
                "auto_apply = \"reversible\" requires approval of this plan: {}",
                d.undo.lost.join("; ")
            ));
        }
        out
    }
}

/// `plans.ttl` and friends: a duration word of the language's unit table (`90s`, `30m`, `1h`,
/// `2d`, ...) or bare seconds; at least one second.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    match shoal_base::units::parse_duration(s, true) {
        Some(ns) if ns >= 1_000_000_000 => Ok(Duration::from_nanos(ns as u64)),
        Some(_) => Err(format!("{s:?} is out of range (1s ..)")),
        None => Err(format!("{s:?} is not a duration (like 90s, 30m, 1h, 2d)")),
    }
}

/// The host's sandbox tier (docs/rules.md §21): `A` Linux with Landlock, `B`
/// Linux without.
pub fn tier() -> &'static str {
    if landlock::abi() > 0 {
        "A"
    } else {
        "B"
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_use_the_language_unit_table() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 30m "), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("1w"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("500ms")
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_duration("0").unwrap_err().contains("out of range"));
        assert!(parse_duration("-1h").unwrap_err().contains("out of range"));
        assert!(parse_duration("soon")
            .unwrap_err()
            .contains("is not a duration"));
        assert!(parse_duration("5x")
            .unwrap_err()
            .contains("is not a duration"));
    }
}
