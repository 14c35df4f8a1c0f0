//! Leash fails closed through the real daemon (docs/rules.md §21): a token
//! principal granted only its project gets nothing else, whether the plan
//! sees the effect (refused before running) or not (refused at the effect
//! site while running). Judged by the outcome on disk: the outside files
//! stay as they were and the secret's content never appears in a reply.
//! The local uid runs the same sources unchanged.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::{json, Value};

const SECRET: &str = "TOPSECRET-4711";

struct World {
    root: Root,
    proj: PathBuf,
    out: PathBuf,
    cfg: PathBuf,
}

impl World {
    fn keep(&self) -> PathBuf {
        self.out.join("keep")
    }

    fn secret(&self) -> PathBuf {
        self.out.join("secret")
    }

    /// The outside directory exactly as it was made.
    fn assert_outside_intact(&self) {
        assert_eq!(std::fs::read_to_string(self.keep()).unwrap(), "keep\n");
        assert_eq!(std::fs::read_to_string(self.secret()).unwrap(), SECRET);
        let mut names: Vec<String> = std::fs::read_dir(&self.out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["keep", "secret"], "new files outside");
    }
}

/// `deny`: opaque = "deny"; `allow`: opaque = "allow" (its programs pass
/// the plan as opaque, so only the run-time checks stand between them and
/// the outside); `glob`: deletes granted only as `proj/*/f`.
fn world() -> World {
    let root = Root::new();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let proj = base.join("proj");
    let out = base.join("outside");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep"), "keep\n").unwrap();
    std::fs::write(out.join("secret"), SECRET).unwrap();
    let sys = r#""/usr/**", "/lib/**", "/lib64/**", "/etc/**", "/bin/**", "/dev/**""#;
    let p = proj.display();
    let principal = |name: &str, opaque: &str, delete: &str| {
        format!(
            r#"
[policy.principal."{name}"]
opaque = "{opaque}"
auto_apply = "in-grant"
session_write = true
proc_spawn = ["git"]
env_write = ["PATH"]

[policy.principal."{name}".fs]
read = [{sys}, "{p}/**"]
write = ["{p}/**"]
delete = ["{delete}"]
"#
        )
    };
    let text = [
        principal("agent:deny", "deny", &format!("{p}/**")),
        principal("agent:allow", "allow", &format!("{p}/**")),
        principal("agent:glob", "deny", &format!("{p}/*/f")),
    ]
    .concat();
    let cfg = base.join("shoal.toml");
    std::fs::write(&cfg, text).unwrap();
    World {
        root,
        proj,
        out,
        cfg,
    }
}

fn start(w: &World) -> Daemon {
    Daemon::start_with(
        &w.root,
        &w.root.socket(),
        &["--config", w.cfg.to_str().unwrap()],
        &[],
    )
}

/// A connection of `principal` attached to its own session, in the project.
fn agent(d: &Daemon, w: &World, principal: &str) -> Conn {
    let t = create_token(&w.root, principal);
    let mut c = d.conn();
    let r = c.attach_token(principal, &t);
    assert!(r.get("result").is_some(), "{r}");
    c.ok("exec", json!({"src": format!("cd {}", w.proj.display())}));
    c
}

/// `src` is refused with -32010 and the secret is not in the reply.
fn refused(c: &mut Conn, src: &str) -> Value {
    let r = c.call("exec", json!({"src": src}));
    assert!(
        !r.to_string().contains(SECRET),
        "{src}: the secret leaked: {r}"
    );
    assert_eq!(
        r["error"]["code"].as_i64(),
        Some(-32010),
        "{src}: expected a Leash refusal: {r}"
    );
    r
}

/// Replace `OUT`, `PROJ` in a source template.
fn src(w: &World, t: &str) -> String {
    t.replace("OUT", &w.out.display().to_string())
        .replace("PROJ", &w.proj.display().to_string())
}

/// Attacks 1–3: builtins in call form, file methods, unknown commands.
const CALLS_AND_METHODS: &[&str] = &[
    r#"rm("OUT/keep", permanent: true)"#,
    r#"touch("OUT/new")"#,
    r#"mkdir("OUT/dir")"#,
    r#"cp("OUT/secret", "PROJ/copy")"#,
    r#"cat("OUT/secret")"#,
    r#"mv("OUT/keep", "PROJ/moved")"#,
    r#""x".save("OUT/new")"#,
    r#""x".append("OUT/keep")"#,
    r#"save("OUT/new", 1)"#,
    r#"path("OUT/secret").read()"#,
    r#"path("OUT/secret").lines()"#,
    r#"glob("OUT/*").expand()"#,
    r#"echo x > OUT/new"#,
    r#"cat < OUT/secret"#,
];

/// The same, with every path hidden from the plan in a variable (the plan
/// is `[opaque]`; under opaque = "allow" it runs, and each effect is
/// checked where it happens).
const HIDDEN: &[&str] = &[
    r#"let o = "OUT/keep"; rm(o, permanent: true)"#,
    r#"let o = "OUT/keep"; rm --permanent (o)"#,
    r#"let o = "OUT/new"; touch(o)"#,
    r#"let o = "OUT/dir"; mkdir(o)"#,
    r#"let o = "OUT/secret"; cp(o, "PROJ/copy")"#,
    r#"let o = "OUT/secret"; cat(o)"#,
    r#"let o = "OUT/keep"; mv(o, "PROJ/moved")"#,
    r#"let o = "OUT/new"; "x".save(o)"#,
    r#"let o = "OUT/keep"; "x".append(o)"#,
    r#"let o = "OUT/new"; save(o, 1)"#,
    r#"let o = path("OUT/secret"); o.read()"#,
    r#"let o = path("OUT/secret"); o.lines()"#,
    r#"let o = "OUT/*"; glob(o).expand()"#,
    r#"let o = "OUT/new"; echo x > (o)"#,
    r#"let o = "OUT/secret"; cat < (o)"#,
    r#"let o = "OUT"; cd (o); rm --permanent keep"#,
];

#[test]
fn builtins_methods_and_commands_fail_closed() {
    let w = world();
    let d = start(&w);
    let mut deny = agent(&d, &w, "agent:deny");
    for t in CALLS_AND_METHODS.iter().chain(HIDDEN) {
        refused(&mut deny, &src(&w, t));
        w.assert_outside_intact();
    }
    // Attack 3: unknown commands in every position, under opaque = "deny".
    for t in [
        "id()",
        r#"sh("-c", "touch OUT/new")"#,
        "let x = whoami",
        "hostname.out",
        "sh { touch OUT/new }",
        "let t = 1; id",
    ] {
        refused(&mut deny, &src(&w, t));
        w.assert_outside_intact();
    }
    // A builtin given a flag it does not model runs the program: under
    // opaque = "deny" that is refused before anything is made, even in the
    // project, and the refusal says why.
    for t in [
        "touch -t 202001010000 PROJ/t",
        "mkdir -m 700 PROJ/m",
        "rm -d PROJ",
    ] {
        let r = deny.call("exec", json!({"src": src(&w, t)}));
        assert!(r.get("error").is_some(), "{t}: {r}");
        if !t.starts_with("rm") {
            assert_eq!(r["error"]["code"].as_i64(), Some(-32010), "{t}: {r}");
            let why = r["error"]["message"].as_str().unwrap_or_default();
            assert!(why.contains("flag it does not model"), "{t}: {r}");
        }
    }
    let made: Vec<_> = std::fs::read_dir(&w.proj).unwrap().collect();
    assert!(made.is_empty(), "nothing made in the project: {made:?}");
    assert!(w.proj.exists(), "rm -d is refused, not run");
    // The plan shows them as effects, never `[]`.
    for t in ["id()", "let x = whoami", r#"rm("/x", permanent: true)"#] {
        let e = deny.ok("explain", json!({"src": t}));
        assert_ne!(e["effects"], json!([]), "{t}: {e}");
    }
    let mut allow = agent(&d, &w, "agent:allow");
    for t in CALLS_AND_METHODS.iter().chain(HIDDEN) {
        refused(&mut allow, &src(&w, t));
        w.assert_outside_intact();
    }
    assert!(!w.proj.join("copy").exists() && !w.proj.join("moved").exists());
    // In the project everything still works (the last case moved the cwd:
    // the cd ran, the rm after it was checked against the new cwd).
    allow.ok("exec", json!({"src": src(&w, "cd PROJ")}));
    allow.ok(
        "exec",
        json!({"src": src(&w, r#"let o = "PROJ/a.txt"; "hi".save(o)"#)}),
    );
    assert_eq!(std::fs::read_to_string(w.proj.join("a.txt")).unwrap(), "hi");
    allow.ok(
        "exec",
        json!({"src": r#"let o = "a.txt"; rm(o, permanent: true)"#}),
    );
    assert!(!w.proj.join("a.txt").exists());
}

/// Attacks 4–7: links inside the project, cd in the same exec, closures
/// called after cd, scripts.
#[test]
fn links_cwd_closures_and_scripts_fail_closed() {
    let w = world();
    let d = start(&w);
    let mut c = agent(&d, &w, "agent:allow");
    // A symlink made inside the project is allowed; reaching through it is not.
    c.ok(
        "exec",
        json!({"src": src(&w, "ln -s OUT/secret PROJ/link; ln -s OUT/keep PROJ/klink; ln -s OUT PROJ/dlink")}),
    );
    for t in [
        "cat PROJ/link",
        "path(\"PROJ/link\").read()",
        "\"x\".save(\"PROJ/klink\")",
        "echo x >> PROJ/klink",
        "rm --permanent PROJ/dlink/keep",
        "touch PROJ/dlink/new",
        "cp PROJ/link PROJ/copy",
        "cat PROJ/dlink/../outside/secret",
    ] {
        refused(&mut c, &src(&w, t));
        w.assert_outside_intact();
    }
    // Deleting the link itself is in the project.
    c.ok("exec", json!({"src": src(&w, "rm --permanent PROJ/link")}));
    assert!(!w.proj.join("link").exists());
    // A hard link: ln refuses to make one to an outside file, and one made
    // some other way is refused for writes and reads.
    refused(&mut c, &src(&w, "ln OUT/keep PROJ/hard"));
    std::fs::hard_link(w.keep(), w.proj.join("hard")).unwrap();
    for t in [
        "\"x\".save(\"PROJ/hard\")",
        "cat PROJ/hard",
        "echo x > PROJ/hard",
    ] {
        refused(&mut c, &src(&w, t));
        w.assert_outside_intact();
    }
    std::fs::remove_file(w.proj.join("hard")).unwrap();
    // Attack 5: cd and rm in one exec (plan and run both follow the cd).
    for who in ["agent:deny", "agent:allow"] {
        let mut a = agent(&d, &w, who);
        refused(&mut a, &src(&w, "cd OUT; rm --permanent keep"));
        refused(&mut a, &src(&w, "cd OUT; cat secret"));
        w.assert_outside_intact();
    }
    // Attack 6: a closure and an alias defined in the project, called after cd.
    c.ok("exec", json!({"src": "fn wipe() { rm --permanent keep }"}));
    c.ok("exec", json!({"src": "alias peek = cat secret"}));
    refused(&mut c, &src(&w, "cd OUT; wipe"));
    c.ok("exec", json!({"src": src(&w, "cd PROJ")}));
    refused(&mut c, &src(&w, "cd OUT; peek"));
    c.ok("exec", json!({"src": src(&w, "cd PROJ")}));
    w.assert_outside_intact();
    // Attack 7: a script runs only what its runner may; under deny it never runs.
    std::fs::write(
        w.proj.join("evil.shl"),
        src(&w, "rm --permanent OUT/keep\n\"x\".save(\"OUT/new\")\n"),
    )
    .unwrap();
    refused(&mut c, &src(&w, "run(\"PROJ/evil.shl\")"));
    refused(&mut c, &src(&w, "source PROJ/evil.shl"));
    w.assert_outside_intact();
    let mut deny = agent(&d, &w, "agent:deny");
    refused(&mut deny, &src(&w, "run(\"PROJ/evil.shl\")"));
    refused(&mut deny, "run evil.shl");
    refused(&mut deny, "source evil.shl");
    w.assert_outside_intact();
}

fn git(dir: &Path, home: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .output()
        .expect("git");
    assert!(st.status.success(), "{args:?}: {st:?}");
}

/// Attack 8 and 14: binaries by identity, glob grants.
#[test]
fn binaries_by_identity_and_glob_grants() {
    let w = world();
    let d = start(&w);
    git(&w.proj, &w.proj, &["init", "-q"]);
    // A fake git earlier on PATH, made by the agent inside its project.
    let fake = w.proj.join("fake");
    std::fs::create_dir(&fake).unwrap();
    std::fs::write(
        fake.join("git"),
        src(&w, "#!/bin/sh\ntouch PROJ/pwned\necho fake\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fake.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = agent(&d, &w, "agent:deny");
    // The real git runs (granted by name, resolved on the daemon's PATH).
    let r = c.call("exec", json!({"src": "git status"}));
    assert_ne!(r["error"]["code"].as_i64(), Some(-32010), "{r}");
    // Earlier on PATH, in one exec or set before: refused, never run.
    refused(
        &mut c,
        &src(
            &w,
            "PATH=\"PROJ/fake:/usr/local/bin:/usr/bin:/bin\" git status",
        ),
    );
    c.ok(
        "exec",
        json!({"src": src(&w, "env.PATH = \"PROJ/fake:/usr/local/bin:/usr/bin:/bin\"")}),
    );
    refused(&mut c, "git status");
    refused(&mut c, "./fake/git status");
    assert!(!w.proj.join("pwned").exists(), "the fake git ran");

    // Attack 14: `proj/*/f` grants proj/a/f, not proj/a/b/f through `**`.
    for f in ["a/f", "a/b/f"] {
        let p = w.proj.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "f").unwrap();
    }
    let mut g = agent(&d, &w, "agent:glob");
    refused(&mut g, &src(&w, "rm --permanent PROJ/**/f"));
    refused(&mut g, &src(&w, "rm --permanent PROJ/*/*/f"));
    assert!(w.proj.join("a/b/f").exists() && w.proj.join("a/f").exists());
    g.ok("exec", json!({"src": src(&w, "rm --permanent PROJ/a/f")}));
    assert!(!w.proj.join("a/f").exists() && w.proj.join("a/b/f").exists());
}

/// The control: the local uid runs the same sources as before.
#[test]
fn the_local_uid_is_unchanged() {
    let w = world();
    let d = start(&w);
    let mut c = d.conn();
    c.attach("me");
    c.ok("exec", json!({"src": src(&w, "cd PROJ")}));
    let r = c.ok("exec", json!({"src": src(&w, r#"cat("OUT/secret")"#)}));
    assert!(r.to_string().contains(SECRET), "{r}");
    let r = c.ok(
        "exec",
        json!({"src": src(&w, r#"let o = path("OUT/secret"); o.read()"#)}),
    );
    assert!(r.to_string().contains(SECRET), "{r}");
    c.ok("exec", json!({"src": src(&w, r#""x".save("OUT/new")"#)}));
    assert_eq!(std::fs::read_to_string(w.out.join("new")).unwrap(), "x");
    c.ok("exec", json!({"src": "let x = whoami"}));
    c.ok(
        "exec",
        json!({"src": src(&w, "ln -s OUT/secret PROJ/link; cat PROJ/link")}),
    );
    c.ok(
        "exec",
        json!({"src": src(&w, r#"let o = "OUT/keep"; rm(o, permanent: true)"#)}),
    );
    assert!(!w.keep().exists());
}
