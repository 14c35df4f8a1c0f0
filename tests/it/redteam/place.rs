//! An approved plan applies only where it was planned. The human approves `sh { ./rttool }`
//! planned in `proj/a`, whose `rttool` is harmless; the agent then moves the session (`cd
//! proj/b`, or `env.PATH` to put `proj/b` first for a bare `rttool`) where its own `rttool`
//! waits, and applies the plan, or plans the same source again there hoping for the same
//! approved plan. Judged by `proj/b-ran`, which only `proj/b`'s tool creates. Controls: the
//! approved plan applied where it was made does run (`proj/a-ran`), and the local user's
//! `proj/b/rttool` does create its file.

use super::approvals::{apply, human_approves, plan};
use super::*;

/// agent:place: opaque needs a human, the system dirs readable so `sh` can run, and it may
/// set `PATH`.
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut sys = pj.clone();
    sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    principal(
        "agent:place",
        "opaque = \"ask\"\nauto_apply = \"in-grant\"\nsession_write = true\n\
         env_read = [\"PATH\"]\nenv_write = [\"PATH\"]",
        &sys,
        &pj,
        &pj,
    )
}

/// `proj/<dir>/rttool`, a script that creates `proj/<dir>-ran`.
fn tool(a: &Arena, dir: &str) -> PathBuf {
    let d = a.p(dir);
    std::fs::create_dir_all(&d).expect("tool dir");
    let t = d.join("rttool");
    let ran = a.p(&format!("{dir}-ran"));
    std::fs::write(&t, format!("#!/bin/sh\n: > '{}'\n", ran.display())).expect("tool");
    std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o755)).expect("chmod tool");
    d
}

/// Both outcome files gone, the session back in the project with its first `PATH`.
fn reset(a: &Arena, ag: &mut Agent, path: &str) {
    for f in ["a-ran", "b-ran"] {
        let _ = std::fs::remove_file(a.p(f));
    }
    ag.home();
    ag.exec(&format!("env.PATH = {path:?}"));
}

#[test]
fn approved_plans_apply_only_where_they_were_made() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    let (da, db) = (tool(&a, "a"), tool(&a, "b"));
    let path = format!("{}:/usr/bin:/bin", da.display());
    let env = json!({"HOME": a.root.path().display().to_string(), "PATH": path});
    let b_ran = a.p("b-ran");
    let mut k = a.kernel(Some("agent:place"), "place", Some(env.clone()));
    let mut m = a.mcp(Some("agent:place"), "place-mcp", Some(env));
    let cd_a = format!("cd {}", lit(&da));
    let cd_b = format!("cd {}", lit(&db));
    for ag in [&mut k, &mut m] {
        let via = if ag.mcp { "mcp" } else { "kernel" };
        // The approved plan applied after `cd` to a dir holding another `./rttool`.
        reset(&a, ag, &path);
        ag.exec(&cd_a);
        let pr = plan(ag, "sh { ./rttool }");
        human_approves(&a, &pr);
        ag.exec(&cd_b);
        let r = apply(ag, &pr);
        rep.judge(
            &format!("9 approved in proj/a, applied after cd proj/b [{via}]"),
            b_ran.exists().then(|| clip(&r.to_string())),
        );
        // The same source planned again in proj/b, hoping for the approved plan.
        reset(&a, ag, &path);
        ag.exec(&cd_a);
        let pr = plan(ag, "sh { ./rttool }");
        human_approves(&a, &pr);
        ag.exec(&cd_b);
        let again = plan(ag, "sh { ./rttool }");
        let r = apply(ag, &again);
        rep.judge(
            &format!("9 approved in proj/a, planned again in proj/b and applied [{via}]"),
            b_ran.exists().then(|| clip(&r.to_string())),
        );
        // The approved plan of a bare name applied after PATH puts proj/b first.
        reset(&a, ag, &path);
        let pr = plan(ag, "sh { rttool }");
        human_approves(&a, &pr);
        ag.exec(&format!(
            "env.PATH = {:?}",
            format!("{}:/usr/bin:/bin", db.display())
        ));
        let r = apply(ag, &pr);
        rep.judge(
            &format!("9 approved with proj/a on PATH, applied with proj/b first [{via}]"),
            b_ran.exists().then(|| clip(&r.to_string())),
        );
        // Control: applied where it was made, the approved plan runs.
        reset(&a, ag, &path);
        ag.exec(&cd_a);
        let pr = plan(ag, "sh { ./rttool }");
        human_approves(&a, &pr);
        let r = apply(ag, &pr);
        rep.control(
            &format!("9 an approved plan applies where it was made [{via}]"),
            a.p("a-ran").exists() && !b_ran.exists(),
            &r.to_string(),
        );
    }
    // Control: proj/b's tool does create its file when run.
    let _ = std::fs::remove_file(&b_ran);
    let mut local = a.kernel(None, "place-local", None);
    let r = local.exec(&format!("{cd_b}\nsh {{ ./rttool }}"));
    rep.control(
        "9 the local user runs proj/b/rttool",
        b_ran.exists(),
        &r.to_string(),
    );
    rep.finish("where plans apply");
}
