//! Kernel confinement of a token principal's evaluation (docs/leash.md).
//!
//! A token principal's programs are evaluated on threads of the daemon (the
//! session's worker, a task's thread). Linux credentials are per thread: a
//! Landlock domain, a seccomp filter and `no_new_privs` set on a thread bind
//! that thread and every thread and process it creates afterwards, and never
//! the rest of the daemon. So the first time a thread evaluates for a token
//! principal it confines itself with that principal's rules, for good:
//! builtins (`rm`, `cp`, `cat`, ...), methods (`.save`, `.read`, `glob`),
//! redirects and every child then meet the kernel, not only the effect
//! deriver. A thread confined for one principal refuses to evaluate for
//! another.
//!
//! What the rules leave out, whatever a token's grants say: the daemon's
//! state, config and socket directories, the private temporary directory of
//! the daemon (other principals' spill files and trash), and `/proc` (the
//! confined thread shares the daemon's address space, and `/proc/self/mem`
//! or `/proc/self/environ` would be the daemon's). A grant that covers one
//! of them is cut around it: the grant's directory is replaced by rules for
//! its entries, except the one leading to the protected directory, down to
//! it (entries created there later are not covered). Each token principal
//! gets a private directory of its own for its spill files and trash.

use std::cell::RefCell;
use std::io;
use std::path::PathBuf;

use super::landlock::Rules;

pub use crate::protected::{carve, carve_all, protect, protected, system_reads};

/// The private directory of a token principal (its spill files and trash),
/// `$TMPDIR/shoal-<uid>/principal/<hex of its name>`, created 0700.
pub fn private_dir(principal: &str) -> io::Result<PathBuf> {
    let hex: String = principal.bytes().map(|b| format!("{b:02x}")).collect();
    let base = shoal_base::spill_dir::private_temp_dir("principal")?;
    let dir = base.join(hex);
    shoal_base::spill_dir::ensure_private(&dir)?;
    Ok(dir)
}

thread_local! {
    /// The principal this thread is confined for, once it is.
    static CONFINED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The principal the calling thread is confined for, if any.
pub fn confined_for() -> Option<String> {
    CONFINED.with(|c| c.borrow().clone())
}

/// Confine the calling thread, for good, to `rules` (a token principal's,
/// see [`Rules::for_token`]) plus `principal`'s private directory, which
/// also becomes the thread's spill and trash directory. Nothing to do when
/// it is confined for `principal` already; an error when it is confined for
/// another one, or when the kernel cannot confine it (then it must not
/// evaluate).
pub fn confine_thread(principal: &str, rules: &Rules) -> Result<(), String> {
    match confined_for() {
        Some(p) if p == principal => return Ok(()),
        Some(p) => {
            return Err(format!(
                "this evaluation thread is confined for principal {p}, not {principal}"
            ))
        }
        None => {}
    }
    let private = private_dir(principal)
        .map_err(|e| format!("cannot create the private directory of {principal}: {e}"))?;
    let mut r = rules.clone();
    if let Some(read) = &mut r.read {
        read.push(private.clone());
    }
    r.write.push(private.clone());
    r.delete.push(private.clone());
    let rs = r
        .ruleset_for_thread()
        .map_err(|e| format!("cannot confine the evaluation of {principal}: {e}"))?;
    rs.confine()
        .apply_to_thread()
        .map_err(|e| format!("cannot confine the evaluation of {principal}: {e}"))?;
    shoal_base::spill_dir::set_thread_private_base(Some(private));
    CONFINED.with(|c| *c.borrow_mut() = Some(principal.to_string()));
    tracing::info!(principal, "evaluation thread confined");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carving_cuts_around_protected_dirs_only() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        for d in ["a/b/state", "a/b/other", "a/c", "d"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/file"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("a/b/state"), root.join("link")).unwrap();
        let protected = vec![root.join("a/b/state")];
        let got = carve(&root, &protected);
        let want: Vec<PathBuf> = ["a/b/other", "a/c", "a/file", "d"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(got, want);
        // A root inside a protected dir gives nothing; one beside it stays.
        assert!(carve(&root.join("a/b/state"), &protected).is_empty());
        assert_eq!(carve(&root.join("d"), &protected), vec![root.join("d")]);
        // The protected dir itself is never among the results.
        assert!(carve_all(vec![root.clone(), root.join("a")], &protected)
            .iter()
            .all(|p| !p.starts_with(root.join("a/b/state")) && !p.ends_with("link")));
    }

    /// The kernel, not the evaluator, stops a confined thread: plain
    /// `std::fs` calls on it fail outside the grants and in a protected
    /// dir inside them, while another thread of the same process is
    /// untouched; a confined thread refuses another principal.
    #[test]
    fn a_confined_thread_meets_the_kernel() {
        if super::super::landlock::abi() < 1 {
            eprintln!("skipped: this kernel has no Landlock");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        // The grant is `root`; its `state` dir is protected, so the rules
        // are cut to `root`'s other entries (`proj`).
        let proj = root.join("proj");
        let guarded = root.join("state");
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::create_dir_all(&guarded).unwrap();
        let t2 = tempfile::tempdir().unwrap();
        let outside = t2.path().join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::write(guarded.join("s"), "secret").unwrap();
        let protected = vec![guarded.clone()];
        assert_eq!(carve(&root, &protected), vec![proj.clone()]);
        let rules = Rules {
            read: Some(carve_all(vec![root.clone()], &protected)),
            write: carve_all(vec![root.clone()], &protected),
            delete: carve_all(vec![root.clone()], &protected),
            net: super::super::landlock::Net::Open,
            token: true,
            exec: None,
            links: Vec::new(),
        };
        let (o, p, g) = (outside.clone(), proj.clone(), guarded.clone());
        std::thread::spawn(move || {
            confine_thread("agent:unit", &rules).unwrap();
            assert_eq!(confined_for().as_deref(), Some("agent:unit"));
            std::fs::write(p.join("in.txt"), "ok").unwrap();
            assert!(std::fs::read_to_string(&o).is_err(), "read outside");
            assert!(std::fs::remove_file(&o).is_err(), "delete outside");
            assert!(std::fs::write(&o, "x").is_err(), "write outside");
            assert!(std::fs::read_to_string(g.join("s")).is_err(), "protected");
            assert!(std::fs::read_to_string("/proc/self/environ").is_err());
            // Threads it starts inherit the domain.
            let o2 = o.clone();
            std::thread::spawn(move || assert!(std::fs::read_to_string(&o2).is_err()))
                .join()
                .unwrap();
            assert!(confine_thread("agent:other", &Rules::for_token(None, None)).is_err());
        })
        .join()
        .unwrap();
        // This thread is not confined.
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(proj.join("in.txt")).unwrap(), "ok");
    }

    #[test]
    fn token_rules_always_filter_unix_sockets() {
        let open = super::super::policy::local_default();
        let r = Rules::for_token(Some(&open), None);
        // Even all-path grants confine a token: reads are a list, the
        // daemon's dirs and /proc are cut out, so no Landlock, no run.
        assert!(r.token && r.needs_landlock() && r.net == super::super::landlock::Net::Open);
        assert!(
            r.enforceable_at(0).is_err(),
            "fails closed without Landlock"
        );
        let read = r.read.as_ref().unwrap();
        assert!(read.iter().all(|p| !p.starts_with("/proc")), "{read:?}");
        let none = Rules::for_token(None, None);
        assert!(none.token && none.write.is_empty() && none.needs_landlock());
        let none_read = none.read.as_ref().unwrap();
        assert!(none_read.contains(&PathBuf::from("/usr")), "{none_read:?}");
        // Nothing under /tmp is granted, but for directories on PATH (whose
        // programs a token may run).
        let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter_map(|d| d.canonicalize().ok())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            none_read
                .iter()
                .all(|p| !p.starts_with("/tmp") || path_dirs.contains(p)),
            "{none_read:?}"
        );
        let p: super::super::policy::PrincipalPolicy =
            toml::from_str("fs.write = [\"/tmp/**\"]").unwrap();
        let r = Rules::for_token(Some(&p), None);
        let base = protected();
        assert!(r.token && !r.write.is_empty());
        assert!(
            r.write
                .iter()
                .all(|w| w.starts_with("/tmp") && !base.iter().any(|b| w.starts_with(b))),
            "{:?}",
            r.write
        );
        assert!(r.enforceable_at(0).is_err());
    }

    #[test]
    fn protected_always_has_proc_and_the_temp_base() {
        let p = protected();
        assert!(p.contains(&PathBuf::from("/proc")));
        assert!(p.contains(&crate::protected::temp_base()));
    }
}
