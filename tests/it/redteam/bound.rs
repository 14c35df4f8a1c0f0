//! An approved plan runs only the files it named as they were. The human approves
//! `./build.sh` (or `sh ./build.sh`, `sh { ./build.sh }`) under `opaque = "ask"` while the
//! script is benign; the agent then rewrites the script (an in-grant write, auto-applied) and
//! applies the plan: the opaque effects are the same `[opaque]` whatever the file holds.
//! Judged by `proj/swapped-ran`, which only the rewritten script creates. Controls: the
//! approved plan applied without the rewrite runs the benign script (`proj/benign-ran`), and
//! a new plan of the rewritten script, approved, does create `proj/swapped-ran`.

use super::approvals::{apply, human_approves, plan};
use super::*;

/// agent:bound: opaque needs a human, the system dirs readable so `sh` can run.
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut sys = pj.clone();
    sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    principal(
        "agent:bound",
        "opaque = \"ask\"\nauto_apply = \"in-grant\"\nsession_write = true",
        &sys,
        &pj,
        &pj,
    )
}

/// A script that creates `proj/<what>-ran`.
fn script(a: &Arena, what: &str) -> String {
    format!(
        "#!/bin/sh\n: > '{}'\n",
        a.p(&format!("{what}-ran")).display()
    )
}

/// `proj/build.sh` benign again (executable), both outcome files gone.
fn reset(a: &Arena, ag: &mut Agent) {
    for f in ["benign-ran", "swapped-ran"] {
        let _ = std::fs::remove_file(a.p(f));
    }
    let b = a.p("build.sh");
    std::fs::write(&b, script(a, "benign")).expect("build.sh");
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    ag.home();
}

/// The agent rewrites `proj/build.sh` through the language (mode kept: a write over it).
fn rewrite(a: &Arena, ag: &mut Agent) -> Value {
    let src = format!("{:?}.save(\"build.sh\")", script(a, "swapped"));
    let r = ag.exec(&src);
    let now = std::fs::read_to_string(a.p("build.sh")).unwrap_or_default();
    assert!(now.contains("swapped-ran"), "the rewrite did not land: {r}");
    r
}

/// Plan `src` with a benign script, have the human approve it, rewrite the
/// script as the agent, apply: the apply's reply.
fn approved_then_rewritten(a: &Arena, ag: &mut Agent, src: &str) -> Value {
    reset(a, ag);
    let pr = plan(ag, src);
    human_approves(a, &pr);
    rewrite(a, ag);
    apply(ag, &pr)
}

#[test]
fn approved_plans_run_only_the_files_they_named_as_they_were() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    let swapped = a.p("swapped-ran");
    let mut k = a.kernel(Some("agent:bound"), "bound", None);
    let mut m = a.mcp(Some("agent:bound"), "bound-mcp", None);
    for ag in [&mut k, &mut m] {
        let via = if ag.mcp { "mcp" } else { "kernel" };
        for src in ["./build.sh", "sh ./build.sh", "sh { ./build.sh }"] {
            // The approved plan applied after the agent rewrote the script.
            let r = approved_then_rewritten(&a, ag, src);
            rep.judge(
                &format!("P1 `{src}` approved, script rewritten, applied [{via}]"),
                swapped.exists().then(|| clip(&r.to_string())),
            );
            // Control: without the rewrite the approved plan runs the benign script.
            reset(&a, ag);
            let pr = plan(ag, src);
            let (_, shown, _) = run(&a.root, &["plan", "show", &pr, "--socket", &a.sock()], &[]);
            rep.control(
                &format!("P1 `shoal plan show` lists build.sh as bound [{via}]"),
                shown.contains(&a.p("build.sh").display().to_string()),
                &shown,
            );
            human_approves(&a, &pr);
            let r = apply(ag, &pr);
            rep.control(
                &format!("P1 `{src}` approved and applied unchanged [{via}]"),
                a.p("benign-ran").exists() && !swapped.exists(),
                &r.to_string(),
            );
        }
        // Names the file scan cannot follow (round 5): bound by their matches
        // (a glob) or left unbound, so the rewrite never runs.
        for src in [
            "sh { \"$PWD\"/build.sh }",
            "sh { ./bu''ild.sh }",
            "sh { ./buil?.sh }",
        ] {
            let r = approved_then_rewritten(&a, ag, src);
            rep.judge(
                &format!("P3 `{src}` approved, script rewritten, applied [{via}]"),
                swapped.exists().then(|| clip(&r.to_string())),
            );
        }
        // Control: the rewritten script, planned again and approved, does run.
        reset(&a, ag);
        rewrite(&a, ag);
        let pr = plan(ag, "./build.sh");
        human_approves(&a, &pr);
        let r = apply(ag, &pr);
        rep.control(
            &format!("P1 the rewritten script, planned again and approved, runs [{via}]"),
            swapped.exists(),
            &r.to_string(),
        );
    }
    rep.finish("what approved plans run");
}
