//! A link the token makes inside its project must not re-point one of its grants: with
//! `write = proj/**` and `delete = proj/target/**`, the agent makes `proj/target -> outside`,
//! then a new session (its rules made afresh) deletes through the grant, by a builtin and
//! by a child, with namespaces and without. Judged on disk; the local user's delete of the
//! same file is the control. A link one token makes must not move another token's grant
//! either.

use super::*;

fn config(proj: &Path, root: &Path) -> String {
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
    ) + &swap_principals(proj, root)
        + &readers(proj)
}

/// agent:reader / agent:readeroff: read only `proj/docs` (and the system), write and
/// delete nothing. agent:swap may write where their grant goes through.
fn readers(proj: &Path) -> String {
    let mut read = vec![format!("{}/docs/**", proj.display())];
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    let keys = "opaque = \"allow\"\nauto_apply = \"in-grant\"";
    principal(
        "agent:reader",
        &format!("{keys}\nnamespaces = \"auto\""),
        &read,
        &[],
        &[],
    ) + &principal(
        "agent:readeroff",
        &format!("{keys}\nnamespaces = \"off\""),
        &read,
        &[],
        &[],
    )
}

/// agent:swap / agent:swapoff: read only `proj/docs` (and the system), write and delete
/// all of `proj`: so it may move `docs` away and put a link in its place.
fn swap_principals(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read = vec![format!("{}/docs/**", proj.display())];
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    let keys = "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true";
    principal(
        "agent:swap",
        &format!("{keys}\nnamespaces = \"auto\""),
        &read,
        &pj,
        &pj,
    ) + &principal(
        "agent:swapoff",
        &format!("{keys}\nnamespaces = \"off\""),
        &read,
        &pj,
        &pj,
    )
}

/// As `who` in `s`: move `proj/docs` away and put a link to `outside` in its place.
fn swap_for_link(a: &Arena, s: &mut Agent, who: &str) {
    let docs = a.p("docs");
    let r = s.exec(&format!(
        "mv {} {}; ln -s {} {}",
        lit(&docs),
        lit(&a.p("d2")),
        lit(&a.outside),
        lit(&docs)
    ));
    assert!(
        std::fs::symlink_metadata(&docs).is_ok_and(|m| m.file_type().is_symlink()),
        "{who}: the swap is made: {r}"
    );
}

#[test]
fn a_grant_swapped_for_a_link_after_its_rules_were_made_grants_nothing() {
    let a = Arena::start(config, &[]);
    let docs = a.p("docs");
    let elsewhere = a.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    std::fs::write(a.out("secret"), &a.marker).expect("outside secret");
    for who in ["agent:swap", "agent:swapoff"] {
        let _ = std::fs::remove_file(&docs);
        let _ = std::fs::remove_dir_all(a.p("d2"));
        std::fs::create_dir(&docs).expect("docs");
        std::fs::write(docs.join("readme"), "docs").expect("readme");
        let mut s = a.kernel(Some(who), who, None);
        // Control: the grant reads while it is the real directory.
        let r = s.exec(&format!("sh {{ cat {}/readme }}", docs.display()));
        assert!(leaks(&r, "docs"), "{who}: control: {r}");
        swap_for_link(&a, &mut s, who);
        // A PTY program (started by the daemon, not by the confined evaluation thread).
        let open = s.conn.call(
            "pty.open",
            json!({"cmd": "sh", "args": ["-c",
                format!("cat {}/secret; echo END; sleep 30", docs.display())]}),
        );
        let id = open["result"]["pty_id"].clone();
        let screen = s.conn.call(
            "pty.read",
            json!({"pty_id": id, "wait_for": "END", "timeout_ms": 10000}),
        );
        s.conn.call("pty.close", json!({"pty_id": id}));
        assert!(
            leaks(&screen, "END") && !leaks(&screen, &a.marker),
            "ESCAPED ({who}, pty): read through the swapped link: {open} {screen}"
        );
        // From a cwd outside the grants (a new namespace holder stands in for it), and
        // from the project.
        for cwd in [&elsewhere, &a.proj] {
            let r = s.exec(&format!(
                "cd {}; sh {{ cat {}/secret }}",
                lit(cwd),
                docs.display()
            ));
            assert!(
                !leaks(&r, &a.marker),
                "ESCAPED ({who}, cwd {}): read through the swapped link: {r}",
                cwd.display()
            );
        }
    }
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

#[test]
fn another_tokens_link_does_not_move_a_grant() {
    let a = Arena::start(config, &[]);
    let docs = a.p("docs");
    std::fs::create_dir(&docs).expect("docs");
    std::fs::write(a.out("secret"), &a.marker).expect("outside secret");
    // Sessions the readers opened before the link was made, and their first ones after.
    let mut early: Vec<(&str, Agent)> = ["agent:reader", "agent:readeroff"]
        .into_iter()
        .map(|who| (who, a.kernel(Some(who), &format!("{who}-early"), None)))
        .collect();
    for (who, s) in &mut early {
        let r = s.exec("1 + 1");
        assert!(leaks(&r, "2"), "{who}: control: {r}");
    }
    // agent:swap may write all of the project: it puts a link where `docs` was.
    let mut swap = a.kernel(Some("agent:swap"), "swapper", None);
    swap_for_link(&a, &mut swap, "agent:swap");
    let late = ["agent:reader", "agent:readeroff"]
        .into_iter()
        .map(|who| (who, a.kernel(Some(who), who, None)));
    for (who, mut s) in early.into_iter().chain(late) {
        for src in [
            format!("cat {}", lit(&docs.join("secret"))),
            format!("sh {{ cat {}/secret }}", docs.display()),
            format!("sh {{ cat {} }}", a.out("secret").display()),
        ] {
            let r = s.exec(&src);
            assert!(
                !leaks(&r, &a.marker),
                "ESCAPED ({who}): read through another token's link with `{src}`: {r}"
            );
        }
    }
    // Control: the local user reads through the same link.
    let mut local = a.kernel(None, "home", None);
    let r = local.exec(&format!("cat {}", lit(&docs.join("secret"))));
    assert!(leaks(&r, &a.marker), "control: {r}");
}
