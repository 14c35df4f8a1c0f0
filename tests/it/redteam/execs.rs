//! Programs a granted program starts: with `proc_spawn = ["tar", "zip",
//! "sqlite3", "git"]` and `opaque = "deny"`, the kernel lets a token's child
//! execute only the granted binaries (and the loader that runs them), so
//! `tar --checkpoint-action=exec=..`, `zip -TT`, `sqlite3 .shell` and a git
//! repository's `core.fsmonitor` cannot start a shell or any other program,
//! in namespaces and without. Judged by a marker file the sub-program would
//! create inside the project (where the token may write: only the execute
//! right stands in the way); the local user's same call creates it.

use super::*;

fn config(mode: &'static str) -> impl Fn(&Path, &Path) -> String {
    move |proj, _root| {
        let pj = Arena::proj_grant(proj);
        let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
        read.extend(pj.iter().cloned());
        let keys = format!(
            "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true\nnamespaces = \"{mode}\"\n\
             proc_spawn = [\"tar\", \"zip\", \"sqlite3\", \"git\", \"true\"]"
        );
        principal("agent:ex", &keys, &read, &pj, &pj)
    }
}

/// The attacks: `(name, source with MARK for the marker file)`.
fn attacks() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "tar --checkpoint-action=exec",
            "tar --checkpoint=1 \"--checkpoint-action=exec=touch MARK\" -cf t1.tar seed",
        ),
        ("tar -I", "tar \"-Itouch MARK;cat\" -cf t2.tar seed"),
        ("zip -TT", "zip z.zip seed -T -TT \"touch MARK #\""),
        ("sqlite3 .shell", "sqlite3 q.db \".shell touch MARK\""),
        ("git core.fsmonitor", "cd repo; git status; cd .."),
    ]
}

fn have(tools: &[&str]) -> bool {
    tools.iter().all(|t| {
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn a_granted_program_cannot_start_an_ungranted_one() {
    if !have(&["tar", "zip", "sqlite3", "git"]) {
        eprintln!("skipped: tar, zip, sqlite3 and git are needed");
        return;
    }
    for mode in ["auto", "off"] {
        let a = Arena::start(config(mode), &[]);
        let mut rep = Report::default();
        std::fs::write(a.p("seed"), "seed").expect("seed");
        let repo = a.p("repo");
        let git = |args: &[&str]| {
            let st = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .status()
                .expect("git");
            assert!(st.success(), "git {args:?}");
        };
        std::fs::create_dir(&repo).expect("repo");
        git(&["init", "-q"]);
        let mut agent = a.kernel(Some("agent:ex"), "ex", None);
        let mut local = a.kernel(None, "local-ex", None);
        for (i, (name, src)) in attacks().into_iter().enumerate() {
            let mark = a.p(&format!("MARK{i}"));
            if name.starts_with("git") {
                let cmd = format!("touch {} #", mark.display());
                git(&["config", "core.fsmonitor", &cmd]);
            }
            let src = src.replace("MARK", &mark.display().to_string());
            let _ = std::fs::remove_file(&mark);
            let r = local.exec(&src);
            rep.control(
                &format!("{mode}: {name}: the local user's sub-program runs"),
                mark.exists(),
                &clip(&r.to_string()),
            );
            let _ = std::fs::remove_file(&mark);
            let r = agent.exec(&src);
            rep.judge(
                &format!("{mode}: {name}: a token's granted program started another"),
                mark.exists().then(|| clip(&r.to_string())),
            );
        }
        // The granted programs themselves still run.
        let r = agent.exec("tar -cf ok.tar seed");
        rep.control(
            &format!("{mode}: the token's tar runs"),
            a.p("ok.tar").exists(),
            &clip(&r.to_string()),
        );
        let r = agent.exec("cd repo; git status; cd ..");
        rep.control(
            &format!("{mode}: the token's git runs"),
            r.get("result").is_some(),
            &clip(&r.to_string()),
        );
        rep.finish(&format!("granted programs, namespaces {mode}"));
    }
}
