//! What a plan can undo (docs/rules.md §21): reversibility, with the reason
//! for every effect that cannot be undone and where `rm` puts what it
//! removes (`shoal_proto::kernel::Reversibility` is its wire form).

use super::effect::Effect;

/// What derivation learned of undoing a program, beside its effects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Undo {
    /// Effects that cannot be undone, one phrase each
    /// (`rm --permanent deletes /p/a for good`).
    pub lost: Vec<String>,
    /// Absolute paths `rm` moves to the trash.
    pub trashed: Vec<String>,
    /// The trash directory those go to (as the evaluation thread sees it).
    pub trash_dir: Option<String>,
}

impl Undo {
    pub fn lose(&mut self, why: String) {
        if !self.lost.contains(&why) {
            self.lost.push(why);
        }
    }

    pub fn trash(&mut self, paths: &[String]) {
        for p in paths {
            if !self.trashed.contains(p) {
                self.trashed.push(p.clone());
            }
        }
    }
}

/// A program's effects and what it can undo.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Derived {
    pub effects: Vec<Effect>,
    pub undo: Undo,
    /// Where it was derived (a plan's: the session's cwd and environment).
    pub place: Option<super::place::Place>,
}

impl Derived {
    /// The whole plan is `[opaque]` (derivation gave up).
    pub fn opaque() -> Derived {
        Derived {
            effects: vec![Effect::Opaque],
            undo: Undo::default(),
            place: None,
        }
    }

    /// Every reason the plan cannot be undone: the deriver's (permanent
    /// deletes, overwrites) and the effects' own (opaque, network).
    pub fn irreversible(&self) -> Vec<String> {
        irreversible(&self.effects, &self.undo)
    }

    /// `reversible` or `irreversible`.
    pub fn reversibility(&self) -> &'static str {
        if self.irreversible().is_empty() {
            "reversible"
        } else {
            "irreversible"
        }
    }
}

/// Every reason a plan of `effects` cannot be undone: the deriver's
/// (permanent deletes, overwrites) and the effects' own (opaque, network).
pub fn irreversible(effects: &[Effect], undo: &Undo) -> Vec<String> {
    let mut why = undo.lost.clone();
    for e in effects {
        let w = match e {
            Effect::Opaque => {
                "an opaque effect (an external command or script): what it does is not known"
                    .to_string()
            }
            Effect::NetConnect { host, port } => {
                format!("net_connect {host}:{port}: what is sent cannot be recalled")
            }
            Effect::NetListen { port } => {
                format!("net_listen {port}: what is answered cannot be recalled")
            }
            _ => continue,
        };
        if !why.contains(&w) {
            why.push(w);
        }
    }
    why
}

/// How files `rm` trashed come back.
pub const HOW: &str = "rm moves these into the trash directory; the outcome's `trash` field names each file: mv it back to undo";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_make_a_plan_irreversible() {
        let mut d = Derived {
            effects: vec![Effect::FsDelete {
                paths: vec!["/p/a".into()],
            }],
            undo: Undo::default(),
            place: None,
        };
        assert_eq!(d.reversibility(), "reversible");
        d.undo.lose("rm --permanent deletes /p/a for good".into());
        d.undo.lose("rm --permanent deletes /p/a for good".into());
        assert_eq!(d.reversibility(), "irreversible");
        assert_eq!(d.irreversible().len(), 1);
        assert_eq!(d.irreversible()[0], "rm --permanent deletes /p/a for good");
        assert!(d.undo.trashed.is_empty());

        let net = Derived {
            effects: vec![Effect::NetConnect {
                host: "github.com".into(),
                port: 22,
            }],
            undo: Undo::default(),
            place: None,
        };
        assert_eq!(net.reversibility(), "irreversible");
        assert!(net.irreversible()[0].contains("github.com:22"));
    }

    #[test]
    fn trashed_paths_name_the_trash() {
        let mut d = Derived::default();
        d.undo.trash(&["/p/a".into(), "/p/a".into()]);
        d.undo.trash_dir = Some("/tmp/shoal-1/trash/7".into());
        assert_eq!(d.reversibility(), "reversible");
        assert_eq!(d.undo.trashed, ["/p/a"]);
        assert!(d.irreversible().is_empty());
    }
}
