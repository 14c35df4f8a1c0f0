//! Programs a granted program starts: with `proc_spawn = ["tar", "zip",
//! "sqlite3", "git", "gunzip"]` and `opaque = "deny"`, the kernel lets a
//! token's child execute only the granted binaries (and the loader that runs
//! them; `gunzip`, a `#!/bin/sh` script, lends the others no shell), so
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
             proc_spawn = [\"tar\", \"zip\", \"sqlite3\", \"git\", \"true\", \"gunzip\"]\n\
             env_write = [\"LD_PRELOAD\"]"
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
        (
            "tar exec of the loader through a shell",
            "tar --checkpoint=1 \"--checkpoint-action=exec=LOADER /usr/bin/touch MARK\" -cf t3.tar seed",
        ),
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
    let loader = loader();
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
            let src = src
                .replace("MARK", &mark.display().to_string())
                .replace("LOADER", &loader);
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
        // Code the token wrote, loaded into a granted program: a shared object
        // whose constructor runs `touch` through the loader.
        if let Some(so) = shared_object(&a.proj, &loader) {
            let mark = so.1;
            let steps: Vec<(&str, String, bool)> = vec![
                // Without namespaces the project stays executable: a known limit
                // (docs/leash.md); in namespaces write grants are `noexec`.
                (
                    "sqlite3 .load",
                    "sqlite3 q2.db \".load ./evil.so\"".into(),
                    mode != "off",
                ),
                // The same from the scratch directory of its private `/tmp` in
                // namespaces (also noexec). Judged there only: the local user's
                // control is the step above.
                (
                    "sqlite3 .load from /tmp",
                    format!(
                        "sqlite3 q3.db \"select writefile('/tmp/.shoal-tmp/{tag}.so', readfile('evil.so'))\"\n\
                         sqlite3 q3.db \".load /tmp/.shoal-tmp/{tag}.so\"",
                        tag = marker("T")
                    ),
                    mode != "off",
                ),
                (
                    "LD_PRELOAD",
                    format!(
                        "env.LD_PRELOAD = {:?}\ntar -cf t4.tar seed",
                        so.0.display().to_string()
                    ),
                    true,
                ),
            ];
            for (name, src, judged) in steps {
                let _ = std::fs::remove_file(&mark);
                if !name.ends_with("/tmp") {
                    let r = local.exec(&src);
                    local.exec("env.LD_PRELOAD = null");
                    rep.control(
                        &format!("{mode}: {name}: the local user's program runs the object"),
                        mark.exists(),
                        &clip(&r.to_string()),
                    );
                }
                let _ = std::fs::remove_file(&mark);
                let r = agent.exec(&src);
                agent.exec("env.LD_PRELOAD = null");
                if judged {
                    rep.judge(
                        &format!("{mode}: {name}: a granted program ran the token's code"),
                        mark.exists().then(|| clip(&r.to_string())),
                    );
                }
            }
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

/// The dynamic loader: executable for every granted program, it runs any
/// file named as its argument (documented); a shell must not be at hand.
fn loader() -> String {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .iter()
        .find(|p| Path::new(p).exists())
        .map_or_else(|| "/nonexistent-loader".to_string(), |p| p.to_string())
}

/// A shared object in `dir` whose constructor executes `touch MARK` through
/// `loader`, built with `cc` (`None` without one): its path and the marker's.
fn shared_object(dir: &Path, loader: &str) -> Option<(PathBuf, PathBuf)> {
    if !have(&["cc"]) {
        eprintln!("skipped the shared-object attacks: no cc");
        return None;
    }
    let mark = dir.join("SO-MARK");
    let src = dir.join("evil.c");
    let so = dir.join("evil.so");
    let code = format!(
        "#include <unistd.h>\n\
         __attribute__((constructor)) static void run(void) {{\n\
         char *argv[] = {{\"{loader}\", \"/usr/bin/touch\", \"{mark}\", 0}};\n\
         char *envp[] = {{0}};\n\
         execve(\"{loader}\", argv, envp);\n}}\n",
        mark = mark.display()
    );
    std::fs::write(&src, code).ok()?;
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .ok()?
        .success();
    built.then_some((so, mark))
}

/// agent:lim is limited to `sqlite3` and writes `proj/docs`. `nested`: it reads
/// `proj/lib` and `proj/docs`, and agent:mover may write all of `proj` (so `lib`, a
/// mount of its own for agent:lim, lies below where a token writes). Otherwise it reads
/// all of `proj`, and agent:mover may write `proj/lib`, made only later.
fn moved_config(nested: bool) -> impl Fn(&Path, &Path) -> String {
    move |proj, _root| {
        let p = proj.display();
        let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
        let docs = vec![format!("{p}/docs/**")];
        let mover = if nested {
            read.extend([format!("{p}/lib/**"), format!("{p}/docs/**")]);
            Arena::proj_grant(proj)
        } else {
            read.extend(Arena::proj_grant(proj));
            vec![format!("{p}/lib/**")]
        };
        principal(
            "agent:lim",
            "opaque = \"deny\"\nauto_apply = \"in-grant\"\nnamespaces = \"auto\"\nproc_spawn = [\"sqlite3\"]",
            &read,
            &docs,
            &docs,
        ) + &principal(
            "agent:mover",
            "opaque = \"allow\"\nauto_apply = \"in-grant\"",
            &Arena::proj_grant(proj),
            &mover,
            &[],
        )
    }
}

/// Code a program-limited token wrote, moved by another token out of its write grant
/// into a read root of its own mounted below the other token's grant (round 16's E3),
/// or into the other token's grant made after its session started (E4), is still not
/// mapped as code: every directory a token may write in is `noexec` for it, with every
/// mount below. The local user's load of the same file runs it.
#[test]
fn code_moved_out_of_a_write_grant_stays_unloadable() {
    if !have(&["sqlite3", "bwrap"]) {
        eprintln!("skipped: sqlite3 and bwrap are needed");
        return;
    }
    let loader = loader();
    for nested in [true, false] {
        let a = Arena::start(moved_config(nested), &[]);
        std::fs::create_dir(a.p("docs")).expect("docs");
        if nested {
            std::fs::create_dir(a.p("lib")).expect("lib");
        }
        let Some((so, mark)) = shared_object(&a.p("docs"), &loader) else {
            return;
        };
        let mut lim = a.kernel(Some("agent:lim"), "lim", None);
        let mut local = a.kernel(None, "local-lim", None);
        let db = a.p("docs/q.db");
        let r = lim.exec(&format!("sqlite3 {} \"select 1\"", lit(&db)));
        assert!(
            r.get("result").is_some(),
            "{nested}: the token's sqlite3 runs: {r}"
        );
        // The other token moves the object (made now, when not nested).
        if !nested {
            std::fs::create_dir(a.p("lib")).expect("lib");
        }
        let to = a.p("lib/mine.so");
        std::fs::rename(&so, &to).expect("moved by the other token");
        let load = format!("sqlite3 {} \".load {}\"", lit(&db), to.display());
        let r = lim.exec(&load);
        assert!(
            !mark.exists(),
            "ESCAPED ({nested}): the token's own code ran from {}: {r}",
            to.display()
        );
        let r = local.exec(&load);
        assert!(
            mark.exists(),
            "control ({nested}): the local user's load runs it: {r}"
        );
    }
}

/// agent:lim2 is limited to `sqlite3`, reads all of `proj` and writes `proj/docs`;
/// agent:mover2 may write all of `proj`.
fn swapped_config(proj: &Path, _root: &Path) -> String {
    let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
    read.extend(Arena::proj_grant(proj));
    let docs = vec![format!("{}/docs/**", proj.display())];
    principal(
        "agent:lim2",
        "opaque = \"deny\"\nauto_apply = \"in-grant\"\nnamespaces = \"auto\"\nproc_spawn = [\"sqlite3\"]",
        &read,
        &docs,
        &docs,
    ) + &principal(
        "agent:mover2",
        "opaque = \"allow\"\nauto_apply = \"in-grant\"",
        &Arena::proj_grant(proj),
        &Arena::proj_grant(proj),
        &[],
    )
}

/// A program-limited token's write grant that another token swaps for a link after its
/// session started: its next program is not started, and the reply says why; nothing is
/// written through the link.
#[test]
fn a_write_grant_swapped_for_a_link_stops_the_next_program_with_a_reason() {
    if !have(&["sqlite3", "bwrap"]) {
        eprintln!("skipped: sqlite3 and bwrap are needed");
        return;
    }
    let a = Arena::start(swapped_config, &[]);
    std::fs::create_dir(a.p("docs")).expect("docs");
    let mut lim = a.kernel(Some("agent:lim2"), "lim2", None);
    let db = |d: &str| {
        format!(
            "sqlite3 {} \"create table t(x)\"",
            lit(&a.p(d).join("q.db"))
        )
    };
    let r = lim.exec(&db("docs"));
    assert!(
        a.p("docs/q.db").exists(),
        "control: the token writes its grant: {r}"
    );
    // The other token swaps the grant for a link to a directory the token only reads.
    std::fs::create_dir(a.p("elsewhere")).expect("elsewhere");
    std::fs::rename(a.p("docs"), a.p("d2")).expect("moved");
    std::os::unix::fs::symlink(a.p("elsewhere"), a.p("docs")).expect("link");
    let r = lim.exec(&db("docs"));
    assert!(
        !a.p("elsewhere/q.db").exists(),
        "ESCAPED: written through the link: {r}"
    );
    let text = r.to_string();
    assert!(
        r.get("error").is_some() && text.contains("symbolic link now"),
        "the reply says why the program did not start: {r}"
    );
}
