//! What a principal's evaluation sees of the session environment
//! (docs/rules.md §21): a token principal reads only the names its
//! `env_read` grants (globs as `fnmatch`, `*` for all), by every route (`env`
//! as a value, `env.X`, `env X`, `os.env()`, the `shoal://session/env`
//! resource), and a hidden name reads as unset. Its children start with the
//! names a program needs to run ([`CHILD_BASE`], `LC_*`), the granted ones,
//! the ones its own evaluation wrote and the command's prefix assignments;
//! nothing else of the environment the session was created with.
//!
//! No view (the local uid, or a policy granting `env_read = ["*"]`): the
//! environment is seen and inherited whole, as before.

use std::sync::Arc;

use indexmap::IndexMap;

/// Names a token principal's children always get (plus `LC_*`).
pub const CHILD_BASE: &[&str] = &[
    "PATH", "HOME", "LANG", "TERM", "USER", "LOGNAME", "TMPDIR", "SHELL", "PWD", "OLDPWD",
];

/// The `env_read` grants of one principal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvView {
    grants: Vec<String>,
}

impl EnvView {
    /// A view granting `grants` (`None` when one of them is `*`: no view).
    pub fn new(grants: &[String]) -> Option<EnvView> {
        if grants.iter().any(|g| g == "*") {
            return None;
        }
        Some(EnvView {
            grants: grants.to_vec(),
        })
    }

    /// The view of `gate`'s principal: none for the local uid; a principal
    /// without a policy section sees nothing.
    pub fn for_gate(gate: &shoal_policy::Gate) -> Option<Arc<EnvView>> {
        if gate.is_local() {
            return None;
        }
        let grants: Vec<String> = gate
            .policy
            .get(&gate.principal)
            .map(|p| p.env_read.iter().map(|g| g.0.clone()).collect())
            .unwrap_or_default();
        EnvView::new(&grants).map(Arc::new)
    }

    /// May the principal read `name`?
    pub fn allows(&self, name: &str) -> bool {
        self.grants
            .iter()
            .any(|g| g == name || shoal_policy::glob::match_component(g, name))
    }

    /// The pairs of `env` the principal may read.
    pub fn readable<'a, I>(&self, env: I) -> Vec<(String, String)>
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        env.into_iter()
            .filter(|(k, _)| self.allows(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Does a child get `name` (besides what its own evaluation wrote)?
    pub fn inherits(&self, name: &str) -> bool {
        CHILD_BASE.contains(&name) || name.starts_with("LC_") || self.allows(name)
    }

    /// `env` as a child of this principal gets it: inherited names plus
    /// `own` (names the principal's evaluation set itself).
    pub fn child_env(
        &self,
        env: &IndexMap<String, String>,
        own: &std::collections::BTreeSet<String>,
    ) -> IndexMap<String, String> {
        env.iter()
            .filter(|(k, _)| self.inherits(k) || own.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// `pairs` as the holder of `view` may read them (all without a view).
pub fn visible(view: Option<&EnvView>, pairs: Vec<(String, String)>) -> Vec<(String, String)> {
    match view {
        None => pairs,
        Some(v) => pairs.into_iter().filter(|(k, _)| v.allows(k)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn grants_filter_reads_and_children() {
        assert_eq!(EnvView::new(&["HOME".into(), "*".into()]), None);
        let v = EnvView::new(&["HOME".into(), "APP_*".into()]).unwrap();
        assert!(v.allows("HOME") && v.allows("APP_X") && !v.allows("SECRET"));
        assert!(!v.allows("PATH"));
        let e = env(&[
            ("HOME", "/h"),
            ("PATH", "/bin"),
            ("SECRET", "s3"),
            ("APP_MODE", "x"),
            ("LC_ALL", "C"),
            ("MINE", "1"),
        ]);
        let seen: Vec<String> = v.readable(&e).into_iter().map(|(k, _)| k).collect();
        assert_eq!(seen, ["HOME", "APP_MODE"]);
        let own = ["MINE".to_string()].into_iter().collect();
        let child: Vec<String> = v.child_env(&e, &own).into_keys().collect();
        assert_eq!(child, ["HOME", "PATH", "APP_MODE", "LC_ALL", "MINE"]);
        let none = EnvView::new(&[]).unwrap();
        assert!(none.readable(&e).is_empty());
        assert_eq!(
            visible(Some(&v), vec![("SECRET".into(), "s3".into())]),
            vec![]
        );
        assert_eq!(visible(None, vec![("S".into(), "1".into())]).len(), 1);
    }
}
