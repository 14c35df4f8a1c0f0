//! A link the token makes inside its project must not re-point one of its grants: with
//! `write = proj/**` and `delete = proj/target/**`, the agent makes `proj/target -> outside`,
//! then a new session (its rules made afresh) deletes through the grant, by a builtin and
//! by a child, with namespaces and without. Judged on disk; the local user's delete of the
//! same file is the control.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read = pj.clone();
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    let target = vec![format!("{}/target/**", proj.display())];
    let keys = "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true";
    principal(
        "agent:ln",
        &format!("{keys}\nnamespaces = \"auto\""),
        &read,
        &pj,
        &target,
    ) + &principal(
        "agent:lnoff",
        &format!("{keys}\nnamespaces = \"off\""),
        &read,
        &pj,
        &target,
    )
}

#[test]
fn a_link_in_the_project_does_not_move_a_grant() {
    let a = Arena::start(config, &[]);
    let target = a.p("target");
    for who in ["agent:ln", "agent:lnoff"] {
        let _ = std::fs::remove_file(&target);
        let mut first = a.kernel(Some(who), &format!("{who}-1"), None);
        let r = first.exec(&format!("ln -s {} {}", lit(&a.outside), lit(&target)));
        assert!(
            std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()),
            "{who}: the link is made in the project: {r}"
        );
        let victims = [a.out("v-builtin"), a.out("v-child")];
        for v in &victims {
            std::fs::write(v, "keep").expect("victim");
        }
        // A new session: its rules are made now, with the link in place.
        let mut next = a.kernel(Some(who), &format!("{who}-2"), None);
        let r1 = next.exec(&format!(
            "rm --permanent {}",
            lit(&target.join("v-builtin"))
        ));
        let r2 = next.exec(&format!(
            "sh {{ rm -f {} }}",
            target.join("v-child").display()
        ));
        for (v, r) in victims.iter().zip([r1, r2]) {
            assert_eq!(
                std::fs::read_to_string(v).ok().as_deref(),
                Some("keep"),
                "ESCAPED ({who}): deleted {} through the link: {r}",
                v.display()
            );
        }
    }
    // Control: the local user deletes the same file.
    let mut local = a.kernel(None, "home", None);
    let r = local.exec(&format!("rm --permanent {}", lit(&a.out("v-builtin"))));
    assert!(!a.out("v-builtin").exists(), "control: {r}");
}
