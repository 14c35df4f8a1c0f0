//! Leash: a token principal's children run in kernel namespaces made by
//! bubblewrap where it is installed (docs/leash.md, "Layers"): a private
//! mount namespace holding only its grants, a private `/proc`, no network
//! for `hermetic`; Landlock and seccomp still apply inside. Judged by what
//! the child sees and by the outcome on disk, each with the local user
//! (unconfined, the real tree) as control and `namespaces = "off"` as the
//! previous behaviour.

use crate::common::*;
use serde_json::json;

fn reply(c: &mut Conn, src: &str) -> String {
    c.call("exec", json!({"src": src})).to_string()
}

fn policy(name: &str, project: &str, ro: &str, extra: &str) -> String {
    format!(
        r#"
[policy.principal."{name}"]
opaque = "allow"
auto_apply = "in-grant"
env_read = ["*"]
session_write = true
{extra}

[policy.principal."{name}".fs]
read = ["{ro}/**", "{project}/**"]
write = ["{project}/**"]
delete = ["{project}/**"]
"#
    )
}

pub(crate) struct Setup {
    pub(crate) root: Root,
    project: std::path::PathBuf,
    ro: std::path::PathBuf,
    outside: std::path::PathBuf,
    pub(crate) d: Daemon,
}

pub(crate) fn setup() -> Setup {
    setup_with("")
}

/// [`setup`] with `head` (e.g. a `[limits]` section) before the policies.
pub(crate) fn setup_with(head: &str) -> Setup {
    let root = Root::new();
    let project = root.path().join("project");
    let ro = root.path().join("ro");
    let outside = root.path().join("outside");
    for d in [&project, &ro, &outside] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(ro.join("keep"), "keep\n").unwrap();
    std::fs::write(outside.join("secret"), "outside-secret-91c\n").unwrap();
    let (p, r) = (project.display().to_string(), ro.display().to_string());
    let cfg = head.to_string()
        + &policy("agent:ns", &p, &r, "")
        + &policy("agent:herm", &p, &r, "hermetic = true")
        + &policy("agent:off", &p, &r, "namespaces = \"off\"")
        + &policy("agent:req", &p, &r, "namespaces = \"require\"");
    let d = Daemon::with_config(&root, &cfg, &[]);
    Setup {
        root,
        project,
        ro,
        outside,
        d,
    }
}

/// A connection as `principal` (`None`: the local user) in a session of
/// its own, with the project as cwd.
pub(crate) fn conn(s: &Setup, principal: Option<&str>, session: &str) -> Conn {
    let mut c = s.d.conn();
    match principal {
        None => {
            c.attach(session);
        }
        Some(p) => {
            let r = c.attach_token(session, &create_token(&s.root, p));
            assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");
        }
    }
    let r = c.call(
        "exec",
        json!({"src": format!("cd '{}'", s.project.display())}),
    );
    assert!(r.get("error").is_none(), "{r}");
    c
}

/// Interfaces other than `lo` in a `/proc/net/dev` text.
fn interfaces(dev: &str) -> usize {
    dev.lines()
        .skip(2)
        .filter(|l| l.contains(':'))
        .filter(|l| l.split(':').next().is_some_and(|n| n.trim() != "lo"))
        .count()
}

#[test]
fn token_children_see_only_their_grants_and_their_processes() {
    if !have_tools("token_children_see_only_their_grants", &["bwrap"]) {
        return;
    }
    let s = setup();
    let me = std::process::id();
    let tokens = s.root.state_dir().join("tokens.json");
    let probe = format!(
        "sh {{ test -e /proc/{me} && echo PID_SEEN || echo PID_HIDDEN; \
         echo PROCS=$(ls /proc | grep -c '^[0-9]'); \
         test -e {out} && echo OUT_EXISTS || echo OUT_ABSENT; \
         cat {out}/secret; cat {tokens}; pwd }}",
        out = s.outside.display(),
        tokens = tokens.display()
    );
    let digest_hint = "\"digest\"";

    // The local user: the real tree.
    let mut l = conn(&s, None, "local");
    let r = reply(&mut l, &probe);
    assert!(r.contains("PID_SEEN") && r.contains("OUT_EXISTS"), "{r}");
    assert!(r.contains("outside-secret-91c"), "{r}");

    // A token principal: its own processes, no outside path, no state dir.
    let mut k = conn(&s, Some("agent:ns"), "ns");
    let r = reply(&mut k, &probe);
    assert!(r.contains("PID_HIDDEN") && r.contains("OUT_ABSENT"), "{r}");
    assert!(!r.contains("outside-secret-91c"), "{r}");
    assert!(!r.contains(digest_hint), "tokens.json read: {r}");
    let procs: usize = r
        .split("PROCS=")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {r}"));
    assert!(procs < 10, "{procs} processes visible: {r}");
    assert!(r.contains(&s.project.display().to_string()), "cwd: {r}");

    // `namespaces = "off"`: Landlock alone, the real tree (the path is
    // there, its content still refused).
    let mut o = conn(&s, Some("agent:off"), "off");
    let r = reply(&mut o, &probe);
    assert!(r.contains("OUT_EXISTS"), "{r}");
    assert!(!r.contains("outside-secret-91c"), "{r}");
}

#[test]
fn token_children_write_only_where_granted() {
    if !have_tools("token_children_write_only_where_granted", &["bwrap"]) {
        return;
    }
    let s = setup();
    let src = format!(
        "sh {{ echo w > {p}/new; echo x > {r}/new; echo y >> {r}/keep; rm -f {r}/keep; echo done }}",
        p = s.project.display(),
        r = s.ro.display()
    );
    let mut k = conn(&s, Some("agent:ns"), "ns");
    reply(&mut k, &src);
    assert_eq!(
        std::fs::read_to_string(s.project.join("new")).unwrap(),
        "w\n"
    );
    assert!(!s.ro.join("new").exists(), "wrote in a read-only grant");
    assert_eq!(
        std::fs::read_to_string(s.ro.join("keep")).unwrap(),
        "keep\n"
    );
    // The local user writes there.
    let mut l = conn(&s, None, "local");
    reply(&mut l, &src);
    assert!(s.ro.join("new").exists());
    assert!(!s.ro.join("keep").exists());
}

#[test]
fn hermetic_children_have_only_loopback() {
    if !have_tools("hermetic_children_have_only_loopback", &["bwrap"]) {
        return;
    }
    let s = setup();
    let host = interfaces(&std::fs::read_to_string("/proc/net/dev").unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let src = format!(
        "sh {{ cat /proc/net/dev; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)' 2>/dev/null && echo TCP_OK || echo TCP_NO }}"
    );
    // The program's stdout.
    let out = |c: &mut Conn| -> String {
        let r = c.call("exec", json!({"src": src}));
        r["result"]["value"]["out"]["v"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_string()
    };
    let mut h = conn(&s, Some("agent:herm"), "herm");
    let o = out(&mut h);
    assert!(o.ends_with("TCP_NO"), "{o}");
    assert!(o.contains("lo:"), "{o}");
    assert_eq!(interfaces(&o), 0, "{o}");
    let mut l = conn(&s, None, "local");
    let o = out(&mut l);
    assert!(o.ends_with("TCP_OK"), "{o}");
    assert_eq!(interfaces(&o), host, "{o}");
}

/// Exit status and signal are the program's own, as for the local user.
#[test]
fn outcomes_match_the_unconfined_case() {
    if !have_tools("outcomes_match_the_unconfined_case", &["bwrap"]) {
        return;
    }
    let s = setup();
    let mut l = conn(&s, None, "local");
    let mut k = conn(&s, Some("agent:ns"), "ns");
    let mut q = conn(&s, Some("agent:req"), "req");
    for src in [
        "sh { exit 7 }",
        "sh { exit 143 }",
        "sh { kill -TERM $$ }",
        "sh { kill -KILL $$ }",
        "sh { echo out; echo err 1>&2; exit 3 }",
    ] {
        let want = l.call("exec", json!({"src": src}));
        for c in [&mut k, &mut q] {
            let got = c.call("exec", json!({"src": src}));
            for f in ["status", "signal", "stdout", "stderr"] {
                assert_eq!(
                    got["error"]["data"][f], want["error"]["data"][f],
                    "{src} {f}: {got} vs {want}"
                );
            }
        }
    }
    let ok = k.call("exec", json!({"src": "sh { echo fine }"}));
    assert!(
        ok.get("error").is_none() && ok.to_string().contains("fine"),
        "{ok}"
    );
}

/// A token's PTY program runs in its namespaces and its terminal works.
#[test]
fn token_pty_children_are_in_namespaces() {
    if !have_tools("token_pty_children_are_in_namespaces", &["bwrap"]) {
        return;
    }
    let s = setup();
    let me = std::process::id();
    let cmd = format!(
        "test -t 0 && echo TTY_YES; test -e /proc/{me} && echo PID_SEEN || echo PID_HIDDEN"
    );
    let mut k = conn(&s, Some("agent:ns"), "ns");
    let screen = k.pty_screen_after(&cmd, 80, 24).to_string();
    assert!(
        screen.contains("TTY_YES") && screen.contains("PID_HIDDEN"),
        "{screen}"
    );
    let mut l = conn(&s, None, "local");
    let screen = l.pty_screen_after(&cmd, 80, 24).to_string();
    assert!(
        screen.contains("TTY_YES") && screen.contains("PID_SEEN"),
        "{screen}"
    );
}

/// A token principal's children hold no capability, whatever the daemon
/// holds (run as root it holds them all, and Landlock and the filters do not
/// govern `reboot`, module loading or the network configuration): none to
/// use, in namespaces or not. Judged by an act that needs one
/// (`CAP_DAC_OVERRIDE`: reading a project file of mode 000) and, where the
/// child may read `/proc`, by its sets; the local user's child, which keeps
/// the daemon's, is the control.
#[test]
fn token_children_hold_no_capabilities() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    let locked = s.project.join("locked");
    std::fs::write(&locked, "locked-content-4c1\n").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let probe = "sh { cat locked; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status; true }";
    let mut l = conn(&s, None, "local");
    let local = reply(&mut l, probe);
    let privileged = local.contains("locked-content-4c1");
    let own = reply(&mut l, "path(\"locked\").read()");
    assert_eq!(privileged, own.contains("locked-content-4c1"), "{own}");
    let mut modes = vec![("agent:off", "off")];
    if have_tools("token_children_hold_no_capabilities", &["bwrap"]) {
        modes.push(("agent:ns", "ns"));
        modes.push(("agent:herm", "herm"));
    }
    for (principal, session) in modes {
        let mut k = conn(&s, Some(principal), session);
        let r = reply(&mut k, probe);
        assert!(
            !r.contains("locked-content-4c1"),
            "{principal} kept a capability: {r}"
        );
        // The evaluation thread's own builtins too.
        let r = reply(&mut k, "path(\"locked\").read()");
        assert!(!r.contains("locked-content-4c1"), "{principal}: {r}");
        for set in ["CapPrm", "CapEff", "CapAmb"] {
            if let Some(v) = r.split(&format!("{set}:")).nth(1) {
                let hex = v.trim_start_matches(['\\', 't', ' ']);
                assert!(
                    hex.starts_with("0000000000000000"),
                    "{principal} {set}: {r}"
                );
            }
        }
    }
    eprintln!(
        "control: the local user's child {} the file",
        if privileged { "read" } else { "could not read" }
    );
}

/// A token principal's command in namespaces ends when its task is
/// cancelled, as the local user's does (the confined evaluation thread may
/// not signal it itself: the broker that started it does), and nothing of
/// it is left running: judged by the task's end state and by the program's
/// processes, looked for by a marker in their command line.
#[test]
fn token_commands_in_namespaces_end_when_cancelled() {
    if !have_tools(
        "token_commands_in_namespaces_end_when_cancelled",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    for (principal, session) in [(None, "local"), (Some("agent:ns"), "ns")] {
        let mut c = conn(&s, principal, session);
        let marker = format!("31{}", std::process::id() % 1000);
        let r = c.call(
            "exec",
            json!({"src": format!("sh {{ sleep {marker}.5 & sleep {marker}.25 }} &")}),
        );
        let task = r["result"]["value"]["ref"]
            .as_str()
            .filter(|t| t.starts_with("task:"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no task: {r}"));
        // Wait until the program runs (its second sleep shows up).
        let running = |m: &str| !pids_running(&format!("sleep {m}")).is_empty();
        let started = std::time::Instant::now();
        while !running(&format!("{marker}.25")) {
            assert!(
                started.elapsed().as_secs() < 30,
                "{principal:?}: never ran: {r}"
            );
            std::thread::yield_now();
        }
        let r = c.call("task.cancel", json!({"task": task}));
        assert!(r.get("error").is_none(), "{r}");
        let r = c.call("task.await", json!({"task": task, "timeout_ms": 30000}));
        assert_eq!(
            r["result"]["state"],
            json!("cancelled"),
            "{principal:?}: {r}"
        );
        assert!(
            !running(&format!("{marker}.25")),
            "{principal:?}: still runs"
        );
        assert!(
            !running(&format!("{marker}.5")),
            "{principal:?}: its child still runs"
        );
    }
}

/// Nothing a token principal's command started in namespaces outlives a
/// daemon killed by `SIGKILL`: each process of the chain dies with its
/// parent, and the command's pid namespace with its first process. Judged
/// by the program's processes, found by a marker and awaited by pidfd.
#[test]
fn token_children_in_namespaces_die_with_a_killed_daemon() {
    if !have_tools(
        "token_children_in_namespaces_die_with_a_killed_daemon",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut c = conn(&s, Some("agent:ns"), "ns");
    let marker = format!("32{}", std::process::id() % 1000);
    let r = c.call(
        "exec",
        json!({"src": format!("sh {{ sleep {marker}.5 & sleep {marker}.25 }} &")}),
    );
    assert!(r.get("error").is_none(), "{r}");
    let pids = sleeps_running(&marker, &[".5", ".25"]);
    let fds: Vec<_> = pids
        .iter()
        .filter_map(|p| rustix::process::Pid::from_raw(*p))
        .filter_map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
        .collect();
    assert_eq!(fds.len(), 2, "{pids:?}");
    kill_pid(s.d.pid());
    for fd in &fds {
        let mut pfd = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let t = rustix::event::Timespec {
            tv_sec: 30,
            tv_nsec: 0,
        };
        let n = rustix::event::poll(&mut pfd, Some(&t)).unwrap_or(0);
        assert_eq!(n, 1, "a child of the command outlived the daemon: {pids:?}");
    }
}

#[test]
fn token_children_have_a_temporary_directory_when_their_project_is_in_tmp() {
    if !have_tools("token_children_have_a_temporary_directory", &["bwrap"]) {
        return;
    }
    // The project is under /tmp (the test root), so /tmp itself is not the
    // child's to write: a scratch directory on the private /tmp is, named
    // by TMPDIR, as `mktemp` and compilers expect.
    let s = setup();
    assert!(s.project.starts_with("/tmp"), "{}", s.project.display());
    let src = "sh { f=$(mktemp) && echo scratch-ok > $f && cat $f && echo MADE=$f; echo x > /tmp/escape-41 || echo TMP_REFUSED }";
    let mut k = conn(&s, Some("agent:ns"), "ns");
    let r = reply(&mut k, src);
    assert!(r.contains("scratch-ok"), "{r}");
    assert!(r.contains("TMP_REFUSED"), "{r}");
    let made = r
        .split("MADE=")
        .nth(1)
        .and_then(|t| {
            t.split(|c: char| c.is_whitespace() || c == '\\' || c == '"')
                .next()
        })
        .unwrap_or_else(|| panic!("no path: {r}"));
    assert!(made.starts_with("/tmp/.shoal-tmp/"), "{r}");
    // Private to the namespace: nothing on the real disk.
    assert!(!std::path::Path::new(made).exists(), "{made} on the host");
    assert!(!std::path::Path::new("/tmp/escape-41").exists());
    // The local user's mktemp is the real /tmp's, as before.
    let mut l = conn(&s, None, "local");
    let r = reply(
        &mut l,
        "sh { f=$(mktemp) && echo local-ok > $f && cat $f && rm $f }",
    );
    assert!(r.contains("local-ok"), "{r}");
}

/// The program's stdout of `src` (it must run).
fn stdout(c: &mut Conn, src: &str) -> String {
    let r = c.call("exec", json!({"src": src}));
    r["result"]["value"]["out"]["v"]
        .as_str()
        .unwrap_or_else(|| panic!("{src}: {r}"))
        .to_string()
}

#[test]
fn a_tokens_private_tmp_holds_at_most_token_tmp() {
    if !have_tools("a_tokens_private_tmp_holds_at_most_token_tmp", &["bwrap"]) {
        return;
    }
    // 8 MiB. The root is under /tmp, so the child's own temporary directory is the
    // scratch directory of the private /tmp (`TMPDIR`): the same tmpfs.
    let s = setup_with("[limits]\ntoken_tmp = 8388608\n");
    let mut k = conn(&s, Some("agent:ns"), "tmp");
    let write = |c: &mut Conn, name: &str, bytes: u64| {
        stdout(
            c,
            &format!(
                "sh {{ head -c {bytes} /dev/zero > ${{TMPDIR:-/tmp}}/{name} 2>/dev/null; echo rc=$? }}"
            ),
        )
    };
    // Control: 1 MiB fits.
    let o = write(&mut k, "small", 1 << 20);
    assert!(o.ends_with("rc=0"), "a 1 MiB write: {o}");
    // 16 MiB does not: the write fails, and what is left stays under the limit.
    let o = write(&mut k, "big", 16 << 20);
    assert!(
        !o.ends_with("rc=0"),
        "a 16 MiB write into an 8 MiB /tmp: {o}"
    );
    let o = stdout(
        &mut k,
        "sh { stat -c size=%s ${TMPDIR:-/tmp}/big; du -k ${TMPDIR:-/tmp}/big }",
    );
    let size: u64 = o
        .split("size=")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size: {o}"));
    assert!(size <= 8 << 20, "/tmp/big holds {size} bytes: {o}");
    let kib: u64 = o
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no du: {o}"));
    assert!(kib <= 8 << 10, "/tmp/big takes {kib} KiB: {o}");
}

/// The `sleep MARKER<tail>` programs running, one for each tail (not the
/// shell or the confinement step, whose command lines hold the marker too),
/// once they all run.
pub(crate) fn sleeps_running(marker: &str, tails: &[&str]) -> Vec<i32> {
    eventually(
        "the programs run",
        std::time::Duration::from_secs(30),
        || {
            let p: Vec<i32> = tails
                .iter()
                .flat_map(|t| pids_running(&format!("sleep {marker}{t}")))
                .filter(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| c.starts_with(b"sleep\0"))
                })
                .collect();
            (p.len() == tails.len()).then_some(p)
        },
    )
}
