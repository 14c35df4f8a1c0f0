//! Tests of the command layer through `Session::exec`: every builtin head of
//! docs/rules.md §9 (table-driven, each case in a fresh directory with a
//! small fixture), and process semantics (docs/rules.md §8): exit status, signal
//! names, stderr, huge output that spills and stays usable, stdin, `.feed`,
//! interrupts that kill the whole process group, and no zombies or leaked
//! fds after many runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::session::{ExecError, Position, Session, SessionOptions};
use shoal_value::{render, ErrorCode, Value};

/// A session whose cwd is `dir` and whose HOME is `dir/../home`.
fn session_in(dir: &Path) -> Session {
    let home = dir.parent().unwrap_or(dir).join("home");
    let _ = std::fs::create_dir_all(&home);
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k != "HOME" && k != "OLDPWD")
        .collect();
    env.push(("HOME".into(), home.to_string_lossy().into_owned()));
    Session::new(SessionOptions {
        cwd: dir.to_path_buf(),
        env,
        ..Default::default()
    })
}

/// Fixture: `a.txt` ("alpha\n"), `lines.txt` (l1..l12), dir `d/` with
/// `d/inner.txt`, empty dir `e/`, hidden `.hidden`.
fn fixture(dir: &Path) {
    std::fs::write(dir.join("a.txt"), "alpha\n").expect("fixture");
    let lines: String = (1..=12).map(|i| format!("l{i}\n")).collect();
    std::fs::write(dir.join("lines.txt"), lines).expect("fixture");
    std::fs::create_dir(dir.join("d")).expect("fixture");
    std::fs::write(dir.join("d/inner.txt"), "in").expect("fixture");
    std::fs::create_dir(dir.join("e")).expect("fixture");
    std::fs::write(dir.join(".hidden"), "h").expect("fixture");
}

/// A temp root (removed on drop) with the working dir `w` inside it.
fn case_dir() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("w");
    std::fs::create_dir(&dir).expect("case dir");
    (root, dir)
}

fn show(r: Result<Value, ExecError>) -> String {
    match r {
        Ok(v) => render::inline(&v),
        Err(ExecError::Parse(_)) => "!parse".into(),
        Err(ExecError::Raised(e)) => format!("!{}", e.code),
    }
}

/// Run each `(src, want)` in a fresh fixture directory; `want` is the inline
/// render, `!code` for a raised error. `{dir}` in `want` is the case dir,
/// `{base}` its last component (`{dir}` is also replaced in `src`).
fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let (_root, dir) = case_dir();
        fixture(&dir);
        let mut s = session_in(&dir);
        let src = src.replace("{dir}", &dir.to_string_lossy());
        let got = show(s.exec(&src, Position::Stmt));
        let base = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let want = want
            .replace("{dir}", &dir.to_string_lossy())
            .replace("{base}", &base);
        if got != want {
            failures.push(format!("{src:?}\n    want {want}\n    got  {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn builtin_echo() {
    check(&[
        ("(echo a b).out", "\"a b\""),
        ("(echo hi).stdout.str()", "\"hi\\n\""),
        ("(echo (null) x).out", "\" x\""),
        ("(echo 1 2.5 true).out", "\"1 2.5 true\""),
        ("(echo -n hi).out", "\"hi\""),
        ("(echo).out", "\"\""),
        ("echo hi", "outcome(status: 0, ok: true)"),
        ("[(echo x).pid, (echo x).cmd]", "[0, \"echo\"]"),
        ("echo hi > o.txt\n(cat o.txt).out.str()", "\"hi\\n\""),
        (
            "echo a >> o.txt\necho b >> o.txt\n(cat o.txt).out.str()",
            "\"a\\nb\\n\"",
        ),
    ]);
}

#[test]
fn builtin_ls() {
    check(&[
        ("(ls).len()", "4"),
        ("(ls -a).len()", "5"),
        ("(ls --all).len()", "5"),
        (
            "(ls).map(.name)",
            "[\"a.txt\", \"d\", \"e\", \"lines.txt\"]",
        ),
        ("(ls).where(.type == \"dir\").len()", "2"),
        ("(ls d).out.first().name", "\"inner.txt\""),
        ("(ls e).len()", "0"),
        ("(ls a.txt).out.first().size", "6b"),
        ("(ls a.txt).out.first().type", "\"file\""),
        ("(ls).first().path == path(\"{dir}/a.txt\")", "true"),
        ("(ls nope)", "!custom"),
    ]);
}

#[test]
fn builtin_cd_pwd_and_dir_stack() {
    check(&[
        ("pwd.name()", "\"{base}\""),
        ("cd d\npwd.name()", "\"d\""),
        ("cd d\ncd ..\ncd -\npwd.name()", "\"d\""),
        ("cd d\ncd -\n(pwd) == path(\"{dir}\")", "true"),
        ("cd -", "!custom"),
        ("cd nope", "!arg_error"),
        ("cd a.txt", "!arg_error"),
        ("cd\npwd.name()", "\"home\""),
        ("cd d\n(sh { pwd }).out.str().ends_with(\"/d\")", "true"),
        ("dirs.len()", "1"),
        ("pushd d\ndirs.len()", "2"),
        ("pushd d\npwd.name()", "\"d\""),
        ("pushd d\npopd\n(pwd) == path(\"{dir}\")", "true"),
        (
            "pushd d\npushd ../e\ndirs.map(p => p.name())",
            "[\"e\", \"d\", \"{base}\"]",
        ),
        ("pushd d\npushd\n(pwd) == path(\"{dir}\")", "true"),
        ("popd", "!custom"),
        ("pushd", "!custom"),
        ("pushd nope", "!arg_error"),
    ]);
}

#[test]
fn builtin_file_ops() {
    check(&[
        // mkdir
        ("(mkdir x).len()", "1"),
        ("mkdir x\npath(\"x\").is_dir()", "true"),
        ("mkdir x/y/z", "!custom"),
        ("mkdir -p x/y/z\npath(\"x/y/z\").is_dir()", "true"),
        ("mkdir --parents x/y\npath(\"x/y\").is_dir()", "true"),
        ("mkdir d", "!custom"),
        ("mkdir", "!arg_error"),
        // touch
        ("(touch n.txt m.txt).len()", "2"),
        ("touch n.txt\n(stat n.txt).size", "0b"),
        ("touch a.txt\n(cat a.txt).out.str()", "\"alpha\\n\""),
        // cp
        ("cp a.txt c.txt\n(cat c.txt).out.str()", "\"alpha\\n\""),
        ("cp a.txt d\n(cat d/a.txt).out.str()", "\"alpha\\n\""),
        ("cp d x", "!arg_error"),
        ("cp -r d x\n(cat x/inner.txt).out.str()", "\"in\""),
        ("cp a.txt", "!arg_error"),
        ("cp nope x", "!custom"),
        ("(cp a.txt lines.txt e).len()", "2"),
        ("cp a.txt lines.txt x.txt", "!arg_error"),
        ("cp a.txt lines.txt a.txt", "!arg_error"),
        // mv
        (
            "mv a.txt z.txt\n[path(\"a.txt\").exists(), path(\"z.txt\").exists()]",
            "[false, true]",
        ),
        ("mv a.txt a.txt\npath(\"a.txt\").exists()", "true"),
        (
            "mv a.txt lines.txt\n(cat lines.txt).out.str()",
            "\"alpha\\n\"",
        ),
        ("mv a.txt e\npath(\"e/a.txt\").exists()", "true"),
        ("mv nope x", "!custom"),
        // rm
        ("rm a.txt\npath(\"a.txt\").exists()", "false"),
        ("(rm a.txt).out[0].trash.exists()", "true"),
        ("(rm a.txt).out[0].path.name()", "\"a.txt\""),
        ("rm --permanent a.txt\npath(\"a.txt\").exists()", "false"),
        ("(rm --permanent a.txt).len()", "1"),
        ("rm --permanent d", "!arg_error"),
        ("rm --permanent -r d\npath(\"d\").exists()", "false"),
        ("rm -r d\npath(\"d\").exists()", "false"),
        ("rm nope", "!custom"),
        ("rm", "!no_matches"),
        ("rm *.zzz", "!no_matches"),
        // ln
        ("(ln -s a.txt l).symbolic", "true"),
        ("ln -s a.txt l\n(cat l).out.str()", "\"alpha\\n\""),
        ("ln a.txt h\n(ln a.txt h2).symbolic", "false"),
        ("ln a.txt", "!arg_error"),
        ("ln a b c", "!arg_error"),
    ]);
    // `rm` without `--permanent` moved fixtures into this process's trash;
    // no other lib test uses it.
    if let Ok(t) = crate::shell::builtins::trash_dir() {
        let _ = std::fs::remove_dir_all(t);
    }
}

#[test]
fn builtin_cat_stat_head() {
    check(&[
        ("(cat a.txt).out.str()", "\"alpha\\n\""),
        ("(cat a.txt).out.type_name()", "\"bytes\""),
        ("(cat a.txt d/inner.txt).out.str()", "\"alpha\\nin\""),
        ("(cat a.txt).stdout.len()", "6"),
        ("cat nope", "!custom"),
        ("cat", "!arg_error"),
        ("(stat a.txt).size", "6b"),
        ("(stat a.txt).type", "\"file\""),
        ("(stat d).type", "\"dir\""),
        ("(stat a.txt).name", "\"a.txt\""),
        ("(stat a.txt d).len()", "2"),
        ("stat", "!arg_error"),
        ("stat nope", "!custom"),
        ("(head lines.txt).lines().len()", "10"),
        ("(head lines.txt 2).out", "\"l1\\nl2\""),
        ("(head lines.txt \"3\").lines().len()", "3"),
        ("head lines.txt x", "!arg_error"),
        ("head lines.txt ([1])", "!type_error"),
        ("head nope", "!custom"),
    ]);
}

#[test]
fn builtin_env_sleep_which_exit() {
    check(&[
        ("(env).out.type_name()", "\"record\""),
        ("(env HOME).out.ends_with(\"/home\")", "true"),
        ("(env SHOAL_SURELY_UNSET_ZZ).out", "null"),
        ("env A B", "!arg_error"),
        (
            "env.SHOAL_T = \"v\"\n(sh { printf %s \"$SHOAL_T\" }).out",
            "\"v\"",
        ),
        ("(sleep 0).out", "null"),
        ("(sleep 10ms).ok", "true"),
        ("sleep", "!arg_error"),
        ("sleep 1 2", "!arg_error"),
        ("sleep (-1)", "!type_error"),
        ("sleep ([1])", "!type_error"),
        ("(which sh).out.scope", "\"ambient\""),
        ("(which sh).out.path.name()", "\"sh\""),
        ("(which zzz-not-a-program-q).out", "null"),
        ("(which -a sh).out.type_name()", "\"table\""),
        ("which", "!arg_error"),
        ("which a b", "!arg_error"),
        ("exit\n1", "null"),
        ("let x = 1\nexit 3\nx", "null"),
        ("exit abc", "!arg_error"),
        ("wich sh", "!not_found"),
    ]);
}

#[test]
fn process_status_signals_stderr() {
    check(&[
        ("(sh { exit 0 }).status", "0"),
        ("(sh { exit 1 }).ok", "false"),
        ("(sh { exit 7 }).status", "7"),
        ("(sh { exit 255 }).status", "255"),
        ("(^true).ok", "true"),
        ("(^false).status", "1"),
        ("(sh { kill -SEGV $$ }).signal", "\"SIGSEGV\""),
        ("(sh { kill -KILL $$ }).signal", "\"SIGKILL\""),
        ("(sh { kill -TERM $$ }).signal", "\"SIGTERM\""),
        ("(sh { kill -TERM $$ }).status", "null"),
        ("(sh { kill -TERM $$ }).ok", "false"),
        ("(sh { echo err 1>&2 }).stderr.str()", "\"err\\n\""),
        ("(sh { echo err 1>&2 }).err.str()", "\"err\\n\""),
        ("(sh { echo out; echo err 1>&2 }).out", "\"out\""),
        ("(sh { echo x; exit 2 }).out", "!cmd_failed"),
        ("(sh { echo x; exit 2 }).stdout.str()", "\"x\\n\""),
        ("sh { exit 7 }", "!cmd_failed"),
        ("^false", "!cmd_failed"),
        ("(sh { printf '{\"a\": [1, 2]}' }).out.a", "[1, 2]"),
        ("(sh { printf hi }).pid > 0", "true"),
        ("zzzz-no-such-command-q", "!not_found"),
    ]);
}

fn raised(r: Result<Value, ExecError>) -> shoal_value::ShoalError {
    match r {
        Err(ExecError::Raised(e)) => e,
        other => panic!("expected a raised error, got {other:?}"),
    }
}

#[test]
fn statement_failure_carries_status_and_stderr() {
    let (_root, dir) = case_dir();
    let mut s = session_in(&dir);
    let e = raised(s.exec("sh { echo boom 1>&2; exit 7 }", Position::Stmt));
    assert_eq!(e.code, ErrorCode::CmdFailed);
    assert_eq!(e.status, Some(7));
    assert_eq!(e.stderr.as_deref(), Some(&b"boom\n"[..]));
    assert!(e.msg.contains("exited with status 7"), "{}", e.msg);
    let e = raised(s.exec("sh { kill -SEGV $$ }", Position::Stmt));
    assert_eq!(e.status, None);
    assert!(e.msg.contains("died from SIGSEGV"), "{}", e.msg);
    // Value position: the failed outcome.
    let v = s.exec("^false", Position::Value).expect("outcome");
    assert_eq!(render::inline(&v), "outcome(status: 1, ok: false)");
}

#[test]
fn stdin_is_closed_unless_fed() {
    check(&[
        // Would block forever if stdin were inherited.
        ("(sh { cat }).out", "\"\""),
        ("(sh { read x; echo \"got:$x\" }).out", "\"got:\""),
        ("\"abc\".feed(cat).out", "\"abc\""),
        ("\"b\\na\".feed(sort).out", "\"a\\nb\""),
        ("[\"x\", \"y\"].feed(cat).out", "\"x\\ny\""),
        ("[1, 2].feed(cat).out", "[1, 2]"),
        ("{a: 1}.feed(cat).out.a", "1"),
        ("42.feed(cat).out", "\"42\""),
        ("\"q\".feed(sh { tr q r }).out", "\"r\""),
        ("cat.feed(\"z\").out", "\"z\""),
        ("(sh { printf 'a\\nb' }).feed(sort -r).out", "\"b\\na\""),
        ("(cat a.txt).out.feed(cat).out", "\"alpha\""),
        ("path(\"a.txt\").feed(cat)", "!type_error"),
        ("re\"x\".feed(cat)", "!feed_error"),
        ("(sort < a.txt).out", "\"alpha\""),
        ("(sort < nope.txt)", "!custom"),
        ("\"x\".feed(sh { exit 3 }).status", "3"),
        // A child that does not read its input must not hang the feeder.
        (
            "range(0, 200000).map(x => \"line\").feed(sh { exit 0 }).ok",
            "true",
        ),
    ]);
}

const BIG: usize = 20 << 20;

/// The spill file behind a value's stdout, if it spilled.
fn spill_of(v: &Value) -> Option<PathBuf> {
    match v {
        Value::Outcome(o) => o.stdout.spill_path().map(Path::to_path_buf),
        Value::Bytes(b) => b.spill_path().map(Path::to_path_buf),
        _ => None,
    }
}

#[test]
fn huge_output_spills_and_stays_usable() {
    let (_root, dir) = case_dir();
    let mut s = session_in(&dir);
    let big = BIG;
    let n_lines = 3_000_000; // `seq` output: about 20.9 MB
                             // The value itself: spilled, file private, removed on the last drop.
    let v = s
        .exec(
            &format!("sh {{ head -c {big} /dev/zero }}"),
            Position::Value,
        )
        .expect("outcome");
    let path = spill_of(&v).expect("stdout spilled");
    assert!(path.exists());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(path.parent().expect("dir"))
            .expect("spill dir")
            .mode()
            & 0o777,
        0o700
    );
    let Value::Outcome(o) = &v else {
        panic!("not an outcome")
    };
    assert_eq!(o.stdout.len(), big);
    drop(v);
    assert!(!path.exists(), "spill file outlived its outcome");

    let cases: Vec<(String, String)> = vec![
        (
            format!("let o = (sh {{ head -c {big} /dev/zero }})\no.stdout.len()"),
            big.to_string(),
        ),
        (
            format!("let o = (sh {{ head -c {big} /dev/zero }})\n[o.ok, o.status]"),
            "[true, 0]".into(),
        ),
        (
            format!("(sh {{ seq 1 {n_lines} }}).lines().len()"),
            n_lines.to_string(),
        ),
        (
            format!("(sh {{ seq 1 {n_lines} }}).out.lines().last()"),
            format!("\"{n_lines}\""),
        ),
        (
            format!("(sh {{ seq 1 {n_lines} }}).stdout.stream().take(2).collect()"),
            "[\"1\", \"2\"]".into(),
        ),
        (
            format!("(sh {{ seq 1 {n_lines} }}).stdout.stream().count()"),
            n_lines.to_string(),
        ),
        (
            format!("(sh {{ seq 1 {n_lines} }}).out.len() > {big}"),
            "true".into(),
        ),
        (
            format!("(sh {{ head -c {big} /dev/zero }}).feed(wc -c).out.trim()"),
            format!("\"{big}\""),
        ),
        (
            format!("(sh {{ head -c {big} /dev/zero }}).stdout.feed(wc -c).out.trim()"),
            format!("\"{big}\""),
        ),
        (
            format!("seq 1 {n_lines} > big.txt\n(sh {{ wc -c < big.txt }}).out.trim()"),
            "\"22888896\"".into(),
        ),
        (
            format!(
                "(sh {{ head -c {big} /dev/zero }}).stdout.save(\"copy.bin\")\n\
                 (sh {{ wc -c < copy.bin }}).out.trim()"
            ),
            format!("\"{big}\""),
        ),
        (
            format!("(sh {{ head -c {big} /dev/zero 1>&2 }}).stderr.len()"),
            big.to_string(),
        ),
        (
            format!(
                "let a = (sh {{ head -c {big} /dev/zero }})\n\
                 let b = (sh {{ head -c {big} /dev/zero }})\na.stdout == b.stdout"
            ),
            "true".into(),
        ),
    ];
    for (src, want) in &cases {
        let got = show(s.exec(src, Position::Stmt));
        assert_eq!(&got, want, "{src}");
    }
    // A failed command with huge stderr: the error carries a bounded copy.
    let e = raised(s.exec(
        &format!("sh {{ head -c {big} /dev/zero 1>&2; exit 3 }}"),
        Position::Stmt,
    ));
    assert_eq!(e.status, Some(3));
    let st = e.stderr.expect("stderr");
    assert!(st.len() < big && st.len() >= shoal_value::methods::ERROR_STDERR_LIMIT);
    drop(s);
}

#[test]
fn interrupt_kills_the_process_group() {
    // A grandchild in the background (which ignores SIGINT: an async job of
    // a non-interactive shell), with the leader still running (foreground
    // sleep) or already gone (the grandchild alone holds the pipes).
    for src in [
        "sh { sleep 60 & echo $! > gc.pid; sleep 60 }",
        "sh { sleep 60 & echo $! > gc.pid }",
    ] {
        let (_root, dir) = case_dir();
        let mut s = session_in(&dir);
        let pidfile = dir.join("gc.pid");
        let intr = s.interrupter();
        let pf = pidfile.clone();
        let t = std::thread::spawn(move || {
            // Await the event "the grandchild exists" (its pid was written).
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if std::fs::read_to_string(&pf).is_ok_and(|s| s.trim().parse::<u32>().is_ok()) {
                    break;
                }
                std::thread::yield_now();
            }
            intr.interrupt();
        });
        let start = Instant::now();
        let e = raised(s.exec(src, Position::Stmt));
        let _ = t.join();
        assert_eq!(e.code, ErrorCode::Cancelled, "{src}");
        assert!(start.elapsed() < Duration::from_secs(15), "{src}");
        let gc: u32 = std::fs::read_to_string(&pidfile)
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid");
        // The grandchild is dead (gone, or a zombie waiting for its reaper).
        let deadline = Instant::now() + Duration::from_secs(5);
        let dead = loop {
            let state = std::fs::read_to_string(format!("/proc/{gc}/stat"))
                .ok()
                .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim().chars().next()))
                .flatten();
            match state {
                None | Some('Z') | Some('X') => break true,
                _ if Instant::now() > deadline => break false,
                _ => std::thread::yield_now(),
            }
        };
        assert!(dead, "{src}: grandchild {gc} survived the interrupt");
        // The session still works afterwards.
        assert_eq!(
            show(s.exec("(sh { printf ok }).out", Position::Stmt)),
            "\"ok\"",
            "{src}"
        );
    }
}

/// Many runs leave no zombie and no open fd. Runs in a child process of its
/// own (this test binary, filtered to this test) so that other tests running
/// in parallel cannot disturb the counts.
#[test]
fn many_runs_leave_no_zombie_and_no_fd() {
    const CHILD: &str = "SHOAL_TEST_LEAK_CHILD";
    if std::env::var_os(CHILD).is_some() {
        leak_check_body();
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "shell::tests::many_runs_leave_no_zombie_and_no_fd",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "leak check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run the check"
    );
}

fn leak_check_body() {
    use crate::shell::procstat::{open_fds, zombie_children};
    let (_root, dir) = case_dir();
    let mut s = session_in(&dir);
    // Warm-up (lazy statics, the spill dir).
    let _ = s.exec("sh { echo hi }", Position::Stmt);
    let _ = s.exec(
        "(sh { head -c 10000000 /dev/zero }).stdout.len()",
        Position::Value,
    );
    let before = open_fds().expect("fds");
    for i in 0..300 {
        let src = match i % 6 {
            0 => "sh { echo hi }",
            1 => "(sh { exit 3 }).status",
            2 => "\"x\".feed(cat).out",
            3 => "(sh { echo err 1>&2; exit 1 }).ok",
            4 => "(^true).ok",
            _ => "(sh { kill -TERM $$ }).signal",
        };
        s.exec(src, Position::Stmt).expect(src);
    }
    for _ in 0..3 {
        let v = s
            .exec(
                "(sh { head -c 10000000 /dev/zero }).stdout.len()",
                Position::Value,
            )
            .expect("spill");
        assert_eq!(render::inline(&v), "10000000");
    }
    let _ = s.exec("sh { exit 2 }", Position::Stmt);
    let after = open_fds().expect("fds");
    assert_eq!(after, before, "fd count changed: {before} -> {after}");
    assert_eq!(zombie_children(), 0, "zombie children left");
}
