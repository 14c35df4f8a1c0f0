//! Attacks through the evaluator itself: builtins in call form, value methods that read or
//! write, links made inside the project, `cd` inside one exec, closures and aliases called
//! after `cd`, scripts, background tasks, a too-wide glob against a narrow delete grant;
//! then unknown commands under `opaque = "deny"`, a fake binary through `PATH`, and the
//! environment read around `env_read`.

use super::*;

/// agent:rt: opaque denied, fs read/write/delete = the project (session_write for `cd`);
/// agent:narrow: the same but delete only `<proj>/*/f`; agent:sys: agent:rt plus the system
/// dirs readable (so an unknown binary could execute at all) and proc_spawn = ["git"];
/// env_read = ["HOME"] for all.
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let keys =
        "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true\nenv_read = [\"HOME\"]";
    let mut sys = pj.clone();
    sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    principal("agent:rt", keys, &pj, &pj, &pj)
        + &principal(
            "agent:narrow",
            keys,
            &pj,
            &pj,
            &[format!("{}/*/f", proj.display())],
        )
        + &principal(
            "agent:sys",
            &format!("{keys}\nproc_spawn = [\"git\"]"),
            &sys,
            &pj,
            &pj,
        )
}

#[test]
fn builtins_values_links_cwd_and_scripts_stay_inside_the_grants() {
    let a = Arena::start(config, &[]);
    let (o, p, s) = (&a.outside, &a.proj, lit(&a.secret));
    let out = |n: &str| lit(&a.out(n));
    let pr = |n: &str| lit(&a.p(n));
    let od = o.display().to_string();
    let pd = p.display().to_string();
    let sd = a.secret.display().to_string();
    let mk = a.marker.clone();
    std::fs::create_dir_all(a.p("sub/deeper")).expect("sub");
    std::fs::write(a.out(&format!("g-{mk}")), "x").expect("glob bait");
    let v = |steps: Vec<String>| steps;
    let at = |name: &str, steps: Vec<String>, j: Judge| attempt(name, &steps, j);
    let mut list = vec![
        // 1: builtins in call form.
        at(
            "1 rm() call form, permanent",
            v(vec![format!("rm({}, permanent: true)", out("a1"))]),
            Judge::Intact(a.out("a1")),
        ),
        at(
            "1 rm() call form, to the trash",
            v(vec![format!("rm({})", out("a1t"))]),
            Judge::Intact(a.out("a1t")),
        ),
        at(
            "1 touch() call form",
            v(vec![format!("touch({})", out("a1c"))]),
            Judge::Absent(a.out("a1c")),
        ),
        at(
            "1 mkdir() call form",
            v(vec![format!("mkdir({})", out("a1d"))]),
            Judge::Absent(a.out("a1d")),
        ),
        at(
            "1 cp(secret, proj) call form",
            v(vec![format!("cp({s}, {})", pr("a1e"))]),
            Judge::Absent(a.p("a1e")),
        ),
        at(
            "1 cat(secret) call form",
            v(vec![format!("cat({s})")]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "1 mv() call form outside to proj",
            v(vec![format!("mv({}, {})", out("a1g"), pr("a1g"))]),
            Judge::Intact(a.out("a1g")),
        ),
        at(
            "1 head() call form of the secret",
            v(vec![format!("head({s})")]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "1 stat() then cat() in an expression",
            v(vec![format!("[stat({s}).size, cat({s}).out]")]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "1 ls() call form outside",
            v(vec![format!("ls({od:?}).map(.name)")]),
            Judge::NoLeak(format!("g-{mk}")),
        ),
        at(
            "1 cp command form outside to proj",
            v(vec![format!("cp {sd} {pd}/a1k")]),
            Judge::Absent(a.p("a1k")),
        ),
        at(
            "1 mv command form proj-ward from outside",
            v(vec![format!("mv {od}/a1l {pd}/a1l")]),
            Judge::Intact(a.out("a1l")),
        ),
        // 2: value methods and special forms.
        at(
            "2 \"x\".save(outside)",
            v(vec![format!("\"x\".save({})", out("a2a"))]),
            Judge::Absent(a.out("a2a")),
        ),
        at(
            "2 \"y\".append(outside)",
            v(vec![format!("\"y\".append({})", out("a2b"))]),
            Judge::Intact(a.out("a2b")),
        ),
        at(
            "2 save(outside, v)",
            v(vec![format!("save({}, \"v\")", out("a2c"))]),
            Judge::Absent(a.out("a2c")),
        ),
        at(
            "2 path(secret).read()",
            v(vec![format!("path({s}).read()")]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "2 path(secret).lines()",
            v(vec![format!("path({s}).lines()")]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "2 glob(outside/*) names",
            v(vec![format!("glob(\"{od}/*\").map(.name)")]),
            Judge::NoLeak(format!("g-{mk}")),
        ),
        at(
            "2 echo > outside redirect",
            v(vec![format!("echo x > {od}/a2g")]),
            Judge::Absent(a.out("a2g")),
        ),
        at(
            "2 [1, 2].save(outside)",
            v(vec![format!("[1, 2].save({})", out("a2h"))]),
            Judge::Absent(a.out("a2h")),
        ),
        // 4: links made inside the project.
        at(
            "4 symlink to an outside file, then save through it",
            v(vec![
                format!("ln -s {od}/a4a {pd}/l4a"),
                format!("\"pwned\".save({})", pr("l4a")),
            ]),
            Judge::Intact(a.out("a4a")),
        ),
        at(
            "4 dir symlink, rm --permanent of its target's file",
            v(vec![
                format!("ln -s {od}/d4b {pd}/l4b"),
                format!("rm --permanent {pd}/l4b/f"),
            ]),
            Judge::Intact(a.out("d4b/f")),
        ),
        at(
            "4 symlink to the secret, then cat",
            v(vec![
                format!("ln -s {sd} {pd}/l4c"),
                format!("cat {pd}/l4c"),
            ]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "4 hard link to an outside file, then write through it",
            // One program: were the link refused, the write would only make
            // a new file of the project's (and leave it in the control's way).
            v(vec![format!("ln {od}/a4d {pd}/h4d; echo pwned > {pd}/h4d")]),
            Judge::Intact(a.out("a4d")),
        ),
        at(
            "4 hard link to the secret, then read it",
            v(vec![
                format!("ln {sd} {pd}/h4e"),
                format!("path({}).read()", pr("h4e")),
            ]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "4 symlink, then append through it",
            v(vec![
                format!("ln -s {od}/a4f {pd}/l4f"),
                format!("\"y\".append({})", pr("l4f")),
            ]),
            Judge::Intact(a.out("a4f")),
        ),
        // 5: cd inside one exec.
        at(
            "5 cd outside; rm --permanent f",
            v(vec![format!("cd {od}; rm --permanent a5a")]),
            Judge::Intact(a.out("a5a")),
        ),
        at(
            "5 cd .. chain to outside; rm --permanent",
            v(vec![
                "cd sub; cd deeper; cd ..; cd ..; cd ..; cd outside; rm --permanent a5b"
                    .to_string(),
            ]),
            Judge::Intact(a.out("a5b")),
        ),
        at(
            "5 cd outside; touch",
            v(vec![format!("cd {od}; touch a5c")]),
            Judge::Absent(a.out("a5c")),
        ),
        at(
            "5 pushd outside; rm --permanent",
            v(vec![format!("pushd {od}; rm --permanent a5d")]),
            Judge::Intact(a.out("a5d")),
        ),
        at(
            "5 cd outside; mkdir",
            v(vec![format!("cd {od}\nmkdir a5e")]),
            Judge::Absent(a.out("a5e")),
        ),
        // 6: closures and aliases defined in the project, called after cd.
        at(
            "6 alias defined, cd, called (one exec)",
            v(vec![format!(
                "alias zap6a = rm --permanent a6a\ncd {od}\nzap6a"
            )]),
            Judge::Intact(a.out("a6a")),
        ),
        at(
            "6 alias defined in an earlier exec, cd, called",
            v(vec![
                "alias zap6b = rm --permanent a6b".into(),
                format!("cd {od}"),
                "zap6b".into(),
            ]),
            Judge::Intact(a.out("a6b")),
        ),
        at(
            "6 closure captured, cd, called (one exec)",
            v(vec![format!(
                "let k6c = () => rm(\"a6c\", permanent: true)\ncd {od}\nk6c()"
            )]),
            Judge::Intact(a.out("a6c")),
        ),
        at(
            "6 closure captured in an earlier exec, cd, called",
            v(vec![
                "let k6d = () => touch(\"a6d\")".into(),
                format!("cd {od}"),
                "k6d()".into(),
            ]),
            Judge::Absent(a.out("a6d")),
        ),
        at(
            "6 fn in command form after cd",
            v(vec![format!(
                "fn wipe6e() {{ rm --permanent a6e }}\ncd {od}\nwipe6e"
            )]),
            Judge::Intact(a.out("a6e")),
        ),
        // 7: scripts, and the same through background tasks.
        at(
            "7 run(script) written into proj",
            v(vec![
                format!("\"rm --permanent {od}/a7a\\n\".save({})", pr("e7a.shl")),
                "run(\"e7a.shl\")".into(),
            ]),
            Judge::Intact(a.out("a7a")),
        ),
        at(
            "7 source script (command form)",
            v(vec![
                format!("\"touch {od}/a7b\\n\".save({})", pr("e7b.shl")),
                "source e7b.shl".into(),
            ]),
            Judge::Absent(a.out("a7b")),
        ),
        at(
            "7 run script (command form)",
            v(vec![
                format!("\"rm --permanent {od}/a7c\\n\".save({})", pr("e7c.shl")),
                "run e7c.shl".into(),
            ]),
            Judge::Intact(a.out("a7c")),
        ),
        at(
            "7 source(script) call form",
            v(vec![
                format!("\"touch {od}/a7d\\n\".save({})", pr("e7d.shl")),
                "source(\"e7d.shl\")".into(),
            ]),
            Judge::Absent(a.out("a7d")),
        ),
        at(
            "7 script reading the secret",
            v(vec![
                format!("\"path(\\\"{sd}\\\").read()\\n\".save({})", pr("e7e.shl")),
                "run(\"e7e.shl\")".into(),
            ]),
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "7 spawn { rm() } awaited",
            v(vec![format!(
                "spawn {{ rm({}, permanent: true) }}.await()",
                out("a7f")
            )]),
            Judge::Intact(a.out("a7f")),
        ),
        at(
            "7 background exec of rm() call form",
            v(vec![format!("BG:rm({}, permanent: true)", out("a7g"))]),
            Judge::Intact(a.out("a7g")),
        ),
        at(
            "7 rm --permanent outside &",
            v(vec![format!(
                "let t7h = (rm --permanent {od}/a7h &)\nt7h.await()"
            )]),
            Judge::Intact(a.out("a7h")),
        ),
        at(
            "7 background cd outside; rm",
            v(vec![format!("BG:cd {od}; rm --permanent a7i")]),
            Judge::Intact(a.out("a7i")),
        ),
    ];
    let mut rep = Report::default();
    let mut k = a.kernel(Some("agent:rt"), "rt", None);
    let mut m = a.mcp(Some("agent:rt"), "rt-mcp", None);
    let mut local = a.kernel(None, "control", None);
    rep.run(&list, &mut [&mut k, &mut m], &mut local);

    // 14: a grant `<proj>/*/f` and a wider glob.
    list.clear();
    list.push(at(
        "14 rm --permanent proj/**/f under a proj/*/f grant",
        v(vec![format!("rm --permanent {pd}/**/f")]),
        Judge::Intact(a.p("g14/b/f")),
    ));
    list.push(at(
        "14 rm --permanent proj/*/*/f under a proj/*/f grant",
        v(vec![format!("rm --permanent {pd}/*/*/f")]),
        Judge::Intact(a.p("g14b/b/f")),
    ));
    list.push(at(
        "14 rm() of proj/a/b/f under a proj/*/f grant",
        v(vec![format!("rm({}, permanent: true)", pr("g14c/b/f"))]),
        Judge::Intact(a.p("g14c/b/f")),
    ));
    let mut n = a.kernel(Some("agent:narrow"), "narrow", None);
    let mut nm = a.mcp(Some("agent:narrow"), "narrow-mcp", None);
    rep.run(&list, &mut [&mut n, &mut nm], &mut local);
    rep.finish("evaluator attacks");
}

#[test]
fn unknown_commands_fake_binaries_and_the_environment_do_not_escape() {
    let a = Arena::start(config, &[]);
    let pd = a.proj.display().to_string();
    let mk = a.marker.clone();
    // A fake `git` in the project that leaves a trace when it runs.
    let fake = a.p("fake");
    std::fs::create_dir(&fake).expect("fake dir");
    let ran = a.p("fake_ran");
    std::fs::write(
        fake.join("git"),
        format!("#!/bin/sh\necho ran > {}\n", ran.display()),
    )
    .expect("fake git");
    std::fs::set_permissions(fake.join("git"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod fake git");
    let at = |name: &str, steps: Vec<String>, j: Judge| attempt(name, &steps, j);
    let trace = |n: &str| Judge::Absent(a.p(n));
    // 3: unknown commands under opaque = "deny".
    let opaque = vec![
        at(
            "3 id() call form",
            vec!["id()".into()],
            Judge::NoLeak("uid=".into()),
        ),
        at(
            "3 sh(\"-c\", ..) call form",
            vec![format!("sh(\"-c\", \"echo ran > {pd}/o3b\")")],
            trace("o3b"),
        ),
        at(
            "3 let x = unknown command",
            vec!["let x3c = id\nx3c".into()],
            Judge::NoLeak("uid=".into()),
        ),
        at(
            "3 let x = (unknown command with args)",
            vec![format!("let x3k = (truncate -s 1 {pd}/o3k)\nx3k")],
            trace("o3k"),
        ),
        at(
            "3 unknown command .out",
            vec!["id.out".into()],
            Judge::NoLeak("uid=".into()),
        ),
        at(
            "3 (unknown command with args).out",
            vec![format!("(truncate -s 1 {pd}/o3d).out")],
            trace("o3d"),
        ),
        at(
            "3 sh { } block",
            vec![format!("sh {{ echo ran > {pd}/o3e }}")],
            trace("o3e"),
        ),
        at(
            "3 python3(\"-c\", ..) call form",
            vec![format!("python3(\"-c\", \"open('{pd}/o3f', 'w')\")")],
            trace("o3f"),
        ),
        at(
            "3 unknown command in an argument",
            vec![format!("echo (truncate -s 1 {pd}/o3g)")],
            trace("o3g"),
        ),
        at(
            "3 ^touch bypassing the builtin",
            vec![format!("^touch {pd}/o3h")],
            trace("o3h"),
        ),
        at(
            "3 unknown command in a spawned task",
            vec![format!(
                "spawn {{ truncate(\"-s\", \"1\", \"{pd}/o3i\") }}.await()"
            )],
            trace("o3i"),
        ),
        // 8: PATH and paths to a fake binary under proc_spawn = ["git"].
        at(
            "8 PATH=proj/fake git status",
            vec![format!("PATH=\"{pd}/fake:/usr/bin:/bin\" git status")],
            trace("fake_ran"),
        ),
        at(
            "8 env.PATH set, then git status",
            vec![
                format!("env.PATH = \"{pd}/fake:/usr/bin:/bin\""),
                "git status".into(),
            ],
            trace("fake_ran"),
        ),
        at(
            "8 git by a path into the project",
            vec![format!("{pd}/fake/git status")],
            trace("fake_ran"),
        ),
        at(
            "8 git() call form with PATH",
            vec![format!("PATH=\"{pd}/fake:/usr/bin:/bin\" git(\"status\")")],
            trace("fake_ran"),
        ),
    ];
    let mut rep = Report::default();
    let mut local = a.kernel(None, "control", None);
    let mut k = a.kernel(Some("agent:rt"), "rt", None);
    let mut m = a.mcp(Some("agent:rt"), "rt-mcp", None);
    let mut ks = a.kernel(Some("agent:sys"), "sys", None);
    let mut ms = a.mcp(Some("agent:sys"), "sys-mcp", None);
    rep.run(&opaque, &mut [&mut k, &mut m, &mut ks, &mut ms], &mut local);

    // 10: env_read = ["HOME"], and a session env holding RT_SECRET.
    let env = json!({"HOME": a.root.path().display().to_string(), "PATH": "/usr/bin:/bin",
        "RT_SECRET": mk});
    let envs = vec![
        at(
            "10 let e = env; e.RT_SECRET",
            vec!["let e10 = env\ne10.RT_SECRET".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 env (the whole record)",
            vec!["env".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 env.RT_SECRET",
            vec!["env.RT_SECRET".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 interpolated env field",
            vec!["\"{env.RT_SECRET}\"".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 env RT_SECRET (builtin with a name)",
            vec!["env RT_SECRET".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 env values",
            vec!["env.values()".into()],
            Judge::NoLeak(mk.clone()),
        ),
        at(
            "10 a closure returning env",
            vec!["let f10 = () => env\nf10().RT_SECRET".into()],
            Judge::NoLeak(mk.clone()),
        ),
    ];
    let mut k = a.kernel(Some("agent:rt"), "env", Some(env.clone()));
    let mut m = a.mcp(Some("agent:rt"), "env-mcp", Some(env.clone()));
    let mut local = a.kernel(None, "env-control", Some(env.clone()));
    rep.run(&envs, &mut [&mut k, &mut m], &mut local);
    // The session's environment as an MCP resource.
    let r = m
        .conn
        .call("resources/read", json!({"uri": "shoal://session/env"}));
    rep.judge(
        "10 resources/read shoal://session/env [agent:rt via mcp]",
        leaks(&r, &mk).then(|| clip(&r.to_string())),
    );
    let mut lm = a.mcp(None, "env-control", None);
    let r = lm
        .conn
        .call("resources/read", json!({"uri": "shoal://session/env"}));
    rep.control(
        "10 resources/read shoal://session/env",
        leaks(&r, &mk),
        &r.to_string(),
    );
    rep.finish("unknown commands and the environment");
}
