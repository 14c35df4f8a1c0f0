//! The namespace plan, the rules' encoding and the principals' modes.

use super::*;

fn rules(read: &[&str], write: &[&str], net: Net) -> Rules {
    Rules {
        read: Some(read.iter().map(PathBuf::from).collect()),
        write: write.iter().map(PathBuf::from).collect(),
        delete: Vec::new(),
        net,
        token: true,
        exec: None,
        links: write.iter().map(PathBuf::from).collect(),
    }
}

/// A holder's arguments as words; a mount as `mount-rw PATH` or `mount-ro PATH`.
fn words(args: &[HolderArg]) -> Vec<String> {
    args.iter()
        .flat_map(|a| match a {
            HolderArg::Word(w) => vec![w.os().to_string_lossy().into_owned()],
            HolderArg::Mount { path, rw } => vec![
                if *rw { "mount-rw" } else { "mount-ro" }.to_string(),
                path.os().to_string_lossy().into_owned(),
            ],
        })
        .collect()
}

#[test]
fn the_plan_mounts_grants_once_parents_first() {
    let r = rules(
        &["/usr", "/usr/lib", "/srv/p", "/srv/p/out/x"],
        &["/srv/p/out"],
        Net::Sealed,
    );
    let p = Plan::of(&r, None);
    assert_eq!(
        p.binds,
        vec![
            (PathBuf::from("/srv/p"), false),
            (PathBuf::from("/srv/p/out"), true),
            (PathBuf::from("/usr"), false),
        ]
    );
    assert!(p.private_tmp && p.sealed);
    let inner = p.inner.read.as_ref().unwrap();
    assert!(inner.contains(&PathBuf::from("/proc")) && inner.contains(&PathBuf::from("/tmp")));
    assert!(p.inner.write.contains(&PathBuf::from("/tmp")));
    let args = p.holder_args(Path::new("/srv/p"));
    let s = words(&args);
    let w = s.windows(2).any(|w| w == ["mount-rw", "/srv/p/out"]);
    assert!(w, "{s:?}");
    assert!(s.contains(&"--unshare-net".to_string()));
    assert!(s.contains(&"--unshare-user".to_string()));
    // The cwd is shown by a grant: no stand-in; one where none shows it.
    assert!(!s.contains(&"--dir".to_string()), "{s:?}");
    let s = words(&p.holder_args(Path::new("/elsewhere/w")));
    assert!(
        s.windows(2).any(|w| w == ["--dir", "/elsewhere/w"]),
        "{s:?}"
    );
    // A root above a protected directory (`/` holds `/proc`) is never
    // mounted; no network namespace unless sealed.
    let p = Plan::of(&rules(&["/", "/usr"], &[], Net::Open), None);
    assert_eq!(p.binds, vec![(PathBuf::from("/usr"), false)]);
    assert!(!p.sealed);
}

/// A writable root below a read-only one is mounted over it only where no token may
/// write between the two: bubblewrap walks to the mount point through the read-only
/// mount, following links, and makes what it does not find there. Where a token may
/// write, the read-only root is mounted writable instead (Landlock keeps it read-only).
#[test]
fn a_writable_root_is_not_mounted_through_a_directory_a_token_may_write() {
    let mut r = rules(
        &["/srv/shared", "/usr"],
        &[
            "/srv/shared/sub/docs",
            "/srv/shared/sub/f.txt",
            "/srv/shared/own",
        ],
        Net::Open,
    );
    let nested = vec![
        (PathBuf::from("/srv/shared"), false),
        (PathBuf::from("/srv/shared/own"), true),
        (PathBuf::from("/srv/shared/sub/docs"), true),
        (PathBuf::from("/srv/shared/sub/f.txt"), true),
        (PathBuf::from("/usr"), false),
    ];
    assert_eq!(Plan::of(&r, None).binds, nested);
    // Another token may write `sub`: both roots below it would be walked to through it.
    r.links.push(PathBuf::from("/srv/shared/sub"));
    let p = Plan::of(&r, None);
    assert_eq!(
        p.binds,
        vec![
            (PathBuf::from("/srv/shared"), true),
            (PathBuf::from("/usr"), false),
        ]
    );
    // The child's own rules are unchanged: it reads `shared` and writes only its roots.
    assert_eq!(p.inner.write[..3], r.write[..]);
    assert!(p
        .inner
        .read
        .as_ref()
        .unwrap()
        .contains(&PathBuf::from("/srv/shared")));
    // A token that may write all of `shared`: the same.
    r.links = vec![PathBuf::from("/srv")];
    assert_eq!(
        Plan::of(&r, None).binds[0],
        (PathBuf::from("/srv/shared"), true)
    );
}

#[test]
fn a_grant_inside_tmp_leaves_the_child_a_scratch_directory() {
    let p = Plan::of(&rules(&["/usr"], &["/tmp/proj"], Net::Open), None);
    assert!(p.private_tmp && p.scratch);
    // /tmp itself is not granted (it would widen the grant's rights); the
    // scratch directory is, and the holder makes it on its tmpfs.
    let scratch = PathBuf::from(SCRATCH);
    assert!(!p.inner.write.contains(&PathBuf::from("/tmp")));
    assert!(p.inner.write.contains(&scratch) && p.inner.delete.contains(&scratch));
    assert!(p.inner.read.as_ref().unwrap().contains(&scratch));
    let s = words(&p.holder_args(Path::new("/tmp/proj")));
    let at = |w: &[&str]| s.windows(w.len()).position(|x| x == w);
    let (tmpfs, dir) = (at(&["--tmpfs", "/tmp"]), at(&["--dir", SCRATCH]));
    assert!(tmpfs.is_some() && dir > tmpfs, "{s:?}");
    // The confinement step is told to name it in TMPDIR.
    let e = Encoded::of(&p.inner, p.scratch);
    assert_eq!(e.tmpdir, Some(scratch));
    // Without a grant inside /tmp, the private /tmp is the child's.
    let p = Plan::of(&rules(&["/usr"], &["/srv/p"], Net::Open), None);
    assert!(p.private_tmp && !p.scratch);
    assert!(p.inner.write.contains(&PathBuf::from("/tmp")));
    assert_eq!(Encoded::of(&p.inner, p.scratch).tmpdir, None);
}

#[test]
fn the_private_tmp_is_sized() {
    let args = |size| -> Vec<String> {
        words(
            &Plan::of(&rules(&["/usr"], &["/srv/p"], Net::Open), size)
                .holder_args(Path::new("/srv/p")),
        )
    };
    let s = args(Some(8 << 20));
    let at = |s: &[String], w: &[&str]| s.windows(w.len()).position(|x| x == w);
    assert!(
        at(&s, &["--size", "8388608", "--tmpfs", "/tmp"]).is_some(),
        "{s:?}"
    );
    // A bubblewrap without --size: the tmpfs alone.
    let s = args(None);
    assert!(at(&s, &["--tmpfs", "/tmp"]).is_some() && !s.iter().any(|a| a == "--size"));
}

#[test]
fn rules_round_trip() {
    for net in [Net::Open, Net::Sealed, Net::ConnectPorts(vec![22, 443])] {
        let r = rules(&["/usr"], &["/srv"], net);
        let s = serde_json::to_string(&Encoded::of(&r, false)).unwrap();
        let back: Encoded = serde_json::from_str(&s).unwrap();
        assert_eq!(back.rules().unwrap(), r);
    }
}

#[test]
fn modes_parse_and_default_to_auto() {
    #[derive(Deserialize)]
    struct T {
        #[serde(default)]
        m: Mode,
    }
    let t: T = serde_json::from_str("{\"m\":\"require\"}").unwrap();
    assert_eq!(t.m, Mode::Require);
    let t: T = serde_json::from_str("{}").unwrap();
    assert_eq!(t.m, Mode::Auto);
    let r = Arc::new(rules(&[], &[], Net::Open));
    assert_eq!(mode_of(&r), (Mode::Auto, 0));
    register(&r, Mode::Off, "agent:test");
    let (mode, key) = mode_of(&r);
    assert_eq!(mode, Mode::Off);
    assert_ne!(key, 0);
    let other = Arc::new(rules(&[], &[], Net::Open));
    assert_eq!(mode_of(&other), (Mode::Auto, 0));
    // Holders are kept by key: a principal's end leaves the others' (and
    // those of unregistered rules, key 0).
    assert!(live_keys(None).contains(&key));
    let rest = live_keys(Some("agent:test"));
    assert!(!rest.contains(&key) && rest.contains(&0));
}

/// An approved opaque plan lifts the principal's list of programs, and nothing else: its
/// rules keep the principal's namespace mode (a `"require"` never runs without
/// namespaces) and holder key (its private `/tmp`).
#[test]
fn an_approved_opaque_plan_keeps_its_principals_mode_and_holders() {
    let who = "agent:planned";
    let policy = crate::policy::PrincipalPolicy {
        namespaces: Mode::Require,
        ..Default::default()
    };
    let mut r = rules(&["/usr"], &[], Net::Open);
    r.exec = Some(vec![PathBuf::from("/usr/bin/git")]);
    let r = Arc::new(r);
    register(&r, Mode::Require, who);
    let gate = crate::Gate {
        principal: who.to_string(),
        policy: Arc::new(crate::policy::Policy {
            principals: [(who.to_string(), policy)].into(),
        }),
        sandbox: Some(r.clone()),
        home: None,
        run: None,
    };
    let applying = gate.applying(&[crate::effect::Effect::Opaque]);
    let wider = applying.sandbox.expect("a sandbox");
    assert_eq!(wider.exec, None);
    assert_eq!(wider.read, r.read);
    assert_eq!(mode_of(&wider), mode_of(&r));
    assert_eq!(mode_of(&wider).0, Mode::Require);
}

/// What crosses to the broker keeps every byte of a path or argument.
#[test]
fn broker_requests_keep_bytes_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let odd = OsStr::from_bytes(b"/srv/p/\xff\xfe name\n");
    let req = broker::Request::Spawn(Box::new(broker::SpawnReq {
        args: vec![B::from(odd)],
        env: vec![(B::from(OsStr::new("K")), B::from(odd))],
        cwd: B::from(Path::new("/srv/p")),
        holder: HolderSpec {
            key: 7,
            args: vec![HolderArg::Word(B::from(OsStr::new("--unshare-user")))],
            sealed: true,
        },
        fresh: true,
        inner_cwd: B::from(odd),
        noexec: vec![],
        stdio: [false, true, true],
        procs: false,
        pty: false,
        live: vec![0, 7],
    }));
    let line = serde_json::to_string(&req).unwrap();
    let back: broker::Request = serde_json::from_str(&line).unwrap();
    let broker::Request::Spawn(s) = back else {
        panic!("{line}")
    };
    assert_eq!(s.args[0].0, odd.as_bytes());
    assert_eq!(s.env[0].1 .0, odd.as_bytes());
    assert_eq!(s.holder.key, 7);
    assert!(s.fresh);
    assert_eq!(s.stdio, [false, true, true]);
}

/// A holder mounts each grant root by the descriptor the broker opened as the holder
/// started: a root swapped for a link after that still mounts what was opened (not what
/// the link names); a root that is a link by then is not mounted at all.
#[test]
fn a_holder_mounts_the_roots_it_opened() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{symlink, MetadataExt};
    let base = std::env::temp_dir().join(format!("shoal-holder-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (docs, outside) = (base.join("shared/docs"), base.join("outside"));
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let swapped_early = base.join("shared/early");
    symlink(&outside, &swapped_early).unwrap();
    let mount = |p: &Path, rw| HolderArg::Mount {
        path: B::from(p),
        rw,
    };
    let spec = [
        HolderArg::Word(B::from(OsStr::new("--unshare-user"))),
        mount(&docs, false),
        mount(&swapped_early, true),
        mount(&base.join("missing"), true),
    ];
    let (args, fds) = holder::bwrap_args(&spec);
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(fds.len(), 1, "{words:?}");
    let fd = fds[0].as_raw_fd();
    assert!(fd >= 10, "{fd}");
    let want = [
        "--unshare-user".to_string(),
        "--ro-bind-fd".into(),
        fd.to_string(),
        docs.display().to_string(),
    ];
    assert_eq!(words, want);
    // Swapped for a link once opened: the descriptor still names the directory.
    let moved = base.join("shared/d2");
    std::fs::rename(&docs, &moved).unwrap();
    symlink(&outside, &docs).unwrap();
    let st = rustix::fs::fstat(&fds[0]).unwrap();
    let real = std::fs::metadata(&moved).unwrap();
    assert_eq!((st.st_dev, st.st_ino), (real.dev(), real.ino()));
    std::fs::remove_dir_all(&base).unwrap();
}

/// A child limited to its programs maps no file as code from its private `/tmp`, its
/// write grants, or any directory a token may write in (resolved as far as it exists: a
/// path through a link is its target's; one made later is covered once it is), parents
/// first.
#[test]
fn an_exec_limited_child_maps_nothing_from_where_a_token_writes() {
    let base = std::env::temp_dir().join(format!("shoal-noexec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (proj, shared) = (base.join("proj"), base.join("shared"));
    std::fs::create_dir_all(proj.join("out")).unwrap();
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, base.join("link")).unwrap();
    let mut r = rules(&["/usr"], &[proj.join("out").to_str().unwrap()], Net::Open);
    r.links = vec![
        proj.clone(),
        base.join("link/x"),
        shared.clone(),
        base.join("later"),
    ];
    let p = Plan::of(&r, None);
    assert_eq!(
        p.noexec,
        vec![
            PathBuf::from("/tmp"),
            base.join("later"),
            proj.clone(),
            proj.join("out"),
            shared.clone(),
            shared.join("x"),
        ]
    );
    std::fs::remove_dir_all(&base).unwrap();
}
