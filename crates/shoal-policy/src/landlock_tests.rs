//! The Landlock lowering: grant roots, links in grants, rulesets (tests of `landlock.rs`).

use std::path::{Path, PathBuf};

use crate::grant_path::root_of;
use crate::landlock::*;
use crate::policy::PrincipalPolicy;
use crate::seccomp::{filter_available, AUDIT_ARCH};

#[test]
fn a_grant_through_a_link_the_principal_can_make_is_dropped() {
    let base = std::env::temp_dir().join(format!("shoal-grant-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (proj, outside, op) = (base.join("proj"), base.join("outside"), base.join("op"));
    for d in [&proj, &outside, &op.join("real")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let base = base.canonicalize().unwrap();
    let proj = base.join("proj");
    std::os::unix::fs::symlink(base.join("outside"), proj.join("target")).unwrap();
    std::os::unix::fs::symlink("../outside", proj.join("rel")).unwrap();
    std::os::unix::fs::symlink(base.join("op/real"), base.join("link")).unwrap();
    std::fs::create_dir(proj.join("sub")).unwrap();
    let writable = vec![proj.clone()];
    // Links in the project (the principal can make them) void the grant.
    assert_eq!(resolve_grant(&proj.join("target"), &writable), None);
    assert_eq!(resolve_grant(&proj.join("rel/x"), &writable), None);
    // A real directory stays; an operator's link outside the project is followed.
    assert_eq!(
        resolve_grant(&proj.join("sub"), &writable),
        Some(proj.join("sub"))
    );
    assert_eq!(resolve_grant(&proj, &writable), Some(proj.clone()));
    assert_eq!(
        resolve_grant(&base.join("link"), &writable),
        Some(base.join("op/real"))
    );
    // What does not exist grants nothing; `..` is taken after links, as the kernel does.
    assert_eq!(resolve_grant(&proj.join("missing"), &writable), None);
    assert_eq!(
        resolve_grant(&base.join("link/../real"), &writable),
        Some(base.join("op/real"))
    );
    // And the token's rules hold the resolved grants only.
    let toml = format!(
        "fs.write = [\"{p}/**\"]\nfs.delete = [\"{p}/target/**\", \"{p}/sub/**\"]",
        p = proj.display()
    );
    let pol: PrincipalPolicy = toml::from_str(&toml).unwrap();
    let r = Rules::for_token(Some(&pol), None);
    assert_eq!(r.delete, vec![proj.join("sub")]);
    assert_eq!(r.write, vec![proj.clone()]);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn roots_and_lowering() {
    assert_eq!(root_of("/a/b/**"), Some(PathBuf::from("/a/b")));
    assert_eq!(root_of("/**"), Some(PathBuf::from("/")));
    assert_eq!(root_of("/a/*.txt"), Some(PathBuf::from("/a")));
    let p: PrincipalPolicy = toml::from_str("fs.write = [\"/tmp/**\"]").unwrap();
    let r = Rules::lower(&p, None).unwrap();
    assert_eq!(r.write, vec![PathBuf::from("/tmp")]);
    assert!(r.read.is_none());
    let open = crate::policy::local_default();
    assert!(Rules::lower(&open, None).is_none());
    // hermetic confines even with every path granted.
    let mut sealed = open.clone();
    sealed.hermetic = true;
    let r = Rules::lower(&sealed, None).unwrap();
    assert_eq!(r.net, Net::Sealed);
    assert!(r.enforceable_at(4).is_ok());
    let e = r.enforceable_at(3).unwrap_err();
    assert!(e.contains("hermetic") && e.contains("ABI 3"), "{e}");
    assert_eq!(r.net.enforced_at(3), "open");
    assert!(r.enforceable_at(0).is_err());
    // net_connect grants that all name ports confine connect to them.
    let p: PrincipalPolicy =
        toml::from_str("net_connect = [\"a.example:443\", \"*:80\", \"b:443\"]").unwrap();
    let r = Rules::lower(&p, None).unwrap();
    assert_eq!(r.net, Net::ConnectPorts(vec![80, 443]));
    // Below ABI 4 the port rules are left out, nothing is refused.
    assert!(r.enforceable_at(3).is_ok());
    assert_eq!(r.net.enforced_at(3), "open");
    assert_eq!(r.net.enforced_at(4), "tcp-connect-ports");
    let p: PrincipalPolicy = toml::from_str("net_connect = [\"a:443\", \"b:*\"]").unwrap();
    assert_eq!(Rules::lower(&p, None).unwrap().net, Net::Open);
}

/// A child under `rules` tries TCP connects to each port; which succeed.
fn connects(rules: &Rules, ports: &[u16]) -> Vec<bool> {
    let mut confine = rules.ruleset().unwrap().confine();
    let script = ports
        .iter()
        .map(|p| format!("(exec 3<>/dev/tcp/127.0.0.1/{p}) 2>/dev/null && echo y || echo n"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut cmd = std::process::Command::new("/bin/bash");
    cmd.arg("-c").arg(&script);
    // SAFETY: apply is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || confine.apply());
    }
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l == "y")
        .collect()
}

#[test]
fn confines_tcp() {
    if abi() < 4 || !Path::new("/bin/bash").exists() {
        return;
    }
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (pa, pb) = (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    );
    let fs = |net| Rules {
        read: None,
        write: vec![PathBuf::from("/")],
        delete: vec![PathBuf::from("/")],
        net,
        token: false,
        exec: None,
        links: Vec::new(),
    };
    assert_eq!(connects(&fs(Net::Open), &[pa, pb]), vec![true, true]);
    assert_eq!(connects(&fs(Net::Sealed), &[pa, pb]), vec![false, false]);
    assert_eq!(
        connects(&fs(Net::ConnectPorts(vec![pa])), &[pa, pb]),
        vec![true, false]
    );
}

/// A child under a token principal's open rules: unix sockets fail,
/// a socketpair and TCP work.
#[test]
fn token_children_get_no_unix_socket() {
    if !Path::new("/usr/bin/python3").exists() || AUDIT_ARCH.is_none() {
        return;
    }
    assert!(filter_available());
    let open = crate::policy::local_default();
    let rs = Rules::for_token(Some(&open), None).ruleset().unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let code = format!(
        "import socket\n\
         for f in (lambda: socket.socket(socket.AF_UNIX), \
                   lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM), \
                   socket.socketpair, \
                   lambda: socket.create_connection((\"127.0.0.1\", {port}), 5)):\n\
         \ttry: f(); print(\"ok\")\n\
         \texcept OSError as e: print(e.errno)\n"
    );
    let mut confine = rs.confine();
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(&code);
    // SAFETY: apply is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || confine.apply());
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let eacces = libc::EACCES.to_string();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec![eacces.as_str(), eacces.as_str(), "ok", "ok"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn confines_a_child() {
    if abi() <= 0 {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let inside = d.path().join("in");
    let outside = d.path().join("out");
    std::fs::create_dir(&inside).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let rules = Rules {
        read: None,
        write: vec![inside.clone()],
        delete: vec![],
        net: Net::Open,
        token: false,
        exec: None,
        links: Vec::new(),
    };
    let mut confine = rules.ruleset().unwrap().confine();
    let script = format!(
        "echo a > {}/f; echo b > {}/f",
        inside.display(),
        outside.display()
    );
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c").arg(&script);
    // SAFETY: apply is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || confine.apply());
    }
    let out = cmd.output().unwrap();
    assert!(inside.join("f").exists());
    assert!(!outside.join("f").exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ermission denied"));
}
