//! The run-time gate's cases (docs/rules.md §21): path resolution through
//! `..`, symlinks and hard links in a tempdir, binary identity with a fake
//! binary earlier on PATH, the approved plan's effects, no gate no check.

use super::*;
use std::os::unix::fs::PermissionsExt;

fn policy(toml: &str) -> PrincipalPolicy {
    toml::from_str(toml).unwrap()
}

/// A tempdir (real path) with `proj/` granted and `outside/secret` not.
struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    proj: PathBuf,
    outside: PathBuf,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let proj = root.join("proj");
    let outside = root.join("outside");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s3cret").unwrap();
    std::fs::write(proj.join("f"), "in").unwrap();
    Fx {
        _dir: dir,
        root,
        proj,
        outside,
    }
}

fn gate_for(f: &Fx, extra: &str) -> Arc<RunGate> {
    let p = policy(&format!(
        "opaque = \"deny\"\nfs.read = [\"{p}/**\"]\nfs.write = [\"{p}/**\"]\nfs.delete = [\"{p}/**\"]\n{extra}",
        p = f.proj.display()
    ));
    Arc::new(RunGate::new("agent", Some(&p), None))
}

fn denied_code(r: Result<(), ShoalError>) -> bool {
    matches!(r, Err(e) if e.code == ErrorCode::PolicyDenied)
}

#[test]
fn no_gate_checks_nothing() {
    assert!(!active());
    assert!(fs(Access::Delete, Path::new("/"), Path::new("/etc/passwd")).is_ok());
    assert!(spawn(Path::new("/bin/sh")).is_ok());
    assert!(opaque("run x.shl").is_ok());
}

#[test]
fn paths_resolve_against_the_current_cwd() {
    let f = fx();
    with_gate(Some(gate_for(&f, "")), || {
        assert!(active());
        assert!(fs(Access::Read, &f.proj, Path::new("f")).is_ok());
        assert!(fs(Access::Write, &f.proj, Path::new("new/deeper/x")).is_ok());
        // The same relative name from another cwd is outside.
        assert!(denied_code(fs(
            Access::Read,
            &f.outside,
            Path::new("secret")
        )));
        // `..` out of the project.
        assert!(denied_code(fs(
            Access::Delete,
            &f.proj,
            Path::new("../outside/secret")
        )));
        assert!(denied_code(fs(
            Access::Write,
            &f.proj,
            Path::new("nothing/../../outside/x")
        )));
        // check() takes absolute paths and refuses relative ones.
        let abs = f.proj.join("f").display().to_string();
        assert!(check(&Effect::FsRead { paths: vec![abs] }).is_ok());
        assert!(denied_code(check(&Effect::FsRead {
            paths: vec!["f".into()]
        })));
        // Non-path effects go to the policy.
        assert!(denied_code(check(&Effect::Opaque)));
        assert!(denied_code(check(&Effect::NetConnect {
            host: "x".into(),
            port: 1
        })));
    });
    assert!(!active());
}

#[test]
fn symlinks_are_resolved() {
    let f = fx();
    std::os::unix::fs::symlink(f.outside.join("secret"), f.proj.join("link")).unwrap();
    std::os::unix::fs::symlink(&f.outside, f.proj.join("dirlink")).unwrap();
    with_gate(Some(gate_for(&f, "")), || {
        // Reading or writing through the link reaches the outside file.
        assert!(denied_code(fs(Access::Read, &f.proj, Path::new("link"))));
        assert!(denied_code(fs(Access::Write, &f.proj, Path::new("link"))));
        // Deleting the link itself is inside the project.
        assert!(fs(Access::Delete, &f.proj, Path::new("link")).is_ok());
        // A delete of dirlink/secret resolves dirlink.
        assert!(denied_code(fs(
            Access::Delete,
            &f.proj,
            Path::new("dirlink/secret")
        )));
        assert!(denied_code(fs(
            Access::Write,
            &f.proj,
            Path::new("dirlink/new")
        )));
        // `dirlink/..` is the outside dir's parent for the kernel, the
        // project for a lexical reading: both must be granted.
        assert!(denied_code(fs(
            Access::Read,
            &f.proj,
            Path::new("dirlink/../outside/secret")
        )));
    });
    assert_eq!(
        resolve(&f.proj, Path::new("dirlink/secret"), true),
        f.outside.join("secret")
    );
    assert_eq!(
        resolve(&f.proj, Path::new("link"), false),
        f.proj.join("link")
    );
    assert_eq!(
        resolve(&f.proj, Path::new("dirlink/../x"), true),
        f.root.join("x")
    );
}

#[test]
fn hard_links_are_refused() {
    let f = fx();
    // Made before the gate (by someone else, or a child): two names, one file.
    std::fs::hard_link(f.outside.join("secret"), f.proj.join("hard")).unwrap();
    with_gate(Some(gate_for(&f, "")), || {
        assert!(denied_code(fs(Access::Write, &f.proj, Path::new("hard"))));
        assert!(denied_code(fs(Access::Delete, &f.proj, Path::new("hard"))));
        assert!(denied_code(fs(Access::Read, &f.proj, Path::new("hard"))));
        assert!(fs(Access::Write, &f.proj, Path::new("f")).is_ok());
    });
}

#[test]
fn approved_plans_cover_what_they_list() {
    let f = fx();
    let g = gate_for(&f, "");
    let p = policy("opaque = \"ask\"");
    let ask = Arc::new(RunGate::new("agent", Some(&p), None));
    with_gate(Some(ask.clone()), || assert!(denied_code(opaque("run x"))));
    let applying = Arc::new(ask.applying(&[Effect::Opaque]));
    with_gate(Some(applying), || assert!(opaque("run x").is_ok()));
    // Denied stays denied even if listed.
    let listed = Arc::new(g.applying(&[Effect::Opaque]));
    with_gate(Some(listed), || assert!(denied_code(opaque("run x"))));
    // A principal without a section gets nothing.
    let none = Arc::new(RunGate::new("nobody", None, None));
    with_gate(Some(none), || {
        assert!(denied_code(fs(Access::Read, &f.proj, Path::new("f"))));
        assert!(denied_code(spawn(Path::new("/bin/sh"))));
    });
}

fn fake_bin(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn binaries_are_granted_by_identity() {
    let f = fx();
    let real_dir = f.root.join("bin");
    let fake_dir = f.proj.join("fake");
    std::fs::create_dir_all(&real_dir).unwrap();
    std::fs::create_dir_all(&fake_dir).unwrap();
    let real = fake_bin(&real_dir, "tool", "echo real");
    let fake = fake_bin(&fake_dir, "tool", "echo fake");
    // The grant names `tool`, resolved on the daemon's PATH at load.
    let bins = Bins::resolve(&["tool".into()], Some(&real_dir.display().to_string()));
    assert_eq!(bins.files.len(), 1);
    assert!(bins.grants(&real));
    assert!(!bins.grants(&fake), "a fake earlier on the session's PATH");
    // A copy elsewhere is not the granted file.
    let copy = fake_bin(&f.proj, "tool", "echo real");
    assert!(!bins.grants(&copy));
    // Swapping the granted file's content revokes it.
    std::fs::write(&real, "#!/bin/sh\necho changed\n").unwrap();
    assert!(!bins.grants(&real));
    // Absolute paths and hashes.
    let by_path = Bins::resolve(&[fake.display().to_string()], None);
    assert!(by_path.grants(&fake));
    let h = crate::bin_id::bin_hash_cached(&copy).unwrap();
    let by_hash = Bins::resolve(&[h], None);
    assert!(by_hash.grants(&copy) && !by_hash.grants(&fake));
    assert!(Bins::resolve(&["*".into()], None).grants(&fake));
    assert!(!Bins::resolve(&["no-such-tool-zz".into()], Some("/nonexistent")).grants(&fake));
}

#[test]
fn spawns_need_a_granted_binary_or_opaque() {
    let f = fx();
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let g = gate_for(&f, &format!("proc_spawn = [\"{}\"]", sh.display()));
    with_gate(Some(g), || {
        assert!(spawn(&sh).is_ok());
        let e = spawn(Path::new("/usr/bin/env")).unwrap_err();
        assert_eq!(e.code, ErrorCode::PolicyDenied);
        assert!(e.msg.contains("proc_spawn"), "{}", e.msg);
    });
    let open = policy("opaque = \"allow\"");
    let g = Arc::new(RunGate::new("agent", Some(&open), None));
    with_gate(
        Some(g),
        || assert!(spawn(Path::new("/usr/bin/env")).is_ok()),
    );
}

#[test]
fn threads_carry_nothing_unless_given() {
    let f = fx();
    let g = gate_for(&f, "");
    with_gate(Some(g), || {
        let carried = current();
        std::thread::scope(|s| {
            s.spawn(|| assert!(!active()));
            s.spawn(move || with_gate(carried, || assert!(active())));
        });
    });
}
