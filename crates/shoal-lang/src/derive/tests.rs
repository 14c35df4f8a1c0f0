//! Derivation cases (docs/rules.md §21): every construct derives its
//! effects, and what cannot be classified is `opaque`.

use super::*;
use crate::parse::{parse, ParseContext};

#[test]
fn urls() {
    assert_eq!(host_port("https://x.org/a"), Some(("x.org".into(), 443)));
    assert_eq!(host_port("http://x.org:8080"), Some(("x.org".into(), 8080)));
    assert_eq!(host_port("http://[::1]:9/"), Some(("::1".into(), 9)));
    assert_eq!(host_port("nope"), None);
}

/// The effects of `src` in `/p` (HOME `/h`, PATH `/usr/bin:/bin`), with
/// `bound` names from earlier execs.
fn eff_with(src: &str, bound: &[&str]) -> Vec<Effect> {
    let bound: HashSet<String> = bound.iter().map(|s| s.to_string()).collect();
    let pcx = ParseContext {
        value_bound: HashSet::new(),
        bound: bound.clone(),
    };
    let prog = parse(src, &pcx).unwrap_or_else(|e| panic!("{src}: {}", e.msg));
    let env = |n: &str| match n {
        "HOME" => Some("/h".to_string()),
        "PATH" => Some("/usr/bin:/bin".to_string()),
        _ => None,
    };
    let cx = Context {
        cwd: Path::new("/p"),
        env: &env,
        adapters: None,
        bound: &bound,
    };
    derive(&prog, &cx)
}

fn eff(src: &str) -> Vec<Effect> {
    eff_with(src, &[])
}

fn r(p: &str) -> Effect {
    Effect::FsRead {
        paths: vec![p.into()],
    }
}
fn w(p: &str) -> Effect {
    Effect::FsWrite {
        paths: vec![p.into()],
    }
}
fn d(p: &str) -> Effect {
    Effect::FsDelete {
        paths: vec![p.into()],
    }
}

#[test]
fn command_forms_keep_their_effects() {
    assert_eq!(eff("rm --permanent a.txt"), vec![d("/p/a.txt")]);
    assert_eq!(eff("touch x/y"), vec![w("/p/x/y")]);
    assert_eq!(eff("cat ~/notes"), vec![r("/h/notes")]);
    assert_eq!(eff("cp a b"), vec![r("/p/a"), w("/p/b")]);
    assert_eq!(eff("mv a b"), vec![r("/p/a"), w("/p/b"), d("/p/a")]);
    assert_eq!(eff("echo hi > out.txt"), vec![w("/p/out.txt")]);
    assert_eq!(eff("echo hi"), vec![]);
    assert_eq!(
        eff("env"),
        vec![Effect::EnvRead {
            names: vec!["*".into()]
        }]
    );
}

/// A builtin given a flag it does not model runs the program as written, and
/// is planned as that program: not as the builtin's file effects.
#[test]
fn a_builtin_with_a_flag_it_does_not_model_is_planned_as_the_program() {
    assert_eq!(eff("mkdir -m 700 d"), vec![Effect::Opaque]);
    assert_eq!(eff("touch -t 202001010000 a"), vec![Effect::Opaque]);
    assert_eq!(eff("cp -p a b"), vec![Effect::Opaque]);
    assert_eq!(eff("mkdir -p d"), vec![w("/p/d")]);
    assert_eq!(eff("cp -r a b"), vec![r("/p/a"), w("/p/b")]);
    assert_eq!(eff("mv -f a b"), vec![r("/p/a"), w("/p/b"), d("/p/a")]);
}

#[test]
fn builtins_in_call_form_derive_the_same_effects() {
    assert_eq!(eff(r#"rm("/x/f", permanent: true)"#), vec![d("/x/f")]);
    assert_eq!(eff(r#"touch("t")"#), vec![w("/p/t")]);
    assert_eq!(eff(r#"mkdir("/o/d")"#), vec![w("/o/d")]);
    assert_eq!(
        eff(r#"cp("/s/secret", "copy")"#),
        vec![r("/s/secret"), w("/p/copy")]
    );
    assert_eq!(eff(r#"mv("a", "/b")"#), vec![r("/p/a"), w("/b"), d("/p/a")]);
    assert_eq!(eff(r#"cat("/s/secret")"#), vec![r("/s/secret")]);
    // A non-literal path is not static: the whole plan is opaque.
    assert_eq!(eff(r#"let f = "x"; rm(f)"#), vec![Effect::Opaque]);
}

#[test]
fn file_methods_and_functions_have_effects() {
    assert_eq!(eff(r#""x".save("/o/f")"#), vec![w("/o/f")]);
    assert_eq!(eff(r#""x".append("log")"#), vec![w("/p/log")]);
    assert_eq!(eff(r#"save("/o/f", 1)"#), vec![w("/o/f")]);
    assert_eq!(eff(r#"path("/s/secret").read()"#), vec![r("/s/secret")]);
    assert_eq!(eff(r#"path("n").lines()"#), vec![r("/p/n")]);
    assert_eq!(eff(r#"open("/s/secret")"#), vec![r("/s/secret")]);
    assert_eq!(eff(r#"glob("/s/*.key")"#), vec![r("/s")]);
    assert_eq!(eff(r#"glob("*.txt").expand()"#), vec![r("/p")]);
    // Text is not a file.
    assert_eq!(eff(r#""a\nb".lines()"#), vec![]);
    // A receiver that may be a path it cannot see, a target it cannot read.
    assert_eq!(
        eff(r#"let p = path("/s/k"); p.read()"#),
        vec![Effect::Opaque]
    );
    assert_eq!(eff(r#"let t = "/o/f"; "x".save(t)"#), vec![Effect::Opaque]);
}

#[test]
fn unknown_commands_are_opaque_in_every_position() {
    // `sh` and `id` are on PATH on any Linux this runs on.
    assert_eq!(eff("let x = sh"), vec![Effect::Opaque]);
    assert_eq!(eff("sh.out"), vec![Effect::Opaque]);
    assert_eq!(eff("id()"), vec![Effect::Opaque]);
    assert_eq!(eff(r#"sh("-c", "rm -rf /")"#), vec![Effect::Opaque]);
    assert_eq!(
        eff("let e = env; e.SECRET"),
        vec![Effect::EnvRead {
            names: vec!["*".into()]
        }]
    );
    assert_eq!(
        eff("env.HOME"),
        vec![Effect::EnvRead {
            names: vec!["HOME".into()]
        }]
    );
    // Bound names, parameters and namespaces are values, not commands.
    assert_eq!(eff("let sh = 1; sh + 1"), vec![]);
    assert_eq!(eff("fn f(id) { id + 1 }; f(2)"), vec![]);
    assert_eq!(eff(r#"json.parse("1")"#), vec![]);
    assert_eq!(
        eff(r#"secret.get("tok")"#),
        vec![Effect::SecretUse {
            names: vec!["tok".into()]
        }]
    );
    assert_eq!(eff("for id in [1] { id }"), vec![]);
    // A function of an earlier exec.
    assert_eq!(eff_with("f()", &["f"]), vec![Effect::Opaque]);
    assert_eq!(eff_with("f x", &["f"]), vec![Effect::Opaque]);
    // An external in call form with a PATH prefix: which binary is unknown.
    assert!(eff("PATH=/p/fake git status").contains(&Effect::Opaque));
}

#[test]
fn scripts_are_opaque() {
    assert_eq!(
        eff(r#"run("evil.shl")"#),
        vec![Effect::Opaque, r("/p/evil.shl")]
    );
    assert_eq!(eff("run evil.shl"), vec![Effect::Opaque, r("/p/evil.shl")]);
    assert_eq!(eff("source lib.shl"), vec![Effect::Opaque, r("/p/lib.shl")]);
    assert!(eff("./evil.shl").contains(&Effect::Opaque));
    assert_eq!(eff("use ./m.shl"), vec![Effect::Opaque]);
}

#[test]
fn cd_moves_later_relative_paths() {
    assert_eq!(
        eff("cd /o; rm --permanent f"),
        vec![Effect::SessionWrite, d("/o/f")]
    );
    assert_eq!(eff("cd ..; cat x"), vec![Effect::SessionWrite, r("/x")]);
    assert_eq!(eff("cd; cat x"), vec![Effect::SessionWrite, r("/h/x")]);
    // Not literal, or not known after a branch: relative paths are unknown.
    assert_eq!(eff(r#"let t = "/o"; cd (t); rm f"#), vec![Effect::Opaque]);
    assert_eq!(eff("if true { cd /o }; rm f"), vec![Effect::Opaque]);
    assert_eq!(eff("popd; rm f"), vec![Effect::Opaque]);
    // Absolute paths stay known.
    assert_eq!(eff("popd; rm /a"), vec![Effect::SessionWrite, d("/a")]);
    // A loop that moves: the second pass starts elsewhere.
    assert_eq!(
        eff("for i in [1, 2] { rm f; cd sub }"),
        vec![Effect::Opaque]
    );
}

#[test]
fn bodies_run_where_they_are_called() {
    // Without a cd, a function's relative paths are the program's cwd.
    assert_eq!(eff("fn f() { rm x }; f()"), vec![d("/p/x")]);
    assert_eq!(eff("alias k = rm x; k"), vec![d("/p/x")]);
    // With one, a body may run after it: its relative paths are unknown.
    assert_eq!(eff("fn f() { rm x }; cd /o; f"), vec![Effect::Opaque]);
    assert_eq!(eff("alias k = rm x; cd /o; k"), vec![Effect::Opaque]);
    // Absolute paths in a body stay known.
    assert_eq!(
        eff("fn f() { rm /a }; cd /o; f"),
        vec![d("/a"), Effect::SessionWrite]
    );
}

#[test]
fn explain_never_shows_no_effects_for_effects() {
    for src in [
        r#"rm("/x", permanent: true)"#,
        "let x = sh",
        "id()",
        r#""x".save("/o")"#,
        r#"path("/s").read()"#,
        r#"run("a.shl")"#,
        "sh { echo hi }",
        "interact vim",
    ] {
        assert!(!eff(src).is_empty(), "{src}");
    }
}

/// What `src` in `cwd` cannot undo, and what it trashes.
fn undo_in(src: &str, cwd: &Path) -> super::Undo {
    let bound = HashSet::new();
    let prog = parse(src, &ParseContext::default()).unwrap_or_else(|e| panic!("{src}: {}", e.msg));
    let env = |_: &str| None;
    let cx = Context {
        cwd,
        env: &env,
        adapters: None,
        bound: &bound,
    };
    derive_full(&prog, &cx).undo
}

#[test]
fn permanent_deletes_and_overwrites_cannot_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    std::fs::write(cwd.join("old.txt"), "x").unwrap();
    std::fs::create_dir(cwd.join("d")).unwrap();
    std::fs::write(cwd.join("d/old.txt"), "y").unwrap();
    let at = |p: &str| cwd.join(p).display().to_string();

    let u = undo_in("rm --permanent old.txt", cwd);
    assert_eq!(
        u.lost,
        vec![format!("rm --permanent deletes {} for good", at("old.txt"))]
    );
    assert!(u.trashed.is_empty());
    let u = undo_in(r#"rm("old.txt", permanent: true)"#, cwd);
    assert_eq!(u.lost.len(), 1, "{u:?}");

    // rm to the trash: undoable, and the plan names the trash.
    let u = undo_in("rm old.txt", cwd);
    assert!(u.lost.is_empty(), "{u:?}");
    assert_eq!(u.trashed, vec![at("old.txt")]);
    assert!(
        u.trash_dir.as_deref().is_some_and(|t| t.contains("trash")),
        "{u:?}"
    );

    // Writing over a file that exists loses it; a new file or `>>` does not.
    for src in [
        "echo hi > old.txt",
        r#""t".save("old.txt")"#,
        r#"[1].save("old.txt")"#,
        "save old.txt 1",
        "cp new.txt old.txt",
        "mv old.txt d",
    ] {
        let u = undo_in(src, cwd);
        assert_eq!(u.lost.len(), 1, "{src}: {u:?}");
        assert!(u.lost[0].contains("overwrites"), "{src}: {u:?}");
    }
    for src in [
        "echo hi > new.txt",
        "echo hi >> old.txt",
        r#""t".append("old.txt")"#,
        "cp old.txt fresh.txt",
        "mv old.txt d/other.txt",
    ] {
        let u = undo_in(src, cwd);
        assert!(u.lost.is_empty(), "{src}: {u:?}");
    }
}

/// On a token principal's thread (one with a private directory), what is
/// larger than its trash may hold cannot be undone: `rm` deletes it.
#[test]
fn a_tokens_rm_of_more_than_its_trash_holds_cannot_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_path_buf();
    std::fs::write(cwd.join("small"), vec![0u8; 1000]).unwrap();
    std::fs::write(cwd.join("big"), vec![0u8; 100_000]).unwrap();
    // The local user's trash is not bounded.
    assert!(undo_in("rm big", &cwd).lost.is_empty());
    let base = cwd.join("private");
    let c = cwd.clone();
    let at = move |p: &str| cwd.join(p).display().to_string();
    std::thread::spawn(move || {
        shoal_base::spill_dir::set_thread_private_base(Some(base));
        // The cap the shell::trash tests use too (it is process-wide).
        crate::shell::trash::set_token_cap(90_000);
        let u = undo_in("rm small big", &c);
        assert_eq!(u.trashed, vec![at("small")], "{u:?}");
        assert_eq!(u.lost.len(), 1, "{u:?}");
        assert!(
            u.lost[0].starts_with(&format!("rm deletes {} for good", at("big"))),
            "{u:?}"
        );
        let u = undo_in("rm *.bin", &c);
        assert!(u.lost[0].starts_with("rm may delete"), "{u:?}");
    })
    .join()
    .unwrap();
}
